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
#include "run.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: dtsim validate CASES.json [--json FILE|-] [--fidelity analytic|flow] [--max-mean-error X]\n"
            "                      [--max-error X] [--set PATH=VALUE]...\n"
            "Simulates each case's scenario and compares the figures under \"expect\" with the\n"
            "prediction; a case passes when |predicted - expected| / expected <= its tolerance.\n"
            "  --max-mean-error X  instead of the per-case tolerances, pass when the mean absolute\n"
            "                      relative error is <= X (and --max-error, if given, holds)\n"
            "  --max-error X       pass when every figure's absolute relative error is <= X\n"
            "  --set PATH=VALUE    override one scenario value in every case, as 'dtsim run --set' does\n"
            "                      (e.g. model.attention=unfused for a table of runs made without\n"
            "                      fused attention whose cases do not say so)\n"
            "exit: 0 within tolerance, 1 outside, 2 bad input\n");
}

static const char *case_id(json_t *c, int i, char *buf, size_t n)
{
    const char *id = json_string_value(json_object_get(c, "id"));
    if (id)
        return id;
    snprintf(buf, n, "cases[%d]", i);
    return buf;
}

int cli_validate(int argc, char **argv)
{
    const char *cases_path = NULL, *json_path = NULL;
    double max_mean = -1, max_err = -1;
    int fidelity_flow = -1;
    enum { MAX_SETS = 64 };
    const char *sets[MAX_SETS];
    int n_sets = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--set") && i + 1 < argc) {
            if (n_sets == MAX_SETS) {
                fprintf(stderr, "dtsim validate: more than %d --set options\n", MAX_SETS);
                return 2;
            }
            sets[n_sets++] = argv[++i];
        } else if (!strcmp(argv[i], "--json") && i + 1 < argc) {
            json_path = argv[++i];
        } else if (!strcmp(argv[i], "--fidelity") && i + 1 < argc) {
            const char *v = argv[++i];
            if (strcmp(v, "analytic") && strcmp(v, "flow")) {
                fprintf(stderr, "dtsim validate: --fidelity: '%s' is not one of analytic, flow\n", v);
                return 2;
            }
            fidelity_flow = !strcmp(v, "flow");
        } else if ((!strcmp(argv[i], "--max-mean-error") || !strcmp(argv[i], "--max-error")) && i + 1 < argc) {
            char *end;
            double v = strtod(argv[i + 1], &end);
            if (*argv[i + 1] == 0 || *end || !(v >= 0)) {
                fprintf(stderr, "dtsim validate: %s: '%s' is not a non-negative number\n", argv[i], argv[i + 1]);
                return 2;
            }
            *(!strcmp(argv[i], "--max-error") ? &max_err : &max_mean) = v;
            i++;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "dtsim validate: unknown option or missing value: %s\n", argv[i]);
            return 2;
        } else if (!cases_path) {
            cases_path = argv[i];
        } else {
            fprintf(stderr, "dtsim validate: one cases file expected\n");
            return 2;
        }
    }
    if (!cases_path) {
        usage(stderr);
        return 2;
    }
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
    char dirbuf[4096];
    snprintf(dirbuf, sizeof dirbuf, "%s", cases_path);
    const char *base_dir = dirname(dirbuf);

    FILE *human = (json_path && !strcmp(json_path, "-")) ? stderr : stdout;
    json_t *out_cases = json_array();
    int n_figures = 0, n_outside = 0, rc = 0;
    double sum_abs = 0, max_abs = 0;
    fprintf(human, "%-32s %-26s %12s %12s %8s %6s\n", "case", "figure", "expected", "predicted", "error", "ok");

    for (size_t i = 0; i < json_array_size(cases); i++) {
        json_t *c = json_array_get(cases, i);
        char idbuf[64];
        const char *id = case_id(c, (int)i, idbuf, sizeof idbuf);
        json_t *scen = json_object_get(c, "scenario"), *expect = json_object_get(c, "expect");
        json_t *tol_j = json_object_get(c, "tolerance");
        if (!json_is_object(scen) || !json_is_object(expect) || json_object_size(expect) == 0 ||
            (tol_j && !json_is_number(tol_j))) {
            fprintf(stderr, "dtsim validate: %s: cases[%zu] (%s) needs a \"scenario\" object, a non-empty "
                            "\"expect\" object and a numeric \"tolerance\"\n", cases_path, i, id);
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
        if (run_scenario(&s, &r, &err) != 0) {
            fprintf(stderr, "dtsim validate: %s: %s\n", id, err.msg);
            scenario_free(&s);
            rc = 1;
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
            double error = expected != 0 ? (predicted - expected) / fabs(expected) : predicted - expected;
            int ok = fabs(error) <= tol;
            n_figures++;
            n_outside += !ok;
            sum_abs += fabs(error);
            max_abs = fmax(max_abs, fabs(error));
            fprintf(human, "%-32s %-26s %12.4g %12.4g %+7.1f%% %6s\n", id, key, expected, predicted,
                    100 * error, ok ? "yes" : "NO");
            json_array_append_new(out_cases,
                                  json_pack("{s:s,s:s,s:f,s:f,s:f,s:f,s:b}", "id", id, "figure", key,
                                            "measured", expected, "predicted", predicted, "error", error,
                                            "tolerance", tol, "within_tolerance", ok));
        }
        scenario_free(&s);
        if (rc)
            break;
    }
    if (rc == 0) {
        double mape = n_figures ? sum_abs / n_figures : 0;
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
