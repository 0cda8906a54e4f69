/* See rank_gemm.h. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "cal_writer.h"
#include "config.h"
#include "gpu_pick.h"
#include "kernels.h"
#include "rank_gemm.h"

const char *rank_gemm_precision(int p)
{
    return p == KPREC_BF16 ? "bf16" : p == KPREC_FP16 ? "fp16" : "fp32";
}

void rank_gemm_date(char *out, size_t len)
{
    time_t now = time(NULL);
    strftime(out, len, "%Y-%m-%d", gmtime(&now));
}

/* The device's kind: its description up to " (" (kernels.h: the bare name comes first). */
static void kind_of(const char *desc, char *out, size_t len)
{
    const char *paren = strstr(desc, " (");
    size_t n = paren ? (size_t)(paren - desc) : strlen(desc);
    snprintf(out, len, "%.*s", (int)n, desc);
}

int rank_gemm_first_rank(void)
{
    const char *r = getenv("OMPI_COMM_WORLD_RANK");
    if (!r)
        r = getenv("PMI_RANK");
    if (!r)
        r = getenv("PMIX_RANK");
    return !r || !strcmp(r, "0");
}

int rank_gemm_parse(const char *who, int argc, char **argv, rank_gemm_options *o, rank_gemm_extra_option extra,
                    void *ctx)
{
    *o = (rank_gemm_options){.device = "cpu", .precision = -1, .repeats = 21, .out = "-", .argc = argc, .argv = argv};
    int *dims[3] = {&o->m, &o->n, &o->k};
    const int loud = rank_gemm_first_rank();
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            if (loud)
                fprintf(stderr, "%s: %s%s\n", who, a, a[0] == '-' ? " needs a value" : ": not an option");
            return 2;
        }
        i++;
        char *end;
        int taken = extra ? extra(who, a, v, loud, ctx) : 0;
        if (taken == 2)
            return 2;
        if (taken)
            continue;
        if (!strcmp(a, "-o")) {
            o->out = v;
        } else if (!strcmp(a, "--into")) {
            o->into = v;
        } else if (!strcmp(a, "--device")) {
            if (strcmp(v, "cpu") && strcmp(v, "cuda")) {
                if (loud)
                    fprintf(stderr, "%s: --device %s: not cpu or cuda\n", who, v);
                return 2;
            }
            o->device = v;
        } else if (!strcmp(a, "--precision")) {
            int p = KPREC_FP32;
            while (p <= KPREC_FP16 && strcmp(v, rank_gemm_precision(p)))
                p++;
            if (p > KPREC_FP16) {
                if (loud)
                    fprintf(stderr, "%s: --precision %s: not fp32, bf16 or fp16\n", who, v);
                return 2;
            }
            o->precision = p;
        } else if (!strcmp(a, "--m") || !strcmp(a, "--n") || !strcmp(a, "--k") || !strcmp(a, "--repeats")) {
            long x = strtol(v, &end, 10);
            int repeats = !strcmp(a, "--repeats");
            long hi = repeats ? 10000 : 65536;
            if (!*v || *end || x < 1 || x > hi) {
                if (loud)
                    fprintf(stderr, "%s: %s: '%s' is not a whole number in 1..%ld\n", who, a, v, hi);
                return 2;
            }
            *(repeats ? &o->repeats : dims[a[2] == 'm' ? 0 : a[2] == 'n' ? 1 : 2]) = (int)x;
        } else {
            if (loud)
                fprintf(stderr, "%s: unknown option %s\n", who, a);
            return 2;
        }
    }
    int gpu = !strcmp(o->device, "cuda");
    if (o->precision < 0)
        o->precision = gpu ? KPREC_BF16 : KPREC_FP32;
    for (int d = 0; d < 3; d++)
        if (!*dims[d])
            *dims[d] = gpu ? 4096 : 512;
    /* each operand in one buffer of the engine's (int) element counts, and at most 1 GiB in fp32 */
    const double most = (double)(1 << 28);
    if ((double)o->m * o->k > most || (double)o->n * o->k > most || (double)o->m * o->n > most) {
        if (loud)
            fprintf(stderr, "%s: --m %d --n %d --k %d: an operand of more than 2^28 elements (1 GiB in fp32); choose "
                            "a smaller shape\n", who, o->m, o->n, o->k);
        return 2;
    }
    return 0;
}

int rank_gemm_all_ok(const rank_gemm_session *s, int ok, const char *msg)
{
    int first = ok ? s->size : s->rank;
    MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (first < s->size && s->rank == first && msg)
        fprintf(stderr, "%s\n", msg);
    return first == s->size;
}

/* Rank 0: every rank's host, device and GPU; devices of one kind. 0, or the exit status. */
static int gather_devices(rank_gemm_session *s)
{
    char host[MPI_MAX_PROCESSOR_NAME] = "", desc[RANK_GEMM_DESC_LEN] = "";
    int hlen = 0;
    MPI_Get_processor_name(host, &hlen);
    s->k->describe(desc, sizeof desc);
    s->host_stride = MPI_MAX_PROCESSOR_NAME;
    if (s->rank == 0) {
        s->hosts = calloc((size_t)s->size, MPI_MAX_PROCESSOR_NAME);
        s->descs = calloc((size_t)s->size, RANK_GEMM_DESC_LEN);
        s->gpus = calloc((size_t)s->size, sizeof *s->gpus);
    }
    char msg[256];
    snprintf(msg, sizeof msg, "%s: out of memory", s->who);
    if (!rank_gemm_all_ok(s, s->rank != 0 || (s->hosts && s->descs && s->gpus), msg))
        return 1;
    MPI_Gather(host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, s->hosts, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0, MPI_COMM_WORLD);
    MPI_Gather(desc, RANK_GEMM_DESC_LEN, MPI_CHAR, s->descs, RANK_GEMM_DESC_LEN, MPI_CHAR, 0, MPI_COMM_WORLD);
    MPI_Gather(&s->gpu, 1, MPI_INT, s->gpus, 1, MPI_INT, 0, MPI_COMM_WORLD);
    /* one figure for devices of one kind: ranks on different kinds would measure the kinds' difference */
    int rc = 0;
    if (s->rank == 0) {
        kind_of(s->descs, s->kind, sizeof s->kind);
        for (int r = 1; r < s->size && !rc; r++) {
            char b[RANK_GEMM_DESC_LEN];
            kind_of(s->descs + (size_t)r * RANK_GEMM_DESC_LEN, b, sizeof b);
            if (strcmp(s->kind, b)) {
                fprintf(stderr, "%s: rank 0 runs on %s but rank %d on %s: the figure is for devices of one kind; run "
                                "one rank per device of the kind the calibration is for\n", s->who, s->kind, r, b);
                rc = 2;
            }
        }
    }
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return rc;
}

int rank_gemm_open(rank_gemm_session *s, const char *who, const rank_gemm_options *o, int thread_level,
                   const char *why_two)
{
    memset(s, 0, sizeof *s);
    s->who = who;
    s->gpu = -1;
    if (!getenv("OMPI_COMM_WORLD_SIZE") && !getenv("PMI_SIZE") && !getenv("PMIX_RANK")) {
        fprintf(stderr, "%s: run it under mpirun, one rank per device (e.g. mpirun -np 8 %s --device cuda -o "
                        "cal.json)\n", who, who);
        return 2;
    }
    MPI_Init_thread(NULL, NULL, thread_level, &s->thread_level);
    s->mpi_up = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &s->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &s->size);
    if (s->size < 2) {
        fprintf(stderr, "%s: %d rank: %s needs at least 2 ranks, one per device (mpirun -np N, N >= 2)\n", who,
                s->size, why_two);
        return 2;
    }
    int ok = 1;
    if (s->rank == 0 && o->into)
        ok = (s->into = cal_load_into(o->into, who)) != NULL;
    if (!rank_gemm_all_ok(s, ok, NULL))
        return 2;
    char host[MPI_MAX_PROCESSOR_NAME] = "", why[256] = "", msg[1024];
    int hlen = 0;
    MPI_Get_processor_name(host, &hlen);
    s->k = strcmp(o->device, "cuda") ? kernels_cpu() : kernels_cuda(why, sizeof why);
    snprintf(msg, sizeof msg, "%s: rank %d on %s: --device cuda: %s", who, s->rank, host, why);
    if (!rank_gemm_all_ok(s, s->k != NULL, msg))
        return 1;
    if (!strcmp(s->k->name, "cuda")) {
        gpu_pick pick;
        int picked = gpu_pick_device(&pick);
        snprintf(msg, sizeof msg, "%s: %s on %s%s", who, pick.why, host,
                 pick.short_of_gpus ? ": one rank per GPU, each timing its own (ranks sharing a GPU would time "
                                      "their sharing)" : "");
        int mine = picked == -1 ? (pick.short_of_gpus ? 2 : 1) : 0;
        MPI_Allreduce(MPI_IN_PLACE, &mine, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (!rank_gemm_all_ok(s, picked != -1, msg))
            return mine;
        s->gpu = pick.device;
    }
    return gather_devices(s);
}

int rank_gemm_close(rank_gemm_session *s, int rc)
{
    free(s->hosts);
    free(s->descs);
    free(s->gpus);
    json_decref(s->into);
    if (s->mpi_up)
        MPI_Finalize();
    memset(s, 0, sizeof *s);
    return rc;
}

const char *rank_gemm_host(const rank_gemm_session *s, int r)
{
    return s->hosts + (size_t)r * s->host_stride;
}

void rank_gemm_device(const rank_gemm_session *s, int r, char *out, size_t len)
{
    char k[RANK_GEMM_DESC_LEN];
    kind_of(s->descs + (size_t)r * RANK_GEMM_DESC_LEN, k, sizeof k);
    if (s->gpus[r] >= 0)
        snprintf(out, len, "GPU %d: %s", s->gpus[r], k);
    else
        snprintf(out, len, "%s", k);
}

void rank_gemm_widths(const rank_gemm_session *s, int *host_w, int *dev_w)
{
    *host_w = 4;
    *dev_w = 6;
    for (int r = 0; r < s->size; r++) {
        char d[RANK_GEMM_DESC_LEN + 64];
        rank_gemm_device(s, r, d, sizeof d);
        int h = (int)strlen(rank_gemm_host(s, r)), w = (int)strlen(d);
        *host_w = h > *host_w ? h : *host_w;
        *dev_w = w > *dev_w ? w : *dev_w;
    }
}

int rank_gemm_write(const rank_gemm_session *s, const rank_gemm_options *o, const char *key, double value,
                    const char *line)
{
    json_t *doc;
    if (s->into) {
        /* a measured figure added to a datasheet (or nccl-tests) calibration makes it mixed; the
         * sources line says where this one came from */
        const char *src = json_string_value(json_object_get(s->into, "source"));
        if (!src || (strcmp(src, "measured") && strcmp(src, "mixed")))
            json_object_set_new(s->into, "source", json_string("mixed"));
        json_t *old = json_object_get(s->into, key);
        if (json_is_number(old))
            fprintf(stderr, "  (replacing %s's %s %.6g)\n", o->into, key, json_number_value(old));
        doc = cal_set_before_sources(s->into, key, json_real(value));
    } else {
        json_t *fresh = cal_new(s->descs, "measured", o->argc, o->argv);
        char several[CFG_NAME_MAX]; /* the simulator reads a host name this long */
        if (cal_hosts(s->hosts, s->host_stride, s->size, 1, several, sizeof several) > 1) /* "a and 3 more" */
            json_object_set_new(fresh, "host", json_string(several));
        doc = cal_set_before_sources(fresh, key, json_real(value));
        json_decref(fresh);
    }
    int rc = cal_add_source(doc, line) != 0 || cal_write(doc, o->out) != 0 ? 1 : 0;
    json_decref(doc);
    return rc;
}
