#!/usr/bin/env python3
"""nsctl logits / run --image through the process pipeline (nsctl -> nscompute's tower and
decoder), against Transformers.

    test_nsctl_mm.py NSCTL

For hf/qwen3_vl (GGUF, its mmproj found beside it) and hf/qwen3_5_cond (the safetensors
checkpoint with --mmproj): image.u8 written to a PNG, `nsctl logits MODEL --image PNG --tokens
<seqA.json vision.mm_tokens> --image-token 1000 --min-pixels 4096 -o F`; every row of F within
1e-3 of mm.logits.f32 (the issue's bound). The image's tokens go through the weights in the
prompt's one chunk: the bytes requested, less the tower's own (its weights stream through nsio
too), equal those of the same ids without the image (a text weight read once per chunk, not
once per image token). The tower streamed under budgets smaller than it (qwen3_vl: the mmproj
is 1.7 MB; --mem-budget 256KB and 1MB x --block-rows 0 and 5): logits bit-identical to the
8 MB run's, the tower's bytes the same; two images: exactly twice one image's tower bytes
(read once per image, nothing held between images). `run --image -p` reports the image's 4
tokens on its summary line. Refusals, one line and exit 2, before anything starts: a run of
placeholders of the wrong length, not an image, a model that takes no images.
Exit 0 pass, 1 fail (77: oracle missing outside CI).
"""
import os
import subprocess
import sys
import tempfile

from vision_testlib import Checks, f32, mm_prompts, oracle_missing, refused

NSCTL = sys.argv[1]
ORACLE = os.environ.get("NS_ORACLE_DIR", "../shared/oracle")
if not os.path.isdir(os.path.join(ORACLE, "hf", "qwen3_vl")):
    oracle_missing(ORACLE)
checks = Checks()
fail = checks.fail


def nsctl(*args):
    return subprocess.run([NSCTL] + [str(a) for a in args], capture_output=True, text=True,
                          errors="replace",
                          timeout=120)


def requested(stderr):
    part = stderr.split("streamed: ")[-1].split(" bytes requested")[0]
    return int(part) if part.isdigit() else -1


def tower_bytes(stderr):
    """Of the bytes requested, the vision tower's (its weights stream through nsio too)."""
    part = stderr.split("its weights ")[-1].split(" bytes of them")[0]
    return int(part) if part.isdigit() else -1


FLAGS = ["--image-token", "1000", "--min-pixels", "4096", "--mem-budget", "8MB"]

with tempfile.TemporaryDirectory() as d:
    for arch, base, model, extra, image, toks in mm_prompts(ORACLE, d):
        ids = ",".join(map(str, toks))
        out = os.path.join(d, arch + ".f32")
        r = nsctl("logits", model, "--image", image, "--tokens", ids, "-o", out, *extra,
                  *FLAGS)
        if r.returncode != 0:
            fail(f"{arch}: logits --image: exit {r.returncode}: {r.stderr[-500:]}")
            continue
        got, want = f32(out), f32(os.path.join(base, "mm.logits.f32"))
        if len(got) != len(want):
            fail(f"{arch}: {len(got)} logits, the reference {len(want)}")
            continue
        e = max(abs(a - b) for a, b in zip(got, want))
        print(f"{arch}: logits --image, {len(toks)} rows: max |d| {e:.3g} from Transformers")
        if not e <= 1e-3:
            fail(f"{arch}: max |d| {e:.3g} > 1e-3")
        # one pass: the same ids without the image request the same weight bytes
        text = [t for t in toks]
        r2 = nsctl("logits", model, "--tokens", ",".join(map(str, text)), "-o",
                   os.path.join(d, "text.f32"), *FLAGS[4:])
        a, b, t = requested(r.stderr), requested(r2.stderr), tower_bytes(r.stderr)
        print(f"  weight bytes requested: with the image {a} (the tower's {t}), the ids alone "
              f"{b}")
        if a <= 0 or t <= 0 or a - t != b:
            fail(f"{arch}: the image prompt requested {a} bytes ({t} the tower's), the text "
                 f"prompt {b}")
        if arch == "qwen3_vl":
            # the tower larger than the arena: same logits at two budgets x two block sizes
            ref = open(out, "rb").read()
            for mem in ("256KB", "1MB"):
                for rows in ("0", "5"):
                    o2 = os.path.join(d, f"small-{mem}-{rows}.f32")
                    r3 = nsctl("logits", model, "--image", image, "--tokens", ids, "-o", o2,
                               *extra, *FLAGS[:4], "--mem-budget", mem, "--block-rows", rows)
                    t3 = tower_bytes(r3.stderr)
                    if r3.returncode != 0:
                        fail(f"logits --mem-budget {mem} --block-rows {rows}: exit "
                             f"{r3.returncode}: {r3.stderr[-500:]}")
                    elif open(o2, "rb").read() != ref or t3 != t:
                        fail(f"--mem-budget {mem} --block-rows {rows}: logits "
                             f"{'differ' if open(o2, 'rb').read() != ref else 'same'}, "
                             f"tower bytes {t3} (8 MB: {t})")
                    else:
                        print(f"  --mem-budget {mem} --block-rows {rows}: bit-identical, "
                              f"tower {t3} B")
            # two images: the tower read twice, exactly
            o2 = os.path.join(d, "two.f32")
            r3 = nsctl("logits", model, "--image", image, "--image", image, "--tokens",
                       ids + "," + ids, "-o", o2, *extra, *FLAGS)
            t3 = tower_bytes(r3.stderr)
            print(f"  two images: tower {t3} B (one: {t})")
            if r3.returncode != 0 or t3 != 2 * t:
                fail(f"two images: exit {r3.returncode}, tower bytes {t3}, not 2 x {t}: "
                     f"{r3.stderr[-300:]}")
        # a placeholder run one short of the image's 4 tokens
        short = toks[:]
        short.remove(1000)
        refused(checks, f"{arch}: 3 placeholders for a 4-token image",
                nsctl("logits", model, "--image", image, "--tokens", ",".join(map(str, short)),
                      "-o", out, *extra, *FLAGS), "nsctl logits")

    vl = os.path.join(ORACLE, "hf", "qwen3_vl", "gguf", "qwen3_vl-f32.gguf")
    image = os.path.join(d, "qwen3_vl.png")
    r = nsctl("run", vl, "--image", image, "-p", "hello", "-n", "2", *FLAGS, "--ram-budget", "0")
    if r.returncode != 0 or "images 4 tok" not in r.stderr:
        fail(f"run --image: exit {r.returncode}, stderr {r.stderr[-500:]!r}")
    else:
        print("run --image -p: " + [x for x in r.stderr.split("\n") if "images 4 tok" in x][0])
    # the tiny vocabulary has no <|image_pad|>: refused before any process starts
    r = nsctl("run", vl, "--image", image, "-p", "hi", "--min-pixels", "4096", "--mem-budget",
              "8MB", "--ram-budget", "0")
    refused(checks, "run: no placeholder in the vocabulary", r, "nsctl run")
    if "--image-token" not in r.stderr or "session" in r.stderr:
        fail(f"run without a placeholder: {r.stderr!r}")
    bad = os.path.join(d, "not-an-image.png")
    with open(bad, "w") as f:
        f.write("not an image\n" * 10)
    refused(checks, "run: not an image", nsctl("run", vl, "--image", bad, "-p", "hi"), "nsctl run")
    refused(checks, "run: a model without a tower",
            nsctl("run", os.path.join(ORACLE, "models", "stories260K.gguf"), "--image", image,
                  "-p", "hi"), "nsctl run")

checks.done()
