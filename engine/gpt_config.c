/* The model's shape: named sizes and model files (gpt.h: gpt_config_from_name).
 *
 * A model file is dtrain's own short form {"num_layers", "hidden", "heads", "seq_len"[, "vocab"]},
 * or the `model` object of a dtsim scenario with Megatron-LM's names (hidden_size,
 * num_attention_heads, seq_length, vocab_size, ...), or a whole dtsim scenario (its "model" is
 * read), so one file describes the model to both programs. dtrain runs GPT-2 blocks and Llama's
 * choices (num_query_groups, ffn_hidden_size, swiglu, normalization, position_embedding_type,
 * untie_embeddings_and_output_weights) and experts (num_experts, moe_router_topk,
 * moe_expert_capacity_factor); a key that asks for something else (unfused attention) is refused
 * by name rather than trained as something it is not. Keys that only
 * change how dtsim costs the same model (the loss fusion) are accepted. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include "gpt.h"
#include "model_file.h"

#define MAX_LAYERS 1024
#define MAX_HIDDEN 65536

int gpt_config_validate(gpt_config *c, char *err, size_t errlen)
{
    if (c->num_layers < 1 || c->num_layers > MAX_LAYERS || c->hidden < 1 || c->hidden > MAX_HIDDEN || c->heads < 1 ||
        c->seq_len < 1 || c->seq_len > 1048576 || c->vocab < 2 || c->vocab > 10000000 || c->kv_groups < 0 ||
        c->ffn_hidden < 0 || c->ffn_hidden > 16 * MAX_HIDDEN) {
        snprintf(err, errlen, "model sizes out of range: layers %d (1..%d), hidden %d (1..%d), heads %d, seq_len %d, "
                              "vocab %d, query groups %d, ffn_hidden %d (0..%d)", c->num_layers, MAX_LAYERS, c->hidden,
                 MAX_HIDDEN, c->heads, c->seq_len, c->vocab, c->kv_groups, c->ffn_hidden, 16 * MAX_HIDDEN);
        return -1;
    }
    if (c->hidden % c->heads) {
        snprintf(err, errlen, "hidden %d is not a multiple of heads %d", c->hidden, c->heads);
        return -1;
    }
    if (c->kv_groups == 0)
        c->kv_groups = c->heads;
    if (c->ffn_hidden == 0)
        c->ffn_hidden = 4 * c->hidden;
    if (c->heads % c->kv_groups) {
        snprintf(err, errlen, "num_query_groups %d does not divide the %d heads", c->kv_groups, c->heads);
        return -1;
    }
    if (c->num_experts < 0 || c->num_experts > 4096 || c->moe_capacity_factor < 0 ||
        (c->num_experts > 0 && (c->moe_topk < 1 || c->moe_topk > c->num_experts)) ||
        (c->num_experts == 0 && (c->moe_topk != 0 || c->moe_capacity_factor != 0))) {
        snprintf(err, errlen, "mixture of experts: num_experts %d (0..4096), moe_router_topk %d (1..num_experts with "
                              "experts, else 0), moe_expert_capacity_factor %g (>= 0, only with experts)",
                 c->num_experts, c->moe_topk, c->moe_capacity_factor);
        return -1;
    }
    if (c->rope && (c->hidden / c->heads) % 2) {
        snprintf(err, errlen, "rotary embeddings turn pairs of a head's dimensions: head size %d is odd",
                 c->hidden / c->heads);
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
    {"seq_len", "seq_length", 1},    {"vocab", "vocab_size", 0},  {"num_query_groups", "num_query_groups", 0},
    {"ffn_hidden_size", "ffn_hidden_size", 0},
};
enum { N_SIZES = sizeof SIZES / sizeof SIZES[0] };

/* A string key with two values: which one (0 or 1), its default where absent, or -1 with err. */
static int two_way(const char *name, json_t *model, const char *key, const char *v0, const char *v1, int dflt,
                   char *err, size_t errlen)
{
    json_t *v = json_object_get(model, key);
    if (!v)
        return dflt;
    if (json_is_string(v) && !strcmp(json_string_value(v), v0))
        return 0;
    if (json_is_string(v) && !strcmp(json_string_value(v), v1))
        return 1;
    snprintf(err, errlen, "%s: model.%s: \"%s\" or \"%s\"", name, key, v0, v1);
    return -1;
}

static int read_bool(const char *name, json_t *model, const char *key, int *out, char *err, size_t errlen)
{
    json_t *v = json_object_get(model, key);
    if (v && !json_is_boolean(v)) {
        snprintf(err, errlen, "%s: model.%s: must be true or false", name, key);
        return -1;
    }
    *out = json_is_true(v);
    return 0;
}

/* The Llama choices, as dtsim reads the same keys (sim/config/config_scenario.c): a SwiGLU model
 * that does not name its norm or positions is taken as Llama's (RMSNorm, rope), any other as
 * GPT-2's (LayerNorm, learned positions). What the engine cannot run is refused by name. */
static int read_choices(const char *name, json_t *model, gpt_config *cfg, char *err, size_t errlen)
{
    json_t *v;
    if (read_bool(name, model, "swiglu", &cfg->swiglu, err, errlen) ||
        read_bool(name, model, "untie_embeddings_and_output_weights", &cfg->untied, err, errlen))
        return -1;
    if ((cfg->rmsnorm = two_way(name, model, "normalization", "LayerNorm", "RMSNorm", cfg->swiglu, err, errlen)) < 0 ||
        (cfg->rope = two_way(name, model, "position_embedding_type", "learned_absolute", "rope", cfg->swiglu, err,
                             errlen)) < 0)
        return -1;
    /* mixture of experts: the keys dtsim reads, in its ranges (sim/config/config_scenario.c) */
    static const char *const moe_ints[] = {"num_experts", "moe_router_topk"};
    int *moe_dst[] = {&cfg->num_experts, &cfg->moe_topk};
    for (int i = 0; i < 2; i++)
        if ((v = json_object_get(model, moe_ints[i]))) {
            if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 4096) {
                snprintf(err, errlen, "%s: model.%s: an integer in 0..4096", name, moe_ints[i]);
                return -1;
            }
            *moe_dst[i] = (int)json_integer_value(v);
        }
    if ((v = json_object_get(model, "moe_expert_capacity_factor"))) {
        if (!json_is_number(v) || json_number_value(v) < 0 || json_number_value(v) > 1e3) {
            snprintf(err, errlen, "%s: model.moe_expert_capacity_factor: a number in 0..1000 (0: dropless)", name);
            return -1;
        }
        cfg->moe_capacity_factor = json_number_value(v);
    }
    /* Megatron-Core's group-limited routing changes which experts a token gets: dtrain's router
     * takes the top-k of all of them */
    if (json_object_get(model, "moe_router_num_groups") || json_object_get(model, "moe_router_group_topk")) {
        snprintf(err, errlen, "%s: model.moe_router_num_groups / moe_router_group_topk: dtrain's router picks its "
                              "top-k among all experts; group-limited routing runs in dtsim only", name);
        return -1;
    }
    /* dtsim's kv_channels (Megatron's --kv-channels): dtrain's heads are hidden / heads wide */
    if ((v = json_object_get(model, "kv_channels")) &&
        (!json_is_integer(v) || cfg->heads < 1 || json_integer_value(v) * cfg->heads != cfg->hidden)) {
        snprintf(err, errlen, "%s: model.kv_channels: dtrain's attention heads are hidden / heads = %d / %d wide; "
                              "a model whose heads are wider or narrower than that runs in dtsim only",
                 name, cfg->hidden, cfg->heads);
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
    char why_file[512];
    if (description_file_ok(name, why_file, sizeof why_file) != 0) {
        snprintf(err, errlen, "--model %s: not tiny, tiny-llama, small, or a model file (%s)", name, why_file);
        return -1;
    }
    json_t *root = json_load_file(name, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        snprintf(err, errlen, "--model %s: not tiny, tiny-llama, small, or a readable JSON file (%s at line %d)", name, je.text,
                 je.line);
        return -1;
    }
    /* a scenario (its "model": an object, a model file, or {"from": FILE, ...}), a models/ file
     * ({"model": {...}, "source"}), or a bare model object, resolved as dtsim resolves them */
    json_t *given = json_object_get(root, "model");
    int is_scenario = given != NULL;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", name);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = 0;
    else
        snprintf(dir, sizeof dir, ".");
    char why[512];
    json_t *model = model_resolve(given ? given : root, dir, why, sizeof why);
    if (!model) {
        snprintf(err, errlen, "%s: %s", name, why);
        json_decref(root);
        return -1;
    }
    /* the keys a model object may hold: the sizes (either name) and dtsim's other model keys */
    static const char *const others[] = {"swiglu", "num_experts", "normalization", "position_embedding_type",
                                         "moe_router_topk", "attention", "untie_embeddings_and_output_weights",
                                         "cross_entropy_loss_fusion", "cross_entropy_fusion_impl",
                                         "moe_expert_capacity_factor", "moe_pad_expert_input_to_capacity",
                                         "moe_load_imbalance", "kv_channels", "moe_router_num_groups",
                                         "moe_router_group_topk"};
    int *dst[N_SIZES] = {&cfg->num_layers, &cfg->hidden, &cfg->heads, &cfg->seq_len, &cfg->vocab, &cfg->kv_groups,
                         &cfg->ffn_hidden};
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
                                  "num_attention_heads, seq_len or seq_length, vocab or vocab_size, "
                                  "num_query_groups, ffn_hidden_size, or dtsim's other model keys)", name, is_scenario ? "model." : "", key);
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
        if (!json_is_integer(val) || json_integer_value(val) > 100000000 || json_integer_value(val) < 1) {
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
        rc = read_choices(name, model, cfg, err, errlen);
    json_decref(model);
    json_decref(root);
    return rc;
}

int gpt_config_from_name(const char *name, int tokenizer_vocab, gpt_config *cfg, char *err, size_t errlen)
{
    if (!strcmp(name, "tiny")) {
        *cfg = (gpt_config){.num_layers = 4, .hidden = 128, .heads = 4, .seq_len = 64, .vocab = tokenizer_vocab};
    } else if (!strcmp(name, "tiny-llama")) {
        /* tiny's size with Llama's blocks: 2 query groups, SwiGLU of 352 (8/3 x 128 rounded up to a
         * multiple of 32, as Llama sizes its MLP), RMSNorm, rope, an untied head */
        *cfg = (gpt_config){.num_layers = 4, .hidden = 128, .heads = 4, .seq_len = 64, .vocab = tokenizer_vocab,
                            .kv_groups = 2, .ffn_hidden = 352, .swiglu = 1, .rmsnorm = 1, .rope = 1, .untied = 1};
    } else if (!strcmp(name, "small")) {
        /* GPT-2 124M; its 50257-token vocabulary padded to 50304 (a multiple of 128, as
         * llm.c does). The byte tokenizer uses ids 0..255 of it. */
        *cfg = (gpt_config){.num_layers = 12, .hidden = 768, .heads = 12, .seq_len = 1024, .vocab = 50304};
    } else {
        memset(cfg, 0, sizeof *cfg);
        if (read_model_file(name, tokenizer_vocab, cfg, err, errlen) != 0)
            return -1;
    }
    if (cfg->vocab < tokenizer_vocab) {
        snprintf(err, errlen, "model vocab %d is smaller than the tokenizer's %d", cfg->vocab, tokenizer_vocab);
        return -1;
    }
    char why[512];
    if (gpt_config_validate(cfg, why, sizeof why) != 0) { /* named by where the sizes came from */
        snprintf(err, errlen, "%s: %s", name, why);
        return -1;
    }
    return 0;
}

int gpt_config_to_json(const gpt_config *c, void *json_object)
{
    json_t *o = json_object;
    return json_object_set_new(o, "num_layers", json_integer(c->num_layers)) ||
           json_object_set_new(o, "hidden", json_integer(c->hidden)) ||
           json_object_set_new(o, "heads", json_integer(c->heads)) ||
           json_object_set_new(o, "seq_len", json_integer(c->seq_len)) ||
           json_object_set_new(o, "vocab", json_integer(c->vocab)) ||
           json_object_set_new(o, "num_query_groups", json_integer(c->kv_groups)) ||
           json_object_set_new(o, "ffn_hidden_size", json_integer(c->ffn_hidden)) ||
           json_object_set_new(o, "swiglu", json_boolean(c->swiglu)) ||
           json_object_set_new(o, "normalization", json_string(c->rmsnorm ? "RMSNorm" : "LayerNorm")) ||
           json_object_set_new(o, "position_embedding_type", json_string(c->rope ? "rope" : "learned_absolute")) ||
           json_object_set_new(o, "untie_embeddings_and_output_weights", json_boolean(c->untied)) ||
           json_object_set_new(o, "num_experts", json_integer(c->num_experts)) ||
           json_object_set_new(o, "moe_router_topk", json_integer(c->moe_topk)) ||
           json_object_set_new(o, "moe_expert_capacity_factor", json_real(c->moe_capacity_factor))
               ? -1
               : 0;
}

int gpt_config_from_json(const void *json_object, gpt_config *c)
{
    json_t *o = (json_t *)json_object, *v;
    memset(c, 0, sizeof *c);
    const char *ints[] = {"num_layers", "hidden", "heads", "seq_len", "vocab", "num_query_groups", "ffn_hidden_size",
                          "num_experts", "moe_router_topk"};
    int *dst[] = {&c->num_layers, &c->hidden, &c->heads, &c->seq_len, &c->vocab, &c->kv_groups, &c->ffn_hidden,
                  &c->num_experts, &c->moe_topk};
    for (int i = 0; i < 9; i++) {
        v = json_object_get(o, ints[i]);
        if (!v && i >= 5)
            continue; /* written before the Llama choices: GPT-2's */
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 100000000)
            return -1;
        *dst[i] = (int)json_integer_value(v);
    }
    const char *bools[] = {"swiglu", "untie_embeddings_and_output_weights"};
    int *bdst[] = {&c->swiglu, &c->untied};
    for (int i = 0; i < 2; i++) {
        v = json_object_get(o, bools[i]);
        if (v && !json_is_boolean(v))
            return -1;
        *bdst[i] = json_is_true(v);
    }
    v = json_object_get(o, "moe_expert_capacity_factor");
    if (v && !json_is_number(v))
        return -1;
    c->moe_capacity_factor = v ? json_number_value(v) : 0;
    char err[256];
    if ((c->rmsnorm = two_way("", o, "normalization", "LayerNorm", "RMSNorm", 0, err, sizeof err)) < 0 ||
        (c->rope = two_way("", o, "position_embedding_type", "learned_absolute", "rope", 0, err, sizeof err)) < 0)
        return -1;
    return 0;
}

int gpt_config_same(const gpt_config *a, const gpt_config *b)
{
    gpt_config x = *a, y = *b;
    x.kv_groups = x.kv_groups ? x.kv_groups : x.heads;
    y.kv_groups = y.kv_groups ? y.kv_groups : y.heads;
    x.ffn_hidden = x.ffn_hidden ? x.ffn_hidden : 4 * x.hidden;
    y.ffn_hidden = y.ffn_hidden ? y.ffn_hidden : 4 * y.hidden;
    return x.num_layers == y.num_layers && x.hidden == y.hidden && x.heads == y.heads && x.seq_len == y.seq_len &&
           x.vocab == y.vocab && x.kv_groups == y.kv_groups && x.ffn_hidden == y.ffn_hidden && x.swiglu == y.swiglu &&
           x.rmsnorm == y.rmsnorm && x.rope == y.rope && x.untied == y.untied && x.num_experts == y.num_experts &&
           x.moe_topk == y.moe_topk && x.moe_capacity_factor == y.moe_capacity_factor;
}

void gpt_config_describe(const gpt_config *c, char *out, size_t len)
{
    int n = snprintf(out, len, "layers %d, hidden %d, heads %d, seq %d, vocab %d", c->num_layers, c->hidden, c->heads,
                     c->seq_len, c->vocab);
    if (n >= 0 && (size_t)n < len && (c->kv_groups != c->heads || c->ffn_hidden != 4 * c->hidden || c->swiglu ||
                                     c->rmsnorm || c->rope || c->untied))
        n += snprintf(out + n, len - (size_t)n, ", query groups %d, ffn %d%s%s%s%s", c->kv_groups, c->ffn_hidden,
                      c->swiglu ? ", swiglu" : "", c->rmsnorm ? ", RMSNorm" : "", c->rope ? ", rope" : "",
                      c->untied ? ", untied head" : "");
    if (n >= 0 && (size_t)n < len && c->num_experts > 0)
        snprintf(out + n, len - (size_t)n, ", %d experts, top-%d, capacity factor %g%s", c->num_experts, c->moe_topk,
                 c->moe_capacity_factor, c->moe_capacity_factor > 0 ? "" : " (dropless)");
}
