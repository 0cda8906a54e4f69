/* dtrain's learning-rate schedule: linear warm-up over --warmup steps, then cosine decay to 10%
 * of --lr at --lr-decay-steps (default --steps), as Megatron-LM's cosine style; and what a
 * resume does when the checkpoint was trained on another schedule (Megatron-LM's rule). */
#ifndef DTSIM_ENGINE_LR_SCHEDULE_H
#define DTSIM_ENGINE_LR_SCHEDULE_H
#include "checkpoint.h"
#include "train_options.h"

/* The cosine decay's last step: --lr-decay-steps, else --steps. */
int lr_decay_steps(const train_options *o);
/* Learning rate at step (1-based). */
double train_lr(const train_options *o, int step);
/* On --resume from the checkpoint at `where` (its state st): where its schedule (lr, warm-up,
 * decay length) differs from o's, o takes the checkpoint's (--use-checkpoint-opt-param-scheduler),
 * keeps its own (--override-opt-param-scheduler), or the resume is refused, said by the leader.
 * Returns -1 to train on, 2 when refused. */
int lr_schedule_resume(train_options *o, const train_state *st, const char *where, int leader);
#endif
