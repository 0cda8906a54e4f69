/* klab: one op family of the kernel table at a time, checked against the float64 reference
 * in its lab file and benchmarked, on the CPU backend and on the CUDA backend where this build
 * has one and a GPU is present.
 *
 *   klab OP [--device cpu|cuda] [--check-only|--bench-only] [--prec LIST] [--repeats R]
 *           [--seed S] [--B n] [--T n] [--C n] [--NH n] [--N n] [--OC n] [--V n] [--G n] [--HD n]
 *   klab all [...]      every op in turn
 *   klab --list | --help
 *
 * Exit: 0 when every check passes, 1 when one fails, 2 on bad usage, 77 (CTest's "skipped")
 * when --device cuda is asked and there is no CUDA backend or no GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lab.h"

static const lab_op *const OPS[] = {&lab_matmul,    &lab_attention, &lab_layernorm, &lab_rmsnorm,
                                    &lab_rope,      &lab_kv_repeat, &lab_swiglu,    &lab_gelu,
                                    &lab_residual,  &lab_softmax,   &lab_cross_entropy, &lab_encoder,
                                    &lab_adamw,     &lab_precision, &lab_reductions};
enum { NOPS = sizeof OPS / sizeof OPS[0] };

enum { EXIT_PASS = 0, EXIT_FAIL = 1, EXIT_USAGE = 2, EXIT_SKIP = 77 };

static int usage(FILE *f, int rc)
{
    fprintf(f,
            "usage: klab OP [options]     check OP against its float64 reference, then benchmark it\n"
            "       klab all [options]    every op in turn\n"
            "       klab --list           the ops, their shape options and precisions\n"
            "options:\n"
            "  --device cpu|cuda      one backend (default: cpu, and cuda when built and a GPU is present)\n"
            "  --check-only           the check, no benchmark\n"
            "  --bench-only           the benchmark, no check\n"
            "  --prec LIST            comma-separated subset of fp32,bf16,fp16 (default: all the op has)\n"
            "  --repeats R            timed calls per benchmark case, median reported (default 5 cpu, 50 cuda)\n"
            "  --seed S               input seed (default 1234)\n"
            "  --B --T --C --NH --N --OC --V --G --HD n\n"
            "                         shape, for the check and the benchmark (the op's own only)\n"
            "exit: 0 pass, 1 a check failed, 2 bad usage, 77 no CUDA backend or GPU for --device cuda\n");
    return rc;
}

static void list_ops(void)
{
    printf("%-14s %-12s %-15s %s\n", "op", "shape", "precisions", "what");
    for (int i = 0; i < NOPS; i++) {
        char precs[32] = "";
        for (int p = KPREC_FP32; p <= KPREC_FP16; p++)
            if (OPS[i]->precs & LAB_PREC_BIT(p))
                snprintf(precs + strlen(precs), sizeof precs - strlen(precs), "%s%s", precs[0] ? "," : "",
                         lab_prec_name((kernels_precision)p));
        printf("%-14s %-12s %-15s %s\n", OPS[i]->name, OPS[i]->dims, precs, OPS[i]->what);
    }
}

static const lab_op *find_op(const char *name)
{
    for (int i = 0; i < NOPS; i++)
        if (!strcmp(OPS[i]->name, name))
            return OPS[i];
    return NULL;
}

/* Whether the op's dims list (space separated) names dimension d. */
static int op_takes(const lab_op *op, int d)
{
    char buf[64];
    snprintf(buf, sizeof buf, " %s ", op->dims);
    char word[16];
    snprintf(word, sizeof word, " %s ", lab_dim_names[d]);
    return strstr(buf, word) != NULL;
}

static int parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < lo || v > hi)
        return 0;
    *out = v;
    return 1;
}

static int parse_precs(const char *s, unsigned *mask)
{
    *mask = 0;
    char buf[64];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        if (!strcmp(tok, "fp32"))
            *mask |= LAB_PREC_BIT(KPREC_FP32);
        else if (!strcmp(tok, "bf16"))
            *mask |= LAB_PREC_BIT(KPREC_BF16);
        else if (!strcmp(tok, "fp16"))
            *mask |= LAB_PREC_BIT(KPREC_FP16);
        else
            return 0;
    }
    return *mask != 0;
}

typedef struct {
    int check, bench;
    unsigned precs; /* 0: the op's own */
    int repeats;    /* 0: the backend's default */
    uint64_t seed;
    long dim[LAB_NDIMS]; /* 0: the op's default */
} options;

/* Whether the options fit the op: a precision it has, and shapes it can run at (the user's
 * dims over each of its default shapes). Says why not on stderr. */
static int fits(const lab_op *op, const options *o)
{
    if (o->precs && !(o->precs & op->precs)) {
        fprintf(stderr, "klab: %s has none of the precisions asked\n", op->name);
        return 0;
    }
    const long *bases[] = {op->check_dim, op->bench_cpu, op->bench_gpu};
    for (int b = 0; b < 3 && op->invalid; b++) {
        long dim[LAB_NDIMS];
        for (int d = 0; d < LAB_NDIMS; d++)
            dim[d] = o->dim[d] ? o->dim[d] : bases[b][d];
        const char *why = op->invalid(dim);
        if (why) {
            fprintf(stderr, "klab: %s: %s\n", op->name, why);
            return 0;
        }
    }
    return 1;
}

/* Runs one op on one backend: the check, then the benchmark (options already fit the op).
 * Returns the failed comparisons. */
static int run_op(const lab_op *op, const kernels_backend *k, const options *o)
{
    int gpu = strcmp(k->name, "cpu") != 0;
    lab_run r = {.k = k, .seed = o->seed, .repeats = o->repeats ? o->repeats : gpu ? 50 : 5};
    r.precs = o->precs ? (o->precs & op->precs) : op->precs;
    for (int pass = 0; pass < 2; pass++) {
        if ((pass == 0 && !o->check) || (pass == 1 && !o->bench))
            continue;
        const long *base = pass == 0 ? op->check_dim : gpu ? op->bench_gpu : op->bench_cpu;
        for (int d = 0; d < LAB_NDIMS; d++)
            r.dim[d] = o->dim[d] ? o->dim[d] : base[d];
        char shape[96];
        lab_shape_str(&r, op->dims, shape, sizeof shape);
        if (pass == 0) {
            printf("%s on %s: check against the float64 reference at %s\n", op->name, k->name, shape);
            op->check(&r);
            printf("%s on %s: %d of %d comparisons passed\n", op->name, k->name, r.compared - r.failures,
                   r.compared);
        } else {
            printf("%s on %s: benchmark, median of %d calls after a warm-up\n", op->name, k->name, r.repeats);
            r.start = k->event_create();
            r.end = k->event_create();
            op->bench(&r);
            k->event_destroy(r.start);
            k->event_destroy(r.end);
        }
    }
    return r.failures;
}

int main(int argc, char **argv)
{
    const char *opname = NULL, *device = NULL;
    options o = {.check = 1, .bench = 1, .seed = 1234};
    int check_only = 0, bench_only = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_value = i + 1 < argc;
        long v;
        int d;
        for (d = 0; d < LAB_NDIMS; d++)
            if (a[0] == '-' && a[1] == '-' && !strcmp(a + 2, lab_dim_names[d]))
                break;
        if (!strcmp(a, "-h") || !strcmp(a, "--help"))
            return usage(stdout, EXIT_PASS);
        else if (!strcmp(a, "--list")) {
            list_ops();
            return EXIT_PASS;
        } else if (!strcmp(a, "--check-only"))
            check_only = 1;
        else if (!strcmp(a, "--bench-only"))
            bench_only = 1;
        else if (!strcmp(a, "--device") && has_value)
            device = argv[++i];
        else if (!strcmp(a, "--prec") && has_value) {
            if (!parse_precs(argv[++i], &o.precs)) {
                fprintf(stderr, "klab: --prec takes a list of fp32, bf16, fp16, not %s\n", argv[i]);
                return usage(stderr, EXIT_USAGE);
            }
        } else if (!strcmp(a, "--repeats") && has_value) {
            if (!parse_long(argv[++i], 1, 1001, &v)) {
                fprintf(stderr, "klab: --repeats must be in 1..1001\n");
                return EXIT_USAGE;
            }
            o.repeats = (int)v;
        } else if (!strcmp(a, "--seed") && has_value) {
            if (!parse_long(argv[++i], 0, 1L << 30, &v)) {
                fprintf(stderr, "klab: --seed must be a non-negative integer\n");
                return EXIT_USAGE;
            }
            o.seed = (uint64_t)v;
        } else if (d < LAB_NDIMS && has_value) {
            if (!parse_long(argv[++i], 1, 1L << 30, &v)) {
                fprintf(stderr, "klab: %s must be a positive integer, not %s\n", a, argv[i]);
                return EXIT_USAGE;
            }
            o.dim[d] = v;
        } else if (a[0] != '-' && !opname)
            opname = a;
        else {
            fprintf(stderr, "klab: unexpected argument %s\n", a);
            return usage(stderr, EXIT_USAGE);
        }
    }
    if (!opname) {
        fprintf(stderr, "klab: no op given (klab --list shows them)\n");
        return usage(stderr, EXIT_USAGE);
    }
    if (check_only && bench_only) {
        fprintf(stderr, "klab: --check-only and --bench-only exclude each other\n");
        return EXIT_USAGE;
    }
    o.check = !bench_only;
    o.bench = !check_only;

    const lab_op *ops[NOPS];
    int nops = 0;
    if (!strcmp(opname, "all"))
        for (int i = 0; i < NOPS; i++)
            ops[nops++] = OPS[i];
    else if ((ops[0] = find_op(opname)) != NULL)
        nops = 1;
    else {
        fprintf(stderr, "klab: unknown op %s (klab --list shows them)\n", opname);
        return EXIT_USAGE;
    }
    for (int d = 0; d < LAB_NDIMS; d++) /* a shape option the op does not take is a mistake */
        if (o.dim[d] && nops == 1 && !op_takes(ops[0], d)) {
            fprintf(stderr, "klab: %s takes the shape options %s, not --%s\n", ops[0]->name, ops[0]->dims,
                    lab_dim_names[d]);
            return EXIT_USAGE;
        }

    /* each op's options: with `all`, shape options apply to the ops that take them, and
     * `all --prec bf16` runs the ops that have bf16 */
    options per[NOPS];
    int run[NOPS], nrun = 0;
    for (int i = 0; i < nops; i++) {
        per[i] = o;
        for (int d = 0; d < LAB_NDIMS; d++)
            if (!op_takes(ops[i], d))
                per[i].dim[d] = 0;
        run[i] = !(nops > 1 && o.precs && !(o.precs & ops[i]->precs));
        if (run[i] && !fits(ops[i], &per[i]))
            return EXIT_USAGE;
        nrun += run[i];
    }
    if (!nrun) {
        fprintf(stderr, "klab: no op has the precisions asked\n");
        return EXIT_USAGE;
    }
    if (device && strcmp(device, "cpu") && strcmp(device, "cuda")) {
        fprintf(stderr, "klab: --device must be cpu or cuda, not %s\n", device);
        return EXIT_USAGE;
    }

    const kernels_backend *backends[2];
    int nb = 0;
    char why[256] = "";
    if (!device || !strcmp(device, "cpu"))
        backends[nb++] = kernels_cpu();
    if (!device || !strcmp(device, "cuda")) {
        const kernels_backend *cuda = kernels_cuda(why, sizeof why);
        if (cuda)
            backends[nb++] = cuda;
        else if (device) {
            printf("klab: no cuda backend here: %s\n", why[0] ? why : "unavailable");
            return EXIT_SKIP;
        } else
            printf("klab: cuda skipped: %s\n", why[0] ? why : "unavailable");
    }

    int failures = 0;
    for (int b = 0; b < nb; b++) {
        char desc[256];
        backends[b]->describe(desc, sizeof desc);
        printf("== backend %s: %s\n", backends[b]->name, desc);
        for (int i = 0; i < nops; i++)
            if (run[i])
                failures += run_op(ops[i], backends[b], &per[i]);
    }
    if (o.check)
        printf("klab: %s\n", failures ? "FAILED" : "all checks passed");
    return failures ? EXIT_FAIL : EXIT_PASS;
}
