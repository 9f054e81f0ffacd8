#!/bin/sh
# nsctl ps shows live sessions only, and --clean removes the dead ones: nsio creates a session
# of its own (it holds the session's lock), is SIGKILLed, and leaves its segments and runtime
# dir (nothing else starts a session meanwhile: that would sweep it); ps must not list it (the lock is free, whatever pids say), ps --clean must remove both,
# and a live session beside it must be listed and kept. Usage: test_ps_clean.sh NSCTL NSIO
set -u
nsctl=$1 nsio=$2
oracle=${NS_ORACLE_DIR:-../shared/oracle}
model=$oracle/tiny/tiny-qwen3-Q4_K_M.gguf
if [ ! -f "$model" ]; then
	[ "${CI:-}" = true ] && { echo "FAIL: oracle model missing under CI"; exit 1; }
	echo "SKIP: oracle model missing"; exit 77
fi
tmp=$(mktemp -d /tmp/ns_ps_clean.XXXXXX)
export USER=nsps$$ XDG_RUNTIME_DIR=$tmp
live=""
trap 'kill -9 $live 2>/dev/null; rm -rf "$tmp"; rm -f /dev/shm/ns-$USER-*' EXIT
fail=0
start() { # SESSION: an nsio serving its own new session, until the session's ctl is there
	"$nsio" --session "$1" --model "$model" --mem-budget 4MB --quiet > /dev/null 2>&1 &
	pid=$!
	for _ in $(seq 200); do ls /dev/shm | grep -q "ns-$USER-$1-ctl" && break; sleep 0.02; done
}
start live1; live=$pid   # first: every session start sweeps the dead ones
start dead1; kill -9 $pid; wait $pid 2>/dev/null
[ -n "$(ls /dev/shm | grep "ns-$USER-dead1-")" ] && [ -d "$tmp/neurostream-dead1" ] ||
	{ echo "FAIL: the killed nsio left nothing to clean (test is void)"; fail=1; }
out=$("$nsctl" ps)
echo "$out" | grep -q "session dead1" && { echo "FAIL: ps lists the dead session:"; echo "$out"; fail=1; }
echo "$out" | grep -q "session live1" || { echo "FAIL: ps does not list the live one:"; echo "$out"; fail=1; }
"$nsctl" ps --clean > /dev/null 2> "$tmp/err" || fail=1
grep -q "removed" "$tmp/err" || { echo "FAIL: ps --clean said nothing"; fail=1; }
[ -z "$(ls /dev/shm | grep "ns-$USER-dead1-")" ] && [ ! -d "$tmp/neurostream-dead1" ] ||
	{ echo "FAIL: ps --clean left the dead session"; fail=1; }
[ -n "$(ls /dev/shm | grep "ns-$USER-live1-")" ] && [ -d "$tmp/neurostream-live1" ] ||
	{ echo "FAIL: ps --clean removed the live session"; fail=1; }
[ $fail = 0 ] && echo "PASS: ps lists only the live session; --clean removed the dead one"
exit $fail
