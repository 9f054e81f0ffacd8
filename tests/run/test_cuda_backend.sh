#!/bin/sh
# test_cuda_backend.sh NSCTL NSCOMPUTE_CUDA MODEL - `nsctl run --backend cuda` end to end with
# the compute process given (the host emulation of the kernels in CI, the real nscompute-cuda
# on a GPU machine): the generated text equals the cpu backend's at every VRAM budget (none:
# everything streamed; part of the weights in VRAM; all of them), the bytes read per token
# fall as the plan puts more in VRAM (to none at all), the compute process reports its VRAM
# windows, and a budget too small for the KV cache and scratch is refused with the smallest
# workable figure (exit 2). Greedy, no RAM cache, a 4 MiB arena; then once more with part of
# the weights in nsio's RAM tier: same text, and every streamed byte reached the device from
# page-locked memory (the arena and the RAM tier are registered; the compute process reports
# the pageable bytes it staged at exit), and every token's logits were copied into page-locked
# memory. With --act q8 (int8 activations in the decode GEMVs),
# everything streamed and everything in VRAM give the same text, and the compute process
# reports GEMVs with int8 activations. With -ctk q8_0 -ctv f16 the reserve counts the typed
# cache and the text is the cpu backend's with the same cache. With NS_CUDA_REAL=1 (the real
# kernels on a GPU, whose float sums differ from the CPU's in the last bits) the three cuda
# runs must agree with each other and the cpu comparison is only reported.
set -u
nsctl=$1
export NS_NSCOMPUTE_CUDA=$2
model=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; for f in "$tmp"/*.err; do echo "--- $f"; cat "$f"; done; exit 1; }
run() { # run NAME ARGS... -> $tmp/NAME.txt, $tmp/NAME.err
    name=$1
    shift
    timeout 120 "$nsctl" run "$model" -p "hello world" -n 12 --temp 0 --ram-budget 0 \
        --mem-budget 4MB -c 256 "$@" > "$tmp/$name.txt" 2> "$tmp/$name.err"
}
gb() { sed -n 's/.*| \([0-9.]*\) GB read\/token.*/\1/p' "$tmp/$1.err"; }

run cpu || fail "cpu backend exited $?"
[ -s "$tmp/cpu.txt" ] || fail "cpu backend generated nothing"
# the smallest workable budget, from the refusal of a budget that is too small
run small --backend cuda --vram-budget 1MB
rc=$?
[ "$rc" = 2 ] || fail "a 1 MiB VRAM budget: exit $rc, expected 2"
least=$(sed -n 's/.*smallest workable: --vram-budget \([0-9]*\).*/\1/p' "$tmp/small.err")
[ -n "$least" ] || fail "no smallest workable budget in the refusal"
size=$(stat -c %s "$model")
part=$((least + size / 2))
all=$((least + 2 * size))
run none --backend cuda --verbose || fail "cuda backend, no VRAM budget: exit $?"
run part --backend cuda --vram-budget "$part" --verbose || fail "cuda, $part B: exit $?"
run all --backend cuda --vram-budget "$all" --verbose || fail "cuda, $all B: exit $?"
run ram --backend cuda --vram-budget "$part" --ram-budget "$((size / 4 + 1048576))" --verbose ||
    fail "cuda, $part B of VRAM and a RAM tier: exit $?"
for r in none part ram; do
    grep -q "nscompute: cuda: staged .* blocks, 0 B of it from pageable memory" "$tmp/$r.err" ||
        fail "cuda ($r): streamed bytes were staged from pageable memory (or not reported)"
done
for r in none part all ram; do
    grep -q "nscompute: cuda: copied .* of logits, 0 B of it to pageable memory" "$tmp/$r.err" ||
        fail "cuda ($r): logits were copied to pageable memory (or not reported)"
done
for r in none part all ram; do
    if [ "${NS_CUDA_REAL:-0}" = 1 ]; then
        cmp -s "$tmp/none.txt" "$tmp/$r.txt" || fail "cuda ($r) text differs from cuda (none)"
    else
        cmp -s "$tmp/cpu.txt" "$tmp/$r.txt" || fail "cuda ($r) text differs from the cpu backend's"
    fi
done
if [ "${NS_CUDA_REAL:-0}" = 1 ]; then
    if cmp -s "$tmp/cpu.txt" "$tmp/none.txt"; then
        echo "cuda text equals the cpu backend's"
    else
        echo "cuda text differs from the cpu backend's (reported, not checked):"
        echo "  cpu:  $(cat "$tmp/cpu.txt")"
        echo "  cuda: $(cat "$tmp/none.txt")"
    fi
fi
# typed KV caches (-ctk q8_0 -ctv f16): the VRAM reserve counts them (the smallest workable
# budget falls below f32's), the cuda pass runs at exactly that budget and with everything in
# VRAM, and the text is the cpu backend's with the same cache types (the two attentions differ
# in float rounding only: tests/cuda/test_cfwd.c --kv bounds their logits)
run cpukv --cache-type-k q8_0 --cache-type-v f16 || fail "cpu backend, -ctk q8_0 -ctv f16: exit $?"
run smallkv --backend cuda --vram-budget 1MB -ctk q8_0 -ctv f16
rc=$?
[ "$rc" = 2 ] || fail "a 1 MiB VRAM budget with a typed cache: exit $rc, expected 2"
leastkv=$(sed -n 's/.*smallest workable: --vram-budget \([0-9]*\).*/\1/p' "$tmp/smallkv.err")
[ -n "$leastkv" ] && [ "$leastkv" -lt "$least" ] ||
    fail "typed cache: smallest workable budget '$leastkv' not below f32's $least"
run kvleast --backend cuda -ctk q8_0 -ctv f16 --vram-budget "$leastkv" --verbose ||
    fail "cuda -ctk q8_0 -ctv f16, $leastkv B: exit $?"
run kvall --backend cuda -ctk q8_0 -ctv f16 --vram-budget "$((leastkv + 2 * size))" --verbose ||
    fail "cuda -ctk q8_0 -ctv f16, all in VRAM: exit $?"
cmp -s "$tmp/kvleast.txt" "$tmp/kvall.txt" || fail "cuda typed cache: text differs with the budget"
if [ "${NS_CUDA_REAL:-0}" = 1 ]; then
    cmp -s "$tmp/cpukv.txt" "$tmp/kvall.txt" ||
        echo "cuda typed-cache text differs from the cpu backend's (reported, not checked)"
else
    cmp -s "$tmp/cpukv.txt" "$tmp/kvall.txt" ||
        fail "cuda typed cache: text differs from the cpu backend's with the same cache types"
fi
# int8 activations (--act q8): the decode GEMVs take them, and the text is the same whatever
# is in VRAM (the kernels' order depends only on the row)
run q8none --backend cuda --act q8 --verbose || fail "cuda --act q8, no VRAM budget: exit $?"
run q8all --backend cuda --act q8 --vram-budget "$all" --verbose || fail "cuda --act q8, $all B: exit $?"
# (a model of float weights only, such as hf/gemma4_e's F32 file, has no quantized GEMV to
# take them: NS_FLOAT_MODEL=1 requires none reported instead)
if [ "${NS_FLOAT_MODEL:-0}" = 1 ]; then
    if grep -q "decode GEMVs with int8 activations" "$tmp/q8none.err"; then
        fail "cuda --act q8 on float weights: int8 GEMVs reported"
    fi
else
    grep -q "nscompute: cuda: [1-9][0-9]* decode GEMVs with int8 activations" "$tmp/q8none.err" ||
        fail "cuda --act q8: no GEMV with int8 activations reported"
fi
cmp -s "$tmp/q8none.txt" "$tmp/q8all.txt" || fail "cuda --act q8: text differs with the budget"
grep -q "of weights in [1-9][0-9]* VRAM windows" "$tmp/part.err" ||
    fail "no VRAM windows reported with a budget of $part B"
n=$(gb none) p=$(gb part) a=$(gb all)
echo "GB read per token: none $n, part $p, all $a"
awk -v n="$n" -v p="$p" -v a="$a" 'BEGIN { exit !(n > 0 && p < n && a < p && a < 0.00001) }' ||
    fail "bytes per token do not fall with VRAM: none $n, part $p, all $a"
# speculative decoding: the verification chunks and the KV cut-backs are the CUDA pass's, a
# draft model's pass a CUDA one too, its weights in VRAM (its arena out of --vram-budget, a
# budget without room for it refused in one line); greedy text unchanged. A model with a recurrent
# state (qwen35) rolls it back in VRAM past a rejected draft (cfwd_dnet.c; a draft model of its
# own can have none: nsctl/draft_model.c), streamed and with part of it in VRAM.
if "$nsctl" info "$model" 2>/dev/null | grep -q '^recurrent:'; then
    # tiny-qwen3 shares the tiny Qwen3.5 models' vocabulary: its drafts are all rejected (two
    # random models), so every verification pass is cut back into its mark
    dm=${NS_ORACLE_DIR:-}/tiny/tiny-qwen3-Q4_K_M.gguf
    [ -f "$dm" ] || fail "no draft model for a recurrent target: $dm"
    run specng --backend cuda --draft ngram --vram-budget "$part" ||
        fail "cuda --draft ngram on a recurrent model, $part B: exit $?"
    run specdm --backend cuda --draft "$dm" --verbose ||
        fail "cuda --draft MODEL on a recurrent model: exit $?"
    grep -q "| draft [1-9][0-9]*, accepted" "$tmp/specdm.err" ||
        fail "cuda --draft MODEL on a recurrent model: nothing drafted"
    for r in specng specdm; do
        cmp -s "$tmp/none.txt" "$tmp/$r.txt" || fail "cuda ($r) text differs from cuda (none)"
    done
else
    run specng --backend cuda --draft ngram --vram-budget "$part" ||
        fail "cuda --draft ngram: exit $?"
    run specdm --backend cuda --draft "$model" --verbose || fail "cuda --draft MODEL: exit $?"
    grep -q "| draft [1-9][0-9]*, accepted [1-9]" "$tmp/specdm.err" ||
        fail "cuda --draft MODEL (itself): no draft accepted"
    # the draft model in VRAM (its own arena), not in nscompute's RAM
    grep -q "nscompute: cuda: draft model: .* of weights in VRAM, arena" "$tmp/specdm.err" ||
        fail "cuda --draft MODEL: the draft model was not put in VRAM (or not reported)"
    # its arena comes out of --vram-budget: the whole model and the draft in VRAM, and the
    # budget that holds the model alone refused in one line with the smallest workable one
    dv=$("$nsctl" plan "$model" -c 256 --mem-budget 4MB --ram-budget 0 --backend cuda \
        --draft "$model" --json | sed -n 's/.*"draft_vram": *\([0-9]*\).*/\1/p')
    [ -n "$dv" ] && [ "$dv" -gt "$size" ] ||
        fail "nsctl plan --backend cuda --draft: no draft_vram above the file's size ($dv)"
    # with part of the model in VRAM and the draft's room beside it: the plan's windows are
    # those without a draft (as many bytes read per token), both arenas within the budget
    run specdmpart --backend cuda --draft "$model" --vram-budget "$((part + dv))" --verbose ||
        fail "cuda --draft MODEL, $((part + dv)) B: exit $?"
    both=$(sed -n 's/.*nscompute: cuda: draft model: .* of weights in VRAM, arena .*; the two arenas \([0-9]*\) B of --vram-budget \([0-9]*\) B$/\1 \2/p' \
        "$tmp/specdmpart.err")
    [ -n "$both" ] || fail "cuda --draft MODEL with a budget: no draft model in VRAM reported"
    echo "$both" | awk '{ exit !($1 <= $2) }' ||
        fail "cuda --draft MODEL: the two arenas exceed the VRAM budget ($both)"
    win() { sed -n 's/.*nscompute: cuda: \(.* of weights in [0-9]* VRAM windows\),.*/\1/p' "$tmp/$1.err"; }
    [ -n "$(win part)" ] && [ "$(win specdmpart)" = "$(win part)" ] ||
        fail "cuda --draft MODEL: the model's windows '$(win specdmpart)', without the draft '$(win part)'"
    run dmsmall --backend cuda --draft "$model" --vram-budget "$least"
    rc=$?
    [ "$rc" = 2 ] && [ "$(wc -l < "$tmp/dmsmall.err")" = 1 ] &&
        grep -q "^nsctl run: --draft .*: the draft model's .* of VRAM .* does not fit: .*smallest workable: --vram-budget $((least + dv)) " "$tmp/dmsmall.err" ||
        fail "cuda --draft MODEL beyond the VRAM budget: exit $rc, want 2 and one line"
    echo "ok: a draft beyond the VRAM budget refused: $(cat "$tmp/dmsmall.err")"
    for r in specng specdm specdmpart; do
        cmp -s "$tmp/none.txt" "$tmp/$r.txt" || fail "cuda ($r) text differs from cuda (none)"
    done
fi
echo "cuda backend ok: same text at 3 VRAM budgets, refusal below $least B"
