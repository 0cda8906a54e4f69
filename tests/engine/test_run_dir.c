/* dtrain --run-dir: the run folder's files against what the test computes itself.
 * argv[1]: the dtrain binary, argv[2]: a scratch folder.
 *  - config.json holds the options given (argv and values), the model's parameter count (the
 *    GPT-2 closed form), the layout, and a git revision of 40 hex digits (+ dirty flag) or "unknown";
 *  - metrics.jsonl has one line per step whose loss is the --log-json line's; MFU is null on the
 *    CPU without --peak-tflops and equals model FLOPs / (step time x peak) with it, the model
 *    FLOPs from DESIGN.md's formula written out here;
 *  - checkpoints.json lists exactly the complete checkpoints on disk, with shard sizes and CRC32s
 *    equal to the manifests' and to zlib's CRC32 of the shard files read back here;
 *  - summary.json: the final line's loss and params_crc32, the mean tokens/s of the metrics;
 *  - an existing run folder is refused (exit 2, naming the flag and config.json); --resume
 *    appends, redoing the steps after the checkpoint, and gives the uninterrupted run's losses;
 *  - an unwritable folder is a clear exit 2; files that fill up are reported with their errno;
 *  - under mpirun (argv[3], TP 2 x DP 2): rank 0 alone records the run, MFU counts 4 GPUs, the
 *    checkpoint list has the 4 shards, and a refused folder stops every rank with exit 2. */
#include <dirent.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <cmocka.h>
#include "run_dtrain.h"

static const char *DTRAIN, *WORK, *MPIRUN;
static json_t *L[64];
static char ERR[16384];

/* tiny: 4 layers, hidden 128, 4 heads, seq 64, vocabulary 256 (engine/README.md) */
enum { NL = 4, C = 128, T = 64, V = 256 };

static void path_of(char *out, size_t n, const char *dir, const char *name)
{
    snprintf(out, n, "%s/%s/%s", WORK, dir, name);
}

static json_t *load(const char *dir, const char *name)
{
    char p[4096];
    path_of(p, sizeof p, dir, name);
    json_error_t je;
    json_t *j = json_load_file(p, 0, &je);
    if (!j)
        fprintf(stderr, "%s: %s\n", p, je.text);
    return j;
}

/* metrics.jsonl, one parsed object per line (every line must parse and end in a newline). */
static int load_metrics(const char *dir, json_t **out, int max)
{
    char p[4096], buf[8192];
    path_of(p, sizeof p, dir, "metrics.jsonl");
    FILE *f = fopen(p, "r");
    int n = 0;
    while (f && n < max && fgets(buf, sizeof buf, f)) {
        assert_true(buf[strlen(buf) - 1] == '\n');
        json_error_t je;
        out[n] = json_loads(buf, 0, &je);
        assert_non_null(out[n]);
        n++;
    }
    if (f)
        fclose(f);
    return n;
}

static void clean(const char *dir)
{
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s/%s'", WORK, dir);
    assert_int_equal(system(cmd), 0);
}

static double num(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    assert_true(json_is_number(v));
    return json_number_value(v);
}

/* DESIGN.md, Metrics: 3 x (L x layer forward + LM head) x sequences, MHA, FFN 4h. */
static double model_flops_per_step(int sequences)
{
    double s = T, h = C, f = 4.0 * C;
    double layer = 2 * s * (h * (h + 2 * h) + h * h + 2 * h * f) + 4 * s * s * h;
    return 3.0 * (NL * layer + 2 * s * h * V) * sequences;
}

static int argv_has(json_t *cfg, const char *a, const char *b)
{
    json_t *argv = json_object_get(cfg, "argv");
    for (size_t i = 0; i + 1 < json_array_size(argv); i++)
        if (!strcmp(json_string_value(json_array_get(argv, i)), a) &&
            !strcmp(json_string_value(json_array_get(argv, i + 1)), b))
            return 1;
    return 0;
}

static void config_metrics_and_summary_match_the_run(void **state)
{
    (void)state;
    clean("rd_basic");
    char args[4096];
    snprintf(args, sizeof args, "--steps 4 --micro-batch 2 --global-batch 4 --seed 3 --lr 0.002 --run-dir %s/rd_basic",
             WORK);
    int n;
    assert_int_equal(run_dtrain(DTRAIN, args, L, 64, &n, ERR, sizeof ERR), 0);
    assert_int_equal(n, 5);

    json_t *cfg = load("rd_basic", "config.json");
    assert_non_null(cfg);
    assert_true(argv_has(cfg, "--lr", "0.002") && argv_has(cfg, "--seed", "3"));
    json_t *opt = json_object_get(cfg, "options");
    assert_int_equal(num(opt, "steps"), 4);
    assert_int_equal(num(opt, "micro_batch"), 2);
    assert_int_equal(num(opt, "global_batch"), 4);
    assert_int_equal(num(opt, "seed"), 3);
    assert_true(num(opt, "lr") == 0.002);
    assert_true(num(opt, "weight_decay") == 0.1); /* a default, recorded too */
    assert_int_equal(num(opt, "warmup"), 0);      /* steps / 10 */
    assert_string_equal(json_string_value(json_object_get(cfg, "precision")), "fp32");
    json_t *model = json_object_get(cfg, "model");
    /* GPT-2 parameters: V C + T C + L (12 C^2 + 13 C) + 2 C */
    assert_int_equal(num(model, "params"), V * C + T * C + NL * (12 * C * C + 13 * C) + 2 * C);
    json_t *lay = json_object_get(cfg, "layout");
    assert_int_equal(num(lay, "world_size"), 1);
    assert_int_equal(num(lay, "tp") * num(lay, "pp") * num(lay, "dp"), 1);
    assert_int_equal(num(lay, "ep"), 1); /* no experts: every expert (none) on each rank */
    assert_true(json_is_null(json_object_get(json_object_get(cfg, "device"), "peak_tflops")));
    json_t *git = json_object_get(cfg, "dtrain");
    const char *rev = json_string_value(json_object_get(git, "git_revision"));
    assert_non_null(rev);
    if (strcmp(rev, "unknown")) {
        assert_int_equal(strlen(rev), 40);
        assert_int_equal(strspn(rev, "0123456789abcdef"), 40);
        assert_true(json_is_boolean(json_object_get(git, "git_dirty")));
    } else {
        assert_true(json_is_null(json_object_get(git, "git_dirty")));
    }
    assert_non_null(json_string_value(json_object_get(cfg, "hostname")));
    assert_non_null(json_string_value(json_object_get(cfg, "start_time")));

    json_t *m[64];
    int k = load_metrics("rd_basic", m, 64);
    assert_int_equal(k, 4);
    double tokens = 0, time = 0;
    for (int i = 0; i < k; i++) {
        assert_int_equal(num(m[i], "step"), i + 1);
        assert_true((float)num(m[i], "loss") == (float)num(L[i], "loss"));
        assert_true((float)num(m[i], "grad_norm") == (float)num(L[i], "grad_norm"));
        assert_true((float)num(m[i], "lr") == (float)num(L[i], "lr"));
        assert_true(num(m[i], "loss_scale") == 1.0);
        double dt = num(m[i], "step_time_s");
        assert_true(dt > 0);
        /* the whole job's tokens: 4 sequences of 64 */
        assert_true(fabs(num(m[i], "tokens_per_s") * dt - 4.0 * T) < 1e-9 * 4 * T);
        assert_true(json_is_null(json_object_get(m[i], "mfu")));
        tokens += 4.0 * T;
        time += dt;
        json_decref(m[i]);
    }
    json_t *sum = load("rd_basic", "summary.json");
    assert_non_null(sum);
    assert_true((float)num(sum, "final_loss") == (float)num(L[4], "loss"));
    assert_string_equal(json_string_value(json_object_get(sum, "params_crc32")),
                        json_string_value(json_object_get(L[4], "params_crc32")));
    assert_int_equal(num(sum, "steps"), 4);
    assert_true(fabs(num(sum, "mean_tokens_per_s") - tokens / time) < 1e-9 * tokens / time);
    assert_true(num(sum, "wall_s") >= time);
    /* the profile, as --profile writes it */
    json_t *prof = load("rd_basic", "profile.json");
    assert_true(json_array_size(json_object_get(prof, "ops")) > 0);
    json_decref(prof);
    json_decref(sum);
    json_decref(cfg);
    free_lines(L, n);
}

static void mfu_is_model_flops_over_time_and_peak(void **state)
{
    (void)state;
    clean("rd_mfu");
    char args[4096];
    snprintf(args, sizeof args, "--steps 3 --micro-batch 2 --global-batch 4 --peak-tflops 0.25 --run-dir %s/rd_mfu", WORK);
    int n;
    assert_int_equal(run_dtrain(DTRAIN, args, L, 64, &n, ERR, sizeof ERR), 0);
    json_t *m[64];
    int k = load_metrics("rd_mfu", m, 64);
    assert_int_equal(k, 3);
    for (int i = 0; i < k; i++) {
        double want = model_flops_per_step(4) / (num(m[i], "step_time_s") * 1 * 0.25e12);
        assert_true(fabs(num(m[i], "mfu") - want) <= 1e-12 * want);
        json_decref(m[i]);
    }
    json_t *cfg = load("rd_mfu", "config.json");
    assert_true(num(json_object_get(cfg, "device"), "peak_tflops") == 0.25);
    assert_true(fabs(num(cfg, "model_flops_per_step") - model_flops_per_step(4)) < 1e-6);
    json_decref(cfg);
    free_lines(L, n);
}

/* zlib's CRC32 of a whole file, as 8 hex digits; *bytes gets its size. */
static void file_crc(const char *path, char out[9], long *bytes)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    uLong c = crc32(0L, Z_NULL, 0);
    unsigned char buf[65536];
    size_t got;
    *bytes = 0;
    while ((got = fread(buf, 1, sizeof buf, f)) > 0) {
        c = crc32(c, buf, (uInt)got);
        *bytes += (long)got;
    }
    fclose(f);
    snprintf(out, 9, "%08lx", c);
}

/* checkpoints.json's on-disk entries are exactly the complete checkpoints in ckpt (any order). */
static void check_checkpoints(const char *run, const char *ckpt, int expect_on_disk)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/%s", WORK, ckpt);
    json_t *doc = load(run, "checkpoints.json");
    assert_non_null(doc);
    json_t *list = json_object_get(doc, "checkpoints");
    int on_disk = 0;
    for (size_t i = 0; i < json_array_size(list); i++) {
        json_t *e = json_array_get(list, i);
        char sdir[4200], man_path[4300];
        snprintf(sdir, sizeof sdir, "%s/step-%08d", dir, (int)num(e, "step"));
        snprintf(man_path, sizeof man_path, "%s/manifest.json", sdir);
        int present = access(man_path, F_OK) == 0;
        assert_int_equal(json_is_true(json_object_get(e, "on_disk")), present);
        if (!present)
            continue;
        on_disk++;
        json_t *man = json_load_file(man_path, 0, NULL);
        json_t *ms = json_object_get(man, "shards"), *es = json_object_get(e, "shards");
        assert_int_equal(json_array_size(ms), json_array_size(es));
        for (size_t r = 0; r < json_array_size(ms); r++) {
            json_t *a = json_array_get(ms, r), *b = json_array_get(es, r);
            assert_string_equal(json_string_value(json_object_get(a, "crc32")),
                                json_string_value(json_object_get(b, "crc32")));
            char shard[4400], crc[9];
            long bytes;
            snprintf(shard, sizeof shard, "%s/%s", sdir, json_string_value(json_object_get(b, "file")));
            file_crc(shard, crc, &bytes);
            assert_string_equal(crc, json_string_value(json_object_get(b, "crc32")));
            assert_int_equal(bytes, num(b, "bytes"));
        }
        json_decref(man);
    }
    /* and nothing complete on disk is missing from the list */
    int complete = 0;
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        char man_path[4400];
        snprintf(man_path, sizeof man_path, "%s/%s/manifest.json", dir, de->d_name);
        complete += !strncmp(de->d_name, "step-", 5) && access(man_path, F_OK) == 0;
    }
    if (d)
        closedir(d);
    assert_int_equal(complete, on_disk);
    assert_int_equal(on_disk, expect_on_disk);
    json_decref(doc);
}

static void checkpoints_json_lists_the_checkpoints_on_disk(void **state)
{
    (void)state;
    clean("rd_ck");
    clean("ck");
    char args[4096];
    snprintf(args, sizeof args,
             "--steps 6 --micro-batch 2 --ckpt-dir %s/ck --ckpt-every 2 --ckpt-keep 2 --run-dir %s/rd_ck", WORK,
             WORK);
    int n;
    assert_int_equal(run_dtrain(DTRAIN, args, L, 64, &n, ERR, sizeof ERR), 0);
    free_lines(L, n);
    check_checkpoints("rd_ck", "ck", 2); /* steps 4 and 6; step 2 pruned by --ckpt-keep 2 */
    json_t *doc = load("rd_ck", "checkpoints.json");
    assert_int_equal(json_array_size(json_object_get(doc, "checkpoints")), 3);
    json_decref(doc);
}

static void an_existing_run_is_refused_and_resume_appends(void **state)
{
    (void)state;
    clean("rd_res");
    clean("ck_res");
    clean("rd_ref");
    char args[4096];
    int n;
    /* the reference: 6 steps uninterrupted */
    snprintf(args, sizeof args, "--steps 6 --micro-batch 2 --run-dir %s/rd_ref", WORK);
    assert_int_equal(run_dtrain(DTRAIN, args, L, 64, &n, ERR, sizeof ERR), 0);
    free_lines(L, n);
    /* the same run again into the same folder: refused, nothing changed */
    assert_int_equal(run_dtrain(DTRAIN, args, L, 64, &n, ERR, sizeof ERR), 2);
    free_lines(L, n);
    assert_non_null(strstr(ERR, "--run-dir"));
    assert_non_null(strstr(ERR, "rd_ref/config.json"));
    json_t *ref[64];
    assert_int_equal(load_metrics("rd_ref", ref, 64), 6);

    /* killed after step 5 with a checkpoint at 4, then resumed: step 5 is redone */
    snprintf(args, sizeof args,
             "--steps 6 --micro-batch 2 --ckpt-dir %s/ck_res --ckpt-every 2 --ckpt-sync --stop-after 5 --run-dir "
             "%s/rd_res",
             WORK, WORK);
    assert_int_equal(run_dtrain(DTRAIN, args, L, 64, &n, ERR, sizeof ERR), 0);
    free_lines(L, n);
    json_t *m[64];
    int k = load_metrics("rd_res", m, 64);
    assert_int_equal(k, 5);
    for (int i = 0; i < k; i++)
        json_decref(m[i]);
    char sum[4096];
    path_of(sum, sizeof sum, "rd_res", "summary.json");
    assert_int_not_equal(access(sum, F_OK), 0); /* stopped as if killed: no summary */
    strcat(args, " --resume");
    char *stop = strstr(args, "--stop-after 5 ");
    memset(stop, ' ', strlen("--stop-after 5"));
    assert_int_equal(run_dtrain(DTRAIN, args, L, 64, &n, ERR, sizeof ERR), 0);
    free_lines(L, n);
    k = load_metrics("rd_res", m, 64);
    assert_int_equal(k, 6);
    for (int i = 0; i < k; i++) {
        assert_int_equal(num(m[i], "step"), i + 1);
        /* bit-exact resume: the uninterrupted run's losses */
        assert_true(num(m[i], "loss") == num(ref[i], "loss"));
        json_decref(m[i]);
        json_decref(ref[i]);
    }
    json_t *cfg = load("rd_res", "config.json");
    json_t *resumes = json_object_get(cfg, "resumes");
    assert_int_equal(json_array_size(resumes), 1);
    assert_int_equal(num(json_array_get(resumes, 0), "first_step"), 5);
    json_decref(cfg);
    check_checkpoints("rd_res", "ck_res", 3);
    json_t *s = load("rd_res", "summary.json");
    assert_int_equal(num(s, "steps"), 6);
    assert_int_equal(num(s, "steps_this_launch"), 2);
    json_decref(s);
}

static void an_unwritable_folder_is_a_clear_error(void **state)
{
    (void)state;
    char args[4096], file[2048];
    /* a path under a regular file: unwritable even for root (read-only modes are not) */
    snprintf(file, sizeof file, "%s/plain_file", WORK);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fclose(f);
    snprintf(args, sizeof args, "--steps 2 --micro-batch 2 --run-dir %s/sub", file);
    int n;
    assert_int_equal(run_dtrain(DTRAIN, args, L, 64, &n, ERR, sizeof ERR), 2);
    free_lines(L, n);
    assert_non_null(strstr(ERR, "--run-dir"));
    assert_non_null(strstr(ERR, "plain_file/sub"));
    snprintf(args, sizeof args, "--steps 2 --peak-tflops -1 --run-dir %s/x", WORK);
    assert_int_equal(run_dtrain(DTRAIN, args, L, 64, &n, ERR, sizeof ERR), 2);
    free_lines(L, n);
    assert_non_null(strstr(ERR, "--peak-tflops"));
}

/* Files filling up (capped by ulimit -f: EFBIG, as a full disk gives ENOSPC): metrics.jsonl's
 * short append and the profile's write are reported with the real errno, not one an earlier
 * call left behind, and the run exits 1. */
static void a_full_disk_is_reported_with_its_errno(void **state)
{
    (void)state;
    char args[4096];
    clean("rd_full");
    snprintf(args, sizeof args, "--steps 60 --micro-batch 2 --run-dir %s/rd_full --log-json /dev/null", WORK);
    assert_int_equal(run_dtrain_sh("trap '' XFSZ; ulimit -f 8; exec", DTRAIN, args, ERR, sizeof ERR), 1);
    if (!strstr(ERR, "rd_full/metrics.jsonl: File too large") || !strstr(ERR, "rd_full/profile.json: File too large"))
        fail_msg("stderr was: %s", ERR);
}

static void a_multi_rank_run_is_recorded_by_rank_0(void **state)
{
    (void)state;
    if (!MPIRUN)
        skip();
    clean("rd_mpi");
    clean("ck_mpi");
    char launcher[2048], args[4096];
    snprintf(launcher, sizeof launcher, "%s' --oversubscribe -np 4 '%s", MPIRUN, DTRAIN);
    snprintf(args, sizeof args,
             "--tp 2 --dp 2 --steps 3 --micro-batch 2 --global-batch 4 --peak-tflops 0.1 --ckpt-dir %s/ck_mpi "
             "--ckpt-every 2 --run-dir %s/rd_mpi",
             WORK, WORK);
    int n;
    assert_int_equal(run_dtrain(launcher, args, L, 64, &n, ERR, sizeof ERR), 0);
    json_t *cfg = load("rd_mpi", "config.json");
    assert_int_equal(num(json_object_get(cfg, "layout"), "world_size"), 4);
    assert_int_equal(num(json_object_get(cfg, "layout"), "tp"), 2);
    json_decref(cfg);
    json_t *m[64];
    int k = load_metrics("rd_mpi", m, 64);
    assert_int_equal(k, 3); /* one writer: no duplicated lines */
    for (int i = 0; i < k; i++) {
        assert_true((float)num(m[i], "loss") == (float)num(L[i], "loss"));
        double want = model_flops_per_step(4) / (num(m[i], "step_time_s") * 4 * 0.1e12);
        assert_true(fabs(num(m[i], "mfu") - want) <= 1e-12 * want);
        json_decref(m[i]);
    }
    free_lines(L, n);
    check_checkpoints("rd_mpi", "ck_mpi", 1);
    json_t *ck = load("rd_mpi", "checkpoints.json");
    assert_int_equal(json_array_size(json_object_get(json_array_get(json_object_get(ck, "checkpoints"), 0), "shards")), 4);
    json_decref(ck);
    /* the same folder again: every rank stops (no hang), exit 2 */
    char timed[2200];
    snprintf(timed, sizeof timed, "timeout' 60 '%s", launcher); /* a hang would give 124 */
    assert_int_equal(run_dtrain(timed, args, L, 64, &n, ERR, sizeof ERR), 2);
    free_lines(L, n);
    assert_non_null(strstr(ERR, "rd_mpi/config.json"));
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: test_run_dir DTRAIN WORKDIR [MPIRUN]\n");
        return 2;
    }
    DTRAIN = argv[1];
    WORK = argv[2];
    MPIRUN = argc > 3 ? argv[3] : NULL;
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1); /* CI runs as root */
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(config_metrics_and_summary_match_the_run),
        cmocka_unit_test(mfu_is_model_flops_over_time_and_peak),
        cmocka_unit_test(checkpoints_json_lists_the_checkpoints_on_disk),
        cmocka_unit_test(an_existing_run_is_refused_and_resume_appends),
        cmocka_unit_test(an_unwritable_folder_is_a_clear_error),
        cmocka_unit_test(a_full_disk_is_reported_with_its_errno),
        cmocka_unit_test(a_multi_rank_run_is_recorded_by_rank_0),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
