"""What the process-level fault sweeps of tests/fault share: one nsctl run watched for its
processes, and what a session left behind. Imported from the test's own folder."""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "run"))
from run_testlib import alive, descendants  # noqa: E402


def run(cmd, env, tmp, limit=60):
    """One run of cmd; returns (rc, stdout bytes, stderr text, processes seen). rc None: it
    was still running after limit s and was killed."""
    out, err = os.path.join(tmp, "out"), os.path.join(tmp, "err")
    known = {}
    with open(out, "wb") as o, open(err, "wb") as e:
        p = subprocess.Popen(cmd, stdout=o, stderr=e, env=env)
    t0 = time.monotonic()
    while p.poll() is None:
        descendants(p.pid, known)
        if time.monotonic() - t0 > limit:
            p.kill()
            p.wait()
            return None, b"", "hung: killed after %d s" % limit, known
        time.sleep(0.01)
    with open(out, "rb") as o, open(err, "rb") as e:
        return p.returncode, o.read(), e.read().decode(errors="replace"), known


def leftovers(user, rundirs, known):
    """Within 2 s: the /dev/shm segments of user, the runtime dirs under rundirs and the
    processes of known still alive (all empty when the session cleaned up)."""
    deadline = time.monotonic() + 2.0
    while True:
        shm = [f for f in os.listdir("/dev/shm") if f.startswith("ns-%s-" % user)]
        dirs = os.listdir(rundirs)
        procs = ["%s %d" % (c, p) for (p, s), c in known.items() if alive(p, s)]
        if not (shm or dirs or procs) or time.monotonic() > deadline:
            return shm, dirs, procs
        time.sleep(0.05)
