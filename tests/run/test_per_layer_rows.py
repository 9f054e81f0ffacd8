#!/usr/bin/env python3
"""A Gemma 4 E model's per-layer embedding table is read by the row: `nsctl run` on the oracle's
hf/gemma4_e GGUF (per_layer_token_embd [n_layer * 64, 1024], four layer groups of 64 in one row
per token) with the whole model on disk (--ram-budget 0) must request from nsio, per decoded
token, exactly

    every 2-D weight matrix once (the tied token_embd among them, as the output head)
    + one row of token_embd + one row of per_layer_token_embd

as counted from the oracle's own tensor table (meta/*.json), not from our architecture table.
Reading the per-layer table whole (or one row per layer group) would add its size (1 MiB) or
(n_layer - 1) rows; reading no row of it would remove one. Also `nsctl plan` must count that
table as one row per decoded token. argv: NSCTL."""
import json
import os
import re
import subprocess
import sys

from run_testlib import fail, failures, require_model

NSCTL = sys.argv[1]
ORACLE = os.environ.get("NS_ORACLE_DIR", "../shared/oracle")
MODEL = os.path.join(ORACLE, "hf/gemma4_e/gguf/gemma4_e-f32.gguf")
META = os.path.join(ORACLE, "meta/hf__gemma4_e__gguf__gemma4_e-f32.json")
ROWS = ("token_embd.weight", "per_layer_token_embd.weight")

require_model(MODEL)
require_model(META)
with open(META, encoding="utf-8") as fh:
    tensors = json.load(fh)["tensors"]
matrices = sum(t["bytes"] for t in tensors if len(t["shape"]) >= 2 and t["name"] not in ROWS)
by_name = {t["name"]: t for t in tensors}
embd, ple = by_name[ROWS[0]], by_name[ROWS[1]]
ple_row = ple["bytes"] // ple["shape"][1]
want = matrices + embd["bytes"] + embd["bytes"] // embd["shape"][1] + ple_row

run = subprocess.run([NSCTL, "run", MODEL, "-p", "hello world", "-n", "6", "--temp", "0",
                      "--mem-budget", "2MB", "--ram-budget", "0", "--json"],
                     capture_output=True, text=True, timeout=300, check=False)
if run.returncode != 0:
    fail(f"nsctl run: exit {run.returncode}: {run.stderr[-2000:]}")
    sys.exit(1)
summary = json.loads(run.stdout)  # --json: the object alone on stdout
n_decode = summary["n_decode"]
got = summary["bytes_requested_decode"]
print(f"{n_decode} decoded tokens requested {got} bytes: {got / max(n_decode, 1):.1f} per token, "
      f"want {want} (matrices {matrices} + tied head {embd['bytes']} + one row of token_embd "
      f"+ one row of per_layer_token_embd {ple_row})")
if n_decode < 3 or got != n_decode * want:
    fail(f"per token {got / max(n_decode, 1):.1f} bytes requested, want {want} "
         f"(the per-layer table whole would be {want - ple_row + ple['bytes']})")

plan = subprocess.run([NSCTL, "plan", MODEL, "--mem-budget", "2MB", "--ram-budget", "0"],
                      capture_output=True, text=True, timeout=120, check=False)
m = re.search(r"per token:\s+(\d+) bytes", plan.stdout)
if plan.returncode != 0 or not m or int(m.group(1)) != want:
    fail(f"nsctl plan per token {m.group(1) if m else '?'}, want {want}: "
         f"{plan.stdout[-800:]}{plan.stderr[-400:]}")
else:
    print(f"nsctl plan at RAM 0 predicts {want} bytes per decoded token: the table by the row")
sys.exit(1 if failures else 0)
