#!/usr/bin/env bash
# Every output a dtsim command writes is checked before its work (sim/commands/cli.h,
# cli_check_outputs): a missing folder, a folder where a file goes, a file where a folder goes,
# "-" where only a file makes sense, two outputs at one file (however spelt) and an output over an
# input the command reads are refused with exit 2 and the flag named, before any simulation (each would otherwise fail after the work, or not at all);
# nothing is created; a plan that finds no layout leaves an earlier --json as it was.
#   output_paths.sh DTSIM REPO_ROOT
set -u
dtsim=$1 root=$2
s=$root/scenarios/gpt3-175b-1024-a100.json
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
fail=0
touch afile
mkdir adir
refused() { # NAME EXPECT_TEXT COMMAND...: exit 2 with the text on stderr, nothing new in the folder
  local name=$1 text=$2; shift 2
  local before rc
  before=$(ls -A | sort | tr '\n' ' ')
  "$@" >out 2>err; rc=$?
  rm -f out
  if [ "$rc" -ne 2 ] || ! grep -q -- "$text" err; then echo "$name: exit $rc: $(cat err)"; fail=1; fi
  rm -f err
  [ "$(ls -A | sort | tr '\n' ' ')" = "$before" ] || { echo "$name: left $(ls -A)"; fail=1; }
}
refused "run --json in a missing folder" "dtsim run: --json: cannot write nodir/x.json" "$dtsim" run "$s" --json nodir/x.json
refused "run --json at a folder" "cannot write adir: it is a folder" "$dtsim" run "$s" --json adir
refused "run --trace -" "dtsim run: --trace -: this output is written to a file only" "$dtsim" run "$s" --trace -
refused "run, one path twice" "--json and --trace both name x.json" "$dtsim" run "$s" --json x.json --trace x.json
refused "run, one file spelt twice" "--json and --trace both name ./x.json" "$dtsim" run "$s" --json x.json --trace ./x.json
# an output over the input it reads: the scenario (a copy, compared after), by its own name, another
# spelling, a link to it, one of compare's several inputs
cp "$s" own.json && ln -s own.json link.json
refused "run --json over its scenario" "dtsim run: --json own.json: that is the input own.json" \
  "$dtsim" run own.json --json own.json
refused "run --json over its scenario, spelt otherwise" "that is the input own.json" \
  "$dtsim" run own.json --json "$work/own.json"
refused "run --trace over the file a link names" "dtsim run: --trace own.json: that is the input link.json" \
  "$dtsim" run link.json --trace own.json
refused "compare --json over its second scenario" "dtsim compare: --json ./own.json: that is the input own.json" \
  "$dtsim" compare "$s" own.json --json ./own.json
refused "faults --json over its scenario" "dtsim faults: --json own.json: that is the input own.json" \
  "$dtsim" faults own.json --runs 2 --json own.json
cmp -s own.json "$s" || { echo "an input scenario was changed"; fail=1; }
rm -f own.json link.json
refused "plan --report" "dtsim plan: --report: cannot write nodir/r.md" "$dtsim" plan "$s" --report nodir/r.md
refused "plan --json" "dtsim plan: --json: cannot write nodir/p.json" "$dtsim" plan "$s" --json nodir/p.json
refused "faults --plot at a file" "dtsim faults: --plot afile: it exists and is not a folder" \
  "$dtsim" faults "$root/scenarios/llama3-405b-54d-faults.json" --runs 2 --plot afile
refused "sweep --out at a file" "dtsim sweep: --out afile: it exists and is not a folder" \
  "$dtsim" sweep "$s" --vary training.micro_batch_size=1,2 --out afile
refused "sweep --out in a missing folder" "dtsim sweep: --out nodir/x: cannot make it in nodir" \
  "$dtsim" sweep "$s" --vary training.micro_batch_size=1,2 --out nodir/x
refused "compare --json" "dtsim compare: --json: cannot write nodir/c.json" "$dtsim" compare "$s" --json nodir/c.json
refused "validate --json" "dtsim validate: --json: cannot write nodir/v.json" \
  "$dtsim" validate "$root/validation/published-runs.json" --json nodir/v.json
refused "async --json" "dtsim async: --json: cannot write nodir/a.json" \
  "$dtsim" async "$root/scenarios/gpt3-2.7b-32-a100-ps.json" --steps 2 --json nodir/a.json
refused "report --json" "dtsim report: --json: cannot write nodir/r.json" \
  "$dtsim" report "$s" --measured "$work/no-run" --json nodir/r.json
# a plan with no layout that fits fails (exit 1) and keeps what was at its --json
echo '{"earlier": true}' >p.json
"$dtsim" plan "$s" --set platform.gpu.memory_gib=1 --json p.json >/dev/null 2>err; rc=$?
{ [ "$rc" -eq 1 ] && grep -q "nothing written" err && [ "$(cat p.json)" = '{"earlier": true}' ]; } ||
  { echo "plan without a fitting layout: exit $rc, p.json now: $(head -c 200 p.json)"; fail=1; }
# what can be written still is: a device, and a file beside others
"$dtsim" run "$s" --json /dev/null >/dev/null 2>&1 || { echo "--json /dev/null refused"; fail=1; }
"$dtsim" run "$s" --json adir/r.json >/dev/null 2>&1 && [ -s adir/r.json ] || { echo "--json adir/r.json not written"; fail=1; }
[ "$fail" -eq 0 ] && echo "outputs: bad paths refused up front by run, plan, faults, sweep, compare, validate, async and report"
exit "$fail"
