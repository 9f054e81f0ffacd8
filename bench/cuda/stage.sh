#!/bin/bash
# stage.sh BUILD_DIR [STAGE_DIR] - gather what bench/cuda/device_check.sh needs on the GPU
# machine into one small folder (default build-gpu-stage, ignored by git through build*/):
# the CUDA test and benchmark binaries, the quantization goldens they read, and the non-system
# shared libraries the binaries link (shared/tools/device-bundle.sh). Builds nothing.
set -euo pipefail
build=${1:?usage: stage.sh BUILD_DIR [STAGE_DIR]}
stage=${2:-build-gpu-stage}
oracle=${NS_ORACLE_DIR:-../shared/oracle}
rm -rf "$stage"
mkdir -p "$stage/bin" "$stage/oracle"
for t in test_range test_cuda_dequant test_cuda_gemv test_cuda_ops test_cuda_attn test_cuda_vram; do
    cp "$build/tests/cuda/$t" "$stage/bin/"
done
cp "$build/bench/cuda/bench_cuda_gemv" "$stage/bin/"
strip --strip-debug "$stage"/bin/* # host debug info only; the device code stays
cp -r "$oracle/quant" "$stage/oracle/"
if [ -x ../shared/tools/device-bundle.sh ]; then
    ../shared/tools/device-bundle.sh "$stage/bin" "$stage/lib" >/dev/null
fi
mkdir -p "$stage/lib"
du -sh "$stage"
kib=$(du -sk "$stage" | cut -f1)
if [ "$kib" -gt $((56 * 1024)) ]; then
    echo "stage.sh: $stage is over 56 MiB: a device call carries 64 MiB with the working tree;" \
        "build with -Dgpu_archs=90" >&2
    exit 1
fi
