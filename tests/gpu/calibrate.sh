#!/usr/bin/env bash
# The GPU half of issue #7's figures, in one call on a machine with a GPU, after tests/gpu/run.sh
# has built BUILD_DIR (or building dtcal and dtrain here):
#   1. dtcal kernels --device cuda --precision fp32,bf16: the measured calibration of this GPU
#      (GEMM tables in both precisions, 8192^3 included; memory-bound ops, attention, launches)
#   2. dtcal validate --device cuda --model small: GPT-2 124M on one GPU, fp32, measured step
#      time against the simulator's prediction from that calibration
#   3. a provenance file (date, device, driver, commands, revision) beside the results
#   tests/gpu/calibrate.sh [BUILD_DIR] [OUT_DIR]      QUICK=1: dtcal's reduced grid
# OUT_DIR (default BUILD_DIR/gpu-cal) receives SLUG-measured.json, SLUG-closed-loop-small.json,
# provenance.md and the logs; SLUG is h100, h200, a100 or the device name made file-safe. Copy
# the calibration to calibrate/data/ and the figures, with provenance.md, to docs/validation.md.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(realpath -m "${1:-$root/build}")   # absolute: the script works from the repository root
out=$(realpath -m "${2:-$build/gpu-cal}")
mkdir -p "$out"
cd "$root"

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "no GPU here (nvidia-smi finds none): nothing to calibrate"
  exit 77
fi
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$name" in
  *H200*) slug=h200 ;;
  *H100*) slug=h100 ;;
  *A100*) slug=a100 ;;
  *) slug=$(echo "$name" | tr 'A-Z' 'a-z' | tr -c 'a-z0-9\n' '-' | sed 's/--*/-/g; s/^-//; s/-$//') ;;
esac
case "$slug" in
  h100|h200) platform=platforms/dgx-h100-node.json ;;
  a100) platform=platforms/dgx-a100-superpod.json ;;
  *) platform=platforms/dgx-h100-node.json; echo "note: no platform file for '$name'; using $platform for the peaks" ;;
esac

for bin in dtcal dtrain; do
  if [ ! -x "$build/bin/$bin" ]; then
    echo "== building $bin"
    arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .')
    case "$arch" in ''|*[!0-9]*) arch=90 ;; esac
    cmake -S "$root" -B "$build" -DCMAKE_CUDA_ARCHITECTURES="$arch" >"$out/configure.log" 2>&1 &&
      cmake --build "$build" -j"$(nproc)" --target "$bin" >"$out/build.log" 2>&1 ||
      { tail -30 "$out/build.log" "$out/configure.log" 2>/dev/null; exit 1; }
  fi
done

cal=$out/$slug-measured.json
loop=$out/$slug-closed-loop-small.json
loop16=$out/$slug-closed-loop-small-bf16.json
rm -f "$cal" "$loop" "$loop16" "$out/kernels.log" "$out/validate.log" "$out/validate-bf16.log" # never report an earlier run's figures as this one's
# fp32 first: its memory-bound ops, attention and launch figures are the ones the fp32 closed
# loop below needs (a calibration has one attention figure; a bf16 one would need its own file)
kernels_cmd=("$build/bin/dtcal" kernels --device cuda --precision fp32,bf16 --platform "$platform" -o "$cal")
[ "${QUICK:-0}" = 1 ] && kernels_cmd+=(--quick)
validate_cmd=("$build/bin/dtcal" validate --device cuda --model small --steps 20 --platform "$platform"
              --calibration "$cal" --json "$loop")
validate16_cmd=("$build/bin/dtcal" validate --device cuda --precision bf16 --model small --steps 20
                --platform "$platform" --calibration "$cal" --json "$loop16")

echo "== dtcal kernels on $name"
start=$(date +%s)
"${kernels_cmd[@]}" 2>&1 | tr '\r' '\n' | grep --line-buffered -v '^  gemm [0-9]*/' | tee "$out/kernels.log"
krc=${PIPESTATUS[0]}
kernels_result="exit $krc, $(( $(date +%s) - start )) s"

vrc=1
validate_result="not run (the calibration failed)"
v16rc=1
validate16_result=$validate_result
if [ "$krc" -eq 0 ]; then
  echo "== dtcal validate: GPT-2 124M, one GPU, fp32"
  start=$(date +%s)
  "${validate_cmd[@]}" 2>&1 | tee "$out/validate.log"
  vrc=${PIPESTATUS[0]}
  validate_result="exit $vrc, $(( $(date +%s) - start )) s"
  echo "== dtcal validate: GPT-2 124M, one GPU, bf16 (fp32 master weights)"
  start=$(date +%s)
  "${validate16_cmd[@]}" 2>&1 | tee "$out/validate-bf16.log"
  v16rc=${PIPESTATUS[0]}
  validate16_result="exit $v16rc, $(( $(date +%s) - start )) s"
fi

{
  echo "# GPU calibration run"
  echo
  echo "- date (UTC): $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "- device: $(nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap,clocks.max.sm --format=csv,noheader | head -1)"
  if rev=$(git -C "$root" rev-parse --short HEAD 2>/dev/null); then
    git -C "$root" diff --quiet 2>/dev/null || rev="$rev (with uncommitted changes)"
  else
    rev="unknown (not a git checkout)"
  fi
  echo "- repository revision: $rev"
  echo "- calibration: \`${kernels_cmd[*]}\` ($kernels_result)"
  echo "- closed loop: \`${validate_cmd[*]}\` ($validate_result)"
  echo "- closed loop, bf16: \`${validate16_cmd[*]}\` ($validate16_result)"
} >"$out/provenance.md"

echo
echo "== summary"
python3 - "$cal" "$loop" "$loop16" <<'EOF' | tee -a "$out/provenance.md"
import json, sys
cal, loops = sys.argv[1], sys.argv[2:]
try:
    c = json.load(open(cal))
except Exception as e:
    print(f"no calibration: {e}"); sys.exit(0)
print(f"\n| figure | value |\n|---|---|\n| device | {c['device']} |")
for prec, table in c.get("gemm", {}).items():
    best = max(table, key=lambda r: r["tflops"])
    sq = [r for r in table if r["m"] == r["n"] == r["k"] == 8192]
    print(f"| {prec} GEMM best | {best['tflops']:.1f} TFLOP/s at {best['m']} x {best['n']} x {best['k']} |")
    if sq:
        print(f"| {prec} GEMM 8192^3 | {sq[0]['tflops']:.1f} TFLOP/s |")
for op, v in c.get("ops", {}).items():
    if "gbs" in v:
        print(f"| {op} | {v['gbs']:.0f} GB/s |")
att = c.get("ops", {}).get("attention")
if att:
    print(f"| attention efficiency | {att['efficiency']:.3f} of peak |")
print(f"| launch overhead | {c.get('launch_overhead_us', float('nan')):.1f} us |")
for loop, prec in zip(loops, ["fp32", "bf16"]):
    try:
        v = json.load(open(loop))
        print(f"| GPT-2 124M {prec} step, measured | {v['measured_step_time_s']:.4f} s |")
        print(f"| GPT-2 124M {prec} step, predicted | {v['predicted_step_time_s']:.4f} s |")
        print(f"| {prec} error | {100 * v['error']:+.1f}% |")
    except Exception as e:
        print(f"| {prec} closed loop | not available: {e} |")
EOF
[ "$krc" -eq 0 ] && [ "$vrc" -eq 0 ] && [ "$v16rc" -eq 0 ]
