#!/bin/sh
# bench_nsio never overwrites what it is pointed at: an existing file that is not its own
# scratch file (a model, here a small text) is refused in one line and left as it was, and
# the old --file flag (which read like "the file to read" and truncated a 17 GB model) is
# refused with the name of its replacement. Usage: test_bench_scratch.sh BENCH_NSIO
set -u
bench=$1
tmp=$(mktemp -d /tmp/ns_bench_scratch.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail=0
printf 'a user file, not scratch\n' > "$tmp/model.gguf"
cp "$tmp/model.gguf" "$tmp/orig"

check() { # WANT_RC WORD ARGS...: exit code, a word of the one stderr line
	want=$1 word=$2
	shift 2
	"$bench" "$@" > "$tmp/out" 2> "$tmp/err"
	rc=$?
	lines=$(grep -c . "$tmp/err")
	if [ "$rc" != "$want" ] || [ "$lines" != 1 ] || ! grep -q -- "$word" "$tmp/err"; then
		echo "FAIL: bench_nsio $*: exit $rc (want $want), $lines stderr lines (want 1 saying '$word'):"
		cat "$tmp/err"
		fail=1
	fi
}
check 2 "not a bench_nsio scratch file" --scratch "$tmp/model.gguf" --size 1MB --rounds 1
check 2 "--scratch" --file "$tmp/model.gguf" --size 1MB --rounds 1
cmp -s "$tmp/model.gguf" "$tmp/orig" || { echo "FAIL: $tmp/model.gguf changed"; fail=1; }
left=$(ls "$tmp" | grep -v -e '^model.gguf$' -e '^orig$' -e '^out$' -e '^err$')
[ -z "$left" ] || { echo "FAIL: files left beside it: $left"; fail=1; }
[ $fail = 0 ] && echo "PASS: bench_nsio refuses to overwrite what it did not make"
exit $fail
