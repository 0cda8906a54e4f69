#!/usr/bin/env bash
# The up-front work estimate (sim/budget.c) against what the commands really take on this
# machine: for each case, the estimate (read from the refusal under --max-seconds 0.000001) and
# the measured wall time and peak memory (/usr/bin/time), with their ratios.
#   bench/budget_bench.sh [BUILD_DIR]
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
dtsim=${1:-$root/build}/bin/dtsim
[ -x "$dtsim" ] || { echo "budget_bench: $dtsim not found (build first, or give BUILD_DIR)" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "budget_bench: needs /usr/bin/time (apt-get install time)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
g=$root/scenarios/gpt3-175b-1024-a100.json
printf '%-44s %10s %10s %6s %10s %10s %6s\n' case "est s" "meas s" ratio "est MiB" "meas MiB" ratio
one() { # NAME COMMAND...
  local name=$1; shift
  "$@" --max-seconds 0.000001 >/dev/null 2>"$work/err"
  local est_s est_gib
  est_s=$(grep -o 'GiB and [0-9.e+-]* [a-z]*' "$work/err" | awk '{v=$3; u=$4; if (u=="min") v*=60; else if (u=="h") v*=3600; else if (u=="days") v*=86400; print v}')
  est_gib=$(grep -o 'about [0-9.e+-]* GiB' "$work/err" | awk '{print $2}')
  /usr/bin/time -f "%e %M" -o "$work/t" "$@" >/dev/null 2>&1
  read -r s kb < <(tail -n 1 "$work/t") # the last line: a failing exit adds one before it
  awk -v n="$name" -v es="$est_s" -v ms="$s" -v eg="$est_gib" -v kb="$kb" 'BEGIN {
    em = eg * 1024; mm = kb / 1024;
    printf "%-44s %10.3g %10.3g %6.2f %10.0f %10.0f %6.2f\n", n, es, ms, es / (ms > 0 ? ms : 1e-9), em, mm, em / mm }'
}
one "run, batch 1536 (7K tasks)" "$dtsim" run "$g"
one "run, batch 196608 (763K tasks)" "$dtsim" run "$g" --set training.global_batch_size=196608
one "run, batch 1572864 (6.1M tasks)" "$dtsim" run "$g" --set training.global_batch_size=1572864
one "run --fidelity flow, DP 16" "$dtsim" run "$g" --fidelity flow
one "run --fidelity flow, DP 64" "$dtsim" run "$g" --fidelity flow --set parallel.data_parallel_size=64 \
  --set training.global_batch_size=6144 --set platform.network.nodes=4096
one "run --fidelity flow, DP 64, d-mod-k (whole)" "$dtsim" run "$g" --fidelity flow \
  --set parallel.data_parallel_size=64 --set training.global_batch_size=6144 --set platform.network.nodes=4096 \
  --set platform.network.adaptive_routing=false
one "run --fidelity flow, Llama 3 405B, 131,072" "$dtsim" run "$root/scenarios/llama3-405b-16k-h100.json" \
  --fidelity flow --set parallel.data_parallel_size=1024 --set training.global_batch_size=16384 \
  --set platform.network.nodes=16384
one "plan, batch 1536" "$dtsim" plan "$g"
one "plan, batch 49152" "$dtsim" plan "$g" --set training.global_batch_size=49152
one "plan --exhaustive, batch 1536" "$dtsim" plan "$g" --exhaustive
one "plan, batch 1572864" "$dtsim" plan "$g" --set training.global_batch_size=1572864
one "plan --deadline-days 30, Llama 3 to 131,072" "$dtsim" plan "$root/scenarios/llama3-405b-16k-h100.json" \
  --deadline-days 30 --max-gpus 131072 --quiet
one "plan --deadline-days 30, GPT-3" "$dtsim" plan "$g" --deadline-days 30 --quiet
# a range of batches: every batch priced at every size (1,458 = 2 x 3^6 sequences admits few layouts)
one "plan --deadline-days 30, batches 1024-1458" "$dtsim" plan "$g" --deadline-days 30 \
  --batch-tokens 2097152:2985984 --quiet
one "compare, batch 1572864" "$dtsim" compare "$g" --set training.global_batch_size=1572864
one "validate, the published set" "$dtsim" validate "$root/validation/published-runs.json"
one "sweep, 3 batches" "$dtsim" sweep "$g" --vary training.global_batch_size=1536,12288,49152 --out "$work/sw"
# 1,000 points of a small step: each point's loading and row, not its step, is the cost
one "sweep, 1,000 points of GPT-3 2.7B" "$dtsim" sweep "$root/scenarios/gpt3-2.7b-32-a100-ps.json" \
  --vary "platform.price_per_gpu_hour=$(seq -s, 1 100)" --vary "faults.seed=$(seq -s, 1 10)" --out "$work/sw2"
one "faults, 20 runs of 54 days" "$dtsim" faults "$root/scenarios/llama3-405b-54d-faults.json" --runs 20 --quiet
one "async, 2000 steps" "$dtsim" async "$root/scenarios/gpt3-2.7b-32-a100-ps.json" --steps 2000 --quiet
# 1,000 servers: 33,032 SimGrid actors (a channel per worker and server)
one "async, 1,000 servers, 3 steps" "$dtsim" async "$root/scenarios/gpt3-2.7b-32-a100-ps.json" --steps 3 --quiet \
  --set parameter_server.servers=1000
