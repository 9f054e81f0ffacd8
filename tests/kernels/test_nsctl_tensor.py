#!/usr/bin/env python3
"""test_nsctl_tensor.py NSCTL MK_IQ_GGUF: `nsctl tensor` against every golden of oracle/quant,
byte for byte (whole tensors, then a mid-tensor row window, the last row alone and an empty
window), and the one-line, exit-2 contract for bad models, unknown tensors and bad row ranges.
The comparisons run here, in one process (the shell version forked a dozen tools per window
and took a minute of CI time). Exit 0 pass, 1 fail, 77 skip (oracle missing outside CI)."""
import glob
import os
import re
import subprocess
import sys
import tempfile

NSCTL, MKIQ = sys.argv[1], sys.argv[2]
# the row windows on every WINDOW_EVERY-th tensor of each type (sanitizer builds: 3, every
# tensor still whole); each window is one more process
WINDOW_EVERY = int(sys.argv[3]) if len(sys.argv) > 3 else 1
Q = os.path.join(os.environ.get("NS_ORACLE_DIR", "../shared/oracle"), "quant")
fails = []


def fail(msg):
    print("FAIL: " + msg, flush=True)
    fails.append(msg)


def tensor(*args):
    return subprocess.run([NSCTL, "tensor"] + list(args), capture_output=True, text=True)


def expect2(*args):
    """A refusal: exit 2 and exactly one line on stderr; returns that stderr."""
    p = tensor(*args)
    if p.returncode != 2:
        fail("nsctl tensor %s: exit %d, want 2" % (" ".join(args), p.returncode))
    if p.stderr.count("\n") != 1 or not p.stderr.endswith("\n"):
        fail("nsctl tensor %s: stderr is not one line: %r" % (" ".join(args), p.stderr))
    return p.stderr


def check_golden(tmp, g, typ, ref, windows=True):
    name = os.path.basename(ref)[:-len(".f32")]
    out = os.path.join(tmp, "out")
    p = tensor(g, name, "-o", out)
    log = p.stdout + p.stderr
    if p.returncode != 0:
        fail("%s/%s: exit %d (%s)" % (typ, name, p.returncode, log.strip()))
        return False
    with open(ref, "rb") as f:
        want = f.read()
    with open(out, "rb") as f:
        if f.read() != want:
            fail("%s/%s: output differs from %s" % (typ, name, ref))
    if "type %s," % typ.upper() not in log:
        fail("%s/%s: type not printed: %s" % (typ, name, log.strip()))
    m = re.search(r"\], (\d+) rows of (\d+);", log)
    if not m:
        fail("%s/%s: no shape in: %s" % (typ, name, log.strip()))
        return False
    rows, cols = int(m.group(1)), int(m.group(2))
    a, b = rows // 3, rows - rows // 3
    if b <= a:
        b = rows
    for wa, wb in ((a, b), (rows - 1, rows), (a, a)) if windows else ():
        w = "%d:%d" % (wa, wb)
        win = os.path.join(tmp, "win")
        p = tensor(g, name, "--rows", w, "-o", win)
        if p.returncode != 0:
            fail("%s/%s --rows %s: exit %d" % (typ, name, w, p.returncode))
            continue
        with open(win, "rb") as f:
            got = f.read()
        if len(got) != (wb - wa) * cols * 4:
            fail("%s/%s --rows %s: wrong size %d" % (typ, name, w, len(got)))
        elif got != want[wa * cols * 4:wb * cols * 4]:
            fail("%s/%s --rows %s: differs" % (typ, name, w))
    return True


def main():
    if not os.path.isdir(Q):
        print("oracle missing at " + Q)
        return 1 if os.environ.get("CI") == "true" else 77
    with tempfile.TemporaryDirectory() as tmp:
        n = 0
        for g in sorted(glob.glob(os.path.join(Q, "*.gguf"))):
            typ = os.path.basename(g)[:-len(".gguf")]
            if not os.path.isdir(os.path.join(Q, typ)):
                continue
            for k, ref in enumerate(sorted(glob.glob(os.path.join(Q, typ, "*.f32")))):
                n += check_golden(tmp, g, typ, ref, k % WINDOW_EVERY == 0)
        if n < 139:
            fail("only %d tensors found under %s" % (n, Q))

        # bad input: exit 2 and exactly one line on stderr
        trunc, junk, x = (os.path.join(tmp, f) for f in ("trunc.gguf", "junk.gguf", "x"))
        with open(os.path.join(Q, "q4_k.gguf"), "rb") as f, open(trunc, "wb") as t:
            t.write(f.read(100))
        with open(junk, "w") as f:
            f.write("not a gguf\n")
        q4k = os.path.join(Q, "q4_k.gguf")
        for args in ([trunc, "c.c256.r64", "-o", x], [junk, "c.c256.r64", "-o", x],
                     [os.path.join(tmp, "missing.gguf"), "c.c256.r64", "-o", x],
                     [q4k, "no.such.tensor", "-o", x],
                     [q4k, "c.c256.r64", "--rows", "5:2", "-o", x],
                     [q4k, "c.c256.r64", "--rows", "0:65", "-o", x],
                     [q4k, "c.c256.r64", "--rows", "x", "-o", x],
                     [q4k, "c.c256.r64", "--rows", "1:2:3", "-o", x],
                     [q4k, "c.c256.r64", "--rows", "-1:2", "-o", x],
                     [q4k, "c.c256.r64"], [q4k, "-o", x],
                     [q4k, "c.c256.r64", "--bogus", "-o", x]):
            expect2(*args)

        # types we cannot compute: refused by name, exit 2; a computable tensor of the same
        # file works
        iq = os.path.join(tmp, "iq.gguf")
        if subprocess.run([MKIQ, iq]).returncode != 0:
            fail("mk_iq_gguf failed")
        for short, full in (("iq2", "IQ2_XXS"), ("tq1", "TQ1_0"), ("nvfp4", "NVFP4")):
            e = expect2(iq, short, "-o", x)
            if full not in e:
                fail("refusal of %s does not name %s: %s" % (short, full, e.strip()))
        p = tensor(iq, "q8", "-o", x)
        if p.returncode != 0:
            fail("q8 tensor of iq.gguf: exit %d" % p.returncode)
        elif os.path.getsize(x) != 512:
            fail("q8 tensor of iq.gguf: wrong size")
    print("%d tensors checked, %d failures" % (n, len(fails)))
    return 1 if fails else 0


sys.exit(main())
