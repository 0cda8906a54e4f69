/* dtsim plan SCENARIO.json [--gpus N] [--top K] [--confirm K] [--exhaustive] [--json FILE|-]
 *            [--report FILE.md] [--set P=V]... [--threads N] [--progress|--quiet]: the command line;
 * the search is
 * plan_search.c, the report markdown.c. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "cli_args.h"
#include "budget.h"
#include "plan.h"
#include "markdown.h"
#include "progress.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: dtsim plan SCENARIO.json [options]\n"
            "Searches every valid parallel layout for the scenario's model, batch and platform\n"
            "(TP inside a node, PP dividing the layers, DP, CP for long sequences, interleaving,\n"
            "micro-batch 1-8, ZeRO 0-3, recomputation, sequence parallelism), drops those that do\n"
            "not fit in GPU memory, simulates the rest (analytic fidelity) and ranks them by step time.\n"
            "Layouts are simulated in the order of a lower bound on their step (their layers' compute\n"
            "through the pipeline); once the best K (--top, or --confirm when larger) are known, those\n"
            "whose bound is slower than the K-th best step are not simulated (\"bounded\"): the best K\n"
            "and every figure of theirs are what simulating every layout gives.\n\n"
            "  --gpus N          GPUs to plan for (default: the scenario's TP x PP x CP x DP)\n"
            "  --top K           layouts to print and write (default 10)\n"
            "  --confirm K       re-simulate the best K at flow fidelity (SimGrid, contention) and\n"
            "                    re-rank them by it (default 0); these replays are priced once the\n"
            "                    best K are known, and refused then (exit 2, nothing written)\n"
            "  --exhaustive      simulate every fitting layout, none bounded (--report does: it\n"
            "                    compares the best with the layouts one choice away)\n"
            "  --json FILE|-     the ranked layouts as JSON (DESIGN.md's plan format)\n"
            "  --report FILE     a capacity-planning report: Markdown, or HTML when FILE ends in .html;\n"
            "                    beside it (gnuplot): FILE.breakdown.png and .svg, FILE.memory.png and\n"
            "                    .svg, FILE.best-step.png, drawn from FILE.layouts.csv and\n"
            "                    FILE.best-step.trace.json; the HTML page embeds the pictures\n"
            "  --set PATH=VALUE  override a scenario value first (repeatable)\n"
            "  --threads N       worker threads for the search (default: $DTSIM_THREADS, else the CPUs)\n"
            "  --progress        the candidate layouts done on stderr every 2 s, with the time left\n"
            "                    (default: only when stderr is a terminal)\n"
            "  --quiet           no progress, even on a terminal, nor --deadline-days' line per\n"
            "                    cluster size searched\n"
            "  --deadline-days D the smallest bill that trains the scenario's tokens (training.tokens,\n"
            "                    train_iters or train_samples) within D days: cluster sizes from one node\n"
            "                    up (1, 2, 4, ... nodes, then halving the gap to the smallest that meets D,\n"
            "                    and two sizes above it), each size's layouts searched with the scenario's\n"
            "                    global batch, those within D ranked by GPU-hours (cost: the platform's\n"
            "                    price_per_gpu_hour); layouts in --json carry their gpus\n"
            "  --max-gpus N      with --deadline-days: the largest cluster (default: the platform's nodes;\n"
            "                    more grows its fabric to them)\n"
            "  --batch-tokens MIN:MAX  with --deadline-days: the global batch may be any of 2^a 3^b\n"
            "                    sequences whose tokens lie in MIN..MAX (and the scenario's own), not only\n"
            "                    the scenario's: each size is searched at each (at most 12, spread over\n"
            "                    the range); layouts carry their training.global_batch_size\n"
            BUDGET_HELP
            "exit: 0 ok, 2 bad input, 1 runtime failure (or no layout fits, or meets the deadline)\n");
}

static void print_table(FILE *f, const plan_result *p, int top)
{
    fprintf(f, "%4s %3s %3s %4s %3s %3s %3s %2s %4s %3s %-9s %9s %6s %7s %9s %8s %8s %9s\n", "rank", "TP", "PP", "DP",
            "CP", "EP", "VPP", "SP", "ZeRO", "mb", "recompute", "step s", "MFU", "bubble", "exposed s", "mem GiB", "days",
            "GPU-hours");
    for (int i = 0; i < p->count && i < top; i++) {
        const plan_layout *l = &p->layouts[i];
        const run_result *r = &l->result;
        double exposed = plan_exposed_comm_s(l);
        fprintf(f, "%4d %3d %3d %4d %3d %3d %3d %2s %4d %3lld %-9s %9.3f %5.1f%% %6.1f%% %9.3f %8.1f %8.2f %9.3g%s\n",
                i + 1, l->tp, l->pp, l->dp, l->cp, l->ep, l->vpp, l->sp ? "y" : "n", l->zero, l->micro_batch,
                recompute_name(l->recompute), r->step_time_s, 100 * r->mfu, 100 * r->bubble_mean, exposed,
                r->memory.total, l->to_train.days, l->to_train.gpu_hours, l->is_scenario_own ? "  (scenario's own)" : "");
    }
}

/* Why candidates were dropped: the rules they broke and the memory they lacked, by count. */
static void print_dropped(FILE *f, const plan_result *p)
{
    fprintf(f, "dropped: %ld invalid, %ld out of memory\n", p->invalid, p->out_of_memory);
    for (int i = 0; i < p->invalid_by.count; i++)
        fprintf(f, "  %7ld invalid: %s\n", p->invalid_by.reason[i].count, p->invalid_by.reason[i].rule);
    for (int i = 0; i < p->oom_by.count; i++)
        fprintf(f, "  %7ld %s\n", p->oom_by.reason[i].count, p->oom_by.reason[i].rule);
}

static void size_done(const plan_size *z)
{
    if (z->fitting)
        fprintf(stderr, "  %6d GPUs: %ld layouts fit, the fastest trains in %.1f days%s\n", z->gpus, z->fitting,
                z->fastest_days, z->feasible ? ": meets the deadline" : "");
    else
        fprintf(stderr, "  %6d GPUs: no layout fits (memory, or the global batch does not split)\n", z->gpus);
}

/* --deadline-days: the sizes searched, the cheapest layouts within the deadline. */
typedef struct {
    double lo, hi; /* --batch-tokens MIN:MAX */
} token_range;

static int take_range(const char *command, const char *flag, const char *value, void *dest)
{
    token_range *r = dest;
    char *end;
    r->lo = strtod(value, &end);
    if (*end == ':')
        r->hi = strtod(end + 1, &end);
    if (*end || !(r->lo > 0) || !(r->hi >= r->lo) || !isfinite(r->hi)) {
        fprintf(stderr, "dtsim %s: %s '%s': expected MIN:MAX tokens, 0 < MIN <= MAX (e.g. 4e6:16e6)\n", command, flag,
                value);
        return -1;
    }
    return 0;
}

static int plan_to_deadline(const scenario_config *s, const plan_deadline_input *in, const char *json_path)
{
    plan_deadline_result d;
    config_error err;
    double days = in->deadline_days;
    fprintf(stderr, "dtsim plan: %s: the cheapest cluster and layout that train %.3g tokens within %g days\n",
            s->name, s->training.tokens, days);
    if (plan_deadline(s, in, &d, &err) != 0) {
        fprintf(stderr, "dtsim plan: %s\n", err.msg);
        plan_deadline_free(&d);
        return 2;
    }
    FILE *h = json_path && !strcmp(json_path, "-") ? stderr : stdout;
    fprintf(h, "%8s %8s %12s %14s %12s\n", "GPUs", "fitting", "fastest days", "best GPU-hours", "its days");
    for (int i = 0; i < d.size_count; i++) {
        const plan_size *z = &d.sizes[i];
        char fastest[32] = "-", best[32] = "-", its[32] = "-";
        if (z->fitting)
            snprintf(fastest, sizeof fastest, "%.2f", z->fastest_days);
        if (z->feasible) {
            snprintf(best, sizeof best, "%.4g", z->best_gpu_hours);
            snprintf(its, sizeof its, "%.2f", z->best_days);
        }
        fprintf(h, "%8d %8ld %12s %14s %12s\n", z->gpus, z->fitting, fastest, best, its);
    }
    int rc = d.count > 0 ? 0 : 1;
    if (d.count == 0)
        fprintf(stderr, "dtsim plan: no cluster of up to %d nodes trains it within %g days\n", d.max_nodes, days);
    for (int i = 0; i < d.count && i < in->keep_per_size; i++) {
        const plan_layout *l = &d.layouts[i];
        char label[128];
        plan_layout_label(l, label, sizeof label);
        fprintf(h, "%3d. %6d GPUs  %-40s", i + 1, l->result.gpus, label);
        if (in->batch_tokens_max > 0)
            fprintf(h, " batch %6lld", l->global_batch);
        fprintf(h, " %7.2f days %11.4g GPU-hours", l->to_train.days, l->to_train.gpu_hours);
        if (l->to_train.has_cost)
            fprintf(h, "  cost %.4g", l->to_train.cost);
        fputc('\n', h);
    }
    if (json_path) {
        json_t *sizes = json_array(), *arr = json_array();
        for (int i = 0; i < d.size_count; i++)
            json_array_append_new(sizes, json_pack("{s:i,s:I,s:f,s:b,s:o}", "gpus", d.sizes[i].gpus, "fitting",
                                                   (json_int_t)d.sizes[i].fitting, "fastest_days",
                                                   d.sizes[i].fastest_days, "meets_deadline", d.sizes[i].feasible,
                                                   "best_gpu_hours", d.sizes[i].feasible
                                                       ? json_real(d.sizes[i].best_gpu_hours) : json_null()));
        for (int i = 0; i < d.count && i < in->keep_per_size; i++) {
            json_t *l = plan_layout_to_json(s, &d.layouts[i]);
            json_object_set_new(l, "gpus", json_integer(d.layouts[i].result.gpus));
            json_array_append_new(arr, l);
        }
        json_t *doc = json_pack("{s:s,s:f,s:i,s:o,s:o}", "scenario", s->name, "deadline_days", days, "max_nodes",
                                d.max_nodes, "sizes", sizes, "layouts", arr);
        if (cli_write_json(doc, json_path) != 0)
            rc = 1;
        json_decref(doc);
    }
    plan_deadline_free(&d);
    return rc;
}

int cli_plan(int argc, char **argv)
{
    const char *path = NULL, *json_path = NULL, *report = NULL;
    cli_list sets = {0};
    int gpus = 0, top = 10, confirm = 0, confirmed = 0, threads = 0, max_gpus = 0, show_progress = 0, quiet = 0,
        exhaustive = 0;
    double deadline = 0;
    token_range batch = {0, 0};
    budget_limits limits = {0, 0};
    const cli_option options[] = {
        BUDGET_OPTIONS(&limits),
        CLI_OPT_POSITIVE("deadline-days", &deadline),
        CLI_OPT_CALL("batch-tokens", take_range, &batch),
        CLI_OPT_INT("max-gpus", &max_gpus, 1, 1048576),
        CLI_OPT_INT("gpus", &gpus, 1, 1048576),
        CLI_OPT_INT("top", &top, 1, 100000),
        CLI_OPT_INT("confirm", &confirm, 0, 1000),
        CLI_OPT_INT("threads", &threads, 1, 64),
        CLI_OPT_FLAG("progress", &show_progress),
        CLI_OPT_FLAG("quiet", &quiet),
        CLI_OPT_FLAG("exhaustive", &exhaustive),
        CLI_OPT_STRING("json", &json_path),
        CLI_OPT_STRING("report", &report),
        CLI_OPT_APPEND("set", &sets),
        CLI_OPT_END,
    };
    const cli_output outs[] = {CLI_OUT_FILE_OR_STDOUT("--json", &json_path), CLI_OUT_FILE("--report", &report),
                               CLI_OUT_END};
    const cli_spec spec = {"plan", usage, options, &path, "scenario file", outs};
    scenario_config s;
    int rc = cli_parse_and_load(&spec, argc, argv, &sets, &s);
    if (rc != CLI_GO_ON)
        goto out;
    rc = 2;
    /* $DTSIM_THREADS is the --threads default, read by the same rule: a value that is not a
     * thread count is refused here rather than taken as one thread. */
    const char *env_threads = getenv("DTSIM_THREADS");
    if (!threads && env_threads && *env_threads &&
        cli_parse_int("plan", "$DTSIM_THREADS", env_threads, 1, 64, &threads) != 0) {
        scenario_free(&s);
        goto out;
    }
    if ((max_gpus || batch.hi > 0 || deadline > 0) && (gpus || confirm || report || exhaustive || deadline <= 0)) {
        fprintf(stderr, "dtsim plan: --deadline-days D (with a D above 0) searches cluster sizes itself: "
                        "--max-gpus and --batch-tokens need it, and --gpus, --confirm, --report and --exhaustive "
                        "do not go with it (each size's best --top are known exactly)\n");
        scenario_free(&s);
        goto out;
    }
    /* The work, estimated before any: the plan's search, or every size a deadline search may
     * search (an upper bound: it stops at the first size that meets the deadline). */
    plan_deadline_input in = {.deadline_days = deadline, .max_gpus = max_gpus, .threads = threads,
                              .keep_per_size = top, .limits = &limits, .batch_tokens_min = batch.lo,
                              .batch_tokens_max = batch.hi, .progress = quiet ? NULL : size_done};
    work_estimate est;
    if ((deadline > 0 ? plan_deadline_estimate(&s, &in, &est) : plan_estimate(&s, gpus, threads, &est)) != 0) {
        fprintf(stderr, "dtsim plan: out of host memory estimating the search\n");
        scenario_free(&s);
        goto out;
    }
    if (budget_check("plan", &est, &limits) != 0) {
        scenario_free(&s);
        goto out;
    }
    if (deadline > 0) {
        /* the sizes are its progress: a line each once searched, unless --quiet */
        rc = plan_to_deadline(&s, &in, json_path);
        scenario_free(&s);
        goto out;
    }
    config_error err;
    plan_result p;
    progress_meter meter;
    progress_start(&meter, "dtsim plan", "layout", progress_mode_of(show_progress, quiet));
    /* the report compares the best with its neighbours one choice away: it needs them all */
    int keep = exhaustive || report ? 0 : top > confirm ? top : confirm;
    int searched = plan_search_threads(&s, gpus, threads, keep, &limits, &p, &err, &meter);
    progress_end(&meter);
    if (searched != 0) {
        fprintf(stderr, "dtsim plan: %s\n", err.msg);
        scenario_free(&s);
        goto out;
    }
    int plan_gpus = gpus ? gpus : scenario_gpus(&s);
    FILE *human = json_path && !strcmp(json_path, "-") ? stderr : stdout;
    fprintf(human, "dtsim plan: %s on %d x %s: %ld layouts, %ld invalid, %ld out of memory, %d simulated",
            s.name, plan_gpus, s.platform.gpu.name, p.enumerated, p.invalid, p.out_of_memory, p.count);
    if (p.bounded)
        fprintf(human, ", %ld bounded (slower than the best %d)", p.bounded, keep);
    fprintf(human, " in %.2f s (%.0f layouts/s, %d thread%s)\n", p.wall_s, p.enumerated / (p.wall_s > 0 ? p.wall_s : 1e-9),
            p.threads, p.threads == 1 ? "" : "s");
    if (confirm > 0 && p.count > 0) {
        /* Flow fidelity for the best K: contention may reorder them. Priced once they are known
         * (a layout's flows depend on it: GPT-3 175B's best, DP 64, are 15 times its own), with
         * the search's estimate as spent. */
        int k = confirm < p.count ? confirm : p.count;
        work_estimate flows = {.seconds = est.seconds, .bytes = 0};
        for (int i = 0; i < k; i++) {
            scenario_config c;
            plan_apply(&s, &p.layouts[i], &c);
            c.run.fidelity_flow = 1;
            work_estimate one;
            budget_estimate_run(&c, &one);
            flows.seconds += one.seconds;
            flows.bytes = flows.bytes > one.bytes ? flows.bytes : one.bytes;
        }
        snprintf(flows.work, sizeof flows.work, "the best %d replayed at flow fidelity after the search", k);
        if (budget_check_before("plan", "its --confirm replays", &flows, &limits) != 0) {
            plan_result_free(&p);
            scenario_free(&s);
            rc = 2;
            goto out;
        }
        fprintf(human, "confirming the best %d at flow fidelity (SimGrid):\n", k);
        for (int i = 0; i < k; i++) {
            scenario_config c;
            plan_apply(&s, &p.layouts[i], &c);
            c.run.fidelity_flow = 1;
            run_result fr;
            if (run_scenario(&c, &fr, &err) != 0) {
                fprintf(stderr, "dtsim plan: --confirm: %s\n", err.msg);
                break;
            }
            fprintf(human, "  #%d: analytic %.3f s, flow %.3f s (%+.1f%%)\n", i + 1, p.layouts[i].result.step_time_s,
                    fr.step_time_s, 100 * (fr.step_time_s / p.layouts[i].result.step_time_s - 1));
            p.layouts[i].result = fr;
            run_time_to_train(&s, fr.step_time_s, fr.gpus, &p.layouts[i].to_train);
        }
        qsort(p.layouts, (size_t)k, sizeof *p.layouts, plan_compare);
        confirmed = k;
        fprintf(human, "the best %d re-ranked by flow fidelity:\n", k);
    }
    print_table(human, &p, top);
    print_dropped(human, &p);
    rc = p.count > 0 ? 0 : 1;
    if (p.count == 0) {
        /* a failed plan writes nothing: a ranking from an earlier search at --json / --report
         * stays as it was rather than being replaced by an empty one */
        fprintf(stderr, "dtsim plan: no layout is valid and fits in %.0f GiB per GPU (reasons above)%s\n",
                s.platform.gpu.memory_gib, json_path || report ? "; nothing written" : "");
        json_path = report = NULL;
    }
    if (json_path) {
        json_t *arr = json_array();
        for (int i = 0; i < p.count && i < top; i++)
            json_array_append_new(arr, plan_layout_to_json(&s, &p.layouts[i]));
        json_t *doc = json_pack("{s:o,s:s,s:i,s:I,s:I,s:o,s:I,s:o,s:I,s:i,s:I,s:i,s:f}", "layouts", arr, "scenario",
                                s.name, "gpus", plan_gpus, "enumerated", (json_int_t)p.enumerated, "invalid",
                                (json_int_t)p.invalid, "invalid_by_reason", plan_tally_to_json(&p.invalid_by),
                                "out_of_memory", (json_int_t)p.out_of_memory, "out_of_memory_by_reason",
                                plan_tally_to_json(&p.oom_by), "fitting", (json_int_t)(p.count + p.bounded),
                                "simulated", p.count, "bounded", (json_int_t)p.bounded, "confirmed_flow", confirmed,
                                "wall_s", p.wall_s);
        if (cli_write_json(doc, json_path) != 0)
            rc = 1;
        json_decref(doc);
    }
    if (report) {
        report_input ri = {.scenario = &s, .plan = &p, .top = top, .gpus = plan_gpus, .confirmed = confirmed};
        if (markdown_write(report, &ri, &err) != 0) {
            fprintf(stderr, "dtsim plan: %s\n", err.msg);
            rc = 1;
        } else {
            fprintf(human, "dtsim plan: report in %s\n", report);
        }
    }
    plan_result_free(&p);
    scenario_free(&s);
out:
    cli_list_free(&sets);
    return rc;
}
