/* The CUDA model against the CPU model, GPT-2's blocks and Llama's: same weights and batch, same
 * loss and gradients within the precision's bound. Exits 77 (skipped) where there is no CUDA backend. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "gpt.h"
#include "rng.h"

/* One forward and backward of cfg on both backends; 0 when they agree. */
static int same_step(const kernels_backend *gpu, const gpt_config *cfg, const char *what)
{
    int B = 3, N = B * cfg->seq_len;
    gpt_model a, b;
    gpt_init(&a, cfg, kernels_cpu(), KPREC_FP32, B, 11);
    gpt_init(&b, cfg, gpu, KPREC_FP32, B, 11); /* same seed: same weights, initialised on the host */
    if (gpt_params_crc32(&a) != gpt_params_crc32(&b)) {
        printf("%s: the two backends start from different weights\n", what);
        return 1;
    }
    int *tok = malloc(N * sizeof(int)), *tgt = malloc(N * sizeof(int));
    rng_t r;
    rng_seed(&r, 5);
    for (int i = 0; i < N; i++) {
        tok[i] = (int)(rng_next(&r) % cfg->vocab);
        tgt[i] = (int)(rng_next(&r) % cfg->vocab);
    }
    float la = gpt_forward(&a, tok, tgt), lb = gpt_forward(&b, tok, tgt);
    gpt_backward(&a, 1.0f / N);
    gpt_backward(&b, 1.0f / N);
    float *gb = malloc(b.num_params * sizeof(float));
    gpu->copy_to_host(gb, b.grads, b.num_params * sizeof(float));
    double num = 0, den = 1e-30;
    for (size_t i = 0; i < a.num_params; i++) {
        num = fmax(num, fabs(a.grads[i] - gb[i]));
        den = fmax(den, fabs(a.grads[i]));
    }
    printf("%s: loss cpu %.6f cuda %.6f; gradient max relative difference %.3g\n", what, la, lb, num / den);
    int ok = fabs(la - lb) <= 1e-5 * fabs(la) && num / den <= 1e-4 && !isnan(num);
    free(gb); free(tok); free(tgt);
    gpt_free(&a);
    gpt_free(&b);
    return ok ? 0 : 1;
}

int main(void)
{
    char why[256];
    const kernels_backend *gpu = kernels_cuda(why, sizeof why);
    if (!gpu) {
        printf("skipped: %s\n", why);
        return 77;
    }
    gpt_config gpt2 = {.num_layers = 2, .hidden = 64, .heads = 4, .seq_len = 32, .vocab = 256};
    /* Llama's blocks: every new kernel (RMSNorm, rope, kv_repeat, SwiGLU) and the untied head */
    gpt_config llama = {.num_layers = 2, .hidden = 64, .heads = 4, .seq_len = 32, .vocab = 256, .kv_groups = 2,
                        .ffn_hidden = 176, .swiglu = 1, .rmsnorm = 1, .rope = 1, .untied = 1};
    /* four SwiGLU experts, two per token, dropless */
    gpt_config moe = llama;
    moe.num_experts = 4;
    moe.moe_topk = 2;
    int failed = same_step(gpu, &gpt2, "GPT-2 blocks");
    failed |= same_step(gpu, &llama, "Llama blocks");
    failed |= same_step(gpu, &moe, "Llama blocks with experts");
    return failed;
}
