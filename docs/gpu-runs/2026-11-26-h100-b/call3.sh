#!/bin/bash
# tenth session, call 3 (H100): PyTorch near the memory limit; PyTorch's AdamW
set -uo pipefail
cd "$(dirname "$0")/.."
T0=$(date +%s)
log() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
log "memory pressure"
PYTHONUNBUFFERED=1 LD_LIBRARY_PATH= timeout -k 3 110 python3 bench/torch_memory_pressure.py > $OUT/torch-memory-pressure.csv 2> $OUT/torch-memory-pressure.err; echo "rc=$?"
cat $OUT/torch-memory-pressure.csv; grep -v Warning $OUT/torch-memory-pressure.err | tail -3
log "adamw"
PYTHONUNBUFFERED=1 LD_LIBRARY_PATH= timeout -k 3 60 python3 bench/torch_optimizer.py > $OUT/torch-adamw.csv 2> $OUT/torch-adamw.err; echo "rc=$?"
cat $OUT/torch-adamw.csv; tail -3 $OUT/torch-adamw.err
log "end"
