#!/bin/sh
# test_spec_cli.sh NSCTL ORACLE_DIR - nsctl run's drafter options (issue 26): a draft model that is not there, --draft-min over --draft-max
# and --draft-max without --draft are refused with one line and exit 2 before any process
# starts; --draft ngram prints its figures on the summary line and in --json, sampled too.
set -u
nsctl=$1
oracle=$2
cudaemu=${3:-} # nscompute-cudaemu: --draft mtp on the cuda backend through the emulation
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; cat "$tmp/err.txt"; exit 1; }
for f in tiny/tiny-qwen35-Q4_K_M.gguf tiny/tiny-qwen3-Q4_K_M.gguf models/stories260K.gguf; do
    if [ ! -f "$oracle/$f" ]; then
        [ "${CI:-}" = true ] && { echo "FAIL: oracle model missing under CI: $f"; exit 1; }
        echo "SKIP: oracle model missing: $f"; exit 77
    fi
done
stories=$oracle/models/stories260K.gguf
refused() { # refused WHAT LINE_PATTERN ARGS...
    what=$1; pat=$2; shift 2
    timeout 120 "$nsctl" run "$@" > "$tmp/out.txt" 2> "$tmp/err.txt"
    rc=$?
    [ "$rc" = 2 ] || fail "$what: exit $rc, expected 2"
    [ "$(wc -l < "$tmp/err.txt")" = 1 ] || fail "$what: not one line"
    grep -q "^nsctl run: $pat" "$tmp/err.txt" || fail "$what: no '$pat' line"
    echo "ok: $what refused: $(cat "$tmp/err.txt")"
}
# a recurrent target (qwen35): its state is rolled back past a rejected draft; same greedy text
q35=$oracle/tiny/tiny-qwen35-Q4_K_M.gguf
timeout 120 "$nsctl" run "$q35" -p "a b a b a b a b" -n 24 --temp 0 > "$tmp/plain.txt" \
    2> "$tmp/err.txt" || fail "qwen35 greedy: exit $?"
timeout 120 "$nsctl" run "$q35" -p "a b a b a b a b" -n 24 --temp 0 --draft ngram \
    > "$tmp/out.txt" 2> "$tmp/err.txt" || fail "qwen35 --draft ngram: exit $?"
cmp -s "$tmp/plain.txt" "$tmp/out.txt" || fail "qwen35: --draft ngram changed the greedy text"
echo "ok: qwen35 --draft ngram: the greedy text without it"
# a non-recurrent draft model of the same vocabulary (tiny-qwen3) drafting for qwen35
timeout 120 "$nsctl" run "$q35" -p "a b a b a b a b" -n 24 --temp 0 \
    --draft "$oracle/tiny/tiny-qwen3-Q4_K_M.gguf" > "$tmp/out.txt" 2> "$tmp/err.txt" ||
    fail "qwen35 --draft tiny-qwen3: exit $?"
grep -q "| draft [1-9][0-9]*, accepted" "$tmp/err.txt" || fail "qwen35 --draft tiny-qwen3: no drafts"
cmp -s "$tmp/plain.txt" "$tmp/out.txt" || fail "qwen35: --draft tiny-qwen3 changed the greedy text"
echo "ok: qwen35 --draft tiny-qwen3 (a draft model): the greedy text without it"
# --draft mtp (issue 26): a tiny qwen35 with an MTP block, made by mkmodel as the forward test's
# (tests/forward/test_mtp.c checks the block against llama.cpp); the greedy text is the one
# without it, streamed (a small arena, no RAM tier) and resident, with its drafts counted
for preset in tiny-qwen35 tiny-qwen35moe; do
    "$nsctl" mkmodel --preset $preset --mtp -s 7 -o "$tmp/mtp.gguf" -q --force \
        2> "$tmp/err.txt" || fail "mkmodel $preset --mtp: exit $?"
    "$nsctl" info "$tmp/mtp.gguf" > "$tmp/out.txt" 2> "$tmp/err.txt" || fail "info: exit $?"
    grep -q "^layers: *4$" "$tmp/out.txt" && grep -q "^mtp: *1 layer from blk.4, " "$tmp/out.txt" ||
        fail "$preset: info does not count 4 layers and the MTP block after them"
    timeout 120 "$nsctl" run "$tmp/mtp.gguf" -p "a b a b a b a b" -n 24 --temp 0 \
        > "$tmp/plain.txt" 2> "$tmp/err.txt" || fail "$preset greedy: exit $?"
    cuda="--backend cuda --ram-budget 0 --mem-budget 256K"
    [ -n "$cudaemu" ] || cuda=
    for b in "--ram-budget 0 --mem-budget 256K" "--ram-budget 64M" ${cuda:+"$cuda"}; do
        # shellcheck disable=SC2086
        NS_NSCOMPUTE_CUDA=$cudaemu timeout 120 "$nsctl" run "$tmp/mtp.gguf" \
            -p "a b a b a b a b" -n 24 --temp 0 $b \
            --draft mtp --draft-max 3 > "$tmp/out.txt" 2> "$tmp/err.txt" ||
            fail "$preset --draft mtp ($b): exit $?"
        grep -q "| draft [1-9][0-9]*, accepted [0-9]* ([0-9.]*%)" "$tmp/err.txt" ||
            fail "$preset --draft mtp ($b): no drafts on the summary line"
        cmp -s "$tmp/plain.txt" "$tmp/out.txt" ||
            fail "$preset --draft mtp ($b) changed the greedy text"
        echo "ok: $preset --draft mtp ($b): the greedy text without it, $(grep -o 'draft [0-9]*, accepted [0-9]* ([0-9.]*%)' "$tmp/err.txt")"
    done
done
# the block is counted in the fixed set as tests/forward/test_mtp.c holds it to what it allocates
"$nsctl" plan "$tmp/mtp.gguf" -c 96 --json --draft mtp > "$tmp/out.txt" 2> "$tmp/err.txt" ||
    fail "plan --draft mtp: exit $?"
python3 -c '
import json, sys
f = json.load(sys.stdin)["fixed"]
assert f["draft_bytes"] > 0, f
print("ok: plan --draft mtp: the block in the fixed set,", f["draft_bytes"], "bytes")' \
    < "$tmp/out.txt" || fail "plan --draft mtp: no draft bytes"
# ... and named as the block, not as a draft model, where the budgets are said
"$nsctl" plan "$tmp/mtp.gguf" -c 96 --draft mtp > "$tmp/out.txt" 2> "$tmp/err.txt" ||
    fail "plan --draft mtp (text): exit $?"
grep -q "^  draft .* --draft mtp: the model's MTP block: weights" "$tmp/out.txt" ||
    fail "plan --draft mtp: the draft row does not name the MTP block"
timeout 120 "$nsctl" run "$tmp/mtp.gguf" -p "a b" -n 2 --temp 0 -c 96 --draft mtp \
    > "$tmp/out.txt" 2> "$tmp/err.txt" || fail "--draft mtp (default budgets): exit $?"
grep -q "budgets from .*, fixed .* (MTP block [0-9.]* [KMG]iB) at -c" "$tmp/err.txt" ||
    fail "--draft mtp: the budgets line does not name the MTP block: $(head -3 "$tmp/err.txt")"
echo "ok: --draft mtp: plan and the budgets line name the MTP block"
refused "--draft mtp without an MTP block" "--draft mtp: .* has no MTP block" \
    "$q35" -p "hello" -n 4 --draft mtp
refused "a draft model that is not there" "--draft other.gguf: other.gguf: cannot open" \
    "$stories" -p "hello" -n 4 --draft other.gguf
refused "min over max" "--draft-min 5 is over --draft-max 4" \
    "$stories" -p "hello" -n 4 --draft ngram --draft-max 4 --draft-min 5
refused "--draft-max alone" "--draft-max and --draft-min go with --draft" \
    "$stories" -p "hello" -n 4 --draft-max 4
refused "--draft-max 0" "--draft-max" "$stories" -p "hello" -n 4 --draft ngram --draft-max 0

p="Once upon a time there was a little girl named Lily. She liked to play. Once upon a time"
timeout 120 "$nsctl" run "$stories" -p "$p" -n 64 --temp 0 --draft ngram \
    > "$tmp/out.txt" 2> "$tmp/err.txt" || fail "--draft ngram: exit $?"
grep -q "| draft [0-9]*, accepted [0-9]* ([0-9.]*%), [0-9.]* passes/token$" "$tmp/err.txt" ||
    fail "no draft figures on the summary line"
timeout 120 "$nsctl" run "$stories" -p "$p" -n 64 --temp 0.8 --seed 3 --draft ngram --json \
    > "$tmp/out.txt" 2> "$tmp/err.txt" || fail "--draft ngram sampled: exit $?"
python3 -c '
import json, sys
o = json.loads(sys.stdin.read())
d = o["draft"]
assert o["n_gen"] == 64, o["n_gen"]
assert 0 <= d["accepted"] <= d["drafted"] and d["drafted"] > 0, d
assert abs(d["acceptance_rate"] - d["accepted"] / d["drafted"]) < 1e-9, d
assert abs(d["passes_per_token"] - o["n_decode"] / 63) < 1e-9, (d, o["n_decode"])
print("ok: --json draft", d)' < "$tmp/out.txt" || fail "--json draft object"
echo "ok: drafter options refused in one line; figures on the summary line and in --json"
