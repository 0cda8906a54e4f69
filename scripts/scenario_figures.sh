#!/usr/bin/env bash
# Writes what `dtsim run` prints for every shipped scenario (scenarios/*.json), at analytic and
# flow fidelity, summary and --json document, into OUT_DIR, one file per scenario and fidelity.
# Two such folders made before and after a change that must not move any figure compare with
# `diff -r` (the JSON's wall-clock fields, flow_wall_s and the like, are dropped first).
#   scripts/scenario_figures.sh OUT_DIR [DTSIM]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/scenario_figures.sh OUT_DIR [DTSIM]}
dtsim=${2:-build/bin/dtsim}
[ -x "$dtsim" ] || { echo "scenario_figures: $dtsim is not built" >&2; exit 2; }
mkdir -p "$out"
for f in scenarios/*.json; do
  name=$(basename "$f" .json)
  for fid in analytic flow; do
    # wall-clock and memory of the simulator itself change from run to run: not figures
    "$dtsim" run "$f" --fidelity "$fid" --json - 2>/dev/null |
      python3 -c 'import json,sys
d=json.load(sys.stdin)
def drop(o):
    if isinstance(o,dict):
        return {k:drop(v) for k,v in o.items() if not (k.endswith("wall_s") or "rss" in k or k.endswith("_load_s"))}
    if isinstance(o,list): return [drop(v) for v in o]
    return o
json.dump(drop(d),sys.stdout,indent=1,sort_keys=True)' >"$out/$name.$fid.json" ||
      echo "scenario_figures: $name at $fid fidelity failed" >&2
  done
done
echo "scenario_figures: $(ls "$out" | wc -l) files in $out"
