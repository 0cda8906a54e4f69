/* The closed loop; see closed_loop.h. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "cal_writer.h"
#include "closed_loop.h"
#include "config.h"
#include "cost.h"
#include "run.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* dtrain's model sizes, from its own name table (tiny) or a JSON file. */
static int model_dims(const char *model, long long d[5])
{
    if (!strcmp(model, "tiny")) {
        long long t[5] = {4, 128, 4, 64, 256};
        memcpy(d, t, sizeof t);
        return 0;
    }
    if (!strcmp(model, "small")) {
        long long t[5] = {12, 768, 12, 1024, 50304};
        memcpy(d, t, sizeof t);
        return 0;
    }
    json_error_t je;
    json_t *j = json_load_file(model, 0, &je);
    if (!j)
        return -1;
    const char *keys[5] = {"num_layers", "hidden", "heads", "seq_len", "vocab"};
    for (int i = 0; i < 5; i++)
        d[i] = json_integer_value(json_object_get(j, keys[i]));
    if (!d[4])
        d[4] = 256;
    json_decref(j);
    return 0;
}

int closed_loop_run(const closed_loop_options *o)
{
    char log[] = "/tmp/dtcal_loop_XXXXXX", prof[64], cmd[4096];
    int fd = mkstemp(log);
    if (fd < 0)
        return 1;
    close(fd);
    snprintf(prof, sizeof prof, "%s.profile.json", log);
    snprintf(cmd, sizeof cmd, "'%s' --device %s --model %s --micro-batch %d --steps %d --log-json %s --profile %s",
             o->dtrain, o->device, o->model, o->micro_batch, o->steps, log, prof);
    fprintf(stderr, "dtcal validate: measuring: %s\n", cmd);
    int st = system(cmd);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "dtcal validate: dtrain failed (status %d)\n", st);
        return 1;
    }
    /* Measured: the median step time of the steps after the first (warm-up). */
    FILE *f = fopen(log, "r");
    double times[4096];
    int n = 0;
    char line[8192];
    while (f && fgets(line, sizeof line, f) && n < 4096) {
        json_error_t je;
        json_t *j = json_loads(line, 0, &je);
        if (j && json_object_get(j, "step_time_s") && json_integer_value(json_object_get(j, "step")) > 1)
            times[n++] = json_number_value(json_object_get(j, "step_time_s"));
        json_decref(j);
    }
    if (f)
        fclose(f);
    if (n == 0) {
        fprintf(stderr, "dtcal validate: no step times in dtrain's log (use --steps >= 2)\n");
        return 1;
    }
    qsort(times, (size_t)n, sizeof(double), cmp_double);
    double measured = times[n / 2], spread_lo = times[n / 10], spread_hi = times[(n * 9) / 10];

    /* Predicted: the same model, batch and precision on the platform with the calibration. */
    long long d[5];
    if (model_dims(o->model, d) != 0) {
        fprintf(stderr, "dtcal validate: --model %s: cannot read its sizes\n", o->model);
        return 2;
    }
    json_t *scen = json_pack("{s:s,s:s,s:s,s:{s:I,s:I,s:I,s:I,s:I,s:I,s:s},s:{s:i,s:i,s:s},s:{s:i,s:i,s:i}}", "name",
                             "dtcal-closed-loop", "platform", o->platform, "calibration", o->calibration, "model",
                             "num_layers", d[0], "hidden_size", d[1], "num_attention_heads", d[2], "ffn_hidden_size",
                             4 * d[1], "seq_length", d[3], "vocab_size", d[4], "attention", "flash", "training",
                             "global_batch_size", o->micro_batch, "micro_batch_size", o->micro_batch, "precision",
                             "fp32", "parallel", "tensor_model_parallel_size", 1, "pipeline_model_parallel_size", 1,
                             "data_parallel_size", 1);
    scenario_config s;
    config_error err;
    if (scenario_load_json(scen, ".", NULL, 0, &s, &err) != 0) {
        fprintf(stderr, "dtcal validate: %s\n", err.msg);
        json_decref(scen);
        return 2;
    }
    json_decref(scen);
    run_result r;
    if (run_scenario(&s, &r, &err) != 0) {
        fprintf(stderr, "dtcal validate: %s\n", err.msg);
        scenario_free(&s);
        return 1;
    }
    double predicted = r.step_time_s, error = (predicted - measured) / measured;

    /* Op by op: the profile's forward ops of layer 0 against the cost model's. */
    json_t *ops = json_array();
    json_error_t je;
    json_t *p = json_load_file(prof, 0, &je);
    layer_shape sh = {o->micro_batch, d[3], d[1], d[2], d[2], 4 * d[1], 0, 0, 0, 1, 1, 1, 0, ATTENTION_FLASH, 4};
    layer_op lops[LAYER_OPS_MAX];
    int nl = layer_ops_forward(&sh, lops);
    cost_model cm;
    cost_model_init(&cm, &s);
    printf("%-12s %12s %12s %9s\n", "op (layer 0)", "measured ms", "predicted ms", "error");
    for (int i = 0; i < nl && p; i++) {
        const char *name = !strcmp(lops[i].name, "attn_fused") ? "attention" : lops[i].name;
        double meas = -1;
        json_t *arr = json_object_get(p, "ops"), *e;
        size_t k;
        json_array_foreach(arr, k, e) if (json_integer_value(json_object_get(e, "layer")) == 0 &&
                                          !strcmp(json_string_value(json_object_get(e, "op")), name))
            meas = json_number_value(json_object_get(e, "mean_s"));
        double pred = cost_compute_op_s(&cm, &lops[i]);
        if (meas < 0)
            continue;
        printf("%-12s %12.4f %12.4f %+8.1f%%\n", name, meas * 1e3, pred * 1e3, 100 * (pred - meas) / meas);
        json_array_append_new(ops, json_pack("{s:s,s:f,s:f,s:f}", "op", name, "measured_s", meas, "predicted_s", pred,
                                             "error", (pred - meas) / meas));
    }
    /* Backward: the engine times each GEMM's dgrad + wgrad as one "<name>_bwd". */
    nl = layer_ops_backward(&sh, lops);
    const char *seen[LAYER_OPS_MAX];
    int nseen = 0;
    for (int i = 0; i < nl && p; i++) {
        char name[64];
        snprintf(name, sizeof name, "%s", lops[i].name);
        char *cut = strstr(name, "_dgrad");
        if (!cut)
            cut = strstr(name, "_wgrad");
        if (cut)
            strcpy(cut, "_bwd");
        if (!strcmp(name, "attn_fused_bwd"))
            snprintf(name, sizeof name, "attention_bwd");
        int dup = 0;
        for (int q = 0; q < nseen; q++)
            dup |= !strcmp(seen[q], lops[i].name) || (cut && !strncmp(seen[q], lops[i].name, (size_t)(cut - name)));
        double pred = 0;
        for (int q = 0; q < nl; q++) {
            char other[64];
            snprintf(other, sizeof other, "%s", lops[q].name);
            char *c2 = strstr(other, "_dgrad");
            if (!c2)
                c2 = strstr(other, "_wgrad");
            if (c2)
                strcpy(c2, "_bwd");
            if (!strcmp(other, "attn_fused_bwd"))
                snprintf(other, sizeof other, "attention_bwd");
            if (!strcmp(other, name))
                pred += cost_compute_op_s(&cm, &lops[q]);
        }
        if (dup || nseen >= LAYER_OPS_MAX)
            continue;
        seen[nseen++] = lops[i].name;
        double meas = -1;
        json_t *arr = json_object_get(p, "ops"), *e;
        size_t k;
        json_array_foreach(arr, k, e) if (json_integer_value(json_object_get(e, "layer")) == 0 &&
                                          !strcmp(json_string_value(json_object_get(e, "op")), name))
            meas = json_number_value(json_object_get(e, "mean_s"));
        if (meas < 0) {
            printf("%-14s %12s %12.4f   (the engine has no such kernel)\n", name, "-", pred * 1e3);
            continue;
        }
        printf("%-14s %12.4f %12.4f %+8.1f%%\n", name, meas * 1e3, pred * 1e3, 100 * (pred - meas) / meas);
        json_array_append_new(ops, json_pack("{s:s,s:f,s:f,s:f}", "op", name, "measured_s", meas, "predicted_s", pred,
                                             "error", (pred - meas) / meas));
    }
    json_decref(p);
    printf("step time: measured %.4f s (median of %d steps; 10-90%% spread %.4f-%.4f s), predicted %.4f s, "
           "error %+.1f%%\n", measured, n, spread_lo, spread_hi, predicted, 100 * error);
    int rc = 0;
    if (o->json_path) {
        json_t *doc = json_pack("{s:f,s:f,s:f,s:f,s:f,s:o}", "measured_step_time_s", measured, "predicted_step_time_s",
                                predicted, "error", error, "measured_p10_s", spread_lo, "measured_p90_s", spread_hi,
                                "ops", ops);
        rc = cal_write(doc, o->json_path) ? 1 : 0;
        json_decref(doc);
    } else {
        json_decref(ops);
    }
    scenario_free(&s);
    unlink(log);
    unlink(prof);
    char trace[128];
    snprintf(trace, sizeof trace, "%s.trace.json", prof);
    unlink(trace);
    return rc;
}
