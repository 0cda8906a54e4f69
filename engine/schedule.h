/* Pipeline schedules: the ordered list of (forward|backward, micro-batch, model chunk) that
 * each pipeline stage runs in one training step. Written once, pure C (no CUDA, no MPI):
 * dtrain executes these lists, dtsim replays them. A change here changes both.
 *
 * Conventions (as Megatron-LM):
 *  - p stages, m micro-batches per step, v model chunks per stage (v = 1 except interleaved).
 *  - Model chunk c of stage s holds virtual stage  vs = c * p + s  (the model's layers are cut
 *    into p*v consecutive pieces; piece vs runs on stage vs % p).
 *  - forward(mb, vs) needs forward(mb, vs-1); backward(mb, vs) needs backward(mb, vs+1) and
 *    forward(mb, vs). Nothing else orders work across stages.
 *  - Interleaved 1F1B needs v > 1 and m a multiple of p.
 */
#ifndef DTSIM_ENGINE_SCHEDULE_H
#define DTSIM_ENGINE_SCHEDULE_H

#include <stddef.h>

typedef enum { PIPELINE_GPIPE = 0, PIPELINE_1F1B = 1, PIPELINE_INTERLEAVED = 2 } pipeline_kind;
typedef enum { PIPE_FORWARD = 0, PIPE_BACKWARD = 1 } pipe_phase;

typedef struct {
    pipe_phase phase;
    int micro_batch; /* 0 .. m-1 */
    int chunk;       /* 0 .. v-1 (model chunk on this stage) */
} pipe_action;

typedef struct {
    pipeline_kind kind;
    int stages;        /* p */
    int micro_batches; /* m */
    int chunks;        /* v */
    int *count;        /* count[s] = number of actions of stage s (= 2*m*v) */
    pipe_action **actions; /* actions[s][i], in execution order */
} pipeline_schedule;

/* "gpipe", "1f1b", "interleaved" -> kind; returns -1 for an unknown name. */
int pipeline_kind_from_name(const char *name);
const char *pipeline_kind_name(pipeline_kind kind);

/* Whether the schedule can be built: 0, or -1 with a reason in err (e.g. interleaved with
 * m % p != 0). */
int pipeline_schedule_check(pipeline_kind kind, int stages, int micro_batches, int chunks, char *err,
                            size_t errlen);
/* Builds the schedule. Returns 0, or -1 with a reason in err (pipeline_schedule_check). */
int pipeline_schedule_build(pipeline_schedule *s, pipeline_kind kind, int stages,
                            int micro_batches, int chunks, char *err, size_t errlen);
void pipeline_schedule_free(pipeline_schedule *s);

/* Virtual stage index of (stage, chunk): chunk * stages + stage. */
int pipeline_virtual_stage(int stages, int stage, int chunk);

/* Largest number of micro-batches whose forward activations stage s holds at once
 * (forwards done, backwards not yet done), counted per chunk-micro-batch pair. */
int pipeline_schedule_peak_in_flight(const pipeline_schedule *s, int stage);
/* The same from the schedule's shape, without building it: m v under GPipe, else the stage's
 * warm-up forwards and one more, at most m v (the builder's own warm-up rule); for a schedule
 * pipeline_schedule_check accepts. */
int pipeline_peak_in_flight(pipeline_kind kind, int stages, int micro_batches, int chunks, int stage);

/* Splits num_layers over stages*chunks virtual stages. stage_layers (may be NULL) gives one
 * layer count per stage (uneven split, summing to num_layers); without it the split is equal
 * and stages must divide num_layers. Each stage's layers are then divided among its chunks as
 * evenly as possible (earlier chunks get the remainder). Writes stages*chunks counts, indexed
 * by virtual stage, to layers_out (NULL: only checks the split). Returns 0 or -1 with a reason. */
int pipeline_layer_split(int num_layers, int stages, int chunks, const int *stage_layers,
                         int *layers_out, char *err, size_t errlen);

/* How many layers stage `stage` runs over all its chunks under that split, or -1 with err as
 * pipeline_layer_split: the same rules, nothing allocated (the memory model asks it per stage of
 * every candidate the planner checks). */
int pipeline_stage_layer_count(int num_layers, int stages, int chunks, const int *stage_layers, int stage,
                               char *err, size_t errlen);

/* The layers stage `stage` runs, over all its chunks: runs[l] = 1 for them, 0 for the others
 * (num_layers flags). first (stages*chunks + 1 entries, or NULL) gets where each virtual stage's
 * layers start. Returns 0, or -1 with err as pipeline_layer_split. */
int pipeline_stage_layers(int num_layers, int stages, int chunks, const int *stage_layers, int stage,
                          unsigned char *runs, int *first, char *err, size_t errlen);

#endif
