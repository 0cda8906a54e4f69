/* CUDA embeddings against the CPU's. The forward is one exact add per element, and the
 * backward adds each element's contributions in the CPU's order (increasing b, t), so both
 * must match the CPU bit for bit, repeated tokens included. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>
#include "gpu_check.h"

static gpu_pair P;

static void check_encoder(int B, int T, int C, int V)
{
    size_t n = (size_t)B * T * C;
    int *tok = malloc((size_t)B * T * sizeof(int));
    for (int i = 0; i < B * T; i++)
        tok[i] = gpu_rand_int(&P, V);
    float *wte = gpu_rand(&P, (size_t)V * C, 1), *wpe = gpu_rand(&P, (size_t)T * C, 1), *dout = gpu_rand(&P, n, 1);
    float *dwte = gpu_rand(&P, (size_t)V * C, 1), *dwpe = gpu_rand(&P, (size_t)T * C, 1), *out = calloc(n, sizeof(float));
    int *gtok = gpu_upload_bytes(&P, tok, (size_t)B * T * sizeof(int));
    float *gwte = gpu_upload(&P, wte, (size_t)V * C), *gwpe = gpu_upload(&P, wpe, (size_t)T * C),
          *gd = gpu_upload(&P, dout, n), *gdwte = gpu_upload(&P, dwte, (size_t)V * C),
          *gdwpe = gpu_upload(&P, dwpe, (size_t)T * C), *gout = P.gpu->alloc(n * sizeof(float));
    P.cpu->encoder_forward(out, tok, wte, wpe, B, T, C);
    P.gpu->encoder_forward(gout, gtok, gwte, gwpe, B, T, C);
    P.cpu->encoder_backward(dwte, dwpe, dout, tok, B, T, C);
    P.gpu->encoder_backward(gdwte, gdwpe, gd, gtok, B, T, C);
    printf("encoder B=%d T=%d C=%d V=%d\n", B, T, C, V);
    gpu_expect_same_bytes(&P, "forward", out, gout, n * sizeof(float));
    gpu_expect_same_bytes(&P, "dwte", dwte, gdwte, (size_t)V * C * sizeof(float));
    gpu_expect_same_bytes(&P, "dwpe", dwpe, gdwpe, (size_t)T * C * sizeof(float));
    free(tok), free(wte), free(wpe), free(dout), free(dwte), free(dwpe), free(out);
    P.gpu->free(gtok), P.gpu->free(gwte), P.gpu->free(gwpe), P.gpu->free(gd), P.gpu->free(gdwte),
        P.gpu->free(gdwpe), P.gpu->free(gout);
}

static void test_repeated_tokens(void **state)
{
    (void)state;
    check_encoder(3, 5, 77, 4); /* 15 positions over 4 tokens: every token repeats */
}

static void test_larger(void **state)
{
    (void)state;
    check_encoder(4, 64, 96, 50);
    check_encoder(2, 33, 300, 1000);
}

int main(void)
{
    int rc = gpu_pair_open(&P);
    if (rc)
        return rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_repeated_tokens),
        cmocka_unit_test(test_larger),
    };
    return cmocka_run_group_tests_name("gpu_encoder", tests, NULL, NULL);
}
