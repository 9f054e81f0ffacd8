"""What the Python tests of tests/run share (run_testlib.h's counterpart): the oracle model a
test needs, its failure list, and the processes of a session (by pid and start time). Imported from the test's own folder (sys.path[0])."""
import os
import sys

failures = []


def fail(msg):
    """Record a failure and say it at once."""
    failures.append(msg)
    print("FAIL: " + msg, flush=True)


def require_model(path):
    """Return when the oracle file path exists; else exit: 1 under CI (the data must be
    there), 77 (skip) on a developer machine."""
    if os.path.isfile(path):
        return
    if os.environ.get("CI") == "true":
        print("FAIL: oracle model missing under CI: " + path)
        sys.exit(1)
    print("SKIP: oracle model missing: " + path)
    sys.exit(77)


def proc_stat(pid):
    """(comm, state, ppid, starttime) of pid, or None."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            s = f.read()
    except OSError:
        return None
    comm = s[s.index("(") + 1:s.rindex(")")]
    rest = s[s.rindex(")") + 2:].split()
    return comm, rest[0], int(rest[1]), int(rest[19])


def descendants(root, known):
    """Add every live descendant of root to known {(pid, start): comm}."""
    kids = {}
    for p in (int(x) for x in os.listdir("/proc") if x.isdigit()):
        st = proc_stat(p)
        if st:
            kids.setdefault(st[2], []).append((p, st))
    todo = [root]
    while todo:
        for p, st in kids.get(todo.pop(), []):
            known[(p, st[3])] = st[0]
            todo.append(p)


def alive(pid, start):
    """pid is still the process that started at start, and not a zombie."""
    st = proc_stat(pid)
    return st is not None and st[3] == start and st[1] not in ("Z", "X")
