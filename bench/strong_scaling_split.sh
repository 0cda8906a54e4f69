#!/usr/bin/env bash
# Splits step time over a strong-scaling series (same model and batch, more GPUs) into a per-step
# part a and a per-micro-batch part b, step = a + b m (m: micro-batches per pipeline), for the
# published measurements and for dtsim's predictions of the same runs, so that an error can be
# told apart: b wrong is a per-micro-batch cost (GEMMs, TP, pipeline transfers), a wrong is what
# a step pays once (DP reduction, optimizer, embedding sum, gradient norm, pipeline fill, the
# slowest device). Series: the Megatron-LM baseline rows of MegaScale (NSDI'24, Table 2): GPT-3
# 175B, TP 8 x PP 8, interleaved, batch 768 on 256 and 1,024 A100 and batch 6,144 on 3,072 and
# 12,288 A100; and MT-NLG 530B (Smith et al. 2022, Sec. 2.4), TP 8 x PP 35 on DeepSpeed's pipeline
# engine, batch 1,920 on 2,240 and 3,360 A100 (validation/published-runs.json holds the cases and
# their assumptions).
# Usage: bench/strong_scaling_split.sh [BUILD_DIR]   (default: build)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
python3 - "$root" "$build/bin/dtsim" <<'PY'
import json, os, subprocess, sys, tempfile
root, dtsim = sys.argv[1], sys.argv[2]
cases = {c["id"]: c for c in json.load(open(f"{root}/validation/published-runs.json"))["cases"]}
series = [("batch 768", "megascale-megatron-175b-256gpu", "megascale-megatron-175b-1024gpu"),
          ("batch 6144", "megascale-megatron-175b-3072gpu", "megascale-megatron-175b-12288gpu"),
          ("MT-NLG", "mtnlg-530b-2240gpu", "mtnlg-530b-3360gpu")]

def micro_batches(c):
    t, p = c["scenario"]["training"], c["scenario"]["parallel"]
    return t["global_batch_size"] // (t["micro_batch_size"] * p["data_parallel_size"])

def predicted(c):
    with tempfile.NamedTemporaryFile("w", suffix=".json", dir=f"{root}/validation", delete=False) as f:
        json.dump(c["scenario"], f)
    try:
        # exit 3 (out of memory) still times the step: the published runs fit, dtsim's memory
        # model is not what this splits
        out = subprocess.run([dtsim, "run", f.name, "--json", "-"], capture_output=True, text=True)
        if out.returncode not in (0, 3):
            sys.exit(f"dtsim run {c['id']}: exit {out.returncode}: {out.stderr.strip()}")
        return json.loads(out.stdout)["step_time_s"]
    finally:
        os.unlink(f.name)

print("%-11s %-9s %9s %9s %9s %9s %9s %9s" % ("series", "", "step 1", "step 2", "m 1", "m 2", "a (s)", "b (s)"))
for name, one, two in series:
    c1, c2 = cases[one], cases[two]
    m1, m2 = micro_batches(c1), micro_batches(c2)
    for what, t1, t2 in (("published", c1["expect"]["step_time_s"], c2["expect"]["step_time_s"]),
                         ("dtsim", predicted(c1), predicted(c2))):
        b = (t1 - t2) / (m1 - m2)
        a = t2 - b * m2
        print("%-11s %-9s %9.3f %9.3f %9d %9d %9.3f %9.4f" % (name, what, t1, t2, m1, m2, a, b))
PY
