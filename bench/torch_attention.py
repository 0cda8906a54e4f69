#!/usr/bin/env python3
"""Fused causal attention as the frameworks run it, timed on this GPU through PyTorch's
scaled_dot_product_attention: its FlashAttention-2 backend (SDPBackend.FLASH_ATTENTION) and its
cuDNN backend (SDPBackend.CUDNN_ATTENTION, the fused attention Transformer Engine runs under
Megatron-Core on Hopper). bf16, causal, (batch, heads, sequence, head dim) layouts with 16K to
64K tokens. Prints one CSV row per backend and shape.

The rates are in dtsim's convention (engine/oplist.c, attn_fused): forward 4 B H T^2 hd FLOPs
and backward twice that, the causal mask not discounted, as Megatron-LM counts model FLOPs.
`fwd_bwd_tflops` is 12 B H T^2 hd / (forward + backward time): the one rate the simulator
charges both passes at (calibration ops.attention.table).

    python3 bench/torch_attention.py [--repeats N] > attention.csv
"""
import argparse
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

SHAPES = [  # (batch, heads, seq, head_dim)
    (16, 12, 1024, 64), (8, 16, 2048, 64), (8, 16, 2048, 128), (4, 32, 4096, 128),
    (2, 32, 8192, 128), (1, 32, 16384, 128), (4, 16, 4096, 64),
]
BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}


def timed(fn, repeats):
    """Median of `repeats` timings (CUDA events) after three warm-ups, in seconds."""
    for _ in range(3):
        fn()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    times.sort()
    return times[len(times) // 2]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=10)
    args = ap.parse_args()
    dev = torch.cuda.get_device_name()
    print(f"# {dev}, torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}", file=sys.stderr)
    print("backend,batch,heads,seq,head_dim,fwd_ms,fwd_bwd_ms,fwd_tflops,bwd_tflops,fwd_bwd_tflops")
    for name, backend in BACKENDS.items():
        for B, H, T, hd in SHAPES:
            q, k, v = (torch.randn(B, H, T, hd, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                       for _ in range(3))
            grad = torch.randn(B, H, T, hd, device="cuda", dtype=torch.bfloat16)
            try:
                with sdpa_kernel(backend):
                    fwd = timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), args.repeats)
                    both = timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(grad),
                                 args.repeats)
            except RuntimeError as e:
                print(f"# {name} {B}x{H}x{T}x{hd}: {str(e).splitlines()[0]}", file=sys.stderr)
                continue
            flops = 4.0 * B * H * T * T * hd
            bwd = max(both - fwd, 1e-9)
            print(f"{name},{B},{H},{T},{hd},{fwd * 1e3:.3f},{both * 1e3:.3f},{flops / fwd / 1e12:.1f},"
                  f"{2 * flops / bwd / 1e12:.1f},{3 * flops / both / 1e12:.1f}", flush=True)
            del q, k, v, grad
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
