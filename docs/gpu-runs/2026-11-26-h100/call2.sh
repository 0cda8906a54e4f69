#!/bin/bash
# ninth session, call 2 (H100): the gradient norm in one pass and the profiler without a wait per op
set -uo pipefail
cd "$(dirname "$0")/.."
T0=$(date +%s)
log() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
scripts/gpu_unbundle.sh .gpu/bundle.tar.xz >/dev/null || exit 1
. /opt/dtsim-rt/env.sh
cal=calibrate/data/h100-measured.json   # call 1's calibration of this kind of GPU
for p in fp32 bf16; do
  log "closed loop $p"
  timeout -k 3 40 build/bin/dtcal validate --device cuda --precision $p --model small --steps 20 --platform platforms/dgx-h100-node.json \
    --calibration $cal --json $OUT/closed-loop-small-$p.json > $OUT/validate-$p.log 2>&1; echo "validate $p rc=$?"
  grep -E "^(profiled ops|step time)" $OUT/validate-$p.log
done
log "profile on/off"
for prof in 0 1; do
  extra=(); [ $prof = 1 ] && extra=(--profile /tmp/prof.json)
  timeout -k 3 30 build/bin/dtrain --device cuda --precision bf16 --model small --micro-batch 8 --steps 12 --log-json /tmp/log$prof.jsonl "${extra[@]}" > /dev/null 2>&1
  python3 -c "import json; t=sorted(d['step_time_s'] for d in map(json.loads, open('/tmp/log$prof.jsonl')) if d.get('step',0)>1 and 'step_time_s' in d); print('profile=$prof median step', round(t[len(t)//2]*1e3,2),'ms of', len(t))"
done | tee $OUT/profile-on-off.log
log "llm.c"
timeout -k 3 60 bench/llmc_compare.sh .gpu/train_gpt2cu build 16 30 > $OUT/llmc-compare.log 2>&1; echo "llmc rc=$?"
tail -5 $OUT/llmc-compare.log
log "gpu tests"
timeout -k 5 90 ctest --test-dir build -j8 --timeout 85 --output-on-failure -R '^(klab_reductions_cuda|gpu_precision|gpu_model_matches_cpu|gpu_offload_matches_device|gpu_adamw|gpu_data_parallel|gpu_recompute|gpu_model_parallel_moe_ep|gpu_model_parallel_llama)$' > $OUT/ctest.log 2>&1; echo "ctest rc=$?"
grep -E "Test +#|tests passed" $OUT/ctest.log
log "end"
