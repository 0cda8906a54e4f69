/* CUDA matmul (cuBLAS) against the CPU's (BLAS): forward with and without bias, backward
 * adding into non-zero gradients, in fp32, bf16 and fp16, at odd sizes (no dimension a
 * multiple of 8, which also takes cuBLAS off its aligned fast paths) and at a larger shape. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>
#include "gpu_check.h"

static gpu_pair P;

static double tol_for(kernels_precision prec)
{
    return prec == KPREC_BF16 ? TOL_BF16 : prec == KPREC_FP16 ? TOL_FP16 : TOL_FP32;
}

static void check_matmul(int N, int C, int OC, kernels_precision prec, int with_bias)
{
    const char *pn = prec == KPREC_BF16 ? "bf16" : prec == KPREC_FP16 ? "fp16" : "fp32";
    printf("matmul N=%d C=%d OC=%d %s%s\n", N, C, OC, pn, with_bias ? " +bias" : "");
    size_t ni = (size_t)N * C, nw = (size_t)OC * C, no = (size_t)N * OC;
    float *in = gpu_rand(&P, ni, 1), *w = gpu_rand(&P, nw, 1), *b = gpu_rand(&P, OC, 1), *dout = gpu_rand(&P, no, 1);
    /* Gradients start non-zero: the backward must add into them. */
    float *di = gpu_rand(&P, ni, 1), *dw = gpu_rand(&P, nw, 1), *db = gpu_rand(&P, OC, 1);
    float *gin = gpu_upload(&P, in, ni), *gw = gpu_upload(&P, w, nw), *gb = gpu_upload(&P, b, OC),
          *gd = gpu_upload(&P, dout, no), *gdi = gpu_upload(&P, di, ni), *gdw = gpu_upload(&P, dw, nw),
          *gdb = gpu_upload(&P, db, OC), *gout = P.gpu->alloc(no * sizeof(float));
    float *out = calloc(no, sizeof(float));

    P.cpu->matmul_forward(out, in, w, with_bias ? b : NULL, N, C, OC, prec);
    P.cpu->matmul_backward(di, dw, with_bias ? db : NULL, dout, in, w, N, C, OC, prec);
    P.gpu->matmul_forward(gout, gin, gw, with_bias ? gb : NULL, N, C, OC, prec);
    P.gpu->matmul_backward(gdi, gdw, with_bias ? gdb : NULL, gd, gin, gw, N, C, OC, prec);

    /* The backward outputs are fp32 sums of rounded inputs (not rounded themselves), so only
     * the forward carries the precision's rounding; all use the precision's bound. */
    double tol = tol_for(prec);
    gpu_expect_close(&P, "forward", out, gout, no, tol);
    gpu_expect_close(&P, "dinp", di, gdi, ni, prec == KPREC_FP32 ? TOL_FP32 : tol);
    gpu_expect_close(&P, "dweight", dw, gdw, nw, prec == KPREC_FP32 ? TOL_FP32 : tol);
    gpu_expect_close(&P, "dbias", db, gdb, OC, prec == KPREC_FP32 ? TOL_FP32 : tol);

    float *ptrs[] = {in, w, b, dout, di, dw, db, out};
    for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++)
        free(ptrs[i]);
    float *gptrs[] = {gin, gw, gb, gd, gdi, gdw, gdb, gout};
    for (size_t i = 0; i < sizeof gptrs / sizeof gptrs[0]; i++)
        P.gpu->free(gptrs[i]);
}

static void test_fp32(void **state)
{
    (void)state;
    check_matmul(37, 29, 43, KPREC_FP32, 1);
    check_matmul(130, 257, 191, KPREC_FP32, 0);
    check_matmul(1, 1, 1, KPREC_FP32, 1);
}

static void test_bf16(void **state)
{
    (void)state;
    check_matmul(37, 29, 43, KPREC_BF16, 1);
    check_matmul(130, 257, 191, KPREC_BF16, 0);
}

static void test_fp16(void **state)
{
    (void)state;
    check_matmul(37, 29, 43, KPREC_FP16, 1);
    check_matmul(130, 257, 191, KPREC_FP16, 1);
}

/* dinp only or dweight only (the other NULL), as the engine asks for the first layer. */
static void test_partial_backward(void **state)
{
    (void)state;
    int N = 21, C = 35, OC = 17;
    size_t ni = (size_t)N * C, nw = (size_t)OC * C, no = (size_t)N * OC;
    float *in = gpu_rand(&P, ni, 1), *w = gpu_rand(&P, nw, 1), *dout = gpu_rand(&P, no, 1);
    float *di = gpu_rand(&P, ni, 1), *dw = gpu_rand(&P, nw, 1);
    float *gin = gpu_upload(&P, in, ni), *gw = gpu_upload(&P, w, nw), *gd = gpu_upload(&P, dout, no),
          *gdi = gpu_upload(&P, di, ni), *gdw = gpu_upload(&P, dw, nw);
    P.cpu->matmul_backward(di, NULL, NULL, dout, in, w, N, C, OC, KPREC_BF16);
    P.gpu->matmul_backward(gdi, NULL, NULL, gd, gin, gw, N, C, OC, KPREC_BF16);
    P.cpu->matmul_backward(NULL, dw, NULL, dout, in, w, N, C, OC, KPREC_BF16);
    P.gpu->matmul_backward(NULL, gdw, NULL, gd, gin, gw, N, C, OC, KPREC_BF16);
    printf("matmul backward, one gradient at a time (bf16)\n");
    gpu_expect_close(&P, "dinp only", di, gdi, ni, TOL_BF16);
    gpu_expect_close(&P, "dweight only", dw, gdw, nw, TOL_BF16);
    free(in), free(w), free(dout), free(di), free(dw);
    P.gpu->free(gin), P.gpu->free(gw), P.gpu->free(gd), P.gpu->free(gdi), P.gpu->free(gdw);
}

/* The same call twice gives the same bits (cuBLAS is deterministic on one stream; dbias has
 * a fixed summation order). */
static void test_deterministic(void **state)
{
    (void)state;
    int N = 67, C = 45, OC = 33;
    size_t ni = (size_t)N * C, nw = (size_t)OC * C, no = (size_t)N * OC;
    float *in = gpu_rand(&P, ni, 1), *w = gpu_rand(&P, nw, 1), *dout = gpu_rand(&P, no, 1);
    float *gin = gpu_upload(&P, in, ni), *gw = gpu_upload(&P, w, nw), *gd = gpu_upload(&P, dout, no);
    float *gdw[2], *gdb[2];
    for (int r = 0; r < 2; r++) {
        gdw[r] = P.gpu->alloc(nw * sizeof(float));
        gdb[r] = P.gpu->alloc(OC * sizeof(float));
        P.gpu->matmul_backward(NULL, gdw[r], gdb[r], gd, gin, gw, N, C, OC, KPREC_FP32);
    }
    float *hdw = gpu_download(&P, gdw[0], nw), *hdb = gpu_download(&P, gdb[0], OC);
    printf("matmul backward run twice\n");
    gpu_expect_same_bytes(&P, "dweight", hdw, gdw[1], nw * sizeof(float));
    gpu_expect_same_bytes(&P, "dbias", hdb, gdb[1], OC * sizeof(float));
    free(in), free(w), free(dout), free(hdw), free(hdb);
    P.gpu->free(gin), P.gpu->free(gw), P.gpu->free(gd);
    for (int r = 0; r < 2; r++)
        P.gpu->free(gdw[r]), P.gpu->free(gdb[r]);
}

int main(void)
{
    int rc = gpu_pair_open(&P);
    if (rc)
        return rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fp32),
        cmocka_unit_test(test_bf16),
        cmocka_unit_test(test_fp16),
        cmocka_unit_test(test_partial_backward),
        cmocka_unit_test(test_deterministic),
    };
    return cmocka_run_group_tests_name("gpu_matmul", tests, NULL, NULL);
}
