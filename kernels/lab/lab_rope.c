/* rope: rotary position embeddings, rotate-half form (kernels.h). x holds B*T rows of
 * row = (NH + 2G) HD floats, a grouped-query qkv row: NH query heads, G key heads, G value
 * heads. The first nheads = NH + G heads (q and k) are rotated, the value heads left alone.
 * Row (b, t) sits at position p = pos[t] (p = t without pos); element i < HD/2 of a head pairs
 * with j = i + HD/2 and both turn by a = p theta_i, theta_i = base^(-2i/HD) in fp32:
 *   x_i' = x_i cos a - x_j sin a,   x_j' = x_j cos a + x_i sin a.
 * The backward transforms (it does not add): dx becomes the transpose rotation of dx,
 *   dx_i' = dx_i cos a + dx_j sin a,   dx_j' = dx_j cos a - dx_i sin a.
 * The reference takes theta_i as the fp32 value nearest base^(-2i/HD) and works in double from
 * there. rope is linear, so instead of finite differences the reference's backward is checked
 * to be its forward's adjoint (<R x, y> = <x, R^T y>) and inverse (R^T R x = x), in double.
 *
 * Cases: head size HD at base 10000 (Llama 2) and 4 HD at base 500000 (Llama 3), each with
 * p = t and with the non-contiguous positions a context-parallel rank holds (here pairs of
 * positions, every third pair: 0, 1, 6, 7, 12, ...). Each checks the forward, the backward
 * (from a gradient unrelated to x), backward(forward(x)) = x, and that the value heads come
 * back bit for bit.
 *
 * Tolerances (rtol, atol):
 *   forward, backward   1e-5, 1e-5   the backends form the angle p theta_i in fp32: theta_i
 *                                    within ~2 ulp and the product's rounding put it within
 *                                    ~2e-6 rad of the reference's for p <= 36 (the check's
 *                                    largest), an error of ~2e-6 of the pair's size. At
 *                                    positions in the thousands the same ulps move the angle
 *                                    by ~1e-4 rad: keep --T small when checking.
 *   backward(forward)   1e-6, 1e-6   the same angle both ways: only the roundings of the
 *                                    products and of cos^2 + sin^2 = 1, a few ulp
 *   reference adjoint and inverse (double)  1e-12, 1e-12 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lab.h"

typedef struct {
    int B, T, row, nheads, hd;
    double base;
    const int *pos; /* NULL: p = t */
} rope_shape;

/* y = R x (sign +1) or R^T x (sign -1); y and x may be the same array. */
static void ref_rope(double *y, const double *x, const rope_shape *s, double sign)
{
    int half = s->hd / 2;
    size_t n = (size_t)s->B * s->T * s->row;
    if (y != x)
        memcpy(y, x, n * sizeof(double));
    for (int b = 0; b < s->B; b++)
        for (int t = 0; t < s->T; t++) {
            double p = s->pos ? s->pos[t] : t;
            double *yr = y + ((size_t)b * s->T + t) * s->row;
            for (int i = 0; i < half; i++) {
                double theta = (float)pow(s->base, -2.0 * i / s->hd);
                double c = cos(p * theta), sn = sign * sin(p * theta);
                for (int h = 0; h < s->nheads; h++) {
                    double *a = yr + (size_t)h * s->hd + i, *z = a + half;
                    double x0 = *a, x1 = *z;
                    *a = x0 * c - x1 * sn;
                    *z = x1 * c + x0 * sn;
                }
            }
        }
}

static size_t rope_size(const rope_shape *s) { return (size_t)s->B * s->T * s->row; }

/* Elements outside the rotated heads of got that differ in any bit from x. */
static size_t untouched_mismatches(const float *got, const float *x, const rope_shape *s)
{
    size_t bad = 0, rotated = (size_t)s->nheads * s->hd;
    for (size_t r = 0; r < (size_t)s->B * s->T; r++)
        for (size_t c = rotated; c < (size_t)s->row; c++)
            bad += memcmp(&got[r * s->row + c], &x[r * s->row + c], sizeof(float)) != 0;
    return bad;
}

/* The reference's backward is the transpose (adjoint) and inverse of its forward. */
static void check_reference(lab_run *r, const char *name, const double *x, const double *y, const rope_shape *s)
{
    size_t n = rope_size(s);
    double *rx = lab_dzeros(n), *rty = lab_dzeros(n), *back = lab_dzeros(n);
    ref_rope(rx, x, s, 1);
    ref_rope(rty, y, s, -1);
    ref_rope(back, rx, s, -1);
    double lhs = 0, rhs = 0;
    for (size_t i = 0; i < n; i++) {
        lhs += rx[i] * y[i];
        rhs += x[i] * rty[i];
    }
    lab_compare_double(r, name, KPREC_FP32, "adjoint", &lhs, &rhs, 1, (lab_tol){1e-12, 0});
    lab_compare_double(r, name, KPREC_FP32, "inverse", back, x, n, (lab_tol){1e-12, 1e-12});
    free(rx);
    free(rty);
    free(back);
}

static void check_case(lab_run *r, const rope_shape *s, const char *label, uint64_t stream)
{
    size_t n = rope_size(s), nv = (size_t)s->B * s->T * (s->row - s->nheads * s->hd);
    lab_rng g = lab_rng_make(r->seed, stream);
    float *x = lab_floats(&g, n, 1.0), *dx = lab_floats(&g, n, 1.0);
    double *xd = lab_widen(x, n), *dxd = lab_widen(dx, n), *ref = lab_dzeros(n), *rdx = lab_dzeros(n);
    char fwd[48], bwd[48], trip[48], refname[48];
    snprintf(fwd, sizeof fwd, "rope_forward %s", label);
    snprintf(bwd, sizeof bwd, "rope_backward %s", label);
    snprintf(trip, sizeof trip, "rope_bwd(fwd) %s", label);
    snprintf(refname, sizeof refname, "rope_reference %s", label);
    lab_tol tol = {1e-5, 1e-5};

    float *d_x = lab_upload(r, x, n * 4);
    r->k->rope_forward(d_x, s->pos, s->B, s->T, s->row, s->nheads, s->hd, (float)s->base);
    ref_rope(ref, xd, s, 1);
    float *got = lab_download(r, d_x, n);
    lab_compare(r, fwd, KPREC_FP32, "x", got, ref, n, tol);
    lab_exact(r, fwd, KPREC_FP32, "v heads", untouched_mismatches(got, x, s), nv);
    free(got);

    /* the same buffer back through the backward: x again */
    r->k->rope_backward(d_x, s->pos, s->B, s->T, s->row, s->nheads, s->hd, (float)s->base);
    lab_compare_dev(r, trip, KPREC_FP32, "x", d_x, xd, n, (lab_tol){1e-6, 1e-6});

    float *d_dx = lab_upload(r, dx, n * 4);
    r->k->rope_backward(d_dx, s->pos, s->B, s->T, s->row, s->nheads, s->hd, (float)s->base);
    ref_rope(rdx, dxd, s, -1);
    got = lab_download(r, d_dx, n);
    lab_compare(r, bwd, KPREC_FP32, "dx", got, rdx, n, tol);
    lab_exact(r, bwd, KPREC_FP32, "v heads", untouched_mismatches(got, dx, s), nv);
    free(got);

    check_reference(r, refname, xd, dxd, s);

    void *hosts[] = {x, dx, xd, dxd, ref, rdx};
    for (size_t i = 0; i < sizeof hosts / sizeof hosts[0]; i++)
        free(hosts[i]);
    lab_release(r, d_x);
    lab_release(r, d_dx);
}

static void check(lab_run *r)
{
    int B = (int)r->dim[LAB_B], T = (int)r->dim[LAB_T], NH = (int)r->dim[LAB_NH], G = (int)r->dim[LAB_G],
        HD = (int)r->dim[LAB_HD];
    int *cp = lab_xmalloc((size_t)T * sizeof(int));
    for (int t = 0; t < T; t++)
        cp[t] = (t / 2) * 6 + t % 2;
    static const double bases[] = {10000.0, 500000.0};
    for (int k = 0; k < 2; k++) {
        int hd = k == 0 ? HD : 4 * HD;
        for (int with_pos = 0; with_pos < 2; with_pos++) {
            rope_shape s = {B, T, (NH + 2 * G) * hd, NH + G, hd, bases[k], with_pos ? cp : NULL};
            char label[32];
            snprintf(label, sizeof label, "hd=%d%s", hd, with_pos ? " cp" : "");
            check_case(r, &s, label, 61 + 2 * (uint64_t)k + (uint64_t)with_pos);
        }
    }
    free(cp);
}

typedef struct {
    const kernels_backend *k;
    float *x;
    rope_shape s;
} rope_args;

static void call_fwd(const void *p)
{
    const rope_args *a = p;
    a->k->rope_forward(a->x, a->s.pos, a->s.B, a->s.T, a->s.row, a->s.nheads, a->s.hd, (float)a->s.base);
}

static void call_bwd(const void *p)
{
    const rope_args *a = p;
    a->k->rope_backward(a->x, a->s.pos, a->s.B, a->s.T, a->s.row, a->s.nheads, a->s.hd, (float)a->s.base);
}

/* Bytes: each call reads and writes the rotated heads in place (the value heads are not
 * touched). The positions are p = t. */
static void bench(lab_run *r)
{
    int B = (int)r->dim[LAB_B], T = (int)r->dim[LAB_T], NH = (int)r->dim[LAB_NH], G = (int)r->dim[LAB_G],
        HD = (int)r->dim[LAB_HD];
    rope_args a = {.k = r->k, .s = {B, T, (NH + 2 * G) * HD, NH + G, HD, 10000.0, NULL}};
    size_t n = rope_size(&a.s);
    lab_rng g = lab_rng_make(r->seed, 65);
    float *h = lab_floats(&g, n, 1.0);
    a.x = lab_upload(r, h, n * 4);
    char shape[96];
    lab_shape_str(r, "B T NH G HD", shape, sizeof shape);
    double bytes = 2.0 * B * T * a.s.nheads * HD * 4;
    lab_bench(r, "rope_forward", KPREC_FP32, shape, call_fwd, &a, bytes, 0);
    lab_bench(r, "rope_backward", KPREC_FP32, shape, call_bwd, &a, bytes, 0);
    lab_release(r, a.x);
    free(h);
}

static const char *invalid(const long *dim)
{
    if (dim[LAB_HD] % 2)
        return "the head size HD must be even";
    return NULL;
}

const lab_op lab_rope = {
    .name = "rope",
    .what = "rotary embeddings of a GQA qkv row, forward and backward, p = t and CP positions; fp32",
    .dims = "B T NH G HD",
    .precs = LAB_FP32_ONLY,
    .check_dim = {[LAB_B] = 2, [LAB_T] = 13, [LAB_NH] = 4, [LAB_G] = 2, [LAB_HD] = 16},
    .bench_cpu = {[LAB_B] = 2, [LAB_T] = 256, [LAB_NH] = 12, [LAB_G] = 4, [LAB_HD] = 64},
    .bench_gpu = {[LAB_B] = 8, [LAB_T] = 1024, [LAB_NH] = 12, [LAB_G] = 4, [LAB_HD] = 64},
    .invalid = invalid,
    .check = check,
    .bench = bench,
};
