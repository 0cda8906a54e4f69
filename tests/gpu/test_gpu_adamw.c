/* CUDA AdamW against the CPU's over several steps (bias correction changes with t), with a
 * gradient scale and weight decay: parameters and both moments. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>
#include "gpu_check.h"

static gpu_pair P;

static void test_steps(void **state)
{
    (void)state;
    size_t n = 100003;
    float *p = gpu_rand(&P, n, 1), *m = calloc(n, sizeof(float)), *v = calloc(n, sizeof(float));
    float *gp = gpu_upload(&P, p, n), *gm = P.gpu->alloc(n * sizeof(float)), *gv = P.gpu->alloc(n * sizeof(float));
    for (int t = 1; t <= 5; t++) {
        float *g = gpu_rand(&P, n, 2);
        float *gg = gpu_upload(&P, g, n);
        P.cpu->adamw_update(p, g, m, v, n, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, t, 0.5f);
        P.gpu->adamw_update(gp, gg, gm, gv, n, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, t, 0.5f);
        free(g);
        P.gpu->free(gg);
    }
    printf("adamw n=%zu, 5 steps\n", n);
    gpu_expect_close(&P, "params", p, gp, n, TOL_FP32);
    gpu_expect_close(&P, "m", m, gm, n, TOL_FP32);
    gpu_expect_close(&P, "v", v, gv, n, TOL_FP32);
    free(p), free(m), free(v);
    P.gpu->free(gp), P.gpu->free(gm), P.gpu->free(gv);
}

int main(void)
{
    int rc = gpu_pair_open(&P);
    if (rc)
        return rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_steps),
    };
    return cmocka_run_group_tests_name("gpu_adamw", tests, NULL, NULL);
}
