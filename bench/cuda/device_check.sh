#!/bin/bash
# device_check.sh [STAGE_DIR] - run on the GPU machine from the repository root: the CUDA
# tests and the GEMV benchmark from a staged folder (bench/cuda/stage.sh, default
# build-gpu-stage), one report to $OUT/cuda-report.txt (./cuda-report.txt without $OUT).
# Builds nothing. Every step has its own time limit so one hang cannot eat the lease.
set -u
stage=${1:-build-gpu-stage}
out=${OUT:-.}
report=$out/cuda-report.txt
export LD_LIBRARY_PATH=$PWD/$stage/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export NS_ORACLE_DIR=$PWD/$stage/oracle
export CI=true # a missing oracle fails instead of skipping
fails=0
step() { # step NAME SECONDS CMD...
    local name=$1 limit=$2 t0 rc
    shift 2
    t0=$(date +%s%N)
    echo "=== $name"
    timeout "$limit" "$@"
    rc=$?
    echo "=== $name: rc=$rc ($(( ($(date +%s%N) - t0) / 1000000 )) ms)"
    echo
    [ "$rc" = 0 ] || fails=$((fails + 1))
}
{
    echo "neurostream CUDA device check, $(date -u)"
    git log -1 --format='commit %H %s' 2>/dev/null
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv 2>&1
    echo
    for t in test_range test_cuda_vram test_cuda_dequant test_cuda_gemv test_cuda_ops test_cuda_attn; do
        step "$t" 120 "$stage/bin/$t"
    done
    step bench_cuda_gemv 240 "$stage/bin/bench_cuda_gemv"
    if command -v cuobjdump >/dev/null; then
        echo "=== SASS opcode histogram of k_gemv<Q4_K> (sm_90)"
        cuobjdump --dump-sass --gpu-architecture sm_90 "$stage/bin/bench_cuda_gemv" 2>/dev/null |
            awk '/Function : .*k_gemvILi12E/{on=1; next} /Function :/{on=0} on' |
            grep -oE '^ +/\*[0-9a-f]+\*/ +[A-Z0-9_.]+' | awk '{print $2}' | sort | uniq -c |
            sort -rn | head -25
    fi
    echo "=== failures: $fails"
} 2>&1 | tee "$report"
exit 0
