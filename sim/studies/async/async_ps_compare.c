/* `dtsim async`: a scenario's asynchronous parameter-server model beside its synchronous
 * all-reduce run; see async_ps.h and docs/async.md. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "async_ps.h"
#include "flow.h"
#include "params.h"
#include "run.h"
#include "wall_clock.h"

/* A NIC's usable rate: the calibrated network bus bandwidth where the calibration has one
 * (the figure the synchronous run's collectives use, and the flow replay's NIC links), else
 * the nominal rate; so both sides of the comparison see the same network efficiency. */
static double usable_nic_Bps(const scenario_config *s)
{
    const coll_fit *f = &s->calibration.collectives[LINK_NETWORK][COLL_ALL_REDUCE];
    double nominal = s->platform.node.nic_bandwidth_gbps / 8.0 * 1e9;
    return f->present && f->busbw_gbs > 0 ? f->busbw_gbs * 1e9 : nominal;
}

/* The model of docs/async.md from the scenario (not the compute time). */
static void build_model(const scenario_config *s, async_report *a)
{
    const platform_config *p = &s->platform;
    ps_model *m = &a->m;
    int tp = s->parallel.tp, pp = s->parallel.pp, cp = s->parallel.cp, W = s->parallel.dp;
    rank_grid grid = scenario_rank_grid(s);
    m->workers = W;
    m->servers = s->parameter_server.servers;
    m->max_staleness = s->parameter_server.max_staleness;
    m->compute_cv = s->parameter_server.compute_cv;
    m->seed = s->faults.seed;

    /* A replica's parameters: each stage's TP shards (CP ranks hold copies of them and reduce
     * their gradients inside the replica's step, so one copy is pushed). */
    double params = 0;
    for (int st = 0; st < pp; st++)
        params += params_stage_per_gpu(s, st) * tp;
    a->replica_params = params;
    int fp32 = s->training.precision == PREC_FP32 || s->training.precision == PREC_TF32;
    double natural = fp32 ? 4 : 2;
    double grad_elem = s->parallel.grad_reduce_bytes > 0 ? s->parallel.grad_reduce_bytes : natural; /* a parameter server takes the gradients as computed unless grad_reduce_dtype says */
    m->push_bytes = params * grad_elem; /* gradients in the reduction's dtype */
    m->pull_bytes = params * natural;   /* parameters in the training precision */
    /* the server's optimizer step, as the GPU's in sim/step/workload.c: AdamW reads and writes the
     * fp32 master weights and both moments, reads the gradient and (mixed precision) writes
     * the half-precision copy, ~30 B/param (28 in fp32); SGD with momentum ~12 */
    a->update_bytes_per_param = s->training.optimizer == OPTIMIZER_SGD ? 12 : (fp32 ? 28 : 30);
    a->host_memory_default = !(p->node.host_memory_bandwidth_gbs > 0);
    a->host_memory_gbs = a->host_memory_default ? PS_DEFAULT_HOST_MEMORY_GBS : p->node.host_memory_bandwidth_gbs;
    m->update_s = params / m->servers * a->update_bytes_per_param / (a->host_memory_gbs * 1e9);

    /* Links: every GPU of a replica pushes its own shard through its node's NICs, so a worker
     * has its GPUs' share of the NICs; a server has server_nic_gbps at the same efficiency. */
    double nic = usable_nic_Bps(s), nominal = p->node.nic_bandwidth_gbps / 8.0 * 1e9;
    double efficiency = nominal > 0 ? nic / nominal : 1;
    int gpn = p->node.gpus > 0 ? p->node.gpus : 1;
    m->worker_Bps = (double)tp * pp * cp * p->node.nics * nic / gpn;
    m->server_Bps = s->parameter_server.server_nic_gbps / 8.0 * 1e9 * efficiency;
    /* The fabric's bisection over these hosts: half their injection bandwidth, divided by the
     * leaves' oversubscription (with 1:1 it never binds: every flow has a server at one end). */
    double over = p->network.oversubscription >= 1 ? p->network.oversubscription : 1;
    m->backbone_Bps = (W * m->worker_Bps + m->servers * m->server_Bps) / (2 * over);
    int tiers = p->network.tiers > 0 ? p->network.tiers : 1;
    m->link_latency_s = p->network.link_latency_us * 1e-6;
    m->backbone_latency_s =
        (p->network.switch_latency_us * (2 * tiers - 1) + p->network.link_latency_us * (2 * tiers - 2)) * 1e-6;

    /* stragglers slow their replica's compute (the lockstep replica goes at its slowest GPU) */
    a->slowdown = malloc((size_t)W * sizeof(double));
    for (int w = 0; w < W; w++)
        a->slowdown[w] = 1;
    for (int i = 0; i < s->faults.straggler_count; i++) {
        int r = rank_grid_coord(&grid, s->faults.stragglers[i].gpu, GRID_DP);
        if (r >= 0 && r < W && s->faults.stragglers[i].slowdown > a->slowdown[r])
            a->slowdown[r] = s->faults.stragglers[i].slowdown;
    }
    m->worker_slowdown = a->slowdown;
    a->samples_per_worker_step = (double)s->training.global_batch_size / W;
    a->tokens_per_sample = (double)s->model.seq_length;
}

int async_ps_run_scenario(const scenario_config *s, int steps, progress_meter *progress, async_report *a,
                          config_error *err)
{
    memset(a, 0, sizeof *a);
    double t0 = wall_clock_s();
    snprintf(a->scenario, sizeof a->scenario, "%s", s->name);
    if (!s->parameter_server.present) {
        snprintf(err->msg, sizeof err->msg,
                 "scenario.parameter_server: absent; dtsim async needs it (at least {\"servers\": N})");
        return -2;
    }
    if (s->parallel.ep > 1) {
        snprintf(err->msg, sizeof err->msg,
                 "scenario.parallel.expert_model_parallel_size: %d; dtsim async models replicas that each hold "
                 "the whole model (expert_model_parallel_size 1)", s->parallel.ep);
        return -2;
    }
    build_model(s, a);
    a->m.steps = steps > 0 ? steps : s->parameter_server.steps;
    a->m.progress = progress;
    /* input the simulation cannot take is refused as input, before the replica's runs */
    double updates = (double)a->m.workers * a->m.servers * a->m.steps;
    if (updates > PS_MAX_UPDATES) {
        snprintf(err->msg, sizeof err->msg,
                 "%.3g shard updates (%d steps x %d workers x %d servers) are more than the %.0e one simulation "
                 "takes: use fewer steps (--steps, parameter_server.steps), parameter_server.servers or "
                 "data-parallel replicas", updates, a->m.steps, a->m.workers, a->m.servers, PS_MAX_UPDATES);
        return -2;
    }
    /* What the machine cannot hold is refused here, before the replica's runs, not by SimGrid's
     * own log lines mid-run (its stacks past vm.max_map_count). */
    double actors = ps_actors(a->m.workers, a->m.servers);
    long limit = 0, need = 0;
    if (actors > 1e9 || !flow_actors_fit((long)actors, &limit, &need)) {
        snprintf(err->msg, sizeof err->msg,
                 "the parameter-server simulation needs %.0f SimGrid actors (%d servers, %d workers and a channel "
                 "for each pair), each a context stack in one memory map: about %.0f maps with those in use, over "
                 "this machine's vm.max_map_count of %ld. Use fewer parameter_server.servers or data-parallel "
                 "replicas, or raise the limit (sysctl -w vm.max_map_count=%.0f)",
                 actors, a->m.servers, a->m.workers, actors > 1e9 ? actors : (double)need, limit,
                 1.25 * (actors > 1e9 ? actors : (double)need));
        return -2;
    }

    /* A worker's step: the scenario's replica alone (DP 1, the same micro-batches per
     * pipeline), without the DP gradient reduction; stragglers are applied per worker above,
     * so the replica runs without them. */
    scenario_config one = *s;
    one.parallel.dp = 1;
    one.training.global_batch_size = s->training.global_batch_size / s->parallel.dp;
    one.faults.straggler_count = 0;
    one.faults.degraded_count = 0;
    one.faults.step_failure = 0;
    run_result r1, rs;
    if (run_scenario(&one, &r1, err) != 0 || run_scenario(s, &rs, err) != 0)
        return -1;
    a->m.compute_s = r1.step_time_s;
    a->sync_step_s = rs.step_time_s;

    /* the exposed communication of a healthy synchronous step (a straggler in the regular run,
     * at flow fidelity, would otherwise count twice: there and in the slowest replica below) */
    double healthy_step = rs.step_time_s;
    if (s->faults.straggler_count > 0) {
        scenario_config healthy = *s;
        healthy.faults.straggler_count = 0;
        run_result rh;
        if (run_scenario(&healthy, &rh, err) != 0)
            return -1;
        healthy_step = rh.step_time_s;
    }
    double exposed = healthy_step > a->m.compute_s ? healthy_step - a->m.compute_s : 0;
    unsigned long long *rng = malloc((size_t)a->m.workers * sizeof *rng);
    for (int w = 0; w < a->m.workers; w++)
        rng[w] = ps_worker_seed(a->m.seed, w);
    for (int t = 0; t < a->m.steps; t++) {
        double slowest = 0;
        for (int w = 0; w < a->m.workers; w++)
            slowest = fmax(slowest, a->m.compute_s * a->slowdown[w] * ps_compute_factor(&rng[w], a->m.compute_cv));
        a->sync_varied_step_s += (slowest + exposed) / a->m.steps;
    }
    free(rng);

    if (ps_simulate(&a->m, &a->r, err) != 0)
        return -1;
    ps_staleness_stats(&a->r, &a->st);
    double cap = a->m.server_Bps * a->r.makespan_s;
    for (int j = 0; j < a->m.servers; j++) {
        double in = a->r.server_in_bytes[j] / cap, out = a->r.server_out_bytes[j] / cap;
        a->server_util_in_mean += in / a->m.servers;
        a->server_util_out_mean += out / a->m.servers;
        a->server_util_in_max = fmax(a->server_util_in_max, in);
        a->server_util_out_max = fmax(a->server_util_out_max, out);
    }
    /* every server applies one update per worker step */
    a->server_cpu_util = a->r.makespan_s > 0 ? (double)a->m.workers * a->m.steps * a->m.update_s / a->r.makespan_s : 0;
    a->wall_s = wall_clock_s() - t0;
    return 0;
}

void async_report_free(async_report *a)
{
    ps_result_free(&a->r);
    free(a->st.hist);
    free(a->slowdown);
    memset(a, 0, sizeof *a);
}

static json_t *rates(double steps_per_s, const async_report *a)
{
    double samples = steps_per_s * a->samples_per_worker_step;
    return json_pack("{s:f,s:f,s:f}", "steps_per_s", steps_per_s, "samples_per_s", samples, "tokens_per_s",
                     samples * a->tokens_per_sample);
}

void *async_report_to_json(const async_report *a)
{
    const ps_model *m = &a->m;
    double sync_steps = m->workers / a->sync_step_s;
    json_t *async = rates(a->r.steps_per_s, a);
    json_object_set_new(async, "makespan_s", json_real(a->r.makespan_s));
    json_object_set_new(async, "max_steps_ahead", json_integer(a->r.max_steps_ahead));
    json_t *sync = rates(sync_steps, a);
    json_object_set_new(sync, "step_time_s", json_real(a->sync_step_s));
    double varied_steps = m->workers / a->sync_varied_step_s;
    json_t *varied = rates(varied_steps, a);
    json_object_set_new(varied, "step_time_s", json_real(a->sync_varied_step_s));
    json_t *hist = json_array();
    for (int v = 0; v < a->st.hist_len; v++)
        if (a->st.hist[v])
            json_array_append_new(hist, json_pack("{s:i,s:I}", "steps_behind", v, "updates", (json_int_t)a->st.hist[v]));
    return json_pack(
        "{s:s,s:i,s:i,s:i,s:i,s:f,"
        "s:{s:f,s:f,s:f,s:f,s:f,s:f,s:b,s:f,s:f,s:f,s:f},"
        "s:o,s:o,s:o,s:f,s:f,"
        "s:{s:{s:f,s:f},s:{s:f,s:f}},"
        "s:f,s:{s:I,s:f,s:i,s:i,s:i,s:i,s:o},s:f}",
        "scenario", a->scenario, "workers", m->workers, "servers", m->servers, "steps_per_worker", m->steps,
        "max_staleness", m->max_staleness, "compute_cv", m->compute_cv,
        "model", "worker_compute_s", m->compute_s, "replica_parameters", a->replica_params, "push_bytes",
        m->push_bytes, "pull_bytes", m->pull_bytes, "update_s", m->update_s, "host_memory_gbs",
        a->host_memory_gbs, "host_memory_default", a->host_memory_default, "update_bytes_per_param",
        a->update_bytes_per_param, "worker_link_gbs", m->worker_Bps / 1e9, "server_link_gbs", m->server_Bps / 1e9,
        "backbone_gbs", m->backbone_Bps / 1e9,
        "async", async, "sync", sync, "sync_varied", varied, "async_over_sync", a->r.steps_per_s / sync_steps,
        "async_over_sync_varied", a->r.steps_per_s / varied_steps,
        "server_link_utilisation", "in", "mean", a->server_util_in_mean, "max", a->server_util_in_max, "out", "mean",
        a->server_util_out_mean, "max", a->server_util_out_max, "server_cpu_utilisation", a->server_cpu_util,
        "staleness", "updates", (json_int_t)a->r.updates, "mean", a->st.mean, "p50", a->st.p50, "p90", a->st.p90,
        "p99", a->st.p99, "max", a->st.max, "histogram", hist, "wall_s", a->wall_s);
}

void async_report_print(const async_report *a, void *file)
{
    FILE *f = file;
    const ps_model *m = &a->m;
    double sync_steps = m->workers / a->sync_step_s;
    double as = a->r.steps_per_s * a->samples_per_worker_step, ss = sync_steps * a->samples_per_worker_step;
    fprintf(f, "%s: %d workers (DP replicas), %d parameter servers, %d steps each, %s\n", a->scenario, m->workers,
            m->servers, m->steps, m->max_staleness > 0 ? "stale-synchronous" : "fully asynchronous");
    if (m->max_staleness > 0)
        fprintf(f, "  bound        a worker starts step t once every worker has finished step t-%d\n",
                m->max_staleness);
    fprintf(f, "  worker       compute %.4f s/step (cv %.2f), pushes %.3g GB, pulls %.3g GB per step, link %.1f GB/s\n",
            m->compute_s, m->compute_cv, m->push_bytes / 1e9, m->pull_bytes / 1e9, m->worker_Bps / 1e9);
    fprintf(f, "  server       update %.4f s per shard (%.0f B/param at %.1f GB/s%s), link %.1f GB/s\n", m->update_s,
            a->update_bytes_per_param, a->host_memory_gbs, a->host_memory_default ? ", default" : "",
            m->server_Bps / 1e9);
    fprintf(f, "\n  %-22s %14s %14s %16s\n", "", "steps/s", "samples/s", "tokens/s");
    fprintf(f, "  %-22s %14.3f %14.1f %16.4g\n", "async parameter server", a->r.steps_per_s, as,
            as * a->tokens_per_sample);
    fprintf(f, "  %-22s %14.3f %14.1f %16.4g\n", "synchronous all-reduce", sync_steps, ss, ss * a->tokens_per_sample);
    double vs = m->workers / a->sync_varied_step_s, vsam = vs * a->samples_per_worker_step;
    fprintf(f, "  %-22s %14.3f %14.1f %16.4g\n", "  same variation", vs, vsam, vsam * a->tokens_per_sample);
    fprintf(f, "  async / sync           %14.3f   (sync step %.4f s; %.3f against %.4f s with the workers'\n"
               "                                  variation and stragglers)\n\n",
            a->r.steps_per_s / sync_steps, a->sync_step_s, a->r.steps_per_s / vs, a->sync_varied_step_s);
    fprintf(f, "  server links in  %5.1f%% mean, %5.1f%% max   out %5.1f%% mean, %5.1f%% max (of %.4f s)\n",
            100 * a->server_util_in_mean, 100 * a->server_util_in_max, 100 * a->server_util_out_mean,
            100 * a->server_util_out_max, a->r.makespan_s);
    fprintf(f, "  server CPUs  %5.1f%% busy applying updates\n", 100 * a->server_cpu_util);
    fprintf(f, "  staleness    mean %.2f  p50 %d  p90 %d  p99 %d  max %d steps behind (%ld updates)\n", a->st.mean,
            a->st.p50, a->st.p90, a->st.p99, a->st.max, a->r.updates);
    if (m->max_staleness > 0)
        fprintf(f, "  lead         a worker was at most %d steps ahead of the slowest\n", a->r.max_steps_ahead);
}
