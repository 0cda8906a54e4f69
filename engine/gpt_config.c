/* The model's shape: named sizes and model files (gpt.h: gpt_config_from_name).
 *
 * A model file is dtrain's own short form {"num_layers", "hidden", "heads", "seq_len"[, "vocab"]},
 * or the `model` object of a dtsim scenario with Megatron-LM's names (hidden_size,
 * num_attention_heads, seq_length, vocab_size, ...), or a whole dtsim scenario (its "model" is
 * read), so one file describes the model to both programs. dtrain runs GPT-2 blocks: a scenario
 * key that asks for something else (SwiGLU, grouped-query attention, an untied head, experts,
 * unfused attention, an MLP other than 4 x hidden) is refused by name rather than trained as
 * something it is not. Keys that only change how dtsim costs the same model (the loss fusion)
 * are accepted. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include "gpt.h"

#define MAX_LAYERS 1024
#define MAX_HIDDEN 65536

int gpt_config_validate(const gpt_config *c, char *err, size_t errlen)
{
    if (c->num_layers < 1 || c->num_layers > MAX_LAYERS || c->hidden < 1 || c->hidden > MAX_HIDDEN || c->heads < 1 ||
        c->seq_len < 1 || c->seq_len > 1048576 || c->vocab < 2 || c->vocab > 10000000) {
        snprintf(err, errlen, "model sizes out of range: layers %d (1..%d), hidden %d (1..%d), heads %d, seq_len %d, "
                              "vocab %d", c->num_layers, MAX_LAYERS, c->hidden, MAX_HIDDEN, c->heads, c->seq_len, c->vocab);
        return -1;
    }
    if (c->hidden % c->heads) {
        snprintf(err, errlen, "hidden %d is not a multiple of heads %d", c->hidden, c->heads);
        return -1;
    }
    return 0;
}

/* A size: dtrain's short name or dtsim's (Megatron's) long one, not both. */
typedef struct {
    const char *short_name, *long_name;
    int required;
} size_key;

static const size_key SIZES[] = {
    {"num_layers", "num_layers", 1}, {"hidden", "hidden_size", 1}, {"heads", "num_attention_heads", 1},
    {"seq_len", "seq_length", 1},    {"vocab", "vocab_size", 0},
};
enum { N_SIZES = sizeof SIZES / sizeof SIZES[0] };

/* dtsim model keys that dtrain reads as a check: the value GPT-2 blocks have, or a refusal. */
static int check_gpt2(const char *name, json_t *model, int hidden, int heads, char *err, size_t errlen)
{
    json_t *v;
    if ((v = json_object_get(model, "ffn_hidden_size")) && json_integer_value(v) != 4LL * hidden) {
        snprintf(err, errlen, "%s: model.ffn_hidden_size %lld: dtrain's MLP is 4 x hidden_size = %d", name,
                 (long long)json_integer_value(v), 4 * hidden);
        return -1;
    }
    if ((v = json_object_get(model, "num_query_groups")) && json_integer_value(v) != heads) {
        snprintf(err, errlen, "%s: model.num_query_groups %lld: dtrain runs multi-head attention (groups = heads = %d); "
                              "grouped-query attention is not in the engine yet", name, (long long)json_integer_value(v), heads);
        return -1;
    }
    static const char *const not_yet[] = {"swiglu", "untie_embeddings_and_output_weights"};
    for (size_t i = 0; i < sizeof not_yet / sizeof not_yet[0]; i++)
        if (json_is_true(json_object_get(model, not_yet[i]))) {
            snprintf(err, errlen, "%s: model.%s true: dtrain runs GPT-2 blocks (GELU MLP, LM head tied to the "
                                  "embedding); not in the engine yet", name, not_yet[i]);
            return -1;
        }
    if ((v = json_object_get(model, "num_experts")) && json_integer_value(v) > 0) {
        snprintf(err, errlen, "%s: model.num_experts %lld: mixture-of-experts is not in the engine yet", name,
                 (long long)json_integer_value(v));
        return -1;
    }
    if ((v = json_object_get(model, "attention")) && (!json_is_string(v) || strcmp(json_string_value(v), "flash"))) {
        snprintf(err, errlen, "%s: model.attention: dtrain's attention is one fused kernel that keeps no T x T "
                              "matrix: \"flash\", not %s", name, json_is_string(v) ? json_string_value(v) : "a non-string");
        return -1;
    }
    return 0;
}

static int read_model_file(const char *name, int tokenizer_vocab, gpt_config *cfg, char *err, size_t errlen)
{
    json_error_t je;
    json_t *root = json_load_file(name, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        snprintf(err, errlen, "--model %s: not tiny, small, or a readable JSON file (%s at line %d)", name, je.text,
                 je.line);
        return -1;
    }
    json_t *model = json_is_object(json_object_get(root, "model")) ? json_object_get(root, "model") : root;
    int is_scenario = model != root;
    /* the keys a model object may hold: the sizes (either name) and dtsim's other model keys */
    static const char *const others[] = {"ffn_hidden_size", "num_query_groups", "swiglu", "num_experts",
                                         "moe_router_topk", "attention", "untie_embeddings_and_output_weights",
                                         "cross_entropy_loss_fusion", "cross_entropy_fusion_impl",
                                         "moe_expert_capacity_factor", "moe_pad_expert_input_to_capacity",
                                         "moe_load_imbalance"};
    int *dst[N_SIZES] = {&cfg->num_layers, &cfg->hidden, &cfg->heads, &cfg->seq_len, &cfg->vocab};
    int got[N_SIZES] = {0};
    cfg->vocab = tokenizer_vocab;
    const char *key;
    json_t *val;
    int rc = 0;
    json_object_foreach(model, key, val) {
        int size = -1, other = 0;
        for (int i = 0; i < N_SIZES; i++)
            if (!strcmp(key, SIZES[i].short_name) || !strcmp(key, SIZES[i].long_name))
                size = i;
        for (size_t i = 0; i < sizeof others / sizeof others[0]; i++)
            other |= !strcmp(key, others[i]);
        if (size < 0 && !other) {
            snprintf(err, errlen, "%s: %skey '%s': unknown (expected num_layers, hidden or hidden_size, heads or "
                                  "num_attention_heads, seq_len or seq_length, vocab or vocab_size, or dtsim's "
                                  "other model keys)", name, is_scenario ? "model." : "", key);
            rc = -1;
            break;
        }
        if (size < 0)
            continue;
        if (got[size]) {
            snprintf(err, errlen, "%s: '%s' and '%s' both give the %s", name, SIZES[size].short_name,
                     SIZES[size].long_name, SIZES[size].long_name);
            rc = -1;
            break;
        }
        if (!json_is_integer(val) || json_integer_value(val) > 100000000 || json_integer_value(val) < 0) {
            snprintf(err, errlen, "%s: key '%s': must be an integer", name, key);
            rc = -1;
            break;
        }
        got[size] = 1;
        *dst[size] = (int)json_integer_value(val);
    }
    for (int i = 0; rc == 0 && i < N_SIZES; i++)
        if (SIZES[i].required && !got[i]) {
            snprintf(err, errlen, "%s: '%s' (or '%s') is required", name, SIZES[i].short_name, SIZES[i].long_name);
            rc = -1;
        }
    if (rc == 0)
        rc = check_gpt2(name, model, cfg->hidden, cfg->heads, err, errlen);
    json_decref(root);
    return rc;
}

int gpt_config_from_name(const char *name, int tokenizer_vocab, gpt_config *cfg, char *err, size_t errlen)
{
    if (!strcmp(name, "tiny")) {
        *cfg = (gpt_config){4, 128, 4, 64, tokenizer_vocab};
    } else if (!strcmp(name, "small")) {
        /* GPT-2 124M; its 50257-token vocabulary padded to 50304 (a multiple of 128, as
         * llm.c does). The byte tokenizer uses ids 0..255 of it. */
        *cfg = (gpt_config){12, 768, 12, 1024, 50304};
    } else {
        memset(cfg, 0, sizeof *cfg);
        if (read_model_file(name, tokenizer_vocab, cfg, err, errlen) != 0)
            return -1;
    }
    if (cfg->vocab < tokenizer_vocab) {
        snprintf(err, errlen, "model vocab %d is smaller than the tokenizer's %d", cfg->vocab, tokenizer_vocab);
        return -1;
    }
    return gpt_config_validate(cfg, err, errlen);
}
