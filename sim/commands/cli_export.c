/* dtsim export megatron SCENARIO.json [--set PATH=VALUE]...: the scenario as the Megatron-LM
 * arguments a launch script passes (torchrun's --nnodes and --nproc-per-node first, then
 * pretrain_gpt.py's), one line, ready to paste; `dtsim import megatron` reads them back to the
 * same scenario. What Megatron-LM has no argument for and that changes the step is refused (exit
 * 2, named); what does not (faults, the platform, the data loader) is left out and said. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "cli.h"
#include "cli_args.h"
#include "collective.h"
#include "params.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: dtsim export megatron SCENARIO.json [--set PATH=VALUE]...\n"
            "Prints the scenario as Megatron-LM arguments (torchrun's --nnodes and --nproc-per-node,\n"
            "then pretrain_gpt.py's), one line; dtsim import megatron --platform P reads them back.\n"
            "Settings Megatron-LM has no argument for are refused when they change the step\n"
            "(ZeRO-2/3, offloading, gradient compression, the GPipe schedule, ...).\n"
            "exit: 0 ok, 2 bad input or a setting with no Megatron-LM argument, 1 runtime failure\n");
}

/* Under bf16 (and fp8 over it) Megatron-LM reduces gradients in fp32, or in bf16 with
 * --grad-reduce-in-bf16 (arguments.py, _add_mixed_precision_args; read at d98e8a64). */
static int bf16_training(const scenario_config *s)
{
    return s->training.precision == PREC_BF16 || s->training.precision == PREC_FP8;
}

static int grad_reduce_expressible(const scenario_config *s)
{
    return bf16_training(s) && !s->parallel.grad_reduce_int8 &&
           (s->parallel.grad_reduce_bytes == 4 || s->parallel.grad_reduce_bytes == 2);
}

/* A setting Megatron-LM cannot express that would change the step: its name, or NULL. */
static const char *inexpressible(const scenario_config *s)
{
    /* another framework's run first: nothing below says more */
    if (s->parallel.framework == FRAMEWORK_DEEPSPEED)
        return "parallel.framework deepspeed (DeepSpeed's engine: its pipeline, optimizer and reduction dtype, "
               "not Megatron-LM's)";
    if (s->parallel.framework == FRAMEWORK_NANOTRON)
        return "parallel.framework nanotron (nanotron's DDP and its ZeRO-1's all-reduce, not Megatron-LM's)";
    if (framework_is_pytorch_fsdp(s->parallel.framework))
        return "parallel.framework fsdp or torchtitan (PyTorch FSDP's runs, not Megatron-LM's)";
    if (s->parallel.zero_stage == 2 || (s->parallel.zero_stage == 3 && s->parallel.framework != FRAMEWORK_MEGATRON))
        return "parallel.zero_stage 2 or 3 (Megatron-LM's distributed optimizer is ZeRO-1; ZeRO-3 as Megatron-FSDP: "
               "say parallel.framework megatron)";
    if (s->parallel.offload_optimizer || s->parallel.offload_parameters)
        return "parallel.offload_* (DeepSpeed's ZeRO-Offload)";
    if (s->parallel.grad_compression)
        return "parallel.grad_compression";
    if (s->parallel.schedule == PIPELINE_GPIPE && s->parallel.pp > 1)
        return "parallel.schedule gpipe";
    if (s->parallel.overlap_p2p_comm && s->parallel.pp > 1 && s->parallel.schedule != PIPELINE_INTERLEAVED)
        return "parallel.overlap_p2p_comm under the non-interleaved schedule (Megatron-LM sets it false there)";
    if (!s->parallel.overlap_p2p_comm && s->parallel.pp == 2 && s->parallel.schedule == PIPELINE_INTERLEAVED)
        return "parallel.overlap_p2p_comm false under the interleaved schedule at PP 2 (Megatron-LM asserts PP > 2 "
               "without it)";
    if (s->parallel.pipeline_engine == PIPELINE_ENGINE_DEEPSPEED)
        return "parallel.pipeline_engine deepspeed (DeepSpeed's engine: its pipeline, optimizer and reduction dtype, "
               "not Megatron-LM's)";
    if (s->model.moe_load_imbalance > 0)
        return "model.moe_load_imbalance (a property of the data, not an argument)";
    if (s->parameter_server.present)
        return "parameter_server";
    for (int k = 0; k < COLL_KIND_COUNT; k++)
        if (s->platform.nccl_algo[k] != ALGO_AUTO)
            return "parallel.nccl_algo (NCCL_ALGO, an environment variable)";
    for (int k = 0; k < COLL_KIND_COUNT; k++)
        if (s->platform.nccl_proto[k] > 0)
            return "parallel.nccl_proto (NCCL_PROTO, an environment variable)";
    if (s->parallel.grad_reduce_bytes > 0 && !grad_reduce_expressible(s))
        return "parallel.grad_reduce_dtype";
    if (s->parallel.tp_comm_overlap && s->parallel.tp_comm_overlap_chunks != 4)
        return "parallel.tp_comm_overlap_chunks (Transformer Engine's userbuffers setting)";
    /* Megatron-LM stores activations in the precision's type; another width changes every
     * memory-bound op and the activation memory */
    int precision_bytes = s->training.precision == PREC_FP32 || s->training.precision == PREC_TF32 ? 4 : 2;
    if (s->training.activation_bytes > 0 && s->training.activation_bytes != precision_bytes)
        return "training.activation_bytes (activations in another width than the precision's)";
    return NULL;
}

#define ARG(...) (n += snprintf(out + n, len > (size_t)n ? len - (size_t)n : 0, __VA_ARGS__))

static int megatron_line(const scenario_config *s, char *out, size_t len)
{
    int n = 0, gpus = scenario_gpus(s), gpn = s->platform.node.gpus > 0 ? s->platform.node.gpus : 1;
    if (gpus % gpn)
        gpn = gpus;
    ARG("--nnodes %d --nproc-per-node %d", gpus / gpn, gpn);
    ARG(" --num-layers %lld --hidden-size %lld --ffn-hidden-size %lld --num-attention-heads %lld", s->model.num_layers,
        s->model.hidden_size, s->model.ffn_hidden_size, s->model.num_attention_heads);
    if (s->model.kv_channels > 0)
        ARG(" --kv-channels %lld", s->model.kv_channels);
    if (s->model.num_query_groups != s->model.num_attention_heads)
        ARG(" --group-query-attention --num-query-groups %lld", s->model.num_query_groups);
    ARG(" --seq-length %lld --max-position-embeddings %lld --vocab-size %lld", s->model.seq_length, s->model.seq_length,
        s->model.vocab_size);
    if (s->model.swiglu)
        ARG(" --swiglu");
    ARG(" --normalization %s --position-embedding-type %s", s->model.rmsnorm ? "RMSNorm" : "LayerNorm",
        s->model.rope ? "rope" : "learned_absolute");
    if (s->model.untie_embeddings)
        ARG(" --untie-embeddings-and-output-weights");
    if (s->model.attention != ATTENTION_FLASH)
        ARG(" --attention-backend unfused");
    else
        ARG(s->model.attention_backend == ATTN_BACKEND_FUSED ? " --attention-backend fused" : " --use-flash-attn");
    if (s->model.num_experts > 0) {
        ARG(" --num-experts %lld --moe-router-topk %d", s->model.num_experts, s->model.moe_router_topk);
        if (s->model.moe_expert_capacity_factor > 0)
            ARG(" --moe-expert-capacity-factor %.17g", s->model.moe_expert_capacity_factor);
        if (s->model.moe_pad_expert_input_to_capacity)
            ARG(" --moe-pad-expert-input-to-capacity");
        if (s->model.moe_router_num_groups > 0)
            ARG(" --moe-router-num-groups %lld --moe-router-group-topk %d", s->model.moe_router_num_groups,
                s->model.moe_router_group_topk);
        /* dtsim models these two (Megatron-Core's own default is allgather) */
        ARG(" --moe-token-dispatcher-type %s", moe_token_dispatcher_name(s->parallel.moe_flex_dispatcher));
    }
    if (s->model.cross_entropy_loss_fusion)
        ARG(" --cross-entropy-loss-fusion --cross-entropy-fusion-impl %s",
            s->model.cross_entropy_fusion_impl ? "te" : "native");
    ARG(" --micro-batch-size %lld --global-batch-size %lld", s->training.micro_batch_size,
        s->training.global_batch_size);
    static const char *const prec[] = {"", "", " --fp16", " --bf16", " --bf16 --fp8-format hybrid"};
    if (s->training.precision == PREC_TF32)
        return -1; /* TF32 is a cuBLAS mode, not an argument */
    ARG("%s", prec[s->training.precision]);
    int reduce_bf16 = bf16_training(s) && s->parallel.grad_reduce_bytes == 2;
    if (reduce_bf16)
        ARG(" --grad-reduce-in-bf16");
    static const char *const recipes[] = {"delayed", "tensorwise", "mxfp8", "blockwise"};
    if (s->training.precision == PREC_FP8 && s->training.fp8_recipe != FP8_RECIPE_DELAYED)
        ARG(" --fp8-recipe %s", recipes[s->training.fp8_recipe]);
    if (s->training.recompute != RECOMPUTE_NONE)
        ARG(" --recompute-granularity %s", s->training.recompute == RECOMPUTE_FULL ? "full" : "selective");
    if (s->training.recompute == RECOMPUTE_FULL)
        ARG(" --recompute-method %s --recompute-num-layers %lld", s->training.recompute_block ? "block" : "uniform",
            s->training.recompute_num_layers);
    if (s->training.distribute_saved_activations)
        ARG(" --distribute-saved-activations");
    if (s->training.optimizer == OPTIMIZER_SGD)
        ARG(" --optimizer sgd");
    if (s->training.train_iters > 0)
        ARG(" --train-iters %lld", s->training.train_iters);
    else if (s->training.tokens > 0) /* samples of seq_length tokens, rounded up */
        ARG(" --train-samples %.0f", ceil(s->training.tokens / (double)s->model.seq_length));
    ARG(" --tensor-model-parallel-size %d --pipeline-model-parallel-size %d", s->parallel.tp, s->parallel.pp);
    if (s->parallel.vpp > 1)
        ARG(" --virtual-pipeline-model-parallel-size %d", s->parallel.vpp);
    if (s->parallel.pipeline_layers_count > 1) {
        int P = s->parallel.pp, *pl = s->parallel.pipeline_layers;
        for (int i = 2; i < P - 1; i++)
            if (pl[i] != pl[1])
                return -2; /* only the two ends may differ in Megatron-LM */
        if (pl[0] != pl[1] || P == 2)
            ARG(" --decoder-first-pipeline-num-layers %d", pl[0]);
        if (pl[P - 1] != pl[1] || P == 2)
            ARG(" --decoder-last-pipeline-num-layers %d", pl[P - 1]);
    }
    if (s->parallel.cp > 1) {
        static const char *const cp[] = {"p2p", "all_gather", "a2a"};
        ARG(" --context-parallel-size %d --cp-comm-type %s", s->parallel.cp, cp[s->parallel.cp_comm]);
    }
    if (s->parallel.ep > 1)
        ARG(" --expert-model-parallel-size %d", s->parallel.ep);
    if (s->parallel.etp > 0 && s->parallel.etp != s->parallel.tp)
        ARG(" --expert-tensor-parallel-size %d", s->parallel.etp);
    if (s->parallel.sequence_parallel)
        ARG(" --sequence-parallel");
    if (s->parallel.zero_stage == 1)
        ARG(" --use-distributed-optimizer");
    /* ZeRO-3 (only under framework megatron, which refuses ZeRO-2): Megatron-FSDP, v1 with the
     * distributed optimizer and the fsdp_dtensor checkpoint format it requires
     * (megatron/training/arguments.py) */
    if (s->parallel.zero_stage == 3)
        ARG(" --use-distributed-optimizer --use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params "
            "--ckpt-format fsdp_dtensor");
    if (s->parallel.overlap_grad_reduce)
        ARG(" --overlap-grad-reduce");
    if (s->parallel.overlap_param_gather)
        ARG(" --overlap-param-gather");
    if (s->parallel.tp_comm_overlap)
        ARG(" --tp-comm-overlap");
    if (s->parallel.overlap_moe_a2a)
        ARG(" --overlap-moe-expert-parallel-comm");
    /* the interleaved schedule overlaps its transfers unless told (Megatron-LM since 2023-10:
     * --no-overlap-p2p-communication, the flag it reads now); the others cannot */
    if (s->parallel.schedule == PIPELINE_INTERLEAVED && s->parallel.pp > 1 && !s->parallel.overlap_p2p_comm)
        ARG(" --no-overlap-p2p-communication");
    if (!s->parallel.scatter_gather_p2p)
        ARG(" --no-scatter-gather-tensors-in-pipeline");
    /* buckets in gradient elements as they travel (fp32 under bf16/fp16 as Megatron accumulates,
     * unless reduced in bf16) */
    double bytes = s->training.precision == PREC_FP16 || reduce_bf16 ? 2 : 4;
    if (s->parallel.bucket_size_mb > 0) /* else Megatron-LM's own default, which dtsim models */
        ARG(" --ddp-bucket-size %.0f", s->parallel.bucket_size_mb * 1048576.0 / bytes);
    return n < (int)len ? 0 : -3;
}

int cli_export(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "megatron")) {
        if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
            usage(stdout);
            return 0;
        }
        fprintf(stderr, "dtsim export: 'megatron' is the one format (see dtsim export --help)\n");
        return 2;
    }
    const char *path = NULL;
    cli_list sets = {0};
    const cli_option options[] = {CLI_OPT_APPEND("set", &sets), CLI_OPT_END};
    const cli_spec spec = {"export", usage, options, &path, "scenario file", NULL}; /* writes stdout only */
    scenario_config s;
    int rc = cli_parse_and_load(&spec, argc - 1, argv + 1, &sets, &s);
    if (rc != CLI_GO_ON)
        goto out;
    rc = 2;
    const char *why = inexpressible(&s);
    char line[8192];
    int made = why ? 0 : megatron_line(&s, line, sizeof line);
    if (why || made) {
        fprintf(stderr, "dtsim export megatron: %s: %s has no Megatron-LM argument\n", path,
                why ? why : made == -1 ? "training.precision tf32"
                          : made == -2 ? "parallel.pipeline_layers with more than the two end stages uneven"
                                       : "the line");
    } else {
        if (s.faults.gpu_mtbf_hours > 0 || s.faults.node_mtbf_hours > 0 || s.training.data_loader.present)
            fprintf(stderr, "dtsim export megatron: left out (not training arguments): faults, training.data_loader\n");
        printf("%s\n", line);
        rc = 0;
    }
    scenario_free(&s);
out:
    cli_list_free(&sets);
    return rc;
}
