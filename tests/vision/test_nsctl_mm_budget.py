#!/usr/bin/env python3
"""The vision tower and its images' working memory in the budgets (issue 21): `nsctl plan
--mmproj` counts what `nsctl run --mmproj` counts, and a run with an image stays under the cap
it was given.

    test_nsctl_mm_budget.py NSCTL MEMCAP

On hf/qwen3_vl (GGUF) with its mmproj:
  - plan --json: fixed.tower_bytes (what the tower holds: biases, norms, the patch kernel as
    float; its matrices stream through the arena, under --mem-budget), image_bytes
    (the tower's activations for the largest image the limits let through, its pixels, the
    embeddings held for the decoder) and image_tokens (that image: --max-patches, else
    --max-pixels / 32^2, at most -c); fixed.total grows by exactly the two; the text output
    names them; refusals in one line (--max-patches without a tower, a model that takes no
    images, a tower of another model);
  - the tower's rows stream through the arena: a copy of the mmproj given one 64 KiB row makes
    plan's min_mem that row's blocks (above the model's), and an arena under it is refused in
    one line naming the tower's widest tensor;
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
import struct
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
    # what the tower holds (biases, norms, the patch kernel as float): its matrices and the
    # position grid stream through the arena (nsio --mmproj), so not the mmproj's size
    if not 0 < f["tower_bytes"] < size:
        fail(f"tower_bytes {f['tower_bytes']} is not less than the mmproj ({size} B on disk)")
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

# ---- the tower's rows in the smallest arena (they stream through it) ----
def widened(src, dst, row_floats):
    """A copy of the GGUF src with one more F32 tensor v.wide.weight of one row of row_floats
    (its data after the others'): the tower's widest row."""
    data = open(src, "rb").read()
    pos = 8

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from("<" + fmt, data, pos)[0]
        pos += struct.calcsize("<" + fmt)
        return v

    def skip_value(t):
        nonlocal pos
        if t == 8:
            n = take("Q")
            pos += n
        elif t == 9:
            et, n = take("I"), take("Q")
            for _ in range(n):
                skip_value(et)
        else:
            pos += {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}[t]

    n_t, n_kv = take("Q"), take("Q")
    align = 32
    for _ in range(n_kv):
        n = take("Q")
        key = data[pos:pos + n].decode()
        pos += n
        t = take("I")
        if key == "general.alignment":
            align = struct.unpack_from("<I", data, pos)[0]
        skip_value(t)
    infos_at = pos
    for _ in range(n_t):
        n = take("Q")  # the name (take moves pos first)
        pos += n
        n = take("I")
        pos += 8 * n + 4 + 8
    body = (pos + align - 1) // align * align
    tail = data[body:]
    name = b"v.wide.weight"
    off = (len(tail) + align - 1) // align * align
    info = (struct.pack("<Q", len(name)) + name + struct.pack("<IQQIQ", 2, row_floats, 1, 0, off))
    head = data[:8] + struct.pack("<Q", n_t + 1) + data[16:pos] + info
    head += b"\0" * ((-len(head)) % align)
    tail += b"\0" * (off - len(tail)) + bytes(4 * row_floats)
    open(dst, "wb").write(head + tail)


with tempfile.TemporaryDirectory() as d:
    wide = os.path.join(d, "mmproj-wide.gguf")
    widened(MMPROJ, wide, 16384)  # a 64 KiB row: its blocks are over the model's 40 KiB
    wp = plan(*B, "--mmproj", wide)
    if wp and plain:
        print(f"plan --mmproj with a 64 KiB row: min_mem {wp['budgets']['min_mem']} (the model's"
              f" {plain['budgets']['min_mem']})")
        # (lookahead + 1) blocks of one 64 KiB row and its O_DIRECT slack (4 KiB)
        if wp["budgets"]["min_mem"] % (65536 + 4096) or plain["budgets"]["min_mem"] >= \
                wp["budgets"]["min_mem"]:
            fail(f"min_mem {wp['budgets']['min_mem']} is not blocks of the tower's 68 KiB")
    refused("plan: an arena under the tower's widest row",
            nsctl("plan", MODEL, "-c", "256", "--mem-budget", "100KB", "--ram-budget", "0",
                  "--vram-budget", "0", "--mmproj", wide),
            "nsctl plan", "vision tower's widest tensor", "65536 bytes")

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
