#!/bin/sh
# test_cpu_only_arch.sh NSCTL NSCOMPUTE_CUDA MODEL - an architecture only the cpu backend
# computes (gemma3) with `nsctl run --backend cuda` is refused by nsctl before any process
# starts: exit 2 and the one line naming the architecture and the cpu backend; nothing from
# nscompute, no "died". The same model runs with the cpu backend.
set -u
nsctl=$1
export NS_NSCOMPUTE_CUDA=$2
model=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; cat "$tmp/err.txt"; exit 1; }
timeout 120 "$nsctl" run "$model" -p "hello world" -n 2 --temp 0 -c 64 --backend cuda \
    > "$tmp/out.txt" 2> "$tmp/err.txt"
rc=$?
[ "$rc" = 2 ] || fail "--backend cuda: exit $rc, expected 2"
grep -q "^nsctl run: forward: architecture '[a-z0-9]*' is computed by the cpu backend only" \
    "$tmp/err.txt" || fail "no 'computed by the cpu backend only' line"
if grep -q "nscompute\|died\|session" "$tmp/err.txt"; then
    fail "processes were started before the refusal"
fi
timeout 120 "$nsctl" run "$model" -p "hello world" -n 2 --temp 0 -c 64 \
    > "$tmp/out.txt" 2> "$tmp/err.txt" || fail "--backend cpu: exit $?"
echo "ok: --backend cuda refused with one line, exit 2; the cpu backend runs it"
