#!/usr/bin/env python3
"""Why a fixed depth cannot fold ZeRO-3: extrapolation from two pipeline depths against the replay.

`dtsim plan` evaluates a layout of m micro-batches per pipeline from replays of m1 and m1 plus
one period, extrapolated to m, once the second shows the step periodic from m1 on, task by task
(run_scenario_folded, sim/run_fold.c; the certificate, sim/replay/periodic.h). Before that
certificate it folded at a fixed m1 = 2 pipeline depths, and not under ZeRO-3. This script shows
what a fixed depth does to ZeRO-3, on GPT-3 175B / 1,024 A100
(scenarios/gpt3-175b-1024-a100.json): for every fitting ZeRO-3 layout of the search whose two
replays at m1 = 2 pipeline depths would be shorter than the full one (2 m1 + period < m), it runs
the two short steps with `dtsim run`, extrapolates, and compares with the search's full replay.
It prints each layout whose extrapolation is off by more than 1e-6 (the plan JSON's rounding is
1e-9), with what a period adds to the step just after m1 and just before m (a replay at m minus
one period): where these differ, the step is not yet affine in m at 2 pipeline depths, and the
extrapolation takes the early slope for the whole run. How long that transient lasts depends on
the layout (the stages settle into one period one by one), so no fixed depth makes the fold
exact; the certificate refuses such pairs (tests/plan/test_fold.c). It also prints the comm
stream's share of the full step for the exact and the off layouts (dp + zero total over the step
time).

Usage: bench/zero3_fold_check.py [BUILD_DIR]   (default: build)
"""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCENARIO = os.path.join(ROOT, "scenarios", "gpt3-175b-1024-a100.json")
FOLD_DEPTHS = 2  # the fixed depth the fold used before its certificate


def run(dtsim, layout, global_batch):
    p, t = layout["parallel"], layout["training"]
    sets = {"parallel.tensor_model_parallel_size": p["tensor_model_parallel_size"],
            "parallel.pipeline_model_parallel_size": p["pipeline_model_parallel_size"],
            "parallel.data_parallel_size": p["data_parallel_size"],
            "parallel.context_parallel_size": p["context_parallel_size"],
            "parallel.expert_model_parallel_size": p["expert_model_parallel_size"],
            "parallel.virtual_pipeline_model_parallel_size": p["virtual_pipeline_model_parallel_size"],
            "parallel.sequence_parallel": json.dumps(p["sequence_parallel"]),
            "parallel.zero_stage": 3, "parallel.schedule": p["schedule"],
            "training.micro_batch_size": t["micro_batch_size"],
            "training.recompute_granularity": t["recompute_granularity"],
            "training.global_batch_size": global_batch}
    args = [dtsim, "run", SCENARIO, "--json", "-", "--quiet"]
    for k, v in sets.items():
        args += ["--set", "%s=%s" % (k, v)]
    out = subprocess.run(args, capture_output=True, text=True)
    if out.returncode not in (0, 3):
        sys.exit("zero3_fold_check: %s failed: %s" % (" ".join(args), out.stderr.strip()))
    return json.loads(out.stdout)


def main():
    dtsim = os.path.join(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build"), "bin", "dtsim")
    if not os.access(dtsim, os.X_OK):
        sys.exit("zero3_fold_check: %s not found (build first, or give BUILD_DIR)" % dtsim)
    with tempfile.TemporaryDirectory() as tmp:
        plan_json = os.path.join(tmp, "plan.json")
        subprocess.run([dtsim, "plan", SCENARIO, "--top", "100000", "--json", plan_json],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(plan_json) as f:
            layouts = json.load(f)["layouts"]
    zero3 = [l for l in layouts if l["parallel"]["zero_stage"] == 3]
    tested = off = 0
    worst = 0.0
    busy_off, busy_exact = [], []
    print("layout                                         m  extrapolated  full replay    error  "
          "period at m1  period at m")
    for l in zero3:
        p, t = l["parallel"], l["training"]
        pp, dp, mb = p["pipeline_model_parallel_size"], p["data_parallel_size"], t["micro_batch_size"]
        v = max(1, p["virtual_pipeline_model_parallel_size"])
        m = t["global_batch_size"] // (mb * dp)
        period = pp if v > 1 else 1
        m1 = -(-FOLD_DEPTHS * pp * v // period) * period
        if 2 * m1 + period >= m:  # the fold would replay in full anyway
            continue
        a, b = run(dtsim, l, m1 * mb * dp), run(dtsim, l, (m1 + period) * mb * dp)
        est = a["step_time_s"] + (m - m1) / period * (b["step_time_s"] - a["step_time_s"])
        full = l["step_time_s"]
        err = est / full - 1
        tested += 1
        worst = max(worst, abs(err))
        at_m = run(dtsim, l, t["global_batch_size"])  # the comm stream's share of the full step
        busy = (at_m["comm_s"]["dp"]["total"] + at_m["comm_s"]["zero"]["total"]) / at_m["step_time_s"]
        (busy_off if abs(err) > 1e-6 else busy_exact).append(busy)
        if abs(err) > 1e-6:
            off += 1
            late = full - run(dtsim, l, (m - period) * mb * dp)["step_time_s"]
            name = "TP %d PP %d DP %d VPP %d SP %d mb %d %s" % (p["tensor_model_parallel_size"], pp, dp, v,
                                                                 p["sequence_parallel"], mb, t["recompute_granularity"])
            print("%-44s %4d %11.4f s %11.4f s %+7.2f%%  %8.4f s %8.4f s" % (name, m, est, full, 100 * err,
                                                                         b["step_time_s"] - a["step_time_s"], late))
    print("%d fitting ZeRO-3 layouts, %d the fold's size rule would fold; %d of those off by more than 1e-6 "
          "(worst %.2f%%)" % (len(zero3), tested, off, 100 * worst))
    for what, b in (("exact", busy_exact), ("off", busy_off)):
        if b:
            print("comm stream (dp + zero) busy over the full step, %s: %.1f-%.1f%%" % (what, 100 * min(b), 100 * max(b)))


if __name__ == "__main__":
    main()
