/* Parameter counts; see params.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "params.h"

/* The tensors of one norm, each of hidden_size elements: its weight (and its bias, LayerNorm).
 * A layer has two such norms and the model's end one (params_final_norm). */
static double norm_tensors(const scenario_config *s)
{
    return s->model.rmsnorm ? 1.0 : 2.0;
}

/* One layer's parameters with its attention and dense MLP over tp ranks, its experts over etp
 * (their own TP) and ep. */
static layer_params layer_params_split(const scenario_config *s, int tp, int etp, int ep)
{
    double h = (double)s->model.hidden_size, f = (double)s->model.ffn_hidden_size;
    double q = scenario_query_width(s), kv = scenario_kv_width(s);
    /* QKV (column-parallel, weights and biases split) and projection (row-parallel: the
     * bias is replicated). */
    double attn = (h * (q + 2 * kv) + (q + 2 * kv)) / tp + q * h / tp + h;
    double mlp_mats = s->model.swiglu ? 3 : 2;
    double mlp = (mlp_mats * h * f + (s->model.swiglu ? 2 : 1) * f) / tp + h;
    double norms = 2 * norm_tensors(s) * h; /* two norms */
    layer_params p = {attn + norms, 0};
    if (s->model.num_experts > 0) {
        double expert_mlp = (mlp_mats * h * f + (s->model.swiglu ? 2 : 1) * f) / etp + h;
        p.expert = (double)s->model.num_experts * expert_mlp / ep;
        p.dense += h * (double)s->model.num_experts; /* router */
    } else {
        p.dense += mlp;
    }
    return p;
}

/* Each tensor of one layer on one GPU, as layer_params_split counts them: {how many, elements
 * each}; returns the number of rows filled. */
enum { LAYER_TENSOR_KINDS = 9 };
static int layer_tensors(const scenario_config *s, double t[LAYER_TENSOR_KINDS][2])
{
    double h = (double)s->model.hidden_size, f = (double)s->model.ffn_hidden_size, tp = s->parallel.tp;
    double q = scenario_query_width(s), kv = scenario_kv_width(s);
    double E = (double)s->model.num_experts, ep = s->parallel.ep > 0 ? s->parallel.ep : 1;
    double mlps = E > 0 ? E / ep : 1, mats = s->model.swiglu ? 3 : 2, fc1_biases = s->model.swiglu ? 2 : 1;
    double mlp_tp = E > 0 ? scenario_expert_tp(s) : tp;
    const double rows[LAYER_TENSOR_KINDS][2] = {
        {1, h * (q + 2 * kv) / tp}, {1, (q + 2 * kv) / tp}, /* QKV weight and bias */
        {1, q * h / tp}, {1, h},                             /* projection weight, replicated bias */
        {mlps * mats, h * f / mlp_tp}, {mlps * fc1_biases, f / mlp_tp}, {mlps, h}, /* MLP(s): weights, biases */
        {2 * norm_tensors(s), h},                            /* two norms */
        {E > 0 ? 1 : 0, h * E},                              /* MoE router */
    };
    memcpy(t, rows, sizeof rows);
    return LAYER_TENSOR_KINDS;
}

double params_layer_small_per_gpu(const scenario_config *s, double threshold)
{
    double t[LAYER_TENSOR_KINDS][2], n = 0;
    for (int i = 0, k = layer_tensors(s, t); i < k; i++)
        if (t[i][1] < threshold)
            n += t[i][0] * t[i][1];
    return n;
}

double params_layer_tensors_from(const scenario_config *s, double threshold)
{
    double t[LAYER_TENSOR_KINDS][2], n = 0;
    for (int i = 0, k = layer_tensors(s, t); i < k; i++)
        if (t[i][1] > 0 && t[i][1] >= threshold)
            n += t[i][0];
    return n;
}

/* One tensor of n elements through DeepSpeed's synchronous gather (see params.h). */
static void persistent_tensor(double count, double n, double ranks, double *tensors, double *copies,
                              double *gathered)
{
    if (count <= 0 || n <= 0)
        return;
    double piece = ceil(n / ranks);
    *tensors += count;
    *copies += count * ceil(n / piece); /* the ranks whose piece starts inside the tensor */
    *gathered += count * piece * ranks;
}

void params_persistent_gather(const scenario_config *s, double layers, int final_norm, double threshold, double ranks,
                              double *tensors, double *copies, double *gathered)
{
    *tensors = *copies = *gathered = 0;
    double t[LAYER_TENSOR_KINDS][2], h = (double)s->model.hidden_size;
    for (int i = 0, k = layer_tensors(s, t); i < k; i++)
        if (t[i][1] < threshold)
            persistent_tensor(layers * t[i][0], t[i][1], ranks, tensors, copies, gathered);
    if (final_norm && h < threshold)
        persistent_tensor(norm_tensors(s), h, ranks, tensors, copies, gathered);
}

/* One module of a layer as DeepSpeed releases it, all its tensors together: its elements, and of
 * those the partitioned ones (at or above the threshold) and how many tensors they are. */
typedef struct {
    double all, partitioned, tensors;
} layer_module;

static void module_add(layer_module *m, double count, double n, double threshold)
{
    m->all += count * n;
    if (n > 0 && n >= threshold) {
        m->partitioned += count * n;
        m->tensors += count;
    }
}

/* One module of the walk below: kept when it is used again within max_reuse, the re-run's modules
 * after it counted twice (once in the re-run, once in their backwards: v0.3.13 _distance_in_numel
 * counts every module visited between) and `ahead` more. */
static void module_visit(const layer_module *m, double ahead, double max_reuse, double *after, double *kept,
                         double *kept_tensors)
{
    if (m->tensors > 0 && 2 * *after + ahead < max_reuse) {
        *kept += m->partitioned;
        *kept_tensors += m->tensors;
    }
    *after += m->all;
}

double params_layer_rerun_kept(const scenario_config *s, double threshold, double max_reuse, double ahead,
                               double *kept_tensors)
{
    double t[LAYER_TENSOR_KINDS][2];
    layer_tensors(s, t);
    double mlps = t[6][0] > 0 ? t[6][0] : 1, mats = t[4][0] / mlps, fc1_biases = t[5][0] / mlps;
    /* the modules in the order a forward uses them: the first norm (half the norm row), QKV,
     * projection, the second norm, the router, then each MLP's first linear (its weights but the
     * last, and their biases) and its second (weight and bias) */
    layer_module m[7] = {{0}};
    module_add(&m[0], t[7][0] / 2, t[7][1], threshold);
    module_add(&m[1], t[0][0], t[0][1], threshold);
    module_add(&m[1], t[1][0], t[1][1], threshold);
    module_add(&m[2], t[2][0], t[2][1], threshold);
    module_add(&m[2], t[3][0], t[3][1], threshold);
    module_add(&m[3], t[7][0] / 2, t[7][1], threshold);
    module_add(&m[4], t[8][0], t[8][1], threshold);
    module_add(&m[5], mats - 1, t[4][1], threshold);
    module_add(&m[5], fc1_biases, t[5][1], threshold);
    module_add(&m[6], 1, t[4][1], threshold);
    module_add(&m[6], 1, t[6][1], threshold);
    /* walked from the layer's end, `after` what the re-run uses after the module at hand: the MLPs
     * one after another (an expert's second linear, then its first), then the modules before them */
    double after = 0, kept = 0;
    *kept_tensors = 0;
    for (double c = mlps; c > 0.5; c--)
        for (int r = 6; r >= 5; r--)
            module_visit(&m[r], ahead, max_reuse, &after, &kept, kept_tensors);
    for (int r = 4; r >= 0; r--)
        module_visit(&m[r], ahead, max_reuse, &after, &kept, kept_tensors);
    return kept;
}

double params_layer_largest_tensor_per_gpu(const scenario_config *s)
{
    double t[LAYER_TENSOR_KINDS][2], largest = 0;
    for (int i = 0, k = layer_tensors(s, t); i < k; i++)
        if (t[i][0] > 0 && t[i][1] > largest)
            largest = t[i][1];
    return largest;
}

layer_params params_layer_per_gpu(const scenario_config *s)
{
    return layer_params_split(s, s->parallel.tp, scenario_expert_tp(s), s->parallel.ep);
}

static double embedding_split(const scenario_config *s, int tp)
{
    double h = (double)s->model.hidden_size;
    double positions = s->model.rope ? 0 : (double)s->model.seq_length * h;
    return (double)s->model.vocab_size * h / tp + positions;
}

double params_embedding_per_gpu(const scenario_config *s)
{
    return embedding_split(s, s->parallel.tp);
}

double params_final_norm(const scenario_config *s)
{
    return norm_tensors(s) * (double)s->model.hidden_size;
}

double params_ends_tensors_from(const scenario_config *s, int head, double threshold)
{
    double h = (double)s->model.hidden_size, table = (double)s->model.vocab_size * h / s->parallel.tp;
    double positions = s->model.rope ? 0 : (double)s->model.seq_length * h;
    if (head) /* the final norm (weight, and bias for LayerNorm), the LM head's table */
        return (h >= threshold ? norm_tensors(s) : 0) + (table >= threshold);
    return (table >= threshold) + (positions > 0 && positions >= threshold);
}

double params_stage_per_gpu(const scenario_config *s, int stage)
{
    int L = scenario_stage_layers(s, stage);
    layer_params lp = params_layer_per_gpu(s);
    return (L > 0 ? L * (lp.dense + lp.expert) : 0) + params_stage_outside_layers_per_gpu(s, stage);
}

double params_stage_outside_layers_per_gpu(const scenario_config *s, int stage)
{
    int P = s->parallel.pp;
    double h = (double)s->model.hidden_size, n = 0;
    if (stage == 0)
        n += params_embedding_per_gpu(s);
    if (stage == P - 1) {
        n += params_final_norm(s);
        if (P > 1 || s->model.untie_embeddings)
            n += (double)s->model.vocab_size * h / s->parallel.tp; /* LM head (tied: a copy) */
    }
    return n;
}

int params_deepspeed_bf16_optimizer(const scenario_config *s)
{
    return s->parallel.pipeline_engine == PIPELINE_ENGINE_DEEPSPEED && s->training.precision == PREC_BF16 &&
           s->parallel.zero_stage <= (s->parallel.pp > 1 ? 1 : 0);
}

int params_p2p_drains_device(const scenario_config *s)
{
    framework_kind f = s->parallel.framework;
    return s->parallel.pp > 1 && s->parallel.pipeline_engine == PIPELINE_ENGINE_MEGATRON &&
           !s->parallel.overlap_p2p_comm && (f == FRAMEWORK_UNSET || f == FRAMEWORK_MEGATRON);
}

int params_optimizer_shards(const scenario_config *s)
{
    int dp = s->parallel.dp > 0 ? s->parallel.dp : 1, cp = s->parallel.cp > 0 ? s->parallel.cp : 1;
    return s->parallel.zero_stage >= 1 || params_deepspeed_bf16_optimizer(s) ? dp * cp : 1;
}

double params_grad_reduce_bytes(const scenario_config *s)
{
    if (s->parallel.grad_reduce_bytes > 0)
        return s->parallel.grad_reduce_bytes;
    /* DeepSpeed's engine reduces in its communication_data_type, by default the model's 16-bit
     * type, whatever the gradients are kept in (deepspeed/runtime/engine.py: the
     * communication_data_type property; allreduce_bucket casts to it before the all-reduce).
     * PyTorch FSDP1 reduces in MixedPrecision.reduce_dtype, which left None takes param_dtype, the
     * model's 16-bit type (torch/distributed/fsdp/api.py, MixedPrecision's docstring); Composer's
     * own DEFAULT policy reduces in fp32 and must be said (grad_reduce_dtype fp32). torchtitan
     * reduces in fp32 (its training.mixed_precision_reduce, default "float32",
     * torchtitan/config/configs.py), and without FSDP it runs DDP under autocast, fp32 gradients
     * (torchtitan/distributed/utils.py, maybe_enable_amp). */
    int wide = s->training.precision == PREC_FP32 || s->training.precision == PREC_TF32;
    if (s->parallel.pipeline_engine == PIPELINE_ENGINE_DEEPSPEED || s->parallel.framework == FRAMEWORK_FSDP)
        return wide ? 4 : 2; /* fp8 runs keep bf16 models */
    if (s->parallel.framework == FRAMEWORK_TORCHTITAN || s->parallel.framework == FRAMEWORK_NANOTRON)
        return 4; /* nanotron: accumulate_grad_in_fp32, as the Ultra-Scale Playbook ran it (config.h) */
    switch (s->training.precision) {
    case PREC_BF16:
    case PREC_FP8:
        /* Megatron-LM (megatron/training/arguments.py, validate_args): "bfloat16 requires gradient
         * accumulation and all-reduce to be done in fp32" sets accumulate_allreduce_grads_in_fp32
         * (fp8 runs keep bf16 parameters through Transformer Engine, so the same). Its ZeRO-3,
         * Megatron-FSDP, keeps and reduces its main gradients in the model's gradient dtype unless
         * told (--megatron-fsdp-main-grads-dtype, default auto: "the native model gradient
         * data-type", megatron/training/arguments.py); DeepSpeed's stage 3 sends in the model's
         * dtype (its communication_data_type defaults to it). */
        return s->parallel.zero_stage >= 3 ? 2 : 4;
    case PREC_FP16:
        return 2; /* Megatron keeps fp16 gradients (no fp32 accumulation unless asked) */
    default:
        return 4;
    }
}

double params_grad_buffer_bytes(const scenario_config *s)
{
    double natural = (s->training.precision == PREC_FP32 || s->training.precision == PREC_TF32) ? 4 : 2;
    double reduce = params_grad_reduce_bytes(s);
    /* DeepSpeed's BF16_Optimizer keeps fp32 gradients whatever it sends (update_hp_grads, in
     * sim/step/workload.c): the rule of workload_costs.c's builder.bf16_optimizer */
    if (params_deepspeed_bf16_optimizer(s))
        return 4;
    /* a reduction in a wider type accumulates into a buffer of that type (Megatron's main_grad);
     * a narrower one (bf16, int8 of an fp32 run) packs from the natural buffer */
    return reduce > natural ? reduce : natural;
}

double params_total(const scenario_config *s)
{
    layer_params lp = layer_params_split(s, 1, 1, 1);
    return (double)s->model.num_layers * (lp.dense + lp.expert) + embedding_split(s, 1)
           + params_final_norm(s)
           + (s->model.untie_embeddings ? (double)s->model.vocab_size * (double)s->model.hidden_size : 0);
}

static int deepspeed_engine(const scenario_config *s)
{
    return s->parallel.framework == FRAMEWORK_DEEPSPEED || s->parallel.pipeline_engine == PIPELINE_ENGINE_DEEPSPEED;
}

int params_swiglu_unfused(const scenario_config *s)
{
    /* nanotron's GLUActivation: act(gate) * up in eager PyTorch (models/llama.py, nouamane/bench2) */
    return s->model.swiglu && s->parallel.framework == FRAMEWORK_NANOTRON;
}

int params_grad_reduce_overlapped(const scenario_config *s)
{
    return s->parallel.overlap_grad_reduce && !framework_all_reduces_zero1(s->parallel.framework, s->parallel.zero_stage);
}

int params_dp_bucket_in_place(const scenario_config *s)
{
    return !deepspeed_engine(s) && !framework_is_pytorch_fsdp(s->parallel.framework) &&
           params_dp_bucket_bytes(s) >= PARAMS_BUCKET_WHOLE_MB * 1048576.0;
}

double params_dp_bucket_bytes(const scenario_config *s)
{
    const double mib = 1048576.0;
    /* nanotron's ZeRO 1 all-reduces its contiguous fp32 buffer in one call (optim/gradient_accumulator.py) */
    if (framework_all_reduces_zero1(s->parallel.framework, s->parallel.zero_stage))
        return PARAMS_BUCKET_WHOLE_MB * mib;
    if (s->parallel.bucket_size_mb > 0)
        return s->parallel.bucket_size_mb * mib;
    double elem = params_grad_reduce_bytes(s);
    if (deepspeed_engine(s))
        /* ZeRO-1/2 reduce in reduce_bucket_size elements (deepspeed/runtime/zero/config.py, default
         * 5e8); the engine's own all-reduce (no ZeRO, BF16_Optimizer) in MEMORY_OPT_ALLREDUCE_SIZE
         * = 5e8 (deepspeed/runtime/engine.py, allreduce_gradients) */
        return (s->parallel.zero_stage == 1 || s->parallel.zero_stage == 2 ? s->parallel.reduce_bucket_size : 5e8) *
               elem;
    if (s->parallel.framework == FRAMEWORK_TORCHTITAN)
        return 100 * mib; /* its apply_ddp: replicate(model, device_mesh=dp_mesh, bucket_cap_mb=100)
                             (torchtitan/models/llama3/infra/parallelize.py) */
    if (s->parallel.framework == FRAMEWORK_FSDP)
        return 25 * mib; /* DistributedDataParallel's bucket_cap_mb, default 25 (torch/nn/parallel/distributed.py) */
    if (s->parallel.framework == FRAMEWORK_NANOTRON)
        /* ZeRO 0: its DistributedDataParallel with model.ddp_bucket_cap_mb, 25 in its config defaults
         * and the Playbook's base config (examples/config_tiny_llama_bench.yaml), which counts the
         * model's 16-bit gradients; its fp32 hook all-reduces each bucket's fp32 gradients, twice
         * those bytes (optim/gradient_accumulator.py, get_fp32_accum_hook) */
        return 25 * mib * elem / 2;
    /* Megatron-LM: megatron/core/distributed/distributed_data_parallel.py, "bucket_size =
     * max(40000000, 1000000 * dp_group.size())" parameters ("larger DP sizes need larger buckets to
     * ensure collectives do not become latency-bound"), over the data-parallel group with its
     * context-parallel ranks (megatron/training/training.py: dp_cp_group); "Set bucket_size to
     * infinity if overlap_grad_reduce is False" */
    if (!s->parallel.overlap_grad_reduce)
        return PARAMS_BUCKET_WHOLE_MB * mib;
    double dp = (double)s->parallel.dp * (s->parallel.cp > 0 ? s->parallel.cp : 1);
    return fmax(4e7, 1e6 * dp) * elem;
}
