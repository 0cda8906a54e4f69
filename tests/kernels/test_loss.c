/* Fused softmax + cross-entropy and the token/position embeddings against float64: losses,
 * the logits' gradient against central differences of dloss * sum(losses), accumulation,
 * stability at large logits, and the embedding gradient with repeated tokens. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <cmocka.h>
#include "kref.h"

enum { N = 13, V = 37 };

static double ref_ce_row(const double *x, int target)
{
    double m = -INFINITY, z = 0;
    for (int v = 0; v < V; v++)
        m = fmax(m, x[v]);
    for (int v = 0; v < V; v++)
        z += exp(x[v] - m);
    return m + log(z) - x[target];
}

typedef struct {
    double *logits;
    const int *targets;
    double dloss;
} ce_ctx;

static double ce_loss(void *p)
{
    ce_ctx *c = p;
    double s = 0;
    for (int i = 0; i < N; i++)
        s += ref_ce_row(c->logits + i * V, c->targets[i]);
    return c->dloss * s;
}

static void cross_entropy(void **state)
{
    const kernels_backend *K = kernels_cpu();
    krng r = {41};
    int targets[N];
    for (int i = 0; i < N; i++)
        targets[i] = (int)krng_below(&r, V);
    targets[0] = 0;
    targets[1] = V - 1; /* both ends of the vocabulary */
    for (int big = 0; big < 2; big++) {
        float *logits = kr_floats(&r, N * V, big ? 40 : 4), *loss = malloc(N * sizeof(float));
        if (big) /* logits near 1e4: exp would overflow without the max subtracted */
            for (int i = 0; i < N * V; i++)
                logits[i] += 1e4f;
        ce_ctx c = {kr_to_double(logits, N * V), targets, 0.37};
        double ref[N];
        for (int i = 0; i < N; i++)
            ref[i] = ref_ce_row(c.logits + i * V, targets[i]);
        K->cross_entropy_forward(loss, logits, targets, N, V);
        assert_true(kr_rel_err(loss, ref, N) < (big ? 1e-4 : 1e-5));

        double *fd = kr_doubles(N * V);
        kr_finite_diff(ce_loss, &c, c.logits, N * V, big ? 1e-2 : 1e-5, fd);
        float *g = kr_floats(&r, N * V, 1);
        double *want = kr_to_double(g, N * V);
        for (int i = 0; i < N * V; i++)
            want[i] += fd[i];
        K->cross_entropy_backward(g, logits, targets, (float)c.dloss, N, V);
        assert_true(kr_rel_err(g, want, N * V) < 1e-5);
        float *z = calloc(N * V, sizeof(float));
        K->cross_entropy_backward(z, logits, targets, (float)c.dloss, N, V);
        assert_true(kr_rel_err(z, fd, N * V) < 1e-4);
        free(logits); free(loss); free(c.logits); free(fd); free(g); free(want); free(z);
    }
}

static void encoder(void **state)
{
    const kernels_backend *K = kernels_cpu();
    enum { B = 3, T = 7, C = 12, VOCAB = 5 };
    krng r = {42};
    int tok[B * T];
    for (int i = 0; i < B * T; i++)
        tok[i] = (int)krng_below(&r, VOCAB - 1); /* the last token never appears */
    float *wte = kr_floats(&r, VOCAB * C, 1), *wpe = kr_floats(&r, T * C, 1), *out = malloc(B * T * C * sizeof(float));
    K->encoder_forward(out, tok, wte, wpe, B, T, C);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int c = 0; c < C; c++)
                assert_true(out[(b * T + t) * C + c] == wte[tok[b * T + t] * C + c] + wpe[t * C + c]);

    /* L = sum(G * out): dwte[v] = sum of G rows whose token is v, dwpe[t] = sum over the batch. */
    float *G = kr_floats(&r, B * T * C, 1), *dwte = kr_floats(&r, VOCAB * C, 1), *dwpe = kr_floats(&r, T * C, 1);
    double *wte_want = kr_to_double(dwte, VOCAB * C), *wpe_want = kr_to_double(dwpe, T * C);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int c = 0; c < C; c++) {
                wte_want[tok[b * T + t] * C + c] += G[(b * T + t) * C + c];
                wpe_want[t * C + c] += G[(b * T + t) * C + c];
            }
    K->encoder_backward(dwte, dwpe, G, tok, B, T, C);
    assert_true(kr_rel_err(dwte, wte_want, VOCAB * C) < 1e-6);
    assert_true(kr_rel_err(dwpe, wpe_want, T * C) < 1e-6);
    free(wte); free(wpe); free(out); free(G); free(dwte); free(dwpe); free(wte_want); free(wpe_want);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cross_entropy),
        cmocka_unit_test(encoder),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
