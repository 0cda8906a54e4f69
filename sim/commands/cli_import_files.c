/* dtsim import hf / deepspeed: Hugging Face model configs and DeepSpeed configs (cli_import.h). */
#include <ctype.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "cli_import.h"
#include "config.h"
#include "model_file.h"

/* Keys of obj that are not in used (NULL-terminated), added to out. */
static void unused_keys(json_t *obj, const char *const *used, const char *prefix, import_list *out)
{
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        int known = 0;
        for (int i = 0; used[i]; i++)
            known |= !strcmp(key, used[i]);
        if (!known)
            import_list_add(out, prefix, key);
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

/* One config.json being read: where each model key came from, so that the scenario reader's
 * refusals of the written model (hf_check) name the key of config.json the user can fix. */
typedef struct {
    const char *hf, *name; /* config.json's key (or --seq-length), the model's */
} hf_key;
typedef struct {
    const char *path;
    json_t *c, *m;
    hf_key from[24];
    int n;
} hf_read;

static void hf_from(hf_read *r, const char *hf, const char *name)
{
    for (int i = 0; i < r->n; i++)
        if (!strcmp(r->from[i].name, name)) { /* a later key overrides (Qwen3-MoE's expert width) */
            r->from[i].hf = hf;
            return;
        }
    if (r->n < (int)(sizeof r->from / sizeof r->from[0]))
        r->from[r->n++] = (hf_key){hf, name};
}

/* An integer key into model[name]; required or not. null is absent: transformers writes it for
 * "the default" (num_key_value_heads, head_dim). 0, or 2 after naming it. */
static int take_int(hf_read *r, const char *key, int required, const char *name)
{
    json_t *v = json_object_get(r->c, key);
    if (!v || json_is_null(v)) {
        if (required)
            return import_fail("hf", "%s: \"%s\" is required", r->path, key);
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 1)
        return import_fail("hf", "%s: \"%s\" must be a whole number of 1 or more", r->path, key);
    json_object_set_new(r->m, name, json_integer(json_integer_value(v)));
    hf_from(r, key, name);
    return 0;
}

/* A boolean key (absent or null: def); "yes" or 1 is refused, not read as false. 0, or 2. */
static int take_bool(hf_read *r, const char *key, int def, int *out)
{
    json_t *v = json_object_get(r->c, key);
    if (v && !json_is_null(v) && !json_is_boolean(v))
        return import_fail("hf", "%s: \"%s\" must be true or false", r->path, key);
    *out = v && json_is_boolean(v) ? json_is_true(v) : def;
    return 0;
}

/* The written model through the scenario reader's own rules (scenario_parse_model), so that import
 * never writes a model dtsim refuses; its message with dtsim's keys turned back into config.json's.
 * 0, or 2 after naming the key. */
static int hf_check(hf_read *r)
{
    scenario_config *s = calloc(1, sizeof *s);
    config_error err;
    if (!s)
        return import_fail("hf", "out of memory");
    int bad = scenario_parse_model(r->m, "model", s, &err);
    free(s);
    if (!bad)
        return 0;
    const char *in = err.msg;
    if (!strncmp(in, "model.", 6) || !strncmp(in, "model: ", 7))
        in += in[5] == '.' ? 6 : 7;
    char msg[sizeof err.msg + 256];
    size_t o = 0;
    while (*in && o + 64 < sizeof msg) { /* word by word; a key of the model becomes config.json's */
        size_t len = 0;
        while (isalnum((unsigned char)in[len]) || in[len] == '_')
            len++;
        const char *word = NULL;
        for (int i = 0; len && i < r->n; i++)
            if (strlen(r->from[i].name) == len && !strncmp(in, r->from[i].name, len))
                word = r->from[i].hf;
        if (word)
            o += (size_t)snprintf(msg + o, sizeof msg - o, "%s", word);
        else
            o += (size_t)snprintf(msg + o, sizeof msg - o, "%.*s", len ? (int)len : 1, in);
        in += len ? len : 1;
    }
    msg[o < sizeof msg ? o : sizeof msg - 1] = 0;
    return import_fail("hf", "%s: %s", r->path, msg);
}

int import_hf(const char *path, long long seq, json_t **out)
{
    json_t *c = load("hf", path);
    if (!c)
        return 2;
    const char *arch = json_string_value(json_array_get(json_object_get(c, "architectures"), 0));
    static const char *const llama_like[] = {"LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM",
                                             "MixtralForCausalLM", "Qwen3ForCausalLM", "Qwen3MoeForCausalLM", NULL};
    int llama = 0, rc = 2, tied = 0;
    for (int i = 0; arch && llama_like[i]; i++)
        llama |= !strcmp(arch, llama_like[i]);
    int gpt2 = arch && !strcmp(arch, "GPT2LMHeadModel"), neox = arch && !strcmp(arch, "GPTNeoXForCausalLM");
    hf_read r = {.path = path, .c = c, .m = json_object()};
    json_t *m = r.m;
    import_list ignored = {0};
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
        if (qwen_moe && ((only && !json_is_array(only)) || (step && !json_is_integer(step)))) {
            import_fail("hf", "%s: \"%s\" must be %s", path, only && !json_is_array(only) ? "mlp_only_layers"
                        : "decoder_sparse_step", only && !json_is_array(only) ? "a list" : "a whole number");
            goto out;
        }
        if (qwen_moe && ((only && json_array_size(only) > 0) || (step && json_integer_value(step) != 1))) {
            import_fail("hf", "%s: decoder_sparse_step / mlp_only_layers mix dense and expert layers; dtsim's "
                              "layers are all alike", path);
            goto out;
        }
        /* a head's width is head_dim where hidden_size is not a multiple of the heads */
        hf_from(&r, "head_dim", "kv_channels");
        if (take_int(&r, "num_hidden_layers", 1, "num_layers") || take_int(&r, "hidden_size", 1, "hidden_size") ||
            take_int(&r, "num_attention_heads", 1, "num_attention_heads") ||
            take_int(&r, "num_key_value_heads", 0, "num_query_groups") ||
            take_int(&r, "intermediate_size", 1, "ffn_hidden_size") || take_int(&r, "vocab_size", 1, "vocab_size") ||
            take_int(&r, "max_position_embeddings", seq == 0, "seq_length") ||
            take_int(&r, "num_local_experts", 0, "num_experts") ||
            take_int(&r, "num_experts_per_tok", 0, "moe_router_topk") || take_int(&r, "head_dim", 0, "kv_channels") ||
            (qwen_moe && (take_int(&r, "num_experts", 1, "num_experts") ||
                          take_int(&r, "moe_intermediate_size", 1, "ffn_hidden_size"))))
            goto out;
        /* experts without their routing: said in the config's own key, not the reader's default 0 */
        json_t *experts = json_object_get(m, "num_experts");
        json_t *topk = json_object_get(c, "num_experts_per_tok");
        if (experts && json_integer_value(experts) > 0 && (!topk || json_is_null(topk))) {
            import_fail("hf", "%s: %s %lld but no \"num_experts_per_tok\": how many experts a token is routed "
                              "to is not said (Mixtral routes 2); add it to the config", path,
                        json_object_get(c, "num_local_experts") ? "num_local_experts" : "num_experts",
                        (long long)json_integer_value(experts));
            goto out;
        }
        json_t *act = json_object_get(c, "hidden_act");
        if (act && !json_is_null(act) && !json_is_string(act)) {
            import_fail("hf", "%s: \"hidden_act\" must be a string (\"silu\")", path);
            goto out;
        }
        if (llama && act && json_is_string(act) && strcmp(json_string_value(act), "silu")) {
            import_fail("hf", "%s: hidden_act \"%s\": a gated MLP of SiLU (SwiGLU) is what dtsim models", path,
                        json_string_value(act));
            goto out;
        }
        /* transformers' Llama, Mistral, Mixtral, Qwen2 and GPT-NeoX configs default to untied */
        if (take_bool(&r, "tie_word_embeddings", 0, &tied))
            goto out;
        json_object_set_new(m, "swiglu", json_boolean(llama));
        json_object_set_new(m, "normalization", json_string(llama ? "RMSNorm" : "LayerNorm"));
        json_object_set_new(m, "position_embedding_type", json_string("rope"));
        json_object_set_new(m, "untie_embeddings_and_output_weights", json_boolean(!tied));
        if (neox && !json_object_get(c, "intermediate_size"))
            json_object_set_new(m, "ffn_hidden_size",
                                json_integer(4 * json_integer_value(json_object_get(m, "hidden_size"))));
        unused_keys(c, used, "", &ignored);
    } else if (gpt2) {
        static const char *const used[] = {"architectures", "n_layer", "n_embd", "n_head", "n_inner", "vocab_size",
                                           "n_positions", "n_ctx", "tie_word_embeddings", "activation_function",
                                           "model_type", NULL};
        if (take_int(&r, "n_layer", 1, "num_layers") || take_int(&r, "n_embd", 1, "hidden_size") ||
            take_int(&r, "n_head", 1, "num_attention_heads") || take_int(&r, "n_inner", 0, "ffn_hidden_size") ||
            take_int(&r, "vocab_size", 1, "vocab_size") || take_int(&r, "n_positions", seq == 0, "seq_length") ||
            take_bool(&r, "tie_word_embeddings", 1, &tied)) /* GPT-2's default: tied */
            goto out;
        /* GPT-2's attention splits n_embd evenly over its heads and has no key for a head's width
         * (transformers refuses such a config): said in its own keys, not the reader's kv_channels */
        json_int_t embd = json_integer_value(json_object_get(m, "hidden_size")),
                   heads = json_integer_value(json_object_get(m, "num_attention_heads"));
        if (heads > 0 && embd % heads) {
            import_fail("hf", "%s: \"n_embd\" %lld is not a multiple of \"n_head\" %lld (GPT-2 splits n_embd "
                              "evenly over its heads)", path, (long long)embd, (long long)heads);
            goto out;
        }
        json_object_set_new(m, "normalization", json_string("LayerNorm"));
        json_object_set_new(m, "position_embedding_type", json_string("learned_absolute"));
        json_object_set_new(m, "untie_embeddings_and_output_weights", json_boolean(!tied));
        unused_keys(c, used, "", &ignored);
    } else {
        import_fail("hf", "%s: architectures[0] \"%s\": one of LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, "
                          "MixtralForCausalLM, Qwen3ForCausalLM, Qwen3MoeForCausalLM, GPT2LMHeadModel, "
                          "GPTNeoXForCausalLM", path, arch ? arch : "(none)");
        goto out;
    }
    if (seq > 0) {
        json_object_set_new(m, "seq_length", json_integer(seq));
        hf_from(&r, "--seq-length", "seq_length");
    }
    if (hf_check(&r))
        goto out;
    import_list_print("hf", &ignored);
    char source[1024];
    snprintf(source, sizeof source, "Hugging Face config.json (%s) imported by dtsim import hf from %s", arch, path);
    *out = json_pack("{s:s,s:O}", "source", source, "model", m);
    rc = 0;
out:
    free(ignored.s);
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

/* A whole number of obj's key in lo..hi into *out; absent or null: 0 (not given). A string ("3"), a
 * fraction or a number out of range is refused naming the key: read as 0 it was another run
 * ("stage": "3" imported as ZeRO-0). 0, or 2. */
static int ds_int(const char *path, json_t *obj, const char *prefix, const char *key, long long lo, long long hi,
                  long long *out)
{
    json_t *v = json_object_get(obj, key);
    double x = json_number_value(v);
    *out = 0;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_number(v) || x != floor(x) || x < (double)lo || x > (double)hi)
        return import_fail("deepspeed", "%s: %s%s must be a whole number in %lld..%lld", path, prefix, key, lo, hi);
    *out = (long long)x;
    return 0;
}

/* An object of the config (absent or null: NULL); any other type is refused naming it. 0, or 2. */
static int ds_object(const char *path, json_t *obj, const char *prefix, const char *key, json_t **out)
{
    json_t *v = json_object_get(obj, key);
    *out = json_is_object(v) ? v : NULL;
    if (v && !json_is_null(v) && !json_is_object(v))
        return import_fail("deepspeed", "%s: %s%s must be an object", path, prefix, key);
    return 0;
}

/* Whether section ("bf16", "fp16") says "enabled": true; "enabled" must be true or false. 0, or 2. */
static int ds_enabled(const char *path, json_t *c, const char *section, int *on)
{
    json_t *o, *v;
    *on = 0;
    if (ds_object(path, c, "", section, &o))
        return 2;
    v = json_object_get(o, "enabled");
    if (v && !json_is_null(v) && !json_is_boolean(v))
        return import_fail("deepspeed", "%s: %s.enabled must be true or false", path, section);
    *on = json_is_true(v);
    return 0;
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
    long long tb, mb, gas, stage;
    json_t *z;
    if (ds_int(path, c, "", "train_batch_size", 1, 1000000000000LL, &tb) ||
        ds_int(path, c, "", "train_micro_batch_size_per_gpu", 1, 100000000, &mb) ||
        ds_int(path, c, "", "gradient_accumulation_steps", 1, 100000000, &gas) ||
        ds_object(path, c, "", "zero_optimization", &z) ||
        (z && ds_int(path, z, "zero_optimization.", "stage", 0, 3, &stage)))
        goto out;
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
    if (!z)
        stage = 0;
    int bf16, fp16;
    if (ds_enabled(path, c, "bf16", &bf16) || ds_enabled(path, c, "fp16", &fp16))
        goto out;
    if (bf16 && fp16) { /* DeepSpeed refuses the two together (runtime/config.py) */
        import_fail("deepspeed", "%s: bf16.enabled and fp16.enabled together (DeepSpeed runs one of them)", path);
        goto out;
    }
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
                                        "stage3_param_persistence_threshold", "stage3_max_live_parameters",
                                        "stage3_max_reuse_distance", NULL};
    for (int i = 0; z && knobs[i]; i++) {
        json_t *v = json_object_get(z, knobs[i]);
        if (json_is_number(v))
            json_object_set_new(par, knobs[i], json_real(json_number_value(v)));
        else if (v && !json_is_null(v)) {
            import_fail("deepspeed", "%s: zero_optimization.%s must be a number", path, knobs[i]);
            json_decref(par);
            goto out;
        }
    }
    const char *offload[2] = {"offload_optimizer", "offload_param"}, *keys[2] = {"offload_optimizer", "offload_parameters"};
    for (int i = 0; z && i < 2; i++) {
        json_t *o, *dev_j;
        if (ds_object(path, z, "zero_optimization.", offload[i], &o)) {
            json_decref(par);
            goto out;
        }
        dev_j = json_object_get(o, "device");
        const char *dev = json_string_value(dev_j);
        /* DeepSpeed's OffloadDeviceEnum: none, cpu, nvme */
        if (dev_j && !json_is_null(dev_j) &&
            (!dev || (strcmp(dev, "none") && strcmp(dev, "cpu") && strcmp(dev, "nvme")))) {
            import_fail("deepspeed", "%s: zero_optimization.%s.device: none, cpu or nvme", path, offload[i]);
            json_decref(par);
            goto out;
        }
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
                                            "stage3_max_reuse_distance", "offload_optimizer", "offload_param", NULL};
    import_list ignored = {0};
    unused_keys(c, used_top, "", &ignored);
    if (z)
        unused_keys(z, used_zero, "zero_optimization.", &ignored);
    import_list_print("deepspeed", &ignored);
    *out = scen;
    rc = 0;
out:
    json_decref(c);
    return rc;
}
