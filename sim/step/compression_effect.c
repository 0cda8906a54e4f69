/* See compression_effect.h. The stage compared is the one whose uncompressed DP gradient
 * synchronisation takes longest (ties: the lowest); every figure is per step, on one GPU of
 * that stage, from the cost model's idle-cluster durations (not from the replay, so that it
 * is the same at both fidelities and does not depend on what overlap hides):
 *  bytes_ratio  = DP wire bytes per rank with / without compression;
 *  comm_saved_s = DP collective time without minus with, summed over the stage's buckets;
 *  compute_s    = compression compute added (compress, select, quantise, orthogonalise,
 *                 decompress, scatter-add), summed over the buckets. A plain narrower
 *                 grad_reduce_dtype (fp32 training reduced in bf16/fp16) is reported too;
 *                 the builder folds its casts into the collective's time, so comm_saved_s is
 *                 net of them and compute_s is 0. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include "compression.h"
#include "compression_effect.h"

int compression_effect_fill(const scenario_config *s, const step_workload *w, compression_effect *e,
                            config_error *err)
{
    memset(e, 0, sizeof *e);
    char what[sizeof e->method];
    if (!compression_describe(s, what, sizeof what)[0])
        return 0;
    scenario_config off = *s; /* shallow: only read while building */
    off.parallel.grad_compression = GRAD_COMPRESSION_NONE;
    off.parallel.grad_reduce_bytes = 0;
    off.parallel.grad_reduce_int8 = 0;
    step_workload plain;
    if (workload_build(&off, &plain, err) != 0)
        return -1;
    int stage = 0;
    double worst = -1;
    dp_sync_totals with, without;
    for (int p = 0; p < plain.stages; p++) {
        compression_totals(&plain, p, &without);
        if (without.comm_s > worst) {
            worst = without.comm_s;
            stage = p;
        }
    }
    compression_totals(&plain, stage, &without);
    compression_totals(w, stage, &with);
    workload_free(&plain);
    e->present = 1;
    e->stage = stage;
    memcpy(e->method, what, sizeof what);
    e->bytes_ratio = without.wire_bytes > 0 ? with.wire_bytes / without.wire_bytes : 1;
    e->comm_saved_s = without.comm_s - with.comm_s;
    e->compute_s = with.compute_s;
    e->comm_without_s = without.comm_s;
    return 0;
}

void compression_effect_json(const compression_effect *e, void *doc)
{
    if (!e->present)
        return;
    json_object_set_new(doc, "compression",
                        json_pack("{s:s,s:i,s:f,s:f,s:f,s:f}", "method", e->method, "stage",
                                  e->stage, "bytes_ratio", e->bytes_ratio,
                                  "comm_without_s", e->comm_without_s, "comm_saved_s",
                                  e->comm_saved_s, "compute_s", e->compute_s));
}

void compression_effect_print(const compression_effect *e, void *file)
{
    if (!e->present)
        return;
    if (strstr(e->method, "-bit reduction")) { /* the builder's cast, not a compressor */
        fprintf(file, "  compression  %s: DP wire bytes x%.3f; DP comm %.4f s saved of %.4f s, the casts included "
                      "(stage %d, per step, idle-cluster times)\n",
                e->method, e->bytes_ratio, e->comm_saved_s,
                e->comm_without_s, e->stage);
        return;
    }
    fprintf(file, "  compression  %s: DP wire bytes x%.3f; DP comm %.4f s saved of %.4f s, compute %.4f s added "
                  "(stage %d, per step, idle-cluster times)\n",
            e->method, e->bytes_ratio, e->comm_saved_s,
            e->comm_without_s, e->compute_s, e->stage);
}
