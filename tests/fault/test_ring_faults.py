#!/usr/bin/env python3
"""The N-th shm ring record made malformed, for every N of a short run.

`nsctl run` on the oracle's tiny Qwen3-MoE under a small arena with nothing resident, so every
weight block is a READ record, a completion and a RETIRE, and nsrouter's prefetches are records
too. NS_FAULT_RING (nsio/ring_fault.h) flips the version of one record: "req:N", the N-th request
record each client process (nscompute, nsrouter) pushes, or "cpl:N", the N-th completion nsio
pushes; the process says so on stderr, so the sweep of a side ends at the first N that no
process reaches. Each run must end by itself within 60 s, not by a signal, and
  * exit 0 with the undisturbed run's text byte for byte (a refused prefetch costs speed only),
    or exit non-zero with a last stderr line that says what happened (a lost block or lease
    cannot be recovered: every later request fails at once instead of waiting forever);
  * leave no process of the session, no /dev/shm segment and no runtime dir (checked 2 s after).
argv: NSCTL [STRIDE] (every STRIDE-th N after the first ten; sanitizer builds sweep so).
Exit 0 pass, 1 fail, 77 skip (oracle missing outside CI)."""
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "run"))
from fault_testlib import leftovers  # noqa: E402
from fault_testlib import run as run_cmd  # noqa: E402
from run_testlib import fail, failures, require_model  # noqa: E402

NSCTL = sys.argv[1]
STRIDE = int(sys.argv[2]) if len(sys.argv) > 2 else 1
ORACLE = os.environ.get("NS_ORACLE_DIR", "../shared/oracle")
MODEL = os.path.join(ORACLE, "tiny/tiny-qwen3moe-Q4_K_M.gguf")
ARGS = ["run", MODEL, "-p", "Once", "-n", "1", "--ignore-eos", "--temp", "0", "--threads", "1",
        "--mem-budget", "256KB", "--ram-budget", "0"]
LIMIT = 2000  # records per side; the run has a few hundred

require_model(MODEL)


def run(env, tmp):
    return run_cmd([NSCTL] + ARGS, env, tmp)


def main():
    tmp = tempfile.mkdtemp(prefix="ns-ringf-")
    rundirs = os.path.join(tmp, "run")
    os.mkdir(rundirs, 0o700)
    user = "nsrf%d" % os.getpid()
    base = dict(os.environ, USER=user, XDG_RUNTIME_DIR=rundirs)
    try:
        rc, want, err, _ = run(base, tmp)
        if rc != 0 or not want:
            fail("the undisturbed run failed (rc %s): %s" % (rc, err.strip()[-300:]))
            return
        for side in ("req", "cpl"):
            ended = same = 0
            n = 0
            while n < LIMIT:
                n += 1 if n < 10 else STRIDE
                rc, out, err, known = run(dict(base, NS_FAULT_RING="%s:%d" % (side, n)), tmp)
                what = "%s record %d" % (side, n)
                lines = [x for x in err.splitlines() if x.strip()]
                fired = "test hook NS_FAULT_RING" in err
                if rc is None:
                    fail("%s: %s" % (what, err))
                elif rc < 0:
                    fail("%s: nsctl killed by signal %d: %s" % (what, -rc, err[-300:]))
                elif rc == 0 and out != want:
                    fail("%s: exit 0 with different text %r" % (what, out[-80:]))
                elif rc != 0 and (not lines or len(lines[-1]) > 300 or
                                  not lines[-1].startswith("nsctl run: ")):
                    fail("%s: exit %d without a one-line reason: %r" % (what, rc, err[-300:]))
                ended += rc not in (0, None)
                same += rc == 0
                shm, dirs, procs = leftovers(user, rundirs, known)
                if shm or dirs or procs:
                    fail("%s: left behind: segments %s, dirs %s, processes %s"
                         % (what, shm, dirs, procs))
                    for d in dirs:
                        shutil.rmtree(os.path.join(rundirs, d), ignore_errors=True)
                    for f in shm:
                        os.unlink(os.path.join("/dev/shm", f))
                if not fired:
                    break
            if n < 10:
                fail("%s: the hook fired on %d records only: it is not in place" % (side, n - 1))
            print("%s: records up to %d swept (stride %d), %d ended with an error line, %d "
                  "with the same text" % (side, n - 1, STRIDE, ended, same), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


main()
sys.exit(1 if failures else 0)
