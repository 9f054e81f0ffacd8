#!/usr/bin/env python3
"""nsctl bench end to end on a small generated model: md, json and csv outputs carry
llama-bench's columns and ours, every sample is a positive rate, the sweep yields one row per
configuration and test (an arena sweep, a lookahead sweep, a RAM sweep run under
each of its budgets), --draft's speculative rows and columns, and bad usage exits 2 with one
line. No timing thresholds.
argv: NSCTL. Exit 0 pass, 1 fail, 77 skip."""
import csv, io, json, os, subprocess, sys, tempfile

nsctl = sys.argv[1]
fails = 0


def check(cond, msg):
    global fails
    if not cond:
        print("FAIL:", msg, file=sys.stderr)
        fails += 1


def run(*args):
    return subprocess.run([nsctl, *args], capture_output=True, text=True, timeout=600)


build = os.environ.get("NS_BUILD_ROOT", ".")
with tempfile.TemporaryDirectory(dir=build) as d:
    model = os.path.join(d, "demo.gguf")
    r = run("mkmodel", "--preset", "demo", "--layers", "2", "-o", model)
    if r.returncode:
        print(r.stderr, file=sys.stderr)
        sys.exit(1)
    common = ["-p", "16", "-n", "4", "-r", "2", "--threads", "1", "--disk-repeats", "1"]

    # --no-run-ahead: with it, the reads nsio makes ahead for the next token can complete
    # before the measured window (device bytes per token then dip below the requested ones)
    r = run("bench", model, *common, "--budgets", "4MB,8MB", "-o", "json", "--no-run-ahead")
    check(r.returncode == 0, "json run: " + r.stderr[-400:])
    if r.returncode == 0:
        rows = json.loads(r.stdout)
        check(len(rows) == 4, "2 budgets x (pp, tg) = 4 rows, got %d" % len(rows))
        tests = sorted((x["mem_budget"], x["test"]) for x in rows)
        check(tests == [(4 << 20, "pp16"), (4 << 20, "tg4"), (8 << 20, "pp16"), (8 << 20, "tg4")],
              "rows %s" % tests)
        for x in rows:
            check(len(x["samples_ts"]) == 2 and all(v > 0 for v in x["samples_ts"]),
                  "samples %s" % x["samples_ts"])
            check(abs(x["avg_ts"] - sum(x["samples_ts"]) / 2) < 1e-6 * x["avg_ts"], "avg_ts")
            check(x["model_type"].startswith("llama ") and "Q4_K - Medium" in x["model_type"],
                  x["model_type"])
            check(x["disk_bps"] is None or x["disk_bps"] > 0, "disk_bps")
        tg = [x for x in rows if x["n_gen"]]
        for x in tg:
            # the bytes requested per decoded token are what `nsctl plan` predicts under the
            # same budgets (no RAM cache: --ram-budget 0), exactly
            p = run("plan", model, "--mem-budget", str(x["mem_budget"]), "--ram-budget", "0",
                    "--json")
            check(p.returncode == 0, "nsctl plan: " + p.stderr[-300:])
            if p.returncode == 0:
                want = json.loads(p.stdout)["per_token"]["bytes"]
                check(x["plan_bytes_per_token"] == want and x["req_bytes_per_token"] == want,
                      "requested %s / bench's plan %s B per token, nsctl plan predicts %d"
                      % (x["req_bytes_per_token"], x["plan_bytes_per_token"], want))
                check(x["bytes_per_token"] >= want, "device bytes below requested")
            # every weight byte streams once per decoded token (nothing cached)
            check(x["bytes_per_token"] and x["bytes_per_token"] > 0, "bytes_per_token")
            if x["disk_bps"]:
                check(abs(x["roofline_ts"] - x["disk_bps"] / x["bytes_per_token"])
                      < 1e-6 * x["roofline_ts"], "roofline = disk / bytes")
                check(abs(x["roofline_ratio"] - x["avg_ts"] / x["roofline_ts"]) < 1e-6, "ratio")
        check("repeat 2/2" in r.stderr, "progress lines on stderr")
        check("load" in r.stderr and "warm-up" in r.stderr, "load/warm-up timed apart")

    r = run("bench", model, *common, "-o", "md", "--lookahead", "1,2")
    check(r.returncode == 0, "md run: " + r.stderr[-400:])
    lines = r.stdout.splitlines()
    check(len(lines) == 2 + 4, "md: header, rule, 4 rows; got %d lines" % len(lines))
    if lines:
        head = [c.strip() for c in lines[0].strip("|").split("|")]
        for col in ("model", "size", "params", "backend", "test", "t/s", "GB/tok", "req GB/tok",
                    "stall ms/tok", "arena peak", "hit %", "roofline t/s", "ratio", "lookahead"):
            check(col in head, "md column %s" % col)
        check(all(" ± " in l for l in lines[2:]), "mean ± sd")

    # a RAM sweep: one row per RAM budget, each run under its own (the planner's bytes per
    # token under that budget, and fewer read per token with the RAM tier than without)
    r = run("bench", model, "-p", "4", "-n", "4", "-r", "1", "--threads", "1", "--no-disk",
            "--budgets", "4MB", "--ram-budgets", "0,2MB", "-o", "json")
    check(r.returncode == 0, "ram sweep: " + r.stderr[-400:])
    if r.returncode == 0:
        tg = {x["ram_budget"]: x for x in json.loads(r.stdout) if x["n_gen"]}
        check(sorted(tg) == [0, 2 << 20], "ram sweep rows %s" % sorted(tg))
        if sorted(tg) == [0, 2 << 20]:
            for ram, x in tg.items():
                p = run("plan", model, "--mem-budget", "4MB", "--ram-budget", str(ram),
                        "--json")
                want = json.loads(p.stdout)["per_token"]["bytes"] if p.returncode == 0 else -1
                check(x["req_bytes_per_token"] == want, "ram %d: requested %s B per token, "
                      "nsctl plan predicts %d" % (ram, x["req_bytes_per_token"], want))
            check(tg[2 << 20]["req_bytes_per_token"] < tg[0]["req_bytes_per_token"],
                  "the RAM tier read nothing less per token")

    r = run("bench", model, *common, "-o", "csv", "--no-disk")
    check(r.returncode == 0, "csv run: " + r.stderr[-400:])
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    check(len(rows) == 2, "csv rows %d" % len(rows))
    check(all(x["roofline_ts"] == "" for x in rows), "--no-disk: no roofline")

    # -d: one tg row per depth, labelled as llama-bench labels them, its n_depth in the json;
    # the KV cache types run too (f16 K, q8_0 V)
    r = run("bench", model, "-p", "8", "-n", "3", "-r", "1", "--threads", "1", "--no-disk",
            "-d", "0,20", "-c", "64", "-ctk", "f16", "-ctv", "q8_0", "-o", "json")
    check(r.returncode == 0, "-d run: " + r.stderr[-400:])
    if r.returncode == 0:
        rows = json.loads(r.stdout)
        got = [(x["test"], x["n_depth"]) for x in rows]
        check(got == [("pp8", 0), ("tg3", 0), ("tg3 @ d20", 20)], "-d rows %s" % got)
        check(all(v > 0 for x in rows for v in x["samples_ts"]), "-d samples")

    # --draft: one greedy tg row per drafter and depth, "none" (the one-token decode) first
    # whatever its place in the list, the drafter's columns beside t/s; every drafted run gave
    # the one-token decode's tokens (bench fails otherwise). oracle:1 drafts the target's own
    # tokens (all kept: fewer passes and fewer bytes per generated token), oracle:0 only wrong
    # ones (none kept: one pass per token)
    r = run("bench", model, "-p", "0", "-n", "12", "-r", "1", "--threads", "1", "--no-disk",
            "--budgets", "4MB", "-d", "0,4", "-c", "64", "--draft", "oracle:1,none,oracle:0",
            "--draft-max", "4", "-o", "json", "-q")
    check(r.returncode == 0, "--draft run: " + r.stderr[-400:])
    if r.returncode == 0:
        rows = json.loads(r.stdout)
        got = [(x["test"], x["draft"]) for x in rows]
        want = [(t, dr) for t in ("tg12", "tg12 @ d4")
                for dr in ("none", "oracle:1.00", "oracle:0.00")]
        check(got == want, "--draft rows %s" % got)
        if got == want:
            for i in (0, 3):
                none, one, zero = rows[i], rows[i + 1], rows[i + 2]
                check(none["drafted"] == 0 and none["passes_per_token"] == 1 and
                      none["accept_rate"] is None and none["plan_bytes_per_token"] > 0,
                      "none row %s" % none)
                check(one["drafted"] > 0 and one["accepted"] == one["drafted"] and
                      one["accept_rate"] == 1 and one["passes_per_token"] < 0.5,
                      "oracle:1 row %s" % one)
                check(one["bytes_per_token"] < none["bytes_per_token"] / 2,
                      "oracle:1 read %s B per generated token, none %s"
                      % (one["bytes_per_token"], none["bytes_per_token"]))
                check(zero["drafted"] > 0 and zero["accepted"] == 0 and
                      zero["passes_per_token"] == 1 and zero["accept_rate"] == 0,
                      "oracle:0 row %s" % zero)
                check(one["plan_bytes_per_token"] is None, "a plan figure on a drafted row")
    r = run("bench", model, "-p", "0", "-n", "6", "-r", "1", "--threads", "1", "--no-disk",
            "--budgets", "4MB", "--draft", "ngram", "-o", "md")
    check(r.returncode == 0, "--draft md: " + r.stderr[-400:])
    lines = r.stdout.splitlines()
    if r.returncode == 0 and lines:
        head = [c.strip() for c in lines[0].strip("|").split("|")]
        for col in ("draft", "t/s", "GB/tok", "ratio", "drafted", "accepted", "accept %",
                    "passes/tok"):
            check(col in head, "--draft md column %s" % col)
        check(len(lines) == 3 and "| ngram " in lines[2], "--draft md rows %s" % lines)
    r = run("bench", model, "-p", "0", "-n", "6", "-r", "1", "--threads", "1", "--no-disk",
            "--budgets", "4MB", "--draft", "none", "-o", "csv")
    check(r.returncode == 0, "--draft csv: " + r.stderr[-400:])
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    check(len(rows) == 1 and rows[0].get("draft") == "none" and
          rows[0].get("passes_per_token") == "1", "--draft csv %s" % rows)

    for bad in (["--draft-max", "4"], ["--draft", "ngram", "-p", "4", "-n", "0"],
                ["--draft", "oracle:1.5"], ["--draft", "oracle:x"], ["--draft", "a.gguf,b.gguf"],
                ["--draft", "ngram", "--draft-min", "5", "--draft-max", "2"],
                ["--draft", "none,none"],
                ["--draft", os.path.join(d, "missing.gguf")], ["--draft", "ngram,,none"],
                ["--draft", "ngram", "--draft-max", "65"]):
        r = run("bench", model, *bad)
        check(r.returncode == 2 and r.stderr.count("\n") == 1 and "--draft" in r.stderr,
              "bad --draft usage %s -> %d %s" % (bad, r.returncode, r.stderr[-300:]))

    # the cuda backend (its process: the kernels' host emulation here, argv[2]) verifies the
    # drafts too, each drafted row checked against the one-token decode by bench itself; a
    # model with a recurrent state too, its state rolled back in VRAM past a rejected draft
    if len(sys.argv) > 2:
        env = dict(os.environ, NS_NSCOMPUTE_CUDA=sys.argv[2])
        q35 = os.path.join(d, "q35.gguf")
        r = run("mkmodel", "--preset", "tiny-qwen35", "-o", q35)
        check(r.returncode == 0, "mkmodel tiny-qwen35: " + r.stderr[-300:])
        for m, what in ((model, "--draft on --backend cuda"),
                        (q35, "--draft on a recurrent model with --backend cuda")):
            r = subprocess.run([nsctl, "bench", m, "-p", "0", "-n", "8", "-r", "1", "--threads",
                                "1", "--no-disk", "--budgets", "4MB", "--backend", "cuda",
                                "--draft", "none,oracle:0.8", "--draft-max", "4", "-o", "csv"],
                               capture_output=True, text=True, timeout=600, env=env)
            rows = list(csv.DictReader(io.StringIO(r.stdout))) if r.returncode == 0 else []
            check(len(rows) == 2 and rows[1].get("draft", "").startswith("oracle") and
                  int(rows[1].get("accepted") or 0) > 0,
                  "%s: exit %d, rows %s, %s" % (what, r.returncode, rows, r.stderr[-400:]))

    for bad in (["-o", "xml"], ["-r", "0"], ["--budgets", "12QB"], ["--frobnicate"],
                ["-p", "0", "-n", "0"], ["-d", "60", "-n", "4", "-c", "64"], ["-d", "x"],
                ["-ctk", "q4_0"], ["--cache-type-v"]):
        r = run("bench", model, *bad)
        check(r.returncode == 2 and r.stderr.count("\n") >= 1, "bad usage %s -> %d" % (bad, r.returncode))
    # the cuda pass keeps f16 and q8_0 caches too (its process: the emulation, argv[2]): a
    # typed row runs there, its VRAM budget checked with the cache's types
    if len(sys.argv) > 2:
        env = dict(os.environ, NS_NSCOMPUTE_CUDA=sys.argv[2])
        r = subprocess.run([nsctl, "bench", model, "-p", "8", "-n", "4", "-r", "1", "--threads",
                            "1", "--no-disk", "--budgets", "4MB", "--backend", "cuda", "-ctk",
                            "q8_0", "-ctv", "f16", "-o", "csv"],
                           capture_output=True, text=True, timeout=600, env=env)
        rows = list(csv.DictReader(io.StringIO(r.stdout))) if r.returncode == 0 else []
        check(len(rows) == 2, "cuda with -ctk q8_0 -ctv f16: exit %d, rows %s, %s" %
              (r.returncode, rows, r.stderr[-400:]))
    r = run("bench", os.path.join(d, "missing.gguf"))
    check(r.returncode != 0 and "missing.gguf" in r.stderr, "missing model")

    # an MoE model also gets the random-read limit of its scattered expert reads; a dense one not
    r = run("bench", model, "-p", "0", "-n", "2", "-r", "1", "--threads", "1",
            "--disk-repeats", "1")
    check(r.returncode == 0 and "MoE:" not in r.stderr, "dense model given an MoE line")
    oracle = os.environ.get("NS_ORACLE_DIR", "")
    moe = os.path.join(oracle, "tiny", "tiny-qwen3moe-Q4_K_M.gguf")
    if not os.path.exists(moe):
        check(os.environ.get("CI") != "true", "oracle model %s missing under CI" % moe)
    else:
        r = run("bench", moe, "-p", "0", "-n", "2", "-r", "1", "--threads", "1",
                "--disk-repeats", "1", "--budgets", "1MB")
        check(r.returncode == 0, "moe bench: " + r.stderr[-400:])
        check("MoE: expert reads are scattered; random" in r.stderr and
              "random-read roofline" in r.stderr, "no random-read limit for an MoE model")

sys.exit(1 if fails else 0)
