/* GEMMs through BLAS. out[N,OC] = inp[N,C] @ weight[OC,C]^T + bias. Low precision rounds the
 * inputs (copies) and the output, with fp32 accumulation, as tensor cores do. */
#include <cblas.h>
#include <stdlib.h>
#include "cpu_internal.h"

void cpu_matmul_forward(float *out, const float *inp, const float *weight, const float *bias, int N, int C, int OC,
                        kernels_precision prec)
{
    float *ri = cpu_rounded_copy(inp, (size_t)N * C, prec);
    float *rw = cpu_rounded_copy(weight, (size_t)OC * C, prec);
    const float *a = ri ? ri : inp, *w = rw ? rw : weight;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, C, 1.0f, a, C, w, C, 0.0f, out, OC);
    if (bias)
        for (int i = 0; i < N; i++)
            for (int o = 0; o < OC; o++)
                out[(size_t)i * OC + o] += bias[o];
    cpu_round_to_precision(out, (size_t)N * OC, prec);
    free(ri);
    free(rw);
}

void cpu_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                         const float *weight, int N, int C, int OC, kernels_precision prec)
{
    float *rd = cpu_rounded_copy(dout, (size_t)N * OC, prec);
    float *ri = cpu_rounded_copy(inp, (size_t)N * C, prec);
    float *rw = cpu_rounded_copy(weight, (size_t)OC * C, prec);
    const float *d = rd ? rd : dout, *a = ri ? ri : inp, *w = rw ? rw : weight;
    /* dinp[N,C] += dout[N,OC] @ weight[OC,C];  dweight[OC,C] += dout^T[OC,N] @ inp[N,C] */
    if (dinp)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, OC, 1.0f, d, OC, w, C, 1.0f, dinp, C);
    if (dweight)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, N, 1.0f, d, OC, a, C, 1.0f, dweight, C);
    if (dbias)
        for (int i = 0; i < N; i++)
            for (int o = 0; o < OC; o++)
                dbias[o] += d[(size_t)i * OC + o];
    free(rd);
    free(ri);
    free(rw);
}
