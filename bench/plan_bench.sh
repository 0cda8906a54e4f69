#!/usr/bin/env bash
# Layouts per second of the analytic planner on GPT-3 175B / 1,024 A100 (best of 3 runs each):
#  - as `dtsim plan --top 1` runs by default: the fitting layouts taken in the order of a lower
#    bound on their step, simulated until the best is known, the rest bounded (slower than it);
#  - with --exhaustive: every fitting layout simulated, each a full analytic step.
# For each: candidates/s (every candidate counts: rule checks, memory estimates, bounds and
# simulations) and fitting layouts/s (the JSON's fitting / wall_s, whose target is 10,000 a
# second; a bounded layout counts as known slower, not as simulated), and the simulated ones/s.
# Usage: bench/plan_bench.sh [BUILD_DIR]   (default: build)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dtsim=${1:-$root/build}/bin/dtsim
[ -x "$dtsim" ] || { echo "plan_bench: $dtsim not found (build first, or give BUILD_DIR)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
for mode in bounded exhaustive; do
  flag=; [ "$mode" = exhaustive ] && flag=--exhaustive
  for i in 1 2 3; do
    "$dtsim" plan "$root/scenarios/gpt3-175b-1024-a100.json" --top 1 $flag --json "$tmp/$mode$i.json" >/dev/null 2>&1
  done
  python3 - "$mode" "$tmp"/$mode?.json <<'PY'
import json, sys
runs = [json.load(open(p)) for p in sys.argv[2:]]
best = min(runs, key=lambda d: d["wall_s"])
w = best["wall_s"]
print("%-10s %d candidates, %d fitting: %d simulated, %d bounded, in %.3f s (best of %d): %.0f candidates/s, "
      "%.0f fitting/s (target 10,000: %.2f of it), %.0f simulated/s"
      % (sys.argv[1], best["enumerated"], best["fitting"], best["simulated"], best["bounded"], w, len(runs),
         best["enumerated"] / w, best["fitting"] / w, best["fitting"] / w / 10000, best["simulated"] / w))
PY
done
