#!/usr/bin/env bash
# dtcal validate finds --platform as dtsim finds a scenario's (as given, then from the repository
# root), refuses a missing or malformed platform before running anything, naming it, and never
# prints a location of -1; a bad flag value is refused before dtrain runs.
#   validate_paths.sh DTCAL REPO_ROOT
set -u
dtcal=$1 root=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
cal=$root/calibrate/data/cpu-box-measured.json
cd "$work" || exit 1   # no platforms/ here: the repository root's is found
"$dtcal" validate --steps 2 --platform platforms/cpu-box.json --calibration "$cal" >"$work/out" 2>"$work/err" ||
  { echo "relative platform:"; cat "$work/err"; fail=1; }
grep -q 'step time: measured' "$work/out" "$work/err" || { echo "no measurement"; fail=1; }
"$dtcal" validate --steps 2 --platform platforms/nope.json --calibration "$cal" >/dev/null 2>"$work/err"; rc=$?
[ "$rc" -eq 2 ] && grep -q "platform 'platforms/nope.json' not found" "$work/err" && ! grep -q 'measuring' "$work/err" ||
  { echo "missing platform: exit $rc"; cat "$work/err"; fail=1; }
printf '{\n' >"$work/bad.json"
"$dtcal" validate --steps 2 --platform "$work/bad.json" --calibration "$cal" >/dev/null 2>"$work/err"; rc=$?
[ "$rc" -eq 2 ] && grep -q 'bad.json:2:' "$work/err" && ! grep -q ':-1' "$work/err" ||
  { echo "malformed platform: exit $rc"; cat "$work/err"; fail=1; }
# Flags are checked before dtrain runs: each bad value exits 2 at once, naming the flag, without
# "measuring" on stderr, and dtrain's log (--dtrain-log, which dtrain writes) is never made.
check_refused() { # WHAT MESSAGE FLAGS...
  what=$1 msg=$2; shift 2
  rm -f "$work/dtrain.jsonl"
  "$dtcal" validate "$@" --platform platforms/cpu-box.json --calibration "$cal" --dtrain-log "$work/dtrain.jsonl" \
    >"$work/out" 2>"$work/err"; rc=$?
  [ "$rc" -eq 2 ] && grep -q -- "$msg" "$work/err" && ! grep -q 'measuring' "$work/err" &&
    [ ! -e "$work/dtrain.jsonl" ] && [ ! -s "$work/out" ] ||
    { echo "$what: exit $rc"; cat "$work/err"; fail=1; }
}
check_refused "--steps 1" "--steps 1: the step time is the median of the steps after the first" --steps 1
check_refused "--device tpu" "--device tpu: not cpu or cuda" --steps 2 --device tpu
check_refused "--json in a missing folder" "--json $work/no/out.json: cannot write in the folder" \
  --steps 2 --json "$work/no/out.json"
check_refused "ranks past an int" "= 10000000000 ranks" --steps 2 --tp 100000 --pp 100000
[ "$fail" -eq 0 ] && echo "dtcal validate: platform found from the repository root; missing and malformed refused first; bad flags before dtrain"
exit "$fail"
