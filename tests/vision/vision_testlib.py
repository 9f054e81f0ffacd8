"""What the nsctl image tests share: a minimal PNG writer (zlib + crc32, 8-bit RGB) and a
float32 file reader."""
import array
import struct
import zlib


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
