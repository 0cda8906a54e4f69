#!/usr/bin/env bash
# dtsim faults says what its figures would otherwise hide: no MTBF means failures are not
# modelled; no free node means every failure waits a repair, with the spares that would restore
# the goodput (the 99.9% point of the Poisson count of nodes away, computed here again); a token
# budget replaces the horizon, and says so; an asynchronous checkpoint's optimum is explained.
#   told_plainly.sh DTSIM REPO_ROOT
set -u
dtsim=$1 root=$2
s=$root/scenarios/llama3-405b-54d-faults.json
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
"$dtsim" faults "$root/scenarios/gpt3-175b-1024-a100.json" --runs 3 >"$work/out" 2>"$work/err" || fail=1
grep -q 'failures are not modelled' "$work/err" && grep -q 'NOTE' "$work/out" || { echo "no MTBF:"; cat "$work/err"; fail=1; }
# the faults scenario on exactly its nodes (16,384 GPUs / 8) with no spares
"$dtsim" faults "$s" --runs 10 --set platform.network.nodes=2048 --set faults.spare_nodes=0 >"$work/out" 2>"$work/err" || fail=1
k=$(python3 - "$s" <<'PY'
import json, math, sys
f = json.load(open(sys.argv[1]))["faults"]
gpus, nodes = 16384, 2048
rate = gpus / f["gpu_mtbf_hours"] + (nodes / f["node_mtbf_hours"] if f.get("node_mtbf_hours") else 0)
mu = rate * f.get("repair_hours", 24)
k, term = 0, math.exp(-mu); cdf = term
while cdf < 0.999:
    k += 1; term *= mu / k; cdf += term
print(k)
PY
)
if ! grep -q "WARNING.*no spares.*$k spare nodes" "$work/out" || ! grep -q "$k spares (faults.spare_nodes) would restore it" "$work/err"; then
  echo "no spares (expected $k):"; cat "$work/out" "$work/err"; fail=1
fi
python3 - "$work/out" <<'PY' || fail=1
import re, sys
t = open(sys.argv[1]).read()
without = float(re.search(r"goodput\s+([\d.]+)%", t).group(1))
with_ = float(re.search(r"goodput ([\d.]+)% with them", t).group(1))
print(f"goodput without spares {without}%, with the suggested ones {with_}%")
sys.exit(0 if with_ > 10 * without else 1)
PY
"$dtsim" faults "$s" --runs 3 --set training.tokens=1e12 >"$work/out" 2>&1 || fail=1
grep -q 'horizon_days 54 not used' "$work/out" || { echo "horizon:"; cat "$work/out"; fail=1; }
"$dtsim" faults "$s" --runs 3 >"$work/out" 2>&1 || fail=1
grep -q 'as often as the storage finishes writing one' "$work/out" && grep -q 'at 200 GB/s' "$work/out" ||
  { echo "checkpoint interval:"; cat "$work/out"; fail=1; }
[ "$fail" -eq 0 ] && echo "faults: unmodelled failures, starved repairs (spares $k), horizon and checkpoint optimum told"
exit "$fail"
