#!/usr/bin/env bash
# dtsim run and sweep extend a long analytic step from two short replays where the replay shows it
# periodic (sim/run_fold.c), and --full replays every micro-batch: GPT-3 175B at a global batch
# of 15,360 (60,000 tasks), each figure of the folded result against the full replay (within
# 1e-9, the sums' rounding); the summary and the JSON say which replays were extended, and only
# then, and a step replayed in full says why; ZeRO-3 under a pipeline, which settles late, folds
# only a long step; --trace draws every task, so it replays in full; a sweep's rows equal with and
# without --full.
#   run_fold.sh DTSIM REPO_ROOT
set -u
dtsim=$1 root=$2
s=$root/scenarios/gpt3-175b-1024-a100.json
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
big="--set training.global_batch_size=15360"
"$dtsim" run "$s" $big --json "$work/fold.json" >"$work/fold.out" 2>&1 || fail=1
"$dtsim" run "$s" $big --full --json "$work/full.json" >"$work/full.out" 2>&1 || fail=1
"$dtsim" run "$s" --trace "$work/trace.json" --json "$work/trace_run.json" >/dev/null 2>&1 || fail=1
grep -q 'replays of [0-9]* and [0-9]* micro-batches, shown periodic and extended' "$work/fold.out" ||
  { echo "the folded summary does not say so:"; cat "$work/fold.out"; fail=1; }
if grep -q 'replays of\|every micro-batch replayed' "$work/full.out"; then echo "--full says it folded or tried"; fail=1; fi
# ZeRO-3 reducing every backward under 8 stages (DeepSpeed's rule) settles late: its attempts
# start at eight depths, so at 96 micro-batches it replays in full and says why; at 960 it folds
z3="--set parallel.zero_stage=3 --set parallel.virtual_pipeline_model_parallel_size=1 --set parallel.schedule=\"1f1b\""
"$dtsim" run "$s" $z3 >"$work/z3.out" 2>&1 || fail=1
grep -q 'every micro-batch replayed: 96 micro-batches, fewer than two short replays take' "$work/z3.out" ||
  { echo "ZeRO-3 under a pipeline does not say why it replayed in full:"; tail -2 "$work/z3.out"; fail=1; }
"$dtsim" run "$s" $z3 $big --json "$work/z3fold.json" >/dev/null 2>&1 || fail=1
"$dtsim" run "$s" $z3 $big --full --json "$work/z3full.json" >/dev/null 2>&1 || fail=1
"$dtsim" run "$s" --set training.global_batch_size=256 >"$work/short.out" 2>&1 || fail=1
grep -q 'every micro-batch replayed: [0-9]* micro-batches, fewer than two short replays take' "$work/short.out" ||
  { echo "a short step does not say why it replayed in full:"; tail -2 "$work/short.out"; fail=1; }
"$dtsim" sweep "$s" --vary training.global_batch_size=1536,15360 --out "$work/sw" >/dev/null 2>&1 || fail=1
"$dtsim" sweep "$s" --vary training.global_batch_size=1536,15360 --full --out "$work/swf" >/dev/null 2>&1 || fail=1
python3 - "$work" <<'PY' || fail=1
import json, sys
w = sys.argv[1]
fold, full = json.load(open(f"{w}/fold.json")), json.load(open(f"{w}/full.json"))
ok = True
def close(name, a, b, scale=None):
    # scale: what each summed term is of the order of (the overlap cost sums differences of times
    # near the step's own: its rounding is the step's, not the small sum's)
    global ok
    if abs(a - b) > 1e-9 * max(abs(b) if scale is None else scale, 1e-12):
        print(f"{name}: folded {a!r}, full {b!r}")
        ok = False
m = fold.get("folded_from_micro_batches")
if not (isinstance(m, list) and len(m) == 2 and 0 < m[0] < m[1]):
    print("no folded_from_micro_batches in the folded run:", m); ok = False
for key in ("folded_from_micro_batches",):
    if key in full or key in json.load(open(f"{w}/trace_run.json")):
        print(f"{key} in a full replay"); ok = False
for k in ("step_time_s", "tokens_per_s", "mfu", "hfu"):
    close(k, fold[k], full[k])
close("overlap_cost_s", fold["overlap_cost_s"], full["overlap_cost_s"], full["step_time_s"])
for k in ("mean", "max"):
    close("bubble " + k, fold["bubble_fraction"][k], full["bubble_fraction"][k])
for kind, v in full["comm_s"].items():
    for part in ("total", "exposed"):
        close(f"comm {kind} {part}", fold["comm_s"][kind][part], v[part])
close("memory", fold["memory_gib"]["total"], full["memory_gib"]["total"])
z3f, z3 = json.load(open(f"{w}/z3fold.json")), json.load(open(f"{w}/z3full.json"))
if "folded_from_micro_batches" not in z3f:
    print("ZeRO-3 under a pipeline at 960 micro-batches did not fold"); ok = False
for k in ("step_time_s", "mfu"):
    close("ZeRO-3 " + k, z3f[k], z3[k])
close("ZeRO-3 overlap_cost_s", z3f["overlap_cost_s"], z3["overlap_cost_s"], z3["step_time_s"])
for kind, v in z3["comm_s"].items():
    close(f"ZeRO-3 comm {kind} exposed", z3f["comm_s"][kind]["exposed"], v["exposed"])
a, b = json.load(open(f"{w}/sw/sweep.json")), json.load(open(f"{w}/swf/sweep.json"))
if len(a["rows"]) != 2 or len(b["rows"]) != 2:
    print("sweeps of", len(a["rows"]), "and", len(b["rows"]), "rows, not 2"); ok = False
for ra, rb in zip(a["rows"], b["rows"]):
    close("sweep step", ra["step_time_s"], rb["step_time_s"])
    if set(ra) != set(rb):
        print("sweep columns differ:", set(ra) ^ set(rb)); ok = False
sys.exit(0 if ok else 1)
PY
exit $fail
