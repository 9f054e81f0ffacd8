#!/usr/bin/env python3
"""Liveness: SIGSTOP on each daemon of `nsctl run --stall-timeout 2` mid-generation.

nsio, nsplan and nsrouter publish heartbeats (shm/layout.h); a stopped one stops beating, and
nsctl must say "VICTIM made no progress for 2.0 s ... restarting it" within the stated 2 s
(plus SLACK for the supervisor's 50 ms tick and the machine), restart it, and finish with
exactly the text of an undisturbed run. A stopped nscompute must end the run with one line
("nscompute made no progress", exit 1) in the same time. Afterwards nothing of the session
is left (processes, segments, runtime dir). The model is the oracle's tiny Qwen3-MoE (nsrouter
runs). argv: NSCTL. Exit 0 pass, 1 fail, 77 skip (oracle missing outside CI)."""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from run_testlib import fail, failures, require_model

NSCTL = sys.argv[1]
ORACLE = os.environ.get("NS_ORACLE_DIR", "../shared/oracle")
MODEL = os.path.join(ORACLE, "tiny/tiny-qwen3moe-Q4_K_M.gguf")
STALL = 2.0
SLACK = 1.0
# nsplan and nsrouter are off the hot path once the run is under way: the run must outlast
# STALL + SLACK after the stop (400 tokens at ~200 tok/s once ended first: no line to see)
ARGS = ["run", MODEL, "-p", "Once upon a time", "-n", "800", "--ignore-eos", "--temp", "0",
        "--mem-budget", "256KB", "--block-rows", "4", "--threads", "1",
        "--stall-timeout", "%d" % STALL]

require_model(MODEL)


def child(ppid, comm):
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % p) as f:
                s = f.read()
        except OSError:
            continue
        rest = s[s.rindex(")") + 2:].split()
        if int(rest[1]) == ppid and s[s.index("(") + 1:s.rindex(")")] == comm:
            return int(p)
    return 0


def run(env, victim, out, err):
    with open(out, "wb") as o, open(err, "wb") as e:
        p = subprocess.Popen([NSCTL] + ARGS, stdout=o, stderr=e, env=env)
    t_stop, t0 = None, time.monotonic()
    while p.poll() is None:
        if time.monotonic() - t0 > 90:  # never noticed: the run hangs on the stopped process
            fail("%s: nsctl still running 90 s after the start" % victim)
            pid = child(p.pid, victim) if victim else 0
            if pid:
                os.kill(pid, signal.SIGCONT)
            p.kill()
            break
        if victim and t_stop is None and os.path.getsize(out) >= 40:  # mid-generation
            pid = child(p.pid, victim)
            if pid:
                os.kill(pid, signal.SIGSTOP)
                t_stop = time.monotonic()
        if t_stop is not None and victim:
            with open(err, "rb") as f:
                if b"%s made no progress" % victim.encode() in f.read():
                    noticed = time.monotonic() - t_stop
                    victim = None  # measured once
                    run.noticed = noticed
        time.sleep(0.01)
    return p.wait(), t_stop


def main():
    tmp = tempfile.mkdtemp(prefix="ns-stall-")
    rundirs = os.path.join(tmp, "run")
    os.mkdir(rundirs, 0o700)
    user = "nsst%d" % os.getpid()
    env = dict(os.environ, USER=user, XDG_RUNTIME_DIR=rundirs)
    out, err = os.path.join(tmp, "out"), os.path.join(tmp, "err")
    try:
        rc, _ = run(env, None, out, err)
        with open(out, "rb") as f:
            want = f.read()
        if rc != 0:
            fail("undisturbed run: exit %d" % rc)
            return 1
        for victim in ("nsio", "nsplan", "nsrouter", "nscompute"):
            run.noticed = None
            rc, t_stop = run(env, victim, out, err)
            with open(out, "rb") as f:
                got = f.read()
            with open(err) as f:
                etext = f.read()
            lines = [x for x in etext.splitlines() if "made no progress" in x]
            if t_stop is None:
                fail("%s: never stopped (no text, or no such process)" % victim)
                continue
            if len(lines) != 1 or run.noticed is None or run.noticed > STALL + SLACK:
                fail("%s: stopped, want one 'made no progress' line within %.1f s, got %d "
                     "after %s s:\n%s" % (victim, STALL + SLACK, len(lines), run.noticed,
                                          etext[-2000:]))
            if victim == "nscompute":
                if rc != 1 or "the run ends" not in lines[0] if lines else True:
                    fail("nscompute stopped: exit %d, want 1 and 'the run ends':\n%s" %
                         (rc, etext[-2000:]))
            elif rc != 0 or got != want or "restarting it" not in (lines[0] if lines else ""):
                fail("%s stopped: exit %d, text %s, line %r" % (victim, rc,
                     "unchanged" if got == want else "changed", lines))
            left = [f for f in os.listdir("/dev/shm") if f.startswith("ns-%s-" % user)]
            if left or os.listdir(rundirs):
                fail("%s stopped: left %s %s" % (victim, left, os.listdir(rundirs)))
            if not failures:
                print("%-9s SIGSTOP: noticed after %.2f s (stated %.1f s)%s" % (
                    victim, run.noticed, STALL, ", the run ended with one line"
                    if victim == "nscompute" else ", restarted, text unchanged"), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failures else 0


sys.exit(main())
