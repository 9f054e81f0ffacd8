#!/usr/bin/env python3
"""The vision tower and its images' working memory in the budgets (issue 21): `nsctl plan
--mmproj` counts what `nsctl run --mmproj` counts, and a run with an image stays under the cap
it was given.

    test_nsctl_mm_budget.py NSCTL MEMCAP

On hf/qwen3_vl (GGUF) with its mmproj:
  - plan --json: fixed.tower_bytes (the mmproj's tensors and the patch kernel), image_bytes
    (the tower's activations for the largest image the limits let through, its pixels, the
    embeddings held for the decoder) and image_tokens (that image: --max-patches, else
    --max-pixels / 32^2, at most -c); fixed.total grows by exactly the two; the text output
    names them; refusals in one line (--max-patches without a tower, a model that takes no
    images, a tower of another model);
  - under a memory cgroup capped at plan's host_total (budgets named, 1024x1024 image, 1024
    tokens, -c 1100): run --image finishes with no OOM kill (the peak printed beside the cap);
    one page less and run refuses before anything starts, in one line naming the tower and
    the images (plan and run count the same fixed set, to the page);
  - budgets not named, a cap the session fits without its images but not with them: refused
    in one line naming the tower's and the images' figures and --max-patches.
Exit 0 pass, 1 fail, 77 skip (oracle missing outside CI; no writable v1 memory cgroup).
"""
import json
import os
import random
import subprocess
import sys
import tempfile

from vision_testlib import Checks, oracle_missing, png

NSCTL, MEMCAP = sys.argv[1], sys.argv[2]
ORACLE = os.environ.get("NS_ORACLE_DIR", "../shared/oracle")
BASE = os.path.join(ORACLE, "hf", "qwen3_vl", "gguf")
MODEL = os.path.join(BASE, "qwen3_vl-f32.gguf")
MMPROJ = os.path.join(BASE, "mmproj-qwen3_vl-f32.gguf")
if not os.path.isfile(MODEL) or not os.path.isfile(MMPROJ):
    oracle_missing(BASE)
checks = Checks()
fail = checks.fail


def nsctl(*args, cap=None):
    cmd = [NSCTL] + [str(a) for a in args]
    if cap is not None:
        cmd = [MEMCAP, str(cap), "--"] + cmd
    return subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=300)


def refused(what, r, cmd, *needles):
    lines = [x for x in r.stderr.strip().split("\n") if not x.startswith("memcap:")]
    if (r.returncode != 2 or len(lines) != 1 or not lines[0].startswith(cmd + ": ") or
            any(n not in lines[0] for n in needles)):
        fail(f"{what}: exit {r.returncode}, stderr {r.stderr!r}")
    else:
        print(f"  {what:44} -> {lines[0]}")


def plan(*args):
    r = nsctl("plan", MODEL, "--json", *args)
    if r.returncode != 0:
        fail(f"plan {args}: exit {r.returncode}: {r.stderr.strip()}")
        return None
    return json.loads(r.stdout)


# ---- plan's figures ----
B = ["-c", "256", "--mem-budget", "8MB", "--ram-budget", "0", "--vram-budget", "0"]
plain = plan(*B, "--no-mmproj")
full = plan(*B, "--mmproj", MMPROJ)
beside = plan(*B)  # the mmproj beside the model, found without --mmproj: the same figures
if plain and full and beside and (plain["fixed"]["tower_bytes"] or
                                  beside["fixed"] != full["fixed"] or
                                  beside["mmproj"] != MMPROJ):
    fail(f"plan: --no-mmproj / the tower beside / --mmproj: {plain['fixed']}, "
         f"{beside['fixed']} ({beside['mmproj']}), {full['fixed']}")
small = plan(*B, "--mmproj", MMPROJ, "--max-patches", "4")
px = plan(*B, "--mmproj", MMPROJ, "--max-pixels", "65536")
if plain and full and small and px:
    a, f, s, p = plain["fixed"], full["fixed"], small["fixed"], px["fixed"]
    size = os.path.getsize(MMPROJ)
    print(f"plan -c 256: tower {f['tower_bytes']} B (file {size} B), images {f['image_bytes']} B"
          f" for {f['image_tokens']} tokens; --max-patches 4: {s['image_bytes']} B")
    if a["tower_bytes"] or a["image_bytes"] or a["image_tokens"]:
        fail(f"plan without --mmproj counts a tower: {a}")
    if not size // 2 < f["tower_bytes"] < size * 2:
        fail(f"tower_bytes {f['tower_bytes']} is not the mmproj's ({size} B on disk)")
    for x in (f, s, p):
        if x["total"] != a["total"] + x["tower_bytes"] + x["image_bytes"]:
            fail(f"fixed.total {x['total']} != {a['total']} + tower + images {x}")
    # 32 = patch 16 x merge 2: the largest image is min(max_pixels / 32^2, -c) tokens
    if (f["image_tokens"], s["image_tokens"], p["image_tokens"]) != (256, 4, 64):
        fail(f"image tokens {f['image_tokens']}, {s['image_tokens']}, {p['image_tokens']}: "
             "expected 256 (-c), 4 (--max-patches), 64 (--max-pixels 65536)")
    if not 0 < s["image_bytes"] < p["image_bytes"] < f["image_bytes"]:
        fail(f"image bytes do not grow with the image: {s['image_bytes']}, "
             f"{p['image_bytes']}, {f['image_bytes']}")
    if full["host_total"] < plain["host_total"] + f["tower_bytes"] + f["image_bytes"]:
        fail("host_total does not hold the tower and the images")
r = nsctl("plan", MODEL, *B, "--mmproj", MMPROJ, "--max-patches", "4")
if r.returncode != 0 or not all(k in r.stdout for k in ("  tower ", "  images ",
                                                         "up to 4 tokens")):
    fail(f"plan's text does not show the tower and the images: {r.stdout[:2000]}")
refused("plan: --max-patches without a tower", nsctl("plan", MODEL, "--no-mmproj",
                                                   "--max-patches", "4"),
        "nsctl plan", "--mmproj")
refused("plan: a model that takes no images",
        nsctl("plan", os.path.join(ORACLE, "models", "stories260K.gguf"), "--mmproj", MMPROJ),
        "nsctl plan", "takes no images")
refused("plan: the tower of another model",
        nsctl("plan", MODEL, "--mmproj", os.path.join(
            ORACLE, "hf", "qwen3_5_cond", "gguf", "mmproj-qwen3_5_cond-f32.gguf")),
        "nsctl plan", "not the tower of")

# ---- under a memory cgroup ----
probe = "/sys/fs/cgroup/memory/ns_mm_budget_probe.%d" % os.getpid()
try:
    os.mkdir(probe)
    os.rmdir(probe)
except OSError as e:
    print(f"SKIP the cgroup part: no writable v1 memory cgroup ({e}); memcap.sh needs one")
    checks.done(77)

FLAGS = ["--min-pixels", "4096", "-c", "1100"]  # plan's and run's
TOKEN = ["--image-token", "1000"]  # run's: the tiny vocabulary has no <|image_pad|>
with tempfile.TemporaryDirectory() as d:
    image = os.path.join(d, "big.png")
    rnd = random.Random(21)
    png(image, 1024, 1024, bytes(rnd.getrandbits(8) for _ in range(1024 * 1024 * 3)))
    named = ["--mem-budget", "8MB", "--ram-budget", "0"]
    pl = plan(*FLAGS, *named, "--mmproj", MMPROJ)
    if pl:
        cap = pl["host_total"]
        fx = pl["fixed"]
        print(f"plan -c 1100, 1024x1024 image: fixed {fx['total']} B (tower {fx['tower_bytes']},"
              f" images {fx['image_bytes']} for {fx['image_tokens']} tokens), cap {cap} B")
        r = nsctl("run", MODEL, "--image", image, "-p", "hello", "-n", "4", "--temp", "0",
                  "--mmproj", MMPROJ, *FLAGS, *TOKEN, *named, cap=cap)
        line = [x for x in r.stderr.split("\n") if x.startswith("memcap:")]
        if r.returncode != 0 or not line or "oom kills 0" not in line[0]:
            fail(f"run --image under its cap: exit {r.returncode}: {r.stderr[-800:]}")
        elif "images 1024 tok" not in r.stderr:
            fail(f"run --image: the image is not 1024 tokens: {r.stderr[-500:]}")
        else:
            print("  run --image under plan's host_total: " + line[0])
        refused("run --image, one page under host_total",
                nsctl("run", MODEL, "--image", image, "-p", "hello", "-n", "4", "--mmproj",
                      MMPROJ, *FLAGS, *TOKEN, *named, cap=cap - 4096),
                "nsctl run", "vision tower", "images")
    # budgets chosen by run: the session fits without the images' memory, not with it
    if full and plain:
        big = plan("-c", "4096", "--mmproj", MMPROJ, "--mem-budget", "8MB", "--ram-budget", "0")
        base = plan("-c", "4096", "--mem-budget", "8MB", "--ram-budget", "0", "--no-mmproj")
        if big and base:
            cap = base["host_total"] + big["fixed"]["tower_bytes"] + (8 << 20)
            if cap >= big["host_total"]:
                fail(f"the images' memory at -c 4096 ({big['fixed']['image_bytes']} B) is "
                     "under the test's 8 MiB slack")
            refused("run: budgets chosen, the images do not fit",
                    nsctl("run", MODEL, "--image", image, "-p", "hello", "-n", "4", "--mmproj",
                          MMPROJ, "--image-token", "1000", "-c", "4096", cap=cap),
                    "nsctl run", "the vision tower's", "working memory", "--max-patches")

checks.done()
