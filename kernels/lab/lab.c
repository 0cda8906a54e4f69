/* The lab's shared machinery: seeded inputs, backend buffers, the float64 model of bf16/fp16,
 * the comparison every check prints, and the timing every benchmark prints. Nothing here calls
 * a compute kernel, so the references in the op files stay independent of the backends. */
#include "lab.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const lab_dim_names[LAB_NDIMS] = {"B", "T", "C", "NH", "N", "OC", "V", "G", "HD"};

/* ---- inputs: splitmix64, one stream per tensor so shapes do not shift each other -------- */
lab_rng lab_rng_make(uint64_t seed, uint64_t stream)
{
    lab_rng g = {seed * 0x9e3779b97f4a7c15ull ^ (stream + 1) * 0xbf58476d1ce4e5b9ull};
    return g;
}

uint64_t lab_rng_next(lab_rng *g)
{
    uint64_t z = (g->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double lab_uniform(lab_rng *g) { return (double)(lab_rng_next(g) >> 11) * 0x1p-52 - 1.0; }

uint32_t lab_below(lab_rng *g, uint32_t n) { return (uint32_t)((lab_rng_next(g) >> 32) % n); }

void *lab_xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "klab: out of host memory (%zu bytes)\n", bytes);
        exit(1);
    }
    return p;
}

float *lab_floats(lab_rng *g, size_t n, double scale)
{
    float *x = lab_xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(scale * lab_uniform(g));
    return x;
}

int *lab_ints(lab_rng *g, size_t n, int below)
{
    int *x = lab_xmalloc(n * sizeof(int));
    for (size_t i = 0; i < n; i++)
        x[i] = (int)lab_below(g, (uint32_t)below);
    return x;
}

double *lab_widen(const float *x, size_t n)
{
    double *d = lab_xmalloc(n * sizeof(double));
    for (size_t i = 0; i < n; i++)
        d[i] = x[i];
    return d;
}

double *lab_dzeros(size_t n)
{
    double *d = calloc(n ? n : 1, sizeof(double));
    if (!d) {
        fprintf(stderr, "klab: out of host memory\n");
        exit(1);
    }
    return d;
}

/* ---- backend memory ------------------------------------------------------------------- */
void *lab_upload(const lab_run *r, const void *host, size_t bytes)
{
    void *d = r->k->alloc(bytes);
    r->k->copy_to_device(d, host, bytes);
    return d;
}

void *lab_zeros(const lab_run *r, size_t bytes) { return r->k->alloc(bytes); }

float *lab_download(const lab_run *r, const float *dev, size_t n)
{
    float *h = lab_xmalloc(n * sizeof(float));
    r->k->synchronize();
    r->k->copy_to_host(h, dev, n * sizeof(float));
    return h;
}

void lab_release(const lab_run *r, void *dev)
{
    if (dev)
        r->k->free(dev);
}

/* ---- bf16 / fp16 in double ------------------------------------------------------------ */
double lab_round(double x, kernels_precision prec)
{
    if (prec == KPREC_FP32)
        return (double)(float)x;
    if (x == 0 || isnan(x) || isinf(x))
        return x;
    /* stored mantissa bits, smallest normal exponent, largest finite value */
    int mant = prec == KPREC_BF16 ? 7 : 10, emin = prec == KPREC_BF16 ? -126 : -14;
    double maxval = prec == KPREC_BF16 ? ldexp(2.0 - ldexp(1.0, -7), 127) : 65504.0;
    int e;
    frexp(x, &e);                 /* |x| in [2^(e-1), 2^e) */
    int E = e - 1 < emin ? emin : e - 1; /* below the normals the spacing stays the subnormals' */
    double ulp = ldexp(1.0, E - mant);
    double y = nearbyint(x / ulp) * ulp; /* x / ulp is exact: a power-of-two scaling */
    if (fabs(y) > maxval)
        return copysign(INFINITY, x);
    return y;
}

const char *lab_prec_name(kernels_precision prec)
{
    return prec == KPREC_BF16 ? "bf16" : prec == KPREC_FP16 ? "fp16" : "fp32";
}

/* ---- checking ------------------------------------------------------------------------- */
static void report(lab_run *r, const char *op, kernels_precision prec, const char *tensor, size_t n, int ok,
                   const char *detail)
{
    r->compared++;
    if (!ok)
        r->failures++;
    printf("  %-4s %-24s %-4s %-8s n=%-8zu %s  %s\n", r->k->name, op, lab_prec_name(prec), tensor, n, detail,
           ok ? "ok" : "FAIL");
    fflush(stdout);
}

int lab_compare_double(lab_run *r, const char *op, kernels_precision prec, const char *tensor, const double *got,
                       const double *ref, size_t n, lab_tol tol)
{
    double maxref = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(ref[i]) && fabs(ref[i]) > maxref)
            maxref = fabs(ref[i]);
    double max_abs = 0, max_rel = 0, worst = 0;
    size_t bad_special = 0;
    for (size_t i = 0; i < n; i++) {
        double g = got[i], w = ref[i];
        if (!isfinite(w) || !isfinite(g)) { /* specials must match exactly */
            if (!(isnan(w) ? isnan(g) : g == w))
                bad_special++;
            continue;
        }
        double err = fabs(g - w), bound = tol.rtol * fabs(w) + tol.atol * maxref;
        if (err > max_abs)
            max_abs = err;
        if (fabs(w) >= 1e-3 * maxref && w != 0 && err / fabs(w) > max_rel)
            max_rel = err / fabs(w);
        double ratio = bound > 0 ? err / bound : (err > 0 ? INFINITY : 0);
        if (ratio > worst)
            worst = ratio;
    }
    int ok = worst <= 1.0 && bad_special == 0;
    char detail[200];
    snprintf(detail, sizeof detail, "max_abs %.2e  max_rel %.2e  (rtol %.1e atol %.1e: worst %.3f%s)", max_abs,
             max_rel, tol.rtol, tol.atol, worst, bad_special ? ", non-finite mismatch" : "");
    report(r, op, prec, tensor, n, ok, detail);
    return ok;
}

int lab_compare(lab_run *r, const char *op, kernels_precision prec, const char *tensor, const float *got,
                const double *ref, size_t n, lab_tol tol)
{
    double *g = lab_widen(got, n);
    int ok = lab_compare_double(r, op, prec, tensor, g, ref, n, tol);
    free(g);
    return ok;
}

int lab_compare_dev(lab_run *r, const char *op, kernels_precision prec, const char *tensor, const float *dev,
                    const double *ref, size_t n, lab_tol tol)
{
    float *h = lab_download(r, dev, n);
    int ok = lab_compare(r, op, prec, tensor, h, ref, n, tol);
    free(h);
    return ok;
}

int lab_exact(lab_run *r, const char *op, kernels_precision prec, const char *tensor, size_t mismatches,
              size_t n)
{
    char detail[200];
    snprintf(detail, sizeof detail, "exact: %zu mismatches", mismatches);
    report(r, op, prec, tensor, n, mismatches == 0, detail);
    return mismatches == 0;
}

/* ---- benchmarking --------------------------------------------------------------------- */
static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

double lab_time(lab_run *r, lab_call fn, const void *args)
{
    int n = r->repeats;
    double *t = lab_xmalloc((size_t)n * sizeof(double));
    fn(args); /* warm-up: first touch, library heuristics, lazy loading */
    r->k->synchronize();
    for (int i = 0; i < n; i++) {
        r->k->event_record(r->start);
        fn(args);
        r->k->event_record(r->end);
        t[i] = r->k->event_elapsed_s(r->start, r->end);
    }
    qsort(t, (size_t)n, sizeof t[0], cmp_double);
    double med = t[n / 2];
    free(t);
    return med;
}

void lab_bench(lab_run *r, const char *op, kernels_precision prec, const char *shape, lab_call fn,
               const void *args, double work, int flops)
{
    double s = lab_time(r, fn, args);
    double rate = s > 0 ? work / s : 0;
    printf("  %-4s %-24s %-4s %-30s %10.4f ms  %9.4f %s\n", r->k->name, op, lab_prec_name(prec), shape, s * 1e3,
           flops ? rate / 1e12 : rate / 1e9, flops ? "TFLOP/s" : "GB/s");
    fflush(stdout);
}

void lab_shape_str(const lab_run *r, const char *dims, char *out, size_t len)
{
    /* dims is a space-separated list of names: print them in its order */
    size_t used = 0;
    out[0] = 0;
    for (const char *p = dims; *p && used < len;) {
        while (*p == ' ')
            p++;
        size_t wl = strcspn(p, " ");
        for (int d = 0; d < LAB_NDIMS && wl; d++)
            if (strlen(lab_dim_names[d]) == wl && !strncmp(p, lab_dim_names[d], wl))
                used += (size_t)snprintf(out + used, len - used, "%s%s=%ld", used ? " " : "", lab_dim_names[d],
                                         r->dim[d]);
        p += wl;
    }
}
