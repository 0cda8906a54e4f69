#!/usr/bin/env bash
# Layouts per second of the analytic planner on GPT-3 175B / 1,024 A100 (best of 3).
# Usage: bench/plan_bench.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dtsim=${1:-$root/build}/bin/dtsim
for i in 1 2 3; do
  "$dtsim" plan "$root/scenarios/gpt3-175b-1024-a100.json" --top 1 | head -1
done | awk '{for (i = 1; i <= NF; i++) if ($i == "layouts/s)") r = $(i - 1); gsub(/\(/, "", r); if (r + 0 > best) best = r + 0; line = $0}
            END {print line; printf "best of 3: %.0f layouts/s (target >= 1000)\n", best}'
