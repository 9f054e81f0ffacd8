"""A session's peak host memory without a memory cgroup (tests/ceiling, see meson.build).

measure(argv) runs `nsctl run ...` and polls, every POLL_S, nsctl and every process below
it, and the session's shared-memory segments in /dev/shm (named ns-<user>-<id>-*, <id> from
nsctl's "session <id>" line). Each reading sums every process's Pss_Anon (smaps_rollup: the
session keeper, forked without exec, shares nsctl's pages copy-on-write, so RssAnon would
count them twice) and page tables (VmPTE), plus the pages the segments hold (st_blocks);
the peak is the largest reading. Every reading is memory the session held at one moment, so
the peak never exceeds the real one: a test that finds it above a prediction has found a
real excess (a peak between two readings can only be missed, not invented).
"""
import os
import re
import subprocess
import threading
import time

POLL_S = 0.002
SHM = "/dev/shm"


def _status(pid):
    """The kB fields of /proc/PID/status, or None once the process is gone."""
    try:
        with open("/proc/%d/status" % pid) as f:
            text = f.read()
    except OSError:
        return None
    out = {"Name": ""}
    for line in text.splitlines():
        if line.startswith("Name:"):
            out["Name"] = line[5:].strip()
        m = re.match(r"(\w+):\s+(\d+) kB", line)
        if m:
            out[m.group(1)] = int(m.group(2)) * 1024
    return out


def _pss_anon(pid):
    """Pss_Anon of /proc/PID/smaps_rollup in bytes: a forked helper that never execs (the
    session keeper) shares nsctl's pages copy-on-write, and its RssAnon counts them again."""
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            for line in f:
                if line.startswith("Pss_Anon:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _children(pid):
    """Pids whose parent is pid (from /proc/PID/task/*/children)."""
    kids = []
    try:
        for tid in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/children" % (pid, tid)) as f:
                kids += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return kids


def _tree(pid):
    seen, todo = [], [pid]
    while todo:
        p = todo.pop()
        seen.append(p)
        todo += _children(p)
    return seen


def _shm_bytes(prefix):
    """Bytes held by the segments named ns-*<prefix>* (prefix "-<session id>-")."""
    total = 0
    try:
        names = os.listdir(SHM)
    except OSError:
        return 0
    for n in names:
        if prefix and n.startswith("ns-") and prefix in n:
            try:
                total += os.stat(os.path.join(SHM, n)).st_blocks * 512
            except OSError:
                pass
    return total


def measure(argv, env=None):
    """Run argv (an nsctl run command); returns (exit status, stdout, stderr, peak bytes,
    {pid: (name, bytes)}, segment bytes)."""
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    err, out = [], []
    prefix = [None]

    def read_err():
        for line in iter(p.stderr.readline, b""):
            s = line.decode(errors="replace")
            err.append(s)
            m = re.search(r"session (\S+?):", s)
            if m and prefix[0] is None:
                prefix[0] = "-%s-" % m.group(1)

    def read_out():
        out.append(p.stdout.read())

    threads = [threading.Thread(target=read_err), threading.Thread(target=read_out)]
    for t in threads:
        t.start()
    peak, at_peak = 0, {}
    while p.poll() is None:
        now = {}
        for pid in _tree(p.pid):
            st, pss = _status(pid), _pss_anon(pid)
            if st is not None and pss is not None:
                now[pid] = (st["Name"], pss + st.get("VmPTE", 0))
        shm = _shm_bytes(prefix[0])
        total = sum(b for _, b in now.values()) + shm
        if total > peak:
            peak, at_peak = total, dict(now, shm=("segments", shm))
        time.sleep(POLL_S)
    for t in threads:
        t.join()
    return p.returncode, b"".join(out), "".join(err), peak, at_peak
