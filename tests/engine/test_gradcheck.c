/* Whole-model gradient checks against central finite differences of the loss (fp32 model, the
 * loss summed over tokens in double by gpt_forward), which share no code with the backward, for
 * GPT-2 blocks and for Llama's (RMSNorm, rotary embeddings, grouped-query attention, SwiGLU, an
 * untied head: every new backward kernel on the model's own path):
 *  - for every parameter tensor, the analytic gradient's projection on a random unit direction;
 *  - for every parameter tensor, single entries drawn at random, element by element.
 * The tolerances are stated next to each check. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "gpt.h"
#include "gpt_internal.h"
#include "rng.h"

/* Norm parameters moved away from 1 and 0, and the query and key weights scaled up so the
 * attention is far from uniform: at GPT-2's init (std 0.02) the scores are ~1e-2 and the
 * gradients through q and k (and so rotary embeddings' backward) would hide under the tolerance
 * of v's. QK_SCALE 8 puts the scores near 1; with it a rotary backward turned the wrong way fails
 * the element-wise check (measured: tensor 4, analytic 2.0e-6 against -1.6e-5). */
#define QK_SCALE 8.0f
#define ROUTER_SCALE 50.0f
static void exercise_every_path(gpt_model *m, rng_t *r)
{
    for (int t = 0; t < m->num_tensors; t++)
        if (!m->tensors[t].decay && t > 1)
            for (size_t i = 0; i < m->tensors[t].count; i++)
                gpt_param(m, t)[i] += (float)(0.2 * rng_normal(r));
    size_t C = (size_t)m->cfg.hidden, qk_rows = C + (size_t)m->cfg.kv_groups * (C / (size_t)m->cfg.heads);
    for (int l = 0; l < m->cfg.num_layers; l++) { /* the q and k rows (gpt.h), not v's */
        float *w = gpt_param(m, gpt_layer_tensor(m, l, J_QKV_W));
        for (size_t i = 0; i < qk_rows * C; i++)
            w[i] *= QK_SCALE;
        /* the router's logits far apart, so no step of the differences changes a token's experts
         * (the loss jumps where the top K changes) */
        int t = gpt_layer_tensor(m, l, J_ROUTER_W);
        for (size_t i = 0; i < m->tensors[t].count; i++)
            gpt_param(m, t)[i] *= ROUTER_SCALE;
    }
}

#define EPS 5e-3        /* finite-difference step along a unit direction */
#define REL_TOL 2e-2    /* relative agreement */
#define ABS_TOL 3e-4    /* fp32 loss noise / (2 EPS) */

/* GPT-2's blocks, and Llama's: 4 heads in 2 query groups, an MLP of 24 that is not 4 x hidden. */
static gpt_config gpt2_cfg = {.num_layers = 2, .hidden = 16, .heads = 2, .seq_len = 8, .vocab = 32};
static gpt_config llama_cfg = {.num_layers = 2, .hidden = 16, .heads = 4, .seq_len = 8, .vocab = 32, .kv_groups = 2,
                               .ffn_hidden = 24, .swiglu = 1, .rmsnorm = 1, .rope = 1, .untied = 1};
/* Mixture of experts, dropless (a capacity's drops are steps of the loss, not its slope): 4 GELU
 * experts of GPT-2's blocks, and 4 SwiGLU experts of Llama's, each token to 2 of them; the
 * load-balancing loss weighted 0.1 (MOE_AUX), so the router's gradient has both of its paths. */
static gpt_config moe_cfg = {.num_layers = 2, .hidden = 16, .heads = 2, .seq_len = 8, .vocab = 32, .num_experts = 4,
                             .moe_topk = 2};
static gpt_config moe_llama_cfg = {.num_layers = 2, .hidden = 16, .heads = 4, .seq_len = 8, .vocab = 32,
                                   .kv_groups = 2, .ffn_hidden = 24, .swiglu = 1, .rmsnorm = 1, .rope = 1,
                                   .untied = 1, .num_experts = 4, .moe_topk = 2};
#define MOE_AUX 0.1

/* The objective the backward differentiates: the mean language-model loss of the last forward
 * plus the weighted load-balancing loss (none without experts). */
static double objective(gpt_model *m, float lm_loss)
{
    return (double)lm_loss + m->moe_aux_loss;
}

static void every_tensor_matches_finite_differences(void **state)
{
    gpt_config cfg = *(gpt_config *)*state;
    const kernels_backend *k = kernels_cpu();
    gpt_model m;
    int B = 2, N = B * cfg.seq_len;
    gpt_init(&m, &cfg, k, KPREC_FP32, B, 7);
    m.shard.moe_aux_loss_coeff = MOE_AUX;
    int tokens[16], targets[16];
    rng_t r;
    rng_seed(&r, 99);
    for (int i = 0; i < N; i++) {
        tokens[i] = (int)(rng_next(&r) % cfg.vocab);
        targets[i] = (int)(rng_next(&r) % cfg.vocab);
    }
    exercise_every_path(&m, &r);

    k->memset_zero(m.grads, m.num_params * sizeof(float));
    gpt_forward(&m, tokens, targets);
    gpt_backward(&m, 1.0f / N); /* gradients of the mean loss */

    double *u = malloc(m.num_params * sizeof(double));
    for (int t = 0; t < m.num_tensors; t++) {
        gpt_tensor *tt = &m.tensors[t];
        double norm = 0, analytic = 0;
        if (tt->count == 0)
            continue; /* a tensor this model does not have (gpt.h) */
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
        double lp = objective(&m, gpt_forward(&m, tokens, targets));
        for (size_t i = 0; i < tt->count; i++)
            p[i] = (float)(saved[i] - EPS * u[i]);
        double lm = objective(&m, gpt_forward(&m, tokens, targets));
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

/* Element-wise: ENTRIES random entries of every tensor. The step is larger than for the
 * directional check because one entry moves the loss less; the truncation error of central
 * differences, O(h^2), stays far below the tolerance at this step. Measured: worst absolute
 * error 3e-6 (the noise floor), worst relative error 1.6e-3 where |gradient| > 1e-3. */
#define ENTRIES 4
#define EL_EPS 1e-2
#define EL_REL_TOL 2e-2
#define EL_ABS_TOL 1e-5  /* per-token fp32 loss rounding (~2e-7) / (2 EL_EPS), with margin */

/* The mean loss of the last forward summed in double from the per-token losses (CPU backend:
 * host memory), so the difference quotient is not limited by rounding the mean to fp32. */
static double mean_loss(const gpt_model *m, const int *tokens, const int *targets, int N)
{
    gpt_forward((gpt_model *)m, tokens, targets);
    double s = 0;
    for (int i = 0; i < N; i++)
        s += m->acts[0].losses[i];
    return s / N + m->moe_aux_loss;
}

static void sampled_entries_of_every_tensor_match(void **state)
{
    gpt_config cfg = *(gpt_config *)*state;
    const kernels_backend *k = kernels_cpu();
    gpt_model m;
    int B = 2, N = B * cfg.seq_len;
    gpt_init(&m, &cfg, k, KPREC_FP32, B, 21);
    m.shard.moe_aux_loss_coeff = MOE_AUX;
    int tokens[16], targets[16];
    rng_t r;
    rng_seed(&r, 1234);
    for (int i = 0; i < N; i++) {
        tokens[i] = (int)(rng_next(&r) % cfg.vocab);
        targets[i] = (int)(rng_next(&r) % cfg.vocab);
    }
    exercise_every_path(&m, &r);
    k->memset_zero(m.grads, m.num_params * sizeof(float));
    gpt_forward(&m, tokens, targets);
    gpt_backward(&m, 1.0f / N);

    int checked = 0, above_noise = 0;
    double worst = 0, worst_abs = 0;
    for (int t = 0; t < m.num_tensors; t++) {
        gpt_tensor *tt = &m.tensors[t];
        float *p = gpt_param(&m, t), *g = gpt_grad(&m, t);
        for (int e = 0; e < ENTRIES && tt->count; e++) {
            size_t i = (size_t)(rng_next(&r) % tt->count);
            /* wte rows of tokens that never appear get gradient only through the tied LM head;
             * keep them: that path is what the tie is about. */
            float saved = p[i];
            p[i] = (float)(saved + EL_EPS);
            double lp = mean_loss(&m, tokens, targets, N);
            p[i] = (float)(saved - EL_EPS);
            double lm = mean_loss(&m, tokens, targets, N);
            p[i] = saved;
            double fd = (lp - lm) / (2 * EL_EPS), an = g[i];
            double scale = fmax(fabs(fd), fabs(an));
            if (!(fabs(fd - an) <= EL_REL_TOL * scale + EL_ABS_TOL))
                fail_msg("tensor %d entry %zu: analytic %.6g vs finite difference %.6g", t, i, an, fd);
            checked++;
            worst_abs = fmax(worst_abs, fabs(fd - an));
            above_noise += scale > 10 * EL_ABS_TOL;
            if (scale > 100 * EL_ABS_TOL)
                worst = fmax(worst, fabs(fd - an) / scale);
        }
    }
    printf("element-wise: %d entries, %d with |gradient| > %.0e; worst absolute error %.2g, worst relative error "
           "%.2g where |gradient| > %.0e\n", checked, above_noise, 10 * EL_ABS_TOL, worst_abs, worst, 100 * EL_ABS_TOL);
    /* Not vacuous: a third or more of the sampled gradients are large enough for the relative bound to bite. */
    assert_true(3 * above_noise >= checked);
    gpt_free(&m);
}

static void params_crc_covers_every_parameter(void **state)
{
    (void)state;
    gpt_config cfg = gpt2_cfg;
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

/* Llama's layout by hand (gpt.h): no position table, no norm biases, q of 16 rows and k, v of 2
 * groups x head size 4 = 8 rows each, fc of 2 x 24 rows, fc2 of 24 columns, an untied head. */
static void llama_layout_counts_by_hand(void **state)
{
    (void)state;
    gpt_model m;
    gpt_init(&m, &llama_cfg, kernels_cpu(), KPREC_FP32, 1, 3);
    size_t C = 16, V = 32, qkv = C + 2 * 8, F = 24;
    size_t layer = C + qkv * C + qkv + C * C + C + C + 2 * F * C + 2 * F + C * F + C;
    assert_int_equal(m.num_params, V * C + 2 * layer + C + V * C);
    assert_int_equal(m.tensors[GPT_WPE].count, 0);
    assert_int_equal(m.tensors[gpt_head_weight(&m)].count, V * C);
    assert_int_not_equal(gpt_head_weight(&m), GPT_WTE);
    gpt_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_prestate(every_tensor_matches_finite_differences, &gpt2_cfg),
        cmocka_unit_test_prestate(sampled_entries_of_every_tensor_match, &gpt2_cfg),
        cmocka_unit_test_prestate(every_tensor_matches_finite_differences, &llama_cfg),
        cmocka_unit_test_prestate(sampled_entries_of_every_tensor_match, &llama_cfg),
        cmocka_unit_test_prestate(every_tensor_matches_finite_differences, &moe_cfg),
        cmocka_unit_test_prestate(sampled_entries_of_every_tensor_match, &moe_cfg),
        cmocka_unit_test_prestate(every_tensor_matches_finite_differences, &moe_llama_cfg),
        cmocka_unit_test_prestate(sampled_entries_of_every_tensor_match, &moe_llama_cfg),
        cmocka_unit_test(params_crc_covers_every_parameter),
        cmocka_unit_test(llama_layout_counts_by_hand),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
