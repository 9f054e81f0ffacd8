#!/usr/bin/env python3
"""The N-th ZeroMQ message of each process made to fail, for every N of a short run.

`nsctl run` on the oracle's tiny Qwen3-MoE (nsctl <-> nscompute control messages, nscompute ->
nsrouter router decisions) with msg_fault.so preloaded (argv[2]). For each process that talks
(nsctl, nscompute, nsrouter), the messages of an undisturbed run are counted; then for every N
and each mode (fail: the call returns ETERM; corrupt: the message goes through with its
envelope's magic flipped) one run with the N-th message of that process so treated. Each run
must end by itself within 60 s, not by a signal, and
  * exit 0 with the undisturbed run's text byte for byte (a router decision is a hint: losing
    or refusing one may cost speed, never a token), or exit non-zero with a last stderr line
    that says what happened (the control channel: the request cannot be answered);
  * nsrouter's messages and nscompute's router decisions must never end the run;
  * leave no process of the session, no /dev/shm segment and no runtime dir (checked 2 s after).
argv: NSCTL MSG_FAULT_SO. Exit 0 pass, 1 fail, 77 skip (oracle missing outside CI)."""
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "run"))
from fault_testlib import leftovers  # noqa: E402
from fault_testlib import run as run_cmd  # noqa: E402
from run_testlib import fail, failures, require_model  # noqa: E402

NSCTL, SHIM = sys.argv[1], os.path.abspath(sys.argv[2])
ORACLE = os.environ.get("NS_ORACLE_DIR", "../shared/oracle")
MODEL = os.path.join(ORACLE, "tiny/tiny-qwen3moe-Q4_K_M.gguf")
# a small arena: experts stream, so nsrouter's decisions are acted on
ARGS = ["run", MODEL, "-p", "Once upon a time", "-n", "3", "--ignore-eos", "--temp", "0",
        "--threads", "1", "--mem-budget", "256KB", "--block-rows", "4"]
TALKERS = ["nsctl", "nscompute", "nsrouter"]
# every message nsrouter handles is a router decision; how many reach it in a run depends on
# when its SUB socket joins (ZeroMQ drops what is published before), so its count may be 0
HINTS_ONLY = {"nsrouter"}

require_model(MODEL)


def run(env, tmp):
    return run_cmd([NSCTL] + ARGS, env, tmp)


def main():
    tmp = tempfile.mkdtemp(prefix="ns-msgf-")
    rundirs = os.path.join(tmp, "run")
    os.mkdir(rundirs, 0o700)
    user = "nsmf%d" % os.getpid()
    counts = os.path.join(tmp, "counts")
    base = dict(os.environ, USER=user, XDG_RUNTIME_DIR=rundirs, LD_PRELOAD=SHIM,
                NS_FAULT_MSG_COUNT=counts)
    try:
        rc, want, err, _ = run(dict(base, NS_FAULT_MSG_PROC="none"), tmp)
        if rc != 0 or not want:
            fail("the undisturbed run failed (rc %s): %s" % (rc, err.strip()[-300:]))
            return
        total = {}
        for proc in TALKERS:
            if os.path.exists(counts):
                os.unlink(counts)
            for _ in range(3 if proc in HINTS_ONLY else 1):  # the most of 3 runs
                rc, out, err, _ = run(dict(base, NS_FAULT_MSG_PROC=proc, NS_FAULT_MSG_AT="0"),
                                      tmp)
                if rc != 0 or out != want:
                    fail("%s counted: the run changed (rc %s): %s" % (proc, rc, err[-300:]))
            with open(counts) as f:
                total[proc] = max([int(line.split()[1]) for line in f if line.strip()] + [0])
            if total[proc] < 2 and proc not in HINTS_ONLY:
                fail("%s: %d messages counted: the shim is not in place" % (proc, total[proc]))
        print("messages per run: %s" % ", ".join("%s %d" % kv for kv in total.items()),
              flush=True)
        for proc in TALKERS:
            for mode in ("fail", "corrupt"):
                ended = 0
                for n in range(1, total[proc] + 1):
                    env = dict(base, NS_FAULT_MSG_PROC=proc, NS_FAULT_MSG_AT=str(n),
                               NS_FAULT_MSG_MODE=mode)
                    env.pop("NS_FAULT_MSG_COUNT")
                    rc, out, err, known = run(env, tmp)
                    what = "%s message %d %s" % (proc, n, mode)
                    lines = [x for x in err.splitlines() if x.strip()]
                    if rc is None:
                        fail("%s: %s" % (what, err))
                    elif rc < 0:
                        fail("%s: nsctl killed by signal %d: %s" % (what, -rc, err[-300:]))
                    elif rc == 0 and out != want:
                        fail("%s: exit 0 with different text %r" % (what, out[-80:]))
                    elif rc != 0 and proc in HINTS_ONLY:
                        fail("%s: a router decision ended the run (rc %d): %s"
                             % (what, rc, lines[-1] if lines else ""))
                    elif rc != 0 and (not lines or len(lines[-1]) > 300):
                        fail("%s: exit %d without a one-line reason: %r" % (what, rc, err[-300:]))
                    ended += rc != 0
                    shm, dirs, procs = leftovers(user, rundirs, known)
                    if shm or dirs or procs:
                        fail("%s: left behind: segments %s, dirs %s, processes %s"
                             % (what, shm, dirs, procs))
                        for d in dirs:
                            shutil.rmtree(os.path.join(rundirs, d), ignore_errors=True)
                        for f in shm:
                            os.unlink(os.path.join("/dev/shm", f))
                print("%s, %s: %d runs, %d ended with an error line, the rest with the same "
                      "text" % (proc, mode, total[proc], ended), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


main()
sys.exit(1 if failures else 0)
