/* dtsim report SCENARIO.json --measured RUN_DIR [--warmup N] [--set PATH=VALUE]... [--json FILE|-]
 *
 * Puts a measured dtrain run (its --run-dir folder: config.json, metrics.jsonl) beside the
 * simulation of a scenario: step time, tokens/s, model TFLOP/s per GPU, MFU (when the run knew
 * its peak) and memory per GPU (when the run recorded it), each with the relative error
 * (simulated - measured) / measured, as `dtcal validate` reports it.
 *
 * Measured figures: the median step time of the steps after the first --warmup (default 2: the
 * first steps pay for allocation, page faults and, on a GPU, kernel loading); tokens/s, model
 * TFLOP/s per GPU and MFU follow from that median with the run's own tokens and model FLOPs per
 * step (config.json), so they are one consistent set rather than medians taken one by one.
 *
 * Without a SCENARIO, the run's own model, batch, layout and precision are simulated on a
 * platform and calibration given with --platform and --calibration (for a CPU run they default to
 * the shipped cpu-box files, as `dtcal validate`'s do), through the construction dtcal validate
 * uses (engine_scenario.h): a run folder does not say which platform and calibration model the
 * machine it ran on. With a SCENARIO, where its model, batch, layout or precision differ from
 * the run's, the report says so (stderr and "mismatches"), since the comparison is then of two
 * different things. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "cli_args.h"
#include "budget.h"
#include "config_json.h"
#include "engine_scenario.h"
#include "flow.h"
#include "run.h"
#include "workload.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: dtsim report [SCENARIO.json] --measured RUN_DIR [options]\n"
            "Simulates SCENARIO (or, without one, the run's own model, batch, layout and precision on\n"
            "--platform with --calibration) and puts the measured dtrain run in RUN_DIR (dtrain --run-dir)\n"
            "beside it: step time, tokens/s, model TFLOP/s per GPU, MFU and memory, with the relative error.\n\n"
            "options:\n"
            "  --measured RUN_DIR  the run folder (config.json, metrics.jsonl); required\n"
            "  --platform FILE     without SCENARIO: the machine the run used (CPU run: platforms/cpu-box.json)\n"
            "  --calibration FILE  without SCENARIO: its calibration (CPU run: calibrate/data/cpu-box-measured.json)\n"
            "  --warmup N          leading steps left out of the measured median (default 2)\n"
            "  --set PATH=VALUE    override a scenario value by dotted path (as dtsim run); repeatable\n"
            "  --json FILE|-       write the comparison as JSON (\"-\": stdout only, the table to stderr)\n"
            BUDGET_HELP
            "  -h, --help          this help\n"
            "The scenario should describe the run's model, batch, layout and precision on the machine it\n"
            "ran on; differences are listed. Its step is simulated as 'dtsim run' simulates it.\n"
            "exit: 0 ok, 2 bad input (or over the limits), 1 runtime failure\n");
}

/* What a logged step_time_s may be (load_measured says why) */
#define STEP_TIME_MIN_S 1e-9
#define STEP_TIME_MAX_S 1e7

typedef struct {
    int world, steps, used, warmup;
    long long used_from, used_to;  /* the steps of the median */
    double step_time_s;          /* median after warm-up */
    double tokens_per_step, flops_per_step, peak_tflops; /* peak 0: unknown */
    double memory_gib;           /* -1: not recorded */
    double moe_load;             /* median moe_load_imbalance after warm-up (dtrain's routing); 0: none */
    json_t *config;
} measured_run;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double positive(json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    return json_is_number(v) && json_number_value(v) > 0 ? json_number_value(v) : 0;
}

/* Reads RUN_DIR; 0, or 2 after saying what is wrong (file, line, key). */
static int load_measured(const char *dir, int warmup, measured_run *m)
{
    char path[4200];
    memset(m, 0, sizeof *m);
    m->warmup = warmup;
    m->memory_gib = -1;
    snprintf(path, sizeof path, "%s/config.json", dir);
    json_error_t je;
    m->config = json_load_file(path, 0, &je);
    if (!json_is_object(m->config)) {
        fprintf(stderr, "dtsim report: --measured %s: %s: %s (not a dtrain --run-dir folder?)\n", dir, path,
                m->config ? "not a JSON object" : je.text);
        return 2;
    }
    m->world = (int)json_integer_value(json_object_get(json_object_get(m->config, "layout"), "world_size"));
    m->tokens_per_step = positive(m->config, "tokens_per_step");
    m->flops_per_step = positive(m->config, "model_flops_per_step");
    m->peak_tflops = positive(json_object_get(m->config, "device"), "peak_tflops");
    double mem = positive(m->config, "memory_gib");
    if (mem > 0)
        m->memory_gib = mem;
    if (m->world < 1 || m->tokens_per_step <= 0 || m->flops_per_step <= 0) {
        fprintf(stderr,
                "dtsim report: %s: needs layout.world_size >= 1, tokens_per_step > 0 and model_flops_per_step > 0\n",
                path);
        return 2;
    }

    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "dtsim report: --measured %s: cannot read %s\n", dir, path);
        return 2;
    }
    size_t cap = 256, n = 0, nload = 0;
    double *times = malloc(cap * sizeof(double)), *loads = malloc(cap * sizeof(double));
    char line[16384];
    int lineno = 0, rc = 0;
    long long first = 0, first_line = 0, prev = 0; /* the first step, its line, the last step */
    while (fgets(line, sizeof line, f)) {
        lineno++;
        size_t len = strlen(line);
        if (line[len - 1] != '\n' && feof(f)) {
            /* dtrain writes a line in one write; one without its newline was cut by a crash */
            fprintf(stderr, "dtsim report: %s:%d: last line has no newline (cut short): left out\n", path, lineno);
            break;
        }
        json_t *j = json_loads(line, 0, &je);
        json_t *step = json_object_get(j, "step"), *dt = json_object_get(j, "step_time_s");
        json_t *load = json_object_get(j, "moe_load_imbalance"); /* the busiest EP rank's rows over the mean */
        long long no = json_integer_value(step);
        double t = json_number_value(dt);
        char why[256] = "";
        if (!json_is_object(j) || !json_is_integer(step) || !json_is_number(dt))
            snprintf(why, sizeof why, "%s", !j ? je.text : "needs an integer \"step\" and a number \"step_time_s\"");
        /* dtrain times a step with a nanosecond clock (engine/wall_clock.h): anything shorter was
         * not measured; a step of over 1e7 s (116 days) is not a training step, and within these
         * bounds every rate derived from it stays finite */
        else if (!(t >= STEP_TIME_MIN_S && t <= STEP_TIME_MAX_S))
            snprintf(why, sizeof why, "\"step_time_s\" %g is not a step time (%g..%g s)", t, STEP_TIME_MIN_S,
                     STEP_TIME_MAX_S);
        /* the range a scenario's model.moe_load_imbalance takes, where it goes */
        else if (load && !(json_is_number(load) && json_number_value(load) >= 1 && json_number_value(load) <= 1e3))
            snprintf(why, sizeof why, "\"moe_load_imbalance\" must be a number in 1..1000");
        /* dtrain logs every step once, from 1 up (a resumed run first drops the lines it redoes:
         * engine/run_dir.c): a repeat, a step back or a gap is a record merged or edited by hand,
         * whose median would not be of the steps it claims */
        else if (no < 1)
            snprintf(why, sizeof why, "step %lld: dtrain counts steps from 1", no);
        else if (m->steps > 0 && no <= prev && no >= first)
            snprintf(why, sizeof why, "step %lld is logged twice (line %lld has it too)", no,
                     first_line + (no - first));
        else if (m->steps > 0 && no <= prev)
            snprintf(why, sizeof why, "step %lld after step %lld (line %d): steps go up one at a time", no, prev,
                     lineno - 1);
        else if (m->steps > 0 && no != prev + 1) {
            char gap[64];
            if (no - prev == 2)
                snprintf(gap, sizeof gap, "step %lld is", prev + 1);
            else
                snprintf(gap, sizeof gap, "steps %lld..%lld are", prev + 1, no - 1);
            snprintf(why, sizeof why, "step %lld after step %lld (line %d): %s missing", no, prev, lineno - 1, gap);
        }
        if (*why) {
            fprintf(stderr, "dtsim report: %s:%d: %s\n", path, lineno, why);
            json_decref(j);
            rc = 2;
            break;
        }
        if (m->steps == 0) {
            first = no;
            first_line = lineno;
        }
        prev = no;
        m->steps++;
        if (no > warmup) {
            if (n == cap) {
                cap *= 2;
                times = realloc(times, cap * sizeof(double));
                loads = realloc(loads, cap * sizeof(double));
            }
            if (n == 0)
                m->used_from = no;
            m->used_to = no;
            times[n++] = json_number_value(dt);
            if (load)
                loads[nload++] = json_number_value(load);
        }
        json_decref(j);
    }
    fclose(f);
    if (rc == 0 && n == 0) {
        fprintf(stderr, "dtsim report: %s: %d steps, none after the %d warm-up steps (--warmup)\n", path, m->steps,
                warmup);
        rc = 2;
    }
    if (rc == 0) {
        qsort(times, n, sizeof(double), cmp_double);
        m->used = (int)n;
        m->step_time_s = n % 2 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
        if (nload > 0) { /* the median, as the step time's (dtcal validate does the same) */
            qsort(loads, nload, sizeof(double), cmp_double);
            m->moe_load = nload % 2 ? loads[nload / 2] : 0.5 * (loads[nload / 2 - 1] + loads[nload / 2]);
        }
    }
    /* the rates the report derives from config.json's figures and the median: finite, or the
     * table and its JSON would hold inf and nan */
    double tps = m->tokens_per_step / m->step_time_s, tflops = m->flops_per_step / (m->step_time_s * m->world) / 1e12;
    double mfu = m->peak_tflops > 0 ? tflops / m->peak_tflops : 1;
    if (rc == 0 && !(isfinite(tps) && tps > 0 && isfinite(tflops) && tflops > 0 && isfinite(mfu) && mfu > 0)) {
        fprintf(stderr, "dtsim report: %s/config.json: tokens_per_step %g, model_flops_per_step %g and "
                        "device.peak_tflops %g over the median step time %g s give no finite rate\n", dir,
                m->tokens_per_step, m->flops_per_step, m->peak_tflops, m->step_time_s);
        rc = 2;
    }
    free(times);
    free(loads);
    return rc;
}

/* The run's own configuration (config.json) as a scenario on platform/calibration; for a CPU run
 * they default to the shipped cpu-box files. 0, or -1 with err. */
static int load_run_scenario(const measured_run *m, const char *platform, const char *calibration,
                             scenario_config *s, config_error *err)
{
    json_t *model = json_object_get(m->config, "model"), *lay = json_object_get(m->config, "layout"),
           *opt = json_object_get(m->config, "options");
    const char *backend = json_string_value(json_object_get(json_object_get(m->config, "device"), "backend"));
    int cpu = backend && !strcmp(backend, "cpu");
    if ((!platform || !calibration) && !cpu)
        return config_fail(err, "a %s run needs --platform and --calibration (the machine it ran on), or a SCENARIO",
                           backend ? backend : "non-CPU");
    char plat_path[CFG_PATH_MAX], cal_path[CFG_PATH_MAX];
    const char *plat_name = platform ? platform : "platforms/cpu-box.json";
    const char *cal_name = calibration ? calibration : "calibrate/data/cpu-box-measured.json";
    if (config_resolve_path(plat_name, ".", plat_path, sizeof plat_path) != 0)
        return config_fail(err, "--platform %s: not found (looked here and in the repository root)", plat_name);
    if (config_resolve_path(cal_name, ".", cal_path, sizeof cal_path) != 0)
        return config_fail(err, "--calibration %s: not found (looked here and in the repository root)", cal_name);
    engine_run_shape r = {
        .num_layers = json_integer_value(json_object_get(model, "num_layers")),
        .hidden = json_integer_value(json_object_get(model, "hidden")),
        .heads = json_integer_value(json_object_get(model, "heads")),
        .seq_len = json_integer_value(json_object_get(model, "seq_len")),
        .vocab = json_integer_value(json_object_get(model, "vocab")),
        .ffn_hidden = json_integer_value(json_object_get(model, "ffn_hidden")),
        .kv_groups = json_integer_value(json_object_get(model, "num_query_groups")),
        .swiglu = json_is_true(json_object_get(model, "swiglu")),
        .rmsnorm = !strcmp(json_string_value(json_object_get(model, "normalization")) ?: "", "RMSNorm"),
        .rope = !strcmp(json_string_value(json_object_get(model, "position_embedding_type")) ?: "", "rope"),
        .untied = json_is_true(json_object_get(model, "untie_embeddings_and_output_weights")),
        .num_experts = (int)json_integer_value(json_object_get(model, "num_experts")),
        .moe_topk = (int)json_integer_value(json_object_get(model, "moe_router_topk")),
        .moe_capacity_factor = json_number_value(json_object_get(model, "moe_expert_capacity_factor")),
        .micro_batch = json_integer_value(json_object_get(opt, "micro_batch")),
        .global_batch = json_integer_value(json_object_get(opt, "global_batch")),
        .tp = (int)json_integer_value(json_object_get(lay, "tp")),
        .pp = (int)json_integer_value(json_object_get(lay, "pp")),
        .dp = (int)json_integer_value(json_object_get(lay, "dp")),
        .cp = (int)json_integer_value(json_object_get(lay, "cp")),
        .ep = (int)json_integer_value(json_object_get(lay, "ep")), /* absent before dtrain recorded it: 1 */
        /* runs recorded before dtrain had ring attention gathered K and V */
        .cp_comm_type = json_string_value(json_object_get(opt, "cp_comm_type")) ?: "all_gather",
        .vpp = (int)json_integer_value(json_object_get(lay, "vpp")),
        .zero = (int)json_integer_value(json_object_get(lay, "zero")),
        .precision = json_string_value(json_object_get(m->config, "precision")),
        .schedule = json_string_value(json_object_get(lay, "schedule")),
        .grad_reduce = json_string_value(json_object_get(opt, "grad_reduce")),
        .powersgd_rank = (int)json_integer_value(json_object_get(opt, "grad_compress_rank")),
        .overlap_grad_reduce = json_is_true(json_object_get(opt, "overlap_grad_reduce")),
        .bucket_mb = json_number_value(json_object_get(opt, "bucket_mb")),
        .recompute = json_string_value(json_object_get(opt, "recompute_granularity")),
        .sequence_parallel = json_is_true(json_object_get(opt, "sequence_parallel")),
        .overlap_param_gather = json_is_true(json_object_get(opt, "overlap_param_gather")),
        .tp_comm_overlap = json_is_true(json_object_get(opt, "tp_comm_overlap")),
        .recompute_method = json_string_value(json_object_get(opt, "recompute_method")),
        .recompute_num_layers = (int)json_integer_value(json_object_get(opt, "recompute_num_layers")),
    };
    if (r.num_layers < 1 || r.hidden < 1 || r.heads < 1 || r.seq_len < 1 || r.vocab < 1 || r.micro_batch < 1 ||
        r.global_batch < 1 || r.tp < 1 || r.pp < 1 || r.dp < 1 || !r.precision)
        return config_fail(err, "the run's config.json lacks its model (num_layers, hidden, heads, seq_len, vocab), "
                                "batch (options.micro_batch, global_batch), layout (tp, pp, dp) or precision");
    return engine_scenario_load(&r, plat_path, cal_path, s, err);
}

/* Differences between what the run trained and what the scenario describes. */
static json_t *mismatches(const measured_run *m, const scenario_config *s)
{
    json_t *out = json_array();
    json_t *model = json_object_get(m->config, "model"), *lay = json_object_get(m->config, "layout"),
           *opt = json_object_get(m->config, "options");
    struct {
        const char *what;
        long long run, sim;
    } pairs[] = {
        {"model.num_layers", json_integer_value(json_object_get(model, "num_layers")), s->model.num_layers},
        {"model.hidden_size", json_integer_value(json_object_get(model, "hidden")), s->model.hidden_size},
        {"model.num_attention_heads", json_integer_value(json_object_get(model, "heads")),
         s->model.num_attention_heads},
        {"model.seq_length", json_integer_value(json_object_get(model, "seq_len")), s->model.seq_length},
        {"model.vocab_size", json_integer_value(json_object_get(model, "vocab")), s->model.vocab_size},
        {"training.global_batch_size", json_integer_value(json_object_get(opt, "global_batch")),
         s->training.global_batch_size},
        {"training.micro_batch_size", json_integer_value(json_object_get(opt, "micro_batch")),
         s->training.micro_batch_size},
        {"parallel.tensor_model_parallel_size", json_integer_value(json_object_get(lay, "tp")), s->parallel.tp},
        {"parallel.pipeline_model_parallel_size", json_integer_value(json_object_get(lay, "pp")), s->parallel.pp},
        {"parallel.data_parallel_size", json_integer_value(json_object_get(lay, "dp")), s->parallel.dp},
        {"parallel.context_parallel_size", json_integer_value(json_object_get(lay, "cp")) > 1
                                               ? json_integer_value(json_object_get(lay, "cp")) : 1,
         s->parallel.cp},
        {"parallel.expert_model_parallel_size", json_integer_value(json_object_get(lay, "ep")) > 1
                                                    ? json_integer_value(json_object_get(lay, "ep")) : 1,
         s->parallel.ep},
    };
    char text[512];
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
        if (pairs[i].run != pairs[i].sim) {
            snprintf(text, sizeof text, "%s: the run has %lld, the scenario %lld", pairs[i].what, pairs[i].run,
                     pairs[i].sim);
            json_array_append_new(out, json_string(text));
        }
    /* the run's context-parallel attention (runs recorded before the key gathered K and V) */
    static const char *const cp_comm[] = {"p2p", "all_gather", "a2a"};
    const char *cpc = json_string_value(json_object_get(opt, "cp_comm_type")) ?: "all_gather";
    if (s->parallel.cp > 1 && strcmp(cpc, cp_comm[s->parallel.cp_comm])) {
        snprintf(text, sizeof text, "parallel.cp_comm_type: the run has %s, the scenario %s", cpc,
                 cp_comm[s->parallel.cp_comm]);
        json_array_append_new(out, json_string(text));
    }
    const char *prec = json_string_value(json_object_get(m->config, "precision"));
    if (prec && strcmp(prec, precision_name(s->training.precision))) {
        snprintf(text, sizeof text, "training.precision: the run has %s, the scenario %s", prec,
                 precision_name(s->training.precision));
        json_array_append_new(out, json_string(text));
    }
    return out;
}

/* {"measured", "simulated", "error"}; measured < 0 means not measured (null, no error). */
static json_t *pair(double measured, double simulated)
{
    return json_pack("{s:o,s:f,s:o}", "measured", measured >= 0 ? json_real(measured) : json_null(), "simulated",
                     simulated, "error", measured > 0 ? json_real((simulated - measured) / measured) : json_null());
}

static void print_row(FILE *f, const char *name, const char *unit, double measured, double simulated)
{
    if (measured >= 0)
        fprintf(f, "  %-22s %14.6g %14.6g  %+7.1f%%  %s\n", name, measured, simulated,
                measured > 0 ? 100 * (simulated - measured) / measured : 0.0, unit);
    else
        fprintf(f, "  %-22s %14s %14.6g  %8s  %s\n", name, "-", simulated, "", unit);
}

int cli_report(int argc, char **argv)
{
    const char *scenario_path = NULL, *run_path = NULL, *json_path = NULL, *platform = NULL, *calibration = NULL;
    cli_list sets = {0};
    int warmup = 2;
    measured_run m = {0};
    budget_limits limits = {0, 0};
    const cli_option options[] = {
        BUDGET_OPTIONS(&limits),
        CLI_OPT_APPEND("set", &sets),
        CLI_OPT_STRING("measured", &run_path),
        CLI_OPT_STRING("json", &json_path),
        CLI_OPT_STRING("platform", &platform),
        CLI_OPT_STRING("calibration", &calibration),
        CLI_OPT_INT("warmup", &warmup, 0, 1000000),
        CLI_OPT_END,
    };
    const cli_output outs[] = {CLI_OUT_FILE_OR_STDOUT("--json", &json_path), CLI_OUT_END};
    const cli_spec spec = {"report", usage, options, &scenario_path, "scenario file", outs};
    int rc = cli_parse_args(&spec, argc, argv);
    if (rc != CLI_GO_ON)
        goto out;
    rc = 2;
    if (!run_path) {
        fprintf(stderr, "dtsim report: --measured RUN_DIR is required\n");
        usage(stderr);
        goto out;
    }
    if (scenario_path ? platform || calibration : sets.count > 0) {
        fprintf(stderr, "dtsim report: %s\n", scenario_path ? "--platform and --calibration are for a report "
                                                              "without SCENARIO (the scenario names its own)"
                                                            : "--set needs a SCENARIO (without one, the run's own "
                                                              "configuration is simulated)");
        goto out;
    }
    if (load_measured(run_path, warmup, &m) != 0)
        goto out;
    scenario_config s;
    config_error err;
    if (scenario_path ? scenario_load(scenario_path, sets.items, sets.count, &s, &err) != 0
                      : load_run_scenario(&m, platform, calibration, &s, &err) != 0) {
        fprintf(stderr, "dtsim%s: %s\n", scenario_path ? "" : " report", err.msg);
        goto out;
    }
    /* The run's own routing (its busiest EP rank's rows over the mean) in place of the balanced
     * router's floor, as dtcal validate does; a SCENARIO keeps its own moe_load_imbalance. */
    if (!scenario_path && m.moe_load > 0 && s.model.num_experts > 0)
        s.model.moe_load_imbalance = m.moe_load;
    work_estimate est;
    budget_estimate_step(&s, 0, &est);
    if (budget_check("report", &est, &limits) != 0) {
        scenario_free(&s);
        goto out;
    }
    budget_gate spend = {limits, 0};
    run_gate gate = {budget_gate_allow, &spend};
    run_result r;
    int ran = run_scenario_folded_gated(&s, &r, &gate, &err);
    if (ran != 0) {
        fprintf(stderr, "dtsim: %s: %s\n", scenario_path ? scenario_path : run_path, err.msg);
        scenario_free(&s);
        rc = run_exit_code(ran);
        goto out;
    }
    double tps = m.tokens_per_step / m.step_time_s;
    double tflops = m.flops_per_step / (m.step_time_s * m.world) / 1e12;
    double mfu = m.peak_tflops > 0 ? tflops / m.peak_tflops : -1;
    json_t *diff = mismatches(&m, &s);

    FILE *human = json_path && !strcmp(json_path, "-") ? stderr : stdout;
    fprintf(human, "dtsim report: %s (simulated, %s) against %s (measured: median of %d step%s, %lld..%lld, after "
                   "%d warm-up)\n", s.name, r.fidelity_flow ? "flow" : "analytic", run_path, m.used,
            m.used == 1 ? "" : "s", m.used_from, m.used_to, warmup);
    fprintf(human, "  %-22s %14s %14s  %8s\n", "", "measured", "simulated", "error");
    print_row(human, "step time", "s", m.step_time_s, r.step_time_s);
    print_row(human, "tokens/s", "whole job", tps, r.tokens_per_s);
    print_row(human, "model TFLOP/s per GPU", "", tflops, r.model_tflops_per_gpu);
    print_row(human, "MFU", m.peak_tflops > 0 ? "" : "(the run knew no peak: --peak-tflops)", mfu, r.mfu);
    print_row(human, "memory per GPU", m.memory_gib >= 0 ? "GiB" : "GiB (not recorded by the run)", m.memory_gib,
              r.memory.total);
    if (s.model.num_experts > 0)
        print_row(human, "MoE load imbalance", m.moe_load > 0 ? "busiest EP rank's rows / mean" : "(not recorded)",
                  m.moe_load > 0 ? m.moe_load : -1, workload_moe_load(&s));
    for (size_t i = 0; i < json_array_size(diff); i++)
        fprintf(stderr, "dtsim report: warning: %s\n", json_string_value(json_array_get(diff, i)));

    rc = 0;
    if (json_path) {
        json_t *doc = json_pack("{s:s,s:s,s:s,s:i,s:i,s:i,s:o,s:o,s:o,s:o,s:o,s:o}", "scenario", s.name, "run_dir",
                                run_path, "fidelity", r.fidelity_flow ? "flow" : "analytic", "warmup_steps", warmup,
                                "steps", m.steps, "steps_used", m.used, "step_time_s", pair(m.step_time_s, r.step_time_s),
                                "tokens_per_s", pair(tps, r.tokens_per_s), "model_tflops_per_gpu",
                                pair(tflops, r.model_tflops_per_gpu), "mfu", pair(mfu, r.mfu), "memory_gib",
                                pair(m.memory_gib, r.memory.total), "mismatches", json_incref(diff));
        if (doc && s.model.num_experts > 0)
            json_object_set_new(doc, "moe_load_imbalance", pair(m.moe_load > 0 ? m.moe_load : -1, workload_moe_load(&s)));
        if (cli_write_json(doc, json_path) != 0)
            rc = 1;
        json_decref(doc);
    }
    json_decref(diff);
    scenario_free(&s);
out:
    json_decref(m.config);
    cli_list_free(&sets);
    return rc;
}
