/* The periodic-regime certificate of a replayed step (periodic.h). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "periodic.h"

/* Each (stage, lane)'s tasks in graph order, and each task's place on its lane. */
typedef struct {
    int *begin; /* lanes + 1 offsets into task */
    int *task;
    int *pos;
    int *prev; /* each task's predecessor on its lane, -1 for none (what replay_gap_walk reads) */
} lane_order;

static int lane_of(const sim_task *k)
{
    return k->stage * LANE_COUNT + k->lane;
}

static void lane_order_free(lane_order *x)
{
    free(x->begin);
    free(x->task);
    free(x->pos);
    free(x->prev);
    memset(x, 0, sizeof *x);
}

static int lane_order_build(const step_workload *w, lane_order *x)
{
    int n = w->n_tasks, nl = w->stages * LANE_COUNT;
    x->begin = calloc((size_t)nl + 1, sizeof(int));
    x->task = malloc(((size_t)n + 1) * sizeof(int));
    x->pos = malloc(((size_t)n + 1) * sizeof(int));
    x->prev = malloc(((size_t)n + 1) * sizeof(int));
    int *count = calloc((size_t)nl + 1, sizeof(int));
    if (!x->begin || !x->task || !x->pos || !x->prev || !count) {
        free(count);
        lane_order_free(x);
        return -1;
    }
    for (int i = 0; i < n; i++)
        x->begin[lane_of(&w->tasks[i]) + 1]++;
    for (int q = 0; q < nl; q++)
        x->begin[q + 1] += x->begin[q];
    for (int i = 0; i < n; i++) {
        int q = lane_of(&w->tasks[i]);
        x->pos[i] = count[q]++;
        x->task[x->begin[q] + x->pos[i]] = i;
        x->prev[i] = x->pos[i] > 0 ? x->task[x->begin[q] + x->pos[i] - 1] : -1;
    }
    free(count);
    return 0;
}

/* The same task as far as a replay and the metrics read it (its communication by kind too), its
 * micro-batch mb_shift later (tasks of no micro-batch stay at -1); its inputs are compared apart
 * (graphs_correspond, compare_windows). */
static int same_task(const step_workload *wx, const sim_task *x, const step_workload *wy, const sim_task *y,
                     int mb_shift)
{
    return x->kind == y->kind && x->lane == y->lane && x->stage == y->stage && x->peer_stage == y->peer_stage &&
           x->phase == y->phase && x->chunk == y->chunk && x->comm == y->comm && x->coll == y->coll &&
           (x->micro_batch < 0 ? y->micro_batch == x->micro_batch : y->micro_batch == x->micro_batch + mb_shift) &&
           x->duration_s == y->duration_s && x->comm_inside_s == y->comm_inside_s &&
           x->overlap_cost_s == y->overlap_cost_s && x->calls == y->calls && x->dep_count == y->dep_count &&
           x->flops == y->flops && x->group == y->group && x->span_nodes == y->span_nodes && x->bytes == y->bytes &&
           x->tp_ring_bytes == y->tp_ring_bytes &&
           (x->name == y->name || (x->name && y->name && strcmp(x->name, y->name) == 0)) &&
           ((x->parts < 0 && y->parts < 0) ||
            memcmp(workload_task_parts(wx, x), workload_task_parts(wy, y), sizeof(task_comm_parts)) == 0);
}

typedef struct {
    const step_workload *a, *b;
    const replay_times *tb;
    lane_order la, lb;
    int lanes;
    int *e, *cut, *lcp, *lcs, *reach; /* per lane of b */
    unsigned char *after;             /* per task of b: after the cut */
    double lambda, tol;
    int period_mb;
} certify_state;

static int refuse(replay_period *out, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->why, sizeof out->why, fmt, ap);
    va_end(ap);
    out->certified = 0;
    return 0;
}

/* The task before task i of b on its lane, -1 for none. */
static int lane_prev(const certify_state *c, int i)
{
    return c->lb.prev[i];
}

static int in_block(const certify_state *c, int i)
{
    int q = lane_of(&c->b->tasks[i]);
    return c->lb.pos[i] < c->cut[q] + c->e[q];
}

/* How each lane of b is a's with e tasks inserted: the common prefix, and the common suffix with
 * micro-batches one period later. */
static void match_lanes(certify_state *c)
{
    for (int q = 0; q < c->lanes; q++) {
        int na = c->la.begin[q + 1] - c->la.begin[q], nb = c->lb.begin[q + 1] - c->lb.begin[q];
        const int *ta = c->la.task + c->la.begin[q], *tb = c->lb.task + c->lb.begin[q];
        c->e[q] = nb - na;
        int k = 0;
        while (k < na && k < nb && same_task(c->a, &c->a->tasks[ta[k]], c->b, &c->b->tasks[tb[k]], 0))
            k++;
        c->lcp[q] = k;
        k = 0;
        while (k < na && k < nb && same_task(c->a, &c->a->tasks[ta[na - 1 - k]], c->b, &c->b->tasks[tb[nb - 1 - k]], c->period_mb))
            k++;
        c->lcs[q] = k;
    }
}

/* The cut: on every lane with tasks per period, where b first differs from a (where its lane
 * repeats the same tasks, any point of the repetition would do), and every task that waits for
 * one after it, directly or down its lane. */
static void mark_after(certify_state *c)
{
    const step_workload *b = c->b;
    for (int i = 0; i < b->n_tasks; i++) {
        const sim_task *k = &b->tasks[i];
        int q = lane_of(k), prev = lane_prev(c, i);
        int after = c->e[q] > 0 && c->lb.pos[i] >= c->lcp[q];
        after = after || (prev >= 0 && c->after[prev]);
        for (int d = 0; d < k->dep_count && !after; d++)
            after = c->after[b->deps[k->dep_begin + d]];
        c->after[i] = (unsigned char)after;
    }
    for (int q = 0; q < c->lanes; q++) {
        int nb = c->lb.begin[q + 1] - c->lb.begin[q], p = 0;
        while (p < nb && !c->after[c->lb.task[c->lb.begin[q] + p]])
            p++;
        c->cut[q] = p;
    }
}

/* B is A with the period inserted, input for input. A task of A before the cut is B's task at
 * the same place and waits for the same tasks; a task after it is B's task one period later on
 * its lane (e places on), and waits for the tasks one period later on theirs (the same task on a
 * lane with none per period). (match_lanes compared the tasks themselves.) */
static int graphs_correspond(const certify_state *c, replay_period *out)
{
    const step_workload *a = c->a, *b = c->b;
    for (int q = 0; q < c->lanes; q++) {
        int na = c->la.begin[q + 1] - c->la.begin[q];
        for (int p = 0; p < na; p++) {
            int later = p >= c->cut[q];
            const sim_task *x = &a->tasks[c->la.task[c->la.begin[q] + p]];
            const sim_task *y = &b->tasks[c->lb.task[c->lb.begin[q] + p + (later ? c->e[q] : 0)]];
            for (int d = 0; d < x->dep_count; d++) {
                int dx = a->deps[x->dep_begin + d], qx = lane_of(&a->tasks[dx]);
                int want = c->lb.task[c->lb.begin[qx] + c->la.pos[dx] + (later ? c->e[qx] : 0)];
                if (b->deps[y->dep_begin + d] != want)
                    return refuse(out, "lane %d: the longer step's task %d waits for other tasks than the shorter's",
                                  q, (int)(y - b->tasks));
            }
        }
    }
    return 1;
}

/* Widens the windows to every input of a task after the cut; refuses inputs that break the
 * induction. */
static int windows(certify_state *c, replay_period *out)
{
    const step_workload *b = c->b;
    const replay_times *t = c->tb;
    for (int i = 0; i < b->n_tasks; i++) {
        if (!c->after[i])
            continue;
        const sim_task *k = &b->tasks[i];
        int block = in_block(c, i), prev = lane_prev(c, i);
        for (int d = -1; d < k->dep_count; d++) {
            int j = d < 0 ? prev : b->deps[k->dep_begin + d];
            if (j < 0)
                continue;
            int qj = lane_of(&b->tasks[j]), pj = c->lb.pos[j], need = 0;
            if (c->after[j]) {
                int block_j = in_block(c, j);
                if (block && !block_j)
                    return refuse(out, "task %d of the inserted period waits for task %d after it", i, j);
                if (!block && block_j)
                    need = c->cut[qj] + c->e[qj] - pj;
            } else if (c->e[qj] > 0) {
                need = block ? c->cut[qj] - pj : c->cut[qj] + c->e[qj] - pj;
            } else if (t->finish[j] > t->start[i] - c->lambda + c->tol) {
                return refuse(out, "task %d (%s) waits for task %d (%s), which does not repeat, within a period",
                              i, k->name, j, b->tasks[j].name);
            }
            if (need > c->reach[qj])
                c->reach[qj] = need;
        }
    }
    return 1;
}

/* The metrics book each gap of a compute lane by walking back through what its task waited for
 * (replay_gap_walk). A gap after the cut is booked the same one period later only where every task
 * the walk compares is periodic: after the cut, or in a window one period before it (for A's copy of
 * a task after the inserted period: two). So the windows widen to what the walks compare, and a
 * walk that compares a task that never repeats, ending after the gap starts in A, is refused. */
typedef struct {
    certify_state *c;
    double from;  /* tasks ending before this matter to no gap's booking */
    int block;    /* walking a task of the inserted period */
    int never;    /* a compared task that never repeats, or -1 */
} gap_probe;

static void gap_consult(void *ctx, int j)
{
    gap_probe *g = ctx;
    certify_state *c = g->c;
    if (g->never >= 0 || c->after[j] || c->tb->finish[j] <= g->from)
        return;
    int q = lane_of(&c->b->tasks[j]);
    if (c->e[q] == 0) {
        g->never = j;
        return;
    }
    int need = c->cut[q] - c->lb.pos[j] + (g->block ? 0 : c->e[q]);
    if (need > c->reach[q])
        c->reach[q] = need;
}

static int gap_walks(certify_state *c, replay_period *out)
{
    const step_workload *b = c->b;
    double *last = calloc((size_t)b->stages + 1, sizeof(double)); /* each stage's last compute's end */
    if (!last)
        return -1;
    gap_probe g = {c, 0, 0, -1};
    int at = -1;
    for (int i = 0; i < b->n_tasks && g.never < 0; i++) {
        const sim_task *k = &b->tasks[i];
        if (!replay_gap_task(k))
            continue;
        if (c->after[i]) {
            g.from = last[k->stage] - c->lambda - c->tol;
            g.block = in_block(c, i);
            at = i;
            replay_gap_walk(b, c->tb, c->lb.prev, i, last[k->stage], gap_consult, &g);
        }
        last[k->stage] = c->tb->finish[i];
    }
    free(last);
    if (g.never >= 0)
        return refuse(out, "the gap before task %d (%s) is booked on task %d (%s), which does not repeat", at,
                      b->tasks[at].name, g.never, b->tasks[g.never].name);
    return 1;
}

/* The window of each lane one period later: the same tasks, inputs one period later, times
 * lambda later. */
static int compare_windows(certify_state *c, replay_period *out)
{
    const step_workload *b = c->b;
    const replay_times *t = c->tb;
    for (int q = 0; q < c->lanes; q++) {
        if (c->e[q] == 0)
            continue;
        /* the inserted tasks themselves are compared with the period before them, so that a
         * lane's extra tasks in b (a task b has once more than a) are never taken for a period */
        if (c->reach[q] < c->e[q])
            c->reach[q] = c->e[q];
        if (c->reach[q] > c->cut[q])
            return refuse(out, "lane %d (stage %d): the window reaches the start of the step", q, q / LANE_COUNT);
        const int *lt = c->lb.task + c->lb.begin[q];
        for (int p = c->cut[q] - c->reach[q]; p < c->cut[q]; p++) {
            int x = lt[p], y = lt[p + c->e[q]];
            const sim_task *kx = &b->tasks[x], *ky = &b->tasks[y];
            if (!same_task(b, kx, b, ky, c->period_mb))
                return refuse(out, "lane %d: task %d (%s) and task %d (%s) a period later differ", q, x, kx->name, y,
                              ky->name);
            double ds = t->start[y] - t->start[x] - c->lambda, df = t->finish[y] - t->finish[x] - c->lambda;
            if (fabs(ds) > c->tol || fabs(df) > c->tol)
                return refuse(out, "not yet periodic: task %d (%s, stage %d) moves %.9g s in a period, the step %.9g s",
                              y, ky->name, ky->stage, t->finish[y] - t->finish[x], c->lambda);
            for (int d = 0; d < kx->dep_count; d++) {
                int dx = b->deps[kx->dep_begin + d], dy = b->deps[ky->dep_begin + d];
                int qx = lane_of(&b->tasks[dx]);
                if (lane_of(&b->tasks[dy]) != qx || c->lb.pos[dy] != c->lb.pos[dx] + c->e[qx])
                    return refuse(out, "lane %d: task %d's inputs are not task %d's a period later", q, y, x);
            }
            out->window_tasks++;
        }
    }
    return 1;
}

/* Communication beside compute slows it, both ways across the cut. What ran before the windows
 * must be over before the first task after the cut of its stage starts (in A, a period earlier),
 * else the periodic tasks are slowed by what does not repeat. And no task after the cut may run
 * beside a compute task before it: a collective issued later that starts early (a ZeRO-3
 * prefetch, or a transfer waiting only on another stage) would slow the tasks before the cut in
 * B by more than in A, and the two would no longer be the same step with a period inserted. Held
 * in B for the window's last compute, it holds one period later for the inserted period's. */
static int contention_settled(certify_state *c, replay_period *out)
{
    const step_workload *b = c->b;
    const replay_times *t = c->tb;
    if (!(b->overlap_slowdown > 1))
        return 1;
    for (int s = 0; s < b->stages; s++) {
        double first = INFINITY, first_comm = INFINITY;
        for (int l = 0; l < LANE_COUNT; l++) {
            int q = s * LANE_COUNT + l, nb = c->lb.begin[q + 1] - c->lb.begin[q];
            for (int p = c->cut[q]; p < nb; p++) {
                int i = c->lb.task[c->lb.begin[q] + p];
                double at = in_block(c, i) ? t->start[i] : t->start[i] - c->lambda;
                first = at < first ? at : first;
                if (replay_contends(&b->tasks[i]))
                    first_comm = at < first_comm ? at : first_comm;
            }
        }
        for (int l = 0; l < LANE_COUNT; l++) {
            int q = s * LANE_COUNT + l, p = c->cut[q] - (c->e[q] > 0 ? c->reach[q] : 0) - 1;
            if (p < 0)
                continue;
            int i = c->lb.task[c->lb.begin[q] + p];
            if (b->tasks[i].kind != TASK_COMPUTE && t->finish[i] > first + c->tol)
                return refuse(out, "stage %d: task %d (%s) still runs beside the periodic tasks", s, i,
                              b->tasks[i].name);
        }
        int q = s * LANE_COUNT + LANE_COMPUTE;
        for (int p = c->cut[q] - 1; p >= 0; p--) {
            int i = c->lb.task[c->lb.begin[q] + p];
            if (!replay_slowed(&b->tasks[i]))
                continue;
            if (t->finish[i] > first_comm + c->tol)
                return refuse(out, "stage %d: task %d (%s) before the cut runs beside communication after it", s, i,
                              b->tasks[i].name);
            break; /* the lane's last such task ends after every earlier one */
        }
    }
    return 1;
}

/* The step of m1 + j periods ends at max(the tasks before the cut, B's inserted period and the
 * tasks after it moved j - 1 periods) for j >= 1 (an earlier inserted period ends before the
 * last), at max(the tasks before the cut, the tasks after it a period earlier) for A (j = 0). That
 * is linear in j only where the periodic tasks end a period after everything before the cut: else
 * a task that never repeats (a long first gather, a host transfer) sets the end of the shorter
 * steps until the periodic tasks overtake it. (The inserted period is the window's last tasks a
 * period later, compare_windows: where the step ends in it, A's ends in the window.) run_fold.c's
 * check that B's step is A's plus lambda is the same condition read from A's replay; this one
 * needs B alone. */
static int ends_periodic(const certify_state *c, replay_period *out)
{
    double before = 0, periodic = 0;
    int last = -1;
    for (int i = 0; i < c->b->n_tasks; i++) {
        double f = c->tb->finish[i];
        if (c->after[i])
            periodic = f > periodic ? f : periodic;
        else if (f > before) {
            before = f;
            last = i;
        }
    }
    if (before > periodic - c->lambda + c->tol)
        return refuse(out, "the step of fewer micro-batches ends on task %d (%s), which does not repeat", last,
                      c->b->tasks[last].name);
    return 1;
}

/* lambda: what a period adds to the task just before the cut on the first lane with tasks per
 * period (compare_windows holds every other task of the windows to it); 0 where there is none. */
static double period_time(const certify_state *c)
{
    for (int q = 0; q < c->lanes; q++)
        if (c->e[q] > 0 && c->cut[q] >= 1) {
            const int *lt = c->lb.task + c->lb.begin[q];
            return c->tb->finish[lt[c->cut[q] - 1 + c->e[q]]] - c->tb->finish[lt[c->cut[q] - 1]];
        }
    return 0;
}

int replay_period_certify(const step_workload *a, const step_workload *b, const replay_times *tb, int period_mb,
                          replay_period *out)
{
    memset(out, 0, sizeof *out);
    if (a->stages != b->stages) {
        refuse(out, "the two graphs have %d and %d stages", a->stages, b->stages);
        return 0;
    }
    certify_state c = {0};
    c.a = a;
    c.b = b;
    c.tb = tb;
    c.lanes = b->stages * LANE_COUNT;
    double step_b = 0;
    for (int i = 0; i < b->n_tasks; i++)
        step_b = tb->finish[i] > step_b ? tb->finish[i] : step_b;
    c.tol = 1e-12 * step_b;
    c.period_mb = period_mb;
    size_t nl = (size_t)c.lanes + 1;
    int rc = -1;
    if (lane_order_build(a, &c.la) != 0 || lane_order_build(b, &c.lb) != 0)
        goto done;
    c.e = calloc(nl, sizeof(int));
    c.cut = calloc(nl, sizeof(int));
    c.lcp = calloc(nl, sizeof(int));
    c.lcs = calloc(nl, sizeof(int));
    c.reach = calloc(nl, sizeof(int));
    c.after = calloc((size_t)b->n_tasks + 1, 1);
    if (!c.e || !c.cut || !c.lcp || !c.lcs || !c.reach || !c.after)
        goto done;
    rc = 0;
    match_lanes(&c);
    for (int q = 0; q < c.lanes; q++)
        if (c.e[q] < 0) {
            refuse(out, "lane %d has fewer tasks with more micro-batches", q);
            goto done;
        }
    mark_after(&c);
    c.lambda = out->period_s = period_time(&c);
    if (!(c.lambda > 0)) {
        refuse(out, "a period adds %.9g s to the tasks before the cut", c.lambda);
        goto done;
    }
    for (int q = 0; q < c.lanes; q++) {
        int na = c.la.begin[q + 1] - c.la.begin[q];
        if (c.e[q] > 0 && c.cut[q] + c.e[q] > c.lb.begin[q + 1] - c.lb.begin[q]) {
            refuse(out, "lane %d: the inserted period is not after the cut", q);
            goto done;
        }
        if (c.cut[q] > c.lcp[q] || na - c.cut[q] > c.lcs[q]) {
            refuse(out, "lane %d (stage %d) is not the shorter step's with one period inserted at the cut", q,
                   q / LANE_COUNT);
            goto done;
        }
    }
    int walked = 1;
    if (graphs_correspond(&c, out) && windows(&c, out) && (walked = gap_walks(&c, out)) == 1 &&
        compare_windows(&c, out) && contention_settled(&c, out) && ends_periodic(&c, out))
        out->certified = 1;
    if (walked < 0)
        rc = -1;
done:
    lane_order_free(&c.la);
    lane_order_free(&c.lb);
    free(c.e);
    free(c.cut);
    free(c.lcp);
    free(c.lcs);
    free(c.reach);
    free(c.after);
    return rc;
}
