#!/usr/bin/env bash
# The CPU closed loop: calibrate this machine (kernels with one BLAS thread, as each rank runs;
# collectives under mpirun for multi-rank layouts), then N times train with dtrain and simulate
# the same configuration; prints each run's measured and predicted step time, error, and the
# spread (with experts, the routing balance the simulation took from the run first). Run it on
# an otherwise idle machine.
#   bench/closed_loop_bench.sh [N] [BUILD] [LAYOUT...]   e.g. bench/closed_loop_bench.sh 5 build --tp 2
# (--cp multiplies the ranks like --tp, --pp and --dp; --ep is carved out of --dp and adds none)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
n=${1:-5}; bin=${2:-$root/build}/bin
shift $(( $# > 2 ? 2 : $# )) || true
layout=("$@")
ranks=1
for ((i = 0; i < ${#layout[@]}; i++)); do
  case "${layout[$i]}" in --tp|--pp|--dp|--cp) ranks=$((ranks * ${layout[$((i + 1))]}));; esac
done
cal=$(mktemp /tmp/dtcal_bench_XXXXXX.json)
# Kernels are timed as each rank runs them, one BLAS thread, on a core of their own: where the
# layout has more ranks than the machine has cores, the simulator time-shares the cores itself
# (platform node.compute_devices, sim/step/cost.h).
OPENBLAS_NUM_THREADS=1 "$bin/dtcal" kernels --device cpu --platform "$root/platforms/cpu-box.json" -o "$cal" 2>/dev/null
if [ "$ranks" -gt 1 ]; then
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe -np "$ranks" \
    "$bin/dtcal" collectives --quick --into "$cal" -o "$cal.coll" 2>/dev/null
  mv "$cal.coll" "$cal"
fi
for i in $(seq "$n"); do
  "$bin/dtcal" validate --steps 20 --platform "$root/platforms/cpu-box.json" --calibration "$cal" "${layout[@]}" \
    2>/dev/null | grep -E '^(moe_load_imbalance|step time):'
done | tee /dev/stderr | awk '{for (i = 1; i <= NF; i++) if ($i == "error") {e = $(i + 1); gsub(/[%+]/, "", e); e += 0; s += e; if (e < lo || n == 0) lo = e; if (e > hi || n == 0) hi = e; n++}}
  END {printf "closed loop over %d runs: mean error %+.1f%%, range %+.1f%% .. %+.1f%%\n", n, s / n, lo, hi}'
rm -f "$cal"
