/* Scenario files: parsed strictly, the platform and calibration resolved, every layout rule
 * checked. Errors name the JSON path, the value and the rule; nothing is run on bad input. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "collective.h"
#include "config_internal.h"
#include "model_file.h"

#define S "scenario"

void scenario_free(scenario_config *s)
{
    calibration_free(&s->calibration);
    free(s->parallel.pipeline_layers);
    free(s->faults.degraded);
    free(s->faults.stragglers);
    s->parallel.pipeline_layers = NULL;
    s->faults.degraded = NULL;
    s->faults.stragglers = NULL;
}

/* "platform" and "calibration": a path (relative to the scenario's folder, then the
 * repository root) or an inline object. An override of platform.x when the platform is a
 * file first inlines the file, so --set can change any platform figure. */
static int inline_referenced(json_t *root, const char *key, const char *base_dir, char *dir_out, size_t n,
                             config_error *err)
{
    json_t *v = json_object_get(root, key);
    snprintf(dir_out, n, "%s", base_dir);
    if (!json_is_string(v))
        return 0;
    char path[CFG_PATH_MAX];
    if (config_resolve_path(json_string_value(v), base_dir, path, sizeof path) != 0)
        return config_fail(err, S ".%s: '%s' not found (looked in %s and the repository root)", key,
                           json_string_value(v), base_dir);
    json_t *obj = config_load_file(path, key, err);
    if (!obj)
        return -1;
    config_dirname(path, dir_out, n);
    json_object_set_new(root, key, obj);
    return 0;
}

/* "platform": {"from": PATH, ...}: the platform file with the object's other keys merged over it,
 * objects key by key (jansson's json_object_update_recursive: {"from": F, "node": {"nvls": false}}
 * is F with NVLink SHARP off), so a scenario or a validation case says how its cluster differs
 * from a shipped one without copying it. dir_out: the file's folder, against which its
 * calibration path resolves. */
static int resolve_platform_from(json_t *root, const char *base_dir, char *dir_out, size_t n, config_error *err)
{
    json_t *plat = json_object_get(root, "platform");
    json_t *from = json_is_object(plat) ? json_object_get(plat, "from") : NULL;
    if (!from)
        return 0;
    if (!json_is_string(from))
        return config_fail(err, S ".platform.from: expected the path of a platform file");
    char path[CFG_PATH_MAX];
    if (config_resolve_path(json_string_value(from), base_dir, path, sizeof path) != 0)
        return config_fail(err, S ".platform.from: '%s' not found (looked in %s and the repository root)",
                           json_string_value(from), base_dir);
    json_t *obj = config_load_file(path, "platform", err);
    if (!obj)
        return -1;
    json_object_del(plat, "from");
    if (json_object_update_recursive(obj, plat) != 0) {
        json_decref(obj);
        return config_fail(err, S ".platform: out of memory merging it over '%s'", path);
    }
    config_dirname(path, dir_out, n);
    json_object_set_new(root, "platform", obj);
    return 0;
}

/* "model": a model file's path or {"from": PATH, ...} replaced by the object it stands for
 * (engine/model_file.c, which dtrain reads the same files with). */
static int resolve_model(json_t *root, const char *base_dir, config_error *err)
{
    json_t *model = json_object_get(root, "model");
    if (!model || !(json_is_string(model) || json_object_get(model, "from")))
        return 0;
    char why[sizeof err->msg - 32];
    json_t *resolved = model_resolve(model, base_dir, why, sizeof why);
    if (!resolved)
        return config_fail(err, S ".%s", why);
    json_object_set_new(root, "model", resolved);
    return 0;
}

int scenario_parse_model(void *model_json, const char *p, scenario_config *s, config_error *err)
{
    json_t *m = model_json;
    static const char *const keys[] = {"num_layers", "hidden_size", "num_attention_heads", "ffn_hidden_size",
                                       "seq_length", "vocab_size", "num_query_groups", "swiglu", "num_experts",
                                       "moe_router_topk", "attention", "untie_embeddings_and_output_weights",
                                       "cross_entropy_loss_fusion", "cross_entropy_fusion_impl", "moe_expert_capacity_factor", "moe_pad_expert_input_to_capacity",
                                       "moe_load_imbalance", "normalization", "position_embedding_type",
                                       "attention_backend", "kv_channels", "moe_router_num_groups",
                                       "moe_router_group_topk", NULL};
    static const char *const normalization[] = {"LayerNorm", "RMSNorm", NULL};
    static const char *const positions[] = {"learned_absolute", "rope", NULL};
    static const char *const attention[] = {"unfused", "flash", NULL};
    static const char *const backends[] = {"flash", "fused", NULL};
    static const char *const fusion_impl[] = {"native", "te", NULL};
    long long v, group_topk;
    int e, backend;
    if (config_check_keys(m, p, keys, err) ||
        config_int(m, p, "num_layers", 1, 0, 1, 100000, &s->model.num_layers, err) ||
        config_int(m, p, "hidden_size", 1, 0, 1, 1000000, &s->model.hidden_size, err) ||
        config_int(m, p, "num_attention_heads", 1, 0, 1, 100000, &s->model.num_attention_heads, err) ||
        config_int(m, p, "ffn_hidden_size", 0, 4 * s->model.hidden_size, 1, 10000000, &s->model.ffn_hidden_size, err) ||
        config_int(m, p, "seq_length", 1, 0, 1, 100000000, &s->model.seq_length, err) ||
        config_int(m, p, "vocab_size", 1, 0, 1, 100000000, &s->model.vocab_size, err) ||
        config_int(m, p, "num_query_groups", 0, s->model.num_attention_heads, 1, 100000, &s->model.num_query_groups, err) ||
        config_int(m, p, "kv_channels", 0, 0, 1, 1000000, &s->model.kv_channels, err) ||
        config_bool(m, p, "swiglu", 0, &s->model.swiglu, err) ||
        config_int(m, p, "num_experts", 0, 0, 0, 100000, &s->model.num_experts, err) ||
        config_int(m, p, "moe_router_topk", 0, 0, 0, 100000, &v, err) ||
        config_int(m, p, "moe_router_num_groups", 0, 0, 1, 100000, &s->model.moe_router_num_groups, err) ||
        config_int(m, p, "moe_router_group_topk", 0, 0, 1, 100000, &group_topk, err) ||
        config_enum(m, p, "attention", attention, ATTENTION_FLASH, &e, err) ||
        config_enum(m, p, "attention_backend", backends, ATTN_BACKEND_FLASH, &backend, err) ||
        config_bool(m, p, "untie_embeddings_and_output_weights", 0, &s->model.untie_embeddings, err) ||
        config_bool(m, p, "cross_entropy_loss_fusion", 0, &s->model.cross_entropy_loss_fusion, err) ||
        config_enum(m, p, "cross_entropy_fusion_impl", fusion_impl, 0, &s->model.cross_entropy_fusion_impl, err) ||
        config_num(m, p, "moe_expert_capacity_factor", 0, 0, 0, 1e3, 0, &s->model.moe_expert_capacity_factor, err) ||
        config_bool(m, p, "moe_pad_expert_input_to_capacity", 0, &s->model.moe_pad_expert_input_to_capacity, err) ||
        config_num(m, p, "moe_load_imbalance", 0, 0, 1, 1e3, 0, &s->model.moe_load_imbalance, err) ||
        /* Megatron-LM's defaults are LayerNorm and learned positions; a SwiGLU model that names
         * neither is taken as the Llama family's (RMSNorm, rope), as engine/gpt_config.c does */
        config_enum(m, p, "normalization", normalization, s->model.swiglu, &s->model.rmsnorm, err) ||
        config_enum(m, p, "position_embedding_type", positions, s->model.swiglu, &s->model.rope, err))
        return -1;
    if (s->model.num_experts == 0 && (s->model.moe_expert_capacity_factor > 0 || s->model.moe_load_imbalance > 0 ||
                                      s->model.moe_pad_expert_input_to_capacity))
        return config_fail(err, "%s: moe_expert_capacity_factor, moe_pad_expert_input_to_capacity and "
                                "moe_load_imbalance need num_experts", p);
    if (s->model.moe_pad_expert_input_to_capacity && s->model.moe_expert_capacity_factor <= 0)
        return config_fail(err, "%s.moe_pad_expert_input_to_capacity: needs moe_expert_capacity_factor (as in "
                                "Megatron-LM)", p);
    if (!s->model.cross_entropy_loss_fusion && json_object_get(m, "cross_entropy_fusion_impl"))
        return config_fail(err, "%s.cross_entropy_fusion_impl: needs cross_entropy_loss_fusion (as in Megatron-LM)", p);
    s->model.moe_router_topk = (int)v;
    s->model.attention = (attention_impl)e;
    s->model.attention_backend = (attention_backend)backend;
    if (json_object_get(m, "attention_backend") && s->model.attention != ATTENTION_FLASH)
        return config_fail(err, "%s.attention_backend: chooses the kernel of fused attention, and attention is "
                                "\"unfused\"", p);
    /* as Megatron-LM: a head's width is hidden / heads unless kv_channels says otherwise */
    if (s->model.kv_channels == 0 && s->model.hidden_size % s->model.num_attention_heads)
        return config_fail(err, "%s.hidden_size: %lld is not a multiple of num_attention_heads=%lld (give "
                                "kv_channels, the width of one head, for such a model)", p,
                           s->model.hidden_size, s->model.num_attention_heads);
    if (s->model.num_attention_heads % s->model.num_query_groups)
        return config_fail(err, "%s.num_query_groups: %lld does not divide num_attention_heads=%lld", p,
                           s->model.num_query_groups, s->model.num_attention_heads);
    if (s->model.num_experts > 0 && (s->model.moe_router_topk < 1 || s->model.moe_router_topk > s->model.num_experts))
        return config_fail(err, "%s.moe_router_topk: %d must be in 1..num_experts=%lld when experts are used", p,
                           s->model.moe_router_topk, s->model.num_experts);
    if (s->model.num_experts == 0 && s->model.moe_router_topk != 0)
        return config_fail(err, "%s.moe_router_topk: %d without num_experts", p, s->model.moe_router_topk);
    /* group-limited routing, as Megatron-Core's TransformerConfig asks: both keys or neither, the
     * experts in equal groups, a token's groups among them and no more than its experts */
    s->model.moe_router_group_topk = (int)group_topk;
    long long groups = s->model.moe_router_num_groups;
    if ((groups > 0) != (group_topk > 0))
        return config_fail(err, "%s: moe_router_num_groups and moe_router_group_topk go together", p);
    if (groups > 0 && s->model.num_experts == 0)
        return config_fail(err, "%s.moe_router_num_groups: group-limited routing needs num_experts", p);
    if (groups > 0 && s->model.num_experts % groups)
        return config_fail(err, "%s.moe_router_num_groups: %lld must divide num_experts=%lld", p, groups,
                           s->model.num_experts);
    if (groups > 0 && (group_topk > groups || group_topk > s->model.moe_router_topk))
        return config_fail(err, "%s.moe_router_group_topk: %lld must be at most moe_router_num_groups=%lld and "
                                "moe_router_topk=%d", p, group_topk, groups, s->model.moe_router_topk);
    if (groups > 0 && s->model.moe_router_topk > group_topk * (s->model.num_experts / groups))
        return config_fail(err, "%s.moe_router_topk: %d experts cannot come from moe_router_group_topk=%lld groups "
                                "of %lld", p, s->model.moe_router_topk, group_topk, s->model.num_experts / groups);
    return 0;
}

static int parse_training(json_t *t, scenario_config *s, config_error *err)
{
    static const char *const keys[] = {"global_batch_size", "micro_batch_size", "precision",
                                       "recompute_granularity", "recompute_method", "recompute_num_layers",
                                       "optimizer", "tokens", "train_iters", "train_samples", "data_loader",
                                       "activation_bytes", "fp8_recipe", "distribute_saved_activations", NULL};
    static const char *const precisions[] = {"fp32", "tf32", "fp16", "bf16", "fp8", NULL};
    static const char *const fp8_recipes[] = {"delayed", "tensorwise", "mxfp8", "blockwise", NULL};
    static const char *const recompute[] = {"none", "selective", "full", NULL};
    static const char *const optimizers[] = {"adam", "sgd", NULL};
    static const char *const methods[] = {"uniform", "block", NULL};
    const char *p = S ".training";
    int prec, rec, opt, method, recipe;
    long long act_bytes = 0;
    if (config_check_keys(t, p, keys, err) ||
        config_int(t, p, "global_batch_size", 1, 0, 1, 100000000, &s->training.global_batch_size, err) ||
        config_int(t, p, "micro_batch_size", 0, 1, 1, 100000000, &s->training.micro_batch_size, err) ||
        config_enum(t, p, "precision", precisions, PREC_BF16, &prec, err) ||
        config_enum(t, p, "recompute_granularity", recompute, RECOMPUTE_NONE, &rec, err) ||
        config_enum(t, p, "recompute_method", methods, 0, &method, err) ||
        config_int(t, p, "recompute_num_layers", 0, 1, 1, 100000, &s->training.recompute_num_layers, err) ||
        config_bool(t, p, "distribute_saved_activations", 0, &s->training.distribute_saved_activations, err) ||
        config_enum(t, p, "optimizer", optimizers, OPTIMIZER_ADAM, &opt, err) ||
        config_enum(t, p, "fp8_recipe", fp8_recipes, FP8_RECIPE_DELAYED, &recipe, err) ||
        config_int(t, p, "activation_bytes", 0, 0, 1, 8, &act_bytes, err) ||
        config_num(t, p, "tokens", 0, 0, 0, 1e18, 0, &s->training.tokens, err) ||
        config_int(t, p, "train_iters", 0, 0, 1, 1000000000000LL, &s->training.train_iters, err) ||
        config_int(t, p, "train_samples", 0, 0, 1, 1000000000000000LL, &s->training.train_samples, err) ||
        config_parse_data_loader(t, s, err))
        return -1;
    /* What is trained, one way: Megatron-LM's --train-iters or --train-samples, or tokens */
    int budgets = (s->training.tokens > 0) + (s->training.train_iters > 0) + (s->training.train_samples > 0);
    if (budgets > 1)
        return config_fail(err, "%s: give one of tokens, train_iters and train_samples (they say the same thing)", p);
    if (s->training.train_iters > 0)
        s->training.tokens = (double)s->training.train_iters * (double)s->training.global_batch_size *
                             (double)s->model.seq_length;
    if (s->training.train_samples > 0)
        s->training.tokens = (double)s->training.train_samples * (double)s->model.seq_length;
    s->training.precision = (precision_kind)prec;
    s->training.recompute = (recompute_kind)rec;
    s->training.recompute_block = method;
    s->training.optimizer = (optimizer_kind)opt;
    s->training.activation_bytes = (int)act_bytes;
    s->training.fp8_recipe = (fp8_recipe_kind)recipe;
    if (json_object_get(t, "fp8_recipe") && prec != PREC_FP8) /* a recipe without fp8 says nothing */
        return config_fail(err, "%s.fp8_recipe: applies to precision fp8 only (this scenario's is %s)", p,
                           precisions[prec]);
    /* as Megatron-LM refuses them without full granularity */
    if ((json_object_get(t, "recompute_method") || json_object_get(t, "recompute_num_layers")) &&
        rec != RECOMPUTE_FULL)
        return config_fail(err, "%s.recompute_method / recompute_num_layers: apply to recompute_granularity full only",
                           p);
    /* as Megatron-LM's arguments.py asserts: the kept inputs of full recomputation, split over TP */
    if (s->training.distribute_saved_activations && rec != RECOMPUTE_FULL)
        return config_fail(err, "%s.distribute_saved_activations: applies to recompute_granularity full only", p);
    if (s->platform.gpu.peak_tflops[prec] <= 0)
        return config_fail(err, "%s.precision: %s is not supported by %s (its peak_tflops.%s is 0)", p,
                           precisions[prec], s->platform.gpu.name, precisions[prec]);
    return 0;
}

/* parallel.nccl_algo: {"all_reduce": "ring", ...}, as NCCL_ALGO forces NCCL's choice; each
 * algorithm only for the collectives it implements. Kept in the platform, which the collective
 * model reads. */
static int parse_nccl_algo(json_t *obj, scenario_config *s, config_error *err)
{
    const char *p = S ".parallel.nccl_algo";
    /* which kinds each algorithm runs: bit k for coll_kind k */
    const unsigned reduce_like = 1u << COLL_ALL_REDUCE | 1u << COLL_ALL_GATHER | 1u << COLL_REDUCE_SCATTER;
    const unsigned runs[ALGO_COUNT] = {
        [ALGO_AUTO] = ~0u, [ALGO_RING] = reduce_like | 1u << COLL_BROADCAST, [ALGO_TREE] = 1u << COLL_ALL_REDUCE,
        [ALGO_HIERARCHICAL] = reduce_like, [ALGO_DIRECT] = 1u << COLL_ALL_TO_ALL | 1u << COLL_SEND_RECV,
        [ALGO_PAT] = 1u << COLL_ALL_GATHER | 1u << COLL_REDUCE_SCATTER, [ALGO_HALVING_DOUBLING] = reduce_like,
        [ALGO_NVLS] = reduce_like, [ALGO_NVLS_TREE] = 1u << COLL_ALL_REDUCE,
        [ALGO_COLLNET_DIRECT] = 1u << COLL_ALL_REDUCE, [ALGO_COLLNET_CHAIN] = 1u << COLL_ALL_REDUCE};
    for (int k = 0; k < COLL_KIND_COUNT; k++)
        s->platform.nccl_algo[k] = ALGO_AUTO;
    if (!obj)
        return 0;
    if (!json_is_object(obj))
        return config_fail(err, "%s: expected an object such as {\"all_reduce\": \"ring\"}", p);
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        int kind = coll_kind_from_name(key);
        if (kind < 0)
            return config_fail(err, "%s.%s: not a collective (all_reduce, all_gather, reduce_scatter, all_to_all, "
                                    "send_recv, broadcast)", p, key);
        int a = json_is_string(v) ? coll_algo_from_name(json_string_value(v)) : -1;
        if (a < 0)
            return config_fail(err, "%s.%s: expected one of auto, ring, tree, hierarchical, direct, pat, "
                                    "halving_doubling, nvls, nvlstree, collnetdirect (or collnet), collnetchain",
                               p, key);
        if (!(runs[a] >> kind & 1u))
            return config_fail(err, "%s.%s: %s does not implement %s", p, key, coll_algo_name((coll_algo)a), key);
        /* the hardware they run on: the platform has been read before the parallel section */
        if ((a == ALGO_NVLS || a == ALGO_NVLS_TREE) && !s->platform.node.nvls)
            return config_fail(err, "%s.%s: %s needs NVLink SHARP, and the platform's node.nvls is false "
                                    "(set platform.node.nvls to true where the NVSwitches have it)",
                               p, key, coll_algo_name((coll_algo)a));
        if ((a == ALGO_COLLNET_DIRECT || a == ALGO_COLLNET_CHAIN) && !s->platform.network.sharp)
            return config_fail(err, "%s.%s: %s needs in-network reduction, and the platform's network.sharp is "
                                    "false (set platform.network.sharp to true where the switches have SHARP)",
                               p, key, coll_algo_name((coll_algo)a));
        s->platform.nccl_algo[kind] = a;
    }
    return 0;
}

/* parallel.nccl_proto: {"all_reduce": "simple", ...}, as NCCL_PROTO forces one protocol (LL,
 * LL128, Simple, in any case) for NCCL's collectives; "auto" is NCCL's choice. NCCL's
 * point-to-point and all-to-all and the mpi library have no protocols to force. */
static int parse_nccl_proto(json_t *obj, scenario_config *s, config_error *err)
{
    const char *p = S ".parallel.nccl_proto";
    for (int k = 0; k < COLL_KIND_COUNT; k++)
        s->platform.nccl_proto[k] = 0;
    if (!obj)
        return 0;
    if (!json_is_object(obj))
        return config_fail(err, "%s: expected an object such as {\"all_reduce\": \"simple\"}", p);
    if (s->platform.collective_library != COLL_LIBRARY_NCCL && json_object_size(obj) > 0)
        return config_fail(err, "%s: NCCL's protocols, and the platform's collective_library is mpi", p);
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        int kind = coll_kind_from_name(key);
        if (kind < 0)
            return config_fail(err, "%s.%s: not a collective (all_reduce, all_gather, reduce_scatter, broadcast)", p,
                               key);
        if (kind == COLL_ALL_TO_ALL || kind == COLL_SEND_RECV)
            return config_fail(err, "%s.%s: NCCL's point-to-point has no protocol to force here (all_reduce, "
                                    "all_gather, reduce_scatter, broadcast)", p, key);
        const char *name = json_is_string(v) ? json_string_value(v) : "";
        int pr = !strcmp(name, "auto") ? -1 : coll_proto_from_name(name);
        if (pr < 0 && strcmp(name, "auto"))
            return config_fail(err, "%s.%s: expected one of auto, ll, ll128, simple (NCCL_PROTO's names)", p, key);
        s->platform.nccl_proto[kind] = pr + 1;
    }
    return 0;
}

static const char *const dispatchers[] = {"alltoall", "flex", NULL};

const char *moe_token_dispatcher_name(int flex)
{
    return dispatchers[flex != 0];
}

static int parse_parallel(json_t *par, scenario_config *s, config_error *err)
{
    static const char *const keys[] = {"tensor_model_parallel_size", "pipeline_model_parallel_size",
                                       "data_parallel_size", "virtual_pipeline_model_parallel_size",
                                       "sequence_parallel", "context_parallel_size", "expert_model_parallel_size",
                                       "expert_tensor_parallel_size", "zero_stage", "schedule", "overlap_grad_reduce", "overlap_p2p_comm",
                                       "scatter_gather_p2p", "bucket_size_mb",
                                       "pipeline_layers", "grad_reduce_dtype", "grad_compression",
                                       "offload_optimizer", "offload_parameters", "nccl_algo", "nccl_proto",
                                       "stage3_prefetch_bucket_size", "stage3_param_persistence_threshold",
                                       "stage3_max_live_parameters", "stage3_max_reuse_distance",
                                       "reduce_bucket_size", "stage3_list_collectives", "cp_comm_type",
                                       "tp_comm_overlap", "tp_comm_overlap_chunks", "overlap_param_gather",
                                       "overlap_moe_expert_parallel_comm", "moe_token_dispatcher_type",
                                       "pipeline_engine",
                                       "fsdp_reshard_after_forward", "framework", NULL};
    static const char *const schedules[] = {"gpipe", "1f1b", "interleaved", NULL};
    static const char *const cp_comms[] = {"p2p", "all_gather", "a2a", NULL};
    int cp_comm, dispatcher;
    long long chunks;
    const char *p = S ".parallel";
    long long tp, pp, dp, vpp, cp, ep, etp, zero;
    int sched;
    if (config_check_keys(par, p, keys, err) ||
        config_int(par, p, "tensor_model_parallel_size", 0, 1, 1, 1048576, &tp, err) ||
        config_int(par, p, "pipeline_model_parallel_size", 0, 1, 1, 1048576, &pp, err) ||
        config_int(par, p, "virtual_pipeline_model_parallel_size", 0, 1, 1, 1024, &vpp, err) ||
        config_int(par, p, "context_parallel_size", 0, 1, 1, 1048576, &cp, err) ||
        config_int(par, p, "expert_model_parallel_size", 0, 1, 1, 1048576, &ep, err) ||
        config_int(par, p, "expert_tensor_parallel_size", 0, 0, 1, 1048576, &etp, err) ||
        config_int(par, p, "zero_stage", 0, 1, 0, 3, &zero, err) ||
        config_bool(par, p, "sequence_parallel", 0, &s->parallel.sequence_parallel, err) ||
        config_enum(par, p, "schedule", schedules, PIPELINE_1F1B, &sched, err) ||
        config_bool(par, p, "overlap_grad_reduce", 0, &s->parallel.overlap_grad_reduce, err) ||
        config_enum(par, p, "cp_comm_type", cp_comms, CP_COMM_P2P, &cp_comm, err) ||
        config_bool(par, p, "tp_comm_overlap", 0, &s->parallel.tp_comm_overlap, err) ||
        config_int(par, p, "tp_comm_overlap_chunks", 0, 4, 1, 64, &chunks, err) ||
        config_bool(par, p, "overlap_param_gather", 0, &s->parallel.overlap_param_gather, err) ||
        config_bool(par, p, "overlap_moe_expert_parallel_comm", 0, &s->parallel.overlap_moe_a2a, err) ||
        config_enum(par, p, "moe_token_dispatcher_type", dispatchers, 0, &dispatcher, err) ||
        config_bool(par, p, "overlap_p2p_comm", 0, &s->parallel.overlap_p2p_comm, err) ||
        config_bool(par, p, "scatter_gather_p2p", 1, &s->parallel.scatter_gather_p2p, err) ||
        config_num(par, p, "bucket_size_mb", 0, 0, 0, 1e6, 1, &s->parallel.bucket_size_mb, err))
        return -1;
    long long platform_gpus = (long long)s->platform.network.nodes * s->platform.node.gpus;
    long long model_ranks = tp * pp * cp;
    if (model_ranks > platform_gpus)
        return config_fail(err, "%s: tensor x pipeline x context parallel = %lld x %lld x %lld = %lld GPUs, more than "
                                "the platform's %lld", p, tp, pp, cp, model_ranks, platform_gpus);
    if (json_object_get(par, "data_parallel_size")) {
        if (config_int(par, p, "data_parallel_size", 1, 0, 1, 1048576, &dp, err))
            return -1;
        if (model_ranks * dp > platform_gpus)
            return config_fail(err, "%s.data_parallel_size: %lld x (TP x PP x CP = %lld) = %lld GPUs, more than the "
                                    "platform's %lld", p, dp, model_ranks, model_ranks * dp, platform_gpus);
    } else {
        if (platform_gpus % model_ranks)
            return config_fail(err, "%s.data_parallel_size: omitted, but the platform's %lld GPUs are not a multiple "
                                    "of TP x PP x CP = %lld", p, platform_gpus, model_ranks);
        dp = platform_gpus / model_ranks;
    }
    s->parallel.tp = (int)tp;
    s->parallel.pp = (int)pp;
    s->parallel.dp = (int)dp;
    s->parallel.vpp = (int)vpp;
    s->parallel.cp = (int)cp;
    s->parallel.ep = (int)ep;
    s->parallel.etp = (int)etp; /* 0: TP, Megatron-Core's default */
    s->parallel.zero_stage = (int)zero;
    s->parallel.schedule = (pipeline_kind)sched;
    s->parallel.cp_comm = (cp_comm_kind)cp_comm;
    s->parallel.moe_flex_dispatcher = dispatcher;
    if (dispatcher && s->model.num_experts == 0)
        return config_fail(err, "%s.moe_token_dispatcher_type: \"flex\" dispatches tokens to experts: it needs "
                                "model.num_experts", p);
    /* Megatron-Core's flex dispatcher runs over the experts' TP x EP ranks with topk x TP copies
     * a token; dtsim prices it over EP alone */
    if (dispatcher && (etp > 0 ? etp : tp) > 1)
        return config_fail(err, "%s.moe_token_dispatcher_type: \"flex\" with the experts' own tensor parallelism "
                                "%lld is not modelled (give expert_tensor_parallel_size 1)", p, etp > 0 ? etp : tp);
    s->parallel.tp_comm_overlap_chunks = (int)chunks;

    json_t *layers = json_object_get(par, "pipeline_layers");
    if (layers) {
        if (!json_is_array(layers) || (long long)json_array_size(layers) != pp)
            return config_fail(err, "%s.pipeline_layers: expected a list of %lld layer counts (one per stage)", p, pp);
        s->parallel.pipeline_layers = calloc((size_t)pp, sizeof(int));
        s->parallel.pipeline_layers_count = (int)pp;
        long long sum = 0;
        for (long long i = 0; i < pp; i++) {
            json_t *v = json_array_get(layers, (size_t)i);
            if (!json_is_integer(v) || json_integer_value(v) < vpp || json_integer_value(v) > 100000)
                return config_fail(err, "%s.pipeline_layers[%lld]: expected an integer >= %lld (the model chunks per "
                                        "stage)", p, i, vpp);
            s->parallel.pipeline_layers[i] = (int)json_integer_value(v);
            sum += json_integer_value(v);
        }
        if (sum != s->model.num_layers)
            return config_fail(err, "%s.pipeline_layers: sum to %lld, not num_layers=%lld", p, sum,
                               s->model.num_layers);
    }
    if (parse_nccl_proto(json_object_get(par, "nccl_proto"), s, err) ||
        parse_nccl_algo(json_object_get(par, "nccl_algo"), s, err))
        return -1;
    /* the playbook keys are parsed after the layout and checked with it (config_validate_playbook) */
    if (config_parse_parallel_playbook(par, s, err))
        return -1;
    return scenario_validate_layout(s, err);
}

static int parse_faults(json_t *f, scenario_config *s, config_error *err)
{
    static const char *const keys[] = {"gpu_mtbf_hours", "node_mtbf_hours", "weibull_shape", "detect_s",
                                       "restart_s", "checkpoint_interval_s", "checkpoint_write", "horizon_days",
                                       "seed", "degraded_links", "stragglers", "spare_nodes", "repair_hours",
                                       "elastic", "failure_trace", "step_failure", "restart_per_node_s", NULL};
    static const char *const writes[] = {"sync", "async", NULL};
    const char *p = S ".faults";
    long long seed, spares;
    int w;
    if (config_check_keys(f, p, keys, err) ||
        config_num(f, p, "gpu_mtbf_hours", 0, 0, 0, 1e12, 0, &s->faults.gpu_mtbf_hours, err) ||
        config_num(f, p, "node_mtbf_hours", 0, 0, 0, 1e12, 0, &s->faults.node_mtbf_hours, err) ||
        config_num(f, p, "weibull_shape", 0, 1, 0.01, 100, 0, &s->faults.weibull_shape, err) ||
        config_num(f, p, "detect_s", 0, 120, 0, 1e9, 0, &s->faults.detect_s, err) ||
        config_num(f, p, "restart_s", 0, 600, 0, 1e9, 0, &s->faults.restart_s, err) ||
        config_num(f, p, "restart_per_node_s", 0, 0, 0, 1e6, 0, &s->faults.restart_per_node_s, err) ||
        config_num(f, p, "checkpoint_interval_s", 0, 1800, 0, 1e9, 1, &s->faults.checkpoint_interval_s, err) ||
        config_enum(f, p, "checkpoint_write", writes, 1, &w, err) ||
        config_num(f, p, "horizon_days", 0, 30, 0, 1e5, 1, &s->faults.horizon_days, err) ||
        config_int(f, p, "seed", 0, 1, 0, (long long)9e18, &seed, err) ||
        config_int(f, p, "spare_nodes", 0, 0, 0, 1048576, &spares, err) ||
        config_num(f, p, "repair_hours", 0, 24, 0, 1e9, 0, &s->faults.repair_hours, err) ||
        config_bool(f, p, "elastic", 0, &s->faults.elastic, err) ||
        config_str(f, p, "failure_trace", 0, "", s->faults.failure_trace, sizeof s->faults.failure_trace, err))
        return -1;
    s->faults.checkpoint_async = w == 1;
    s->faults.seed = (unsigned long long)seed;
    s->faults.spare_nodes = (int)spares;
    int gpus = scenario_gpus(s), gpn = s->platform.node.gpus;
    int nodes = (gpus + gpn - 1) / gpn;

    json_t *list = json_object_get(f, "degraded_links");
    if (list) {
        if (!json_is_array(list) || json_array_size(list) > 1048576)
            return config_fail(err, "%s.degraded_links: expected a list of {node, nic, bandwidth_factor}", p);
        s->faults.degraded_count = (int)json_array_size(list);
        s->faults.degraded = calloc(json_array_size(list) + 1, sizeof *s->faults.degraded);
        for (int i = 0; i < s->faults.degraded_count; i++) {
            static const char *const k[] = {"node", "nic", "bandwidth_factor", "flap_period_s", "flap_down_s", NULL};
            char sub[128];
            snprintf(sub, sizeof sub, "%s.degraded_links[%d]", p, i);
            json_t *d = json_array_get(list, (size_t)i);
            long long node, nic;
            if (!json_is_object(d))
                return config_fail(err, "%s: expected an object {node, nic, bandwidth_factor}", sub);
            if (config_check_keys(d, sub, k, err) || config_int(d, sub, "node", 1, 0, 0, nodes - 1, &node, err) ||
                config_int(d, sub, "nic", 1, 0, 0, s->platform.node.nics > 0 ? s->platform.node.nics - 1 : 0, &nic, err) ||
                config_num(d, sub, "bandwidth_factor", 1, 0, 0, 1, 1, &s->faults.degraded[i].bandwidth_factor, err) ||
                config_num(d, sub, "flap_period_s", 0, 0, 0, 1e9, 1, &s->faults.degraded[i].flap_period_s, err) ||
                config_num(d, sub, "flap_down_s", 0, 0, 0, 1e9, 1, &s->faults.degraded[i].flap_down_s, err))
                return -1;
            const degraded_link *dl = &s->faults.degraded[i];
            if ((dl->flap_period_s > 0 || dl->flap_down_s > 0) &&
                !(dl->flap_down_s > 0 && dl->flap_down_s < dl->flap_period_s))
                return config_fail(err, "%s: a flapping link needs 0 < flap_down_s (%g) < flap_period_s (%g)", sub,
                                       dl->flap_down_s, dl->flap_period_s);
            s->faults.degraded[i].node = (int)node;
            s->faults.degraded[i].nic = (int)nic;
        }
    }
    json_t *sf = json_object_get(f, "step_failure");
    if (sf) {
        static const char *const k[] = {"gpu", "at_s", NULL};
        char sub[128];
        snprintf(sub, sizeof sub, "%s.step_failure", p);
        long long gpu;
        if (!json_is_object(sf))
            return config_fail(err, "%s: expected an object {gpu, at_s}", sub);
        if (config_check_keys(sf, sub, k, err) || config_int(sf, sub, "gpu", 1, 0, 0, gpus - 1, &gpu, err) ||
            config_num(sf, sub, "at_s", 1, 0, 0, 1e9, 0, &s->faults.step_failure_at_s, err))
            return -1;
        s->faults.step_failure_gpu = (int)gpu;
        s->faults.step_failure = 1;
    }
    list = json_object_get(f, "stragglers");
    if (list) {
        if (!json_is_array(list) || json_array_size(list) > 1048576)
            return config_fail(err, "%s.stragglers: expected a list of {gpu, slowdown}", p);
        s->faults.straggler_count = (int)json_array_size(list);
        s->faults.stragglers = calloc(json_array_size(list) + 1, sizeof *s->faults.stragglers);
        for (int i = 0; i < s->faults.straggler_count; i++) {
            static const char *const k[] = {"gpu", "slowdown", NULL};
            char sub[128];
            snprintf(sub, sizeof sub, "%s.stragglers[%d]", p, i);
            json_t *d = json_array_get(list, (size_t)i);
            long long gpu;
            if (!json_is_object(d))
                return config_fail(err, "%s: expected an object {gpu, slowdown}", sub);
            if (config_check_keys(d, sub, k, err) || config_int(d, sub, "gpu", 1, 0, 0, gpus - 1, &gpu, err) ||
                config_num(d, sub, "slowdown", 1, 0, 1, 1e6, 0, &s->faults.stragglers[i].slowdown, err))
                return -1;
            s->faults.stragglers[i].gpu = (int)gpu;
        }
    }
    return 0;
}

static int parse_run(json_t *r, scenario_config *s, config_error *err)
{
    static const char *const keys[] = {"steps", "fidelity", NULL};
    static const char *const fidelities[] = {"analytic", "flow", NULL};
    long long steps;
    if (config_check_keys(r, S ".run", keys, err) || config_int(r, S ".run", "steps", 0, 1, 1, 1000000, &steps, err) ||
        config_enum(r, S ".run", "fidelity", fidelities, 0, &s->run.fidelity_flow, err))
        return -1;
    s->run.steps = (int)steps;
    return 0;
}

static int load_calibration(json_t *root, const char *base_dir, scenario_config *s, config_error *err)
{
    json_t *cal = json_object_get(root, "calibration");
    if (json_is_object(cal))
        return calibration_parse(cal, S ".calibration", &s->calibration, err);
    char path[CFG_PATH_MAX];
    if (json_is_string(cal)) {
        if (config_resolve_path(json_string_value(cal), base_dir, path, sizeof path) != 0)
            return config_fail(err, S ".calibration: '%s' not found (looked in %s and the repository root)",
                               json_string_value(cal), base_dir);
    } else if (cal) {
        return config_fail(err, S ".calibration: expected a file path or an object");
    } else if (s->platform.calibration[0]) {
        snprintf(path, sizeof path, "%s", s->platform.calibration);
    } else {
        return config_fail(err, S ".calibration: not given, and platform '%s' names no default calibration",
                           s->platform.name);
    }
    return calibration_load(path, &s->calibration, err);
}

/* Before an override of calibration.x in a scenario that names no calibration: make the
 * platform's default calibration explicit, so the override has a file to start from. */
static int name_default_calibration(json_t *root, const char *base_dir, config_error *err)
{
    if (json_object_get(root, "calibration"))
        return 0;
    json_t *plat = json_object_get(root, "platform");
    char plat_dir[CFG_PATH_MAX], path[CFG_PATH_MAX];
    json_t *loaded = NULL;
    snprintf(plat_dir, sizeof plat_dir, "%s", base_dir);
    if (json_is_string(plat)) {
        if (config_resolve_path(json_string_value(plat), base_dir, path, sizeof path) != 0)
            return config_fail(err, S ".platform: '%s' not found (looked in %s and the repository root)",
                               json_string_value(plat), base_dir);
        loaded = config_load_file(path, "platform", err);
        if (!loaded)
            return -1;
        config_dirname(path, plat_dir, sizeof plat_dir);
        plat = loaded;
    }
    json_t *cal = json_is_object(plat) ? json_object_get(plat, "calibration") : NULL;
    int rc = 0;
    if (json_is_string(cal)) {
        if (config_resolve_path(json_string_value(cal), plat_dir, path, sizeof path) == 0)
            json_object_set_new(root, "calibration", json_string(path));
        else
            rc = config_fail(err, S ".platform.calibration: '%s' not found (looked in %s and the repository root)",
                             json_string_value(cal), plat_dir);
    }
    json_decref(loaded);
    return rc;
}

int scenario_load_json(void *json_root, const char *base_dir, const char *const *overrides, int n_overrides,
                       scenario_config *out, config_error *err)
{
    static const char *const top[] = {"name", "platform", "calibration", "model", "training", "parallel",
                                      "faults", "run", "parameter_server", NULL};
    memset(out, 0, sizeof *out);
    err->msg[0] = 0;
    json_t *root = json_deep_copy(json_root); /* overrides must not touch the caller's document */
    if (!root || !json_is_object(root)) {
        json_decref(root);
        return config_fail(err, S ": the top level must be an object");
    }
    char platform_dir[CFG_PATH_MAX], cal_dir[CFG_PATH_MAX];
    snprintf(platform_dir, sizeof platform_dir, "%s", base_dir);
    snprintf(cal_dir, sizeof cal_dir, "%s", base_dir);
    int rc = -1;
    /* a model file or {"from": FILE, ...}, and a platform {"from": FILE, ...}: the object each
     * stands for, before any override of it (and again after them, for an override that names a
     * file) */
    if (resolve_model(root, base_dir, err) ||
        resolve_platform_from(root, base_dir, platform_dir, sizeof platform_dir, err))
        goto done;
    for (int i = 0; i < n_overrides; i++) {
        if (!strncmp(overrides[i], "platform.", 9) &&
            inline_referenced(root, "platform", base_dir, platform_dir, sizeof platform_dir, err))
            goto done;
        if (!strncmp(overrides[i], "calibration.", 12) && name_default_calibration(root, base_dir, err))
            goto done;
        if (!strncmp(overrides[i], "calibration.", 12) &&
            inline_referenced(root, "calibration", base_dir, cal_dir, sizeof cal_dir, err))
            goto done;
        if (config_apply_override(root, overrides[i], err) || resolve_model(root, base_dir, err) ||
            resolve_platform_from(root, base_dir, platform_dir, sizeof platform_dir, err))
            goto done;
    }
    if (config_check_keys(root, S, top, err) ||
        config_str(root, S, "name", 0, "unnamed", out->name, sizeof out->name, err))
        goto done;

    json_t *plat = json_object_get(root, "platform");
    int need_cal = json_object_get(root, "calibration") == NULL;
    if (json_is_string(plat)) {
        char path[CFG_PATH_MAX];
        if (config_resolve_path(json_string_value(plat), base_dir, path, sizeof path) != 0) {
            config_fail(err, S ".platform: '%s' not found (looked in %s and the repository root)",
                        json_string_value(plat), base_dir);
            goto done;
        }
        if (platform_load_ex(path, need_cal, &out->platform, err))
            goto done;
    } else if (json_is_object(plat)) {
        if (platform_parse(plat, S ".platform", platform_dir, need_cal, &out->platform, err))
            goto done;
    } else {
        config_fail(err, S ".platform: required (a file path or an object)");
        goto done;
    }
    if (load_calibration(root, cal_dir, out, err))
        goto done;

    json_t *m, *t, *par, *f, *r;
    if (config_object(root, S, "model", &m, err) || config_object(root, S, "training", &t, err) ||
        config_object(root, S, "parallel", &par, err) || config_object(root, S, "faults", &f, err) ||
        config_object(root, S, "run", &r, err))
        goto done;
    if (!m || !t) {
        config_fail(err, S ".%s: required (an object)", !m ? "model" : "training");
        goto done;
    }
    json_t *empty = json_object();
    int bad = scenario_parse_model(m, S ".model", out, err) || parse_training(t, out, err) ||
              parse_parallel(par ? par : empty, out, err) || parse_faults(f ? f : empty, out, err) ||
              parse_run(r ? r : empty, out, err) || config_parse_parameter_server(root, out, err);
    json_decref(empty);
    if (bad)
        goto done;
    rc = 0;
done:
    json_decref(root);
    if (rc)
        scenario_free(out);
    return rc;
}

int scenario_load(const char *path, const char *const *overrides, int n_overrides, scenario_config *out,
                  config_error *err)
{
    memset(out, 0, sizeof *out);
    json_t *root = config_load_file(path, S, err);
    if (!root)
        return -1;
    char dir[CFG_PATH_MAX];
    config_dirname(path, dir, sizeof dir);
    int rc = scenario_load_json(root, dir, overrides, n_overrides, out, err);
    json_decref(root);
    if (rc == 0)
        snprintf(out->path, sizeof out->path, "%s", path);
    return rc;
}
