#!/usr/bin/env python3
"""nsctl's command line as llama.cpp users type it (issue 25), and run's output contract.

1. A table of invocations of `nsctl run ... --print-args` (the values the parser stored, one
   name=value per line, nothing started): each llama.cpp alias, "--opt=value", bundled short
   options ("-n5", "-t4", "-qn5"), an alias as the value of another option ("-p -ngl"), "--",
   and every old spelling, each with the values it must set.
   The same for `nsctl serve` with llama-server's spellings (-a, -np, --port=N).
2. `nsctl --version` / `-v` print meson's project version; `--help` on every command (the list
   `nsctl --help` prints) and every daemon exits 0 with a usage text on stdout.
3. `nsctl run ... | head -c 20`: nsctl ends within a second of the reader going away, exit 1,
   with no process of the session and no shared-memory segment left.
4. `--json`: stdout parses with json.loads alone; stop_reason is a string ("length" at -n).
5. Seeds: two runs without -s print different seeds; -s with the first one repeats its text
   byte for byte (--temp 1, sampled).
6. -f FILE and -e: the prompt is the file's text; escapes replaced.
7. -ngl N as a VRAM budget: the budgets printed for -ngl 1 and -ngl all of a two-layer model
   differ by exactly the bytes of layer 1's tensors, summed here from the GGUF's tensor table
   by a reader of its own (not ours); 99, -1 and all give the same budget.
7b. The other commands on the same parser (info, plan, tokenize, detokenize, tensor, logits,
   bench): aliases, "=" forms and bundles print what the canonical spelling prints; refusals
   name the spelling typed.
8. Progress (common/ns_progress.c) through a pseudo-terminal: `nsctl mkmodel` draws its line
   ("writing demo ... %", redrawn with \r and erase-line) when stderr is a terminal, and
   nothing of it when stderr is a pipe or with --quiet; `nsctl run` draws the prompt's
   evaluation ("prefill  K / N tok ... tok/s": 0 first, nscompute's PROGRESS between, N at the
   end, erased before the summary), nothing with -q or on a pipe.
argv: NSCTL VERSION NSIO NSPLAN NSROUTER NSCOMPUTE. Exit 0 pass, 1 fail, 77 skip (oracle
missing outside CI)."""
import json
import os
import pty
import struct
import re
import subprocess
import sys
import tempfile
import time

from run_testlib import alive, descendants, fail, failures, require_model

NSCTL, VERSION = sys.argv[1:3]
DAEMONS = sys.argv[3:7]
ORACLE = os.environ.get("NS_ORACLE_DIR", "../shared/oracle")
MODEL = os.path.join(ORACLE, "models/stories260K.gguf")
LLAMA = os.path.join(ORACLE, "tiny/tiny-llama-Q4_K_M.gguf")  # two layers, for -ngl
require_model(MODEL)
require_model(LLAMA)
M = MODEL

# what --print-args says when nothing is given (run's and llama.cpp's defaults)
DEFAULTS = {"model": M, "prompt": "", "system": "", "n_predict": "128", "temp": "0.8",
            "top_k": "40", "top_p": "0.95", "min_p": "0.05", "repeat_penalty": "1",
            "repeat_last_n": "64", "seed": "random", "threads": "0", "ctx": "0",
            "batch": "0", "ngl": "-1", "backend": "cpu", "mem_budget": "auto",
            "ram_budget": "auto",
            "vram_budget": "0", "cache_type_k": "f32", "cache_type_v": "f32", "chat": "0",
            "json": "0", "ignore_eos": "0", "no_warmup": "0", "verbose": "0", "quiet": "0"}

# (argv after "run", the values that differ from DEFAULTS)
TABLE = [
    ([M], {}),
    (["-m", M], {}),
    (["--model", M], {}),
    (["--model=" + M], {}),
    (["-m" + M], {}),
    (["-t", "4", M], {"threads": "4"}),
    (["-t4", M], {"threads": "4"}),
    (["--threads=3", M], {"threads": "3"}),
    ([M, "--threads", "2"], {"threads": "2"}),
    (["-s", "42", M], {"seed": "42"}),
    (["-s42", M], {"seed": "42"}),
    (["--seed=18446744073709551615", M], {"seed": "18446744073709551615"}),
    (["--seed", "-1", M], {}),
    (["-s", "7", "-s", "-1", M], {}),
    (["-c", "512", M], {"ctx": "512"}),
    (["-c512", M], {"ctx": "512"}),
    (["--ctx-size", "1024", M], {"ctx": "1024"}),
    (["--ctx-size=2048", M], {"ctx": "2048"}),
    (["--ctx", "256", M], {"ctx": "256"}),
    (["-b", "64", M], {"batch": "64"}),
    (["--batch-size=32", M], {"batch": "32"}),
    (["-n", "5", M], {"n_predict": "5"}),
    (["-n5", M], {"n_predict": "5"}),
    (["-n", "-1", M], {"n_predict": "-1"}),
    (["--n-predict=7", M], {"n_predict": "7"}),
    (["--predict", "9", M], {"n_predict": "9"}),
    (["--temp=0", M], {"temp": "0"}),
    (["--temp", "0.5", M], {"temp": "0.5"}),
    (["--temperature", "1.5", M], {"temp": "1.5"}),
    (["--top-k=10", "--top-p", "0.5", "--min-p=0.1", M],
     {"top_k": "10", "top_p": "0.5", "min_p": "0.1"}),
    (["--repeat-penalty=1.1", "--repeat-last-n", "32", M],
     {"repeat_penalty": "1.1", "repeat_last_n": "32"}),
    (["-ngl", "0", M], {"ngl": "0"}),
    (["-ngl", "99", M], {"ngl": "99", "backend": "cuda"}),
    (["--n-gpu-layers=5", M], {"ngl": "5", "backend": "cuda"}),
    (["--gpu-layers", "all", M], {"ngl": str(1 << 31), "backend": "cuda"}),
    (["-ngl", "-1", M], {"ngl": str(1 << 31), "backend": "cuda"}),
    (["--no-warmup", M], {"no_warmup": "1"}),
    (["-q", M], {"quiet": "1"}),
    (["-qn5", M], {"quiet": "1", "n_predict": "5"}),
    (["--quiet", M], {"quiet": "1"}),
    (["-p", "hello world", M], {"prompt": "hello world"}),
    (["--prompt=a=b", M], {"prompt": "a=b"}),
    (["-phi", M], {"prompt": "hi"}),
    (["-p", "-ngl", M], {"prompt": "-ngl"}),     # a value, not rewritten
    (["-p", "-n5", M], {"prompt": "-n5"}),
    (["-sys", "be brief", M], {"system": "be brief"}),
    (["--system-prompt=be brief", M], {"system": "be brief"}),
    (["--system", "x", M], {"system": "x"}),
    (["-en5", M], {"n_predict": "5"}),   # a switch bundled before a value
    (["-et", "3", M], {"threads": "3"}),
    (["--json", "--chat", "--ignore-eos", "--verbose", M],
     {"json": "1", "chat": "1", "ignore_eos": "1", "verbose": "1"}),
    (["-ctk", "f16", "-ctv", "q8_0", M], {"cache_type_k": "f16", "cache_type_v": "q8_0"}),
    (["--cache-type-k=q8_0", M], {"cache_type_k": "q8_0"}),
    (["--mem-budget=8MB", "--ram-budget", "1MB", M],
     {"mem_budget": str(8 << 20), "ram_budget": str(1 << 20)}),
    (["--backend=cpu", M], {}),
    (["--", M], {}),
    (["-n", "3", "--", M], {"n_predict": "3"}),
    # llama.cpp's whole line, as its README shows one
    (["-m", M, "-p", "Once", "-n", "64", "-c", "2048", "-t", "8", "--temp", "0.7",
      "--top-k", "20", "--repeat-penalty", "1.05", "--repeat-last-n", "128", "-s", "1234",
      "-ngl", "0", "--no-warmup", "-b", "512"],
     {"prompt": "Once", "n_predict": "64", "ctx": "2048", "threads": "8", "temp": "0.7",
      "top_k": "20", "repeat_penalty": "1.05", "repeat_last_n": "128", "seed": "1234",
      "ngl": "0", "no_warmup": "1", "batch": "512"}),
]


SERVE_DEFAULTS = {"model": M, "host": "127.0.0.1", "port": "8080", "alias": "",
                  "parallel": "1", "queue": "64", "prefill_chunk": "256", "grace": "10",
                  "max_body": str(8 << 20), "no_prompt_reuse": "0", "threads": "0", "ctx": "0",
                  "ngl": "-1", "backend": "cpu"}
SERVE_TABLE = [
    ([M], {}),
    (["-m", M, "--port=9000"], {"port": "9000"}),
    ([M, "--host", "0.0.0.0", "--port", "0"], {"host": "0.0.0.0", "port": "0"}),
    (["-a", "my-model", "-np", "4", M], {"alias": "my-model", "parallel": "4"}),
    (["--alias=x", "--parallel=2", M], {"alias": "x", "parallel": "2"}),
    ([M, "-c4096", "-t", "2", "-ngl", "0"], {"ctx": "4096", "threads": "2", "ngl": "0"}),
    ([M, "--queue=8", "--prefill-chunk", "64", "--grace=3", "--max-body=1MB",
      "--no-prompt-reuse"],
     {"queue": "8", "prefill_chunk": "64", "grace": "3", "max_body": str(1 << 20),
      "no_prompt_reuse": "1"}),
]


def nsctl(args, timeout=60, **kw):
    return subprocess.run([NSCTL] + args, stdin=subprocess.DEVNULL, capture_output=True,
                          timeout=timeout, **kw)


def parsed(cmd, args):
    p = nsctl([cmd, "--print-args"] + args, text=True)
    if p.returncode != 0:
        return None, p
    return dict(x.split("=", 1) for x in p.stdout.splitlines() if "=" in x), p


def check_table():
    for cmd, table, defaults in (("run", TABLE, DEFAULTS), ("serve", SERVE_TABLE,
                                                              SERVE_DEFAULTS)):
        check_rows(cmd, table, defaults)


def check_rows(cmd, table, defaults):
    for args, want in table:
        got, p = parsed(cmd, args)
        if got is None:
            fail("%s %s --print-args: exit %d: %s" % (cmd, args, p.returncode,
                                                      p.stderr.strip()))
            continue
        exp = dict(defaults, **want)
        bad = {k: (got.get(k), v) for k, v in exp.items() if got.get(k) != v}
        if bad:
            fail("%s %s: parsed (got, want) %s" % (cmd, args, bad))
        if p.stderr:
            fail("%s %s --print-args: stderr %r" % (cmd, args, p.stderr))
    print("%s: %d llama.cpp-style invocations parsed to the expected values" % (cmd,
                                                                              len(table)))


def check_version_help():
    for flag in ("--version", "-v"):
        p = nsctl([flag], text=True)
        if p.returncode != 0 or p.stdout.strip() != "nsctl (neurostream) " + VERSION:
            fail("nsctl %s: exit %d, stdout %r (want version %s)" % (flag, p.returncode,
                                                                     p.stdout, VERSION))
    p = nsctl(["--help"], text=True)
    cmds = re.findall(r"^  ([a-z]+) ", p.stdout, re.M)
    if p.returncode != 0 or len(cmds) < 13 or "tokenize" not in cmds:
        fail("nsctl --help: exit %d, commands %s" % (p.returncode, cmds))
    for c in cmds:
        for h in ("--help", "-h"):
            q = nsctl([c, h], text=True)
            if q.returncode != 0 or not q.stdout.startswith("usage: nsctl " + c):
                fail("nsctl %s %s: exit %d, stdout %r, stderr %r" % (c, h, q.returncode,
                                                                      q.stdout[:80],
                                                                      q.stderr[:200]))
    for d in DAEMONS:
        q = subprocess.run([d, "--help"], capture_output=True, text=True, timeout=30)
        if q.returncode != 0 or "usage" not in q.stdout.lower():
            fail("%s --help: exit %d, stdout %r" % (d, q.returncode, q.stdout[:80]))
    print("--version, -v; --help and -h on %d commands and %d daemons" % (len(cmds),
                                                                          len(DAEMONS)))


def session_of(err):
    m = re.search(r"session ([0-9a-f]+):", err)
    return m.group(1) if m else None


def shm_of(sid):
    return [f for f in os.listdir("/dev/shm") if ("-%s-" % sid) in f]


def check_epipe(tmp):
    """nsctl run | head -c 20: the pipe's reader leaves after 20 bytes."""
    errf = os.path.join(tmp, "epipe.err")
    # stories260K decodes ~2000 tok/s here: 60000 tokens would take half a minute
    args = [NSCTL, "run", M, "-p", "Once upon a time", "-n", "60000", "-c", "60001",
            "--ignore-eos", "--temp", "1", "--mem-budget", "8MB", "--ram-budget", "0"]
    with open(errf, "wb") as ef:
        p = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=ef)
    got = b""
    t_end = time.monotonic() + 60
    while len(got) < 20 and time.monotonic() < t_end:
        b = p.stdout.read1(20 - len(got))
        if not b:
            break
        got += b
    known = {}
    descendants(p.pid, known)
    p.stdout.close()  # as head exits
    t0 = time.monotonic()
    try:
        rc = p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        rc = p.wait()
        fail("run | head -c 20: still running 10 s after the reader left")
    dt = time.monotonic() - t0
    with open(errf) as f:
        err = f.read()
    sid = session_of(err)
    if len(got) < 20:
        fail("run | head -c 20: only %r before the end: %s" % (got, err[-500:]))
    if dt > 1.0:
        fail("run | head -c 20: ended %.2f s after the reader left (limit 1 s)" % dt)
    if rc != 1:
        fail("run | head -c 20: exit %d, want 1 (documented)\n%s" % (rc, err[-800:]))
    if "Sanitizer" in err or "runtime error" in err:
        fail("run | head -c 20: sanitizer report:\n%s" % err[-3000:])
    if "stdout closed" not in err:
        fail("run | head -c 20: no 'stdout closed' line: %s" % err[-500:])
    if len([k for k in known.values() if k.startswith("ns")]) < 2:
        fail("run | head -c 20: saw only %s of the session's processes" % known)
    time.sleep(0.2)
    left = [(pid, c) for (pid, st), c in known.items() if alive(pid, st)]
    if left:
        fail("run | head -c 20: processes left: %s" % left)
    if not sid or shm_of(sid):
        fail("run | head -c 20: session %s, segments left: %s" % (sid, sid and shm_of(sid)))
    m = re.search(r"decode (\d+) tok", err)
    print("run | head -c 20: nsctl ended %.3f s after the reader left, exit %d, %s tokens "
          "decoded of 60000, %d processes gone, no segment left" %
          (dt, rc, m.group(1) if m else "?", len(known)))


def run_text(args):
    p = nsctl(["run", M, "-p", "Once upon a time", "--mem-budget", "8MB", "--ram-budget",
               "0"] + args, text=True, errors="replace")
    m = re.search(r"^nsctl run: seed (\d+)", p.stderr, re.M)
    if "Sanitizer" in p.stderr or "runtime error" in p.stderr:
        fail("run %s: sanitizer report:\n%s" % (args, p.stderr[-3000:]))
    return p, (m.group(1) if m else None)


def check_json():
    p, _ = run_text(["-n", "6", "--json"])
    try:
        d = json.loads(p.stdout)
    except ValueError as e:
        fail("--json: stdout does not parse alone (%s): %r" % (e, p.stdout[:300]))
        return
    if p.returncode != 0 or d.get("stop_reason") != "length" or d.get("n_gen") != 6:
        fail("--json -n 6: exit %d, stop_reason %r, n_gen %r" % (p.returncode,
                                                                   d.get("stop_reason"),
                                                                   d.get("n_gen")))
    if not isinstance(d.get("content"), str) or not d["content"]:
        fail("--json: no content: %r" % d)
    if "{" in p.stderr:
        fail("--json: an object on stderr too: %r" % p.stderr)
    print("--json: stdout is one object (json.loads), stop_reason %r" % d["stop_reason"])


def check_seed():
    (p1, s1), (p2, s2) = run_text(["-n", "24", "--temp", "1"]), run_text(["-n", "24",
                                                                           "--temp", "1"])
    if p1.returncode or p2.returncode or not s1 or not s2:
        fail("sampled runs: exit %d/%d, seeds %s %s\n%s" % (p1.returncode, p2.returncode, s1,
                                                            s2, p1.stderr[-400:]))
        return
    if s1 == s2:
        fail("two runs without -s used the same seed %s" % s1)
    p3, s3 = run_text(["-n", "24", "--temp", "1", "-s", s1])
    if p3.returncode or s3 != s1 or p3.stdout != p1.stdout:
        fail("-s %s: exit %d, seed %s, text %r, first run's %r" % (s1, p3.returncode, s3,
                                                                    p3.stdout, p1.stdout))
    same = p1.stdout == p2.stdout
    print("seeds %s and %s differ (texts %s); -s %s repeats the first text exactly" %
          (s1, s2, "equal" if same else "differ", s1))


def check_file_escape(tmp):
    path = os.path.join(tmp, "prompt.txt")
    with open(path, "w") as f:
        f.write("from a file\nsecond line")
    p = nsctl(["run", M, "-f", path, "--print-args"], text=True)
    if p.returncode or "prompt=from a file\nsecond line\n" not in p.stdout:
        fail("-f: %r" % p.stdout[:200])
    p = nsctl(["run", M, "-e", "-p", r"a\nb\tc\\d\q", "--print-args"], text=True)
    if p.returncode or "prompt=a\nb\tc\\d\\q\n" not in p.stdout:
        fail("-e: %r" % p.stdout[:200])
    p = nsctl(["run", M, "-p", r"a\nb", "--print-args"], text=True)
    if p.returncode or "prompt=a\\nb\n" not in p.stdout:
        fail("without -e the prompt is kept as typed: %r" % p.stdout[:200])
    print("-f reads the prompt from a file; -e replaces escapes")


# ggml types: (block bytes, elements per block)
GGML_BLOCK = {0: (4, 1), 1: (2, 1), 2: (18, 32), 3: (20, 32), 6: (22, 32), 7: (24, 32),
              8: (34, 32), 10: (84, 256), 11: (110, 256), 12: (144, 256), 13: (176, 256),
              14: (210, 256), 30: (2, 1), 39: (17, 32)}


def gguf_tensor_bytes(path):
    """{name: bytes} from a GGUF file's tensor table."""
    with open(path, "rb") as f:
        data = f.read(1 << 22)
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from("<" + fmt, data, pos)
        pos += struct.calcsize("<" + fmt)
        return v[0]

    def string():
        nonlocal pos
        n = take("Q")
        pos += n
        return data[pos - n:pos].decode()

    scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q",
              12: "d"}

    def value(t):
        if t == 8:
            string()
        elif t == 9:
            et, n = take("I"), take("Q")
            for _ in range(n):
                value(et)
        else:
            take(scalar[t])

    assert data[:4] == b"GGUF"
    pos = 8
    n_t, n_kv = take("Q"), take("Q")
    for _ in range(n_kv):
        string()
        value(take("I"))
    out = {}
    for _ in range(n_t):
        name = string()
        dims = [take("Q") for _ in range(take("I"))]
        t = take("I")
        take("Q")
        n = 1
        for d in dims:
            n *= d
        bb, be = GGML_BLOCK[t]
        out[name] = n // be * bb
    return out


def check_ngl():
    model = LLAMA
    sizes = gguf_tensor_bytes(model)
    layers = {int(n.split(".")[1]) for n in sizes if n.startswith("blk.")}
    budgets = {}
    for n in ("1", "all", "99", "-1"):
        # the budget line comes before any process starts; the cuda executable is made
        # missing so that nothing does, with or without a GPU
        p = subprocess.run([NSCTL, "run", model, "-ngl", n, "-n", "1", "-c", "256"],
                           stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=60, env=dict(os.environ, NS_NSCOMPUTE_CUDA="/nonexistent"))
        m = re.search(r"-ngl -?\d+: --backend cuda --vram-budget \S+ \S+ = (\d+) bytes", p.stderr)
        if not m or p.returncode == 0:
            fail("-ngl %s: exit %d, no budget line: %r" % (n, p.returncode, p.stderr[-400:]))
            return
        budgets[n] = int(m.group(1))
    layer1 = sum(v for k, v in sizes.items() if k.startswith("blk.1."))
    if layers != {0, 1} or budgets["all"] - budgets["1"] != layer1:
        fail("-ngl: all %d - 1 %d != layer 1's %d bytes (layers %s)" %
             (budgets["all"], budgets["1"], layer1, sorted(layers)))
    if not budgets["all"] == budgets["99"] == budgets["-1"]:
        fail("-ngl all/99/-1 differ: %s" % budgets)
    print("-ngl: budgets %s; all - 1 = %d bytes = layer 1's tensors (independent reader)" %
          (budgets, layer1))


def stderr_on_pty(args):
    """Run nsctl with stderr on a pseudo-terminal (stdout a pipe); (rc, what the tty got)."""
    master, slave = pty.openpty()
    p = subprocess.Popen([NSCTL] + args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=slave)
    os.close(slave)
    got = b""
    while True:
        try:
            b = os.read(master, 4096)
        except OSError:  # EIO: the last writer closed the terminal
            break
        if not b:
            break
        got += b
    os.close(master)
    p.stdout.read()
    return p.wait(timeout=60), got.decode(errors="replace")


def check_progress(tmp):
    out = os.path.join(tmp, "demo.gguf")
    mk = ["mkmodel", "--preset", "demo", "-o", out, "--force"]
    rc, tty = stderr_on_pty(mk)
    if rc != 0 or "writing demo" not in tty or "\r\x1b[K" not in tty or "%" not in tty:
        fail("mkmodel on a terminal: exit %d, no progress line: %r" % (rc, tty[-300:]))
    rc, quiet = stderr_on_pty(mk + ["--quiet"])
    if rc != 0 or "writing demo" in quiet or "\x1b[K" in quiet or "wrote" not in quiet:
        fail("mkmodel --quiet on a terminal: exit %d, %r" % (rc, quiet[-300:]))
    p = nsctl(mk, text=True)
    if p.returncode != 0 or "writing demo" in p.stderr or "\x1b" in p.stderr:
        fail("mkmodel with stderr a pipe: exit %d, %r" % (p.returncode, p.stderr[-300:]))
    print("progress: mkmodel's line on a terminal (%d bytes of it), none with --quiet or on a "
          "pipe" % len(tty))
    # run: the prompt's evaluation, nscompute's PROGRESS drawn as tokens' worth of work;
    # a long prompt streamed in one-row blocks takes long enough for reports between its
    # start and its end (at most ten a second)
    run = ["run", M, "-p", "Once upon a time " * 150, "-n", "2", "--mem-budget", "8MB",
           "--ram-budget", "0", "--block-rows", "1", "-t", "1"]
    rc, tty = stderr_on_pty(run)
    drawn = re.findall(r"\x1b\[Kprefill  (\d+) / (\d+) tok +\d+%  [\d.]+ tok/s", tty)
    mid = [d for d, t in drawn if 0 < int(d) < int(t)]
    if rc != 0 or not drawn or drawn[0][0] != "0" or drawn[-1][0] != drawn[-1][1] or not mid:
        fail("run on a terminal: exit %d, prefill lines %s: %r" % (rc, drawn, tty[-600:]))
    if not re.search(r"\x1b\[Knsctl run: prefill \d+ tok", tty):
        fail("run on a terminal: the progress line is not erased before the summary: %r" %
             tty[-400:])
    # teacher forcing (bench -d) gets the same PROGRESS for its prompt part: it was taken for
    # a malformed message and bench ended with exit 1 and no line
    p = nsctl(["bench", M, "-p", "0", "-n", "2", "-d", "600", "-r", "1", "--budgets", "8MB",
               "--ram-budgets", "0", "--block-rows", "1", "-t", "1", "-c", "1024", "--no-disk",
               "-o", "json"], text=True)
    rows = json.loads(p.stdout) if p.returncode == 0 else []
    if p.returncode != 0 or [r.get("n_depth") for r in rows] != [600]:
        fail("bench -d 600 in one-row blocks: exit %d, rows %r: %r" % (p.returncode, rows,
                                                                       p.stderr[-400:]))
    rc, quiet = stderr_on_pty(run + ["-q"])
    if rc != 0 or "\x1b[K" in quiet or "nsctl run: prefill" not in quiet:
        fail("run -q on a terminal: exit %d, %r" % (rc, quiet[-400:]))
    p = nsctl(run, text=True)
    if p.returncode != 0 or "\x1b" in p.stderr or "nsctl run: prefill" not in p.stderr:
        fail("run with stderr a pipe: exit %d, %r" % (p.returncode, p.stderr[-400:]))
    print("progress: run's prefill line on a terminal (%s ... %s of %s tok), none with -q or "
          "on a pipe" % (drawn[0][0] if drawn else "?", mid, drawn[-1][1] if drawn else "?"))


def same_output(what, variants, binary=False):
    """Every argv in variants exits 0 with the same stdout as the first."""
    outs = []
    for args in variants:
        p = nsctl(args, text=not binary)
        if p.returncode != 0 or not p.stdout:
            fail("%s: %s: exit %d, stdout %r, stderr %r" % (what, args, p.returncode,
                                                           p.stdout[:100], p.stderr[-300:]))
            return
        outs.append(p.stdout)
    for args, out in zip(variants[1:], outs[1:]):
        if out != outs[0]:
            fail("%s: %s printed %r, %s %r" % (what, args, out[:200], variants[0],
                                               outs[0][:200]))


def refused(args, words):
    p = nsctl(args, text=True)
    first = (p.stderr.strip().split("\n") or [""])[0]
    if p.returncode != 2 or not all(w in first for w in words):
        fail("%s: exit %d, first stderr line %r (want exit 2 and %s)" % (args, p.returncode,
                                                                         first, words))


def check_other_commands(tmp):
    """info, plan, tokenize, detokenize, tensor, logits, bench on ns_opt's tables: each alias,
    "=" form and bundle means what the canonical spelling means (the same output), and the
    refusals name the option as it was typed."""
    meminfo = os.path.join(tmp, "meminfo")
    with open(meminfo, "w") as f:
        f.write("MemTotal: 33554432 kB\nMemAvailable: 16777216 kB\n")
    # plan: the machine's figures from files that do not change under the test
    b = ["--mem-budget", "8MB", "--ram-budget", "0", "--meminfo", meminfo, "--cgroup-file",
         os.path.join(tmp, "none"), "--cgroup-root", os.path.join(tmp, "none")]
    tn = "blk.0.attn_q.weight"
    groups = [
        ("info", [["info", M, "--json"], ["info", "-m", M, "--json"],
                  ["info", "--model=" + M, "--json"], ["info", "--json", "-m" + M]]),
        ("plan", [["plan", M, "-c", "512", "--json"] + b,
                  ["plan", "-m", M, "-c512", "--json", "--mem-budget=8MB", "--ram-budget=0"] +
                  b[4:],
                  ["plan", "--model=" + M, "--ctx-size=512", "--json"] + b,
                  ["plan", M, "--ctx", "512", "--json"] + b]),
        ("plan -ctk", [["plan", M, "-ctk", "f16", "--json"] + b,
                       ["plan", M, "--cache-type-k=f16", "--json"] + b]),
        ("tokenize", [["tokenize", M, "--ids", "hello", "world"],
                      ["tokenize", "-m", M, "--ids", "hello", "world"],
                      ["tokenize", "--ids", M, "-p", "hello world"],
                      ["tokenize", "--model=" + M, "--ids", "--prompt=hello world"],
                      ["tokenize", M, "--ids", "--", "hello", "world"]]),
        # options after TEXT's first word are words of the text, as before
        ("tokenize text", [["tokenize", M, "--ids", "hello", "--json", "-x", "world"],
                           ["tokenize", M, "--ids", "-p", "hello --json -x world"]]),
        ("detokenize", [["detokenize", M, "300", "301", "302"],
                        ["detokenize", "-m", M, "300", "301", "302"],
                        ["detokenize", "--model=" + M, "--", "300,301", "302"]]),
    ]
    for what, variants in groups:
        same_output(what, variants)
    same_output("tensor", [["tensor", M, tn, "-o", "-", "--rows", "0:2"],
                           ["tensor", "-m", M, tn, "--output=-", "--rows=0:2"],
                           ["tensor", "--model", M, tn, "-o-", "--rows=0:2"]], binary=True)
    # logits through the pipeline: the same bytes for both spellings
    outs = []
    for i, args in enumerate((["logits", M, "--tokens", "1,2", "--threads", "1"],
                              ["logits", "-m", M, "--tokens=1,2", "-t1"])):
        out = os.path.join(tmp, "logits%d.f32" % i)
        p = nsctl(args + ["-o", out, "--mem-budget=8MB"], text=True)
        if p.returncode != 0:
            fail("%s: exit %d: %s" % (args, p.returncode, p.stderr[-300:]))
            break
        with open(out, "rb") as f:
            outs.append(f.read())
    if len(outs) == 2 and (not outs[0] or outs[0] != outs[1]):
        fail("logits -m/--tokens=/-t1: other bytes than the canonical spelling")
    # bench's llama-bench spellings: refused naming the spelling typed, nothing started
    for args, words in ((["bench", M, "--n-prompt=abc"], ["--n-prompt"]),
                        (["bench", M, "-p0", "-n0"], ["nothing to measure"]),
                        (["bench", "-m", M, "--n-gen=0", "--n-prompt", "0"],
                         ["nothing to measure"]),
                        (["bench", M, "--repetitions=0"], ["--repetitions"]),
                        (["bench", M, "-r0"], ["-r"]),
                        (["bench", M, "-t", "1025"], ["-t"]),
                        (["bench", M, "--output=xml"], ["--output"]),
                        (["bench", M, "-d", "8", "-n", "8", "--ctx-size=8"], ["-c"]),
                        (["bench", M, "-m", M], ["one model"]),
                        (["info", M, "--json=1"], ["--json", "no value"]),
                        (["plan", M, "-ctk"], ["-ctk", "missing value"]),
                        (["tensor", M, tn, "-o"], ["-o", "missing value"]),
                        (["tokenize", "-m", M, "-m", M, "x"], ["already"]),
                        (["ps", "-q"], ["unknown option -q"])):
        refused(args, words)
    # the daemons on the same parser: "=" forms and -m reach the value checks
    nsio, nsplan, nsrouter, nscompute = DAEMONS
    for argv, words in (([nsio, "-m", M, "--queue-depth=0"], ["nsio", "--queue-depth"]),
                        ([nsplan, "--session=0123456789abcdef", M, "-c0"], ["nsplan", "-c"]),
                        ([nsplan, "--session=bad-id!", M], ["nsplan", "bad-id!"]),
                        ([nsrouter, "--session=0123456789abcdef", "-m", M, "--lookahead=1025"],
                         ["nsrouter", "--lookahead"]),
                        ([nscompute, "--session=0123456789abcdef", "--model=" + M, "-c0"],
                         ["nscompute", "-c", "bad value"]),
                        ([nscompute, "--session", "0123456789abcdef", "-m", M, "-t1025"],
                         ["nscompute", "-t", "bad value"])):
        p = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=30)
        first = (p.stderr.strip().split("\n") or [""])[0]
        if p.returncode != 2 or not all(w in first for w in words):
            fail("%s: exit %d, %r (want exit 2 and %s)" % (argv, p.returncode, first, words))
    print("info, plan, tokenize, detokenize, tensor, logits, bench: aliases, = forms and "
          "bundles give the canonical spelling's output; refusals name the spelling typed")


def main():
    with tempfile.TemporaryDirectory(prefix="ns-flags-") as tmp:
        check_table()
        check_other_commands(tmp)
        check_progress(tmp)
        check_ngl()
        check_version_help()
        check_file_escape(tmp)
        check_json()
        check_seed()
        check_epipe(tmp)
    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
