#!/usr/bin/env python3
"""dtsim against llm-foundry's own H100 and A100 tables, split by activation checkpointing.

The published case llmfoundry-mpt7b-h100-512gpu is dtsim's largest error. The same source has
a table of 8-64 GPU runs of the same family ("H100 80GB BF16" in
scripts/train/benchmarking/README.md of mosaicml/llm-foundry; rows below copied with their
column 'Throughput (T/s)'), some with activation checkpointing and some without. This script
predicts each row from the published 7B case's scenario (same platform, precision, FSDP
FULL_SHARD = ZeRO-3, fused loss, flash attention) with the row's model, sequence, GPUs,
micro-batch, accumulation and checkpointing, and prints the errors grouped by checkpointing.
It is a check of where the error sits, never a fit: nothing here feeds back into dtsim.

The rows ran Triton's attention, not FlashAttention-2 (the table's commit b2a43a147: sweep.sh
passes no --attn_impl, submit_benchmarks.py defaults to 'triton' and installs '.[gpu]',
flash-attn 1.0.9); this script predicts them with the case's FlashAttention-2 rates all the
same, so the error's growth with sequence length is that kernel's, which no calibration here
has measured (docs/validation.md).

Usage: bench/llmfoundry_checkpointing_split.py [BUILD_DIR]   (default: build)
"""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# MPT sizes from the yamls the benchmark names (scripts/train/yamls/pretrain/mpt-*.yaml):
# d_model, n_heads, n_layers (expansion_ratio 4, vocab 50368)
DIMS = {"1b": (2048, 16, 24), "3b": (2560, 20, 32), "7b": (4096, 32, 32), "13b": (5120, 40, 40),
        "30b": (7168, 56, 48), "70b": (8192, 64, 80)}
# model, seq, GPUs, micro-batch, grad accum, activation checkpointing, published tokens/s
H100_ROWS = [("7b", 2048, 8, 6, 1, False, 85144), ("7b", 1024, 8, 64, 2, True, 81628),
        ("7b", 4096, 8, 16, 2, True, 68893), ("7b", 8192, 8, 8, 2, True, 55481),
        ("3b", 2048, 16, 10, 3, False, 386285), ("3b", 4096, 8, 5, 6, False, 167712),
        ("3b", 1024, 8, 20, 6, False, 216369), ("3b", 8192, 8, 3, 6, False, 132626),
        ("1b", 2048, 8, 14, 1, False, 363645), ("1b", 2048, 64, 20, 1, False, 2841754),
        ("13b", 2048, 8, 2, 1, False, 38336), ("13b", 2048, 64, 2, 1, False, 307209),
        ("13b", 1024, 8, 40, 3, True, 44019), ("13b", 4096, 8, 10, 3, True, 37740),
        ("30b", 2048, 16, 10, 3, True, 36209), ("30b", 2048, 8, 3, 21, True, 16022),
        ("30b", 2048, 32, 14, 3, True, 73860)]
# The same README's table "A100 80GB with 1600 Gbps node-node interconnect (RoCE)", read at
# mosaicml/llm-foundry commit 061f2c7ce64e655100286584a7629e2a09f827ba (2026-11-27): the 8-GPU
# amp_bf16 rows of the same models (precision amp_bf16, FSDP FULL_SHARD, mixed precision DEFAULT,
# as the H100 rows). Which attention kernel they ran is not stated there.
A100_ROWS = [("7b", 2048, 8, 6, 2, False, 37130), ("7b", 1024, 8, 64, 2, True, 34857),
             ("7b", 4096, 8, 16, 2, True, 29472), ("13b", 2048, 8, 2, 3, False, 18097),
             ("13b", 1024, 8, 40, 3, True, 18647), ("13b", 4096, 8, 10, 3, True, 16482),
             ("3b", 2048, 8, 10, 2, False, 86491), ("3b", 4096, 8, 5, 6, False, 75658),
             ("3b", 1024, 8, 20, 6, False, 92643), ("1b", 2048, 8, 14, 4, False, 164109),
             ("1b", 512, 8, 56, 4, False, 185186), ("30b", 2048, 8, 3, 21, True, 7330),
             ("30b", 1024, 8, 6, 21, True, 7571)]
TABLES = [("H100 80GB BF16", "platforms/dgx-h100-superpod.json", H100_ROWS),
          ("A100 80GB (RoCE)", "platforms/dgx-a100-superpod.json", A100_ROWS)]


def main():
    dtsim = os.path.join(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build"), "bin", "dtsim")
    if not os.access(dtsim, os.X_OK):
        sys.exit("llmfoundry_checkpointing_split: %s not found (build first, or give BUILD_DIR)" % dtsim)
    with open(os.path.join(ROOT, "validation", "published-runs.json")) as f:
        cases = json.load(f)["cases"]
    base = next(c["scenario"] for c in cases if c["id"] == "llmfoundry-mpt7b-h100-512gpu")
    with tempfile.TemporaryDirectory() as tmp:
        for title, platform, rows in TABLES:
            predict_table(dtsim, base, title, platform, rows, os.path.join(tmp, "row.json"))


def predict(dtsim, base, platform, row, path, parallel=None, sets=()):
    """dtsim's tokens/s for one row (model, seq, GPUs, micro-batch, accumulation, checkpointing)
    on the published case's scenario base; parallel: more keys of the row's layout; sets: dtsim
    run --set overrides."""
    model, seq, gpus, mb, ga, ckpt = row
    s = json.loads(json.dumps(base))
    h, heads, layers = DIMS[model]
    s["name"] = "llmfoundry-mpt%s-%d-%dgpu" % (model, seq, gpus)
    s["platform"] = platform
    s["model"].update(num_layers=layers, hidden_size=h, num_attention_heads=heads,
                      num_query_groups=heads, ffn_hidden_size=4 * h, seq_length=seq)
    s["training"].update(global_batch_size=mb * ga * gpus, micro_batch_size=mb,
                         recompute_granularity="full" if ckpt else "none")
    s["parallel"]["data_parallel_size"] = gpus
    s["parallel"].update(parallel or {})
    with open(path, "w") as f:
        json.dump(s, f)
    cmd = [dtsim, "run", path, "--json", "-"]
    for kv in sets:
        cmd += ["--set", kv]
    run = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if run.returncode not in (0, 3):
        sys.exit("dtsim failed on %s: %s" % (s["name"], run.stderr.strip()))
    return json.loads(run.stdout)["tokens_per_s"]


def predict_table(dtsim, base, title, platform, rows, path):
    errors = {True: [], False: []}
    print("%s (%s)" % (title, platform))
    print("model  seq gpus  mb  ga  checkpointing  published tok/s  dtsim tok/s   error")
    for model, seq, gpus, mb, ga, ckpt, published in rows:
        predicted = predict(dtsim, base, platform, (model, seq, gpus, mb, ga, ckpt), path)
        err = predicted / published - 1
        errors[ckpt].append(err)
        print("%5s %5d %4d %3d %3d  %-13s %15d %12.0f %+7.1f%%" %
              (model, seq, gpus, mb, ga, "full" if ckpt else "none", published, predicted, 100 * err))
    for ckpt in (True, False):
        e = errors[ckpt]
        print("checkpointing %-4s: %2d rows, mean error %+.1f%%, from %+.1f%% to %+.1f%%" %
              ("full" if ckpt else "none", len(e), 100 * sum(e) / len(e), 100 * min(e), 100 * max(e)))
    print()


if __name__ == "__main__":
    main()
