#!/bin/sh
# The README's main job. With a model path: describe that model. Without: generate a small
# random-weight llama-shaped model (models/demo.gguf) and describe it.
# Usage: bench/demo.sh BUILD_DIR [MODEL]
set -eu
build=$1
model=${2:-}
nsctl="$build/nsctl/nsctl"
if [ -n "$model" ]; then
	echo "== neurostream demo: your model $model"
else
	model=models/demo.gguf
	mkdir -p models
	if [ ! -f "$model" ]; then
		"$nsctl" mkmodel --preset demo -o "$model"
	fi
	echo "== neurostream demo: bundled default, a generated model with RANDOM weights ($model)"
fi
"$nsctl" info "$model"
