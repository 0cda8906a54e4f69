/* The planner: never worse than the scenario's own layout; for GPT-3 175B on 1,024 A100 the
 * best layout keeps TP inside a node and fits in memory; every returned layout obeys the
 * layout rules and fits; ranking is by step time. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include "plan.h"
#include "workload_bound.h"
#include "zero3.h"

/* One search of GPT-3 175B on its 1,024 GPUs, shared by the tests that only read it. */
typedef struct {
    scenario_config s;
    plan_result p;
} gpt3_plan;

static int search_once(void **state)
{
    gpt3_plan *g = calloc(1, sizeof *g);
    config_error err;
    if (!g || scenario_load(DTSIM_SOURCE_DIR "/scenarios/gpt3-175b-1024-a100.json", NULL, 0, &g->s, &err) != 0 ||
        plan_search(&g->s, 0, &g->p, &err, NULL) != 0) {
        free(g);
        return -1;
    }
    *state = g;
    return 0;
}

static int free_search(void **state)
{
    gpt3_plan *g = *state;
    plan_result_free(&g->p);
    scenario_free(&g->s);
    free(g);
    return 0;
}

static void gpt3_on_1024_a100(void **state)
{
    scenario_config s;
    config_error err;
    if (scenario_load(DTSIM_SOURCE_DIR "/scenarios/gpt3-175b-1024-a100.json", NULL, 0, &s, &err) != 0)
        fail_msg("%s", err.msg);
    plan_result p;
    assert_int_equal(plan_search(&s, 0, &p, &err, NULL), 0);
    assert_true(p.count > 0);
    const plan_layout *best = &p.layouts[0];
    assert_true(best->tp <= s.platform.node.gpus);
    assert_false(best->result.memory.oom);
    assert_true(best->result.memory.total <= s.platform.gpu.memory_gib);
    int found_own = 0;
    for (int i = 0; i < p.count; i++) {
        const plan_layout *l = &p.layouts[i];
        if (i > 0)
            assert_true(l->result.step_time_s >= p.layouts[i - 1].result.step_time_s);
        assert_false(l->result.memory.oom);
        assert_int_equal(l->tp * l->pp * l->dp * l->cp, 1024);
        scenario_config c;
        plan_apply(&s, l, &c);
        assert_int_equal(scenario_validate_layout(&c, &err), 0);
        if (l->is_scenario_own) {
            found_own = 1;
            assert_true(best->result.step_time_s <= l->result.step_time_s);
        }
    }
    assert_true(found_own);
    assert_true(p.enumerated > 1000);
    plan_result_free(&p);
    scenario_free(&s);
}

static void nothing_fits_on_too_few_gpus(void **state)
{
    scenario_config s;
    config_error err;
    if (scenario_load(DTSIM_SOURCE_DIR "/scenarios/gpt3-175b-1024-a100.json", NULL, 0, &s, &err) != 0)
        fail_msg("%s", err.msg);
    plan_result p;
    /* 175B parameters need > 2.8 TB of model states: 8 GPUs of 80 GiB cannot hold them. */
    assert_int_equal(plan_search(&s, 8, &p, &err, NULL), 0);
    assert_int_equal(p.count, 0);
    assert_true(p.out_of_memory > 0);
    plan_result_free(&p);
    assert_int_not_equal(plan_search(&s, 1 << 20, &p, &err, NULL), 0);
    scenario_free(&s);
}

/* A clock that moves on by a progress interval every time the meter reads it: each note prints. */
static double progress_now_s;
static double stepping_clock(void)
{
    return progress_now_s += PROGRESS_INTERVAL_S;
}

/* The search tells a progress meter the candidates done of all it enumerated (what `dtsim plan
 * --progress` prints): one thread, so the counts rise chunk by chunk to the total. */
static void progress_counts_the_candidates(void **state)
{
    (void)state;
    scenario_config s;
    config_error err;
    if (scenario_load(DTSIM_SOURCE_DIR "/scenarios/gpt3-175b-1024-a100.json", NULL, 0, &s, &err) != 0)
        fail_msg("%s", err.msg);
    FILE *out = tmpfile();
    assert_non_null(out);
    progress_meter m;
    progress_start(&m, "dtsim plan", "layout", PROGRESS_ON);
    m.out = out;
    m.in_place = 0;
    m.clock = stepping_clock;
    m.start_s = m.last_s = progress_now_s = 0;
    plan_result p;
    assert_int_equal(plan_search_threads(&s, 8, 1, 0, NULL, &p, &err, &m), 0); /* 8 GPUs: nothing fits, quick */
    rewind(out);
    char line[256];
    long lines = 0, last = 0;
    while (fgets(line, sizeof line, out)) {
        long done, total;
        if (sscanf(line, "dtsim plan: layout %ld of %ld (", &done, &total) != 2)
            fail_msg("not a progress line: %s", line);
        assert_int_equal(total, p.enumerated);
        assert_true(done > last && done <= total);
        last = done;
        lines++;
    }
    assert_true(lines >= 2);
    assert_int_equal(last, p.enumerated); /* the last chunk is reported too */
    fclose(out);
    plan_result_free(&p);
    scenario_free(&s);
}

/* Every dropped candidate is counted under one reason, and a reason is a rule, not an
 * instance: its numbers are folded (no digits left). */
static void dropped_candidates_are_counted_by_reason(void **state)
{
    const plan_result p = ((gpt3_plan *)*state)->p;
    long inv = 0, oom = 0;
    for (int i = 0; i < p.invalid_by.count; i++) {
        inv += p.invalid_by.reason[i].count;
        assert_null(strpbrk(p.invalid_by.reason[i].rule, "0123456789"));
        if (i > 0)
            assert_true(p.invalid_by.reason[i].count <= p.invalid_by.reason[i - 1].count);
    }
    for (int i = 0; i < p.oom_by.count; i++) {
        oom += p.oom_by.reason[i].count;
        assert_non_null(strstr(p.oom_by.reason[i].rule, "largest part"));
    }
    assert_int_equal(inv, p.invalid);
    assert_int_equal(oom, p.out_of_memory);
    assert_true(p.invalid > 0 && p.out_of_memory > 0);
    assert_int_equal(p.enumerated, p.invalid + p.out_of_memory + p.count);
}

static void tally_folds_numbers_and_overflows_into_other(void **state)
{
    plan_tally t;
    memset(&t, 0, sizeof t);
    plan_tally_add(&t, "a.tp: 3 does not divide heads=96");
    plan_tally_add(&t, "a.tp: 5 does not divide heads=12");
    plan_tally_add(&t, "a.cp: 2.5 is not an integer");
    assert_int_equal(t.count, 2);
    assert_string_equal(t.reason[0].rule, "a.tp: N does not divide heads=N");
    assert_int_equal(t.reason[0].count, 2);
    assert_string_equal(t.reason[1].rule, "a.cp: N is not an integer");
    for (int i = 0; i < 3 * PLAN_MAX_REASONS; i++) {
        char msg[64];
        snprintf(msg, sizeof msg, "rule %c%c", 'a' + i % 26, 'a' + i / 26);
        plan_tally_add(&t, msg);
    }
    assert_int_equal(t.count, PLAN_MAX_REASONS);
    long total = 0;
    for (int i = 0; i < t.count; i++)
        total += t.reason[i].count;
    assert_int_equal(total, 3 + 3 * PLAN_MAX_REASONS); /* nothing dropped from the counts */
    assert_string_equal(t.reason[PLAN_MAX_REASONS - 1].rule, "other rules");
}

/* A --json layout given back to the loader as --set overrides is the same layout: same step
 * time. Its "parallel" object has every parallel key of DESIGN.md's scenario. */
/* A layout's plan JSON, its "parallel" and "training" objects given to GPT-3 175B's scenario file as
 * --set overrides, loads through the loader and runs the step the plan ranked it by. */
static void layout_json_loads_back(const scenario_config *s, const plan_layout *l, int rank)
{
    static const char *keys[] = {"tensor_model_parallel_size", "pipeline_model_parallel_size", "data_parallel_size",
                                 "virtual_pipeline_model_parallel_size", "sequence_parallel", "context_parallel_size",
                                 "expert_model_parallel_size", "zero_stage", "schedule", "overlap_grad_reduce",
                                 "overlap_p2p_comm", "scatter_gather_p2p", "bucket_size_mb"};
    config_error err;
    json_t *j = plan_layout_to_json(s, l);
    json_t *par = json_object_get(j, "parallel"), *tr = json_object_get(j, "training");
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
        if (!json_object_get(par, keys[k]))
            fail_msg("plan --json parallel lacks %s", keys[k]);
    assert_false(json_is_true(json_object_get(json_object_get(j, "memory_gib"), "oom")));
    char *sets[32];
    int n = 0;
    const char *key;
    json_t *val;
    json_object_foreach(par, key, val) {
        char *v = json_dumps(val, JSON_ENCODE_ANY), *set = malloc(256);
        snprintf(set, 256, "parallel.%s=%s", key, v);
        free(v);
        sets[n++] = set;
    }
    json_object_foreach(tr, key, val) {
        char *v = json_dumps(val, JSON_ENCODE_ANY), *set = malloc(256);
        snprintf(set, 256, "training.%s=%s", key, v);
        free(v);
        sets[n++] = set;
    }
    scenario_config c;
    if (scenario_load(DTSIM_SOURCE_DIR "/scenarios/gpt3-175b-1024-a100.json", (const char *const *)sets, n, &c, &err) !=
        0)
        fail_msg("layout %d does not load back: %s", rank, err.msg);
    run_result r;
    assert_int_equal(run_scenario(&c, &r, &err), 0);
    assert_float_equal(r.step_time_s, l->result.step_time_s, 1e-9 * r.step_time_s);
    assert_float_equal(json_real_value(json_object_get(j, "step_time_s")), r.step_time_s, 1e-9 * r.step_time_s);
    scenario_free(&c);
    for (int k = 0; k < n; k++)
        free(sets[k]);
    json_decref(j);
}

static void json_layouts_load_back_through_the_loader(void **state)
{
    const gpt3_plan *g = *state;
    for (int i = 0; i < 5 && i < g->p.count; i++)
        layout_json_loads_back(&g->s, &g->p.layouts[i], i + 1);
}

/* Branch and bound: searched for its best K only (K 1, 10, 40), the search simulates fewer layouts
 * and its best K are the whole search's, layout for layout and figure for figure; every layout it
 * did not simulate is slower than its K-th; the scenario's own layout is simulated all the same.
 * Beneath it, the bound the cut relies on is under every layout's step (the full replay of each:
 * tests/plan/test_fold.c, every shipped scenario). */
static void bounded_search_keeps_the_best(void **state)
{
    const gpt3_plan *g = *state;
    const plan_result *all = &g->p;
    for (int i = 0; i < all->count; i++) {
        scenario_config c;
        plan_apply(&g->s, &all->layouts[i], &c);
        double bound = workload_step_lower_bound(&c);
        assert_true(bound > 0 && bound <= all->layouts[i].result.step_time_s * (1 + 1e-9));
    }
    static const int keeps[] = {1, 10, 40};
    for (size_t k = 0; k < sizeof keeps / sizeof *keeps; k++) {
        int keep = keeps[k];
        plan_result p;
        config_error err;
        assert_int_equal(plan_search_threads(&g->s, 0, 2, keep, NULL, &p, &err, NULL), 0);
        print_message("best %d: %d simulated, %ld bounded of %d fitting\n", keep, p.count, p.bounded, all->count);
        assert_int_equal(p.count + p.bounded, all->count);
        assert_true(p.bounded > all->count / 2 && p.count >= keep);
        for (int i = 0; i < keep; i++) {
            assert_int_equal(p.layouts[i].order, all->layouts[i].order);
            assert_true(p.layouts[i].result.step_time_s == all->layouts[i].result.step_time_s);
            assert_true(p.layouts[i].result.memory.total == all->layouts[i].result.memory.total);
        }
        int own = 0;
        for (int i = 0; i < p.count; i++)
            own += p.layouts[i].is_scenario_own;
        assert_int_equal(own, 1);
        /* what was not simulated is slower than the K-th best */
        for (int i = 0; i < all->count; i++) {
            int simulated = 0;
            for (int j = 0; j < p.count && !simulated; j++)
                simulated = p.layouts[j].order == all->layouts[i].order;
            if (!simulated)
                assert_true(all->layouts[i].result.step_time_s > p.layouts[keep - 1].result.step_time_s);
        }
        plan_result_free(&p);
    }
}

/* Equal step times are ordered by memory then enumeration order: the same ranking on every
 * run and every libc's qsort. */
static void ties_are_broken_by_memory_then_enumeration(void **state)
{
    const plan_result *p = &((gpt3_plan *)*state)->p;
    int ties = 0;
    for (int i = 1; i < p->count; i++) {
        const plan_layout *x = &p->layouts[i - 1], *y = &p->layouts[i];
        assert_true(x->result.step_time_s <= y->result.step_time_s);
        if (x->result.step_time_s == y->result.step_time_s) {
            ties++;
            assert_true(x->result.memory.total <= y->result.memory.total);
            if (x->result.memory.total == y->result.memory.total)
                assert_true(x->order < y->order);
        }
    }
    assert_true(ties > 0); /* ZeRO 1 and 2 tie in time: the rule is exercised */
}

/* Threads change nothing but the time: 1 and 3 workers give the same ranking and tallies, every
 * fitting layout simulated (keep 0) or only the best `keep` known (where the cut, too, is the same);
 * 1 and 2 under generous limits on each replay, the same as without them. */
static void same_search(const plan_result *a, const plan_result *b)
{
    assert_int_equal(a->bounded, b->bounded);
    assert_int_equal(a->count, b->count);
    assert_int_equal(a->enumerated, b->enumerated);
    assert_int_equal(a->invalid, b->invalid);
    assert_int_equal(a->out_of_memory, b->out_of_memory);
    for (int i = 0; i < a->count; i++) {
        assert_int_equal(a->layouts[i].order, b->layouts[i].order);
        assert_true(a->layouts[i].result.step_time_s == b->layouts[i].result.step_time_s);
    }
}

static void threads_give_the_same(int keep, int threads, const budget_limits *limits)
{
    scenario_config s;
    config_error err;
    if (scenario_load(DTSIM_SOURCE_DIR "/scenarios/gpt3-175b-1024-a100.json", NULL, 0, &s, &err) != 0)
        fail_msg("%s", err.msg);
    plan_result a, b;
    assert_int_equal(plan_search_threads(&s, 64, 1, keep, limits, &a, &err, NULL), 0);
    assert_int_equal(plan_search_threads(&s, 64, threads, keep, limits, &b, &err, NULL), 0);
    if (limits) { /* what the limits let through is the search without them */
        plan_result none;
        assert_int_equal(plan_search_threads(&s, 64, threads, keep, NULL, &none, &err, NULL), 0);
        same_search(&none, &b);
        plan_result_free(&none);
    }
    assert_true(a.count > 0);
    assert_true(keep == 0 ? a.bounded == 0 : a.bounded > 0);
    same_search(&a, &b);
    assert_string_equal(a.first_invalid, b.first_invalid);
    assert_int_equal(a.invalid_by.count, b.invalid_by.count);
    for (int i = 0; i < a.invalid_by.count; i++) {
        assert_string_equal(a.invalid_by.reason[i].rule, b.invalid_by.reason[i].rule);
        assert_int_equal(a.invalid_by.reason[i].count, b.invalid_by.reason[i].count);
    }
    plan_result_free(&a);
    plan_result_free(&b);
    scenario_free(&s);
}

static void threads_do_not_change_the_result(void **state)
{
    (void)state;
    const budget_limits generous = {64, 3600};
    threads_give_the_same(0, 3, NULL);
    threads_give_the_same(5, 3, NULL);
    threads_give_the_same(5, 2, &generous);
}

/* A layout the limits refuse past the branch and bound's cut does not fail the search: GPT-3 175B
 * at a global batch of 1,572,864 on 256 GPUs under 0.3 s a replay, where DeepSpeed-style ZeRO-3
 * under a pipeline (TP 4 x PP 16 x DP 4, VPP 2) needs a longer fold attempt (0.33 s). Every
 * fitting layout simulated, the search fails on it, naming it; for the best 10 it lies past the cut
 * and the search gives, at 1, 2 and 4 threads, what it gives without limits. (Seconds, not memory:
 * a replay's memory is priced once a thread, its seconds alike at any count. At this scenario's
 * figures the cut for the best 88 falls 2 layouts before it, that for 89 past it.) */
static void gated_past_the_cut(void **state)
{
    (void)state;
    scenario_config s;
    config_error err;
    if (scenario_load(DTSIM_SOURCE_DIR "/scenarios/gpt3-175b-1024-a100.json", NULL, 0, &s, &err) != 0)
        fail_msg("%s", err.msg);
    s.training.global_batch_size = 1572864;
    const budget_limits limits = {0, 0.3};
    plan_result all, none;
    assert_int_equal(plan_search_threads(&s, 256, 2, 0, &limits, &all, &err, NULL), -1);
    print_message("every layout: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "ZeRO 3): refused before a fold attempt"));
    assert_int_equal(plan_search_threads(&s, 256, 2, 10, NULL, &none, &err, NULL), 0);
    assert_true(none.bounded > 0);
    static const int threads[] = {1, 2, 4};
    for (size_t t = 0; t < sizeof threads / sizeof *threads; t++) {
        plan_result p;
        assert_int_equal(plan_search_threads(&s, 256, threads[t], 10, &limits, &p, &err, NULL), 0);
        same_search(&none, &p);
        plan_result_free(&p);
    }
    plan_result_free(&none);
    scenario_free(&s);
}

/* The estimate of a --batch-tokens range prices each batch as plan_estimate prices it alone, and
 * counts the layouts the search finds fitting there (pass 1's rules and memory: simulated or
 * bounded), though it enumerates the candidates once and computes the memory and first replays
 * again only where the batch changes them. The deadline search's estimate is then at least every
 * power-of-two size at every batch, and the size of 3 x 2^k nodes it may search between two (it
 * priced the range's largest batch, 2 x 3^6 sequences and few layouts, for each: 4.43 s and 988
 * layouts where 35.9 s and 15,545 are priced now). */
static double price_alone(const scenario_config *s, int gpus, long long batch, long *fitting)
{
    scenario_config b = *s;
    b.training.global_batch_size = batch;
    if (b.platform.network.nodes < gpus / b.platform.node.gpus)
        b.platform.network.nodes = gpus / b.platform.node.gpus;
    work_estimate one;
    assert_int_equal(plan_estimate(&b, gpus, 2, &one), 0);
    if (fitting) {
        plan_result p;
        config_error err;
        assert_int_equal(plan_search_threads(&b, gpus, 2, 1, NULL, &p, &err, NULL), 0);
        *fitting = p.count + p.bounded;
        plan_result_free(&p);
    }
    return one.seconds;
}

static void batch_range_estimate_prices_every_batch(void **state)
{
    (void)state;
    scenario_config s;
    config_error err;
    if (scenario_load(DTSIM_SOURCE_DIR "/scenarios/gpt3-175b-1024-a100.json", NULL, 0, &s, &err) != 0)
        fail_msg("%s", err.msg);
    long long batches[PLAN_MAX_BATCHES];
    int nb = plan_batches(&s, 2097152, 2985984, batches);
    assert_int_equal(nb, 4); /* 1,024, 1,152, 1,296 and 1,458 sequences of 2,048 tokens */
    static const int sizes[] = {64, 256, 768};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        work_estimate each[PLAN_MAX_BATCHES];
        long fit[PLAN_MAX_BATCHES];
        assert_int_equal(plan_estimate_batches(&s, sizes[k], 2, batches, nb, each, fit), 0);
        for (int b = 0; b < nb; b++) {
            scenario_config alone = s;
            alone.training.global_batch_size = batches[b];
            work_estimate one;
            long searched;
            assert_int_equal(plan_estimate(&alone, sizes[k], 2, &one), 0);
            price_alone(&s, sizes[k], batches[b], &searched);
            print_message("%d GPUs, batch %lld: %ld fitting, %.3g s\n", sizes[k], batches[b], fit[b], each[b].seconds);
            assert_string_equal(each[b].work, one.work);
            assert_true(each[b].seconds == one.seconds && each[b].bytes == one.bytes);
            assert_int_equal(fit[b], searched);
        }
        assert_true(fit[0] > fit[nb - 1]); /* the largest batch admits the fewest */
    }
    /* up to 128 nodes of 8: 1, 2, ..., 128, and between two 3, 6, ..., 96 */
    plan_deadline_input in = {.deadline_days = 30, .max_gpus = 1024, .threads = 2, .keep_per_size = 10,
                              .batch_tokens_min = 2097152, .batch_tokens_max = 2985984};
    work_estimate e;
    assert_int_equal(plan_deadline_estimate(&s, &in, &e), 0);
    double powers = 0, between = 0;
    for (int nodes = 1; nodes <= 128; nodes *= 2)
        for (int b = 0; b < nb; b++)
            powers += price_alone(&s, nodes * 8, batches[b], NULL);
    for (int nodes = 3; nodes < 128; nodes *= 2) {
        double one = 0;
        for (int b = 0; b < nb; b++)
            one += price_alone(&s, nodes * 8, batches[b], NULL);
        between = fmax(between, one);
    }
    print_message("deadline estimate %.3g s: powers of two %.3g s, the costliest between two %.3g s\n", e.seconds,
                  powers, between);
    assert_true(between > 0);
    assert_true(e.seconds >= (powers + between) * (1 - 1e-12));
    scenario_free(&s);
}

/* A MoE model: expert parallel is searched (EP 1, 2, 4, 8 for 8 experts), every EP kept divides
 * the experts and DP x CP, each layout the planner returns is the step the loader and the
 * simulator give for it, and a dense model is only ever planned with EP 1. */
static void moe_models_search_expert_parallel(void **state)
{
    (void)state;
    static const char *moe[] = {"model.num_layers=8",          "model.hidden_size=1024",
                                "model.num_attention_heads=16", "model.ffn_hidden_size=3584",
                                "model.seq_length=2048",        "model.num_experts=8",
                                "model.moe_router_topk=2",      "training.global_batch_size=256",
                                "parallel.tensor_model_parallel_size=1",
                                "parallel.pipeline_model_parallel_size=1",
                                "parallel.data_parallel_size=32", "parallel.virtual_pipeline_model_parallel_size=1",
                                "parallel.schedule=1f1b",       "parallel.expert_model_parallel_size=8"};
    scenario_config s;
    config_error err;
    if (scenario_load(DTSIM_SOURCE_DIR "/scenarios/gpt3-175b-1024-a100.json", moe, sizeof moe / sizeof *moe, &s,
                      &err) != 0)
        fail_msg("%s", err.msg);
    plan_result p;
    assert_int_equal(plan_search(&s, 32, &p, &err, NULL), 0);
    int seen[9] = {0};
    for (int i = 0; i < p.count; i++) {
        const plan_layout *l = &p.layouts[i];
        assert_true(l->ep == 1 || l->ep == 2 || l->ep == 4 || l->ep == 8);
        assert_int_equal(8 % l->ep, 0);
        assert_int_equal((l->dp * l->cp) % l->ep, 0);
        seen[l->ep]++;
    }
    for (int ep = 1; ep <= 8; ep *= 2)
        if (!seen[ep])
            fail_msg("no fitting layout with EP %d among %d", ep, p.count);
    /* the best layouts with and without EP, through the loader: the same step time */
    for (int want_ep = 1; want_ep <= 8; want_ep *= 8) {
        const plan_layout *l = NULL;
        for (int i = 0; i < p.count && !l; i++)
            if (p.layouts[i].ep == want_ep)
                l = &p.layouts[i];
        scenario_config c;
        plan_apply(&s, l, &c);
        assert_int_equal(c.parallel.ep, want_ep);
        assert_int_equal(scenario_validate_layout(&c, &err), 0);
        run_result r;
        assert_int_equal(run_scenario(&c, &r, &err), 0);
        assert_float_equal(r.step_time_s, l->result.step_time_s, 1e-12 * r.step_time_s);
        char label[128];
        plan_layout_label(l, label, sizeof label);
        assert_true((want_ep > 1) == (strstr(label, " EP") != NULL));
    }
    plan_result_free(&p);
    scenario_free(&s);

    /* dense: EP stays 1 */
    if (scenario_load(DTSIM_SOURCE_DIR "/scenarios/gpt3-175b-1024-a100.json", NULL, 0, &s, &err) != 0)
        fail_msg("%s", err.msg);
    assert_int_equal(plan_search(&s, 64, &p, &err, NULL), 0);
    for (int i = 0; i < p.count; i++)
        assert_int_equal(p.layouts[i].ep, 1);
    plan_result_free(&p);
    scenario_free(&s);
}

/* The planner's folded evaluation (run_scenario_folded: two short replays, certified periodic and
 * extrapolated, deeper where they are not yet periodic) against the full replay of every fitting
 * layout of the GPT-3 175B search: step time, exposed and total communication, compute, bubbles
 * and memory. A layout the certificate (sim/replay/periodic.h) accepts before its step is periodic
 * fails here (tests/plan/README.md: the other scenarios' searches are checked the same way by
 * tests/plan/test_fold.c). */
static void check_folds(const gpt3_plan *g)
{
    int folded = 0, zero3_folded = 0, dense_foldable = 0, dense_folded = 0;
    double worst = 0, worst_bubble = 0;
    for (int i = 0; i < g->p.count; i++) {
        const plan_layout *l = &g->p.layouts[i];
        scenario_config c;
        config_error err;
        plan_apply(&g->s, l, &c);
        run_result full;
        assert_int_equal(run_scenario(&c, &full, &err), 0);
        const run_result *f = &l->result;
        double rel = fabs(f->step_time_s - full.step_time_s) / full.step_time_s;
        worst = rel > worst ? rel : worst;
        if (rel > 1e-9) {
            char label[128];
            plan_layout_label(l, label, sizeof label);
            fail_msg("%s: folded step %.9g s, full replay %.9g s", label, f->step_time_s, full.step_time_s);
        }
        for (int k = 0; k < COMM_CLASS_COUNT; k++) {
            assert_float_equal(f->comm_exposed_s[k], full.comm_exposed_s[k], 1e-9 * full.step_time_s);
            assert_float_equal(f->comm_total_s[k], full.comm_total_s[k], 1e-9 * (full.comm_total_s[k] + 1));
        }
        assert_float_equal(f->compute_s, full.compute_s, 1e-9 * full.step_time_s);
        double db = fmax(fabs(f->bubble_mean - full.bubble_mean), fabs(f->bubble_max - full.bubble_max));
        worst_bubble = db > worst_bubble ? db : worst_bubble;
        assert_float_equal(f->memory.total, full.memory.total, 1e-12);
        assert_float_equal(f->mfu, full.mfu, 1e-9);
        assert_float_equal(f->hfu, full.hfu, 1e-9);
        assert_float_equal(f->overlap_cost_s, full.overlap_cost_s, 1e-9 * full.step_time_s);
        assert_int_equal(f->tasks, full.tasks);
        folded += f->folded;
        zero3_folded += f->folded && l->zero == 3;
        /* the first attempt's two replays, of m1 and m1 + a period (pp micro-batches when
         * interleaved), cheaper than the full one */
        long long period = l->vpp > 1 ? l->pp : 1, m1 = run_fold_micro_batches(&c, 0);
        int size_folds = 2 * m1 + period < scenario_micro_batches(&c);
        dense_foldable += size_folds && l->zero < 3;
        dense_folded += size_folds && l->zero < 3 && f->folded;
    }
    print_message("%d fitting layouts, %d of them folded (%d ZeRO-3); largest step difference %.3g, bubble %.3g\n",
                  g->p.count, folded, zero3_folded, worst, worst_bubble);
    assert_true(worst_bubble < 1e-9);
    assert_true(folded > 0);
    /* ZeRO-0/1/2 steps are periodic a period after one pipeline depth (every one of this search):
     * the certificate accepts them all at the first attempt, so the fold is what the search ran
     * for them, not a fallback */
    assert_int_equal(dense_folded, dense_foldable);
}

static void folded_layouts_equal_the_full_replay(void **state)
{
    check_folds(*state);
}

/* The same search as torchtitan runs it (parallel.framework "torchtitan": FSDP2's ZeRO-3, under
 * pipeline parallelism a chunk gathering once a step and reducing once, and DDP; no ZeRO-1 or -2),
 * whose ZeRO-3 layouts with PP > 1 fold too: each one against its full replay. A layout's JSON
 * names the framework and runs the same step loaded back. */
static void folded_zero3_kept_for_the_step(void **state)
{
    (void)state;
    gpt3_plan g;
    config_error err;
    const char *set[] = {"parallel.framework=\"torchtitan\"", "parallel.zero_stage=3"}; /* the file's: ZeRO-1 */
    if (scenario_load(DTSIM_SOURCE_DIR "/scenarios/gpt3-175b-1024-a100.json", set, 2, &g.s, &err) != 0 ||
        plan_search(&g.s, 0, &g.p, &err, NULL) != 0)
        fail_msg("%s", err.msg);
    int kept = 0;
    for (int i = 0; i < g.p.count; i++) {
        kept += g.p.layouts[i].zero == 3 && g.p.layouts[i].pp > 1;
        assert_true(g.p.layouts[i].zero == 0 || g.p.layouts[i].zero == 3);
    }
    assert_true(kept > 0);
    json_t *j = plan_layout_to_json(&g.s, &g.p.layouts[0]), *par = json_object_get(j, "parallel");
    assert_string_equal(json_string_value(json_object_get(par, "framework")), "torchtitan");
    json_decref(j);
    for (int i = 0; i < 3 && i < g.p.count; i++)
        layout_json_loads_back(&g.s, &g.p.layouts[i], i + 1);
    scenario_config c;
    plan_apply(&g.s, &g.p.layouts[0], &c);
    run_result r, r16;
    assert_int_equal(run_scenario(&c, &r, &err), 0);
    /* torchtitan's fp32 reduction costs the best layout's step time or memory against bf16 */
    const char *bf16[] = {"parallel.framework=\"torchtitan\"", "parallel.zero_stage=3",
                          "parallel.grad_reduce_dtype=\"bf16\""};
    scenario_config b;
    if (scenario_load(DTSIM_SOURCE_DIR "/scenarios/gpt3-175b-1024-a100.json", bf16, 3, &b, &err) != 0)
        fail_msg("%s", err.msg);
    scenario_config c16;
    plan_apply(&b, &g.p.layouts[0], &c16);
    assert_int_equal(run_scenario(&c16, &r16, &err), 0);
    assert_true(r.step_time_s > r16.step_time_s || r.memory.total > r16.memory.total);
    scenario_free(&b);
    check_folds(&g);
    plan_result_free(&g.p);
    scenario_free(&g.s);
}

/* The fold beside the full replay where a search does not go: GPipe (whose activation memory
 * grows with the micro-batches, and whose lanes grow in two places, the forwards and the
 * backwards, which the periodic certificate does not take for one inserted period: replayed in
 * full), and ranks time-sharing devices (whose pace depends on the micro-batch count, so the fold
 * must replay in full). */
static void fold_on_gpipe_and_shared_devices(void **state)
{
    (void)state;
    static const char *gpipe[] = {"parallel.schedule=gpipe", "parallel.virtual_pipeline_model_parallel_size=1",
                                  "parallel.pipeline_model_parallel_size=8", "parallel.data_parallel_size=16",
                                  "training.recompute_granularity=full", "training.global_batch_size=768"};
    static const char *shared[] = {"parallel.schedule=1f1b", "parallel.virtual_pipeline_model_parallel_size=1",
                                   "platform.node.compute_devices=2"};
    const char *const *sets[] = {gpipe, shared};
    size_t counts[] = {sizeof gpipe / sizeof *gpipe, sizeof shared / sizeof *shared};
    for (int i = 0; i < 2; i++) {
        scenario_config s;
        config_error err;
        if (scenario_load(DTSIM_SOURCE_DIR "/scenarios/gpt3-175b-1024-a100.json", (const char **)sets[i], counts[i], &s,
                          &err) != 0)
            fail_msg("%s", err.msg);
        run_result folded, full;
        assert_int_equal(run_scenario_folded(&s, &folded, &err), 0);
        assert_int_equal(run_scenario(&s, &full, &err), 0);
        assert_int_equal(folded.folded, 0);
        assert_float_equal(folded.step_time_s, full.step_time_s, 1e-9 * full.step_time_s);
        assert_float_equal(folded.bubble_mean, full.bubble_mean, 1e-9);
        assert_float_equal(folded.memory.total, full.memory.total, 1e-12);
        assert_float_equal(folded.memory.activations, full.memory.activations, 1e-12);
        scenario_free(&s);
    }
}

/* A recipe's scenario asks for overlaps a candidate may not have: Megatron-LM's TP overlap needs
 * sequence parallelism, the parameter gather's overlap the distributed optimizer, the MoE
 * all-to-all overlap EP > 1 and virtual stages under a pipeline. Each candidate keeps the ones it
 * can have and runs without the others, as a user would pass the flags for it; the experts' TP,
 * given as TP's own number, follows the candidate's TP. Carried as they were, they made those
 * candidates invalid: the Grok-1 recipe's planner never saw a TP 1 or a ZeRO-3 layout. */
static void candidates_keep_the_overlaps_they_can_have(void **state)
{
    (void)state;
    scenario_config base, c;
    config_error err;
    if (scenario_load(DTSIM_SOURCE_DIR "/scenarios/grok1-314b-512-h100.json", NULL, 0, &base, &err) != 0)
        fail_msg("%s", err.msg);
    assert_true(base.parallel.tp_comm_overlap && base.parallel.overlap_param_gather && base.parallel.etp == 4);
    base.parallel.overlap_moe_a2a = 1;
    struct {
        plan_layout l;
        int tp_overlap, param_overlap, moe_overlap, etp;
    } cases[] = {
        {{.tp = 4, .pp = 8, .dp = 8, .cp = 2, .vpp = 8, .sp = 1, .zero = 1, .ep = 8, .micro_batch = 1,
          .schedule = PIPELINE_INTERLEAVED, .recompute = RECOMPUTE_NONE}, 1, 1, 1, 0},
        {{.tp = 4, .pp = 8, .dp = 8, .cp = 2, .vpp = 8, .sp = 0, .zero = 1, .ep = 8, .micro_batch = 1,
          .schedule = PIPELINE_INTERLEAVED, .recompute = RECOMPUTE_NONE}, 0, 1, 1, 0},
        {{.tp = 1, .pp = 8, .dp = 32, .cp = 2, .vpp = 8, .sp = 0, .zero = 0, .ep = 8, .micro_batch = 1,
          .schedule = PIPELINE_INTERLEAVED, .recompute = RECOMPUTE_NONE}, 1, 0, 1, 0},
        {{.tp = 2, .pp = 8, .dp = 16, .cp = 2, .vpp = 1, .sp = 1, .zero = 1, .ep = 1, .micro_batch = 1,
          .schedule = PIPELINE_1F1B, .recompute = RECOMPUTE_NONE}, 1, 1, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        plan_apply(&base, &cases[i].l, &c);
        if (c.parallel.tp_comm_overlap != cases[i].tp_overlap || c.parallel.overlap_param_gather != cases[i].param_overlap ||
            c.parallel.overlap_moe_a2a != cases[i].moe_overlap || c.parallel.etp != cases[i].etp)
            fail_msg("candidate %zu: tp_comm_overlap %d, overlap_param_gather %d, overlap_moe_a2a %d, etp %d", i,
                     c.parallel.tp_comm_overlap, c.parallel.overlap_param_gather, c.parallel.overlap_moe_a2a,
                     c.parallel.etp);
        if (scenario_validate_layout(&c, &err) != 0)
            fail_msg("candidate %zu refused: %s", i, err.msg);
    }
    /* ZeRO-3 without the parameter gather's overlap (the MoE overlap, which dtsim does not model
     * under ZeRO-3, left out of the scenario here) */
    base.parallel.overlap_moe_a2a = 0;
    plan_layout z3 = cases[2].l;
    z3.zero = 3;
    plan_apply(&base, &z3, &c);
    assert_false(c.parallel.overlap_param_gather);
    if (scenario_validate_layout(&c, &err) != 0)
        fail_msg("ZeRO-3 candidate refused: %s", err.msg);
    /* folding (the experts' own TP 1) stays where TP > 1 has SP, and is TP's own 1 elsewhere */
    base.parallel.etp = 1;
    plan_apply(&base, &cases[0].l, &c);
    assert_int_equal(c.parallel.etp, 1);
    plan_apply(&base, &cases[1].l, &c);
    assert_int_equal(c.parallel.etp, 0);
    scenario_free(&base);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gpt3_on_1024_a100),
        cmocka_unit_test(nothing_fits_on_too_few_gpus),
        cmocka_unit_test(progress_counts_the_candidates),
        cmocka_unit_test(tally_folds_numbers_and_overflows_into_other),
        cmocka_unit_test(threads_do_not_change_the_result),
        cmocka_unit_test(gated_past_the_cut),
        cmocka_unit_test(batch_range_estimate_prices_every_batch),
        cmocka_unit_test(moe_models_search_expert_parallel),
        cmocka_unit_test(candidates_keep_the_overlaps_they_can_have),
        cmocka_unit_test(fold_on_gpipe_and_shared_devices),
        cmocka_unit_test(folded_zero3_kept_for_the_step),
    };
    const struct CMUnitTest shared[] = {
        cmocka_unit_test(dropped_candidates_are_counted_by_reason),
        cmocka_unit_test(json_layouts_load_back_through_the_loader),
        cmocka_unit_test(ties_are_broken_by_memory_then_enumeration),
        cmocka_unit_test(folded_layouts_equal_the_full_replay),
        cmocka_unit_test(bounded_search_keeps_the_best),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    return failed + cmocka_run_group_tests(shared, search_once, free_search);
}
