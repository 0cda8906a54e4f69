#!/usr/bin/env bash
# One call on a machine with a GPU: configure and build into build/ (or $1), run every CTest
# test labelled "gpu" and the CUDA kernel benchmark, and print a short table.
#   tests/gpu/run.sh [BUILD_DIR]
#   CALIBRATE=1 tests/gpu/run.sh [BUILD_DIR]   then tests/gpu/calibrate.sh on the same build, in the
#                                             same call (a lent GPU machine is released when idle)
# A BUILD_DIR unpacked by scripts/gpu_unbundle.sh (a machine without the project's packages) is
# run as it is, neither configured nor built.
# GPU_TEST_JOBS (default 1) and GPU_TEST_TIMEOUT (seconds, default 600) are passed to ctest.
# Logs: BUILD_DIR/gpu-run/{configure,build,ctest,bench}.log. Exit 0 when nothing failed
# (skipped tests count as not failed), 1 otherwise.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
logs=$build/gpu-run
mkdir -p "$logs"
jobs=$(nproc 2>/dev/null || echo 4)

echo "== device"
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader || true
else
  echo "nvidia-smi not found (the gpu tests will report themselves skipped)"
fi

# Build for the GPU that is here (compute capability 9.0 -> 90), else for H100.
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
case "$arch" in ''|*[!0-9]*) arch=90 ;; esac

if [ -f "$build/.bundled-from" ]; then
  # made elsewhere by scripts/gpu_bundle.sh and unpacked here by scripts/gpu_unbundle.sh: this
  # machine has the GPU but not the packages to configure the project
  echo "== prebuilt ($build, bundled from $(cat "$build/.bundled-from"))"
else
  echo "== configure ($build, sm_$arch)"
  if ! cmake -S "$root" -B "$build" -DCMAKE_CUDA_ARCHITECTURES="$arch" >"$logs/configure.log" 2>&1; then
    tail -40 "$logs/configure.log"; exit 1
  fi
  grep -E "dtsim: CUDA" "$logs/configure.log" || true

  echo "== build"
  start=$(date +%s)
  # Everything (other suites' gpu-labelled tests need their own binaries), carrying on past
  # unrelated failures; then the GPU tests and the benchmark on their own, whose failure counts.
  cmake --build "$build" -j"$jobs" -- -k >"$logs/build.log" 2>&1 || echo "(some targets failed to build; see $logs/build.log)"
  if ! cmake --build "$build" -j"$jobs" --target gpu_tests >>"$logs/build.log" 2>&1; then
    grep -E "error|Error" "$logs/build.log" | head -30; exit 1
  fi
  cmake --build "$build" -j"$jobs" --target kernels_bench >>"$logs/build.log" 2>&1 || true
  echo "built in $(( $(date +%s) - start )) s"
fi

echo "== ctest -L gpu"
# GPU_TEST_JOBS tests at once (RUN_SERIAL ones alone), each stopped after GPU_TEST_TIMEOUT seconds
ctest --test-dir "$build" -L gpu --output-on-failure -j "${GPU_TEST_JOBS:-1}" --timeout "${GPU_TEST_TIMEOUT:-600}" \
  >"$logs/ctest.log" 2>&1
ctest_rc=$?

# One row per test from ctest's progress lines, e.g.
#   " 3/10 Test #19: gpu_layernorm ....................   Passed    0.81 sec"
#   " 4/10 Test #20: gpu_elementwise ..................***Skipped   0.01 sec"
table=$(awk '/Test +#[0-9]+: / {
    line = $0; sub(/.*Test +#[0-9]+: /, "", line)
    name = line; sub(/ .*/, "", name)
    rest = substr(line, length(name) + 1); sub(/^ *[.]*[*]*/, "", rest)
    n = split(rest, f, " ")
    secs = (n >= 2 && f[n] == "sec") ? f[n - 1] : "?"
    result = f[1]; for (i = 2; i <= n - 2; i++) result = result " " f[i]
    printf "%-28s %-20s %8s\n", name, result, secs
}' "$logs/ctest.log")

failed=0
[ $ctest_rc -ne 0 ] && failed=1

bench_row=""
if [ -x "$build/bin/kernels_bench" ]; then
  echo "== kernels_bench --backend cuda"
  bstart=$(date +%s.%N)
  "$build/bin/kernels_bench" --backend cuda 2>&1 | tee "$logs/bench.log"
  brc=${PIPESTATUS[0]}
  bsecs=$(awk -v a="$bstart" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
  case $brc in 0) bres=Passed ;; 77) bres=Skipped ;; *) bres="Failed (rc $brc)"; failed=1 ;; esac
  bench_row=$(printf "%-28s %-20s %8s" kernels_bench "$bres" "$bsecs")
else
  bench_row=$(printf "%-28s %-20s %8s" kernels_bench "absent (not built)" "-")
fi

echo
echo "== summary"
printf "%-28s %-20s %8s\n" test result seconds
[ -n "$table" ] && echo "$table"
echo "$bench_row"
if [ $ctest_rc -ne 0 ]; then
  echo
  echo "== failures (from $logs/ctest.log)"
  grep -E "FAIL|ERROR|Failed|rel err .*>|Not Run|Timeout|Exception" "$logs/ctest.log" | head -40
fi
if [ "${CALIBRATE:-0}" = 1 ]; then
  echo
  echo "== tests/gpu/calibrate.sh"
  "$root/tests/gpu/calibrate.sh" "$build"
  crc=$?
  [ $crc -ne 0 ] && [ $crc -ne 77 ] && failed=1 # 77: no GPU here, nothing to calibrate
fi
exit $failed
