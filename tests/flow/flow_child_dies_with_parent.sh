#!/usr/bin/env bash
# A dtsim killed during a flow-fidelity run leaves no SimGrid child behind: the replay's forked
# child asks the kernel to kill it with its parent (PR_SET_PDEATHSIG). Starts a flow run of a
# few seconds (DP 4,000 of a small model), kills dtsim with SIGKILL (which it cannot forward)
# once the child exists, and checks the child is gone within two seconds. Exits 1 if not.
#   flow_child_dies_with_parent.sh DTSIM PLATFORM_JSON
set -u
dtsim=$1 platform=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 - "$platform" "$work" <<'PY'
import json, sys
p = json.load(open(sys.argv[1])); work = sys.argv[2]
p["network"]["nodes"] = 500
json.dump(p, open(f"{work}/platform.json", "w"))
json.dump({"name": "child", "platform": f"{work}/platform.json",
           "model": {"num_layers": 4, "hidden_size": 1024, "num_attention_heads": 8, "seq_length": 1024,
                     "vocab_size": 32000},
           "training": {"global_batch_size": 4000, "micro_batch_size": 1, "precision": "bf16"},
           "parallel": {"tensor_model_parallel_size": 1, "pipeline_model_parallel_size": 1,
                        "data_parallel_size": 4000}}, open(f"{work}/scenario.json", "w"))
PY
"$dtsim" run "$work/scenario.json" --fidelity flow >/dev/null 2>&1 &
parent=$!
child=""
for _ in $(seq 100); do # the child appears once the workload is built
  child=$(pgrep -P "$parent" | head -1)
  [ -n "$child" ] && break
  sleep 0.05
done
if [ -z "$child" ]; then
  echo "flow_child_dies_with_parent: no child of dtsim ($parent) appeared"; kill -9 "$parent" 2>/dev/null; exit 1
fi
kill -9 "$parent"
for _ in $(seq 40); do
  kill -0 "$child" 2>/dev/null || { echo "the flow child $child ended with dtsim"; exit 0; }
  sleep 0.05
done
echo "flow_child_dies_with_parent: the flow child $child outlived dtsim"; kill -9 "$child"; exit 1
