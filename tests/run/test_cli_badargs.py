#!/usr/bin/env python3
"""Bad arguments on every user-facing command line: nsctl (every subcommand) and the daemons
(nsio, nsplan, nsrouter, nscompute).

A table of malformed invocations: unknown options, an option missing its value (last argument),
non-numeric / negative / fractional / overflowing / trailing-garbage numbers and sizes, zero
where zero means nothing, conflicting options, a nonexistent model, a directory, an empty file
or a non-GGUF file as the model, an output path in a nonexistent directory, impossible budgets.
Each one must, within 10 s:
  * exit non-zero, and not by a signal (2 where it is plainly bad usage);
  * print a first stderr line naming the command ("nsctl run", "nsio", ...) and the problem
    (the row's keywords), and - for usage errors - nothing else (one line, no usage dump);
  * print no sanitizer report ("runtime error", "AddressSanitizer", "LeakSanitizer").
nsio rows use a session id of their own: no shared-memory segment of it may be left behind.
Then two limits must be honoured, not only refused past: the largest --seed, and nsctl logits'
--ram-budget (fewer bytes requested than without it).
argv: NSCTL NSIO NSPLAN NSROUTER NSCOMPUTE [EVERY]. EVERY (1): under the sanitizers (3) each
list of malformed values (numbers, sizes, models) is tried one value in EVERY per option,
rotating, so every value still meets some option; the rows written out one by one all run.
Exit 0 pass, 1 fail, 77 skip (oracle missing outside CI)."""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

from run_testlib import fail, failures, require_model

NSCTL, NSIO, NSPLAN, NSROUTER, NSCOMPUTE = sys.argv[1:6]
EVERY = int(sys.argv[6]) if len(sys.argv) > 6 else 1
ORACLE = os.environ.get("NS_ORACLE_DIR", "../shared/oracle")
MODEL = os.path.join(ORACLE, "tiny/tiny-llama-Q4_K_M.gguf")
TIMEOUT = 10
SANITIZER = ("runtime error", "AddressSanitizer", "LeakSanitizer", "UndefinedBehaviorSanitizer")
COMMANDS = {"info", "logits", "bench", "run", "serve", "ps", "mkmodel", "plan", "tensor",
            "tokenize", "detokenize"}

require_model(MODEL)


def row(prog, args, rc=2, words=(), one_line=True, first=None):
    """One malformed invocation. rc: the exit code wanted (None: any non-zero, no signal);
    words: what the first stderr line must also say (case-insensitive); one_line: stderr
    must be that line alone; first: the process whose line comes first when it is not the
    command itself (a budget nsio refuses: its line, then the command's)."""
    return {"prog": prog, "args": [str(a) for a in args], "rc": rc, "words": words,
            "one_line": one_line and not first, "first": first}


_rotation = [0]


def vals(values):
    """values, or one in EVERY of them, starting one further at each call."""
    if EVERY <= 1:
        return list(values)
    _rotation[0] += 1
    return list(values)[_rotation[0] % EVERY::EVERY]


def who(r):
    if r["prog"] == NSCTL:
        a = r["args"]
        return "nsctl " + a[0] if a and a[0] in COMMANDS else "nsctl"
    return os.path.basename(r["prog"]).split("-")[0]


def check(r, sid=None):
    argv = [r["prog"]] + r["args"]
    name = " ".join([os.path.basename(r["prog"])] + [repr(a) if (not a or " " in a) else a
                                                     for a in r["args"]])
    t0 = time.monotonic()
    try:
        p = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           errors="replace", timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        fail("%s: still running after %d s" % (name, TIMEOUT))
        return 0.0
    dt = time.monotonic() - t0
    err = p.stderr
    lines = [x for x in err.split("\n") if x.strip()]
    first = lines[0] if lines else ""
    if p.returncode < 0 or p.returncode >= 128:
        fail("%s: killed by a signal / crashed (rc %d)\n%s" % (name, p.returncode, err[-2000:]))
    elif p.returncode == 0:
        fail("%s: exit 0 (stdout %r, stderr %r)" % (name, p.stdout[-300:], err[-300:]))
    elif r["rc"] is not None and p.returncode != r["rc"]:
        fail("%s: exit %d, want %d (stderr %r)" % (name, p.returncode, r["rc"], err[-400:]))
    if any(s in err for s in SANITIZER):
        fail("%s: sanitizer report\n%s" % (name, err[-3000:]))
    if not first:
        fail("%s: nothing on stderr" % name)
    else:
        low = first.lower()
        if (r["first"] or who(r)) not in first:
            fail("%s: first stderr line does not name '%s': %r" % (name, r["first"] or who(r),
                                                                   first))
        if r["first"] and not any(x.startswith(who(r) + ": ") for x in lines):
            fail("%s: no line of '%s' after %s's: %r" % (name, who(r), r["first"], err))
        for w in r["words"]:
            if w.lower() not in low:
                fail("%s: first stderr line does not say %r: %r" % (name, w, first))
        if r["one_line"] and len(lines) != 1:
            fail("%s: %d stderr lines, want one:\n%s" % (name, len(lines), err[-1500:]))
    if os.environ.get("NS_BADARGS_VERBOSE"):
        print("%-3d %s\n    %s" % (p.returncode, name, err.rstrip().replace("\n", "\n    ")))
    if sid:
        left = [f for f in os.listdir("/dev/shm") if ("-%s-" % sid) in f]
        if left:
            fail("%s: left shared memory behind: %s" % (name, left))
    return dt


def main():
    tmp = tempfile.mkdtemp(prefix="ns-badargs-", dir=os.environ.get("NS_BUILD_ROOT"))
    try:
        return run_all(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run_all(tmp):
    nofile = os.path.join(tmp, "nonexistent.gguf")
    empty = os.path.join(tmp, "empty.gguf")
    text = os.path.join(tmp, "text.gguf")
    adir = os.path.join(tmp, "adir.gguf")
    out = os.path.join(tmp, "out.bin")
    nodir = os.path.join(tmp, "no-such-dir", "out.bin")
    os.mkdir(adir)
    open(empty, "wb").close()
    with open(text, "w") as f:
        f.write("this is a text file, not a GGUF model\n" * 64)
    longname = os.path.join(tmp, "x" * 300, "model.gguf")  # a component past NAME_MAX
    # not regular files: refused at once (a FIFO used to block open() until a writer came)
    fifo = os.path.join(tmp, "fifo.gguf")
    os.mkfifo(fifo)
    sockpath = os.path.join(tmp, "sock.gguf")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(sockpath)
    bad_models = [nofile, adir, empty, text, longname, fifo, sockpath, "/dev/null"]
    m = MODEL
    # malformed numbers: each must be refused (none of these is a valid count for any option
    # below, whatever its range)
    bad_ints = ["abc", "", "12abc", "-1", " -1", "1.5", "1e3", "0x10", "99999999999999999999",
                "18446744073709551617", " 4", "4 "]
    bad_sizes = ["lots", "", "12abc", "-1", "1e99", "99999999999999999999", "16EB", "1.5", "MB",
                 "64MB,", "nan", "inf"]
    R = []

    # ---- nsctl ----
    R += [row(NSCTL, [], 2, ["usage"], one_line=False),  # the list of commands
          row(NSCTL, ["bogus"], 2, ["unknown command", "bogus"]),
          row(NSCTL, ["--bogus"], 2, ["unknown command"])]

    # info
    R += [row(NSCTL, ["info"], 2, ["MODEL"]),
          row(NSCTL, ["info", m, "--bogus"], 2, ["--bogus"]),
          row(NSCTL, ["info", m, m], 2, ["more than one"]),
          row(NSCTL, ["info", m, "--metadata"], 2, ["--json"])]
    R += [row(NSCTL, ["info", b], 2, [os.path.basename(b)]) for b in vals(bad_models)]

    # plan
    R += [row(NSCTL, ["plan"], 2, ["MODEL"]),
          row(NSCTL, ["plan", m, "--bogus"], 2, ["--bogus"]),
          row(NSCTL, ["plan", m, m], 2, ["more than one"]),
          row(NSCTL, ["plan", m, "--windows"], 2, ["--json"]),
          row(NSCTL, ["plan", m, "--mem-budget"], 2, ["--mem-budget"]),
          row(NSCTL, ["plan", m, "-c"], 2, ["-c"]),
          row(NSCTL, ["plan", m, "-c", "0"], 2, ["-c"]),
          row(NSCTL, ["plan", m, "-c", "4294967297"], 2, ["-c"]),
          row(NSCTL, ["plan", m, "--mem-budget", "4KB"], 2, ["--mem-budget", "smallest"]),
          row(NSCTL, ["plan", m, "--vram-budget", "1KB"], 2, ["--vram-budget"]),
          row(NSCTL, ["plan", m, "--reserve-vram", "1MB"], 2, ["--reserve-vram"]),
          row(NSCTL, ["plan", m, "--ram-budget", "1024TB", "--mem-budget", "1024TB"], 2,
              ["--ram-budget", "exceed"]),
          row(NSCTL, ["plan", m, "--stats", nofile], 2, ["nonexistent"]),
          row(NSCTL, ["plan", m, "--stats", text], 2, ["text.gguf"]),
          row(NSCTL, ["plan", m, "--meminfo", nofile], 2, ["nonexistent"])]
    R += [row(NSCTL, ["plan", m, "-c", v], 2, ["-c"]) for v in vals(bad_ints)]
    R += [row(NSCTL, ["plan", m, "--mem-budget", v], 2, ["--mem-budget"]) for v in vals(bad_sizes)]
    R += [row(NSCTL, ["plan", m, "--ram-budget", v], 2, ["--ram-budget"]) for v in vals(bad_sizes)]
    R += [row(NSCTL, ["plan", b], 2, [os.path.basename(b)]) for b in vals(bad_models)]

    # bench: everything refused before a single configuration starts
    R += [row(NSCTL, ["bench"], 2, ["MODEL"]),
          row(NSCTL, ["bench", m, "--bogus", "1"], 2, ["--bogus"]),
          row(NSCTL, ["bench", m, m], 2, ["one model"]),
          row(NSCTL, ["bench", m, "-p"], 2, ["-p"]),
          row(NSCTL, ["bench", m, "-p", "0", "-n", "0"], 2, ["nothing to measure"]),
          row(NSCTL, ["bench", m, "-p", "65537"], 2, ["-p"]),
          row(NSCTL, ["bench", m, "-r", "0"], 2, ["-r"]),
          row(NSCTL, ["bench", m, "-r", "abc"], 2, ["-r"]),
          row(NSCTL, ["bench", m, "--disk-repeats", "0"], 2, ["--disk-repeats"]),
          row(NSCTL, ["bench", m, "--disk-repeats", "abc"], 2, ["--disk-repeats"]),
          row(NSCTL, ["bench", m, "-c", "0"], 2, ["-c"]),
          row(NSCTL, ["bench", m, "-o", "xml"], 2, ["-o"]),
          row(NSCTL, ["bench", m, "--act", "f16"], 2, ["--act"]),
          row(NSCTL, ["bench", m, "--backend", "tpu"], 2, ["--backend"]),
          row(NSCTL, ["bench", m, "--budgets", ","], 2, ["--budgets"]),
          row(NSCTL, ["bench", m, "--budgets", "64MB,,1GB"], 2, ["--budgets"]),
          row(NSCTL, ["bench", m, "--budgets", ",".join(["1MB"] * 17)], 2, ["--budgets"]),
          row(NSCTL, ["bench", m, "--block-rows", "4294967296"], 2, ["--block-rows"]),
          row(NSCTL, ["bench", m, "--lookahead", "1025"], 2, ["--lookahead"]),
          row(NSCTL, ["bench", m, "--threads", "1025"], 2, ["--threads"]),
          # every configuration's budgets checked before anything starts, as run's
          row(NSCTL, ["bench", m, "--budgets", "4KB", "-r", "1", "-p", "1", "-n", "1",
                      "--no-disk"], 2, ["--mem-budget", "4.00 KiB", "smallest"]),
          row(NSCTL, ["bench", m, "--budgets", "16MB,64TB", "--ram-budgets", "0", "-r", "1",
                      "-p", "1", "-n", "1", "--no-disk"], 2,
              ["--mem-budget 64.00 TiB", "exceed", "available"]),
          row(NSCTL, ["bench", m, "--backend", "cuda", "--budgets", "16MB", "--ram-budgets", "0",
                      "--vram-budgets", "64MB,1KB", "-r", "1",
                      "-p", "1", "-n", "1", "--no-disk"], 2, ["--vram-budget 1.00 KiB"]),
          row(NSCTL, ["bench", m, "--budgets", "1024TB", "-r", "1", "-p", "1", "-n", "1",
                      "--no-disk"], 2, ["budget"])]
    for opt in ("-p", "-n", "-r", "--threads", "-c", "--disk-repeats"):
        R += [row(NSCTL, ["bench", m, opt, v], 2, [opt]) for v in vals(bad_ints)]
    R += [row(NSCTL, ["bench", m, "--block-rows", v], 2, ["--block-rows"]) for v in vals(bad_ints)]
    R += [row(NSCTL, ["bench", m, "--budgets", v], 2, ["--budgets"]) for v in vals(bad_sizes)]
    R += [row(NSCTL, ["bench", b, "--no-disk"], 2, [os.path.basename(b)]) for b in vals(bad_models)]

    # run: no pipeline is started for any of these
    R += [row(NSCTL, ["run"], 2, ["MODEL"]),
          row(NSCTL, ["run", m, "-p", "x", "extra"], 2, ["extra"]),
          row(NSCTL, ["run", m, "--bogus", "1"], 2, ["--bogus"]),
          row(NSCTL, ["run", m, "--bogus"], 2, ["--bogus"]),
          row(NSCTL, ["run", m, "-n"], 2, ["-n"]),
          row(NSCTL, ["run", m, "-p"], 2, ["-p"]),
          row(NSCTL, ["run", m, "-n", "-2"], 2, ["-n"]),
          row(NSCTL, ["run", m, "-c", "0"], 2, ["-c"]),
          row(NSCTL, ["run", m, "--temp", "-1"], 2, ["--temp"]),
          row(NSCTL, ["run", m, "--temp", "nan"], 2, ["--temp"]),
          row(NSCTL, ["run", m, "--top-p", "2"], 2, ["--top-p"]),
          row(NSCTL, ["run", m, "--min-p", "-0.1"], 2, ["--min-p"]),
          row(NSCTL, ["run", m, "--repeat-penalty", "0"], 2, ["--repeat-penalty"]),
          row(NSCTL, ["run", m, "--seed", "18446744073709551616"], 2, ["--seed"]),
          row(NSCTL, ["run", m, "--lookahead", "1025"], 2, ["--lookahead"]),
          row(NSCTL, ["run", m, "--threads", "1025"], 2, ["--threads"]),
          row(NSCTL, ["run", m, "--block-rows", "4294967296"], 2, ["--block-rows"]),
          row(NSCTL, ["run", m, "--reasoning", "extreme"], 2, ["--reasoning"]),
          row(NSCTL, ["run", m, "--backend", "tpu"], 2, ["--backend"]),
          row(NSCTL, ["run", m, "--act", "f16"], 2, ["--act"]),
          row(NSCTL, ["run", m, "--wrap", "nsfoo=strace"], 2, ["--wrap"]),
          row(NSCTL, ["run", m, "--wrap", "nsio"], 2, ["--wrap"]),
          row(NSCTL, ["run", m, "--wrap", "nsio="], 2, ["--wrap"]),
          row(NSCTL, ["run", m, "--raw", "--chat"], 2, ["--raw"]),
          row(NSCTL, ["run", m, "--raw", "--final-only"], 2, ["--raw"]),
          # refused from the model file, before any process starts (m: dense, llama template)
          row(NSCTL, ["run", m, "-p", "x", "--warmup", "hello"], 2, ["--warmup", "experts"]),
          row(NSCTL, ["run", m, "-p", "x", "--final-only"], 2, ["--final-only", "harmony"]),
          row(NSCTL, ["run", m, "-p", "x", "--thinking"], 2, ["--thinking", "Gemma 4"]),
          row(NSCTL, ["run", m, "--raw", "--thinking"], 2, ["--raw"]),
          row(NSCTL, ["run", m, "--reserve-vram", "1MB"], 2, ["--reserve-vram"]),
          row(NSCTL, ["run", m, "--mem-budget", "4KB"], 2, ["--mem-budget", "smallest"]),
          row(NSCTL, ["run", m, "--mem-budget", "4KB", "--no-plan"], 2, ["smallest"],
              first="nsio"),
          row(NSCTL, ["run", m, "--vram-budget", "1KB"], 2, ["--vram-budget"]),
          row(NSCTL, ["run", m, "--ram-budget", "1024TB"], 2, ["available", "needs"]),
          row(NSCTL, ["run", m, "--ram-budget", "64TB", "--mem-budget", "64TB"], 2,
              ["--mem-budget 64.00 TiB", "exceed", "available"]),
          row(NSCTL, ["run", m, "--ram-budget", "0", "--mem-budget", "1024TB"], 2,
              ["budget"])]
    R += [row(NSCTL, ["run", m, "-n", v], 2, ["-n"]) for v in vals(bad_ints) if v != "-1"]
    for opt in ("--top-k", "--repeat-last-n", "--seed", "--block-rows", "--lookahead",
                "-c", "--threads"):
        # --seed -1 is llama.cpp's "a random seed" (tests/run/test_cli_flags.py)
        R += [row(NSCTL, ["run", m, opt, v], 2, [opt]) for v in vals(bad_ints)
              if not (opt == "--seed" and v == "-1")]
    # the same refusals through llama.cpp's spellings, "=" forms and bundles (ns_opt.c):
    # the message names the option as it was typed
    for opt in ("-s", "-t", "--ctx-size", "-b", "--batch-size", "-ngl", "--n-gpu-layers",
                "--n-predict", "--predict"):
        R += [row(NSCTL, ["run", m, opt, v], 2, [opt]) for v in vals(bad_ints)
              if not (v == "-1" and opt in ("-s", "-ngl", "--n-gpu-layers", "--n-predict",
                                            "--predict"))]
    R += [row(NSCTL, ["run", m, "--%s=%s" % (opt, v)], 2, ["--" + opt])
          for opt in ("temp", "top-k", "ctx-size", "threads", "seed", "mem-budget")
          for v in ("abc", "", "12abc")]
    R += [row(NSCTL, ["run", m, "-n" + v], 2, ["-n"]) for v in ("abc", "-2", "1.5", "5x")]
    R += [row(NSCTL, ["run", m, "-t" + v], 2, ["-t"]) for v in ("abc", "1025", "-1")]
    R += [row(NSCTL, ["run", m, "-c0"], 2, ["-c"]),
          row(NSCTL, ["run", m, "-s"], 2, ["-s", "missing value"]),
          row(NSCTL, ["run", m, "-ngl"], 2, ["-ngl", "missing value"]),
          row(NSCTL, ["run", m, "--ctx-size"], 2, ["--ctx-size", "missing value"]),
          row(NSCTL, ["run", m, "--json=1"], 2, ["--json", "no value"]),
          row(NSCTL, ["run", m, "--no-warmup=yes"], 2, ["--no-warmup", "no value"]),
          row(NSCTL, ["run", m, "-X"], 2, ["unknown option -X"]),
          row(NSCTL, ["run", m, "-eX"], 2, ["unknown option -X"]),
          row(NSCTL, ["run", m, "--bogus=1"], 2, ["unknown option --bogus"]),
          row(NSCTL, ["run", m, "-m", m], 2, ["-m", "already"]),
          row(NSCTL, ["run", "-m", m, m], 2, ["unexpected", "prompt"]),
          row(NSCTL, ["run", m, "-f", nofile], 2, ["-f", "nonexistent", "No such file"]),
          row(NSCTL, ["run", m, "-f", adir], 2, ["-f", "adir.gguf"]),
          row(NSCTL, ["run", m, "--file"], 2, ["--file", "missing value"]),
          row(NSCTL, ["run", m, "-ngl", "all", "--backend", "cpu"], 2, ["-ngl", "cpu"]),
          row(NSCTL, ["run", m, "--temp=-1"], 2, ["--temp"]),
          row(NSCTL, ["run", m, "--", "-p"], 2, ["unexpected", "-p"])]
    # serve's command line (the same parser; nothing starts for these)
    R += [row(NSCTL, ["serve"], 2, ["MODEL"]),
          row(NSCTL, ["serve", m, "--bogus"], 2, ["unknown option --bogus"]),
          row(NSCTL, ["serve", m, m], 2, ["unexpected"]),
          row(NSCTL, ["serve", "-m", m, m], 2, ["unexpected"]),
          row(NSCTL, ["serve", m, "--port"], 2, ["--port", "missing value"]),
          row(NSCTL, ["serve", m, "--port=65536"], 2, ["--port"]),
          row(NSCTL, ["serve", m, "-np", "0"], 2, ["-np"]),
          row(NSCTL, ["serve", m, "--parallel=65"], 2, ["--parallel"]),
          row(NSCTL, ["serve", m, "-a", ""], 2, ["--alias"]),
          row(NSCTL, ["serve", m, "--api-key="], 2, ["--api-key", "empty"]),
          row(NSCTL, ["serve", m, "--api-key-file", nofile], 2, ["--api-key-file"]),
          row(NSCTL, ["serve", m, "--max-body=1B"], 2, ["--max-body"]),
          row(NSCTL, ["serve", m, "--no-prompt-reuse=1"], 2, ["no value"]),
          row(NSCTL, ["serve", m, "-c", "0"], 2, ["-c"]),
          row(NSCTL, ["serve", m, "-t", "1025"], 2, ["-t"])]
    R += [row(NSCTL, ["serve", m, opt, v], 2, [opt]) for v in vals(bad_ints)
          for opt in ("--port", "--queue", "--grace", "--prefill-chunk")]
    for opt in ("--temp", "--top-p"):
        R += [row(NSCTL, ["run", m, opt, v], 2, [opt]) for v in ("abc", "", "0.5x", "1e99")]
    for opt in ("--mem-budget", "--ram-budget", "--vram-budget"):
        R += [row(NSCTL, ["run", m, opt, v], 2, [opt]) for v in vals(bad_sizes)]
    R += [row(NSCTL, ["run", b, "-n", "1"], 2, [os.path.basename(b)]) for b in vals(bad_models)]
    R += [row(NSCTL, ["run", b, "-n", "1", "--no-plan", "--mem-budget", "8MB"], 2,
              [os.path.basename(b)]) for b in vals(bad_models)]

    # logits
    lg = ["--tokens", "1,2", "-o", out]
    R += [row(NSCTL, ["logits"], 2, ["MODEL"]),
          row(NSCTL, ["logits", m, "-o", out], 2, ["--tokens"]),
          row(NSCTL, ["logits", m, "--tokens", "1,2"], 2, ["-o"]),
          row(NSCTL, ["logits", m, "--tokens", "1,2", "-o"], 2, ["-o"]),
          row(NSCTL, ["logits", m] + lg + ["--bogus", "1"], 2, ["--bogus"]),
          row(NSCTL, ["logits", m, m] + lg, 2, ["unexpected"]),
          # the in-process providers left nsctl for a test tool (tests/forward/fwd_logits)
          row(NSCTL, ["logits", m] + lg + ["--provider", "ref"], 2, ["--provider", "unknown"]),
          row(NSCTL, ["logits", m] + lg + ["--act", "f16"], 2, ["--act"]),
          row(NSCTL, ["logits", m] + lg + ["--threads", "0"], 2, ["--threads"]),
          row(NSCTL, ["logits", m] + lg + ["--threads", "1025"], 2, ["--threads"]),
          row(NSCTL, ["logits", m] + lg + ["--lookahead", "1025"], 2, ["--lookahead"]),
          row(NSCTL, ["logits", m] + lg + ["--block-rows", "4294967296"], 2, ["--block-rows"]),
          row(NSCTL, ["logits", m] + lg + ["--mem-budget", "lots"], 2, ["--mem-budget"]),
          row(NSCTL, ["logits", m] + lg + ["--ram-budget", "-1"], 2, ["--ram-budget"]),
          row(NSCTL, ["logits", m] + lg + ["--mem-budget", "4KB"], 2, ["smallest"],
              first="nsio"),
          row(NSCTL, ["logits", m, "--tokens", "1,99999999", "-o", out], 2, ["99999999"]),
          row(NSCTL, ["logits", m, "--tokens", "1,2", "-o", nodir], None, ["no-such-dir"])]
    for v in ("", "1,,2", "1,", ",1", "-1", "1,abc", "12abc", "99999999999", "1 2", "0x10",
              "1.5"):
        R.append(row(NSCTL, ["logits", m, "--tokens", v, "-o", out], 2, ["--tokens"]))
    for opt in ("--threads", "--block-rows", "--lookahead"):
        R += [row(NSCTL, ["logits", m] + lg + [opt, v], 2, [opt]) for v in vals(bad_ints)]
    R += [row(NSCTL, ["logits", m] + lg + ["--mem-budget", v], 2, ["--mem-budget"])
          for v in vals(bad_sizes)]
    R += [row(NSCTL, ["logits", b] + lg, 2, [os.path.basename(b)]) for b in vals(bad_models)]

    # tensor
    tn = "blk.0.attn_q.weight"
    R += [row(NSCTL, ["tensor"], 2, ["no MODEL"]),
          row(NSCTL, ["tensor", m], 2, ["no tensor NAME"]),
          row(NSCTL, ["tensor", m, tn], 2, ["-o FILE is required"]),
          row(NSCTL, ["tensor", m, tn, "-o"], 2, ["missing", "-o"]),
          row(NSCTL, ["tensor", m, tn, "-o", out, "--rows"], 2, ["missing", "--rows"]),
          row(NSCTL, ["tensor", m, tn, "-o", out, "--bogus"], 2, ["--bogus"]),
          row(NSCTL, ["tensor", m, tn, "extra", "-o", out], 2, ["extra"]),
          row(NSCTL, ["tensor", m, "no.such.tensor", "-o", out], 2, ["no.such.tensor"]),
          row(NSCTL, ["tensor", m, tn, "-o", nodir], None, ["no-such-dir"]),
          row(NSCTL, ["tensor", m, tn, "-o", adir], None, ["adir"])]
    for v in ("5", "5:3", "a:b", "-1:2", "1:2:3", ":99999999999999999999", "0:100000000",
              "1x:2", ""):
        R.append(row(NSCTL, ["tensor", m, tn, "--rows", v, "-o", out], 2, ["--rows"]))
    R += [row(NSCTL, ["tensor", b, tn, "-o", out], 2, [os.path.basename(b)])
          for b in vals(bad_models)]

    # tokenize / detokenize
    R += [row(NSCTL, ["tokenize"], 2, ["MODEL"]),
          row(NSCTL, ["tokenize", m], 2, ["TEXT"]),
          row(NSCTL, ["tokenize", m, "--bogus", "hi"], 2, ["--bogus"]),
          row(NSCTL, ["tokenize", m, "--json", "--ids", "hi"], 2, ["--json", "--ids"]),
          row(NSCTL, ["tokenize", m, "--chat", "--chat-template", "gptoss", "--reasoning",
                      "extreme", "hi"], 2, ["--reasoning", "extreme"]),
          row(NSCTL, ["tokenize", m, "--chat", "--chat-template", "gptoss", "--chat-date",
                      "notadate", "hi"], 2, ["notadate"]),
          row(NSCTL, ["tokenize", m, "--system"], 2, ["--system"]),
          row(NSCTL, ["tokenize", m, "--chat", "--chat-template", "llama32", "--chat-date",
                      "2024-13-45", "hi"], 2, ["2024-13-45"]),
          row(NSCTL, ["tokenize", m, "--chat", "--chat-template", "nope", "hi"], 2, ["nope"]),
          row(NSCTL, ["tokenize", m, "--chat", "--chat-template"], 2, ["--chat-template"])]
    # month 1-12, day 1..days in that month (2024 and 2000 are leap years; 2023, 2100 not)
    for d in ("2024-13-01", "2024-00-10", "2024-01-00", "2024-04-31", "2023-02-29",
              "2100-02-29", "2024-12-32"):
        R.append(row(NSCTL, ["tokenize", m, "--chat", "--chat-template", "gptoss",
                             "--chat-date", d, "hi"], 2, [d]))
    R += [row(NSCTL, ["tokenize", b, "hi"], 2, [os.path.basename(b)]) for b in vals(bad_models)]
    R += [row(NSCTL, ["detokenize"], 2, ["MODEL"]),
          row(NSCTL, ["detokenize", m], 2, ["IDS"]),
          row(NSCTL, ["detokenize", m, "--json"], 2, ["IDS"]),
          row(NSCTL, ["detokenize", m, "--bogus", "1"], 2, ["--bogus"]),
          row(NSCTL, ["detokenize", m, "1", "999999"], 2, ["999999"])]
    for v in ("abc", "-1", "12abc", "1.5", "0x10", "99999999999", "99999999999999999999"):
        R.append(row(NSCTL, ["detokenize", m, v], 2, [v]))
    R += [row(NSCTL, ["detokenize", b, "1"], 2, [os.path.basename(b)]) for b in vals(bad_models)]

    # mkmodel (nothing is written for these)
    mk = ["--preset", "demo", "-o", out]
    R += [row(NSCTL, ["mkmodel"], 2, ["--preset"]),
          row(NSCTL, ["mkmodel", "--preset", "demo"], 2, ["-o"]),
          row(NSCTL, ["mkmodel", "-o", out], 2, ["--preset"]),
          row(NSCTL, ["mkmodel", "--preset"], 2, ["--preset"]),
          row(NSCTL, ["mkmodel", "--bogus"], 2, ["--bogus", "unknown"]),
          row(NSCTL, ["mkmodel", "--bogus", "1"], 2, ["--bogus"]),
          row(NSCTL, ["mkmodel", "--preset", "nope", "-o", out], 2, ["nope"]),
          row(NSCTL, ["mkmodel"] + mk + ["--layers", "0"], 2, ["--layers"]),
          row(NSCTL, ["mkmodel"] + mk + ["--layers", "100001"], 2, ["--layers"]),
          row(NSCTL, ["mkmodel"] + mk + ["--split", "0"], 2, ["--split"]),
          row(NSCTL, ["mkmodel"] + mk + ["--seed", "18446744073709551616"], 2, ["--seed"]),
          row(NSCTL, ["mkmodel"] + mk + ["--quant", "q3"], 2, ["q3"]),
          row(NSCTL, ["mkmodel"] + mk + ["--split", "2"], 2, ["split"]),
          row(NSCTL, ["mkmodel", "--preset", "demo", "--layers", "1", "-o", nodir], None,
              ["no-such-dir"]),
          row(NSCTL, ["mkmodel", "--preset", "demo", "--layers", "1", "-o", adir], None,
              ["adir"]),
          # an existing file is never replaced without --force (a real model, here a text)
          row(NSCTL, ["mkmodel", "--preset", "demo", "--layers", "1", "-o", text], 2,
              ["text.gguf", "exists", "--force"])]
    for opt in ("--layers", "--split", "--seed"):
        R += [row(NSCTL, ["mkmodel"] + mk + [opt, v], 2, [opt]) for v in vals(bad_ints)]

    # ps
    R += [row(NSCTL, ["ps", "--bogus"], 2, ["--bogus"]),
          row(NSCTL, ["ps", "extra"], 2, ["extra"])]

    # ---- daemons ----
    sid = ("badargs%x" % os.getpid())[:16]
    io = ["--model", m, "--session", sid, "--quiet"]
    nsio_rows = [row(NSIO, [], 2, ["--model", "required"]),
                 row(NSIO, ["--model"], 2, ["--model"]),
                 row(NSIO, io + ["--bogus"], 2, ["--bogus"]),
                 row(NSIO, io + ["-x"], 2, ["-x"]),
                 row(NSIO, io + ["extra"], 2, ["extra"]),
                 row(NSIO, io + ["--mem-budget"], 2, ["--mem-budget"]),
                 row(NSIO, io + ["--mem-budget", "0"], 2, ["--mem-budget"]),
                 row(NSIO, io + ["--queue-depth", "0"], 2, ["--queue-depth"]),
                 row(NSIO, io + ["--queue-depth", "4097"], 2, ["--queue-depth"]),
                 row(NSIO, io + ["--block-bytes", "1000"], 2, ["--block-bytes"]),
                 row(NSIO, io + ["--block-bytes", "2GB"], 2, ["--block-bytes"]),
                 row(NSIO, io + ["--lookahead", "1025"], 2, ["--lookahead"]),
                 row(NSIO, io + ["--block-rows", "4294967296"], 2, ["--block-rows"]),
                 row(NSIO, io + ["--restart-quarantine-ms", "600001"], 2, ["--restart"]),
                 row(NSIO, ["--model", m, "--session", "bad-id!"], 2, ["--session"]),
                 row(NSIO, ["--model", m, "--session", ""], 2, ["--session"]),
                 row(NSIO, io + ["--mem-budget", "4KB"], 2, ["smallest"])]
    for opt in ("--queue-depth", "--block-rows", "--lookahead", "--restart-quarantine-ms",
                "--plan-wait-ms"):
        nsio_rows += [row(NSIO, io + [opt, v], 2, [opt]) for v in vals(bad_ints)]
    for opt in ("--mem-budget", "--ram-budget", "--block-bytes"):
        nsio_rows += [row(NSIO, io + [opt, v], 2, [opt]) for v in vals(bad_sizes)]
    # a model nsio or nscompute cannot open (missing, a directory, no GGUF): bad input, exit 2
    # like every other command (nsctl checks the path before starting them)
    nsio_rows += [row(NSIO, ["--model", b, "--session", sid, "--mem-budget", "8MB"], 2,
                      [os.path.basename(b)]) for b in vals(bad_models)]

    sess = ["--session", sid]
    R += [row(NSPLAN, [], 2, ["--session", "required"]),
          row(NSPLAN, [m], 2, ["--session", "required"]),
          row(NSPLAN, sess, 2, ["no MODEL"]),
          row(NSPLAN, ["--session", "bad-id!", m], 2, ["--session", "bad-id!"]),
          row(NSPLAN, sess + [m, "--bogus", "1"], 2, ["--bogus"]),
          row(NSPLAN, sess + [m, "--bogus"], 2, ["--bogus", "unknown"]),
          row(NSPLAN, sess + [m, m], 2, ["more than one"]),
          row(NSPLAN, sess + [m, "-c", "0"], 2, ["-c"]),
          row(NSPLAN, sess + [m], 1, [sid])]  # no such session
    R += [row(NSPLAN, sess + [m, "-c", v], 2, ["-c"]) for v in vals(bad_ints)]
    for opt in ("--mem-budget", "--ram-budget", "--vram-budget", "--reserve-vram"):
        R += [row(NSPLAN, sess + [m, opt, v], 2, [opt]) for v in vals(bad_sizes)]
    R += [row(NSPLAN, sess + [b], 2, [os.path.basename(b)]) for b in vals(bad_models)]

    rt = ["--session", sid, "--model", m]
    R += [row(NSROUTER, [], 2, ["--session", "required"]),
          row(NSROUTER, ["--model", m], 2, ["--session", "required"]),
          row(NSROUTER, ["--session", sid], 2, ["--model", "required"]),
          row(NSROUTER, rt + ["--session"], 2, ["--session"]),
          row(NSROUTER, rt + ["--bogus", "1"], 2, ["--bogus"]),
          row(NSROUTER, rt + ["--bogus"], 2, ["--bogus"]),
          row(NSROUTER, rt + ["extra"], 2, ["extra"]),
          row(NSROUTER, ["--session", "bad-id!", "--model", m], 2, ["--session"]),
          row(NSROUTER, rt + ["--lookahead", "1025"], 2, ["--lookahead"]),
          row(NSROUTER, rt + ["--block-rows", "4294967296"], 2, ["--block-rows"])]
    for opt in ("--block-rows", "--lookahead"):
        R += [row(NSROUTER, rt + [opt, v], 2, [opt]) for v in vals(bad_ints)]
    R += [row(NSROUTER, ["--session", sid, "--model", b], 2, [os.path.basename(b)])
          for b in vals(bad_models)]

    R += [row(NSCOMPUTE, [], 2, ["--session", "required"]),
          row(NSCOMPUTE, ["--model", m], 2, ["--session", "required"]),
          row(NSCOMPUTE, ["--session", sid], 2, ["--model", "required"]),
          row(NSCOMPUTE, rt + ["--model"], 2, ["--model"]),
          row(NSCOMPUTE, rt + ["--bogus", "1"], 2, ["--bogus"]),
          row(NSCOMPUTE, rt + ["--bogus"], 2, ["--bogus"]),
          row(NSCOMPUTE, rt + ["extra"], 2, ["extra"]),
          row(NSCOMPUTE, ["--session", "bad-id!", "--model", m], 2, ["--session"]),
          row(NSCOMPUTE, rt + ["--backend", "tpu"], 2, ["tpu"]),
          row(NSCOMPUTE, rt + ["--act", "f16"], 2, ["--act"]),
          row(NSCOMPUTE, rt + ["-c", "0"], 2, ["-c"]),
          row(NSCOMPUTE, rt + ["--threads", "1025"], 2, ["--threads"]),
          row(NSCOMPUTE, rt + ["--lookahead", "1025"], 2, ["--lookahead"]),
          row(NSCOMPUTE, rt + ["--block-rows", "4294967296"], 2, ["--block-rows"])]
    for opt in ("--threads", "--block-rows", "--lookahead", "-c"):
        R += [row(NSCOMPUTE, rt + [opt, v], 2, [opt]) for v in vals(bad_ints)]
    R += [row(NSCOMPUTE, rt + ["--vram-budget", v], 2, ["--vram-budget"]) for v in vals(bad_sizes)]
    R += [row(NSCOMPUTE, ["--session", sid, "--model", b], 2, [os.path.basename(b)])
          for b in vals(bad_models)]

    t0 = time.monotonic()
    slow = []
    for r in R:
        slow.append((check(r), r))
    for r in nsio_rows:
        slow.append((check(r, sid), r))
    for p in (out,):
        if os.path.exists(p):
            fail("%s was written by a refused command" % p)
    with open(text) as f:
        if f.read() != "this is a text file, not a GGUF model\n" * 64:
            fail("%s was overwritten by a refused command" % text)
    left = [f for f in os.listdir(tmp) if f.startswith("text.gguf.")]
    if left:
        fail("temporary files left beside a refused output: %s" % left)

    # ... and the limits are honoured, not just refused past: the largest seed is taken whole;
    # nsctl logits' --ram-budget gives nsio a RAM tier (it was dropped without nsplan)
    ok = [NSCTL, "run", m, "-p", "hi", "-n", "2", "--seed", "18446744073709551615",
          "--mem-budget", "8MB", "--ram-budget", "0"]
    p = subprocess.run(ok, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       errors="replace", timeout=60)
    if p.returncode != 0:
        fail("run --seed 18446744073709551615: exit %d: %s" % (p.returncode, p.stderr[-400:]))
    for d in ("2024-02-29", "2000-02-29", "2023-12-31", "2023-04-30"):  # real dates pass
        p = subprocess.run([NSCTL, "tokenize", m, "--chat", "--chat-template", "gptoss",
                            "--chat-date", d, "--print-prompt", "hi"], stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, errors="replace", timeout=60)
        if p.returncode != 0 or d not in p.stdout:
            fail("tokenize --chat-date %s: exit %d: %s" % (d, p.returncode, p.stderr[-400:]))
    req = []
    for ram in ([], ["--ram-budget", "1MB"]):
        p = subprocess.run([NSCTL, "logits", m, "--tokens", "1,2,3", "-o", out, "--mem-budget",
                            "8MB"] + ram, stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, errors="replace", timeout=60)
        got = p.stderr.split("streamed: ")[-1].split(" bytes requested")[0]
        if p.returncode != 0 or not got.isdigit():
            fail("logits %s: exit %d: %s" % (ram, p.returncode, p.stderr[-400:]))
        req.append(int(got) if got.isdigit() else -1)
    if len(req) == 2 and not req[1] < req[0]:
        fail("logits --ram-budget 1MB requested %d bytes, without it %d: no RAM tier" %
             (req[1], req[0]))
    slow.sort(key=lambda x: -x[0])
    print("%d invocations in %.1f s; slowest: %s" % (
        len(R) + len(nsio_rows), time.monotonic() - t0,
        ", ".join("%.2fs %s %s" % (d, os.path.basename(r["prog"]), " ".join(r["args"][:2]))
                  for d, r in slow[:3])))
    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    print("all refused cleanly")
    return 0


if __name__ == "__main__":
    sys.exit(main())
