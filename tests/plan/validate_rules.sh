#!/usr/bin/env bash
# dtsim validate's rules for a case table: a negative tolerance is refused (exit 2, naming it);
# the error of an expected 0 is absolute, labelled so in the table and as error_kind in the JSON,
# and stays out of the mean relative error. Cases are the first of validation/published-runs.json
# with the tolerance or the expectation changed.
#   validate_rules.sh DTSIM REPO_ROOT
set -u
dtsim=$1 root=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 - "$root" "$work" <<'PY'
import json, sys
root, work = sys.argv[1], sys.argv[2]
case = json.load(open(f"{root}/validation/published-runs.json"))["cases"][0]
case["scenario"]["platform"] = f"{root}/" + case["scenario"]["platform"]
neg = dict(case, tolerance=-0.1)
json.dump({"cases": [neg]}, open(f"{work}/negative.json", "w"))
zero = dict(case, expect={"bubble_fraction.mean": 0}, tolerance=0.01)
json.dump({"cases": [zero]}, open(f"{work}/zero.json", "w"))
typo = dict(case, tolerence=0.01)
json.dump({"cases": [typo]}, open(f"{work}/typo.json", "w"))
late = dict(case, scenario=dict(case["scenario"], parallel={"tensor_model_parallel_size": 3}))
json.dump({"cases": [case, late]}, open(f"{work}/late.json", "w"))
badkey = dict(case, expect={"step_time": 1.0})
json.dump({"cases": [case, badkey]}, open(f"{work}/badkey.json", "w"))
PY
fail=0
"$dtsim" validate "$work/negative.json" >"$work/out" 2>"$work/err"; rc=$?
if [ "$rc" -ne 2 ] || ! grep -q 'tolerance" of 0 or more' "$work/err"; then
  echo "negative tolerance: exit $rc"; cat "$work/err"; fail=1
fi
"$dtsim" validate "$work/zero.json" --json "$work/zero_out.json" >"$work/out" 2>"$work/err"; rc=$?
if [ "$rc" -ne 0 ] || ! grep -q '(absolute: expected 0)' "$work/out" ||
   ! grep -q '"error_kind": "absolute"' "$work/zero_out.json"; then
  echo "expected 0: exit $rc"; cat "$work/out" "$work/err"; fail=1
fi
# a misspelt key (tolerence) would leave the default tolerance: refused, named, before anything runs
"$dtsim" validate "$work/typo.json" >"$work/out" 2>"$work/err"; rc=$?
if [ "$rc" -ne 2 ] || ! grep -q "cases\[0\]\.tolerence: unknown key (did you mean 'tolerance'?)" "$work/err" || [ -s "$work/out" ]; then
  echo "misspelt key: exit $rc"; cat "$work/out" "$work/err"; fail=1
fi
# a bad case after good ones stops the command before its first row: every case is loaded, and
# every expected figure named, before the table
for f in late badkey; do
  "$dtsim" validate "$work/$f.json" >"$work/out" 2>"$work/err"; rc=$?
  if [ "$rc" -ne 2 ] || ! grep -q "cases\[1\]" "$work/err" || [ -s "$work/out" ]; then
    echo "$f: exit $rc, rows before the refusal:"; cat "$work/out" "$work/err"; fail=1
  fi
done
# the aggregate gate says its limits
"$dtsim" validate "$work/zero.json" --max-mean-error 0.05 --max-error 0.2 >"$work/out" 2>&1
grep -q "aggregate gate: mean .* (limit 5.0%), largest .* (limit 20.0%)" "$work/out" || { echo "gate line:"; cat "$work/out"; fail=1; }
[ "$fail" -eq 0 ] && echo "validate: negative tolerance and unknown keys refused; an expected 0 scored as an absolute error"
exit "$fail"
