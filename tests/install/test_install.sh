#!/bin/sh
# test_install.sh - a DESTDIR install used as a user would, with the build tree out of PATH and
# LD_LIBRARY_PATH (env -i): the installed nsctl runs stories260K greedily to llama.cpp's golden
# text (nsio/nsplan/nscompute found in libexec from nsctl's own location); a C and a C++
# program built with `pkg-config --cflags --libs neurostream` alone generate the same text (the
# daemons found from libneurostream.so's location); man nsctl-run renders; the library exports
# only neurostream.h's functions under a versioned soname; python3 -m neurostream info MODEL
# prints what nsctl info prints and the package generates the golden text.
#
#   test_install.sh MESON BUILD_ROOT ORACLE_DIR SANITIZE PYTHON EMBED_C EMBED_CXX
#
# SANITIZE (meson's b_sanitize): not "none" builds the two programs with the same
# -fsanitize and skips the Python steps (the ASan runtime must come first in a process;
# Debian's python3 is not built with it). Exit 0 pass, 1 fail, 77 skip (oracle missing
# outside CI; with CI=true a missing oracle fails).
set -u
MESON=$1 BUILD=$2 ORACLE=$3 SAN=$4 PY=$5 EMBED_C=$6 EMBED_CXX=$7
MODEL=$ORACLE/models/stories260K.gguf
GOLD=$ORACLE/golden/stories260K__once.json

fail() {
	echo "FAIL: $*"
	exit 1
}

if [ ! -f "$MODEL" ] || [ ! -f "$GOLD" ]; then
	[ "${CI:-}" = true ] && fail "oracle data missing: $MODEL, $GOLD"
	echo "SKIP: oracle data missing ($MODEL)"
	exit 77
fi
T=$(mktemp -d /tmp/ns_install_XXXXXX) || fail "mktemp"
trap 'rm -rf "$T"' EXIT
D=$T/dest

"$MESON" install -C "$BUILD" --no-rebuild --destdir "$D" >"$T/install.log" 2>&1 ||
	{ cat "$T/install.log"; fail "meson install --destdir"; }

# what landed where
one() { # one file matching a path pattern under the DESTDIR
	f=$(find "$D" -path "$1" \( -type f -o -type l \) | head -n 1)
	[ -n "$f" ] || fail "nothing installed at $1"
	echo "$f"
}
NSCTL=$(one '*/bin/nsctl') || exit 1
for d in nsio nsplan nscompute nsrouter; do
	one "*/libexec/neurostream/$d" >/dev/null || exit 1
done
HEADER=$(one '*/include/neurostream.h') || exit 1
LIBSO=$(one '*/lib*/libneurostream.so.0') || exit 1
PC=$(one '*/pkgconfig/neurostream.pc') || exit 1
RUNPAGE=$(one '*/man/man1/nsctl-run.1') || exit 1
one '*/man/man1/nsctl.1' >/dev/null || exit 1
one '*/share/doc/neurostream/LICENSE' >/dev/null || exit 1
grep -q "MIT License" "$(one '*/share/doc/neurostream/LICENSE')" || fail "LICENSE is not MIT"
[ -z "$(find "$D" -path '*/bin/*' ! -name nsctl -type f)" ] ||
	fail "bindir holds more than nsctl: $(find "$D" -path '*/bin/*' -type f)"
LIBDIR=$(dirname "$LIBSO")
MANDIR=$(dirname "$(dirname "$RUNPAGE")")

# the shared library: versioned soname, neurostream.h's functions and nothing else
readelf -d "$LIBSO" | grep -q 'SONAME.*\[libneurostream\.so\.0\]' || fail "soname: $(readelf -d "$LIBSO" | grep SONAME)"
syms=$(nm -D --defined-only "$LIBSO" | awk '$2 ~ /^[TDBRVW]$/ { sub(/@.*/, "", $3); print $3 }' | sort -u)
echo "$syms" | grep -qx ns_engine_load || fail "ns_engine_load not exported"
for s in $syms; do
	grep -q "[ *]$s(" "$HEADER" || fail "exported symbol $s is not declared in neurostream.h"
done
echo "library: soname libneurostream.so.0, $(echo "$syms" | wc -l) symbols, all in neurostream.h"

# the golden greedy continuation of llama.cpp
PROMPT=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["prompt_text"])' "$GOLD")
N=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["greedy_n"])' "$GOLD")
"$PY" -c 'import json,sys; sys.stdout.write(json.load(open(sys.argv[1]))["greedy_text"])' "$GOLD" >"$T/want"

# a user's environment: nothing of the build tree
CLEAN="env -i HOME=$T PATH=/usr/bin:/bin LANG=C.UTF-8"
[ -n "${ASAN_OPTIONS:-}" ] && CLEAN="$CLEAN ASAN_OPTIONS=$ASAN_OPTIONS"
[ -n "${UBSAN_OPTIONS:-}" ] && CLEAN="$CLEAN UBSAN_OPTIONS=$UBSAN_OPTIONS"

$CLEAN "$NSCTL" run "$MODEL" -p "$PROMPT" -n "$N" --temp 0 >"$T/run.out" 2>"$T/run.err" ||
	{ cat "$T/run.err"; fail "installed nsctl run"; }
{ cat "$T/want"; echo; } >"$T/want.run" # nsctl run ends the text with a newline
cmp -s "$T/run.out" "$T/want.run" || fail "installed nsctl run: '$(cat "$T/run.out")', want '$(cat "$T/want")'"
echo "nsctl run (installed): the golden text"

# C and C++ programs built from the .pc alone
FLAGS=$(PKG_CONFIG_PATH=$(dirname "$PC") PKG_CONFIG_SYSROOT_DIR=$D pkg-config --cflags --libs neurostream) ||
	fail "pkg-config --cflags --libs neurostream"
SANFLAGS=""
[ "$SAN" != none ] && SANFLAGS="-fsanitize=$SAN"
# shellcheck disable=SC2086
cc -std=c11 -Wall -Werror $SANFLAGS -o "$T/embed" "$EMBED_C" $FLAGS || fail "cc embed.c $FLAGS"
# shellcheck disable=SC2086
c++ -std=c++11 -Wall -Werror $SANFLAGS -o "$T/embed_cxx" "$EMBED_CXX" $FLAGS || fail "c++ embed.cc $FLAGS"
for p in embed embed_cxx; do
	$CLEAN LD_LIBRARY_PATH="$LIBDIR" "$T/$p" "$MODEL" "$PROMPT" "$N" >"$T/$p.out" 2>"$T/$p.err" ||
		{ cat "$T/$p.err"; fail "$p"; }
	cmp -s "$T/$p.out" "$T/want" || fail "$p: '$(cat "$T/$p.out")', want '$(cat "$T/want")'"
	if grep -q "nsctl:" "$T/$p.err"; then fail "$p: library lines prefixed nsctl: $(cat "$T/$p.err")"; fi
done
echo "C and C++ programs (pkg-config): the golden text"

# the man page, by name through MANPATH and as a file
$CLEAN MANPATH="$MANDIR" MANWIDTH=80 man -P cat nsctl-run >"$T/man.txt" 2>"$T/man.err" ||
	{ cat "$T/man.err"; fail "man nsctl-run"; }
grep -q "NSCTL-RUN" "$T/man.txt" && grep -q -- "--mem-budget" "$T/man.txt" ||
	fail "man nsctl-run: no title or no --mem-budget: $(head -n 5 "$T/man.txt")"
$CLEAN MANWIDTH=80 man --warnings -l "$RUNPAGE" >/dev/null 2>"$T/manw.err"
[ -s "$T/manw.err" ] && fail "groff warnings on nsctl-run.1: $(cat "$T/manw.err")"
echo "man nsctl-run: renders ($(wc -l <"$T/man.txt") lines)"

if [ "$SAN" != none ]; then
	echo "python steps skipped: a sanitizer build (b_sanitize=$SAN) cannot be loaded into python3"
	exit 0
fi
INIT=$(one '*/neurostream/__init__.py') || exit 1
SITE=$(dirname "$(dirname "$INIT")")
$CLEAN "$NSCTL" info "$MODEL" >"$T/info.want" 2>&1 || fail "installed nsctl info"
$CLEAN PYTHONPATH="$SITE" "$PY" -m neurostream info "$MODEL" >"$T/info.out" 2>&1 ||
	{ cat "$T/info.out"; fail "python3 -m neurostream info"; }
cmp -s "$T/info.out" "$T/info.want" || fail "python3 -m neurostream info differs from nsctl info"
$CLEAN PYTHONPATH="$SITE" "$PY" -c '
import sys
from neurostream import NeuroStream
with NeuroStream.load(sys.argv[1]) as ns:
    sys.stdout.write("".join(ns.generate(sys.argv[2], max_tokens=int(sys.argv[3]), temperature=0)))
' "$MODEL" "$PROMPT" "$N" >"$T/py.out" 2>"$T/py.err" || { cat "$T/py.err"; fail "python generate"; }
cmp -s "$T/py.out" "$T/want" || fail "python generate: '$(cat "$T/py.out")', want '$(cat "$T/want")'"
echo "python3 -m neurostream info = nsctl info; NeuroStream.generate: the golden text"
