#!/usr/bin/env bash
# models/: every file is a model dtsim simulates (exit 0, or 3 where the layout below does not fit)
# and dtrain reads (through "from" with small sizes over it); a scenario's "model" as a path, as
# {"from": PATH, ...} whose keys override the file's, and through --set; a missing file and a
# "from" loop refused by name (exit 2).
#   models.sh DTSIM DTRAIN REPO_ROOT
set -u
dtsim=$1 dtrain=$2 root=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
scen() { # scenario with MODEL (JSON) on one 8-GPU H100 node, TP ${2:-8} x DP 8 / TP
  local tp=${2:-8}
  printf '{"name": "m", "platform": "%s/platforms/dgx-h100-superpod.json", "model": %s,
  "training": {"global_batch_size": 8, "micro_batch_size": 1, "recompute_granularity": "full"},
  "parallel": {"tensor_model_parallel_size": %d, "pipeline_model_parallel_size": 1, "data_parallel_size": %d}}\n' \
    "$root" "$1" "$tp" $((8 / tp)) >"$work/s.json"
}
for f in "$root"/models/*.json; do
  name=$(basename "$f")
  # TP 8 where it divides the key-value groups (Qwen3-30B-A3B has 4)
  tp=$(python3 -c 'import json,sys,math; m=json.load(open(sys.argv[1]))["model"];
print(math.gcd(8, m.get("num_query_groups", m["num_attention_heads"])))' "$f")
  scen "\"models/$name\"" "$tp"
  "$dtsim" run "$work/s.json" >"$work/out" 2>"$work/err"; rc=$?
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 3 ]; then echo "$name: dtsim exit $rc"; cat "$work/err"; fail=1; fi
  printf '{"from": "%s", "num_layers": 2, "hidden_size": 64, "num_attention_heads": 8, "seq_length": 32,
    "vocab_size": 256, "ffn_hidden_size": 128, "num_query_groups": 8, "kv_channels": 8}\n' "$f" >"$work/small.json"
  "$dtrain" --model "$work/small.json" --steps 1 --micro-batch 2 --global-batch 2 >/dev/null 2>"$work/err" ||
    { echo "$name: dtrain"; cat "$work/err"; fail=1; }
done
# "from" with overrides: the file's keys, then these; the step changes with the layers
scen '{"from": "models/llama3-8b.json", "num_layers": 8}'
"$dtsim" run "$work/s.json" --json "$work/a.json" >/dev/null 2>&1 || fail=1
"$dtsim" run "$work/s.json" --set model.num_layers=16 --json "$work/b.json" >/dev/null 2>&1 || fail=1
"$dtsim" run "$work/s.json" --set 'model="models/llama3-8b.json"' --set model.num_layers=16 --json "$work/c.json" \
  >/dev/null 2>&1 || fail=1
python3 - "$work" <<'PY' || fail=1
import json, sys
w = sys.argv[1]
a, b, c = (json.load(open(f"{w}/{n}.json"))["step_time_s"] for n in "abc")
ok = b > 1.8 * a and abs(b - c) <= 1e-12 * b   # twice the layers; the same model reached two ways
print(f"8 layers {a:.4f} s, 16 layers {b:.4f} s and {c:.4f} s:", "ok" if ok else "WRONG")
sys.exit(0 if ok else 1)
PY
scen '"models/nope.json"'
"$dtsim" run "$work/s.json" >/dev/null 2>"$work/err"; rc=$?
[ "$rc" -eq 2 ] && grep -q "models/nope.json' not found" "$work/err" || { echo "missing: exit $rc"; cat "$work/err"; fail=1; }
printf '{"from": "%s/loop.json"}\n' "$work" >"$work/loop.json"
scen "{\"from\": \"$work/loop.json\"}"
"$dtsim" run "$work/s.json" >/dev/null 2>"$work/err"; rc=$?
[ "$rc" -eq 2 ] && grep -q 'chained by "from"' "$work/err" || { echo "loop: exit $rc"; cat "$work/err"; fail=1; }
# group-limited routing: dtsim reads it, dtrain (whose router takes the top-k of all experts) refuses it
printf '{"from": "models/qwen3-30b-a3b.json", "num_layers": 2, "hidden_size": 64, "num_attention_heads": 8,
  "seq_length": 32, "vocab_size": 256, "kv_channels": 8, "num_query_groups": 8, "moe_router_num_groups": 8, "moe_router_group_topk": 2}\n' \
  >"$work/grouped.json"
scen "\"$work/grouped.json\""
"$dtsim" run "$work/s.json" >/dev/null 2>"$work/err"; rc=$?
[ "$rc" -eq 0 ] || [ "$rc" -eq 3 ] || { echo "grouped routing: dtsim exit $rc"; cat "$work/err"; fail=1; }
"$dtrain" --model "$work/grouped.json" --steps 1 --micro-batch 2 --global-batch 2 >/dev/null 2>"$work/err"; rc=$?
[ "$rc" -ne 0 ] && grep -q "moe_router_num_groups" "$work/err" ||
  { echo "grouped routing: dtrain exit $rc"; cat "$work/err"; fail=1; }
[ "$fail" -eq 0 ] && echo "models/: every file simulated and trained; from, overrides, --set; missing and looping files refused"
exit "$fail"
