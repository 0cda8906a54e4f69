#!/usr/bin/env bash
# Gantt of one step from a `dtsim run --trace` file: plots/timeline.sh TRACE.json OUT.png [STAGES]
# (STAGES: how many pipeline stages to show, default 8). Needs gnuplot; parses the trace with awk.
set -euo pipefail
trace=$1; out=$2; stages=${3:-8}
here=$(cd "$(dirname "$0")" && pwd)
data=$(mktemp)
trap 'rm -f "$data"' EXIT
# one event per line: pull name, cat, ts, dur, pid, tid
tr '{' '\n' < "$trace" | awk -v max="$stages" -F, '
  /"ph":"X"/ {
    cat = ""; ts = 0; dur = 0; pid = 0; tid = 0
    for (i = 1; i <= NF; i++) {
      split($i, kv, ":"); k = kv[1]; v = kv[2]; gsub(/[" ]/, "", k); gsub(/["} ]/, "", v)
      if (k == "cat") cat = v; else if (k == "ts") ts = v; else if (k == "dur") dur = v
      else if (k == "pid") pid = v; else if (k == "tid") tid = v
    }
    if (pid >= max) next
    kind = cat == "compute" ? 0 : cat == "tp" ? 1 : cat == "pp" ? 2 : cat == "dp" ? 3 : cat == "zero" ? 4 : 5
    printf "%d %d %.6f %.6f %d\n", pid, tid, ts / 1000, (ts + dur) / 1000, kind
  }' > "$data"
fmt=png; case "$out" in *.svg) fmt=svg;; esac
shown=$(awk -v max="$stages" 'BEGIN { n = 0 } { if ($1 + 1 > n) n = $1 + 1 } END { print (n < max ? n : max) }' "$data")
gnuplot -e "datafile='$data'; out='$out'; fmt='$fmt'; plottitle='$(basename "$trace" .json)'; stages=${shown:-1}" \
  "$here/timeline.gp"
echo "timeline: $out"
