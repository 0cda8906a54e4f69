#!/bin/bash
# tenth session, call 1 (H100): calibration with every attention octave, the two-run closed loops, the GPU suite
set -uo pipefail
cd "$(dirname "$0")/.."
T0=$(date +%s)
log() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
scripts/gpu_unbundle.sh .gpu/bundle.tar.xz >/dev/null || exit 1
. /opt/dtsim-rt/env.sh
nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap,clocks.max.sm,power.limit --format=csv | tee $OUT/device.txt
log "calibrate"
timeout -k 3 150 tests/gpu/calibrate.sh build build/gpu-cal > $OUT/calibrate.log 2>&1; echo "calibrate rc=$?"
(cd build/gpu-cal && tar czf $OUT/gpu-cal.tgz . )
grep -E "attention|^step time|^profiled" $OUT/calibrate.log | head -30
tail -12 $OUT/calibrate.log
log "gpu suite"
left=$(( 370 - ($(date +%s) - T0) ))
GPU_TEST_JOBS=8 GPU_TEST_TIMEOUT=$(( left - 20 )) timeout -k 5 $left tests/gpu/run.sh build > $OUT/run.log 2>&1; echo "run.sh rc=$?"
cp build/gpu-run/ctest.log $OUT/ctest.log 2>/dev/null
grep -E "tests passed|\*\*\*|Failed|Timeout" $OUT/ctest.log | head -20
log "end"
