/* Semantic fuzzing of the simulator: random valid scenarios (model sizes, layouts, schedules,
 * ZeRO stages, precisions, recomputation, A100 and H100 platforms; now and then a narrower or
 * compressed gradient reduction, optimizer offload and a data loader) checked against properties
 * that must hold for every one of them:
 *   step time > 0 and finite; MFU in (0, 1]; bubble in [0, 1); exposed communication <= total,
 *   per class; memory components sum to the total; analytic step time <= flow step time + 2%
 *   (on a sample: flow is slower to run; not with offload, whose analytic host bandwidth is a
 *   node's shared among all its GPUs at once); doubling every link's bandwidth (NVLink, NICs and the
 *   calibrated collective bandwidths) never makes a step slower (1% with a data loader, whose
 *   stall is a Monte Carlo mean); adding DP replicas with the
 *   per-replica batch fixed never lowers tokens/s (analytic), unless the DP x CP group leaves
 *   its node by it (its collectives then move from NVLink to the network: a real slowdown).
 * Usage: test_invariants [VALID_SCENARIOS [SEED [FLOW_EVERY]]] (CTest: 400, seed 1, flow every
 * 100th). Prints the first violations with the scenario that broke them; exits 1 on any. */
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "config.h"
#include "run.h"

typedef struct {
    uint64_t s;
} rng64;

static uint64_t next(rng64 *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static int pick(rng64 *r, const int *v, int n)
{
    return v[next(r) % (uint64_t)n];
}

#define PICK(r, ...) pick(r, (const int[]){__VA_ARGS__}, sizeof((const int[]){__VA_ARGS__}) / sizeof(int))

/* One random scenario as a JSON document (may be invalid: the loader decides). */
static json_t *random_scenario(rng64 *r, int i)
{
    int heads = PICK(r, 8, 16, 32, 64, 128), head_dim = PICK(r, 64, 128), hidden = heads * head_dim;
    int swiglu = (int)(next(r) % 2), groups = next(r) % 2 && heads % 8 == 0 ? heads / 8 : heads;
    int tp = PICK(r, 1, 2, 4, 8), pp = PICK(r, 1, 2, 4, 8, 16), dp = PICK(r, 1, 2, 4, 8, 16, 32, 64);
    int vpp = pp > 1 ? PICK(r, 1, 1, 2, 4) : 1, mb = PICK(r, 1, 2, 4), m = PICK(r, 1, 2, 4, 8, 16, 32);
    int cp = PICK(r, 1, 1, 1, 2), zero = PICK(r, 0, 1, 2, 3);
    const char *sched = vpp > 1 ? "interleaved" : (next(r) % 3 == 0 ? "gpipe" : "1f1b");
    const char *prec[] = {"bf16", "fp16", "fp32"}, *rec[] = {"none", "selective", "full"};
    const char *plat = next(r) % 2 ? "platforms/dgx-a100-superpod.json" : "platforms/dgx-h100-superpod.json";
    char name[64];
    snprintf(name, sizeof name, "random-%d", i);
    json_t *doc = json_pack("{s:s,s:s,s:{s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:b,s:s},s:{s:i,s:i,s:s,s:s,s:s},"
                     "s:{s:i,s:i,s:i,s:i,s:i,s:s,s:b,s:i,s:b,s:b,s:b}}",
                     "name", name, "platform", plat, "model", "num_layers", PICK(r, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96),
                     "hidden_size", hidden, "num_attention_heads", heads, "num_query_groups", groups, "ffn_hidden_size",
                     swiglu ? hidden * 8 / 3 / 64 * 64 : 4 * hidden, "seq_length", PICK(r, 512, 1024, 2048, 4096, 8192),
                     "vocab_size", PICK(r, 32000, 50304, 128256), "swiglu", swiglu, "attention",
                     next(r) % 2 ? "flash" : "unfused", "training", "global_batch_size", mb * dp * m, "micro_batch_size",
                     mb, "precision", prec[next(r) % 3], "recompute_granularity", rec[next(r) % 3], "optimizer", "adam",
                     "parallel", "tensor_model_parallel_size", tp, "pipeline_model_parallel_size", pp,
                     "data_parallel_size", dp, "virtual_pipeline_model_parallel_size", vpp, "context_parallel_size", cp,
                     "schedule", sched, "sequence_parallel", tp > 1 && next(r) % 2, "zero_stage", dp * cp > 1 ? zero : 0,
                     "overlap_grad_reduce", (int)(next(r) % 2), "overlap_p2p_comm", (int)(next(r) % 2),
                     "scatter_gather_p2p", (int)(next(r) % 2));
    /* the playbook, now and then (the loader refuses what does not go together) */
    json_t *par = json_object_get(doc, "parallel");
    if (next(r) % 4 == 0) {
        const char *dtypes[] = {"auto", "fp32", "bf16", "fp16", "int8"};
        json_object_set_new(par, "grad_reduce_dtype", json_string(dtypes[next(r) % 5]));
    }
    if (next(r) % 4 == 0) {
        const char *methods[] = {"topk", "powersgd"};
        json_object_set_new(par, "grad_compression",
                            json_pack("{s:s,s:f,s:i}", "method", methods[next(r) % 2], "topk_ratio",
                                      PICK(r, 1, 10, 100) / 1000.0, "powersgd_rank", PICK(r, 1, 4, 32)));
    }
    if (next(r) % 4 == 0) {
        const char *devices[] = {"cpu", "nvme"};
        json_object_set_new(par, "offload_optimizer", json_string(devices[next(r) % 2]));
        if (next(r) % 2)
            json_object_set_new(par, "offload_parameters", json_string(devices[next(r) % 2]));
    }
    if (json_is_true(json_object_get(par, "sequence_parallel")) && next(r) % 2) {
        json_object_set_new(par, "tp_comm_overlap", json_true());
        json_object_set_new(par, "tp_comm_overlap_chunks", json_integer(PICK(r, 1, 2, 4, 8)));
    }
    if (next(r) % 3 == 0) /* refused unless ZeRO-1/2 with overlapped gradient reduction */
        json_object_set_new(par, "overlap_param_gather", json_true());
    if (cp > 1) {
        const char *cp_comms[] = {"p2p", "all_gather", "a2a"};
        json_object_set_new(par, "cp_comm_type", json_string(cp_comms[next(r) % 3]));
    }
    if (next(r) % 4 == 0) {
        const char *algos[] = {"ring", "tree", "hierarchical", "halving_doubling"};
        json_object_set_new(par, "nccl_algo", json_pack("{s:s}", "all_reduce", algos[next(r) % 4]));
    }
    if (next(r) % 4 == 0) { /* mixture of experts, expert parallelism over DP when it divides */
        json_t *model = json_object_get(doc, "model");
        int experts = PICK(r, 8, 16, 64);
        json_object_set_new(model, "num_experts", json_integer(experts));
        json_object_set_new(model, "moe_router_topk", json_integer(PICK(r, 1, 2, 8)));
        if (next(r) % 2)
            json_object_set_new(model, "moe_expert_capacity_factor", json_real(PICK(r, 100, 125, 200) / 100.0));
        json_object_set_new(par, "expert_model_parallel_size", json_integer(PICK(r, 1, 2, 4, 8)));
    }
    if (next(r) % 4 == 0)
        json_object_set_new(json_object_get(doc, "training"), "data_loader",
                            json_pack("{s:f,s:i,s:i,s:f}", "decode_ms_per_sample", PICK(r, 0, 1, 10, 100) * 1.0,
                                      "workers", PICK(r, 1, 4), "prefetch_batches", PICK(r, 0, 2, 8),
                                      "cv", PICK(r, 0, 1, 5) / 10.0));
    return doc;
}

static int violations;
static char current_doc[4096]; /* the scenario being checked, as JSON, for the report */

static void violation(const scenario_config *s, const char *what, double a, double b)
{
    violations++;
    if (violations <= 20)
        fprintf(stderr, "VIOLATION %s: %s (%g vs %g)\n  scenario: %s\n", s->name, what, a, b, current_doc);
}

static void check_result(const scenario_config *s, const run_result *r)
{
    if (!(r->step_time_s > 0 && isfinite(r->step_time_s)))
        violation(s, "step time > 0 and finite", r->step_time_s, 0);
    if (!(r->mfu > 0 && r->mfu <= 1))
        violation(s, "MFU in (0, 1]", r->mfu, 1);
    if (!(r->bubble_mean >= 0 && r->bubble_mean < 1 && r->bubble_max >= 0 && r->bubble_max < 1))
        violation(s, "bubble in [0, 1)", r->bubble_mean, r->bubble_max);
    for (int c = 0; c < COMM_CLASS_COUNT; c++)
        if (r->comm_exposed_s[c] > r->comm_total_s[c] * (1 + 1e-9) + 1e-12)
            violation(s, "exposed communication <= total", r->comm_exposed_s[c], r->comm_total_s[c]);
    const run_memory *mm = &r->memory;
    double sum = mm->weights + mm->gradients + mm->optimizer + mm->activations + mm->buffers;
    if (fabs(sum - mm->total) > 1e-6 * fmax(1, mm->total))
        violation(s, "memory components sum to the total", sum, mm->total);
}

/* Nodes a group of `size` ranks `stride` apart spans, from rank 0. */
static int group_nodes(long size, long stride, long gpn)
{
    return (int)(((size - 1) * stride) / gpn + 1);
}

/* Nodes the groups over which gradients are reduced and ZeRO shards span, the most of them: the
 * DP x CP group on the rank grid everyone asks (scenario_rank_grid: its replicas tp x cp apart,
 * the CP ranks of each tp apart) and, with experts, the expert-data-parallel group on
 * Megatron-Core's expert grid (etp x ep apart). Until 2026-11-29 this counted replicas
 * tp x cp x pp apart, a grid order dtsim no longer has, and missed groups leaving their node. */
static int sharding_nodes(const scenario_config *s)
{
    rank_grid g = scenario_rank_grid(s);
    long gpn = s->platform.node.gpus, last = -1;
    int nodes = 0;
    for (int d = 0; d < s->parallel.dp; d++)
        for (int c = 0; c < s->parallel.cp; c++) {
            long node = rank_grid_rank(&g, 0, c, 0, d) / gpn;
            if (node != last) {
                nodes++;
                last = node;
            }
        }
    if (s->model.num_experts > 0) {
        long etp = scenario_expert_tp(s), ep = s->parallel.ep > 0 ? s->parallel.ep : 1;
        int expert = group_nodes(scenario_expert_dp(s), etp * ep, gpn);
        if (expert > nodes)
            nodes = expert;
    }
    return nodes;
}

static void double_bandwidth(scenario_config *s)
{
    s->platform.node.nvlink_bandwidth_gbs *= 2;
    s->platform.node.nic_bandwidth_gbps *= 2;
    for (int l = 0; l < LINK_CLASS_COUNT; l++)
        for (int k = 0; k < COLL_KIND_COUNT; k++)
            s->calibration.collectives[l][k].busbw_gbs *= 2;
}

int main(int argc, char **argv)
{
    int want = argc > 1 ? atoi(argv[1]) : 400;
    rng64 r = {argc > 2 ? strtoull(argv[2], NULL, 10) : 1};
    int flow_every = argc > 3 ? atoi(argv[3]) : 100;
    setenv("DTSIM_ROOT", DTSIM_SOURCE_DIR, 1);
    int valid = 0, tried = 0, flows = 0, dp_checks = 0, crossings = 0;
    while (valid < want && tried < 200 * want) {
        json_t *doc = random_scenario(&r, tried++);
        char *text = json_dumps(doc, JSON_COMPACT);
        snprintf(current_doc, sizeof current_doc, "%s", text);
        free(text);
        scenario_config s;
        config_error err;
        int ok = scenario_load_json(doc, DTSIM_SOURCE_DIR, NULL, 0, &s, &err) == 0;
        json_decref(doc);
        if (!ok)
            continue; /* an invalid combination: the loader refused it, as it must */
        valid++;
        run_result a;
        if (run_scenario(&s, &a, &err) != 0) {
            violation(&s, err.msg, 0, 0);
            scenario_free(&s);
            continue;
        }
        check_result(&s, &a);
        if (flow_every > 0 && valid % flow_every == 0 && scenario_gpus(&s) <= 512) {
            run_result f;
            s.run.fidelity_flow = 1;
            if (run_scenario(&s, &f, &err) == 0) {
                flows++;
                check_result(&s, &f);
                /* Offload is the exception: the analytic model gives each GPU its share of the node's
                 * host memory and NVMe as if all the node's GPUs used them at once, where flows of
                 * stages that do not overlap in time get more (docs/model.md, ZeRO-Offload). */
                int shared_host = s.parallel.offload_optimizer != OFFLOAD_NONE;
                if (!shared_host && a.step_time_s > f.step_time_s * 1.02)
                    violation(&s, "analytic step <= flow step + 2%", a.step_time_s, f.step_time_s);
            } else {
                violation(&s, err.msg, 0, 0);
            }
            s.run.fidelity_flow = 0;
        }
        double_bandwidth(&s);
        run_result b;
        /* With a data loader the step's input stall is a Monte Carlo mean over a finite window that
         * starts from a full prefetch queue: near saturation a faster step drains it sooner, so the
         * window holds a little more stall (measured: under 0.5%). Hence 1% there. */
        double slack = s.training.data_loader.present ? 1e-2 : 1e-9;
        if (run_scenario(&s, &b, &err) == 0 && b.step_time_s > a.step_time_s * (1 + slack))
            violation(&s, "doubling link bandwidth never slows a step", b.step_time_s, a.step_time_s);
        /* More replicas: tokens/s must not fall, except where the step's physics says it may:
         * when the DP x CP group (over which ZeRO shards and gradients are reduced) leaves its
         * node, its collectives move from NVLink to the network (e.g. ZeRO-3's per-micro-batch
         * parameter gathers: random-10835 of seed 3 goes from 2.8 s to 13.8 s a step). */
        /* Readers sharing the dataset bandwidth and top-k's all-gather (n k pairs) grow with DP:
         * for those, more replicas may lower tokens/s by design. */
        int dp_may_cost = s.training.data_loader.present || s.parallel.grad_compression == GRAD_COMPRESSION_TOPK;
        int inside_before = sharding_nodes(&s) == 1;
        s.parallel.dp *= 2;
        s.training.global_batch_size *= 2;
        config_error lerr;
        if (inside_before && sharding_nodes(&s) > 1) {
            crossings++;
        } else if (!dp_may_cost && scenario_validate_layout(&s, &lerr) == 0) {
            run_result d;
            if (run_scenario(&s, &d, &err) == 0) {
                dp_checks++;
                if (d.tokens_per_s < b.tokens_per_s * (1 - 1e-9))
                    violation(&s, "more DP replicas (same per-replica batch) never lower tokens/s", d.tokens_per_s,
                              b.tokens_per_s);
            }
        }
        scenario_free(&s);
    }
    printf("%d valid random scenarios (of %d drawn), %d also at flow fidelity, %d with doubled DP (%d more left out: "
           "their sharding group would leave its node): %d violations\n",
           valid, tried, flows, dp_checks, crossings, violations);
    return violations || valid < want ? 1 : 0;
}
