#!/usr/bin/env bash
# dtcal import-nccl-tests --platform: dtsim's NCCL tuner model against the two published 8 x H100
# all_reduce_perf logs (data/README.md), given only the fit import-nccl-tests makes of each: every
# size from 1 KiB printed beside its measured time, the largest within 2% (the fit's plateau), the
# mean error under 15% (the sizes the plateau does not set are the check; the unit test
# nccl_model_meets_a_published_* holds a hand-picked subset by size class); the calibration written
# is the same as without --platform; a log without ranks needs --ranks and --hosts, bad values
# are refused with exit 2. Both logs ran NVLS (479-483 GB/s, past the 450 GB/s an H100's NVLink
# carries each way), so they are imported with --link nvls, and filed as a ring's (nvlink) they
# are refused: no ring moves more than its links.
#   nccl_model_check.sh DTCAL REPO_ROOT
set -u
dtcal=$1 root=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
plat=$root/platforms/dgx-h100-superpod.json
dgx=$root/tests/calibrate/data/dgxc-h100x8-all_reduce_perf.log
aws=$root/tests/calibrate/data/aws-p5-h100x8-all_reduce_perf.log
check() { # LOG NAME [ARGS...]: runs the comparison, checks its table and summary
  local log=$1 name=$2; shift 2
  "$dtcal" import-nccl-tests "$log" --platform "$plat" "$@" -o "$work/$name.json" 2>"$work/$name.err" ||
    { echo "$name: exit $?"; cat "$work/$name.err"; fail=1; return; }
  python3 - "$work/$name.err" "$name" <<'PY' || fail=1
import re, sys
text = open(sys.argv[1]).read()
rows = [tuple(map(float, m[:3])) + (float(m[3]),) for m in
        re.findall(r"^\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([+-][\d.]+)%", text, re.M)]
summary = re.search(r"(\d+) sizes from 1024 B: mean \|error\| ([\d.]+)%", text)
ok = summary is not None and len(rows) == int(summary.group(1)) == 25 and rows[0][0] == 1024
# the error column is the model over the measurement, as printed
ok = ok and all(abs(100 * (r[2] / r[1] - 1) - r[3]) < 0.1 for r in rows)
ok = ok and abs(rows[-1][3]) < 2 and float(summary.group(2)) < 15
print(f"{sys.argv[2]}: {len(rows)} sizes, largest {rows[-1][3]:+.1f}%, mean |error| "
      f"{summary.group(2) if summary else '?'}%:", "ok" if ok else "WRONG")
sys.exit(0 if ok else 1)
PY
}
check "$dgx" dgx --link nvls
check "$aws" aws --link nvls --ranks 8 --hosts 1
"$dtcal" import-nccl-tests "$dgx" --link nvls -o "$work/plain.json" 2>/dev/null || fail=1
python3 -c "import json,sys; a,b=(json.load(open(f))['collectives'] for f in sys.argv[1:]); sys.exit(a!=b)" \
  "$work/plain.json" "$work/dgx.json" || { echo "--platform changed the calibration"; fail=1; }
"$dtcal" import-nccl-tests "$aws" --link nvls --platform "$plat" -o /dev/null 2>"$work/err"; rc=$?
[ "$rc" -eq 2 ] && grep -q -- "--ranks N and --hosts H" "$work/err" || { echo "no ranks: exit $rc"; cat "$work/err"; fail=1; }
for link in "" "--link nvlink"; do # an NVLS log filed as the ring's: refused, nothing written
  rc=0; out=$("$dtcal" import-nccl-tests "$dgx" $link --platform "$plat" 2>"$work/err") || rc=$?
  [ "$rc" -eq 2 ] && [ -z "$out" ] && grep -q "more than a ring can move over NVLink" "$work/err" &&
    grep -q -- "--link nvls" "$work/err" || { echo "NVLS log as nvlink ($link): exit $rc"; cat "$work/err"; fail=1; }
done
rc=0; "$dtcal" import-nccl-tests "$dgx" --link nvls --platform "$root/platforms/dgx-a100-superpod.json" -o /dev/null \
  2>/dev/null || rc=$? # the check is of a ring's fit only
[ "$rc" -eq 0 ] || { echo "nvls on another platform: exit $rc"; fail=1; }
# NVLS's rate is read as of a whole node: a log of 4 of its 8 GPUs, or of two hosts, is refused
for part in "--ranks 4" "--ranks 16 --hosts 2"; do
  rc=0; "$dtcal" import-nccl-tests "$dgx" --link nvls --platform "$plat" $part -o /dev/null 2>"$work/err" || rc=$?
  [ "$rc" -eq 2 ] && grep -q "one whole node" "$work/err" || { echo "nvls $part: exit $rc"; fail=1; }
done
# a platform whose collectives are not NCCL's (cpu-box: mpi) has no NVLS to blame: no refusal
rc=0; "$dtcal" import-nccl-tests "$dgx" --platform "$root/platforms/cpu-box.json" -o /dev/null 2>/dev/null || rc=$?
[ "$rc" -eq 0 ] || { echo "ring check on an mpi platform: exit $rc"; fail=1; }
for bad in "--ranks 0" "--ranks 2.5" "--hosts x" "--min-bytes -1" "--platform $work/nope.json"; do
  rc=0; out=$("$dtcal" import-nccl-tests "$dgx" --platform "$plat" $bad 2>/dev/null) || rc=$?
  [ "$rc" -eq 2 ] && [ -z "$out" ] || { echo "$bad: exit $rc"; fail=1; }
done
"$dtcal" import-nccl-tests "$dgx" --link network --platform "$plat" --hosts 3 -o /dev/null 2>"$work/err"; rc=$?
[ "$rc" -eq 2 ] && grep -q "same number on every host" "$work/err" || { echo "8 ranks on 3 hosts: exit $rc"; fail=1; }
[ "$fail" -eq 0 ] && echo "import-nccl-tests --platform: dtsim's model against both published logs; bad input refused"
exit "$fail"
