#!/bin/bash
# device_pipeline.sh STAGE WORK - the cuda backend through the whole pipeline on the GPU
# machine (called by device_check.sh when the stage has nscompute-cuda; builds nothing):
#   1. tests/run/test_cuda_backend.sh with the real nscompute-cuda on four tiny oracle models;
#   2. a generated llama-8b Q4_K_M with every weight in VRAM: nsctl bench --backend cuda,
#      with f32 and with int8 (--act q8) activations;
#   3. a generated qwen3-30b-a3b Q4_K_M streamed under --vram-budget 6GB --ram-budget 2GB
#      --mem-budget 512MB: nsctl bench --backend cuda, with the drive measured in the same run
#      (the ratio columns); with NS_DEVICE_CPU_REFERENCE set, the cpu backend under the same
#      budgets for reference.
# Models are generated into WORK (a directory on the machine's disk: nsio reads with O_DIRECT),
# once: a model already there is whole (mkmodel renames a finished temporary file).
set -u
stage=$1
work=$2
bin=$PWD/$stage/bin
export NS_NSCOMPUTE_CUDA=$bin/nscompute-cuda
STEP_MARK=---
. bench/cuda/device_step.sh
mkdir -p "$work"
df -h "$work" | tail -1
for m in tiny-qwen3moe-Q4_K_M tiny-llama-Q4_K_M tiny-qwen35moe-Q4_K_M tiny-gemma4-Q4_K_M; do
    NS_CUDA_REAL=1 step "test_cuda_backend $m" 120 sh tests/run/test_cuda_backend.sh \
        "$bin/nsctl" "$bin/nscompute-cuda" "$stage/oracle/tiny/$m.gguf"
done
[ -f "$work/l8b.gguf" ] || step "mkmodel llama-8b" 240 "$bin/nsctl" mkmodel --preset llama-8b \
    --quant q4_k_m -o "$work/l8b.gguf"
step "bench llama-8b resident (cuda)" 240 "$bin/nsctl" bench "$work/l8b.gguf" --backend cuda \
    -p 128 -n 64 -r 3 -c 512 --budgets 256MB --ram-budgets 0 --vram-budgets 12GB --no-disk
step "bench llama-8b resident (cuda, --act q8)" 240 "$bin/nsctl" bench "$work/l8b.gguf" \
    --backend cuda --act q8 -p 128 -n 64 -r 3 -c 512 --budgets 256MB --ram-budgets 0 \
    --vram-budgets 12GB --no-disk
[ -f "$work/q30b.gguf" ] || step "mkmodel qwen3-30b-a3b" 300 "$bin/nsctl" mkmodel \
    --preset qwen3-30b-a3b --quant q4_k_m -o "$work/q30b.gguf"
step "bench qwen3-30b-a3b streamed (cuda)" 300 "$bin/nsctl" bench "$work/q30b.gguf" \
    --backend cuda -p 0 -n 16 -r 2 -c 512 --budgets 512MB --ram-budgets 2GB --vram-budgets 6GB \
    --disk-repeats 2
if [ -n "${NS_DEVICE_CPU_REFERENCE:-}" ]; then
    step "bench qwen3-30b-a3b streamed (cpu, reference)" 240 "$bin/nsctl" bench \
        "$work/q30b.gguf" -p 0 -n 8 -r 1 -c 512 --budgets 512MB --ram-budgets 2GB --no-disk
fi
echo "--- pipeline failures: $fails"
[ "$fails" = 0 ]
