#!/usr/bin/env python3
"""The optimizer step as PyTorch runs it, timed on this GPU: torch.optim.AdamW with fp32
parameters, gradients and both moments (the sharded states of Megatron-LM's distributed
optimizer and of FSDP), its fused (one kernel over many tensors) and foreach implementations,
over transformer-layer-sized tensors (12 d^2 + 13 d a layer) summing to N parameters. Prints the
time per step and the bandwidth in dtsim's count of 28 bytes per parameter (read the parameter,
gradient and two moments; write the parameter and two moments: 7 fp32 values), the count the
simulator's optimizer task charges at the calibration's `adamw` rate.

    python3 bench/torch_optimizer.py [--params 1e8,5e8,1e9] [--repeats N] > adamw.csv
"""
import argparse
import sys

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from torch_attention import timed  # noqa: E402  (median of CUDA-event timings after warm-ups)


def tensors(n, d):
    """Layer-shaped fp32 tensors of about n parameters in all."""
    shapes = [(3 * d, d), (d, d), (4 * d, d), (d, 4 * d)] + [(d,)] * 13
    per_layer = 12 * d * d + 13 * d
    out = []
    for _ in range(max(1, round(n / per_layer))):
        out += [torch.randn(s, device="cuda") * 0.02 for s in shapes]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--params", default="1e8,5e8,1e9")
    ap.add_argument("--d", type=int, default=4096)
    ap.add_argument("--repeats", type=int, default=10)
    args = ap.parse_args()
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}", file=sys.stderr)
    print("impl,params,tensors,ms,gbs_28_bytes", flush=True)
    for n in (float(v) for v in args.params.split(",")):
        ps = [torch.nn.Parameter(t) for t in tensors(n, args.d)]
        for p in ps:
            p.grad = torch.randn_like(p) * 1e-3
        count = sum(p.numel() for p in ps)
        for impl in ("fused", "foreach"):
            opt = torch.optim.AdamW(ps, lr=1e-4, weight_decay=0.1, **{impl: True})
            s = timed(opt.step, args.repeats)
            print(f"{impl},{count},{len(ps)},{s * 1e3:.4f},{28.0 * count / s / 1e9:.1f}", flush=True)
            del opt
        del ps
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
