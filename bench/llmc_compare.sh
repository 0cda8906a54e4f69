#!/usr/bin/env bash
# dtrain against karpathy/llm.c on the same GPU: GPT-2 124M (12 layers, hidden 768, seq 1024),
# bf16 compute with fp32 master weights, one GPU, the same micro-batch, no gradient accumulation.
#   bench/llmc_compare.sh LLMC_TRAIN_GPT2CU [BUILD] [B] [STEPS] [PEAK_TFLOPS]
# LLMC_TRAIN_GPT2CU: llm.c's train_gpt2cu built for this GPU (make train_gpt2cu PRECISION=BF16;
# with CUDA 13, llm.c's managed-memory fallback in llmc/cuda_utils.cuh needs the new
# cudaMemAdvise signature or removing; on a build machine with no libnvidia-ml, NVML off: make
# llmc/mfu.h's __has_include(<nvml.h>) test false and drop -lnvidia-ml, which changes no step time;
# docs/gpu-runs/2026-11-27-h200/README.md). Defaults: build, B 16, 30 steps, 989.4 TFLOP/s (H100/H200
# SXM dense bf16, NVIDIA H100 datasheet; platforms/dgx-h100-node.json).
# Both train from a random initialisation on random tokens (throughput does not depend on the
# data): llm.c with -e d12, dtrain with --model small. Step time: the median after 3 warm-up steps.
# MFU for both with llm.c's own count (gpt2_estimate_mfu): 6 N + 6 L C T FLOPs a token, with
# N = 124,475,904 (llm.c's d12, vocabulary padded to 50304) so the two rows share a numerator.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
llmc=$(realpath "${1:?usage: bench/llmc_compare.sh LLMC_TRAIN_GPT2CU [BUILD] [B] [STEPS] [PEAK_TFLOPS]}")
bin=$(realpath "${2:-$root/build}")/bin
B=${3:-16}
steps=${4:-30}
peak=${5:-989.4}
T=1024
work=$(mktemp -d /tmp/llmc_compare_XXXXXX)
trap 'rm -rf "$work"' EXIT

# llm.c's token file: 256 int32 header (magic 20240520, version 1, token count), uint16 tokens.
python3 - "$work/tokens.bin" $((B * T * (steps + 8) + 1)) <<'EOF'
import random, struct, sys
path, n = sys.argv[1], int(sys.argv[2])
rng = random.Random(1)
with open(path, "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)))
    f.write(struct.pack(f"<{n}H", *(rng.randrange(50257) for _ in range(n))))
EOF

echo "== llm.c: $llmc -e d12 -b $B -t $T -x $steps"
(cd "$work" && "$llmc" -i tokens.bin -j tokens.bin -e d12 -b "$B" -t "$T" -d $((B * T)) -x "$steps" \
   -v 1000000 -m 1 -s 0 -h 0) >"$work/llmc.log" 2>&1 || { tail -30 "$work/llmc.log"; exit 1; }
grep -E "^step" "$work/llmc.log" | tail -3
llmc_s=$(awk -F'|' '/^step/ { for (i = 1; i <= NF; i++) if ($i ~ / ms *$/) { v = $i; sub(/ ms */, "", v); print v / 1000 } }' \
           "$work/llmc.log" | tail -n +4 | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')

echo "== dtrain: --device cuda --model small --precision bf16 --micro-batch $B --steps $steps"
"$bin/dtrain" --device cuda --model small --precision bf16 --micro-batch "$B" --steps "$steps" \
  --log-json "$work/dtrain.jsonl" >"$work/dtrain.log" 2>&1 || { tail -30 "$work/dtrain.log"; exit 1; }
tail -2 "$work/dtrain.log"
dtrain_s=$(python3 - "$work/dtrain.jsonl" <<'EOF'
import json, sys, statistics
t = [json.loads(l)["step_time_s"] for l in open(sys.argv[1]) if '"step_time_s"' in l]
print(statistics.median(t[3:]))
EOF
)

python3 - "$llmc_s" "$dtrain_s" "$B" "$T" "$peak" <<'EOF'
import sys
llmc, dtrain, B, T, peak = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
N, L, C = 124_475_904, 12, 768
flops_per_token = 6 * N + 6 * L * C * T
print(f"\n| engine | step (ms) | tokens/s | MFU (of {peak} TFLOP/s) |\n|---|---|---|---|")
for name, s in (("llm.c train_gpt2cu", llmc), ("dtrain", dtrain)):
    tps = B * T / s
    print(f"| {name} | {1e3 * s:.1f} | {tps:,.0f} | {100 * tps * flops_per_token / (peak * 1e12):.1f}% |")
print(f"\ndtrain / llm.c throughput: {llmc / dtrain:.3f}")
EOF
