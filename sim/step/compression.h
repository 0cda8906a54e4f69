/* Gradient compression of the data-parallel gradient synchronisation (scenario keys
 * parallel.grad_reduce_dtype "int8" and parallel.grad_compression): what each method sends,
 * the compute it adds, and the tasks one gradient bucket becomes in the step graph.
 *
 *  - int8 (ZeRO++ qgZ, Wang et al. 2023, arXiv:2306.10209): block quantisation to int8 with
 *    one fp32 scale per GRAD_INT8_BLOCK elements, a reduce-scatter done as a hierarchical
 *    all-to-all of the quantised slices, dequantise and reduce in fp32; with ZeRO 0 the
 *    reduced shard is requantised and all-gathered.
 *  - top-k with error feedback (Lin et al., Deep Gradient Compression, ICLR 2018,
 *    arXiv:1712.01887; Shi et al. 2019, arXiv:1911.08727): each rank sends its k = ratio x E
 *    largest accumulated entries as (value, int32 index) pairs by all-gather and scatter-adds
 *    the dp x k pairs it receives.
 *  - PowerSGD (Vogels et al., NeurIPS 2019, arXiv:1905.13727): every 2-D gradient matrix
 *    n x m becomes P = M Q (n x r) and Q = M^T P (m x r), two all-reduces; vectors are
 *    all-reduced uncompressed.
 * workload_emit.c calls compression_emit_bucket from its bucket flush; run.c reports the totals. */
#ifndef DTSIM_SIM_COMPRESSION_H
#define DTSIM_SIM_COMPRESSION_H

#include "collective.h"
#include "cost.h"
#include "workload_graph.h"

/* Radix-select passes over the accumulated gradient to find the k-th largest magnitude:
 * one counting pass per 8-bit digit of the 32-bit key (PyTorch's multi-block torch.topk and
 * CUB's radix select use 8-bit digits), then one pass that gathers the selected pairs. */
#define TOPK_RADIX_PASSES 4

/* One 2-D gradient matrix shape on one GPU, and how many of it a layer holds. */
typedef struct {
    double rows, cols, count;
} grad_matrix;

#define GRAD_MATRICES_MAX 8

/* The 2-D gradient matrices of one transformer layer (embedding = 0) or of the embedding
 * (embedding = 1) on one GPU under the TP / EP split, as sim/step/params.c counts them; the
 * elements of 1-D tensors (biases, norms) go to *vector_elements. Returns the count. */
int compression_matrices(const scenario_config *s, int embedding, grad_matrix *out, double *vector_elements);

/* PowerSGD's rule for a matrix (PyTorch's powerSGD_hook): compress only when the factors are
 * smaller than the matrix, n m > (n + m) r. */
int powersgd_compresses(double rows, double cols, int rank);

/* What one unit of gradient (one layer, or the embedding) costs under PowerSGD. */
typedef struct {
    double elements;        /* gradient elements of the unit */
    double p_elements;      /* first all-reduce: P factors plus the uncompressed tensors */
    double q_elements;      /* second all-reduce: Q factors */
    double pre_s, mid_s, post_s, flops;
} powersgd_unit;

typedef struct {
    const scenario_config *s;
    cost_model cm;
    int active;             /* int8, top-k or PowerSGD replaces the plain reduction */
    int int8, method;       /* grad_reduce_int8, grad_compression_kind */
    int zero_stage;
    double natural;         /* bytes per gradient element in the training precision */
    double value_bytes;     /* bytes per element on the wire (the reduction dtype) */
    double wire_elem;       /* bytes per element the bucket accounting uses (grad_reduce_bytes) */
    double ratio;           /* top-k */
    int rank;               /* PowerSGD */
    powersgd_unit layer, embedding;
} grad_compressor;

void compression_init(grad_compressor *gc, const scenario_config *s);

/* The work one bucket of `elements` gradient elements becomes, dp = the DP x CP group:
 * compute on the compute stream before the first collective (error feedback, selection,
 * quantisation, P = M Q), the collectives, and the compute chained after them on the
 * communication stream (orthogonalisation and Q = M^T P, dequantisation, scatter-add,
 * decompression). bytes are collective.h's (nccl-tests "size"); bytes2 = 0: one collective. */
typedef struct {
    double pre_s, mid_s, post_s, flops;
    coll_kind coll1, coll2;
    double bytes1, bytes2;
    const char *name1, *name2;
} compressed_bucket;

void compression_plan_bucket(const grad_compressor *gc, double elements, int embedding, coll_group dp,
                             compressed_bucket *out);

/* Emits the bucket's tasks on `stage` after task dep: returns the last task on the comm lane
 * (the bucket's completion). calls: collective calls each collective stands for (flow
 * fidelity's coarse buckets). repeat: the tasks stand for that many such buckets in a row (a
 * group of tiny buckets, workload_emit.c): each takes repeat times as long and moves repeat
 * times the bytes; 1 for one bucket. */
int compression_emit_bucket(step_workload *w, const grad_compressor *gc, int stage, int dep, double elements,
                            int embedding, coll_group dp, double calls, double repeat);

/* Bytes one rank sends for a collective of `bytes` over n ranks (ring / direct: all-reduce
 * 2 (n-1)/n, all-gather, reduce-scatter and all-to-all (n-1)/n of the buffer). */
double compression_wire_bytes(coll_kind kind, double bytes, int n);

/* The DP gradient synchronisation of one stage of a built step: its collectives' wire bytes
 * per rank and idle-cluster time, and the compression compute (both streams). */
typedef struct {
    double wire_bytes, comm_s, compute_s;
} dp_sync_totals;

void compression_totals(const step_workload *w, int stage, dp_sync_totals *t);
/* Whether a task is compression compute (its names start with "gradcomp_"). */
int compression_is_compute(const sim_task *t);

/* The scenario's compression in words ("int8 (qgZ)", "topk 0.01", "powersgd rank 4",
 * "fp16"); "" when the reduction is the training precision's, uncompressed. */
const char *compression_describe(const scenario_config *s, char *buf, int size);

#endif
