/* The closed loop; see closed_loop.h. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "cal_writer.h"
#include "collective.h"
#include "closed_loop.h"
#include "gpt.h"
#include "machine_check.h"
#include "engine_scenario.h"
#include "config.h"
#include "cost.h"
#include "run.h"
#include "workload.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The model as dtrain reads it (engine/gpt_config.c), the byte tokenizer's 256 tokens where the
 * file gives no vocabulary, into the run's shape. */
static int model_shape(const char *model, engine_run_shape *r, char *err, size_t errlen)
{
    gpt_config c;
    if (gpt_config_from_name(model, 256, &c, err, errlen) != 0)
        return -1;
    r->num_layers = c.num_layers;
    r->hidden = c.hidden;
    r->heads = c.heads;
    r->seq_len = c.seq_len;
    r->vocab = c.vocab;
    r->ffn_hidden = c.ffn_hidden;
    r->kv_groups = c.kv_groups;
    r->swiglu = c.swiglu;
    r->rmsnorm = c.rmsnorm;
    r->rope = c.rope;
    r->untied = c.untied;
    r->num_experts = c.num_experts;
    r->moe_topk = c.moe_topk;
    r->moe_capacity_factor = c.moe_capacity_factor;
    return 0;
}

/* The engine's profile name of a simulator op: a GEMM's dgrad and wgrad are timed together as
 * "<gemm>_bwd", the fused attention as "attention". */
static void engine_op_name(const char *sim_name, char *out, size_t n)
{
    snprintf(out, n, "%s", sim_name);
    char *cut = strstr(out, "_dgrad");
    if (!cut)
        cut = strstr(out, "_wgrad");
    if (cut)
        strcpy(cut, "_bwd");
    if (!strcmp(out, "attn_fused_bwd"))
        snprintf(out, n, "attention_bwd");
    else if (!strcmp(out, "attn_fused"))
        snprintf(out, n, "attention");
}

/* An op's name as the engine's profile has it (engine_op_name); a backward collective's is the
 * forward's with "_bwd" (the op list mirrors SP and EP collectives under their forward names). */
static void profile_op_name(const layer_op *op, int backward, char *out, size_t n)
{
    engine_op_name(op->name, out, n);
    size_t len = strlen(out);
    if (backward && op->kind == OPK_COMM && (len < 4 || strcmp(out + len - 4, "_bwd")))
        snprintf(out + len, n - len, "_bwd");
}

/* The profile's mean time of `name` in `layer` (-1: a model-level op), or -1. */
static double measured_op_in(json_t *profile, const char *name, int layer)
{
    json_t *arr = json_object_get(profile, "ops"), *e;
    size_t k;
    json_array_foreach(arr, k, e) if (json_integer_value(json_object_get(e, "layer")) == layer &&
                                      !strcmp(json_string_value(json_object_get(e, "op")), name))
        return json_number_value(json_object_get(e, "mean_s"));
    return -1;
}

/* The profile's mean time of `name` in layer 0, or -1. */
static double measured_op(json_t *profile, const char *name)
{
    json_t *arr = json_object_get(profile, "ops"), *e;
    size_t k;
    json_array_foreach(arr, k, e) if (json_integer_value(json_object_get(e, "layer")) == 0 &&
                                      !strcmp(json_string_value(json_object_get(e, "op")), name))
        return json_number_value(json_object_get(e, "mean_s"));
    return -1;
}

int closed_loop_run(const closed_loop_options *o)
{
    /* The prediction's scenario first: the same model, batch and precision on the platform with
     * the calibration, so bad input is refused before anything is measured. */
    char why[512];
    /* dtrain's ZeRO stage (its default 0 unless --zero): said, as the scenario's default stage
     * may differ. */
    engine_run_shape shape = {.micro_batch = o->micro_batch, .global_batch = (long long)o->micro_batch * o->dp,
                              .tp = o->tp, .pp = o->pp, .dp = o->dp, .vpp = 1, .zero = o->zero, .precision = o->precision,
                              .grad_reduce = o->grad_reduce, .powersgd_rank = o->powersgd_rank,
                              .overlap_grad_reduce = o->overlap_grad_reduce, .bucket_mb = o->bucket_mb,
                              .recompute = o->recompute, .sequence_parallel = o->sequence_parallel,
                              .overlap_param_gather = o->overlap_param_gather,
                              .tp_comm_overlap = o->tp_comm_overlap, .cp = o->cp,
                              .cp_comm_type = o->cp_comm_type, .ep = o->ep};
    if (model_shape(o->model, &shape, why, sizeof why) != 0) {
        fprintf(stderr, "dtcal validate: --model %s: %s\n", o->model, why);
        return 2;
    }
    scenario_config s;
    config_error err;
    if (engine_scenario_load(&shape, o->platform, o->calibration, &s, &err) != 0) {
        fprintf(stderr, "dtcal validate: %s\n", err.msg);
        return 2;
    }
    /* A calibration measured on another machine predicts this one only as far as they are alike. */
    char host[256], here[512], warning[2048];
    machine_this(o->device, host, sizeof host, here, sizeof here);
    if (machine_mismatch(o->calibration, s.calibration.source, s.calibration.host, s.calibration.device, host, here,
                         o->device, o->platform, warning, sizeof warning))
        fprintf(stderr, "dtcal validate: %s\n", warning);

    char log[] = "/tmp/dtcal_loop_XXXXXX", prof[64], cmd[4096];
    int fd = mkstemp(log);
    if (fd < 0) {
        scenario_free(&s);
        return 1;
    }
    close(fd);
    const char *log_path = o->dtrain_log ? o->dtrain_log : log; /* dtrain's --log-json */
    snprintf(prof, sizeof prof, "%s.profile.json", log);
    int ranks = o->tp * o->pp * o->dp * (o->cp > 1 ? o->cp : 1);
    char launcher[1024] = "", compress[32] = "none", overlap[64] = "";
    /* the layout and technique flags dtrain runs with (the scenario above was built from the same) */
    char extra[512] = "";
    size_t used = 0;
#define ADD_FLAG(...) (used += (size_t)snprintf(extra + used, sizeof extra - used, __VA_ARGS__))
    if (o->recompute && strcmp(o->recompute, "none"))
        ADD_FLAG(" --recompute-granularity %s", o->recompute);
    if (o->sequence_parallel)
        ADD_FLAG(" --sequence-parallel");
    if (o->zero)
        ADD_FLAG(" --zero %d", o->zero);
    if (o->overlap_param_gather)
        ADD_FLAG(" --overlap-param-gather");
    if (o->tp_comm_overlap)
        ADD_FLAG(" --tp-comm-overlap");
    if (o->cp > 1)
        ADD_FLAG(" --cp %d --cp-comm-type %s", o->cp, o->cp_comm_type ? o->cp_comm_type : "p2p");
    if (o->ep > 1)
        ADD_FLAG(" --expert-model-parallel-size %d", o->ep);
#undef ADD_FLAG
    if (o->powersgd_rank > 0)
        snprintf(compress, sizeof compress, "powersgd:%d", o->powersgd_rank);
    if (o->overlap_grad_reduce)
        snprintf(overlap, sizeof overlap, " --overlap-grad-reduce --bucket-mb %g", o->bucket_mb);
    /* More ranks than cores: a rank waiting in MPI must yield its core, not spin on it, or it
     * slows the rank that shares the core (measured: TP 2 x DP 2 on 2 cores, 0.198 s a step
     * spinning, 0.109 s yielding), a cost of the CPU stand-in that no GPU run has. */
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (ranks > 1)
        snprintf(launcher, sizeof launcher,
                 "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 '%s' --oversubscribe%s -np %d ", o->mpirun,
                 ranks > cores ? " --mca mpi_yield_when_idle 1" : "", ranks);
    /* Two runs: the step time from one without the profiler, whose events cost a GPU step time
     * (GPT-2 124M bf16 on an H100, 2026-11-26: 105.5 ms a step without, 107.6 ms with; the
     * host records two events an op, and the GPU waits for the host between short kernels),
     * then the per-op table from a short profiled run (its first step cold, the rest warm). */
    int st = 0;
    for (int profiled = 0; profiled < 2 && WIFEXITED(st) && WEXITSTATUS(st) == 0; profiled++) {
        char prof_log[96] = "";
        if (profiled)
            snprintf(prof_log, sizeof prof_log, "%s.profiled.jsonl", log);
        /* one BLAS thread per rank: the ranks share the machine's cores as the calibration assumes */
        snprintf(cmd, sizeof cmd,
                 "OPENBLAS_NUM_THREADS=1 %s'%s' --device %s --precision %s --model %s --micro-batch %d --global-batch %d "
                 "--tp %d --pp %d --dp %d --grad-reduce %s --grad-compress %s%s%s --steps %d --log-json '%s'%s%s",
                 launcher, o->dtrain, o->device, o->precision, o->model, o->micro_batch, o->micro_batch * o->dp, o->tp,
                 o->pp, o->dp, o->grad_reduce, compress, overlap, extra, profiled && o->steps > 4 ? 4 : o->steps,
                 profiled ? prof_log : log_path, profiled ? " --profile " : "", profiled ? prof : "");
        fprintf(stderr, "dtcal validate: %s: %s\n", profiled ? "profiling" : "measuring", cmd);
        st = system(cmd);
        if (profiled)
            unlink(prof_log);
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "dtcal validate: dtrain failed (status %d)\n", st);
        scenario_free(&s);
        unlink(log);
        return 1;
    }
    /* Measured: the median step time of the steps after the first (warm-up), and with experts
     * the median of the same steps' routing balance (engine/gpt_moe_ep.c) */
    FILE *f = fopen(log_path, "r");
    double times[4096], loads[4096];
    int n = 0, nload = 0;
    char line[8192];
    while (f && fgets(line, sizeof line, f) && n < 4096) {
        json_error_t je;
        json_t *j = json_loads(line, 0, &je);
        if (j && json_object_get(j, "step_time_s") && json_integer_value(json_object_get(j, "step")) > 1) {
            times[n++] = json_number_value(json_object_get(j, "step_time_s"));
            json_t *load = json_object_get(j, "moe_load_imbalance");
            if (json_is_number(load) && json_number_value(load) >= 1) /* >= 1 by its definition */
                loads[nload++] = json_number_value(load);
        }
        json_decref(j);
    }
    if (f)
        fclose(f);
    if (n == 0) {
        fprintf(stderr, "dtcal validate: no step times in dtrain's log (use --steps >= 2)\n");
        scenario_free(&s);
        unlink(log);
        return 1;
    }
    qsort(times, (size_t)n, sizeof(double), cmp_double);
    double measured = times[n / 2], spread_lo = times[n / 10], spread_hi = times[(n * 9) / 10];
    /* Every rank waits at each all-to-all for the EP rank whose experts got the most rows: the
     * run's own routing replaces the balanced router's floor dtsim takes without it
     * (workload_moe_load). The median, as the step time's: where the step time grows with the
     * imbalance, the median step's is the median imbalance. */
    double load_measured = 0, floor_load = workload_moe_load(&s), floor_s = 0;
    run_result r;
    if (nload > 0 && run_scenario(&s, &r, &err) == 0) /* the floor's prediction, to compare */
        floor_s = r.step_time_s;
    if (nload > 0) {
        qsort(loads, (size_t)nload, sizeof(double), cmp_double);
        load_measured = s.model.moe_load_imbalance = loads[nload / 2];
    }
    if (run_scenario(&s, &r, &err) != 0) {
        fprintf(stderr, "dtcal validate: %s\n", err.msg);
        scenario_free(&s);
        return 1;
    }
    double predicted = r.step_time_s, error = (predicted - measured) / measured;
    if (nload > 0)
        printf("moe_load_imbalance: %.4f (dtrain's routing: the busiest EP rank's rows over the mean, median of "
               "%d steps); the simulation's expert load %.4f (at the balanced router's floor %.4f: %.4f s, %+.1f%%)\n",
               load_measured, nload, workload_moe_load(&s), floor_load, floor_s, 100 * (floor_s - measured) / measured);

    /* Op by op: the profile's forward ops of layer 0 against the cost model's. */
    json_t *ops = json_array();
    json_error_t je;
    json_t *p = json_load_file(prof, 0, &je);
    layer_shape sh; /* the layer as the simulator costs it for this scenario (CP, SP and all) */
    workload_layer_shape(&s, &sh);
    layer_op lops[LAYER_OPS_MAX];
    int nl = layer_ops_forward(&sh, lops);
    cost_model cm;
    cost_model_init(&cm, &s);
    printf("%-14s %12s %12s %9s\n", "op (layer 0)", "measured ms", "predicted ms", "error");
    /* Forward ops one by one, then backward ops summed per engine kernel. */
    for (int pass = 0; pass < 2 && p; pass++) {
        nl = pass == 0 ? layer_ops_forward(&sh, lops) : layer_ops_backward(&sh, lops);
        char done[LAYER_OPS_MAX][64];
        int ndone = 0;
        for (int i = 0; i < nl; i++) {
            char name[64];
            profile_op_name(&lops[i], pass == 1, name, sizeof name);
            int dup = 0;
            for (int q = 0; q < ndone; q++)
                dup |= !strcmp(done[q], name);
            if (dup)
                continue;
            snprintf(done[ndone++], sizeof done[0], "%s", name);
            double pred = 0;
            for (int q = 0; q < nl; q++) {
                char other[64];
                profile_op_name(&lops[q], pass == 1, other, sizeof other);
                if (strcmp(other, name))
                    continue;
                if (lops[q].kind == OPK_COMM) /* the collective alone, its ranks all on this machine */
                    pred += collective_time(&s.platform, &s.calibration, lops[q].coll, lops[q].bytes,
                                            coll_group_of(lops[q].group, 1, s.platform.node.gpus)).time_s *
                            (lops[q].steps > 0 ? lops[q].steps : 1);
                else
                    pred += cost_compute_op_s(&cm, &lops[q]);
            }
            double meas = measured_op(p, name);
            if (meas < 0) {
                printf("%-14s %12s %12.4f   (the engine has no such kernel)\n", name, "-", pred * 1e3);
                continue;
            }
            printf("%-14s %12.4f %12.4f %+8.1f%%\n", name, meas * 1e3, pred * 1e3, 100 * (pred - meas) / meas);
            json_array_append_new(ops, json_pack("{s:s,s:f,s:f,s:f}", "op", name, "measured_s", meas, "predicted_s",
                                                 pred, "error", (pred - meas) / meas));
        }
    }
    /* The step's own compute tasks, once a step: the graph's task (stage 0's) against the
     * profile's op of the same name. */
    step_workload w;
    config_error werr;
    if (p && workload_build(&s, &w, &werr) == 0) {
        static const char *const step_ops[] = {"grad_norm", "optimizer"};
        for (size_t k = 0; k < sizeof step_ops / sizeof *step_ops; k++) {
            double pred = -1, meas = measured_op_in(p, step_ops[k], -1);
            for (int i = 0; i < w.n_tasks && pred < 0; i++)
                if (w.tasks[i].stage == 0 && !strcmp(w.tasks[i].name, step_ops[k]))
                    pred = w.tasks[i].duration_s;
            if (pred < 0 || meas <= 0)
                continue;
            printf("%-14s %12.4f %12.4f %+8.1f%%  (once a step)\n", step_ops[k], meas * 1e3, pred * 1e3,
                   100 * (pred - meas) / meas);
            json_array_append_new(ops, json_pack("{s:s,s:f,s:f,s:f}", "op", step_ops[k], "measured_s", meas,
                                                 "predicted_s", pred, "error", (pred - meas) / meas));
        }
        workload_free(&w);
    }
    /* The DP reduction as a whole (with PowerSGD: its compression too), measured, and the
     * simulator's account of the compression: the part of the step the options change. */
    double reduce_s = p ? measured_op_in(p, "dp_grad_reduce", -1) : -1;
    /* what the step waits for after its backward: the simulator's exposed DP communication */
    double dp_exposed_s = r.comm_exposed_s[COMM_DP], dp_total_s = r.comm_total_s[COMM_DP];
    if (reduce_s >= 0)
        printf("dp_grad_reduce: measured %.4f ms a step (mean; what the step waits for%s); simulator: DP comm "
               "%.4f ms exposed of %.4f ms\n", reduce_s * 1e3, o->overlap_grad_reduce ? ", buckets overlapped" : "",
               dp_exposed_s * 1e3, dp_total_s * 1e3);
    if (r.compression.present)
        printf("simulator's compression (%s): DP wire bytes x %.4f, DP comm %.4f ms without, %.4f ms saved, "
               "%.4f ms compression compute a step\n", r.compression.method, r.compression.bytes_ratio,
               r.compression.comm_without_s * 1e3, r.compression.comm_saved_s * 1e3, r.compression.compute_s * 1e3);
    /* The step's time in no profiled op (host waits between kernels, synchronisations): time
     * the simulator, which charges ops, cannot see. Per step: each op's warm mean times its calls
     * a step (its calls over the profiled run's steps). */
    int profiled_steps = o->steps > 4 ? 4 : o->steps;
    double in_ops = 0;
    json_t *prof_ops = p ? json_object_get(p, "ops") : NULL;
    for (size_t i = 0; i < json_array_size(prof_ops); i++) {
        json_t *e = json_array_get(prof_ops, i);
        if (json_is_true(json_object_get(e, "inside"))) /* counted in the op it ran within */
            continue;
        in_ops += json_number_value(json_object_get(e, "mean_s")) *
                  (double)json_integer_value(json_object_get(e, "count")) / profiled_steps;
    }
    if (prof_ops)
        printf("profiled ops: %.4f s a step; outside any op: %.4f s (%.1f%% of the measured step)\n", in_ops,
               measured - in_ops, 100 * (measured - in_ops) / measured);
    json_decref(p);
    printf("step time: measured %.4f s (median of %d steps; 10-90%% spread %.4f-%.4f s), predicted %.4f s, "
           "error %+.1f%%\n", measured, n, spread_lo, spread_hi, predicted, 100 * error);
    int rc = 0;
    if (o->json_path) {
        json_t *doc = json_pack("{s:f,s:f,s:f,s:f,s:f,s:o}", "measured_step_time_s", measured, "predicted_step_time_s",
                                predicted, "error", error, "measured_p10_s", spread_lo, "measured_p90_s", spread_hi,
                                "ops", ops);
        if (reduce_s >= 0)
            json_object_set_new(doc, "measured_dp_grad_reduce_s", json_real(reduce_s));
        json_object_set_new(doc, "predicted_dp_exposed_s", json_real(dp_exposed_s));
        if (load_measured > 0) { /* the run's, and what the simulation charged (a capacity caps it) */
            json_object_set_new(doc, "measured_moe_load_imbalance", json_real(load_measured));
            json_object_set_new(doc, "predicted_moe_load", json_real(workload_moe_load(&s)));
            json_object_set_new(doc, "predicted_step_time_at_floor_s", json_real(floor_s));
        }
        json_object_set_new(doc, "predicted_dp_total_s", json_real(dp_total_s));
        if (r.compression.present)
            json_object_set_new(doc, "predicted_compression",
                                json_pack("{s:f,s:f,s:f,s:f}", "bytes_ratio", r.compression.bytes_ratio,
                                          "comm_without_s", r.compression.comm_without_s, "comm_saved_s",
                                          r.compression.comm_saved_s, "compute_s", r.compression.compute_s));
        rc = cal_write(doc, o->json_path) ? 1 : 0;
        json_decref(doc);
    } else {
        json_decref(ops);
    }
    scenario_free(&s);
    unlink(log);
    unlink(prof);
    char trace[128];
    snprintf(trace, sizeof trace, "%s.trace.json", prof);
    unlink(trace);
    return rc;
}
