#!/usr/bin/env bash
# dtsim run's time to train and its out-of-memory exit, against arithmetic done here from the
# run's own step time: GPT-3 175B's 300B tokens in steps of 1536 x 2048 tokens (ceil), days =
# steps x step time / 86,400, GPU-hours = days x 24 x 1,024, cost = GPU-hours x the price;
# Megatron-LM's train_iters and train_samples say the same as tokens; two of them are refused; a
# layout that does not fit exits 3 with its JSON written and memory_gib.oom true.
#   time_to_train.sh DTSIM REPO_ROOT
set -u
dtsim=$1 root=$2
s=$root/scenarios/gpt3-175b-1024-a100.json
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
"$dtsim" run "$s" --set platform.price_per_gpu_hour=2 --json "$work/tokens.json" >"$work/out" 2>&1 || fail=1
"$dtsim" run "$s" --set training.tokens=0 --set training.train_iters=95368 --json "$work/iters.json" >/dev/null 2>&1 || fail=1
"$dtsim" run "$s" --set training.tokens=0 --set training.train_samples=146484375 --json "$work/samples.json" \
  >/dev/null 2>&1 || fail=1
"$dtsim" run "$s" --set training.train_iters=10 >/dev/null 2>"$work/both"; rc=$?
if [ "$rc" -ne 2 ] || ! grep -q 'one of tokens, train_iters and train_samples' "$work/both"; then
  echo "tokens with train_iters: exit $rc"; cat "$work/both"; fail=1
fi
python3 - "$work" <<'PY' || fail=1
import json, math, sys
w = sys.argv[1]
d = json.load(open(f"{w}/tokens.json"))
t, step = d["time_to_train"], d["step_time_s"]
steps = math.ceil(300e9 / (1536 * 2048))            # 95,368
days = steps * step / 86400
ok = (t["steps"] == steps and abs(t["days"] - days) <= 1e-9 * days
      and abs(t["gpu_hours"] - days * 24 * 1024) <= 1e-6 * t["gpu_hours"]
      and abs(t["cost"] - 2 * t["gpu_hours"]) <= 1e-6 * t["cost"] and t["price_per_gpu_hour"] == 2)
for name in ("iters", "samples"):                     # 95,368 iterations; 146,484,375 sequences
    o = json.load(open(f"{w}/{name}.json"))["time_to_train"]
    ok = ok and o["steps"] == steps and "cost" not in o
print("time to train:", t, "ok" if ok else "WRONG")
sys.exit(0 if ok else 1)
PY
grep -q 'to train     300B tokens: 95.4K steps' "$work/out" || { echo "summary line:"; grep 'to train' "$work/out"; fail=1; }
"$dtsim" run "$s" --set parallel.zero_stage=0 --set 'training.recompute_granularity="none"' --json "$work/oom.json" \
  >"$work/oom_out" 2>"$work/oom_err"; rc=$?
if [ "$rc" -ne 3 ] || ! grep -q 'OUT OF MEMORY' "$work/oom_out" || ! grep -q 'exit 3' "$work/oom_err" ||
   ! python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["memory_gib"]["oom"] else 1)' "$work/oom.json"; then
  echo "out of memory: exit $rc"; cat "$work/oom_err"; fail=1
fi
[ "$fail" -eq 0 ] && echo "time to train from tokens, train_iters, train_samples; cost; out of memory exits 3 with its JSON"
exit "$fail"
