# device_step.sh - sourced by device_check.sh and device_pipeline.sh.
#   step NAME SECONDS CMD...   runs CMD under a time limit between two lines marked with
#                              $STEP_MARK (default ===), counts a non-zero exit in $fails
fails=0
step() {
    local name=$1 limit=$2 t0 rc
    shift 2
    t0=$(date +%s%N)
    echo "${STEP_MARK:-===} $name"
    timeout "$limit" "$@"
    rc=$?
    echo "${STEP_MARK:-===} $name: rc=$rc ($(( ($(date +%s%N) - t0) / 1000000 )) ms)"
    [ "${STEP_MARK:-===}" = "===" ] && echo
    [ "$rc" = 0 ] || fails=$((fails + 1))
}
