#!/usr/bin/env bash
# Runs every fuzz target of tests/fuzz for SECONDS each (default 60) and prints a table of
# executions, coverage and crashes. Builds BUILD_DIR (default build-fuzz) with clang, libFuzzer,
# ASan and UBSan first. A crash or leak input is kept in tests/fuzz/regressions/<reader>/, where
# the normal test suite replays it from then on (fuzz_replay_<reader>); the script then exits 1.
#   scripts/fuzz_campaign.sh [SECONDS] [BUILD_DIR] [READER...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
build=${2:-build-fuzz}
shift $(( $# > 2 ? 2 : $# )) || true
readers=("$@")
[ ${#readers[@]} -gt 0 ] || readers=(scenario platform calibration set nccl_import token_data faults_trace checkpoint cases
                                     hf_config model_file)
case "$seconds" in ''|*[!0-9]*) echo "fuzz_campaign: SECONDS must be a whole number, not '$seconds'" >&2; exit 2;; esac
command -v clang >/dev/null || { echo "fuzz_campaign: clang is needed (Debian: clang-14 libclang-rt-14-dev)" >&2; exit 2; }

cmake -S . -B "$build" -DDTSIM_FUZZ=ON -DDTSIM_CUDA=OFF -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$build.configure.log" 2>&1 || { cat "$build.configure.log"; exit 1; }
targets=()
for r in "${readers[@]}"; do targets+=("fuzz_$r"); done
cmake --build "$build" -j2 --target "${targets[@]}" >"$build.build.log" 2>&1 || { tail -40 "$build.build.log"; exit 1; }

seeds_of() {
  case "$1" in
    scenario) echo scenarios;; platform) echo platforms;; calibration) echo calibrate/data;;
    *) echo "tests/fuzz/corpus/$1";;
  esac
}
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
status=0
printf '%-14s %8s %12s %10s %8s %8s %s\n' reader seconds executions exec/s cov features crashes
for r in "${readers[@]}"; do
  work="$build/fuzz-corpus/$r"
  mkdir -p "$work" "tests/fuzz/regressions/$r"
  before=$(ls "tests/fuzz/regressions/$r" | wc -l)
  log="$build/fuzz-$r.log"
  # Each input is a whole file; a checkpoint seed is ~16 KB, the others are smaller.
  "$build/bin/fuzz_$r" "$work" "$(seeds_of "$r")" -max_total_time="$seconds" -max_len=65536 -timeout=20 \
      -dict="tests/fuzz/dict/$r.dict" -artifact_prefix="tests/fuzz/regressions/$r/" -print_final_stats=1 \
      -close_fd_mask=3 >"$log" 2>&1 || status=1
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo 0)
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo 0)
  after=$(ls "tests/fuzz/regressions/$r" | wc -l)
  printf '%-14s %8s %12s %10s %8s %8s %s\n' "$r" "$seconds" "$execs" "$rate" "$cov" "$ft" "$((after - before))"
  if [ "$after" -ne "$before" ]; then
    status=1
    # A clean CI clone keeps nothing after it ends: print the report and the input itself
    # (base64), so the crash can be replayed from the CI log alone.
    echo "---- $r: the fuzzer's report"
    grep -A25 -m1 -E "ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:" "$log" || tail -30 "$log"
    for f in $(ls -t "tests/fuzz/regressions/$r" | head -$((after - before))); do
      echo "---- $r: input tests/fuzz/regressions/$r/$f (base64; decode with base64 -d)"
      base64 -w 100 "tests/fuzz/regressions/$r/$f" | head -200
    done
  fi
done
[ $status -eq 0 ] || echo "fuzz_campaign: crashes kept in tests/fuzz/regressions/ (see $build/fuzz-*.log)" >&2
exit $status
