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
static const char *const CASE_KEYS[] = {"id", "source", "note", "scenario", "expect", "tolerance", NULL};

/* Every case's step priced as dtsim run prices it (its first replay), summed: what the cases
 * take. A case that does not load costs nothing here (the run says what is wrong with it). */
static void estimate_cases(json_t *cases, const char *base_dir, int fidelity_flow, const char *const *sets,
                           int n_sets, work_estimate *e)
{
    double seconds = 0, bytes = 0;
    for (size_t i = 0; i < json_array_size(cases); i++) {
        json_t *scen = json_object_get(json_array_get(cases, i), "scenario");
        scenario_config s;
        config_error err;
        if (!json_is_object(scen) || scenario_load_json(scen, base_dir, sets, n_sets, &s, &err) != 0)
            continue;
        if (fidelity_flow >= 0)
            s.run.fidelity_flow = fidelity_flow;
        work_estimate one;
        budget_estimate_step(&s, 0, &one);
        seconds += one.seconds;
        bytes = fmax(bytes, one.bytes);
        scenario_free(&s);
    }
    snprintf(e->work, sizeof e->work, "%zu cases, each step priced as dtsim run prices it", json_array_size(cases));
    e->seconds = seconds;
    e->bytes = bytes;
}

/* The cases of cases_path simulated (at fidelity_flow when >= 0) with the overrides sets, and
 * compared with their figures, within the limits (priced up front, each further replay asked
 * when it comes); the exit code. */
static int validate_cases(const char *cases_path, const char *json_path, int fidelity_flow, double max_mean,
                          double max_err, const char *const *sets, int n_sets, const budget_limits *limits)
{
    json_error_t jerr;
    json_t *root = json_load_file(cases_path, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        fprintf(stderr, "dtsim validate: %s:%d:%d: %s\n", cases_path, jerr.line, jerr.column, jerr.text);
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
    work_estimate est;
    estimate_cases(cases, base_dir, fidelity_flow, sets, n_sets, &est);
    if (budget_check("validate", &est, limits) != 0) {
        json_decref(root);
        return 2;
    }
    budget_gate spend = {*limits, 0};
    run_gate gate = {budget_gate_allow, &spend};

    FILE *human = (json_path && !strcmp(json_path, "-")) ? stderr : stdout;
    json_t *out_cases = json_array();
    int n_figures = 0, n_relative = 0, n_outside = 0, rc = 0;
    double sum_abs = 0, max_abs = 0;
    fprintf(human, "%-32s %-26s %12s %12s %8s %6s\n", "case", "figure", "expected", "predicted", "error", "ok");

    for (size_t i = 0; i < json_array_size(cases); i++) {
        json_t *c = json_array_get(cases, i);
        char idbuf[64];
        const char *id = case_id(c, (int)i, idbuf, sizeof idbuf);
        json_t *scen = json_object_get(c, "scenario"), *expect = json_object_get(c, "expect");
        json_t *tol_j = json_object_get(c, "tolerance");
        if (!json_is_object(scen) || !json_is_object(expect) || json_object_size(expect) == 0 ||
            (tol_j && (!json_is_number(tol_j) || !(json_number_value(tol_j) >= 0)))) {
            fprintf(stderr, "dtsim validate: %s: cases[%zu] (%s) needs a \"scenario\" object, a non-empty "
                            "\"expect\" object and a \"tolerance\" of 0 or more\n", cases_path, i, id);
            rc = 2;
            break;
        }
        double tol = tol_j ? json_number_value(tol_j) : 0.15;
        scenario_config s;
        config_error err;
        if (scenario_load_json(scen, base_dir, sets, n_sets, &s, &err) != 0) {
            fprintf(stderr, "dtsim validate: %s: cases[%zu] (%s): %s\n", cases_path, i, id, err.msg);
            rc = 2;
            break;
        }
        if (fidelity_flow >= 0)
            s.run.fidelity_flow = fidelity_flow;
        run_result r;
        int ran = run_scenario_folded_gated(&s, &r, &gate, &err);
        if (ran != 0) {
            fprintf(stderr, "dtsim validate: %s: %s\n", id, err.msg);
            scenario_free(&s);
            rc = ran == RUN_GATED || ran == FLOW_REFUSED ? 2 : 1; /* over the limits: refused */
            break;
        }
        const char *key;
        json_t *val;
        json_object_foreach(expect, key, val) {
            double predicted;
            if (!json_is_number(val) || run_result_lookup(&r, key, &predicted) != 0) {
                fprintf(stderr, "dtsim validate: %s: cases[%zu].expect.%s: not a numeric key of the "
                                "'dtsim run --json' output\n", cases_path, i, key);
                rc = 2;
                break;
            }
            double expected = json_number_value(val);
            /* relative to the expected figure; of an expected 0 the error can only be absolute (in
             * the figure's unit, and so labelled), and it stays out of the mean and largest relative
             * errors */
            int absolute = expected == 0;
            double error = absolute ? predicted - expected : (predicted - expected) / fabs(expected);
            int ok = fabs(error) <= tol;
            n_figures++;
            n_outside += !ok;
            if (!absolute) {
                n_relative++;
                sum_abs += fabs(error);
                max_abs = fmax(max_abs, fabs(error));
            }
            if (absolute)
                fprintf(human, "%-32s %-26s %12.4g %12.4g %+8.3g %6s (absolute: expected 0)\n", id, key, expected,
                        predicted, error, ok ? "yes" : "NO");
            else
                fprintf(human, "%-32s %-26s %12.4g %12.4g %+7.1f%% %6s\n", id, key, expected, predicted,
                        100 * error, ok ? "yes" : "NO");
            json_array_append_new(out_cases,
                                  json_pack("{s:s,s:s,s:f,s:f,s:f,s:s,s:f,s:b}", "id", id, "figure", key,
                                            "measured", expected, "predicted", predicted, "error", error,
                                            "error_kind", absolute ? "absolute" : "relative", "tolerance", tol,
                                            "within_tolerance", ok));
        }
        scenario_free(&s);
        if (rc)
            break;
    }
    if (rc == 0) {
        double mape = n_relative ? sum_abs / n_relative : 0;
        fprintf(human, "%d figures, mean absolute error %.1f%%, largest %.1f%%, %d outside tolerance\n",
                n_figures, 100 * mape, 100 * max_abs, n_outside);
        if (json_path) {
            json_t *doc = json_pack("{s:o,s:f,s:f,s:i}", "cases", out_cases, "mape", mape,
                                    "max_error", max_abs, "outside_tolerance", n_outside);
            out_cases = NULL;
            if (cli_write_json(doc, json_path) != 0)
                rc = 1;
            json_decref(doc);
        }
        if (max_mean >= 0 || max_err >= 0) {
            int ok = (max_mean < 0 || mape <= max_mean) && (max_err < 0 || max_abs <= max_err);
            fprintf(human, "aggregate gate: mean %.1f%% (limit %s), largest %.1f%% (limit %s): %s\n", 100 * mape,
                    max_mean >= 0 ? "set" : "none", 100 * max_abs, max_err >= 0 ? "set" : "none",
                    ok ? "pass" : "FAIL");
            if (rc == 0 && !ok)
                rc = 1;
        } else if (rc == 0 && n_outside > 0) {
            rc = 1;
        }
    }
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
    const cli_spec spec = {"validate", usage, options, &cases_path, "cases file"};
    int rc = cli_parse_args(&spec, argc, argv);
    if (rc == CLI_GO_ON && !cases_path) {
        usage(stderr);
        rc = 2;
    } else if (rc == CLI_GO_ON && cli_check_outputs("validate", (const cli_output[]){{"--json", json_path, 0, 1}}, 1)) {
        rc = 2;
    } else if (rc == CLI_GO_ON) {
        rc = validate_cases(cases_path, json_path, fidelity ? !strcmp(fidelity, "flow") : -1, max_mean, max_err,
                            sets.items, sets.count, &limits);
    }
    cli_list_free(&sets);
    return rc;
}
