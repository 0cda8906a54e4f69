/* Every CUDA kernel against the CPU kernel on the same random inputs of odd sizes: relative
 * error bounds per precision (fp32 1e-5, 1e-4 where atomics reorder sums; bf16 1e-2; fp16
 * 5e-3), never NaN. Exits 77 (skipped) where there is no CUDA device. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kernels.h"

static const kernels_backend *C_, *G_;
static int failures;
static unsigned long long seed = 12345;

static float *rnd(size_t n, float scale)
{
    float *x = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = scale * ((float)((seed >> 40) & 0xffffff) / 8388608.0f - 1.0f);
    }
    return x;
}

static float *up(const float *h, size_t n)
{
    float *d = G_->alloc(n * sizeof(float));
    G_->copy_to_device(d, h, n * sizeof(float));
    return d;
}

static void check(const char *what, const float *cpu, const float *dev, size_t n, double tol)
{
    float *g = malloc(n * sizeof(float));
    G_->copy_to_host(g, dev, n * sizeof(float));
    double num = 0, den = 1e-30;
    int nan = 0;
    for (size_t i = 0; i < n; i++) {
        nan |= isnan(g[i]);
        num = fmax(num, fabs(g[i] - cpu[i]));
        den = fmax(den, fabs(cpu[i]));
    }
    int ok = !nan && num / den <= tol;
    printf("%-34s rel err %.2e (bound %.0e) %s\n", what, num / den, tol, ok ? "ok" : "FAIL");
    failures += !ok;
    free(g);
}

static void test_matmul(kernels_precision prec, double tol, const char *label)
{
    int N = 37, C = 29, OC = 43;
    float *in = rnd((size_t)N * C, 1), *w = rnd((size_t)OC * C, 1), *b = rnd(OC, 1), *dout = rnd((size_t)N * OC, 1);
    float *out = calloc((size_t)N * OC, 4), *di = calloc((size_t)N * C, 4), *dw = calloc((size_t)OC * C, 4),
          *db = calloc(OC, 4);
    C_->matmul_forward(out, in, w, b, N, C, OC, prec);
    C_->matmul_backward(di, dw, db, dout, in, w, N, C, OC, prec);
    float *gin = up(in, (size_t)N * C), *gw = up(w, (size_t)OC * C), *gb = up(b, OC), *gd = up(dout, (size_t)N * OC);
    float *gout = G_->alloc((size_t)N * OC * 4), *gdi = G_->alloc((size_t)N * C * 4), *gdw = G_->alloc((size_t)OC * C * 4),
          *gdb = G_->alloc(OC * 4);
    G_->matmul_forward(gout, gin, gw, gb, N, C, OC, prec);
    G_->matmul_backward(gdi, gdw, gdb, gd, gin, gw, N, C, OC, prec);
    char name[64];
    snprintf(name, sizeof name, "matmul forward %s", label);
    check(name, out, gout, (size_t)N * OC, tol);
    snprintf(name, sizeof name, "matmul dinp %s", label);
    check(name, di, gdi, (size_t)N * C, tol);
    snprintf(name, sizeof name, "matmul dweight %s", label);
    check(name, dw, gdw, (size_t)OC * C, tol);
    snprintf(name, sizeof name, "matmul dbias %s", label);
    check(name, db, gdb, OC, tol);
    float *ptrs[] = {in, w, b, dout, out, di, dw, db};
    for (int i = 0; i < 8; i++) free(ptrs[i]);
    float *gptrs[] = {gin, gw, gb, gd, gout, gdi, gdw, gdb};
    for (int i = 0; i < 8; i++) G_->free(gptrs[i]);
}

static void test_attention(kernels_precision prec, double tol, const char *label)
{
    int B = 2, T = 37, C = 48, NH = 3;
    size_t nq = (size_t)B * T * 3 * C, no = (size_t)B * T * C, nl = (size_t)B * NH * T;
    float *qkv = rnd(nq, 1.5f), *dout = rnd(no, 1), *out = calloc(no, 4), *lse = calloc(nl, 4), *dq = calloc(nq, 4);
    C_->attention_forward(out, lse, qkv, B, T, C, NH, prec);
    C_->attention_backward(dq, dout, qkv, out, lse, B, T, C, NH, prec);
    float *gq = up(qkv, nq), *gd = up(dout, no), *go = G_->alloc(no * 4), *gl = G_->alloc(nl * 4), *gdq = G_->alloc(nq * 4);
    G_->attention_forward(go, gl, gq, B, T, C, NH, prec);
    G_->attention_backward(gdq, gd, gq, go, gl, B, T, C, NH, prec);
    char name[64];
    snprintf(name, sizeof name, "attention forward %s", label);
    check(name, out, go, no, tol);
    snprintf(name, sizeof name, "attention lse %s", label);
    check(name, lse, gl, nl, tol);
    snprintf(name, sizeof name, "attention backward %s", label);
    check(name, dq, gdq, nq, prec == KPREC_FP32 ? 1e-4 : tol);
    free(qkv); free(dout); free(out); free(lse); free(dq);
    G_->free(gq); G_->free(gd); G_->free(go); G_->free(gl); G_->free(gdq);
}

static void test_rest(void)
{
    int N = 45, Cc = 77, V = 259, B = 3, T = 5;
    size_t n = (size_t)N * Cc;
    float *x = rnd(n, 2), *w = rnd(Cc, 1), *b = rnd(Cc, 1), *dy = rnd(n, 1);
    float *y = calloc(n, 4), *mean = calloc(N, 4), *rstd = calloc(N, 4), *dx = calloc(n, 4), *dw = calloc(Cc, 4),
          *db = calloc(Cc, 4);
    C_->layernorm_forward(y, mean, rstd, x, w, b, N, Cc);
    C_->layernorm_backward(dx, dw, db, dy, x, w, mean, rstd, N, Cc);
    float *gx = up(x, n), *gw = up(w, Cc), *gb = up(b, Cc), *gdy = up(dy, n), *gy = G_->alloc(n * 4),
          *gm = G_->alloc(N * 4), *gr = G_->alloc(N * 4), *gdx = G_->alloc(n * 4), *gdw = G_->alloc(Cc * 4),
          *gdb = G_->alloc(Cc * 4);
    G_->layernorm_forward(gy, gm, gr, gx, gw, gb, N, Cc);
    G_->layernorm_backward(gdx, gdw, gdb, gdy, gx, gw, gm, gr, N, Cc);
    check("layernorm forward", y, gy, n, 1e-5);
    check("layernorm dinp", dx, gdx, n, 1e-4);
    check("layernorm dweight", dw, gdw, Cc, 1e-4);
    check("layernorm dbias", db, gdb, Cc, 1e-4);

    float *g = calloc(n, 4), *gd = calloc(n, 4), *r = calloc(n, 4);
    C_->gelu_forward(g, x, n);
    C_->gelu_backward(gd, x, dy, n);
    C_->residual_forward(r, x, dy, n);
    float *gg = G_->alloc(n * 4), *ggd = G_->alloc(n * 4), *gres = G_->alloc(n * 4);
    G_->gelu_forward(gg, gx, n);
    G_->gelu_backward(ggd, gx, gdy, n);
    G_->residual_forward(gres, gx, gdy, n);
    check("gelu forward", g, gg, n, 1e-5);
    check("gelu backward", gd, ggd, n, 1e-5);
    check("residual", r, gres, n, 1e-6);

    float *logits = rnd((size_t)N * V, 6), *loss = calloc(N, 4), *dl = calloc((size_t)N * V, 4), *sm = calloc((size_t)N * V, 4);
    int *tg = malloc(N * sizeof(int));
    for (int i = 0; i < N; i++)
        tg[i] = (i * 37) % V;
    C_->cross_entropy_forward(loss, logits, tg, N, V);
    C_->cross_entropy_backward(dl, logits, tg, 0.5f, N, V);
    C_->softmax_forward(sm, logits, N, V);
    float *glog = up(logits, (size_t)N * V), *gloss = G_->alloc(N * 4), *gdl = G_->alloc((size_t)N * V * 4),
          *gsm = G_->alloc((size_t)N * V * 4);
    int *gtg = G_->alloc(N * sizeof(int));
    G_->copy_to_device(gtg, tg, N * sizeof(int));
    G_->cross_entropy_forward(gloss, glog, gtg, N, V);
    G_->cross_entropy_backward(gdl, glog, gtg, 0.5f, N, V);
    G_->softmax_forward(gsm, glog, N, V);
    check("cross_entropy forward", loss, gloss, N, 1e-5);
    check("cross_entropy backward", dl, gdl, (size_t)N * V, 1e-5);
    check("softmax", sm, gsm, (size_t)N * V, 1e-5);

    int tok[15];
    for (int i = 0; i < 15; i++)
        tok[i] = (i * 7) % 11;
    float *wte = rnd(11 * Cc, 1), *wpe = rnd((size_t)T * Cc, 1), *emb = calloc((size_t)B * T * Cc, 4),
          *dwte = calloc(11 * Cc, 4), *dwpe = calloc((size_t)T * Cc, 4);
    C_->encoder_forward(emb, tok, wte, wpe, B, T, Cc);
    C_->encoder_backward(dwte, dwpe, dy, tok, B, T, Cc);
    int *gtok = G_->alloc(sizeof tok);
    G_->copy_to_device(gtok, tok, sizeof tok);
    float *gwte = up(wte, 11 * Cc), *gwpe = up(wpe, (size_t)T * Cc), *gemb = G_->alloc((size_t)B * T * Cc * 4),
          *gdwte = G_->alloc(11 * Cc * 4), *gdwpe = G_->alloc((size_t)T * Cc * 4);
    G_->encoder_forward(gemb, gtok, gwte, gwpe, B, T, Cc);
    G_->encoder_backward(gdwte, gdwpe, gdy, gtok, B, T, Cc);
    check("encoder forward", emb, gemb, (size_t)B * T * Cc, 1e-6);
    check("encoder dwte", dwte, gdwte, 11 * Cc, 1e-5);
    check("encoder dwpe", dwpe, gdwpe, (size_t)T * Cc, 1e-5);

    float *p = rnd(n, 1), *m = calloc(n, 4), *v = calloc(n, 4);
    float *gp = up(p, n), *gmm = G_->alloc(n * 4), *gv = G_->alloc(n * 4);
    for (int t = 1; t <= 3; t++) {
        C_->adamw_update(p, dy, m, v, n, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, t, 0.5f);
        G_->adamw_update(gp, gdy, gmm, gv, n, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, t, 0.5f);
    }
    check("adamw (3 steps)", p, gp, n, 1e-5);

    float *rb = malloc(n * 4), *rh = malloc(n * 4);
    memcpy(rb, x, n * 4);
    memcpy(rh, x, n * 4);
    C_->round_to_precision(rb, n, KPREC_BF16);
    C_->round_to_precision(rh, n, KPREC_FP16);
    float *grb = up(x, n), *grh = up(x, n);
    G_->round_to_precision(grb, n, KPREC_BF16);
    G_->round_to_precision(grh, n, KPREC_FP16);
    check("round to bf16 (bit exact)", rb, grb, n, 0);
    check("round to fp16 (bit exact)", rh, grh, n, 0);

    double ss = C_->sum_squares(x, n), gss = G_->sum_squares(gx, n);
    int ok = fabs(ss - gss) <= 1e-5 * ss && !G_->has_inf_or_nan(gx, n);
    float inf = INFINITY;
    G_->copy_to_device(gx + n / 2, &inf, sizeof inf);
    ok = ok && G_->has_inf_or_nan(gx, n);
    printf("%-34s %s\n", "sum_squares / has_inf_or_nan", ok ? "ok" : "FAIL");
    failures += !ok;
}

int main(void)
{
    char why[256];
    C_ = kernels_cpu();
    G_ = kernels_cuda(why, sizeof why);
    if (!G_) {
        printf("skipped: %s\n", why);
        return 77;
    }
    test_matmul(KPREC_FP32, 1e-5, "fp32");
    test_matmul(KPREC_BF16, 1e-2, "bf16");
    test_matmul(KPREC_FP16, 5e-3, "fp16");
    test_attention(KPREC_FP32, 1e-5, "fp32");
    test_attention(KPREC_BF16, 1e-2, "bf16");
    test_rest();
    printf("%d failure(s)\n", failures);
    return failures ? 1 : 0;
}
