/* dtcal overlap's measurement; see overlap.h. The session (ranks, devices, hosts, --into) and
 * the write are rank_gemm.h's, the all-reduce is dtcal collectives' backend (collectives_cal.h),
 * the GEMM is timed by kernels_gemm_seconds as dtcal kernels and variability time it.
 *
 * Every rank times the GEMM twice, R repeats each (median), every repeat after a barrier: alone,
 * then with `calls` all-reduces started right before each timed call. NCCL runs them on its
 * communicator's non-blocking stream while the GEMM runs on the legacy default stream; MPI runs
 * them (blocking MPI_Allreduce, one after the other) in a second thread, which asks
 * MPI_Init_thread for MPI_THREAD_SERIALIZED (the main thread makes no MPI call while it runs) and
 * refuses a lower level. `calls` is set so that the all-reduces outlast the GEMM: twice the GEMM's
 * time alone (the slowest rank's) over the all-reduce's (the fastest rank's), plus one; a repeat
 * whose all-reduces had ended before its GEMM did (on a CPU with more threads than cores, a rank
 * can wait for a core that long) doubles it and measures again, up to MAX_COVER_S of
 * all-reduces per repeat. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "collectives_cal.h"
#include "kernels.h"
#include "kernels_cal.h"
#include "overlap.h"

#define MAX_CALLS (1 << 20)
#define MAX_COVER_S 2.0 /* the most all-reduce time per repeat that the doubling goes to */

typedef struct {
    coll_cal_backend *be;
    size_t bytes;
    int calls;     /* all-reduces started before each timed GEMM; 0: the GEMM alone */
    int failed;    /* an all-reduce could not be started or failed */
    int uncovered; /* repeats whose all-reduces had all ended before the GEMM did */
} beside_ctx;

static void before_gemm(void *p)
{
    beside_ctx *b = p;
    MPI_Barrier(MPI_COMM_WORLD); /* every rank starts its GEMM, and the all-reduces, together */
    if (b->calls && b->be->start_calls(b->be, COLL_CAL_ALL_REDUCE, b->bytes, b->calls) != 0)
        b->failed = 1;
}

static void after_gemm(void *p)
{
    beside_ctx *b = p;
    if (!b->calls)
        return;
    if (!b->be->calls_running(b->be))
        b->uncovered++;
    if (b->be->finish_calls(b->be) != 0)
        b->failed = 1;
}

static const char *thread_level_name(int l)
{
    return l == MPI_THREAD_MULTIPLE ? "MPI_THREAD_MULTIPLE" : l == MPI_THREAD_SERIALIZED ? "MPI_THREAD_SERIALIZED"
         : l == MPI_THREAD_FUNNELED ? "MPI_THREAD_FUNNELED" : "MPI_THREAD_SINGLE";
}

/* Rank 0: the table, the figure and the calibration. 0, or the exit status. */
static int report(const rank_gemm_session *s, const overlap_options *o, const char *how, int calls,
                  const double *alone, const double *beside)
{
    const rank_gemm_options *g = &o->g;
    overlap_stats st;
    for (int r = 0; r < s->size; r++)
        if (!(alone[r] > 0) || !(beside[r] > 0)) {
            fprintf(stderr, "dtcal overlap: rank %d (%s) measured no time\n", r, rank_gemm_host(s, r));
            return 1;
        }
    if (overlap_slowdown(alone, beside, s->size, &st) != 0) {
        fprintf(stderr, "dtcal overlap: the times are not finite positive numbers\n");
        return 1;
    }
    int host_w, dev_w;
    rank_gemm_widths(s, &host_w, &dev_w);
    fprintf(stderr, "dtcal overlap: %d ranks, each timing the engine's %d x %d x %d %s GEMM (median of %d repeats) "
                    "alone and beside %d all-reduce%s of %.0f bytes (%s)\n", s->size, g->m, g->n, g->k,
            rank_gemm_precision(g->precision), g->repeats, calls, calls == 1 ? "" : "s", o->bytes, how);
    fprintf(stderr, "  %4s  %-*s  %-*s  %16s  %16s  %12s\n", "rank", host_w, "host", dev_w, "device", "alone ms",
            "beside ms", "beside/alone");
    for (int r = 0; r < s->size; r++) {
        char dev[RANK_GEMM_DESC_LEN + 64];
        rank_gemm_device(s, r, dev, sizeof dev);
        fprintf(stderr, "  %4d  %-*s  %-*s  %16.9g  %16.9g  %12.6g\n", r, host_w, rank_gemm_host(s, r), dev_w, dev,
                alone[r] * 1e3, beside[r] * 1e3, beside[r] / alone[r]);
    }
    fprintf(stderr, "overlap_slowdown %.6g (mean over %d devices of beside / alone%s)\n", st.slowdown, s->size,
            st.mean < 1 ? ", which was below 1: no slowdown" : "");
    if (!(st.slowdown <= 100)) {
        fprintf(stderr, "dtcal overlap: overlap_slowdown %.6g is above 100 (the simulator takes 1..100): did ranks "
                        "share a device or cores? Nothing written\n", st.slowdown);
        return 1;
    }
    char date[32];
    rank_gemm_date(date, sizeof date);
    overlap_record rec = {date, s->kind, rank_gemm_precision(g->precision), g->m, g->n, g->k, g->repeats, how,
                          o->bytes, calls, s->hosts, s->host_stride, alone, beside, st};
    char *line = overlap_source_line(&rec);
    int rc = !line ? 1 : rank_gemm_write(s, g, "overlap_slowdown", st.slowdown, line);
    free(line);
    return rc;
}

/* Every rank: the GEMM alone, the all-reduce alone, then the GEMM beside all-reduces that
 * outlast it. 0 with both medians and the calls, or 1 (printed once). */
static int measure(const rank_gemm_session *s, const overlap_options *o, coll_cal_backend *be, double *alone,
                   double *beside, int *calls)
{
    const rank_gemm_options *g = &o->g;
    size_t bytes = (size_t)o->bytes;
    beside_ctx ctx = {be, bytes, 0, 0, 0};
    kernels_gemm_beside hook = {before_gemm, after_gemm, &ctx};
    const kernels_precision prec = (kernels_precision)g->precision;
    *alone = kernels_gemm_seconds(s->k, prec, g->m, g->n, g->k, g->repeats, &hook);
    MPI_Barrier(MPI_COMM_WORLD);
    double ar_us = be->time_calls(be, COLL_CAL_ALL_REDUCE, bytes, 1); /* a warm-up call */
    MPI_Barrier(MPI_COMM_WORLD);
    if (ar_us > 0)
        ar_us = be->time_calls(be, COLL_CAL_ALL_REDUCE, bytes, 3);
    if (!rank_gemm_all_ok(s, *alone > 0 && ar_us > 0, "dtcal overlap: the GEMM or the all-reduce could not be timed"))
        return 1;
    double slowest = *alone, fastest = ar_us * 1e-6;
    MPI_Allreduce(MPI_IN_PLACE, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &fastest, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    double want = ceil(2 * slowest / fastest) + 1;
    ctx.calls = want < MAX_CALLS ? (int)want : MAX_CALLS;
    if (s->rank == 0)
        fprintf(stderr, "dtcal overlap: GEMM alone %.6g ms (slowest rank), all-reduce alone %.6g ms (fastest rank): "
                        "%d all-reduce%s beside each GEMM\n", slowest * 1e3, fastest * 1e3, ctx.calls,
                ctx.calls == 1 ? "" : "s");
    for (;;) {
        ctx.failed = ctx.uncovered = 0;
        *beside = kernels_gemm_seconds(s->k, prec, g->m, g->n, g->k, g->repeats, &hook);
        int bad[2] = {ctx.failed || !(*beside > 0), ctx.uncovered};
        MPI_Allreduce(MPI_IN_PLACE, bad, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (bad[0]) {
            if (s->rank == 0)
                fprintf(stderr, "dtcal overlap: the GEMM beside the all-reduces could not be timed on a rank (an "
                                "all-reduce failed or could not be started)\n");
            return 1;
        }
        if (!bad[1])
            break;
        if (2.0 * ctx.calls * fastest > MAX_COVER_S || ctx.calls >= MAX_CALLS / 2) {
            if (s->rank == 0)
                fprintf(stderr, "dtcal overlap: %d all-reduces still ended before the GEMM in %d of %d repeats; "
                                "nothing written (give a larger --bytes)\n", ctx.calls, bad[1], g->repeats);
            return 1;
        }
        if (s->rank == 0)
            fprintf(stderr, "  the all-reduces ended before the GEMM in %d of %d repeats on a rank: again with %d\n",
                    bad[1], g->repeats, 2 * ctx.calls);
        ctx.calls *= 2;
    }
    *calls = ctx.calls;
    return 0;
}

int overlap_run(const overlap_options *o)
{
    int nccl = !strcmp(o->backend, "nccl");
    rank_gemm_session s;
    int rc = rank_gemm_open(&s, "dtcal overlap", &o->g, nccl ? MPI_THREAD_SINGLE : MPI_THREAD_SERIALIZED,
                            "an all-reduce between devices beside the GEMM");
    if (rc)
        return rank_gemm_close(&s, rc);
    char how[256], err[1024] = "";
    if (nccl) {
        snprintf(how, sizeof how, "NCCL on a second, non-blocking CUDA stream; the GEMM on the default stream");
    } else {
        snprintf(how, sizeof how, "MPI_Allreduce on host buffers, called one after the other by a second thread; "
                                  "%s provided", thread_level_name(s.thread_level));
        if (s.thread_level < MPI_THREAD_SERIALIZED) {
            if (s.rank == 0)
                fprintf(stderr, "dtcal overlap: this MPI provides %s, but the all-reduce beside the GEMM runs in a "
                                "second thread, which needs MPI_THREAD_SERIALIZED\n", thread_level_name(s.thread_level));
            return rank_gemm_close(&s, 1);
        }
    }
    coll_cal_backend be;
    if (nccl)
        coll_cal_nccl(&be); /* the command line checked that this build has it */
    else
        coll_cal_mpi(&be);
    double alone = -1, beside = -1, *alones = NULL, *besides = NULL;
    int calls = 0;
    if (be.setup(&be, (size_t)o->bytes, s.size, s.rank, err, sizeof err) != 0) {
        if (s.rank == 0)
            fprintf(stderr, "dtcal overlap: %s: %s\n", be.name, err);
        rc = 1;
    } else {
        rc = measure(&s, o, &be, &alone, &beside, &calls);
    }
    be.teardown(&be);
    if (rc)
        return rank_gemm_close(&s, rc);
    if (s.rank == 0) {
        alones = calloc((size_t)s.size, sizeof *alones);
        besides = calloc((size_t)s.size, sizeof *besides);
    }
    if (rank_gemm_all_ok(&s, s.rank != 0 || (alones && besides), "dtcal overlap: out of memory")) {
        MPI_Gather(&alone, 1, MPI_DOUBLE, alones, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        MPI_Gather(&beside, 1, MPI_DOUBLE, besides, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        if (s.rank == 0)
            rc = report(&s, o, how, calls, alones, besides);
        MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    } else {
        rc = 1;
    }
    free(alones);
    free(besides);
    return rank_gemm_close(&s, rc);
}
