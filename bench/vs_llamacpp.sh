#!/bin/bash
# vs_llamacpp.sh MODEL [CAP] - neurostream and llama.cpp on the same model under the same
# memory cap (a cgroup, ../shared/tools/memcap.sh), side by side: decode tok/s and peak memory.
#
# Fetches nothing. llama.cpp comes from $LLAMA_CPP_BIN (a directory holding llama-bench or
# llama-completion) or PATH; without it the script says how to point at one and exits 77.
# Environment: CAP default 1G; N_GEN tokens decoded (32); REPEATS (3); THREADS (all CPUs);
# NS_BUDGET our streaming arena (256MB); NSCTL our binary (default: $NS_BUILD_ROOT/nsctl/nsctl,
# then build/nsctl/nsctl); MEMCAP the cap wrapper. Exit: 0 ok, 1 a run failed, 2 usage, 77 skip.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
[ $# -ge 1 ] && [ $# -le 2 ] || { echo "usage: $0 MODEL [CAP]" >&2; exit 2; }
model=$1
cap=${2:-${CAP:-1G}}
n_gen=${N_GEN:-32}
repeats=${REPEATS:-3}
threads=${THREADS:-$(nproc)}
budget=${NS_BUDGET:-256MB}
memcap=${MEMCAP:-$root/../shared/tools/memcap.sh}
[ -r "$model" ] || { echo "vs_llamacpp: cannot read model $model" >&2; exit 2; }

nsctl=${NSCTL:-}
for c in "${NS_BUILD_ROOT:-}/nsctl/nsctl" "$root/build/nsctl/nsctl"; do
	[ -z "$nsctl" ] && [ -x "$c" ] && nsctl=$c
done
[ -n "$nsctl" ] || { echo "vs_llamacpp: no nsctl binary (set NSCTL=path)" >&2; exit 2; }

lbin=${LLAMA_CPP_BIN:+$LLAMA_CPP_BIN/}
llama_bench=$(command -v "${lbin}llama-bench" 2>/dev/null || true)
llama_completion=$(command -v "${lbin}llama-completion" 2>/dev/null || true)
if [ -z "$llama_bench" ] && [ -z "$llama_completion" ]; then
	cat >&2 <<MSG
vs_llamacpp: no llama-bench or llama-completion on PATH${LLAMA_CPP_BIN:+ or in $LLAMA_CPP_BIN}.
  Build llama.cpp outside this tree (CPU only), e.g.
    cmake -B b -DGGML_NATIVE=ON -DLLAMA_CURL=OFF && cmake --build b -j --target llama-bench llama-completion
  then run: LLAMA_CPP_BIN=/path/to/llama.cpp/b/bin $0 $model $cap
MSG
	exit 77
fi

capped=1
if ! [ -x "$memcap" ] || ! [ -w /sys/fs/cgroup/memory ]; then
	echo "vs_llamacpp: $memcap cannot create a cgroup here (needs root and cgroup v1);" \
	     "running uncapped, peak memory from the kernel's max RSS" >&2
	capped=0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# run NAME CMD...: runs under the cap; stdout -> $tmp/NAME.out, stderr -> $tmp/NAME.err;
# sets peak_mib (cgroup peak: RSS + page cache + shm the group touched).
run() {
	local name=$1 rc
	shift
	if [ $capped = 1 ]; then
		"$memcap" "$cap" -- "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
		rc=$?
		peak_mib=$(sed -n 's/.*peak [0-9]* B (\([0-9]*\) MiB).*/\1/p' "$tmp/$name.err" | tail -1)
	else
		/usr/bin/time -f 'maxrss_kb %M' "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
		rc=$?
		peak_mib=$(( $(sed -n 's/^maxrss_kb \([0-9]*\)/\1/p' "$tmp/$name.err" | tail -1) / 1024 ))
	fi
	return $rc
}

# --- neurostream ---
echo "vs_llamacpp: neurostream: nsctl bench -p 0 -n $n_gen -r $repeats --budgets $budget (cap $cap)" >&2
if ! run ns "$nsctl" bench "$model" -p 0 -n "$n_gen" -r "$repeats" --threads "$threads" \
	--budgets "$budget" -o json; then
	echo "vs_llamacpp: nsctl bench failed:" >&2
	tail -5 "$tmp/ns.err" >&2
	exit 1
fi
ns_ts=$(grep -o '"avg_ts": [0-9.eE+-]*' "$tmp/ns.out" | head -1 | awk '{print $2}')
ns_roof=$(grep -o '"roofline_ratio": [0-9.eE+-]*' "$tmp/ns.out" | head -1 | awk '{print $2}')
ns_peak=$peak_mib

# --- llama.cpp ---
if [ -n "$llama_bench" ]; then
	echo "vs_llamacpp: llama.cpp: llama-bench -p 0 -n $n_gen -r $repeats (cap $cap)" >&2
	run ll "$llama_bench" -m "$model" -p 0 -n "$n_gen" -r "$repeats" -t "$threads" -o json
	rc=$?
	ll_ts=$(grep -o '"avg_ts": [0-9.eE+-]*' "$tmp/ll.out" | head -1 | awk '{print $2}')
	ll_tool=llama-bench
else
	echo "vs_llamacpp: llama.cpp: llama-completion -n $n_gen --temp 0 (cap $cap)" >&2
	run ll "$llama_completion" -m "$model" -p "The" -n "$n_gen" --temp 0 -t "$threads" \
		-no-cnv --ignore-eos </dev/null
	rc=$?
	ll_ts=$(grep 'eval time' "$tmp/ll.err" | grep -v 'prompt eval' | \
		sed -n 's/.*, *\([0-9.]*\) tokens per second.*/\1/p' | tail -1)
	ll_tool=llama-completion
fi
ll_peak=$peak_mib
if [ $rc -ne 0 ] || [ -z "$ll_ts" ]; then
	echo "vs_llamacpp: $ll_tool failed or was killed under the cap (exit $rc):" >&2
	tail -5 "$tmp/ll.err" >&2
	ll_ts=failed
fi

printf '\nmodel %s, cap %s%s, %s threads, %s tokens decoded, %s repeats\n\n' "$model" "$cap" \
	"$([ $capped = 1 ] || echo ' (not enforced)')" "$threads" "$n_gen" "$repeats"
printf '| engine | tok/s | peak memory | note |\n| --- | ---: | ---: | --- |\n'
fmt() { [ -n "$1" ] && [ "$1" != failed ] && awk -v v="$1" 'BEGIN { printf "%.2f", v }' || echo "${1:-?}"; }
printf '| neurostream (arena %s) | %s | %s MiB | %s x the drive roofline measured in the run |\n' \
	"$budget" "$(fmt "$ns_ts")" "${ns_peak:-?}" "$(fmt "$ns_roof")"
printf '| llama.cpp (%s) | %s | %s MiB | mmap: page cache counts in the cgroup |\n' "$ll_tool" \
	"$(fmt "$ll_ts")" "${ll_peak:-?}"
