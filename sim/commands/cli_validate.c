/* dtsim validate CASES.json [--json FILE|-]
 * Runs every case's scenario and compares each expected figure with the prediction:
 * prints a table, the mean absolute percentage error and the largest error; exits 1 if any
 * case is outside its tolerance. */
#include <jansson.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "cli_args.h"
#include "budget.h"
#include "config_json.h"
#include "flow.h"
#include "run.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: dtsim validate CASES.json [--json FILE|-] [--fidelity analytic|flow] [--max-mean-error X]\n"
            "                      [--max-error X] [--set PATH=VALUE]...\n"
            "Simulates each case's scenario and compares the figures under \"expect\" with the\n"
            "prediction; a case passes when |predicted - expected| / expected <= its tolerance (0 or\n"
            "more; default 0.15). An expected 0 is scored by |predicted| (absolute, so labelled, and\n"
            "left out of the mean relative error).\n"
            "A case's optional \"group\" (a short name: one paper's table, one repository's recipes)\n"
            "puts it in a summary after the table: each group's figures, mean and largest error, and\n"
            "the mean of the groups' means, which weighs each group once however many rows it has.\n"
            "  --max-mean-error X  instead of the per-case tolerances, pass when the mean absolute\n"
            "                      relative error is <= X (and --max-error, if given, holds)\n"
            "  --max-error X       pass when every figure's absolute relative error is <= X\n"
            "  --set PATH=VALUE    override one scenario value in every case, as 'dtsim run --set' does\n"
            "                      (e.g. model.attention=unfused for a table of runs made without\n"
            "                      fused attention whose cases do not say so)\n"
            "A case's step is simulated as 'dtsim run' simulates it: an analytic step of many\n"
            "micro-batches replayed short and extended where shown periodic.\n"
            BUDGET_HELP
            "exit: 0 within tolerance, 1 outside, 2 bad input (or over the limits)\n");
}

static const char *case_id(json_t *c, int i, char *buf, size_t n)
{
    const char *id = json_string_value(json_object_get(c, "id"));
    if (id)
        return id;
    snprintf(buf, n, "cases[%d]", i);
    return buf;
}

/* Any other key, at the top or in a case, is refused (config_check_keys): a misspelt
 * "tolerance" would otherwise leave the default in force. */
static const char *const CASES_FILE_KEYS[] = {"cases", "note", "source", NULL};
static const char *const CASE_KEYS[] = {"id", "source", "group", "note", "scenario", "expect", "tolerance", NULL};

/* One case, loaded and checked before anything is simulated. */
typedef struct {
    const char *id;
    const char *group; /* "group", else the id: the cases summarised together */
    char idbuf[64];
    json_t *expect;
    double tolerance;
    scenario_config s;
    int loaded;
    run_result r;
} case_run;

/* Every case of `cases` read and its scenario loaded (with the overrides, at fidelity_flow when
 * >= 0): the shape of each, its tolerance and its scenario are checked for all before any is
 * simulated, so that a bad case late in the file stops the command before the first row. 0, or 2
 * after saying which case and why. */
static int load_cases(const char *cases_path, json_t *cases, const char *base_dir, int fidelity_flow,
                      const char *const *sets, int n_sets, case_run *runs)
{
    for (size_t i = 0; i < json_array_size(cases); i++) {
        json_t *c = json_array_get(cases, i);
        case_run *k = &runs[i];
        k->id = case_id(c, (int)i, k->idbuf, sizeof k->idbuf);
        /* the rows and the JSON tell cases apart by their ids: one of another type, or one given
         * twice, would label a row with another case's name or with none */
        json_t *id_j = json_object_get(c, "id");
        if (id_j && (!json_is_string(id_j) || !*json_string_value(id_j))) {
            fprintf(stderr, "dtsim validate: %s: cases[%zu].id: not a non-empty string\n", cases_path, i);
            return 2;
        }
        for (size_t j = 0; id_j && j < i; j++)
            if (!strcmp(runs[j].id, k->id)) {
                fprintf(stderr, "dtsim validate: %s: cases[%zu].id \"%s\": also cases[%zu]'s\n", cases_path, i, k->id,
                        j);
                return 2;
            }
        json_t *group_j = json_object_get(c, "group");
        if (group_j && (!json_is_string(group_j) || !*json_string_value(group_j))) {
            fprintf(stderr, "dtsim validate: %s: cases[%zu].group: not a non-empty string\n", cases_path, i);
            return 2;
        }
        k->group = group_j ? json_string_value(group_j) : k->id;
        json_t *scen = json_object_get(c, "scenario"), *tol_j = json_object_get(c, "tolerance");
        k->expect = json_object_get(c, "expect");
        if (!json_is_object(scen) || !json_is_object(k->expect) || json_object_size(k->expect) == 0 ||
            (tol_j && (!json_is_number(tol_j) || !(json_number_value(tol_j) >= 0)))) {
            fprintf(stderr, "dtsim validate: %s: cases[%zu] (%s) needs a \"scenario\" object, a non-empty "
                            "\"expect\" object and a \"tolerance\" of 0 or more\n", cases_path, i, k->id);
            return 2;
        }
        const char *key;
        json_t *val;
        json_object_foreach(k->expect, key, val) if (!json_is_number(val)) {
            fprintf(stderr, "dtsim validate: %s: cases[%zu].expect.%s: not a number\n", cases_path, i, key);
            return 2;
        }
        k->tolerance = tol_j ? json_number_value(tol_j) : 0.15;
        config_error err;
        if (scenario_load_json(scen, base_dir, sets, n_sets, &k->s, &err) != 0) {
            fprintf(stderr, "dtsim validate: %s: cases[%zu] (%s): %s\n", cases_path, i, k->id, err.msg);
            return 2;
        }
        k->loaded = 1;
        if (fidelity_flow >= 0)
            k->s.run.fidelity_flow = fidelity_flow;
    }
    return 0;
}

/* The relative errors of the cases that share a "group" (one paper's table, one repository's
 * recipes): a group's figures, their mean and largest, in the order the groups first appear. The
 * mean of the groups' means weighs each group once, where the mean of all figures weighs a source
 * by its rows: fourteen rows of one repository beside one of another would let the first decide
 * the headline. */
typedef struct {
    const char *name;
    int figures; /* relative errors only, as the overall mean */
    double sum_abs, max_abs;
} error_group;

static void group_add(error_group *groups, int *n_groups, const char *name, double abs_error)
{
    int g = 0;
    while (g < *n_groups && strcmp(groups[g].name, name))
        g++;
    if (g == *n_groups)
        groups[(*n_groups)++] = (error_group){name, 0, 0, 0};
    groups[g].figures++;
    groups[g].sum_abs += abs_error;
    groups[g].max_abs = fmax(groups[g].max_abs, abs_error);
}

/* The table of the groups and their mean, printed and added to doc (when not NULL) as "groups"
 * and "mape_of_groups". */
static void group_report(FILE *human, const error_group *groups, int n_groups, json_t *doc)
{
    int w = (int)strlen("group");
    for (int g = 0; g < n_groups; g++)
        if ((int)strlen(groups[g].name) > w)
            w = (int)strlen(groups[g].name);
    fprintf(human, "%-*s %8s %8s %8s\n", w, "group", "figures", "mean", "largest");
    json_t *list = doc ? json_array() : NULL;
    double sum_means = 0;
    for (int g = 0; g < n_groups; g++) {
        const error_group *e = &groups[g];
        double mean = e->sum_abs / e->figures;
        sum_means += mean;
        fprintf(human, "%-*s %8d %7.1f%% %7.1f%%\n", w, e->name, e->figures, 100 * mean, 100 * e->max_abs);
        if (list)
            json_array_append_new(list, json_pack("{s:s,s:i,s:f,s:f}", "group", e->name, "figures", e->figures,
                                                  "mape", mean, "max_error", e->max_abs));
    }
    fprintf(human, "%d groups, mean of the groups' mean absolute errors %.1f%% (each group weighed once)\n", n_groups,
            100 * sum_means / n_groups);
    if (doc) {
        json_object_set_new(doc, "groups", list);
        json_object_set_new(doc, "mape_of_groups", json_real(sum_means / n_groups));
    }
}

/* The cases of cases_path simulated (at fidelity_flow when >= 0) with the overrides sets, and
 * compared with their figures, within the limits (priced up front, each further replay asked
 * when it comes); the exit code. */
static int validate_cases(const char *cases_path, const char *json_path, int fidelity_flow, double max_mean,
                          double max_err, const char *const *sets, int n_sets, const budget_limits *limits)
{
    config_error lerr; /* held to the size limit of every description file, as scenarios are */
    json_t *root = config_load_file(cases_path, "cases file", &lerr);
    if (!root) {
        fprintf(stderr, "dtsim validate: %s\n", lerr.msg);
        return 2;
    }
    json_t *cases = json_object_get(root, "cases");
    if (!json_is_array(cases) || json_array_size(cases) == 0) {
        fprintf(stderr, "dtsim validate: %s: \"cases\" must be a non-empty list\n", cases_path);
        json_decref(root);
        return 2;
    }
    config_error kerr;
    int bad_key = config_check_keys(root, "", CASES_FILE_KEYS, &kerr);
    for (size_t i = 0; !bad_key && i < json_array_size(cases); i++) {
        char path[32];
        snprintf(path, sizeof path, "cases[%zu]", i);
        json_t *c = json_array_get(cases, i);
        bad_key = json_is_object(c) && config_check_keys(c, path, CASE_KEYS, &kerr);
    }
    if (bad_key) {
        fprintf(stderr, "dtsim validate: %s: %s\n", cases_path, kerr.msg);
        json_decref(root);
        return 2;
    }
    char dirbuf[4096];
    snprintf(dirbuf, sizeof dirbuf, "%s", cases_path);
    const char *base_dir = dirname(dirbuf);
    size_t n = json_array_size(cases);
    case_run *runs = calloc(n, sizeof *runs);
    json_t *out_cases = json_array();
    int rc = !runs || !out_cases ? 1 : load_cases(cases_path, cases, base_dir, fidelity_flow, sets, n_sets, runs);
    if (!runs || !out_cases)
        fprintf(stderr, "dtsim validate: out of memory for %zu cases\n", n);

    /* an expected figure no run prints (a misspelt name) is refused before anything runs; one that
     * only some runs print is checked against the case's own result below */
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const char *key;
        json_t *val;
        json_object_foreach(runs[i].expect, key, val) if (rc == 0 && !run_result_may_name(key)) {
            fprintf(stderr, "dtsim validate: %s: cases[%zu].expect.%s: not a numeric key of the "
                            "'dtsim run --json' output\n", cases_path, i, key);
            rc = 2;
        }
    }
    /* Every case's step priced as dtsim run prices it (its first replay), summed, before any
     * runs; each further replay is asked of the same limits when it comes. */
    work_estimate est = {.seconds = 0, .bytes = 0};
    for (size_t i = 0; rc == 0 && i < n; i++) {
        work_estimate one;
        budget_estimate_step(&runs[i].s, 0, &one);
        est.seconds += one.seconds;
        est.bytes = fmax(est.bytes, one.bytes);
    }
    snprintf(est.work, sizeof est.work, "%zu cases, each step priced as dtsim run prices it", n);
    if (rc == 0 && budget_check("validate", &est, limits) != 0)
        rc = 2;
    budget_gate spend = {*limits, 0};
    run_gate gate = {budget_gate_allow, &spend};
    for (size_t i = 0; rc == 0 && i < n; i++) {
        config_error err;
        int ran = run_scenario_folded_gated(&runs[i].s, &runs[i].r, &gate, &err);
        if (ran != 0) {
            fprintf(stderr, "dtsim validate: %s: %s\n", runs[i].id, err.msg);
            rc = run_exit_code(ran);
        }
    }
    /* Every expected figure must name a figure of its case's result before any row is printed
     * (some exist only for some runs: input.*, time_to_train.*). */
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const char *key;
        json_t *val;
        double predicted;
        json_object_foreach(runs[i].expect, key, val) if (rc == 0 && run_result_lookup(&runs[i].r, key, &predicted) != 0) {
            fprintf(stderr, "dtsim validate: %s: cases[%zu].expect.%s: not a numeric key of the "
                            "'dtsim run --json' output\n", cases_path, i, key);
            rc = 2;
        }
    }

    FILE *human = (json_path && !strcmp(json_path, "-")) ? stderr : stdout;
    int n_figures = 0, n_relative = 0, n_outside = 0, n_groups = 0, named_groups = 0;
    error_group *groups = rc == 0 ? calloc(n, sizeof *groups) : NULL;
    if (rc == 0 && !groups) {
        fprintf(stderr, "dtsim validate: out of memory for %zu cases' groups\n", n);
        rc = 1;
    }
    double sum_abs = 0, max_abs = 0;
    /* the case column as wide as the longest id, so that a long one does not push its row out of line */
    int id_w = (int)strlen("case");
    for (size_t i = 0; i < n; i++)
        if (runs[i].id && (int)strlen(runs[i].id) > id_w)
            id_w = (int)strlen(runs[i].id);
    if (rc == 0)
        fprintf(human, "%-*s %-26s %12s %12s %8s %6s\n", id_w, "case", "figure", "expected", "predicted", "error",
                "ok");
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const case_run *k = &runs[i];
        const char *key;
        json_t *val;
        named_groups |= k->group != k->id;
        json_object_foreach(k->expect, key, val) {
            double predicted = 0, expected = json_number_value(val);
            run_result_lookup(&k->r, key, &predicted); /* each known to be there (above) */
            /* relative to the expected figure; of an expected 0 the error can only be absolute (in
             * the figure's unit, and so labelled), and it stays out of the mean and largest relative
             * errors */
            int absolute = expected == 0;
            double error = absolute ? predicted - expected : (predicted - expected) / fabs(expected);
            int ok = fabs(error) <= k->tolerance;
            n_figures++;
            n_outside += !ok;
            if (!absolute) {
                n_relative++;
                sum_abs += fabs(error);
                max_abs = fmax(max_abs, fabs(error));
                group_add(groups, &n_groups, k->group, fabs(error));
            }
            if (absolute)
                fprintf(human, "%-*s %-26s %12.4g %12.4g %+8.3g %6s (absolute: expected 0)\n", id_w, k->id, key, expected,
                        predicted, error, ok ? "yes" : "NO");
            else
                fprintf(human, "%-*s %-26s %12.4g %12.4g %+7.1f%% %6s\n", id_w, k->id, key, expected, predicted,
                        100 * error, ok ? "yes" : "NO");
            json_array_append_new(out_cases,
                                  json_pack("{s:s,s:s,s:f,s:f,s:f,s:s,s:f,s:b}", "id", k->id, "figure", key,
                                            "measured", expected, "predicted", predicted, "error", error,
                                            "error_kind", absolute ? "absolute" : "relative", "tolerance",
                                            k->tolerance, "within_tolerance", ok));
        }
    }
    if (rc == 0) {
        double mape = n_relative ? sum_abs / n_relative : 0;
        /* the mean and largest are of the relative errors only: with none there are none (not 0%) */
        char mean_text[32] = "none", max_text[32] = "none";
        if (n_relative) {
            snprintf(mean_text, sizeof mean_text, "%.1f%%", 100 * mape);
            snprintf(max_text, sizeof max_text, "%.1f%%", 100 * max_abs);
        }
        fprintf(human, "%d figures, mean absolute error %s, largest %s", n_figures, mean_text, max_text);
        if (n_relative < n_figures)
            fprintf(human, " (of the %d relative errors; %d absolute apart)", n_relative, n_figures - n_relative);
        fprintf(human, ", %d outside tolerance\n", n_outside);
        json_t *doc = NULL;
        if (json_path) {
            doc = json_pack("{s:o,s:o,s:o,s:i}", "cases", out_cases, "mape", n_relative ? json_real(mape) : json_null(),
                            "max_error", n_relative ? json_real(max_abs) : json_null(), "outside_tolerance", n_outside);
            out_cases = NULL;
        }
        /* only where the cases name their groups: else each case is its own, and the table its rows again */
        if (named_groups && n_groups > 0)
            group_report(human, groups, n_groups, doc);
        if (doc) {
            if (cli_write_json(doc, json_path) != 0)
                rc = 1;
            json_decref(doc);
        }
        if (max_mean >= 0 || max_err >= 0) {
            /* a gate on relative errors with none to measure does not pass: the absolute ones it
             * leaves out may be anything */
            int ok = n_relative > 0 && (max_mean < 0 || mape <= max_mean) && (max_err < 0 || max_abs <= max_err);
            char mean_limit[32] = "none", max_limit[32] = "none";
            if (max_mean >= 0)
                snprintf(mean_limit, sizeof mean_limit, "%.1f%%", 100 * max_mean);
            if (max_err >= 0)
                snprintf(max_limit, sizeof max_limit, "%.1f%%", 100 * max_err);
            fprintf(human, "aggregate gate: mean %s (limit %s), largest %s (limit %s): %s\n", mean_text, mean_limit,
                    max_text, max_limit, ok ? "pass" : n_relative ? "FAIL" : "FAIL (no relative error to gate)");
            if (rc == 0 && !ok)
                rc = 1;
        } else if (rc == 0 && n_outside > 0) {
            rc = 1;
        }
    }
    for (size_t i = 0; runs && i < n; i++)
        if (runs[i].loaded)
            scenario_free(&runs[i].s);
    free(runs);
    free(groups);
    json_decref(out_cases);
    json_decref(root);
    return rc;
}

int cli_validate(int argc, char **argv)
{
    static const char *const fidelities[] = {"analytic", "flow", NULL};
    const char *cases_path = NULL, *json_path = NULL, *fidelity = NULL;
    double max_mean = -1, max_err = -1;
    cli_list sets = {0};
    budget_limits limits = {0, 0};
    const cli_option options[] = {
        BUDGET_OPTIONS(&limits),
        CLI_OPT_APPEND("set", &sets),
        CLI_OPT_STRING("json", &json_path),
        CLI_OPT_CHOICE("fidelity", &fidelity, fidelities),
        CLI_OPT_REAL("max-mean-error", &max_mean),
        CLI_OPT_REAL("max-error", &max_err),
        CLI_OPT_END,
    };
    const cli_output outs[] = {CLI_OUT_FILE_OR_STDOUT("--json", &json_path), CLI_OUT_END};
    const cli_spec spec = {"validate", usage, options, &cases_path, "cases file", outs};
    int rc = cli_parse_args(&spec, argc, argv);
    if (rc == CLI_GO_ON && !cases_path) {
        usage(stderr);
        rc = 2;
    } else if (rc == CLI_GO_ON) {
        rc = validate_cases(cases_path, json_path, fidelity ? !strcmp(fidelity, "flow") : -1, max_mean, max_err,
                            sets.items, sets.count, &limits);
    }
    cli_list_free(&sets);
    return rc;
}
