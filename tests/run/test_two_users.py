#!/usr/bin/env python3
"""Two users: another local user (uid 65534, through setpriv) plants a session's segment
before the session makes it; the run must stop with one line naming it, and use nothing of it.

Segment names other than the control segment's carry a random key only the session can read
(shm/seg.h), so the test fixes the session id and key with the test hooks NS_TEST_SESSION_ID
and NS_TEST_SEG_KEY to know the names an attacker would need. First a run under those hooks
shows the four names the session really uses (ctl, arena, plan, ram, listed while a --chat run
waits on its input). Then, for each of them, the other user creates it (mode 0666, marker
bytes) and `nsctl run` must: exit 1 before any child starts, print exactly one stderr line
naming the segment and uid 65534, leave the planted object as it was, and leave nothing of
its own behind. Needs root (to be two users); skips with 77 otherwise. argv: NSCTL."""
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time

from run_testlib import fail, failures, require_model

NSCTL = sys.argv[1]
ORACLE = os.environ.get("NS_ORACLE_DIR", "../shared/oracle")
MODEL = os.path.join(ORACLE, "tiny/tiny-qwen3moe-Q4_K_M.gguf")
OTHER = 65534
MARK = b"planted by another user\n" * 64

if os.geteuid() != 0 or not shutil.which("setpriv"):
    print("SKIP: needs root and setpriv to act as a second user")
    sys.exit(77)
require_model(MODEL)


def plant(path):
    """Create path as the other user, mode 0666, holding MARK."""
    code = ("import os,sys; fd=os.open(sys.argv[1], os.O_CREAT|os.O_EXCL|os.O_RDWR, 0o666); "
            "os.fchmod(fd, 0o666); os.write(fd, sys.stdin.buffer.read()); os.close(fd)")
    subprocess.run(["setpriv", "--reuid=%d" % OTHER, "--regid=%d" % OTHER, "--clear-groups",
                    sys.executable, "-c", code, path], input=MARK, check=True)


def main():
    tmp = tempfile.mkdtemp(prefix="ns-2users-")
    rundirs = os.path.join(tmp, "run")
    os.mkdir(rundirs, 0o700)
    user = "nstu%d" % os.getpid()
    sid, key = "twousers%d" % (os.getpid() % 100000), secrets.token_hex(8)
    env = dict(os.environ, USER=user, XDG_RUNTIME_DIR=rundirs, NS_TEST_SESSION_ID=sid,
               NS_TEST_SEG_KEY=key)
    base = [NSCTL, "run", MODEL, "--mem-budget", "8MB", "--ram-budget", "1MB", "-n", "4"]
    names = {"ctl": "ns-%s-%s-ctl" % (user, sid)}
    for what in ("arena", "plan", "ram"):
        names[what] = "ns-%s-%s-%s-%s" % (user, sid, key, what)
    try:
        # the names are the ones the session uses: a chat run (the model has no template:
        # --chat-template, as --chat needs one) waits for input with its
        # pipeline up, every segment made
        p = subprocess.Popen(base + ["--chat", "--chat-template", "chatml"],
                             stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, env=env)
        seen = set()
        for _ in range(1000):
            seen |= set(os.listdir("/dev/shm")) & set(names.values())
            if len(seen) == len(names):
                break
            time.sleep(0.01)
        p.communicate(b"", timeout=60)
        if seen != set(names.values()):
            fail("a run made %s, not the names %s" % (sorted(seen), sorted(names.values())))
        for what, name in names.items():
            path = "/dev/shm/" + name
            plant(path)
            r = subprocess.run(base + ["-p", "hi"], capture_output=True, env=env, timeout=60)
            err = r.stderr.decode(errors="replace")
            lines = [x for x in err.splitlines() if x.strip()]
            st = os.stat(path)
            with open(path, "rb") as f:
                content = f.read()
            ours = [f for f in os.listdir("/dev/shm") if f.startswith("ns-%s-" % user)
                    and f != name]
            if r.returncode != 1 or len(lines) != 1 or name not in lines[0] or \
               "uid %d" % OTHER not in lines[0]:
                fail("%s planted: exit %d, want 1 and one line naming /%s and uid %d:\n%s" %
                     (what, r.returncode, name, OTHER, err))
            if "pid" in err:
                fail("%s planted: a child was started:\n%s" % (what, err))
            if content != MARK or st.st_uid != OTHER or (st.st_mode & 0o777) != 0o666:
                fail("%s planted: the planted segment was used or changed" % what)
            if ours or os.listdir(rundirs):
                fail("%s planted: left behind %s %s" % (what, ours, os.listdir(rundirs)))
            os.unlink(path)
            if not failures:
                print("%-5s planted by uid %d: refused: %s" % (what, OTHER, lines[0]),
                      flush=True)
    finally:
        for name in names.values():
            if os.path.exists("/dev/shm/" + name):
                os.unlink("/dev/shm/" + name)
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failures else 0


sys.exit(main())
