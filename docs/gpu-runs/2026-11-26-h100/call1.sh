#!/bin/bash
# ninth session, call 1 (first H100): calibration, closed loops, llm.c, GEMM sweep, then the GPU suite
set -uo pipefail
cd "$(dirname "$0")/.."
T0=$(date +%s)
log() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
scripts/gpu_unbundle.sh .gpu/bundle.tar.xz >/dev/null || exit 1
. /opt/dtsim-rt/env.sh
nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap,clocks.max.sm,power.limit --format=csv | tee $OUT/device.txt
log "calibrate"
timeout -k 3 110 tests/gpu/calibrate.sh build build/gpu-cal > $OUT/calibrate.log 2>&1; echo "calibrate rc=$?"
(cd build/gpu-cal && tar czf $OUT/gpu-cal.tgz . )
tail -25 $OUT/calibrate.log
log "llm.c"
timeout -k 3 60 bench/llmc_compare.sh .gpu/train_gpt2cu build 16 30 > $OUT/llmc-compare.log 2>&1; echo "llmc rc=$?"
tail -6 $OUT/llmc-compare.log
log "profile"
timeout -k 3 25 build/bin/dtrain --device cuda --precision bf16 --model small --micro-batch 8 --steps 4 --profile $OUT/profile-bf16-b8.json > $OUT/profile.log 2>&1; echo "profile rc=$?"
gzip -f $OUT/profile-bf16-b8.json 2>/dev/null
log "torch gemm"
PYTHONUNBUFFERED=1 LD_LIBRARY_PATH= timeout -k 3 75 python3 bench/torch_gemm.py --max-seconds 55 > $OUT/torch-gemm.csv 2> $OUT/torch-gemm.err; echo "torch_gemm rc=$? rows $(grep -vc '^#' $OUT/torch-gemm.csv)"
log "gpu suite"
left=$(( 430 - ($(date +%s) - T0) ))
GPU_TEST_JOBS=8 GPU_TEST_TIMEOUT=$(( left - 20 )) timeout -k 5 $left tests/gpu/run.sh build > $OUT/run.log 2>&1; echo "run.sh rc=$?"
cp build/gpu-run/ctest.log $OUT/ctest.log 2>/dev/null
grep -E "tests passed|\*\*\*|Failed|Timeout" $OUT/ctest.log | head -20
log "end"
