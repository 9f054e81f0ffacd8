#!/bin/sh
# The README's main job: nsctl run, for real.
#   With a model path: run that model (greedy unless TEMP is set) with the budgets nsctl
#   chooses (or MEM_BUDGET / RAM_BUDGET) and print the summary.
#   Without: generate a small llama-shaped model with RANDOM weights (models/demo.gguf; the
#   text is noise) and stream it under a memory budget far smaller than the model and no RAM
#   cache, so the summary line shows the ceiling held.
# Usage: bench/demo.sh BUILD_DIR [MODEL]
# Environment: PROMPT (default "Once upon a time"), N (tokens, default 64), MEM_BUDGET and
# RAM_BUDGET (default: 1MB and 0 for the generated model, nsctl's choice for yours), TEMP (default: 0,
# greedy, for your model; 0.8 with a fixed seed for the generated one, whose greedy text
# is one token repeated), SEED (42).
set -eu
build=$1
model=${2:-}
nsctl="$build/nsctl/nsctl"
prompt=${PROMPT:-Once upon a time}
n=${N:-64}
seed=${SEED:-42}
if [ -n "$model" ]; then
	echo "== neurostream demo: YOUR model $model, run by nsctl run (budgets not given are"
	echo "   chosen from the machine's memory, as nsctl plan does, and printed)"
	budget=${MEM_BUDGET:-}
	ram=${RAM_BUDGET:-}
	temp=${TEMP:-0}
else
	model=models/demo.gguf
	mkdir -p models
	if [ ! -f "$model" ]; then
		"$nsctl" mkmodel --preset demo -o "$model"
	fi
	budget=${MEM_BUDGET:-1MB}
	ram=${RAM_BUDGET:-0} # no RAM cache: every weight streams from the file every token
	temp=${TEMP:-0.8}
	size=$(stat -c %s "$model")
	echo "== neurostream demo: the BUNDLED DEFAULT, a generated model with RANDOM weights"
	echo "   ($model, $size bytes): the text below is noise. It is streamed through nsio"
	echo "   under --mem-budget $budget, far smaller than the model, with no RAM cache."
fi
set -- "$nsctl" run "$model" -p "$prompt" -n "$n" --temp "$temp" --seed "$seed"
if [ -n "$budget" ]; then
	set -- "$@" --mem-budget "$budget"
fi
if [ -n "$ram" ]; then
	set -- "$@" --ram-budget "$ram"
fi
echo "== $*"
"$@"
echo "== the 'arena peak X of Y' above is nsio's peak reservation against the budget"
