"""python3 -m neurostream COMMAND ARGS...: nsctl itself (info, run, bench, plan and the
rest), the nsctl installed beside this package, so the two behave the same."""
import os
import sys

from ._lib import nsctl_path


def main() -> None:
    exe = nsctl_path()
    try:
        os.execvp(exe, ["nsctl"] + sys.argv[1:])
    except OSError as e:
        sys.stderr.write("python3 -m neurostream: cannot run %s: %s\n" % (exe, e.strerror))
        sys.exit(127)


if __name__ == "__main__":
    main()
