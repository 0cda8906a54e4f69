#!/bin/bash
# tenth session, call 2 (H100): attention by heads and precision, the closed loops; a PyTorch layer; llm.c
set -uo pipefail
cd "$(dirname "$0")/.."
T0=$(date +%s)
log() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
scripts/gpu_unbundle.sh .gpu/bundle.tar.xz >/dev/null || exit 1
. /opt/dtsim-rt/env.sh
log "calibrate"
timeout -k 3 170 tests/gpu/calibrate.sh build build/gpu-cal > $OUT/calibrate.log 2>&1; echo "calibrate rc=$?"
(cd build/gpu-cal && tar czf $OUT/gpu-cal.tgz . )
grep -E "T=1024|^step time|^profiled" $OUT/calibrate.log | head -30
tail -8 $OUT/calibrate.log
log "torch layer"
PYTHONUNBUFFERED=1 LD_LIBRARY_PATH= timeout -k 3 80 python3 bench/torch_layer.py > $OUT/torch-layer.csv 2> $OUT/torch-layer.err; echo "torch_layer rc=$?"
cat $OUT/torch-layer.csv; tail -3 $OUT/torch-layer.err
log "llm.c"
timeout -k 3 60 bench/llmc_compare.sh .gpu/train_gpt2cu build 16 30 > $OUT/llmc-compare.log 2>&1; echo "llmc rc=$?"
tail -5 $OUT/llmc-compare.log
log "end"
