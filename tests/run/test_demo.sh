#!/bin/sh
# test_demo.sh DEMO_SH BUILD_ROOT - the README's main job (`make demo` = bench/demo.sh) on the
# bundled default: it generates the random-weight model, streams it under the 1 MiB arena
# with no RAM cache, and its summary shows weights read every token and an arena peak within
# the budget. Run in a scratch directory (the demo writes models/demo.gguf there).
set -u
demo=$1
build=$(cd "$2" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
fail() { echo "FAIL: $*"; cat "$tmp/out"; exit 1; }

N=8 sh "$demo" "$build" > "$tmp/out" 2>&1 || fail "demo exited $?"
grep -q "BUNDLED DEFAULT" "$tmp/out" || fail "no bundled-default banner"
[ -s models/demo.gguf ] || fail "no models/demo.gguf generated"
line=$(grep "nsctl run: prefill" "$tmp/out") || fail "no summary line"
echo "$line"
# weights streamed every token: about the model's 13 MB read per token, not a RAM cache's
# few bytes of embedding row
gb=$(echo "$line" | sed -n 's/.*| \([0-9.]*\) GB read\/token.*/\1/p')
size=$(stat -c %s models/demo.gguf)
awk -v g="$gb" -v s="$size" 'BEGIN { exit !(g * 1e9 > s / 2) }' ||
	fail "${gb:-?} GB read per token of a $size-byte model: it was not streamed"
# "arena peak X KiB of 1.00 MiB" with X <= 1024
peak=$(echo "$line" | sed -n 's/.*arena peak \([0-9.]*\) KiB of 1\.00 MiB.*/\1/p')
[ -n "$peak" ] || fail "no 'arena peak ... KiB of 1.00 MiB' in the summary"
awk -v p="$peak" 'BEGIN { exit !(p > 0 && p <= 1024) }' || fail "arena peak $peak KiB over 1 MiB"
echo "demo ok: arena peak $peak KiB of 1 MiB"
