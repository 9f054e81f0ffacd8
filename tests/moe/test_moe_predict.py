#!/usr/bin/env python3
"""MoE expert prediction (--moe-predict) changes only where bytes come from, never a value:

- for qwen3moe, gpt-oss and qwen35moe, under several --mem-budget / --block-rows settings
  (the smallest is the minimum arena, where predictions must silently do less), `nsctl run`
  decodes the same bytes and `nsctl logits` writes the same logits with prediction on and off;
- `run --json` (and `nsctl bench -o json`, null when off) carries predict_experts / predict_hits / predict_hit_rate: on, at least one
  predicted layer per decoded token, hits <= experts, rate = hits / experts in [0, 1] and well
  above chance (at least 0.75: 0.87-0.93 measured; a prediction from the wrong layer's router
  gave 0.41-0.55, chance is 0.25); off, all zero;
- with prediction on, bytes requested per decoded token grow by exactly the routers of layers
  1.. (read once more to predict), nothing else;
- nsrouter's expert hit statistics (--expert-stats, the real router's choices that nsplan
  plans from) are identical with prediction on and off: a prediction counted there, or sent
  as a real plan, would change them or the rate.
argv: NSCTL NSROUTER."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "run"))
from run_testlib import fail, failures, require_model  # noqa: E402

NSCTL = sys.argv[1]
NSROUTER = os.path.abspath(sys.argv[2])
ORACLE = os.environ.get("NS_ORACLE_DIR", "../shared/oracle")
# model, chance (n_expert_used / n_expert from the GGUF, see `nsctl info`), settings
MODELS = ["tiny-qwen3moe-Q4_K_M", "tiny-gpt-oss-MXFP4_MOE", "tiny-qwen35moe-Q4_K_M"]
SETTINGS = [("2MB", "16"), ("2MB", "0"), ("8MB", "32")]
TOKENS = "1,2,3,4,5,6,7,8,9,10,11,12"


def n_experts(model):
    """(n_expert_used, n_expert, bytes of the routers of layers 1.. (F32 in these files:
    n_expert x n_embd x 4 each)) from `nsctl info --json`."""
    out = subprocess.run([NSCTL, "info", model, "--json"], capture_output=True, text=True,
                         timeout=60, check=False)
    info = json.loads(out.stdout)
    hp = info["hparams"]
    routers = (info["block_count"] - 1) * hp["n_expert"] * hp["n_embd"] * 4
    return hp["n_expert_used"], hp["n_expert"], routers


def run(model, mem, rows, predict, stats=None, n_gen="12"):
    env = dict(os.environ)
    if stats:  # nsrouter --stats through a wrapper (as test_router_resident.c)
        wrap = stats + ".sh"
        with open(wrap, "w", encoding="utf-8") as fh:
            fh.write(f"#!/bin/sh\nexec '{NSROUTER}' \"$@\" --stats '{stats}'\n")
        os.chmod(wrap, 0o755)
        env["NS_NSROUTER"] = wrap
    cmd = [NSCTL, "run", model, "-p", "The quick brown fox", "-n", n_gen, "--temp", "0",
           "--mem-budget", mem, "--ram-budget", "0", "--block-rows", rows,
           "--moe-predict", predict, "--json"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False, env=env)
    if r.returncode != 0:
        fail(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr[-1500:]}")
        return None
    return json.loads(r.stdout.strip().splitlines()[-1])


def logits(model, mem, rows, predict, out):
    cmd = [NSCTL, "logits", model, "--tokens", TOKENS, "-o", out, "--mem-budget", mem,
           "--block-rows", rows, "--moe-predict", predict]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    if r.returncode != 0:
        fail(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr[-1500:]}")
        return None
    with open(out, "rb") as fh:
        return fh.read()


def bench(model, predict):
    """predict_hit_rate of each row of `nsctl bench -o json` (None: JSON null)."""
    cmd = [NSCTL, "bench", "-m", model, "--budgets", "2MB", "--ram-budgets", "0", "-p", "0",
           "-n", "4", "-r", "1", "--no-disk", "--moe-predict", predict, "-o", "json", "-q"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    if r.returncode != 0:
        fail(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr[-1500:]}")
        return []
    return [row["predict_hit_rate"] for row in json.loads(r.stdout)]


def main():
    with tempfile.TemporaryDirectory() as tmp:
        for name in MODELS:
            model = os.path.join(ORACLE, "tiny", name + ".gguf")
            require_model(model)
            used, total, routers = n_experts(model)
            chance = used / total
            for mem, rows in SETTINGS:
                tag = f"{name} --mem-budget {mem} --block-rows {rows}"
                on, off = run(model, mem, rows, "on"), run(model, mem, rows, "off")
                if on is None or off is None:
                    continue
                if on["content"] != off["content"] or on["n_gen"] != off["n_gen"]:
                    fail(f"{tag}: tokens differ with prediction on and off")
                e, h, rate = on["predict_experts"], on["predict_hits"], on["predict_hit_rate"]
                print(f"{tag}: prediction {h}/{e} = {rate:.3f} (chance {chance:.3f}), "
                      f"io {on.get('predict_io')}, cache hits {on['cache_hits']} vs "
                      f"{off['cache_hits']} off", flush=True)
                if e < on["n_decode"] or not 0 <= h <= e or abs(rate - h / max(e, 1)) > 1e-9:
                    fail(f"{tag}: predict_experts {e}, hits {h}, rate {rate}")
                # measured: 0.87-0.93 on these models; the router of the wrong layer (l
                # instead of l + 1) gave 0.41-0.55 (chance 0.25)
                if not 0.0 <= rate <= 1.0 or rate < max(chance + 0.25, 0.75):
                    fail(f"{tag}: hit rate {rate:.3f} too low (chance {chance:.3f})")
                # the cost, exactly: each predicted layer's router read once more per token
                extra = on["bytes_requested_decode"] - off["bytes_requested_decode"]
                if extra != on["n_decode"] * routers:
                    fail(f"{tag}: prediction requested {extra} more bytes over "
                         f"{on['n_decode']} tokens, want {routers} per token (the routers)")
                if off["predict_experts"] or off["predict_hits"] or off["predict_hit_rate"]:
                    fail(f"{tag}: prediction counted with --moe-predict off: {off}")
                lon = logits(model, mem, rows, "on", os.path.join(tmp, "on.f32"))
                loff = logits(model, mem, rows, "off", os.path.join(tmp, "off.f32"))
                if lon is None or loff is None or not lon or lon != loff:
                    fail(f"{tag}: logits differ with prediction on and off")
            # nsctl bench: the rate in its JSON rows, null with prediction off
            b_on, b_off = bench(model, "on"), bench(model, "off")
            print(f"{name}: bench predict_hit_rate on {b_on}, off {b_off}", flush=True)
            if not b_on or any(x is None or not 0.75 <= x <= 1.0 for x in b_on) or \
                    any(x is not None for x in b_off):
                fail(f"{name}: bench predict_hit_rate on {b_on}, off {b_off}")
            # the real router's statistics must not see predictions: every layer counts
            # the tokens its real decisions routed (nsrouter may miss the first messages of
            # a run while its SUB connects, so a later layer may count the prompt's chunk
            # that an earlier one missed);
            # predictions of layers >= 1 counted there would about double those layers
            stats = os.path.join(tmp, name + ".stats")
            long = run(model, "2MB", "16", "on", stats, n_gen="40")
            if long:
                # predictions travel as their own class (NS_REQ_PREDICT): nsio read some
                # (here, 40 tokens, nsrouter has long subscribed: short runs may end before
                # its SUB connects); sent as the real plan's PREFETCHes, none would count
                pio = long.get("predict_io") or {}
                if not pio.get("reads"):
                    fail(f"{name}: no predicted window read as a prediction: {pio}")
                toks = {}
                with open(stats, encoding="utf-8") as fh:
                    for line in fh:
                        w = line.split()
                        if w and w[0] == "tokens":
                            toks[int(w[1])] = int(w[2])
                print(f"{name}: nsrouter's tokens per layer {toks}", flush=True)
                slack = max(8, long.get("n_prompt") or 0)  # the prompt's chunk, missed
                if len(toks) < 2 or toks[0] < 15 or max(toks.values()) > toks[0] + slack:
                    fail(f"{name}: nsrouter's statistics count predictions: {toks}")
    if failures:
        print(f"{len(failures)} failure(s)")
        sys.exit(1)
    print("ok")


main()
