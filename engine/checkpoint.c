/* Checkpoints; see checkpoint.h. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include "atomic_file.h"
#include "checkpoint.h"
#include "data_parallel.h"
#include "schedule.h"
#include "wall_clock.h"

#define SHARD_MAGIC "DTCK"
#define FORMAT_VERSION 2
#define SHARD_HEADER_BYTES 64

/* Writes the parts to path whole and on disk before it replaces anything (atomic_file.h), with
 * their CRC32. */
static int write_file_atomic(const char *path, const void *const *parts, const size_t *sizes, int n, uint32_t *crc,
                             char *err, size_t errlen)
{
    atomic_file a;
    if (atomic_file_open(&a, path, err, errlen) != 0)
        return -1;
    uLong c = crc32(0L, Z_NULL, 0);
    for (int i = 0; i < n; i++) {
        const unsigned char *p = parts[i];
        size_t left = sizes[i];
        while (left > 0) {
            size_t chunk = left > (1u << 30) ? (1u << 30) : left; /* crc32 takes a uInt length */
            if (fwrite(p, 1, chunk, a.f) != chunk) {
                snprintf(err, errlen, "%s: write failed: %s", path, strerror(errno));
                atomic_file_abort(&a);
                return -1;
            }
            c = crc32(c, p, (uInt)chunk);
            p += chunk;
            left -= chunk;
        }
    }
    if (atomic_file_commit(&a, 1, err, errlen) != 0)
        return -1;
    if (crc)
        *crc = (uint32_t)c;
    return 0;
}

static void fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

struct checkpoint_job {
    char dir[4096];
    gpt_config cfg;
    ckpt_layout layout;
    int rank, world;
    size_t n;
    float *host;         /* params, m, v: 3n floats */
    train_state st;
    pthread_t thread;
    int threaded;
    int rc;
    char err[9000];
    double write_s;
    uint32_t crc;
    uint64_t bytes;
    _Atomic int done;    /* the shard write has ended (set by the writer) */
};

static void step_dir(char *out, size_t len, const char *dir, int step)
{
    snprintf(out, len, "%s/step-%08d", dir, step);
}

/* This rank's shard: header, then params, m, v of its layout. */
static int write_shard(checkpoint_job *j)
{
    char sdir[4200], path[4300];
    step_dir(sdir, sizeof sdir, j->dir, j->st.step);
    if ((mkdir(j->dir, 0755) != 0 && errno != EEXIST) || (mkdir(sdir, 0755) != 0 && errno != EEXIST)) {
        snprintf(j->err, sizeof j->err, "%s: cannot create: %s", sdir, strerror(errno));
        return -1;
    }
    unsigned char header[SHARD_HEADER_BYTES] = {0};
    memcpy(header, SHARD_MAGIC, 4);
    uint32_t version = FORMAT_VERSION, rank = (uint32_t)j->rank, world = (uint32_t)j->world;
    uint64_t n = j->n;
    memcpy(header + 4, &version, 4);
    memcpy(header + 8, &rank, 4);
    memcpy(header + 12, &world, 4);
    memcpy(header + 16, &n, 8);
    memcpy(header + 24, &j->st.loss_scale, 8);
    memcpy(header + 32, &j->st.good_steps, 4);
    const void *parts[2] = {header, j->host};
    size_t sizes[2] = {sizeof header, 3 * j->n * sizeof(float)};
    snprintf(path, sizeof path, "%s/shard-%05d.bin", sdir, j->rank);
    j->bytes = sizes[0] + sizes[1];
    return write_file_atomic(path, parts, sizes, 2, &j->crc, j->err, sizeof j->err);
}

static void *writer(void *arg)
{
    checkpoint_job *j = arg;
    double t0 = wall_clock_s();
    j->rc = write_shard(j);
    j->write_s = wall_clock_s() - t0;
    atomic_store(&j->done, 1);
    return NULL;
}

int checkpoint_shard_written(checkpoint_job *j)
{
    return !j || atomic_load(&j->done);
}

checkpoint_job *checkpoint_save_async(const char *dir, const gpt_model *m, const train_state *st, const comm_ctx *c,
                                      const ckpt_layout *layout, int background)
{
    checkpoint_job *j = calloc(1, sizeof *j);
    snprintf(j->dir, sizeof j->dir, "%s", dir);
    j->cfg = m->cfg;
    j->layout = *layout;
    j->rank = c->world_rank;
    j->world = c->world_size;
    j->n = m->num_params;
    j->st = *st;
    /* The file holds every local parameter and its moments; a ZeRO rank's moments (ZeRO-3: and
     * parameters) are zero outside its shard. */
    j->host = calloc(j->n ? 3 * j->n : 1, sizeof(float));
    m->k->copy_to_host(j->host + m->param_range.lo, m->params, m->param_range.n * sizeof(float));
    m->k->copy_to_host(j->host + j->n + m->moments_lo, m->m, m->moments_n * sizeof(float));
    m->k->copy_to_host(j->host + 2 * j->n + m->moments_lo, m->v, m->moments_n * sizeof(float));
    if (background && pthread_create(&j->thread, NULL, writer, j) == 0) {
        j->threaded = 1;
    } else {
        writer(j);
    }
    return j;
}

/* One rank's report to rank 0 after writing its shard. */
typedef struct {
    int32_t ok;
    uint32_t crc;
    uint64_t bytes;
} shard_report;

static int write_manifest(const checkpoint_job *j, const shard_report *reps, char *err, size_t errlen)
{
    char sdir[4200], path[4300];
    step_dir(sdir, sizeof sdir, j->dir, j->st.step);
    json_t *shards = json_array();
    for (int r = 0; r < j->world; r++) {
        char file[32], crc[16];
        snprintf(file, sizeof file, "shard-%05d.bin", r);
        snprintf(crc, sizeof crc, "%08x", reps[r].crc);
        json_array_append_new(shards, json_pack("{s:i,s:s,s:I,s:s}", "rank", r, "file", file, "bytes",
                                                (json_int_t)reps[r].bytes, "crc32", crc));
    }
    json_t *stages = json_array();
    for (int i = 0; i < j->layout.pp && j->layout.stage_layers[0] > 0; i++)
        json_array_append_new(stages, json_integer(j->layout.stage_layers[i]));
    json_t *model = json_object();
    gpt_config_to_json(&j->cfg, model);
    json_t *man = json_pack(
        "{s:i,s:i,s:i,s:I,s:I,s:o,s:{s:i,s:i,s:i,s:i,s:i,s:i,s:o},s:{s:f,s:f,s:f},s:i,s:f,s:i,"
        "s:o}",
        "format", FORMAT_VERSION, "step", j->st.step, "updates", j->st.updates, "data_position",
        (json_int_t)j->st.data_position, "seed", (json_int_t)j->st.seed, "model", model, "layout",
        "tp", j->layout.tp, "pp", j->layout.pp, "dp", j->layout.dp, "vpp", j->layout.vpp, "zero", j->layout.zero,
        "world", j->world, "stage_layers", stages, "lr_schedule", "lr", j->st.lr, "warmup", j->st.warmup, "steps",
        j->st.total_steps, "precision", j->st.precision, "loss_scale", j->st.loss_scale, "good_steps",
        j->st.good_steps, "shards", shards);
    char *text = json_dumps(man, JSON_INDENT(2));
    json_decref(man);
    const void *mparts[1] = {text};
    size_t msizes[1] = {strlen(text)};
    snprintf(path, sizeof path, "%s/manifest.json", sdir);
    fsync_dir(sdir);
    int rc = write_file_atomic(path, mparts, msizes, 1, NULL, err, errlen); /* last: completes it */
    free(text);
    fsync_dir(sdir);
    fsync_dir(j->dir);
    return rc;
}

int checkpoint_finish(checkpoint_job *j, comm_ctx *c, double *write_s, char *err, size_t errlen)
{
    if (!j)
        return 0;
    if (j->threaded)
        pthread_join(j->thread, NULL);
    shard_report mine = {j->rc == 0, j->crc, j->bytes};
    shard_report *reps = calloc((size_t)c->world_size, sizeof *reps);
    comm_allgather_bytes(c->world, &mine, sizeof mine, reps);
    int all_ok = 1, bad = -1;
    for (int r = 0; r < c->world_size; r++)
        if (!reps[r].ok && bad < 0) {
            all_ok = 0;
            bad = r;
        }
    int rc = 0;
    if (!all_ok) {
        if (j->rc)
            snprintf(err, errlen, "%s", j->err);
        else
            snprintf(err, errlen, "rank %d could not write its shard of step %d", bad, j->st.step);
        rc = -1;
    } else if (c->world_rank == 0) {
        rc = write_manifest(j, reps, err, errlen);
    }
    /* every rank learns whether the manifest landed */
    if (comm_allreduce_max_int(c->world, rc != 0) && rc == 0) {
        snprintf(err, errlen, "rank 0 could not write the manifest of step %d", j->st.step);
        rc = -1;
    }
    if (write_s)
        *write_s = j->write_s;
    free(reps);
    free(j->host);
    free(j);
    return rc;
}

/* ---- loading ------------------------------------------------------------------------------ */
static int cmp_desc(const void *a, const void *b)
{
    return *(const int *)b - *(const int *)a;
}

/* A checkpoint is complete once its manifest exists (written last). */
static int has_manifest(const char *dir, int step)
{
    char sdir[4200], man[4300];
    step_dir(sdir, sizeof sdir, dir, step);
    snprintf(man, sizeof man, "%s/manifest.json", sdir);
    return access(man, F_OK) == 0;
}

int checkpoint_list_steps(const char *dir, int complete_only, int **out)
{
    DIR *d = opendir(dir);
    int n = 0, cap = 16;
    *out = malloc((size_t)cap * sizeof(int));
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        int step;
        char tail;
        if (sscanf(e->d_name, "step-%d%c", &step, &tail) == 1 && (!complete_only || has_manifest(dir, step))) {
            if (n == cap)
                *out = realloc(*out, (size_t)(cap *= 2) * sizeof(int));
            (*out)[n++] = step;
        }
    }
    closedir(d);
    qsort(*out, (size_t)n, sizeof(int), cmp_desc);
    return n;
}

/* An integer key of o, or -1 when it is missing, not an integer or outside int's range: every
 * count a manifest holds is >= 0, so -1 is refused wherever it is checked. */
static int jint(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    if (!json_is_integer(v))
        return -1;
    json_int_t x = json_integer_value(v);
    return x < 0 || x > INT32_MAX ? -1 : (int)x;
}

/* jint, with 0 for a missing or bad number. */
static int jcount(json_t *o, const char *k)
{
    int v = jint(o, k);
    return v < 0 ? 0 : v;
}

/* The layout a manifest records; -1 on a missing or bad number, which the caller refuses. */
static void manifest_layout(json_t *man, ckpt_layout *l)
{
    memset(l, 0, sizeof *l);
    json_t *lay = json_object_get(man, "layout");
    l->tp = jint(lay, "tp");
    l->pp = jint(lay, "pp");
    l->dp = jint(lay, "dp");
    l->vpp = jint(lay, "vpp");
    l->zero = jint(lay, "zero");
    json_t *st = json_object_get(lay, "stage_layers");
    for (size_t i = 0; i < json_array_size(st) && i < CKPT_MAX_STAGES; i++) {
        json_t *v = json_array_get(st, i);
        json_int_t x = json_is_integer(v) ? json_integer_value(v) : -1;
        l->stage_layers[i] = x < 0 || x > INT32_MAX ? -1 : (int)x;
    }
}

/* Whether a recorded layout can be read at all: every degree >= 1, a rank count that fits an int
 * and equals the shard list's length (products in 64 bits: a manifest's numbers are untrusted),
 * no more virtual stages than the model has layers (each holds at least one), ZeRO 0-3, and
 * stage layer counts that are not negative. */
static int layout_readable(const ckpt_layout *l, size_t shards, int num_layers)
{
    if (l->tp < 1 || l->pp < 1 || l->dp < 1 || l->vpp < 0 || l->zero < 0 || l->zero > 3 ||
        (int64_t)l->pp * (l->vpp > 0 ? l->vpp : 1) > num_layers)
        return 0;
    int64_t ranks = (int64_t)l->tp * l->pp;
    if (ranks > INT32_MAX || (ranks *= l->dp) > INT32_MAX || (uint64_t)ranks != shards)
        return 0;
    for (int i = 0; i < l->pp && i < CKPT_MAX_STAGES; i++)
        if (l->stage_layers[i] < 0)
            return 0;
    return 1;
}

/* A shard's file name as the manifest gives it: a plain name in the step folder, never a path
 * that could reach another file. */
static int shard_name_ok(const char *name)
{
    return name && name[0] && name[0] != '.' && !strchr(name, '/') && strlen(name) < 256;
}

static int same_layout(const ckpt_layout *a, const ckpt_layout *b)
{
    if (a->tp != b->tp || a->pp != b->pp || a->dp != b->dp || a->vpp != b->vpp || a->zero != b->zero)
        return 0;
    for (int i = 0; i < a->pp && i < CKPT_MAX_STAGES; i++)
        if (a->stage_layers[i] != b->stage_layers[i])
            return 0;
    return 1;
}

/* Reads shard `file` of sdir and checks it against the manifest's size and CRC; returns the
 * malloc'd bytes, or NULL with the reason. */
static unsigned char *read_shard(const char *sdir, json_t *entry, size_t *n_floats, char *why, size_t len)
{
    char path[4300];
    const char *name = json_string_value(json_object_get(entry, "file"));
    json_t *bytes = json_object_get(entry, "bytes");
    if (!shard_name_ok(name) || !json_is_integer(bytes) || json_integer_value(bytes) < SHARD_HEADER_BYTES) {
        snprintf(why, len, "manifest's shard entry has no plain file name or no byte count");
        return NULL;
    }
    snprintf(path, sizeof path, "%s/%s", sdir, name);
    size_t expect = (size_t)json_integer_value(bytes);
    const char *want_crc = json_string_value(json_object_get(entry, "crc32"));
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(why, len, "shard %s is missing", path);
        return NULL;
    }
    /* The size on disk must match before anything is allocated: a manifest's byte count is
     * untrusted and must not make this rank allocate what the file does not hold. */
    struct stat sb = {0};
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode) || (uint64_t)sb.st_size != (uint64_t)expect) {
        snprintf(why, len, "shard %s has %lld bytes, the manifest says %zu (truncated or overwritten)", path,
                 (long long)sb.st_size, expect);
        fclose(f);
        return NULL;
    }
    unsigned char *buf = malloc(expect + 1);
    if (!buf) {
        snprintf(why, len, "shard %s: cannot allocate %zu bytes to read it", path, expect);
        fclose(f);
        return NULL;
    }
    size_t got = fread(buf, 1, expect + 1, f);
    fclose(f);
    char crc_text[16];
    snprintf(crc_text, sizeof crc_text, "%08lx", crc32(crc32(0L, Z_NULL, 0), buf, (uInt)(got < expect ? got : expect)));
    uint64_t n = 0;
    if (got >= SHARD_HEADER_BYTES)
        memcpy(&n, buf + 16, 8);
    if (got != expect) {
        snprintf(why, len, "shard %s has %zu bytes, the manifest says %zu (truncated or overwritten)", path, got, expect);
    } else if (!want_crc || strcmp(crc_text, want_crc)) {
        snprintf(why, len, "shard %s has CRC32 %s, the manifest says %s (corrupt)", path, crc_text,
                 want_crc ? want_crc : "nothing");
    } else if (memcmp(buf, SHARD_MAGIC, 4) || n > expect / (3 * sizeof(float)) ||
               expect != SHARD_HEADER_BYTES + 3 * n * sizeof(float)) {
        snprintf(why, len, "shard %s is not a dtrain shard of its stated size", path);
    } else {
        *n_floats = (size_t)n;
        return buf;
    }
    free(buf);
    return NULL;
}

/* Adds old rank r's shard (its valid part) to the single-rank arrays g (params, m, v). */
static int add_old_shard(const gpt_model *m, const ckpt_layout *old, int r, const float *data, size_t n, float *g,
                         char *why, size_t len)
{
    rank_grid grid = rank_grid_make(old->tp, 1, old->pp, old->dp);
    int L = m->cfg.num_layers, tp_rank = rank_grid_coord(&grid, r, GRID_TP), pp_rank = rank_grid_coord(&grid, r, GRID_PP),
        dp_rank = rank_grid_coord(&grid, r, GRID_DP);
    unsigned char *runs = malloc((size_t)L);
    gpt_model view;
    gpt_shard sh = {.tp = old->tp, .tp_rank = tp_rank, .layers = runs, .embedding = pp_rank == 0,
                    .head = pp_rank == old->pp - 1, .slots = 1};
    char split_err[256];
    if (pipeline_stage_layers(L, old->pp, old->vpp > 0 ? old->vpp : 1, old->stage_layers[0] > 0 ? old->stage_layers : NULL,
                              pp_rank, runs, NULL, split_err, sizeof split_err) != 0 ||
        gpt_layout_view(&view, &m->cfg, &sh, why, len) != 0) {
        snprintf(why, len, "its layout (TP %d, PP %d) does not fit this model", old->tp, old->pp);
        free(runs);
        return -1;
    }
    free(runs);
    if (view.num_params != n) {
        snprintf(why, len, "shard of rank %d holds %zu parameters, its layout gives %zu", r, n, view.num_params);
        gpt_layout_view_free(&view);
        return -1;
    }
    size_t lo, hi;
    gpt_dp_shard_range(n, old->dp, dp_rank, &lo, &hi);
    float *part = malloc((n ? n : 1) * sizeof(float));
    for (int a = 0; a < 3; a++) {
        /* Which copy holds the truth: with ZeRO the optimizer moments (>= 1) and the parameters
         * (3) are valid only in the owner's range; replicated data is taken from replica 0. */
        int sharded = old->dp > 1 && (a == 0 ? old->zero >= 3 : old->zero >= 1);
        if (!sharded && dp_rank != 0)
            continue;
        const float *src = data + (size_t)a * n;
        for (size_t i = 0; i < n; i++)
            part[i] = !sharded || (i >= lo && i < hi) ? src[i] : 0.0f;
        gpt_add_global(&view, part, g + (size_t)a * m->global_params);
    }
    free(part);
    gpt_layout_view_free(&view);
    return 0;
}

static void state_from_manifest(json_t *man, const unsigned char *shard, train_state *st)
{
    memset(st, 0, sizeof *st);
    /* counters a manifest lacks (or holds badly) read as 0 */
    st->step = jcount(man, "step");
    st->updates = jcount(man, "updates");
    st->data_position = (uint64_t)json_integer_value(json_object_get(man, "data_position"));
    st->seed = (uint64_t)json_integer_value(json_object_get(man, "seed"));
    memcpy(&st->loss_scale, shard + 24, 8);
    memcpy(&st->good_steps, shard + 32, 4);
    st->precision = jcount(man, "precision");
}

/* Tries one checkpoint on this rank: 0 loaded, 1 skip (why), -1 fatal (why). Collective only
 * through the caller's agreement step. */
static int try_load(const char *sdir, gpt_model *m, train_state *st, const comm_ctx *c, const ckpt_layout *now,
                    char *why, size_t len)
{
    char path[4300];
    snprintf(path, sizeof path, "%s/manifest.json", sdir);
    json_error_t je;
    json_t *man = json_load_file(path, 0, &je);
    if (!man) {
        snprintf(why, len, "no readable manifest (incomplete checkpoint)");
        return 1;
    }
    int rc = 1;
    json_t *model = json_object_get(man, "model"), *shards = json_object_get(man, "shards");
    ckpt_layout old;
    manifest_layout(man, &old);
    if (jint(man, "format") != FORMAT_VERSION || !model || !layout_readable(&old, json_array_size(shards), m->cfg.num_layers)) {
        snprintf(why, len, "manifest has an unknown format or an inconsistent layout");
        goto out;
    }
    gpt_config cfg;
    if (gpt_config_from_json(model, &cfg) != 0) {
        snprintf(why, len, "manifest's model description is unreadable");
        goto out;
    }
    if (!gpt_config_same(&cfg, &m->cfg)) {
        char d[256];
        gpt_config_describe(&cfg, d, sizeof d);
        snprintf(why, len, "it is a checkpoint of a different model (%s)", d);
        rc = -1;
        goto out;
    }
    size_t n = 0;
    if (same_layout(&old, now)) {
        unsigned char *buf = read_shard(sdir, json_array_get(shards, (size_t)c->world_rank), &n, why, len);
        if (buf && n != m->num_params) {
            snprintf(why, len, "shard of rank %d holds %zu parameters, this rank has %zu", c->world_rank, n,
                     m->num_params);
            free(buf);
            buf = NULL;
        }
        if (buf) {
            const float *p = (const float *)(buf + SHARD_HEADER_BYTES);
            m->k->copy_to_device(m->params, p + m->param_range.lo, m->param_range.n * sizeof(float));
            m->k->copy_to_device(m->m, p + n + m->moments_lo, m->moments_n * sizeof(float));
            m->k->copy_to_device(m->v, p + 2 * n + m->moments_lo, m->moments_n * sizeof(float));
            state_from_manifest(man, buf, st);
            free(buf);
            rc = 0;
        }
        goto out;
    }
    /* Another layout: assemble the single-rank model from every old shard, take this rank's part. */
    float *g = calloc(3 * m->global_params, sizeof(float));
    unsigned char *first = NULL;
    int ok = 1;
    for (int r = 0; ok && r < old.tp * old.pp * old.dp; r++) {
        unsigned char *buf = read_shard(sdir, json_array_get(shards, (size_t)r), &n, why, len);
        ok = buf && add_old_shard(m, &old, r, (const float *)(buf + SHARD_HEADER_BYTES), n, g, why, len) == 0;
        if (buf && r == 0 && ok)
            first = buf;
        else
            free(buf);
    }
    if (ok) {
        size_t P = m->num_params;
        float *local = malloc((P ? P : 1) * sizeof(float));
        float *dst[3] = {m->params, m->m, m->v};
        for (int a = 0; a < 3; a++) {
            gpt_read_global(m, g + (size_t)a * m->global_params, local);
            /* what this rank's device keeps: its shard of the moments (ZeRO >= 1), of the
             * parameters (ZeRO-3) */
            size_t lo = a ? m->moments_lo : m->param_range.lo, count = a ? m->moments_n : m->param_range.n;
            m->k->copy_to_device(dst[a], local + lo, count * sizeof(float));
        }
        free(local);
        state_from_manifest(man, first, st);
        if (c->world_rank == 0)
            fprintf(stderr, "dtrain: resharding %s from TP %d x PP %d x DP %d (ZeRO-%d) to TP %d x PP %d x DP %d "
                            "(ZeRO-%d)\n", sdir, old.tp, old.pp, old.dp, old.zero, now->tp, now->pp, now->dp, now->zero);
        rc = 0;
    }
    free(first);
    free(g);
out:
    json_decref(man);
    return rc;
}

int checkpoint_load_latest(const char *dir, gpt_model *m, train_state *st, comm_ctx *c, const ckpt_layout *layout,
                           char *err, size_t errlen)
{
    int *steps;
    int mine = checkpoint_list_steps(dir, 0, &steps);
    /* The folder is shared: every rank lists the same steps. Agree on a count anyway, so a rank
     * that sees fewer skips in step with the others instead of leaving them waiting. */
    int n = comm_allreduce_max_int(c->world, mine);
    for (int i = 0; i < n; i++) {
        char sdir[4200] = "", why[9000] = "";
        int rc = 1;
        if (i < mine) {
            step_dir(sdir, sizeof sdir, dir, steps[i]);
            rc = try_load(sdir, m, st, c, layout, why, sizeof why);
        } else {
            snprintf(why, sizeof why, "fewer checkpoints visible on this rank");
        }
        /* agree: fatal anywhere stops all; a skip anywhere skips for all */
        int worst = comm_allreduce_max_int(c->world, rc < 0 ? 2 : rc);
        if (worst == 0) {
            free(steps);
            return 1;
        }
        if (worst == 2) {
            snprintf(err, errlen, "%s: %s", sdir, rc < 0 ? why : "another rank found it unusable");
            free(steps);
            return -1;
        }
        if (rc == 1)
            fprintf(stderr, "dtrain: rank %d: skipping checkpoint %s: %s\n", c->world_rank, sdir, why);
    }
    free(steps);
    return 0;
}

static void remove_tree(const char *path)
{
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            char p[4400];
            int len = snprintf(p, sizeof p, "%s/%s", path, e->d_name);
            if (len < 0 || (size_t)len >= sizeof p) { /* a cut name could be another file */
                fprintf(stderr, "dtrain: %s/%s: path too long to remove\n", path, e->d_name);
                continue;
            }
            unlink(p);
        }
        closedir(d);
    }
    rmdir(path);
}

void checkpoint_prune(const char *dir, int keep)
{
    int *steps;
    /* complete ones only: never delete what might be in progress */
    int n = checkpoint_list_steps(dir, 1, &steps);
    for (int i = keep > 0 ? keep : 0; i < n; i++) {
        char sdir[4200];
        step_dir(sdir, sizeof sdir, dir, steps[i]);
        remove_tree(sdir);
    }
    free(steps);
}
