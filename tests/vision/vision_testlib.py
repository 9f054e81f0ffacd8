"""What the nsctl image tests share: a minimal PNG writer (zlib + crc32, 8-bit RGB), a
float32 file reader, the oracle's absence, the count of failed checks, the one-line refusal
check and the oracle's multimodal prompts."""
import array
import json
import os
import struct
import sys
import zlib


def oracle_missing(where):
    """The oracle's data is not at `where`: a failure under CI=true, else a skip (77)."""
    print(f"oracle data missing at {where}", file=sys.stderr)
    sys.exit(1 if os.environ.get("CI") == "true" else 77)


def cuda_test_args():
    """The CUDA vision tests' start: argv is NSCTL NSCOMPUTE_CUDA (the process nsctl starts for
    --backend cuda, passed on as NS_NSCOMPUTE_CUDA); the oracle must hold hf/qwen3_vl.
    Returns (nsctl, real: NS_CUDA_REAL=1, a GPU's kernels rather than the emulation, oracle)."""
    os.environ["NS_NSCOMPUTE_CUDA"] = sys.argv[2]
    oracle = os.environ.get("NS_ORACLE_DIR", "../shared/oracle")
    if not os.path.isdir(os.path.join(oracle, "hf", "qwen3_vl")):
        oracle_missing(oracle)
    return sys.argv[1], os.environ.get("NS_CUDA_REAL") == "1", oracle


class Checks:
    """Failed checks, counted: fail() prints one line, done() exits 1 after any failure, else
    with `passed` (0; 77 for a test that found nothing it could check)."""

    def __init__(self):
        self.n = 0

    def fail(self, msg):
        print("FAIL " + msg)
        self.n += 1

    def done(self, passed=0):
        print("ok" if not self.n else f"{self.n} checks failed")
        sys.exit(1 if self.n else passed)


def png(path, w, h, rgb, idat=None):
    """Write w x h RGB bytes as a PNG; idat replaces the compressed data (damaged files)."""
    def chunk(t, data):
        return struct.pack(">I", len(data)) + t + data + struct.pack(">I", zlib.crc32(t + data))
    raw = b"".join(b"\0" + rgb[y * w * 3:(y + 1) * w * 3] for y in range(h))
    body = chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
    body += chunk(b"IDAT", zlib.compress(raw) if idat is None else idat) + chunk(b"IEND", b"")
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + body)


def f32(path):
    a = array.array("f")
    with open(path, "rb") as f:
        a.frombytes(f.read())
    return a


def refused(checks, what, r, cmd, width=48):
    """r (a finished nsctl command) refused in one line prefixed `cmd: `, with exit 2."""
    lines = r.stderr.strip().split("\n")
    if r.returncode != 2 or len(lines) != 1 or not lines[0].startswith(cmd + ": "):
        checks.fail(f"{what}: exit {r.returncode}, stderr {r.stderr!r}")
    else:
        print(f"  {what:{width}} -> {lines[0]}")


def mm_prompts(oracle, d):
    """The oracle's multimodal prompts: for hf/qwen3_vl (GGUF, its mmproj beside it) and
    hf/qwen3_5_cond (the safetensors checkpoint with --mmproj), yields (arch, base, model,
    extra flags, the image written to a PNG in d, the prompt's token ids as a list)."""
    for arch, model, extra in (
            ("qwen3_vl", "gguf/qwen3_vl-f32.gguf", []),
            ("qwen3_5_cond", "model-bf16", ["--mmproj", "gguf/mmproj-qwen3_5_cond-f32.gguf"])):
        base = os.path.join(oracle, "hf", arch)
        extra = [os.path.join(base, x) if x.startswith("gguf/") else x for x in extra]
        image = os.path.join(d, arch + ".png")
        with open(os.path.join(base, "image.u8"), "rb") as f:
            png(image, 64, 64, f.read())
        with open(os.path.join(base, "seqA.json")) as f:
            toks = json.load(f)["vision"]["mm_tokens"]
        yield arch, base, os.path.join(base, model), extra, image, toks
