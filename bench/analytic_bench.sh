#!/usr/bin/env bash
# Speed of the analytic replay: wall time of `dtsim run` on the default scenario (GPT-3 175B on
# 1,024 A100) and on Llama-3 405B on 16,384 H100, best of 5, and tasks per second.
# Usage: bench/analytic_bench.sh [BUILD_DIR]   (default: build)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dtsim=${1:-$root/build}/bin/dtsim
[ -x "$dtsim" ] || { echo "no $dtsim: build first" >&2; exit 1; }
printf "%-26s %8s %14s %14s %12s\n" scenario tasks "simulate s" "process s" "tasks/s"
for sc in gpt3-175b-1024-a100 llama3-405b-16k-h100; do
  f=$root/scenarios/$sc.json
  [ -f "$f" ] || continue
  best=1e9; bestproc=1e9; tasks=0
  for i in 1 2 3 4 5; do
    t0=$(date +%s.%N)
    out=$("$dtsim" run "$f" --json - 2>/tmp/dtsim_bench_summary.$$)
    t1=$(date +%s.%N)
    w=$(printf '%s\n' "$out" | awk -F'[:,]' '/"wall_s"/ {gsub(/ /,"",$2); print $2}')
    tasks=$(awk '/simulated/ {print $2}' /tmp/dtsim_bench_summary.$$)
    best=$(awk -v a="$best" -v b="$w" 'BEGIN {print (b < a) ? b : a}')
    bestproc=$(awk -v a="$bestproc" -v b="$t0" -v c="$t1" 'BEGIN {d = c - b; print (d < a) ? d : a}')
  done
  rm -f /tmp/dtsim_bench_summary.$$
  awk -v s="$sc" -v n="$tasks" -v w="$best" -v p="$bestproc" \
      'BEGIN {printf "%-26s %8d %14.5f %14.4f %12.0f\n", s, n, w, p, n / w}'
done
echo "simulate s: the replay's own wall time (wall_s); process s: the whole dtsim process, JSON loading included"
