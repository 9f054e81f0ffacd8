#!/bin/bash
# bench_image.sh MODEL [CAP] - an image prompt's prefill against the drive (issue 21): a
# TOKENS-token image (a SIDE x SIDE PNG: 32 pixels a token with Qwen3-VL's 16-pixel patches
# merged 2 x 2) and a short question, prefilled in one `nsctl run --image -n 1 --json` under a
# memory cgroup of CAP (../shared/tools/memcap.sh), budgets chosen from the cap as `nsctl plan`
# chooses them. The tower is MODEL's mmproj*.gguf beside it (or MMPROJ=FILE).
#
# Prints the image's tokens, the tower's seconds (decoding, preprocessing and the tower: its
# weights are resident in nscompute, read once at load), the text prefill's seconds (the
# prompt's pass over the weights, the tower's time taken out), the bytes nsio read from the
# device during the prefill, and the drive roofline measured on MODEL in the same run
# (bench/ns_diskbw: O_DIRECT, 1 MiB reads, queue depth 16, sequential, median of REPEATS
# passes): roofline seconds = prefill device bytes / drive rate; ratio = roofline seconds /
# text prefill seconds (1.0: the prefill went at the drive's rate). Also the peak of the cgroup
# and how often the cap was hit.
#
# Before the run the model and the tower are dropped from the page cache (dd iflag=nocache),
# as bench/vs_llamacpp.sh does, so pages of an earlier run cannot flatter it.
# Environment: CAP (4G), TOKENS (1024; SIDE = 32 x sqrt(TOKENS), a square), THREADS (all
# CPUs), CTX (TOKENS + 64), REPEATS (3, drive passes), NSCTL (default: $NS_BUILD_ROOT/nsctl/nsctl
# then build/nsctl/nsctl), DISKBW (beside it: bench/ns_diskbw), MEMCAP, STALL (600: the stall
# timeout; a 1 GB tower loads for longer than the default 10 s on a slow drive), MMPROJ,
# IMAGE_TOKEN (the placeholder id, for a vocabulary without <|image_pad|>).
# Exit: 0 ok, 1 the run failed, 2 usage.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
[ $# -ge 1 ] && [ $# -le 2 ] || { echo "usage: $0 MODEL [CAP]" >&2; exit 2; }
model=$1
cap=${2:-${CAP:-4G}}
tokens=${TOKENS:-1024}
threads=${THREADS:-$(nproc)}
ctx=${CTX:-$((tokens + 64))}
repeats=${REPEATS:-3}
stall=${STALL:-600}
memcap=${MEMCAP:-$root/../shared/tools/memcap.sh}
[ -r "$model" ] || { echo "bench_image: cannot read model $model" >&2; exit 2; }
side=$(python3 -c "import math,sys; t=int(sys.argv[1]); s=math.isqrt(t); sys.exit(1) if s*s!=t or t<1 else print(32*s)" "$tokens") ||
	{ echo "bench_image: TOKENS must be a square (1024 = 32 x 32)" >&2; exit 2; }

nsctl=${NSCTL:-}
for c in "${NS_BUILD_ROOT:-}/nsctl/nsctl" "$root/build/nsctl/nsctl"; do
	[ -z "$nsctl" ] && [ -x "$c" ] && nsctl=$c
done
[ -n "$nsctl" ] || { echo "bench_image: no nsctl binary (set NSCTL=path)" >&2; exit 2; }
diskbw=${DISKBW:-$(dirname "$(dirname "$nsctl")")/bench/ns_diskbw}
[ -x "$diskbw" ] || { echo "bench_image: no $diskbw (ninja -C build bench/ns_diskbw, or DISKBW=path)" >&2; exit 2; }
[ -x "$memcap" ] || { echo "bench_image: no cgroup wrapper $memcap (MEMCAP=path)" >&2; exit 2; }
mmflag=()
[ -n "${MMPROJ:-}" ] && mmflag=(--mmproj "$MMPROJ")
[ -n "${IMAGE_TOKEN:-}" ] && mmflag+=(--image-token "$IMAGE_TOKEN")

tmp=$(mktemp -d /tmp/bench_image.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
# a SIDE x SIDE RGB PNG of smooth gradients and noise (what it shows does not change the work)
python3 - "$tmp/image.png" "$side" <<'EOF' || exit 1
import random, struct, sys, zlib
path, n = sys.argv[1], int(sys.argv[2])
rnd = random.Random(21)
rows = []
for y in range(n):
    row = bytearray(b"\0")
    for x in range(n):
        row += bytes(((x * 255 // n + rnd.randrange(16)) % 256, (y * 255 // n) % 256,
                      ((x + y) * 127 // n + rnd.randrange(8)) % 256))
    rows.append(bytes(row))
def chunk(t, d):
    return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
with open(path, "wb") as f:
    f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", n, n, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"".join(rows), 6)) + chunk(b"IEND", b""))
EOF

echo "bench_image: $model, a ${side}x${side} image ($tokens tokens), cap $cap, $threads threads, -c $ctx" >&2
"$diskbw" "$model" --repeats "$repeats" > "$tmp/disk.out" 2>&1 || { cat "$tmp/disk.out" >&2; exit 1; }
cat "$tmp/disk.out" >&2
for f in "$model" "${MMPROJ:-}" "$(dirname "$model")"/*mmproj*.gguf; do
	[ -f "$f" ] && dd if="$f" iflag=nocache count=0 status=none 2>/dev/null
done
"$memcap" "$cap" -- "$nsctl" run "$model" "${mmflag[@]}" --image "$tmp/image.png" \
	-p "What is in this image?" -n 1 -s 1 --json -c "$ctx" --threads "$threads" \
	--stall-timeout "$stall" > "$tmp/run.json" 2> "$tmp/run.err"
rc=$?
cat "$tmp/run.err" >&2
[ $rc -eq 0 ] || { echo "bench_image: nsctl run failed (exit $rc)" >&2; exit 1; }

python3 - "$tmp/run.json" "$tmp/disk.out" "$tmp/run.err" "$model" "$tokens" <<'EOF'
import json, os, re, sys
run = json.load(open(sys.argv[1]))
disk = open(sys.argv[2]).read()
err = open(sys.argv[3]).read()
m = re.search(r"([0-9.]+) GB/s", disk)
if not m:
    sys.exit("bench_image: no drive rate in: " + disk)
drive = float(m.group(1))
img = run.get("images") or {}
n_img, tower_s = img.get("image_tokens", 0), img.get("tower_s", 0.0)
prefill_s = run["n_prompt"] / run["prefill_tok_s"] if run["prefill_tok_s"] else 0.0
text_s = prefill_s - tower_s
dev_gb = run["bytes_device_prefill"] / 1e9
req_gb = run["bytes_requested_prefill"] / 1e9
roof_s = dev_gb / drive
tower = re.search(r"vision tower (\S+) \(found beside", err)
peak = re.search(r"memcap: .*peak \d+ B \((\d+) MiB\), limit hit (\d+) times", err)
print(f"model            {sys.argv[4]} ({os.path.getsize(sys.argv[4]) / 1e9:.2f} GB)")
if tower:
    print(f"tower            {tower.group(1)} ({os.path.getsize(tower.group(1)) / 1e9:.2f} GB, read once at load)")
print(f"image tokens     {n_img} (prompt {run['n_prompt']} tokens)")
print(f"tower            {tower_s:.2f} s")
print(f"prefill          {prefill_s:.2f} s in all, {text_s:.2f} s the text pass")
print(f"read             {dev_gb:.3f} GB from the device ({req_gb:.3f} GB requested) during the prefill")
print(f"drive            {drive:.3f} GB/s sequential (same run): roofline {roof_s:.2f} s")
print(f"ratio            {roof_s / text_s if text_s > 0 else 0:.2f} of the drive roofline (roofline s / text prefill s)")
if peak:
    print(f"memory           cgroup peak {peak.group(1)} MiB, cap hit {peak.group(2)} times")
if n_img != int(sys.argv[5]):
    sys.exit(f"bench_image: the image became {n_img} tokens, not {sys.argv[5]}")
EOF
