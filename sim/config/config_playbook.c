/* Scenario keys of the techniques beyond 3D parallelism and ZeRO and of the framework that runs
 * them: parallel.framework with the pipeline engine and FSDP rule it implies, gradient
 * compression, ZeRO-Offload / ZeRO-Infinity, the data loader and asynchronous parameter servers. Parsed
 * here so that config_scenario.c keeps the core formats; the models that use them live in
 * workload.c (compression, offload), data_loader.c and async_ps.c. */
#include "config_internal.h"

#include <string.h>

#define S "scenario"

/* parallel.framework's values, in framework_kind's order after FRAMEWORK_UNSET; pipeline_engine's
 * in pipeline_engine_kind's */
static const char *const frameworks[] = {"megatron", "deepspeed", "fsdp", "torchtitan", "nanotron", NULL};
static const char *const engines[] = {"megatron", "deepspeed", NULL};
static const char *const reshards[] = {"always", "never", "default", NULL}; /* after FSDP_RESHARD_UNSET */

const char *framework_kind_name(framework_kind f)
{
    return f > FRAMEWORK_UNSET && f <= FRAMEWORK_NANOTRON ? frameworks[f - 1] : "unset";
}

const char *pipeline_engine_name(pipeline_engine_kind e)
{
    return engines[e == PIPELINE_ENGINE_DEEPSPEED];
}

const char *fsdp_reshard_name(fsdp_reshard_kind r)
{
    return r > FSDP_RESHARD_UNSET && r <= FSDP_RESHARD_DEFAULT ? reshards[r - 1] : "unset";
}

/* The framework's pipeline engine and ZeRO-3 rule where the scenario leaves them out (engine -1,
 * reshard unset), and a refusal where it sets one the framework does not run (config.h). */
static int framework_defaults(framework_kind fw, int *engine, fsdp_reshard_kind *reshard, const char *p,
                              config_error *err)
{
    int own_engine = fw == FRAMEWORK_DEEPSPEED ? PIPELINE_ENGINE_DEEPSPEED : PIPELINE_ENGINE_MEGATRON;
    if (*engine < 0)
        *engine = own_engine;
    else if (fw != FRAMEWORK_UNSET && *engine != own_engine)
        return config_fail(err, "%s.pipeline_engine: %s is not framework %s's pipeline (leave the key out, or say "
                                "framework %s)", p, engines[*engine], framework_kind_name(fw), engines[*engine]);
    if (*reshard != FSDP_RESHARD_UNSET && fw == FRAMEWORK_NANOTRON)
        return config_fail(err, "%s.fsdp_reshard_after_forward: PyTorch FSDP's; framework nanotron has no ZeRO-3 "
                                "(leave the key out, or say framework fsdp or torchtitan)", p);
    if (*reshard != FSDP_RESHARD_UNSET && (fw == FRAMEWORK_MEGATRON || fw == FRAMEWORK_DEEPSPEED))
        return config_fail(err, "%s.fsdp_reshard_after_forward: PyTorch FSDP's, not framework %s's (its ZeRO-3 "
                                "gathers before every pass: leave the key out, or say framework fsdp or "
                                "torchtitan)", p, framework_kind_name(fw));
    if (*reshard == FSDP_RESHARD_UNSET && fw == FRAMEWORK_FSDP)
        *reshard = FSDP_RESHARD_ALWAYS; /* FSDP1's FULL_SHARD */
    if (*reshard == FSDP_RESHARD_UNSET && fw == FRAMEWORK_TORCHTITAN)
        *reshard = FSDP_RESHARD_DEFAULT; /* torchtitan's own policy */
    return 0;
}

/* parallel.framework, parallel.grad_reduce_dtype, parallel.grad_compression, parallel.offload_*,
 * DeepSpeed's stage-3 keys, parallel.pipeline_engine, parallel.fsdp_reshard_after_forward */
int config_parse_parallel_playbook(json_t *par, scenario_config *s, config_error *err)
{
    static const char *const reduce_dtypes[] = {"auto", "fp32", "bf16", "fp16", "int8", NULL};
    static const char *const methods[] = {"none", "topk", "powersgd", NULL};
    static const char *const devices[] = {"none", "cpu", "nvme", NULL};
    static const char *const comp_keys[] = {"method", "topk_ratio", "powersgd_rank", NULL};
    const char *p = S ".parallel";
    int dtype, method, opt_dev, par_dev, engine, reshard, fw;
    long long rank;
    json_t *comp;
    if (config_num(par, p, "stage3_prefetch_bucket_size", 0, 5e7, 0, 1e15, 0, &s->parallel.stage3_prefetch_bucket_size,
                   err) ||
        config_num(par, p, "stage3_param_persistence_threshold", 0, 1e5, 0, 1e15, 0,
                   &s->parallel.stage3_param_persistence_threshold, err) ||
        config_num(par, p, "stage3_max_live_parameters", 0, 1e9, 0, 1e15, 0, &s->parallel.stage3_max_live_parameters,
                   err) ||
        config_num(par, p, "stage3_max_reuse_distance", 0, 1e9, 0, 1e15, 0, &s->parallel.stage3_max_reuse_distance,
                   err) ||
        config_num(par, p, "reduce_bucket_size", 0, 5e8, 1, 1e15, 0, &s->parallel.reduce_bucket_size, err) ||
        config_bool(par, p, "stage3_list_collectives", 0, &s->parallel.stage3_list_collectives, err) ||
        config_enum(par, p, "grad_reduce_dtype", reduce_dtypes, 0, &dtype, err) ||
        config_object(par, p, "grad_compression", &comp, err) ||
        config_enum(par, p, "offload_optimizer", devices, OFFLOAD_NONE, &opt_dev, err) ||
        config_enum(par, p, "offload_parameters", devices, OFFLOAD_NONE, &par_dev, err) ||
        config_enum(par, p, "pipeline_engine", engines, -1, &engine, err) ||
        config_enum(par, p, "fsdp_reshard_after_forward", reshards, -1, &reshard, err) ||
        config_enum(par, p, "framework", frameworks, -1, &fw, err))
        return -1;
    s->parallel.framework = (framework_kind)(fw + 1); /* absent: unset */
    fsdp_reshard_kind rule = (fsdp_reshard_kind)(reshard + 1); /* absent: unset */
    if (framework_defaults(s->parallel.framework, &engine, &rule, p, err))
        return -1;
    s->parallel.pipeline_engine = (pipeline_engine_kind)engine;
    s->parallel.fsdp_reshard_after_forward = rule;
    static const char *const deepspeed_knobs[] = {"stage3_prefetch_bucket_size", "stage3_param_persistence_threshold",
                                                  "stage3_max_live_parameters", "stage3_max_reuse_distance",
                                                  "reduce_bucket_size", "stage3_list_collectives", NULL};
    /* the ZeRO-3 rules that have none of them, and what they do instead */
    char owner[64] = "";
    const char *instead = "FSDP shards every tensor, gathers one layer ahead and reduces a layer in one call";
    if (rule != FSDP_RESHARD_UNSET)
        snprintf(owner, sizeof owner, "FSDP's rule (%s)",
                 s->parallel.framework == FRAMEWORK_UNSET ? "fsdp_reshard_after_forward"
                                                          : framework_kind_name(s->parallel.framework));
    else if (s->parallel.framework == FRAMEWORK_MEGATRON) {
        snprintf(owner, sizeof owner, "Megatron-FSDP (framework megatron)");
        instead = "it shards every tensor and prefetches by its own size (docs/model.md, Which framework)";
    } else if (s->parallel.framework == FRAMEWORK_NANOTRON) {
        snprintf(owner, sizeof owner, "framework nanotron");
        instead = "it has ZeRO stages 0 and 1 only, and buckets its DDP by ddp_bucket_cap_mb (bucket_size_mb)";
    }
    for (int i = 0; owner[0] && deepspeed_knobs[i]; i++)
        if (json_object_get(par, deepspeed_knobs[i]))
            return config_fail(err, "%s.%s: DeepSpeed's stage-3 knob, which %s does not have: %s", p, deepspeed_knobs[i],
                               owner, instead);
    static const double dtype_bytes[] = {0, 4, 2, 2, 1 + 4.0 / GRAD_INT8_BLOCK};
    s->parallel.grad_reduce_bytes = dtype_bytes[dtype];
    s->parallel.grad_reduce_int8 = dtype == 4;

    const char *c = S ".parallel.grad_compression";
    json_t *empty = json_object();
    json_t *cj = comp ? comp : empty;
    int rc = config_check_keys(cj, c, comp_keys, err) ||
             config_enum(cj, c, "method", methods, GRAD_COMPRESSION_NONE, &method, err) ||
             config_num(cj, c, "topk_ratio", 0, 0.01, 0, 1, 1, &s->parallel.topk_ratio, err) ||
             config_int(cj, c, "powersgd_rank", 0, 4, 1, 65536, &rank, err);
    json_decref(empty);
    if (rc)
        return -1;
    s->parallel.grad_compression = (grad_compression_kind)method;
    s->parallel.powersgd_rank = (int)rank;
    s->parallel.offload_optimizer = (offload_device)opt_dev;
    s->parallel.offload_parameters = (offload_device)par_dev;
    return 0;
}

/* The rules on the parsed struct; also part of scenario_validate_layout, so that the planner's
 * candidates (other ZeRO stages) obey them. */
int config_validate_playbook(const scenario_config *s, config_error *err)
{
    static const char *const methods[] = {"none", "topk", "powersgd"};
    static const char *const devices[] = {"none", "cpu", "nvme"};
    const char *p = S ".parallel";
    const char *c = S ".parallel.grad_compression";
    int method = s->parallel.grad_compression, opt_dev = s->parallel.offload_optimizer,
        par_dev = s->parallel.offload_parameters;
    if (method != GRAD_COMPRESSION_NONE) {
        if (s->parallel.zero_stage != 0)
            return config_fail(err, "%s.method: %s needs zero_stage 0 (it replaces the all-reduce; ZeRO "
                                    "stage %d reduce-scatters instead)", c, methods[method], s->parallel.zero_stage);
        if (s->parallel.grad_reduce_int8)
            return config_fail(err, "%s.method: %s cannot be combined with grad_reduce_dtype int8 (its values are "
                                    "sent in the reduction dtype: use auto, fp32, bf16 or fp16)", c, methods[method]);
    }

    if (par_dev != OFFLOAD_NONE && s->parallel.zero_stage != 3)
        return config_fail(err, "%s.offload_parameters: %s needs zero_stage 3 (ZeRO-Infinity partitions the "
                                "parameters before moving them), not %d", p, devices[par_dev], s->parallel.zero_stage);
    if (par_dev != OFFLOAD_NONE && opt_dev == OFFLOAD_NONE)
        return config_fail(err, "%s.offload_parameters: %s needs offload_optimizer too (the optimizer step runs "
                                "where the master weights are)", p, devices[par_dev]);
    /* stage3_list_collectives stands for DeepSpeed up to v0.5.4 (2021), which reduced gradients
     * unquantised: ZeRO++'s qgZ (int8) entered stage3.py in 2023 (commit d18aa2c79, "ZeRO++
     * (#3784)", first tagged v0.10.0) */
    if (s->parallel.stage3_list_collectives && s->parallel.grad_reduce_int8)
        return config_fail(err, "%s.grad_reduce_dtype: int8 (ZeRO++'s quantised reduction, DeepSpeed 2023) is not "
                                "with stage3_list_collectives (DeepSpeed up to v0.5.4, 2021)", p);
    /* DeepSpeed's PipelineEngine runs TrainSchedule only (deepspeed/runtime/pipe/schedule.py: 1F1B
     * order, no virtual stages), blocking sends (p2p.send), the gradient reduction after the last
     * micro-batch (its ReduceGrads step), and refuses ZeRO stages 2 and 3 (engine.py asserts the
     * stage is below gradient partitioning). */
    if (s->parallel.pipeline_engine == PIPELINE_ENGINE_DEEPSPEED && s->parallel.pp > 1) {
        const char *why = s->parallel.schedule != PIPELINE_1F1B ? "schedule 1f1b (its TrainSchedule)"
                          : s->parallel.overlap_p2p_comm        ? "overlap_p2p_comm false (its sends block)"
                          : s->parallel.overlap_grad_reduce     ? "overlap_grad_reduce false (it reduces "
                                                                  "gradients after the last micro-batch)"
                          : s->parallel.zero_stage >= 2         ? "zero_stage 0 or 1 (it refuses ZeRO-2 and -3 "
                                                                  "with pipeline parallelism)"
                          : s->parallel.overlap_moe_a2a         ? "overlap_moe_expert_parallel_comm false"
                                                                : NULL;
        if (why)
            return config_fail(err, "%s.pipeline_engine: deepspeed with pipeline parallelism needs %s", p, why);
    }
    if (s->parallel.fsdp_reshard_after_forward != FSDP_RESHARD_UNSET &&
        s->parallel.pipeline_engine == PIPELINE_ENGINE_DEEPSPEED)
        return config_fail(err, "%s.fsdp_reshard_after_forward: not with pipeline_engine deepspeed (the key is "
                                "PyTorch FSDP2's, as torchtitan sets it; DeepSpeed's stage 3 gathers before every "
                                "pass)", p);
    /* what the framework runs (config.h), on the struct so that the planner's candidates obey it */
    framework_kind fw = s->parallel.framework;
    int pytorch = framework_is_pytorch_fsdp(fw);
    if (fw == FRAMEWORK_FSDP && s->parallel.pp > 1)
        return config_fail(err, "%s.framework: fsdp (PyTorch FSDP1) runs no pipeline: pipeline_model_parallel_size 1, "
                                "or framework torchtitan (FSDP2 with PyTorch's pipelining), not %d", p, s->parallel.pp);
    if (pytorch && (s->parallel.zero_stage == 1 || s->parallel.zero_stage == 2))
        return config_fail(err, "%s.framework: %s shards all of the model state or none of it: zero_stage 0 (%s) or 3 "
                                "(%s), not %d", p, framework_kind_name(fw),
                           fw == FRAMEWORK_FSDP ? "NO_SHARD" : "data_parallel_replicate_degree",
                           fw == FRAMEWORK_FSDP ? "FULL_SHARD; SHARD_GRAD_OP is 3 with fsdp_reshard_after_forward never"
                                                : "data_parallel_shard_degree",
                           s->parallel.zero_stage);
    /* torchtitan/models/llama3/infra/parallelize.py: without FSDP, DDP must be the whole mesh ("DDP has
     * not supported > 1D parallelism") */
    if (fw == FRAMEWORK_TORCHTITAN && s->parallel.zero_stage == 0 && s->parallel.dp > 1 &&
        (s->parallel.tp > 1 || s->parallel.pp > 1 || s->parallel.cp > 1 || s->parallel.ep > 1))
        return config_fail(err, "%s.framework: torchtitan runs DDP (zero_stage 0) only as the whole layout (its "
                                "parallelize.py refuses DDP beside any other parallelism): TP, PP, CP and EP 1, DP "
                                "1, or zero_stage 3", p);
    /* Megatron-LM shards gradients only through Megatron-FSDP, whose optim_grads reduce-scatters
     * every micro-batch (megatron_fsdp.py, grad_reduce_every_bprop), unlike dtsim's ZeRO-2 */
    if (fw == FRAMEWORK_MEGATRON && s->parallel.zero_stage == 2)
        return config_fail(err, "%s.framework: megatron runs ZeRO-2 only as Megatron-FSDP's optim_grads, which "
                                "reduce-scatters every micro-batch and is not modelled: zero_stage 1 (the distributed "
                                "optimizer) or 3 (Megatron-FSDP)", p);
    /* nanotron (at the Ultra-Scale Playbook's branch, nouamane/bench2 @ 67c5ebb6): any zero_stage above
     * 0 builds its ZeroDistributedOptimizer, which shards the optimizer states only (helpers.py);
     * with fp32 accumulation that stage runs no DDP and all-reduces the whole gradient after the
     * backward (trainer.py: make_ddp, sync_gradients_across_dp with reduce_scatter=False), then
     * gathers the parameters inside optimizer.step() (optim/zero.py, _all_gather_params), so
     * overlap_grad_reduce is its DDP's (ZeRO 0; params_grad_reduce_overlapped) and Megatron's
     * overlap_param_gather is refused; its
     * pipeline engines are 1f1b and afab (all forwards, all backwards: schedule gpipe), no virtual
     * stages (config/utils_config.py); its fp32 accumulation (optim/gradient_accumulator.py) asserts
     * 16-bit parameters */
    if (fw == FRAMEWORK_NANOTRON) {
        const char *why = s->parallel.zero_stage >= 2 ? "zero_stage 0 or 1 (any stage above 0 is its "
                                                        "ZeroDistributedOptimizer, which shards the optimizer "
                                                        "states only)"
                          : s->parallel.schedule == PIPELINE_INTERLEAVED && s->parallel.pp > 1
                              ? "schedule 1f1b or gpipe (its 1f1b and afab engines; no virtual stages)"
                          : s->parallel.overlap_param_gather
                              ? "overlap_param_gather false (its ZeRO-1 gathers the parameters inside the "
                                "optimizer's step)"
                          : s->parallel.grad_compression != GRAD_COMPRESSION_NONE ? "grad_compression none"
                          : s->parallel.grad_reduce_bytes > 0 && (s->parallel.grad_reduce_bytes != 4 ||
                                                                  s->parallel.grad_reduce_int8)
                              ? "grad_reduce_dtype auto or fp32 (modelled as the Playbook ran it, with "
                                "accumulate_grad_in_fp32: fp32 gradients, reduced in fp32)"
                          : s->training.precision == PREC_FP32 || s->training.precision == PREC_TF32
                              ? "precision bf16 or fp16 (its FP32GradientAccumulator takes 16-bit parameters)"
                          : s->model.num_experts > 0
                              ? "num_experts 0 (its Llama has no MoE layer at that branch; the host's launches "
                                "are counted for its dense layer)"
                          : s->training.recompute == RECOMPUTE_SELECTIVE
                              ? "recompute_granularity none or full (its recompute_layer re-runs whole layers)"
                          : s->parallel.tp > 1 && !s->parallel.sequence_parallel
                              ? "sequence_parallel true with TP (its tp_mode REDUCE_SCATTER, which the "
                                "Playbook ran; its ALL_REDUCE mode's launches are not counted)"
                              : NULL;
        if (why)
            return config_fail(err, "%s.framework: nanotron needs %s", p, why);
    }
    if ((pytorch || fw == FRAMEWORK_MEGATRON || fw == FRAMEWORK_NANOTRON) &&
        (opt_dev != OFFLOAD_NONE || par_dev != OFFLOAD_NONE))
        return config_fail(err, "%s.%s: dtsim models DeepSpeed's ZeRO-Offload, not framework %s's CPU offload", p,
                           opt_dev != OFFLOAD_NONE ? "offload_optimizer" : "offload_parameters", framework_kind_name(fw));
    if (s->parallel.fsdp_reshard_after_forward != FSDP_RESHARD_UNSET && par_dev != OFFLOAD_NONE)
        return config_fail(err, "%s.fsdp_reshard_after_forward: not with offload_parameters (dtsim offloads "
                                "parameters as DeepSpeed's ZeRO-Infinity does, not as FSDP2)", p);
    const platform_config *pl = &s->platform;
    for (int i = 0; i < 2; i++) {
        int dev = i ? par_dev : opt_dev;
        const char *key = i ? "offload_parameters" : "offload_optimizer";
        if (dev != OFFLOAD_NONE && pl->node.host_memory_bandwidth_gbs <= 0)
            return config_fail(err, "%s.%s: %s needs the platform's node.host_memory_bandwidth_gbs (the CPU "
                                    "optimizer step and host staging run at it)", p, key, devices[dev]);
        if (dev == OFFLOAD_NVME && (pl->node.nvme_read_gbs <= 0 || pl->node.nvme_write_gbs <= 0))
            return config_fail(err, "%s.%s: nvme needs the platform's node.nvme_read_gbs and node.nvme_write_gbs",
                               p, key);
    }
    return 0;
}

/* training.data_loader */
int config_parse_data_loader(json_t *t, scenario_config *s, config_error *err)
{
    static const char *const keys[] = {"sample_bytes", "decode_ms_per_sample", "workers", "prefetch_batches",
                                       "cv", NULL};
    const char *p = S ".training.data_loader";
    json_t *dl;
    if (config_object(t, S ".training", "data_loader", &dl, err))
        return -1;
    memset(&s->training.data_loader, 0, sizeof s->training.data_loader);
    if (!dl)
        return 0;
    long long workers, prefetch;
    double default_sample = (double)s->model.seq_length * 4; /* uint32 token ids */
    if (config_check_keys(dl, p, keys, err) ||
        config_num(dl, p, "sample_bytes", 0, default_sample, 0, 1e12, 1, &s->training.data_loader.sample_bytes,
                   err) ||
        config_num(dl, p, "decode_ms_per_sample", 0, 0, 0, 1e9, 0, &s->training.data_loader.decode_ms_per_sample,
                   err) ||
        config_int(dl, p, "workers", 0, 1, 1, 1024, &workers, err) ||
        config_int(dl, p, "prefetch_batches", 0, 2, 0, 1000000, &prefetch, err) ||
        config_num(dl, p, "cv", 0, 0, 0, 10, 0, &s->training.data_loader.cv, err))
        return -1;
    s->training.data_loader.present = 1;
    s->training.data_loader.workers = (int)workers;
    s->training.data_loader.prefetch_batches = (int)prefetch;
    return 0;
}

/* parameter_server (top level) */
int config_parse_parameter_server(json_t *root, scenario_config *s, config_error *err)
{
    static const char *const keys[] = {"servers", "server_nic_gbps", "steps", "max_staleness", "compute_cv",
                                       NULL};
    const char *p = S ".parameter_server";
    json_t *ps;
    if (config_object(root, S, "parameter_server", &ps, err))
        return -1;
    memset(&s->parameter_server, 0, sizeof s->parameter_server);
    if (!ps)
        return 0;
    long long servers, steps, stale;
    double node_gbps = s->platform.node.nics * s->platform.node.nic_bandwidth_gbps;
    if (config_check_keys(ps, p, keys, err) || config_int(ps, p, "servers", 1, 0, 1, 1048576, &servers, err) ||
        config_num(ps, p, "server_nic_gbps", 0, node_gbps > 0 ? node_gbps : 100, 0, 1e7, 1,
                   &s->parameter_server.server_nic_gbps, err) ||
        config_int(ps, p, "steps", 0, 100, 1, 1000000, &steps, err) ||
        config_int(ps, p, "max_staleness", 0, 0, 0, 1000000, &stale, err) ||
        config_num(ps, p, "compute_cv", 0, 0, 0, 10, 0, &s->parameter_server.compute_cv, err))
        return -1;
    s->parameter_server.present = 1;
    s->parameter_server.servers = (int)servers;
    s->parameter_server.steps = (int)steps;
    s->parameter_server.max_staleness = (int)stale;
    return 0;
}
