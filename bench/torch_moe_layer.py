#!/usr/bin/env python3
"""A fine-grained mixture-of-experts MLP as Megatron-Core's alltoall dispatcher runs it in eager
PyTorch, timed on this GPU: how much of a layer the host, not the GPU, sets, to ground a host
model for dtsim (docs/validation.md, "Fine-grained MoE on H100": dtsim over-predicts Qwen3-30B-A3B
2.5 times and the host is the suspect).

The op sequence follows Megatron-Core's MoE layer with the alltoall token dispatcher and
TEGroupedMLP on one GPU's share (expert parallelism's all-to-alls left out, their host-side
synchronisation kept), for E local experts, top-k routing of T tokens:
  router GEMM, softmax, top-k; the tokens each expert gets, copied to the host and waited for
  (MoEAlltoAllTokenDispatcher._maybe_dtoh_and_synchronize: the split sizes the all-to-all and
  the grouped GEMM take as Python lists); permutation (sort by expert, gather rows); per expert,
  as Transformer Engine's GroupedLinear launches them, fc1, SwiGLU, fc2 (one GEMM each per
  expert; with --fp8, each expert's input first quantized kernel by kernel as TE's current
  scaling does: the amax, the scale, the cast; the GEMMs stay bf16);
  unpermutation (weighted scatter-add back to token order); then the backward through autograd.

Per configuration: `gpu_ms` from CUDA events around forward + backward (the device's time, host
gaps included), `host_ms` the Python wall time of issuing it, `kernels` the CUDA kernels one
layer launched (torch.profiler), and `host_us_per_kernel` = host_ms / kernels. A layer is
host-bound where host_ms approaches gpu_ms. dtsim charges each launch the calibration's
launch_overhead_us on top of the kernel's time; this measures what the framework's host path
costs per launch instead.

    python3 bench/torch_moe_layer.py [--repeats N] [--fp8] > moe.csv
"""
import argparse
import sys
import time

import torch
import torch.nn.functional as F

# (name, tokens, hidden, local experts, top-k, expert FFN): one GPU's share of published runs
CONFIGS = [
    # Qwen3-30B-A3B in Megatron-Bridge's 25.11 H100 row: micro-batch 2 x 4096, EP 8 -> 16 of 128
    # experts a GPU, top-8, expert FFN 768, hidden 2048 (scenarios/qwen3-30b-a3b-16-h100.json)
    ("qwen3-30b-a3b", 8192, 2048, 16, 8, 768),
    # Qwen3-235B-A22B, 256 H100: micro-batch 1 x 4096, EP 32 -> 4 of 128 experts, top-8, FFN 1536,
    # hidden 4096 (scenarios/qwen3-235b-a22b-256-h100.json)
    ("qwen3-235b-a22b", 4096, 4096, 4, 8, 1536),
    # Mixtral 8x7B-shaped, EP 8 -> 1 expert a GPU, top-2, FFN 14336, hidden 4096: coarse experts
    ("mixtral-8x7b-ep8", 4096, 4096, 1, 2, 14336),
]


def quantize(x):
    """TE's per-tensor current scaling, kernel by kernel: amax, scale, cast. Only launched here,
    for the host and device cost of the launches: the GEMM itself stays bf16 (an fp8 GEMM through
    torch._scaled_mm has no autograd), so --fp8 measures the quantizations' launches, not fp8
    GEMM speed."""
    amax = x.detach().abs().amax().float()
    scale = 448.0 / torch.clamp(amax, min=1e-12)
    return (x.detach() * scale).to(torch.float8_e4m3fn)


def expert_gemm(x, w, fp8):
    if fp8:
        quantize(x)
    return x @ w.t()


class MoE(torch.nn.Module):
    def __init__(self, hidden, experts, topk, ffn, global_experts):
        super().__init__()
        self.topk, self.experts = topk, experts
        self.router = torch.nn.Linear(hidden, global_experts, bias=False)
        self.w1 = torch.nn.ParameterList(torch.nn.Parameter(torch.randn(2 * ffn, hidden) * 0.02) for _ in range(experts))
        self.w2 = torch.nn.ParameterList(torch.nn.Parameter(torch.randn(hidden, ffn) * 0.02) for _ in range(experts))

    def forward(self, x, fp8):
        t = x.shape[0]
        probs = torch.softmax(self.router(x).float(), dim=-1)
        weights, chosen = torch.topk(probs, self.topk, dim=-1)
        chosen = chosen % self.experts  # one GPU's share: every choice lands on a local expert
        flat = chosen.reshape(-1)
        counts = torch.bincount(flat, minlength=self.experts)
        splits = counts.to("cpu", non_blocking=True)
        done = torch.cuda.Event()
        done.record()
        done.synchronize()  # the dispatcher's wait for the split sizes
        splits = splits.tolist()
        order = torch.argsort(flat, stable=True)
        rows = x.index_select(0, order // self.topk)
        outs = []
        for e, part in enumerate(torch.split(rows, splits)):
            h = expert_gemm(part, self.w1[e], fp8)
            a, b = h.chunk(2, dim=-1)
            outs.append(expert_gemm(F.silu(a) * b, self.w2[e], fp8))
        y = torch.cat(outs) * weights.reshape(-1)[order].to(x.dtype).unsqueeze(-1)
        out = torch.zeros_like(x)
        return out.index_add(0, order // self.topk, y)


def kernels_per_layer(step):
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)


def run(cfg, repeats, fp8):
    name, tokens, hidden, experts, topk, ffn = cfg
    torch.manual_seed(0)
    layer = MoE(hidden, experts, topk, ffn, experts * 8).cuda().to(torch.bfloat16)
    x = torch.randn(tokens, hidden, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    grad = torch.randn(tokens, hidden, device="cuda", dtype=torch.bfloat16)

    def step():
        layer(x, fp8).backward(grad)

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
        gpu.append(start.elapsed_time(end))
        host.append((h1 - h0) * 1e3)
    gpu.sort()
    host.sort()
    g, h = gpu[len(gpu) // 2], host[len(host) // 2]
    k = kernels_per_layer(step)
    print(f"{name},{tokens},{hidden},{experts},{topk},{ffn},{int(fp8)},{g:.4f},{h:.4f},{k},"
          f"{h * 1e3 / max(k, 1):.2f}", flush=True)
    del layer, x, grad
    torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--fp8", action="store_true", help="launch each expert GEMM input's quantization (forward)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("torch_moe_layer: needs a CUDA GPU")
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, median of {args.repeats} after 3 "
          f"warm-ups", file=sys.stderr)
    print("name,tokens,hidden,local_experts,topk,expert_ffn,fp8,gpu_ms,host_ms,kernels,host_us_per_kernel")
    for cfg in CONFIGS:
        run(cfg, args.repeats, args.fp8)


if __name__ == "__main__":
    main()
