/* The periodic-regime certificate (sim/replay/periodic.h) on hand-built steps of m micro-batches,
 * one stage, whose step times are known in closed form:
 *  - coupled: each micro-batch's compute (1 s) then its reduction (0.5 s) on the comm stream, the
 *    next compute waiting for it (DeepSpeed's backward epilogue): step(m) = 1.5 m from the first
 *    micro-batch; certified, a period of 1.5 s.
 *  - racing: a 10 s head start of compute, then computes of 1 s, and transfers of 1.1 s on the
 *    comm stream that wait for nothing but each other: step(m) = max(10 + m, 1.1 m), 10 + m up to
 *    m = 100 and 1.1 m after. Three steps at m = 4, 5, 6 lie on one line of slope 1, which
 *    extrapolated to m = 1,000 says 1,010 s for 1,100 s: the certificate refuses it, because the
 *    two lanes move by different times in a period.
 *  - the same with transfers of 1 s: both lanes move 1 s a period, certified.
 * Then random steps against their full replays (each condition of the certificate is needed by one
 * of these tests: without it, one fails), the same steps changed in one place (refused), and
 * inputs moved where the times do not show it (refused). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "fixture.h"
#include "periodic.h"

/* head: a compute task before the first micro-batch (0: none); coupled: each compute waits for the
 * previous micro-batch's transfer. */
static void build(step_workload *w, int m, double head, double compute, double transfer, int coupled)
{
    fixture_graph(w, 1);
    int prev_transfer = -1;
    if (head > 0)
        fixture_add(w, fixture_compute(0, "head", head), -1);
    for (int i = 0; i < m; i++) {
        sim_task c = fixture_compute(0, "compute", compute);
        c.micro_batch = i;
        int ci = fixture_add(w, c, coupled ? prev_transfer : -1);
        sim_task t = fixture_collective(0, "reduce", COMM_DP, COLL_ALL_REDUCE, 2, 1e6, transfer);
        t.micro_batch = i;
        prev_transfer = fixture_add(w, t, coupled ? ci : -1);
    }
}

/* The certificate on a (m1 micro-batches) and b (m1 + 1), b replayed here; both are freed. The
 * step of b into *step_b when not NULL. */
static replay_period certify_pair(step_workload *a, step_workload *b, double *step_b)
{
    replay_times tb;
    fixture_replay_analytic(b, &tb);
    if (step_b)
        *step_b = fixture_end(&tb, b->n_tasks);
    replay_period p;
    assert_int_equal(replay_period_certify(a, b, &tb, 1, &p), 0);
    replay_times_free(&tb);
    workload_free(a);
    workload_free(b);
    return p;
}

static replay_period certify(int m1, double head, double compute, double transfer, int coupled, double *step_b)
{
    step_workload a, b;
    build(&a, m1, head, compute, transfer, coupled);
    build(&b, m1 + 1, head, compute, transfer, coupled);
    return certify_pair(&a, &b, step_b);
}

static void coupled_streams_are_periodic_from_the_start(void **state)
{
    (void)state;
    double step;
    replay_period p = certify(4, 0, 1.0, 0.5, 1, &step);
    assert_true(p.certified);
    assert_true(fabs(p.period_s - 1.5) < 1e-12);
    assert_true(fabs(step - 1.5 * 5) < 1e-12);
    assert_true(p.window_tasks > 0);
}

static void racing_lanes_are_refused(void **state)
{
    (void)state;
    double s4, s5, s6;
    /* the three steps lie on one line (slope 1) though the step bends at m = 100 */
    certify(3, 10, 1.0, 1.1, 0, &s4);
    replay_period p5 = certify(4, 10, 1.0, 1.1, 0, &s5);
    certify(5, 10, 1.0, 1.1, 0, &s6);
    assert_true(fabs(s4 - 14) < 1e-12 && fabs(s5 - 15) < 1e-12 && fabs(s6 - 16) < 1e-12);
    assert_false(p5.certified);
    assert_non_null(strstr(p5.why, "not yet periodic"));
    /* transfers as long as the computes: both lanes move 1 s a period */
    replay_period even = certify(4, 10, 1.0, 1.0, 0, &s5);
    assert_true(even.certified);
    assert_true(fabs(even.period_s - 1.0) < 1e-12);
}

/* A lane with fewer tasks in the longer step is not one period inserted. */
static void mismatched_graphs_are_refused(void **state)
{
    (void)state;
    step_workload a, b;
    build(&a, 5, 0, 1.0, 0.5, 1);
    build(&b, 4, 0, 1.0, 0.5, 1);
    replay_times tb;
    fixture_replay_analytic(&b, &tb);
    replay_period p;
    assert_int_equal(replay_period_certify(&a, &b, &tb, 1, &p), 0);
    assert_false(p.certified);
    assert_true(strlen(p.why) > 0);
    replay_times_free(&tb);
    workload_free(&a);
    workload_free(&b);
}

/* ---- random periodic graphs: whatever is certified must extrapolate exactly */

typedef struct {
    unsigned long long s;
} rng;

static double rnd(rng *r) /* uniform in [0, 1): splitmix64 */
{
    unsigned long long z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (double)((z ^ (z >> 31)) >> 11) / 9007199254740992.0;
}

static int rnd_int(rng *r, int n) /* uniform in [0, n) */
{
    return (int)(rnd(r) * n);
}

enum { MAX_HEAD = 3, MAX_TEMPLATE = 6, MAX_DEPS = 3, MAX_LAG = 2, MAX_TAIL = 2 };
static const char *const task_names[] = {"h0", "h1", "h2", "t0", "t1", "t2", "t3", "t4", "t5", "z0", "z1"};

/* One task of a random graph: where it runs, for how long, and what it waits for. In the
 * template, dep_slot[d] slots back (0: this slot, an earlier template task), template task
 * dep_task[d]; a template task may also wait for head task `head` (-1: none). */
typedef struct {
    int stage, lane, lag, n_deps, dep_slot[MAX_DEPS], dep_task[MAX_DEPS], head;
    double duration_s, inside_s;
} random_task;

/* A step of m micro-batches: head tasks that never repeat (the host lane and the others, as an
 * embedding's or a first gather's), then slot after slot of the template (template task j of slot
 * i is micro-batch i - lag[j]: the later tasks of a pipeline run a micro-batch behind, as 1F1B's
 * backwards), then tail tasks after each template task's last copy (an optimizer step). */
typedef struct {
    int stages, n_head, n_template, n_tail;
    random_task head[MAX_HEAD], template[MAX_TEMPLATE], tail[MAX_TAIL];
    int tail_after[MAX_TAIL];
    double slowdown;
} random_step;

static sim_task random_sim_task(const random_task *r, int stages, const char *name)
{
    sim_task t;
    if (r->lane == LANE_COMPUTE) {
        t = fixture_compute(r->stage, name, r->duration_s);
        t.comm_inside_s = r->inside_s;
    } else if (r->lane == LANE_P2P) {
        t = fixture_transfer(r->stage, (r->stage + 1) % stages, name, 1e6, r->duration_s);
    } else {
        t = fixture_collective(r->stage, name, COMM_DP, COLL_ALL_REDUCE, 2, 1e6, r->duration_s);
        t.lane = (task_lane)r->lane;
    }
    return t;
}

static random_task random_task_draw(rng *r, int stages, int lanes, double longest)
{
    random_task t = {0};
    t.stage = rnd_int(r, stages);
    t.lane = rnd_int(r, lanes);
    t.duration_s = 0.1 + longest * rnd(r);
    t.inside_s = rnd(r) < 0.5 ? rnd(r) * t.duration_s : 0;
    t.head = -1;
    return t;
}

static void random_step_draw(rng *r, random_step *g)
{
    memset(g, 0, sizeof *g);
    g->stages = 1 + rnd_int(r, 3);
    g->slowdown = rnd(r) < 0.5 ? 1.0 : 1.1 + rnd(r);
    g->n_head = rnd_int(r, MAX_HEAD + 1);
    for (int k = 0; k < g->n_head; k++) {
        /* the host lane has head and tail tasks only: a lane with no task per period */
        g->head[k] = random_task_draw(r, g->stages, LANE_COUNT, 6.0);
    }
    g->n_template = 1 + rnd_int(r, MAX_TEMPLATE);
    for (int j = 0; j < g->n_template; j++) {
        random_task *t = &g->template[j];
        *t = random_task_draw(r, g->stages, LANE_HOST, 2.0);
        t->lag = rnd_int(r, MAX_LAG + 1);
        t->n_deps = rnd_int(r, MAX_DEPS + 1);
        for (int d = 0; d < t->n_deps; d++) {
            t->dep_slot[d] = rnd_int(r, 3);
            t->dep_task[d] = rnd_int(r, g->n_template);
            if (t->dep_slot[d] == 0 && t->dep_task[d] >= j) /* within a slot, only earlier tasks */
                t->dep_slot[d] = 1;
        }
        if (g->n_head > 0 && rnd(r) < 0.3)
            t->head = rnd_int(r, g->n_head);
    }
    g->n_tail = rnd_int(r, MAX_TAIL + 1);
    for (int k = 0; k < g->n_tail; k++) {
        g->tail[k] = random_task_draw(r, g->stages, LANE_COUNT, 2.0);
        g->tail_after[k] = rnd_int(r, g->n_template);
    }
}

/* Template task j of slot i in a step of m micro-batches: its index, or -1 where it has none. */
static int slot_task(const random_step *g, const int *first, int m, int i, int j)
{
    if (i < 0 || i - g->template[j].lag < 0 || i - g->template[j].lag >= m)
        return -1;
    return first[i * MAX_TEMPLATE + j];
}

/* extra_slot >= 0: a collective on stage 0's comm lane after that slot's tasks, waiting for the
 * slot's last task (a step that is not the shorter one with a period inserted). */
static void random_step_build_extra(const random_step *g, int m, int extra_slot, step_workload *w)
{
    fixture_graph(w, g->stages);
    w->overlap_slowdown = g->slowdown;
    int head[MAX_HEAD], slots = m + MAX_LAG;
    int *first = malloc((size_t)slots * MAX_TEMPLATE * sizeof(int));
    assert_non_null(first);
    for (int k = 0; k < g->n_head; k++)
        head[k] = fixture_add(w, random_sim_task(&g->head[k], g->stages, task_names[k]), k > 0 ? head[k - 1] : -1);
    for (int i = 0; i < slots; i++) {
        for (int j = 0; j < g->n_template; j++) {
            const random_task *t = &g->template[j];
            first[i * MAX_TEMPLATE + j] = -1;
            if (i - t->lag < 0 || i - t->lag >= m)
                continue;
            sim_task k = random_sim_task(t, g->stages, task_names[MAX_HEAD + j]);
            k.micro_batch = i - t->lag;
            int at = fixture_add(w, k, t->head >= 0 ? head[t->head] : -1);
            for (int d = 0; d < t->n_deps; d++) {
                int dep = slot_task(g, first, m, i - t->dep_slot[d], t->dep_task[d]);
                if (dep >= 0 && dep != at)
                    workload_add_dep(w, at, dep);
            }
            first[i * MAX_TEMPLATE + j] = at;
        }
        if (i == extra_slot)
            fixture_add(w, fixture_collective(0, "extra", COMM_DP, COLL_ALL_REDUCE, 2, 1e6, 0.5), w->n_tasks - 1);
    }
    for (int k = 0; k < g->n_tail; k++) {
        int j = g->tail_after[k], last = -1;
        for (int i = slots - 1; i >= 0 && last < 0; i--)
            last = slot_task(g, first, m, i, j);
        fixture_add(w, random_sim_task(&g->tail[k], g->stages, task_names[MAX_HEAD + MAX_TEMPLATE + k]), last);
    }
    free(first);
}

static void random_step_build(const random_step *g, int m, step_workload *w)
{
    random_step_build_extra(g, m, -1, w);
}

enum { MAX_FIGURES = 4 * 3 + 2 * COMM_CLASS_COUNT + 2 };

/* The step's end, and every sum the fold extends (replay_metrics: each stage's bubble and compute,
 * exposed and total communication by kind, the overlap cost, and the tasks' summed contention),
 * replayed analytically; returns how many figures. */
static int random_step_replay(const random_step *g, int m, double *end, double *figure)
{
    step_workload w;
    random_step_build(g, m, &w);
    replay_times t;
    fixture_replay_analytic(&w, &t);
    *end = fixture_end(&t, w.n_tasks);
    replay_metrics r;
    assert_int_equal(replay_metrics_compute(&w, &t, &r), 0);
    int n = 0;
    for (int s = 0; s < w.stages; s++) {
        figure[n++] = r.stage_bubble_s[s];
        figure[n++] = r.stage_compute_s[s];
    }
    for (int c = 0; c < COMM_CLASS_COUNT; c++) {
        figure[n++] = r.comm_exposed_s[c];
        figure[n++] = r.comm_total_s[c];
    }
    figure[n++] = r.overlap_cost_s;
    figure[n] = 0;
    for (int i = 0; i < w.n_tasks; i++)
        figure[n] += t.contention[i];
    n++;
    replay_metrics_free(&r);
    replay_times_free(&t);
    workload_free(&w);
    return n;
}

/* Thousands of random steps: where the certificate holds for m1 and m1 + 1 micro-batches, the
 * step at m1 + 1 + k is exactly that at m1 + 1 plus k periods, and every sum the fold extends is
 * that at m1 + 1 plus k times what a period added (the full replay is the reference); and the certificate must hold often enough, and refuse often
 * enough, that both outcomes are tested. */
static void random_steps_certified_only_when_exact(void **state)
{
    (void)state;
    rng r = {20261128};
    int trials = getenv("PERIODIC_TRIALS") ? atoi(getenv("PERIODIC_TRIALS")) : 20000, certified = 0, refused = 0;
    for (int n = 0; n < trials; n++) {
        random_step g;
        random_step_draw(&r, &g);
        int m1 = MAX_LAG + 1 + rnd_int(&r, 4), k = 1 + rnd_int(&r, 12);
        step_workload a, b;
        random_step_build(&g, m1, &a);
        random_step_build(&g, m1 + 1, &b);
        replay_period p = certify_pair(&a, &b, NULL);
        if (!p.certified) {
            refused++;
            continue;
        }
        certified++;
        double end_a, end_b, end_m, fa[MAX_FIGURES], fb[MAX_FIGURES], fm[MAX_FIGURES];
        int nf = random_step_replay(&g, m1, &end_a, fa);
        random_step_replay(&g, m1 + 1, &end_b, fb);
        random_step_replay(&g, m1 + 1 + k, &end_m, fm);
        double tol = 1e-9 * end_m;
        if (fabs(end_b - end_a - p.period_s) > tol || fabs(end_b + k * p.period_s - end_m) > tol)
            fail_msg("trial %d (m1 %d, k %d): certified a period of %.12g s, yet steps %.12g, %.12g, %.12g", n, m1, k,
                     p.period_s, end_a, end_b, end_m);
        for (int f = 0; f < nf; f++)
            if (fabs(fb[f] + k * (fb[f] - fa[f]) - fm[f]) > tol)
                fail_msg("trial %d (m1 %d, k %d): figure %d of the metrics is %.12g, %.12g at m1, m1 + 1, and %.12g "
                         "at m1 + 1 + k, not %.12g",
                         n, m1, k, f, fa[f], fb[f], fm[f], fb[f] + k * (fb[f] - fa[f]));
    }
    print_message("%d of %d random steps certified\n", certified, trials);
    assert_true(certified > trials / 5);
    assert_true(refused > trials / 10);
}

/* The longer step changed in one task (its duration, its micro-batch, its bytes) or by a
 * collective only it has: it is no longer the shorter one with a period inserted, whatever the
 * times say, and is never certified. (A changed input is not tried: some make another step that
 * is the shorter one with a period inserted, its inputs one period later.) */
static void perturbed_steps_are_refused(void **state)
{
    (void)state;
    rng r = {1128};
    int trials = getenv("PERIODIC_TRIALS") ? atoi(getenv("PERIODIC_TRIALS")) : 20000, tried[4] = {0};
    for (int n = 0; n < trials; n++) {
        random_step g;
        random_step_draw(&r, &g);
        int m1 = MAX_LAG + 1 + rnd_int(&r, 4), how = rnd_int(&r, 4);
        step_workload a, b;
        random_step_build(&g, m1, &a);
        random_step_build_extra(&g, m1 + 1, how == 3 ? rnd_int(&r, m1 + 1 + MAX_LAG) : -1, &b);
        int i = rnd_int(&r, b.n_tasks);
        sim_task *k = &b.tasks[i];
        if (how == 0)
            k->duration_s *= 1.5;
        else if (how == 1 && k->micro_batch >= 0)
            k->micro_batch += 1;
        else if (how == 2)
            k->bytes = 2 * k->bytes + 1;
        else if (how != 3) {
            workload_free(&a);
            workload_free(&b);
            continue;
        }
        tried[how]++;
        const char *name = k->name;
        if (certify_pair(&a, &b, NULL).certified)
            fail_msg("trial %d: change %d at task %d (%s) certified", n, how, i, name);
    }
    print_message("changed durations %d, micro-batches %d, bytes %d, extra collectives %d: all refused\n", tried[0],
                  tried[1], tried[2], tried[3]);
}

/* Compute tasks of one stage, each waiting for the reduction two micro-batches back (as a
 * gradient-accumulation fence): the steps of m1 and m1 + 1 micro-batches, with `moved` >= 0
 * making that micro-batch's compute wait for the reduction three back instead, and `tail_back`
 * >= 0 adding a collective after all that waits for the compute that many micro-batches before
 * the last. */
static void fenced(step_workload *w, int m, int moved, int tail_back)
{
    fixture_graph(w, 1);
    int c[16], r[16];
    for (int i = 0; i < m; i++) {
        sim_task k = fixture_compute(0, "compute", 1.0);
        k.micro_batch = i;
        int back = i == moved ? 3 : 2;
        c[i] = fixture_add(w, k, i >= back ? r[i - back] : -1);
        sim_task t = fixture_collective(0, "reduce", COMM_DP, COLL_ALL_REDUCE, 2, 1e6, 0.5);
        t.micro_batch = i;
        r[i] = fixture_add(w, t, c[i]);
    }
    if (tail_back >= 0)
        fixture_add(w, fixture_collective(0, "tail", COMM_DP, COLL_ALL_REDUCE, 2, 1e6, 0.1), c[m - 1 - tail_back]);
}

/* The same tasks with an input moved, where the times do not show it: in the inserted period, or
 * before the cut; the unmoved pairs are certified. */
static void moved_inputs_are_refused(void **state)
{
    (void)state;
    step_workload a, b;
    fenced(&a, 5, -1, -1);
    fenced(&b, 6, -1, -1);
    replay_period p = certify_pair(&a, &b, NULL);
    assert_true(p.certified);
    fenced(&a, 5, -1, -1);
    fenced(&b, 6, 5, -1); /* the inserted period's compute waits for an older reduction */
    p = certify_pair(&a, &b, NULL);
    assert_false(p.certified);
    assert_non_null(strstr(p.why, "inputs"));
    fenced(&a, 5, -1, 0);
    fenced(&b, 6, -1, 0);
    p = certify_pair(&a, &b, NULL);
    assert_true(p.certified);
    fenced(&a, 5, -1, 0);
    fenced(&b, 6, -1, 1); /* the tail waits for the last micro-batch in A, not in B */
    p = certify_pair(&a, &b, NULL);
    assert_false(p.certified);
    assert_non_null(strstr(p.why, "waits for other tasks"));
}

/* A gap booked on a task that never repeats: a host task (2 s) and a DP collective after it
 * (1 s) start the step, then m computes of 0.25 s and m collectives of 0.25 s that wait for
 * nothing, queued behind the first; a last compute waits for the last collective. Its gap, from the
 * m-th compute's end (m / 4 s) to 3 + m / 4 s, is booked down the collectives to the first and the
 * host task: exposed DP from 2 s on, bubble before, so exposed DP is 2, 2.25 and 3 s at m = 4, 5 and
 * 12 (closed forms), where extending 4 and 5 would say 4 s at 12. The step itself is periodic
 * (3.5 + m / 4 s) and each collective moves a period later: only the booking tells, and it is
 * refused. (From a review of the certificate, 2026-11-28.) */
static void long_gap(step_workload *w, int m)
{
    fixture_graph(w, 1);
    sim_task h = fixture_compute(0, "host", 2.0);
    h.lane = LANE_HOST;
    int hi = fixture_add(w, h, -1);
    fixture_add(w, fixture_collective(0, "first", COMM_DP, COLL_ALL_REDUCE, 2, 1e6, 1.0), hi);
    int last = -1;
    for (int i = 0; i < m; i++) {
        sim_task c = fixture_compute(0, "compute", 0.25);
        c.micro_batch = i;
        fixture_add(w, c, -1);
        sim_task r = fixture_collective(0, "reduce", COMM_DP, COLL_ALL_REDUCE, 2, 1e6, 0.25);
        r.micro_batch = i;
        last = fixture_add(w, r, -1);
    }
    fixture_add(w, fixture_compute(0, "last", 0.5), last);
}

static double long_gap_exposed_dp(int m)
{
    step_workload w;
    long_gap(&w, m);
    replay_times t;
    fixture_replay_analytic(&w, &t);
    replay_metrics r;
    assert_int_equal(replay_metrics_compute(&w, &t, &r), 0);
    assert_true(fabs(r.step_time_s - (3.5 + m / 4.0)) < 1e-12);
    double dp = r.comm_exposed_s[COMM_DP];
    replay_metrics_free(&r);
    replay_times_free(&t);
    workload_free(&w);
    return dp;
}

static void gaps_booked_on_what_never_repeats_are_refused(void **state)
{
    (void)state;
    assert_true(fabs(long_gap_exposed_dp(4) - 2.0) < 1e-12);
    assert_true(fabs(long_gap_exposed_dp(5) - 2.25) < 1e-12);
    assert_true(fabs(long_gap_exposed_dp(12) - 3.0) < 1e-12);
    step_workload a, b;
    long_gap(&a, 4);
    long_gap(&b, 5);
    replay_period p = certify_pair(&a, &b, NULL);
    assert_false(p.certified);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(coupled_streams_are_periodic_from_the_start),
        cmocka_unit_test(racing_lanes_are_refused),
        cmocka_unit_test(mismatched_graphs_are_refused),
        cmocka_unit_test(random_steps_certified_only_when_exact),
        cmocka_unit_test(perturbed_steps_are_refused),
        cmocka_unit_test(moved_inputs_are_refused),
        cmocka_unit_test(gaps_booked_on_what_never_repeats_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
