/* CUDA GELU (forward, backward added into a non-zero dinp; fp32 and bf16 storage), SwiGLU in bf16,
 * residual add (fp32, bf16, fp16) and row softmax
 * against the CPU's, at odd sizes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <cmocka.h>
#include "gpu_check.h"

static gpu_pair P;

/* A bf16 value stored in an fp32 word has its low 16 bits zero: the kernel rounded it (an
 * unrounded fp32 result would be within TOL_BF16 of the CPU's rounded one and pass that check). */
static void expect_bf16_stored(const char *what, const float *dev, size_t n)
{
    float *h = gpu_download(&P, dev, n);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &h[i], sizeof u);
        bad += (u & 0xffffu) != 0;
    }
    printf("  %s: %zu of %zu values not bf16\n", what, bad, n);
    assert_int_equal(bad, 0);
    free(h);
}

static void test_gelu(void **state)
{
    (void)state;
    size_t n = 100003;
    float *x = gpu_rand(&P, n, 6), *dy = gpu_rand(&P, n, 1), *dx = gpu_rand(&P, n, 1), *y = calloc(n, sizeof(float));
    float *gx = gpu_upload(&P, x, n), *gdy = gpu_upload(&P, dy, n), *gdx = gpu_upload(&P, dx, n),
          *gy = P.gpu->alloc(n * sizeof(float));
    P.cpu->gelu_forward(y, x, n, KPREC_FP32);
    P.gpu->gelu_forward(gy, gx, n, KPREC_FP32);
    P.cpu->gelu_backward(dx, x, dy, n, KPREC_FP32);
    P.gpu->gelu_backward(gdx, gx, gdy, n, KPREC_FP32);
    printf("gelu n=%zu\n", n);
    gpu_expect_close(&P, "forward", y, gy, n, TOL_FP32);
    gpu_expect_close(&P, "backward", dx, gdx, n, TOL_FP32);
    /* bf16 storage, rounded in the same kernel: at most one bf16 ulp apart (an fp32 difference
     * in the last bit may cross a rounding boundary) */
    P.cpu->gelu_forward(y, x, n, KPREC_BF16);
    P.gpu->gelu_forward(gy, gx, n, KPREC_BF16);
    P.cpu->gelu_backward(dx, x, dy, n, KPREC_BF16);
    P.gpu->gelu_backward(gdx, gx, gdy, n, KPREC_BF16);
    gpu_expect_close(&P, "forward, bf16", y, gy, n, TOL_BF16);
    gpu_expect_close(&P, "backward, bf16", dx, gdx, n, TOL_BF16);
    expect_bf16_stored("gelu forward", gy, n);
    expect_bf16_stored("gelu backward", gdx, n);
    free(x), free(dy), free(dx), free(y);
    P.gpu->free(gx), P.gpu->free(gdy), P.gpu->free(gdx), P.gpu->free(gy);
}

/* SwiGLU over rows of [gate | up] in bf16 storage: close to the CPU's and rounded in the kernel
 * (the backward adds into a non-zero dinp and rounds the sum). */
static void test_swiglu_bf16(void **state)
{
    (void)state;
    int N = 257, F = 129;
    size_t n = (size_t)N * F, n2 = 2 * n;
    float *x = gpu_rand(&P, n2, 4), *dy = gpu_rand(&P, n, 1), *dx = gpu_rand(&P, n2, 1), *y = calloc(n, sizeof(float));
    float *gx = gpu_upload(&P, x, n2), *gdy = gpu_upload(&P, dy, n), *gdx = gpu_upload(&P, dx, n2),
          *gy = P.gpu->alloc(n * sizeof(float));
    P.cpu->swiglu_forward(y, x, N, F, KPREC_BF16);
    P.gpu->swiglu_forward(gy, gx, N, F, KPREC_BF16);
    P.cpu->swiglu_backward(dx, x, dy, N, F, KPREC_BF16);
    P.gpu->swiglu_backward(gdx, gx, gdy, N, F, KPREC_BF16);
    printf("swiglu bf16 N=%d F=%d\n", N, F);
    gpu_expect_close(&P, "forward, bf16", y, gy, n, TOL_BF16);
    gpu_expect_close(&P, "backward, bf16", dx, gdx, n2, TOL_BF16);
    expect_bf16_stored("swiglu forward", gy, n);
    expect_bf16_stored("swiglu backward", gdx, n2);
    free(x), free(dy), free(dx), free(y);
    P.gpu->free(gx), P.gpu->free(gdy), P.gpu->free(gdx), P.gpu->free(gy);
}

/* One rounding of an exact sum: the same bits on both. */
static void test_residual(void **state)
{
    (void)state;
    size_t n = 4097;
    float *a = gpu_rand(&P, n, 3), *b = gpu_rand(&P, n, 3), *y = calloc(n, sizeof(float));
    float *ga = gpu_upload(&P, a, n), *gb = gpu_upload(&P, b, n), *gy = P.gpu->alloc(n * sizeof(float));
    P.cpu->residual_forward(y, a, b, n, KPREC_FP32);
    P.gpu->residual_forward(gy, ga, gb, n, KPREC_FP32);
    printf("residual n=%zu\n", n);
    gpu_expect_same_bytes(&P, "a + b", y, gy, n * sizeof(float));
    P.cpu->residual_forward(y, a, b, n, KPREC_BF16); /* the same sum, the same round to nearest even */
    P.gpu->residual_forward(gy, ga, gb, n, KPREC_BF16);
    gpu_expect_same_bytes(&P, "a + b, bf16", y, gy, n * sizeof(float));
    P.cpu->residual_forward(y, a, b, n, KPREC_FP16);
    P.gpu->residual_forward(gy, ga, gb, n, KPREC_FP16);
    gpu_expect_same_bytes(&P, "a + b, fp16", y, gy, n * sizeof(float));
    free(a), free(b), free(y);
    P.gpu->free(ga), P.gpu->free(gb), P.gpu->free(gy);
}

static void check_softmax(int rows, int cols, float scale)
{
    size_t n = (size_t)rows * cols;
    float *x = gpu_rand(&P, n, scale), *y = calloc(n, sizeof(float));
    float *gx = gpu_upload(&P, x, n), *gy = P.gpu->alloc(n * sizeof(float));
    P.cpu->softmax_forward(y, x, rows, cols);
    P.gpu->softmax_forward(gy, gx, rows, cols);
    printf("softmax rows=%d cols=%d scale=%g\n", rows, cols, scale);
    gpu_expect_close(&P, "rows", y, gy, n, TOL_FP32);
    free(x), free(y);
    P.gpu->free(gx), P.gpu->free(gy);
}

static void test_softmax(void **state)
{
    (void)state;
    check_softmax(45, 259, 6);
    check_softmax(3, 5001, 20);
    check_softmax(7, 1, 1);
}

int main(void)
{
    int rc = gpu_pair_open(&P);
    if (rc)
        return rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gelu),
        cmocka_unit_test(test_swiglu_bf16),
        cmocka_unit_test(test_residual),
        cmocka_unit_test(test_softmax),
    };
    return cmocka_run_group_tests_name("gpu_elementwise", tests, NULL, NULL);
}
