#!/usr/bin/env python3
"""Kill matrix: SIGKILL each process of `nsctl run` at random moments, ROUNDS times each.

Model: the oracle's tiny Qwen3-MoE (so nsrouter runs too), greedy, a small arena so that the
run streams for about a second. For every victim (nsio, nsplan, nsrouter, nscompute, nsctl)
and round, the victim is killed at a uniformly random moment in [0, min(WINDOW, 0.8 x an
undisturbed run's length)] s after nsctl starts (or the moment it appears, if it has not
started yet by then). Then:
  * nsio / nsplan / nsrouter: nsctl restarts it, exits 0 and the text equals an undisturbed
    run's, byte for byte;
  * nscompute: nsctl exits 1 with the line 'nscompute died';
  * nsctl: its keeper (engine_keeper.c) removes the session;
and, within LIMIT s of nsctl's end (its exit, or the kill for nsctl itself), no process of the
session is alive (every descendant nsctl had, by pid and start time, the keeper included), no
/dev/shm segment and no runtime dir of the session is left. Each run has its own $USER and
$XDG_RUNTIME_DIR so that every name it can make is known, whatever else runs on the machine.
Prints the time to clean per victim (median, max). argv: NSCTL [ROUNDS]. Exit 0 pass, 1 fail,
77 skip (oracle missing outside CI)."""
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from run_testlib import alive, descendants, fail, failures, require_model

NSCTL = sys.argv[1]
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 20
ORACLE = os.environ.get("NS_ORACLE_DIR", "../shared/oracle")
MODEL = os.path.join(ORACLE, "tiny/tiny-qwen3moe-Q4_K_M.gguf")
VICTIMS = ["nsio", "nsplan", "nsrouter", "nscompute", "nsctl"]
WINDOW = 1.2   # s after nsctl starts: the kill moment is uniform in [0, WINDOW], at most
               # 0.8 of an undisturbed run's length (a round the run outpaces is retried
               # earlier, up to 3 times)
LIMIT = 2.0    # s from nsctl's end until nothing of the session may be left
ARGS = ["run", MODEL, "-p", "Once upon a time", "-n", "40", "--ignore-eos", "--temp", "0",
        "--mem-budget", "256KB", "--block-rows", "4", "--threads", "1"]

require_model(MODEL)


def leftovers(user, rundir_parent, known):
    shm = [f for f in os.listdir("/dev/shm") if f.startswith("ns-%s-" % user)]
    dirs = os.listdir(rundir_parent)
    procs = ["%s %d" % (c, p) for (p, s), c in known.items() if alive(p, s)]
    return shm, dirs, procs


def run_once(env, victim, delay, out, err):
    """Start nsctl run, kill the victim at delay s; return (rc, t_end, known processes)."""
    known = {}
    with open(out, "wb") as o, open(err, "wb") as e:
        p = subprocess.Popen([NSCTL] + ARGS, stdout=o, stderr=e, env=env)
    t0 = time.monotonic()
    killed = victim is None
    while p.poll() is None:
        descendants(p.pid, known)
        now = time.monotonic() - t0
        if not killed and now >= delay:
            if victim == "nsctl":
                os.kill(p.pid, signal.SIGKILL)
                killed = True
            else:
                for (pid, start), comm in known.items():
                    if comm == victim and alive(pid, start):
                        os.kill(pid, signal.SIGKILL)
                        killed = True
                        break
        if now > 120:
            p.kill()
            fail("%s: nsctl still running after 120 s" % victim)
        time.sleep(0.003)
    rc = p.wait()
    return rc, time.monotonic(), known, killed


def finished_first(victim, rc, err):
    """True when the kill landed after the run had done its work: nsctl had every token and
    was stopping its children (one 'ended with ... at shutdown' line, exit 0). Such a round
    did not test a death mid-run; it is retried earlier like a run that outpaced the kill."""
    if victim != "nscompute" or rc != 0:
        return False
    with open(err, "rb") as f:
        return b"nscompute ended with" in f.read()


def main():
    seed = int(os.environ.get("NS_KILL_SEED", "0")) or random.randrange(1, 1 << 30)
    rng = random.Random(seed)
    print("seed %d (NS_KILL_SEED=%d repeats it), %d rounds per victim" % (seed, seed, ROUNDS),
          flush=True)
    tmp = tempfile.mkdtemp(prefix="ns-killm-")
    rundirs = os.path.join(tmp, "run")
    os.mkdir(rundirs, 0o700)
    user = "nskm%d" % os.getpid()
    env = dict(os.environ, USER=user, XDG_RUNTIME_DIR=rundirs)
    out, err = os.path.join(tmp, "out"), os.path.join(tmp, "err")
    try:
        t_ref = time.monotonic()
        rc, t_ref_end, _, _ = run_once(env, None, 0, out, err)
        # kill moments within the run: its length varies with the machine's load
        window = min(WINDOW, 0.8 * (t_ref_end - t_ref))
        with open(out, "rb") as f:
            want = f.read()
        if rc != 0 or len(want) < 20:
            fail("undisturbed run: exit %d, %d bytes of text" % (rc, len(want)))
            return 1
        for victim in VICTIMS:
            times = []
            for r in range(ROUNDS):
                delay = rng.uniform(0, window)
                rc, t_end, known, killed = run_once(env, victim, delay, out, err)
                for _ in range(3):  # the run was faster this time: an earlier moment
                    if killed and not finished_first(victim, rc, err):
                        break
                    delay /= 2
                    rc, t_end, known, killed = run_once(env, victim, delay, out, err)
                with open(out, "rb") as f:
                    got = f.read()
                with open(err, "rb") as f:
                    etext = f.read().decode(errors="replace")
                what = "%s killed at %.3f s (round %d)" % (victim, delay, r)
                if not killed or finished_first(victim, rc, err):
                    fail("%s: the run ended before it could be killed" % what)
                elif victim in ("nsio", "nsplan", "nsrouter"):
                    if rc != 0 or got != want:
                        fail("%s: exit %d, text %s\n%s" % (what, rc, "unchanged" if got == want
                             else "changed:\n got %r\nwant %r" % (got, want), etext[-2000:]))
                elif victim == "nscompute":
                    if rc != 1 or "nscompute died" not in etext:
                        fail("%s: exit %d, want 1 and 'nscompute died':\n%s" %
                             (what, rc, etext[-2000:]))
                while True:
                    shm, dirs, procs = leftovers(user, rundirs, known)
                    dt = time.monotonic() - t_end
                    if not shm and not dirs and not procs:
                        times.append(dt)
                        break
                    if dt > LIMIT:
                        fail("%s: %.1f s after nsctl ended: segments %s, runtime dirs %s, "
                             "processes %s" % (what, LIMIT, shm, dirs, procs))
                        for (pid, s), c in known.items():  # do not poison later rounds
                            if alive(pid, s):
                                os.kill(pid, signal.SIGKILL)
                        for f in shm:
                            os.unlink("/dev/shm/" + f)
                        shutil.rmtree(rundirs)
                        os.mkdir(rundirs, 0o700)
                        break
                    time.sleep(0.005)
            if times:
                print("%-9s %d kills: all gone %.0f ms (median) / %.0f ms (max) after nsctl "
                      "ended%s" % (victim, ROUNDS, 1000 * statistics.median(times),
                                   1000 * max(times), "; text unchanged" if victim in
                                   ("nsio", "nsplan", "nsrouter") else ""), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failures else 0


sys.exit(main())
