#!/usr/bin/env python3
"""nsctl image end to end: the oracle image through the command, against Transformers.

    test_nsctl_image.py NSCTL

For hf/qwen3_vl and hf/qwen3_5_cond: image.u8 written to a PNG (with our own minimal PNG writer,
zlib + crc32), `nsctl image MMPROJ --image PNG --min-pixels 4096 -o F` (the references kept the
64x64 image as it is), F compared with vision.pooler_output (+ deepstack_features_0) within
1e-5 of the reference's largest magnitude; the text model given instead of the mmproj finds the
mmproj beside it and writes the same bytes; --json reports grid_thw [1, 4, 4] and 4 tokens.
Refusals, each one line on stderr and exit 2: bad images (not an image, cut short, 0x0,
30000x30000, over --max-patches) - also with an mmproj whose first matrix has a type we cannot
compute, which shows the image is judged before any weight is read - a model with no mmproj
beside it, two mmproj files beside it, an mmproj whose width is not the model's, bad flags.
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

from vision_testlib import Checks, f32, oracle_missing, png

NSCTL = sys.argv[1]
ORACLE = os.environ.get("NS_ORACLE_DIR", "../shared/oracle")
if not os.path.isdir(ORACLE):
    oracle_missing(ORACLE)
checks = Checks()
fail = checks.fail


def nsctl(*args):
    return subprocess.run([NSCTL, "image"] + list(args), capture_output=True, text=True)


def refused(what, r):
    lines = r.stderr.strip().split("\n")
    if r.returncode != 2 or len(lines) != 1 or not lines[0].startswith("nsctl image: "):
        fail(f"{what}: exit {r.returncode}, stderr {r.stderr!r}")
    else:
        print(f"  {what:46} -> {lines[0]}")
    return lines[0]


def rel_err(got, want):
    ref = max(abs(x) for x in want)
    return max(abs(a - b) for a, b in zip(got, want)) / ref


with tempfile.TemporaryDirectory() as d:
    for arch in ("qwen3_vl", "qwen3_5_cond"):
        base = os.path.join(ORACLE, "hf", arch)
        mmproj = os.path.join(base, "gguf", f"mmproj-{arch}-f32.gguf")
        image = os.path.join(d, f"{arch}.png")
        png(image, 64, 64, open(os.path.join(base, "image.u8"), "rb").read())
        out = os.path.join(d, f"{arch}.f32")
        r = nsctl(mmproj, "--image", image, "--min-pixels", "4096", "-o", out)
        if r.returncode != 0:
            fail(f"{arch}: exit {r.returncode}: {r.stderr}")
            continue
        print(f"{arch}: {r.stdout.strip()}")
        got = f32(out)
        pooler = f32(os.path.join(base, "vision.pooler_output.f32"))
        ds_path = os.path.join(base, "vision.deepstack_features_0.f32")
        parts = [pooler] + ([f32(ds_path)] if os.path.exists(ds_path) else [])
        width = 256 * len(parts)
        if len(got) != 4 * width:
            fail(f"{arch}: {len(got)} floats, not {4 * width}")
            continue
        for k, want in enumerate(parts):
            mine = [got[t * width + k * 256 + i] for t in range(4) for i in range(256)]
            e = rel_err(mine, want)
            print(f"  -o part {k} vs Transformers: rel {e:.3g}")
            if e > 1e-5:  # the issue asks 1e-4; the tower reaches ~1e-6
                fail(f"{arch}: part {k} rel {e:.3g} > 1e-5")
        text = os.path.join(base, "gguf", f"{arch}-f32.gguf")
        if os.path.exists(text):
            out2 = os.path.join(d, f"{arch}-beside.f32")
            r = nsctl(text, "--image", image, "--min-pixels", "4096", "-o", out2, "--json")
            js = json.loads(r.stdout) if r.returncode == 0 else {}
            if r.returncode != 0 or open(out2, "rb").read() != open(out, "rb").read():
                fail(f"{arch}: the model with its mmproj beside it: exit {r.returncode} "
                     f"{r.stderr} or other bytes")
            elif js.get("grid_thw") != [1, 4, 4] or js.get("n_tokens") != 4:
                fail(f"{arch}: --json {r.stdout}")
            else:
                print(f"  {os.path.basename(text)} finds its mmproj: same bytes; --json "
                      f"grid_thw {js['grid_thw']}, {js['n_tokens']} tokens")

    mmproj = os.path.join(ORACLE, "hf", "qwen3_vl", "gguf", "mmproj-qwen3_vl-f32.gguf")
    good = os.path.join(d, "qwen3_vl.png")
    noimg = os.path.join(d, "not-an-image.png")
    open(noimg, "w").write("hello\n")
    cut = os.path.join(d, "cut.png")
    open(cut, "wb").write(open(good, "rb").read()[:30])
    zero = os.path.join(d, "zero.png")
    png(zero, 0, 0, b"", idat=zlib.compress(b""))
    huge = os.path.join(d, "huge.png")
    png(huge, 30000, 30000, b"", idat=zlib.compress(b"\0" * 16))
    bad_images = [("not an image", noimg), ("PNG cut at 30 bytes", cut), ("PNG 0x0", zero),
                  ("PNG 30000x30000", huge)]

    # An mmproj whose first matrix is typed IQ4_NL (smaller than F32: it still fits its
    # place): the tower refuses it when it sets up, after the image has been judged.
    blob = bytearray(open(mmproj, "rb").read())
    name = b"v.blk.0.attn_qkv.weight"
    at = blob.find(name) + len(name)
    n_dims = struct.unpack_from("<I", blob, at)[0]
    struct.pack_into("<I", blob, at + 4 + 8 * n_dims, 20)  # GGML_TYPE_IQ4_NL
    poisoned = os.path.join(d, "mmproj-poisoned.gguf")
    open(poisoned, "wb").write(blob)

    print("refused:")
    for what, path in bad_images:
        refused(what, nsctl(mmproj, "--image", path))
        line = refused(what + " (poisoned mmproj)", nsctl(poisoned, "--image", path))
        if "attn_qkv" in line:
            fail(f"{what}: a weight was looked at before the image was refused")
    line = refused("good image, poisoned mmproj", nsctl(poisoned, "--image", good))
    if "attn_qkv" not in line:
        fail("the poisoned mmproj was not refused for its tensor")
    wide = os.path.join(d, "wide.png")
    png(wide, 3000, 16, bytes(3000 * 16 * 3))
    refused("3000x16 over --max-patches 8", nsctl(mmproj, "--image", wide, "--max-patches", "8",
                                                  "--min-pixels", "4096"))
    lone = os.path.join(d, "lone")
    os.mkdir(lone)
    shutil.copy(os.path.join(ORACLE, "models", "stories260K.gguf"), lone)
    story = os.path.join(lone, "stories260K.gguf")
    refused("model without an mmproj beside it", nsctl(story, "--image", good))
    os.symlink(mmproj, os.path.join(lone, "mmproj-a.gguf"))
    os.symlink(mmproj, os.path.join(lone, "mmproj-b.gguf"))
    refused("model with two mmproj beside it", nsctl(story, "--image", good))
    refused("mmproj wider than the model", nsctl(story, "--image", good, "--mmproj", mmproj))
    refused("a text model as --mmproj", nsctl(story, "--image", good, "--mmproj", story))
    refused("no --image", nsctl(mmproj))
    refused("--max-patches 1.5", nsctl(mmproj, "--image", good, "--max-patches", "1.5"))
    refused("--provider gpu", nsctl(mmproj, "--image", good, "--provider", "gpu"))

checks.done()
