/* dtsim import megatron|hf|deepspeed ...: the configurations people already have, as scenarios and
 * model files. Each flag or key is read as its framework defines it; what dtsim does not model is
 * listed on stderr as ignored, by name; what cannot be parsed is an error naming it (exit 2).
 * The mapping to scenario keys is docs/import.md's. */
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "cli_import.h"
#include "config.h"
#include "config_json.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: dtsim import megatron [--platform P] [--gpus N] [-o SCENARIO.json] -- ARGS...\n"
            "       dtsim import hf CONFIG.json [--seq-length S] [-o MODEL.json]\n"
            "       dtsim import deepspeed DS_CONFIG.json --model M [--platform P] [--gpus N] [-o SCENARIO.json]\n"
            "megatron: Megatron-LM's pretrain_gpt.py arguments as a launch script passes them (torchrun's\n"
            "  --nnodes and --nproc-per-node give the GPUs when --gpus does not); a scenario.\n"
            "hf: a Hugging Face transformers config.json (Llama, Mistral, Mixtral, Qwen2, GPT-2,\n"
            "  GPT-NeoX) to a model file for models/ or a scenario's \"model\".\n"
            "deepspeed: a ds_config.json (ZeRO stage and knobs, precision, batch, activation\n"
            "  checkpointing) with a model file (M) to a scenario of pure data parallelism.\n"
            "  --platform P   the platform file (default platforms/dgx-h100-superpod.json)\n"
            "  -o FILE        where to write (default: stdout)\n"
            "Arguments and keys dtsim does not model are listed on stderr as ignored.\n"
            "exit: 0 ok, 2 bad input (the argument or key named), 1 runtime failure\n");
}

/* ---- shared ------------------------------------------------------------------------------ */

int import_fail(const char *what, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "dtsim import %s: ", what);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 2;
}

int import_int(const char *what, const char *name, const char *v, long long lo, long long hi, long long *out)
{
    char *end;
    long long x = v ? strtoll(v, &end, 10) : 0;
    if (!v || end == v || *end || x < lo || x > hi)
        return import_fail(what, "%s: '%s' is not a whole number in %lld..%lld", name, v ? v : "", lo, hi);
    *out = x;
    return 0;
}

int import_write(const char *what, json_t *doc, const char *path)
{
    if (cli_write_json(doc, path ? path : "-") != 0) {
        import_fail(what, "cannot write %s", path ? path : "the standard output");
        return 1;
    }
    return 0;
}

/* ---- Megatron-LM ------------------------------------------------------------------------- */

typedef enum { MA_INT, MA_REAL, MA_WORD, MA_FLAG } ma_kind;

/* The arguments dtsim models: Megatron's name, what it takes, where it goes ("model.x",
 * "training.x", "parallel.x", or a name handled below). */
static const struct {
    const char *flag;
    ma_kind kind;
    const char *key;
} MEGATRON[] = {
    {"--num-layers", MA_INT, "model.num_layers"},
    {"--hidden-size", MA_INT, "model.hidden_size"},
    {"--ffn-hidden-size", MA_INT, "model.ffn_hidden_size"},
    {"--num-attention-heads", MA_INT, "model.num_attention_heads"},
    {"--kv-channels", MA_INT, "model.kv_channels"},
    {"--num-query-groups", MA_INT, "num_query_groups"},
    {"--group-query-attention", MA_FLAG, "group_query_attention"},
    {"--seq-length", MA_INT, "model.seq_length"},
    {"--max-position-embeddings", MA_INT, "max_position_embeddings"},
    {"--vocab-size", MA_INT, "model.vocab_size"},
    {"--swiglu", MA_FLAG, "model.swiglu"},
    {"--normalization", MA_WORD, "model.normalization"},
    {"--position-embedding-type", MA_WORD, "model.position_embedding_type"},
    {"--untie-embeddings-and-output-weights", MA_FLAG, "model.untie_embeddings_and_output_weights"},
    {"--num-experts", MA_INT, "model.num_experts"},
    {"--moe-router-topk", MA_INT, "model.moe_router_topk"},
    {"--moe-router-num-groups", MA_INT, "moe_router_num_groups"},
    {"--moe-router-group-topk", MA_INT, "moe_router_group_topk"},
    {"--moe-token-dispatcher-type", MA_WORD, "moe_token_dispatcher_type"},
    {"--moe-expert-capacity-factor", MA_REAL, "model.moe_expert_capacity_factor"},
    {"--moe-pad-expert-input-to-capacity", MA_FLAG, "model.moe_pad_expert_input_to_capacity"},
    {"--cross-entropy-loss-fusion", MA_FLAG, "model.cross_entropy_loss_fusion"},
    {"--cross-entropy-fusion-impl", MA_WORD, "model.cross_entropy_fusion_impl"},
    {"--attention-backend", MA_WORD, "attention_backend"},
    {"--use-flash-attn", MA_FLAG, "use_flash_attn"},
    {"--micro-batch-size", MA_INT, "training.micro_batch_size"},
    {"--global-batch-size", MA_INT, "training.global_batch_size"},
    {"--bf16", MA_FLAG, "bf16"},
    {"--grad-reduce-in-bf16", MA_FLAG, "grad_reduce_in_bf16"},
    {"--fp16", MA_FLAG, "fp16"},
    {"--fp8-format", MA_WORD, "fp8_format"},
    {"--fp8-recipe", MA_WORD, "fp8_recipe"},
    {"--recompute-granularity", MA_WORD, "training.recompute_granularity"},
    {"--recompute-method", MA_WORD, "training.recompute_method"},
    {"--recompute-num-layers", MA_INT, "training.recompute_num_layers"},
    {"--distribute-saved-activations", MA_FLAG, "training.distribute_saved_activations"},
    {"--train-iters", MA_INT, "training.train_iters"},
    {"--train-samples", MA_INT, "training.train_samples"},
    {"--optimizer", MA_WORD, "training.optimizer"},
    {"--tensor-model-parallel-size", MA_INT, "parallel.tensor_model_parallel_size"},
    {"--pipeline-model-parallel-size", MA_INT, "parallel.pipeline_model_parallel_size"},
    {"--virtual-pipeline-model-parallel-size", MA_INT, "parallel.virtual_pipeline_model_parallel_size"},
    {"--num-layers-per-virtual-pipeline-stage", MA_INT, "layers_per_virtual_stage"},
    {"--context-parallel-size", MA_INT, "parallel.context_parallel_size"},
    {"--cp-comm-type", MA_WORD, "parallel.cp_comm_type"},
    {"--expert-model-parallel-size", MA_INT, "parallel.expert_model_parallel_size"},
    {"--expert-tensor-parallel-size", MA_INT, "parallel.expert_tensor_parallel_size"},
    {"--sequence-parallel", MA_FLAG, "parallel.sequence_parallel"},
    {"--use-distributed-optimizer", MA_FLAG, "distributed_optimizer"},
    {"--use-megatron-fsdp", MA_FLAG, "megatron_fsdp"},
    {"--data-parallel-sharding-strategy", MA_WORD, "dp_sharding_strategy"},
    {"--overlap-grad-reduce", MA_FLAG, "parallel.overlap_grad_reduce"},
    {"--overlap-param-gather", MA_FLAG, "parallel.overlap_param_gather"},
    {"--tp-comm-overlap", MA_FLAG, "parallel.tp_comm_overlap"},
    {"--overlap-moe-expert-parallel-comm", MA_FLAG, "parallel.overlap_moe_expert_parallel_comm"},
    {"--overlap-p2p-communication", MA_FLAG, "parallel.overlap_p2p_comm"},
    {"--no-overlap-p2p-communication", MA_FLAG, "no_overlap_p2p"},
    {"--no-scatter-gather-tensors-in-pipeline", MA_FLAG, "no_scatter_gather"},
    {"--ddp-bucket-size", MA_INT, "ddp_bucket_size"},
    {"--decoder-first-pipeline-num-layers", MA_INT, "first_stage_layers"},
    {"--decoder-last-pipeline-num-layers", MA_INT, "last_stage_layers"},
    {"--tokenizer-type", MA_WORD, "tokenizer_type"},
    {"--vocab-file", MA_WORD, "vocab_file"},
    {"--make-vocab-size-divisible-by", MA_INT, "vocab_divisible_by"},
    {"--nnodes", MA_INT, "nnodes"},
    {"--nproc-per-node", MA_INT, "nproc_per_node"},
    {"--nproc_per_node", MA_INT, "nproc_per_node"},
};
enum { N_MEGATRON = sizeof MEGATRON / sizeof MEGATRON[0] };

/* key "a.b" of obj set to v (the section made as needed) */
static void put(json_t *root, const char *key, json_t *v)
{
    char sect[32];
    const char *dot = strchr(key, '.');
    snprintf(sect, sizeof sect, "%.*s", (int)(dot - key), key);
    json_t *o = json_object_get(root, sect);
    if (!o) {
        o = json_object();
        json_object_set_new(root, sect, o);
    }
    json_object_set_new(o, dot + 1, v);
}

static long long got_int(json_t *extra, const char *name)
{
    return json_integer_value(json_object_get(extra, name));
}

static int megatron_into(int argc, char **argv, long long gpus, json_t *root, json_t *extra, import_list *ignored);

/* Parses ARGS into a scenario. Returns 0 with *out, or 2 after the reason. */
int import_megatron_args(int argc, char **argv, const char *platform, long long gpus, json_t **out)
{
    json_t *root = json_pack("{s:s,s:s}", "name", "imported-megatron", "platform", platform);
    json_t *extra = json_object(); /* arguments that combine with others below */
    import_list ignored = {0};
    int rc = megatron_into(argc, argv, gpus, root, extra, &ignored);
    if (rc == 0)
        import_list_print("megatron", &ignored);
    free(ignored.s);
    json_decref(extra);
    if (rc != 0) {
        json_decref(root);
        return rc;
    }
    *out = root;
    return 0;
}

void import_list_add(import_list *l, const char *prefix, const char *what)
{
    size_t add = (l->len ? 2 : 0) + strlen(prefix) + strlen(what);
    char *s = realloc(l->s, l->len + add + 1);
    if (!s) { /* out of memory: say so where the list stops rather than cut it unsaid */
        fprintf(stderr, "dtsim import: out of memory listing what is ignored (%s%s left out)\n", prefix, what);
        return;
    }
    snprintf(s + l->len, add + 1, "%s%s%s", l->len ? ", " : "", prefix, what);
    l->s = s;
    l->len += add;
}

void import_list_print(const char *what, import_list *l)
{
    if (l->len)
        fprintf(stderr, "dtsim import %s: ignored (not modelled): %s\n", what, l->s);
    free(l->s);
    *l = (import_list){0};
}

static int megatron_into(int argc, char **argv, long long gpus, json_t *root, json_t *extra, import_list *ignored)
{
    put(root, "parallel.zero_stage", json_integer(0)); /* Megatron without the distributed optimizer */
    put(root, "training.precision", json_string("fp32"));
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2)) { /* the script and the like */
            import_list_add(ignored, "", a);
            continue;
        }
        char name[128];
        const char *eq = strchr(a, '=');
        snprintf(name, sizeof name, "%.*s", eq ? (int)(eq - a) : (int)strlen(a), a);
        int k = 0;
        while (k < N_MEGATRON && strcmp(name, MEGATRON[k].flag))
            k++;
        const char *v = eq ? eq + 1 : NULL;
        if (k == N_MEGATRON) { /* not modelled: its value, if one follows, goes with it */
            if (!eq && i + 1 < argc && strncmp(argv[i + 1], "--", 2))
                i++;
            import_list_add(ignored, "", name);
            continue;
        }
        if (MEGATRON[k].kind != MA_FLAG && !v) {
            if (i + 1 >= argc)
                return import_fail("megatron", "%s needs a value", name);
            v = argv[++i];
        }
        const char *key = MEGATRON[k].key;
        json_t *val = NULL;
        long long n = 0;
        switch (MEGATRON[k].kind) {
        case MA_INT:
            if (import_int("megatron", name, v, 0, 1000000000000000LL, &n))
                return 2;
            val = json_integer(n);
            break;
        case MA_REAL: {
            char *end;
            double x = strtod(v, &end);
            if (end == v || *end || !(x >= 0))
                return import_fail("megatron", "%s: '%s' is not a number of 0 or more", name, v);
            val = json_real(x);
            break;
        }
        case MA_WORD:
            val = json_string(v);
            break;
        case MA_FLAG:
            if (v)
                return import_fail("megatron", "%s takes no value", name);
            val = json_true();
            break;
        }
        if (strchr(key, '.'))
            put(root, key, val);
        else
            json_object_set_new(extra, key, val);
    }
    json_t *model = json_object_get(root, "model"), *par = json_object_get(root, "parallel");
    json_t *tr = json_object_get(root, "training");
    if (!model || !json_object_get(model, "num_layers") || !json_object_get(model, "hidden_size") ||
        !json_object_get(model, "num_attention_heads"))
        return import_fail("megatron", "--num-layers, --hidden-size and --num-attention-heads are required");
    if (!json_object_get(model, "seq_length")) {
        if (!json_object_get(extra, "max_position_embeddings"))
            return import_fail("megatron", "--seq-length (or --max-position-embeddings) is required");
        json_object_set_new(model, "seq_length", json_integer(got_int(extra, "max_position_embeddings")));
    }
    long long tp = got_int(par, "tensor_model_parallel_size");
    tp = tp ? tp : 1;
    if (!json_object_get(model, "vocab_size")) {
        /* GPT-2's BPE (--tokenizer-type GPT2BPETokenizer, or the legacy --vocab-file with
         * --merge-file): 50,257 tokens, padded as Megatron pads them (megatron/training/
         * tokenizer: a multiple of --make-vocab-size-divisible-by, default 128, times TP) */
        const char *tok = json_string_value(json_object_get(extra, "tokenizer_type"));
        if (!(tok ? !strcmp(tok, "GPT2BPETokenizer") : json_object_get(extra, "vocab_file") != NULL))
            return import_fail("megatron", "--vocab-size is required with this tokenizer (%s): the vocabulary padded "
                                           "as Megatron pads it (--make-vocab-size-divisible-by, default 128, times TP)",
                               tok ? tok : "none given");
        long long div = got_int(extra, "vocab_divisible_by");
        long long m = (div ? div : 128) * tp;
        json_object_set_new(model, "vocab_size", json_integer((50257 + m - 1) / m * m));
    }
    /* grouped-query attention needs both of Megatron's flags, as there */
    if (json_is_true(json_object_get(extra, "group_query_attention"))) {
        if (!json_object_get(extra, "num_query_groups"))
            return import_fail("megatron", "--group-query-attention needs --num-query-groups");
        json_object_set_new(model, "num_query_groups", json_integer(got_int(extra, "num_query_groups")));
    } else if (json_object_get(extra, "num_query_groups")) {
        import_list_add(ignored, "", "--num-query-groups (without --group-query-attention)");
    }
    const char *backend = json_string_value(json_object_get(extra, "attention_backend"));
    json_object_set_new(model, "attention", json_string(backend && (!strcmp(backend, "unfused") ||
                                                                     !strcmp(backend, "local")) ? "unfused" : "flash"));
    if (backend && !strcmp(backend, "fused")) /* Transformer Engine's cuDNN fused attention */
        json_object_set_new(model, "attention_backend", json_string("fused"));
    int bf16 = json_is_true(json_object_get(extra, "bf16")), fp16 = json_is_true(json_object_get(extra, "fp16"));
    const char *fp8 = json_string_value(json_object_get(extra, "fp8_format"));
    if (bf16 + fp16 > 1)
        return import_fail("megatron", "--bf16 and --fp16 together");
    json_object_set_new(tr, "precision", json_string(fp8 ? "fp8" : bf16 ? "bf16" : fp16 ? "fp16" : "fp32"));
    /* Megatron-LM reads --grad-reduce-in-bf16 under --bf16 only (arguments.py) */
    int reduce_bf16 = json_is_true(json_object_get(extra, "grad_reduce_in_bf16"));
    if (reduce_bf16 && bf16)
        json_object_set_new(par, "grad_reduce_dtype", json_string("bf16"));
    else if (reduce_bf16)
        import_list_add(ignored, "", "--grad-reduce-in-bf16 (without --bf16)");
    const char *recipe = json_string_value(json_object_get(extra, "fp8_recipe"));
    if (recipe && fp8) /* Megatron-LM reads --fp8-recipe only with --fp8-format */
        json_object_set_new(tr, "fp8_recipe", json_string(recipe));
    else if (recipe)
        import_list_add(ignored, "", "--fp8-recipe (without --fp8-format)");
    /* Megatron-Core's token dispatcher and group-limited routing, read only with experts: alltoall
     * or flex as given; allgather, TransformerConfig's default when the flag is left out, is not
     * modelled; the groups only with their top-k (Megatron routes ungrouped without it) */
    const char *dispatcher = json_string_value(json_object_get(extra, "moe_token_dispatcher_type"));
    long long groups = got_int(extra, "moe_router_num_groups"), group_topk = got_int(extra, "moe_router_group_topk");
    if (got_int(model, "num_experts") > 0) {
        if (dispatcher && strcmp(dispatcher, "alltoall") && strcmp(dispatcher, "flex"))
            return import_fail("megatron", "--moe-token-dispatcher-type %s: dtsim models alltoall and flex",
                               dispatcher);
        if (!dispatcher)
            fprintf(stderr, "dtsim import megatron: no --moe-token-dispatcher-type: Megatron-Core's default, "
                            "allgather, is not modelled; imported as alltoall\n");
        json_object_set_new(par, "moe_token_dispatcher_type", json_string(dispatcher ? dispatcher : "alltoall"));
        if (group_topk > 0 && groups <= 0)
            return import_fail("megatron", "--moe-router-group-topk needs --moe-router-num-groups");
        if (group_topk > 0) {
            json_object_set_new(model, "moe_router_num_groups", json_integer(groups));
            json_object_set_new(model, "moe_router_group_topk", json_integer(group_topk));
        } else if (groups > 0) {
            import_list_add(ignored, "",
                            "--moe-router-num-groups (without --moe-router-group-topk Megatron routes ungrouped)");
        }
    } else if (dispatcher || groups > 0 || group_topk > 0) {
        import_list_add(ignored, "", "--moe-token-dispatcher-type and --moe-router-* (without --num-experts)");
    }
    if (json_is_true(json_object_get(extra, "distributed_optimizer")))
        json_object_set_new(par, "zero_stage", json_integer(1));
    /* Megatron-FSDP: --data-parallel-sharding-strategy, default optim_grads_params, says what it
     * shards (megatron/training/arguments.py). no_shard and optim reduce after the last micro-batch
     * as DDP and the distributed optimizer do: ZeRO 0 and 1; optim_grads_params is ZeRO-3, its
     * parameter gather overlapped by its own prefetch (megatron_fsdp.py sets overlap_param_gather
     * for it); optim_grads reduce-scatters every micro-batch (grad_reduce_every_bprop), which
     * dtsim's ZeRO-2 does not */
    const char *sharding = json_string_value(json_object_get(extra, "dp_sharding_strategy"));
    if (json_is_true(json_object_get(extra, "megatron_fsdp"))) {
        static const char *const strategies[] = {"no_shard", "optim", "optim_grads", "optim_grads_params"};
        int zero = -1;
        for (int i = 0; i < 4; i++)
            if (!strcmp(sharding ? sharding : "optim_grads_params", strategies[i]))
                zero = i;
        if (zero < 0)
            return import_fail("megatron", "--data-parallel-sharding-strategy %s: no_shard, optim, optim_grads or "
                                           "optim_grads_params", sharding);
        if (zero == 2)
            return import_fail("megatron", "--data-parallel-sharding-strategy optim_grads: Megatron-FSDP reduce-scatters "
                                           "every micro-batch there, which dtsim's ZeRO-2 does not model");
        json_object_set_new(par, "zero_stage", json_integer(zero));
        if (zero == 3 && json_object_get(par, "overlap_param_gather")) {
            json_object_del(par, "overlap_param_gather");
            import_list_add(ignored, "", "--overlap-param-gather (Megatron-FSDP's own prefetch at ZeRO-3)");
        }
    } else if (sharding) {
        import_list_add(ignored, "", "--data-parallel-sharding-strategy (without --use-megatron-fsdp)");
    }
    if (json_is_true(json_object_get(extra, "no_scatter_gather")))
        json_object_set_new(par, "scatter_gather_p2p", json_false());
    long long pp = got_int(par, "pipeline_model_parallel_size");
    long long cp = got_int(par, "context_parallel_size"), L = json_integer_value(json_object_get(model, "num_layers"));
    pp = pp ? pp : 1;
    cp = cp ? cp : 1;
    long long per_stage = got_int(extra, "layers_per_virtual_stage");
    if (per_stage > 0) { /* Megatron: layers / PP / layers per virtual stage chunks per stage */
        if (L % (pp * per_stage))
            return import_fail("megatron", "--num-layers-per-virtual-pipeline-stage %lld does not divide %lld layers "
                                           "over %lld stages", per_stage, L, pp);
        json_object_set_new(par, "virtual_pipeline_model_parallel_size", json_integer(L / pp / per_stage));
    }
    /* Pipeline transfers beside compute: Megatron-LM's interleaved schedule overlaps them unless
     * --no-overlap-p2p-communication (its default since commit 4eeff55d1f, 2023-10; before, the
     * flag --overlap-p2p-communication asked for it), and the others never do (arguments.py sets
     * overlap_p2p_comm false) */
    int no_overlap_p2p = json_is_true(json_object_get(extra, "no_overlap_p2p"));
    if (got_int(par, "virtual_pipeline_model_parallel_size") > 1) {
        json_object_set_new(par, "schedule", json_string("interleaved"));
        json_object_set_new(par, "overlap_p2p_comm", json_boolean(!no_overlap_p2p));
    } else if (json_object_get(par, "overlap_p2p_comm")) {
        json_object_del(par, "overlap_p2p_comm");
        import_list_add(ignored, "", "--overlap-p2p-communication (Megatron-LM overlaps transfers only under the "
                                     "interleaved schedule)");
    }
    long long first = got_int(extra, "first_stage_layers"), last = got_int(extra, "last_stage_layers");
    if (first > 0 || last > 0) { /* uneven ends, the middle stages even, as Megatron splits them */
        if (pp < 2)
            return import_fail("megatron", "--decoder-first/last-pipeline-num-layers need pipeline parallelism");
        long long f = first > 0 ? first : -1, l = last > 0 ? last : -1, rest = L - (f > 0 ? f : 0) - (l > 0 ? l : 0);
        long long middle = pp - (f > 0) - (l > 0);
        if (middle > 0 && rest % middle)
            return import_fail("megatron", "%lld layers left for %lld middle stages do not split evenly", rest, middle);
        json_t *arr = json_array();
        for (long long st = 0; st < pp; st++)
            json_array_append_new(arr, json_integer(st == 0 && f > 0 ? f : st == pp - 1 && l > 0 ? l
                                                                                            : middle ? rest / middle : 0));
        json_object_set_new(par, "pipeline_layers", arr);
    }
    long long nodes = got_int(extra, "nnodes"), per_node = got_int(extra, "nproc_per_node");
    if (!gpus && nodes > 0 && per_node > 0)
        gpus = nodes * per_node;
    if (!gpus)
        return import_fail("megatron", "how many GPUs: --gpus N (or the launcher's --nnodes and --nproc-per-node)");
    if (gpus % (tp * pp * cp))
        return import_fail("megatron", "%lld GPUs are not a multiple of TP x PP x CP = %lld", gpus, tp * pp * cp);
    json_object_set_new(par, "data_parallel_size", json_integer(gpus / (tp * pp * cp)));
    json_object_set_new(par, "framework", json_string("megatron")); /* its defaults, and no FSDP key */
    /* Megatron-LM's batch rule (megatron/training/arguments.py, validate_args): --micro-batch-size
     * is required, and --global-batch-size defaults to one micro-batch per data-parallel rank */
    long long micro = got_int(tr, "micro_batch_size");
    if (micro <= 0)
        return import_fail("megatron", "--micro-batch-size is required (Megatron-LM asserts it is given)");
    if (got_int(tr, "global_batch_size") <= 0) {
        json_object_set_new(tr, "global_batch_size", json_integer(micro * (gpus / (tp * pp * cp))));
        fprintf(stderr, "dtsim import megatron: no --global-batch-size: Megatron-LM's default, --micro-batch-size x "
                        "the data-parallel size, %lld\n", micro * (gpus / (tp * pp * cp)));
    }
    long long bucket = got_int(extra, "ddp_bucket_size");
    if (bucket > 0) { /* elements, as they travel: fp32 under bf16/fp16 as Megatron accumulates (params.c) */
        const char *prec = json_string_value(json_object_get(tr, "precision"));
        double bytes = !strcmp(prec, "fp16") || (reduce_bf16 && bf16) ? 2 : 4;
        json_object_set_new(par, "bucket_size_mb", json_real((double)bucket * bytes / 1048576.0));
    }
    return 0;
}

int cli_import(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *kind = argv[1], *platform = "platforms/dgx-h100-superpod.json", *output = NULL, *file = NULL;
    const char *model = NULL;
    long long gpus = 0, seq = 0;
    int i = 2;
    for (; i < argc && strcmp(argv[i], "--"); i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--platform") && v)
            platform = argv[++i];
        else if (!strcmp(a, "-o") && v)
            output = argv[++i];
        else if (!strcmp(a, "--model") && v)
            model = argv[++i];
        else if (!strcmp(a, "--gpus") && v) {
            if (import_int(kind, "--gpus", argv[++i], 1, 1048576, &gpus))
                return 2;
        } else if (!strcmp(a, "--seq-length") && v) {
            if (import_int(kind, "--seq-length", argv[++i], 1, 100000000, &seq))
                return 2;
        } else if (a[0] != '-' && !file)
            file = a;
        else
            return import_fail(kind, "unexpected argument '%s' (see dtsim import --help)", a);
    }
    json_t *doc = NULL;
    int rc;
    if (!strcmp(kind, "megatron")) {
        if (i >= argc)
            return import_fail(kind, "the arguments go after \"--\" (see dtsim import --help)");
        rc = import_megatron_args(argc - i - 1, argv + i + 1, platform, gpus, &doc);
    } else if (!strcmp(kind, "hf")) {
        rc = file ? import_hf(file, seq, &doc) : import_fail(kind, "a config.json is required");
    } else if (!strcmp(kind, "deepspeed")) {
        rc = file && model ? import_deepspeed(file, model, platform, gpus, &doc)
                           : import_fail(kind, "a ds_config.json and --model are required");
    } else {
        return import_fail(kind, "not megatron, hf or deepspeed");
    }
    /* a whole scenario (Megatron-LM's or DeepSpeed's arguments) goes through the scenario reader
     * before it is written, from the folder it is written to, so that nothing it would refuse when
     * run (a --seq-length 0) is written; import hf writes a model only, checked by its own reader */
    if (rc == 0 && strcmp(kind, "hf")) {
        char dir[4096];
        config_dirname(output && strcmp(output, "-") ? output : "", dir, sizeof dir);
        scenario_config s;
        config_error err;
        if (scenario_load_json(doc, dir, NULL, 0, &s, &err) != 0)
            rc = import_fail(kind, "the scenario it would write is refused: %s", err.msg);
        else
            scenario_free(&s);
    }
    if (rc == 0)
        rc = import_write(kind, doc, output);
    json_decref(doc);
    return rc;
}
