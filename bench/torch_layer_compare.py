#!/usr/bin/env python3
"""dtsim's per-layer compute beside bench/torch_layer.py's measurement of the same layers.

For each CSV row (name, micro_batch, seq, d_model, heads, layers, gpu_ms_per_layer, ...), a
one-GPU scenario of `layers` MPT layers at that shape (the llmfoundry-mpt7b-h100-512gpu case of
validation/published-runs.json with its model resized, vocabulary 128 so that the embedding and
loss weigh nothing, no data parallelism) runs through `dtsim run --trace`, and the forward and
backward tasks of the trace, per layer, are set beside the measured forward + backward.

    python3 bench/torch_layer_compare.py docs/gpu-runs/2026-11-26-h100-b/torch-layer.csv [DTSIM]
"""
import copy
import csv
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BASE_CASE = "llmfoundry-mpt7b-h100-512gpu"


def base_scenario():
    with open(os.path.join(ROOT, "validation", "published-runs.json")) as f:
        doc = json.load(f)
    cases = doc["cases"] if isinstance(doc, dict) else doc
    for c in cases:
        if c["id"] == BASE_CASE:
            return c["scenario"]
    sys.exit(f"torch_layer_compare: case {BASE_CASE} not in validation/published-runs.json")


def simulated_ms_per_layer(dtsim, scen, tmp):
    path, trace = os.path.join(tmp, "layer.json"), os.path.join(tmp, "trace.json")
    with open(path, "w") as f:
        json.dump(scen, f)
    subprocess.run([dtsim, "run", path, "--trace", trace], check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    with open(trace) as f:
        t = json.load(f)
    events = t["traceEvents"] if isinstance(t, dict) else t
    us = sum(e["dur"] for e in events if e.get("ph") == "X" and e.get("name") in ("fwd", "bwd"))
    return us / 1e3 / scen["model"]["num_layers"]


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    dtsim = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "build", "bin", "dtsim")
    base = base_scenario()
    print("name,micro_batch,seq,d_model,heads,measured_ms_per_layer,dtsim_ms_per_layer,dtsim_over_measured")
    with open(sys.argv[1]) as f, tempfile.TemporaryDirectory() as tmp:
        for row in csv.DictReader(r for r in f if not r.startswith("#")):
            s = copy.deepcopy(base)
            s["name"] = row["name"]
            m = s["model"]
            m.update(num_layers=int(row["layers"]), hidden_size=int(row["d_model"]),
                     num_attention_heads=int(row["heads"]), seq_length=int(row["seq"]), vocab_size=128)
            m.pop("ffn_hidden_size", None)  # 4 d, as the measured layer's MLP
            m.pop("num_query_groups", None)
            b = int(row["micro_batch"])
            s["training"].update(global_batch_size=b, micro_batch_size=b)
            s["parallel"].update(data_parallel_size=1, zero_stage=0)
            sim = simulated_ms_per_layer(dtsim, s, tmp)
            meas = float(row["gpu_ms_per_layer"])
            print(f"{row['name']},{b},{row['seq']},{row['d_model']},{row['heads']},{meas:.3f},{sim:.3f},{sim / meas:.3f}")


if __name__ == "__main__":
    main()
