/* Reading nccl-tests output (all_reduce_perf, all_gather_perf, reduce_scatter_perf,
 * alltoall_perf, sendrecv_perf) and fitting DESIGN.md's collective section:
 *   alpha_us  = the median time of the three smallest measured sizes above 0 (the latency
 *               floor; a size-0 row is a call NCCL returns from at once),
 *   busbw_gbs = the mean out-of-place bus bandwidth over sizes >= 1/4 of the largest (the
 *               bandwidth plateau nccl-tests reports),
 * for the link class the log's ranks span (one host: nvlink; several: network). Lines tagged by
 * mpirun --tag-output ("[1,0]<stdout>:") are read without the tag. */
#ifndef DTSIM_CALIBRATE_NCCL_IMPORT_H
#define DTSIM_CALIBRATE_NCCL_IMPORT_H
#include <stddef.h>

typedef struct {
    char collective[32];  /* all_reduce, all_gather, reduce_scatter, all_to_all, send_recv */
    int ranks, hosts;     /* from the '# Using devices' block: 0 and 0 when the log has none */
    int points;
    double alpha_us, busbw_gbs, max_bytes;
    double *size, *time_us; /* the log's points: size (B) and out-of-place time, `points` of each */
} nccl_fit;

/* Parses one log. kind_hint: the collective when the log does not say (NULL: from the file
 * name). Returns 0 (free the fit with nccl_fit_free), or -1 with err naming the file and line
 * (nothing to free): a field that is no size, time or busbw (NaN, infinite, negative), sizes
 * that do not ascend (one run's sweep), a second results table, or a fit whose busbw is not
 * finite and above 0. A fit returned has finite alpha and busbw above 0. */
int nccl_import_file(const char *path, const char *kind_hint, nccl_fit *out, char *err, size_t errlen);
void nccl_fit_free(nccl_fit *fit);
/* A collective's name as the calibration files it (all_to_all), from that name or nccl-tests'
 * (alltoall); NULL for neither. */
const char *nccl_kind_name(const char *name);
#endif
