/* encoder: token + position embeddings, out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:] with wte
 * (V, C) and wpe (T, C); backward (adds): dwte[tokens[b,t],:] += dout[b,t,:] and
 * dwpe[t,:] += dout[b,t,:]. The check's vocabulary is small so that tokens repeat and the
 * backward must sum several rows into one. Under rotary embeddings there is no position table:
 * with wpe = dwpe = NULL, out is the token row and only dwte is added to (checked as a second
 * case, "nopos"). fp32 only.
 *
 * Tolerances (rtol, atol):
 *   forward out        2^-24, 0     one fp32 addition: the correctly rounded sum
 *   forward out nopos  exact        a copy of the token row
 *   backward dwte/dwpe 1e-6, 1e-7   fp32 sums of a few rows, in any order */
#include <stdlib.h>
#include <string.h>
#include "lab.h"

/* No position table: out is wte's rows bit for bit, and the backward adds into dwte alone. */
static void check_nopos(lab_run *r, const float *wte, const int *d_tok, const int *tok, const float *d_wte,
                        const float *dout, const float *d_dout, const float *dte0, int B, int T, int C, int V)
{
    size_t bt = (size_t)B * T, nout = bt * C, nte = (size_t)V * C;
    float *d_out = lab_zeros(r, nout * 4), *d_dte = lab_upload(r, dte0, nte * 4);
    double *rdte = lab_widen(dte0, nte);
    r->k->encoder_forward(d_out, d_tok, d_wte, NULL, B, T, C);
    float *got = lab_download(r, d_out, nout);
    size_t bad = 0;
    for (size_t i = 0; i < bt; i++)
        for (int c = 0; c < C; c++)
            bad += memcmp(&got[i * C + c], &wte[(size_t)tok[i] * C + c], sizeof(float)) != 0;
    lab_exact(r, "encoder_forward nopos", KPREC_FP32, "out", bad, nout);
    r->k->encoder_backward(d_dte, NULL, d_dout, d_tok, B, T, C);
    for (size_t i = 0; i < bt; i++)
        for (int c = 0; c < C; c++)
            rdte[(size_t)tok[i] * C + c] += dout[i * C + c];
    lab_compare_dev(r, "encoder_backward nopos", KPREC_FP32, "dwte", d_dte, rdte, nte, (lab_tol){1e-6, 1e-7});
    free(got);
    free(rdte);
    lab_release(r, d_out);
    lab_release(r, d_dte);
}

static void check(lab_run *r)
{
    int B = (int)r->dim[LAB_B], T = (int)r->dim[LAB_T], C = (int)r->dim[LAB_C], V = (int)r->dim[LAB_V];
    size_t bt = (size_t)B * T, nout = bt * C, nte = (size_t)V * C, npe = (size_t)T * C;
    lab_rng g = lab_rng_make(r->seed, 15);
    float *wte = lab_floats(&g, nte, 1.0), *wpe = lab_floats(&g, npe, 0.1), *dout = lab_floats(&g, nout, 1.0);
    float *dte0 = lab_floats(&g, nte, 0.1), *dpe0 = lab_floats(&g, npe, 0.1);
    int *tok = lab_ints(&g, bt, V);
    float *d_wte = lab_upload(r, wte, nte * 4), *d_wpe = lab_upload(r, wpe, npe * 4), *d_out = lab_zeros(r, nout * 4);
    int *d_tok = lab_upload(r, tok, bt * sizeof(int));
    double *ref = lab_dzeros(nout), *rdte = lab_widen(dte0, nte), *rdpe = lab_widen(dpe0, npe);
    for (size_t i = 0; i < bt; i++) {
        int t = (int)(i % (size_t)T);
        for (int c = 0; c < C; c++) {
            double d = dout[i * C + c];
            ref[i * C + c] = (double)wte[(size_t)tok[i] * C + c] + wpe[(size_t)t * C + c];
            rdte[(size_t)tok[i] * C + c] += d;
            rdpe[(size_t)t * C + c] += d;
        }
    }
    r->k->encoder_forward(d_out, d_tok, d_wte, d_wpe, B, T, C);
    lab_compare_dev(r, "encoder_forward", KPREC_FP32, "out", d_out, ref, nout, (lab_tol){0x1p-24, 0});
    float *d_dout = lab_upload(r, dout, nout * 4), *d_dte = lab_upload(r, dte0, nte * 4),
          *d_dpe = lab_upload(r, dpe0, npe * 4);
    r->k->encoder_backward(d_dte, d_dpe, d_dout, d_tok, B, T, C);
    lab_compare_dev(r, "encoder_backward", KPREC_FP32, "dwte", d_dte, rdte, nte, (lab_tol){1e-6, 1e-7});
    lab_compare_dev(r, "encoder_backward", KPREC_FP32, "dwpe", d_dpe, rdpe, npe, (lab_tol){1e-6, 1e-7});
    check_nopos(r, wte, d_tok, tok, d_wte, dout, d_dout, dte0, B, T, C, V);
    void *hosts[] = {wte, wpe, dout, dte0, dpe0, tok, ref, rdte, rdpe};
    for (size_t i = 0; i < sizeof hosts / sizeof hosts[0]; i++)
        free(hosts[i]);
    void *devs[] = {d_wte, d_wpe, d_out, d_tok, d_dout, d_dte, d_dpe};
    for (size_t i = 0; i < sizeof devs / sizeof devs[0]; i++)
        lab_release(r, devs[i]);
}

typedef struct {
    const kernels_backend *k;
    float *wte, *wpe, *out, *dte, *dpe;
    int *tok;
    int B, T, C;
} enc_args;

static void call_fwd(const void *p)
{
    const enc_args *a = p;
    a->k->encoder_forward(a->out, a->tok, a->wte, a->wpe, a->B, a->T, a->C);
}

static void call_bwd(const void *p)
{
    const enc_args *a = p;
    a->k->encoder_backward(a->dte, a->dpe, a->out, a->tok, a->B, a->T, a->C);
}

/* Bytes: the forward reads a wte and a wpe row and writes out per token; the backward reads
 * dout and reads and writes a dwte and a dwpe row per token. */
static void bench(lab_run *r)
{
    int B = (int)r->dim[LAB_B], T = (int)r->dim[LAB_T], C = (int)r->dim[LAB_C], V = (int)r->dim[LAB_V];
    size_t bt = (size_t)B * T, nte = (size_t)V * C, npe = (size_t)T * C;
    lab_rng g = lab_rng_make(r->seed, 16);
    float *hte = lab_floats(&g, nte, 1.0), *hpe = lab_floats(&g, npe, 1.0);
    int *tok = lab_ints(&g, bt, V);
    enc_args a = {.k = r->k, .B = B, .T = T, .C = C};
    a.wte = lab_upload(r, hte, nte * 4);
    a.wpe = lab_upload(r, hpe, npe * 4);
    a.tok = lab_upload(r, tok, bt * sizeof(int));
    a.out = lab_zeros(r, bt * C * 4);
    a.dte = lab_zeros(r, nte * 4);
    a.dpe = lab_zeros(r, npe * 4);
    char shape[96];
    lab_shape_str(r, "B T C V", shape, sizeof shape);
    double btc = (double)bt * C * 4;
    lab_bench(r, "encoder_forward", KPREC_FP32, shape, call_fwd, &a, 3 * btc, 0);
    lab_bench(r, "encoder_backward", KPREC_FP32, shape, call_bwd, &a, 5 * btc, 0);
    void *devs[] = {a.wte, a.wpe, a.tok, a.out, a.dte, a.dpe};
    for (int i = 0; i < 6; i++)
        lab_release(r, devs[i]);
    free(hte);
    free(hpe);
    free(tok);
}

const lab_op lab_encoder = {
    .name = "encoder",
    .what = "token + position embeddings forward and backward (dwte, dwpe; repeated tokens; no wpe); fp32",
    .dims = "B T C V",
    .precs = LAB_FP32_ONLY,
    .check_dim = {[LAB_B] = 3, [LAB_T] = 17, [LAB_C] = 40, [LAB_V] = 23},
    .bench_cpu = {[LAB_B] = 4, [LAB_T] = 256, [LAB_C] = 768, [LAB_V] = 8192},
    .bench_gpu = {[LAB_B] = 8, [LAB_T] = 1024, [LAB_C] = 768, [LAB_V] = 50304},
    .check = check,
    .bench = bench,
};
