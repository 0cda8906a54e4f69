#!/usr/bin/env bash
# Flow fidelity as the cluster grows (docs/flow.md, "Cost growth"): Llama 3 405B's 16K-GPU layout
# (scenarios/llama3-405b-16k-h100.json: TP 8 x PP 16, 2 virtual stages) with data parallelism
# grown and the global batch with it (16 sequences per DP rank), the platform's node count set
# to fit, from 1,024 to 131,072 GPUs. Prints per size: the whole process's wall time and peak
# RSS at flow fidelity, the flows simulated and those they stand for, the step at flow and analytic fidelity and their
# difference. Targets of the scale issue: 16,384 <= 1 s, 65,536 <= 4 s, 131,072 <= 10 s and
# <= 4 GiB. Minutes on a 2-core machine; run it on an idle one.
# Usage: bench/flow_scale.sh [BUILD_DIR] [DP...]   (default: build; DP 8 32 128 512 1024)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
shift || true
dps=("$@")
[ ${#dps[@]} -gt 0 ] || dps=(8 32 128 512 1024)
dtsim=$build/bin/dtsim
export DTSIM_RAILZONE_SO=${DTSIM_RAILZONE_SO:-$build/lib/libdtsim_railzone.so}
sc=$root/scenarios/llama3-405b-16k-h100.json
printf "%8s %9s %9s %10s %13s %11s %11s %8s\n" GPUs "wall s" "peak MiB" flows "represented" "step flow" "analytic" diff
for dp in "${dps[@]}"; do
  set=(--set "parallel.data_parallel_size=$dp" --set "training.global_batch_size=$((dp * 16))"
       --set "platform.network.nodes=$((dp * 16))")
  a=$( ("$dtsim" run "$sc" "${set[@]}" --json - 2>/dev/null || true) |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["step_time_s"])')
  tmp=$(mktemp -d)
  # exit 3: the layout does not fit the GPUs' memory (ZeRO-2 over fewer DP ranks at the small end);
  # the step is simulated all the same
  rc=0
  /usr/bin/time -o "$tmp/time" -f "%e %M" "$dtsim" run "$sc" "${set[@]}" --fidelity flow --json "$tmp/r.json" \
    >"$tmp/summary" 2>&1 || rc=$?
  [ "$rc" -eq 0 ] || [ "$rc" -eq 3 ] || { cat "$tmp/summary" >&2; exit 1; }
  python3 - "$dp" "$a" "$tmp" <<'PY'
import json, re, sys
dp, analytic, tmp = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
wall, rss = (float(x) for x in open(tmp + "/time").read().split()[-2:])
f = json.load(open(tmp + "/r.json"))["step_time_s"]
m = re.search(r"SimGrid: (\d+) flows standing for (\d+)", open(tmp + "/summary").read())
print("%8d %9.1f %9.0f %10s %13s %11.4f %11.4f %+7.2f%%" % (dp * 128, wall, rss / 1024, m.group(1) if m else "?",
                                                            m.group(2) if m else "?", f, analytic,
                                                            100 * (f - analytic) / analytic))
PY
  rm -rf "$tmp"
done
