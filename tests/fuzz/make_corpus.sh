#!/bin/sh
# Seed corpus for fuzz_gguf: the headers of every GGUF in the oracle (first 64 KiB each, the
# part the reader parses) plus whole small files. Usage: make_corpus.sh ORACLE_DIR OUT_DIR DEPFILE
# DEPFILE (ninja's): the oracle directory, each of its folders and each GGUF read, so the corpus
# is made again when a file changes or appears; with no oracle yet it names the missing
# directory, which keeps the corpus out of date (remade every build, cheaply) until it appears.
set -eu
oracle=$1
out=$2
dep=$3
rm -rf "$out"
mkdir -p "$out"
{
	printf '%s:' "$out"
	if [ -d "$oracle" ]; then
		find "$oracle" -type d | sort | while read -r d; do printf ' %s' "$d"; done
	else
		printf ' %s' "$oracle"
	fi
} > "$dep.tmp"
if [ -d "$oracle" ]; then
	find "$oracle" -name '*.gguf' | sort | while read -r f; do
		name=$(echo "$f" | sed "s|^$oracle/||; s|/|__|g")
		head -c 65536 "$f" > "$out/$name"
		printf ' %s' "$f" >> "$dep.tmp"
	done
fi
echo >> "$dep.tmp"
mv "$dep.tmp" "$dep"
touch "$out"
echo "$(ls "$out" | wc -l) seed inputs in $out"
