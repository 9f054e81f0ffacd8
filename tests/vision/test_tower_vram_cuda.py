#!/usr/bin/env python3
"""The CUDA vision tower's VRAM counted in --vram-budget (nscompute/vision/vision_vram.h,
nsctl/tower_vram.h) through the process pipeline.

    test_tower_vram_cuda.py NSCTL NSCOMPUTE_CUDA

NSCOMPUTE_CUDA is the compute process of `--backend cuda` (nscompute-cudaemu in CI). For
hf/qwen3_vl (its mmproj beside it) and hf/qwen3_5_cond (--mmproj), `nsctl logits --image
--backend cuda` (a context of the prompt's 12 tokens), with --max-patches 4 and without it:
  - `nsctl plan --backend cuda --json` shows tower_vram > 0, and reserve_vram is the plan's
    without the tower (--no-mmproj / no --mmproj) plus tower_vram; the text names it;
  - a budget of 1 MB is refused before any process starts in one line (exit 2) naming the
    smallest workable --vram-budget L, which is the plan's reserve_vram at L;
  - at L the session runs: nscompute-cuda says the pass's arena is L - tower_vram and the
    tower's is plan's tower_vram (the sum is the budget, what plan reserved), the tower ran
    one image in an arena of exactly tower_vram; the logits are the cpu backend's (bit for
    bit over the emulation);
  - at L - 1: refused in one line, exit 2, naming L;
  - without --max-patches the tower's figure is larger (12 tokens, not 4) and still what
    nscompute takes: the limits reach nscompute;
  - `nsctl run --image -c 64 --max-patches 4` (qwen3_vl): 1 B under plan's reserve refused in
    one line naming it, at it the pass's and the tower's arenas sum to it.
Exit 0 pass, 1 fail (77: oracle missing outside CI).
"""
import json
import os
import re
import subprocess
import sys
import tempfile

from vision_testlib import Checks, cuda_test_args, mm_prompts

NSCTL, REAL, ORACLE = cuda_test_args()
checks = Checks()
fail = checks.fail
FLAGS = ["--image-token", "1000", "--min-pixels", "4096", "--mem-budget", "8MB"]


def nsctl(*args):
    return subprocess.run([NSCTL] + [str(a) for a in args], capture_output=True, text=True,
                          errors="replace", timeout=300)


def plan(model, extra, n_ctx, *more):
    r = nsctl("plan", model, *extra, "-c", n_ctx, "--mem-budget", "8MB", "--ram-budget", "0",
              *more)
    if r.returncode != 0:
        fail(f"plan {' '.join(map(str, more))}: exit {r.returncode}: {r.stderr[-400:]}")
        return None
    return r.stdout


def one_line_refusal(what, r, least):
    lines = r.stderr.strip().splitlines()
    if r.returncode != 2 or len(lines) != 1 or \
            f"smallest workable: --vram-budget {least} " not in lines[0] or \
            "vision tower's" not in lines[0]:
        fail(f"{what}: exit {r.returncode}, want 2 and one line naming {least}: {r.stderr[-600:]}")
        return False
    return True


with tempfile.TemporaryDirectory() as d:
    for arch, base, model, extra, image, toks in mm_prompts(ORACLE, d):
        ids = ",".join(map(str, toks))
        n_ctx = len(toks)  # nsctl logits' context: the prompt
        cpu = os.path.join(d, f"{arch}-cpu.f32")
        r = nsctl("logits", model, "--image", image, "--tokens", ids, "-o", cpu, *extra,
                  *FLAGS, "--backend", "cpu")
        if r.returncode != 0:
            fail(f"{arch}: cpu logits: exit {r.returncode}: {r.stderr[-400:]}")
            continue
        figures = {}
        for lim in (["--max-patches", "4"], []):
            tag = f"{arch} {' '.join(lim) or 'no --max-patches'}"
            no_tower = ["--no-mmproj"] if not extra else []
            a = plan(model, no_tower, n_ctx, "--backend", "cuda", "--vram-budget", "96MB",
                     "--json")
            b = plan(model, extra, n_ctx, "--backend", "cuda", "--vram-budget", "96MB",
                     "--min-pixels", "4096", *lim, "--json")
            t = plan(model, extra, n_ctx, "--backend", "cuda", "--vram-budget", "96MB",
                     "--min-pixels", "4096", *lim)
            if a is None or b is None or t is None:
                continue
            ba, bb = json.loads(a)["budgets"], json.loads(b)["budgets"]
            tv = bb["tower_vram"]
            if ba["tower_vram"] != 0 or tv <= 0 or \
                    bb["reserve_vram"] != ba["reserve_vram"] + tv:
                fail(f"{tag}: plan: tower_vram {tv}, reserve {bb['reserve_vram']}, without "
                     f"the tower {ba['reserve_vram']}")
                continue
            if not re.search(rf"^tower VRAM: .*\({tv} B\) for the largest image at -c {n_ctx}, "
                             r"in --reserve-vram$", t, re.M):
                fail(f"{tag}: plan's text has no tower VRAM row of {tv} B")
            figures[tuple(lim)] = tv
            print(f"ok: {tag}: plan reserves the tower's {tv} B (reserve "
                  f"{ba['reserve_vram']} -> {bb['reserve_vram']})")

            def logits(budget, name, *more):
                o = os.path.join(d, f"{arch}-{name}.f32")
                return o, nsctl("logits", model, "--image", image, "--tokens", ids, "-o", o,
                                *extra, *FLAGS, *lim, "--backend", "cuda", "--vram-budget",
                                budget, *more)

            _, r = logits("1MB", "small")
            m = re.search(r"smallest workable: --vram-budget (\d+) ", r.stderr)
            if not m or not one_line_refusal(f"{tag}: 1 MB", r, m.group(1)):
                fail(f"{tag}: 1 MB: no one-line refusal with the least budget: {r.stderr[-400:]}")
                continue
            least = int(m.group(1))
            p = plan(model, extra, n_ctx, "--backend", "cuda", "--vram-budget", least,
                     "--min-pixels", "4096", *lim, "--json")
            if p is None:
                continue
            pl = json.loads(p)["budgets"]
            if pl["reserve_vram"] != least or pl["tower_vram"] != tv:
                fail(f"{tag}: plan at {least}: reserve {pl['reserve_vram']}, tower "
                     f"{pl['tower_vram']}; want {least} and {tv}")
            out, r = logits(least, "least")
            if r.returncode != 0:
                fail(f"{tag}: at the least budget {least}: exit {r.returncode}: "
                     f"{r.stderr[-600:]}")
                continue
            m = re.search(r"nscompute: cuda: --vram-budget (\d+) B: the pass's arena (\d+) B, "
                          r"the draft model's (\d+) B, the vision tower's (\d+) B", r.stderr)
            used = re.search(r"vision tower: 1 image\(s\) on the device, .* arena (\d+) B "
                             r"\((\d+) B used\)", r.stderr)
            if not m or not used:
                fail(f"{tag}: nscompute did not report the budget's shares or the tower's "
                     f"arena: {r.stderr[-600:]}")
                continue
            vb, pa, dr, tw = map(int, m.groups())
            if vb != least or tw != tv or dr != 0 or pa + tw != least or \
                    int(used.group(1)) != tv:
                fail(f"{tag}: at {least}: nscompute's budget {vb}, pass {pa}, tower {tw}, "
                     f"the image's arena {used.group(1)}; plan's tower {tv}")
            else:
                print(f"ok: {tag}: at {least} B the pass takes {pa} B and the tower {tw} B "
                      f"(its image's arena {used.group(1)} B, {used.group(2)} B used)")
            if not REAL:
                with open(out, "rb") as f1, open(cpu, "rb") as f2:
                    if f1.read() != f2.read():
                        fail(f"{tag}: at {least}: logits differ from the cpu backend's")
            _, r = logits(least - 1, "short")
            if one_line_refusal(f"{tag}: {least - 1} B", r, least):
                print(f"ok: {tag}: {least - 1} B refused: {r.stderr.strip()}")
        # nsctl run (run/serve's checks, engine_flags.c): -c 64, --max-patches 4: the least
        # budget is plan's reserve; 1 B short refused in one line before any process starts
        if not extra:
            p = plan(model, extra, 64, "--backend", "cuda", "--vram-budget", "96MB",
                     "--min-pixels", "4096", "--max-patches", "4", "--json")
            least = json.loads(p)["budgets"]["reserve_vram"] if p else 0
            run = [model, "--image", image, "-p", "hi", "-n", "2", "--temp", "0", "-c", "64",
                   "--max-patches", "4", *FLAGS, "--backend", "cuda", "--vram-budget"]
            r = nsctl("run", *run, least - 1)
            if one_line_refusal(f"{arch}: run at {least - 1} B", r, least):
                print(f"ok: {arch}: run at {least - 1} B refused: {r.stderr.strip()}")
            r = nsctl("run", *run, least)
            m = re.search(r"nscompute: cuda: --vram-budget (\d+) B: the pass's arena (\d+) B, "
                          r"the draft model's 0 B, the vision tower's (\d+) B", r.stderr)
            if r.returncode != 0 or not m or int(m.group(2)) + int(m.group(3)) != least:
                fail(f"{arch}: run at the least budget {least}: exit {r.returncode}: "
                     f"{r.stderr[-600:]}")
            else:
                print(f"ok: {arch}: run at {least} B: the pass {m.group(2)} B, the tower "
                      f"{m.group(3)} B")
        if len(figures) == 2 and not figures[()] > figures[("--max-patches", "4")]:
            fail(f"{arch}: the tower's VRAM without --max-patches ({figures[()]}) is not above "
                 f"--max-patches 4's ({figures[('--max-patches', '4')]})")
sys.exit(checks.done())
