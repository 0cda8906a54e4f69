#!/usr/bin/env python3
"""Does a PyTorch eager training step slow down as its activations approach the GPU's memory?

llm-foundry's MPT rows without activation checkpointing run 12-35% slower than dtsim predicts,
the checkpointed ones within a few percent (docs/validation.md); the uncheckpointed runs sit
near the memory limit, where PyTorch's caching allocator, when a request does not fit its cached
blocks, frees them all and retries (num_alloc_retries). This script measures it: MPT's layer
(bench/torch_layer.py) at MPT-7B's benchmark shape (micro-batch 6, sequence 2,048, d 4,096, 32
heads, bf16, no checkpointing), stacks of L layers forward and backward, L growing until the
stack no longer fits; per L: GPU ms per layer, peak memory allocated and reserved, and the
allocator's retries and cudaMalloc calls over the timed steps.

The rest of an FSDP rank's memory (the sharded states, the gathered units, the logits) can be
stood in for by a ballast: `--ballast-gib 0,4,8` allocates that much first and keeps it for the
stack's run, one sweep of --layers per value. `--capacity-gib 79.2` caps the caching allocator
at an H100 80GB's usable memory (torch.cuda.set_per_process_memory_fraction: past it the
allocator frees its cache and retries, then fails, as at the physical limit), so a GPU with
more memory (an H200) runs the H100's pressure.

    python3 bench/torch_memory_pressure.py [--layers 8,16,...] [--repeats N]
        [--capacity-gib G] [--ballast-gib B1,B2,...] > pressure.csv
"""
import argparse
import sys

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from torch_layer import Layer  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402


def run(layers, b, t, d, heads, repeats):
    torch.manual_seed(0)
    with torch.device("cuda"):  # built on the GPU: initialising 7B-sized layers on the host takes minutes
        stack = torch.nn.Sequential(*[Layer(d, heads) for _ in range(layers)]).to(torch.bfloat16)
    x = torch.randn(b, t, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    grad = torch.randn(b, t, d, device="cuda", dtype=torch.bfloat16)

    def step():
        stack(x).backward(grad)
        for p in stack.parameters():  # as an optimizer step's zero_grad(set_to_none=True)
            p.grad = None

    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        for _ in range(2):
            step()
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        s0 = torch.cuda.memory_stats()
        times = []
        for _ in range(repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            step()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / layers)
        s1 = torch.cuda.memory_stats()
    times.sort()
    gib = 1024 ** 3
    row = (layers, times[len(times) // 2], times[-1], torch.cuda.max_memory_allocated() / gib,
           torch.cuda.max_memory_reserved() / gib, s1["num_alloc_retries"] - s0["num_alloc_retries"],
           s1.get("num_device_alloc", 0) - s0.get("num_device_alloc", 0))
    del stack, x, grad
    torch.cuda.empty_cache()
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layers", default="4,8,16,20,24,26,28,30,32")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--capacity-gib", type=float, default=0.0,
                    help="cap the caching allocator at this many GiB (0: the whole GPU)")
    ap.add_argument("--ballast-gib", default="0",
                    help="comma-separated GiB held before each sweep of --layers")
    args = ap.parse_args()
    gib = 1024 ** 3
    total = torch.cuda.get_device_properties(0).total_memory / gib
    if args.capacity_gib > 0:
        if args.capacity_gib > total:
            sys.exit(f"torch_memory_pressure: --capacity-gib {args.capacity_gib} exceeds this GPU's {total:.1f} GiB")
        torch.cuda.set_per_process_memory_fraction(args.capacity_gib / total)
    cap = args.capacity_gib if args.capacity_gib > 0 else total
    print(f"# {torch.cuda.get_device_name()}, {total:.1f} GiB, allocator capped at {cap:.1f} GiB, torch "
          f"{torch.__version__}; MPT-7B layer, B 6, T 2048, bf16, no checkpointing; median and max of "
          f"{args.repeats} steps after 2", file=sys.stderr)
    print("ballast_gib,layers,ms_per_layer_median,ms_per_layer_max,peak_allocated_gib,peak_reserved_gib,"
          "alloc_retries,device_allocs", flush=True)
    for ballast_gib in (float(v) for v in args.ballast_gib.split(",")):
        ballast = torch.empty(int(ballast_gib * gib), dtype=torch.uint8, device="cuda") if ballast_gib > 0 else None
        for n in (int(v) for v in args.layers.split(",")):
            try:
                r = run(n, 6, 2048, 4096, 32, args.repeats)
            except torch.OutOfMemoryError:
                print(f"# ballast {ballast_gib:g} GiB, {n} layers: out of memory", flush=True)
                torch.cuda.empty_cache()
                break
            print(f"{ballast_gib:g},{r[0]},{r[1]:.4f},{r[2]:.4f},{r[3]:.2f},{r[4]:.2f},{r[5]},{r[6]}", flush=True)
        del ballast
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
