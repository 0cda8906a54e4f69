#!/usr/bin/env python3
"""A transformer layer as PyTorch eager runs it, timed on this GPU: what a framework built on
plain PyTorch modules (llm-foundry's MPT, nanoGPT, FSDP runs without fused kernels) spends per
layer, to set beside dtsim's per-layer compute for the same shapes.

The layer is MPT's (llm-foundry's MPTBlock with its defaults): pre-LayerNorm without biases,
fused QKV projection, causal scaled_dot_product_attention (FlashAttention-2 backend), output
projection, residual, LayerNorm, a GELU MLP of 4 d, residual; no biases; bf16 parameters and
activations (FSDP's mixed precision: parameters cast to bf16). `layers` such layers run in a
row, forward then backward, and the time is split per layer.

Two times per configuration: `gpu_ms` from CUDA events around the whole forward + backward
(what the device took, host gaps included where the GPU waited for the host), and `host_ms`
the Python wall time of issuing it (torch.cuda.synchronize before and after): when host_ms
approaches gpu_ms the layer is bound by the host's kernel launches, not by the GPU.
`model_tflops` is the layer's model FLOPs (Megatron-LM's count: 24 B T d^2 for the GEMMs + 4 B T^2
d for attention, forward; twice that backward; the causal mask not discounted) over gpu_ms.
`kernels_per_layer` counts the launches one step makes (torch.profiler, one more step after the
timed ones): the host's CUDA runtime calls that launch a kernel, memset or copy, per layer, and
`host_us_per_kernel` is host_ms over it: the calibration's `host_issue_us` measured
(calibrate/data/h100-sxm5-80gb.json derives it from this script's host_ms and a launch count read
from PyTorch's code; sim/step/host_issue.c counts launches the same way). `device_kernels_per_layer`
counts what ran on the device (cuBLAS may run two kernels for one launch call); nan where the
profiler fails.

    python3 bench/torch_layer.py [--repeats N] [--layers L] > layer.csv
"""
import argparse
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

# (name, micro-batch, sequence, d_model, heads): the shapes of published runs on one GPU
CONFIGS = [
    ("gpt2-124m", 16, 1024, 768, 12),       # llm.c's GPT-2 run shape (bench/llmc_compare.sh)
    ("mpt-7b", 6, 2048, 4096, 32),          # llm-foundry's MPT-7B benchmark row, micro-batch 6
    ("mpt-7b-mb2", 2, 2048, 4096, 32),      # the same layer at a smaller micro-batch
    ("mpt-30b", 1, 2048, 7168, 64),         # llm-foundry's MPT-30B yaml (d 7168, 64 heads)
    ("llama2-7b-4k", 1, 4096, 4096, 32),    # GELU MLP stands in for SwiGLU (same 4 d width class)
]


class Layer(torch.nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = torch.nn.LayerNorm(d, bias=False)
        self.wqkv = torch.nn.Linear(d, 3 * d, bias=False)
        self.out = torch.nn.Linear(d, d, bias=False)
        self.ln2 = torch.nn.LayerNorm(d, bias=False)
        self.up = torch.nn.Linear(d, 4 * d, bias=False)
        self.down = torch.nn.Linear(4 * d, d, bias=False)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.wqkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.out(a.transpose(1, 2).reshape(b, t, d))
        return x + self.down(F.gelu(self.up(self.ln2(x)), approximate="tanh"))


# the CUDA runtime and driver calls by which the host launches work on the device
LAUNCH_CALLS = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx",
                "cudaMemsetAsync", "cudaMemcpyAsync")


def count_kernels(step):
    """(launch calls, device activities) of one step, by the profiler (CPU and CUDA activities: with
    CUDA alone some releases record no kernels); nan where it cannot say."""
    nan = float("nan")
    try:
        from torch.profiler import ProfilerActivity, profile
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            step()
            torch.cuda.synchronize()
        events = prof.events()
        launches = sum(1 for e in events if e.name in LAUNCH_CALLS)
        device = sum(1 for e in events if e.device_type == torch.autograd.DeviceType.CUDA)
        return (float(launches) if launches else nan, float(device) if device else nan)
    except Exception as e:  # the timing columns stand without it
        print(f"# kernel count failed: {e}", file=sys.stderr)
        return nan, nan


def run(cfg, layers, repeats):
    name, b, t, d, heads = cfg
    torch.manual_seed(0)
    stack = torch.nn.Sequential(*[Layer(d, heads) for _ in range(layers)]).cuda().to(torch.bfloat16)
    x = torch.randn(b, t, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    grad = torch.randn(b, t, d, device="cuda", dtype=torch.bfloat16)

    def step():
        y = stack(x)
        y.backward(grad)

    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        for _ in range(3):
            step()
        gpu, host = [], []
        for _ in range(repeats):
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            h0 = time.perf_counter()
            start.record()
            step()
            end.record()
            h1 = time.perf_counter()
            end.synchronize()
            gpu.append(start.elapsed_time(end) / layers)
            host.append((h1 - h0) * 1e3 / layers)
        launches, device = (n / layers for n in count_kernels(step))
    gpu.sort()
    host.sort()
    g, h = gpu[len(gpu) // 2], host[len(host) // 2]
    flops = 3 * (24.0 * b * t * d * d + 4.0 * b * t * t * d)
    print(f"{name},{b},{t},{d},{heads},{layers},{g:.4f},{h:.4f},{flops / (g * 1e-3) / 1e12:.2f},"
          f"{launches:.1f},{h * 1e3 / launches:.1f},{device:.1f}", flush=True)
    del stack, x, grad
    torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--layers", type=int, default=4)
    args = ap.parse_args()
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, {args.layers} layers, "
          f"median of {args.repeats} after 3 warm-ups", file=sys.stderr)
    print("name,micro_batch,seq,d_model,heads,layers,gpu_ms_per_layer,host_ms_per_layer,model_tflops,"
          "kernels_per_layer,host_us_per_kernel,device_kernels_per_layer")
    for cfg in CONFIGS:
        run(cfg, args.layers, args.repeats)


if __name__ == "__main__":
    main()
