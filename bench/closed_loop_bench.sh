#!/usr/bin/env bash
# The CPU closed loop: calibrate this machine's kernels, then N times train the tiny model and
# simulate the same configuration; prints each run's measured and predicted step time, error,
# and the spread. Run it on an otherwise idle machine.  Usage: bench/closed_loop_bench.sh [N] [BUILD]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
n=${1:-5}; bin=${2:-$root/build}/bin
cal=$(mktemp /tmp/dtcal_bench_XXXXXX.json)
"$bin/dtcal" kernels --device cpu --platform "$root/platforms/cpu-box.json" -o "$cal" 2>/dev/null
for i in $(seq "$n"); do
  "$bin/dtcal" validate --steps 20 --platform "$root/platforms/cpu-box.json" --calibration "$cal" 2>/dev/null | tail -1
done | tee /dev/stderr | awk '{for (i = 1; i <= NF; i++) if ($i == "error") {e = $(i + 1); gsub(/[%+]/, "", e); s += e; if (e < lo || NR == 1) lo = e; if (e > hi || NR == 1) hi = e; n++}}
  END {printf "closed loop over %d runs: mean error %+.1f%%, range %+.1f%% .. %+.1f%%\n", n, s / n, lo, hi}'
rm -f "$cal"
