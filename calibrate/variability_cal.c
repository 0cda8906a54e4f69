/* dtcal variability's measurement; see variability.h. Every rank times the same GEMM on its own
 * device at the same time (as a synchronous job runs them: a node's shared power and cooling are
 * part of what differs), through the engine's kernel interface as dtcal kernels times it; rank 0
 * gathers the rates (MPI_Gather), prints them with cv on stderr and writes the calibration. */
#include <jansson.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "cal_writer.h"
#include "config.h"
#include "gpu_pick.h"
#include "kernels.h"
#include "kernels_cal.h"
#include "variability.h"

#define DESC_LEN 512 /* the size of the simulator's calibration "device" */

static const char *prec_label(int p)
{
    return p == KPREC_BF16 ? "bf16" : p == KPREC_FP16 ? "fp16" : "fp32";
}

/* The device's kind: its description up to " (" (kernels.h: the bare name comes first). */
static void kind_of(const char *desc, char *out, size_t len)
{
    const char *paren = strstr(desc, " (");
    size_t n = paren ? (size_t)(paren - desc) : strlen(desc);
    snprintf(out, len, "%.*s", (int)n, desc);
}

/* Every rank's ok; where some are not, the first of them (by rank) prints msg. 1 when all are. */
static int all_ok(int ok, int rank, int size, const char *msg)
{
    int first = ok ? size : rank;
    MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (first < size && rank == first && msg)
        fprintf(stderr, "%s\n", msg);
    return first == size;
}

/* The calibration to add to (rank 0, --into): a JSON object whose "sources", if any, is a list. */
static json_t *load_into(const char *path)
{
    json_error_t je;
    json_t *doc = json_load_file(path, 0, &je);
    const char *bad = !doc ? je.text : !json_is_object(doc) ? "not a calibration (a JSON object)"
                    : json_object_get(doc, "sources") && !json_is_array(json_object_get(doc, "sources"))
                        ? "its \"sources\" is not a list" : NULL;
    if (bad) {
        if (doc || je.line < 1)
            fprintf(stderr, "dtcal variability: --into %s: %s\n", path, bad);
        else
            fprintf(stderr, "dtcal variability: --into %s:%d: %s\n", path, je.line, bad);
        json_decref(doc);
        return NULL;
    }
    return doc;
}

/* doc with compute_variability_cv set: in place where the key is there, else before "sources"
 * (the shipped files end with their sources), else last. A new reference. */
static json_t *set_cv(json_t *doc, double cv)
{
    if (json_object_get(doc, "compute_variability_cv") || !json_object_get(doc, "sources")) {
        json_object_set_new(doc, "compute_variability_cv", json_real(cv));
        return json_incref(doc);
    }
    json_t *out = json_object(), *v;
    const char *key;
    json_object_foreach(doc, key, v) {
        if (!strcmp(key, "sources"))
            json_object_set_new(out, "compute_variability_cv", json_real(cv));
        json_object_set(out, key, v);
    }
    return out;
}

/* Rank 0: the table, cv and the calibration. 0, or the exit status. */
static int report(const variability_options *o, json_t *into, const double *rates, const char *hosts,
                  const char *descs, const int *gpus, int size)
{
    variability_stats st;
    for (int r = 0; r < size; r++)
        if (!(rates[r] > 0)) {
            fprintf(stderr, "dtcal variability: rank %d (%s) measured no rate\n", r,
                    hosts + (size_t)r * MPI_MAX_PROCESSOR_NAME);
            return 1;
        }
    if (variability_cv(rates, size, &st) != 0) {
        fprintf(stderr, "dtcal variability: the rates are not finite positive numbers\n");
        return 1;
    }
    char kind[DESC_LEN], date[32], named[64];
    kind_of(descs, kind, sizeof kind);
    int host_w = 4, dev_w = 6;
    for (int r = 0; r < size; r++) {
        int h = (int)strlen(hosts + (size_t)r * MPI_MAX_PROCESSOR_NAME), d;
        char k[DESC_LEN];
        kind_of(descs + (size_t)r * DESC_LEN, k, sizeof k);
        d = (int)strlen(k) + (gpus[r] >= 0 ? snprintf(named, sizeof named, "GPU %d: ", gpus[r]) : 0);
        host_w = h > host_w ? h : host_w;
        dev_w = d > dev_w ? d : dev_w;
    }
    fprintf(stderr, "dtcal variability: %d ranks, each timing the engine's %d x %d x %d %s GEMM (median of %d "
                    "repeats) at the same time\n", size, o->m, o->n, o->k, prec_label(o->precision), o->repeats);
    fprintf(stderr, "  %4s  %-*s  %-*s  %16s  %9s\n", "rank", host_w, "host", dev_w, "device", "TFLOP/s", "vs mean");
    for (int r = 0; r < size; r++) {
        char k[DESC_LEN], dev[DESC_LEN + 64];
        kind_of(descs + (size_t)r * DESC_LEN, k, sizeof k);
        if (gpus[r] >= 0)
            snprintf(dev, sizeof dev, "GPU %d: %s", gpus[r], k);
        else
            snprintf(dev, sizeof dev, "%s", k);
        fprintf(stderr, "  %4d  %-*s  %-*s  %16.9g  %+8.2f%%\n", r, host_w, hosts + (size_t)r * MPI_MAX_PROCESSOR_NAME,
                dev_w, dev, rates[r], (rates[r] - st.mean) / st.mean * 100);
    }
    fprintf(stderr, "  mean %.6g TFLOP/s, sample standard deviation %.6g TFLOP/s\n", st.mean, st.sd);
    fprintf(stderr, "compute_variability_cv %.6g (sample standard deviation / mean over %d devices)\n", st.cv, size);
    if (!(st.cv < 1)) {
        fprintf(stderr, "dtcal variability: cv %.6g is not below 1 (the simulator takes 0 <= cv < 1): the rates differ "
                        "by more than their mean; did ranks share a device or cores? Nothing written\n", st.cv);
        return 1;
    }
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d", gmtime(&now));
    variability_record rec = {date, kind, prec_label(o->precision), o->m, o->n, o->k, o->repeats, hosts,
                              MPI_MAX_PROCESSOR_NAME, rates, st};
    char *line = variability_source_line(&rec);
    if (!line)
        return 1;
    json_t *doc;
    if (into) {
        /* a measured figure added to a datasheet (or nccl-tests) calibration makes it mixed; the
         * sources line says where this one came from */
        const char *src = json_string_value(json_object_get(into, "source"));
        if (!src || (strcmp(src, "measured") && strcmp(src, "mixed")))
            json_object_set_new(into, "source", json_string("mixed"));
        json_t *old = json_object_get(into, "compute_variability_cv");
        if (json_is_number(old))
            fprintf(stderr, "  (replacing %s's compute_variability_cv %.6g)\n", o->into, json_number_value(old));
        doc = set_cv(into, st.cv);
    } else {
        json_t *fresh = cal_new(descs, "measured", o->argc, o->argv);
        char several[CFG_NAME_MAX]; /* the simulator reads a host name this long */
        if (variability_hosts(&rec, 1, several, sizeof several) > 1) /* "a and 3 more": the calibration's host */
            json_object_set_new(fresh, "host", json_string(several));
        doc = set_cv(fresh, st.cv);
        json_decref(fresh);
    }
    int rc = cal_add_source(doc, line) != 0 || cal_write(doc, o->out) != 0 ? 1 : 0;
    json_decref(doc);
    free(line);
    return rc;
}

int variability_run(const variability_options *o)
{
    if (!getenv("OMPI_COMM_WORLD_SIZE") && !getenv("PMI_SIZE") && !getenv("PMIX_RANK")) {
        fprintf(stderr, "dtcal variability: run it under mpirun, one rank per device (e.g. mpirun -np 8 dtcal "
                        "variability --device cuda -o cal.json)\n");
        return 2;
    }
    MPI_Init(NULL, NULL);
    int rank, size, rc = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    json_t *into = NULL;
    char msg[1024];
    if (size < 2) {
        fprintf(stderr, "dtcal variability: %d rank: the spread of the devices' rates needs at least 2 ranks, one "
                        "per device (mpirun -np N, N >= 2)\n", size);
        MPI_Finalize();
        return 2;
    }
    int ok = 1;
    if (rank == 0 && o->into)
        ok = (into = load_into(o->into)) != NULL;
    if (!all_ok(ok, rank, size, NULL)) {
        rc = 2;
        goto done;
    }
    char host[MPI_MAX_PROCESSOR_NAME] = "";
    int hlen = 0;
    MPI_Get_processor_name(host, &hlen);
    char why[256] = "";
    const kernels_backend *k = strcmp(o->device, "cuda") ? kernels_cpu() : kernels_cuda(why, sizeof why);
    snprintf(msg, sizeof msg, "dtcal variability: rank %d on %s: --device cuda: %s", rank, host, why);
    if (!all_ok(k != NULL, rank, size, msg)) {
        rc = 1;
        goto done;
    }
    int gpu = -1;
    if (!strcmp(k->name, "cuda")) {
        gpu_pick pick;
        int picked = gpu_pick_device(&pick);
        snprintf(msg, sizeof msg, "dtcal variability: %s on %s%s", pick.why, host,
                 pick.short_of_gpus ? ": one rank per GPU, each timing its own (ranks sharing a GPU would time "
                                      "their sharing)" : "");
        int mine = picked == -1 ? (pick.short_of_gpus ? 2 : 1) : 0;
        MPI_Allreduce(MPI_IN_PLACE, &mine, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (!all_ok(picked != -1, rank, size, msg)) {
            rc = mine;
            goto done;
        }
        gpu = pick.device;
    }
    char desc[DESC_LEN] = "";
    k->describe(desc, sizeof desc);
    char *hosts = rank == 0 ? calloc((size_t)size, MPI_MAX_PROCESSOR_NAME) : NULL;
    char *descs = rank == 0 ? calloc((size_t)size, DESC_LEN) : NULL;
    int *gpus = rank == 0 ? calloc((size_t)size, sizeof *gpus) : NULL;
    double *rates = rank == 0 ? calloc((size_t)size, sizeof *rates) : NULL;
    ok = rank != 0 || (hosts && descs && gpus && rates);
    if (!all_ok(ok, rank, size, "dtcal variability: out of memory")) {
        rc = 1;
        goto freed;
    }
    MPI_Gather(host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, hosts, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0, MPI_COMM_WORLD);
    MPI_Gather(desc, DESC_LEN, MPI_CHAR, descs, DESC_LEN, MPI_CHAR, 0, MPI_COMM_WORLD);
    MPI_Gather(&gpu, 1, MPI_INT, gpus, 1, MPI_INT, 0, MPI_COMM_WORLD);
    /* cv is the spread across devices of one kind: ranks on different kinds would measure the
     * kinds' difference */
    if (rank == 0)
        for (int r = 1; r < size && !rc; r++) {
            char a[DESC_LEN], b[DESC_LEN];
            kind_of(descs, a, sizeof a);
            kind_of(descs + (size_t)r * DESC_LEN, b, sizeof b);
            if (strcmp(a, b)) {
                fprintf(stderr, "dtcal variability: rank 0 runs on %s but rank %d on %s: cv is the spread across "
                                "devices of one kind; run one rank per device of the kind the calibration is for\n",
                        a, r, b);
                rc = 2;
            }
        }
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rc)
        goto freed;
    MPI_Barrier(MPI_COMM_WORLD); /* all at once, as a training step runs them */
    double rate = kernels_gemm_tflops(k, (kernels_precision)o->precision, o->m, o->n, o->k, o->repeats);
    MPI_Gather(&rate, 1, MPI_DOUBLE, rates, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank == 0)
        rc = report(o, into, rates, hosts, descs, gpus, size);
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
freed:
    free(hosts);
    free(descs);
    free(gpus);
    free(rates);
done:
    json_decref(into);
    MPI_Finalize();
    return rc;
}
