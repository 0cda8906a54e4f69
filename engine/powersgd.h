/* PowerSGD gradient compression for the DP reduction (Vogels, Karimireddy, Jaggi 2019,
 * arXiv:1905.13727, Algorithms 1 and 2), as the DP option `dtrain --grad-compress powersgd:R`.
 *
 * Each 2-D parameter tensor (the matrices: wte, wpe, qkv, proj, fc, fcproj; under TP the rank's
 * local shard) is viewed as the n x m row-major matrix it is stored as and keeps a warm-started
 * Q (m x r, r = min(R, n, m), drawn from the run seed, the same on every DP rank) and an
 * error-feedback residual (n x m). Per step, on every DP rank:
 *     M = dp * grad + residual        (dp * grad: this rank's estimate of the summed gradient,
 *                                      the scale the engine's optimizer expects)
 *     P = M Q;  all-reduce P, / dp;  orthonormalise P's columns (Gram-Schmidt in double)
 *     Q = M^T P;  all-reduce Q, / dp  (kept: the next step's warm start)
 *     grad = P Q^T;  residual = M - P Q^T
 * The 1-D tensors (biases, norms), and a matrix with n m <= (n + m) R (its factors would be no
 * smaller), are all-reduced uncompressed, as the paper and PyTorch's powerSGD_hook do. Wire volume per step: one all-reduce of (sum of 1-D sizes + sum n r) floats
 * and one of (sum m r) floats, against all of the parameters uncompressed.
 *
 * It runs on host buffers (the DP reduction stages gradients through the host on both backends),
 * with the BLAS for the products. The residuals and Q are not in checkpoints: a resumed run starts
 * them afresh from the seed (zero residual). */
#ifndef DTSIM_ENGINE_POWERSGD_H
#define DTSIM_ENGINE_POWERSGD_H
#include <stddef.h>
#include <stdint.h>
#include "gpt.h"

/* Sums n host floats over the DP group in place. */
typedef void (*powersgd_allreduce_fn)(float *buf, size_t n, void *ctx);

typedef struct {
    size_t offset, rows, cols; /* in the flat gradient buffer; the n x m view */
    int r;                     /* min(R, rows, cols) */
    float *q;                  /* cols x r, row-major */
    float *residual;           /* rows x cols; holds M during a step */
} powersgd_matrix;

typedef struct {
    int rank, dp;
    powersgd_matrix *mats;
    int num_mats;
    size_t *vec_offset, *vec_count; /* the 1-D tensors, reduced uncompressed */
    int num_vecs;
    size_t vec_floats, p_floats, q_floats; /* what the two all-reduces carry */
    float *wire_p;                  /* vec_floats + p_floats: the 1-D gradients, then every P */
    float *wire_q;                  /* q_floats: every Q */
} powersgd_state;

/* "none" -> 0, "powersgd:R" (R a whole number 1..65536) -> R. Returns 0, or -1 with a reason. */
int powersgd_parse(const char *spec, int *rank, char *err, size_t errlen);

/* Sets up the state of rank-R compression of this rank's tensors for a DP group of dp. */
void powersgd_init(powersgd_state *s, const gpt_model *m, int rank, int dp, uint64_t seed);
void powersgd_free(powersgd_state *s);

/* Replaces the host gradients (this rank's flat buffer) by the compressed DP sum. */
void powersgd_reduce(powersgd_state *s, float *grads, powersgd_allreduce_fn allreduce, void *ctx);

/* One compression round on a single n x m matrix (the same arithmetic powersgd_reduce runs per
 * tensor; exposed for the unit test). grad (n x m) becomes the approximation P Q^T, residual
 * (n x m) the new error feedback, q (m x r) the new Q; p (n x r) receives the orthonormal P.
 * allreduce may be NULL when dp == 1. */
void powersgd_round(float *grad, float *residual, float *q, float *p, size_t n, size_t m, int r, int dp,
                    powersgd_allreduce_fn allreduce, void *ctx);

/* Orthonormalises the r columns of the row-major n x r matrix p (modified Gram-Schmidt in
 * double); a column with nothing left (2-norm below 1e-30, e.g. a zero gradient) becomes zero. */
void powersgd_orthonormalise(float *p, size_t n, int r);
#endif
