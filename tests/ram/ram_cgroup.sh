#!/bin/bash
# ram_cgroup.sh NSCTL MEMCAP MODEL - a long generation under a memory cgroup capped at
# `nsctl plan --json`'s host_total (what the RAM tier fills + --mem-budget + the fixed set,
# rounded up to a page),
# for budgets from tiny to large: each run must finish (exit 0) with no OOM kill; the
# cgroup's peak is printed beside its cap. Skips (77) when there is no writable v1 memory
# cgroup controller (memcap.sh needs one), saying why. MODEL is relative to NS_ORACLE_DIR.
set -u
nsctl=$1 memcap=$2 model=$NS_ORACLE_DIR/$3
if [ ! -f "$model" ]; then
	[ "${CI:-}" = true ] && { echo "FAIL: $model missing"; exit 1; }
	echo "SKIP: $model missing"; exit 77
fi
. "$(dirname "$0")/memcap_check.sh"
memcap_check "$memcap"
ctx=512 n=400
tmp=$(mktemp -d /tmp/ns_ram_cgroup.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
total=$("$nsctl" info "$model" --json | grep -o '"bytes_per_token":[0-9]*' | head -1 | cut -d: -f2)
[ -n "$total" ] || { echo "FAIL: no bytes_per_token from nsctl info"; exit 1; }
fail=0 ref=
# mem budget, ram budget: tiny to large
for pair in "64KB 0" "64KB $((total / 10))" "256KB $((total / 2))" "4MB $((total * 2))"; do
	set -- $pair
	mem=$1 ram=$2
	"$nsctl" plan "$model" --mem-budget "$mem" --ram-budget "$ram" --vram-budget 0 -c $ctx \
		--json > "$tmp/plan.json" || { echo "FAIL: nsctl plan"; exit 1; }
	fixed=$(grep -o '"fixed":{[^}]*}' "$tmp/plan.json" | grep -o '"total":[0-9]*' | cut -d: -f2)
	cap=$(grep -o '"host_total":[0-9]*' "$tmp/plan.json" | cut -d: -f2)
	[ -n "$fixed" ] && [ -n "$cap" ] || { echo "FAIL: no fixed.total / host_total in the plan"; exit 1; }
	"$memcap" $cap -- "$nsctl" run "$model" -p "Once upon a time" -n $n -c $ctx --temp 0 \
		--mem-budget "$mem" --ram-budget "$ram" --json > "$tmp/out" 2> "$tmp/err"
	rc=$?
	line=$(grep '^memcap:' "$tmp/err")
	# --json: the object alone on stdout, the text in its "content"
	dec=$(grep -o '"n_decode":[0-9]*' "$tmp/out" | cut -d: -f2)
	text=$(python3 -c 'import json, sys; print(json.load(sys.stdin)["content"])' < "$tmp/out")
	echo "mem $mem ram $ram fixed $fixed: cap $cap B; $line; decoded ${dec:-?} tokens"
	if [ $rc -ne 0 ] || ! echo "$line" | grep -q 'oom kills 0'; then
		echo "FAIL: exit $rc under the cap"; tail -5 "$tmp/err"; fail=1; continue
	fi
	[ "${dec:-0}" -ge 100 ] || { echo "FAIL: only ${dec:-0} tokens decoded"; fail=1; }
	if [ -z "$ref" ]; then ref=$text; elif [ "$ref" != "$text" ]; then
		echo "FAIL: the text differs at mem $mem ram $ram"; fail=1
	fi
done
[ $fail -eq 0 ] && echo "every run finished under its cap with no OOM kill; same text"
exit $fail
