/* Built instead of kernels/cuda/ where CUDA is not compiled in: there is no CUDA backend. */
#include <stdio.h>
#include "kernels.h"

const kernels_backend *kernels_cuda(char *why, size_t whylen)
{
    if (why && whylen)
        snprintf(why, whylen, "this build has no CUDA backend (configured without nvcc, or with DTSIM_CUDA=OFF)");
    return NULL;
}
