/* Datasheet peaks of known GPUs; see device_peak.h. */
#include <stdio.h>
#include <string.h>
#include "device_peak.h"

typedef struct {
    const char *match;     /* substring of the device name */
    double fp32, half;     /* dense TFLOP/s: FP32 (CUDA cores), BF16/FP16 tensor cores */
    const char *source;
} device_peak;

/* First match wins, so the more specific names come first. */
static const device_peak PEAKS[] = {
    {"H200", 67.0, 989.4,
     "NVIDIA H200 Tensor Core GPU datasheet (SXM): FP32 67, BF16/FP16 1,979 TFLOPS with sparsity; "
     "dense as H100 SXM5 (989.4)"},
    {"H100 PCIe", 51.2, 756.5,
     "NVIDIA H100 Tensor Core GPU Architecture whitepaper, table 3 (PCIe): FP32 51.2, "
     "BF16/FP16 756.5 dense (1,513 sparse) TFLOPS"},
    {"H100", 67.0, 989.4,
     "NVIDIA H100 Tensor Core GPU Architecture whitepaper, table 3 (SXM5): FP32 67, "
     "BF16/FP16 989.4 dense (1,978.9 sparse) TFLOPS"},
    {"A100", 19.5, 312.0,
     "NVIDIA A100 Tensor Core GPU datasheet (SXM4 and PCIe): FP32 19.5 TFLOPS, BF16/FP16 312 TFLOPS dense"},
};

double device_peak_tflops(const char *name, kernels_precision p, const char **source)
{
    /* NVL parts (H100 NVL, H200 NVL) share the names but not the clocks: not in the table */
    int nvl = name && strstr(name, "NVL") != NULL;
    for (size_t i = 0; name && !nvl && i < sizeof PEAKS / sizeof PEAKS[0]; i++) {
        if (!strstr(name, PEAKS[i].match))
            continue;
        if (source)
            *source = PEAKS[i].source;
        return p == KPREC_FP32 ? PEAKS[i].fp32 : PEAKS[i].half;
    }
    if (source)
        *source = NULL;
    return 0;
}

void device_name(const kernels_backend *k, char *out, size_t len)
{
    k->describe(out, len);
    char *detail = NULL; /* the last " (": a model name may hold parentheses of its own */
    for (char *p = strstr(out, " ("); p; p = strstr(p + 1, " ("))
        detail = p;
    if (detail)
        *detail = 0;
}
