#!/bin/sh
# Seed corpus for fuzz_gguf: the headers of every GGUF in the oracle (first 64 KiB each, the
# part the reader parses) plus whole small files. Usage: make_corpus.sh ORACLE_DIR OUT_DIR
set -eu
oracle=$1
out=$2
mkdir -p "$out"
find "$oracle" -name '*.gguf' | sort | while read -r f; do
	name=$(echo "$f" | sed "s|^$oracle/||; s|/|__|g")
	head -c 65536 "$f" > "$out/$name"
done
echo "$(ls "$out" | wc -l) seed inputs in $out"
