/* A checkpoint's manifest: its seal and its checked reading; see checkpoint_manifest.h. */
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "checkpoint_manifest.h"
#include "json_seal.h"

/* The bounds dtrain's command line puts on what a manifest records (dtrain_main.c): a value
 * outside them was not written by dtrain. */
#define MAX_STEPS 100000000
#define MAX_GLOBAL_BATCH (1 << 24)
#define MAX_SEED 2147483647
#define MAX_LR 10.0

static uint32_t canonical_crc(json_t *man)
{
    return json_seal_crc32(man, "manifest_crc32", 0); /* written at jansson's default precision */
}

void manifest_seal(json_t *man)
{
    char crc[16];
    snprintf(crc, sizeof crc, "%08x", canonical_crc(man));
    json_object_set_new(man, "manifest_crc32", json_string(crc));
}

/* The file being read and where a refusal's reason goes. */
typedef struct {
    const char *path;
    char *why;
    size_t len;
} reader;

static int refuse(reader *r, const char *fmt, ...)
{
    int n = snprintf(r->why, r->len, "%s: ", r->path);
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < r->len)
        vsnprintf(r->why + n, r->len - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

/* Integer key k of o (named field in messages) in lo..hi. */
static int get_int(reader *r, json_t *o, const char *k, const char *field, json_int_t lo, json_int_t hi,
                   json_int_t *out)
{
    json_t *v = json_object_get(o, k);
    if (!v)
        return refuse(r, "%s is missing", field);
    if (!json_is_integer(v))
        return refuse(r, "%s is not an integer", field);
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi)
        return refuse(r, "%s is %lld, outside %lld..%lld", field, (long long)x, (long long)lo, (long long)hi);
    *out = x;
    return 0;
}

static int get_int32(reader *r, json_t *o, const char *k, const char *field, json_int_t lo, json_int_t hi, int *out)
{
    json_int_t x = 0;
    if (get_int(r, o, k, field, lo, hi, &x) != 0)
        return -1;
    *out = (int)x;
    return 0;
}

/* Number key k (integer or real) in lo..hi; whole: it must be a whole number. */
static int get_num(reader *r, json_t *o, const char *k, const char *field, double lo, double hi, int whole,
                   double *out)
{
    json_t *v = json_object_get(o, k);
    if (!v)
        return refuse(r, "%s is missing", field);
    if (!json_is_number(v))
        return refuse(r, "%s is not a number", field);
    double x = json_number_value(v);
    if (!(x >= lo && x <= hi) || (whole && x != floor(x)))
        return refuse(r, "%s is %.17g, outside %g..%g%s", field, x, lo, hi, whole ? " (whole numbers)" : "");
    *out = x;
    return 0;
}

static json_t *get_obj(reader *r, json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    if (!json_is_object(v))
        refuse(r, "%s is %s", k, v ? "not an object" : "missing");
    return json_is_object(v) ? v : NULL;
}

/* A shard's file name: plain (no folder part, not hidden), so it cannot reach another file. */
static int plain_name(const char *name)
{
    return name && name[0] && name[0] != '.' && !strchr(name, '/') && strlen(name) < 256;
}

static int is_crc_text(const char *s)
{
    if (!s || strlen(s) != 8)
        return 0;
    for (int i = 0; i < 8; i++)
        if (!strchr("0123456789abcdef", s[i]))
            return 0;
    return 1;
}

/* The layout: degrees within dtrain's limits, a world that is their product, a stage split of
 * pp positive counts adding up to the model's layers (or none: equal split). */
static int read_layout(reader *r, json_t *man, int num_layers, ckpt_layout *l, int *world)
{
    memset(l, 0, sizeof *l);
    json_t *lay = get_obj(r, man, "layout");
    if (!lay || get_int32(r, lay, "tp", "layout.tp", 1, 1024, &l->tp) ||
        get_int32(r, lay, "pp", "layout.pp", 1, 1024, &l->pp) ||
        get_int32(r, lay, "dp", "layout.dp", 1, 1 << 20, &l->dp) ||
        get_int32(r, lay, "vpp", "layout.vpp", 0, 64, &l->vpp) || /* 0 reads as 1 */
        get_int32(r, lay, "zero", "layout.zero", 0, 3, &l->zero))
        return -1;
    /* context and expert parallelism: absent in checkpoints made before them (CP 1, EP 1); EP is
     * carved from the DP x CP ranks */
    l->cp = 1;
    if (json_object_get(lay, "cp") && get_int32(r, lay, "cp", "layout.cp", 1, 1024, &l->cp))
        return -1;
    l->ep = 1;
    int replicas = l->dp * l->cp; /* at most 2^20 x 2^10 */
    if (json_object_get(lay, "ep") && get_int32(r, lay, "ep", "layout.ep", 1, replicas, &l->ep))
        return -1;
    int64_t ranks = (int64_t)l->tp * l->pp * l->dp * l->cp; /* 64 bits: each factor is untrusted */
    if (ranks > INT32_MAX)
        return refuse(r, "layout.tp x cp x pp x dp is %lld ranks, more than dtrain runs", (long long)ranks);
    if (get_int32(r, lay, "world", "layout.world", ranks, ranks, world))
        return -1;
    if ((int64_t)l->pp * (l->vpp > 0 ? l->vpp : 1) > num_layers)
        return refuse(r, "layout.pp x layout.vpp is %d x %d, more stages than the model's %d layers", l->pp, l->vpp,
                      num_layers);
    json_t *st = json_object_get(lay, "stage_layers");
    size_t n = json_array_size(st);
    if (!json_is_array(st) || (n != 0 && n != (size_t)l->pp))
        return refuse(r, "layout.stage_layers is not a list of layout.pp = %d layer counts", l->pp);
    int64_t sum = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(st, i);
        if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > num_layers)
            return refuse(r, "layout.stage_layers[%zu] is not a layer count in 1..%d", i, num_layers);
        l->stage_layers[i] = (int)json_integer_value(v);
        sum += l->stage_layers[i];
    }
    if (n && sum != num_layers)
        return refuse(r, "layout.stage_layers adds up to %lld layers, the model has %d", (long long)sum, num_layers);
    return 0;
}

/* One entry per rank, in rank order: its plain file name, a byte count a shard can have (the
 * header and three float arrays) and a CRC32 in hex. */
static int read_shards(reader *r, json_t *man, int world, json_t **out)
{
    json_t *shards = json_object_get(man, "shards");
    if (!json_is_array(shards) || json_array_size(shards) != (size_t)world)
        return refuse(r, "shards is not a list of layout.world = %d entries", world);
    for (int i = 0; i < world; i++) {
        json_t *e = json_array_get(shards, (size_t)i);
        char field[64];
        json_int_t x = 0;
        snprintf(field, sizeof field, "shards[%d].rank", i);
        if (!json_is_object(e))
            return refuse(r, "shards[%d] is not an object", i);
        if (get_int(r, e, "rank", field, i, i, &x))
            return -1;
        if (!plain_name(json_string_value(json_object_get(e, "file"))))
            return refuse(r, "shards[%d].file is no plain file name", i);
        snprintf(field, sizeof field, "shards[%d].bytes", i);
        if (get_int(r, e, "bytes", field, MANIFEST_SHARD_HEADER, INT64_MAX, &x))
            return -1;
        if ((x - MANIFEST_SHARD_HEADER) % (3 * sizeof(float)))
            return refuse(r, "shards[%d].bytes is %lld, not %d header bytes and three float arrays", i, (long long)x,
                          MANIFEST_SHARD_HEADER);
        if (!is_crc_text(json_string_value(json_object_get(e, "crc32"))))
            return refuse(r, "shards[%d].crc32 is not 8 hex digits", i);
    }
    *out = shards;
    return 0;
}

/* The training state: counters within the run so far, the command line's ranges, and a loss
 * scaler that only fp16 moves. */
static int read_state(reader *r, json_t *man, int folder_step, train_state *st)
{
    memset(st, 0, sizeof *st);
    json_int_t x = 0;
    if (get_int32(r, man, "step", "step", 1, MAX_STEPS, &st->step))
        return -1;
    if (st->step != folder_step)
        return refuse(r, "step is %d, the folder is step %d", st->step, folder_step);
    if (get_int32(r, man, "updates", "updates", 0, st->step, &st->updates)) /* skipped steps are not updates */
        return -1;
    if (get_int(r, man, "data_position", "data_position", 0, (json_int_t)st->step * MAX_GLOBAL_BATCH, &x))
        return -1;
    st->data_position = (uint64_t)x;
    if (get_int(r, man, "seed", "seed", 0, MAX_SEED, &x))
        return -1;
    st->seed = (uint64_t)x;
    if (get_int32(r, man, "precision", "precision", KPREC_FP32, KPREC_FP16, &st->precision))
        return -1;
    json_t *lr = get_obj(r, man, "lr_schedule");
    if (!lr || get_num(r, lr, "lr", "lr_schedule.lr", 0, MAX_LR, 0, &st->lr) ||
        get_num(r, lr, "warmup", "lr_schedule.warmup", 0, MAX_STEPS, 1, &st->warmup) ||
        get_num(r, lr, "steps", "lr_schedule.steps", 1, MAX_STEPS, 1, &st->total_steps))
        return -1;
    int fp16 = st->precision == KPREC_FP16;
    /* fp16's scale moves (from --loss-scale, at most 1e30); beyond float's range every scaled
     * gradient would overflow. The other precisions keep 1 and no count. */
    if (get_num(r, man, "loss_scale", "loss_scale", 1, fp16 ? FLT_MAX : 1, 0, &st->loss_scale) ||
        get_int32(r, man, "good_steps", "good_steps", 0, fp16 ? st->updates : 0, &st->good_steps))
        return -1;
    return 0;
}

int manifest_read(const char *path, int folder_step, ckpt_manifest *out, json_t **doc, char *why, size_t len)
{
    reader r = {path, why, len};
    *doc = NULL;
    if (access(path, F_OK) != 0) {
        snprintf(why, len, "no manifest (incomplete checkpoint)");
        return 1;
    }
    json_error_t je;
    json_t *man = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!json_is_object(man)) {
        if (man)
            refuse(&r, "not a JSON object");
        else
            refuse(&r, "not readable JSON (line %d: %s)", je.line, je.text);
        json_decref(man);
        return -1;
    }
    memset(out, 0, sizeof *out);
    int format = 0;
    json_t *model = get_obj(&r, man, "model");
    if (get_int32(&r, man, "format", "format", 2, MANIFEST_FORMAT, &format) || !model)
        goto bad;
    if (gpt_config_from_json(model, &out->model) != 0 || out->model.num_layers < 1) {
        refuse(&r, "model is not a model description");
        goto bad;
    }
    if (read_state(&r, man, folder_step, &out->st) ||
        read_layout(&r, man, out->model.num_layers, &out->layout, &out->world) ||
        read_shards(&r, man, out->world, &out->shards))
        goto bad;
    /* Last, so that a value out of range is named by its field above. Format 2 manifests were
     * written before the seal existed: they load without one. */
    const char *seal = json_string_value(json_object_get(man, "manifest_crc32"));
    if (!seal && (format >= 3 || json_object_get(man, "manifest_crc32"))) {
        refuse(&r, "manifest_crc32 is %s", json_object_get(man, "manifest_crc32") ? "not text"
                                                                                  : "missing (format 3 is sealed)");
        goto bad;
    }
    if (seal) {
        char want[16];
        snprintf(want, sizeof want, "%08x", canonical_crc(man));
        if (strcmp(seal, want)) {
            refuse(&r, "manifest_crc32 is %.16s, the content gives %s (edited or corrupt)", seal, want);
            goto bad;
        }
    }
    *doc = man;
    return 0;
bad:
    json_decref(man);
    return -1;
}
