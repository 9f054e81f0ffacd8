"""What the Python tests of tests/run share (run_testlib.h's counterpart): the oracle model a
test needs, and its failure list. Imported from the test's own folder (sys.path[0])."""
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
