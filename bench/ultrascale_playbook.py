#!/usr/bin/env python3
"""Writes the Ultra-Scale Playbook's measured nanotron runs as `dtsim validate` cases.

Hugging Face's Ultra-Scale Playbook (2025) plots about 1,750 measured nanotron training steps of
Llama-like models on 1 to 64 nodes of 8 H100; each point's hover text holds its layout and its
measured MFU, tokens/s/GPU and memory. This script reads that page's data (the Space's
`assets/data/benchmarks/benchmarks_interactive.html`, mirrored at vinjn/nanotron-ultrascale-playbook
@ 924e4d0b) and writes each measured run on the chosen node counts as a case whose expected
figure is its tokens/s (tokens/s/GPU x GPUs), with nothing taken from a prediction.

What each case says and where it comes from (docs/validation.md, "The Ultra-Scale Playbook"):
  - models: the generator's table (huggingface/nanotron @ 2411b022, scripts/scaling_benchmarks.py,
    model_configs: layers, hidden, heads, intermediate; the same sizes at nouamane/bench2, whose
    generator reads the configurations it ran from an unpublished configs.pkl; the page's "80B" is
    its "70B"), full multi-head attention
    (NUM_KEY_VALUE_HEADS None), tied embeddings below intermediate 10,000 (1B and 3B), vocabulary
    131,072, sequence 4,096; SwiGLU, RMSNorm, RoPE (is_llama_config), flash-attn 2;
  - training: bf16 with fp32 accumulation (ACCUMULATE_GRAD_IN_FP32), AdamW, no recomputation,
    the row's micro-batch and accumulation;
  - layout: the row's DP, TP, PP and ZeRO stage; tp_mode REDUCE_SCATTER (sequence parallelism),
    1F1B (the base config's pp_engine), framework nanotron (ZeRO 0 overlaps DDP's buckets, ZeRO 1
    all-reduces after the backward);
  - platform: one node is platforms/dgx-h100-node.json (8 H100 on NVLink with NVLS: the same
    page's pp_comm_bandwidth.html measured 436 GB/s all-reduce bus bandwidth at 256 MB on one node,
    past what a ring over NVLink carries).
Rows measured on more nodes ran on an EFA fabric whose measured bandwidth falls with the node
count (362 GB/s at 2 nodes, 160 at 4, 33 at 64), which no dtsim platform models: they are left out
unless asked for with --nodes, and then run on platforms/dgx-h100-superpod.json cut to that many
nodes (8 x 400 Gb/s a node; at 2 nodes near the page's measured bus bandwidth, beyond that not).

Usage: bench/ultrascale_playbook.py HTML [--nodes 1] [--out FILE]
  HTML: benchmarks_interactive.html, e.g. from `fetch github:vinjn/nanotron-ultrascale-playbook`:
        git -C <mirror> show 924e4d0b:assets/data/benchmarks/benchmarks_interactive.html > bi.html
"""
import argparse
import json
import re
import sys

SOURCE_REPO = "vinjn/nanotron-ultrascale-playbook @ 924e4d0b, assets/data/benchmarks/benchmarks_interactive.html"
# huggingface/nanotron @ 2411b022, scripts/scaling_benchmarks.py, model_configs:
# (layers, hidden_size, heads, intermediate_size); the page's subplots in this order
MODELS = {"1B": (16, 2048, 32, 8192), "3B": (28, 3072, 32, 8192), "8B": (32, 4096, 32, 14336),
          "80B": (80, 8192, 64, 28672)}
SUBPLOT_MODEL = {"x": "1B", "x2": "3B", "x3": "8B", "x4": "80B"}
SEQ, VOCAB = 4096, 131072


def plotly_data(path):
    text = open(path, encoding="utf-8").read()
    at = text.find("Plotly.newPlot(")
    if at < 0:
        sys.exit(f"ultrascale_playbook: {path}: no Plotly.newPlot( call: not the Playbook's benchmarks page")
    data, _ = json.JSONDecoder().raw_decode(text[text.index("[", at):])
    return data


def rows(path):
    """Every measured point, once: (model, the hover text's fields)."""
    seen, out = set(), []
    for trace in plotly_data(path):
        model = SUBPLOT_MODEL.get(trace.get("xaxis"))
        if model is None or "text" not in trace:
            continue
        for hover in trace["text"]:
            fields = dict((k.strip(), v.strip()) for k, v in re.findall(r"([A-Za-z/ ]+):\s*([^<]+)", hover))
            key = (model, tuple(sorted(fields.items())))
            if key in seen:
                continue
            seen.add(key)
            out.append((model, fields, hover))
    return out


def nanotron_split(model, pp):
    """Decoder layers per pipeline rank as nanotron places them (models/base.py, build_model): its
    pipeline blocks in order (embedding, the layers, final norm, LM head, the cast to fp32, the loss)
    each go to the current rank, which moves on once the blocks' cumulative cost passes rank/PP of
    the total; a layer costs 4 x heads x d_qkv x hidden + 3 x intermediate x hidden and the LM head
    vocabulary x hidden, the rest nothing (models/llama.py, get_block_compute_costs). Returns the
    layers per rank and the rank of the LM head."""
    layers, hidden, heads, ffn = MODELS[model]
    layer = 4 * heads * (hidden // heads) * hidden + 3 * ffn * hidden
    blocks = [0] + [layer] * layers + [0, VOCAB * hidden, 0, 0]
    kinds = ["embedding"] + ["layer"] * layers + ["norm", "head", "cast", "loss"]
    total, cum, rank, per_rank, head = sum(blocks), 0, 0, [0] * pp, -1
    for cost, kind in zip(blocks, kinds):
        cum += cost
        per_rank[rank] += kind == "layer"
        head = rank if kind == "head" else head
        if cum > total * (rank + 1) / pp:
            rank += 1
    return per_rank, head


def number(s):
    return float(s.replace(",", "").rstrip("%").split()[0])


def case(model, f, hover):
    layers, hidden, heads, ffn = MODELS[model]
    dp, tp, pp, z = (int(f[k]) for k in ("DP", "TP", "PP", "ZeRO"))
    mbs, acc, gbs, nodes = (int(f[k]) for k in ("MBS", "GradAcc", "GBS", "Nodes"))
    gpus = dp * tp * pp
    tok_gpu = number(f["tok/s/gpu"])
    ident = f"usp-{model.lower()}-n{nodes}-dp{dp}-tp{tp}-pp{pp}-mbs{mbs}-acc{acc}-z{z}"
    plain = re.sub(r"<[^>]+>", " ", hover).replace("\t", " ")
    split, _ = nanotron_split(model, pp)
    return {
        "id": ident,
        "source": "Hugging Face, The Ultra-Scale Playbook (2025), its benchmark plot's data (" + SOURCE_REPO
                  + "), the point: " + " ".join(plain.split()),
        "group": f"Ultra-Scale Playbook {model}",
        "scenario": {
            "name": ident,
            "platform": "platforms/dgx-h100-node.json" if nodes == 1 else
                        {"from": "platforms/dgx-h100-superpod.json", "network": {"nodes": nodes}},
            "model": {"num_layers": layers, "hidden_size": hidden, "num_attention_heads": heads,
                      "num_query_groups": heads, "ffn_hidden_size": ffn, "seq_length": SEQ, "vocab_size": VOCAB,
                      "swiglu": True, "normalization": "RMSNorm", "position_embedding_type": "rope",
                      "untie_embeddings_and_output_weights": ffn >= 10000, "attention": "flash"},
            "training": {"global_batch_size": gbs, "micro_batch_size": mbs, "precision": "bf16",
                         "recompute_granularity": "none", "optimizer": "adam"},
            "parallel": {"tensor_model_parallel_size": tp, "pipeline_model_parallel_size": pp,
                         "data_parallel_size": dp, "context_parallel_size": 1, "sequence_parallel": tp > 1,
                         "zero_stage": z, "schedule": "1f1b", "overlap_grad_reduce": z == 0,
                         "framework": "nanotron", **({"pipeline_layers": split} if pp > 1 else {})},
        },
        "expect": {"tokens_per_s": round(tok_gpu * gpus, 1)},
        "tolerance": 0.2,
        "note": "Written by bench/ultrascale_playbook.py from the point's hover text alone: its tokens/s/GPU x "
                f"{gpus} GPUs. Model, training, layout and platform as the script's header says (nanotron's "
                "generator and base config); the run's MFU and memory on the page are "
                f"{f['MFU']} and {f['GPU memory']}.",
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("html")
    ap.add_argument("--nodes", type=int, nargs="+", default=[1], help="node counts to write (default 1)")
    ap.add_argument("--out", default="-", help="the case file (default: standard output)")
    a = ap.parse_args()
    cases, skipped, inconsistent, unsplit = [], 0, [], []
    for model, f, hover in rows(a.html):
        if int(f["Nodes"]) not in a.nodes:
            continue
        if "nan" in f["tok/s/gpu"]:  # crashed or out of memory: nothing measured
            skipped += 1
            continue
        # a point whose batch is not DP x MBS x GradAcc: which of its fields is wrong is unknown
        if int(f["GBS"]) != int(f["DP"]) * int(f["MBS"]) * int(f["GradAcc"]):
            inconsistent.append(f"{model} " + " ".join(f"{k} {v}" for k, v in f.items()))
            continue
        split, head = nanotron_split(model, int(f["PP"]))
        if min(split) == 0 or head != len(split) - 1:  # dtsim's stages each hold layers, the head the last
            unsplit.append(f"{model} PP {f['PP']}: layers {split}, LM head on rank {head}")
            continue
        cases.append(case(model, f, hover))
    ids = [c["id"] for c in cases]
    if len(set(ids)) != len(ids):  # the same layout measured twice: keep both, numbered
        count = {}
        for c in cases:
            count[c["id"]] = count.get(c["id"], 0) + 1
            if ids.count(c["id"]) > 1:
                c["id"] += f"-run{count[c['id']]}"
                c["scenario"]["name"] = c["id"]
    order = {m: i for i, m in enumerate(MODELS)}
    cases.sort(key=lambda c: (order[c["group"].split()[-1]], c["id"]))
    text = json.dumps({"cases": cases}, indent=1) + "\n"
    if a.out == "-":
        sys.stdout.write(text)
    else:
        with open(a.out, "w") as out:
            out.write(text)
    print(f"ultrascale_playbook: {len(cases)} measured runs written, {skipped} without a measurement left out, "
          f"{len(inconsistent)} whose GBS is not DP x MBS x GradAcc left out:", file=sys.stderr)
    for line in inconsistent:
        print("  " + line, file=sys.stderr)
    print(f"  and {len(unsplit)} whose pipeline split leaves a rank without layers (dtsim's stages hold one or "
          f"more):", file=sys.stderr)
    for line in sorted(set(unsplit)):
        print(f"  {unsplit.count(line)} x {line}", file=sys.stderr)


if __name__ == "__main__":
    main()
