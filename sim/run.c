/* Simulates one scenario and derives the metrics of DESIGN.md (see run.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "flow/flow.h"
#include "memory.h"
#include "params.h"
#include "data_loader.h"
#include "trace.h"
#include "run.h"
#include "checkpoint_cost.h"
#include "step_faults.h"
#include "workload.h"
#include "compression_effect.h"
#include "wall_clock.h"

/* The layer of the whole model, one sequence, no parallel split: what DESIGN.md's FLOP
 * formulas count. */
static layer_shape unsplit_shape(const scenario_config *s)
{
    layer_shape sh;
    workload_layer_shape(s, &sh);
    sh.micro_batch = 1;
    sh.tp = sh.cp = sh.ep = 1;
    sh.sequence_parallel = 0;
    return sh;
}

double run_model_flops_per_step(const scenario_config *s)
{
    layer_shape sh = unsplit_shape(s);
    double fwd = (double)s->model.num_layers * layer_forward_flops_per_sequence(&sh)
                 + lm_head_forward_flops_per_sequence(s->model.seq_length, s->model.hidden_size,
                                                      s->model.vocab_size);
    return 3.0 * fwd * (double)s->training.global_batch_size;
}

double run_hardware_flops_per_step(const scenario_config *s)
{
    layer_shape sh = unsplit_shape(s);
    double L = (double)s->model.num_layers, seqs = (double)s->training.global_batch_size;
    double extra = 0;
    if (s->training.recompute == RECOMPUTE_FULL)
        extra = L * layer_forward_flops_per_sequence(&sh);
    else if (s->training.recompute == RECOMPUTE_SELECTIVE)
        extra = L * 4.0 * (double)sh.seq_length * (double)sh.seq_length * scenario_query_width(s);
    return run_model_flops_per_step(s) + extra * seqs;
}

double run_flow_bucket_mb(const scenario_config *s)
{
    int half = s->training.precision != PREC_FP32 && s->training.precision != PREC_TF32;
    double grad_mb = params_stage_per_gpu(s, 0) * (half ? 2 : 4) / 1048576.0;
    double mb = params_dp_bucket_bytes(s) / 1048576.0;
    return grad_mb / FLOW_MAX_BUCKETS > mb ? grad_mb / FLOW_MAX_BUCKETS : mb;
}

/* A stage's memory model (the worst stage's, `worst`) as a run reports it. */
static void memory_report(const scenario_config *s, const memory_breakdown *mb, int worst, run_memory *out)
{
    const double gib = 1024.0 * 1024.0 * 1024.0;
    out->weights = mb->weights / gib;
    out->gradients = mb->gradients / gib;
    out->optimizer = mb->optimizer / gib;
    out->activations = mb->activations / gib;
    out->buffers = mb->buffers / gib;
    out->total = mb->total / gib;
    out->capacity = mb->capacity / gib;
    out->oom = mb->oom;
    out->worst_stage = worst;
    double host = 0, nvme = 0;
    memory_offload_per_node(s, &host, &nvme);
    out->host_gib = host / gib;
    out->nvme_gib = nvme / gib;
}

/* The memory of the scenario's worst stage on its schedule built already (a run's, which its graph
 * shares). */
static void memory_on_schedule(const scenario_config *s, const pipeline_schedule *sched, run_memory *out)
{
    memset(out, 0, sizeof *out);
    memory_breakdown mb;
    int worst = 0;
    if (memory_model_worst_stage(s, sched, &mb, &worst) == 0)
        memory_report(s, &mb, worst, out);
}

/* The memory model needs only each stage's peak of micro-batches in flight, which the schedule's
 * shape gives without building it (pipeline_peak_in_flight: the warm-up and one more, m v under
 * GPipe): the planner asks this of every valid candidate, and a step of millions of micro-batches
 * would hold gigabytes of schedule. tests/memory/test_memory.c holds it to the whole schedule. */
int run_memory_peaks(const scenario_config *s, int *peak)
{
    int P = s->parallel.pp > 0 ? s->parallel.pp : 1, V = s->parallel.vpp > 0 ? s->parallel.vpp : 1;
    int m = (int)scenario_micro_batches(s); /* as scenario_schedule has it */
    char why[256];
    if (pipeline_schedule_check(s->parallel.schedule, P, m, V, why, sizeof why) != 0)
        return -1;
    for (int p = 0; p < P; p++)
        peak[p] = pipeline_peak_in_flight(s->parallel.schedule, P, m, V, p);
    return 0;
}

void run_memory_at(const scenario_config *s, const int *peak, run_memory *out)
{
    memset(out, 0, sizeof *out);
    memory_breakdown mb;
    int worst = 0;
    if (memory_model_worst_stage_at(s, s->parallel.pp > 0 ? s->parallel.pp : 1, peak, &mb, &worst) == 0)
        memory_report(s, &mb, worst, out);
}

void run_memory_estimate(const scenario_config *s, run_memory *out)
{
    memset(out, 0, sizeof *out);
    int *peak = malloc((size_t)(s->parallel.pp > 0 ? s->parallel.pp : 1) * sizeof *peak);
    if (peak && run_memory_peaks(s, peak) == 0)
        run_memory_at(s, peak, out);
    free(peak);
}

/* Flow fidelity simulates every gradient bucket of every replica as ring flows; buckets are
 * coarsened to at most FLOW_MAX_BUCKETS per stage to bound the number of flows (the granularity
 * choice of docs/flow.md, whose error it measures). */
static scenario_config coarsened(const scenario_config *s)
{
    scenario_config coarse = *s;
    if (s->run.fidelity_flow)
        coarse.run.flow_bucket_mb = run_flow_bucket_mb(s);
    return coarse;
}

int run_scenario(const scenario_config *s, run_result *r, config_error *err)
{
    return run_scenario_traced(s, r, NULL, err);
}

int run_exit_code(int ran)
{
    return ran == RUN_GATED || ran == FLOW_REFUSED ? 2 : 1;
}

int run_scenario_traced(const scenario_config *s, run_result *r, const char *trace_path, config_error *err)
{
    return run_scenario_stages(s, r, trace_path, NULL, err);
}

int run_scenario_stages(const scenario_config *s, run_result *r, const char *trace_path, double *stage_bubble_s,
                        config_error *err)
{
    double t0 = wall_clock_s();
    memset(r, 0, sizeof *r);
    /* one schedule for the step's graph and its memory */
    pipeline_schedule sched;
    if (scenario_schedule(s, &sched, err) != 0)
        return -1;
    step_workload w;
    scenario_config coarse = coarsened(s);
    int built = workload_build_scheduled(&coarse, &sched, &w, err);
    if (built == 0)
        memory_on_schedule(s, &sched, &r->memory);
    pipeline_schedule_free(&sched);
    if (built != 0)
        return -1;
    int rc = run_graph_replay(s, &w, r, trace_path, stage_bubble_s, NULL, err);
    workload_free(&w);
    r->wall_s = wall_clock_s() - t0;
    return rc;
}

int run_graph_build(const scenario_config *s, step_workload *w, config_error *err)
{
    scenario_config coarse = coarsened(s);
    return workload_build(&coarse, w, err);
}

int run_graph_replay(const scenario_config *s, step_workload *w_in, run_result *r, const char *trace_path,
                     double *stage_bubble_s, replay_times *keep_times, config_error *err)
{
    double t0 = wall_clock_s();
    snprintf(r->scenario, sizeof r->scenario, "%s", s->name);
    r->gpus = scenario_gpus(s);
    r->fidelity_flow = s->run.fidelity_flow;
    r->steps = s->run.steps > 0 ? s->run.steps : 1;
    scenario_config coarse = coarsened(s);
    step_workload w = *w_in; /* the caller's graph: tasks the techniques add here stay in it */
    if (compression_effect_fill(&coarse, &w, &r->compression, err) != 0) {
        *w_in = w;
        return -1;
    }
    replay_times times;
    if (replay_times_alloc(&times, w.n_tasks) != 0) {
        *w_in = w;
        replay_times_free(&times);
        snprintf(err->msg, sizeof err->msg, "out of memory for %d task times", w.n_tasks);
        return -1;
    }
    int rc = 0;
    if (s->run.fidelity_flow) {
        flow_report fr;
        rc = replay_flow(s, &w, &times, &fr, err);
        r->flows = fr.flows;
        r->flows_represented = fr.flows_represented;
        r->flow_wall_s = fr.wall_s;
        r->flow_peak_rss_mib = fr.peak_rss_mib;
        memcpy(r->slowest_comm, fr.slowest_comm, sizeof r->slowest_comm);
        r->slowest_comm_stage = fr.slowest_comm_stage;
        r->slowest_comm_s = fr.slowest_comm_s;
        memcpy(r->slowest_link, fr.slowest_link, sizeof r->slowest_link);
        r->slowest_link_gbs = fr.slowest_link_gbs;
        r->flapping_links = fr.flapping_links;
        r->step_failed = fr.failed;
        r->failed_at_s = fr.failed_at_s;
        r->detected_at_s = fr.detected_at_s;
    } else {
        step_faults_apply(s, &w); /* stragglers and degraded links, as the flow replay meets them */
        rc = replay_analytic(&w, &times);
    }
    replay_metrics m;
    if (rc == 0 && r->step_failed == 1) {
        /* The step never finished: the time it held the cluster is the failure's detection. */
        r->tasks = w.n_tasks;
        r->step_time_s = r->detected_at_s;
    } else if (rc == 0 && replay_metrics_compute(&w, &times, &m) == 0) {
        r->tasks = w.n_tasks;
        r->step_time_s = m.step_time_s;
        r->bubble_mean = m.bubble_mean;
        r->bubble_max = m.bubble_max;
        r->bubble_max_stage = m.bubble_max_stage;
        for (int c = 0; c < COMM_CLASS_COUNT; c++) {
            r->comm_total_s[c] = m.comm_total_s[c];
            r->comm_exposed_s[c] = m.comm_exposed_s[c];
        }
        r->compute_s = 0;
        for (int p = 0; p < m.stages; p++)
            r->compute_s += m.stage_compute_s[p] / m.stages;
        r->overlap_cost_s = m.overlap_cost_s;
        if (stage_bubble_s)
            for (int p = 0; p < m.stages; p++)
                stage_bubble_s[p] = m.stage_bubble_s[p];
        replay_metrics_free(&m);
        if (s->training.data_loader.present) {
            /* input stalls on top of the replayed step (data_loader.h): the step waits for them */
            data_loader_result dl = {0};
            rc = data_loader_run(s, &w, &times, r->step_time_s, &dl, err);
            r->input_present = 1;
            r->input_exposed_s = dl.exposed_s;
            r->input_load_s = dl.load_s;
            r->input_total_s = dl.input_s; /* the slowest reader's, as the exposed time is */
            r->input_hidden_fraction = dl.hidden_fraction;
            r->input_readers = dl.readers;
            r->step_time_s += dl.exposed_s;
        }
    } else if (rc == 0) {
        snprintf(err->msg, sizeof err->msg, "out of memory deriving metrics");
        rc = -1;
    }
    if (rc == 0 && trace_path)
        rc = trace_write_chrome(trace_path, &w, &times, s, err);
    if (rc == 0 && keep_times) /* the caller's now */
        *keep_times = times;
    else
        replay_times_free(&times);
    *w_in = w;
    if (rc != 0)
        return rc;

    run_result_finish(s, r);
    r->wall_s = wall_clock_s() - t0;
    return 0;
}


void run_result_finish(const scenario_config *s, run_result *r)
{
    double tokens = (double)s->training.global_batch_size * (double)s->model.seq_length;
    double peak = s->platform.gpu.peak_tflops[s->training.precision] * 1e12;
    r->tokens_per_s = tokens / r->step_time_s;
    r->model_tflops_per_gpu = run_model_flops_per_step(s) / r->step_time_s / r->gpus / 1e12;
    r->hardware_tflops_per_gpu = run_hardware_flops_per_step(s) / r->step_time_s / r->gpus / 1e12;
    r->mfu = peak > 0 ? r->model_tflops_per_gpu * 1e12 / peak : 0;
    r->hfu = peak > 0 ? r->hardware_tflops_per_gpu * 1e12 / peak : 0;
    if (r->step_failed == 1) /* a lost step trains nothing */
        r->tokens_per_s = r->model_tflops_per_gpu = r->hardware_tflops_per_gpu = r->mfu = r->hfu = 0;
    if (r->step_failed != 1)
        run_time_to_train(s, r->step_time_s, r->gpus, &r->to_train);
    r->price_per_gpu_hour = s->platform.price_per_gpu_hour;
}

void run_time_to_train(const scenario_config *s, double step_time_s, int gpus, time_to_train *out)
{
    memset(out, 0, sizeof *out);
    double per_step = (double)s->training.global_batch_size * (double)s->model.seq_length;
    if (s->training.tokens <= 0 || per_step <= 0 || step_time_s <= 0)
        return;
    out->known = 1;
    out->tokens = s->training.tokens;
    out->steps = s->training.train_iters > 0 ? (double)s->training.train_iters : ceil(s->training.tokens / per_step);
    out->days = out->steps * step_time_s / 86400.0;
    out->gpu_hours = out->days * 24.0 * gpus;
    out->has_cost = s->platform.price_per_gpu_hour > 0;
    out->cost = out->has_cost ? out->gpu_hours * s->platform.price_per_gpu_hour : 0;
    checkpoint_cost c;
    checkpoint_cost_of(s, &c);
    if (c.failure_rate > 0) {
        out->with_failures = 1;
        out->checkpoint_interval_s = s->faults.checkpoint_interval_s;
        out->goodput = checkpoint_expected_goodput(&c, out->checkpoint_interval_s);
        double stretch = out->goodput > 0 ? 1.0 / out->goodput : INFINITY;
        out->days_with_failures = out->days * stretch;
        out->gpu_hours_with_failures = out->gpu_hours * stretch;
        out->cost_with_failures = out->cost * stretch;
    }
}
