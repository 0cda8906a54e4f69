#!/usr/bin/env bash
# dtsim run's time to train and its out-of-memory exit, against arithmetic done here from the
# run's own step time: GPT-3 175B's 300B tokens in steps of 1536 x 2048 tokens (ceil), days =
# steps x step time / 86,400, GPU-hours = days x 24 x 1,024, cost = GPU-hours x the price;
# Megatron-LM's train_iters and train_samples say the same as tokens; with a GPU MTBF, the same
# with failures by Daly's closed form worked out here; two budgets are refused; a
# layout that does not fit exits 3 with its JSON written and memory_gib.oom true; --steps 3
# reports three times the step (steps_time_s), every steady-state step replaying the same.
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
"$dtsim" run "$s" --set platform.price_per_gpu_hour=2 --set faults.gpu_mtbf_hours=50000 \
  --set faults.checkpoint_interval_s=3600 --set 'faults.checkpoint_write="sync"' --json "$work/faults.json" \
  >"$work/faults_out" 2>&1 || fail=1
"$dtsim" run "$s" --steps 3 --json "$work/steps.json" >"$work/steps_out" 2>&1 || fail=1
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
    ok = ok and o["steps"] == steps and "cost" not in o and "with_failures" not in o
# with failures (GPU MTBF 50,000 h, a checkpoint every hour of training): Daly's expected wall
# time per interval tau, M e^(R/M) (e^((tau + C)/M) - 1), from figures worked out here: M =
# 50,000 h / 1,024 GPUs; C the (sync) write of 14 bytes a parameter (bf16 weights, fp32 master,
# Adam's two moments) at the platform's 200 GB/s; R = detection 120 s + restart 600 s (the
# defaults) + the read at 400 GB/s; GPT-3 175B's 174.6e9 parameters (its size, within 0.5%,
# which moves the goodput by under 1e-4)
f = json.load(open(f"{w}/faults.json"))["time_to_train"]
wf = f["with_failures"]
P, M, tau = 174.6e9, 50000 * 3600 / 1024, 3600.0
C, R = P * 14 / 200e9, 720 + P * 14 / 400e9
g = wf["expected_goodput"]
expect = tau / (M * math.exp(R / M) * (math.exp((tau + C) / M) - 1))
ok = ok and abs(g - expect) < 2e-4 and abs(wf["days"] - f["days"] / g) <= 1e-9 * wf["days"] \
     and abs(wf["gpu_hours"] - f["gpu_hours"] / g) <= 1e-6 * wf["gpu_hours"] \
     and abs(wf["cost"] - f["cost"] / g) <= 1e-6 * wf["cost"] and wf["checkpoint_interval_s"] == tau
print("with failures:", wf, "closed form here", round(expect, 6), "ok" if ok else "WRONG")
# --steps 3: three steady-state steps, each the one replayed, said as a figure
st = json.load(open(f"{w}/steps.json"))
ok_steps = st["steps"] == 3 and abs(st.get("steps_time_s", -1) - 3 * st["step_time_s"]) <= 1e-9 * st["step_time_s"]
print("--steps 3:", st["steps"], st.get("steps_time_s"), "ok" if ok_steps else "WRONG")
ok = ok and ok_steps
print("time to train:", t, "ok" if ok else "WRONG")
sys.exit(0 if ok else 1)
PY
grep -q '^  steps        3 x .* s = .* s' "$work/steps_out" || { echo "no steps line:"; cat "$work/steps_out"; fail=1; }
grep -q 'to train     300B tokens: 95.4K steps' "$work/out" || { echo "summary line:"; grep 'to train' "$work/out"; fail=1; }
grep -q 'with failures .* days, .* GPU-hours (expected goodput' "$work/faults_out" ||
  { echo "failures line:"; grep -A1 'to train' "$work/faults_out"; fail=1; }
"$dtsim" run "$s" --set parallel.zero_stage=0 --set 'training.recompute_granularity="none"' --json "$work/oom.json" \
  >"$work/oom_out" 2>"$work/oom_err"; rc=$?
if [ "$rc" -ne 3 ] || ! grep -q 'OUT OF MEMORY' "$work/oom_out" || ! grep -q 'exit 3' "$work/oom_err" ||
   ! python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["memory_gib"]["oom"] else 1)' "$work/oom.json"; then
  echo "out of memory: exit $rc"; cat "$work/oom_err"; fail=1
fi
[ "$fail" -eq 0 ] && echo "time to train from tokens, train_iters, train_samples; cost; out of memory exits 3 with its JSON"
exit "$fail"
