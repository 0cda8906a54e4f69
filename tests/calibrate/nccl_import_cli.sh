#!/usr/bin/env bash
# dtcal import-nccl-tests refuses what it cannot fit, exit 2 with the file, line and field and
# nothing written: a NaN busbw (once dropped from the calibration with exit 0), a negative one,
# a NaN time, sizes out of order; and --kind takes the calibration's names or nccl-tests' only.
#   nccl_import_cli.sh DTCAL REPO_ROOT
set -u
dtcal=$1 root=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
log=$root/tests/calibrate/data/dgxc-h100x8-all_reduce_perf.log
# line 47: 17179869184 B, out-of-place time 62648 us and busbw 479.90 GB/s
refused() { # NAME MESSAGE [FLAGS...]: $work/NAME is refused with MESSAGE
  name=$1 msg=$2; shift 2
  rm -f "$work/cal.json"
  "$dtcal" import-nccl-tests "$@" "$work/$name" -o "$work/cal.json" >"$work/out" 2>"$work/err"; rc=$?
  [ "$rc" -eq 2 ] && grep -qF -- "$msg" "$work/err" && [ ! -s "$work/out" ] && [ ! -e "$work/cal.json" ] ||
    { echo "$name: exit $rc"; cat "$work/err"; fail=1; }
}
sed '47s/479\.90/nan/' "$log" >"$work/nan_busbw_all_reduce.log"
refused nan_busbw_all_reduce.log "nan_busbw_all_reduce.log:47: out-of-place busbw 'nan' is not a bandwidth"
sed '47s/479\.90/-479.90/' "$log" >"$work/neg_busbw_all_reduce.log"
refused neg_busbw_all_reduce.log "neg_busbw_all_reduce.log:47: out-of-place busbw '-479.90'"
sed '47s/62648/nan/' "$log" >"$work/nan_time_all_reduce.log"
refused nan_time_all_reduce.log "nan_time_all_reduce.log:47: out-of-place time 'nan'"
{ sed -n 1,15p "$log"; sed -n 16,47p "$log" | tac; } >"$work/desc_all_reduce.log"
refused desc_all_reduce.log "desc_all_reduce.log:17: size 8589934592 after 17179869184 at line 16"
cat "$log" "$log" >"$work/twice_all_reduce.log"
refused twice_all_reduce.log "twice_all_reduce.log:63: a second results table (the first at line 13)"
cp "$log" "$work/plain.log"
refused plain.log "--kind foo: not all_reduce" --kind foo
"$dtcal" import-nccl-tests --kind alltoall "$work/plain.log" 2>/dev/null | grep -q '"all_to_all": {' ||
  { echo "--kind alltoall not filed as all_to_all"; fail=1; }
[ "$fail" -eq 0 ] && echo "dtcal import-nccl-tests: bad fields, unordered sizes and a bad --kind refused (exit 2)"
exit "$fail"
