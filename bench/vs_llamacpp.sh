#!/bin/bash
# vs_llamacpp.sh MODEL [CAP] - neurostream and llama.cpp on the same model, side by side:
# decode tok/s and peak memory, in two settings measured in the same run.
#
#   capped    both under one memory cgroup of CAP (../shared/tools/memcap.sh). neurostream runs
#             `nsctl bench` with no budgets, so it takes what `nsctl plan` chooses from the
#             cgroup's limit (arena + RAM cache + fixed set inside the cap). llama.cpp runs
#             llama-completion through mmap, with --no-repack (its repack buffer is anonymous
#             memory the size of the weights) and, for the record, with its defaults.
#   resident  no cap, the whole model in memory: neurostream with the RAM cache holding every
#             weight (--ram-budgets = model size + 64 MiB), llama.cpp's llama-bench with its
#             defaults (repacked weights), both on THREADS threads.
#
# Before each capped run the model file is dropped from the page cache (dd iflag=nocache), so
# pages another run left behind (charged to no one in the cgroup) cannot flatter it.
#
# Fetches nothing. llama.cpp comes from $LLAMA_CPP_BIN (a directory holding llama-completion
# and llama-bench) or PATH; without it the script says how to point at one and exits 77.
# Environment: CAP (default 2G); N_GEN tokens decoded (16); REPEATS (2); THREADS (all CPUs);
# CTX context of both engines (512); MODES (capped,resident); NSCTL our binary (default:
# $NS_BUILD_ROOT/nsctl/nsctl, then build/nsctl/nsctl); MEMCAP the cap wrapper.
# Exit: 0 ok, 1 a run of ours failed, 2 usage, 77 skip.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
[ $# -ge 1 ] && [ $# -le 2 ] || { echo "usage: $0 MODEL [CAP]" >&2; exit 2; }
model=$1
cap=${2:-${CAP:-2G}}
n_gen=${N_GEN:-16}
repeats=${REPEATS:-2}
threads=${THREADS:-$(nproc)}
ctx=${CTX:-512}
modes=${MODES:-capped,resident}
memcap=${MEMCAP:-$root/../shared/tools/memcap.sh}
[ -r "$model" ] || { echo "vs_llamacpp: cannot read model $model" >&2; exit 2; }
case ",$modes," in *,capped,*|*,resident,*) ;; *) echo "vs_llamacpp: MODES: capped,resident" >&2; exit 2;; esac

nsctl=${NSCTL:-}
for c in "${NS_BUILD_ROOT:-}/nsctl/nsctl" "$root/build/nsctl/nsctl"; do
	[ -z "$nsctl" ] && [ -x "$c" ] && nsctl=$c
done
[ -n "$nsctl" ] || { echo "vs_llamacpp: no nsctl binary (set NSCTL=path)" >&2; exit 2; }

lbin=${LLAMA_CPP_BIN:+$LLAMA_CPP_BIN/}
llama_bench=$(command -v "${lbin}llama-bench" 2>/dev/null || true)
llama_completion=$(command -v "${lbin}llama-completion" 2>/dev/null || true)
if [ -z "$llama_bench" ] || [ -z "$llama_completion" ]; then
	cat >&2 <<MSG
vs_llamacpp: needs llama-bench and llama-completion on PATH${LLAMA_CPP_BIN:+ or in $LLAMA_CPP_BIN}.
  Build llama.cpp outside this tree (CPU only), e.g.
    cmake -B b -DGGML_NATIVE=ON -DLLAMA_OPENSSL=OFF && cmake --build b -j --target llama-bench llama-completion
  then run: LLAMA_CPP_BIN=/path/to/llama.cpp/b/bin $0 $model $cap
MSG
	exit 77
fi
if [[ ",$modes," == *,capped,* ]] && { ! [ -x "$memcap" ] || ! [ -w /sys/fs/cgroup/memory ]; }; then
	echo "vs_llamacpp: $memcap cannot create a memory cgroup here (needs root and cgroup v1)" >&2
	exit 77
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
size=$(stat -c %s "$model")

# run NAME CAP|- CMD...: stdout -> $tmp/NAME.out, stderr -> $tmp/NAME.err; sets peak_mib (the
# cgroup's peak: RSS + page cache + shm the group touched; uncapped: the kernel's max RSS).
run() {
	local name=$1 lim=$2 rc
	shift 2
	if [ "$lim" != - ]; then
		dd if="$model" iflag=nocache count=0 status=none 2>/dev/null
		"$memcap" "$lim" -- "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
		rc=$?
		peak_mib=$(sed -n 's/.*peak [0-9]* B (\([0-9]*\) MiB).*/\1/p' "$tmp/$name.err" | tail -1)
		grep -q 'oom kills [1-9]' "$tmp/$name.err" && rc=137
	else
		/usr/bin/time -f 'maxrss_kb %M' "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
		rc=$?
		peak_mib=$(( $(sed -n 's/^maxrss_kb \([0-9]*\)/\1/p' "$tmp/$name.err" | tail -1) / 1024 ))
	fi
	return $rc
}

json_num() { grep -o "\"$1\": [0-9.eE+-]*" "$2" | head -1 | awk '{print $2}'; }
fmt() { [[ "${1:-}" =~ ^[0-9.eE+-]+$ ]] && awk -v v="$1" 'BEGIN { printf "%.3f", v }' || echo "${1:-?}"; }
rows=()

# llama-completion's decode rate: its "eval time" line (not "prompt eval time")
ll_completion() {
	local name=$1 lim=$2
	shift 2
	run "$name" "$lim" "$llama_completion" -m "$model" -p "The" -n "$n_gen" -c "$ctx" --temp 0 \
		-t "$threads" -no-cnv --ignore-eos "$@" </dev/null
	local rc=$?
	ll_ts=$(grep 'eval time' "$tmp/$name.err" | grep -v 'prompt eval' | \
		sed -n 's/.*, *\([0-9.]*\) tokens per second.*/\1/p' | tail -1)
	if [ $rc -ne 0 ] || [ -z "$ll_ts" ]; then
		echo "vs_llamacpp: llama-completion $* exit $rc (137: killed by the cap):" >&2
		tail -2 "$tmp/$name.err" >&2
		ll_ts="failed (exit $rc)"
	fi
}

if [[ ",$modes," == *,capped,* ]]; then
	echo "vs_llamacpp: capped at $cap: nsctl bench -p 0 -n $n_gen -r $repeats (budgets from the cgroup)" >&2
	if ! run ns_cap "$cap" "$nsctl" bench "$model" -p 0 -n "$n_gen" -r "$repeats" \
		--threads "$threads" -c "$ctx" -o json; then
		echo "vs_llamacpp: nsctl bench failed under the cap:" >&2
		tail -5 "$tmp/ns_cap.err" >&2
		exit 1
	fi
	budgets=$(grep -o 'budgets from.*' "$tmp/ns_cap.err" | head -1)
	rows+=("| neurostream | capped $cap | $(fmt "$(json_num avg_ts "$tmp/ns_cap.out")") | ${peak_mib:-?} MiB | ${budgets:-?}; $(fmt "$(json_num roofline_ratio "$tmp/ns_cap.out")") x the drive roofline |")
	echo "vs_llamacpp: capped at $cap: llama-completion --no-repack (mmap)" >&2
	ll_completion ll_cap_nr "$cap" --no-repack
	rows+=("| llama.cpp llama-completion --no-repack | capped $cap | $(fmt "$ll_ts") | ${peak_mib:-?} MiB | mmap: the page cache counts in the cgroup |")
	echo "vs_llamacpp: capped at $cap: llama-completion (defaults)" >&2
	ll_completion ll_cap "$cap"
	rows+=("| llama.cpp llama-completion (defaults) | capped $cap | $(fmt "$ll_ts") | ${peak_mib:-?} MiB | repacked weights are anonymous memory |")
fi

if [[ ",$modes," == *,resident,* ]]; then
	ram=$(( size + (64 << 20) ))
	echo "vs_llamacpp: resident: nsctl bench --ram-budgets $ram (the whole model)" >&2
	if ! run ns_res - "$nsctl" bench "$model" -p 0 -n "$n_gen" -r "$repeats" \
		--threads "$threads" -c "$ctx" --budgets 256MB --ram-budgets "$ram" -o json; then
		echo "vs_llamacpp: nsctl bench (resident) failed:" >&2
		tail -5 "$tmp/ns_res.err" >&2
		exit 1
	fi
	rows+=("| neurostream | resident | $(fmt "$(json_num avg_ts "$tmp/ns_res.out")") | ${peak_mib:-?} MiB (max RSS of nsctl) | RAM cache holds every weight; shm not in RSS |")
	echo "vs_llamacpp: resident: llama-bench -p 0 -n $n_gen -r $repeats -t $threads" >&2
	run ll_res - "$llama_bench" -m "$model" -p 0 -n "$n_gen" -r "$repeats" -t "$threads" -o json
	rc=$?
	ll_ts=$(json_num avg_ts "$tmp/ll_res.out")
	[ $rc -eq 0 ] && [ -n "$ll_ts" ] || { tail -2 "$tmp/ll_res.err" >&2; ll_ts="failed (exit $rc)"; }
	rows+=("| llama.cpp llama-bench (defaults) | resident | $(fmt "$ll_ts") | ${peak_mib:-?} MiB | repacked weights |")
fi

printf '\nmodel %s (%s bytes), %s threads, %s tokens decoded, %s repeats, context %s\n\n' \
	"$model" "$size" "$threads" "$n_gen" "$repeats" "$ctx"
printf '| engine | setting | decode tok/s | peak memory | note |\n| --- | --- | ---: | ---: | --- |\n'
printf '%s\n' "${rows[@]}"
