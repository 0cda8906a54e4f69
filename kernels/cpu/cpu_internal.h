/* The CPU backend's kernels (one file per family in kernels/cpu/), gathered into one table by backend.c. */
#ifndef DTSIM_KERNELS_CPU_INTERNAL_H
#define DTSIM_KERNELS_CPU_INTERNAL_H
#include "kernels.h"

void *cpu_alloc(size_t bytes);
void cpu_free(void *p);
void cpu_memset_zero(void *p, size_t bytes);
void cpu_copy(void *dst, const void *src, size_t bytes);
void cpu_synchronize(void);
void cpu_describe(char *out, size_t len);
kernels_event *cpu_event_create(void);
void cpu_event_destroy(kernels_event *e);
void cpu_event_record(kernels_event *e);
double cpu_event_elapsed_s(kernels_event *start, kernels_event *end);

void cpu_encoder_forward(float *out, const int *tokens, const float *wte, const float *wpe, int B, int T, int C);
void cpu_encoder_backward(float *dwte, float *dwpe, const float *dout, const int *tokens, int B, int T, int C);
void cpu_layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *weight,
                           const float *bias, int N, int C);
void cpu_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                            const float *weight, const float *mean, const float *rstd, int N, int C);
void cpu_rmsnorm_forward(float *out, float *rstd, const float *inp, const float *weight, int N, int C);
void cpu_rmsnorm_backward(float *dinp, float *dweight, const float *dout, const float *inp, const float *weight,
                          const float *rstd, int N, int C);
void cpu_rope_forward(float *x, const int *pos, int B, int T, int row, int nheads, int hd, float base);
void cpu_rope_backward(float *dx, const int *pos, int B, int T, int row, int nheads, int hd, float base);
void cpu_kv_repeat_forward(float *out, const float *inp, int B, int T, int NH, int G, int hd);
void cpu_kv_repeat_backward(float *dinp, const float *dout, int B, int T, int NH, int G, int hd);
void cpu_swiglu_forward(float *out, const float *inp, int N, int F, kernels_precision prec);
void cpu_swiglu_backward(float *dinp, const float *inp, const float *dout, int N, int F, kernels_precision prec);
void cpu_matmul_forward(float *out, const float *inp, const float *weight, const float *bias, int N, int C, int OC,
                        kernels_precision prec);
void cpu_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                         const float *weight, int N, int C, int OC, kernels_precision prec);
void cpu_attention_forward(float *out, float *lse, const float *qkv, int B, int T, int C, int NH,
                           kernels_precision prec);
void cpu_attention_backward(float *dqkv, const float *dout, const float *qkv, const float *out, const float *lse,
                            int B, int T, int C, int NH, kernels_precision prec);
void cpu_attention_forward_at(float *out, float *lse, const float *qkv_q, const float *qkv_kv, const int *pos, int B,
                              int Tq, int Tk, int C, int NH, kernels_precision prec);
void cpu_attention_backward_at(float *dqkv_q, float *dqkv_kv, const float *dout, const float *qkv_q,
                               const float *qkv_kv, const float *out, const float *lse, const int *pos, int B, int Tq,
                               int Tk, int C, int NH, kernels_precision prec);
void cpu_attention_block_forward(float *out, float *lse, const float *qkv_q, const float *kv, const int *qpos,
                                 const int *kpos, int B, int Tq, int Tk, int C, int NH, kernels_precision prec);
void cpu_attention_block_backward(float *dqkv_q, float *dkv, const float *dout, const float *qkv_q, const float *kv,
                                  const float *out, const float *lse, const int *qpos, const int *kpos, int B, int Tq,
                                  int Tk, int C, int NH, kernels_precision prec);
void cpu_attention_merge(float *out, float *lse, const float *blk_out, const float *blk_lse, int B, int T, int C,
                         int NH);
void cpu_gelu_forward(float *out, const float *inp, size_t N, kernels_precision prec);
void cpu_gelu_backward(float *dinp, const float *inp, const float *dout, size_t N, kernels_precision prec);
void cpu_residual_forward(float *out, const float *a, const float *b, size_t N, kernels_precision prec);
void cpu_softmax_forward(float *out, const float *inp, int rows, int cols);
void cpu_cross_entropy_forward(float *losses, const float *logits, const int *targets, int N, int V);
void cpu_cross_entropy_backward(float *dlogits, const float *logits, const int *targets, float dloss, int N, int V);
void cpu_adamw_update(float *params, const float *grads, float *m, float *v, size_t n, float lr, float beta1,
                      float beta2, float eps, float weight_decay, int t, float grad_scale);
void cpu_round_to_precision(float *x, size_t n, kernels_precision prec);
void cpu_cast_to_half(uint16_t *out, const float *in, size_t n, kernels_precision prec);
void cpu_cast_from_half(float *out, const uint16_t *in, size_t n, kernels_precision prec);
void cpu_sum_squares(const float *const *x, const size_t *n, int count, double *out);
int cpu_has_inf_or_nan(const float *x, size_t n);

/* A rounded copy of x (the caller frees), or NULL for fp32 (use x as is). */
float *cpu_rounded_copy(const float *x, size_t n, kernels_precision prec);
#endif
