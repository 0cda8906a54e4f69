#!/usr/bin/env bash
# One call on a machine with a GPU: build with CUDA, run every GPU test and the GPU benchmark,
# and print a short table. Usage: tests/gpu/run.sh [BUILD_DIR]   (default build-gpu)
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build-gpu}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "nvidia-smi: none"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release > "$build.configure.log" 2>&1 || { cat "$build.configure.log"; exit 1; }
cmake --build "$build" -j"$(nproc)" > "$build.build.log" 2>&1 || { tail -40 "$build.build.log"; exit 1; }
printf "\n%-32s %-8s %s\n" test result seconds
status=0
for t in $(ctest --test-dir "$build" -L gpu -N | awk '/Test +#/ {print $3}'); do
  start=$(date +%s.%N)
  out=$(ctest --test-dir "$build" -R "^$t\$" --output-on-failure 2>&1)
  rc=$?
  end=$(date +%s.%N)
  if echo "$out" | grep -q "Skipped"; then res=skipped; elif [ $rc -eq 0 ]; then res=passed; else res=FAILED; status=1; fi
  printf "%-32s %-8s %.1f\n" "$t" "$res" "$(echo "$end $start" | awk '{print $1 - $2}')"
  [ "$res" = FAILED ] && echo "$out" | tail -30
done
# The single-GPU training step (GPT-2 124M, bf16) for the speed figures.
if [ -x "$build/bin/dtrain" ]; then
  echo
  "$build/bin/dtrain" --device cuda --model small --precision bf16 --micro-batch 4 --steps 10 --lr 6e-4 \
      --log-json "$build/gpu_small.jsonl" 2>&1 | tail -3
fi
[ -x "$build/bin/kernels_bench" ] && "$build/bin/kernels_bench" --backend cuda
exit $status
