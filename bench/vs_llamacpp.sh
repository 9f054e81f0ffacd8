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
#   long      (not in the default MODES) prefill and decode at depth, resident as above:
#             neurostream `nsctl bench -p P -n 0` for P in PP_LIST and `-p 0 -n N_DEPTH_GEN
#             -d DEPTHS`, with ACT activations and a CTK KV cache (K and V), beside llama-bench
#             -p PP_LIST -n 0 and -p 0 -n N_DEPTH_GEN -d DEPTHS (its default f16 cache) on the
#             same file; the two engines alternate, REPEATS rounds, medians. Also the machine's
#             int8 peak measured in the same run (bench_gemv --peak: vpdpbusd on every thread),
#             and our prefill's int8 ops per second over it (2 x the elements of the layers'
#             weight matrices per token). Ratios against the targets of issue 22: pp512 and
#             pp2048 >= 1.5x llama.cpp, tg at depth 2048 >= 1.0x llama.cpp and >= 0.85x our
#             depth 0.
#
# Before each capped run the model file is dropped from the page cache (dd iflag=nocache), so
# pages another run left behind (charged to no one in the cgroup) cannot flatter it.
#
# Fetches nothing. llama.cpp comes from $LLAMA_CPP_BIN (a directory holding llama-completion
# and llama-bench) or PATH; without it the script says how to point at one and exits 77.
# llama-completion is needed by the capped mode only. A llama-bench without -d (builds before
# spring 2025) gets its depth rows from llama-batched-bench beside it (-npp D -ntg N -npl 1:
# the N tokens decoded after a D-token prompt).
# Environment: CAP (default 2G); N_GEN tokens decoded (16); REPEATS (2); THREADS (all CPUs);
# CTX context of both engines (512); MODES (capped,resident; long); NSCTL our binary (default:
# $NS_BUILD_ROOT/nsctl/nsctl, then build/nsctl/nsctl); MEMCAP the cap wrapper. long mode:
# PP_LIST (64,512,2048), DEPTHS (0,512,2048,8192), N_DEPTH_GEN (32), ACT (q8), CTK (f16),
# BENCH_GEMV (default: next to nsctl's build, bench/kernels/bench_gemv).
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
case ",$modes," in *,capped,*|*,resident,*|*,long,*) ;; *) echo "vs_llamacpp: MODES: capped,resident,long" >&2; exit 2;; esac

nsctl=${NSCTL:-}
for c in "${NS_BUILD_ROOT:-}/nsctl/nsctl" "$root/build/nsctl/nsctl"; do
	[ -z "$nsctl" ] && [ -x "$c" ] && nsctl=$c
done
[ -n "$nsctl" ] || { echo "vs_llamacpp: no nsctl binary (set NSCTL=path)" >&2; exit 2; }

lbin=${LLAMA_CPP_BIN:+$LLAMA_CPP_BIN/}
llama_bench=$(command -v "${lbin}llama-bench" 2>/dev/null || true)
llama_completion=$(command -v "${lbin}llama-completion" 2>/dev/null || true)
need_completion=$([[ ",$modes," == *,capped,* ]] && echo 1)
if [ -z "$llama_bench" ] || { [ -n "$need_completion" ] && [ -z "$llama_completion" ]; }; then
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

if [[ ",$modes," == *,long,* ]]; then
	pp_list=${PP_LIST:-64,512,2048}
	depths=${DEPTHS:-0,512,2048,8192}
	dgen=${N_DEPTH_GEN:-32}
	act=${ACT:-q8}
	ctk=${CTK:-f16}
	gemv=${BENCH_GEMV:-$(dirname "$(dirname "$nsctl")")/bench/kernels/bench_gemv}
	ram=$(( size + (64 << 20) ))
	lctx=$(echo "$pp_list,$depths" | tr ',' '\n' | sort -n | tail -1)
	lctx=$(( lctx + dgen + 64 ))
	ours=(--threads "$threads" -c "$lctx" --act "$act" -ctk "$ctk" -ctv "$ctk" --budgets 256MB
	      --ram-budgets "$ram" --no-disk -r 1 -o json)
	peak=$("$gemv" --peak --threads "$threads" 2>/dev/null | sed -n 's/^int8 peak: \([0-9.]*\) .*/\1/p')
	[ -n "$peak" ] || { echo "vs_llamacpp: $gemv --peak gave no figure" >&2; peak=0; }
	# int8 ops of one prefill token: 2 x the elements of every layer's weight matrices
	gop=$("$nsctl" info "$model" --json --tensors | python3 -c '
import json, sys
d = json.load(sys.stdin)
n = 0
for t in d["tensors"]:
    if t["name"].startswith("blk.") and len(t["ne"]) >= 2 and t["ne"][1] > 1:
        e = 1
        for x in t["ne"]:
            e *= x
        n += e
print(2 * n / 1e9)')
	# llama-bench without -d (before spring 2025): decode at depth D from llama-batched-bench
	# (-npp D -ntg N -npl 1: S_TG is the N tokens decoded after a D-token prompt, as
	# llama-bench's "tgN @ dD"); depth 0 from llama-bench -n N
	ll_depth=$("$llama_bench" --help 2>&1 | grep -q -- '--n-depth' && echo 1)
	llama_batched=$(command -v "${lbin}llama-batched-bench" 2>/dev/null || true)
	if [ -z "$ll_depth" ]; then
		[ -n "$llama_batched" ] || { echo "vs_llamacpp: this llama-bench has no -d and no llama-batched-bench is beside it" >&2; exit 77; }
		echo "vs_llamacpp: llama-bench has no -d: llama.cpp's depth rows from llama-batched-bench" >&2
	fi
	ll_batched_depths() {
		local r=$1 d
		: >"$tmp/ll_tg_$r.jsonl"
		for d in ${depths//,/ }; do
			if [ "$d" = 0 ]; then
				"$llama_bench" -m "$model" -p 0 -n "$dgen" -r 1 -t "$threads" -o jsonl \
					>>"$tmp/ll_tg_$r.jsonl" 2>"$tmp/ll.err" || tail -3 "$tmp/ll.err" >&2
			else
				"$llama_batched" -m "$model" -c $(( d + dgen + 64 )) -b 2048 -ub 512 \
					-npp "$d" -ntg "$dgen" -npl 1 -t "$threads" --output-format jsonl \
					2>"$tmp/ll.err" | grep '^{' >>"$tmp/ll_tg_$r.jsonl" ||
					tail -3 "$tmp/ll.err" >&2
			fi
		done
		python3 - "$tmp/ll_tg_$r.jsonl" "$tmp/ll_tg_$r.json" <<'PY'
import json, sys
rows = []
for line in open(sys.argv[1]):
    x = json.loads(line)
    if "speed_tg" in x:  # llama-batched-bench
        x = {"n_prompt": 0, "n_gen": x["tg"], "n_depth": x["pp"], "avg_ts": x["speed_tg"]}
    rows.append(x)
json.dump(rows, open(sys.argv[2], "w"))
PY
	}
	for r in $(seq 1 "$repeats"); do
		for p in ${pp_list//,/ }; do
			echo "vs_llamacpp: long, round $r: nsctl bench -p $p" >&2
			"$nsctl" bench "$model" -p "$p" -n 0 "${ours[@]}" >"$tmp/ns_pp_${p}_$r.json" \
				2>"$tmp/ns_pp.err" || { tail -3 "$tmp/ns_pp.err" >&2; exit 1; }
		done
		echo "vs_llamacpp: long, round $r: nsctl bench -n $dgen -d $depths" >&2
		"$nsctl" bench "$model" -p 0 -n "$dgen" -d "$depths" "${ours[@]}" \
			>"$tmp/ns_tg_$r.json" 2>"$tmp/ns_tg.err" || { tail -3 "$tmp/ns_tg.err" >&2; exit 1; }
		echo "vs_llamacpp: long, round $r: llama-bench -p $pp_list; -n $dgen -d $depths" >&2
		"$llama_bench" -m "$model" -p "$pp_list" -n 0 -r 1 -t "$threads" -o json \
			>"$tmp/ll_pp_$r.json" 2>"$tmp/ll.err" || tail -3 "$tmp/ll.err" >&2
		if [ -n "$ll_depth" ]; then
			"$llama_bench" -m "$model" -p 0 -n "$dgen" -d "$depths" -r 1 -t "$threads" \
				-o json >"$tmp/ll_tg_$r.json" 2>"$tmp/ll.err" || tail -3 "$tmp/ll.err" >&2
		else
			ll_batched_depths "$r"
		fi
	done
	python3 - "$tmp" "$repeats" "$peak" "$gop" "$act" "$ctk" "$threads" "$model" <<'PY'
import glob, json, statistics, sys
tmp, reps, peak, gop, act, ctk, thr, model = sys.argv[1:]
def load(pat):
    rows = []
    for f in sorted(glob.glob(tmp + "/" + pat)):
        try:
            rows += json.load(open(f))
        except Exception:
            pass
    return rows
def key(x):
    return ("pp%d" % x["n_prompt"]) if not x["n_gen"] else ("tg%d @ d%d" % (x["n_gen"], x.get("n_depth", 0)))
ours, ll = {}, {}
for x in load("ns_*.json"):
    ours.setdefault(key(x), []).append(x["avg_ts"])
for x in load("ll_*.json"):
    ll.setdefault(key(x), []).append(x["avg_ts"])
peak, gop = float(peak), float(gop)
print("\nlong context: model %s, %s threads, %s rounds (medians), --act %s, KV cache %s; "
      "llama.cpp: llama-bench defaults (f16 cache)" % (model, thr, reps, act, ctk))
print("int8 peak measured in this run: %.1f GOP/s; one prefill token: %.2f int8 GOP\n" % (peak, gop))
print("| test | neurostream t/s | llama.cpp t/s | ratio | int8 GOP/s (of peak) |")
print("| --- | ---: | ---: | ---: | ---: |")
med = {}
for k in sorted(set(ours) | set(ll), key=lambda k: (k[:2] != "pp", int(k.split("@ d")[1]) if "@" in k else int(k[2:]))):
    o = statistics.median(ours[k]) if k in ours else None
    l = statistics.median(ll[k]) if k in ll else None
    med[k] = (o, l)
    ratio = "%.2f" % (o / l) if o and l else "-"
    ops = "%.1f (%.2f)" % (o * gop, o * gop / peak) if o and k.startswith("pp") and peak > 0 else "-"
    print("| %s | %s | %s | %s | %s |" % (k, "%.2f" % o if o else "-", "%.2f" % l if l else "-", ratio, ops))
def r(k):
    o, l = med.get(k, (None, None))
    return o / l if o and l else None
tg = [k for k in med if k.startswith("tg")]
print()
for k, want in (("pp512", 1.5), ("pp2048", 1.5)):
    if r(k) is not None:
        print("target %s >= %.1fx llama.cpp: %.2fx %s" % (k, want, r(k), "met" if r(k) >= want else "NOT met"))
d2048 = [k for k in tg if k.endswith("@ d2048")]
d0 = [k for k in tg if k.endswith("@ d0")]
if d2048:
    k = d2048[0]
    if r(k) is not None:
        print("target %s >= 1.0x llama.cpp: %.2fx %s" % (k, r(k), "met" if r(k) >= 1.0 else "NOT met"))
    if d0 and med[d0[0]][0] and med[k][0]:
        q = med[k][0] / med[d0[0]][0]
        print("target %s >= 0.85x our depth 0: %.2fx %s" % (k, q, "met" if q >= 0.85 else "NOT met"))
PY
fi

[ ${#rows[@]} -gt 0 ] || exit 0
printf '\nmodel %s (%s bytes), %s threads, %s tokens decoded, %s repeats, context %s\n\n' \
	"$model" "$size" "$threads" "$n_gen" "$repeats" "$ctx"
printf '| engine | setting | decode tok/s | peak memory | note |\n| --- | --- | ---: | ---: | --- |\n'
printf '%s\n' "${rows[@]}"
