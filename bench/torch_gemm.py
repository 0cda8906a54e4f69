#!/usr/bin/env python3
"""Dense GEMM throughput on this GPU as the frameworks run it, through PyTorch (cuBLASLt), for
`dtcal import-gemm`. Prints one CSV row per precision, layout and shape.

- bf16 (and fp16, which has the same tensor-core rate on Hopper and Ampere): the forward layout of
  a linear layer, Y[m,n] = X[m,k] W[n,k]^T (torch.nn.functional.linear, Megatron's and Transformer
  Engine's forward GEMM), over a grid of m, n, k; and on the powers of two of that grid the two
  backward layouts, dgrad dX[m,k] = dY[m,n] W[n,k] and wgrad dW[n,k] = dY[m,n]^T X[m,k], each
  reported with m, n, k as cuBLAS sees it (rows and columns of the output, inner dimension).
- fp8: torch._scaled_mm, e4m3 inputs with per-tensor scales and a bf16 output (the cuBLASLt
  FP8 GEMM Transformer Engine runs), the forward layout.
- tf32: fp32 tensors with torch.backends.cuda.matmul.allow_tf32, the forward layout.

--sustained S: instead of the sweep, each of a few layer shapes back to back for S seconds,
one row per half-second window (`sustained,layout,m,n,k,window_s,tflops`; `sustained-fp8,...`
for the fp8 ones, `--sustained-dtypes`): a training step keeps the tensor cores busy for
minutes, and a 700 W GPU lowers its clock to stay within its power limit, which a sweep's short
bursts never reach (bf16 measured on an H200, 2026-11-26: the sweep's rates held; fp8, whose
rate is twice bf16's and whose power at it has not been measured here, is what dtsim's FP8 rows
now ask, docs/validation.md). Sample the clock beside it:
    nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv -lms 500 > clocks.csv &

Shapes with 2mnk above --max-flop are left out. Each shape: two warm-up calls, then two
batches of back-to-back calls (about 10 ms each) between CUDA events; the faster batch's mean
per call is reported, so a step's steady launch stream is what is timed, not the CPU's launch
latency alone (tiny shapes remain launch-bound: dtsim charges launches separately).

    python3 bench/torch_gemm.py [--max-seconds S] [--max-flop F] > gemm.csv
    dtcal import-gemm gemm.csv --where layout=nt --precision bf16 --into CAL -o CAL
"""
import argparse
import sys
import time

import torch
import torch.nn.functional as F

GRID = [256, 512, 1024, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 28672]
POW2 = [v for v in GRID if v & (v - 1) == 0]


def timed(fn, budget_s=0.01):
    """Seconds per call: two warm-ups, then the faster of two batches sized to budget_s."""
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    one = max(time.perf_counter() - t0, 1e-6)
    reps = max(3, min(200, int(budget_s / one)))
    best = float("inf")
    for _ in range(2):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) / 1e3 / reps)
    return best, reps


SUSTAINED = [(8192, 8192, 8192), (12288, 16384, 4096), (4096, 4608, 12288)]  # square; MPT-7B fc1; GPT-3 175B qkv at TP 8


def sustained(seconds, dtypes, window_s=0.5):
    """Each SUSTAINED shape (forward layout) back to back for `seconds`, in each of `dtypes`
    (bf16: F.linear; fp8: torch._scaled_mm on e4m3 operands cast from the same normal values, a
    bf16 output, as the sweep's fp8 rows)."""
    print("dtype,layout,m,n,k,window_s,tflops")
    one = torch.ones((), device="cuda", dtype=torch.float32)
    for dtype in dtypes:
        for m, n, k in SUSTAINED:
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
            if dtype == "fp8":
                x8, w8 = x.to(torch.float8_e4m3fn), w.to(torch.float8_e4m3fn)
                fn = lambda: torch._scaled_mm(x8, w8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
            else:
                fn = lambda: F.linear(x, w)
            t_one, _ = timed(fn)
            per_window = max(1, int(window_s / t_one))
            tag = "sustained" if dtype == "bf16" else "sustained-" + dtype
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < seconds:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                for _ in range(per_window):
                    fn()
                end.record()
                end.synchronize()
                t = start.elapsed_time(end) / 1e3 / per_window
                print(f"{tag},nt,{m},{n},{k},{time.perf_counter() - t0:.2f},{2.0 * m * n * k / t / 1e12:.1f}",
                      flush=True)
            del x, w, fn
            time.sleep(2)  # let the clock recover between shapes, as between the sweep's shapes


def shapes(values, max_flop):
    for m in values:
        for n in values:
            for k in values:
                if 2.0 * m * n * k <= max_flop:
                    yield m, n, k


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--max-seconds", type=float, default=150, help="stop (with a # line) after this long")
    ap.add_argument("--max-flop", type=float, default=4.5e13, help="leave out shapes above 2mnk FLOPs")
    ap.add_argument("--only", default="bf16,bf16-bwd,fp8,tf32", help="comma list of sweeps to run")
    ap.add_argument("--sustained", type=float, default=0, metavar="S",
                    help="run each layer shape back to back for S seconds instead of the sweep")
    ap.add_argument("--sustained-dtypes", default="bf16,fp8", help="comma list of bf16, fp8 for --sustained")
    args = ap.parse_args()
    if args.sustained > 0:
        dtypes = args.sustained_dtypes.split(",")
        bad = [d for d in dtypes if d not in ("bf16", "fp8")]
        if bad:
            ap.error(f"--sustained-dtypes: {bad[0]!r} is not bf16 or fp8")
        sustained(args.sustained, dtypes)
        return
    t_start = time.perf_counter()
    dev = torch.cuda.get_device_name()
    print(f"# {dev}, torch {torch.__version__}, CUDA {torch.version.cuda}, cuBLASLt via torch.matmul",
          file=sys.stderr)
    print("dtype,layout,m,n,k,time_us,tflops,reps")
    top = max(GRID)
    big = top * top
    buf = {}

    def view(dtype, name, rows, cols):
        key = (dtype, name)
        if key not in buf:
            base = torch.randn(big, device="cuda", dtype=torch.bfloat16 if dtype == torch.float8_e4m3fn else dtype)
            buf[key] = base.to(dtype) if dtype == torch.float8_e4m3fn else base
        return buf[key][: rows * cols].view(rows, cols)

    sweeps = args.only.split(",")
    plan = []
    if "bf16" in sweeps:
        plan += [("bf16", "nt", s) for s in shapes(GRID, args.max_flop)]
    if "bf16-bwd" in sweeps:
        for layout in ("nn", "tn"):
            plan += [("bf16", layout, s) for s in shapes(POW2, args.max_flop)]
    if "fp8" in sweeps:
        plan += [("fp8", "nt", s) for s in shapes(POW2, args.max_flop)]
    if "tf32" in sweeps:
        plan += [("tf32", "nt", s) for s in shapes(POW2, args.max_flop / 4)]
    torch.backends.cuda.matmul.allow_tf32 = True
    one = torch.ones((), device="cuda", dtype=torch.float32)
    done = 0
    for prec, layout, (m, n, k) in plan:
        if time.perf_counter() - t_start > args.max_seconds:
            print(f"# stopped after {args.max_seconds:.0f} s: {len(plan) - done} of {len(plan)} shapes not run",
                  file=sys.stderr)
            print(f"# stopped after {args.max_seconds:.0f} s: {len(plan) - done} of {len(plan)} shapes not run")
            break
        try:
            if prec == "bf16" and layout == "nt":      # Y[m,n] = X[m,k] W[n,k]^T
                x, w = view(torch.bfloat16, "a", m, k), view(torch.bfloat16, "b", n, k)
                fn = lambda: F.linear(x, w)
            elif prec == "bf16" and layout == "nn":    # dX[m,n'] = dY[m,k'] W[k',n'], inner k
                a, b = view(torch.bfloat16, "a", m, k), view(torch.bfloat16, "b", k, n)
                fn = lambda: torch.matmul(a, b)
            elif prec == "bf16" and layout == "tn":    # dW[m,n] = dY[k,m]^T X[k,n], inner k
                a, b = view(torch.bfloat16, "a", k, m), view(torch.bfloat16, "b", k, n)
                fn = lambda: torch.matmul(a.t(), b)
            elif prec == "fp8":
                a, b = view(torch.float8_e4m3fn, "a", m, k), view(torch.float8_e4m3fn, "b", n, k)
                fn = lambda: torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
            else:
                x, w = view(torch.float32, "a", m, k), view(torch.float32, "b", n, k)
                fn = lambda: F.linear(x, w)
            t, reps = timed(fn)
        except RuntimeError as e:
            print(f"# {prec} {layout} {m}x{n}x{k}: {str(e).splitlines()[0]}", file=sys.stderr)
            done += 1
            continue
        print(f"{prec},{layout},{m},{n},{k},{t * 1e6:.2f},{2.0 * m * n * k / t / 1e12:.1f},{reps}", flush=True)
        done += 1
    print(f"# {done} shapes in {time.perf_counter() - t_start:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
