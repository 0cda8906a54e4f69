#!/usr/bin/env bash
# dtsim faults at the edges of its input: a scenario name is text, never code, in the plot; a
# --plot folder gnuplot cannot take is refused before the runs.
#   edges.sh DTSIM REPO_ROOT
set -u
dtsim=$1 root=$2
s=$root/scenarios/llama3-405b-54d-faults.json
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
cd "$work" || exit 1
# --plot: the name's quotes and shell words reach the title as they are, and run nothing
if command -v gnuplot >/dev/null; then
  "$dtsim" faults "$s" --runs 2 --set 'name="x\"; touch PWNED; echo \" it'"'"'s"' --plot p >/dev/null 2>err || {
    echo "plot with a quoted name failed:"; cat err; fail=1; }
  [ ! -e PWNED ] || { echo "the scenario name ran as a shell command"; fail=1; }
  grep -q "it's: goodput vs checkpoint interval" p/goodput_vs_interval.svg 2>/dev/null ||
    { echo "the plot's title is not the scenario's name"; fail=1; }
fi
"$dtsim" faults "$s" --runs 2 --plot "q'dir" >out 2>err; rc=$?
[ "$rc" -eq 2 ] && grep -q "contains a quote" err && ! grep -q "runs and the checkpoint" err ||
  { echo "--plot with a quote: exit $rc"; cat err; fail=1; }
[ "$fail" -eq 0 ] && echo "faults: edges ok"
exit "$fail"
