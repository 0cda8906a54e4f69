#!/usr/bin/env bash
# Re-predicts this run's bf16 closed loop with the simulator of the checkout, no GPU needed:
# dtcal validate runs a stand-in dtrain that reports the recorded step time (the median of
# closed-loop-small-bf16.json) and the recorded per-op profile (profile-bf16-b8.json.gz, a
# 4-step run of the same configuration on the same GPU), then predicts from the recorded
# calibration as on the GPU.
#   docs/gpu-runs/2026-11-26-h200/repredict.sh [BUILD_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
bin=$(realpath "${1:-$root/build}")/bin
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$bin/dtcal" "$work/dtcal" # dtcal runs the dtrain beside it
gunzip -c "$here/profile-bf16-b8.json.gz" >"$work/profile.json"
step_s=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['measured_step_time_s'])" \
           "$here/closed-loop-small-bf16.json")
cat >"$work/dtrain" <<EOF
#!/usr/bin/env bash
log= prof=
while [ \$# -gt 0 ]; do case \$1 in --log-json) log=\$2; shift;; --profile) prof=\$2; shift;; esac; shift; done
# dtcal validate times the step in a run without --profile and takes the op table from a
# profiled one: each gets what it asks for
[ -z "\$log" ] || for i in \$(seq 1 20); do echo "{\"step\":\$i,\"step_time_s\":$step_s}"; done >"\$log"
[ -z "\$prof" ] || cp "$work/profile.json" "\$prof"
EOF
chmod +x "$work/dtrain"
cd "$root"
"$work/dtcal" validate --device cuda --precision bf16 --model small --steps 20 \
  --platform platforms/dgx-h100-node.json --calibration "$here/h200-measured.json"
