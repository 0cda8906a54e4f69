/* What a run's result says: the --json document of DESIGN.md, the human summary, and the
 * lookup of one metric by its JSON name (sweeps, validation). See run.h. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "collective.h"
#include "cost.h"
#include "run.h"
#include "zero3.h"

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
    /* run.steps: the replay is deterministic and every steady-state step replays the same, so
     * N steps take N step times; said as a figure rather than implied by "steps" alone. */
    json_object_set_new(doc, "steps_time_s", json_real(r->steps * r->step_time_s));
    if (r->input_present) /* training.data_loader: only then, so that other documents stay as they were */
        json_object_set_new(doc, "input",
                            json_pack("{s:f,s:f,s:f,s:f,s:I}", "exposed_s", r->input_exposed_s,
                                      "total_s", r->input_total_s,
                                      "load_s", r->input_load_s, "hidden_fraction", r->input_hidden_fraction,
                                      "readers", (json_int_t)r->input_readers));
    if (r->folded) /* only then, so that other documents stay as they were */
        json_object_set_new(doc, "folded_from_micro_batches",
                            json_pack("[I,I]", (json_int_t)r->fold_micro_batches[0],
                                      (json_int_t)r->fold_micro_batches[1]));
    compression_effect_json(&r->compression, doc);
    if (r->to_train.known) /* only then, so that other documents stay as they were */
        json_object_set_new(doc, "time_to_train", time_to_train_to_json(&r->to_train, r->price_per_gpu_hour));
    return doc;
}

void *time_to_train_to_json(const time_to_train *t, double price_per_gpu_hour)
{
    if (!t->known)
        return json_null();
    json_t *o = json_pack("{s:f,s:f,s:f,s:f}", "tokens", t->tokens, "steps", t->steps, "days", t->days, "gpu_hours",
                          t->gpu_hours);
    if (t->has_cost) {
        json_object_set_new(o, "cost", json_real(t->cost));
        json_object_set_new(o, "price_per_gpu_hour", json_real(price_per_gpu_hour));
    }
    if (t->with_failures && isfinite(t->days_with_failures)) {
        json_t *w = json_pack("{s:f,s:f,s:f,s:f}", "expected_goodput", t->goodput, "checkpoint_interval_s",
                              t->checkpoint_interval_s, "days", t->days_with_failures, "gpu_hours",
                              t->gpu_hours_with_failures);
        if (t->has_cost)
            json_object_set_new(w, "cost", json_real(t->cost_with_failures));
        json_object_set_new(o, "with_failures", w);
    } else if (t->with_failures) {
        json_object_set_new(o, "with_failures", json_null()); /* failures faster than recovery: never ends */
    }
    return o;
}

int run_result_may_name(const char *key)
{
    /* a result with every optional part present, so that its document names every figure a run
     * may print (offload, input, fold, compression, time to train with failures and a price) */
    run_result all;
    memset(&all, 0, sizeof all);
    all.memory.host_gib = all.memory.nvme_gib = 1;
    all.input_present = all.folded = 1;
    all.compression.present = 1;
    all.to_train.known = all.to_train.has_cost = all.to_train.with_failures = 1;
    double v;
    return run_result_lookup(&all, key, &v) == 0;
}

void run_words(double x, char *out, size_t n)
{
    static const char *const suffix[] = {"", "K", "M", "B", "T", "Q"};
    int i = 0;
    while (fabs(x) >= 1000 && i < 5) {
        x /= 1000;
        i++;
    }
    snprintf(out, n, "%.3g%s", x, suffix[i]);
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
    char ep[128] = "";
    if (s->model.num_experts > 0)
        snprintf(ep, sizeof ep, " (EP %d: %lld experts, top-%d, busiest rank x%.3f, %s dispatcher)", s->parallel.ep,
                 s->model.num_experts, s->model.moe_router_topk, workload_moe_load(s),
                 moe_token_dispatcher_name(s->parallel.moe_flex_dispatcher));
    /* ZeRO-3 under FSDP's rule says whether a forward lets its layers go (torchtitan's "default"
     * resolved); the framework, where the scenario names one, closes the line */
    char zero[64], framework[48] = "";
    snprintf(zero, sizeof zero, "ZeRO-%d", s->parallel.zero_stage);
    if (s->parallel.zero_stage == 3 && s->parallel.fsdp_reshard_after_forward != FSDP_RESHARD_UNSET) {
        zero3_plan z3;
        zero3_plan_of(s, &z3);
        snprintf(zero, sizeof zero, "ZeRO-3 (FSDP units, %s after forward)",
                 z3.reshard_after_forward ? "resharded" : "kept");
    }
    if (s->parallel.framework != FRAMEWORK_UNSET)
        snprintf(framework, sizeof framework, ", framework %s", framework_kind_name(s->parallel.framework));
    fprintf(f, "  layout       TP %d x PP %d x DP %d x CP %d%s%s%s, %s schedule%s, %s, micro-batch %lld, "
               "%lld micro-batches per pipeline%s\n",
            s->parallel.tp, s->parallel.pp, s->parallel.dp, s->parallel.cp, s->parallel.cp > 1 ? " (" : "",
            s->parallel.cp > 1 ? cp_comms[s->parallel.cp_comm] : "", s->parallel.cp > 1 ? ")" : "",
            pipeline_kind_name(s->parallel.schedule), s->parallel.vpp > 1 ? " (interleaved chunks)" : "", zero,
            s->training.micro_batch_size, scenario_micro_batches(s), framework);
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
    /* a calibrated busbw above the platform's link: the link bounds it (collective_link_Bps), and
     * the user is told, as the calibration was likely measured on another machine */
    static const char *const link_names[] = {"NVLink (per GPU)", "NIC"};
    for (int lc = LINK_NVLINK; lc <= LINK_NETWORK; lc++) {
        int bounded = 0;
        double Bps = collective_link_Bps(&s->platform, &s->calibration, (link_class)lc, COLL_ALL_REDUCE, &bounded);
        if (bounded)
            fprintf(f, "  note         the calibration's %s all-reduce busbw, %.4g GB/s, is above the platform's "
                       "link rate: %.4g GB/s is used (is the calibration from another machine?)\n",
                    link_names[lc], s->calibration.collectives[lc][COLL_ALL_REDUCE].busbw_gbs, Bps / 1e9);
    }
    /* the same for the device: measured GEMM and memory rates past the platform's peak and HBM
     * rate are bounded by them (sim/step/cost.c) */
    double best, fastest;
    cost_rates_over_platform(s, &best, &fastest);
    if (best > 0)
        fprintf(f, "  note         the calibration's %s GEMMs reach %.4g TFLOP/s, above the platform's peak of %.4g: "
                   "the peak bounds them (is the calibration from another GPU?)\n",
                precision_name(s->training.precision), best, s->platform.gpu.peak_tflops[s->training.precision]);
    if (fastest > 0)
        fprintf(f, "  note         the calibration's memory-bound kernels reach %.4g GB/s, above the platform's HBM "
                   "rate of %.4g GB/s: HBM bounds them (is the calibration from another GPU?)\n",
                fastest, s->platform.gpu.hbm_bandwidth_gbs);
    fprintf(f, "  memory/GPU   %.1f GiB of %.1f GiB%s (stage %d): weights %.1f, gradients %.1f, optimizer %.1f, "
               "activations %.1f, buffers %.1f\n",
            r->memory.total, r->memory.capacity, r->memory.oom ? "  ** OUT OF MEMORY **" : "",
            r->memory.worst_stage, r->memory.weights, r->memory.gradients, r->memory.optimizer,
            r->memory.activations, r->memory.buffers);
    if (r->memory.host_gib > 0 || r->memory.nvme_gib > 0)
        fprintf(f, "  offloaded    per node: host memory %.1f GiB, NVMe %.1f GiB\n", r->memory.host_gib,
                r->memory.nvme_gib);
    compression_effect_print(&r->compression, f);
    if (r->to_train.known) {
        char tok[32], steps[32], hours[32], cost[64] = "";
        run_words(r->to_train.tokens, tok, sizeof tok);
        run_words(r->to_train.steps, steps, sizeof steps);
        run_words(r->to_train.gpu_hours, hours, sizeof hours);
        if (r->to_train.has_cost) {
            char c[16]; /* run_words writes at most 11: "-1.23e+308Q" */
            run_words(r->to_train.cost, c, sizeof c);
            /* 24 characters, c and a %.3g (at most 10): within cost */
            snprintf(cost, sizeof cost, ", cost %s at %.3g per GPU-hour", c, r->price_per_gpu_hour);
        }
        if (!r->to_train.with_failures) {
            fprintf(f, "  to train     %s tokens: %s steps, %.1f days, %s GPU-hours%s (no failures: dtsim faults adds "
                       "them)\n", tok, steps, r->to_train.days, hours, cost);
        } else {
            fprintf(f, "  to train     %s tokens: %s steps, %.1f days, %s GPU-hours%s without failures\n", tok, steps,
                    r->to_train.days, hours, cost);
            if (isfinite(r->to_train.days_with_failures)) {
                char wh[32];
                run_words(r->to_train.gpu_hours_with_failures, wh, sizeof wh);
                fprintf(f, "               with failures %.1f days, %s GPU-hours (expected goodput %.1f%%, checkpoints "
                           "every %.0f s; dtsim faults: the spread)\n", r->to_train.days_with_failures, wh,
                        100 * r->to_train.goodput, r->to_train.checkpoint_interval_s);
            } else {
                fprintf(f, "               with failures: never (failures come faster than the job recovers)\n");
            }
        }
    }
    if (r->steps > 1)
        fprintf(f, "  steps        %d x %.4f s = %.4f s (every steady-state step replays the same)\n", r->steps,
                r->step_time_s, r->steps * r->step_time_s);
    fprintf(f, "  simulated    %ld tasks in %.3f s wall", r->tasks, r->wall_s);
    if (r->folded) /* run_fold.c: the step shown periodic, extended from two short replays */
        fprintf(f, " (replays of %lld and %lld micro-batches, shown periodic and extended; --full replays all)",
                r->fold_micro_batches[0], r->fold_micro_batches[1]);
    else if (r->fold_why[0]) /* run_fold.c tried, or could not */
        fprintf(f, " (every micro-batch replayed: %s)", r->fold_why);
    if (r->fidelity_flow)
        fprintf(f, " (SimGrid: %ld flows standing for %ld, %.2f s, peak %.0f MiB)", r->flows, r->flows_represented,
                r->flow_wall_s, r->flow_peak_rss_mib);
    fputc('\n', f);
    if (r->fidelity_flow && r->slowest_comm[0])
        fprintf(f, "  slowest comm %s on stage %d: %.4f s; slowest link on its routes: %s at %.1f GB/s\n",
                r->slowest_comm, r->slowest_comm_stage, r->slowest_comm_s, r->slowest_link, r->slowest_link_gbs);
}
