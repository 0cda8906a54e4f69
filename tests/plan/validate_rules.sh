#!/usr/bin/env bash
# dtsim validate's rules for a case table: a negative tolerance, an id that is not a string or names
# two cases, and a file over 64 MiB are refused (exit 2, naming it); the error of an expected 0 is
# absolute, labelled so in the table and as error_kind in the JSON, and stays out of the mean
# relative error (with only such errors there is no mean, and no aggregate gate passes). Cases are
# the first of validation/published-runs.json with the tolerance or the expectation changed.
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
late = dict(case, id="late", scenario=dict(case["scenario"], parallel={"tensor_model_parallel_size": 3}))
json.dump({"cases": [case, late]}, open(f"{work}/late.json", "w"))
badkey = dict(case, id="badkey", expect={"step_time": 1.0})
json.dump({"cases": [case, badkey]}, open(f"{work}/badkey.json", "w"))
json.dump({"cases": [dict(case, id=5)]}, open(f"{work}/idnum.json", "w"))
json.dump({"cases": [case, case]}, open(f"{work}/iddup.json", "w"))
# only an absolute error (an expected 0 that is 2.8 s off): no relative error to average
absonly = dict(case, expect={"comm_s.dp.total": 0}, tolerance=0.01)
json.dump({"cases": [absonly]}, open(f"{work}/absonly.json", "w"))
# over the 64 MiB every description file is held to
json.dump({"cases": [case], "note": "x" * (65 << 20)}, open(f"{work}/big.json", "w"))
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
# (each its own id: two of one id are refused for that first)
for f in late:tensor_model_parallel_size badkey:expect.step_time; do
  "$dtsim" validate "$work/${f%%:*}.json" >"$work/out" 2>"$work/err"; rc=$?
  if [ "$rc" -ne 2 ] || ! grep -q "cases\[1\].*${f#*:}" "$work/err" || [ -s "$work/out" ]; then
    echo "$f: exit $rc, rows before the refusal:"; cat "$work/out" "$work/err"; fail=1
  fi
done
# a name no run prints is refused before the work: ahead of the up-front estimate's refusal, which
# itself comes before any simulation (a --max-seconds nothing fits in)
"$dtsim" validate "$work/badkey.json" --max-seconds 0.000001 >"$work/out" 2>"$work/err"; rc=$?
if [ "$rc" -ne 2 ] || ! grep -q "cases\[1\]\.expect\.step_time: not a numeric key" "$work/err"; then
  echo "badkey under --max-seconds: exit $rc, not named before the estimate:"; cat "$work/err"; fail=1
fi
# the aggregate gate says its limits
"$dtsim" validate "$work/zero.json" --max-mean-error 0.05 --max-error 0.2 >"$work/out" 2>&1
grep -q "aggregate gate: mean .* (limit 5.0%), largest .* (limit 20.0%)" "$work/out" || { echo "gate line:"; cat "$work/out"; fail=1; }
# a case's id is a string, and names one case: rows are told apart by it
for f in idnum:"cases\[0\]\.id: not a non-empty string" iddup:"cases\[1\]\.id .*also cases\[0\]'s" \
         big:"over the 67108864-byte limit"; do
  "$dtsim" validate "$work/${f%%:*}.json" >"$work/out" 2>"$work/err"; rc=$?
  if [ "$rc" -ne 2 ] || ! grep -q "${f#*:}" "$work/err" || [ -s "$work/out" ]; then
    echo "${f%%:*}: exit $rc"; cat "$work/out" "$work/err"; fail=1
  fi
done
# with no relative error the mean and largest are none, not 0%, and the aggregate gate cannot pass
"$dtsim" validate "$work/absonly.json" --max-mean-error 0.05 --json "$work/absonly_out.json" >"$work/out" 2>&1; rc=$?
if [ "$rc" -ne 1 ] || ! grep -q "mean absolute error none, largest none" "$work/out" ||
   ! grep -q "FAIL (no relative error to gate)" "$work/out" || ! grep -q '"mape": null' "$work/absonly_out.json"; then
  echo "absolute errors only: exit $rc"; cat "$work/out"; fail=1
fi
# groups: three cases of one scenario whose expectations put the prediction 30% and 10% over (group
# a) and 10% under (group b) what they expect; the summary's figures worked out here from the
# prediction of a first run: a's mean 20% and largest 30%, b's 10%, the groups' mean 15% where
# the three figures' mean is 16.7%. Without a named group there is no summary; a group that is
# not a non-empty string is refused.
python3 - "$root" "$work" <<'PY'
import json, sys
root, work = sys.argv[1], sys.argv[2]
case = json.load(open(f"{root}/validation/published-runs.json"))["cases"][0]
case["scenario"]["platform"] = f"{root}/" + case["scenario"]["platform"]
case.pop("group", None)
json.dump({"cases": [dict(case, tolerance=1)]}, open(f"{work}/one.json", "w"))
PY
"$dtsim" validate "$work/one.json" --json "$work/one_out.json" >"$work/out" 2>&1
if grep -q "^group " "$work/out"; then echo "a summary by group without named groups:"; cat "$work/out"; fail=1; fi
python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
one = json.load(open(f"{work}/one.json"))["cases"][0]
pred = json.load(open(f"{work}/one_out.json"))["cases"][0]["predicted"]
key = next(iter(one["expect"]))
cases = [dict(one, id=i, group=g, expect={key: pred / r}) for i, g, r in [("a1", "a", 1.3), ("a2", "a", 1.1), ("b1", "b", 0.9)]]
json.dump({"cases": cases}, open(f"{work}/groups.json", "w"))
json.dump({"cases": [dict(one, group="")]}, open(f"{work}/groupempty.json", "w"))
json.dump({"cases": [dict(one, group=3)]}, open(f"{work}/groupnum.json", "w"))
PY
"$dtsim" validate "$work/groups.json" --json "$work/groups_out.json" >"$work/out" 2>&1
python3 - "$work/groups_out.json" <<'PY' || { cat "$work/out"; fail=1; }
import json, sys
d = json.load(open(sys.argv[1]))
g = {x["group"]: x for x in d["groups"]}
def near(a, b): return abs(a - b) < 1e-9
ok = (list(g) == ["a", "b"] and g["a"]["figures"] == 2 and g["b"]["figures"] == 1
      and near(g["a"]["mape"], 0.2) and near(g["a"]["max_error"], 0.3) and near(g["b"]["mape"], 0.1)
      and near(d["mape_of_groups"], 0.15) and near(d["mape"], 0.5 / 3))
print("groups:", d["groups"], d["mape_of_groups"], d["mape"]) if not ok else None
sys.exit(0 if ok else 1)
PY
grep -q "^2 groups, mean of the groups' mean absolute errors 15.0%" "$work/out" || { echo "group line:"; cat "$work/out"; fail=1; }
for f in groupempty groupnum; do
  "$dtsim" validate "$work/$f.json" >"$work/out" 2>"$work/err"; rc=$?
  if [ "$rc" -ne 2 ] || ! grep -q "cases\[0\]\.group: not a non-empty string" "$work/err" || [ -s "$work/out" ]; then
    echo "$f: exit $rc"; cat "$work/out" "$work/err"; fail=1
  fi
done
[ "$fail" -eq 0 ] && echo "validate: negative tolerance and unknown keys refused; an expected 0 scored as an absolute error; groups summed up"
exit "$fail"
