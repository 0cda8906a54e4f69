#!/usr/bin/env python3
"""The host's cost of a ZeRO-3 gather into a list, per rank, timed on one GPU: what
`parallel.stage3_list_collectives` charges (docs/model.md, ZeRO-3). DeepSpeed up to v0.5.4 called
torch.distributed.all_gather once per parameter with a list of one view per rank, built in a
Python loop (`flat.narrow` a rank), and PyTorch's ProcessGroupNCCL then copied its flat buffer out
to the list one tensor at a time (`copy_(..., non_blocking=True)` a rank, in its post-hook). Both
loops run here without the collective itself, for group sizes of the SC'21 Table 2 runs, so the
host time per rank of each can be set beside the calibration's `launch_overhead_us`, which dtsim
charges for the copy of each rank (the narrow loop is not charged). The copies are issued from
Python here, where PyTorch's hook issues them from C++: Python's share per call makes the figure
an upper bound of the hook's. The third column times the loop that gathers the persistent
tensors at the end of every step (_allgather_params: for each tensor and rank, a narrow of the
rank's partition, a view and narrow of the whole tensor, and a copy_), all of it issued from
Python in DeepSpeed too, of which dtsim charges the copy's launch.

    python3 bench/torch_list_copies.py [--ranks 384,768,1536,2240] [--numel 1.5e8] > list.csv
"""
import argparse
import sys
import time

import torch


def host_us_per_rank(fn, ranks, repeats):
    """Median host wall time of fn() over repeats, in microseconds per rank; the device is
    synchronised before each run and after, outside the timing."""
    times = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        torch.cuda.synchronize()
    times.sort()
    return times[len(times) // 2] * 1e6 / ranks


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", default="384,768,1536,2240")
    ap.add_argument("--numel", type=float, default=1.5e8, help="the gathered tensor's elements (GPT-3 "
                    "175B's projection weight is 1.51e8)")
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}", file=sys.stderr)
    print("ranks,numel,narrow_us_per_rank,copy_us_per_rank,persistent_us_per_copy", flush=True)
    for n in (int(v) for v in args.ranks.split(",")):
        part = int(args.numel) // n
        flat = torch.empty(part * n, dtype=torch.float16, device="cuda")
        dest = torch.empty(part * n, dtype=torch.float16, device="cuda")
        outs = [dest.narrow(0, part * i, part) for i in range(n)]
        srcs = [flat.narrow(0, part * i, part) for i in range(n)]

        def narrow_loop():  # DeepSpeed's partitions list (partition_parameters.py)
            views = []
            for i in range(n):
                views.append(flat.narrow(0, part * i, part))
            return views

        def copy_loop():  # ProcessGroupNCCL::allgather's post-hook, from Python
            for o, s in zip(outs, srcs):
                o.copy_(s, non_blocking=True)

        # a persistent tensor of GPT-3 175B's hidden size (a bias or a norm), in pieces a rank
        hidden = 12288
        piece = -(-hidden // n)
        pieces = torch.empty(piece * n, dtype=torch.float16, device="cuda")
        partitions = [pieces.narrow(0, piece * i, piece) for i in range(n)]
        whole = torch.empty(hidden, dtype=torch.float16, device="cuda")

        def persistent_loop():  # _allgather_params' copy loop for one tensor (partition_parameters.py)
            for i in range(n):
                start = i * piece
                if start < hidden:
                    count = min(hidden - start, piece)
                    src = partitions[i].narrow(0, 0, count)
                    whole.view(-1).narrow(0, start, count).copy_(src)

        narrow_loop(), copy_loop(), persistent_loop()  # warm-up
        print(f"{n},{part * n},{host_us_per_rank(narrow_loop, n, args.repeats):.3f},"
              f"{host_us_per_rank(copy_loop, n, args.repeats):.3f},"
              f"{host_us_per_rank(persistent_loop, n, args.repeats):.3f}", flush=True)


if __name__ == "__main__":
    main()
