#!/usr/bin/env python3
"""dtsim against NVIDIA NeMo's FP8 pre-training table on DGX-H100 (NeMo 24.07 container).

The rows of docs/source/performance/performance_summary.md in NVIDIA/NeMo at commit
070a0bb168d405d653b9734c0017cf5078e77c0d ("Pretraining", FP8, System: DGX-H100), each predicted
with the settings Megatron-Core's recipes of the time run with and the table does not state:
sequence parallelism and TP communication overlap with TP > 1, the distributed optimizer with
gradient-reduce and parameter-gather overlap, overlapped pipeline transfers, TE's fused
attention, fused cross entropy, no recomputation, FP8 with delayed scaling (TE 1.x's recipe; NeMo
switched to current scaling later). Prints published and predicted tokens/s per GPU and the
error of each row, then the mean. A check, never a fit: nothing here feeds back into dtsim.

Usage: bench/nemo_fp8_rows.py [BUILD_DIR] [FP8_RECIPE]   (defaults: build, delayed)
"""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# name, model file, GPUs, global batch, micro-batch, sequence, TP, PP, CP, VP, published tokens/s/GPU
ROWS = [("GPT3-175B", "models/gpt3-175b.json", 128, 256, 1, 2048, 4, 8, 1, 6, 726),
        ("GPT3-175B", "models/gpt3-175b.json", 512, 2048, 2, 2048, 4, 8, 1, 6, 782),
        ("LLAMA2-7B", "models/llama2-7b.json", 8, 128, 1, 4096, 1, 1, 1, 1, 16847),
        ("LLAMA2-13B", "models/llama2-13b.json", 16, 128, 1, 4096, 1, 4, 1, 10, 8646),
        ("LLAMA2-70B", "models/llama2-70b.json", 64, 128, 1, 4096, 4, 4, 1, 20, 1707),
        ("LLAMA3-8B", "models/llama3-8b.json", 8, 128, 1, 8192, 1, 1, 2, 1, 12036),
        ("LLAMA3-70B", "models/llama3-70b.json", 64, 128, 1, 8192, 4, 4, 2, 5, 1533)]


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build")
    recipe = sys.argv[2] if len(sys.argv) > 2 else "delayed"
    dtsim = os.path.join(build, "bin", "dtsim")
    if not os.access(dtsim, os.X_OK):
        sys.exit("nemo_fp8_rows: %s not found (build first, or give BUILD_DIR)" % dtsim)
    errors = []
    print("model        GPUs  TP PP CP VP  published  dtsim tok/s/GPU   error  memory GiB")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "row.json")
        for name, model, gpus, gbs, mbs, seq, tp, pp, cp, vp, published in ROWS:
            s = {"name": "nemo-%s-%d" % (name.lower(), gpus), "platform": "platforms/dgx-h100-superpod.json",
                 "model": {"from": model, "seq_length": seq, "attention": "flash", "attention_backend": "fused",
                           "cross_entropy_loss_fusion": True},
                 "training": {"global_batch_size": gbs, "micro_batch_size": mbs, "precision": "fp8",
                              "fp8_recipe": recipe, "recompute_granularity": "none"},
                 "parallel": {"tensor_model_parallel_size": tp, "pipeline_model_parallel_size": pp,
                              "data_parallel_size": gpus // (tp * pp * cp), "context_parallel_size": cp,
                              "virtual_pipeline_model_parallel_size": vp,
                              "schedule": "interleaved" if vp > 1 else "1f1b", "sequence_parallel": tp > 1,
                              "zero_stage": 1, "overlap_grad_reduce": True, "overlap_param_gather": True,
                              "overlap_p2p_comm": True, "tp_comm_overlap": tp > 1}}
            with open(path, "w") as f:
                json.dump(s, f)
            run = subprocess.run([dtsim, "run", path, "--json", "-"], capture_output=True, text=True, cwd=ROOT)
            if run.returncode not in (0, 3):
                sys.exit("dtsim failed on %s: %s" % (s["name"], run.stderr.strip()))
            r = json.loads(run.stdout)
            predicted = r["tokens_per_s"] / r["gpus"]
            err = predicted / published - 1
            errors.append(err)
            mem = r["memory_gib"]
            print("%-11s %5d %3d %2d %2d %2d %10d %16.0f %+7.1f%% %6.1f%s" %
                  (name, gpus, tp, pp, cp, vp, published, predicted, 100 * err, mem["total"],
                   " (over the GPU's memory)" if mem.get("oom") else ""))
    print("fp8_recipe %s: %d rows, mean error %+.1f%%, mean absolute %.1f%%" %
          (recipe, len(errors), 100 * sum(errors) / len(errors), 100 * sum(abs(e) for e in errors) / len(errors)))


if __name__ == "__main__":
    main()
