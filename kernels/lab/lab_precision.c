/* precision: the table's conversions between fp32 and the 16-bit formats, bf16 (8 exponent, 7
 * mantissa bits) and fp16 (5 exponent, 10 mantissa bits), round to nearest with ties to even:
 *   round_to_precision(x)  x rounded to the format, kept in fp32 (in place);
 *   cast_to_half(x)        the 16-bit pattern of the rounded value;
 *   cast_from_half(h)      the value of a 16-bit pattern, in fp32 (exact).
 * The reference rounds with lab_round (frexp/ldexp/nearbyint in double) and builds or reads the
 * bit patterns from sign, exponent and mantissa arithmetic, never from a backend's helper.
 * Inputs: random 32-bit patterns (every exponent, inf, NaN), values at the formats' scales,
 * exact ties, subnormals, the overflow boundary, +-0 and +-inf; cast_from_half takes all 65536
 * patterns. Tolerance: exact (bit patterns; any NaN matches any NaN). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "lab.h"

typedef struct {
    int mant, bias, emin, expmax; /* stored mantissa bits, exponent bias, min normal exponent, all-ones field */
} format;

static format fmt_of(kernels_precision p)
{
    return p == KPREC_BF16 ? (format){7, 127, -126, 255} : (format){10, 15, -14, 31};
}

/* The 16-bit pattern of y, a value the format holds (lab_round's result). NaN: the canonical
 * quiet NaN (the check accepts any NaN pattern). */
static uint16_t encode(double y, kernels_precision p)
{
    format f = fmt_of(p);
    uint16_t sign = signbit(y) ? 0x8000 : 0;
    if (isnan(y))
        return (uint16_t)(sign | f.expmax << f.mant | 1u << (f.mant - 1));
    if (isinf(y))
        return (uint16_t)(sign | f.expmax << f.mant);
    double a = fabs(y);
    if (a == 0)
        return sign;
    int e;
    frexp(a, &e);
    int E = e - 1;
    if (E < f.emin) /* subnormal: a multiple of 2^(emin - mant) */
        return (uint16_t)(sign | (uint16_t)ldexp(a, f.mant - f.emin));
    unsigned m = (unsigned)(ldexp(a, f.mant - E) - ldexp(1.0, f.mant));
    return (uint16_t)(sign | (unsigned)(E + f.bias) << f.mant | m);
}

static double decode(uint16_t h, kernels_precision p)
{
    format f = fmt_of(p);
    double s = (h & 0x8000) ? -1 : 1;
    unsigned e = (h >> f.mant) & (unsigned)f.expmax, m = h & ((1u << f.mant) - 1);
    if (e == (unsigned)f.expmax)
        return m ? NAN : s * INFINITY;
    if (e == 0)
        return s * ldexp(m, f.emin - f.mant);
    return s * ldexp(1.0 + ldexp(m, -f.mant), (int)e - f.bias);
}

static int is_nan16(uint16_t h, kernels_precision p)
{
    format f = fmt_of(p);
    return ((h >> f.mant) & (unsigned)f.expmax) == (unsigned)f.expmax && (h & ((1u << f.mant) - 1));
}

static uint32_t bits_of(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

static float float_of(uint32_t u)
{
    float x;
    memcpy(&x, &u, 4);
    return x;
}

/* n inputs, a quarter of each kind; the special values first. */
static float *inputs(lab_rng *g, size_t n, kernels_precision p)
{
    float *x = lab_xmalloc(n * sizeof(float));
    const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 65504.0f, 65519.99f, 65520.0f, -65520.0f,
                             65536.0f, 3.389531e38f, 3.4028235e38f, 5.9604645e-8f, 2.9802322e-8f, 1e-45f, 1.1754942e-38f};
    size_t ns = sizeof special / sizeof special[0], i = 0;
    for (; i < ns && i < n; i++)
        x[i] = special[i];
    int drop = p == KPREC_BF16 ? 16 : 13; /* fp32 mantissa bits the format drops */
    for (; i < n; i++) {
        uint32_t u = (uint32_t)lab_rng_next(g);
        switch (i % 4) {
        case 0: /* any pattern */
            x[i] = float_of(u);
            break;
        case 1: /* a value at the format's scales, exponent spread over its range and below */
            x[i] = (float)ldexp(lab_uniform(g), (int)lab_below(g, p == KPREC_BF16 ? 80 : 44) - (p == KPREC_BF16 ? 40 : 28));
            break;
        case 2: /* an exact tie between two neighbours of the format */
            x[i] = (float)ldexp(lab_uniform(g), (int)lab_below(g, 30) - 15);
            x[i] = float_of((bits_of(x[i]) & ~((1u << drop) - 1)) | 1u << (drop - 1));
            break;
        default: /* fp16 subnormals and the smallest normals (tiny in bf16) */
            x[i] = (float)(lab_uniform(g) * ldexp(1.0, -13));
        }
    }
    return x;
}

static void check(lab_run *r)
{
    size_t n = (size_t)r->dim[LAB_N];
    for (int pi = KPREC_BF16; pi <= KPREC_FP16; pi++) {
        if (!(r->precs & LAB_PREC_BIT(pi)))
            continue;
        kernels_precision p = (kernels_precision)pi;
        lab_rng g = lab_rng_make(r->seed, 21 + (uint64_t)pi);
        float *x = inputs(&g, n, p);
        float *d_x = lab_upload(r, x, n * 4);
        uint16_t *d_h = lab_zeros(r, n * 2);
        uint16_t *h = lab_xmalloc(n * 2);

        size_t bad = 0;
        r->k->round_to_precision(d_x, n, p);
        float *got = lab_download(r, d_x, n);
        for (size_t i = 0; i < n; i++) {
            double want = lab_round(x[i], p);
            bad += isnan(want) ? !isnan(got[i]) : bits_of(got[i]) != bits_of((float)want);
        }
        lab_exact(r, "round_to_precision", p, "x", bad, n);
        free(got);

        r->k->copy_to_device(d_x, x, n * 4);
        r->k->cast_to_half(d_h, d_x, n, p);
        r->k->synchronize();
        r->k->copy_to_host(h, d_h, n * 2);
        bad = 0;
        for (size_t i = 0; i < n; i++) {
            uint16_t want = encode(lab_round(x[i], p), p);
            bad += is_nan16(want, p) ? !is_nan16(h[i], p) : h[i] != want;
        }
        lab_exact(r, "cast_to_half", p, "bits", bad, n);

        /* every 16-bit pattern back to fp32 */
        uint16_t *all = lab_xmalloc(65536 * 2);
        for (uint32_t i = 0; i < 65536; i++)
            all[i] = (uint16_t)i;
        uint16_t *d_all = lab_upload(r, all, 65536 * 2);
        float *d_back = lab_zeros(r, 65536 * 4);
        r->k->cast_from_half(d_back, d_all, 65536, p);
        float *back = lab_download(r, d_back, 65536);
        bad = 0;
        for (uint32_t i = 0; i < 65536; i++) {
            double want = decode((uint16_t)i, p);
            bad += isnan(want) ? !isnan(back[i]) : bits_of(back[i]) != bits_of((float)want);
        }
        lab_exact(r, "cast_from_half", p, "value", bad, 65536);

        free(back);
        free(all);
        free(h);
        free(x);
        lab_release(r, d_all);
        lab_release(r, d_back);
        lab_release(r, d_x);
        lab_release(r, d_h);
    }
}

typedef struct {
    const kernels_backend *k;
    float *x, *y;
    uint16_t *h;
    size_t n;
    kernels_precision p;
} prec_args;

static void call_round(const void *v)
{
    const prec_args *a = v;
    a->k->round_to_precision(a->x, a->n, a->p);
}

static void call_to(const void *v)
{
    const prec_args *a = v;
    a->k->cast_to_half(a->h, a->x, a->n, a->p);
}

static void call_from(const void *v)
{
    const prec_args *a = v;
    a->k->cast_from_half(a->y, a->h, a->n, a->p);
}

/* Bytes: rounding reads and writes 4 bytes an element; the casts read 4 and write 2, or back. */
static void bench(lab_run *r)
{
    size_t n = (size_t)r->dim[LAB_N];
    lab_rng g = lab_rng_make(r->seed, 24);
    float *hx = lab_floats(&g, n, 1.0);
    prec_args a = {.k = r->k, .n = n};
    a.x = lab_upload(r, hx, n * 4);
    a.y = lab_zeros(r, n * 4);
    a.h = lab_zeros(r, n * 2);
    char shape[96];
    lab_shape_str(r, "N", shape, sizeof shape);
    for (int pi = KPREC_BF16; pi <= KPREC_FP16; pi++) {
        if (!(r->precs & LAB_PREC_BIT(pi)))
            continue;
        a.p = (kernels_precision)pi;
        lab_bench(r, "round_to_precision", a.p, shape, call_round, &a, 8.0 * n, 0);
        lab_bench(r, "cast_to_half", a.p, shape, call_to, &a, 6.0 * n, 0);
        lab_bench(r, "cast_from_half", a.p, shape, call_from, &a, 6.0 * n, 0);
    }
    lab_release(r, a.x);
    lab_release(r, a.y);
    lab_release(r, a.h);
    free(hx);
}

const lab_op lab_precision = {
    .name = "precision",
    .what = "fp32 <-> bf16/fp16: round_to_precision, cast_to_half, cast_from_half (bit-exact)",
    .dims = "N",
    .precs = LAB_HALF_PRECS,
    .check_dim = {[LAB_N] = 20011},
    .bench_cpu = {[LAB_N] = 1 << 22},
    .bench_gpu = {[LAB_N] = 124 << 20},
    .check = check,
    .bench = bench,
};
