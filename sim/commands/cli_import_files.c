/* dtsim import hf / deepspeed: Hugging Face model configs and DeepSpeed configs (cli_import.h). */
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include "cli_import.h"
#include "model_file.h"

/* Keys of obj that are not in used (NULL-terminated), comma-separated into out. */
static void unused_keys(json_t *obj, const char *const *used, const char *prefix, char *out, size_t n)
{
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        int known = 0;
        for (int i = 0; used[i]; i++)
            known |= !strcmp(key, used[i]);
        if (!known)
            snprintf(out + strlen(out), n - strlen(out), "%s%s%s", *out ? ", " : "", prefix, key);
    }
}

static json_t *load(const char *what, const char *path)
{
    char why[512];
    if (description_file_ok(path, why, sizeof why) != 0) {
        import_fail(what, "%s", why);
        return NULL;
    }
    json_error_t je;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        import_fail(what, "%s:%d:%d: %s", path, je.line, je.column, je.text);
    else if (!json_is_object(root)) {
        import_fail(what, "%s: the top level must be an object", path);
        json_decref(root);
        root = NULL;
    }
    return root;
}

/* An integer key of obj into model[name]; required or not. 0, or 2 after naming it. */
static int take_int(const char *path, json_t *obj, const char *key, int required, json_t *model, const char *name)
{
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) {
        if (required)
            return import_fail("hf", "%s: \"%s\" is required", path, key);
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 1)
        return import_fail("hf", "%s: \"%s\" must be a whole number of 1 or more", path, key);
    json_object_set_new(model, name, json_integer(json_integer_value(v)));
    return 0;
}

int import_hf(const char *path, long long seq, json_t **out)
{
    json_t *c = load("hf", path);
    if (!c)
        return 2;
    const char *arch = json_string_value(json_array_get(json_object_get(c, "architectures"), 0));
    static const char *const llama_like[] = {"LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM",
                                             "MixtralForCausalLM", "Qwen3ForCausalLM", "Qwen3MoeForCausalLM", NULL};
    int llama = 0, rc = 2;
    for (int i = 0; arch && llama_like[i]; i++)
        llama |= !strcmp(arch, llama_like[i]);
    int gpt2 = arch && !strcmp(arch, "GPT2LMHeadModel"), neox = arch && !strcmp(arch, "GPTNeoXForCausalLM");
    json_t *m = json_object();
    char ignored[4096] = "";
    if (llama || neox) {
        static const char *const used[] = {"architectures", "num_hidden_layers", "hidden_size", "num_attention_heads",
                                           "num_key_value_heads", "intermediate_size", "vocab_size",
                                           "max_position_embeddings", "tie_word_embeddings", "hidden_act",
                                           "num_local_experts", "num_experts_per_tok", "model_type", "head_dim",
                                           "num_experts", "moe_intermediate_size", "decoder_sparse_step",
                                           "mlp_only_layers", NULL};
        /* Qwen3-MoE: every layer's MLP is experts of moe_intermediate_size when decoder_sparse_step
         * is 1 and mlp_only_layers is empty (transformers' Qwen3MoeDecoderLayer); dtsim's layers
         * are all alike, so a model mixing dense and expert layers is refused */
        json_t *only = json_object_get(c, "mlp_only_layers"), *step = json_object_get(c, "decoder_sparse_step");
        int qwen_moe = arch && !strcmp(arch, "Qwen3MoeForCausalLM");
        if (qwen_moe && ((only && json_array_size(only) > 0) || (step && json_integer_value(step) != 1))) {
            import_fail("hf", "%s: decoder_sparse_step / mlp_only_layers mix dense and expert layers; dtsim's "
                              "layers are all alike", path);
            goto out;
        }
        if (take_int(path, c, "num_hidden_layers", 1, m, "num_layers") ||
            take_int(path, c, "hidden_size", 1, m, "hidden_size") ||
            take_int(path, c, "num_attention_heads", 1, m, "num_attention_heads") ||
            take_int(path, c, "num_key_value_heads", 0, m, "num_query_groups") ||
            take_int(path, c, "intermediate_size", 1, m, "ffn_hidden_size") ||
            take_int(path, c, "vocab_size", 1, m, "vocab_size") ||
            take_int(path, c, "max_position_embeddings", seq == 0, m, "seq_length") ||
            take_int(path, c, "num_local_experts", 0, m, "num_experts") ||
            take_int(path, c, "num_experts_per_tok", 0, m, "moe_router_topk") ||
            take_int(path, c, "head_dim", 0, m, "kv_channels") ||
            (qwen_moe && (take_int(path, c, "num_experts", 1, m, "num_experts") ||
                          take_int(path, c, "moe_intermediate_size", 1, m, "ffn_hidden_size"))))
            goto out;
        const char *act = json_string_value(json_object_get(c, "hidden_act"));
        if (llama && act && strcmp(act, "silu")) {
            import_fail("hf", "%s: hidden_act \"%s\": a gated MLP of SiLU (SwiGLU) is what dtsim models", path, act);
            goto out;
        }
        json_object_set_new(m, "swiglu", json_boolean(llama));
        json_object_set_new(m, "normalization", json_string(llama ? "RMSNorm" : "LayerNorm"));
        json_object_set_new(m, "position_embedding_type", json_string("rope"));
        /* transformers' Llama, Mistral, Mixtral, Qwen2 and GPT-NeoX configs default to untied */
        json_object_set_new(m, "untie_embeddings_and_output_weights",
                            json_boolean(!json_is_true(json_object_get(c, "tie_word_embeddings"))));
        if (neox && !json_object_get(c, "intermediate_size"))
            json_object_set_new(m, "ffn_hidden_size",
                                json_integer(4 * json_integer_value(json_object_get(m, "hidden_size"))));
        unused_keys(c, used, "", ignored, sizeof ignored);
    } else if (gpt2) {
        static const char *const used[] = {"architectures", "n_layer", "n_embd", "n_head", "n_inner", "vocab_size",
                                           "n_positions", "n_ctx", "tie_word_embeddings", "activation_function",
                                           "model_type", NULL};
        if (take_int(path, c, "n_layer", 1, m, "num_layers") || take_int(path, c, "n_embd", 1, m, "hidden_size") ||
            take_int(path, c, "n_head", 1, m, "num_attention_heads") ||
            take_int(path, c, "n_inner", 0, m, "ffn_hidden_size") ||
            take_int(path, c, "vocab_size", 1, m, "vocab_size") ||
            take_int(path, c, "n_positions", seq == 0, m, "seq_length"))
            goto out;
        json_object_set_new(m, "normalization", json_string("LayerNorm"));
        json_object_set_new(m, "position_embedding_type", json_string("learned_absolute"));
        json_t *tie = json_object_get(c, "tie_word_embeddings"); /* GPT-2's default: tied */
        json_object_set_new(m, "untie_embeddings_and_output_weights", json_boolean(tie && json_is_false(tie)));
        unused_keys(c, used, "", ignored, sizeof ignored);
    } else {
        import_fail("hf", "%s: architectures[0] \"%s\": one of LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, "
                          "MixtralForCausalLM, Qwen3ForCausalLM, Qwen3MoeForCausalLM, GPT2LMHeadModel, "
                          "GPTNeoXForCausalLM", path, arch ? arch : "(none)");
        goto out;
    }
    if (seq > 0)
        json_object_set_new(m, "seq_length", json_integer(seq));
    if (*ignored)
        fprintf(stderr, "dtsim import hf: ignored (not modelled): %s\n", ignored);
    char source[1024];
    snprintf(source, sizeof source, "Hugging Face config.json (%s) imported by dtsim import hf from %s", arch, path);
    *out = json_pack("{s:s,s:O}", "source", source, "model", m);
    rc = 0;
out:
    json_decref(m);
    json_decref(c);
    return rc;
}

/* ---- DeepSpeed ------------------------------------------------------------------------------ */

/* "auto" is the Hugging Face Trainer's placeholder: dtsim needs the number it stands for. */
static int refuse_auto(const char *path, json_t *obj, const char *prefix)
{
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        if (json_is_string(v) && !strcmp(json_string_value(v), "auto"))
            return import_fail("deepspeed", "%s: %s%s is \"auto\" (the Hugging Face Trainer fills it in): give the "
                                            "value the run uses", path, prefix, key);
        if (json_is_object(v)) {
            char sub[256];
            snprintf(sub, sizeof sub, "%s%s.", prefix, key);
            if (refuse_auto(path, v, sub))
                return 2;
        }
    }
    return 0;
}

static long long ds_int(json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    return json_is_integer(v) ? json_integer_value(v) : json_is_real(v) ? (long long)json_real_value(v) : 0;
}

int import_deepspeed(const char *path, const char *model, const char *platform, long long gpus, json_t **out)
{
    json_t *c = load("deepspeed", path);
    if (!c)
        return 2;
    int rc = 2;
    if (refuse_auto(path, c, ""))
        goto out;
    if (!gpus) {
        import_fail("deepspeed", "how many GPUs: --gpus N (DeepSpeed's world size)");
        goto out;
    }
    /* DeepSpeed's batch rule: train_batch_size = micro-batch x accumulation x world size; two of
     * the three give the third, all three must agree */
    long long tb = ds_int(c, "train_batch_size"), mb = ds_int(c, "train_micro_batch_size_per_gpu");
    long long gas = ds_int(c, "gradient_accumulation_steps");
    if (!tb && mb)
        tb = mb * (gas ? gas : 1) * gpus;
    if (!mb && tb && gas)
        mb = tb / (gas * gpus);
    if (!mb && tb)
        mb = tb / gpus; /* accumulation 1 */
    if (!gas && mb)
        gas = tb / (mb * gpus);
    if (!tb || !mb || tb != mb * gas * gpus) {
        import_fail("deepspeed", "%s: train_batch_size %lld != train_micro_batch_size_per_gpu %lld x "
                                 "gradient_accumulation_steps %lld x %lld GPUs (DeepSpeed's rule)", path, tb, mb, gas,
                    gpus);
        goto out;
    }
    json_t *z = json_object_get(c, "zero_optimization");
    long long stage = z ? ds_int(z, "stage") : 0;
    if (stage < 0 || stage > 3) {
        import_fail("deepspeed", "%s: zero_optimization.stage %lld: 0..3", path, stage);
        goto out;
    }
    int bf16 = json_is_true(json_object_get(json_object_get(c, "bf16"), "enabled"));
    int fp16 = json_is_true(json_object_get(json_object_get(c, "fp16"), "enabled"));
    json_t *par = json_pack("{s:i,s:i,s:I,s:I}", "tensor_model_parallel_size", 1, "pipeline_model_parallel_size", 1,
                            "data_parallel_size", (json_int_t)gpus, "zero_stage", (json_int_t)stage);
    json_object_set_new(par, "overlap_grad_reduce", json_boolean(z && json_is_true(json_object_get(z, "overlap_comm"))));
    /* DeepSpeed's engine runs the step (framework deepspeed: its pipeline engine, its BF16_Optimizer
     * under bf16 at stage 0, its gradients sent in communication_data_type, by default the model's
     * 16-bit type: docs/model.md) */
    json_object_set_new(par, "framework", json_string("deepspeed"));
    const char *comm_dtype = json_string_value(json_object_get(c, "communication_data_type"));
    if (comm_dtype) {
        /* DeepSpeed lower-cases the value and takes fp32, fp16 or bf16 (get_communication_data_type) */
        static const char *const dtypes[] = {"fp32", "fp16", "bf16"};
        const char *as = NULL;
        for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
            if (!strcasecmp(comm_dtype, dtypes[i]))
                as = dtypes[i];
        if (!as) {
            import_fail("deepspeed", "%s: communication_data_type \"%s\": fp32, fp16 or bf16", path, comm_dtype);
            json_decref(par);
            goto out;
        }
        json_object_set_new(par, "grad_reduce_dtype", json_string(as));
    }
    static const char *const knobs[] = {"reduce_bucket_size", "stage3_prefetch_bucket_size",
                                        "stage3_param_persistence_threshold", "stage3_max_live_parameters", NULL};
    for (int i = 0; z && knobs[i]; i++)
        if (json_is_number(json_object_get(z, knobs[i])))
            json_object_set_new(par, knobs[i], json_real(json_number_value(json_object_get(z, knobs[i]))));
    const char *offload[2] = {"offload_optimizer", "offload_param"}, *keys[2] = {"offload_optimizer", "offload_parameters"};
    for (int i = 0; z && i < 2; i++) {
        const char *dev = json_string_value(json_object_get(json_object_get(z, offload[i]), "device"));
        if (dev && strcmp(dev, "none"))
            json_object_set_new(par, keys[i], json_string(dev));
    }
    json_t *scen = json_pack("{s:s,s:s,s:s,s:{s:I,s:I,s:s,s:s},s:o}", "name", "imported-deepspeed", "platform",
                             platform, "model", model, "training", "global_batch_size", (json_int_t)tb,
                             "micro_batch_size", (json_int_t)mb, "precision", bf16 ? "bf16" : fp16 ? "fp16" : "fp32",
                             "recompute_granularity",
                             json_object_get(c, "activation_checkpointing") ? "full" : "none", "parallel", par);
    static const char *const used_top[] = {"train_batch_size", "train_micro_batch_size_per_gpu",
                                           "gradient_accumulation_steps", "zero_optimization", "bf16", "fp16",
                                           "activation_checkpointing", "communication_data_type", NULL};
    static const char *const used_zero[] = {"stage", "overlap_comm", "reduce_bucket_size", "stage3_prefetch_bucket_size",
                                            "stage3_param_persistence_threshold", "stage3_max_live_parameters",
                                            "offload_optimizer", "offload_param", NULL};
    char ignored[4096] = "";
    unused_keys(c, used_top, "", ignored, sizeof ignored);
    if (z)
        unused_keys(z, used_zero, "zero_optimization.", ignored, sizeof ignored);
    if (*ignored)
        fprintf(stderr, "dtsim import deepspeed: ignored (not modelled): %s\n", ignored);
    *out = scen;
    rc = 0;
out:
    json_decref(c);
    return rc;
}
