/* Ring attention's block kernels (context parallelism's cp_comm_type p2p) against a float64
 * attention of queries at given positions over keys at given positions, written here: one
 * block's output and log-sum-exp (a row that sees no key: 0 and -inf), two blocks merged by the
 * online-softmax rule in either order equal to the attention over both, the backward of each block
 * from the merged row statistics summing to central differences of L = sum(G * out), adding to
 * what the gradients held, and the bf16 emulation. The blocks are laid out as CP rank 0 of 2 sees
 * them: keys at positions 1-2 and 7-8 in one block, 3-6 in the other. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "kref.h"

enum { B = 2, TQ = 5, TK = 8, C = 12, NH = 3, HS = C / NH, TA = 4, TB = TK - TA };
#define NQ ((size_t)B * TQ * 3 * C)
#define NKV ((size_t)B * TK * 2 * C)
#define NOUT ((size_t)B * TQ * C)
#define NLSE ((size_t)B * NH * TQ)

/* Query positions (unsorted; the first sees no key) and the union's key positions, increasing. */
static const int QPOS[TQ] = {0, 2, 4, 8, 6};
static const int KPOS[TK] = {1, 2, 3, 4, 5, 6, 7, 8};
/* The two blocks: rows of the union, each block's positions increasing. */
static const int ROWS_A[TA] = {0, 1, 6, 7}, ROWS_B[TB] = {2, 3, 4, 5};

/* out (B,TQ,C) and lse (B,NH,TQ) of the queries in q (rows of 3C) over the keys in kv (rows of 2C:
 * k then v) at kpos, key j seen by row t when kpos[j] <= qpos[t]. */
static void ref_attention(double *out, double *lse, const double *q, const double *kv, const int *kpos, int tk)
{
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < TQ; t++) {
                double s[TK], m = -INFINITY, z = 0;
                for (int j = 0; j < tk; j++) {
                    double d = 0;
                    for (int c = 0; c < HS; c++)
                        d += q[(b * TQ + t) * 3 * C + h * HS + c] * kv[(b * tk + j) * 2 * C + h * HS + c];
                    s[j] = kpos[j] <= QPOS[t] ? d / sqrt((double)HS) : -INFINITY;
                    m = fmax(m, s[j]);
                }
                for (int j = 0; j < tk; j++)
                    z += m == -INFINITY ? 0 : exp(s[j] - m);
                if (lse)
                    lse[(b * NH + h) * TQ + t] = z > 0 ? m + log(z) : -INFINITY;
                for (int c = 0; c < HS; c++) {
                    double o = 0;
                    for (int j = 0; j < tk && z > 0; j++)
                        o += exp(s[j] - m) / z * kv[(b * tk + j) * 2 * C + C + h * HS + c];
                    out[(b * TQ + t) * C + h * HS + c] = o;
                }
            }
}

/* A block's rows (B x n of 2C floats) and positions, picked from the union's. */
static void pick(float *blk, int *pos, const float *kv, const int *rows, int n)
{
    for (int b = 0; b < B; b++)
        for (int j = 0; j < n; j++)
            memcpy(blk + ((size_t)b * n + j) * 2 * C, kv + ((size_t)b * TK + rows[j]) * 2 * C, 2 * C * sizeof(float));
    for (int j = 0; j < n; j++)
        pos[j] = KPOS[rows[j]];
}

/* lse against the reference: -inf exactly where the reference has it, else within tol relative. */
static void check_lse(const float *lse, const double *want, double tol)
{
    for (size_t i = 0; i < NLSE; i++) {
        if (want[i] == -INFINITY) {
            assert_true(lse[i] == -INFINITY);
            continue;
        }
        assert_true(fabs(lse[i] - want[i]) <= tol * fmax(1, fabs(want[i])));
    }
}

static void one_block_forward(void **state)
{
    const kernels_backend *K = kernels_cpu();
    krng r = {31};
    float *q = kr_floats(&r, NQ, 1.5), *kv = kr_floats(&r, NKV, 1.5);
    float *blk = malloc((size_t)B * TA * 2 * C * sizeof(float)), *out = malloc(NOUT * sizeof(float));
    float *lse = malloc(NLSE * sizeof(float));
    int pos[TA];
    pick(blk, pos, kv, ROWS_A, TA);
    double *dq = kr_to_double(q, NQ), *dblk = kr_to_double(blk, (size_t)B * TA * 2 * C);
    double *ref = kr_doubles(NOUT), *rl = kr_doubles(NLSE);
    ref_attention(ref, rl, dq, dblk, pos, TA);
    K->attention_block_forward(out, lse, q, blk, QPOS, pos, B, TQ, TA, C, NH, KPREC_FP32);
    assert_true(kr_rel_err(out, ref, NOUT) < 1e-5);
    check_lse(lse, rl, 1e-5);
    /* Row 0 (position 0) sees no key: 0 out. Row 1 (position 2) sees keys 1 and 2 only. */
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++)
            assert_true(out[(size_t)b * TQ * C + c] == 0);
    free(q); free(kv); free(blk); free(out); free(lse); free(dq); free(dblk); free(ref); free(rl);
}

/* Both blocks, each merged into the other's result: the attention over all the keys. */
static void merged_blocks_equal_whole(void **state)
{
    const kernels_backend *K = kernels_cpu();
    krng r = {32};
    float *q = kr_floats(&r, NQ, 1.5), *kv = kr_floats(&r, NKV, 1.5);
    float *a = malloc((size_t)B * TA * 2 * C * sizeof(float)), *bb = malloc((size_t)B * TB * 2 * C * sizeof(float));
    int pa[TA], pb[TB];
    pick(a, pa, kv, ROWS_A, TA);
    pick(bb, pb, kv, ROWS_B, TB);
    double *dq = kr_to_double(q, NQ), *dkv = kr_to_double(kv, NKV), *ref = kr_doubles(NOUT), *rl = kr_doubles(NLSE);
    ref_attention(ref, rl, dq, dkv, KPOS, TK);
    float *o1 = malloc(NOUT * sizeof(float)), *l1 = malloc(NLSE * sizeof(float));
    float *o2 = malloc(NOUT * sizeof(float)), *l2 = malloc(NLSE * sizeof(float));
    for (int order = 0; order < 2; order++) {
        K->attention_block_forward(o1, l1, q, order ? bb : a, QPOS, order ? pb : pa, B, TQ, order ? TB : TA, C, NH,
                                   KPREC_FP32);
        K->attention_block_forward(o2, l2, q, order ? a : bb, QPOS, order ? pa : pb, B, TQ, order ? TA : TB, C, NH,
                                   KPREC_FP32);
        K->attention_merge(o1, l1, o2, l2, B, TQ, C, NH);
        assert_true(kr_rel_err(o1, ref, NOUT) < 1e-5);
        check_lse(l1, rl, 1e-5);
    }
    free(q); free(kv); free(a); free(bb); free(dq); free(dkv); free(ref); free(rl);
    free(o1); free(l1); free(o2); free(l2);
}

typedef struct {
    double *q, *kv, *out;
    const float *G;
} fd_ctx;

static double fd_loss(void *p)
{
    fd_ctx *c = p;
    ref_attention(c->out, NULL, c->q, c->kv, KPOS, TK);
    return kr_dot(c->G, c->out, NOUT);
}

/* Each block's backward from the merged out and lse: dq summed over the blocks and each block's
 * dk, dv equal central differences of sum(G * out) over the whole attention; and they add. */
static void block_backward_finite_differences(void **state)
{
    const kernels_backend *K = kernels_cpu();
    krng r = {33};
    float *q = kr_floats(&r, NQ, 1.5), *kv = kr_floats(&r, NKV, 1.5), *G = kr_floats(&r, NOUT, 1);
    float *a = malloc((size_t)B * TA * 2 * C * sizeof(float)), *bb = malloc((size_t)B * TB * 2 * C * sizeof(float));
    int pa[TA], pb[TB];
    pick(a, pa, kv, ROWS_A, TA);
    pick(bb, pb, kv, ROWS_B, TB);
    float *out = malloc(NOUT * sizeof(float)), *lse = malloc(NLSE * sizeof(float));
    float *o2 = malloc(NOUT * sizeof(float)), *l2 = malloc(NLSE * sizeof(float));
    K->attention_block_forward(out, lse, q, a, QPOS, pa, B, TQ, TA, C, NH, KPREC_FP32);
    K->attention_block_forward(o2, l2, q, bb, QPOS, pb, B, TQ, TB, C, NH, KPREC_FP32);
    K->attention_merge(out, lse, o2, l2, B, TQ, C, NH);

    fd_ctx c = {kr_to_double(q, NQ), kr_to_double(kv, NKV), kr_doubles(NOUT), G};
    double *fq = kr_doubles(NQ), *fkv = kr_doubles(NKV);
    kr_finite_diff(fd_loss, &c, c.q, NQ, 1e-5, fq);
    kr_finite_diff(fd_loss, &c, c.kv, NKV, 1e-5, fkv);

    float *gq = calloc(NQ, sizeof(float)), *ga = calloc((size_t)B * TA * 2 * C, sizeof(float));
    float *gb = calloc((size_t)B * TB * 2 * C, sizeof(float)), *gkv = calloc(NKV, sizeof(float));
    K->attention_block_backward(gq, ga, G, q, a, out, lse, QPOS, pa, B, TQ, TA, C, NH, KPREC_FP32);
    K->attention_block_backward(gq, gb, G, q, bb, out, lse, QPOS, pb, B, TQ, TB, C, NH, KPREC_FP32);
    assert_true(kr_rel_err(gq, fq, NQ) < 1e-4);
    /* the blocks' gradients back in the union's rows */
    for (int b = 0; b < B; b++) {
        for (int j = 0; j < TA; j++)
            memcpy(gkv + ((size_t)b * TK + ROWS_A[j]) * 2 * C, ga + ((size_t)b * TA + j) * 2 * C, 2 * C * sizeof(float));
        for (int j = 0; j < TB; j++)
            memcpy(gkv + ((size_t)b * TK + ROWS_B[j]) * 2 * C, gb + ((size_t)b * TB + j) * 2 * C, 2 * C * sizeof(float));
    }
    assert_true(kr_rel_err(gkv, fkv, NKV) < 1e-4);
    /* Accumulation: on top of random values R the result is R + gradient. */
    float *g2 = kr_floats(&r, (size_t)B * TA * 2 * C, 1);
    double *want = kr_to_double(g2, (size_t)B * TA * 2 * C);
    for (size_t i = 0; i < (size_t)B * TA * 2 * C; i++)
        want[i] += ga[i];
    float *gq2 = calloc(NQ, sizeof(float));
    K->attention_block_backward(gq2, g2, G, q, a, out, lse, QPOS, pa, B, TQ, TA, C, NH, KPREC_FP32);
    assert_true(kr_rel_err(g2, want, (size_t)B * TA * 2 * C) < 1e-6);
    free(q); free(kv); free(G); free(a); free(bb); free(out); free(lse); free(o2); free(l2);
    free(c.q); free(c.kv); free(c.out); free(fq); free(fkv); free(gq); free(ga); free(gb); free(gkv);
    free(g2); free(want); free(gq2);
}

/* bf16: the float64 attention of the rounded q, k and v, its output left unrounded (the merged
 * output is rounded once by the caller). */
static void forward_bf16_inputs_rounded(void **state)
{
    const kernels_backend *K = kernels_cpu();
    krng r = {34};
    float *q = kr_floats(&r, NQ, 1.5), *kv = kr_floats(&r, NKV, 1.5);
    float *out = malloc(NOUT * sizeof(float)), *lse = malloc(NLSE * sizeof(float));
    double *dq = kr_to_double(q, NQ), *dkv = kr_to_double(kv, NKV), *ref = kr_doubles(NOUT), *rl = kr_doubles(NLSE);
    for (size_t i = 0; i < NQ; i++)
        dq[i] = kr_round(dq[i], KPREC_BF16);
    for (size_t i = 0; i < NKV; i++)
        dkv[i] = kr_round(dkv[i], KPREC_BF16);
    ref_attention(ref, rl, dq, dkv, KPOS, TK);
    K->attention_block_forward(out, lse, q, kv, QPOS, KPOS, B, TQ, TK, C, NH, KPREC_BF16);
    assert_true(kr_rel_err(out, ref, NOUT) < 1e-5);
    check_lse(lse, rl, 1e-5);
    free(q); free(kv); free(out); free(lse); free(dq); free(dkv); free(ref); free(rl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(one_block_forward),
        cmocka_unit_test(merged_blocks_equal_whole),
        cmocka_unit_test(block_backward_finite_differences),
        cmocka_unit_test(forward_bf16_inputs_rounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
