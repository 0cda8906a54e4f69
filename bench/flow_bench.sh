#!/usr/bin/env bash
# Flow fidelity at scale (docs/flow.md). Prints:
#  1. the SimGrid platform module alone: load time, peak memory, hosts and links at 1,024 and
#     16,384 GPUs;
#  2. one step of GPT-3 175B on 1,024 A100 and Llama-3 405B on 16,384 H100 at flow fidelity:
#     the whole process's wall time and peak RSS (targets: < 10 s; < 20 s and < 4 GiB), the
#     flows simulated, flows per second of wall time, and the step time against the analytic
#     replay's.
# Usage: bench/flow_bench.sh [BUILD_DIR]   (default: build; needs dtsim, flow_platform_probe and
# lib/libdtsim_railzone.so built there)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
dtsim=$build/bin/dtsim
probe=$build/bin/flow_platform_probe
export DTSIM_RAILZONE_SO=${DTSIM_RAILZONE_SO:-$build/lib/libdtsim_railzone.so}

echo "# platform module (railzone.so): load time and memory"
printf "%-22s %7s %8s %8s %9s %9s\n" platform GPUs hosts links "load s" "peak MiB"
for case in dgx-a100-superpod:1024 dgx-h100-superpod:1024 dgx-h100-superpod:16384; do
  plat=${case%%:*} gpus=${case##*:}
  read -r _ g _ hosts _ links _ load _ rss < <("$probe" "$root/platforms/$plat.json" "$gpus")
  printf "%-22s %7d %8d %8d %9.3f %9.0f\n" "$plat" "$g" "$hosts" "$links" "$load" "$rss"
done

echo
echo "# one step at flow fidelity (whole process)"
printf "%-22s %7s %8s %9s %9s %10s %11s %11s %8s\n" scenario GPUs "wall s" "peak MiB" flows "flows/s" \
  "step flow" "analytic" "diff"
for sc in gpt3-175b-1024-a100 llama3-405b-16k-h100; do
  out=$( { /usr/bin/time -f "TIME %e %M" "$dtsim" run "$root/scenarios/$sc.json" --fidelity flow; } 2>&1 )
  ana=$("$dtsim" run "$root/scenarios/$sc.json" --fidelity analytic 2>&1)
  gpus=$(echo "$out" | awk '/on [0-9]+ x/ {for (i = 1; i <= NF; i++) if ($i == "on") print $(i + 1)}' | head -1)
  flows=$(echo "$out" | sed -n 's/.*SimGrid: \([0-9]*\) flows.*/\1/p')
  step=$(echo "$out" | awk '/step time/ {print $3; exit}')
  step_a=$(echo "$ana" | awk '/step time/ {print $3; exit}')
  read -r wall rss < <(echo "$out" | awk '/^TIME/ {print $2, $3}')
  awk -v s="$sc" -v g="$gpus" -v w="$wall" -v f="$flows" -v r="$rss" -v sf="$step" -v sa="$step_a" \
      'BEGIN {printf "%-22s %7s %8.2f %9.0f %9d %10.0f %11.4f %11.4f %+7.2f%%\n", s, g, w, r / 1024, f, f / w, sf, sa,
              100 * (sf / sa - 1)}'
done
echo "(flows: those simulated; on rail-aligned layouts rail 0 stands for the 8 identical rails, docs/flow.md)"
