/* Whole-model gradient check: for every parameter tensor, the analytic gradient's projection
 * on a random unit direction equals the central finite difference of the loss (fp32 model,
 * double-accumulated loss) within the stated tolerance. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "gpt.h"
#include "rng.h"

#define EPS 5e-3        /* finite-difference step along a unit direction */
#define REL_TOL 2e-2    /* relative agreement */
#define ABS_TOL 3e-4    /* fp32 loss noise / (2 EPS) */

static void every_tensor_matches_finite_differences(void **state)
{
    gpt_config cfg = {2, 16, 2, 8, 32};
    const kernels_backend *k = kernels_cpu();
    gpt_model m;
    int B = 2, N = B * cfg.seq_len;
    gpt_init(&m, &cfg, k, KPREC_FP32, B, 7);
    int tokens[16], targets[16];
    rng_t r;
    rng_seed(&r, 99);
    for (int i = 0; i < N; i++) {
        tokens[i] = (int)(rng_next(&r) % cfg.vocab);
        targets[i] = (int)(rng_next(&r) % cfg.vocab);
    }
    /* Perturb the LayerNorm weights and biases away from 1 and 0 so every path is exercised. */
    for (int t = 0; t < m.num_tensors; t++)
        if (!m.tensors[t].decay && t > 1)
            for (size_t i = 0; i < m.tensors[t].count; i++)
                gpt_param(&m, t)[i] += (float)(0.2 * rng_normal(&r));

    k->memset_zero(m.grads, m.num_params * sizeof(float));
    gpt_forward(&m, tokens, targets);
    gpt_backward(&m, 1.0f / N); /* gradients of the mean loss */

    double *u = malloc(m.num_params * sizeof(double));
    for (int t = 0; t < m.num_tensors; t++) {
        gpt_tensor *tt = &m.tensors[t];
        double norm = 0, analytic = 0;
        for (size_t i = 0; i < tt->count; i++) {
            u[i] = rng_normal(&r);
            norm += u[i] * u[i];
        }
        norm = sqrt(norm);
        float *p = gpt_param(&m, t), *g = gpt_grad(&m, t);
        float *saved = malloc(tt->count * sizeof(float));
        memcpy(saved, p, tt->count * sizeof(float));
        for (size_t i = 0; i < tt->count; i++) {
            u[i] /= norm;
            analytic += u[i] * g[i];
        }
        for (size_t i = 0; i < tt->count; i++)
            p[i] = (float)(saved[i] + EPS * u[i]);
        double lp = gpt_forward(&m, tokens, targets);
        for (size_t i = 0; i < tt->count; i++)
            p[i] = (float)(saved[i] - EPS * u[i]);
        double lm = gpt_forward(&m, tokens, targets);
        memcpy(p, saved, tt->count * sizeof(float));
        free(saved);
        double fd = (lp - lm) / (2 * EPS);
        double tol = REL_TOL * fmax(fabs(fd), fabs(analytic)) + ABS_TOL;
        if (!(fabs(fd - analytic) <= tol))
            fail_msg("tensor %d (%zu values): analytic %.6g vs finite difference %.6g", t, tt->count, analytic, fd);
    }
    free(u);
    gpt_free(&m);
}

static void params_crc_covers_every_parameter(void **state)
{
    gpt_config cfg = {2, 16, 2, 8, 32};
    gpt_model m;
    gpt_init(&m, &cfg, kernels_cpu(), KPREC_FP32, 1, 3);
    uint32_t a = gpt_params_crc32(&m);
    gpt_param(&m, gpt_lnf_w(&m) + 1)[15] += 1.0f; /* the very last parameter */
    assert_int_not_equal(a, gpt_params_crc32(&m));
    /* Parameter count of the layout in gpt.h: 2 embeddings + 12 L + final norm. */
    size_t C = 16, expect = 32 * C + 8 * C + 2 * (2 * C + 3 * C * C + 3 * C + C * C + C + 2 * C + 4 * C * C + 4 * C +
                                                 4 * C * C + C) + 2 * C;
    assert_int_equal(m.num_params, expect);
    gpt_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_tensor_matches_finite_differences),
        cmocka_unit_test(params_crc_covers_every_parameter),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
