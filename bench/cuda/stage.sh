#!/bin/bash
# stage.sh BUILD_DIR [STAGE_DIR] [PART...] - gather what bench/cuda/device_check.sh needs on the
# GPU machine into one small folder (default build-gpu-stage, ignored by git through build*/).
# Builds nothing. PARTs (default: kernels fwd):
#   kernels   the CUDA kernel tests and the GEMV benchmark
#   dequant   the dequantization test and its goldens (17 MB)
#   fwd       test_cfwd with the quantized llama/qwen3/qwen3moe/gpt-oss/qwen35/qwen35moe/gemma3/
#             gemma4 oracle models (with the gemma ones' .dequant.f32 references) and the six stories260K ones (odd-width float rows, 3.3 MB),
#             bench_cuda_decode, and nsctl (mkmodel makes the 8B model there)
#   fwd-f32   the F32 tiny models too (30 MB more: stage them in a call of their own)
#   gemma-e   hf/gemma4_e's F32 GGUF and Transformers' logits (16 MB): per-layer inputs and
#             KV-shared layers
#   pipeline  nsctl, nsio, nsplan, nsrouter, nscompute, nscompute-cuda (nsctl run --backend cuda)
#   s20       session 20's: test_ctower with both oracle towers (the vision tower on the device),
#             test_cfwd_rollback with the qwen35 tiny models (the recurrent state rolled back)
#   s19       session 19's pieces, best in a call of its own (with kernels at most): test_cfwd
#             and test_draft_cuda, the tiny models of the typed-KV and draft-model steps, the
#             built gemma-4-moe-tiny (its llama.cpp reference is in the tree) and hf/qwen3_vl's
#             F32 GGUF, mmproj and image references for test_cfwd --mm
# plus the non-system shared libraries the binaries link (shared/tools/device-bundle.sh).
set -euo pipefail
build=${1:?usage: stage.sh BUILD_DIR [STAGE_DIR] [PART...]}
stage=${2:-build-gpu-stage}
shift $(( $# >= 2 ? 2 : 1 ))
parts=${*:-kernels fwd}
oracle=${NS_ORACLE_DIR:-../shared/oracle}
rm -rf "$stage"
mkdir -p "$stage/bin" "$stage/oracle/models" "$stage/oracle/tiny"
bin() { for b in "$@"; do cp "$build/$b" "$stage/bin/"; done; }
mkdir -p "$stage/bin"
for part in $parts; do
    case $part in
    kernels)
        for t in test_range test_cuda_gemv test_cuda_gemv_q8 test_cuda_ops test_cuda_attn \
            test_cuda_vram test_cuda_dnet test_cuda_tower; do
            bin "tests/cuda/$t"
        done
        bin bench/cuda/bench_cuda_gemv ;;
    dequant)
        bin tests/cuda/test_cuda_dequant
        cp -r "$oracle/quant" "$stage/oracle/" ;;
    fwd)
        bin tests/cuda/test_cfwd bench/cuda/bench_cuda_decode nsctl/nsctl
        for f in synth-llama-k256-Q4_K_M synth-llama-k256-Q5_K synth-llama-k256-Q6_K \
            stories260K stories260K-F16 stories260K-BF16 stories260K-Q8_0 stories260K-Q4_0 \
            stories260K-MXFP4; do
            cp "$oracle/models/$f.gguf" "$stage/oracle/models/"
        done
        for f in llama-Q8_0 llama-Q4_K_M qwen3-Q4_K_M qwen3-Q5_K_M qwen3-Q6_K qwen3-Q4_0 \
            qwen3moe-Q4_K_M gpt-oss-MXFP4_MOE qwen35-Q4_K_M qwen35moe-Q4_K_M; do
            cp "$oracle/tiny/tiny-$f.gguf" "$stage/oracle/tiny/"
        done
        for f in gemma3-Q4_K_M gemma4-Q4_K_M; do
            cp "$oracle/tiny/tiny-$f.gguf" "$oracle/tiny/tiny-$f.seqA.json" \
                "$oracle/tiny/tiny-$f.seqA.dequant.f32" "$stage/oracle/tiny/"
        done ;;
    gemma-e)
        bin tests/cuda/test_cfwd
        mkdir -p "$stage/oracle/hf/gemma4_e/gguf"
        cp "$oracle/hf/gemma4_e/gguf/gemma4_e-f32.gguf" "$stage/oracle/hf/gemma4_e/gguf/"
        cp "$oracle/hf/gemma4_e/seqA.json" "$oracle/hf/gemma4_e/seqA.logits.f32" \
            "$stage/oracle/hf/gemma4_e/" ;;
    fwd-f32)
        bin tests/cuda/test_cfwd
        for f in llama qwen3 qwen3moe gpt-oss; do
            cp "$oracle/tiny/tiny-$f-F32.gguf" "$stage/oracle/tiny/"
        done ;;
    pipeline)
        bin nsctl/nsctl nsio/nsio nsplan/nsplan nsrouter/nsrouter nscompute/nscompute \
            nscompute/nscompute-cuda
        cp "$oracle/tiny/tiny-qwen3moe-Q4_K_M.gguf" "$oracle/tiny/tiny-llama-Q4_K_M.gguf" \
            "$oracle/tiny/tiny-qwen35moe-Q4_K_M.gguf" "$oracle/tiny/tiny-gemma4-Q4_K_M.gguf" \
            "$stage/oracle/tiny/" ;;
    s19)
        bin tests/cuda/test_cfwd tests/cuda/test_draft_cuda
        [ -f "$build/tests/forward/gemma-4-moe-tiny.gguf" ] ||
            ninja -C "$build" tests/forward/gemma-4-moe-tiny.gguf >/dev/null
        cp "$build/tests/forward/gemma-4-moe-tiny.gguf" "$stage/oracle/"
        cp "$oracle/models/stories260K.gguf" "$stage/oracle/models/"
        for f in llama-Q4_K_M llama-Q8_0 qwen3-Q4_K_M qwen3moe-Q4_K_M gpt-oss-MXFP4_MOE \
            qwen35-Q4_K_M gemma3-Q4_K_M gemma4-Q4_K_M; do
            cp "$oracle/tiny/tiny-$f.gguf" "$stage/oracle/tiny/"
        done
        for f in gemma3-Q4_K_M gemma4-Q4_K_M; do # device_check.sh checks them against these
            cp "$oracle/tiny/tiny-$f.seqA.json" "$oracle/tiny/tiny-$f.seqA.dequant.f32" \
                "$stage/oracle/tiny/"
        done
        mkdir -p "$stage/oracle/hf/qwen3_vl/gguf"
        cp "$oracle/hf/qwen3_vl/gguf/qwen3_vl-f32.gguf" \
            "$oracle/hf/qwen3_vl/gguf/mmproj-qwen3_vl-f32.gguf" "$stage/oracle/hf/qwen3_vl/gguf/"
        cp "$oracle/hf/qwen3_vl/seqA.json" "$oracle/hf/qwen3_vl/image.pixel_values.f32" \
            "$oracle/hf/qwen3_vl/mm.logits.f32" "$stage/oracle/hf/qwen3_vl/" ;;
    s20)
        bin tests/cuda/test_ctower tests/cuda/test_cfwd_rollback
        for d in qwen3_vl qwen3_5_cond; do
            mkdir -p "$stage/oracle/hf/$d/gguf"
            cp "$oracle/hf/$d/gguf/mmproj-$d-f32.gguf" "$stage/oracle/hf/$d/gguf/"
            cp "$oracle/hf/$d/image.pixel_values.f32" "$oracle/hf/$d"/vision.*.f32 \
                "$stage/oracle/hf/$d/"
        done
        for f in qwen35-F32 qwen35-Q4_K_M qwen35moe-Q4_K_M; do
            cp "$oracle/tiny/tiny-$f.gguf" "$stage/oracle/tiny/"
        done ;;
    *)
        echo "stage.sh: unknown part $part" >&2
        exit 2 ;;
    esac
done
strip --strip-debug "$stage"/bin/* # host debug info only; the device code stays
if [ -x ../shared/tools/device-bundle.sh ]; then
    ../shared/tools/device-bundle.sh "$stage/bin" "$stage/lib" >/dev/null
fi
mkdir -p "$stage/lib"
# the binaries carry CUDA fat binaries that gzip to a quarter; device_check.sh unpacks them
tar czf "$stage/bin.tgz" -C "$stage" bin lib
rm -rf "$stage/bin" "$stage/lib"
du -sh "$stage"
kib=$(du -sk "$stage" | cut -f1)
if [ "$kib" -gt $((56 * 1024)) ]; then
    echo "stage.sh: $stage is over 56 MiB: a device call carries 64 MiB with the working tree;" \
        "stage fewer parts per call, and build with -Dgpu_archs=90" >&2
    exit 1
fi
