/* Run tracking (dtrain --run-dir DIR): what one training run did, in one folder, so that a run
 * can be compared with its simulation (`dtsim report`) or with another run later.
 *
 *   DIR/config.json       every option (argv and the values used, defaults included), model,
 *                         parameter count, layout, device, precision, data, seed, git revision,
 *                         start time, host; "resumes" lists each --resume into the same DIR
 *   DIR/metrics.jsonl     one line per step: step, loss, grad_norm, loss_scale, lr,
 *                         tokens_per_s, step_time_s, mfu
 *   DIR/profile.json      the per-op profile (as --profile writes it) and profile.json.trace.json
 *                         (on CUDA only with --profile: event timing waits for every op)
 *   DIR/checkpoints.json  every checkpoint this run wrote: step, path, bytes, shard CRCs (from
 *                         the checkpoint's manifest), whether --ckpt-keep has pruned it since
 *   DIR/summary.json      at the end: final loss, params_crc32, steps, wall time, mean tokens/s
 *
 * Written by world rank 0 only. The JSON files go through a temporary name and a rename, so a
 * reader sees the old or the new file, never half of one. metrics.jsonl grows by one line per
 * step, each line one write(2) in append mode (rewriting the file per step would cost O(steps^2));
 * a line cut by a crash is the last one and has no newline. The format: docs/formats.md. */
#ifndef DTSIM_ENGINE_RUN_DIR_H
#define DTSIM_ENGINE_RUN_DIR_H
#include <stddef.h>
#include "gpt.h"
#include "train_options.h"

typedef struct run_dir run_dir;

/* Opens (creates) DIR for a run. A DIR holding a config.json is refused unless resume is set.
 * Returns NULL with err on a refusal or an unwritable DIR. argv is recorded as given. */
run_dir *run_dir_open(const char *path, int resume, int argc, char **argv, char *err, size_t errlen);

/* Writes config.json (or, on a resume, adds this launch to its "resumes") once the model and
 * the layout are known; drops metrics lines of steps >= first_step (work redone after a
 * resume). peak_tflops: per device, 0 = unknown (MFU null). Returns 0 or -1 with err. */
int run_dir_start(run_dir *rd, const train_options *o, const gpt_config *cfg, size_t params, const kernels_backend *k,
                  int first_step, char *err, size_t errlen);

/* The peak FLOP/s per device MFU is computed against (0: unknown) and the model FLOPs of one
 * step (DESIGN.md: 3 x forward x sequences), as run_dir_start settled them. */
double run_dir_peak_tflops(const run_dir *rd);
double run_dir_model_flops_per_step(const run_dir *rd);

/* Appends one metrics line. grad_norm < 0: the step was skipped (overflow). moe_load_imbalance:
 * gpt_moe_load_take's (0: a dense model, no key). */
int run_dir_step(run_dir *rd, int step, double loss, double grad_norm, double loss_scale, double lr,
                 double step_time_s, double moe_load_imbalance, char *err, size_t errlen);

/* Rescans ckpt_dir after a checkpoint completed (and old ones were pruned) and rewrites
 * checkpoints.json: new complete checkpoints are added, pruned ones marked "on_disk": false. */
int run_dir_checkpoints(run_dir *rd, const char *ckpt_dir, char *err, size_t errlen);

/* Where the profile goes: DIR/profile.json. */
const char *run_dir_profile_path(const run_dir *rd);

/* Writes summary.json and frees rd (NULL: no-op). completed: 0 when the run stopped early. */
int run_dir_finish(run_dir *rd, int last_step, double final_loss, const char *params_crc32, int completed,
                   char *err, size_t errlen);
void run_dir_free(run_dir *rd);

/* The revision dtrain was built from (configure time): 40 hex digits, or "unknown". */
const char *run_dir_git_revision(void);
int run_dir_git_dirty(void); /* 1 dirty, 0 clean, -1 unknown */
#endif
