/* What dtcal variability and dtcal overlap share: under mpirun, one rank per device (at least
 * 2; on CUDA the node-local rank picks the GPU through gpu_pick), every rank times the same GEMM
 * through the engine's kernel interface, and rank 0 writes one key of a calibration with one
 * line in its sources. This part holds the options both commands take, the MPI session (ranks,
 * their devices and hosts, the --into calibration) and the write. */
#ifndef DTSIM_CALIBRATE_RANK_GEMM_H
#define DTSIM_CALIBRATE_RANK_GEMM_H
#include <jansson.h>
#include <stddef.h>

struct kernels_backend;

typedef struct rank_gemm_options {
    const char *device;    /* "cpu" or "cuda" */
    int precision;         /* a kernels_precision */
    int m, n, k, repeats;
    const char *into;      /* a calibration to add the key to, or NULL: a new one */
    const char *out;       /* where the calibration goes ("-": stdout) */
    int argc;              /* the command line, for a new calibration's "command" */
    char **argv;
} rank_gemm_options;

/* An option of one command beyond those they share (a, its value v): 1 taken, 0 not its own, 2
 * refused (said when loud). */
typedef int (*rank_gemm_extra_option)(const char *who, const char *a, const char *v, int loud, void *ctx);

/* The command line (argv[2..]; every rank of an mpirun parses the same): the shared options
 * (--device, --precision, --m --n --k, --repeats, --into, -o), each other one asked of extra
 * first, then the device's defaults (cpu: fp32, 512^3; cuda: bf16, 4096^3; 21 repeats). 0, or 2
 * with the reason printed by the first rank only. */
int rank_gemm_parse(const char *who, int argc, char **argv, rank_gemm_options *o, rank_gemm_extra_option extra,
                    void *ctx);
/* 1 on the first rank of an mpirun (or outside one), from the launcher's environment, before
 * MPI_Init: where a command-line error is said once. */
int rank_gemm_first_rank(void);

#define RANK_GEMM_DESC_LEN 512 /* the size of the simulator's calibration "device" */

typedef struct {
    const char *who;       /* "dtcal variability": every message starts with it */
    int rank, size;
    int thread_level;      /* what MPI_Init_thread provided */
    const struct kernels_backend *k;
    int gpu;               /* this rank's GPU, or -1 */
    /* rank 0 only (NULL elsewhere): */
    char *hosts;           /* size host names, host_stride bytes apart */
    int host_stride;
    char *descs;           /* size device descriptions, RANK_GEMM_DESC_LEN bytes apart */
    int *gpus;             /* size GPU indices (-1: none) */
    char kind[RANK_GEMM_DESC_LEN]; /* the devices' kind: rank 0's description up to " (" */
    json_t *into;          /* the --into calibration */
    int mpi_up;
} rank_gemm_session;

/* Every rank calls it: MPI_Init_thread (asking for thread_level), at least 2 ranks (why_two says
 * what needs them), the --into calibration (rank 0), the kernel backend of o->device, on CUDA one
 * GPU per rank, and on rank 0 every rank's host and device, all of one kind. 0, or the exit
 * status with the reason printed once: 2 for no mpirun, fewer than 2 ranks, a bad --into, more
 * ranks than GPUs on a node or devices of different kinds; 1 when a backend cannot start. The
 * same on every rank. Call rank_gemm_close whatever it returns. */
int rank_gemm_open(rank_gemm_session *s, const char *who, const rank_gemm_options *o, int thread_level,
                   const char *why_two);
/* Frees the session and finalizes MPI; returns rc. */
int rank_gemm_close(rank_gemm_session *s, int rc);
/* Collective: 1 when ok on every rank; else the first rank (by rank) where it is not prints msg
 * (when not NULL) and 0. */
int rank_gemm_all_ok(const rank_gemm_session *s, int ok, const char *msg);

/* Rank 0: rank r's host, and its device as the table shows it ("GPU 3: NVIDIA H100 80GB HBM3",
 * or the CPU's kind); the widest host and device, for the table's columns. */
const char *rank_gemm_host(const rank_gemm_session *s, int r);
void rank_gemm_device(const rank_gemm_session *s, int r, char *out, size_t len);
void rank_gemm_widths(const rank_gemm_session *s, int *host_w, int *dev_w);

/* "fp32", "bf16", "fp16" */
const char *rank_gemm_precision(int precision);
/* today, YYYY-MM-DD (UTC) */
void rank_gemm_date(char *out, size_t len);

/* Rank 0: key = value, with `line` added to the sources, into a copy of the --into calibration
 * (every other key kept, a datasheet one becoming mixed, the key before the sources) or a new
 * measured document (device, date, host, command), written to o->out. 0, or 1. */
int rank_gemm_write(const rank_gemm_session *s, const rank_gemm_options *o, const char *key, double value,
                    const char *line);
#endif
