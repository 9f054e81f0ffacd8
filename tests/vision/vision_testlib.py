"""What the nsctl image tests share: a minimal PNG writer (zlib + crc32, 8-bit RGB), a
float32 file reader, the oracle's absence and the count of failed checks."""
import array
import os
import struct
import sys
import zlib


def oracle_missing(where):
    """The oracle's data is not at `where`: a failure under CI=true, else a skip (77)."""
    print(f"oracle data missing at {where}", file=sys.stderr)
    sys.exit(1 if os.environ.get("CI") == "true" else 77)


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
