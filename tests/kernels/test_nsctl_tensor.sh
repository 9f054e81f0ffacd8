#!/bin/sh
# test_nsctl_tensor.sh NSCTL MK_IQ_GGUF: `nsctl tensor` against every golden of oracle/quant byte for byte
# (whole tensors, then a mid-tensor row window, a single last row and an empty window), and
# the one-line, exit-2 contract for bad models, unknown tensors and bad row ranges.
set -u
NSCTL=$1
MKIQ=$2
Q=${NS_ORACLE_DIR:-../shared/oracle}/quant
if [ ! -d "$Q" ]; then
	echo "oracle missing at $Q"
	[ "${CI:-}" = true ] && exit 1
	exit 77
fi
TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT INT TERM
fails=0
n=0
fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}

for g in "$Q"/*.gguf; do
	type=$(basename "$g" .gguf)
	[ -d "$Q/$type" ] || continue
	for ref in "$Q/$type"/*.f32; do
		name=$(basename "$ref" .f32)
		if ! "$NSCTL" tensor "$g" "$name" -o "$TMP/out" > "$TMP/log" 2>&1; then
			fail "$type/$name: exit $? ($(cat "$TMP/log"))"
			continue
		fi
		cmp -s "$TMP/out" "$ref" || fail "$type/$name: output differs from $ref"
		want=$(echo "$type" | tr a-z A-Z)
		grep -q "type $want," "$TMP/log" || fail "$type/$name: type not printed: $(cat "$TMP/log")"
		rows=$(sed -n 's/.*\], \([0-9]*\) rows of \([0-9]*\);.*/\1/p' "$TMP/log")
		cols=$(sed -n 's/.*\], \([0-9]*\) rows of \([0-9]*\);.*/\2/p' "$TMP/log")
		if [ -z "$rows" ] || [ -z "$cols" ]; then
			fail "$type/$name: no shape in: $(cat "$TMP/log")"
			continue
		fi
		a=$((rows / 3))
		b=$((rows - rows / 3))
		[ "$b" -gt "$a" ] || b=$rows
		last=$((rows - 1))
		for w in "$a:$b" "$last:$rows" "$a:$a"; do
			wa=${w%:*}
			wb=${w#*:}
			"$NSCTL" tensor "$g" "$name" --rows "$w" -o "$TMP/win" > /dev/null 2>&1 ||
				{ fail "$type/$name --rows $w: exit $?"; continue; }
			len=$(((wb - wa) * cols * 4))
			[ "$(wc -c < "$TMP/win")" -eq "$len" ] || fail "$type/$name --rows $w: wrong size"
			tail -c +$((wa * cols * 4 + 1)) "$ref" | head -c "$len" > "$TMP/refwin"
			cmp -s "$TMP/win" "$TMP/refwin" || fail "$type/$name --rows $w: differs"
		done
		n=$((n + 1))
	done
done
[ "$n" -ge 139 ] || fail "only $n tensors found under $Q"

# Bad input: exit 2 and exactly one line on stderr.
expect2() {
	"$NSCTL" tensor "$@" > "$TMP/o" 2> "$TMP/e"
	rc=$?
	[ "$rc" -eq 2 ] || fail "nsctl tensor $*: exit $rc, want 2"
	[ "$(wc -l < "$TMP/e")" -eq 1 ] || fail "nsctl tensor $*: stderr is not one line: $(cat "$TMP/e")"
}
head -c 100 "$Q/q4_k.gguf" > "$TMP/trunc.gguf"
echo "not a gguf" > "$TMP/junk.gguf"
expect2 "$TMP/trunc.gguf" c.c256.r64 -o "$TMP/x"
expect2 "$TMP/junk.gguf" c.c256.r64 -o "$TMP/x"
expect2 "$TMP/missing.gguf" c.c256.r64 -o "$TMP/x"
expect2 "$Q/q4_k.gguf" no.such.tensor -o "$TMP/x"
expect2 "$Q/q4_k.gguf" c.c256.r64 --rows 5:2 -o "$TMP/x"
expect2 "$Q/q4_k.gguf" c.c256.r64 --rows 0:65 -o "$TMP/x"
expect2 "$Q/q4_k.gguf" c.c256.r64 --rows x -o "$TMP/x"
expect2 "$Q/q4_k.gguf" c.c256.r64 --rows 1:2:3 -o "$TMP/x"
expect2 "$Q/q4_k.gguf" c.c256.r64 --rows -1:2 -o "$TMP/x"
expect2 "$Q/q4_k.gguf" c.c256.r64
expect2 "$Q/q4_k.gguf" -o "$TMP/x"
expect2 "$Q/q4_k.gguf" c.c256.r64 --bogus -o "$TMP/x"

# Types we cannot compute: refused by name, exit 2; a computable tensor of the same file works.
"$MKIQ" "$TMP/iq.gguf" || fail "mk_iq_gguf failed"
for pair in iq2:IQ2_XXS tq1:TQ1_0 nvfp4:NVFP4; do
	expect2 "$TMP/iq.gguf" "${pair%:*}" -o "$TMP/x"
	grep -q "${pair#*:}" "$TMP/e" || fail "refusal of ${pair%:*} does not name ${pair#*:}: $(cat "$TMP/e")"
done
"$NSCTL" tensor "$TMP/iq.gguf" q8 -o "$TMP/x" > /dev/null || fail "q8 tensor of iq.gguf: exit $?"
[ "$(wc -c < "$TMP/x")" -eq 512 ] || fail "q8 tensor of iq.gguf: wrong size"

echo "$n tensors checked, $fails failures"
[ "$fails" -eq 0 ]
