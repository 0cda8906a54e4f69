#!/bin/bash
# fourteenth session, call 1 (H200): the GPU suite, the calibration and closed loops, llm.c,
# then #23's two PyTorch measurements (MoE layer host time; MPT-7B layers near an H100's capacity)
set -uo pipefail
cd "$(dirname "$0")/.."
T0=$(date +%s)
log() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
until_s() { local l=$(( $1 - ($(date +%s) - T0) )); [ $l -lt 5 ] && l=5; echo $l; }
R=$OUT/r; mkdir -p $R
echo "revision $(cat .gpu/REV)"
scripts/gpu_unbundle.sh .gpu/bundle.tar.xz >/dev/null || exit 1
. /opt/dtsim-rt/env.sh
nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap,clocks.max.sm,power.limit --format=csv | tee $R/device.txt
log "gpu suite"
GPU_TEST_JOBS=8 GPU_TEST_TIMEOUT=200 timeout -k 5 $(until_s 290) tests/gpu/run.sh build > $R/run.log 2>&1; echo "run.sh rc=$?"
cp build/gpu-run/ctest.log $R/ctest-gpu.log 2>/dev/null; cp build/gpu-run/bench.log $R/kernels-bench.log 2>/dev/null
grep -E "tests passed|\*\*\*|Failed|Timeout|Total Test" $R/ctest-gpu.log | head -20
log "calibrate"
timeout -k 3 $(until_s 400) tests/gpu/calibrate.sh build build/gpu-cal > $R/calibrate.log 2>&1; echo "calibrate rc=$?"
cp build/gpu-cal/* $R/ 2>/dev/null
grep -E "^step time|^profiled|error" $R/calibrate.log | head -12
sed -n '/== summary/,$p' $R/calibrate.log | tail -14
log "llm.c"
timeout -k 3 $(until_s 450) bench/llmc_compare.sh .gpu/train_gpt2cu build 16 30 > $R/llmc-compare.log 2>&1; echo "llmc rc=$?"
tail -6 $R/llmc-compare.log
log "moe layer"
PYTHONUNBUFFERED=1 LD_LIBRARY_PATH= timeout -k 3 $(until_s 475) python3 bench/torch_moe_layer.py > $R/torch-moe-layer.csv 2> $R/torch-moe-layer.err; echo "moe rc=$?"
PYTHONUNBUFFERED=1 LD_LIBRARY_PATH= timeout -k 3 $(until_s 495) python3 bench/torch_moe_layer.py --fp8 > $R/torch-moe-layer-fp8.csv 2>> $R/torch-moe-layer.err; echo "moe fp8 rc=$?"
cat $R/torch-moe-layer.csv $R/torch-moe-layer-fp8.csv; tail -2 $R/torch-moe-layer.err
log "memory pressure at an H100's capacity"
PYTHONUNBUFFERED=1 LD_LIBRARY_PATH= timeout -k 3 $(until_s 565) python3 bench/torch_memory_pressure.py --capacity-gib 79.2 --ballast-gib 0,6,10,12,14,16 --layers 32 --repeats 5 > $R/torch-memory-pressure-h100cap.csv 2> $R/torch-memory-pressure.err; echo "pressure rc=$?"
cat $R/torch-memory-pressure-h100cap.csv; tail -2 $R/torch-memory-pressure.err
(cd $OUT && tar czf results.tgz r && rm -rf r)
log "end"
