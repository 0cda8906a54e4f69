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
#include "checkpoint_manifest.h"
#include "data_parallel.h"
#include "schedule.h"
#include "wall_clock.h"

#define SHARD_MAGIC "DTCK"
#define SHARD_VERSION 2 /* the shard's layout; the manifest's format is MANIFEST_FORMAT */
#define SHARD_HEADER_BYTES MANIFEST_SHARD_HEADER

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

/* Removes a step folder, its manifest first: a folder left half-removed (a crash inside) then
 * reads as incomplete, not as a checkpoint with missing shards. */
static void remove_tree(const char *path)
{
    char man[4400];
    snprintf(man, sizeof man, "%s/manifest.json", path);
    unlink(man);
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
    uint32_t version = SHARD_VERSION, rank = (uint32_t)j->rank, world = (uint32_t)j->world;
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

/* Where a rank's resident parameters sit in its shard file's parameter region: at their flat
 * place, or (ZeRO-3 under EP, whose two shards are packed past the flat buffer, as its moments
 * are) at its start, as the packed moments sit at the start of theirs. Only the same layout
 * reads them back (resharding refuses EP). */
static size_t params_at(const gpt_model *m)
{
    return m->param_range.lo >= m->num_params ? 0 : m->param_range.lo;
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
    m->k->copy_to_host(j->host + params_at(m), m->params, m->param_range.n * sizeof(float));
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
        "{s:i,s:i,s:i,s:I,s:I,s:o,s:{s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:o},s:{s:f,s:f,s:f},s:i,s:f,s:i,"
        "s:o}",
        "format", MANIFEST_FORMAT, "step", j->st.step, "updates", j->st.updates, "data_position",
        (json_int_t)j->st.data_position, "seed", (json_int_t)j->st.seed, "model", model, "layout",
        "tp", j->layout.tp, "pp", j->layout.pp, "dp", j->layout.dp, "vpp", j->layout.vpp, "zero", j->layout.zero,
        "ep", j->layout.ep > 1 ? j->layout.ep : 1, "cp", j->layout.cp > 1 ? j->layout.cp : 1, "world", j->world, "stage_layers", stages, "lr_schedule", "lr", j->st.lr, "warmup", j->st.warmup, "steps",
        j->st.total_steps, "precision", j->st.precision, "loss_scale", j->st.loss_scale, "good_steps",
        j->st.good_steps, "shards", shards);
    manifest_seal(man); /* a reader checks every value against it */
    char *text = json_dumps(man, JSON_INDENT(2)); /* reals at full precision: they read back equal */
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
    if (rc != 0 && c->world_rank == 0) {
        /* Every rank's write has ended (joined above): what the failed checkpoint left, shards of
         * the ranks that could write theirs or an empty folder, goes. */
        char sdir[4200];
        step_dir(sdir, sizeof sdir, j->dir, j->st.step);
        remove_tree(sdir);
        fsync_dir(j->dir);
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

static int ep_of(const ckpt_layout *l)
{
    return l->ep > 1 ? l->ep : 1;
}

static int cp_of(const ckpt_layout *l)
{
    return l->cp > 1 ? l->cp : 1;
}

static int same_layout(const ckpt_layout *a, const ckpt_layout *b)
{
    if (a->tp != b->tp || a->pp != b->pp || a->dp != b->dp || a->vpp != b->vpp || a->zero != b->zero ||
        ep_of(a) != ep_of(b) || cp_of(a) != cp_of(b))
        return 0;
    for (int i = 0; i < a->pp && i < CKPT_MAX_STAGES; i++)
        if (a->stage_layers[i] != b->stage_layers[i])
            return 0;
    return 1;
}

/* zlib's CRC32 of n bytes, in pieces: crc32 takes a uInt length, and a shard can exceed 4 GiB. */
static uint32_t crc32_bytes(const unsigned char *p, size_t n)
{
    uLong c = crc32(0L, Z_NULL, 0);
    while (n > 0) {
        size_t chunk = n > (1u << 30) ? (1u << 30) : n;
        c = crc32(c, p, (uInt)chunk);
        p += chunk;
        n -= chunk;
    }
    return (uint32_t)c;
}

/* Reads shard entry r of a checked manifest from sdir and checks it against the entry's size
 * and CRC and the manifest's loss scaler; returns the malloc'd bytes, or NULL with the reason. */
static unsigned char *read_shard(const char *sdir, const ckpt_manifest *man, int r, size_t *n_floats, char *why,
                                 size_t len)
{
    char path[4300];
    json_t *entry = json_array_get(man->shards, (size_t)r);
    snprintf(path, sizeof path, "%s/%s", sdir, json_string_value(json_object_get(entry, "file")));
    size_t expect = (size_t)json_integer_value(json_object_get(entry, "bytes"));
    const char *want_crc = json_string_value(json_object_get(entry, "crc32"));
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(why, len, "shard %s is missing", path);
        return NULL;
    }
    /* The size on disk must match before anything is allocated: a manifest's byte count must
     * not make this rank allocate what the file does not hold. */
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
    snprintf(crc_text, sizeof crc_text, "%08x", crc32_bytes(buf, got < expect ? got : expect));
    uint64_t n = 0;
    double scale = 0;
    int good = -1;
    if (got >= SHARD_HEADER_BYTES) {
        memcpy(&n, buf + 16, 8);
        memcpy(&scale, buf + 24, 8);
        memcpy(&good, buf + 32, 4);
    }
    if (got != expect) {
        snprintf(why, len, "shard %s has %zu bytes, the manifest says %zu (truncated or overwritten)", path, got, expect);
    } else if (strcmp(crc_text, want_crc)) {
        snprintf(why, len, "shard %s has CRC32 %s, the manifest says %s (corrupt)", path, crc_text, want_crc);
    } else if (memcmp(buf, SHARD_MAGIC, 4) || n > expect / (3 * sizeof(float)) ||
               expect != SHARD_HEADER_BYTES + 3 * n * sizeof(float)) {
        snprintf(why, len, "shard %s is not a dtrain shard of its stated size", path);
    } else if (scale != man->st.loss_scale || good != man->st.good_steps) {
        /* both were written from one state: a difference means one was edited */
        snprintf(why, len, "shard %s holds loss scale %g after %d good steps, the manifest says %g after %d", path,
                 scale, good, man->st.loss_scale, man->st.good_steps);
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
    int cp = cp_of(old);
    rank_grid grid = rank_grid_make(old->tp, cp, old->pp, old->dp);
    int L = m->cfg.num_layers, tp_rank = rank_grid_coord(&grid, r, GRID_TP), pp_rank = rank_grid_coord(&grid, r, GRID_PP),
        replica = rank_grid_coord(&grid, r, GRID_DP) * cp + rank_grid_coord(&grid, r, GRID_CP), replicas = old->dp * cp;
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
    gpt_dp_shard_range(n, replicas, replica, &lo, &hi); /* ZeRO shards over DP x CP, as the run did */
    float *part = malloc((n ? n : 1) * sizeof(float));
    for (int a = 0; a < 3; a++) {
        /* Which copy holds the truth: with ZeRO the optimizer moments (>= 1) and the parameters
         * (3) are valid only in the owner's range; replicated data (a CP rank's too) is taken
         * from replica 0. */
        int sharded = replicas > 1 && (a == 0 ? old->zero >= 3 : old->zero >= 1);
        if (!sharded && replica != 0)
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

/* What one checkpoint is to this rank; ordered, so that the ranks agree on the largest. */
enum { LOAD_OK, LOAD_INCOMPLETE, LOAD_BAD, LOAD_FATAL };

/* Tries checkpoint sdir (of step folder_step) on this rank: LOAD_OK (loaded into m and st),
 * LOAD_INCOMPLETE (no manifest), LOAD_BAD (a manifest or shard that fails its checks) or
 * LOAD_FATAL (a checkpoint of another model), with why. Collective only through the caller's
 * agreement step. */
static int try_load(const char *sdir, int folder_step, gpt_model *m, train_state *st, const comm_ctx *c,
                    const ckpt_layout *now, char *why, size_t len)
{
    char path[4300];
    snprintf(path, sizeof path, "%s/manifest.json", sdir);
    ckpt_manifest man;
    json_t *doc;
    int got = manifest_read(path, folder_step, &man, &doc, why, len);
    if (got != 0)
        return got > 0 ? LOAD_INCOMPLETE : LOAD_BAD;
    int rc = LOAD_BAD;
    const ckpt_layout *old = &man.layout;
    if (!gpt_config_same(&man.model, &m->cfg)) {
        char d[256];
        gpt_config_describe(&man.model, d, sizeof d);
        snprintf(why, len, "it is a checkpoint of a different model (%s)", d);
        rc = LOAD_FATAL;
        goto out;
    }
    size_t n = 0;
    if (same_layout(old, now)) {
        unsigned char *buf = read_shard(sdir, &man, c->world_rank, &n, why, len);
        if (buf && n != m->num_params) {
            snprintf(why, len, "shard of rank %d holds %zu parameters, this rank has %zu", c->world_rank, n,
                     m->num_params);
            free(buf);
            buf = NULL;
        }
        if (buf) {
            const float *p = (const float *)(buf + SHARD_HEADER_BYTES);
            m->k->copy_to_device(m->params, p + params_at(m), m->param_range.n * sizeof(float));
            m->k->copy_to_device(m->m, p + n + m->moments_lo, m->moments_n * sizeof(float));
            m->k->copy_to_device(m->v, p + 2 * n + m->moments_lo, m->moments_n * sizeof(float));
            *st = man.st;
            free(buf);
            rc = LOAD_OK;
        }
        goto out;
    }
    if (ep_of(old) > 1 || ep_of(now) > 1) {
        /* resharding assembles the single-rank model from shards of one replica's layout; under
         * EP a shard holds one EP rank's experts (and ZeRO-1 packs its moments by kind) */
        snprintf(why, len, "it was saved with --expert-model-parallel-size %d (TP %d x CP %d x PP %d x DP %d, ZeRO-%d), "
                 "this run has --expert-model-parallel-size %d (TP %d x CP %d x PP %d x DP %d, ZeRO-%d): under expert "
                 "parallelism only the same layout resumes", ep_of(old), old->tp, cp_of(old), old->pp, old->dp,
                 old->zero, ep_of(now), now->tp, cp_of(now), now->pp, now->dp, now->zero);
        rc = LOAD_FATAL;
        goto out;
    }
    /* Another layout: assemble the single-rank model from every old shard, take this rank's part. */
    float *g = calloc(3 * m->global_params, sizeof(float));
    int ok = 1;
    for (int r = 0; ok && r < man.world; r++) {
        unsigned char *buf = read_shard(sdir, &man, r, &n, why, len);
        ok = buf && add_old_shard(m, old, r, (const float *)(buf + SHARD_HEADER_BYTES), n, g, why, len) == 0;
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
        *st = man.st;
        if (c->world_rank == 0)
            fprintf(stderr, "dtrain: resharding %s from TP %d x CP %d x PP %d x DP %d (ZeRO-%d) to TP %d x CP %d x "
                            "PP %d x DP %d (ZeRO-%d)\n", sdir, old->tp, cp_of(old), old->pp, old->dp, old->zero, now->tp,
                    cp_of(now), now->pp, now->dp, now->zero);
        rc = LOAD_OK;
    }
    free(g);
out:
    json_decref(doc);
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
    char first_bad[9500] = ""; /* the newest complete checkpoint that failed its checks, and why */
    for (int i = 0; i < n; i++) {
        char sdir[4200] = "", why[9000] = "";
        int rc = LOAD_INCOMPLETE;
        if (i < mine) {
            step_dir(sdir, sizeof sdir, dir, steps[i]);
            rc = try_load(sdir, steps[i], m, st, c, layout, why, sizeof why);
        } else {
            snprintf(why, sizeof why, "fewer checkpoints visible on this rank");
        }
        /* agree: fatal anywhere stops all; a skip anywhere skips for all */
        int worst = comm_allreduce_max_int(c->world, rc);
        if (worst == LOAD_OK) {
            free(steps);
            return 1;
        }
        if (worst == LOAD_FATAL) {
            snprintf(err, errlen, "%s: %s", sdir, rc == LOAD_FATAL ? why : "another rank found it unusable");
            free(steps);
            return -1;
        }
        if (rc != LOAD_OK)
            fprintf(stderr, "dtrain: rank %d: skipping checkpoint %s: %s\n", c->world_rank, sdir, why);
        /* a checkpoint some rank loaded is complete, whatever another rank saw of it */
        int bad = worst == LOAD_BAD || comm_allreduce_max_int(c->world, rc == LOAD_OK);
        if (bad && !first_bad[0] &&
            (size_t)snprintf(first_bad, sizeof first_bad, "%s: %s", sdir,
                             rc == LOAD_BAD ? why : "another rank found it unusable") >= sizeof first_bad)
            memcpy(first_bad + sizeof first_bad - sizeof "...", "...", sizeof "..."); /* marked where cut */
    }
    free(steps);
    /* Checkpoints that were written but fail their checks, and none intact behind them: starting
     * fresh would train from scratch over them unasked. Only folders without a manifest (a run
     * stopped before its first checkpoint completed) mean there is nothing to resume. */
    if (first_bad[0]) {
        snprintf(err, errlen, "no intact checkpoint left in %s (the newest, %s)", dir, first_bad);
        return -1;
    }
    return 0;
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
