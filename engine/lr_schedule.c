/* See lr_schedule.h. */
#include <math.h>
#include <stdio.h>
#include "lr_schedule.h"

int lr_decay_steps(const train_options *o)
{
    return o->lr_decay_steps > 0 ? o->lr_decay_steps : o->steps; /* as --lr-decay-iters defaults to --train-iters */
}

double train_lr(const train_options *o, int step)
{
    if (o->warmup > 0 && step <= o->warmup)
        return o->lr * step / o->warmup;
    double span = lr_decay_steps(o) - o->warmup;
    double progress = span > 0 ? (step - o->warmup) / span : 1.0;
    if (progress > 1)
        progress = 1;
    double lr_min = 0.1 * o->lr;
    return lr_min + 0.5 * (o->lr - lr_min) * (1.0 + cos(M_PI * progress));
}

int lr_schedule_resume(train_options *o, const train_state *st, const char *where, int leader)
{
    /* one that differs from the checkpoint's would jump mid-run unless the user says which holds */
    if (st->lr == o->lr && st->warmup == o->warmup && st->total_steps == lr_decay_steps(o))
        return -1;
    if (o->lr_schedule_from == LR_SCHEDULE_CHECKPOINT) {
        o->lr = st->lr;
        o->warmup = (int)st->warmup;
        o->lr_decay_steps = (int)st->total_steps;
    } else if (o->lr_schedule_from == LR_SCHEDULE_REFUSE) {
        if (leader)
            fprintf(stderr, "dtrain: --resume: %s was trained on another learning-rate schedule: --lr %g, "
                            "--warmup %g, decay over %g steps; this run has --lr %g, --warmup %d, decay over %d "
                            "steps (--lr-decay-steps, else --steps). Give --use-checkpoint-opt-param-scheduler "
                            "to keep the checkpoint's schedule (--steps then only says where to stop), or "
                            "--override-opt-param-scheduler to switch to this run's from step %d on\n",
                    where, st->lr, st->warmup, st->total_steps, o->lr, o->warmup, lr_decay_steps(o), st->step + 1);
        return 2;
    }
    return -1;
}
