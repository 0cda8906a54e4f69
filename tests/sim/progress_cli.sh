#!/usr/bin/env bash
# Progress of long commands on stderr (sim/progress.h), end to end, on runs long enough to print
# some: a line every 0.2 s here ($DTSIM_PROGRESS_INTERVAL_S; the default 2 s made the test depend
# on the machine: these runs take 4 to 6 s on the 2-core CI machine, 1.6 to 2.4 s on a faster one,
# which printed no line), and a bad interval refused before the work: `dtsim async`,
# `dtsim faults` and `dtsim run --fidelity flow` with --progress print progress lines on stderr,
# without it nothing (stderr is a file here, not a terminal); and what they print on stdout (the
# summary, --json -) is byte for byte the same with --progress as without (but for the lines that
# name their own wall time). `dtsim plan` takes the same flags.
#   progress_cli.sh DTSIM REPO_ROOT
set -u
dtsim=$1 root=$2
ps=$root/scenarios/gpt3-2.7b-32-a100-ps.json faults=$root/scenarios/llama3-405b-54d-faults.json
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
export DTSIM_PROGRESS_INTERVAL_S=0.2

# a value that is not a number of seconds in range is refused (exit 2) before any work, naming it
for bad in abc 0 -1 1e9 nan ''; do
  DTSIM_PROGRESS_INTERVAL_S=$bad "$dtsim" async "$root/scenarios/gpt3-2.7b-32-a100-ps.json" --steps 3 \
    >"$work/bad.out" 2>"$work/bad.err"
  rc=$?
  [ $rc -eq 2 ] && grep -q 'DTSIM_PROGRESS_INTERVAL_S' "$work/bad.err" && [ ! -s "$work/bad.out" ] ||
    { echo "DTSIM_PROGRESS_INTERVAL_S='$bad': exit $rc, not refused:"; cat "$work/bad.err"; fail=1; }
done

# check NAME PATTERN: the run with --progress printed a line matching PATTERN, the one without
# printed none, and their stdout is the same
check() {
  local name=$1 pattern=$2
  if ! grep -Eq "$pattern" "$work/$name.1.err"; then
    echo "$name --progress: no progress line on stderr:"; cat "$work/$name.1.err"; fail=1
  fi
  if grep -q ' elapsed' "$work/$name.0.err"; then
    echo "$name without --progress, stderr a file: progress lines:"; cat "$work/$name.0.err"; fail=1
  fi
  cmp "$work/$name.0" "$work/$name.1" || { echo "$name: stdout differs with --progress"; fail=1; }
}

"$dtsim" async "$ps" --steps 3000 --progress >"$work/async.1" 2>"$work/async.1.err" &&
  "$dtsim" async "$ps" --steps 3000 >"$work/async.0" 2>"$work/async.0.err" || { echo "async failed"; fail=1; }
check async '^dtsim async: step [0-9]+ of 3000 \([0-9]+%\), [0-9]+ s elapsed, about [0-9.]+ (s|min|h) left$'

"$dtsim" faults "$faults" --runs 60000 --json - --progress >"$work/faults.1" 2>"$work/faults.1.err" &&
  "$dtsim" faults "$faults" --runs 60000 --json - >"$work/faults.0" 2>"$work/faults.0.err" || { echo "faults failed"; fail=1; }
check faults '^dtsim faults: timeline [0-9]+ of 62800 \([0-9]+%\), [0-9]+ s elapsed'

# dtsim plan: a search too short for a progress line here (tests/plan counts the candidates a
# meter is told); with --progress its ranking on stdout is the same (the first line names its
# wall time), and --quiet leaves stderr empty
plan=(plan "$ps" --top 3)
"$dtsim" "${plan[@]}" --progress >"$work/plan.1" 2>"$work/plan.1.err" &&
  "$dtsim" "${plan[@]}" >"$work/plan.0" 2>"$work/plan.0.err" &&
  "$dtsim" "${plan[@]}" --quiet >/dev/null 2>"$work/plan.q.err" || { echo "plan failed"; fail=1; }
[ "$(sed 1d "$work/plan.0")" = "$(sed 1d "$work/plan.1")" ] && [ -n "$(sed 1d "$work/plan.0")" ] ||
  { echo "plan: the ranking differs with --progress"; fail=1; }
[ ! -s "$work/plan.q.err" ] || { echo "plan --quiet wrote to stderr:"; cat "$work/plan.q.err"; fail=1; }
! grep -q ' elapsed' "$work/plan.0.err" || { echo "plan without --progress: progress lines:"; cat "$work/plan.0.err"; fail=1; }

# dtsim run at flow fidelity: the replay's tasks, from the SimGrid child. Static routing keeps
# every replica simulated (docs/flow.md, folded replicas), so the replay of Llama 3 405B on 24,576
# GPUs takes several seconds; its summary names its own wall time, so only the step is compared.
export DTSIM_RAILZONE_SO=${DTSIM_RAILZONE_SO:-$(dirname "$dtsim")/../lib/libdtsim_railzone.so}
flow=(run "$root/scenarios/llama3-405b-16k-h100.json" --fidelity flow --set parallel.data_parallel_size=192
      --set training.global_batch_size=3072 --set platform.network.nodes=3072
      --set platform.network.adaptive_routing=false)
"$dtsim" "${flow[@]}" --progress >"$work/run.1" 2>"$work/run.1.err" &&
  "$dtsim" "${flow[@]}" >"$work/run.0" 2>"$work/run.0.err" || { echo "run --fidelity flow failed"; fail=1; }
grep -Eq '^dtsim run \(flow\): task [0-9]+ of [0-9]+ \([0-9]+%\), [0-9]+ s elapsed' "$work/run.1.err" ||
  { echo "run --progress: no progress line on stderr:"; cat "$work/run.1.err"; fail=1; }
! grep -q ' elapsed' "$work/run.0.err" || { echo "run without --progress: progress lines:"; cat "$work/run.0.err"; fail=1; }
[ "$(grep 'step time' "$work/run.0")" = "$(grep 'step time' "$work/run.1")" ] && grep -q 'step time' "$work/run.0" ||
  { echo "run: the step differs with --progress"; fail=1; }

for cmd in async faults plan run; do
  "$dtsim" $cmd --help | grep -q -- '--progress' || { echo "$cmd --help: no --progress"; fail=1; }
  "$dtsim" $cmd --help | grep -q -- '--quiet' || { echo "$cmd --help: no --quiet"; fail=1; }
done
exit $fail
