/* dtsim run SCENARIO.json [--fidelity analytic|flow] [--steps N] [--set PATH=VALUE]...
 *                         [--json FILE|-] [--trace FILE] [--full] [--progress|--quiet] */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "cli_args.h"
#include "budget.h"
#include "flow.h"
#include "progress.h"
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
            "  --steps N                 steps to report (default: run.steps, 1): one steady-state\n"
            "                            step is replayed, every step replaying the same, and N steps\n"
            "                            take N step times (JSON steps_time_s)\n"
            "  --set PATH=VALUE          override a scenario value by dotted path, validated as if\n"
            "                            the file said so; VALUE is JSON where it parses, else a\n"
            "                            string; repeatable\n"
            "  --json FILE|-             write the result as JSON (\"-\": stdout only; the summary\n"
            "                            then goes to stderr)\n"
            "  --trace FILE              write a Chrome/Perfetto trace of the step (of every\n"
            "                            micro-batch: implies --full)\n"
            "  --full                    replay every micro-batch of the step; by default an analytic\n"
            "                            step of many micro-batches is replayed short and extended,\n"
            "                            where its replay shows it periodic (the planner's fold,\n"
            "                            docs/planning.md): the same figures to float rounding\n"
            "  --progress                at flow fidelity, the replay's tasks done on stderr every\n"
            "                            2 s with the time left (default: on a terminal only)\n"
            "  --quiet                   no progress, even on a terminal\n"
            BUDGET_HELP
            "  -h, --help                this help\n"
            "exit: 0 ok; 3 the layout does not fit in the GPUs' memory (the summary and --json are\n"
            "written all the same, memory_gib.oom true); 2 bad input; 1 runtime failure\n");
}

/* --fidelity and --steps are overrides too, kept in command-line order with the --set ones
 * (of two for one path, the later wins). */
static int add_fidelity(const char *command, const char *flag, const char *value, void *sets)
{
    static const char *const fidelities[] = {"analytic", "flow", NULL};
    if (cli_parse_choice(command, flag, value, fidelities) < 0)
        return -1;
    return cli_list_addf(sets, "run.fidelity=\"%s\"", value);
}

static int add_steps(const char *command, const char *flag, const char *value, void *sets)
{
    int n;
    if (cli_parse_int(command, flag, value, 1, 1000000, &n) != 0)
        return -1;
    return cli_list_addf(sets, "run.steps=%d", n);
}

int cli_run(int argc, char **argv)
{
    const char *scenario_path = NULL, *json_path = NULL, *trace_path = NULL;
    int progress = 0, quiet = 0, full = 0;
    cli_list sets = {0};
    budget_limits limits = {0, 0};
    const cli_option options[] = {
        BUDGET_OPTIONS(&limits),
        CLI_OPT_CALL("fidelity", add_fidelity, &sets),
        CLI_OPT_CALL("steps", add_steps, &sets),
        CLI_OPT_APPEND("set", &sets),
        CLI_OPT_STRING("json", &json_path),
        CLI_OPT_STRING("trace", &trace_path),
        CLI_OPT_FLAG("full", &full),
        CLI_OPT_FLAG("progress", &progress),
        CLI_OPT_FLAG("quiet", &quiet),
        CLI_OPT_END,
    };
    const cli_output outs[] = {CLI_OUT_FILE_OR_STDOUT("--json", &json_path), CLI_OUT_FILE("--trace", &trace_path),
                               CLI_OUT_END};
    const cli_spec spec = {"run", usage, options, &scenario_path, "scenario file", outs};
    scenario_config s;
    int rc = cli_parse_and_load(&spec, argc, argv, &sets, &s);
    if (rc != CLI_GO_ON)
        goto out;
    rc = 2;
    /* priced: what runs first (a long step's fold attempt, sim/run.h); each replay after it is
     * held to the same limits before it runs */
    int every = full || trace_path;
    work_estimate est;
    budget_estimate_step(&s, every, &est);
    if (budget_check("run", &est, &limits) != 0) {
        scenario_free(&s);
        goto out;
    }
    config_error err;
    run_result r;
    s.run.flow_progress = 1 + (int)progress_mode_of(progress, quiet);
    budget_gate spend = {limits, 0};
    run_gate gate = {budget_gate_allow, &spend};
    int ran = every ? run_scenario_traced(&s, &r, trace_path, &err) : run_scenario_folded_gated(&s, &r, &gate, &err);
    if (ran == RUN_GATED) {
        fprintf(stderr, "dtsim run: %s\n", err.msg);
        scenario_free(&s);
        rc = 2;
        goto out;
    }
    if (ran != 0) {
        fprintf(stderr, "dtsim: %s: %s\n", scenario_path, err.msg);
        scenario_free(&s);
        rc = run_exit_code(ran); /* more than this machine holds: refused, nothing ran */
        goto out;
    }
    int to_stdout = json_path && !strcmp(json_path, "-");
    FILE *human = to_stdout ? stderr : stdout;
    run_result_print(&r, &s, human);
    /* stragglers and degraded links act at both fidelities (sim/step/step_faults.h), a failing
     * step only where flows carry it */
    if (s.faults.step_failure && !s.run.fidelity_flow)
        fprintf(human, "  note         faults.step_failure acts at --fidelity flow only\n");
    int faulty = s.faults.degraded_count > 0 || s.faults.straggler_count > 0 ||
                 (s.faults.step_failure && s.run.fidelity_flow);
    if (faulty) {
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
            int g = s.faults.stragglers[worst].gpu;
            rank_grid grid = scenario_rank_grid(&s);
            fprintf(human, "               pace set by GPU %d (stage %d, DP replica %d, TP rank %d) at %.2fx slower\n",
                    g, rank_grid_coord(&grid, g, GRID_PP), rank_grid_coord(&grid, g, GRID_DP),
                    rank_grid_coord(&grid, g, GRID_TP), s.faults.stragglers[worst].slowdown);
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
    if (rc == 0 && r.memory.oom) { /* a finding the user must not miss, also in scripts */
        fprintf(stderr, "dtsim: %s: the layout needs %.1f GiB per GPU at stage %d, more than the %.1f GiB it has: "
                        "exit 3 (ZeRO, recomputation or more pipeline or tensor parallelism may fit it; "
                        "`dtsim plan` searches)\n", scenario_path, r.memory.total, r.memory.worst_stage, r.memory.capacity);
        rc = 3;
    }
    scenario_free(&s);
out:
    cli_list_free(&sets);
    return rc;
}
