#!/bin/bash
# device_check.sh [STAGE_DIR] - run on the GPU machine from the repository root: everything
# bench/cuda/stage.sh put in the stage folder (default build-gpu-stage), one report to
# $OUT/cuda-report.txt (./cuda-report.txt without $OUT). Builds nothing. Every step has its own
# time limit so one hang cannot eat the lease. Steps whose binaries were not staged are left
# out. The report ends with "=== failures: N" (a skip, rc 77, counts as a failure here).
set -u
stage=${1:-build-gpu-stage}
out=${OUT:-.}
report=$out/cuda-report.txt
work=${NS_DEVICE_WORK:-$PWD/.devdata/work}
export LD_LIBRARY_PATH=$PWD/$stage/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export NS_ORACLE_DIR=$PWD/$stage/oracle
export NS_BUILD_ROOT=$PWD/$stage/bin
export CI=true # a missing oracle fails instead of skipping
. bench/cuda/device_step.sh
has() { [ -x "$stage/bin/$1" ]; }
mkdir -p "$work"
[ -f "$stage/bin.tgz" ] && tar xzf "$stage/bin.tgz" -C "$stage"
{
    echo "neurostream CUDA device check, $(date -u)"
    git log -1 --format='commit %H %s' 2>/dev/null
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv 2>&1
    echo
    for t in test_range test_cuda_vram test_cuda_dequant test_cuda_gemv test_cuda_gemv_q8 \
        test_cuda_ops test_cuda_attn test_cuda_dnet test_cuda_tower; do
        has "$t" && step "$t" 120 "$stage/bin/$t"
    done
    if has test_cfwd; then
        for m in "$stage"/oracle/models/*.gguf "$stage"/oracle/tiny/*.gguf \
            "$stage"/oracle/hf/*/gguf/*.gguf; do
            [ -e "$m" ] || continue
            rel=${m#"$stage/oracle/"}
            # gemma: also against the oracle's references (tests/cuda/meson.build cfwd_refs)
            ref=()
            case $rel in
            tiny/tiny-gemma*) ref=(--ref "${rel%.gguf}.seqA" dequant) ;;
            hf/gemma4_e/*) ref=(--ref hf/gemma4_e/seqA hf) ;;
            hf/*/gguf/mmproj-*) continue ;; # a tower: with its text model below
            hf/qwen3_vl/gguf/*) ref=(--mm hf/qwen3_vl/gguf/mmproj-qwen3_vl-f32.gguf hf/qwen3_vl) ;;
            esac
            step "test_cfwd $rel" 120 "$stage/bin/test_cfwd" "$rel" ${ref[@]+"${ref[@]}"}
        done
    fi
    if has test_draft_cuda; then # stage part s19 (tests/cuda/meson.build's GPU tests)
        step "test_cfwd gemma-4-moe-tiny" 120 "$stage/bin/test_cfwd" \
            gemma-4-moe-tiny.gguf --ref "$PWD/tests/forward/gemma4_moe/ref" \
            lcpp --ref-only
        for m in tiny-llama-Q4_K_M tiny-qwen3-Q4_K_M tiny-qwen3moe-Q4_K_M \
            tiny-gpt-oss-MXFP4_MOE tiny-qwen35-Q4_K_M tiny-gemma3-Q4_K_M tiny-gemma4-Q4_K_M; do
            step "test_cfwd tiny/$m.gguf --kv --kernels" 120 "$stage/bin/test_cfwd" \
                "tiny/$m.gguf" --kv --kernels
        done
        for m in models/stories260K.gguf tiny/tiny-qwen3-Q4_K_M.gguf tiny/tiny-llama-Q8_0.gguf; do
            step "test_draft_cuda $m" 120 "$stage/bin/test_draft_cuda" "$m"
        done
    fi
    if has test_ctower; then # stage part s20: the vision tower on the device
        for d in qwen3_vl qwen3_5_cond; do
            step "test_ctower $d --kernels" 120 "$stage/bin/test_ctower" "hf/$d" \
                "hf/$d/gguf/mmproj-$d-f32.gguf" --kernels
        done
    fi
    if has test_cfwd_rollback; then # s20: the recurrent state rolled back in VRAM
        for m in tiny-qwen35-F32 tiny-qwen35-Q4_K_M tiny-qwen35moe-Q4_K_M; do
            step "test_cfwd_rollback $m" 120 "$stage/bin/test_cfwd_rollback" "tiny/$m.gguf"
        done
    fi
    if has bench_cuda_decode && has nsctl; then
        # mkmodel writes a temporary file and renames it: a model present is whole, and a
        # second call on a warm machine skips the minute of generating it again
        [ -f "$work/l8b.gguf" ] || step "mkmodel llama-8b q4_k_m" 240 "$stage/bin/nsctl" \
            mkmodel --preset llama-8b --quant q4_k_m -o "$work/l8b.gguf"
        step "bench_cuda_decode llama-8b" 240 "$stage/bin/bench_cuda_decode" "$work/l8b.gguf" \
            -p 128 -n 128 -r 3
        step "bench_cuda_decode llama-8b --act q8" 240 "$stage/bin/bench_cuda_decode" \
            "$work/l8b.gguf" -p 128 -n 128 -r 3 --act q8
        NS_CFWD_PROFILE=1 step "bench_cuda_decode llama-8b, profiled" 240 \
            "$stage/bin/bench_cuda_decode" "$work/l8b.gguf" -p 128 -n 32 -r 1
        if [ -n "${NS_DEVICE_GEMV_SWEEP:-}" ]; then
            for v in 1 2 3; do
                NS_CUDA_GEMV=$v step "bench_cuda_decode llama-8b, NS_CUDA_GEMV=$v" 240 \
                    "$stage/bin/bench_cuda_decode" "$work/l8b.gguf" -p 128 -n 64 -r 2
            done
        fi
    fi
    has bench_cuda_gemv && step bench_cuda_gemv 240 "$stage/bin/bench_cuda_gemv"
    if [ -x bench/cuda/device_pipeline.sh ] && has nscompute-cuda; then
        step "pipeline" 300 bash bench/cuda/device_pipeline.sh "$stage" "$work"
    fi
    echo "=== failures: $fails"
} 2>&1 | tee "$report"
exit 0
