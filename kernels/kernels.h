/* The kernel interface of the training engine: one table of functions, two backends.
 *   - CPU (kernels/cpu): plain C, BLAS for GEMM. The reference every other backend is tested against.
 *   - CUDA (kernels/cuda): cuBLAS/cuBLASLt GEMM, hand-written kernels for the rest.
 * The model code (engine/) calls only through this table, so it runs unchanged on either.
 *
 * Conventions
 *  - Storage is fp32, row-major, in the backend's memory (host memory for CPU, device memory
 *    for CUDA). Low precision (bf16/fp16) is a property of the computation: GEMM inputs are
 *    rounded to the precision and accumulated in fp32; the kernels that take a precision
 *    (GEMM, attention, the activations, the residual add) round what they store to it, and
 *    round_to_precision() rounds any other stored value. The CPU backend emulates exactly
 *    what the CUDA backend does, so the two agree to the precision's rounding.
 *  - Layouts follow karpathy/llm.c: activations (B,T,C), GEMM weights (OC, C), so
 *    matmul_forward computes out = inp @ weight^T + bias.
 *  - Every *_backward ADDS into its gradient outputs (dinp, dweight, dbias, ...): the caller
 *    zeroes gradient buffers when it wants a fresh sum. This is what gradient accumulation
 *    over micro-batches and the residual stream both need. The one exception is rope_backward,
 *    which turns a gradient in place (as its forward turns q and k in place).
 *  - Position arrays (pos of the *_at attention and of rope) are host memory: a handful of ints
 *    per call, which a device backend copies over when they change.
 *  - Op names (kernels_op_name) are the names the simulator's cost model and dtcal use.
 */
#ifndef DTSIM_KERNELS_H
#define DTSIM_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { KPREC_FP32 = 0, KPREC_BF16 = 1, KPREC_FP16 = 2 } kernels_precision;

typedef struct kernels_event kernels_event; /* opaque, backend-specific timer mark */

typedef struct kernels_backend {
    const char *name; /* "cpu" or "cuda" */
    /* What the backend runs on, for the provenance of measurements: the CPU's model name and
     * thread count, or the GPU's name, compute capability, SM count, memory and the CUDA driver
     * and runtime versions. The bare device name comes first, up to " (". */
    void (*describe)(char *out, size_t len);

    /* memory */
    void *(*alloc)(size_t bytes);              /* zero-filled; aborts with a message on failure */
    void (*free)(void *p);
    void (*memset_zero)(void *p, size_t bytes);
    void (*copy_to_device)(void *dst, const void *host_src, size_t bytes);
    void (*copy_to_host)(void *host_dst, const void *src, size_t bytes);
    void (*copy)(void *dst, const void *src, size_t bytes); /* device to device */
    void (*synchronize)(void);

    /* timing (CPU: monotonic clock; CUDA: events) */
    kernels_event *(*event_create)(void);
    void (*event_destroy)(kernels_event *e);
    void (*event_record)(kernels_event *e);
    double (*event_elapsed_s)(kernels_event *start, kernels_event *end); /* waits for end */

    /* embeddings: out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]; wpe (and dwpe) may be NULL: no
     * position table (rotary embeddings), out[b,t,:] = wte[tokens[b,t],:] */
    void (*encoder_forward)(float *out, const int *tokens, const float *wte, const float *wpe,
                            int B, int T, int C);
    void (*encoder_backward)(float *dwte, float *dwpe, const float *dout, const int *tokens,
                             int B, int T, int C);

    /* LayerNorm over the last dim C of N rows; saves mean and rstd (N each) for backward */
    void (*layernorm_forward)(float *out, float *mean, float *rstd, const float *inp,
                              const float *weight, const float *bias, int N, int C);
    void (*layernorm_backward)(float *dinp, float *dweight, float *dbias, const float *dout,
                               const float *inp, const float *weight, const float *mean,
                               const float *rstd, int N, int C);

    /* RMSNorm (Llama; Megatron-LM's --normalization RMSNorm) over the last dim C of N rows, eps
     * 1e-5 as the LayerNorm: out = inp * rstd * weight, rstd = 1 / sqrt(mean(inp^2) + eps), saved
     * (N) for backward. No bias. */
    void (*rmsnorm_forward)(float *out, float *rstd, const float *inp, const float *weight, int N, int C);
    void (*rmsnorm_backward)(float *dinp, float *dweight, const float *dout, const float *inp,
                             const float *weight, const float *rstd, int N, int C);

    /* out[N,OC] = inp[N,C] @ weight[OC,C]^T + bias[OC] (bias may be NULL) */
    void (*matmul_forward)(float *out, const float *inp, const float *weight, const float *bias,
                           int N, int C, int OC, kernels_precision prec);
    /* dinp += dout @ weight; dweight += dout^T @ inp; dbias += colsum(dout) (dbias may be NULL) */
    void (*matmul_backward)(float *dinp, float *dweight, float *dbias, const float *dout,
                            const float *inp, const float *weight, int N, int C, int OC,
                            kernels_precision prec);

    /* Causal multi-head self-attention. qkv is (B,T,3C) holding q,k,v each (B,T,NH,C/NH);
     * out is (B,T,C). lse (B,NH,T) saves each query row's log-sum-exp for the backward.
     * Scores are scaled by 1/sqrt(C/NH). Implementations need not materialise (T,T). */
    void (*attention_forward)(float *out, float *lse, const float *qkv, int B, int T, int C,
                              int NH, kernels_precision prec);
    void (*attention_backward)(float *dqkv, const float *dout, const float *qkv, const float *out,
                               const float *lse, int B, int T, int C, int NH,
                               kernels_precision prec);
    /* Optional (NULL where a backend lacks them): queries at sequence positions pos[0..Tq) (rows of
     * qkv_q, B x Tq) against the keys and values of qkv_kv (B x Tk), keys j <= pos[t]; out and lse
     * as above for the Tq rows. The backward puts dq in dqkv_q's rows and adds dk, dv to
     * dqkv_kv's. Context parallelism's rank attends its positions to the gathered sequence. */
    void (*attention_forward_at)(float *out, float *lse, const float *qkv_q, const float *qkv_kv, const int *pos,
                                 int B, int Tq, int Tk, int C, int NH, kernels_precision prec);
    void (*attention_backward_at)(float *dqkv_q, float *dqkv_kv, const float *dout, const float *qkv_q,
                                  const float *qkv_kv, const float *out, const float *lse, const int *pos, int B,
                                  int Tq, int Tk, int C, int NH, kernels_precision prec);
    /* Optional: ring attention (context parallelism's cp_comm_type p2p). A block: queries (rows of
     * qkv_q, B x Tq, at positions qpos[0..Tq)) against a block of keys and values (rows of kv, B x
     * Tk, each 2C: k then v, as Megatron-Core passes them around the ring) at positions kpos[0..Tk),
     * increasing; key j is seen by row t when kpos[j] <= qpos[t]. out (B,Tq,C) is the attention
     * over the block's keys, left in fp32 (the caller rounds the merged output once), lse
     * (B,NH,Tq) its log-sum-exp; a row that sees no key gets out 0, lse -inf. The merge folds a
     * block's (blk_out, blk_lse) into (out, lse) of the same rows by the online-softmax rule. The
     * backward takes each row's merged out and lse (over all blocks) and adds the block's share:
     * dq into dqkv_q's q part, dk and dv into dkv (rows as kv). */
    void (*attention_block_forward)(float *out, float *lse, const float *qkv_q, const float *kv, const int *qpos,
                                    const int *kpos, int B, int Tq, int Tk, int C, int NH, kernels_precision prec);
    void (*attention_block_backward)(float *dqkv_q, float *dkv, const float *dout, const float *qkv_q,
                                     const float *kv, const float *out, const float *lse, const int *qpos,
                                     const int *kpos, int B, int Tq, int Tk, int C, int NH, kernels_precision prec);
    void (*attention_merge)(float *out, float *lse, const float *blk_out, const float *blk_lse, int B, int T, int C,
                            int NH);

    /* Rotary position embeddings (Megatron-LM's --position-embedding-type rope; the rotate-half
     * form of Megatron-Core and Hugging Face Llama). x holds B*T rows of `row` floats; the first
     * `nheads` heads of hd floats (hd even) of each row are rotated, the rest left alone (the
     * q and k heads of a qkv row, then its v). Row (b, t) sits at position p = pos[t] (pos a host
     * array of T, NULL: p = t). Within a head, element i < hd/2 pairs with i + hd/2 and both turn
     * by the angle p * theta_i, theta_i = base^(-2i/hd) (fp32, as Megatron computes inv_freq):
     *   x_i' = x_i cos - x_{i+hd/2} sin,   x_{i+hd/2}' = x_{i+hd/2} cos + x_i sin.
     * Both work in place; the backward turns the gradient back by the same angle (the rotation's
     * transpose) -- it transforms, unlike the other backwards, which add. */
    void (*rope_forward)(float *x, const int *pos, int B, int T, int row, int nheads, int hd, float base);
    void (*rope_backward)(float *dx, const int *pos, int B, int T, int row, int nheads, int hd, float base);

    /* Grouped-query attention's keys and values for the multi-head attention kernel: inp (B*T
     * rows of (NH + 2 G) * hd: NH query heads, G key heads, G value heads) -> out (B*T rows of
     * 3 NH hd: q as it is, then key and value head h taken from group h / (NH / G), as Megatron
     * and Hugging Face repeat them). The backward adds the NH / G gradients of each repeated head
     * into its group's row of dinp (and dq into dinp's q). G divides NH. */
    void (*kv_repeat_forward)(float *out, const float *inp, int B, int T, int NH, int G, int hd);
    void (*kv_repeat_backward)(float *dinp, const float *dout, int B, int T, int NH, int G, int hd);

    /* The activations and the residual add round what they store to prec in the same pass
     * (KPREC_FP32: no rounding), as a framework's kernel writes its bf16 output: a pass of its
     * own cost GPT-2 124M's GELU twice its traffic on an H200 (dtcal validate, 2026-11-27). A
     * backward rounds the gradient it has added into.
     *
     * SwiGLU (Megatron-LM's --swiglu): each of N rows of inp holds 2F floats, the gate half then
     * the up half (as Megatron chunks fc1's output); out (N,F) = silu(gate) * up, silu(x) = x /
     * (1 + exp(-x)). The backward adds into dinp (N, 2F). */
    void (*swiglu_forward)(float *out, const float *inp, int N, int F, kernels_precision prec);
    void (*swiglu_backward)(float *dinp, const float *inp, const float *dout, int N, int F,
                            kernels_precision prec);

    /* GELU, tanh approximation (as GPT-2) */
    void (*gelu_forward)(float *out, const float *inp, size_t N, kernels_precision prec);
    void (*gelu_backward)(float *dinp, const float *inp, const float *dout, size_t N, kernels_precision prec);

    /* out = a + b */
    void (*residual_forward)(float *out, const float *a, const float *b, size_t N, kernels_precision prec);

    /* row softmax of (rows, cols) */
    void (*softmax_forward)(float *out, const float *inp, int rows, int cols);

    /* fused softmax + cross-entropy over logits (N,V): losses[i] = -log softmax(logits_i)[targets_i].
     * backward: dlogits[i,:] += dloss * (softmax(logits_i) - onehot(targets_i)) */
    void (*cross_entropy_forward)(float *losses, const float *logits, const int *targets, int N,
                                  int V);
    void (*cross_entropy_backward)(float *dlogits, const float *logits, const int *targets,
                                   float dloss, int N, int V);

    /* AdamW, decoupled weight decay, bias correction with step t (1-based).
     * g = grads * grad_scale (unscaling and clipping folded in). */
    void (*adamw_update)(float *params, const float *grads, float *m, float *v, size_t n,
                         float lr, float beta1, float beta2, float eps, float weight_decay,
                         int t, float grad_scale);

    /* precision helpers */
    void (*round_to_precision)(float *x, size_t n, kernels_precision prec); /* in place, RNE */
    void (*cast_to_half)(uint16_t *out, const float *in, size_t n, kernels_precision prec);
    void (*cast_from_half)(float *out, const uint16_t *in, size_t n, kernels_precision prec);

    /* reductions, results returned to the host */
    /* for the global gradient norm: out[i] = sum of x[i][0..n[i])^2, in double, for count ranges
     * read in one pass and returned with one wait (a wait per tensor cost GPT-2 124M 3.4 ms a
     * step on an H100, 2026-11-26, where a framework's norm is one pass) */
    void (*sum_squares)(const float *const *x, const size_t *n, int count, double *out);
    int (*has_inf_or_nan)(const float *x, size_t n);  /* for fp16 loss scaling */
} kernels_backend;

/* The CPU backend, always available. */
const kernels_backend *kernels_cpu(void);
/* The CUDA backend, or NULL where CUDA was not built or no device is present
 * (why is written to why[0..whylen) when non-NULL). */
const kernels_backend *kernels_cuda(char *why, size_t whylen);

/* Host-side helpers shared by both backends and the tests (exact RNE conversions). */
uint16_t kernels_float_to_bf16(float f);
float kernels_bf16_to_float(uint16_t h);
uint16_t kernels_float_to_fp16(float f);
float kernels_fp16_to_float(uint16_t h);
float kernels_round(float f, kernels_precision prec);

#ifdef __cplusplus
}
#endif
#endif
