#!/bin/bash
# fourteenth session, call 2 (H200): the engine rounding in its producing kernels and the
# one-launch gradient norm; attention calibrated at 12 heads: the touched GPU tests, the
# closed loops, llm.c, then the multi-rank suites the change runs through
set -uo pipefail
cd "$(dirname "$0")/.."
T0=$(date +%s)
log() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
until_s() { local l=$(( $1 - ($(date +%s) - T0) )); [ $l -lt 5 ] && l=5; echo $l; }
R=$OUT/r; mkdir -p $R
echo "revision $(cat .gpu/REV)"
scripts/gpu_unbundle.sh .gpu/bundle.tar.xz >/dev/null || exit 1
. /opt/dtsim-rt/env.sh
log "touched kernels"
timeout -k 3 $(until_s 40) ctest --test-dir build -j4 --timeout 30 -R '^(gpu_elementwise|gpu_precision|gpu_memory|klab_gelu_cuda|klab_residual_cuda|klab_swiglu_cuda|gpu_model_matches_cpu|gpu_offload_matches_device)$' > $R/ctest-call2-kernels.log 2>&1; echo "ctest rc=$?"
grep -E "Test +#|tests passed" $R/ctest-call2-kernels.log
log "calibrate"
timeout -k 3 $(until_s 150) tests/gpu/calibrate.sh build build/gpu-cal > $R/calibrate.log 2>&1; echo "calibrate rc=$?"
cp build/gpu-cal/* $R/ 2>/dev/null
grep -E "T=1024  head dim 64 " $R/calibrate.log | head -8
grep -E "^(attention|gelu|residual|grad_norm|optimizer)|^step time" $R/validate-bf16.log $R/validate.log
log "llm.c"
timeout -k 3 $(until_s 175) bench/llmc_compare.sh .gpu/train_gpt2cu build 16 30 > $R/llmc-compare.log 2>&1; echo "llmc rc=$?"
tail -5 $R/llmc-compare.log
log "multi-rank"
timeout -k 3 $(until_s 285) ctest --test-dir build -j3 --timeout 100 -R '^(gpu_data_parallel|gpu_recompute|gpu_model_parallel_llama|gpu_model_parallel_moe)$' > $R/ctest-call2-ranks.log 2>&1; echo "ctest rc=$?"
grep -E "Test +#|tests passed" $R/ctest-call2-ranks.log
(cd $OUT && tar czf results.tgz r && rm -rf r)
log "end"
