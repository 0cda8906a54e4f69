/* dtsim run SCENARIO.json [--fidelity analytic|flow] [--steps N] [--set PATH=VALUE]...
 *                         [--json FILE|-] [--trace FILE] */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "run.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: dtsim run SCENARIO.json [options]\n"
            "Simulates training steps of a scenario and reports step time, MFU, bubbles,\n"
            "communication and memory per GPU.\n\n"
            "options:\n"
            "  --fidelity analytic|flow  analytic: critical path, no contention (default: the\n"
            "                            scenario's run.fidelity); flow: SimGrid with contention\n"
            "  --steps N                 steps to simulate (default: run.steps, 1)\n"
            "  --set PATH=VALUE          override a scenario value by dotted path, validated as if\n"
            "                            the file said so; VALUE is JSON where it parses, else a\n"
            "                            string; repeatable\n"
            "  --json FILE|-             write the result as JSON (\"-\": stdout only; the summary\n"
            "                            then goes to stderr)\n"
            "  --trace FILE              write a Chrome/Perfetto trace of the step\n"
            "  -h, --help                this help\n"
            "exit: 0 ok, 2 bad input, 1 runtime failure\n");
}

int cli_run(int argc, char **argv)
{
    const char *scenario_path = NULL, *json_path = NULL, *trace_path = NULL;
    const char **sets = calloc((size_t)argc * 2 + 2, sizeof *sets);
    char *owned[2] = {NULL, NULL};
    int n_sets = 0, rc = 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_value = i + 1 < argc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            rc = 0;
            goto out;
        } else if (!strcmp(a, "--set") && has_value) {
            sets[n_sets++] = argv[++i];
        } else if (!strcmp(a, "--fidelity") && has_value) {
            const char *v = argv[++i];
            if (strcmp(v, "analytic") && strcmp(v, "flow")) {
                fprintf(stderr, "dtsim run: --fidelity: '%s' is not one of analytic, flow\n", v);
                goto out;
            }
            owned[0] = malloc(strlen(v) + 32);
            sprintf(owned[0], "run.fidelity=\"%s\"", v);
            sets[n_sets++] = owned[0];
        } else if (!strcmp(a, "--steps") && has_value) {
            int n;
            if (cli_parse_int("run", "--steps", argv[++i], 1, 1000000, &n) != 0)
                goto out;
            owned[1] = malloc(48);
            snprintf(owned[1], 48, "run.steps=%d", n);
            sets[n_sets++] = owned[1];
        } else if (!strcmp(a, "--json") && has_value) {
            json_path = argv[++i];
        } else if (!strcmp(a, "--trace") && has_value) {
            trace_path = argv[++i];
        } else if (cli_take_scenario_arg("run", a, &scenario_path) != 0) {
            goto out;
        }
    }
    if (!scenario_path) {
        usage(stderr);
        goto out;
    }

    scenario_config s;
    config_error err;
    if (scenario_load(scenario_path, sets, n_sets, &s, &err) != 0) {
        fprintf(stderr, "dtsim: %s\n", err.msg);
        goto out;
    }
    run_result r;
    if (run_scenario_traced(&s, &r, trace_path, &err) != 0) {
        fprintf(stderr, "dtsim: %s: %s\n", scenario_path, err.msg);
        scenario_free(&s);
        rc = 1;
        goto out;
    }
    int to_stdout = json_path && !strcmp(json_path, "-");
    FILE *human = to_stdout ? stderr : stdout;
    run_result_print(&r, &s, human);
    int faulty = s.faults.degraded_count > 0 || s.faults.straggler_count > 0 || s.faults.step_failure;
    if (faulty && !s.run.fidelity_flow)
        fprintf(human, "  note         faults.degraded_links, stragglers and step_failure act at --fidelity flow only\n");
    if (faulty && s.run.fidelity_flow) {
        /* The same step on a healthy cluster, to say what the faults cost. */
        scenario_config healthy = s;
        healthy.faults.degraded_count = 0;
        healthy.faults.straggler_count = 0;
        healthy.faults.step_failure = 0;
        run_result h;
        if (run_scenario(&healthy, &h, &err) == 0)
            fprintf(human, "  faults       step %.4f s against %.4f s healthy (%+.1f%%)\n", r.step_time_s,
                    h.step_time_s, 100 * (r.step_time_s / h.step_time_s - 1));
        for (int i = 0; i < s.faults.degraded_count; i++)
            fprintf(human, "               NIC %d of node %d at %.0f%% bandwidth%s\n", s.faults.degraded[i].nic,
                    s.faults.degraded[i].node, 100 * s.faults.degraded[i].bandwidth_factor,
                    s.faults.degraded[i].flap_period_s > 0 ? " while down (flapping)" : "");
        int worst = -1;
        for (int i = 0; i < s.faults.straggler_count; i++)
            if (worst < 0 || s.faults.stragglers[i].slowdown > s.faults.stragglers[worst].slowdown)
                worst = i;
        if (worst >= 0) {
            int g = s.faults.stragglers[worst].gpu, group = s.parallel.tp * s.parallel.cp;
            fprintf(human, "               pace set by GPU %d (stage %d, DP replica %d, TP rank %d) at %.2fx slower\n",
                    g, (g / group) % s.parallel.pp, g / (group * s.parallel.pp), g % s.parallel.tp,
                    s.faults.stragglers[worst].slowdown);
        }
    }
    rc = 0;
    if (json_path) {
        json_t *doc = run_result_to_json(&r);
        if (cli_write_json(doc, json_path) != 0)
            rc = 1;
        json_decref(doc);
    }
    if (trace_path)
        fprintf(to_stdout ? stderr : stdout, "  trace        %s (open in ui.perfetto.dev)\n", trace_path);
    scenario_free(&s);
out:
    free(owned[0]);
    free(owned[1]);
    free(sets);
    return rc;
}
