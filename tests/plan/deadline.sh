#!/usr/bin/env bash
# dtsim plan --deadline-days: every layout it lists trains the tokens within the deadline, cheapest
# first (GPU-hours = days x 24 x its GPUs); a size meets the deadline exactly when its fastest
# layout does, and the cheapest comes from the smallest such size; the cheapest layout,
# given back to dtsim run at its size, simulates to the same step time; what cannot be answered is
# refused (no token budget, --max-gpus alone) or reported (no size meets it, exit 1). With
# --batch-tokens MIN:MAX every layout's global batch has its tokens in the range, the cheapest
# costs no more than with the scenario's batch alone (which is among those searched), and it
# too simulates to its step time under dtsim run with its batch; the estimate before it prices at
# least the layouts it finds fitting.
#   deadline.sh DTSIM REPO_ROOT
set -u
dtsim=$1 root=$2
s=$root/scenarios/gpt2-xl-dp32-powersgd.json
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
# rerun_cheapest PLAN_JSON LABEL: dtsim run of the plan's cheapest layout (its layout, micro-batch,
# global batch and recomputation as --set) must simulate to the step time the plan gave it.
rerun_cheapest() {
  local sets step
  sets=$(python3 - "$1" <<'PY'
import json, sys
l = json.load(open(sys.argv[1]))["layouts"][0]
p, t = l["parallel"], l["training"]
print(" ".join(f"--set parallel.{k}={json.dumps(v)}" for k, v in p.items()) +
      "".join(f" --set training.{k}={json.dumps(v)}" for k, v in t.items()) + f" STEP={l['step_time_s']}")
PY
  ) || { fail=1; return; }
  step=${sets##*STEP=}; sets=${sets% STEP=*}
  # shellcheck disable=SC2086
  "$dtsim" run "$s" --set training.tokens=2e11 $sets --json "$work/r.json" >/dev/null 2>"$work/err" ||
    { cat "$work/err"; fail=1; return; }
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["step_time_s"]; s=float(sys.argv[2]);
print(f"{sys.argv[3]}: plan {s:.6f} s, run {r:.6f} s"); sys.exit(0 if abs(r-s) <= 1e-9*s else 1)' \
    "$work/r.json" "$step" "$2" || fail=1
}
"$dtsim" plan "$s" --deadline-days 2 --set training.tokens=2e11 --top 5 --json "$work/d.json" >/dev/null 2>&1 || fail=1
python3 - "$work/d.json" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
L, sizes = d["layouts"], d["sizes"]
ok = len(L) > 0
for a, b in zip(L, L[1:]):
    ok = ok and a["time_to_train"]["gpu_hours"] <= b["time_to_train"]["gpu_hours"]
for l in L:
    t = l["time_to_train"]
    ok = ok and t["days"] <= 2 and abs(t["gpu_hours"] - t["days"] * 24 * l["gpus"]) <= 1e-9 * t["gpu_hours"]
met = [z["gpus"] for z in sizes if z["meets_deadline"]]
ok = ok and min(met) == L[0]["gpus"]   # the cheapest comes from the smallest size that meets it
ok = ok and all((z["fastest_days"] <= 2) == z["meets_deadline"] for z in sizes if z["fitting"])
if not ok:
    print("WRONG", file=sys.stderr); sys.exit(1)
PY
rerun_cheapest "$work/d.json" "cheapest layout"
"$dtsim" plan "$s" --deadline-days 2 --set training.tokens=0 >/dev/null 2>"$work/err"; rc=$?
[ "$rc" -eq 2 ] && grep -q 'needs what is trained' "$work/err" || { echo "no budget: exit $rc"; fail=1; }
"$dtsim" plan "$s" --max-gpus 64 >/dev/null 2>"$work/err"; [ $? -eq 2 ] || { echo "--max-gpus alone accepted"; fail=1; }
"$dtsim" plan "$s" --deadline-days 0.001 --set training.tokens=2e11 --max-gpus 64 >/dev/null 2>"$work/err"; rc=$?
[ "$rc" -eq 1 ] && grep -q 'no cluster of up to 8 nodes' "$work/err" || { echo "impossible: exit $rc"; cat "$work/err"; fail=1; }
fixed_best=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["layouts"][0]["time_to_train"]["gpu_hours"])' "$work/d.json")
"$dtsim" plan "$s" --deadline-days 2 --set training.tokens=2e11 --top 5 --batch-tokens 2e5:2e6 \
  --json "$work/b.json" >/dev/null 2>&1 || fail=1
python3 - "$work/b.json" "$fixed_best" <<'PY' || fail=1
import json, sys
L = json.load(open(sys.argv[1]))["layouts"]
ok = len(L) > 0 and L[0]["time_to_train"]["gpu_hours"] <= float(sys.argv[2])
ok = ok and all(2e5 <= l["training"]["global_batch_size"] * 1024 <= 2e6 for l in L)
ok = ok and len({l["training"]["global_batch_size"] for l in L}) > 1   # more than one batch in the answer
if not ok:
    print("WRONG batch range", file=sys.stderr); sys.exit(1)
PY
rerun_cheapest "$work/b.json" "cheapest in the batch range"
# The estimate prices every layout the search finds fitting, at every size and batch it searches:
# its count (the refusal under --max-seconds 0.001 names it) is at least the searched sizes' fitting
# layouts. Priced at the range's largest batch for each of its 12 (1,944 = 2^3 x 3^5 sequences,
# which few layouts divide), it had 1,800 of 4,414. Counts, not seconds: the same on a loaded machine.
"$dtsim" plan "$s" --deadline-days 2 --set training.tokens=2e11 --top 5 --batch-tokens 2e5:2e6 --max-seconds 0.001 \
  >/dev/null 2>"$work/err"; rc=$?
python3 - "$work/b.json" "$work/err" "$rc" <<'PY' || fail=1
import json, re, sys
searched = sum(z["fitting"] for z in json.load(open(sys.argv[1]))["sizes"])
m = re.search(r"x 12 global batches, (\d+) fitting layouts priced", open(sys.argv[2]).read())
print(f"batch range: {searched} fitting layouts searched, {m.group(1) if m else None} priced")
sys.exit(0 if sys.argv[3] == "2" and m and int(m.group(1)) >= searched > 0 else 1)
PY
"$dtsim" plan "$s" --deadline-days 2 --set training.tokens=2e11 --batch-tokens 1e2:5e2 >/dev/null 2>"$work/err"; rc=$?
[ "$rc" -eq 2 ] && grep -q 'no global batch of 2^a 3^b sequences' "$work/err" || { echo "empty range: exit $rc"; fail=1; }
"$dtsim" plan "$s" --batch-tokens 2e5:2e6 >/dev/null 2>&1; [ $? -eq 2 ] || { echo "--batch-tokens alone accepted"; fail=1; }
"$dtsim" plan "$s" --deadline-days 2 --batch-tokens 2e6:2e5 >/dev/null 2>&1; [ $? -eq 2 ] || { echo "MIN > MAX accepted"; fail=1; }
[ "$fail" -eq 0 ] && echo "deadline: layouts within it, cheapest first, smallest size; run agrees; refusals; batch range, priced"
exit "$fail"
