/* What a training step could at most compute per second on this device, for MFU
 * (DESIGN.md, Metrics: MFU = model FLOPs / (step time x GPUs x peak of the training precision)).
 *
 * The peaks are the vendors' datasheet figures for dense math (no 2:4 sparsity). dtrain's fp32
 * GEMMs run without TF32 (kernels/cuda/backend.cu), so fp32 takes the plain FP32 (CUDA core)
 * figure; bf16 and fp16 take the tensor-core figure. A CPU has no entry: its MFU is null unless
 * the user says the peak (--peak-tflops). */
#ifndef DTSIM_ENGINE_DEVICE_PEAK_H
#define DTSIM_ENGINE_DEVICE_PEAK_H
#include <stddef.h>
#include "kernels.h"

/* Peak TFLOP/s per device of `device_name` (as cudaGetDeviceProperties names it, e.g. "NVIDIA
 * H100 80GB HBM3") in precision p, or 0 when the device is not in the table. *source (when not
 * NULL) gets the datasheet the figure comes from. */
double device_peak_tflops(const char *device_name, kernels_precision p, const char **source);

/* The bare name of the device backend k runs on (its describe() up to " ("): CUDA device 0's
 * name as cudaGetDeviceProperties gives it, or the CPU's model name. */
void device_name(const kernels_backend *k, char *out, size_t len);
#endif
