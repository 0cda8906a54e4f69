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
# A token budget no run can reach: 16,384 GPUs of 1,000 h MTBF fail every 220 s, while a checkpoint
# is written every 1,800 s. Daly's expected wall time per interval tau of work, with C the write
# and R detection + restart + restore, is (M + R)(e^((tau + C)/M) - 1): the goodput is far below
# 1/10, so no run finishes within 10 x the failure-free time. Each run says so, its days to train
# are null (not the 1e10 s a run used to stop at, printed as 115,741 days), and it ends there.
"$dtsim" faults "$s" --runs 3 --set faults.gpu_mtbf_hours=1000 --set training.tokens=1e13 --json j.json >out 2>err ||
  { echo "unreachable tokens: exit $?"; cat err; fail=1; }
python3 - j.json <<'PY' || fail=1
import json, math, sys
d = json.load(open(sys.argv[1]))
M = 1000 * 3600 / 16384; tau, C, R = 1800, 28.4, 10 + 140 + 14.2
daly = tau / ((M + R) * (math.exp((tau + C) / M) - 1))
ok = daly < 0.1 and d["unfinished_runs"] == 3 and all(d["days_to_train"][k] is None for k in ("mean", "p5", "p50", "p95"))
print(f"Daly goodput {daly:.2e}; unfinished {d['unfinished_runs']} of 3; days_to_train {d['days_to_train']}")
sys.exit(0 if ok else 1)
PY
grep -q 'WARNING .*3 of 3 runs did not train' out && grep -Eq 'days to train +>[0-9]+\.[0-9]' out ||
  { echo "unreachable tokens not told:"; cat out; fail=1; }
# A checkpoint interval under one step is a checkpoint every step (they are taken between steps):
# without failures, sync, the goodput is step / (step + write), not interval / (interval + write).
"$dtsim" faults "$s" --runs 2 --set faults.gpu_mtbf_hours=0 --set faults.checkpoint_write='"sync"' \
  --set faults.checkpoint_interval_s=1 --json sub.json >out 2>err || fail=1
# ... and with no failures modelled the goodput is not called 100% when checkpoints cost time
! grep -q '100%' out err || { echo "no MTBF: 100% goodput claimed beside the checkpoints' cost:"; cat out err; fail=1; }
python3 - sub.json <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
step, write = d["step_time_s"], d["checkpoint_block_s"]
want, got = step / (step + write), d["goodput"]["mean"]
print(f"interval under a step: goodput {got:.5f}, step / (step + write) {want:.5f}")
sys.exit(0 if abs(got - want) < 1e-9 else 1)
PY
grep -q 'a checkpoint every step' out || { echo "interval under a step not told:"; cat out; fail=1; }
[ "$fail" -eq 0 ] && echo "faults: edges ok"
exit "$fail"
