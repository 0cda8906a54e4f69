/* Simulates one scenario and derives the metrics of DESIGN.md (see run.h). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "flow/flow.h"
#include "memory.h"
#include "params.h"
#include "data_loader.h"
#include "trace.h"
#include "run.h"
#include "step_faults.h"
#include "workload.h"
#include "compression_effect.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

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
        extra = L * 4.0 * (double)sh.seq_length * (double)sh.seq_length * (double)sh.hidden;
    return run_model_flops_per_step(s) + extra * seqs;
}

double run_flow_bucket_mb(const scenario_config *s)
{
    int half = s->training.precision != PREC_FP32 && s->training.precision != PREC_TF32;
    double grad_mb = params_stage_per_gpu(s, 0) * (half ? 2 : 4) / 1048576.0;
    double mb = s->parallel.bucket_size_mb > 0 ? s->parallel.bucket_size_mb : 40;
    return grad_mb / FLOW_MAX_BUCKETS > mb ? grad_mb / FLOW_MAX_BUCKETS : mb;
}

void run_memory_estimate(const scenario_config *s, run_memory *out)
{
    pipeline_schedule sched;
    char why[256];
    memset(out, 0, sizeof *out);
    int V = s->parallel.vpp > 0 ? s->parallel.vpp : 1;
    if (pipeline_schedule_build(&sched, s->parallel.schedule, s->parallel.pp,
                                (int)scenario_micro_batches(s), V, why, sizeof why) != 0)
        return;
    memory_breakdown mb;
    int worst = 0;
    if (memory_model_worst_stage(s, &sched, &mb, &worst) == 0) {
        const double gib = 1024.0 * 1024.0 * 1024.0;
        out->weights = mb.weights / gib;
        out->gradients = mb.gradients / gib;
        out->optimizer = mb.optimizer / gib;
        out->activations = mb.activations / gib;
        out->buffers = mb.buffers / gib;
        out->total = mb.total / gib;
        out->capacity = mb.capacity / gib;
        out->oom = mb.oom;
        out->worst_stage = worst;
        double host = 0, nvme = 0;
        memory_offload_per_node(s, &host, &nvme);
        out->host_gib = host / gib;
        out->nvme_gib = nvme / gib;
    }
    pipeline_schedule_free(&sched);
}

int run_scenario(const scenario_config *s, run_result *r, config_error *err)
{
    return run_scenario_traced(s, r, NULL, err);
}

int run_scenario_traced(const scenario_config *s, run_result *r, const char *trace_path, config_error *err)
{
    double t0 = now_s();
    memset(r, 0, sizeof *r);
    snprintf(r->scenario, sizeof r->scenario, "%s", s->name);
    r->gpus = scenario_gpus(s);
    r->fidelity_flow = s->run.fidelity_flow;
    r->steps = s->run.steps > 0 ? s->run.steps : 1;

    /* Flow fidelity simulates every gradient bucket of every replica as ring flows; buckets are
     * coarsened to at most FLOW_MAX_BUCKETS per stage to bound the number of flows (the
     * granularity choice of docs/flow.md, whose error it measures). */
    scenario_config coarse = *s;
    if (s->run.fidelity_flow)
        coarse.run.flow_bucket_mb = run_flow_bucket_mb(s);
    step_workload w;
    if (workload_build(&coarse, &w, err) != 0)
        return -1;
    if (compression_effect_fill(&coarse, &w, &r->compression, err) != 0) {
        workload_free(&w);
        return -1;
    }
    replay_times times;
    if (replay_times_alloc(&times, w.n_tasks) != 0) {
        workload_free(&w);
        snprintf(err->msg, sizeof err->msg, "out of memory for %d task times", w.n_tasks);
        return -1;
    }
    int rc = 0;
    if (s->run.fidelity_flow) {
        flow_report fr;
        rc = replay_flow(s, &w, &times, &fr, err);
        r->flows = fr.flows;
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
        for (int p = 0; p < m.stages; p++)
            r->compute_s += m.stage_compute_s[p] / m.stages;
        r->overlap_cost_s = m.overlap_cost_s;
        replay_metrics_free(&m);
        if (s->training.data_loader.present) {
            /* input stalls on top of the replayed step (data_loader.h): the step waits for them */
            data_loader_result dl = {0};
            rc = data_loader_run(s, &w, &times, r->step_time_s, &dl, err);
            r->input_present = 1;
            r->input_exposed_s = dl.exposed_s;
            r->input_load_s = dl.load_s;
            r->input_total_s = dl.load_s * (double)scenario_micro_batches(s);
            r->input_hidden_fraction = dl.hidden_fraction;
            r->input_readers = dl.readers;
            r->step_time_s += dl.exposed_s;
        }
    } else if (rc == 0) {
        snprintf(err->msg, sizeof err->msg, "out of memory deriving metrics");
        rc = -1;
    }
    if (rc == 0 && trace_path)
        rc = trace_write_chrome(trace_path, &w, &times, s->name, err);
    replay_times_free(&times);
    workload_free(&w);
    if (rc != 0)
        return rc;

    double tokens = (double)s->training.global_batch_size * (double)s->model.seq_length;
    double peak = s->platform.gpu.peak_tflops[s->training.precision] * 1e12;
    r->tokens_per_s = tokens / r->step_time_s;
    r->model_tflops_per_gpu = run_model_flops_per_step(s) / r->step_time_s / r->gpus / 1e12;
    r->hardware_tflops_per_gpu = run_hardware_flops_per_step(s) / r->step_time_s / r->gpus / 1e12;
    r->mfu = peak > 0 ? r->model_tflops_per_gpu * 1e12 / peak : 0;
    r->hfu = peak > 0 ? r->hardware_tflops_per_gpu * 1e12 / peak : 0;
    if (r->step_failed == 1) /* a lost step trains nothing */
        r->tokens_per_s = r->model_tflops_per_gpu = r->hardware_tflops_per_gpu = r->mfu = r->hfu = 0;
    run_memory_estimate(s, &r->memory);
    r->wall_s = now_s() - t0;
    return 0;
}

void *run_result_to_json(const run_result *r)
{
    json_t *comm = json_object();
    for (int c = 0; c < COMM_CLASS_COUNT; c++)
        json_object_set_new(comm, comm_class_name((comm_class)c),
                            json_pack("{s:f,s:f}", "total", r->comm_total_s[c], "exposed", r->comm_exposed_s[c]));
    json_t *mem = json_pack("{s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:b}", "weights", r->memory.weights,
                            "gradients", r->memory.gradients, "optimizer", r->memory.optimizer,
                            "activations", r->memory.activations, "buffers", r->memory.buffers,
                            "total", r->memory.total, "capacity", r->memory.capacity, "oom", r->memory.oom);
    if (r->memory.host_gib > 0 || r->memory.nvme_gib > 0) { /* offload: per node, off the GPUs */
        json_object_set_new(mem, "host_gib", json_real(r->memory.host_gib));
        json_object_set_new(mem, "nvme_gib", json_real(r->memory.nvme_gib));
    }
    json_t *doc = json_pack("{s:s,s:i,s:s,s:i,s:f,s:f,s:f,s:f,s:f,s:f,s:{s:f,s:f},s:o,s:o,s:f}",
                     "scenario", r->scenario, "gpus", r->gpus, "fidelity", r->fidelity_flow ? "flow" : "analytic",
                     "steps", r->steps, "step_time_s", r->step_time_s, "tokens_per_s", r->tokens_per_s,
                     "model_tflops_per_gpu", r->model_tflops_per_gpu,
                     "hardware_tflops_per_gpu", r->hardware_tflops_per_gpu, "mfu", r->mfu, "hfu", r->hfu,
                     "bubble_fraction", "mean", r->bubble_mean, "max", r->bubble_max,
                     "comm_s", comm, "memory_gib", mem, "wall_s", r->wall_s);
    json_object_set_new(doc, "overlap_cost_s", json_real(r->overlap_cost_s));
    if (r->input_present) /* training.data_loader: only then, so that other documents stay as they were */
        json_object_set_new(doc, "input",
                            json_pack("{s:f,s:f,s:f,s:f,s:I}", "exposed_s", r->input_exposed_s,
                                      "total_s", r->input_total_s,
                                      "load_s", r->input_load_s, "hidden_fraction", r->input_hidden_fraction,
                                      "readers", (json_int_t)r->input_readers));
    compression_effect_json(&r->compression, doc);
    return doc;
}

int run_result_lookup(const run_result *r, const char *key, double *value)
{
    json_t *doc = run_result_to_json(r);
    json_t *node = doc;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", key);
    for (char *save = NULL, *part = strtok_r(buf, ".", &save); part && node;
         part = strtok_r(NULL, ".", &save))
        node = json_object_get(node, part);
    int ok = node && (json_is_number(node) || json_is_boolean(node));
    if (ok)
        *value = json_is_boolean(node) ? (json_is_true(node) ? 1 : 0) : json_number_value(node);
    json_decref(doc);
    return ok ? 0 : -1;
}

void run_result_print(const run_result *r, const scenario_config *s, void *file)
{
    FILE *f = file;
    double step = r->step_time_s;
    fprintf(f, "dtsim: %s on %d x %s (%s), %s fidelity\n", r->scenario, r->gpus, s->platform.gpu.name,
            s->platform.name, r->fidelity_flow ? "flow" : "analytic");
    static const char *const cp_comms[] = {"ring attention", "K/V all-gather", "Ulysses all-to-all"};
    char ep[96] = "";
    if (s->model.num_experts > 0)
        snprintf(ep, sizeof ep, " (EP %d: %lld experts, top-%d, busiest rank x%.3f)", s->parallel.ep,
                 s->model.num_experts, s->model.moe_router_topk, workload_moe_load(s));
    fprintf(f, "  layout       TP %d x PP %d x DP %d x CP %d%s%s%s, %s schedule%s, ZeRO-%d, micro-batch %lld, "
               "%lld micro-batches per pipeline\n",
            s->parallel.tp, s->parallel.pp, s->parallel.dp, s->parallel.cp, s->parallel.cp > 1 ? " (" : "",
            s->parallel.cp > 1 ? cp_comms[s->parallel.cp_comm] : "", s->parallel.cp > 1 ? ")" : "",
            pipeline_kind_name(s->parallel.schedule), s->parallel.vpp > 1 ? " (interleaved chunks)" : "",
            s->parallel.zero_stage, s->training.micro_batch_size, scenario_micro_batches(s));
    if (ep[0])
        fprintf(f, "  experts     %s\n", ep);
    if (r->step_failed == 1)
        fprintf(f, "  FAILURE      GPU %d went off %.4f s into the step; every rank stalled; the watchdog (detect_s) "
                   "stopped the job at %.4f s: the step is lost and is redone after the restart\n",
                s->faults.step_failure_gpu, r->failed_at_s, r->detected_at_s);
    else if (r->step_failed == -1)
        fprintf(f, "  failure      GPU %d was due to fail %.4f s into the step, after the step had ended\n",
                s->faults.step_failure_gpu, s->faults.step_failure_at_s);
    if (r->flapping_links)
        fprintf(f, "  flapping     %d link(s) flapped during the step (faults.degraded_links with flap_period_s)\n",
                r->flapping_links);
    fprintf(f, "  step time    %.4f s   (%.0f tokens/s)%s\n", step, r->tokens_per_s,
            r->step_failed == 1 ? "  [lost: time until the failure was detected]" : "");
    fprintf(f, "  throughput   %.1f model TFLOP/s per GPU (MFU %.1f%%), %.1f hardware TFLOP/s per GPU (HFU %.1f%%)\n",
            r->model_tflops_per_gpu, 100 * r->mfu, r->hardware_tflops_per_gpu, 100 * r->hfu);
    fprintf(f, "  bubble       mean %.1f%%, worst %.1f%% (stage %d)\n", 100 * r->bubble_mean,
            100 * r->bubble_max, r->bubble_max_stage);
    fprintf(f, "  compute      %.4f s per stage (%.1f%% of the step)\n", r->compute_s,
            step > 0 ? 100 * r->compute_s / step : 0);
    if (r->overlap_cost_s > 0)
        fprintf(f, "  overlap cost %.4f s of it: the compute slowed beside overlapped communication "
                   "(calibration overlap_slowdown %.3g)\n", r->overlap_cost_s, s->calibration.overlap_slowdown);
    fprintf(f, "  comm         %-5s %10s %10s\n", "kind", "total s", "exposed s");
    for (int c = 0; c < COMM_CLASS_COUNT; c++)
        if (r->comm_total_s[c] > 0 || r->comm_exposed_s[c] > 0)
            fprintf(f, "               %-5s %10.4f %10.4f\n", comm_class_name((comm_class)c),
                    r->comm_total_s[c], r->comm_exposed_s[c]);
    if (r->input_present)
        fprintf(f, "               %-5s %10.4f %10.4f   (data loader: %lld readers, %.4f s per micro-batch, "
                   "%.1f%% hidden by prefetch)\n",
                "input", r->input_total_s, r->input_exposed_s, r->input_readers, r->input_load_s,
                100 * r->input_hidden_fraction);
    fprintf(f, "  memory/GPU   %.1f GiB of %.1f GiB%s (stage %d): weights %.1f, gradients %.1f, optimizer %.1f, "
               "activations %.1f, buffers %.1f\n",
            r->memory.total, r->memory.capacity, r->memory.oom ? "  ** OUT OF MEMORY **" : "",
            r->memory.worst_stage, r->memory.weights, r->memory.gradients, r->memory.optimizer,
            r->memory.activations, r->memory.buffers);
    if (r->memory.host_gib > 0 || r->memory.nvme_gib > 0)
        fprintf(f, "  offloaded    per node: host memory %.1f GiB, NVMe %.1f GiB\n", r->memory.host_gib,
                r->memory.nvme_gib);
    compression_effect_print(&r->compression, f);
    fprintf(f, "  simulated    %ld tasks in %.3f s wall", r->tasks, r->wall_s);
    if (r->fidelity_flow)
        fprintf(f, " (SimGrid: %ld flows, %.2f s, peak %.0f MiB)", r->flows, r->flow_wall_s, r->flow_peak_rss_mib);
    fputc('\n', f);
    if (r->fidelity_flow && r->slowest_comm[0])
        fprintf(f, "  slowest comm %s on stage %d: %.4f s; slowest link on its routes: %s at %.1f GB/s\n",
                r->slowest_comm, r->slowest_comm_stage, r->slowest_comm_s, r->slowest_link, r->slowest_link_gbs);
}
