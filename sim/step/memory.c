/* Memory per GPU; see memory.h for the accounting. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "memory.h"
#include "params.h"
#include "zero3.h"

static int is_half(precision_kind p)
{
    return p == PREC_FP16 || p == PREC_BF16 || p == PREC_FP8;
}

double memory_bytes_to_gib(double bytes)
{
    return bytes / 1073741824.0;
}

void memory_model_states(double params, int shards, int zero_stage, precision_kind prec,
                         optimizer_kind opt, memory_breakdown *out)
{
    memset(out, 0, sizeof *out);
    double w = is_half(prec) ? 2 : 4, g = w;
    /* Adam: two fp32 moments, plus the fp32 master copy under mixed precision; SGD with
     * momentum: one fp32 buffer (+ master). */
    double k = (opt == OPTIMIZER_SGD ? 4 : 8) + (is_half(prec) ? 4 : 0);
    if (shards < 1)
        shards = 1;
    out->weights = params * w / (zero_stage >= 3 ? shards : 1);
    out->gradients = params * g / (zero_stage >= 2 ? shards : 1);
    out->optimizer = params * k / (zero_stage >= 1 ? shards : 1);
    out->total = out->weights + out->gradients + out->optimizer;
}

void memory_model_states_offload(double params, int shards, int zero_stage, precision_kind prec,
                                 optimizer_kind opt, offload_device offload_optimizer,
                                 offload_device offload_parameters, memory_breakdown *out)
{
    memory_model_states(params, shards, zero_stage, prec, opt, out);
    if (offload_optimizer == OFFLOAD_NONE)
        return;
    if (shards < 1)
        shards = 1;
    /* Each rank owns the optimizer step of its 1/shards (ZeRO >= 1) and receives only that
     * part of the reduced gradients on the host; without ZeRO it keeps everything. */
    int owned = zero_stage >= 1 ? shards : 1;
    double opt_bytes = out->optimizer; /* already sharded as the ZeRO stage says */
    double grad_host = params * (is_half(prec) ? 2 : 4) / owned;
    out->optimizer = 0;
    out->gradients = 0; /* streamed out bucket by bucket: the buckets are in buffers */
    out->host += grad_host;
    if (offload_optimizer == OFFLOAD_NVME)
        out->nvme += opt_bytes;
    else
        out->host += opt_bytes;
    if (offload_parameters != OFFLOAD_NONE) {
        if (offload_parameters == OFFLOAD_NVME)
            out->nvme += out->weights;
        else
            out->host += out->weights;
        out->weights = 0; /* only ZeRO-3's gathered working set, in buffers */
    }
    out->total = out->weights + out->gradients + out->optimizer;
}

/* Per-layer activations under a given recomputation (the scenario's own, or none for the
 * working set of the layer being recomputed). */
static double layer_activations(const scenario_config *s, recompute_kind recompute)
{
    double b = (double)s->training.micro_batch_size;
    double cp = s->parallel.cp > 0 ? s->parallel.cp : 1, t = s->parallel.tp > 0 ? s->parallel.tp : 1;
    double sq = (double)s->model.seq_length / cp, h = (double)s->model.hidden_size;
    double a = (double)s->model.num_attention_heads, f = (double)s->model.ffn_hidden_size;
    double q = scenario_query_width(s), kv = scenario_kv_width(s);
    double scale = scenario_activation_bytes(s) / 2.0; /* the formulas count 16-bit values */
    double sbh = sq * b * h;

    if (recompute == RECOMPUTE_FULL) /* only the layer input is kept: split over TP under SP, or
                                        distributed (Megatron-LM's --distribute-saved-activations) */
        return 2.0 * sbh * scale / (s->parallel.sequence_parallel || s->training.distribute_saved_activations ? t : 1);

    /* Korthikanti et al. per layer, 16-bit activations, 1-byte dropout masks:
     *   attention: input 2sbh, Q 2sb*q, K and V 2sb*kv each, projection input 2sb*q, dropout
     *              mask sbh  (= 11 sbh for MHA, q = kv = h), plus scores: softmax output 2as^2b, dropout
     *              mask as^2b, dropout output 2as^2b (= 5as^2b);
     *   MLP: input 2sbh, the two f-wide tensors 4sbf (SwiGLU keeps 3: 6sbf; unfused, SiLU's output
     *        too: 8sbf), mask sbh;
     *   two LayerNorm inputs 4sbh.   For f = 4h, MHA: 34 sbh + 5 as^2 b.
     * Without SP, 10 sbh (norm inputs, masks, QKV and FC1 inputs) are replicated on every TP
     * rank; the rest is split. Selective recomputation and flash attention drop the scores.
     * MoE (balanced routing): each GPU's experts see topk x its tokens. */
    double mlp_f = (s->model.swiglu ? (params_swiglu_unfused(s) ? 8.0 : 6.0) : 4.0) * sq * b * f;
    if (s->model.num_experts > 0)
        mlp_f *= s->model.moe_router_topk > 0 ? s->model.moe_router_topk : 1;
    double total = (3.0 + 4.0 * q / h + 4.0 * kv / h + 4.0 + 3.0) * sbh + mlp_f;
    double scores = 5.0 * a * sq * sq * b * cp; /* each CP rank's queries against all keys */
    int keep_scores = recompute == RECOMPUTE_NONE && s->model.attention == ATTENTION_UNFUSED;
    double split = keep_scores ? scores / t : 0;
    double per_layer;
    if (s->parallel.sequence_parallel)
        per_layer = total / t + split;
    else
        per_layer = 10.0 * sbh + (total - 10.0 * sbh) / t + split;
    return per_layer * scale;
}

double memory_layer_activations(const scenario_config *s)
{
    return layer_activations(s, s->training.recompute);
}

/* The recomputation group size of full recomputation (Megatron's --recompute-num-layers). */
static double recompute_group_layers(const scenario_config *s)
{
    return s->training.recompute_num_layers > 0 ? (double)s->training.recompute_num_layers : 1;
}

double memory_chunk_activations(const scenario_config *s, double chunk_layers)
{
    if (s->training.recompute != RECOMPUTE_FULL)
        return chunk_layers * memory_layer_activations(s);
    double n = recompute_group_layers(s), input = layer_activations(s, RECOMPUTE_FULL);
    if (s->training.recompute_block) { /* the first n layers keep their inputs, the rest everything */
        double r = fmin(n, chunk_layers);
        return r * input + (chunk_layers - r) * layer_activations(s, RECOMPUTE_NONE);
    }
    return ceil(chunk_layers / n - 1e-9) * input; /* uniform: each group of n keeps its input */
}

double memory_recompute_working_set(const scenario_config *s, double chunk_layers)
{
    if (s->training.recompute == RECOMPUTE_NONE)
        return 0;
    double one = layer_activations(s, RECOMPUTE_NONE) - layer_activations(s, s->training.recompute);
    if (s->training.recompute != RECOMPUTE_FULL || s->training.recompute_block)
        return one;
    /* uniform: the whole group rerun at once, all but its kept input */
    double n = fmin(recompute_group_layers(s), chunk_layers > 1 ? chunk_layers : 1);
    return n * layer_activations(s, RECOMPUTE_NONE) - layer_activations(s, RECOMPUTE_FULL);
}

/* Layers of all chunks of `stage`, and the expert parameters they hold on one GPU. */
static int stage_layers(const scenario_config *s, int stage, int *layers_on_stage)
{
    *layers_on_stage = scenario_stage_layers(s, stage);
    if (*layers_on_stage < 0) {
        *layers_on_stage = 0;
        return -1;
    }
    return 0;
}

/* What memory_model_stage reads of a layout that is the same at every stage, worked out once for
 * all of them (memory_model_worst_stage_at asks it of every stage, the planner of every candidate);
 * and what depends on the stage's layers alone, for the last count asked (an equal split gives
 * every stage the same). */
typedef struct {
    int P, V, shards, expert_shards, zero, offload;
    offload_device off_opt, off_par;
    layer_params lp;
    double grad_scale;         /* the gradient buffer's bytes over the model's (fp32 main_grad under bf16) */
    double grad_buffer_bytes, act_bytes, t, tokens, h;
    zero3_plan z3;
    double bucket, elem;       /* a DP gradient bucket, and the bytes an element travels in */
    int bucket_in_place;
    int L;                     /* the layers the next three are for (-1: none yet) */
    double chunk_activations, working_set, live_params;
} stage_common;

static void stage_common_of(const scenario_config *s, stage_common *c)
{
    memset(c, 0, sizeof *c);
    c->P = s->parallel.pp > 0 ? s->parallel.pp : 1;
    c->V = s->parallel.vpp > 0 ? s->parallel.vpp : 1;
    int dp = s->parallel.dp > 0 ? s->parallel.dp : 1, cp_i = s->parallel.cp > 0 ? s->parallel.cp : 1;
    c->shards = dp * cp_i;
    c->expert_shards = scenario_expert_dp(s);
    /* Dense parameters shard over dp x cp, expert parameters over the expert-data-parallel
     * group (tp x cp x dp / (etp x ep): dp x cp / ep with the experts split like the dense
     * MLP): each expert shard has that many replicas. */
    c->lp = params_layer_per_gpu(s);
    c->off_opt = s->parallel.offload_optimizer;
    c->off_par = s->parallel.offload_parameters;
    /* the BF16_Optimizer shards its optimizer states as ZeRO-1 does (params_optimizer_shards) */
    c->zero = s->parallel.zero_stage < 1 && params_optimizer_shards(s) > 1 ? 1 : s->parallel.zero_stage;
    c->grad_buffer_bytes = params_grad_buffer_bytes(s);
    c->grad_scale = c->grad_buffer_bytes / (is_half(s->training.precision) ? 2 : 4);
    c->act_bytes = scenario_activation_bytes(s);
    c->t = s->parallel.tp > 0 ? s->parallel.tp : 1;
    c->tokens = (double)s->training.micro_batch_size * (double)s->model.seq_length / cp_i;
    c->h = (double)s->model.hidden_size;
    /* Offload: the reduced buckets are staged on the GPU for their copy to the host even on
     * one GPU; offloaded parameters are fetched into the two-layer working set even unsharded. */
    c->offload = c->off_opt != OFFLOAD_NONE;
    c->bucket = params_dp_bucket_bytes(s);
    zero3_plan_of(s, &c->z3);
    c->elem = params_grad_reduce_bytes(s); /* bucket_size_mb counts bytes as they travel */
    if (c->z3.active) { /* DeepSpeed stage 3's gradient buckets are reduce_bucket_size elements */
        c->elem = c->grad_buffer_bytes;
        c->bucket = c->z3.reduce_bucket_params * c->elem;
    }
    c->bucket_in_place = params_dp_bucket_in_place(s);
    c->L = -1;
}

static int stage_memory(const scenario_config *s, stage_common *c, int stage, int in_flight, memory_breakdown *out)
{
    memset(out, 0, sizeof *out);
    int P = c->P, V = c->V, L = 0;
    if (stage_layers(s, stage, &L) != 0)
        return -1;
    if (L != c->L) {
        c->L = L;
        c->chunk_activations = memory_chunk_activations(s, (double)L / V);
        c->working_set = memory_recompute_working_set(s, (double)L / V);
        c->live_params = c->z3.active ? zero3_live_params(s, &c->z3, L / V) : 0;
    }
    int shards = c->shards;
    double stage_params = params_stage_per_gpu(s, stage);
    double expert = (double)L * c->lp.expert;
    double dense = stage_params - expert;
    memory_breakdown e;
    memory_model_states_offload(dense, shards, c->zero, s->training.precision, s->training.optimizer, c->off_opt,
                                c->off_par, out);
    memory_model_states_offload(expert, c->expert_shards, c->zero, s->training.precision, s->training.optimizer,
                                c->off_opt, c->off_par, &e);
    out->weights += e.weights;
    out->gradients += e.gradients;
    /* the gradient buffer in the dtype gradients accumulate in (fp32 main_grad under bf16) */
    out->gradients *= c->grad_scale;
    out->optimizer += e.optimizer;
    out->host += e.host;
    out->nvme += e.nvme;

    double act_bytes = c->act_bytes, t = c->t, tokens = c->tokens, h = c->h;
    /* Each in-flight (chunk, micro-batch) holds one chunk's layers; the layer being
     * back-propagated also holds what recomputation rebuilds. */
    out->activations = in_flight * c->chunk_activations;
    if (in_flight > 0 && L > 0)
        out->activations += c->working_set;
    if (stage == P - 1) /* fp32 logits of one micro-batch for the loss */
        out->activations += tokens * (double)s->model.vocab_size / t * 4;
    if (stage == 0) /* embedding output of the in-flight micro-batches (split over TP with SP) */
        out->activations += in_flight * tokens * h * act_bytes / (s->parallel.sequence_parallel ? t : 1);

    /* Buffers: two DP gradient buckets in flight, pipeline send/receive buffers (a forward
     * activation and a gradient each way), and with ZeRO-3 the gathered weights of two layers
     * (current + prefetched). */
    const zero3_plan *z3 = &c->z3;
    double elem = c->elem;
    /* In flight: two buckets, but never more than the gradients they hold: with a bucket larger
     * than the stage's (bucket_size_mb up to 1e6, Megatron-LM's bucket_size=None) there is one. */
    double in_flight_grads = fmin(2 * c->bucket, stage_params * elem);
    if (!z3->active && c->bucket_in_place) /* the gradient buffer itself, in `gradients` */
        in_flight_grads = 0;
    if (z3->active && !z3->reduce_every_backward) /* FSDP2 reduce-scatters a layer's (a unit's) at a time */
        in_flight_grads = fmin(in_flight_grads, 2 * (z3->layer_params + z3->layer_persistent) * elem);
    out->buffers = (shards > 1 || c->offload ? in_flight_grads : 0) + (P > 1 ? 4 * tokens * h * act_bytes : 0);
    if (z3->active) {
        /* the gathered working set: the running layer and the prefetched ones, as the workload
         * gathers them (zero3.h); and the parameters below the persistence threshold, which every
         * rank keeps whole instead of its shard */
        double whole = stage_params;
        if (!z3->reshard_after_backward) {
            /* FSDP2 under pipeline parallelism (zero3.h): the stage whole, gathered after a backward
             * (every chunk has had one by the steady state), and its gradients accumulated unsharded
             * in the wider of the compute and reduction dtypes (unsharded_accumulated_grad) until
             * the chunk's last backward reduce-scatters them; the persistent tensors are in it */
            out->buffers += whole * act_bytes;
            out->gradients += whole * c->grad_buffer_bytes;
        } else {
            out->buffers += c->live_params * act_bytes;
            if (!z3->reshard_after_forward) /* the embedding and head gathered with their layers */
                out->buffers += params_stage_outside_layers_per_gpu(s, stage) * act_bytes;
            if (c->off_par == OFFLOAD_NONE)
                out->weights += (double)L * z3->layer_persistent * act_bytes * (1.0 - 1.0 / shards);
        }
    }
    out->total = out->weights + out->gradients + out->optimizer + out->activations + out->buffers;
    out->capacity = s->platform.gpu.memory_gib * 1073741824.0;
    out->oom = out->capacity > 0 && out->total > out->capacity;
    return 0;
}

int memory_model_stage(const scenario_config *s, int stage, int in_flight, memory_breakdown *out)
{
    stage_common c;
    stage_common_of(s, &c);
    return stage_memory(s, &c, stage, in_flight, out);
}

int memory_model_worst_stage_at(const scenario_config *s, int stages, const int *peak, memory_breakdown *out,
                                int *worst_stage)
{
    memset(out, 0, sizeof *out);
    *worst_stage = 0;
    stage_common c;
    stage_common_of(s, &c);
    for (int p = 0; p < stages; p++) {
        memory_breakdown m;
        if (stage_memory(s, &c, p, peak[p], &m) != 0)
            return -1;
        if (p == 0 || m.total > out->total) {
            *out = m;
            *worst_stage = p;
        }
    }
    return 0;
}

int memory_model_worst_stage(const scenario_config *s, const pipeline_schedule *sched, memory_breakdown *out,
                             int *worst_stage)
{
    int *peak = malloc((size_t)(sched->stages > 0 ? sched->stages : 1) * sizeof *peak);
    if (!peak)
        return -1;
    for (int p = 0; p < sched->stages; p++)
        peak[p] = pipeline_schedule_peak_in_flight(sched, p);
    int rc = memory_model_worst_stage_at(s, sched->stages, peak, out, worst_stage);
    free(peak);
    return rc;
}

void memory_offload_per_node(const scenario_config *s, double *host_bytes, double *nvme_bytes)
{
    *host_bytes = *nvme_bytes = 0;
    if (s->parallel.offload_optimizer == OFFLOAD_NONE && s->parallel.offload_parameters == OFFLOAD_NONE)
        return; /* nothing on the host or NVMe (memory_model_states_offload) */
    int P = s->parallel.pp > 0 ? s->parallel.pp : 1;
    int gpn = s->platform.node.gpus > 0 ? s->platform.node.gpus : 1, gpus = scenario_gpus(s);
    int on_node = gpus > 0 && gpus < gpn ? gpus : gpn;
    for (int p = 0; p < P; p++) {
        memory_breakdown m;
        if (memory_model_stage(s, p, 0, &m) != 0)
            continue;
        *host_bytes = fmax(*host_bytes, m.host * on_node);
        *nvme_bytes = fmax(*nvme_bytes, m.nvme * on_node);
    }
}
