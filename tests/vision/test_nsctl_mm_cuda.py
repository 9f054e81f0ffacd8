#!/usr/bin/env python3
"""Images on the cuda backend through the process pipeline: nscompute-cuda's vision tower on the
device (nscompute/cuda/ctower.h; it says so on stderr), its output through the host to the CUDA
pass (M-RoPE positions, DeepStack features), against the cpu backend and Transformers.

    test_nsctl_mm_cuda.py NSCTL NSCOMPUTE_CUDA

NSCOMPUTE_CUDA is the compute process of `--backend cuda` (the host emulation of the kernels,
nscompute-cudaemu, in CI; the real nscompute-cuda on a GPU machine with NS_CUDA_REAL=1).
For hf/qwen3_vl (GGUF, its mmproj beside it) and hf/qwen3_5_cond (the safetensors checkpoint
with --mmproj, qwen35's hybrid layers): `nsctl logits --image --backend cuda` with everything
streamed and with the weights in VRAM (--vram-budget) against `--backend cpu`: bit-identical
over the emulation (its kernels are the cpu pass's and the host tower's code), and within 1e-4
of Transformers' mm.logits.f32 either way; `run --image -p ... --temp 0 --backend cuda` (the text decoded past
the image, at its M-RoPE offset) generates the cpu backend's text; with an f16 KV cache
(-ctk/-ctv f16: the typed path's rotation of the image rows) within 1e-2 of the cpu backend's
typed pass. Refusals, one line and exit 2: an image for a model without M-RoPE on the cuda
backend, --backend other than cpu|cuda, --vram-budget without --backend cuda.
Exit 0 pass, 1 fail (77: oracle missing outside CI).
"""
import os
import subprocess
import tempfile

from vision_testlib import Checks, cuda_test_args, f32, mm_prompts, refused

NSCTL, REAL, ORACLE = cuda_test_args()
checks = Checks()
fail = checks.fail
REF_TOL = 1e-4
KV_TOL = 1e-2  # tests/cuda/test_cfwd.c's, the typed caches' bound


def nsctl(*args):
    return subprocess.run([NSCTL] + [str(a) for a in args], capture_output=True, text=True,
                          errors="replace", timeout=300)


FLAGS = ["--image-token", "1000", "--min-pixels", "4096", "--mem-budget", "8MB"]

with tempfile.TemporaryDirectory() as d:
    for arch, base, model, extra, image, toks in mm_prompts(ORACLE, d):
        ids = ",".join(map(str, toks))
        want = f32(os.path.join(base, "mm.logits.f32"))
        out = {}
        for name, backend in (("cpu", ["--backend", "cpu"]),
                              ("cuda", ["--backend", "cuda"]),
                              ("cuda-vram", ["--backend", "cuda", "--vram-budget", "96MB"])):
            o = os.path.join(d, f"{arch}-{name}.f32")
            r = nsctl("logits", model, "--image", image, "--tokens", ids, "-o", o, *extra,
                      *FLAGS, *backend)
            if r.returncode != 0 or "4 image tokens" not in r.stderr:
                fail(f"{arch}: logits --image {' '.join(backend)}: exit {r.returncode}: "
                     f"{r.stderr[-600:]}")
                continue
            # the tower attached, and the image run through it (the emulation's bits are the
            # host tower's: nscompute-cuda counts the images its CUDA tower encoded)
            on_device = ("the vision tower runs on the device" in r.stderr and
                         "vision tower: 1 image(s) on the device" in r.stderr)
            if on_device != (name != "cpu"):
                fail(f"{arch} ({name}): the tower {'ran' if on_device else 'did not run'} on "
                     f"the device: {r.stderr[-600:]}")
            got = f32(o)
            if len(got) != len(want):
                fail(f"{arch} ({name}): {len(got)} logits, the reference {len(want)}")
                continue
            out[name] = got
            e = max(abs(a - b) for a, b in zip(got, want))
            print(f"{arch}: logits --image {' '.join(backend)}, {len(toks)} rows: max |d| "
                  f"{e:.3g} from Transformers")
            if not e <= REF_TOL:
                fail(f"{arch} ({name}): max |d| {e:.3g} from Transformers > {REF_TOL}")
        for name in ("cuda", "cuda-vram"):
            if name not in out or "cpu" not in out:
                continue
            e = max(abs(a - b) for a, b in zip(out[name], out["cpu"]))
            print(f"  {name} vs cpu: max |d| {e:.3g}")
            if not REAL and out[name] != out["cpu"]:
                fail(f"{arch}: --backend {name} differs from the cpu backend (max |d| {e:.3g}); "
                     f"the emulation computes the cpu pass's bits")
        # an f16 KV cache (-ctk/-ctv): the typed path rotates the image's rows as the f32 one;
        # the two backends' typed passes differ only by the cpu's float attention (KV_TOL)
        typed = {}
        for name, backend in (("cpu", ["--backend", "cpu"]), ("cuda", ["--backend", "cuda"])):
            o = os.path.join(d, f"{arch}-{name}-f16.f32")
            r = nsctl("logits", model, "--image", image, "--tokens", ids, "-o", o, *extra,
                      *FLAGS, *backend, "-ctk", "f16", "-ctv", "f16")
            if r.returncode != 0:
                fail(f"{arch}: logits --image -ctk f16 {name}: exit {r.returncode}: "
                     f"{r.stderr[-600:]}")
                continue
            typed[name] = f32(o)
        if len(typed) == 2 and len(typed["cpu"]) == len(typed["cuda"]) == len(want):
            e = max(abs(a - b) for a, b in zip(typed["cuda"], typed["cpu"]))
            t = max(abs(a - b) for a, b in zip(typed["cuda"], want))
            print(f"  f16 cache: cuda vs cpu max |d| {e:.3g}, vs Transformers {t:.3g}")
            if not e <= KV_TOL:
                fail(f"{arch}: f16 cache, cuda vs cpu max |d| {e:.3g} > {KV_TOL}")
        elif len(typed) == 2:
            fail(f"{arch}: f16 cache: {len(typed['cuda'])} / {len(typed['cpu'])} logits")
        # generation past the image: the decode steps rotate at the image's M-RoPE offset
        text = {}
        for name, backend in (("cpu", []), ("cuda", ["--backend", "cuda"])):
            r = nsctl("run", model, "--image", image, "-p", "hello", "-n", "8", "--temp", "0",
                      "--ignore-eos", "--ram-budget", "0", *extra, *FLAGS, *backend)
            if r.returncode != 0 or "images 4 tok" not in r.stderr:
                fail(f"{arch}: run --image {' '.join(backend)}: exit {r.returncode}: "
                     f"{r.stderr[-600:]}")
                continue
            text[name] = r.stdout
        if len(text) == 2:
            print(f"  run --image -p, 8 tokens: cpu {text['cpu']!r}, cuda {text['cuda']!r}")
            if text["cpu"] != text["cuda"] and not REAL:
                fail(f"{arch}: run --image: the cuda backend generated {text['cuda']!r}, the "
                     f"cpu backend {text['cpu']!r}")

    image = os.path.join(d, "qwen3_vl.png")
    vl = os.path.join(ORACLE, "hf", "qwen3_vl", "gguf", "qwen3_vl-f32.gguf")
    refused(checks, "a model without M-RoPE, cuda backend",
            nsctl("logits", os.path.join(ORACLE, "tiny", "tiny-qwen3-F32.gguf"), "--image", image,
                  "--mmproj", os.path.join(ORACLE, "hf", "qwen3_vl", "gguf",
                                           "mmproj-qwen3_vl-f32.gguf"),
                  "--tokens", "1,2", "-o", os.path.join(d, "x.f32"), "--backend", "cuda"),
            "nsctl logits")
    refused(checks, "logits --backend gpu",
            nsctl("logits", vl, "--tokens", "1,2", "-o", os.path.join(d, "x.f32"), "--backend",
                  "gpu"), "nsctl logits")
    refused(checks, "logits --vram-budget without --backend cuda",
            nsctl("logits", vl, "--tokens", "1,2", "-o", os.path.join(d, "x.f32"),
                  "--vram-budget", "1GB"), "nsctl logits")

checks.done()
