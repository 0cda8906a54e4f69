/* dtsim's collective model (sim/step/collective.h: NCCL's tuner model, or under a platform's
 * collective_library mpi the alpha-beta one) against a measured nccl-tests log: given only what
 * import-nccl-tests fits from the log (the bandwidth plateau, the latency floor) and a platform
 * (NVLink and NICs, the GPU generation and CPU vendor NCCL's tuner reads), the time the model
 * gives each of the log's sizes beside the measured one. The sizes the fit's plateau came from
 * agree by construction; the small and medium ones are the check. */
#ifndef DTSIM_CALIBRATE_NCCL_MODEL_CHECK_H
#define DTSIM_CALIBRATE_NCCL_MODEL_CHECK_H
#include <stdio.h>
#include "config.h"
#include "nccl_import.h"

typedef struct {
    double mean_abs_error, worst_error; /* relative, over the sizes compared */
    double worst_size;                  /* where the worst was */
    int compared;
} nccl_model_check_result;

/* Compares every size of `fit` from min_bytes up (ranks over hosts, the link class cls its
 * busbw and alpha were fitted for), printing a line a size to out; 0, or -1 with err. */
int nccl_model_check(FILE *out, const platform_config *p, const nccl_fit *fit, link_class cls, int ranks, int hosts,
                     double min_bytes, nccl_model_check_result *r, char *err, size_t errlen);
/* import-nccl-tests --platform FILE [--ranks N] [--hosts H] [--min-bytes B] */
typedef struct {
    platform_config platform;
    int present, ranks, hosts; /* ranks, hosts: 0 = the log's own */
    double min_bytes;          /* compare from this size up (1,024 by default) */
} nccl_model_check_opts;

/* Reads one of those options at argv[*i] (and its value, advancing *i): 1 if it was one (*rc 2
 * with the reason printed when its value is bad), 0 if argv[*i] is something else. */
int nccl_model_check_option(int argc, char **argv, int *i, nccl_model_check_opts *o, int *rc);
/* The comparison for one imported log, printed on stderr with its summary line: 0, or 2 with the
 * reason printed (a log without ranks and no --ranks/--hosts, a group that does not divide). */
int nccl_model_check_log(const char *path, const nccl_fit *fit, link_class cls, const nccl_model_check_opts *o,
                         const char *who);
#endif
