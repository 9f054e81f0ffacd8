#!/bin/sh
# test_cuda_nodevice.sh NSCTL NSCOMPUTE_CUDA MODEL - on a machine without a usable GPU, the
# real nscompute-cuda behind `nsctl run --backend cuda` (here with a RAM tier, which the cuda
# backend page-locks) fails with the one line that says so and a non-zero exit, before it
# touches nsio's RAM tier: no page-locking complaint, no crash. Where a GPU answers, the run
# succeeds and there is nothing to check (77).
set -u
nsctl=$1
export NS_NSCOMPUTE_CUDA=$2
model=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
timeout 120 "$nsctl" run "$model" -p "hello world" -n 4 --temp 0 --mem-budget 4MB \
    --ram-budget 2MB -c 256 --backend cuda > "$tmp/out.txt" 2> "$tmp/err.txt"
rc=$?
if [ "$rc" = 0 ]; then
    echo "a CUDA device answered: nothing to check here"
    exit 77
fi
fail() { echo "FAIL: $*"; cat "$tmp/err.txt"; exit 1; }
[ "$rc" -lt 124 ] || fail "exit $rc (a hang or a signal), expected an error exit"
grep -q "^nscompute: cuda: no usable CUDA device (no GPU or no driver)$" "$tmp/err.txt" ||
    fail "no 'no usable CUDA device' line"
if grep -q "page-lock\|pageable" "$tmp/err.txt"; then
    fail "the RAM tier was touched before the device was found missing"
fi
n=$(grep -c "nscompute: cuda" "$tmp/err.txt")
[ "$n" = 1 ] || fail "$n lines from the cuda backend, expected the one reason"
echo "ok: exit $rc, one line: no usable CUDA device"
