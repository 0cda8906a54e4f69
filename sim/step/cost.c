/* Compute-op costs from the calibration (see cost.h for the rules). */
#include <math.h>
#include <stdint.h>
#include "cost.h"

/* Used where a calibration lacks a figure; each use is a stated assumption (docs/model.md). */
#define DEFAULT_GEMM_EFFICIENCY 0.70   /* typical large-GEMM fraction of peak when no table */
#define DEFAULT_MEMORY_EFFICIENCY 0.70 /* memory-bound kernels reach ~70% of HBM bandwidth */
#define DEFAULT_ATTENTION_EFFICIENCY 0.50
/* A calibration without compute_variability_cv: Sinha et al., "Not All GPUs Are Created Equal",
 * SC'22 (arXiv:2208.11035v3, abstract): "8% (max 22%) average performance variation" between GPUs
 * of one SKU across five clusters of V100 and MI60. Read here, as an assumption, as the spread
 * between a cluster's fastest and slowest GPU (outliers aside) over several thousand GPUs, which for
 * normally distributed speeds is about 7.3 standard deviations (twice the expected maximum of
 * 4,000 draws): sigma / mean = 0.08 / 7.3 = 0.011. Not a measurement of any platform here: `mpirun
 * dtcal variability` measures it (docs/model.md, "The slowest device"). */
#define DEFAULT_COMPUTE_VARIABILITY_CV 0.011

void cost_model_init(cost_model *cm, const scenario_config *s)
{
    cm->platform = &s->platform;
    cm->calibration = &s->calibration;
    cm->precision = s->training.precision;
    cm->act_bytes = scenario_activation_bytes(s);
    /* fused attention's figures: the scenario's backend's, else flash's (a calibration that
     * measured one kernel) */
    const attention_calibration *att = &s->calibration.attention[s->model.attention_backend];
    cm->attention = att->points > 0 || att->efficiency > 0 ? att : &s->calibration.attention[ATTN_BACKEND_FLASH];
    cm->ranks_per_device = cost_ranks_per_device(s);
    cm->slowest_device = cost_slowest_device_factor(s);
    cm->pace = cm->ranks_per_device * cm->slowest_device;
}

double cost_overlap_comm_share(double slowdown)
{
    return slowdown > 1 ? 1 - 1 / slowdown : 0;
}

double cost_overlap_compute_share(int n_comm, double slowdown)
{
    if (n_comm <= 0)
        return 1;
    double fair = 1.0 / (n_comm + 1), b = cost_overlap_comm_share(slowdown);
    return b <= fair ? 1 - n_comm * b : fair;
}

double cost_expected_max_normal(double n)
{
    if (n <= 1)
        return 0;
    /* Blom (1958): the expected largest of n standard normals is close to the normal quantile of
     * (n - 0.375) / (n + 0.25); that quantile solves Q(x) = 0.625 / (n + 0.25) for the upper
     * tail Q, by Newton's method from the Gumbel-scale first guess sqrt(2 ln n) */
    double q = 0.625 / (n + 0.25), x = sqrt(2 * log(n));
    for (int i = 0; i < 50; i++) {
        double tail = 0.5 * erfc(x / sqrt(2.0)), density = exp(-0.5 * x * x) / sqrt(2 * 3.14159265358979323846);
        double step = (tail - q) / density;
        x += step;
        if (fabs(step) < 1e-12)
            break;
    }
    return x;
}

double cost_slowest_device_factor(const scenario_config *s)
{
    double cv = s->calibration.compute_variability_cv;
    if (cv < 0)
        cv = DEFAULT_COMPUTE_VARIABILITY_CV;
    return 1 + cv * cost_expected_max_normal(scenario_gpus(s));
}

double cost_ranks_per_device(const scenario_config *s)
{
    /* ranks are placed node by node, node.gpus to a node: the fullest node holds this many */
    int gpus = scenario_gpus(s), slots = s->platform.node.gpus > 0 ? s->platform.node.gpus : 1;
    int on_node = gpus < slots ? gpus : slots;
    int devices = s->platform.node.compute_devices > 0 ? s->platform.node.compute_devices : slots;
    if (on_node <= devices)
        return 1.0;
    /* A pipeline stage computes m v of the m v + p - 1 slots of its schedule (equal stages): in
     * the bubble its ranks wait, and the others have the devices. */
    double m = (double)scenario_micro_batches(s), p = s->parallel.pp > 0 ? s->parallel.pp : 1;
    double v = s->parallel.schedule == PIPELINE_INTERLEAVED && s->parallel.vpp > 1 ? s->parallel.vpp : 1;
    double busy = m > 0 ? m * v / (m * v + p - 1) : 1.0;
    double computing = on_node * busy;
    return computing > devices ? computing / devices : 1.0;
}

double cost_peak_flops(const cost_model *cm)
{
    return cm->platform->gpu.peak_tflops[cm->precision] * 1e12;
}

static const gemm_table *table_of(const calibration_config *c, precision_kind precision)
{
    const gemm_table *t = &c->gemm[precision];
    /* fp8 training runs its GEMMs in fp8 but falls back to the bf16 table if fp8 has none. */
    if (t->count == 0 && precision == PREC_FP8)
        t = &c->gemm[PREC_BF16];
    return t;
}

static const gemm_table *table_for(const cost_model *cm)
{
    return table_of(cm->calibration, cm->precision);
}

void cost_rates_over_platform(const scenario_config *s, double *gemm_tflops, double *memory_gbs)
{
    const gemm_table *t = table_of(&s->calibration, s->training.precision);
    double best = 0, fastest = 0;
    for (int i = 0; i < t->count; i++)
        best = fmax(best, t->points[i].tflops);
    for (int c = 0; c < OPCLASS_COUNT; c++)
        fastest = fmax(fastest, fmax(s->calibration.op_gbs[c], s->calibration.op_gbs_backward[c]));
    *gemm_tflops = best > s->platform.gpu.peak_tflops[s->training.precision] ? best : 0;
    *memory_gbs = fastest > s->platform.gpu.hbm_bandwidth_gbs ? fastest : 0;
}

/* The lookup below is O(table points) and a measured table has a thousand; a plan asks for the
 * same few shapes over and over, layout after layout. So the last answers are remembered, per
 * thread (the planner's workers each keep their own: no locks), keyed by everything the answer
 * depends on: the table (its parse id, never reused, unlike an address), the peak and the shape.
 * Tables built by hand (id 0) are not remembered. */
#define GEMM_MEMO_SLOTS 1024
typedef struct {
    unsigned long long table;
    double peak, m, n, k, efficiency;
} gemm_memo;
static _Thread_local gemm_memo memo[GEMM_MEMO_SLOTS];

static unsigned memo_slot(unsigned long long table, double m, double n, double k)
{
    uint64_t h = (uint64_t)table * 0x9E3779B97F4A7C15ull;
    h ^= (uint64_t)m * 0xC2B2AE3D27D4EB4Full;
    h ^= (uint64_t)n * 0x165667B19E3779F9ull;
    h ^= (uint64_t)k * 0x27D4EB2F165667C5ull;
    return (unsigned)(h >> 40) % GEMM_MEMO_SLOTS;
}

static double gemm_efficiency_lookup(const gemm_table *t, double peak, double m, double n, double k);

static double gemm_efficiency_measured(const cost_model *cm, double m, double n, double k);

/* A measured rate above the platform's peak (a table from a faster GPU, or a peak set lower)
 * cannot be reached: the efficiency is at most 1, so that MFU stays at most 1. */
double cost_gemm_efficiency(const cost_model *cm, double m, double n, double k)
{
    return fmin(gemm_efficiency_measured(cm, m, n, k), 1.0);
}

static double gemm_efficiency_measured(const cost_model *cm, double m, double n, double k)
{
    const gemm_table *t = table_for(cm);
    if (t->count == 0)
        return DEFAULT_GEMM_EFFICIENCY;
    double peak = cost_peak_flops(cm);
    if (peak <= 0)
        return 0;
    if (!t->id)
        return gemm_efficiency_lookup(t, peak, m, n, k);
    gemm_memo *e = &memo[memo_slot(t->id, m, n, k)];
    if (e->table == t->id && e->peak == peak && e->m == m && e->n == n && e->k == k)
        return e->efficiency;
    double eff = gemm_efficiency_lookup(t, peak, m, n, k);
    *e = (gemm_memo){t->id, peak, m, n, k, eff};
    return eff;
}

static double gemm_efficiency_lookup(const gemm_table *t, double peak, double m, double n, double k)
{

    /* Rates stay in TFLOP/s through the loops (efficiency is linear in them): one division at
     * the end, not one a point. */
    double lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {0, 0, 0}, best = 0, worst = INFINITY;
    for (int i = 0; i < t->count; i++) {
        const gemm_point *p = &t->points[i];
        lo[0] = fmin(lo[0], p->m), hi[0] = fmax(hi[0], p->m);
        lo[1] = fmin(lo[1], p->n), hi[1] = fmax(hi[1], p->n);
        lo[2] = fmin(lo[2], p->k), hi[2] = fmax(hi[2], p->k);
        best = fmax(best, p->tflops);
        worst = fmin(worst, p->tflops);
    }
    double to_eff = 1e12 / peak;
    double q[3] = {m, n, k};
    int inside = 1;
    for (int d = 0; d < 3; d++)
        if (q[d] < lo[d] * 0.999 || q[d] > hi[d] * 1.001)
            inside = 0;
    /* Beyond the largest measured shape in every dimension: big GEMMs run at the best measured
     * efficiency (the roofline fallback). A shape larger in only some dimensions is
     * interpolated like any other: the best point is often a best *tile* shape, not a bound. */
    int larger = 1;
    for (int d = 0; d < 3; d++)
        if (q[d] < hi[d] * 0.999)
            larger = 0;
    if (!inside && larger)
        return best * to_eff;

    /* Inverse-distance weighting in log(m, n, k): smooth, exact at the table's points, and
     * bounded by the smallest and largest efficiency of the table, so it never extrapolates
     * beyond a known efficiency. Shapes smaller than the table clamp to the nearest points. */
    double wsum = 0, rsum = 0, lm = log2(fmax(m, 1)), ln = log2(fmax(n, 1)), lk = log2(fmax(k, 1));
    for (int i = 0; i < t->count; i++) {
        const gemm_point *p = &t->points[i];
        const double *l = t->log2_mnk ? &t->log2_mnk[3 * i] : (double[3]){log2(p->m), log2(p->n), log2(p->k)};
        double dm = lm - l[0], dn = ln - l[1], dk = lk - l[2];
        double d2 = dm * dm + dn * dn + dk * dk;
        if (d2 < 1e-12)
            return p->tflops * to_eff;
        double w = 1.0 / (d2 * d2);
        wsum += w;
        rsum += w * p->tflops;
    }
    return fmin(best, fmax(worst, rsum / wsum)) * to_eff;
}

double cost_gemm_s(const cost_model *cm, double m, double n, double k, double batch)
{
    double peak = cost_peak_flops(cm);
    if (peak <= 0)
        return INFINITY;
    double eff = cost_gemm_efficiency(cm, m, n, k);
    double flops = 2.0 * m * n * k * batch;
    double t_compute = flops / (peak * eff);
    /* Roofline floor: inputs and output cross HBM at least once. */
    double bytes = (m * k + k * n + m * n) * cm->act_bytes * batch;
    double t_memory = bytes / (cm->platform->gpu.hbm_bandwidth_gbs * 1e9);
    return (fmax(t_compute, t_memory) + cm->calibration->launch_overhead_us * 1e-6) * cm->pace;
}

/* bytes at gbs GB/s (the class's calibrated rate, else the default share of HBM), without the
 * launch */
static double bytes_s(const cost_model *cm, double gbs, double bytes)
{
    if (gbs <= 0)
        gbs = cm->platform->gpu.hbm_bandwidth_gbs * DEFAULT_MEMORY_EFFICIENCY;
    gbs = fmin(gbs, cm->platform->gpu.hbm_bandwidth_gbs); /* no kernel passes HBM's rate */
    return bytes / (gbs * 1e9) * cm->pace;
}

/* ... plus a launch */
static double memory_s(const cost_model *cm, double gbs, double bytes)
{
    return bytes_s(cm, gbs, bytes) + cm->calibration->launch_overhead_us * 1e-6 * cm->pace;
}

/* The class's calibrated rate, forward or backward, or its stand-in's where the calibration did
 * not measure the class at all (op_class_fallback); 0 when not measured. */
static double class_gbs(const calibration_config *c, op_class cls, int backward)
{
    op_class measured = c->op_gbs[cls] > 0 ? cls : op_class_fallback(cls);
    return backward ? c->op_gbs_backward[measured] : c->op_gbs[measured];
}

double cost_memory_s(const cost_model *cm, op_class cls, double bytes)
{
    return memory_s(cm, class_gbs(cm->calibration, cls, 0), bytes);
}

double cost_memory_bytes_s(const cost_model *cm, op_class cls, double bytes)
{
    return bytes_s(cm, class_gbs(cm->calibration, cls, 0), bytes);
}

/* The cost model of the attention core (its batched products, or fused attention without a
 * measured table): the training precision's, but bf16 under fp8, as Transformer Engine's fp8
 * training keeps it (its fp8 attention is a separate option, fp8_dot_product_attention, not
 * modelled). */
static cost_model attention_core_model(const cost_model *cm)
{
    cost_model core = *cm;
    if (core.precision == PREC_FP8)
        core.precision = PREC_BF16;
    return core;
}

/* Whether the table has rows tagged with precision p. */
static int has_rows_of(const attention_calibration *a, precision_kind p)
{
    for (int i = 0; i < a->points; i++)
        if (a->table[i].tagged && a->table[i].precision == p)
            return 1;
    return 0;
}

/* The sibling of the same width: fp16 for bf16 and back, fp32 for tf32 and back. */
static precision_kind attention_sibling(precision_kind prec)
{
    return prec == PREC_FP16   ? PREC_BF16
           : prec == PREC_BF16 ? PREC_FP16
           : prec == PREC_TF32 ? PREC_FP32
           : prec == PREC_FP32 ? PREC_TF32
                               : prec;
}

/* Whether the table speaks for attention in precision prec: it has rows of prec or of its
 * sibling, or rows that name no precision. A table of other widths only does not: FlashAttention
 * has no fp32 kernel, and an fp32 run's attention priced at a bf16 table's rates ran past the
 * device's fp32 peak (tests/invariants, MFU 1.04 on H100, 2026-11-29); it then runs at the
 * table's efficiency of the precision's peak, as without a table. */
static int attention_table_applies(const attention_calibration *a, precision_kind prec)
{
    for (int i = 0; i < a->points; i++)
        if (!a->table[i].tagged)
            return 1;
    return has_rows_of(a, prec) || has_rows_of(a, attention_sibling(prec));
}

/* The rate of one attention call from the calibration's table (where attention_table_applies).
 * The rows that count: those of the attention's precision (bf16 under fp8:
 * attention_core_model), else of its sibling of the same width, else those that name none. Of
 * those, the shape nearest in log(sequence, head dimension); where that shape was
 * measured at several batches (B x heads a call), the time per FLOP interpolated linearly in
 * log(batch) between the two that bracket the call's, the nearest one outside them (a call that
 * states no batch: the shape's first row). How much of the device one call fills changes the
 * rate (H100, 2026-11-26, dtrain's attention at T 1,024, B 8: 12 heads 18.7 TFLOP/s, 16 heads
 * 21.1; docs/gpu-runs/2026-11-26-h100-b). */
static double attention_table_tflops(const attention_calibration *a, precision_kind prec, double seq,
                                     double head_dim, double batch, int backward)
{
    precision_kind sibling = attention_sibling(prec);
    int mine = has_rows_of(a, prec);
    if (!mine && has_rows_of(a, sibling)) {
        prec = sibling;
        mine = 1;
    }
    /* neither: the table has rows that name no precision (attention_table_applies) */
#define ATT_COUNTS(i) (mine ? a->table[i].tagged && a->table[i].precision == prec : !a->table[i].tagged)
    int best = 0;
    double best_d = INFINITY;
    for (int i = 0; i < a->points; i++) {
        if (!ATT_COUNTS(i))
            continue;
        double ds = log2(seq / a->table[i].seq), dh = log2(head_dim / a->table[i].head_dim);
        if (ds * ds + dh * dh < best_d) {
            best_d = ds * ds + dh * dh;
            best = i;
        }
    }
#define ATT_RATE(i) (backward && a->table[i].tflops_backward > 0 ? a->table[i].tflops_backward : a->table[i].tflops)
    if (!(batch > 0) || !(a->table[best].batch > 0))
        return ATT_RATE(best);
    /* the same shape's rows at other batches: the nearest below and above the call's */
    int lo = -1, hi = -1;
    for (int i = 0; i < a->points; i++) {
        if (!ATT_COUNTS(i) || a->table[i].seq != a->table[best].seq ||
            a->table[i].head_dim != a->table[best].head_dim || !(a->table[i].batch > 0))
            continue;
        if (a->table[i].batch <= batch && (lo < 0 || a->table[i].batch > a->table[lo].batch))
            lo = i;
        if (a->table[i].batch >= batch && (hi < 0 || a->table[i].batch < a->table[hi].batch))
            hi = i;
    }
    if (lo < 0 || hi < 0 || a->table[lo].batch == a->table[hi].batch)
        return ATT_RATE(lo >= 0 ? lo : hi);
    double f = log(batch / a->table[lo].batch) / log(a->table[hi].batch / a->table[lo].batch);
    double per_flop = (1 - f) / ATT_RATE(lo) + f / ATT_RATE(hi);
    return 1.0 / per_flop;
#undef ATT_RATE
#undef ATT_COUNTS
}

static double cost_compute_op_once_s(const cost_model *cm, const layer_op *op);

/* The launches an op makes beyond the one its time already holds (layer_op.launches). */
static double extra_launches_s(const cost_model *cm, const layer_op *op)
{
    return (op->launches > 1 ? op->launches - 1 : 0) * cm->calibration->launch_overhead_us * 1e-6 * cm->pace;
}

double cost_compute_op_s(const cost_model *cm, const layer_op *op)
{
    double t = cost_compute_op_once_s(cm, op);
    return t > 0 ? t + extra_launches_s(cm, op) : t;
}

static double cost_compute_op_once_s(const cost_model *cm, const layer_op *op)
{
    switch (op->kind) {
    case OPK_GEMM: { /* a grouped GEMM (the experts') at the efficiency of each group's shape */
        /* rows from the FLOPs: a group's share of the rows need not be whole (op->m is rounded) */
        double g = op->batch > 1 ? (double)op->batch : 1, n = (double)op->n, k = (double)op->k;
        double m = n > 0 && k > 0 && op->flops > 0 ? op->flops / (2.0 * g * n * k) : (double)op->m;
        return cost_gemm_s(cm, m, n, k, g);
    }
    case OPK_BATCHED_GEMM: {
        cost_model core = attention_core_model(cm);
        return cost_gemm_s(&core, (double)op->m, (double)op->n, (double)op->k, (double)op->batch);
    }
    case OPK_MEMORY:
        if (op->backward && class_gbs(cm->calibration, op->cls, 1) > 0) /* its backward kernel, measured */
            return memory_s(cm, class_gbs(cm->calibration, op->cls, 1), op->bytes);
        return cost_memory_s(cm, op->cls, op->bytes);
    case OPK_FUSED_ATTENTION: {
        const attention_calibration *a = cm->attention;
        cost_model core = attention_core_model(cm);
        if (a->points > 0 && op->n > 0 && op->k > 0 && attention_table_applies(a, core.precision)) {
            double tflops = attention_table_tflops(a, core.precision, (double)op->n, (double)op->k, (double)op->batch,
                                                   op->backward);
            /* The rates count the causal half the kernel skips (dtsim's convention, 4 B H T^2 hd
             * forward; every model here is a causal decoder): a kernel at the device's peak
             * shows twice it, and no table's rate can pass that. */
            tflops = fmin(tflops, 2 * cost_peak_flops(&core) / 1e12);
            return (op->flops / (tflops * 1e12) + cm->calibration->launch_overhead_us * 1e-6) * cm->pace;
        }
        double eff = a->efficiency;
        if (eff <= 0)
            eff = DEFAULT_ATTENTION_EFFICIENCY;
        return (op->flops / (cost_peak_flops(&core) * eff) + cm->calibration->launch_overhead_us * 1e-6) *
               cm->pace;
    }
    case OPK_COMM:
        break;
    }
    return 0;
}
