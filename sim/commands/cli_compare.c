/* dtsim compare A.json [B.json ...] [--variant "PATH=VALUE[;PATH=VALUE...]"]... [--set PATH=VALUE]...
 *               [--fidelity analytic|flow] [--json FILE|-]
 * Scenarios side by side: each file, then each --variant of the first (its --set values on top),
 * simulated alike; one row per figure a user weighs (step time, MFU, memory, exposed
 * communication by kind, bubble, days, GPU-hours and cost to train), and the step time against the
 * first column. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "cli_args.h"
#include "budget.h"
#include "flow.h"
#include "run.h"

#define COMPARE_MAX 16 /* columns: a table wider than this is no longer read side by side */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: dtsim compare A.json [B.json ...] [options]\n"
            "Simulates scenarios, and variants of the first, and prints them side by side: GPUs,\n"
            "layout, step time (and against the first), tokens/s, MFU, bubble, memory per GPU,\n"
            "exposed communication by kind, and days, GPU-hours and cost to train where the\n"
            "scenarios state their tokens (training.tokens, train_iters or train_samples).\n\n"
            "options:\n"
            "  --variant \"PATH=VALUE[;PATH=VALUE...]\"  a column more: the first scenario with these\n"
            "                            values (as --set takes them); repeatable\n"
            "  --set PATH=VALUE          a value for every column; repeatable\n"
            "  --fidelity analytic|flow  (default: each scenario's run.fidelity)\n"
            "  --json FILE|-             {\"scenarios\": [{\"label\", \"file\", \"sets\", ...dtsim run's\n"
            "                            document}]} (\"-\": stdout; the table then goes to stderr)\n"
            "  -h, --help                this help\n"
            "Each column's step is simulated as 'dtsim run' simulates it: an analytic step of many\n"
            "micro-batches replayed short and extended where shown periodic.\n"
            BUDGET_HELP
            "At most %d columns. exit: 0 ok (a column that does not fit in memory is marked OOM),\n"
            "2 bad input (or over the limits), 1 runtime failure\n", COMPARE_MAX);
}

typedef struct {
    const char *label; /* the variant as given, or the file's name: whole, never cut */
    const char *file;
    cli_list sets;
    scenario_config s;
    run_result r;
} column;

/* The sets of one column: the common ones, then the variant's, split at ';'. 0; -1 out of memory;
 * -2 a variant that sets nothing (it would add a copy of the first column). */
static int column_sets(column *c, const cli_list *common, const char *variant)
{
    for (int i = 0; i < common->count; i++)
        if (cli_list_add(&c->sets, common->items[i]))
            return -1;
    if (!variant)
        return 0;
    char *copy = strdup(variant);
    int rc = copy ? 0 : -1, parts = 0, quoted = 0;
    /* split at each ';' outside a JSON string: a value may hold one (name="a;b") */
    for (char *part = copy, *p = copy; p && rc == 0; p++) {
        if (*p == '"' && (p == copy || p[-1] != '\\'))
            quoted = !quoted;
        if (*p && (*p != ';' || quoted))
            continue;
        int last = !*p;
        *p = 0;
        while (*part == ' ')
            part++;
        if (*part) {
            rc = cli_list_add(&c->sets, part);
            parts++;
        }
        part = p + 1;
        if (last)
            break;
    }
    free(copy);
    return rc == 0 && parts == 0 ? -2 : rc;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* A cell: column c's figure; the first column and a communication class for the cells that use
 * them. */
typedef void cell_fn(const column *c, const column *first, int kind, char *v, size_t n);

#define COMPARE_WIDTH 20 /* a column's characters; a longer label is shown by number, in full above */

static void row_text(FILE *f, const char *name, column *cols, int n, cell_fn *cell, int kind)
{
    fprintf(f, "  %-22s", name);
    for (int i = 0; i < n; i++) {
        char v[48];
        cell(&cols[i], &cols[0], kind, v, sizeof v);
        fprintf(f, " %*s", COMPARE_WIDTH, v);
    }
    fputc('\n', f);
}

static void cell_gpus(const column *c, const column *first, int kind, char *v, size_t n) { snprintf(v, n, "%d", c->r.gpus); }
static void cell_layout(const column *c, const column *first, int kind, char *v, size_t n)
{
    const scenario_config *s = &c->s;
    snprintf(v, n, "%dx%dx%dx%d%s", s->parallel.tp, s->parallel.pp, s->parallel.dp, s->parallel.cp,
             s->model.num_experts > 0 ? " EP" : "");
}
static void cell_zero(const column *c, const column *first, int kind, char *v, size_t n)
{
    snprintf(v, n, "ZeRO-%d mb %lld", c->s.parallel.zero_stage, c->s.training.micro_batch_size);
}
static void cell_step(const column *c, const column *first, int kind, char *v, size_t n) { snprintf(v, n, "%.4f", c->r.step_time_s); }
static void cell_vs(const column *c, const column *first, int kind, char *v, size_t n)
{
    snprintf(v, n, "%+.1f%%", 100 * (c->r.step_time_s / first->r.step_time_s - 1));
}
static void cell_tokens(const column *c, const column *first, int kind, char *v, size_t n) { snprintf(v, n, "%.4g", c->r.tokens_per_s); }
static void cell_mfu(const column *c, const column *first, int kind, char *v, size_t n) { snprintf(v, n, "%.1f%%", 100 * c->r.mfu); }
static void cell_bubble(const column *c, const column *first, int kind, char *v, size_t n) { snprintf(v, n, "%.1f%%", 100 * c->r.bubble_mean); }
static void cell_memory(const column *c, const column *first, int kind, char *v, size_t n)
{
    snprintf(v, n, "%.1f/%.0f%s", c->r.memory.total, c->r.memory.capacity, c->r.memory.oom ? " OOM" : "");
}
static void cell_comm(const column *c, const column *first, int kind, char *v, size_t n) { snprintf(v, n, "%.4f", c->r.comm_exposed_s[kind]); }
static void cell_days(const column *c, const column *first, int kind, char *v, size_t n)
{
    if (c->r.to_train.known)
        snprintf(v, n, "%.2f", c->r.to_train.days);
    else
        snprintf(v, n, "-");
}
static void cell_hours(const column *c, const column *first, int kind, char *v, size_t n)
{
    if (c->r.to_train.known)
        snprintf(v, n, "%.4g", c->r.to_train.gpu_hours);
    else
        snprintf(v, n, "-");
}
static void cell_cost(const column *c, const column *first, int kind, char *v, size_t n)
{
    if (c->r.to_train.has_cost)
        snprintf(v, n, "%.4g", c->r.to_train.cost);
    else
        snprintf(v, n, "-");
}

static void print_table(FILE *f, column *cols, int n)
{
    /* Labels are shown whole: where one is longer than a column (a variant's paths), the columns
     * are headed by number and each label is written out above the table. */
    int numbered = 0;
    for (int i = 0; i < n; i++)
        numbered |= strlen(cols[i].label) > COMPARE_WIDTH;
    if (numbered)
        for (int i = 0; i < n; i++)
            fprintf(f, "  (%d) %s\n", i + 1, cols[i].label);
    fprintf(f, "  %-22s", "");
    for (int i = 0; i < n; i++) {
        char head[16];
        snprintf(head, sizeof head, "(%d)", i + 1);
        fprintf(f, " %*s", COMPARE_WIDTH, numbered ? head : cols[i].label);
    }
    fputc('\n', f);
    row_text(f, "GPUs", cols, n, cell_gpus, 0);
    row_text(f, "TP x PP x DP x CP", cols, n, cell_layout, 0);
    row_text(f, "ZeRO, micro-batch", cols, n, cell_zero, 0);
    row_text(f, "step time (s)", cols, n, cell_step, 0);
    row_text(f, "  against the first", cols, n, cell_vs, 0);
    row_text(f, "tokens/s", cols, n, cell_tokens, 0);
    row_text(f, "MFU", cols, n, cell_mfu, 0);
    row_text(f, "bubble (mean)", cols, n, cell_bubble, 0);
    row_text(f, "memory/GPU (GiB)", cols, n, cell_memory, 0);
    for (int kind = 0; kind < COMM_CLASS_COUNT; kind++) {
        int any = 0;
        for (int i = 0; i < n; i++)
            any |= cols[i].r.comm_total_s[kind] > 0;
        if (!any)
            continue;
        char name[40];
        snprintf(name, sizeof name, "exposed %s comm (s)", comm_class_name((comm_class)kind));
        row_text(f, name, cols, n, cell_comm, kind);
    }
    row_text(f, "days to train", cols, n, cell_days, 0);
    row_text(f, "GPU-hours", cols, n, cell_hours, 0);
    row_text(f, "cost", cols, n, cell_cost, 0);
}

int cli_compare(int argc, char **argv)
{
    const char *json_path = NULL, *fidelity = NULL;
    static const char *const fidelities[] = {"analytic", "flow", NULL};
    cli_list files = {0}, sets = {0}, variants = {0};
    budget_limits limits = {0, 0};
    const cli_option options[] = {
        BUDGET_OPTIONS(&limits),
        CLI_OPT_APPEND("variant", &variants),
        CLI_OPT_APPEND("set", &sets),
        CLI_OPT_CHOICE("fidelity", &fidelity, fidelities),
        CLI_OPT_STRING("json", &json_path),
        CLI_OPT_END,
    };
    const cli_output outs[] = {CLI_OUT_FILE_OR_STDOUT("--json", &json_path), CLI_OUT_END};
    const cli_spec spec = {"compare", usage, options, NULL, "scenario file", outs};
    int rc = cli_parse_args_list(&spec, argc, argv, &files);
    column *cols = NULL;
    int n = 0;
    if (rc != CLI_GO_ON)
        goto out;
    rc = 2;
    if (files.count == 0) {
        fprintf(stderr, "dtsim compare: no scenario file given (see dtsim compare --help)\n");
        goto out;
    }
    int want = files.count + variants.count;
    if (want > COMPARE_MAX) {
        fprintf(stderr, "dtsim compare: %d columns asked for; at most %d are read side by side\n", want, COMPARE_MAX);
        goto out;
    }
    if (fidelity && cli_list_addf(&sets, "run.fidelity=\"%s\"", fidelity))
        goto out;
    cols = calloc((size_t)want, sizeof *cols);
    if (!cols) {
        fprintf(stderr, "dtsim compare: out of memory for %d columns\n", want);
        rc = 1;
        goto out;
    }
    /* load every column first, so a bad one is refused before anything is simulated */
    for (n = 0; n < want; n++) {
        column *c = &cols[n];
        int variant = n >= files.count;
        c->file = variant ? files.items[0] : files.items[n];
        c->label = variant ? variants.items[n - files.count] : base_name(c->file);
        int set = column_sets(c, &sets, variant ? variants.items[n - files.count] : NULL);
        if (set == -2) {
            fprintf(stderr, "dtsim compare: --variant '%s' sets nothing (give PATH=VALUE[;PATH=VALUE...])\n",
                    variants.items[n - files.count]);
            cli_list_free(&c->sets);
            goto out;
        }
        if (set != 0) {
            fprintf(stderr, "dtsim compare: out of memory\n");
            cli_list_free(&c->sets);
            rc = 1;
            goto out;
        }
        config_error err;
        if (scenario_load(c->file, c->sets.items, c->sets.count, &c->s, &err) != 0) {
            fprintf(stderr, "dtsim compare: %s%s%s: %s\n", c->file, variant ? " with " : "",
                    variant ? c->label : "", err.msg);
            cli_list_free(&c->sets);
            goto out;
        }
    }
    /* two files of one name in different folders: each headed by its path as given, or the
     * columns could not be told apart */
    for (int i = 0; i < files.count; i++)
        for (int j = 0; j < files.count; j++)
            if (i != j && !strcmp(base_name(cols[i].file), base_name(cols[j].file)) &&
                strcmp(cols[i].file, cols[j].file)) {
                cols[i].label = cols[i].file;
                break;
            }
    /* every column priced as dtsim run prices it, before any runs; each replay after a column's
     * first asked of the same limits when it comes */
    work_estimate est = {.bytes = 0, .seconds = 0};
    for (int i = 0; i < n; i++) {
        work_estimate one;
        budget_estimate_step(&cols[i].s, 0, &one);
        est.seconds += one.seconds;
        est.bytes = est.bytes > one.bytes ? est.bytes : one.bytes;
    }
    snprintf(est.work, sizeof est.work, "%d column%s, each step priced as dtsim run prices it", n, n == 1 ? "" : "s");
    if (budget_check("compare", &est, &limits) != 0)
        goto out;
    budget_gate spend = {limits, 0};
    run_gate gate = {budget_gate_allow, &spend};
    for (int i = 0; i < n; i++) {
        config_error err;
        int ran = run_scenario_folded_gated(&cols[i].s, &cols[i].r, &gate, &err);
        if (ran != 0) {
            fprintf(stderr, "dtsim compare: %s (%s): %s\n", cols[i].file, cols[i].label, err.msg);
            rc = run_exit_code(ran);
            goto out;
        }
    }
    int to_stdout = json_path && !strcmp(json_path, "-");
    print_table(to_stdout ? stderr : stdout, cols, n);
    rc = 0;
    if (json_path) {
        json_t *list = json_array();
        for (int i = 0; i < n; i++) {
            json_t *doc = run_result_to_json(&cols[i].r), *js = json_array();
            for (int k = 0; k < cols[i].sets.count; k++)
                json_array_append_new(js, json_string(cols[i].sets.items[k]));
            json_object_set_new(doc, "label", json_string(cols[i].label));
            json_object_set_new(doc, "file", json_string(cols[i].file));
            json_object_set_new(doc, "sets", js);
            json_array_append_new(list, doc);
        }
        json_t *top = json_pack("{s:o}", "scenarios", list);
        if (cli_write_json(top, json_path) != 0)
            rc = 1;
        json_decref(top);
    }
out:
    for (int i = 0; i < n; i++) {
        scenario_free(&cols[i].s);
        cli_list_free(&cols[i].sets);
    }
    free(cols);
    cli_list_free(&files);
    cli_list_free(&sets);
    cli_list_free(&variants);
    return rc;
}
