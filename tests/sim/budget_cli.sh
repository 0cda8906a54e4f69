#!/usr/bin/env bash
# The up-front work estimate (sim/budget.h): what would exhaust the machine or run past the limits
# is refused before anything starts, in well under a second, with exit 2 and the estimate; what
# fits runs as before. run (analytic and flow), plan, sweep, compare, validate, faults and async alike.
#   budget_cli.sh DTSIM REPO_ROOT [LIMIT_MS]   (a refusal's wall-time limit, default 2000)
set -u
dtsim=$1 root=$2 limit_ms=${3:-2000}
s=$root/scenarios/gpt3-175b-1024-a100.json
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
fail=0
refused() { # NAME EXPECT_TEXT COMMAND...: exit 2 within limit_ms, the text on stderr, "refused before starting"
  local name=$1 text=$2; shift 2
  local t0 ms rc
  t0=$(date +%s%N)
  "$@" >/dev/null 2>err; rc=$?
  ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  if [ "$rc" -ne 2 ] || ! grep -q "refused before starting" err || ! grep -q -- "$text" err || [ "$ms" -gt "$limit_ms" ]; then
    echo "$name: exit $rc after $ms ms: $(cat err)"; fail=1
  fi
}
big="--set training.global_batch_size=1572864" # 6.1M tasks, 1.5 GB, 3-4 s on the CI machine (--full)
refused "run --max-seconds" "6.3M tasks of the step graph" "$dtsim" run "$s" $big --full --max-seconds 1
refused "run --max-memory-gib" "over --max-memory-gib 0.5" "$dtsim" run "$s" $big --full --max-memory-gib 0.5
# without --full the step folds: priced as its two short replays, it runs within the same limits
"$dtsim" run "$s" $big --max-seconds 1 --max-memory-gib 0.5 --json fold.json >/dev/null 2>err ||
  { echo "folded run refused: $(cat err)"; fail=1; }
python3 -c "import json,sys; sys.exit(json.load(open('fold.json')).get('folded_from_micro_batches') is None)" ||
  { echo "the big run did not fold"; fail=1; }
# a step the fold cannot certify (GPipe's lanes grow in two places) is held to the limits before
# each longer attempt and its full replay: exit 2 after the short replays only, nothing written.
# Under 1 s the attempt of 2 x 16,384 + 1 micro-batches is the one refused, and named with its own
# figures (the full replay's 3.1M tasks and 2.6 s were named before); under 1.5 s every attempt
# runs and the full replay of its 98,304 is refused (its attempts take up to the 1.5 s allowed,
# several times that in the sanitizer build: only the first case is held to the refusal's time).
gpipe="--set parallel.virtual_pipeline_model_parallel_size=1 --set parallel.schedule=gpipe
       --set training.recompute_granularity=full"
for limit in "1:a fold attempt (two short replays, 32769 micro-batches): 1.0M tasks" \
             "1.5:replaying every micro-batch (98304): 3.1M tasks"; do
  t0=$(date +%s%N)
  "$dtsim" run "$s" $big $gpipe --max-seconds "${limit%%:*}" --json gp.json >/dev/null 2>err; rc=$?
  ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  { [ "$rc" -eq 2 ] && [ ! -e gp.json ] && grep -qF "refused before ${limit#*:} of the step graph" err &&
    grep -q "not shown periodic" err && { [ "$ms" -le "$limit_ms" ] || [ "${limit%%:*}" != 1 ]; }; } ||
    { echo "uncertified long step under ${limit%%:*} s: exit $rc after $ms ms: $(cat err)"; fail=1; }
done
refused "flow run" "flows (flow replay, SimGrid)" "$dtsim" run "$s" --fidelity flow --max-seconds 0.01
refused "plan" "candidate layouts" "$dtsim" plan "$s" --max-seconds 0.01
# a deadline search is priced at every size it may search (1, 2, 4, ... nodes): Llama 3 405B's up
# to 131,072 GPUs is about 1.9 s estimated and 0.9 s measured; priced at the largest size alone,
# where few layouts fit, it was 0.04 s
refused "plan --deadline-days" "up to 16 cluster sizes of 1 to 16384 nodes" "$dtsim" plan \
  "$root/scenarios/llama3-405b-16k-h100.json" --deadline-days 30 --max-gpus 131072 --threads 2 --max-seconds 0.5
# the planner folds each layout's step as dtsim run does, and is priced so: at the big batch its
# search takes about 1 s and 0.12 GB on the CI machine (each layout's full graph would be 89 GiB);
# two threads, as the memory is priced once a thread
"$dtsim" plan "$s" $big --threads 2 --max-seconds 10 --max-memory-gib 1 --json plan.json >/dev/null 2>err ||
  { echo "plan at the big batch refused: $(cat err)"; fail=1; }
# a fold attempt past the first is held to the limits when it comes: every layout on 256 GPUs
# simulated, ZeRO-3 under a pipeline needs longer attempts than 0.3 GiB allows; exit 2, the layout
# and the attempt named with its own figures (not the full replay's 251.7M tasks and 89.2 GiB),
# nothing written (about 1 s)
"$dtsim" plan "$s" $big --gpus 256 --exhaustive --threads 2 --max-memory-gib 0.3 --json gated.json >/dev/null 2>err
rc=$?
{ [ "$rc" -eq 2 ] && [ ! -e gated.json ] && grep -q "dtsim plan: layout TP .* ZeRO 3): refused before" err &&
  grep -q "refused before a fold attempt (two short replays, [0-9]* micro-batches): [0-9.]*K tasks" err &&
  grep -q "over --max-memory-gib 0.3" err; } || { echo "plan's longer fold attempt: exit $rc: $(cat err)"; fail=1; }
refused "sweep" "3 points" "$dtsim" sweep "$s" --vary training.global_batch_size=1536,49152,1572864 --full --out sw --max-seconds 2
# 10,000 points of a small step: each point's loading and row (1.4 ms) dominate its step's 0.06 ms
# (it was estimated at 0.6 s and ran 14 s)
hundred=$(seq -s, 1 100)
refused "sweep points" "10000 points" "$dtsim" sweep "$root/scenarios/gpt3-2.7b-32-a100-ps.json" \
  --vary "platform.price_per_gpu_hour=$hundred" --vary "faults.seed=$hundred" --out sw --max-seconds 5
[ -e sw ] && { echo "sweep: refused, yet wrote sw/"; fail=1; }
# plan --confirm K replays the best K at flow fidelity: priced once they are known (GPT-3 175B's
# best, DP 64, have 15 times the flows of its own layout), refused before any of them runs
"$dtsim" plan "$s" --confirm 3 --threads 2 --max-seconds 2 --json confirm.json >/dev/null 2>err; rc=$?
{ [ "$rc" -eq 2 ] && [ ! -e confirm.json ] && grep -q "refused before its --confirm replays" err; } ||
  { echo "plan --confirm over the limit: exit $rc: $(cat err)"; fail=1; }
# compare and validate simulate each step as run does (folded) and are priced so: a batch of 98M
# sequences replayed in full needed about 70 GiB; folded, 0.04 s
"$dtsim" compare "$s" --set training.global_batch_size=98304000 --max-seconds 5 --max-memory-gib 0.5 >/dev/null 2>err ||
  { echo "compare of a long step: $(cat err)"; fail=1; }
refused "compare" "2 columns, each step priced" "$dtsim" compare "$s" --variant "parallel.zero_stage=2" --fidelity flow \
  --max-seconds 0.01
refused "validate" " cases, each step priced" "$dtsim" validate "$root/validation/published-runs.json" \
  --fidelity flow --max-seconds 0.5
refused "faults" "timeline events" "$dtsim" faults "$root/scenarios/llama3-405b-54d-faults.json" --runs 100000 --max-seconds 2
ps=$root/scenarios/gpt3-2.7b-32-a100-ps.json
refused "async" "shard updates" "$dtsim" async "$ps" --steps 1000000 --max-seconds 60
# a worker's step updates every server: a million servers is 64M updates for two steps, refused
# (it ran 2.5 min and was killed)
refused "async servers" "64.0M shard updates (2 steps x 32 workers x 1000000 servers)" \
  "$dtsim" async "$ps" --steps 2 --set parameter_server.servers=1000000
# more SimGrid actors than vm.max_map_count allows: refused up front, never SimGrid's own log
maps=$(cat /proc/sys/vm/max_map_count 2>/dev/null || echo 0)
if [ "$maps" -gt 0 ] && [ "$maps" -lt 132000 ]; then # 32 x 4,000 channels + 4,032: 132,032 actors
  "$dtsim" async "$ps" --steps 2 --set parameter_server.servers=4000 --max-seconds 100000 >/dev/null 2>err; rc=$?
  { [ "$rc" -eq 2 ] && grep -q "132032 SimGrid actors .* over this machine's vm.max_map_count" err &&
    ! grep -q "CRITICAL" err; } || { echo "async actors over the map limit: exit $rc: $(head -c 600 err)"; fail=1; }
fi
"$dtsim" run "$s" --max-seconds -1 >/dev/null 2>err; rc=$?
[ "$rc" -eq 2 ] && grep -q "max-seconds: '-1' is not a positive number" err || { echo "negative limit: exit $rc"; fail=1; }
# a limit of 0 (or a deadline of 0 days) is no limit a user means: refused, not read as the default
for bad in "run $s --max-seconds 0" "run $s --max-memory-gib 0" "plan $s --deadline-days 0"; do
  # shellcheck disable=SC2086
  "$dtsim" $bad >/dev/null 2>err; rc=$?
  [ "$rc" -eq 2 ] && grep -q "'0' is not a positive number" err || { echo "$bad: exit $rc: $(cat err)"; fail=1; }
done
# what fits runs, and the same figures as without the flags
"$dtsim" run "$s" --json a.json >/dev/null 2>&1 || { echo "plain run failed"; fail=1; }
"$dtsim" run "$s" --max-seconds 60 --max-memory-gib 4 --json b.json >/dev/null 2>&1 || { echo "run within limits failed"; fail=1; }
python3 -c 'import json,sys; a,b=(json.load(open(f)) for f in sys.argv[1:]); sys.exit(a["step_time_s"]!=b["step_time_s"])' a.json b.json ||
  { echo "limits changed the figures"; fail=1; }
[ "$fail" -eq 0 ] && echo "budget: run, flow run, plan, sweep, compare, validate, faults and async refused up front; what fits runs"
exit "$fail"
