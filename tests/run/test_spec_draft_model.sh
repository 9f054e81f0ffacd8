#!/bin/sh
# test_spec_draft_model.sh NSCTL ORACLE_DIR - nsctl run --draft MODEL (issue 26): a draft model
# resident in nscompute proposes the drafts.
#  - greedy output with the draft model is the output without one, on two architectures
#    (llama: stories260K drafted by its Q4_0; qwen3: tiny-qwen3 Q4_K_M drafted by its BF16),
#    resident and streamed (a 256 KiB arena, no RAM cache), and with --draft-max/--draft-min;
#  - the model drafting for itself has its drafts accepted (>= 90%): a drafter whose KV cache
#    falls out of step with the accepted tokens (not cut back past a rejection, positions
#    shifted) proposes garbage and fails this;
#  - refused with one line and exit 2 before any process starts: a missing file, a file that
#    is not GGUF, another vocabulary (same size, other texts; other size), a draft with a
#    recurrent state or vision inputs (--backend cuda: tests/run/test_cuda_backend.sh);
#  - the draft's bytes count in the fixed set: nsctl plan --draft shows them and refuses,
#    with the draft's own line, a memory that holds the session but not the draft beside it;
#    with --backend cuda they count in the VRAM reserve instead, and a --vram-budget one byte
#    short of the pass's set and the draft's arena is refused in one line.
set -u
nsctl=$1
oracle=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; cat "$tmp/err.txt"; exit 1; }
for f in models/stories260K.gguf models/stories260K-Q4_0.gguf tiny/tiny-qwen3-Q4_K_M.gguf \
         tiny/tiny-qwen3-BF16.gguf tiny/tiny-llama-Q8_0.gguf tiny/tiny-qwen35-Q4_K_M.gguf \
         tiny/tiny-qwen3vlmoe-Q4_K_M.gguf vocab/ggml-vocab-gpt-2.gguf; do
    if [ ! -f "$oracle/$f" ]; then
        [ "${CI:-}" = true ] && { echo "FAIL: oracle model missing under CI: $f"; exit 1; }
        echo "SKIP: oracle model missing: $f"; exit 77
    fi
done
stories=$oracle/models/stories260K.gguf
qwen3=$oracle/tiny/tiny-qwen3-Q4_K_M.gguf

# gen NAME MODEL ARGS...: greedy --json run into $tmp/NAME.json
gen() {
    name=$1; shift
    timeout 120 "$nsctl" run "$@" -n 48 --temp 0 --json > "$tmp/$name.json" \
        2> "$tmp/err.txt" || fail "$name: exit $?"
}
# same NAME BASE MIN_RATE: NAME's text is BASE's, it drafted, acceptance >= MIN_RATE
same() {
    python3 - "$tmp/$1.json" "$tmp/$2.json" "$3" "$1" <<'PY' || fail "$1"
import json, sys
o, b = (json.load(open(p)) for p in sys.argv[1:3])
rate, name = float(sys.argv[3]), sys.argv[4]
d = o.get("draft")
assert o["content"] == b["content"], (name, o["content"], b["content"])
assert o["n_gen"] == b["n_gen"], (name, o["n_gen"], b["n_gen"])
assert d and d["drafted"] > 0 and 0 <= d["accepted"] <= d["drafted"], (name, d)
assert d["acceptance_rate"] >= rate, (name, "acceptance", d)
print("ok:", name, "same output;", d["accepted"], "of", d["drafted"], "accepted,",
      round(d["passes_per_token"], 3), "passes/token")
PY
}

p="Once upon a time there was a little girl named Lily. She liked to play in the park."
for budget in resident streamed; do
    for arch in llama qwen3; do
        if [ $arch = llama ]; then
            m=$stories; other=$oracle/models/stories260K-Q4_0.gguf; rows=4
        else
            m=$qwen3; other=$oracle/tiny/tiny-qwen3-BF16.gguf; rows=16
        fi
        set --
        [ $budget = streamed ] && set -- --mem-budget 256KB --ram-budget 0 --block-rows $rows
        k=$arch-$budget
        gen "$k-base" "$m" -p "$p" "$@"
        gen "$k-other" "$m" -p "$p" "$@" --draft "$other"
        same "$k-other" "$k-base" 0
        gen "$k-self" "$m" -p "$p" "$@" --draft "$m"
        same "$k-self" "$k-base" 0.9
        gen "$k-fixed" "$m" -p "$p" "$@" --draft "$other" --draft-max 3 --draft-min 2
        same "$k-fixed" "$k-base" 0
    done
done
# the summary line carries the model drafter's figures, the budgets' line its bytes
timeout 120 "$nsctl" run "$stories" -p "$p" -n 16 --temp 0 --draft "$stories" \
    > "$tmp/out.txt" 2> "$tmp/err.txt" || fail "summary: exit $?"
grep -q "| draft [0-9]*, accepted [0-9]* ([0-9.]*%), [0-9.]* passes/token$" "$tmp/err.txt" ||
    fail "no draft figures on the summary line"
grep -q "budgets from .*, fixed .* (draft model [0-9.]* [KMG]iB) at -c" "$tmp/err.txt" ||
    fail "the budgets' line does not count the draft model"

refused() { # refused WHAT LINE_PATTERN ARGS...
    what=$1; pat=$2; shift 2
    timeout 120 "$nsctl" run "$@" > "$tmp/out.txt" 2> "$tmp/err.txt"
    rc=$?
    [ "$rc" = 2 ] || fail "$what: exit $rc, expected 2"
    [ "$(wc -l < "$tmp/err.txt")" = 1 ] || fail "$what: not one line"
    grep -q "^nsctl run: $pat" "$tmp/err.txt" || fail "$what: no '$pat' line"
    echo "ok: $what refused: $(cat "$tmp/err.txt")"
}
printf 'not a model\n' > "$tmp/bad.gguf"
refused "a missing draft" "--draft $tmp/none.gguf: .*No such file" \
    "$stories" -p hi -n 4 --draft "$tmp/none.gguf"
refused "a corrupt draft" "--draft $tmp/bad.gguf: .*not a GGUF file" \
    "$stories" -p hi -n 4 --draft "$tmp/bad.gguf"
refused "another vocabulary (texts)" "--draft .*: vocabulary mismatch: token 0 is" \
    "$stories" -p hi -n 4 --draft "$oracle/tiny/tiny-llama-Q8_0.gguf"
refused "another vocabulary (size)" "--draft .*: vocabulary mismatch: the draft model has" \
    "$stories" -p hi -n 4 --draft "$oracle/vocab/ggml-vocab-gpt-2.gguf"
refused "a recurrent draft" "--draft .*: a draft model needs a text-only pass.*recurrent" \
    "$qwen3" -p hi -n 4 --draft "$oracle/tiny/tiny-qwen35-Q4_K_M.gguf"
refused "a vision draft" "--draft .*: a draft model needs a text-only pass.*vision" \
    "$qwen3" -p hi -n 4 --draft "$oracle/tiny/tiny-qwen3vlmoe-Q4_K_M.gguf"

# the fixed set: plan's figures, then a memory with room for the session but not the draft
printf 'MemTotal: 67108864 kB\nMemAvailable: 33554432 kB\n' > "$tmp/meminfo"
fake="--meminfo $tmp/meminfo --cgroup-file $tmp/none --cgroup-root $tmp/none"
plan="$stories -c 256 --mem-budget 1MB --ram-budget 0 --json"
# shellcheck disable=SC2086
"$nsctl" plan $plan $fake > "$tmp/plain.json" 2> "$tmp/err.txt" || fail "plan: exit $?"
# shellcheck disable=SC2086
"$nsctl" plan $plan $fake --draft "$stories" > "$tmp/draft.json" 2> "$tmp/err.txt" ||
    fail "plan --draft: exit $?"
kb=$(python3 -c '
import json, sys
a, b = (json.load(open(p))["fixed"] for p in sys.argv[1:3])
assert a["draft_bytes"] == 0 and b["draft_bytes"] > 1185376, (a, b)  # more than its file
assert b["total"] == a["total"] + b["draft_bytes"], (a, b)
# the session (1 MiB arena + the fixed set) fits; with the draft beside it, it does not
print((a["total"] + (1 << 20) + b["draft_bytes"] // 2) // 1024)' "$tmp/plain.json" "$tmp/draft.json") ||
    fail "plan --draft figures"
printf 'MemTotal: 67108864 kB\nMemAvailable: %s kB\n' "$kb" > "$tmp/meminfo"
# shellcheck disable=SC2086
"$nsctl" plan $plan $fake > "$tmp/out.txt" 2> "$tmp/err.txt" ||
    fail "plan without the draft in $kb kB: exit $?"
# shellcheck disable=SC2086
"$nsctl" plan $plan $fake --draft "$stories" > "$tmp/out.txt" 2> "$tmp/err.txt"
rc=$?
[ "$rc" = 2 ] || fail "a draft beyond the memory: exit $rc, expected 2"
[ "$(wc -l < "$tmp/err.txt")" = 1 ] || fail "a draft beyond the memory: not one line"
grep -q "^nsctl plan: the draft model's .* does not fit" "$tmp/err.txt" ||
    fail "a draft beyond the memory: no draft line"
echo "ok: a draft beyond the memory refused: $(cat "$tmp/err.txt")"
# --backend cuda: the draft model lives in VRAM (nscompute/compute_draft_cuda.c): nsctl plan
# counts it in the VRAM reserve beside the pass's set, not in the fixed set, and refuses a
# --vram-budget without room for it in one line with the smallest workable budget
printf 'MemTotal: 67108864 kB\nMemAvailable: 33554432 kB\n' > "$tmp/meminfo"
# shellcheck disable=SC2086
"$nsctl" plan $plan $fake --backend cuda --vram-budget 64MB > "$tmp/cplain.json" \
    2> "$tmp/err.txt" || fail "plan --backend cuda: exit $?"
# shellcheck disable=SC2086
"$nsctl" plan $plan $fake --backend cuda --vram-budget 64MB --draft "$stories" \
    > "$tmp/cdraft.json" 2> "$tmp/err.txt" || fail "plan --backend cuda --draft: exit $?"
least=$(python3 -c '
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
fa, fb, ba, bb = a["fixed"], b["fixed"], a["budgets"], b["budgets"]
assert fb["draft_bytes"] == 0 and fb["total"] == fa["total"], (fa, fb)  # not in RAM
assert ba["draft_vram"] == 0 and bb["draft_vram"] > 1185376, (ba, bb)   # more than its file
assert bb["reserve_vram"] == ba["reserve_vram"] + bb["draft_vram"], (ba, bb)
assert b["placed"]["vram"] == a["placed"]["vram"], "the whole model fits either way"
print(bb["reserve_vram"])' "$tmp/cplain.json" "$tmp/cdraft.json") ||
    fail "plan --backend cuda --draft figures"
# shellcheck disable=SC2086
"$nsctl" plan $plan $fake --backend cuda --vram-budget "$least" --draft "$stories" \
    > "$tmp/out.txt" 2> "$tmp/err.txt" || fail "plan --backend cuda with $least B: exit $?"
# shellcheck disable=SC2086
"$nsctl" plan $plan $fake --backend cuda --vram-budget "$((least - 1))" --draft "$stories" \
    > "$tmp/out.txt" 2> "$tmp/err.txt"
rc=$?
[ "$rc" = 2 ] || fail "a draft beyond the VRAM budget: exit $rc, expected 2"
[ "$(wc -l < "$tmp/err.txt")" = 1 ] || fail "a draft beyond the VRAM budget: not one line"
grep -q "^nsctl plan: the draft model's .* of VRAM .* does not fit: .*smallest workable: --vram-budget $least " \
    "$tmp/err.txt" || fail "a draft beyond the VRAM budget: no draft line with $least"
echo "ok: a draft beyond the VRAM budget refused: $(cat "$tmp/err.txt")"
# the text output names it
# shellcheck disable=SC2086
"$nsctl" plan $(echo "$plan" | sed 's/ --json//') $fake --backend cuda --vram-budget 64MB \
    --draft "$stories" > "$tmp/out.txt" 2> "$tmp/err.txt" || fail "plan text: exit $?"
grep -q "^budgets: .*and the draft model's [0-9.]* [KMG]iB)" "$tmp/out.txt" ||
    fail "plan --backend cuda --draft: the budgets line does not name the draft's VRAM"
echo "ok: --draft MODEL keeps greedy output, drafts in step, refusals in one line"
