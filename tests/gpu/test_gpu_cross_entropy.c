/* CUDA fused softmax cross-entropy against the CPU's: per-row losses and dlogits (added into
 * non-zero gradients), at a small odd vocabulary and at GPT-2's 50257. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>
#include "gpu_check.h"

static gpu_pair P;

static void check_cross_entropy(int N, int V, float scale, float dloss)
{
    size_t n = (size_t)N * V;
    float *logits = gpu_rand(&P, n, scale), *dl = gpu_rand(&P, n, 0.01f), *loss = calloc(N, sizeof(float));
    int *tg = malloc(N * sizeof(int));
    for (int i = 0; i < N; i++)
        tg[i] = gpu_rand_int(&P, V);
    float *glog = gpu_upload(&P, logits, n), *gdl = gpu_upload(&P, dl, n), *gloss = P.gpu->alloc(N * sizeof(float));
    int *gtg = gpu_upload_bytes(&P, tg, N * sizeof(int));
    P.cpu->cross_entropy_forward(loss, logits, tg, N, V);
    P.gpu->cross_entropy_forward(gloss, glog, gtg, N, V);
    P.cpu->cross_entropy_backward(dl, logits, tg, dloss, N, V);
    P.gpu->cross_entropy_backward(gdl, glog, gtg, dloss, N, V);
    printf("cross_entropy N=%d V=%d scale=%g dloss=%g\n", N, V, scale, dloss);
    gpu_expect_close(&P, "losses", loss, gloss, N, TOL_FP32);
    gpu_expect_close(&P, "dlogits", dl, gdl, n, TOL_FP32);
    free(logits), free(dl), free(loss), free(tg);
    P.gpu->free(glog), P.gpu->free(gdl), P.gpu->free(gloss), P.gpu->free(gtg);
}

static void test_small_vocab(void **state)
{
    (void)state;
    check_cross_entropy(45, 259, 6, 0.5f);
}

static void test_gpt2_vocab(void **state)
{
    (void)state;
    check_cross_entropy(7, 50257, 10, 1.0f / 7);
}

int main(void)
{
    int rc = gpu_pair_open(&P);
    if (rc)
        return rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_vocab),
        cmocka_unit_test(test_gpt2_vocab),
    };
    return cmocka_run_group_tests_name("gpu_cross_entropy", tests, NULL, NULL);
}
