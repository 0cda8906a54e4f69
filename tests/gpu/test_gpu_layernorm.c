/* CUDA LayerNorm against the CPU's: forward (out, mean, rstd) and backward (dinp, dweight,
 * dbias added into non-zero gradients), with more rows than the kernel's 256 partial sums
 * (so a warp takes several rows) and rows longer than a warp many times over. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>
#include "gpu_check.h"

static gpu_pair P;

static void check_layernorm(int N, int C)
{
    printf("layernorm N=%d C=%d\n", N, C);
    size_t n = (size_t)N * C;
    float *x = gpu_rand(&P, n, 2), *w = gpu_rand(&P, C, 1), *b = gpu_rand(&P, C, 1), *dy = gpu_rand(&P, n, 1);
    float *dx = gpu_rand(&P, n, 1), *dw = gpu_rand(&P, C, 1), *db = gpu_rand(&P, C, 1);
    float *y = calloc(n, sizeof(float)), *mean = calloc(N, sizeof(float)), *rstd = calloc(N, sizeof(float));
    float *gx = gpu_upload(&P, x, n), *gw = gpu_upload(&P, w, C), *gb = gpu_upload(&P, b, C),
          *gdy = gpu_upload(&P, dy, n), *gdx = gpu_upload(&P, dx, n), *gdw = gpu_upload(&P, dw, C),
          *gdb = gpu_upload(&P, db, C);
    float *gy = P.gpu->alloc(n * sizeof(float)), *gm = P.gpu->alloc(N * sizeof(float)),
          *gr = P.gpu->alloc(N * sizeof(float));

    P.cpu->layernorm_forward(y, mean, rstd, x, w, b, N, C);
    P.gpu->layernorm_forward(gy, gm, gr, gx, gw, gb, N, C);
    gpu_expect_close(&P, "forward out", y, gy, n, TOL_FP32);
    gpu_expect_close(&P, "forward mean", mean, gm, N, TOL_FP32);
    gpu_expect_close(&P, "forward rstd", rstd, gr, N, TOL_FP32);

    /* The backward uses the CPU's mean and rstd on both sides: it is tested on its own. */
    P.gpu->copy_to_device(gm, mean, N * sizeof(float));
    P.gpu->copy_to_device(gr, rstd, N * sizeof(float));
    P.cpu->layernorm_backward(dx, dw, db, dy, x, w, mean, rstd, N, C);
    P.gpu->layernorm_backward(gdx, gdw, gdb, gdy, gx, gw, gm, gr, N, C);
    gpu_expect_close(&P, "backward dinp", dx, gdx, n, TOL_FP32_BWD);
    gpu_expect_close(&P, "backward dweight", dw, gdw, C, TOL_FP32_BWD);
    gpu_expect_close(&P, "backward dbias", db, gdb, C, TOL_FP32_BWD);

    float *ptrs[] = {x, w, b, dy, dx, dw, db, y, mean, rstd};
    for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++)
        free(ptrs[i]);
    float *gptrs[] = {gx, gw, gb, gdy, gdx, gdw, gdb, gy, gm, gr};
    for (size_t i = 0; i < sizeof gptrs / sizeof gptrs[0]; i++)
        P.gpu->free(gptrs[i]);
}

static void test_small(void **state)
{
    (void)state;
    check_layernorm(45, 77);
    check_layernorm(1, 3);
}

static void test_many_rows(void **state)
{
    (void)state;
    check_layernorm(601, 1000);
}

static void test_long_rows(void **state)
{
    (void)state;
    check_layernorm(3, 5003);
}

/* Partial sums in a fixed order, no atomics: the backward is bit-reproducible. */
static void test_deterministic(void **state)
{
    (void)state;
    int N = 300, C = 129;
    size_t n = (size_t)N * C;
    float *x = gpu_rand(&P, n, 2), *w = gpu_rand(&P, C, 1), *b = gpu_rand(&P, C, 1), *dy = gpu_rand(&P, n, 1);
    float *gx = gpu_upload(&P, x, n), *gw = gpu_upload(&P, w, C), *gb = gpu_upload(&P, b, C),
          *gdy = gpu_upload(&P, dy, n), *gy = P.gpu->alloc(n * sizeof(float)),
          *gm = P.gpu->alloc(N * sizeof(float)), *gr = P.gpu->alloc(N * sizeof(float));
    P.gpu->layernorm_forward(gy, gm, gr, gx, gw, gb, N, C);
    float *gdx[2], *gdw[2], *gdb[2];
    for (int r = 0; r < 2; r++) {
        gdx[r] = P.gpu->alloc(n * sizeof(float));
        gdw[r] = P.gpu->alloc(C * sizeof(float));
        gdb[r] = P.gpu->alloc(C * sizeof(float));
        P.gpu->layernorm_backward(gdx[r], gdw[r], gdb[r], gdy, gx, gw, gm, gr, N, C);
    }
    float *hdw = gpu_download(&P, gdw[0], C), *hdb = gpu_download(&P, gdb[0], C);
    printf("layernorm backward run twice\n");
    gpu_expect_same_bytes(&P, "dweight", hdw, gdw[1], C * sizeof(float));
    gpu_expect_same_bytes(&P, "dbias", hdb, gdb[1], C * sizeof(float));
    free(x), free(w), free(b), free(dy), free(hdw), free(hdb);
    P.gpu->free(gx), P.gpu->free(gw), P.gpu->free(gb), P.gpu->free(gdy), P.gpu->free(gy), P.gpu->free(gm),
        P.gpu->free(gr);
    for (int r = 0; r < 2; r++)
        P.gpu->free(gdx[r]), P.gpu->free(gdw[r]), P.gpu->free(gdb[r]);
}

int main(void)
{
    int rc = gpu_pair_open(&P);
    if (rc)
        return rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small),
        cmocka_unit_test(test_many_rows),
        cmocka_unit_test(test_long_rows),
        cmocka_unit_test(test_deterministic),
    };
    return cmocka_run_group_tests_name("gpu_layernorm", tests, NULL, NULL);
}
