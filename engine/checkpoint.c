/* Checkpoints; see checkpoint.h. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>
#include "checkpoint.h"

#define SHARD_MAGIC "DTCK"
#define FORMAT_VERSION 1
#define SHARD_HEADER_BYTES 64

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Writes bytes to path through path.tmp, fsync, rename. */
static int write_file_atomic(const char *path, const void *const *parts, const size_t *sizes, int n, uint32_t *crc,
                             char *err, size_t errlen)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot create: %s", tmp, strerror(errno));
        return -1;
    }
    uLong c = crc32(0L, Z_NULL, 0);
    for (int i = 0; i < n; i++) {
        const unsigned char *p = parts[i];
        size_t left = sizes[i];
        while (left > 0) {
            size_t chunk = left > (1u << 30) ? (1u << 30) : left;
            ssize_t w = write(fd, p, chunk);
            if (w <= 0) {
                snprintf(err, errlen, "%s: write failed: %s", tmp, strerror(errno));
                close(fd);
                unlink(tmp);
                return -1;
            }
            c = crc32(c, p, (uInt)w);
            p += w;
            left -= (size_t)w;
        }
    }
    if (fsync(fd) != 0 || close(fd) != 0 || rename(tmp, path) != 0) {
        snprintf(err, errlen, "%s: cannot complete the write: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
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
    size_t n;
    float *host;         /* params, m, v: 3n floats */
    train_state st;
    pthread_t thread;
    int rc;
    char err[9000];
    double write_s;
};

static int write_checkpoint(checkpoint_job *j)
{
    char sdir[4200], path[4300];
    snprintf(sdir, sizeof sdir, "%s/step-%08d", j->dir, j->st.step);
    if (mkdir(j->dir, 0755) != 0 && errno != EEXIST) {
        snprintf(j->err, sizeof j->err, "%s: cannot create: %s", j->dir, strerror(errno));
        return -1;
    }
    if (mkdir(sdir, 0755) != 0 && errno != EEXIST) {
        snprintf(j->err, sizeof j->err, "%s: cannot create: %s", sdir, strerror(errno));
        return -1;
    }
    unsigned char header[SHARD_HEADER_BYTES] = {0};
    memcpy(header, SHARD_MAGIC, 4);
    uint32_t version = FORMAT_VERSION, rank = 0, world = 1;
    uint64_t n = j->n;
    memcpy(header + 4, &version, 4);
    memcpy(header + 8, &rank, 4);
    memcpy(header + 12, &world, 4);
    memcpy(header + 16, &n, 8);
    memcpy(header + 24, &j->st.loss_scale, 8);
    memcpy(header + 32, &j->st.good_steps, 4);
    const void *parts[2] = {header, j->host};
    size_t sizes[2] = {sizeof header, 3 * j->n * sizeof(float)};
    uint32_t crc;
    snprintf(path, sizeof path, "%s/shard-00000.bin", sdir);
    if (write_file_atomic(path, parts, sizes, 2, &crc, j->err, sizeof j->err))
        return -1;

    char crc_text[16];
    snprintf(crc_text, sizeof crc_text, "%08x", crc);
    json_t *man = json_pack(
        "{s:i,s:i,s:i,s:I,s:I,s:{s:i,s:i,s:i,s:i,s:i},s:{s:i,s:i,s:i,s:i},s:{s:f,s:f,s:f},s:i,s:f,s:i,s:[{s:s,s:I,s:s}]}",
        "format", FORMAT_VERSION, "step", j->st.step, "updates", j->st.updates, "data_position",
        (json_int_t)j->st.data_position, "seed", (json_int_t)j->st.seed, "model", "num_layers", j->cfg.num_layers,
        "hidden", j->cfg.hidden, "heads", j->cfg.heads, "seq_len", j->cfg.seq_len, "vocab", j->cfg.vocab, "layout",
        "tp", 1, "pp", 1, "dp", 1, "zero", 0, "lr_schedule", "lr", j->st.lr, "warmup", j->st.warmup, "steps",
        j->st.total_steps, "precision", j->st.precision, "loss_scale", j->st.loss_scale, "good_steps",
        j->st.good_steps, "shards", "file", "shard-00000.bin", "bytes", (json_int_t)(sizes[0] + sizes[1]), "crc32",
        crc_text);
    char *text = json_dumps(man, JSON_INDENT(2));
    json_decref(man);
    const void *mparts[1] = {text};
    size_t msizes[1] = {strlen(text)};
    snprintf(path, sizeof path, "%s/manifest.json", sdir);
    int rc = write_file_atomic(path, mparts, msizes, 1, NULL, j->err, sizeof j->err); /* last: completes it */
    free(text);
    fsync_dir(sdir);
    fsync_dir(j->dir);
    return rc;
}

static checkpoint_job *job_new(const char *dir, const gpt_model *m, const train_state *st)
{
    checkpoint_job *j = calloc(1, sizeof *j);
    snprintf(j->dir, sizeof j->dir, "%s", dir);
    j->cfg = m->cfg;
    j->n = m->num_params;
    j->st = *st;
    j->host = malloc(3 * j->n * sizeof(float));
    m->k->copy_to_host(j->host, m->params, j->n * sizeof(float));
    m->k->copy_to_host(j->host + j->n, m->m, j->n * sizeof(float));
    m->k->copy_to_host(j->host + 2 * j->n, m->v, j->n * sizeof(float));
    return j;
}

static void job_free(checkpoint_job *j)
{
    free(j->host);
    free(j);
}

int checkpoint_save(const char *dir, const gpt_model *m, const train_state *st, char *err, size_t errlen)
{
    checkpoint_job *j = job_new(dir, m, st);
    int rc = write_checkpoint(j);
    if (rc)
        snprintf(err, errlen, "%s", j->err);
    job_free(j);
    return rc;
}

static void *writer(void *arg)
{
    checkpoint_job *j = arg;
    double t0 = now_s();
    j->rc = write_checkpoint(j);
    j->write_s = now_s() - t0;
    return NULL;
}

checkpoint_job *checkpoint_save_async(const char *dir, const gpt_model *m, const train_state *st)
{
    checkpoint_job *j = job_new(dir, m, st);
    if (pthread_create(&j->thread, NULL, writer, j) != 0) {
        j->rc = write_checkpoint(j); /* no thread: write now */
        j->thread = 0;
    }
    return j;
}

int checkpoint_wait(checkpoint_job *j, double *write_s, char *err, size_t errlen)
{
    if (!j)
        return 0;
    if (j->thread)
        pthread_join(j->thread, NULL);
    int rc = j->rc;
    if (rc)
        snprintf(err, errlen, "%s", j->err);
    if (write_s)
        *write_s = j->write_s;
    job_free(j);
    return rc;
}

/* ---- loading ------------------------------------------------------------------------------ */
static int cmp_desc(const void *a, const void *b)
{
    return *(const int *)b - *(const int *)a;
}

/* Step numbers of dir's step-NNNNNNNN folders, newest first. */
static int list_steps(const char *dir, int **out)
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
        if (sscanf(e->d_name, "step-%d%c", &step, &tail) == 1) {
            if (n == cap)
                *out = realloc(*out, (size_t)(cap *= 2) * sizeof(int));
            (*out)[n++] = step;
        }
    }
    closedir(d);
    qsort(*out, (size_t)n, sizeof(int), cmp_desc);
    return n;
}

/* Reads and checks one checkpoint; 0 ok, 1 skip (reason in why), -1 fatal (in why). */
static int try_load(const char *sdir, gpt_model *m, train_state *st, char *why, size_t len)
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
    json_t *shard = json_array_get(shards, 0);
    if (json_integer_value(json_object_get(man, "format")) != FORMAT_VERSION || !model || !shard) {
        snprintf(why, len, "manifest has an unknown format");
        goto out;
    }
    gpt_config c = {(int)json_integer_value(json_object_get(model, "num_layers")),
                    (int)json_integer_value(json_object_get(model, "hidden")),
                    (int)json_integer_value(json_object_get(model, "heads")),
                    (int)json_integer_value(json_object_get(model, "seq_len")),
                    (int)json_integer_value(json_object_get(model, "vocab"))};
    if (memcmp(&c, &m->cfg, sizeof c) != 0) {
        snprintf(why, len, "it is a checkpoint of a different model (layers %d, hidden %d, heads %d, seq %d, vocab %d)",
                 c.num_layers, c.hidden, c.heads, c.seq_len, c.vocab);
        rc = -1;
        goto out;
    }
    snprintf(path, sizeof path, "%s/%s", sdir, json_string_value(json_object_get(shard, "file")));
    size_t expect = (size_t)json_integer_value(json_object_get(shard, "bytes"));
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(why, len, "shard %s is missing", path);
        goto out;
    }
    unsigned char *buf = malloc(expect + 1);
    size_t got = fread(buf, 1, expect + 1, f);
    fclose(f);
    char crc_text[16];
    snprintf(crc_text, sizeof crc_text, "%08lx", crc32(crc32(0L, Z_NULL, 0), buf, (uInt)(got < expect ? got : expect)));
    uint64_t n = 0;
    if (got >= SHARD_HEADER_BYTES)
        memcpy(&n, buf + 16, 8);
    if (got != expect) {
        snprintf(why, len, "shard %s has %zu bytes, the manifest says %zu (truncated or overwritten)", path, got, expect);
    } else if (strcmp(crc_text, json_string_value(json_object_get(shard, "crc32")))) {
        snprintf(why, len, "shard %s has CRC32 %s, the manifest says %s (corrupt)", path, crc_text,
                 json_string_value(json_object_get(shard, "crc32")));
    } else if (memcmp(buf, SHARD_MAGIC, 4) || n != m->num_params ||
               expect != SHARD_HEADER_BYTES + 3 * n * sizeof(float)) {
        snprintf(why, len, "shard %s does not hold this model's %zu parameters", path, m->num_params);
    } else {
        const float *p = (const float *)(buf + SHARD_HEADER_BYTES);
        m->k->copy_to_device(m->params, p, n * sizeof(float));
        m->k->copy_to_device(m->m, p + n, n * sizeof(float));
        m->k->copy_to_device(m->v, p + 2 * n, n * sizeof(float));
        memset(st, 0, sizeof *st);
        st->step = (int)json_integer_value(json_object_get(man, "step"));
        st->updates = (int)json_integer_value(json_object_get(man, "updates"));
        st->data_position = (uint64_t)json_integer_value(json_object_get(man, "data_position"));
        st->seed = (uint64_t)json_integer_value(json_object_get(man, "seed"));
        memcpy(&st->loss_scale, buf + 24, 8);
        memcpy(&st->good_steps, buf + 32, 4);
        st->precision = (int)json_integer_value(json_object_get(man, "precision"));
        rc = 0;
    }
    free(buf);
out:
    json_decref(man);
    return rc;
}

int checkpoint_load_latest(const char *dir, gpt_model *m, train_state *st, char *err, size_t errlen)
{
    int *steps;
    int n = list_steps(dir, &steps);
    for (int i = 0; i < n; i++) {
        char sdir[4200], why[9000];
        snprintf(sdir, sizeof sdir, "%s/step-%08d", dir, steps[i]);
        int rc = try_load(sdir, m, st, why, sizeof why);
        if (rc == 0) {
            free(steps);
            return 1;
        }
        if (rc < 0) {
            snprintf(err, errlen, "%s: %s", sdir, why);
            free(steps);
            return -1;
        }
        fprintf(stderr, "dtrain: skipping checkpoint %s: %s\n", sdir, why);
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
            snprintf(p, sizeof p, "%s/%s", path, e->d_name);
            unlink(p);
        }
        closedir(d);
    }
    rmdir(path);
}

void checkpoint_prune(const char *dir, int keep)
{
    int *steps;
    int n = list_steps(dir, &steps), complete = 0;
    for (int i = 0; i < n; i++) {
        char sdir[4200], man[4300];
        snprintf(sdir, sizeof sdir, "%s/step-%08d", dir, steps[i]);
        snprintf(man, sizeof man, "%s/manifest.json", sdir);
        if (access(man, F_OK) != 0)
            continue; /* never delete what might be in progress */
        if (++complete > keep)
            remove_tree(sdir);
    }
    free(steps);
}
