/* dtsim async SCENARIO.json [--set PATH=VALUE]... [--json FILE|-] [--steps N] [--progress|--quiet] */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "async_ps.h"
#include "cli.h"
#include "cli_args.h"
#include "budget.h"
#include "progress.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: dtsim async SCENARIO.json [options]\n"
            "Asynchronous data parallelism with parameter servers (the scenario's parameter_server):\n"
            "workers push gradients to and pull parameters from sharded server hosts, with no global\n"
            "barrier (or a stale-synchronous bound). Reports throughput beside synchronous all-reduce\n"
            "on the same cluster, server link load and the staleness of the updates (docs/async.md).\n\n"
            "options:\n"
            "  --steps N                 steps per worker (default: parameter_server.steps, 100)\n"
            "  --set PATH=VALUE          override a scenario value by dotted path, validated as if\n"
            "                            the file said so; repeatable\n"
            "  --json FILE|-             write the result as JSON (\"-\": stdout only; the summary\n"
            "                            then goes to stderr)\n"
            "  --progress                the steps done on stderr every 2 s, with the time left\n"
            "                            (default: only when stderr is a terminal); stdout is the same\n"
            "  --quiet                   no progress, even on a terminal\n"
            BUDGET_HELP
            "  -h, --help                this help\n"
            "exit: 0 ok, 2 bad input, 1 runtime failure\n");
}

int cli_async(int argc, char **argv)
{
    const char *scenario_path = NULL, *json_path = NULL;
    cli_list sets = {0};
    int steps = 0, progress = 0, quiet = 0;
    budget_limits limits = {0, 0};
    const cli_option options[] = {
        BUDGET_OPTIONS(&limits),
        CLI_OPT_APPEND("set", &sets),
        CLI_OPT_INT("steps", &steps, 1, 1000000),
        CLI_OPT_STRING("json", &json_path),
        CLI_OPT_FLAG("progress", &progress),
        CLI_OPT_FLAG("quiet", &quiet),
        CLI_OPT_END,
    };
    const cli_output outs[] = {CLI_OUT_FILE_OR_STDOUT("--json", &json_path), CLI_OUT_END};
    const cli_spec spec = {"async", usage, options, &scenario_path, "scenario file", outs};
    scenario_config s;
    int rc = cli_parse_and_load(&spec, argc, argv, &sets, &s);
    if (rc != CLI_GO_ON)
        goto out;
    rc = 2;
    work_estimate est;
    budget_estimate_async(&s, steps > 0 ? steps : s.parameter_server.steps > 0 ? s.parameter_server.steps : 100, &est);
    if (budget_check("async", &est, &limits) != 0) {
        scenario_free(&s);
        goto out;
    }
    config_error err;
    async_report a;
    progress_meter meter;
    progress_start(&meter, "dtsim async", "step", progress_mode_of(progress, quiet));
    int got = async_ps_run_scenario(&s, steps, &meter, &a, &err);
    scenario_free(&s);
    if (got != 0) {
        fprintf(stderr, "dtsim async: %s: %s\n", scenario_path, err.msg);
        async_report_free(&a);
        rc = got == -2 ? 2 : 1;
        goto out;
    }
    int to_stdout = json_path && !strcmp(json_path, "-");
    async_report_print(&a, to_stdout ? stderr : stdout);
    rc = 0;
    if (json_path) {
        json_t *doc = async_report_to_json(&a);
        if (cli_write_json(doc, json_path) != 0)
            rc = 1;
        json_decref(doc);
    }
    async_report_free(&a);
out:
    cli_list_free(&sets);
    return rc;
}
