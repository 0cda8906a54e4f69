#!/usr/bin/env bash
# Analytic against flow fidelity as the cluster grows, on work where nothing contends: a 7B-class
# GPT (32 layers, h 4096, 4,096 tokens a sequence, bf16) with TP 8 filling each H100 node and DP
# over 128 to 8,192 nodes (1,024 to 65,536 GPUs), one sequence per GPU, the DP reduction not
# overlapped (so every byte and latency of it is on the step's path): ZeRO-0 (all-reduce, NCCL's
# tree at this size) and ZeRO-1 (reduce-scatter + all-gather). Both replays share one collective
# model (sim/step/collective.h); they must agree within 2% (docs/validation.md). Prints step time and
# DP time per fidelity, their difference and the wall time of each run.
# GPUs: 1024, 4096, 16384, 65536.
# Usage: bench/fidelity_scale.sh [BUILD_DIR]   (default: build)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
dtsim=$build/bin/dtsim
export DTSIM_RAILZONE_SO=${DTSIM_RAILZONE_SO:-$build/lib/libdtsim_railzone.so}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# the DGX H100 SuperPOD platform with 8,192 nodes (its fat tree keeps three tiers)
python3 - "$root" "$work" <<'PY'
import json, sys
root, work = sys.argv[1], sys.argv[2]
p = json.load(open(f"{root}/platforms/dgx-h100-superpod.json"))
p["network"]["nodes"] = 8192
p["calibration"] = f"{root}/calibrate/data/h100-sxm5-80gb.json"
json.dump(p, open(f"{work}/platform.json", "w"))
json.dump({"name": "dp-scale", "platform": f"{work}/platform.json",
           "model": {"num_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
                     "ffn_hidden_size": 16384, "seq_length": 4096, "vocab_size": 51200},
           "training": {"global_batch_size": 1024, "micro_batch_size": 1, "precision": "bf16"},
           "parallel": {"tensor_model_parallel_size": 8, "pipeline_model_parallel_size": 1,
                        "data_parallel_size": 128, "overlap_grad_reduce": False}},
          open(f"{work}/scenario.json", "w"))
PY

printf "%-7s %6s %11s %11s %8s %10s %10s %8s %9s %9s\n" ZeRO GPUs "analytic s" "flow s" diff \
  "dp anal." "dp flow" "dp diff" "wall a" "wall f"
for zero in 0 1; do
  for dp in 128 512 2048 8192; do
    row=()
    for fid in analytic flow; do
      start=$(date +%s.%N)
      "$dtsim" run "$work/scenario.json" --fidelity "$fid" --set parallel.zero_stage=$zero \
        --set parallel.data_parallel_size=$dp --set training.global_batch_size=$dp --json "$work/$fid.json" \
        >/dev/null 2>&1
      end=$(date +%s.%N)
      row+=("$(python3 -c "import json; d=json.load(open('$work/$fid.json')); print(d['step_time_s'], d['comm_s']['dp']['total'] + d['comm_s']['zero']['total'])") $(python3 -c "print($end - $start)")")
    done
    read -r sa da wa <<<"${row[0]}"
    read -r sf df wf <<<"${row[1]}"
    python3 -c "
sa, sf, da, df = $sa, $sf, $da, $df
print('%-7s %6d %11.4f %11.4f %+7.2f%% %10.4f %10.4f %+7.2f%% %9.2f %9.2f' % ('ZeRO-$zero', $dp * 8, sa, sf, 100 * (sf / sa - 1), da, df, 100 * (df / da - 1), $wa, $wf))"
  done
done
