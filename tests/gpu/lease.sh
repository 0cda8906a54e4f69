#!/bin/bash
# One call of a short GPU lease (the device tool's `run`: at most 600 s a call, about 15 minutes
# of device time a session): what every lease should measure, timing first on an idle GPU and the
# correctness suite last, each step under a deadline so the call returns with what it has.
#   tests/gpu/lease.sh [STEPS]     STEPS: a comma list of the steps below (default: all, in order)
#     calibrate  tests/gpu/calibrate.sh: the calibration of this GPU and the closed loops (GPT-2
#                124M, fp32 and bf16: dtcal on the GPU, then dtsim's prediction of dtrain's step)
#     llmc       bench/llmc_compare.sh: dtrain against llm.c on GPT-2 124M bf16, if .gpu/train_gpt2cu
#                was built beforehand (bench/llmc_compare.sh says how)
#     torch      the PyTorch measurements #23 waits for (tests/gpu/README.md): the host cost of a
#                ZeRO-3 list gather (bench/torch_list_copies.py) and the layer shapes' bf16 and fp8
#                GEMM rates held for 25 s (bench/torch_gemm.py --sustained)
#     suite      tests/gpu/run.sh: the CUDA kernels against the CPU ones and the engine's GPU
#                variants (GPU_TEST_JOBS=8)
#     layer      not in the default list (a second call's, alone: deadline 150 s): bench/torch_layer.py,
#                an eager PyTorch layer's GPU and host time with its kernels counted by the profiler,
#                the calibration's host_issue_us measured (tests/gpu/README.md)
# Needs .gpu/bundle.tar.xz and .gpu/REV (scripts/gpu_bundle.sh, made on the build machine with
# nvcc; carried with the device tool's `carry: [".gpu"]`). Writes $OUT/results.tgz (one file: a
# call returns at most eight) holding r/: each step's log and outputs, device.txt, the revision.
# Deadlines (seconds from the start; a step starts only with 30 s left of its window):
# calibrate 200, llmc 240, list-copies 270, gemm-sustained 330, suite 570, as the 2026-11-27 leases took them
# (docs/gpu-runs/2026-11-27-h200/: suite 260 s at 8 jobs, calibration and closed loops 100-150 s).
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:?OUT: the folder whose files come back (the device tool sets it)}"
STEPS=${1:-calibrate,llmc,torch,suite}
T0=$(date +%s)
R=$OUT/r
mkdir -p "$R"
log() { echo "[$(($(date +%s) - T0))s] $*" | tee -a "$R/lease.log"; }
left() { echo $(($1 - ($(date +%s) - T0))); } # seconds until deadline $1
# step DEADLINE NAME LOG COMMAND...: runs the command under the step's deadline, its output to
# $R/LOG, or says why not; its exit status is logged
step() {
  local deadline=$1 name=$2 out=$3; shift 3
  local l; l=$(left "$deadline")
  if [ "$l" -lt 30 ]; then log "$name: skipped, $l s left of its window"; return; fi
  log "$name (up to $l s)"
  timeout -k 5 "$l" "$@" > "$R/$out" 2>&1; log "$name: exit $?"
}
wanted() { case ",$STEPS," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
finish() { log "end"; (cd "$OUT" && tar czf results.tgz r && rm -rf r); }
trap finish EXIT
echo "revision $(cat .gpu/REV 2>/dev/null || git rev-parse --short HEAD 2>/dev/null)" | tee "$R/revision.txt"
if [ -f .gpu/bundle.tar.xz ]; then
  scripts/gpu_unbundle.sh .gpu/bundle.tar.xz > "$R/unbundle.log" 2>&1 || { log "unbundle failed"; exit 1; }
  . /opt/dtsim-rt/env.sh
fi
nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap,clocks.max.sm,power.limit --format=csv \
  | tee "$R/device.txt"
if wanted calibrate; then
  step 200 calibrate calibrate.log tests/gpu/calibrate.sh build build/gpu-cal
  cp build/gpu-cal/* "$R/" 2>/dev/null
  sed -n '/== summary/,$p' "$R/calibrate.log" | tail -n 14
fi
if wanted llmc; then
  if [ -x .gpu/train_gpt2cu ]; then
    step 240 llmc llmc-compare.log bench/llmc_compare.sh .gpu/train_gpt2cu build 16 30
    tail -n 6 "$R/llmc-compare.log"
  else
    log "llmc: skipped, no .gpu/train_gpt2cu"
  fi
fi
if wanted torch; then
  # PyTorch's own CUDA libraries, not the bundle's; the CSV on stdout, the progress on stderr
  step 270 list-copies list-copies.log env PYTHONUNBUFFERED=1 LD_LIBRARY_PATH= \
    sh -c 'python3 bench/torch_list_copies.py > "$0"' "$R/list-copies.csv"
  step 330 gemm-sustained gemm-sustained.log env PYTHONUNBUFFERED=1 LD_LIBRARY_PATH= \
    sh -c 'python3 bench/torch_gemm.py --sustained 25 > "$0"' "$R/gemm-sustained.csv"
  tail -n 3 "$R/list-copies.csv" "$R/gemm-sustained.csv"
fi
if wanted layer; then
  step 150 layer torch-layer.log env PYTHONUNBUFFERED=1 LD_LIBRARY_PATH= \
    sh -c 'python3 bench/torch_layer.py > "$0"' "$R/torch-layer.csv"
  cat "$R/torch-layer.csv"
fi
if wanted suite; then
  step 570 suite run.log env GPU_TEST_JOBS=8 GPU_TEST_TIMEOUT=200 tests/gpu/run.sh build
  cp build/gpu-run/ctest.log "$R/ctest-gpu.log" 2>/dev/null
  cp build/gpu-run/bench.log "$R/kernels-bench.log" 2>/dev/null
  grep -E "tests passed|\*\*\*|Failed|Timeout|Total Test" "$R/ctest-gpu.log" 2>/dev/null | head -20
fi
