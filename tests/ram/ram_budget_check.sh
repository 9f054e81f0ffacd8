#!/bin/bash
# ram_budget_check.sh NSCTL MEMCAP: budgets the user names are checked against the memory the
# process may use before anything starts (nsctl_check_budgets), counting of a RAM budget only
# what the model can fill, and the fixed set (KV cache, scratch, processes, margin: 21 MiB
# here at -c 64). On a 13 MiB model (mkmodel demo) inside a 48 MiB memory cgroup:
#   - arena 40 MiB + RAM budget 1 GiB (13 MiB of it fillable): refused, exit 2, one line
#     naming both budgets and the cgroup's limit, for run and for each bench configuration;
#   - arena 20 MiB + the same RAM budget: 33 MiB of budgets fit, but not with the fixed set:
#     refused the same way (before issue 18 it started and could be OOM-killed);
#   - arena 8 MiB + the same 1 GiB RAM budget: accepted and run (the segment's untouched pages
#     cost nothing), exit 0, no OOM kill.
# Exit 0 pass, 1 fail, 77 skip (no writable v1 memory cgroup: memcap.sh needs root).
set -u
nsctl=$1 memcap=$2
. "$(dirname "$0")/memcap_check.sh"
memcap_check "$memcap"
tmp=$(mktemp -d /tmp/ns_budget_check.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
model=$tmp/demo.gguf
"$nsctl" mkmodel --preset demo -o "$model" > /dev/null 2>&1 || { echo "FAIL: mkmodel"; exit 1; }
cap=$((48 * 1024 * 1024)) fail=0

# refused: the line, nothing else from nsctl or a child
refused() { # WHAT ARGS...
	local what=$1; shift
	"$memcap" $cap -- "$nsctl" "$@" > "$tmp/out" 2> "$tmp/err"
	local rc=$? lines
	lines=$(grep -v '^memcap:' "$tmp/err")
	if [ $rc -ne 2 ] || [ "$(printf '%s\n' "$lines" | wc -l)" -ne 1 ] ||
		! printf '%s' "$lines" | grep -q -- "--mem-budget [24]0.00 MiB + --ram-budget 1.00 GiB (13\.[0-9][0-9] MiB of it.*exceed the 48.00 MiB of memory available (the cgroup's limit"; then
		echo "FAIL: $what: exit $rc, stderr:"; cat "$tmp/err"; fail=1
	else
		echo "ok: $what: $lines"
	fi
}
refused "run" run "$model" -p hello -n 4 --temp 0 -c 64 --mem-budget 40MB --ram-budget 1GB
refused "run, the fixed set over" run "$model" -p hello -n 4 --temp 0 -c 64 --mem-budget 20MB \
	--ram-budget 1GB
refused "bench, second configuration" bench "$model" -p 4 -n 2 -r 1 -c 64 --no-disk \
	--budgets 8MB,40MB --ram-budgets 1GB

"$memcap" $cap -- "$nsctl" run "$model" -p hello -n 8 --temp 0 -c 64 --mem-budget 8MB \
	--ram-budget 1GB > "$tmp/out" 2> "$tmp/err"
rc=$?
line=$(grep '^memcap:' "$tmp/err")
if [ $rc -ne 0 ] || ! echo "$line" | grep -q 'oom kills 0'; then
	echo "FAIL: arena 8 MiB + RAM 1 GiB under the cap: exit $rc"; tail -5 "$tmp/err"; fail=1
else
	echo "ok: arena 8 MiB + RAM 1 GiB (13 MiB fillable) ran under the 48 MiB cap: $line"
fi
exit $fail
