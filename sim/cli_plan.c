/* dtsim plan SCENARIO.json [--gpus N] [--top K] [--json FILE|-] [--report FILE.md] [--set P=V]... */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli.h"
#include "faults.h"
#include "params.h"
#include "plan.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: dtsim plan SCENARIO.json [options]\n"
            "Searches every valid parallel layout for the scenario's model, batch and platform\n"
            "(TP inside a node, PP dividing the layers, DP, CP for long sequences, interleaving,\n"
            "micro-batch 1-8, ZeRO 0-3, recomputation, sequence parallelism), drops those that do\n"
            "not fit in GPU memory, simulates the rest (analytic fidelity) and ranks them by step time.\n\n"
            "  --gpus N          GPUs to plan for (default: the scenario's TP x PP x CP x DP)\n"
            "  --top K           layouts to print and write (default 10)\n"
            "  --confirm K       re-simulate the best K at flow fidelity (SimGrid, contention) and\n"
            "                    re-rank them by it (default 0)\n"
            "  --json FILE|-     the ranked layouts as JSON (DESIGN.md's plan format)\n"
            "  --report FILE     a capacity-planning report: Markdown, or HTML when FILE ends in .html\n"
            "  --set PATH=VALUE  override a scenario value first (repeatable)\n"
            "exit: 0 ok, 2 bad input, 1 runtime failure (or no layout fits)\n");
}

static void progress(long done, long total)
{
    if (isatty(2)) {
        int width = 40, fill = (int)(width * done / (total ? total : 1));
        fprintf(stderr, "\r  [%.*s%*s] %ld/%ld layouts", fill, "########################################", width - fill,
                "", done, total);
        if (done == total)
            fputc('\n', stderr);
    }
}

static json_t *layout_json(const plan_layout *l)
{
    const run_result *r = &l->result;
    json_t *mem = json_pack("{s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:b}", "weights", r->memory.weights, "gradients",
                            r->memory.gradients, "optimizer", r->memory.optimizer, "activations", r->memory.activations,
                            "buffers", r->memory.buffers, "total", r->memory.total, "capacity", r->memory.capacity,
                            "oom", r->memory.oom);
    double exposed = 0;
    for (int c = 0; c < COMM_CLASS_COUNT; c++)
        exposed += r->comm_exposed_s[c];
    return json_pack("{s:{s:i,s:i,s:i,s:i,s:i,s:b,s:i,s:s},s:{s:I,s:s},s:f,s:f,s:f,s:f,s:f,s:o,s:f,s:b}",
                     "parallel", "tensor_model_parallel_size", l->tp, "pipeline_model_parallel_size", l->pp,
                     "data_parallel_size", l->dp, "context_parallel_size", l->cp,
                     "virtual_pipeline_model_parallel_size", l->vpp, "sequence_parallel", l->sp, "zero_stage", l->zero,
                     "schedule", pipeline_kind_name(l->schedule), "training", "micro_batch_size",
                     (json_int_t)l->micro_batch, "recompute_granularity", recompute_name(l->recompute), "step_time_s",
                     r->step_time_s, "mfu", r->mfu, "bubble_fraction", r->bubble_mean, "exposed_comm_s", exposed,
                     "tokens_per_s", r->tokens_per_s, "memory_gib", mem, "days_to_train", l->days_to_train,
                     "scenario_own_layout", l->is_scenario_own);
}

static void print_table(FILE *f, const plan_result *p, int top)
{
    fprintf(f, "%4s %3s %3s %4s %3s %3s %2s %4s %3s %-9s %9s %6s %7s %9s %8s %8s\n", "rank", "TP", "PP", "DP", "CP",
            "VPP", "SP", "ZeRO", "mb", "recompute", "step s", "MFU", "bubble", "exposed s", "mem GiB", "days");
    for (int i = 0; i < p->count && i < top; i++) {
        const plan_layout *l = &p->layouts[i];
        const run_result *r = &l->result;
        double exposed = 0;
        for (int c = 0; c < COMM_CLASS_COUNT; c++)
            exposed += r->comm_exposed_s[c];
        fprintf(f, "%4d %3d %3d %4d %3d %3d %2s %4d %3lld %-9s %9.3f %5.1f%% %6.1f%% %9.3f %8.1f %8.2f%s\n", i + 1, l->tp,
                l->pp, l->dp, l->cp, l->vpp, l->sp ? "y" : "n", l->zero, l->micro_batch, recompute_name(l->recompute),
                r->step_time_s, 100 * r->mfu, 100 * r->bubble_mean, exposed, r->memory.total, l->days_to_train,
                l->is_scenario_own ? "  (scenario's own)" : "");
    }
}

/* The report as a self-contained HTML page: headings, paragraphs, list items, preformatted
 * blocks and images, the only Markdown the report writes. Rewrites the file in place. */
static void html_escaped(FILE *o, const char *t)
{
    for (; *t; t++)
        fputs(*t == '<' ? "&lt;" : *t == '>' ? "&gt;" : *t == '&' ? "&amp;" : (char[]){*t, 0}, o);
}

static int markdown_to_html(const char *path)
{
    FILE *in = fopen(path, "r");
    if (!in)
        return -1;
    char out_path[4300];
    snprintf(out_path, sizeof out_path, "%s.html", path);
    FILE *o = fopen(out_path, "w");
    if (!o) {
        fclose(in);
        return -1;
    }
    fputs("<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>dtsim capacity plan</title>\n<style>body{font-family:"
          "sans-serif;max-width:60em;margin:2em auto}pre{background:#f4f4f4;padding:1em;overflow-x:auto}</style>"
          "</head><body>\n", o);
    char line[8192];
    int pre = 0, list = 0;
    while (fgets(line, sizeof line, in)) {
        line[strcspn(line, "\n")] = 0;
        if (!strncmp(line, "```", 3)) {
            fputs(pre ? "</pre>\n" : "<pre>", o);
            pre = !pre;
            continue;
        }
        if (pre) {
            html_escaped(o, line);
            fputc('\n', o);
            continue;
        }
        if (list && strncmp(line, "- ", 2)) {
            fputs("</ul>\n", o);
            list = 0;
        }
        if (!strncmp(line, "# ", 2) || !strncmp(line, "## ", 3)) {
            int lvl = line[1] == '#' ? 2 : 1;
            fprintf(o, "<h%d>", lvl);
            html_escaped(o, line + lvl + 1);
            fprintf(o, "</h%d>\n", lvl);
        } else if (!strncmp(line, "- ", 2)) {
            if (!list)
                fputs("<ul>\n", o);
            list = 1;
            fputs("<li>", o);
            html_escaped(o, line + 2);
            fputs("</li>\n", o);
        } else if (!strncmp(line, "![", 2) && strchr(line, '(')) {
            char *src = strchr(line, '(') + 1;
            src[strcspn(src, ")")] = 0;
            fputs("<p><img alt=\"step timeline\" style=\"max-width:100%\" src=\"", o);
            html_escaped(o, src);
            fputs("\"></p>\n", o);
        } else if (line[0]) {
            fputs("<p>", o);
            html_escaped(o, line);
            fputs("</p>\n", o);
        }
    }
    if (list)
        fputs("</ul>\n", o);
    fputs("</body></html>\n", o);
    fclose(in);
    int rc = fclose(o) == 0 && rename(out_path, path) == 0 ? 0 : -1;
    return rc;
}

static int write_report(const char *path, const scenario_config *s, const plan_result *p, int top, int gpus)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "dtsim plan: --report %s: cannot write\n", path);
        return -1;
    }
    const plan_layout *own = NULL;
    for (int i = 0; i < p->count; i++)
        if (p->layouts[i].is_scenario_own)
            own = &p->layouts[i];
    fprintf(f, "# Capacity plan: %s\n\n", s->name);
    fprintf(f, "**Question.** How should a %lld-layer, hidden-%lld model (%.1fB parameters) be laid out on %d %s GPUs "
               "to train fastest, with a global batch of %lld sequences of %lld tokens in %s?\n\n",
            s->model.num_layers, s->model.hidden_size, params_total(s) / 1e9, gpus, s->platform.gpu.name, s->training.global_batch_size,
            s->model.seq_length, precision_name(s->training.precision));
    fprintf(f, "**Cluster.** %s: %d nodes of %d x %s (%.0f GiB, %.0f GB/s HBM), NVLink %.0f GB/s per direction, "
               "%d x %.0f Gb/s NICs per node, %s.\n\n",
            s->platform.name, s->platform.network.nodes, s->platform.node.gpus, s->platform.gpu.name,
            s->platform.gpu.memory_gib, s->platform.gpu.hbm_bandwidth_gbs, s->platform.node.nvlink_bandwidth_gbs,
            s->platform.node.nics, s->platform.node.nic_bandwidth_gbps,
            s->platform.network.topology == TOPO_RAIL_OPTIMIZED_FAT_TREE ? "rail-optimized fat tree"
            : s->platform.network.topology == TOPO_FAT_TREE ? "fat tree" : "single switch");
    fprintf(f, "**Search.** %ld layouts enumerated: %ld break a layout rule, %ld do not fit in %.0f GiB, %d simulated "
               "(analytic fidelity) in %.2f s.\n\n",
            p->enumerated, p->invalid, p->out_of_memory, s->platform.gpu.memory_gib, p->count, p->wall_s);
    fprintf(f, "## Best layouts\n\n```\n");
    print_table(f, p, top);
    fprintf(f, "```\n\n");
    if (p->count > 0) {
        const plan_layout *b = &p->layouts[0];
        const run_result *r = &b->result;
        fprintf(f, "## Why the best one wins\n\n");
        fprintf(f, "- **Time:** %.3f s per step, %.0f tokens/s, MFU %.1f%% (HFU %.1f%%).\n", r->step_time_s,
                r->tokens_per_s, 100 * r->mfu, 100 * r->hfu);
        fprintf(f, "- **Pipeline bubble:** %.1f%% of the step on average, %.1f%% on the worst stage.\n",
                100 * r->bubble_mean, 100 * r->bubble_max);
        fprintf(f, "- **Communication:** exposed TP %.3f s, PP %.3f s, DP %.3f s, ZeRO %.3f s per step.\n",
                r->comm_exposed_s[COMM_TP], r->comm_exposed_s[COMM_PP], r->comm_exposed_s[COMM_DP],
                r->comm_exposed_s[COMM_ZERO]);
        fprintf(f, "- **Memory:** %.1f of %.0f GiB per GPU (weights %.1f, gradients %.1f, optimizer %.1f, "
                   "activations %.1f, buffers %.1f).\n",
                r->memory.total, r->memory.capacity, r->memory.weights, r->memory.gradients, r->memory.optimizer,
                r->memory.activations, r->memory.buffers);
        if (own)
            fprintf(f, "- **Against the scenario's own layout** (TP %d, PP %d, DP %d): %.3f s per step, %.1f%% %s.\n",
                    own->tp, own->pp, own->dp, own->result.step_time_s,
                    100 * fabs(own->result.step_time_s / r->step_time_s - 1),
                    own->result.step_time_s >= r->step_time_s ? "slower" : "faster");
        if (b->days_to_train > 0)
            fprintf(f, "- **Time to train** %.3g tokens: %.1f days of pure training (failures not included; see "
                       "`dtsim faults`).\n", s->training.tokens, b->days_to_train);
    }
    if (p->count > 0) {
        /* A picture of the best layout's step: its trace drawn by plots/timeline.sh. */
        char trace[4300], png[4300], cmd[9000];
        snprintf(trace, sizeof trace, "%s.best-step.trace.json", path);
        snprintf(png, sizeof png, "%s.best-step.png", path);
        scenario_config best;
        plan_apply(s, &p->layouts[0], &best);
        run_result r;
        config_error err;
        const char *root = getenv("DTSIM_ROOT");
        snprintf(cmd, sizeof cmd, "'%s/plots/timeline.sh' '%s' '%s' 16 >/dev/null 2>&1",
                 root && *root ? root : DTSIM_SOURCE_DIR, trace, png);
        if (run_scenario_traced(&best, &r, trace, &err) == 0 && system(cmd) == 0) {
            const char *base = strrchr(png, '/');
            fprintf(f, "\n## The best layout's step\n\n![one step of the best layout, by pipeline stage](%s)\n\n"
                       "Blue: compute; green: pipeline sends; yellow / red: DP / ZeRO communication; grey: waiting. "
                       "The full trace opens in ui.perfetto.dev: `%s`.\n", base ? base + 1 : png, trace);
        }
        /* What failures cost over the run, when the scenario gives failure rates. */
        if (best.faults.gpu_mtbf_hours > 0 || best.faults.node_mtbf_hours > 0) {
            faults_report fr;
            memset(&fr, 0, sizeof fr);
            fr.step_time_s = r.step_time_s;
            fr.tokens_per_s = r.tokens_per_s;
            if (faults_run(&best, 50, &fr, &err) == 0) {
                fprintf(f, "\n## What failures cost (`dtsim faults`, 50 runs)\n\n");
                fprintf(f, "- System MTBF %.1f h; %.0f interruptions (p5 %.0f, p95 %.0f) over %s.\n",
                        fr.system_mtbf_hours, fr.interruptions.mean, fr.interruptions.p5, fr.interruptions.p95,
                        fr.target_train_s > 0 ? "the training" : "the horizon");
                fprintf(f, "- Goodput %.1f%% with a checkpoint every %.0f s; the goodput-optimal interval is %.0f s "
                           "(Young/Daly: %.0f s).\n", 100 * fr.goodput.mean, best.faults.checkpoint_interval_s,
                        fr.optimal_checkpoint_interval_s, fr.young_daly_interval_s);
                if (fr.target_train_s > 0)
                    fprintf(f, "- Days to train with failures: %.1f (p95 %.1f), against %.1f without.\n",
                            fr.days_to_train.mean, fr.days_to_train.p95, fr.target_train_s / 86400);
            }
        }
    }
    fprintf(f, "\n## Assumptions\n\n- Calibration: %s (source: %s%s%s). Platform: %s.\n", s->calibration.device,
            s->calibration.source, s->calibration.date[0] ? ", " : "", s->calibration.date, s->platform.name);
    fprintf(f, "- Analytic fidelity: no link contention; the model is described in docs/model.md, its accuracy "
               "against published runs in docs/validation.md.\n");
    int ok = fclose(f) == 0;
    size_t len = strlen(path);
    if (ok && len > 5 && !strcmp(path + len - 5, ".html"))
        ok = markdown_to_html(tmp) == 0;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        fprintf(stderr, "dtsim plan: --report %s: cannot write\n", path);
        return -1;
    }
    return 0;
}

int cli_plan(int argc, char **argv)
{
    const char *path = NULL, *json_path = NULL, *report = NULL;
    const char **sets = calloc((size_t)argc + 1, sizeof *sets);
    int n_sets = 0, gpus = 0, top = 10, confirm = 0, rc = 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            rc = 0;
            goto out;
        } else if (!strcmp(a, "--gpus") && v) {
            long n = strtol(v, &end, 10);
            if (!*v || *end || n < 1 || n > 1048576) {
                fprintf(stderr, "dtsim plan: --gpus: '%s' is not a GPU count in 1..1048576\n", v);
                goto out;
            }
            gpus = (int)n;
            i++;
        } else if (!strcmp(a, "--top") && v) {
            long n = strtol(v, &end, 10);
            if (!*v || *end || n < 1 || n > 100000) {
                fprintf(stderr, "dtsim plan: --top: '%s' is not a count in 1..100000\n", v);
                goto out;
            }
            top = (int)n;
            i++;
        } else if (!strcmp(a, "--confirm") && v) {
            long n = strtol(v, &end, 10);
            if (!*v || *end || n < 0 || n > 1000) {
                fprintf(stderr, "dtsim plan: --confirm: '%s' is not a count in 0..1000\n", v);
                goto out;
            }
            confirm = (int)n;
            i++;
        } else if (!strcmp(a, "--json") && v) {
            json_path = argv[++i];
        } else if (!strcmp(a, "--report") && v) {
            report = argv[++i];
        } else if (!strcmp(a, "--set") && v) {
            sets[n_sets++] = argv[++i];
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "dtsim plan: unknown option or missing value: %s (see dtsim plan --help)\n", a);
            goto out;
        } else if (!path) {
            path = a;
        } else {
            fprintf(stderr, "dtsim plan: one scenario file expected\n");
            goto out;
        }
    }
    if (!path) {
        usage(stderr);
        goto out;
    }
    scenario_config s;
    config_error err;
    if (scenario_load(path, sets, n_sets, &s, &err) != 0) {
        fprintf(stderr, "dtsim: %s\n", err.msg);
        goto out;
    }
    plan_result p;
    if (plan_search(&s, gpus, &p, &err, progress) != 0) {
        fprintf(stderr, "dtsim plan: %s\n", err.msg);
        scenario_free(&s);
        goto out;
    }
    int plan_gpus = gpus ? gpus : scenario_gpus(&s);
    FILE *human = json_path && !strcmp(json_path, "-") ? stderr : stdout;
    fprintf(human, "dtsim plan: %s on %d x %s: %ld layouts, %ld invalid, %ld out of memory, %d simulated in %.2f s "
                   "(%.0f layouts/s)\n",
            s.name, plan_gpus, s.platform.gpu.name, p.enumerated, p.invalid, p.out_of_memory, p.count, p.wall_s,
            p.enumerated / (p.wall_s > 0 ? p.wall_s : 1e-9));
    if (confirm > 0 && p.count > 0) {
        /* Flow fidelity for the best K: contention may reorder them. */
        int k = confirm < p.count ? confirm : p.count;
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
            double tokens = s.training.tokens;
            p.layouts[i].result = fr;
            p.layouts[i].days_to_train = tokens > 0 ? tokens / fr.tokens_per_s / 86400.0 : 0;
        }
        qsort(p.layouts, (size_t)k, sizeof *p.layouts, plan_compare);
        fprintf(human, "the best %d re-ranked by flow fidelity:\n", k);
    }
    print_table(human, &p, top);
    rc = p.count > 0 ? 0 : 1;
    if (p.count == 0)
        fprintf(stderr, "dtsim plan: no layout fits in %.0f GiB per GPU (example rule failure: %s)\n",
                s.platform.gpu.memory_gib, p.first_invalid[0] ? p.first_invalid : "none");
    if (json_path) {
        json_t *arr = json_array();
        for (int i = 0; i < p.count && i < top; i++)
            json_array_append_new(arr, layout_json(&p.layouts[i]));
        json_t *doc = json_pack("{s:o,s:I,s:I,s:I,s:f}", "layouts", arr, "enumerated", (json_int_t)p.enumerated,
                                "invalid", (json_int_t)p.invalid, "out_of_memory", (json_int_t)p.out_of_memory,
                                "wall_s", p.wall_s);
        if (cli_write_json(doc, json_path) != 0)
            rc = 1;
        json_decref(doc);
    }
    if (report && write_report(report, &s, &p, top, plan_gpus) != 0)
        rc = 1;
    plan_result_free(&p);
    scenario_free(&s);
out:
    free(sets);
    return rc;
}
