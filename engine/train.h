/* The single-rank training loop of dtrain: gradient accumulation over micro-batches, AdamW
 * with warm-up and cosine decay (lr_schedule.h), global-norm clipping, fp16 dynamic loss scaling, the
 * --log-json lines of DESIGN.md and the profiler. */
#ifndef DTSIM_ENGINE_TRAIN_H
#define DTSIM_ENGINE_TRAIN_H
#include "train_options.h"

/* Runs the training; returns the process exit code (0, 1 runtime failure, 2 bad input, 3 the
 * loss diverged: not finite). */
int train_run(const train_options *o);
#endif
