#!/usr/bin/env bash
# Wall time of a 16,384-GPU, 54-day Monte Carlo of 100 runs (plus the checkpoint-interval search).
# Usage: bench/faults_bench.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dtsim=${1:-$root/build}/bin/dtsim
start=$(date +%s.%N)
"$dtsim" faults "$root/scenarios/llama3-405b-54d-faults.json" --runs 100
end=$(date +%s.%N)
awk -v a="$start" -v b="$end" 'BEGIN {printf "wall time: %.2f s for 100 runs of 54 days on 16,384 GPUs (target < 30 s)\n", b - a}'
