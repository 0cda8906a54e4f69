/* Pipeline schedules (see schedule.h): GPipe, 1F1B (PipeDream-Flush) and interleaved 1F1B
 * (Narayanan et al., SC'21), as Megatron-LM orders them.
 *
 * 1F1B: stage s runs min(p-s-1, m) warm-up forwards, then pairs (one forward, one backward)
 * while forwards remain, then the remaining backwards (cool-down).
 * Interleaved: the same shape over m*v (chunk, micro-batch) pairs with Megatron-LM's warm-up
 * min(2(p-s-1) + (v-1)p, m*v) and its default micro-batch group of p per chunk (the k-th
 * forward runs chunk (k/p)%v on micro-batch (k/(pv))*p + k%p; backwards visit the chunks in
 * reverse). Megatron-LM's older releases ran everything as warm-up when m == p; current ones
 * (get_pp_rank_microbatches) do not, and neither does this. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "schedule.h"

int pipeline_kind_from_name(const char *name)
{
    if (!strcmp(name, "gpipe")) return PIPELINE_GPIPE;
    if (!strcmp(name, "1f1b")) return PIPELINE_1F1B;
    if (!strcmp(name, "interleaved")) return PIPELINE_INTERLEAVED;
    return -1;
}

const char *pipeline_kind_name(pipeline_kind kind)
{
    switch (kind) {
    case PIPELINE_GPIPE: return "gpipe";
    case PIPELINE_1F1B: return "1f1b";
    case PIPELINE_INTERLEAVED: return "interleaved";
    }
    return "?";
}

int pipeline_virtual_stage(int stages, int stage, int chunk)
{
    return chunk * stages + stage;
}

/* The k-th forward (or backward) of a stage under interleaving: micro-batches go in groups
 * of p through chunk 0, then the same group through chunk 1, ...; backwards visit the chunks
 * in reverse. */
static pipe_action interleaved_action(int k, int p, int v, pipe_phase phase)
{
    pipe_action a;
    a.phase = phase;
    int group = k / (p * v);
    int in_group = k % (p * v);
    a.chunk = in_group / p;
    if (phase == PIPE_BACKWARD)
        a.chunk = v - 1 - a.chunk;
    a.micro_batch = group * p + in_group % p;
    return a;
}

static pipe_action simple_action(int k, pipe_phase phase)
{
    pipe_action a = {phase, k, 0};
    return a;
}

int pipeline_schedule_check(pipeline_kind kind, int stages, int micro_batches, int chunks, char *err,
                            size_t errlen)
{
    if (stages < 1 || micro_batches < 1 || chunks < 1) {
        snprintf(err, errlen, "stages (%d), micro-batches (%d) and chunks (%d) must be >= 1", stages,
                 micro_batches, chunks);
        return -1;
    }
    if (kind == PIPELINE_INTERLEAVED) {
        if (chunks < 2) {
            snprintf(err, errlen, "the interleaved schedule needs at least 2 model chunks per stage, got %d",
                     chunks);
            return -1;
        }
        if (micro_batches % stages != 0) {
            snprintf(err, errlen,
                     "the interleaved schedule needs micro-batches (%d) to be a multiple of the pipeline "
                     "stages (%d)", micro_batches, stages);
            return -1;
        }
    } else if (chunks != 1) {
        snprintf(err, errlen, "%d model chunks per stage need the interleaved schedule", chunks);
        return -1;
    } else if (kind != PIPELINE_GPIPE && kind != PIPELINE_1F1B) {
        snprintf(err, errlen, "unknown schedule kind %d", (int)kind);
        return -1;
    }
    return 0;
}

/* The forwards stage st runs before its first backward (outside GPipe), of its `total`. */
static int warmup_forwards(pipeline_kind kind, int stages, int chunks, int st, int total)
{
    int warmup = kind == PIPELINE_1F1B ? stages - st - 1 : (stages - st - 1) * 2 + (chunks - 1) * stages;
    return warmup > total ? total : warmup;
}

int pipeline_peak_in_flight(pipeline_kind kind, int stages, int micro_batches, int chunks, int stage)
{
    int total = micro_batches * chunks;
    if (kind == PIPELINE_GPIPE)
        return total;
    /* the warm-up's forwards are held, and the first steady-state forward joins them before the
     * first backward lets one go; after that each forward is paired with a backward */
    int warmup = warmup_forwards(kind, stages, chunks, stage, total);
    return warmup < total ? warmup + 1 : total;
}

int pipeline_schedule_build(pipeline_schedule *s, pipeline_kind kind, int stages, int micro_batches,
                            int chunks, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    if (pipeline_schedule_check(kind, stages, micro_batches, chunks, err, errlen) != 0)
        return -1;
    s->kind = kind;
    s->stages = stages;
    s->micro_batches = micro_batches;
    s->chunks = chunks;
    s->count = calloc((size_t)stages, sizeof *s->count);
    s->actions = calloc((size_t)stages, sizeof *s->actions);
    if (!s->count || !s->actions) {
        pipeline_schedule_free(s);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int total = micro_batches * chunks; /* forwards (and backwards) per stage */
    for (int st = 0; st < stages; st++) {
        pipe_action *a = calloc((size_t)total * 2, sizeof *a);
        if (!a) {
            pipeline_schedule_free(s);
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        s->actions[st] = a;
        s->count[st] = 2 * total;
        int n = 0;
        if (kind == PIPELINE_GPIPE) {
            /* All forwards, then all backwards in the same micro-batch order (0..m-1), as
             * Narayanan et al. (SC'21, Fig. 3) and PipeDream draw GPipe. GPipe's own figure
             * runs the backwards in reverse; either order gives the same bubble
             * (p-1)/(m+p-1) and the same peak (m micro-batches held). */
            for (int k = 0; k < total; k++)
                a[n++] = simple_action(k, PIPE_FORWARD);
            for (int k = 0; k < total; k++)
                a[n++] = simple_action(k, PIPE_BACKWARD);
            continue;
        }
        int warmup = warmup_forwards(kind, stages, chunks, st, total);
        int f = 0, b = 0;
        for (; f < warmup; f++)
            a[n++] = kind == PIPELINE_1F1B ? simple_action(f, PIPE_FORWARD)
                                           : interleaved_action(f, stages, chunks, PIPE_FORWARD);
        /* Steady state: one forward, one backward. */
        while (f < total) {
            a[n++] = kind == PIPELINE_1F1B ? simple_action(f, PIPE_FORWARD)
                                           : interleaved_action(f, stages, chunks, PIPE_FORWARD);
            f++;
            a[n++] = kind == PIPELINE_1F1B ? simple_action(b, PIPE_BACKWARD)
                                           : interleaved_action(b, stages, chunks, PIPE_BACKWARD);
            b++;
        }
        /* Cool-down: the remaining backwards. */
        while (b < total) {
            a[n++] = kind == PIPELINE_1F1B ? simple_action(b, PIPE_BACKWARD)
                                           : interleaved_action(b, stages, chunks, PIPE_BACKWARD);
            b++;
        }
    }
    return 0;
}

void pipeline_schedule_free(pipeline_schedule *s)
{
    if (s->actions)
        for (int i = 0; i < s->stages; i++)
            free(s->actions[i]);
    free(s->actions);
    free(s->count);
    memset(s, 0, sizeof *s);
}

int pipeline_schedule_peak_in_flight(const pipeline_schedule *s, int stage)
{
    int live = 0, peak = 0;
    for (int i = 0; i < s->count[stage]; i++) {
        live += s->actions[stage][i].phase == PIPE_FORWARD ? 1 : -1;
        if (live > peak)
            peak = live;
    }
    return peak;
}

/* The split's rules, stage by stage: stage st's layers (over all its chunks), or -1 with err. */
static int stage_count(int num_layers, int stages, int chunks, const int *stage_layers, int st, char *err,
                       size_t errlen)
{
    int n;
    if (stage_layers) {
        n = stage_layers[st];
    } else {
        if (num_layers % stages != 0) {
            snprintf(err, errlen, "%d layers do not split equally over %d pipeline stages", num_layers, stages);
            return -1;
        }
        n = num_layers / stages;
    }
    if (n < chunks) {
        snprintf(err, errlen, "stage %d has %d layers, fewer than its %d model chunks", st, n, chunks);
        return -1;
    }
    return n;
}

int pipeline_layer_split(int num_layers, int stages, int chunks, const int *stage_layers, int *layers_out,
                         char *err, size_t errlen)
{
    if (stages < 1 || chunks < 1 || num_layers < 1) {
        snprintf(err, errlen, "layers (%d), stages (%d) and chunks (%d) must be >= 1", num_layers, stages, chunks);
        return -1;
    }
    int sum = 0;
    for (int st = 0; st < stages; st++) {
        int n = stage_count(num_layers, stages, chunks, stage_layers, st, err, errlen);
        if (n < 0)
            return -1;
        sum += n;
        for (int c = 0; layers_out && c < chunks; c++)
            layers_out[pipeline_virtual_stage(stages, st, c)] = n / chunks + (c < n % chunks ? 1 : 0);
    }
    if (sum != num_layers) {
        snprintf(err, errlen, "pipeline layers sum to %d, not num_layers=%d", sum, num_layers);
        return -1;
    }
    return 0;
}

int pipeline_stage_layer_count(int num_layers, int stages, int chunks, const int *stage_layers, int stage,
                               char *err, size_t errlen)
{
    /* An equal split gives every stage stage 0's count, so stage 0's rules are the split's (and its
     * reason the same): the memory model asks this of each stage, in O(1) rather than O(stages). */
    if (!stage_layers && stages >= 1 && chunks >= 1 && num_layers >= 1 && stage >= 0 && stage < stages)
        return stage_count(num_layers, stages, chunks, NULL, 0, err, errlen);
    if (pipeline_layer_split(num_layers, stages, chunks, stage_layers, NULL, err, errlen) != 0)
        return -1;
    if (stage < 0 || stage >= stages) {
        snprintf(err, errlen, "stage %d is not one of the %d pipeline stages", stage, stages);
        return -1;
    }
    return stage_count(num_layers, stages, chunks, stage_layers, stage, err, errlen);
}

int pipeline_stage_layers(int num_layers, int stages, int chunks, const int *stage_layers, int stage,
                          unsigned char *runs, int *first, char *err, size_t errlen)
{
    int nv = stages * chunks, *counts = calloc((size_t)(nv > 0 ? nv : 1), sizeof(int));
    if (!counts) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (pipeline_layer_split(num_layers, stages, chunks, stage_layers, counts, err, errlen) != 0) {
        free(counts);
        return -1;
    }
    memset(runs, 0, (size_t)num_layers);
    for (int vs = 0, at = 0; vs < nv; at += counts[vs], vs++) {
        if (first)
            first[vs] = at;
        if (vs % stages == stage) /* virtual stage vs = chunk * stages + stage */
            for (int l = at; l < at + counts[vs]; l++)
                runs[l] = 1;
    }
    if (first)
        first[nv] = num_layers;
    free(counts);
    return 0;
}
