/* The capacity-planning report; see markdown.h. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "faults.h"
#include "params.h"
#include "markdown.h"
#include "sweep_plot.h"
#include "atomic_file.h"

static const char *topology_name(topology_kind t)
{
    return t == TOPO_RAIL_OPTIMIZED_FAT_TREE ? "rail-optimized fat tree" : t == TOPO_FAT_TREE ? "fat tree"
                                                                                              : "single switch";
}

static const char *basename_of(const char *p)
{
    const char *b = strrchr(p, '/');
    return b ? b + 1 : p;
}

static void question_and_cluster(FILE *f, const report_input *in)
{
    const scenario_config *s = in->scenario;
    const plan_result *p = in->plan;
    fprintf(f, "# Capacity plan: %s\n\n", s->name);
    fprintf(f, "**Question.** How should a %lld-layer, hidden-%lld model (%.1fB parameters) be laid out on %d %s GPUs "
               "to train fastest, with a global batch of %lld sequences of %lld tokens in %s",
            s->model.num_layers, s->model.hidden_size, params_total(s) / 1e9, in->gpus, s->platform.gpu.name,
            s->training.global_batch_size, s->model.seq_length, precision_name(s->training.precision));
    if (s->training.tokens > 0) {
        char tok[32];
        run_words(s->training.tokens, tok, sizeof tok);
        fprintf(f, ", and how long do %s tokens take", tok);
    }
    fprintf(f, "?\n\n");
    /* the nodes the plan's GPUs fill, beside the platform's whole */
    int gpn = s->platform.node.gpus > 0 ? s->platform.node.gpus : 1, used = (in->gpus + gpn - 1) / gpn;
    fprintf(f, "**Cluster.** %s: %d GPUs on %d node%s of %d x %s (%.0f GiB, %.0f GB/s HBM; the platform has %d nodes), "
               "NVLink %.0f GB/s per direction, %d x %.0f Gb/s NICs per node, %s.\n\n",
            s->platform.name, in->gpus, used, used == 1 ? "" : "s", gpn, s->platform.gpu.name,
            s->platform.gpu.memory_gib, s->platform.gpu.hbm_bandwidth_gbs, s->platform.network.nodes,
            s->platform.node.nvlink_bandwidth_gbs, s->platform.node.nics, s->platform.node.nic_bandwidth_gbps,
            topology_name(s->platform.network.topology));
    fprintf(f, "**Search.** %ld layouts enumerated: %ld break a layout rule, %ld do not fit in %.0f GiB per GPU, "
               "%d simulated (analytic fidelity) in %.2f s (%.0f layouts/s on %d threads).\n\n",
            p->enumerated, p->invalid, p->out_of_memory, s->platform.gpu.memory_gib, p->count, p->wall_s,
            p->enumerated / (p->wall_s > 0 ? p->wall_s : 1e-9), p->threads);
}

static void layouts_table(FILE *f, const report_input *in)
{
    const plan_result *p = in->plan;
    fprintf(f, "## Best layouts\n\n");
    if (in->confirmed > 0)
        fprintf(f, "The best %d were re-simulated at flow fidelity (SimGrid, links shared) and re-ranked by it.\n\n",
                in->confirmed);
    else
        fprintf(f, "Analytic fidelity (no link contention); `dtsim plan --confirm K` re-simulates the best K at flow "
                   "fidelity.\n\n");
    fprintf(f, "| rank | layout | step (s) | MFU | bubble | exposed comm (s) | memory (GiB) | days to train | "
               "GPU-hours |\n");
    fprintf(f, "|---:|:---|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int i = 0; i < p->count && i < in->top; i++) {
        const plan_layout *l = &p->layouts[i];
        char label[128];
        plan_layout_label(l, label, sizeof label);
        char days[32] = "n/a", hours[32] = "n/a";
        if (l->to_train.known) {
            snprintf(days, sizeof days, "%.2f", l->to_train.days);
            snprintf(hours, sizeof hours, "%.3g", l->to_train.gpu_hours);
        }
        fprintf(f, "| %d | %s%s | %.3f | %.1f%% | %.1f%% | %.3f | %.1f | %s | %s |\n", i + 1, label,
                l->is_scenario_own ? " (scenario's own)" : "", l->result.step_time_s, 100 * l->result.mfu,
                100 * l->result.bubble_mean, plan_exposed_comm_s(l), l->result.memory.total, days, hours);
    }
    /* The scenario's own layout, when it is not among the rows shown. */
    for (int i = in->top; i < p->count; i++)
        if (p->layouts[i].is_scenario_own) {
            fprintf(f, "\nThe scenario's own layout ranks %d of %d: %.3f s per step.\n", i + 1, p->count,
                    p->layouts[i].result.step_time_s);
            break;
        }
    fprintf(f, "\nLayout: TP, PP, DP, CP, EP sizes (CP and EP shown when above 1); V: interleaved chunks per "
               "stage; SP: sequence parallel; Z: ZeRO stage; mb: micro-batch size; none/sel/full: activation "
               "recomputation.\n\n");
}

/* One choice of a layout (TP, ZeRO, ...), read from and compared on plan_layout. */
typedef struct {
    const char *name;
    long long (*get)(const plan_layout *);
} knob;

static long long k_tp(const plan_layout *l) { return l->tp; }
static long long k_pp(const plan_layout *l) { return l->pp; }
static long long k_cp(const plan_layout *l) { return l->cp; }
static long long k_ep(const plan_layout *l) { return l->ep; }
static long long k_vpp(const plan_layout *l) { return l->vpp; }
static long long k_sp(const plan_layout *l) { return l->sp; }
static long long k_zero(const plan_layout *l) { return l->zero; }
static long long k_mb(const plan_layout *l) { return l->micro_batch; }
static long long k_rec(const plan_layout *l) { return l->recompute; }

static const knob knobs[] = {{"tensor parallel (TP)", k_tp},  {"pipeline parallel (PP)", k_pp},
                             {"context parallel (CP)", k_cp}, {"expert parallel (EP)", k_ep},
                             {"interleaved chunks (V)", k_vpp},
                             {"sequence parallel", k_sp},     {"ZeRO stage", k_zero},
                             {"micro-batch size", k_mb},      {"recomputation", k_rec}};
#define KNOB_COUNT (sizeof knobs / sizeof knobs[0])

/* a and b make the same choices but knob `but` (DP aside: it follows the GPU count). */
static int same_but(const plan_layout *a, const plan_layout *b, int but)
{
    for (int k = 0; k < (int)KNOB_COUNT; k++)
        if (k != but && knobs[k].get(a) != knobs[k].get(b))
            return 0;
    return 1;
}

static void knob_value(const knob *k, const plan_layout *l, char *buf, size_t n)
{
    long long v = k->get(l);
    if (k->get == k_rec)
        snprintf(buf, n, "%s", recompute_name((recompute_kind)v));
    else if (k->get == k_sp)
        snprintf(buf, n, "%s", v ? "on" : "off");
    else
        snprintf(buf, n, "%lld", v);
}

/* What moved between the best layout and an alternative, in the terms that explain time. */
static void what_changes(const plan_layout *b, const plan_layout *a, char *buf, size_t n)
{
    const run_result *x = &b->result, *y = &a->result;
    int len = snprintf(buf, n,
                       "bubble %.1f%% -> %.1f%%; exposed TP %.2f -> %.2f s, PP %.2f -> %.2f s, DP+ZeRO %.2f -> %.2f s",
                       100 * x->bubble_mean, 100 * y->bubble_mean, x->comm_exposed_s[COMM_TP],
                       y->comm_exposed_s[COMM_TP], x->comm_exposed_s[COMM_PP], y->comm_exposed_s[COMM_PP],
                       x->comm_exposed_s[COMM_DP] + x->comm_exposed_s[COMM_ZERO],
                       y->comm_exposed_s[COMM_DP] + y->comm_exposed_s[COMM_ZERO]);
    /* context and expert parallel traffic, where either layout has some */
    static const comm_class more[] = {COMM_CP, COMM_EP};
    for (int i = 0; i < 2 && len >= 0 && (size_t)len < n; i++)
        if (x->comm_total_s[more[i]] > 0 || y->comm_total_s[more[i]] > 0)
            len += snprintf(buf + len, n - (size_t)len, ", %s %.2f -> %.2f s", i ? "EP" : "CP",
                            x->comm_exposed_s[more[i]], y->comm_exposed_s[more[i]]);
    if (len >= 0 && (size_t)len < n)
        snprintf(buf + len, n - (size_t)len, "; memory %.0f -> %.0f GiB", x->memory.total, y->memory.total);
}

static void why_best(FILE *f, const report_input *in)
{
    const scenario_config *s = in->scenario;
    const plan_result *p = in->plan;
    const plan_layout *b = &p->layouts[0], *own = NULL;
    const run_result *r = &b->result;
    for (int i = 0; i < p->count; i++)
        if (p->layouts[i].is_scenario_own)
            own = &p->layouts[i];
    char label[128];
    plan_layout_label(b, label, sizeof label);
    fprintf(f, "## Why the best one wins\n\nBest: **%s**.\n\n", label);
    fprintf(f, "- **Time:** %.3f s per step, %.0f tokens/s, MFU %.1f%% (HFU %.1f%%).\n", r->step_time_s,
            r->tokens_per_s, 100 * r->mfu, 100 * r->hfu);
    fprintf(f, "- **Pipeline bubble:** %.1f%% of the step on average, %.1f%% on the worst stage (%lld micro-batches "
               "per pipeline on %d stages).\n",
            100 * r->bubble_mean, 100 * r->bubble_max, s->training.global_batch_size / (b->micro_batch * b->dp),
            b->pp);
    fprintf(f, "- **Communication:** exposed (total) TP %.3f (%.3f) s, PP %.3f (%.3f) s, DP %.3f (%.3f) s, ZeRO %.3f "
               "(%.3f) s, CP %.3f (%.3f) s, EP %.3f (%.3f) s per step; the rest is hidden under compute.\n",
            r->comm_exposed_s[COMM_TP], r->comm_total_s[COMM_TP], r->comm_exposed_s[COMM_PP], r->comm_total_s[COMM_PP],
            r->comm_exposed_s[COMM_DP], r->comm_total_s[COMM_DP], r->comm_exposed_s[COMM_ZERO],
            r->comm_total_s[COMM_ZERO], r->comm_exposed_s[COMM_CP], r->comm_total_s[COMM_CP],
            r->comm_exposed_s[COMM_EP], r->comm_total_s[COMM_EP]);
    fprintf(f, "- **Memory:** %.1f of %.0f GiB per GPU (weights %.1f, gradients %.1f, optimizer %.1f, activations "
               "%.1f, buffers %.1f).\n",
            r->memory.total, r->memory.capacity, r->memory.weights, r->memory.gradients, r->memory.optimizer,
            r->memory.activations, r->memory.buffers);
    if (own && own != b)
        fprintf(f, "- **Against the scenario's own layout** (TP %d, PP %d, DP %d, CP %d, EP %d): %.3f s per step, "
                   "%.1f%% slower than the best.\n",
                own->tp, own->pp, own->dp, own->cp, own->ep, own->result.step_time_s,
                100 * (own->result.step_time_s / r->step_time_s - 1));
    else if (own)
        fprintf(f, "- **The scenario's own layout is the best one found.**\n");
    else
        fprintf(f, "- The scenario's own layout is not a candidate here (another GPU count, or it does not fit).\n");
    if (b->to_train.known) {
        char tok[32], hours[32], cost[32];
        run_words(s->training.tokens, tok, sizeof tok);
        run_words(b->to_train.gpu_hours, hours, sizeof hours);
        run_words(b->to_train.cost, cost, sizeof cost);
        fprintf(f, "- **Time to train** %s tokens: %.1f days of pure training (failures not included), %s "
                   "GPU-hours", tok, b->to_train.days, hours);
        if (b->to_train.has_cost)
            fprintf(f, ", cost %s at %.3g per GPU-hour", cost, s->platform.price_per_gpu_hour);
        fprintf(f, ".\n");
    }

    /* Each choice of the best layout against the fastest fitting layout that differs in that
     * choice alone (and in DP, which takes up the GPUs a changed TP, PP, CP or EP leaves). */
    fprintf(f, "\n### The effect of each choice\n\nFor each choice of the best layout, the fastest fitting layout "
               "that differs in that choice alone (DP taking up the GPUs a change of TP, PP, CP or EP frees or "
               "needs):\n\n");
    fprintf(f, "| choice | best | alternative | its step (s) | slower by | what changes |\n");
    fprintf(f, "|:---|---:|---:|---:|---:|:---|\n");
    for (size_t k = 0; k < KNOB_COUNT; k++) {
        if (knobs[k].get == k_ep && s->model.num_experts == 0)
            continue; /* a dense model has no experts to spread */
        const plan_layout *alt = NULL;
        for (int i = 1; i < p->count && !alt; i++)
            if (knobs[k].get(&p->layouts[i]) != knobs[k].get(b) && same_but(&p->layouts[i], b, (int)k))
                alt = &p->layouts[i];
        char bv[32], av[32], change[400];
        knob_value(&knobs[k], b, bv, sizeof bv);
        if (!alt) {
            fprintf(f, "| %s | %s | none | | | no other value alone is valid and fits |\n", knobs[k].name, bv);
            continue;
        }
        knob_value(&knobs[k], alt, av, sizeof av);
        what_changes(b, alt, change, sizeof change);
        fprintf(f, "| %s | %s | %s | %.3f | %.1f%% | %s |\n", knobs[k].name, bv, av, alt->result.step_time_s,
                100 * (alt->result.step_time_s / r->step_time_s - 1), change);
    }
    fprintf(f, "\n");
}

static void dropped(FILE *f, const plan_result *p)
{
    fprintf(f, "## Why candidates were dropped\n\n");
    fprintf(f, "%ld broke a layout rule (the loader's rules, numbers folded into N):\n\n", p->invalid);
    for (int i = 0; i < p->invalid_by.count; i++)
        fprintf(f, "- %ld: %s\n", p->invalid_by.reason[i].count, p->invalid_by.reason[i].rule);
    fprintf(f, "\n%ld did not fit in GPU memory:\n\n", p->out_of_memory);
    for (int i = 0; i < p->oom_by.count; i++)
        fprintf(f, "- %ld: %s\n", p->oom_by.reason[i].count, p->oom_by.reason[i].rule);
    fprintf(f, "\n");
}

/* PATH.layouts.csv: the top layouts in the sweep's column names, so the sweep's scripts draw
 * them (one bar per layout). */
static int write_layouts_csv(const char *csv, const report_input *in)
{
    FILE *c = fopen(csv, "w");
    if (!c)
        return -1;
    fprintf(c, "layout,step_time_s,bubble_fraction.mean,comm_s.tp.exposed,comm_s.pp.exposed,comm_s.dp.exposed,"
               "comm_s.zero.exposed,memory_gib.weights,memory_gib.gradients,memory_gib.optimizer,"
               "memory_gib.activations,memory_gib.buffers,memory_gib.total,memory_gib.capacity\n");
    for (int i = 0; i < in->plan->count && i < in->top; i++) {
        const plan_layout *l = &in->plan->layouts[i];
        const run_result *r = &l->result;
        char label[128];
        plan_layout_label(l, label, sizeof label);
        fprintf(c, "\"#%d %s\",%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g\n", i + 1, label,
                r->step_time_s, r->bubble_mean, r->comm_exposed_s[COMM_TP], r->comm_exposed_s[COMM_PP],
                r->comm_exposed_s[COMM_DP], r->comm_exposed_s[COMM_ZERO], r->memory.weights, r->memory.gradients,
                r->memory.optimizer, r->memory.activations, r->memory.buffers, r->memory.total, r->memory.capacity);
    }
    return fclose(c);
}

static void pictures(FILE *f, const char *path, const report_input *in, const scenario_config *best)
{
    run_result traced;
    fprintf(f, "## Pictures\n\n");
    if (!sweep_gnuplot_available() || strchr(path, '\'')) {
        fprintf(f, "Not drawn: %s.\n\n", strchr(path, '\'') ? "the report's path contains a quote"
                                                            : "gnuplot cannot be started (install gnuplot-nox)");
        return;
    }
    char csv[4300], prefix[4300], vars[9000], title[CFG_NAME_MAX];
    snprintf(title, sizeof title, "%s", in->scenario->name);
    for (char *t = title; *t; t++)
        if (*t == '\'')
            *t = '_';
    snprintf(csv, sizeof csv, "%s.layouts.csv", path);
    config_error err;
    if (write_layouts_csv(csv, in) != 0) {
        fprintf(f, "Not drawn: cannot write %s.\n\n", csv);
        return;
    }
    snprintf(vars, sizeof vars, "datafile='%s'; xcol='layout'; labelcols='layout'; plottitle='%s (best %d layouts)'; "
                                "rotate=1", csv, title, in->top < in->plan->count ? in->top : in->plan->count);
    static const char *const what[][3] = {
        {"sweep_breakdown.gp", "breakdown", "Where each layout's step goes: compute, exposed communication, bubble"},
        {"sweep_memory.gp", "memory", "Memory per GPU of each layout by state, against the GPU's capacity"}};
    for (int i = 0; i < 2; i++) {
        snprintf(prefix, sizeof prefix, "%s.%s", path, what[i][1]);
        if (sweep_gnuplot(what[i][0], vars, prefix, &err) == 0)
            fprintf(f, "%s (also `%s.svg`):\n\n![%s](%s.png)\n\n", what[i][2], basename_of(prefix), what[i][2],
                    basename_of(prefix));
        else
            fprintf(f, "Not drawn: %s.\n\n", err.msg);
    }
    /* The best layout's step, from its trace, drawn by plots/timeline.sh. */
    char trace[4300], png[4300], dir[4096];
    snprintf(trace, sizeof trace, "%s.best-step.trace.json", path);
    snprintf(png, sizeof png, "%s.best-step.png", path);
    sweep_plots_dir(dir, sizeof dir);
    size_t len = strlen(dir) + strlen(trace) + strlen(png) + 64;
    char *cmd = malloc(len);
    if (cmd && run_scenario_traced(best, &traced, trace, &err) == 0) {
        snprintf(cmd, len, "'%s/timeline.sh' '%s' '%s' 16 >/dev/null", dir, trace, png);
        if (system(cmd) == 0)
            fprintf(f, "One step of the best layout, by pipeline stage (blue: compute; green: pipeline sends; yellow "
                       "/ red: DP / ZeRO communication; grey: waiting). The full trace opens in ui.perfetto.dev: "
                       "`%s`.\n\n![one step of the best layout, by pipeline stage](%s)\n\n",
                    basename_of(trace), basename_of(png));
        else
            fprintf(f, "Not drawn: plots/timeline.sh failed on `%s`.\n\n", basename_of(trace));
    } else {
        fprintf(f, "Not drawn: the best layout's trace (%s).\n\n", cmd ? err.msg : "out of memory");
    }
    free(cmd);
}

static void failures(FILE *f, const scenario_config *best, const run_result *r)
{
    if (best->faults.gpu_mtbf_hours <= 0 && best->faults.node_mtbf_hours <= 0)
        return;
    faults_report fr;
    memset(&fr, 0, sizeof fr);
    fr.step_time_s = r->step_time_s;
    fr.tokens_per_s = r->tokens_per_s;
    config_error err;
    fprintf(f, "## What failures cost (`dtsim faults`, 50 runs, best layout)\n\n");
    if (faults_run(best, 50, &fr, &err) != 0) {
        fprintf(f, "Not computed: %s.\n\n", err.msg);
        return;
    }
    fprintf(f, "- System MTBF %.1f h; %.0f interruptions (p5 %.0f, p95 %.0f) over %s.\n", fr.system_mtbf_hours,
            fr.interruptions.mean, fr.interruptions.p5, fr.interruptions.p95,
            fr.target_train_s > 0 ? "the training" : "the horizon");
    fprintf(f, "- Goodput %.1f%% with a checkpoint every %.0f s; the goodput-optimal interval is %.0f s (Young/Daly: "
               "%.0f s).\n",
            100 * fr.goodput.mean, best->faults.checkpoint_interval_s, fr.optimal_checkpoint_interval_s,
            fr.young_daly_interval_s);
    if (fr.target_train_s > 0)
        fprintf(f, "- Days to train with failures: %.1f (p95 %.1f), against %.1f without.\n", fr.days_to_train.mean,
                fr.days_to_train.p95, fr.target_train_s / 86400);
    fprintf(f, "\n");
}

static void assumptions(FILE *f, const scenario_config *s)
{
    const calibration_config *c = &s->calibration;
    fprintf(f, "## Assumptions\n\n");
    fprintf(f, "- Calibration: %s, source %s%s%s%s%s.\n", c->device[0] ? c->device : "(unnamed)",
            c->source[0] ? c->source : "unstated", c->date[0] ? ", dated " : "", c->date, c->host[0] ? ", host " : "",
            c->host);
    fprintf(f, "- Analytic fidelity: the schedule's critical path with alpha-beta collectives on the topology's "
               "bandwidths, no link contention (docs/model.md); its accuracy against published runs is in "
               "docs/validation.md.\n");
    fprintf(f, "- Search space: TP a power of two up to a node (%d GPUs) dividing the heads; PP dividing the layers; "
               "CP 1, 2, 4, 8 for sequences of 8192 or more; interleaving with 2 or 4 chunks; micro-batch 1, 2, 4, 8; "
               "ZeRO 0-3; recomputation none, selective, full; SP on or off when TP > 1. Expert parallelism, the "
               "bucket size and gradient-reduce overlap stay as the scenario sets them; an uneven pipeline split is "
               "kept only at the scenario's own pipeline depth (docs/planning.md).\n",
            s->platform.node.gpus);
    fprintf(f, "- Days to train: training.tokens / simulated tokens per second; no failures, restarts or "
               "checkpoints (see `dtsim faults`).\n");
    fprintf(f, "\n### Sources\n\n");
    markdown_sources(f, s);
    fprintf(f, "\n");
}

int markdown_write(const char *path, const report_input *in, config_error *err)
{
    /* HTML: the Markdown goes to a temporary first, the page is written from it */
    size_t len = strlen(path);
    int html = len > 5 && !strcmp(path + len - 5, ".html");
    char md[4300], why[4400];
    snprintf(md, sizeof md, "%s.md.tmp.%ld", path, (long)getpid());
    atomic_file a;
    FILE *f = NULL;
    if (html ? (f = fopen(md, "w")) == NULL : atomic_file_open(&a, path, why, sizeof why) != 0) {
        snprintf(err->msg, sizeof err->msg, "--report %s: cannot write", path);
        return -1;
    }
    if (!html)
        f = a.f;
    question_and_cluster(f, in);
    if (in->plan->count > 0) {
        layouts_table(f, in);
        why_best(f, in);
        scenario_config best;
        run_result best_r;
        plan_apply(in->scenario, &in->plan->layouts[0], &best);
        best_r = in->plan->layouts[0].result;
        pictures(f, path, in, &best);
        failures(f, &best, &best_r);
    } else {
        fprintf(f, "## No layout fits\n\nNone of the %ld candidates is valid and fits in %.0f GiB per GPU: more GPUs, "
                   "a smaller batch or a smaller model.\n\n",
                in->plan->enumerated, in->scenario->platform.gpu.memory_gib);
    }
    dropped(f, in->plan);
    assumptions(f, in->scenario);
    int ok;
    if (html) {
        ok = fclose(f) == 0 && markdown_to_html(md, path) == 0;
        unlink(md);
    } else {
        ok = atomic_file_commit(&a, 0, why, sizeof why) == 0;
    }
    if (!ok) {
        snprintf(err->msg, sizeof err->msg, "--report %s: cannot write", path);
        return -1;
    }
    return 0;
}
