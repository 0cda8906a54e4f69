#!/usr/bin/env python3
"""dtsim against llm-foundry's own weak-scaling series: the same work a GPU at 128, 256 and 512 H100.

The table "H100 80GB BF16 (Large Scale, >= 128 GPUs)" of mosaicml/llm-foundry
scripts/train/benchmarking/README.md @ 5e85bd62 (2024-01-06), the table three published cases come
from, runs each MPT size at 128, 256 and 512 GPUs with the micro-batch a GPU fixed and no gradient
accumulation: the work a GPU is the same at every size and only the FSDP group grows. Its step
time = global batch x 2,048 / published tokens/s. What the step gains from 128 to 512 GPUs is
what costs more with the group (its collectives' latency, their bandwidth across more of the
fabric, the wait for the slowest rank); this script prints it beside dtsim's, per model and per
collective call of the step (FULL_SHARD: a gather for each layer's forward, one for its backward,
which serves a recomputation too, and a reduce-scatter; SHARD_GRAD_OP, the 1B and 3B rows: one
gather a micro-batch and a reduce-scatter). It is a check of where the error sits, never a fit:
nothing here feeds back into dtsim.

Each row is predicted from the published 7B case's scenario (framework fsdp, fp32 reduction,
fused loss, FlashAttention-2 rates; the 13B and 30B rows ran Triton's attention, sweep.py at the
same commit) with the row's model, GPUs, micro-batch and checkpointing.

Usage: bench/llmfoundry_weak_scaling.py [BUILD_DIR] [--set PATH=VALUE]...   (default: build;
--set goes to every dtsim run, e.g. a platform latency to see what it moves)
"""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llmfoundry_checkpointing_split import DIMS, ROOT, predict  # noqa: E402

# model, micro-batch, activation checkpointing, sharding, {GPUs: published tokens/s}
SERIES = [("70b", 8, True, "FULL_SHARD", {512: 515636, 256: 265149, 128: 135490}),
          ("30b", 8, True, "FULL_SHARD", {512: 1083366, 256: 550022, 128: 281491}),
          ("13b", 16, True, "FULL_SHARD", {512: 2535811, 256: 1277214, 128: 650264}),
          ("7b", 6, False, "FULL_SHARD", {512: 4951479, 256: 2590548, 128: 1340830}),
          ("3b", 8, False, "SHARD_GRAD_OP", {512: 11092218, 256: 5829686, 128: 2998098}),
          ("1b", 12, False, "SHARD_GRAD_OP", {512: 20396905, 256: 10894207, 128: 5647854})]
SEQ = 2048


def main():
    args = sys.argv[1:]
    sets = [args[i + 1] for i in range(len(args) - 1) if args[i] == "--set"]
    plain = [a for i, a in enumerate(args) if a != "--set" and (i == 0 or args[i - 1] != "--set")]
    dtsim = os.path.join(plain[0] if plain else os.path.join(ROOT, "build"), "bin", "dtsim")
    if not os.access(dtsim, os.X_OK):
        sys.exit("llmfoundry_weak_scaling: %s not found (build first, or give BUILD_DIR)" % dtsim)
    with open(os.path.join(ROOT, "validation", "published-runs.json")) as f:
        base = next(c["scenario"] for c in json.load(f)["cases"] if c["id"] == "llmfoundry-mpt7b-h100-512gpu")
    platform = "platforms/dgx-h100-superpod.json"
    print("H100 80GB BF16, Large Scale (%s)%s" % (platform, "; --set " + " ".join(sets) if sets else ""))
    print("model  gpus  published step s  dtsim step s   error | growth from 128 GPUs: published  dtsim"
          "  | missing ms a call")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "row.json")
        for model, mb, ckpt, sharding, rows in SERIES:
            layers = DIMS[model][2]
            calls = layers * (3 if sharding == "FULL_SHARD" else 2)
            parallel = {"fsdp_reshard_after_forward": "always" if sharding == "FULL_SHARD" else "never"}
            steps = {}
            for gpus in sorted(rows):
                tokens = mb * gpus * SEQ
                predicted = predict(dtsim, base, platform, (model, SEQ, gpus, mb, 1, ckpt), path, parallel, sets)
                steps[gpus] = (tokens / rows[gpus], tokens / predicted)
            for gpus in sorted(rows):
                pub, sim = steps[gpus]
                pub0, sim0 = steps[min(rows)]
                missing = ((pub - pub0) - (sim - sim0)) / calls * 1e3
                # error as the published set scores tokens/s: predicted / published - 1
                print("%5s %5d %17.3f %13.3f %+7.1f%% | %+29.1f%% %+6.1f%% | %8.2f" %
                      (model, gpus, pub, sim, 100 * (pub / sim - 1), 100 * (pub / pub0 - 1), 100 * (sim / sim0 - 1),
                       missing))


if __name__ == "__main__":
    main()
