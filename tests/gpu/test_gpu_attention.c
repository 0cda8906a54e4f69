/* CUDA causal attention against the CPU's: output and log-sum-exp of the forward, dqkv of the
 * backward (added into a non-zero dqkv), in fp32, bf16 and fp16, at head sizes that are not
 * multiples of 32 (16, 80), the largest the kernel takes (256), and a one-token sequence.
 * Both backwards get the CPU forward's out and lse, so a backward is tested on its own and a
 * one-ulp difference in a rounded forward output cannot leak into it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>
#include "gpu_check.h"

static gpu_pair P;

static void check_attention(int B, int T, int C, int NH, kernels_precision prec)
{
    const char *pn = prec == KPREC_BF16 ? "bf16" : prec == KPREC_FP16 ? "fp16" : "fp32";
    printf("attention B=%d T=%d C=%d NH=%d (head size %d) %s\n", B, T, C, NH, C / NH, pn);
    size_t nq = (size_t)B * T * 3 * C, no = (size_t)B * T * C, nl = (size_t)B * NH * T;
    float *qkv = gpu_rand(&P, nq, 1.5f), *dout = gpu_rand(&P, no, 1), *dqkv = gpu_rand(&P, nq, 1);
    float *out = calloc(no, sizeof(float)), *lse = calloc(nl, sizeof(float));
    float *gq = gpu_upload(&P, qkv, nq), *gd = gpu_upload(&P, dout, no), *gdq = gpu_upload(&P, dqkv, nq);
    float *go = P.gpu->alloc(no * sizeof(float)), *gl = P.gpu->alloc(nl * sizeof(float));

    P.cpu->attention_forward(out, lse, qkv, B, T, C, NH, prec);
    P.gpu->attention_forward(go, gl, gq, B, T, C, NH, prec);
    double tol = prec == KPREC_BF16 ? TOL_BF16 : prec == KPREC_FP16 ? TOL_FP16 : TOL_FP32;
    gpu_expect_close(&P, "forward out", out, go, no, tol);
    gpu_expect_close(&P, "forward lse", lse, gl, nl, tol);

    P.gpu->copy_to_device(go, out, no * sizeof(float));
    P.gpu->copy_to_device(gl, lse, nl * sizeof(float));
    P.cpu->attention_backward(dqkv, dout, qkv, out, lse, B, T, C, NH, prec);
    P.gpu->attention_backward(gdq, gd, gq, go, gl, B, T, C, NH, prec);
    gpu_expect_close(&P, "backward dqkv", dqkv, gdq, nq, prec == KPREC_FP32 ? TOL_FP32_BWD : tol);

    free(qkv), free(dout), free(dqkv), free(out), free(lse);
    P.gpu->free(gq), P.gpu->free(gd), P.gpu->free(gdq), P.gpu->free(go), P.gpu->free(gl);
}

static void test_fp32(void **state)
{
    (void)state;
    check_attention(2, 37, 48, 3, KPREC_FP32);
    check_attention(1, 67, 160, 2, KPREC_FP32);
    check_attention(2, 1, 64, 1, KPREC_FP32);
}

static void test_bf16(void **state)
{
    (void)state;
    check_attention(2, 37, 48, 3, KPREC_BF16);
    check_attention(1, 67, 160, 2, KPREC_BF16);
}

static void test_fp16(void **state)
{
    (void)state;
    check_attention(2, 37, 48, 3, KPREC_FP16);
}

static void test_largest_head(void **state)
{
    (void)state;
    check_attention(1, 130, 512, 2, KPREC_FP32);
}

/* Each output row has one writer and no atomics: the backward is bit-reproducible. */
static void test_deterministic(void **state)
{
    (void)state;
    int B = 2, T = 45, C = 96, NH = 3;
    size_t nq = (size_t)B * T * 3 * C, no = (size_t)B * T * C, nl = (size_t)B * NH * T;
    float *qkv = gpu_rand(&P, nq, 1), *dout = gpu_rand(&P, no, 1);
    float *gq = gpu_upload(&P, qkv, nq), *gd = gpu_upload(&P, dout, no);
    float *go = P.gpu->alloc(no * sizeof(float)), *gl = P.gpu->alloc(nl * sizeof(float));
    float *gdq[2];
    P.gpu->attention_forward(go, gl, gq, B, T, C, NH, KPREC_BF16);
    for (int r = 0; r < 2; r++) {
        gdq[r] = P.gpu->alloc(nq * sizeof(float));
        P.gpu->attention_backward(gdq[r], gd, gq, go, gl, B, T, C, NH, KPREC_BF16);
    }
    float *h = gpu_download(&P, gdq[0], nq);
    printf("attention backward run twice\n");
    gpu_expect_same_bytes(&P, "dqkv", h, gdq[1], nq * sizeof(float));
    free(qkv), free(dout), free(h);
    P.gpu->free(gq), P.gpu->free(gd), P.gpu->free(go), P.gpu->free(gl), P.gpu->free(gdq[0]), P.gpu->free(gdq[1]);
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
        cmocka_unit_test(test_largest_head),
        cmocka_unit_test(test_deterministic),
    };
    return cmocka_run_group_tests_name("gpu_attention", tests, NULL, NULL);
}
