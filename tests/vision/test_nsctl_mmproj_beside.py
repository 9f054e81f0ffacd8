#!/usr/bin/env python3
"""The vision tower found beside the model without --mmproj (nsctl/mmproj_beside.h).

    test_nsctl_mmproj_beside.py NSCTL

In a scratch directory holding hf/qwen3_vl's GGUF (n_embd 256, one DeepStack feature) as
model.gguf, beside it, in turn: no mmproj; its mmproj as mmproj-a.gguf (taken: plan's "mmproj",
logits' summary line); two fitting ones (refused in one line by plan, logits --image and run
--chat, before anything starts; --mmproj FILE wins; --no-mmproj takes none and `run -p` without
an image is not refused; info's "mmproj" says the same); a copy whose projection_dim is 128 (passed over: alone it leaves no
tower and `logits --image` names it, beside a fitting one the fitting one is taken); a file
named mmproj that is no tower. --no-mmproj with --image or --mmproj is refused. A model that
takes no images (tiny-llama) with an mmproj beside: no tower, no refusal.
Exit 0 pass, 1 fail (77: oracle missing outside CI).
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

from vision_testlib import Checks, oracle_missing, png

NSCTL = sys.argv[1]
ORACLE = os.environ.get("NS_ORACLE_DIR", "../shared/oracle")
BASE = os.path.join(ORACLE, "hf", "qwen3_vl", "gguf")
MODEL = os.path.join(BASE, "qwen3_vl-f32.gguf")
MMPROJ = os.path.join(BASE, "mmproj-qwen3_vl-f32.gguf")
TINY = os.path.join(ORACLE, "tiny", "tiny-llama-F32.gguf")
for f in (MODEL, MMPROJ):
    if not os.path.isfile(f):
        oracle_missing(f)
checks = Checks()
fail = checks.fail


def nsctl(*args, stdin=None):
    return subprocess.run([NSCTL] + [str(a) for a in args], capture_output=True, text=True,
                          errors="replace", timeout=120, input=stdin)


def plan(d, *extra):
    """nsctl plan --json of the model in d: (exit, the mmproj it counted or None, stderr)."""
    r = nsctl("plan", os.path.join(d, "model.gguf"), "-c", "512", "--json", *extra)
    if r.returncode != 0:
        return r.returncode, None, r.stderr
    j = json.loads(r.stdout)
    if (j["mmproj"] is None) != (j["fixed"]["tower_bytes"] == 0):
        fail(f"plan: mmproj {j['mmproj']} but tower_bytes {j['fixed']['tower_bytes']}")
    return 0, j["mmproj"], r.stderr


def info_mmproj(d):
    """nsctl info --json's "mmproj" (the tower run --image would take) and "mmproj_why"."""
    r = nsctl("info", os.path.join(d, "model.gguf"), "--json")
    if r.returncode != 0:
        fail(f"info: exit {r.returncode}: {r.stderr!r}")
        return None, ""
    j = json.loads(r.stdout)
    return j.get("mmproj", "absent"), j.get("mmproj_why", "")


def refused(what, r, cmd, text):
    lines = r.stderr.strip().split("\n")
    if r.returncode != 2 or len(lines) != 1 or not lines[0].startswith(cmd + ": ") or \
            text not in lines[0]:
        fail(f"{what}: exit {r.returncode}, stderr {r.stderr!r} (wanted one line with {text!r})")
    else:
        print(f"  {what:44} -> {lines[0]}")


def narrow_copy(src, dst, width):
    """src with clip.vision.projection_dim (a u32 key) set to width."""
    data = bytearray(open(src, "rb").read())
    key = b"clip.vision.projection_dim"
    at = data.find(struct.pack("<Q", len(key)) + key)
    if at < 0:
        raise SystemExit("projection_dim key not found")
    at += 8 + len(key)
    if struct.unpack_from("<I", data, at)[0] != 4:  # GGUF_TYPE_UINT32
        raise SystemExit("projection_dim is not a u32")
    struct.pack_into("<I", data, at + 4, width)
    open(dst, "wb").write(data)


def logits_image(d, img, *extra):
    return nsctl("logits", os.path.join(d, "model.gguf"), "--image", img, "--tokens",
                 ",".join(["1"] + ["1000"] * 4 + ["2"]), "--image-token", "1000",
                 "--min-pixels", "4096", "--mem-budget", "8MB", "-o", os.path.join(d, "out.f32"),
                 *extra)


with tempfile.TemporaryDirectory() as d:
    os.symlink(os.path.abspath(MODEL), os.path.join(d, "model.gguf"))
    img = os.path.join(d, "img.png")
    png(img, 64, 64, bytes((i * 7) % 256 for i in range(64 * 64 * 3)))
    a, b = os.path.join(d, "mmproj-a.gguf"), os.path.join(d, "mmproj-b.gguf")

    # none beside: no tower; an image asks for one
    rc, mm, err = plan(d)
    if rc or mm is not None:
        fail(f"none beside: plan exit {rc}, mmproj {mm}: {err}")
    refused("none beside, logits --image", logits_image(d, img), "nsctl logits",
            "no mmproj*.gguf there")
    mm, why = info_mmproj(d)
    if mm is not None or "no mmproj*.gguf there" not in why:
        fail(f"none beside: info mmproj {mm}, {why!r}")

    # one beside: taken by plan and by logits --image (said on its summary line)
    os.symlink(os.path.abspath(MMPROJ), a)
    rc, mm, err = plan(d)
    if rc or mm != a:
        fail(f"one beside: plan exit {rc}, mmproj {mm}: {err}")
    if info_mmproj(d)[0] != a:
        fail(f"one beside: info mmproj {info_mmproj(d)}")
    r = logits_image(d, img)
    if r.returncode or f"vision tower {a}, found beside the model" not in r.stderr or \
            "4 image tokens" not in r.stderr:
        fail(f"one beside: logits --image exit {r.returncode}: {r.stderr!r}")
    else:
        print("  one beside, logits --image                   -> " + r.stderr.strip()[-90:])
    rc, mm, err = plan(d, "--no-mmproj")
    if rc or mm is not None:
        fail(f"one beside, --no-mmproj: plan exit {rc}, mmproj {mm}: {err}")
    refused("--no-mmproj with --image", logits_image(d, img, "--no-mmproj"), "nsctl logits",
            "--no-mmproj leaves it out")
    refused("--no-mmproj with --mmproj", nsctl("plan", os.path.join(d, "model.gguf"),
                                               "--mmproj", a, "--no-mmproj"),
            "nsctl plan", "--mmproj and --no-mmproj")
    r = nsctl("plan", os.path.join(d, "model.gguf"), "--no-mmproj-auto", "--json")
    if r.returncode or json.loads(r.stdout)["mmproj"] is not None:
        fail(f"--no-mmproj-auto (llama.cpp's spelling): exit {r.returncode} {r.stderr!r}")

    # a narrower tower is passed over, alone and beside a fitting one
    narrow = os.path.join(d, "mmproj-narrow.gguf")
    narrow_copy(MMPROJ, narrow, 128)
    rc, mm, err = plan(d)
    if rc or mm != a:
        fail(f"fitting + narrow: plan exit {rc}, mmproj {mm}: {err}")
    os.unlink(a)
    rc, mm, err = plan(d)
    if rc or mm is not None:
        fail(f"narrow alone: plan exit {rc}, mmproj {mm}: {err}")
    refused("narrow alone, logits --image", logits_image(d, img), "nsctl logits",
            "projection_dim 128, the model's n_embd 256")
    # ... but named with --mmproj it is judged, not passed over
    refused("narrow named with --mmproj", nsctl("plan", os.path.join(d, "model.gguf"),
                                                "--mmproj", narrow),
            "nsctl plan", "not the tower of")
    os.unlink(narrow)
    with open(os.path.join(d, "mmproj-junk.gguf"), "wb") as f:
        f.write(b"not a gguf")
    rc, mm, err = plan(d)
    if rc or mm is not None:
        fail(f"junk named mmproj: plan exit {rc}, mmproj {mm}: {err}")
    os.unlink(os.path.join(d, "mmproj-junk.gguf"))

    # two fitting: refused wherever a tower is taken, unless named or turned off
    os.symlink(os.path.abspath(MMPROJ), a)
    shutil.copy(MMPROJ, b)
    refused("two beside, plan", nsctl("plan", os.path.join(d, "model.gguf")), "nsctl plan",
            "several vision towers beside")
    refused("two beside, logits --image", logits_image(d, img), "nsctl logits",
            "several vision towers beside")
    refused("two beside, run --chat", nsctl("run", os.path.join(d, "model.gguf"), "--chat",
                                            "--chat-template", "chatml",
                                            stdin=""),
            "nsctl run", "several vision towers beside")
    mm, why = info_mmproj(d)
    if mm is not None or "several vision towers" not in why:
        fail(f"two beside: info mmproj {mm}, {why!r}")
    rc, mm, err = plan(d, "--mmproj", b)
    if rc or mm != b:
        fail(f"two beside, --mmproj wins: plan exit {rc}, mmproj {mm}: {err}")
    r = logits_image(d, img, "--mmproj", b)
    if r.returncode or "found beside" in r.stderr:
        fail(f"two beside, logits --mmproj: exit {r.returncode}: {r.stderr!r}")
    rc, mm, err = plan(d, "--no-mmproj")
    if rc or mm is not None:
        fail(f"two beside, --no-mmproj: plan exit {rc}, mmproj {mm}: {err}")
    # a text prompt takes no tower, so nothing beside it is judged
    r = nsctl("run", os.path.join(d, "model.gguf"), "-p", "hi", "-n", "2", "--mem-budget", "8MB",
              "-s", "1")
    if r.returncode or "vision tower" in r.stderr:
        fail(f"two beside, run -p: exit {r.returncode}: {r.stderr!r}")

    # a model that takes no images: a tower beside it is not its business
    if os.path.isfile(TINY):
        t = os.path.join(d, "t")
        os.mkdir(t)
        os.symlink(os.path.abspath(TINY), os.path.join(t, "model.gguf"))
        os.symlink(os.path.abspath(MMPROJ), os.path.join(t, "mmproj-x.gguf"))
        rc, mm, err = plan(t)
        if rc or mm is not None:
            fail(f"text model with an mmproj beside: plan exit {rc}, mmproj {mm}: {err}")
        if info_mmproj(t)[0] != "absent":
            fail(f"text model: info says mmproj {info_mmproj(t)}")
    elif os.environ.get("CI") == "true":
        fail(f"{TINY} missing")

checks.done()
