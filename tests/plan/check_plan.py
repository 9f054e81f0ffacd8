#!/usr/bin/env python3
"""nsctl plan against figures computed here from the oracle's tensor tables (meta/*.json, written
by gguf-py), never from our own reader.

For every tiny model and RAM budgets 0, a bit, half, everything (+ a sweep):
  * --json parses; every tensor of the oracle table is placed exactly once (windows partition
    its rows, rows = bytes / row bytes from the oracle shape);
  * RAM used <= budget; per_token.bytes = what the forward pass requests per decoded token:
    the non-resident touched bytes of every tensor that is not held, where touched is
    computed here (dense tensors whole, one row of an untied token_embd, expert tensors
    bytes * n_expert_used / n_expert), plus one row of a tied token_embd on disk (the
    embedding lookup). Held tensors (one row: norms, biases, sinks; expert bias tables;
    convolution kernels) are read once at start: per_token.held_disk = their bytes on disk,
    never per token;
  * total touched, the prediction at RAM 0 and for a budget of exactly the small every-token
    matrices (attention, router) are hand-computed here;
  * more RAM never predicts more bytes.
Refusals: exit 2 with one line naming the smallest workable figures. Default budgets from fake
/proc/meminfo and cgroup files. Exit 0 pass, 1 fail, 77 skip (oracle missing outside CI)."""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

oracle = os.environ.get("NS_ORACLE_DIR", "../shared/oracle")
nsctl = sys.argv[1]
failures = []
MiB = 1 << 20


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg)


def run(args):
    return subprocess.run([nsctl, "plan"] + args, capture_output=True, text=True)


def plan(path, *args):
    r = run([path, "--json", "--windows", "--overhead", "1MB"] + list(args))
    if r.returncode != 0:
        fail(f"{path} {args}: exit {r.returncode}: {r.stderr.strip()}")
        return None
    try:
        return json.loads(r.stdout)
    except json.JSONDecodeError as e:
        fail(f"{path} {args}: --json does not parse: {e}")
        return None


def is_expert(name):
    return "_exps" in name


def held(t):
    """copied once at start by the forward pass: one row (norms, biases, sinks, rope
    factors), a per-expert bias table, or a linear-attention layer's convolution kernel
    (ssm_conv1d, [kernel, channels]: the conv reads it whole, no row is multiplied)"""
    n = t["name"]
    return all(d == 1 for d in t["shape"][1:]) or (is_expert(n) and n.endswith(".bias")) or \
        n.endswith(".ssm_conv1d.weight")


def small_every_token(t):
    """attention, ssm mixers, router matrices (class 0 of the design notes)."""
    n = t["name"]
    if n.startswith("token_embd.") or n.startswith("output.") or is_expert(n) or held(t):
        return False
    return "attn_" in n or "ssm_" in n or "ffn_gate_inp" in n


def hparam(meta, key):
    arch = meta["metadata"]["general.architecture"]["value"]
    v = meta["metadata"].get(f"{arch}.{key}")
    return v["value"] if v else 0


def check_model(rel, meta_path):
    meta = json.load(open(meta_path))
    path = os.path.join(oracle, rel)
    tensors = {t["name"]: t for t in meta["tensors"]}
    tied = "output.weight" not in tensors
    n_used = hparam(meta, "expert_used_count")

    def rows(t):
        return 1 if len(t["shape"]) < 2 else __import__("math").prod(t["shape"][1:])

    def touched(t, nrows=None):
        """bytes a token touches of nrows rows of t (all rows by default); float for experts"""
        r = rows(t)
        nrows = r if nrows is None else nrows
        b = t["bytes"] // r * nrows
        if is_expert(t["name"]):
            return b * n_used / t["shape"][-1]
        if t["name"] == "token_embd.weight" and not tied:
            return t["bytes"] // r * nrows / r  # one row of r, scaled by the share held
        return b

    total = sum(touched(t) for t in meta["tensors"])
    held_touched = sum(touched(t) for t in meta["tensors"] if held(t))
    embd = tensors["token_embd.weight"]
    tied_row = embd["bytes"] // rows(embd) if tied else 0
    ram0 = total - held_touched + tied_row  # everything on disk, per decoded token
    total_bytes = sum(t["bytes"] for t in meta["tensors"])
    class0 = sum(t["bytes"] for t in meta["tensors"] if small_every_token(t))
    prev = None
    budgets = [0, 4096 + 17, total_bytes // 2, total_bytes, class0] + \
              [total_bytes * k // 11 for k in range(1, 11)]  # 23 steps cost 2 min under ASan
    for ram in budgets:
        p = plan(path, "--ram-budget", str(ram), "--mem-budget", "1MB", "-c", "256")
        if p is None:
            continue
        tag = f"{rel} --ram-budget {ram}"
        # every tensor placed exactly once, windows partition its rows
        seen = {}
        for w in p["windows"]:
            seen.setdefault(w["tensor"], []).append(tuple(w["rows"]) + (w["tier"],))
        if set(seen) != set(tensors):
            fail(f"{tag}: placed {sorted(set(seen) ^ set(tensors))} wrongly")
            continue
        disk = 0.0
        held_disk = 0
        used = 0
        for name, ws in seen.items():
            t = tensors[name]
            pos = 0
            for a, b, tier in ws:
                if a != pos:
                    fail(f"{tag}: {name} window starts at {a}, expected {pos}")
                pos = b
                if tier != "disk":
                    used += t["bytes"] // rows(t) * (b - a)
                elif held(t):
                    held_disk += t["bytes"] // rows(t) * (b - a)
                else:
                    disk += touched(t, b - a)
                    if name == "token_embd.weight" and tied:
                        disk += tied_row
            if name == "token_embd.weight" and len({w[2] for w in ws}) != 1:
                fail(f"{tag}: token_embd split over tiers {ws}")
            if pos != rows(t):
                fail(f"{tag}: {name} covered to row {pos} of {rows(t)}")
        if used > ram or used != p["placed"]["ram"]:
            fail(f"{tag}: RAM used {used} (nsctl says {p['placed']['ram']}) over budget")
        want = disk
        got = p["per_token"]["bytes"]
        if p["per_token"]["held_disk"] != held_disk:
            fail(f"{tag}: held on disk {p['per_token']['held_disk']}, hand {held_disk}")
        if abs(got - want) > 1e-6 * max(1, want):
            fail(f"{tag}: predicted {got} bytes/token, hand {want}")
        if abs(p["per_token"]["touched"] - total) > 1e-6 * total:
            fail(f"{tag}: touched {p['per_token']['touched']}, hand {total}")
        if ram == 0 and got != ram0:
            fail(f"{tag}: RAM 0 predicts {got}, hand {ram0}")
        if ram == class0 and got != ram0 - class0:
            fail(f"{tag}: small every-token matrices budget predicts {got}, hand {ram0 - class0}")
        if ram == total_bytes:
            row = tensors["token_embd.weight"]["bytes"] // rows(tensors["token_embd.weight"])
            if got != (0 if tied else row):
                fail(f"{tag}: full RAM predicts {got}, hand {0 if tied else row}")
        if ram in budgets[5:]:
            if prev is not None and got > prev:
                fail(f"{tag}: more RAM predicts more ({got} > {prev})")
            prev = got
    print(f"ok {rel}: touched {total:.0f} B/token, requested at RAM 0 {ram0:.0f} B/token, "
          f"held {held_touched:.0f} B, small every-token matrices {class0} B")


def check_refusals(path):
    # arena below the minimum (output_norm row 1024 B -> 5 * (4096 + 4096) = 40960)
    r = run([path, "--mem-budget", "1KB", "--ram-budget", "0"])
    lines = r.stderr.strip().split("\n")
    if r.returncode != 2 or len(lines) != 1 or "--mem-budget 40960" not in lines[0]:
        fail(f"small --mem-budget: exit {r.returncode}, stderr {r.stderr!r}")
    # VRAM budget below the reserve (KV + scratch at -c 256)
    r = run([path, "--vram-budget", "1KB", "--ram-budget", "0", "--mem-budget", "1MB",
             "-c", "256"])
    lines = r.stderr.strip().split("\n")
    if r.returncode != 2 or len(lines) != 1 or "smallest workable: --vram-budget" not in lines[0]:
        fail(f"small --vram-budget: exit {r.returncode}, stderr {r.stderr!r}")
    # bad sizes and options
    for args in (["--ram-budget", "lots"], ["--ram-budget", "-1"], ["-c", "0"], ["--bogus"]):
        r = run([path] + args)
        if r.returncode != 2 or len(r.stderr.strip().split("\n")) != 1:
            fail(f"{args}: exit {r.returncode}, stderr {r.stderr!r}")
    r = run(["/nonexistent.gguf"])
    if r.returncode != 2:
        fail(f"missing model: exit {r.returncode}")


def check_typed_reserve(path, meta_path):
    """The default --reserve-vram counts the KV cache in its types (-ctk/-ctv), as the cuda
    pass allocates it: K and V of every layer, n_ctx rows of a position's heads each, one
    allocation per cache rounded to the arena's 256-byte granule (nsplan/gpu_need.c)."""
    meta = json.load(open(meta_path))
    n_layer, n_kv = hparam(meta, "block_count"), hparam(meta, "attention.head_count_kv")
    nk = n_kv * hparam(meta, "attention.key_length")
    nv = n_kv * hparam(meta, "attention.value_length")
    ctx = 256

    def kv(bk, bv):  # bytes of a row of n elements: f32 4n, f16 2n, q8_0 n / 32 * 34
        g = lambda b: (b + 255) // 256 * 256
        return g(n_layer * ctx * bk(nk)) + g(n_layer * ctx * bv(nv))

    f32, f16, q8 = (lambda n: 4 * n), (lambda n: 2 * n), (lambda n: n // 32 * 34)
    base = ["--vram-budget", "64MB", "--ram-budget", "0", "--mem-budget", "1MB", "-c", str(ctx)]
    want = {("f32", "f32"): kv(f32, f32), ("q8_0", "f16"): kv(q8, f16),
            ("f16", "f16"): kv(f16, f16)}
    got = {}
    for (k, v) in want:
        p = plan(path, *base, "-ctk", k, "-ctv", v)
        if p:
            got[(k, v)] = p["budgets"]["reserve_vram"]
    for kv_pair in want:
        if kv_pair not in got:
            return
        d_want = want[("f32", "f32")] - want[kv_pair]
        d_got = got[("f32", "f32")] - got[kv_pair]
        if d_got != d_want:
            fail(f"-ctk {kv_pair[0]} -ctv {kv_pair[1]}: reserve {got[kv_pair]} is {d_got} below "
                 f"f32's {got[('f32', 'f32')]}, want {d_want} (the KV cache's bytes)")
    r = run([path] + base + ["-ctk", "q8_0", "-ctv", "f16"])
    if r.returncode != 0 or "for KV cache (q8_0 K, f16 V) and scratch" not in r.stdout or \
            "q8_0 K, f16 V, " not in r.stdout:
        fail(f"nsctl plan -ctk q8_0 -ctv f16: the types not in its text: {r.stdout!r}")


def check_defaults(path):
    with tempfile.TemporaryDirectory() as d:
        def w(rel, text):
            p = os.path.join(d, rel)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            open(p, "w").write(text)
        w("meminfo", "MemTotal: 33554432 kB\nMemAvailable: 16777216 kB\n")
        w("tiny/meminfo", "MemTotal: 33554432 kB\nMemAvailable: 66560 kB\n")
        w("v2/self", "0::/job\n")
        w("v2/root/job/memory.max", str(1 << 30) + "\n")
        w("v1/self", "3:memory:/job\n")
        w("v1/root/memory/job/memory.limit_in_bytes", str(512 << 20) + "\n")
        fake = lambda mi, cg, root: ["--meminfo", os.path.join(d, mi), "--cgroup-file",
                                     os.path.join(d, cg), "--cgroup-root", os.path.join(d, root)]
        cases = [("v2", fake("meminfo", "v2/self", "v2/root"), 1 << 30, 2),
                 ("v1", fake("meminfo", "v1/self", "v1/root"), 512 << 20, 1),
                 ("none", fake("meminfo", "none", "none"), 16 << 30, 0)]
        for tag, args, avail, ver in cases:
            p = plan(path, "-c", "256", *args)
            if p is None:
                continue
            m, b, fx = p["memory"], p["budgets"], p["fixed"]
            if m["available"] != avail or m["cgroup_version"] != ver:
                fail(f"defaults {tag}: available {m['available']} v{m['cgroup_version']}, "
                     f"want {avail} v{ver}")
                continue
            head = max(avail // 16, 64 * MiB)
            usable = avail - head - fx["total"]
            want_arena = min(5 * ((1 << 20) + 4096), max(b["min_mem"], usable // 4))
            if b["mem"] != want_arena or not b["mem_default"]:
                fail(f"defaults {tag}: arena {b['mem']}, want {want_arena}")
            want_ram = min(usable - want_arena, p["tensor_bytes"] - 73728)  # untied embd
            if b["ram"] != want_ram:
                fail(f"defaults {tag}: RAM {b['ram']}, want {want_ram}")
            if b["ram"] + b["mem"] + fx["total"] + head > avail:
                fail(f"defaults {tag}: budgets exceed the available memory")
        # text output prints the chosen figures
        r = run([path, "-c", "256", "--overhead", "1MB"] + fake("meminfo", "v2/self", "v2/root"))
        if r.returncode != 0 or "(default)" not in r.stdout or "headroom" not in r.stdout:
            fail(f"defaults text: exit {r.returncode} {r.stdout[:300]!r}")
        # explicit budgets beyond the available memory: refused, one line, the figures and
        # what to lower (a RAM budget counts only what the model fills: 2 GB of it here fits)
        r = run([path, "-c", "256", "--overhead", "1MB", "--ram-budget", "2GB", "--mem-budget",
                 "1MB"] + fake("meminfo", "v1/self", "v1/root"))
        if r.returncode != 0:
            fail(f"2 GB RAM budget on a small model under 512 MiB: exit {r.returncode}, "
                 f"stderr {r.stderr!r}")
        r = run([path, "-c", "256", "--overhead", "1MB", "--ram-budget", "2GB", "--mem-budget",
                 "600MB"] + fake("meminfo", "v1/self", "v1/root"))
        lines = r.stderr.strip().split("\n")
        if r.returncode != 2 or len(lines) != 1 or "+ the fixed set" not in lines[0] or \
           "exceed the 512.00 MiB of memory available (the cgroup's limit" not in lines[0] or \
           "lower --mem-budget to" not in lines[0]:
            fail(f"budgets over the cgroup limit: exit {r.returncode}, stderr {r.stderr!r}")
        # too little memory: one line with the smallest workable figures
        r = run([path, "-c", "256", "--overhead", "1MB"] + fake("tiny/meminfo", "none", "none"))
        lines = r.stderr.strip().split("\n")
        if r.returncode != 2 or len(lines) != 1 or "smallest workable" not in lines[0] or \
           "--mem-budget 40960" not in lines[0]:
            fail(f"tiny memory: exit {r.returncode}, stderr {r.stderr!r}")


def check_over(path):
    """Named budgets over the memory available: the line names what to lower, in order the RAM
    budget alone, the arena alone, both, the fixed set; each figure it gives fits exactly (a
    page more does not), and a sum a few bytes over shows both byte counts (its rounded MiB
    figures would read the same)."""
    p = plan(path, "-c", "256")
    if p is None:
        return
    fixed, fill, min_mem = p["fixed"]["total"], p["tensor_bytes"], p["budgets"]["min_mem"]
    with tempfile.TemporaryDirectory() as d:
        def budgets(avail, mem, ram):
            mi = os.path.join(d, "meminfo")
            with open(mi, "w") as f:
                f.write(f"MemTotal: 33554432 kB\nMemAvailable: {avail // 1024} kB\n")
            return run([path, "-c", "256", "--overhead", "1MB", "--meminfo", mi,
                        "--cgroup-file", "none", "--cgroup-root", "none",
                        "--mem-budget", str(mem), "--ram-budget", str(ram)])

        def over(what, avail, mem, ram, want, pick):
            r = budgets(avail, mem, ram)
            lines = r.stderr.strip().split("\n")
            m = re.search(want, lines[0]) if r.returncode == 2 and len(lines) == 1 else None
            if not m:
                fail(f"{what}: want exit 2 and one line matching {want!r}, got exit "
                     f"{r.returncode}, stderr {r.stderr!r}")
                return None
            print(f"ok: {what}: {lines[0][-120:]}", flush=True)
            return pick(int(m.group(1)))

        def fits(what, avail, mem, ram):
            r = budgets(avail, mem, ram)
            if r.returncode != 0:
                fail(f"{what}: the figure the line gave does not fit: exit {r.returncode}, "
                     f"stderr {r.stderr.strip()!r}")

        avail = 64 << 20
        room = avail - fixed
        # the RAM budget alone: arena + fixed fit, the RAM cache does not
        ram = over("ram over", avail, room - fill // 2, fill,
                   r"lower --ram-budget to (\d+) or less$", int)
        if ram is not None:
            fits("ram lowered", avail, room - fill // 2, ram)
            if budgets(avail, room - fill // 2, ram + 4096).returncode != 2:
                fail("ram lowered: a page more still fits: the figure is not the largest")
        # the arena alone: no RAM budget
        mem = over("arena over", avail, room + 4096, 0,
                   r"lower --mem-budget to (\d+) or less$", int)
        if mem is not None:
            fits("arena lowered", avail, mem, 0)
            if mem != room:
                fail(f"arena lowered: {mem}, want {room}")
        # both: the RAM cache and the smallest arena do not fit together
        avail2 = (fixed + fill + 4095) // 4096 * 4096
        both = over("both over", avail2, avail2 - fixed, fill,
                    r"lower both: --mem-budget and --ram-budget together (\d+) or less", int)
        if both is not None:
            fits("both lowered", avail2, min_mem, both - min_mem)
        # a page over: the exact byte counts
        r = budgets(avail, room + 4096, 0)
        if f"{room + fixed + 4096} > {avail} bytes" not in r.stderr:
            fail(f"one page over: want both byte counts, got {r.stderr.strip()!r}")
        # the fixed set alone
        over("fixed over", fixed + 8192, min_mem, 0,
             r"the fixed set alone \(with the smallest arena, (\d+)\) does not fit", int)


def check_stats(path):
    """--stats: a hot expert's slabs are cached first (tiny-qwen3moe-F32: small every-token
    matrices 1589248 B + output 524288 B + 3 slabs of 256*256*4 B; the norms come last)."""
    ram = 1589248 + 524288 + 3 * 262144
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as f:
        f.write("tokens 0 50\ntokens 1 50\n1 6 45\n0 2 10\n")
        f.flush()
        p = plan(path, "--ram-budget", str(ram), "--mem-budget", "1MB", "-c", "256",
                 "--stats", f.name)
        if p is None:
            return
        cached = sorted({(w["tensor"].split(".")[1], w["expert"]) for w in p["windows"]
                         if w["kind"] == "expert" and w["tier"] == "RAM"})
        if cached != [("1", 6)] or p["per_token"]["uniform"]:
            fail(f"--stats: cached experts {cached}, want layer 1 expert 6")
        f.seek(0)
        f.write("1 8 1\n")
        f.flush()
        r = run([path, "--ram-budget", "0", "--mem-budget", "1MB", "--stats", f.name])
        if r.returncode != 2 or len(r.stderr.strip().split("\n")) != 1:
            fail(f"bad --stats: exit {r.returncode}, stderr {r.stderr!r}")


def check_run_defaults(path):
    """nsctl run with no budgets takes the ones nsctl plan chooses, says so on stderr, and
    requests per decoded token exactly what the plan predicts under them. (A tiny model: its
    budgets are bound by the model's size, not by the machine's fluctuating MemAvailable.)"""
    p = subprocess.run([nsctl, "plan", path, "--json"], capture_output=True, text=True)
    if p.returncode != 0:
        fail(f"plan {path}: {p.stderr.strip()}")
        return
    pl = json.loads(p.stdout)
    b = pl["budgets"]
    if not (b["mem_default"] and b["ram_default"]):
        fail(f"plan without budgets did not default them: {b}")
    r = subprocess.run([nsctl, "run", path, "-p", "Once upon a time", "-n", "6", "--temp", "0",
                        "--ignore-eos", "--json"], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        fail(f"run without budgets: exit {r.returncode}: {r.stderr.strip()[-300:]}")
        return
    if "nsctl run: budgets from" not in r.stderr:
        fail("run without budgets did not print the budgets it chose")
    summary = json.loads(r.stdout)  # --json: the object alone on stdout
    if summary["arena_budget"] != b["mem"]:
        fail(f"run's arena {summary['arena_budget']} != plan's default --mem-budget {b['mem']}")
    per_tok = summary["bytes_requested_decode"] / summary["n_decode"]
    if per_tok != pl["per_token"]["bytes"]:
        fail(f"run without budgets requested {per_tok} B/token, plan predicts "
             f"{pl['per_token']['bytes']} under its defaults {b}")
    print(f"run without budgets: arena {b['mem']}, RAM {b['ram']}: {per_tok:.0f} B/token "
          f"requested = plan")


def check_default_ctx():
    """Without -c, the plan's context is the model's training context when that is shorter
    than 4096, else 4096 (run and bench take the same, nsctl/budgets.c); the training context
    from the oracle's metadata."""
    for rel, meta in (("models/stories260K-Q8_0.gguf", "models__stories260K-Q8_0.json"),
                      ("tiny/tiny-qwen3-Q4_K_M.gguf", "tiny__tiny-qwen3-Q4_K_M.json")):
        train = hparam(json.load(open(os.path.join(oracle, "meta", meta))), "context_length")
        p = plan(os.path.join(oracle, rel), "--mem-budget", "1MB", "--ram-budget", "0")
        if p and p["fixed"]["n_ctx"] != min(train, 4096):
            fail(f"{rel}: default context {p['fixed']['n_ctx']}, want min({train}, 4096)")


def main():
    if not os.path.isdir(oracle):
        if os.environ.get("CI") == "true":
            print(f"oracle missing at {oracle} and CI=true")
            return 1
        print(f"oracle missing at {oracle}: skipping")
        return 77
    for meta_path in sorted(glob.glob(os.path.join(oracle, "meta", "tiny__tiny-*.json"))):
        rel = "tiny/" + os.path.basename(meta_path)[len("tiny__"):-len(".json")] + ".gguf"
        check_model(rel, meta_path)
    moe = os.path.join(oracle, "tiny", "tiny-qwen3moe-Q4_K_M.gguf")
    check_refusals(moe)
    check_typed_reserve(moe, os.path.join(oracle, "meta", "tiny__tiny-qwen3moe-Q4_K_M.json"))
    check_defaults(moe)
    check_over(os.path.join(oracle, "tiny", "tiny-qwen3-Q4_K_M.gguf"))
    check_stats(os.path.join(oracle, "tiny", "tiny-qwen3moe-F32.gguf"))
    check_run_defaults(os.path.join(oracle, "tiny", "tiny-qwen3-Q4_K_M.gguf"))
    check_default_ctx()
    if failures:
        print(f"{len(failures)} failures")
        return 1
    print("all ok")
    return 0


sys.exit(main())
