/* dtrain's --log-json stream (DESIGN.md): one JSON object per step, then the final one. Every
 * write is checked: the first failure is reported with its reason (the errno of the call that
 * failed), the log stops there and training goes on, and the run then exits 1, as a run folder
 * that cannot be written does (run_dir.h). Closing checks the last flush and close too. */
#ifndef DTSIM_ENGINE_TRAIN_LOG_H
#define DTSIM_ENGINE_TRAIN_LOG_H
#include <jansson.h>
#include <stdio.h>

typedef struct {
    FILE *f;          /* NULL: no log, or stopped after a failed write */
    const char *path; /* as given; "-" is standard output */
    int failed;       /* a write failed (and was reported) */
} train_log;

/* Opens path for writing (NULL: no log; "-": standard output). 0, or -1 after saying why. */
int train_log_open(train_log *l, const char *path);
/* Writes obj as one line and flushes it; takes obj's reference. NULL obj: nothing. */
void train_log_line(train_log *l, json_t *obj);
/* x as a JSON number, or null where it is not finite (JSON has no NaN or infinity): a diverged
 * step's loss is still a line. */
json_t *train_log_number(double x);
/* Flushes and closes. 0, or -1 when any write failed (each reported once). */
int train_log_close(train_log *l);
#endif
