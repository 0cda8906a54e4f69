#!/usr/bin/env bash
# dtsim compare: each column is what dtsim run says of the same scenario and values (step time,
# MFU, memory, time to train), the variants apply their values to the first scenario on top of
# the common --set; labels are shown whole; bad input (an empty variant among it) is refused
# before anything runs.
#   compare.sh DTSIM REPO_ROOT
set -u
dtsim=$1 root=$2
a=$root/scenarios/gpt3-175b-1024-a100.json b=$root/scenarios/gpt2-xl-dp32-powersgd.json
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
"$dtsim" compare "$a" "$b" --variant 'parallel.zero_stage=0;training.micro_batch_size=2' \
  --set platform.price_per_gpu_hour=3 --json "$work/c.json" >"$work/table" 2>"$work/err" || { cat "$work/err"; fail=1; }
"$dtsim" run "$a" --set platform.price_per_gpu_hour=3 --json "$work/a.json" >/dev/null 2>&1 || fail=1
"$dtsim" run "$b" --set platform.price_per_gpu_hour=3 --json "$work/b.json" >/dev/null 2>&1 || fail=1
"$dtsim" run "$a" --set platform.price_per_gpu_hour=3 --set parallel.zero_stage=0 --set training.micro_batch_size=2 \
  --json "$work/v.json" >/dev/null 2>&1 || fail=1
python3 - "$work" <<'PY' || fail=1
import json, sys
w = sys.argv[1]
cols = json.load(open(f"{w}/c.json"))["scenarios"]
runs = [json.load(open(f"{w}/{n}.json")) for n in ("a", "b", "v")]
ok = len(cols) == 3
for c, r in zip(cols, runs):
    for k in ("step_time_s", "mfu", "gpus"):
        ok = ok and c[k] == r[k]
    ok = ok and c["memory_gib"]["total"] == r["memory_gib"]["total"]
    ok = ok and c.get("time_to_train") == r.get("time_to_train")
ok = ok and cols[2]["sets"] == ["platform.price_per_gpu_hour=3", "parallel.zero_stage=0", "training.micro_batch_size=2"]
print("compare columns against dtsim run:", "ok" if ok else "WRONG")
sys.exit(0 if ok else 1)
PY
grep -q 'against the first' "$work/table" && grep -q 'cost' "$work/table" || { echo "table:"; cat "$work/table"; fail=1; }
"$dtsim" compare >/dev/null 2>"$work/err"; [ $? -eq 2 ] && grep -q 'no scenario file' "$work/err" || fail=1
"$dtsim" compare "$a" --variant 'parallel.bogus=1' >/dev/null 2>"$work/err"; rc=$?
[ "$rc" -eq 2 ] && grep -q 'bogus' "$work/err" || { echo "bad variant: exit $rc"; cat "$work/err"; fail=1; }
# labels are never cut: two variants alike in their first 20 characters are told apart in full
"$dtsim" compare "$a" --variant 'training.micro_batch_size=2' --variant 'training.micro_batch_size=4' \
  >"$work/long" 2>&1 || fail=1
grep -q '^  (2) training.micro_batch_size=2$' "$work/long" && grep -q '^  (3) training.micro_batch_size=4$' "$work/long" ||
  { echo "long labels:"; cat "$work/long"; fail=1; }
"$dtsim" compare "$a" --variant ' ; ' >/dev/null 2>"$work/err"; rc=$?
[ "$rc" -eq 2 ] && grep -q "sets nothing" "$work/err" || { echo "empty variant: exit $rc"; cat "$work/err"; fail=1; }
# two files of one name in different folders are headed by their paths, not twice by the name
mkdir -p "$work/x" "$work/y" && cp "$a" "$work/x/s.json" && cp "$b" "$work/y/s.json"
sed -i "s#\"platforms/#\"$root/platforms/#" "$work/x/s.json" "$work/y/s.json"
"$dtsim" compare "$work/x/s.json" "$work/y/s.json" >"$work/same" 2>&1 || fail=1
grep -q "^  (1) $work/x/s.json\$" "$work/same" && grep -q "^  (2) $work/y/s.json\$" "$work/same" ||
  { echo "same names:"; cat "$work/same"; fail=1; }
# a ';' inside a JSON string is part of the value, not the end of the variant's PATH=VALUE
"$dtsim" compare "$a" --variant 'name="x;y";training.micro_batch_size=2' --json "$work/semi.json" >/dev/null 2>"$work/err" ||
  { echo "quoted ';':"; cat "$work/err"; fail=1; }
python3 -c "import json,sys; c=json.load(open(sys.argv[1]))['scenarios'][1]; sys.exit(0 if c['sets']==['name=\"x;y\"','training.micro_batch_size=2'] and c['scenario']=='x;y' else 1)" \
  "$work/semi.json" || { echo "quoted ';' split"; fail=1; }
args=(); for i in $(seq 17); do args+=("$a"); done
"$dtsim" compare "${args[@]}" >/dev/null 2>"$work/err"; [ $? -eq 2 ] && grep -q 'at most 16' "$work/err" || fail=1
[ "$fail" -eq 0 ] && echo "compare: columns equal dtsim run's; variants; refusals"
exit "$fail"
