/* Run tracking; see run_dir.h and docs/formats.md (Run directory). */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "checkpoint.h"
#include "device_peak.h"
#include "oplist.h"
#include "run_dir.h"
#include "train_log.h"
#include "schedule.h"
#include "wall_clock.h"
#include "atomic_file.h"

#ifndef DTRAIN_GIT_REVISION
#define DTRAIN_GIT_REVISION "unknown"
#endif
#ifndef DTRAIN_GIT_DIRTY
#define DTRAIN_GIT_DIRTY -1
#endif

enum { RUN_DIR_FORMAT = 1 };

struct run_dir {
    char path[4096], profile[4200];
    int resume;
    json_t *argv;
    char start_time[32];
    double t0;                      /* monotonic, at open */
    double peak_tflops, flops_per_step, tokens_per_step;
    int world;
    json_t *ckpts;                  /* checkpoints.json "checkpoints" */
    json_t *foreign;                /* steps of complete checkpoints already there: not this run's */
    double time_sum, tokens_sum;    /* this launch's logged steps */
    int steps_logged;
    int failed;                     /* a write failed: said once, nothing more written */
};

/* After a failed write the run keeps training without its record; later calls say nothing. */
static int already_failed(run_dir *rd, char *err, size_t errlen)
{
    if (rd->failed && errlen)
        err[0] = 0;
    return rd->failed;
}

static int note(run_dir *rd, int rc)
{
    if (rc)
        rd->failed = 1;
    return rc ? -1 : 0;
}

const char *run_dir_git_revision(void)
{
    return DTRAIN_GIT_REVISION;
}

int run_dir_git_dirty(void)
{
    return DTRAIN_GIT_DIRTY;
}

static void utc_now(char *out, size_t len)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static void join(char *out, size_t len, const char *dir, const char *name)
{
    snprintf(out, len, "%s/%s", dir, name);
}

/* text to path, on disk before it replaces the old file: a reader sees the old or the new one. */
static int write_text_atomic(const char *path, const char *text, size_t n, char *err, size_t errlen)
{
    char why[4400];
    if (atomic_file_write(path, text, n, 1, why, sizeof why) != 0) {
        snprintf(err, errlen, "--run-dir: %s", why);
        return -1;
    }
    return 0;
}

static int write_json_atomic(const char *path, json_t *doc, char *err, size_t errlen)
{
    char *text = json_dumps(doc, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
    size_t n = strlen(text);
    text = realloc(text, n + 2);
    text[n++] = '\n';
    int rc = write_text_atomic(path, text, n, err, errlen);
    free(text);
    return rc;
}

/* mkdir -p */
static int make_dirs(const char *path, char *err, size_t errlen)
{
    char p[4096];
    snprintf(p, sizeof p, "%s", path);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = 0;
        if (mkdir(p, 0755) != 0 && errno != EEXIST)
            break;
        *s = '/';
    }
    struct stat st;
    if (mkdir(p, 0755) != 0 && (errno != EEXIST || stat(p, &st) != 0 || !S_ISDIR(st.st_mode))) {
        snprintf(err, errlen, "--run-dir %s: cannot create the folder: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

run_dir *run_dir_open(const char *path, int resume, int argc, char **argv, char *err, size_t errlen)
{
    char cfg[4200];
    join(cfg, sizeof cfg, path, "config.json");
    if (!resume && access(cfg, F_OK) == 0) {
        snprintf(err, errlen,
                 "--run-dir %s: %s exists (a run is recorded there); give a new folder, or --resume to continue "
                 "that run",
                 path, cfg);
        return NULL;
    }
    if (make_dirs(path, err, errlen) != 0)
        return NULL;
    /* Prove it is writable now rather than after the first training step. */
    char probe[4200];
    join(probe, sizeof probe, path, ".probe");
    if (write_text_atomic(probe, "", 0, err, errlen) != 0)
        return NULL;
    unlink(probe);
    run_dir *rd = calloc(1, sizeof *rd);
    snprintf(rd->path, sizeof rd->path, "%s", path);
    join(rd->profile, sizeof rd->profile, path, "profile.json");
    rd->resume = resume;
    rd->t0 = wall_clock_s();
    utc_now(rd->start_time, sizeof rd->start_time);
    rd->argv = json_array();
    for (int i = 0; i < argc; i++)
        json_array_append_new(rd->argv, json_string(argv[i]));
    rd->ckpts = json_array();
    rd->foreign = json_array();
    return rd;
}

void run_dir_free(run_dir *rd)
{
    if (!rd)
        return;
    json_decref(rd->argv);
    json_decref(rd->ckpts);
    json_decref(rd->foreign);
    free(rd);
}

double run_dir_peak_tflops(const run_dir *rd)
{
    return rd->peak_tflops;
}

double run_dir_model_flops_per_step(const run_dir *rd)
{
    return rd->flops_per_step;
}

const char *run_dir_profile_path(const run_dir *rd)
{
    return rd->profile;
}

static const char *precision_name(kernels_precision p)
{
    return p == KPREC_BF16 ? "bf16" : p == KPREC_FP16 ? "fp16" : "fp32";
}

static json_t *string_or_null(const char *s)
{
    return s ? json_string(s) : json_null();
}

/* Every value train_options holds, defaults included (argv says which were given). */
static json_t *options_json(const train_options *o)
{
    json_t *stages = json_array();
    for (int i = 0; o->stage_layers && i < o->comm->pp; i++)
        json_array_append_new(stages, json_integer(o->stage_layers[i]));
    json_t *j = json_pack("{s:s,s:s,s:s,s:i,s:i,s:i,s:i,s:I,s:f,s:f,s:f,s:s,s:f,s:i,s:i,s:b,s:o,s:o,s:o,s:i,s:i,"
                          "s:b,s:b,s:i,s:f,s:i,s:s,s:i,s:s,s:o,s:o,s:o,s:o,s:o,s:o,s:o}",
                          "device", o->device, "model", o->model, "data", o->data, "micro_batch", o->micro_batch,
                          "global_batch", o->global_batch, "steps", o->steps, "warmup", o->warmup, "seed",
                          (json_int_t)o->seed, "lr", o->lr, "weight_decay", o->weight_decay, "grad_clip",
                          o->grad_clip, "precision", precision_name(o->precision), "loss_scale", o->loss_scale,
                          "loss_scale_window", o->loss_scale_window, "inject_overflow", o->inject_overflow_step,
                          "log_crc", o->log_crc, "log_json", string_or_null(o->log_json), "profile",
                          string_or_null(o->profile), "ckpt_dir", string_or_null(o->ckpt_dir), "ckpt_every",
                          o->ckpt_every, "ckpt_keep", o->ckpt_keep, "ckpt_sync", o->ckpt_sync, "resume", o->resume,
                          "stop_after", o->stop_after, "comm_timeout_s", o->comm_timeout_s, "zero", o->zero,
                          "grad_reduce", o->grad_reduce_bf16 ? "bf16" : "fp32", "vpp", o->vpp, "schedule",
                          pipeline_kind_name((pipeline_kind)o->schedule), "pipeline_layers", stages, "dump_params",
                          string_or_null(o->dump_params), "rank_params", string_or_null(o->rank_params),
                          "run_dir", string_or_null(o->run_dir), "grad_compress_rank", json_integer(o->grad_compress_rank),
                          "offload_optimizer", json_boolean(o->offload_optimizer),
                          "peak_tflops", o->peak_tflops > 0 ? json_real(o->peak_tflops) : json_null());
    if (j) {
        json_object_set_new(j, "overlap_grad_reduce", json_boolean(o->overlap_grad_reduce));
        json_object_set_new(j, "bucket_mb", json_real(o->bucket_mb));
        static const char *const recompute[] = {"none", "selective", "full"};
        json_object_set_new(j, "recompute_granularity", json_string(recompute[o->recompute]));
        json_object_set_new(j, "sequence_parallel", json_boolean(o->sequence_parallel));
        json_object_set_new(j, "overlap_param_gather", json_boolean(o->overlap_param_gather));
        json_object_set_new(j, "tp_comm_overlap", json_boolean(o->tp_comm_overlap));
        json_object_set_new(j, "cp_comm_type", json_string(o->cp_a2a ? "a2a" : o->cp_all_gather ? "all_gather" : "p2p"));
        json_object_set_new(j, "recompute_method", json_string(o->recompute_block ? "block" : "uniform"));
        json_object_set_new(j, "recompute_num_layers", json_integer(o->recompute_layers));
        json_object_set_new(j, "moe_aux_loss_coeff", json_real(o->moe_aux_loss_coeff));
    }
    return j;
}

/* Model FLOPs of one step, DESIGN.md Metrics: 3 x (layers x layer forward + LM head) per
 * sequence, times the sequences of the step, for dtrain's model (its query groups, MLP width and
 * activation). */
static double model_flops_per_step(const gpt_config *cfg, int global_batch)
{
    layer_shape sh;
    gpt_layer_shape(cfg, 1, 1, &sh); /* the experts a token runs counted too */
    double fwd = cfg->num_layers * layer_forward_flops_per_sequence(&sh) +
                 lm_head_forward_flops_per_sequence(cfg->seq_len, cfg->hidden, cfg->vocab);
    return 3.0 * fwd * global_batch;
}

static int steps_contain(json_t *arr, int step)
{
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v) if (json_integer_value(v) == step) return 1;
    return 0;
}

static json_t *ckpt_entry(json_t *ckpts, int step)
{
    size_t i;
    json_t *e;
    json_array_foreach(ckpts, i, e) if (json_integer_value(json_object_get(e, "step")) == step) return e;
    return NULL;
}

/* config.json of a launch that resumes a recorded run: this launch joins its "resumes". */
static int add_resume(run_dir *rd, const char *cfg_path, int first_step, const char *host, char *err, size_t errlen)
{
    json_error_t je;
    json_t *cfg = json_load_file(cfg_path, 0, &je);
    if (!json_is_object(cfg)) {
        snprintf(err, errlen, "--run-dir: %s:%d: %s (cannot resume its record)", cfg_path, je.line, je.text);
        json_decref(cfg);
        return -1;
    }
    json_t *resumes = json_object_get(cfg, "resumes");
    if (!json_is_array(resumes)) {
        resumes = json_array();
        json_object_set_new(cfg, "resumes", resumes);
    }
    json_array_append_new(resumes, json_pack("{s:O,s:s,s:i,s:s,s:s}", "argv", rd->argv, "start_time", rd->start_time,
                                             "first_step", first_step, "hostname", host, "git_revision",
                                             run_dir_git_revision()));
    int rc = write_json_atomic(cfg_path, cfg, err, errlen);
    json_decref(cfg);
    return rc;
}

/* Keeps the metrics lines of steps before first_step: a resumed run redoes the later ones. */
static int trim_metrics(run_dir *rd, int first_step, char *err, size_t errlen)
{
    char path[4200];
    join(path, sizeof path, rd->path, "metrics.jsonl");
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t cap = 1 << 16, n = 0;
    char *keep = malloc(cap), line[8192];
    while (fgets(line, sizeof line, f)) {
        size_t len = strlen(line);
        json_error_t je;
        json_t *j = line[len - 1] == '\n' ? json_loads(line, 0, &je) : NULL; /* a cut last line goes */
        int step = j ? (int)json_integer_value(json_object_get(j, "step")) : 0;
        json_decref(j);
        if (!j || step >= first_step)
            continue;
        if (n + len > cap)
            keep = realloc(keep, cap = 2 * (n + len));
        memcpy(keep + n, line, len);
        n += len;
    }
    fclose(f);
    int rc = write_text_atomic(path, keep, n, err, errlen);
    free(keep);
    return rc;
}

int run_dir_start(run_dir *rd, const train_options *o, const gpt_config *cfg, size_t params, const kernels_backend *k,
                  int first_step, char *err, size_t errlen)
{
    char host[256] = "unknown", dev[256], cfg_path[4200], ck_path[4200];
    if (already_failed(rd, err, errlen))
        return -1;
    gethostname(host, sizeof host - 1);
    device_name(k, dev, sizeof dev);
    const char *peak_source = NULL;
    rd->world = o->comm->world_size;
    rd->peak_tflops = o->peak_tflops;
    if (rd->peak_tflops > 0)
        peak_source = "--peak-tflops";
    else if (!strcmp(k->name, "cuda"))
        rd->peak_tflops = device_peak_tflops(dev, o->precision, &peak_source);
    rd->flops_per_step = model_flops_per_step(cfg, o->global_batch);
    rd->tokens_per_step = (double)o->global_batch * cfg->seq_len;
    join(cfg_path, sizeof cfg_path, rd->path, "config.json");
    join(ck_path, sizeof ck_path, rd->path, "checkpoints.json");

    /* A resumed record keeps its checkpoint list; complete checkpoints already in ckpt_dir that
     * it does not list were written by some other run. */
    json_t *old = rd->resume ? json_load_file(ck_path, 0, NULL) : NULL;
    if (json_is_array(json_object_get(old, "checkpoints"))) {
        json_decref(rd->ckpts);
        rd->ckpts = json_incref(json_object_get(old, "checkpoints"));
    }
    json_decref(old);
    if (o->ckpt_dir) {
        int *steps, n = checkpoint_list_steps(o->ckpt_dir, 1, &steps);
        for (int i = 0; i < n; i++)
            if (!ckpt_entry(rd->ckpts, steps[i]))
                json_array_append_new(rd->foreign, json_integer(steps[i]));
        free(steps);
    }

    if (rd->resume && access(cfg_path, F_OK) == 0)
        return note(rd, add_resume(rd, cfg_path, first_step, host, err, errlen) ||
                            trim_metrics(rd, first_step, err, errlen));

    json_t *stages = json_array();
    for (int i = 0; o->stage_layers && i < o->comm->pp; i++)
        json_array_append_new(stages, json_integer(o->stage_layers[i]));
    int dirty = run_dir_git_dirty();
    /* the model as checkpoints record it, with dtsim report's ffn_hidden and the parameter count */
    json_t *model = json_object();
    gpt_config_to_json(cfg, model);
    json_object_set_new(model, "ffn_hidden", json_integer(cfg->ffn_hidden));
    json_object_set_new(model, "params", json_integer((json_int_t)params));
    json_t *doc = json_pack(
        "{s:i,s:O,s:o,s:o,"
        "s:{s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:s,s:o},s:{s:s,s:s,s:o,s:o},s:s,s:s,s:I,s:f,s:f,"
        "s:{s:s,s:o},s:s,s:s,s:i,s:[]}",
        "format", RUN_DIR_FORMAT, "argv", rd->argv, "options", options_json(o), "model", model, "layout", "world_size", o->comm->world_size, "tp",
        o->comm->tp, "pp", o->comm->pp, "dp", o->comm->dp, "cp", o->comm->cp > 1 ? o->comm->cp : 1, "vpp", o->vpp, "zero", o->zero, "schedule",
        pipeline_kind_name(o->comm->pp == 1 ? PIPELINE_1F1B : (pipeline_kind)o->schedule), "stage_layers", stages,
        "device", "backend", k->name, "name", dev, "peak_tflops",
        rd->peak_tflops > 0 ? json_real(rd->peak_tflops) : json_null(), "peak_source",
        peak_source ? json_string(peak_source) : json_null(), "precision", precision_name(o->precision), "data",
        o->data, "seed", (json_int_t)o->seed, "tokens_per_step", rd->tokens_per_step, "model_flops_per_step",
        rd->flops_per_step, "dtrain", "git_revision", run_dir_git_revision(), "git_dirty",
        dirty < 0 ? json_null() : json_boolean(dirty), "start_time", rd->start_time, "hostname", host, "first_step",
        first_step, "resumes");
    if (doc) /* expert parallelism: the experts' all-to-all group (1: every expert on each rank) */
        json_object_set_new(json_object_get(doc, "layout"), "ep", json_integer(o->comm->ep > 1 ? o->comm->ep : 1));
    int rc = write_json_atomic(cfg_path, doc, err, errlen);
    json_decref(doc);
    if (rc == 0 && first_step > 1)
        rc = trim_metrics(rd, first_step, err, errlen); /* --resume into a folder without a record */
    return note(rd, rc);
}

int run_dir_step(run_dir *rd, int step, double loss, double grad_norm, double loss_scale, double lr,
                 double step_time_s, double moe_load_imbalance, char *err, size_t errlen)
{
    if (already_failed(rd, err, errlen))
        return -1;
    double tps = rd->tokens_per_step / step_time_s;
    double per_gpu = rd->flops_per_step / (step_time_s * rd->world);
    json_t *line = json_pack("{s:i,s:o,s:f,s:f,s:f,s:f,s:f,s:f,s:o}", "step", step, "loss", train_log_number(loss), "grad_norm",
                             grad_norm, "loss_scale", loss_scale, "lr", lr, "tokens_per_s", tps, "step_time_s",
                             step_time_s, "model_tflops_per_gpu", per_gpu / 1e12, "mfu",
                             rd->peak_tflops > 0 ? json_real(per_gpu / (rd->peak_tflops * 1e12)) : json_null());
    if (moe_load_imbalance > 0)
        json_object_set_new(line, "moe_load_imbalance", json_real(moe_load_imbalance));
    char *text = json_dumps(line, JSON_COMPACT | JSON_REAL_PRECISION(17));
    json_decref(line);
    size_t n = strlen(text);
    text = realloc(text, n + 2);
    text[n++] = '\n';
    char path[4200];
    join(path, sizeof path, rd->path, "metrics.jsonl");
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644), rc = 0;
    /* one write: a reader never sees half a line unless the process dies inside it */
    ssize_t put = fd < 0 ? -1 : write(fd, text, n);
    /* A short write (a disk filling up) sets no errno: writing the rest gets the real reason
     * rather than whatever errno an earlier call left. */
    while (put >= 0 && (size_t)put < n) {
        ssize_t more = write(fd, text + put, n - (size_t)put);
        put = more <= 0 ? -1 : put + more;
        if (more == 0)
            errno = ENOSPC; /* nothing written and no error: the only reason left */
    }
    if (put < 0) {
        snprintf(err, errlen, "--run-dir: cannot append to %s: %s", path, strerror(errno));
        rc = -1;
    }
    if (fd >= 0)
        close(fd);
    free(text);
    rd->time_sum += step_time_s;
    rd->tokens_sum += rd->tokens_per_step;
    rd->steps_logged++;
    return note(rd, rc);
}

/* The checkpoints.json entry of ckpt_dir/step-N, from its manifest; NULL if unreadable. */
static json_t *read_checkpoint(const char *ckpt_dir, int step)
{
    char sdir[4200], man[4400];
    snprintf(sdir, sizeof sdir, "%s/step-%08d", ckpt_dir, step);
    snprintf(man, sizeof man, "%s/manifest.json", sdir);
    json_t *m = json_load_file(man, 0, NULL);
    json_t *shards = json_object_get(m, "shards");
    if (!json_is_array(shards)) {
        json_decref(m);
        return NULL;
    }
    struct stat st;
    double bytes = stat(man, &st) == 0 ? (double)st.st_size : 0;
    json_t *list = json_array(), *s;
    size_t i;
    json_array_foreach(shards, i, s) {
        bytes += (double)json_integer_value(json_object_get(s, "bytes"));
        json_array_append_new(list, json_pack("{s:O,s:O,s:O,s:O}", "rank", json_object_get(s, "rank"), "file",
                                              json_object_get(s, "file"), "bytes", json_object_get(s, "bytes"),
                                              "crc32", json_object_get(s, "crc32")));
    }
    char when[32];
    utc_now(when, sizeof when);
    json_t *e = json_pack("{s:i,s:s,s:s,s:I,s:o,s:b,s:s}", "step", step, "path", sdir, "manifest", man, "bytes",
                          (json_int_t)bytes, "shards", list, "on_disk", 1, "recorded_at", when);
    json_decref(m);
    return e;
}

static int cmp_entry_step(const void *a, const void *b)
{
    json_int_t x = json_integer_value(json_object_get(*(json_t *const *)a, "step"));
    json_int_t y = json_integer_value(json_object_get(*(json_t *const *)b, "step"));
    return (x > y) - (x < y);
}

int run_dir_checkpoints(run_dir *rd, const char *ckpt_dir, char *err, size_t errlen)
{
    if (already_failed(rd, err, errlen))
        return -1;
    int *steps, n = checkpoint_list_steps(ckpt_dir, 1, &steps);
    size_t i;
    json_t *e;
    json_array_foreach(rd->ckpts, i, e) json_object_set_new(e, "on_disk", json_false());
    for (int k = 0; k < n; k++) {
        if (steps_contain(rd->foreign, steps[k]))
            continue;
        e = ckpt_entry(rd->ckpts, steps[k]);
        if (e) {
            json_object_set_new(e, "on_disk", json_true());
        } else if ((e = read_checkpoint(ckpt_dir, steps[k]))) {
            json_array_append_new(rd->ckpts, e);
        }
    }
    free(steps);
    size_t count = json_array_size(rd->ckpts);
    json_t **sorted = malloc((count ? count : 1) * sizeof *sorted);
    for (i = 0; i < count; i++)
        sorted[i] = json_incref(json_array_get(rd->ckpts, i));
    qsort(sorted, count, sizeof *sorted, cmp_entry_step);
    json_array_clear(rd->ckpts);
    for (i = 0; i < count; i++)
        json_array_append_new(rd->ckpts, sorted[i]);
    free(sorted);
    char path[4200];
    join(path, sizeof path, rd->path, "checkpoints.json");
    json_t *doc = json_pack("{s:s,s:O}", "ckpt_dir", ckpt_dir, "checkpoints", rd->ckpts);
    int rc = write_json_atomic(path, doc, err, errlen);
    json_decref(doc);
    return note(rd, rc);
}

int run_dir_finish(run_dir *rd, int last_step, double final_loss, const char *params_crc32, int completed,
                   char *err, size_t errlen)
{
    if (!rd)
        return 0;
    char end[32], path[4200];
    if (already_failed(rd, err, errlen)) {
        run_dir_free(rd);
        return -1;
    }
    utc_now(end, sizeof end);
    join(path, sizeof path, rd->path, "summary.json");
    json_t *doc = json_pack("{s:o,s:s,s:i,s:i,s:b,s:f,s:o,s:o,s:s,s:s}", "final_loss", train_log_number(final_loss), "params_crc32",
                            params_crc32, "steps", last_step, "steps_this_launch", rd->steps_logged, "completed",
                            completed, "wall_s", wall_clock_s() - rd->t0, "mean_tokens_per_s",
                            rd->time_sum > 0 ? json_real(rd->tokens_sum / rd->time_sum) : json_null(),
                            "mean_step_time_s",
                            rd->steps_logged ? json_real(rd->time_sum / rd->steps_logged) : json_null(), "start_time",
                            rd->start_time, "end_time", end);
    int rc = write_json_atomic(path, doc, err, errlen);
    json_decref(doc);
    run_dir_free(rd);
    return rc;
}
