/* Checkpoints of dtrain (DESIGN.md, Engine: Checkpoints).
 *
 * DIR/step-NNNNNNNN/ holds one shard per rank (shard-RRRRR.bin: parameters, AdamW moments and
 * the loss-scaler state of that rank's layout) and manifest.json, written last: a checkpoint is
 * complete only when its manifest exists. Every file is written to a temporary name, fsynced,
 * renamed, and the directory fsynced. The manifest records the format version, model, layout,
 * step, data position, optimizer step count, learning-rate schedule, and each shard's byte size
 * and CRC32. Resuming takes the newest checkpoint whose shards all match; a partial or corrupt
 * one is reported by name and skipped. */
#ifndef DTSIM_ENGINE_CHECKPOINT_H
#define DTSIM_ENGINE_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>
#include "gpt.h"

typedef struct {
    int step;                 /* the last completed step */
    int updates;              /* AdamW steps applied (skipped fp16 steps excluded) */
    uint64_t data_position;   /* sequences the loader has handed out */
    uint64_t seed;
    double loss_scale;
    int good_steps;
    double lr, warmup, total_steps;
    int precision;            /* kernels_precision */
} train_state;

/* Writes a checkpoint of the model (params, m, v copied to the host first) and state into
 * dir/step-NNNNNNNN. Returns 0 or -1 with err. */
int checkpoint_save(const char *dir, const gpt_model *m, const train_state *st, char *err, size_t errlen);

/* The host copy an asynchronous save writes from. */
typedef struct checkpoint_job checkpoint_job;
/* Copies the state to host memory (the part that blocks training) and starts writing it on a
 * background thread. */
checkpoint_job *checkpoint_save_async(const char *dir, const gpt_model *m, const train_state *st);
/* Waits for the write; returns 0 or -1 with err; *write_s gets the background write's duration. */
int checkpoint_wait(checkpoint_job *job, double *write_s, char *err, size_t errlen);

/* Loads the newest complete, intact checkpoint of dir into m and st. Returns 1 when one was
 * loaded, 0 when none was found (fresh start), -1 on an error that must stop the run (a
 * checkpoint of a different model). Skipped checkpoints are reported on stderr. */
int checkpoint_load_latest(const char *dir, gpt_model *m, train_state *st, char *err, size_t errlen);

/* Deletes complete checkpoints older than the newest `keep`. */
void checkpoint_prune(const char *dir, int keep);
#endif
