/* Checkpoints of dtrain (DESIGN.md, Engine: Checkpoints).
 *
 * DIR/step-NNNNNNNN/ holds one shard per rank (shard-RRRRR.bin: that rank's parameters, AdamW
 * moments and loss-scaler state, in its own layout) and manifest.json, written by rank 0 after
 * every shard is on disk: a checkpoint is complete only when its manifest exists. Every file is
 * written to a temporary name, fsynced and renamed, then the directory fsynced. The manifest
 * records the format version, model, parallel layout, step, data position, optimizer step
 * count, learning-rate schedule, loss scaler, each shard's byte size and CRC32, and its own
 * seal, manifest_crc32 (checkpoint_manifest.h).
 *
 * Resuming takes the newest checkpoint whose manifest passes its range checks and seal and whose
 * shards all match; a partial or corrupt one is reported by name (file and field) and skipped.
 * In the layout it was saved in, each rank loads its own shard (bit-exact). In another layout,
 * every rank assembles the single-rank model (parameters and moments) from all shards of the
 * old layout and takes its part: resharding.
 *
 * Saving and loading are collective: every rank calls them at the same step. */
#ifndef DTSIM_ENGINE_CHECKPOINT_H
#define DTSIM_ENGINE_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>
#include "comm.h"
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

enum { CKPT_MAX_STAGES = 1024 };

/* The parallel layout a checkpoint is written in (the rank grid is comm.h's). */
typedef struct {
    int tp, pp, dp, vpp, zero;
    int ep;                            /* expert parallelism (0 reads as 1): a shard holds one EP
                                          rank's experts, so only the same layout resumes */
    int cp;                            /* context parallelism (0 reads as 1): CP ranks hold the
                                          same weights, so each is a replica, ZeRO shards over
                                          dp x cp (replica dp_rank x cp + cp_rank) */
    int stage_layers[CKPT_MAX_STAGES]; /* all 0: equal split */
} ckpt_layout;

typedef struct checkpoint_job checkpoint_job;
/* Copies this rank's state to host memory (the part that blocks training) and writes its shard
 * on a background thread (or at once when background = 0). */
checkpoint_job *checkpoint_save_async(const char *dir, const gpt_model *m, const train_state *st, const comm_ctx *c,
                                      const ckpt_layout *layout, int background);
/* Whether this rank's shard write has ended (no wait). A run polls it each step and calls
 * checkpoint_finish once every rank's has, so the manifest lands about one step after the
 * shards, not at the next checkpoint. */
int checkpoint_shard_written(checkpoint_job *job);
/* Collective: waits for this rank's shard, then rank 0 writes the manifest when every shard
 * was written. Returns 0, or -1 with err (the same on every rank) after rank 0 removed the step
 * folder (nothing half-made is left); *write_s gets this rank's shard write time. A NULL job is
 * a no-op returning 0 (on every rank alike). */
int checkpoint_finish(checkpoint_job *job, comm_ctx *c, double *write_s, char *err, size_t errlen);

/* Collective: loads the newest complete, intact checkpoint of dir into m and st, resharding
 * when it was saved in another layout. Returns 1 when one was loaded, 0 when none was written
 * (no step folder has a manifest: a fresh start), -1 on an error that must stop the run (a
 * checkpoint of a different model, or complete checkpoints none of which is intact). Skipped
 * checkpoints are reported on stderr. */
int checkpoint_load_latest(const char *dir, gpt_model *m, train_state *st, comm_ctx *c, const ckpt_layout *layout,
                           char *err, size_t errlen);

/* Step numbers of dir's step-NNNNNNNN folders, newest first (a missing dir has none); with
 * complete_only, only the complete checkpoints (those whose manifest exists). *steps is
 * malloc'd (free it, even when the count returned is 0). */
int checkpoint_list_steps(const char *dir, int complete_only, int **steps);

/* Deletes complete checkpoints older than the newest `keep` (call on one rank). */
void checkpoint_prune(const char *dir, int keep);
#endif
