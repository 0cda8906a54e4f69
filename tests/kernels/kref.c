/* See kref.h. */
#include "kref.h"
#include <math.h>
#include <stdlib.h>

static uint64_t next(krng *r) /* xorshift64*: fast, good enough for test data */
{
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 0x2545f4914f6cdd1dull;
}

double krng_uniform(krng *r)
{
    return (double)(next(r) >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

uint32_t krng_below(krng *r, uint32_t n)
{
    return (uint32_t)((next(r) >> 32) % n);
}

float *kr_floats(krng *r, size_t n, double scale)
{
    float *x = malloc((n ? n : 1) * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(krng_uniform(r) * scale);
    return x;
}

double *kr_to_double(const float *x, size_t n)
{
    double *d = malloc((n ? n : 1) * sizeof *d);
    for (size_t i = 0; i < n; i++)
        d[i] = x[i];
    return d;
}

double *kr_doubles(size_t n)
{
    return calloc(n ? n : 1, sizeof(double));
}

double kr_rel_err(const float *got, const double *want, size_t n)
{
    double num = 0, den = 1e-30;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i]))
            return INFINITY;
        num = fmax(num, fabs(got[i] - want[i]));
        den = fmax(den, fabs(want[i]));
    }
    return num / den;
}

void kr_finite_diff(kr_loss_fn f, void *ctx, double *x, size_t n, double h, double *grad)
{
    for (size_t i = 0; i < n; i++) {
        double keep = x[i];
        x[i] = keep + h;
        double lp = f(ctx);
        x[i] = keep - h;
        double lm = f(ctx);
        x[i] = keep;
        grad[i] = (lp - lm) / (2 * h);
    }
}

double kr_dot(const float *g, const double *y, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += g[i] * y[i];
    return s;
}

static int ulp_exponent(double x, int mant, int emin)
{
    int e;
    frexp(x, &e); /* x = f 2^e, f in [0.5, 1): the leading bit is 2^(e-1) */
    int lead = e - 1 < emin ? emin : e - 1; /* below the normals the spacing stays fixed */
    return lead - mant;
}

double kr_round_format(double x, int mant, int emin, double maxval)
{
    if (isnan(x) || isinf(x) || x == 0)
        return x;
    int ue = ulp_exponent(x, mant, emin);
    double r = ldexp(nearbyint(ldexp(x, -ue)), ue); /* default rounding mode: ties to even */
    if (fabs(r) > maxval)
        return copysign(INFINITY, x);
    return r;
}

double kr_round(double x, kernels_precision prec)
{
    switch (prec) {
    case KPREC_BF16: return kr_round_format(x, 7, -126, ldexp(255.0, 120)); /* (2 - 2^-7) 2^127 */
    case KPREC_FP16: return kr_round_format(x, 10, -14, 65504.0);
    default: return (float)x;
    }
}

double kr_ulp(double x, kernels_precision prec)
{
    switch (prec) {
    case KPREC_BF16: return ldexp(1.0, ulp_exponent(x == 0 ? 0x1p-126 : x, 7, -126));
    case KPREC_FP16: return ldexp(1.0, ulp_exponent(x == 0 ? 0x1p-14 : x, 10, -14));
    default: return ldexp(1.0, ulp_exponent(x == 0 ? 0x1p-126 : x, 23, -126));
    }
}
