/* The communicator; see comm.h. */
#include <mpi.h>
#include <unistd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "comm.h"

/* Watches the blocking calls: one that lasts longer than the timeout means a peer died or
 * hangs, and the rank stops with a message instead of waiting for ever. */
struct comm_watchdog {
    pthread_t thread;
    int running;
    _Atomic int stop;
    _Atomic long long op_start_ns;  /* 0: not inside a blocking call */
    const char *_Atomic op;
    _Atomic int op_ranks;
    _Atomic int peer;               /* the rank a receive waits for, or -1 */
    double timeout_s;
    int rank;
};

struct comm_group {
    MPI_Comm mpi;     /* MPI_COMM_NULL for a single process */
    int size, rank;
    double bytes_sent;
    comm_watchdog *wd;
    /* collectives started and not yet waited for, with the counts MPI reads until they end */
    MPI_Request *pending;
    int **pending_counts;
    int n_pending, cap_pending;
};

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void wd_enter(comm_watchdog *wd, const char *op, int ranks)
{
    if (!wd)
        return;
    atomic_store(&wd->op, op);
    atomic_store(&wd->op_ranks, ranks);
    atomic_store(&wd->peer, -1);
    atomic_store(&wd->op_start_ns, now_ns());
}

static void wd_leave(comm_watchdog *wd)
{
    if (wd)
        atomic_store(&wd->op_start_ns, 0);
}

static void *wd_watch(void *arg)
{
    comm_watchdog *wd = arg;
    while (!atomic_load(&wd->stop)) {
        struct timespec nap = {0, 100000000};
        nanosleep(&nap, NULL);
        long long start = atomic_load(&wd->op_start_ns);
        if (start && (now_ns() - start) * 1e-9 > wd->timeout_s) {
            int peer = atomic_load(&wd->peer);
            char from[48] = "";
            if (peer >= 0)
                snprintf(from, sizeof from, " from rank %d", peer);
            fprintf(stderr, "dtrain: rank %d: no progress for %.0f s in %s%s (%d ranks): a peer rank has died or "
                            "hangs; stopping (--comm-timeout)\n", wd->rank, wd->timeout_s, atomic_load(&wd->op), from,
                    atomic_load(&wd->op_ranks));
            fflush(stderr);
            _exit(1);
        }
    }
    return NULL;
}

void comm_set_timeout(comm_ctx *c, double seconds)
{
    comm_watchdog *wd = c->watchdog;
    if (!c->mpi || !wd || wd->running || seconds <= 0)
        return;
    wd->timeout_s = seconds;
    wd->rank = c->world_rank;
    wd->running = pthread_create(&wd->thread, NULL, wd_watch, wd) == 0;
}

/* Sends in flight: their requests and the host copies they read from. */
struct comm_sends {
    MPI_Request *req;
    float **buf;
    int n, cap;
};

static comm_group *group_new_wd(MPI_Comm m, int mpi, comm_watchdog *wd)
{
    comm_group *g = calloc(1, sizeof *g);
    g->wd = wd;
    g->mpi = m;
    g->size = 1;
    g->rank = 0;
    if (mpi) {
        MPI_Comm_size(m, &g->size);
        MPI_Comm_rank(m, &g->rank);
    }
    return g;
}

static int launched_by_mpi(void)
{
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK");
}

int comm_start(comm_ctx *c, int *argc, char ***argv)
{
    memset(c, 0, sizeof *c);
    c->world_size = 1;
    c->watchdog = calloc(1, sizeof *c->watchdog);
    if (launched_by_mpi()) {
        MPI_Init(argc, argv);
        /* Errors return codes instead of aborting silently, so a dead peer becomes a message. */
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        MPI_Comm_rank(MPI_COMM_WORLD, &c->world_rank);
        MPI_Comm_size(MPI_COMM_WORLD, &c->world_size);
        c->mpi = 1;
    }
    c->world = group_new_wd(MPI_COMM_WORLD, c->mpi, c->watchdog);
    return 0;
}

int comm_attach(comm_ctx *c)
{
    int up = 0;
    memset(c, 0, sizeof *c);
    c->world_size = 1;
    c->watchdog = calloc(1, sizeof *c->watchdog);
    MPI_Initialized(&up);
    if (up) {
        MPI_Comm_rank(MPI_COMM_WORLD, &c->world_rank);
        MPI_Comm_size(MPI_COMM_WORLD, &c->world_size);
        c->mpi = 1;
        c->attached = 1;
    }
    c->world = group_new_wd(MPI_COMM_WORLD, c->mpi, c->watchdog);
    return 0;
}

int comm_layout_cp(comm_ctx *c, int tp, int cp, int pp, int dp, char *err, size_t errlen)
{
    if (tp * cp * pp * dp != c->world_size) {
        snprintf(err, errlen, "the layout TP %d x CP %d x PP %d x DP %d = %d ranks, but %d were launched", tp, cp, pp,
                 dp, tp * cp * pp * dp, c->world_size);
        return -1;
    }
    c->tp = tp;
    c->cp = cp;
    c->pp = pp;
    c->dp = dp;
    c->grid = rank_grid_make(tp, cp, pp, dp);
    c->tp_rank = rank_grid_coord(&c->grid, c->world_rank, GRID_TP);
    c->cp_rank = rank_grid_coord(&c->grid, c->world_rank, GRID_CP);
    c->pp_rank = rank_grid_coord(&c->grid, c->world_rank, GRID_PP);
    c->dp_rank = rank_grid_coord(&c->grid, c->world_rank, GRID_DP);
    c->sends = calloc(1, sizeof *c->sends);
    if (c->mpi) {
        MPI_Comm dpc, cpc, tpc, mpc, emc;
        int r = c->world_rank, ends = c->pp_rank == 0 || c->pp_rank == pp - 1;
        int replica = c->dp_rank * cp + c->cp_rank; /* a replica of the weights */
        /* the gradients' group: one (TP, PP) position, every replica and CP rank; a CP group: one
         * (TP, PP, DP); a TP group: one (CP, PP, DP) */
        MPI_Comm_split(MPI_COMM_WORLD, (int)rank_grid_rank(&c->grid, c->tp_rank, 0, c->pp_rank, 0), replica, &dpc);
        MPI_Comm_split(MPI_COMM_WORLD, (int)rank_grid_rank(&c->grid, c->tp_rank, 0, c->pp_rank, c->dp_rank),
                       c->cp_rank, &cpc);
        MPI_Comm_split(MPI_COMM_WORLD, (int)rank_grid_rank(&c->grid, 0, c->cp_rank, c->pp_rank, c->dp_rank), c->tp_rank,
                       &tpc);
        MPI_Comm_split(MPI_COMM_WORLD, replica, r, &mpc);
        MPI_Comm_split(MPI_COMM_WORLD, ends ? replica * tp + c->tp_rank : MPI_UNDEFINED, c->pp_rank, &emc);
        c->dp_group = group_new_wd(dpc, 1, c->watchdog);
        c->cp_group = group_new_wd(cpc, 1, c->watchdog);
        c->tp_group = group_new_wd(tpc, 1, c->watchdog);
        c->mp_group = group_new_wd(mpc, 1, c->watchdog);
        c->embed_group = ends ? group_new_wd(emc, 1, c->watchdog) : group_new_wd(MPI_COMM_NULL, 0, c->watchdog);
    } else {
        c->dp_group = group_new_wd(MPI_COMM_NULL, 0, c->watchdog);
        c->cp_group = group_new_wd(MPI_COMM_NULL, 0, c->watchdog);
        c->tp_group = group_new_wd(MPI_COMM_NULL, 0, c->watchdog);
        c->mp_group = group_new_wd(MPI_COMM_NULL, 0, c->watchdog);
        c->embed_group = group_new_wd(MPI_COMM_NULL, 0, c->watchdog);
    }
    return 0;
}

int comm_layout_ep(comm_ctx *c, int ep, char *err, size_t errlen)
{
    int replicas = c->dp * c->cp; /* the ranks of one (tp, pp) position: replicas and CP ranks */
    if (ep < 1 || replicas % ep) {
        if (c->cp > 1)
            snprintf(err, errlen, "--expert-model-parallel-size %d: expert-parallel ranks are carved out of the "
                     "data- and context-parallel ranks, so it must divide --dp x --cp (%d x %d = %d)", ep, c->dp,
                     c->cp, replicas);
        else
            snprintf(err, errlen, "--expert-model-parallel-size %d: expert-parallel ranks are carved out of the "
                     "data-parallel ranks, so it must divide --dp (%d)", ep, c->dp);
        return -1;
    }
    /* Megatron-Core's expert grid ("tp-ep-dp-pp" over etp = tp): EP the innermost of a position's
     * replica index, CP rank first, as the gradients' group orders them */
    int replica = c->dp_rank * c->cp + c->cp_rank;
    c->ep = ep;
    c->ep_rank = replica % ep;
    c->edp_rank = replica / ep;
    if (c->mpi) {
        /* colour: the (tp, pp) position and the EP group (edp_rank) / the expert slot (ep_rank);
         * the position as its index among the tp x pp ones, so a colour stays below the world size */
        MPI_Comm epc, edpc;
        int position = c->tp_rank + c->tp * c->pp_rank;
        MPI_Comm_split(MPI_COMM_WORLD, position * replicas + c->edp_rank, c->ep_rank, &epc);
        MPI_Comm_split(MPI_COMM_WORLD, position * replicas + c->ep_rank, c->edp_rank, &edpc);
        c->ep_group = group_new_wd(epc, 1, c->watchdog);
        c->edp_group = group_new_wd(edpc, 1, c->watchdog);
    } else {
        c->ep_group = group_new_wd(MPI_COMM_NULL, 0, c->watchdog);
        c->edp_group = group_new_wd(MPI_COMM_NULL, 0, c->watchdog);
    }
    return 0;
}

int comm_layout(comm_ctx *c, int tp, int pp, int dp, char *err, size_t errlen)
{
    return comm_layout_cp(c, tp, 1, pp, dp, err, errlen);
}

int comm_world_rank(const comm_ctx *c, int tp_rank, int pp_rank, int dp_rank)
{
    return (int)rank_grid_rank(&c->grid, tp_rank, c->cp_rank, pp_rank, dp_rank);
}

static void check(int rc, const char *what);

void comm_send(comm_ctx *c, int dest, int tag, const float *buf, size_t n)
{
    comm_sends *s = c->sends;
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 16;
        s->req = realloc(s->req, (size_t)s->cap * sizeof *s->req);
        s->buf = realloc(s->buf, (size_t)s->cap * sizeof *s->buf);
    }
    float *copy = malloc(n * sizeof(float));
    memcpy(copy, buf, n * sizeof(float));
    s->buf[s->n] = copy;
    check(MPI_Isend(copy, (int)n, MPI_FLOAT, dest, tag, MPI_COMM_WORLD, &s->req[s->n]), "pipeline send");
    s->n++;
}

void comm_recv(comm_ctx *c, int src, int tag, float *buf, size_t n)
{
    (void)c;
    wd_enter(c->watchdog, "a pipeline receive", 2);
    atomic_store(&c->watchdog->peer, src);
    check(MPI_Recv(buf, (int)n, MPI_FLOAT, src, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "pipeline receive");
    wd_leave(c->watchdog);
}

void comm_wait_sends(comm_ctx *c)
{
    comm_sends *s = c->sends;
    if (!s || s->n == 0)
        return;
    wd_enter(c->watchdog, "pipeline sends", 2);
    check(MPI_Waitall(s->n, s->req, MPI_STATUSES_IGNORE), "pipeline send");
    wd_leave(c->watchdog);
    for (int i = 0; i < s->n; i++)
        free(s->buf[i]);
    s->n = 0;
}

static void group_free(comm_group *g)
{
    if (g && g->mpi != MPI_COMM_NULL && g->mpi != MPI_COMM_WORLD)
        MPI_Comm_free(&g->mpi);
    if (g) {
        free(g->pending);
        free(g->pending_counts);
    }
    free(g);
}

void comm_finish(comm_ctx *c)
{
    if (c->sends) {
        if (c->mpi)
            comm_wait_sends(c);
        free(c->sends->req);
        free(c->sends->buf);
        free(c->sends);
    }
    if (c->mpi) {
        group_free(c->dp_group);
        group_free(c->cp_group);
        group_free(c->tp_group);
        group_free(c->mp_group);
        group_free(c->embed_group);
        group_free(c->ep_group);
        group_free(c->edp_group);
        if (!c->attached)
            MPI_Finalize();
    } else {
        group_free(c->dp_group);
        group_free(c->cp_group);
        group_free(c->tp_group);
        group_free(c->mp_group);
        group_free(c->embed_group);
        group_free(c->ep_group);
        group_free(c->edp_group);
    }
    free(c->world);
    if (c->watchdog) {
        if (c->watchdog->running) {
            atomic_store(&c->watchdog->stop, 1);
            pthread_join(c->watchdog->thread, NULL);
        }
        free(c->watchdog);
    }
    memset(c, 0, sizeof *c);
}

static void check(int rc, const char *what)
{
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, msg, &len);
        fprintf(stderr, "dtrain: %s failed: %s (a peer rank has probably died)\n", what, msg);
        MPI_Abort(MPI_COMM_WORLD, 1);
        exit(1);
    }
}

/* MPI counts are ints: move big buffers in chunks. */
#define CHUNK ((size_t)1 << 28)

/* An in-place all-reduce of n elements of `elem` bytes, in chunks (MPI counts are ints);
 * count_bytes: add what the ring sends to the group's tally. */
static void allreduce_typed(comm_group *g, void *buf, size_t n, size_t elem, MPI_Datatype type, MPI_Op op,
                            const char *what, int count_bytes)
{
    if (g->size == 1)
        return;
    for (size_t off = 0; off < n; off += CHUNK) {
        size_t k = n - off < CHUNK ? n - off : CHUNK;
        wd_enter(g->wd, what, g->size);
        check(MPI_Allreduce(MPI_IN_PLACE, (char *)buf + off * elem, (int)k, type, op, g->mpi), what);
        wd_leave(g->wd);
    }
    if (count_bytes)
        g->bytes_sent += 2.0 * (g->size - 1) / g->size * n * elem;
}

/* A reduce-scatter of n elements (a multiple of the group size) into this rank's part of buf. */
static void reduce_scatter_typed(comm_group *g, void *buf, size_t n, size_t elem, MPI_Datatype type, MPI_Op op,
                                 const char *what)
{
    if (g->size == 1)
        return;
    size_t part = n / (size_t)g->size;
    void *mine = malloc(part * elem);
    wd_enter(g->wd, what, g->size);
    check(MPI_Reduce_scatter_block(buf, mine, (int)part, type, op, g->mpi), what);
    wd_leave(g->wd);
    memcpy((char *)buf + part * (size_t)g->rank * elem, mine, part * elem);
    free(mine);
    g->bytes_sent += (double)(g->size - 1) / g->size * n * elem;
}

/* MPI's int counts (and displacements, when displ is not NULL) for parts given as size_t
 * (counts[size], in rank order); the total in *total, the elements before this rank's part in
 * *before. A count or a needed displacement past INT_MAX stops the rank, naming the call. */
static void int_counts(const comm_group *g, const size_t *counts, int *cnt, int *displ, size_t *total,
                       size_t *before, const char *what)
{
    size_t off = 0;
    *before = 0; /* set below at r == g->rank, which is always one of the ranks */
    for (int r = 0; r < g->size; r++) {
        if (counts[r] > INT_MAX || (displ && off > INT_MAX)) {
            fprintf(stderr, "dtrain: %s: a part of %zu elements at %zu is more than MPI's int counts can carry\n",
                    what, counts[r], off);
            abort();
        }
        cnt[r] = (int)counts[r];
        if (displ)
            displ[r] = (int)off;
        if (r == g->rank)
            *before = off;
        off += counts[r];
    }
    *total = off;
}

static void reduce_scatter_counts_typed(comm_group *g, void *buf, const size_t *counts, size_t elem,
                                        MPI_Datatype type, MPI_Op op, const char *what)
{
    if (g->size == 1)
        return;
    int *recv = malloc((size_t)g->size * sizeof(int));
    size_t total, before;
    int_counts(g, counts, recv, NULL, &total, &before, what);
    void *mine = malloc((counts[g->rank] ? counts[g->rank] : 1) * elem);
    wd_enter(g->wd, what, g->size);
    check(MPI_Reduce_scatter(buf, mine, recv, type, op, g->mpi), what);
    wd_leave(g->wd);
    memcpy((char *)buf + before * elem, mine, counts[g->rank] * elem);
    free(mine);
    free(recv);
    g->bytes_sent += (double)(g->size - 1) / g->size * total * elem;
}

void comm_reduce_scatter_sum_counts(comm_group *g, float *buf, const size_t *counts)
{
    reduce_scatter_counts_typed(g, buf, counts, sizeof(float), MPI_FLOAT, MPI_SUM, "reduce-scatter");
}

void comm_allreduce_sum(comm_group *g, float *buf, size_t n)
{
    allreduce_typed(g, buf, n, sizeof(float), MPI_FLOAT, MPI_SUM, "all-reduce", 1);
}

void comm_allreduce_max(comm_group *g, float *buf, size_t n)
{
    allreduce_typed(g, buf, n, sizeof(float), MPI_FLOAT, MPI_MAX, "all-reduce (max)", 0);
}

uint16_t comm_bf16_from_float(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40); /* NaN stays NaN (quiet) */
    u += 0x7fffu + ((u >> 16) & 1u);         /* round to nearest, ties to even */
    return (uint16_t)(u >> 16);
}

float comm_float_from_bf16(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, 4);
    return x;
}

/* MPI reduction of bf16 values: sum in fp32, round back. */
static void bf16_sum(void *in, void *inout, int *len, MPI_Datatype *type)
{
    (void)type;
    const uint16_t *a = in;
    uint16_t *b = inout;
    for (int i = 0; i < *len; i++)
        b[i] = comm_bf16_from_float(comm_float_from_bf16(a[i]) + comm_float_from_bf16(b[i]));
}

static MPI_Op bf16_sum_op(void)
{
    static MPI_Op op = MPI_OP_NULL; /* created once per process, like MPI's own operators */
    if (op == MPI_OP_NULL)
        MPI_Op_create(bf16_sum, 1, &op);
    return op;
}

void comm_allreduce_sum_bf16(comm_group *g, uint16_t *buf, size_t n)
{
    allreduce_typed(g, buf, n, sizeof(uint16_t), MPI_UINT16_T, bf16_sum_op(), "all-reduce (bf16)", 1);
}

void comm_reduce_scatter_sum_bf16(comm_group *g, uint16_t *buf, size_t n)
{
    reduce_scatter_typed(g, buf, n, sizeof(uint16_t), MPI_UINT16_T, bf16_sum_op(), "reduce-scatter (bf16)");
}

void comm_reduce_scatter_sum_counts_bf16(comm_group *g, uint16_t *buf, const size_t *counts)
{
    reduce_scatter_counts_typed(g, buf, counts, sizeof(uint16_t), MPI_UINT16_T, bf16_sum_op(), "reduce-scatter (bf16)");
}

void comm_reduce_scatter_sum(comm_group *g, float *buf, size_t n)
{
    reduce_scatter_typed(g, buf, n, sizeof(float), MPI_FLOAT, MPI_SUM, "reduce-scatter");
}

void comm_allgather(comm_group *g, float *buf, size_t n)
{
    if (g->size == 1)
        return;
    size_t part = n / (size_t)g->size;
    wd_enter(g->wd, "all-gather", g->size);
    check(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, (int)part, MPI_FLOAT, g->mpi), "all-gather");
    wd_leave(g->wd);
    g->bytes_sent += (double)(g->size - 1) / g->size * n * sizeof(float);
}

void comm_alltoall(comm_group *g, const float *send, float *recv, size_t n)
{
    if (g->size == 1) {
        memmove(recv, send, n * sizeof(float));
        return;
    }
    size_t part = n / (size_t)g->size;
    if (part > INT_MAX) {
        fprintf(stderr, "dtrain: all-to-all: blocks of %zu floats are more than MPI's int counts can carry\n", part);
        abort();
    }
    wd_enter(g->wd, "all-to-all", g->size);
    check(MPI_Alltoall(send, (int)part, MPI_FLOAT, recv, (int)part, MPI_FLOAT, g->mpi), "all-to-all");
    wd_leave(g->wd);
    g->bytes_sent += (double)(g->size - 1) / g->size * n * sizeof(float);
}

void comm_alltoallv(comm_group *g, const float *send, const size_t *send_counts, float *recv,
                    const size_t *recv_counts)
{
    if (g->size == 1) {
        memmove(recv, send, send_counts[0] * sizeof(float));
        return;
    }
    size_t sent, got, before;
    int *s = malloc(4 * (size_t)g->size * sizeof(int)), *r = s + 2 * g->size; /* counts, then displacements */
    int_counts(g, send_counts, s, s + g->size, &sent, &before, "all-to-all-v");
    int_counts(g, recv_counts, r, r + g->size, &got, &before, "all-to-all-v");
    wd_enter(g->wd, "all-to-all-v", g->size);
    check(MPI_Alltoallv(send, s, s + g->size, MPI_FLOAT, recv, r, r + g->size, MPI_FLOAT, g->mpi), "all-to-all-v");
    wd_leave(g->wd);
    g->bytes_sent += (double)(sent - send_counts[g->rank]) * sizeof(float);
    free(s);
}

void comm_alltoall_int(comm_group *g, const int *send, int *recv, size_t n)
{
    if (g->size == 1) {
        memmove(recv, send, n * sizeof(int));
        return;
    }
    wd_enter(g->wd, "all-to-all", g->size);
    check(MPI_Alltoall(send, (int)n, MPI_INT, recv, (int)n, MPI_INT, g->mpi), "all-to-all");
    wd_leave(g->wd);
}

/* A request slot for a collective being started on g (its counts array, if any, freed on
 * completion). */
static MPI_Request *pending_slot(comm_group *g, int *counts)
{
    if (g->n_pending == g->cap_pending) {
        g->cap_pending = g->cap_pending ? 2 * g->cap_pending : 16;
        g->pending = realloc(g->pending, (size_t)g->cap_pending * sizeof *g->pending);
        g->pending_counts = realloc(g->pending_counts, (size_t)g->cap_pending * sizeof *g->pending_counts);
    }
    g->pending_counts[g->n_pending] = counts;
    return &g->pending[g->n_pending++];
}

void comm_iallreduce_sum(comm_group *g, float *buf, size_t n)
{
    if (g->size == 1 || n == 0)
        return;
    if (n > INT_MAX) {
        fprintf(stderr, "dtrain: all-reduce (started): %zu floats are more than MPI's int counts can carry\n", n);
        abort();
    }
    check(MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, g->mpi, pending_slot(g, NULL)),
          "all-reduce (started)");
    g->bytes_sent += 2.0 * (g->size - 1) / g->size * n * sizeof(float);
}

void comm_ireduce_scatter_sum_counts(comm_group *g, const float *send, float *recv, const size_t *counts)
{
    if (g->size == 1) {
        memmove(recv, send, counts[0] * sizeof(float));
        return;
    }
    int *cnt = malloc((size_t)g->size * sizeof(int));
    size_t total, before;
    int_counts(g, counts, cnt, NULL, &total, &before, "reduce-scatter (started)");
    check(MPI_Ireduce_scatter(send, recv, cnt, MPI_FLOAT, MPI_SUM, g->mpi, pending_slot(g, cnt)),
          "reduce-scatter (started)");
    g->bytes_sent += (double)(g->size - 1) / g->size * total * sizeof(float);
}

struct comm_request {
    comm_group *g;
    MPI_Request req, req2; /* req2: a ring step's receive (MPI_REQUEST_NULL otherwise) */
    int *cnt, *displ;      /* read by MPI until an all-gather ends */
};

comm_request *comm_iring_step(comm_group *g, const float *send, float *recv, size_t n)
{
    if (g->size == 1)
        return NULL;
    if (n > INT_MAX) {
        fprintf(stderr, "dtrain: ring step: %zu floats are more than MPI's int counts can carry\n", n);
        abort();
    }
    comm_request *r = calloc(1, sizeof *r);
    r->g = g;
    int next = (g->rank + 1) % g->size, prev = (g->rank + g->size - 1) % g->size;
    check(MPI_Irecv(recv, (int)n, MPI_FLOAT, prev, 77, g->mpi, &r->req2), "ring receive");
    check(MPI_Isend(send, (int)n, MPI_FLOAT, next, 77, g->mpi, &r->req), "ring send");
    g->bytes_sent += (double)n * sizeof(float);
    return r;
}

comm_request *comm_iallgather_counts(comm_group *g, float *buf, const size_t *counts)
{
    if (g->size == 1)
        return NULL;
    comm_request *r = calloc(1, sizeof *r);
    r->g = g;
    r->req2 = MPI_REQUEST_NULL;
    r->cnt = malloc((size_t)g->size * sizeof(int));
    r->displ = malloc((size_t)g->size * sizeof(int));
    size_t total, before;
    int_counts(g, counts, r->cnt, r->displ, &total, &before, "all-gather (started)");
    check(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, r->cnt, r->displ, MPI_FLOAT, g->mpi, &r->req),
          "all-gather (started)");
    g->bytes_sent += (double)(g->size - 1) / g->size * total * sizeof(float);
    return r;
}

int comm_request_test(comm_request *r)
{
    int done = 1;
    if (r) {
        MPI_Request both[2] = {r->req, r->req2};
        check(MPI_Testall(2, both, &done, MPI_STATUSES_IGNORE), "started collective");
        r->req = both[0];
        r->req2 = both[1];
    }
    return done;
}

void comm_request_wait(comm_request *r)
{
    if (!r)
        return;
    MPI_Request both[2] = {r->req, r->req2};
    wd_enter(r->g->wd, "started collective", r->g->size);
    check(MPI_Waitall(2, both, MPI_STATUSES_IGNORE), "started collective");
    wd_leave(r->g->wd);
    free(r->cnt);
    free(r->displ);
    free(r);
}

static void pending_done(comm_group *g)
{
    for (int i = 0; i < g->n_pending; i++)
        free(g->pending_counts[i]);
    g->n_pending = 0;
}

int comm_progress(comm_group *g)
{
    if (g->n_pending == 0)
        return 1;
    int done = 0;
    check(MPI_Testall(g->n_pending, g->pending, &done, MPI_STATUSES_IGNORE), "started collectives");
    if (done)
        pending_done(g);
    return done;
}

void comm_wait_started(comm_group *g)
{
    if (g->n_pending == 0)
        return;
    wd_enter(g->wd, "started collectives", g->size);
    check(MPI_Waitall(g->n_pending, g->pending, MPI_STATUSES_IGNORE), "started collectives");
    wd_leave(g->wd);
    pending_done(g);
}

void comm_allgather_counts(comm_group *g, float *buf, const size_t *counts)
{
    if (g->size == 1)
        return;
    int *cnt = malloc((size_t)g->size * sizeof(int)), *displ = malloc((size_t)g->size * sizeof(int));
    size_t total, before;
    int_counts(g, counts, cnt, displ, &total, &before, "all-gather");
    wd_enter(g->wd, "all-gather", g->size);
    check(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, cnt, displ, MPI_FLOAT, g->mpi), "all-gather");
    wd_leave(g->wd);
    free(cnt);
    free(displ);
    g->bytes_sent += (double)(g->size - 1) / g->size * total * sizeof(float);
}

void comm_allgather_bytes(comm_group *g, const void *mine, size_t n, void *all)
{
    if (g->size == 1) {
        memcpy(all, mine, n);
        return;
    }
    wd_enter(g->wd, "all-gather", g->size);
    check(MPI_Allgather(mine, (int)n, MPI_BYTE, all, (int)n, MPI_BYTE, g->mpi), "all-gather");
    wd_leave(g->wd);
}

/* One host scalar all-reduced over g (x and y of `type`), under the watchdog. */
static void allreduce_scalar(comm_group *g, const void *x, void *y, MPI_Datatype type, MPI_Op op)
{
    wd_enter(g->wd, "all-reduce", g->size);
    check(MPI_Allreduce(x, y, 1, type, op, g->mpi), "all-reduce");
    wd_leave(g->wd);
}

double comm_allreduce_sum_double(comm_group *g, double x)
{
    double y = x;
    if (g->size > 1)
        allreduce_scalar(g, &x, &y, MPI_DOUBLE, MPI_SUM);
    return y;
}

double comm_allreduce_max_double(comm_group *g, double x)
{
    double y = x;
    if (g->size > 1)
        allreduce_scalar(g, &x, &y, MPI_DOUBLE, MPI_MAX);
    return y;
}

int comm_allreduce_max_int(comm_group *g, int x)
{
    int y = x;
    if (g->size > 1)
        allreduce_scalar(g, &x, &y, MPI_INT, MPI_MAX);
    return y;
}

void comm_watch_enter(comm_group *g, const char *what)
{
    wd_enter(g->wd, what, g->size);
}

void comm_watch_leave(comm_group *g)
{
    wd_leave(g->wd);
}

int comm_group_size(const comm_group *g) { return g->size; }
int comm_group_rank(const comm_group *g) { return g->rank; }
double comm_bytes_sent(const comm_group *g) { return g->bytes_sent; }
void comm_add_bytes_sent(comm_group *g, double bytes) { g->bytes_sent += bytes; }

void comm_bcast_bytes(comm_group *g, void *buf, size_t n, int root)
{
    if (g->size == 1)
        return;
    wd_enter(g->wd, "broadcast", g->size);
    check(MPI_Bcast(buf, (int)n, MPI_BYTE, root, g->mpi), "broadcast");
    wd_leave(g->wd);
}

void comm_node_local(const comm_ctx *c, int *local_rank, int *local_size)
{
    *local_rank = 0;
    *local_size = 1;
    if (!c->mpi)
        return;
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, c->world_rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, local_rank);
    MPI_Comm_size(node, local_size);
    MPI_Comm_free(&node);
}
