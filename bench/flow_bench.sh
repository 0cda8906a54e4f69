#!/usr/bin/env bash
# Flow fidelity at scale: wall time, flows, flows per second and peak memory of one step of
# GPT-3 175B on 1,024 A100 and Llama-3 405B on 16,384 H100 (targets: < 10 s; < 20 s and < 4 GiB).
# Usage: bench/flow_bench.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dtsim=${1:-$root/build}/bin/dtsim
printf "%-24s %8s %10s %10s %12s %10s\n" scenario GPUs "wall s" flows "flows/s" "peak MiB"
for sc in gpt3-175b-1024-a100 llama3-405b-16k-h100; do
  out=$( { /usr/bin/time -f "TIME %e %M" "$dtsim" run "$root/scenarios/$sc.json" --fidelity flow; } 2>&1 )
  gpus=$(echo "$out" | awk '/on [0-9]+ x/ {for (i = 1; i <= NF; i++) if ($i == "on") print $(i + 1)}' | head -1)
  flows=$(echo "$out" | sed -n 's/.*SimGrid: \([0-9]*\) flows.*/\1/p')
  read -r wall rss < <(echo "$out" | awk '/^TIME/ {print $2, $3}')
  awk -v s="$sc" -v g="$gpus" -v w="$wall" -v f="$flows" -v r="$rss" \
      'BEGIN {printf "%-24s %8s %10.2f %10d %12.0f %10.0f\n", s, g, w, f, f / w, r / 1024}'
done
