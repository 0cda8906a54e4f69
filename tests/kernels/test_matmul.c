/* matmul_forward / matmul_backward against a float64 GEMM written here, in fp32 and in the
 * bf16/fp16 emulation (inputs rounded, fp32 accumulation, output rounded), with the backward
 * also checked by central finite differences of L = sum(G * out). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "kref.h"

enum { N = 37, C = 29, OC = 43 };

typedef struct {
    double *in, *w, *b, *out;
    const float *G;
} mm_ctx;

static void ref_matmul(double *out, const double *in, const double *w, const double *b)
{
    for (int i = 0; i < N; i++)
        for (int o = 0; o < OC; o++) {
            double s = b ? b[o] : 0;
            for (int c = 0; c < C; c++)
                s += in[i * C + c] * w[o * C + c];
            out[i * OC + o] = s;
        }
}

static double mm_loss(void *p)
{
    mm_ctx *x = p;
    ref_matmul(x->out, x->in, x->w, x->b);
    return kr_dot(x->G, x->out, (size_t)N * OC);
}

static void forward_fp32(void **state)
{
    const kernels_backend *K = kernels_cpu();
    krng r = {1};
    float *in = kr_floats(&r, N * C, 1), *w = kr_floats(&r, OC * C, 1), *b = kr_floats(&r, OC, 1);
    float *out = malloc(N * OC * sizeof(float));
    double *din = kr_to_double(in, N * C), *dw = kr_to_double(w, OC * C), *db = kr_to_double(b, OC);
    double *ref = kr_doubles(N * OC);
    ref_matmul(ref, din, dw, db);
    K->matmul_forward(out, in, w, b, N, C, OC, KPREC_FP32);
    assert_true(kr_rel_err(out, ref, N * OC) < 1e-5);
    ref_matmul(ref, din, dw, NULL); /* bias may be NULL */
    K->matmul_forward(out, in, w, NULL, N, C, OC, KPREC_FP32);
    assert_true(kr_rel_err(out, ref, N * OC) < 1e-5);
    free(in); free(w); free(b); free(out); free(din); free(dw); free(db); free(ref);
}

/* The emulation, element by element: the float64 product of the rounded inputs, rounded, is
 * what the kernel must give, up to one ulp of the format where the fp32 sum lands on the other
 * side of a rounding boundary. And overall, within the format's error of the exact product. */
static void forward_low_precision(void **state)
{
    const kernels_backend *K = kernels_cpu();
    krng r = {2};
    float *in = kr_floats(&r, N * C, 1), *w = kr_floats(&r, OC * C, 1), *b = kr_floats(&r, OC, 1);
    float *out = malloc(N * OC * sizeof(float));
    double *exact = kr_doubles(N * OC), *emul = kr_doubles(N * OC);
    double *din = kr_to_double(in, N * C), *dw = kr_to_double(w, OC * C), *db = kr_to_double(b, OC);
    ref_matmul(exact, din, dw, db);
    kernels_precision precs[2] = {KPREC_BF16, KPREC_FP16};
    double bounds[2] = {1e-2, 2e-3};
    for (int pi = 0; pi < 2; pi++) {
        kernels_precision p = precs[pi];
        double *rin = kr_doubles(N * C), *rw = kr_doubles(OC * C);
        for (int i = 0; i < N * C; i++)
            rin[i] = kr_round(in[i], p);
        for (int i = 0; i < OC * C; i++)
            rw[i] = kr_round(w[i], p);
        ref_matmul(emul, rin, rw, db); /* the bias joins the fp32 accumulator unrounded */
        K->matmul_forward(out, in, w, b, N, C, OC, p);
        int same = 0;
        for (int i = 0; i < N * OC; i++) {
            double want = kr_round(emul[i], p);
            assert_true((double)out[i] == kr_round(out[i], p)); /* output is on the format's grid */
            assert_true(fabs(out[i] - want) <= kr_ulp(want, p) + 1e-6 * C);
            same += out[i] == want;
        }
        assert_true(same > N * OC * 9 / 10);
        assert_true(kr_rel_err(out, exact, N * OC) < bounds[pi]);
        assert_true(kr_rel_err(out, exact, N * OC) > 1e-5); /* the rounding really happened */
        free(rin);
        free(rw);
    }
    free(in); free(w); free(b); free(out); free(exact); free(emul); free(din); free(dw); free(db);
}

static void backward_fp32_and_adds(void **state)
{
    const kernels_backend *K = kernels_cpu();
    krng r = {3};
    float *in = kr_floats(&r, N * C, 1), *w = kr_floats(&r, OC * C, 1), *b = kr_floats(&r, OC, 1);
    float *G = kr_floats(&r, N * OC, 1);
    mm_ctx x = {kr_to_double(in, N * C), kr_to_double(w, OC * C), kr_to_double(b, OC), kr_doubles(N * OC), G};
    double *fi = kr_doubles(N * C), *fw = kr_doubles(OC * C), *fb = kr_doubles(OC);
    kr_finite_diff(mm_loss, &x, x.in, N * C, 1e-3, fi);
    kr_finite_diff(mm_loss, &x, x.w, OC * C, 1e-3, fw);
    kr_finite_diff(mm_loss, &x, x.b, OC, 1e-3, fb);

    /* Gradient buffers start at random values R: the kernel must leave R + gradient. */
    float *gi = kr_floats(&r, N * C, 1), *gw = kr_floats(&r, OC * C, 1), *gb = kr_floats(&r, OC, 1);
    double *wi = kr_to_double(gi, N * C), *ww = kr_to_double(gw, OC * C), *wb = kr_to_double(gb, OC);
    K->matmul_backward(gi, gw, gb, G, in, w, N, C, OC, KPREC_FP32);
    for (int i = 0; i < N * C; i++) wi[i] += fi[i];
    for (int i = 0; i < OC * C; i++) ww[i] += fw[i];
    for (int i = 0; i < OC; i++) wb[i] += fb[i];
    assert_true(kr_rel_err(gi, wi, N * C) < 1e-5);
    assert_true(kr_rel_err(gw, ww, OC * C) < 1e-5);
    assert_true(kr_rel_err(gb, wb, OC) < 1e-5);

    /* From zero, twice: exactly twice the gradient (fp32 doubling is exact). */
    float *z1 = calloc(OC * C, sizeof(float)), *z2 = calloc(OC * C, sizeof(float));
    K->matmul_backward(NULL, z1, NULL, G, in, w, N, C, OC, KPREC_FP32); /* dinp, dbias may be NULL */
    K->matmul_backward(NULL, z2, NULL, G, in, w, N, C, OC, KPREC_FP32);
    K->matmul_backward(NULL, z2, NULL, G, in, w, N, C, OC, KPREC_FP32);
    for (int i = 0; i < OC * C; i++)
        assert_true(z2[i] == 2 * z1[i]);
    assert_true(kr_rel_err(z1, fw, OC * C) < 1e-5);
    free(in); free(w); free(b); free(G); free(x.in); free(x.w); free(x.b); free(x.out);
    free(fi); free(fw); free(fb); free(gi); free(gw); free(gb); free(wi); free(ww); free(wb); free(z1); free(z2);
}

/* bf16 backward: the products of the rounded dout, inp and weight, accumulated in fp32 into the
 * fp32 gradients (which are not rounded: they are the fp32 master gradients). */
static void backward_bf16(void **state)
{
    const kernels_backend *K = kernels_cpu();
    krng r = {4};
    float *in = kr_floats(&r, N * C, 1), *w = kr_floats(&r, OC * C, 1), *G = kr_floats(&r, N * OC, 1);
    double *ri = kr_doubles(N * C), *rw = kr_doubles(OC * C), *rb = kr_doubles(OC);
    for (int i = 0; i < N; i++)
        for (int o = 0; o < OC; o++) {
            double g = kr_round(G[i * OC + o], KPREC_BF16);
            rb[o] += g;
            for (int c = 0; c < C; c++) {
                ri[i * C + c] += g * kr_round(w[o * C + c], KPREC_BF16);
                rw[o * C + c] += g * kr_round(in[i * C + c], KPREC_BF16);
            }
        }
    float *gi = calloc(N * C, sizeof(float)), *gw = calloc(OC * C, sizeof(float)), *gb = calloc(OC, sizeof(float));
    K->matmul_backward(gi, gw, gb, G, in, w, N, C, OC, KPREC_BF16);
    assert_true(kr_rel_err(gi, ri, N * C) < 1e-5);
    assert_true(kr_rel_err(gw, rw, OC * C) < 1e-5);
    assert_true(kr_rel_err(gb, rb, OC) < 1e-5);
    free(in); free(w); free(G); free(ri); free(rw); free(rb); free(gi); free(gw); free(gb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(forward_fp32),
        cmocka_unit_test(forward_low_precision),
        cmocka_unit_test(backward_fp32_and_adds),
        cmocka_unit_test(backward_bf16),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
