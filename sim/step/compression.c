/* Gradient compression models; see compression.h. Every compute cost below is a memory-bound
 * pass priced with the calibration (cost_memory_s, OPCLASS_ELEMENTWISE, which includes the
 * kernel launch) or a GEMM priced with the calibration's GEMM table (cost_gemm_s, whose
 * small-shape efficiency is what makes PowerSGD's thin products cost what they cost).
 * Notation: E gradient elements in the bucket, n = DP x CP ranks, nat = bytes per gradient
 * element in the training precision, v = bytes per value on the wire. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "compression.h"
#include "params.h"

static double mem_s(const grad_compressor *gc, double bytes)
{
    return cost_memory_s(&gc->cm, OPCLASS_ELEMENTWISE, bytes);
}

int compression_matrices(const scenario_config *s, int embedding, grad_matrix *out, double *vector_elements)
{
    double h = (double)s->model.hidden_size, f = (double)s->model.ffn_hidden_size;
    double tp = s->parallel.tp > 0 ? s->parallel.tp : 1, ep = s->parallel.ep > 0 ? s->parallel.ep : 1;
    double q = scenario_query_width(s), kv = scenario_kv_width(s);
    int n = 0;
    *vector_elements = 0;
    if (embedding) {
        /* the vocab-parallel token table, and learned positions unless rotary (params.c) */
        out[n++] = (grad_matrix){(double)s->model.vocab_size / tp, h, 1};
        if (!s->model.rope)
            out[n++] = (grad_matrix){(double)s->model.seq_length, h, 1};
        return n;
    }
    /* attention: QKV column-parallel (rows split), projection row-parallel (columns split) */
    out[n++] = (grad_matrix){(q + 2 * kv) / tp, h, 1};
    out[n++] = (grad_matrix){h, q / tp, 1};
    /* QKV bias, projection bias, two norms (each as the final one: weight, and bias under LayerNorm) */
    *vector_elements += (q + 2 * kv) / tp + h + 2 * params_final_norm(s);
    /* MLP: fc1 (two of them with SwiGLU: gate and up), fc2; per expert with MoE */
    double copies = s->model.num_experts > 0 ? (double)s->model.num_experts / ep : 1;
    out[n++] = (grad_matrix){f / tp, h, (s->model.swiglu ? 2 : 1) * copies};
    out[n++] = (grad_matrix){h, f / tp, copies};
    *vector_elements += copies * ((s->model.swiglu ? 2 : 1) * f / tp + h);
    if (s->model.num_experts > 0)
        out[n++] = (grad_matrix){(double)s->model.num_experts, h, 1}; /* router */
    return n;
}

int powersgd_compresses(double rows, double cols, int rank)
{
    return rows * cols > (rows + cols) * rank;
}

/* PowerSGD on one unit (a layer or the embedding), per compressed matrix M (n x m), rank r,
 * following Vogels et al. Algorithm 1 with error feedback, as PyTorch's powerSGD_hook runs it:
 *  before:  M += error (read M, read error, write M: 3 nat E), keep a copy of M for the new
 *           error (2 nat E), P = M Q: GEMM (n x m)(m x r);
 *  between: orthogonalise P by Gram-Schmidt (~2 n r^2 flops; memory-bound at small r: column
 *           j reads the j columns before it and itself and writes itself, sum over j of
 *           (j + 2) n v = n v r (r + 3) / 2 bytes), Q = M^T P: GEMM (m x n)(n x r);
 *  after:   M' = P Q^T: GEMM (n x r)(r x m), error = copy - M' (3 nat E).
 * All-reduced: P (n r) plus the uncompressed tensors, then Q (m r). */
static powersgd_unit powersgd_unit_of(const grad_compressor *gc, int embedding)
{
    powersgd_unit u;
    memset(&u, 0, sizeof u);
    grad_matrix mats[GRAD_MATRICES_MAX];
    double vec;
    int n = compression_matrices(gc->s, embedding, mats, &vec);
    double r = gc->rank, v = gc->value_bytes, nat = gc->natural;
    u.elements = u.p_elements = vec;
    for (int i = 0; i < n; i++) {
        double rows = mats[i].rows, cols = mats[i].cols, c = mats[i].count, e = rows * cols;
        u.elements += c * e;
        if (!powersgd_compresses(rows, cols, gc->rank)) {
            u.p_elements += c * e;
            continue;
        }
        u.p_elements += c * rows * r;
        u.q_elements += c * cols * r;
        u.pre_s += c * (mem_s(gc, 5 * nat * e) + cost_gemm_s(&gc->cm, rows, r, cols, 1));
        u.mid_s += c * (mem_s(gc, rows * v * r * (r + 3) / 2) + cost_gemm_s(&gc->cm, cols, r, rows, 1));
        u.post_s += c * (cost_gemm_s(&gc->cm, rows, cols, r, 1) + mem_s(gc, 3 * nat * e));
        u.flops += c * (3 * 2 * e * r + 2 * rows * r * r);
    }
    return u;
}

void compression_init(grad_compressor *gc, const scenario_config *s)
{
    memset(gc, 0, sizeof *gc);
    gc->s = s;
    cost_model_init(&gc->cm, s);
    gc->natural = (s->training.precision == PREC_FP32 || s->training.precision == PREC_TF32) ? 4 : 2;
    gc->wire_elem = params_grad_reduce_bytes(s);
    gc->int8 = s->parallel.grad_reduce_int8;
    gc->method = s->parallel.grad_compression;
    gc->zero_stage = s->parallel.zero_stage;
    gc->value_bytes = gc->int8 ? 1 : gc->wire_elem;
    gc->ratio = s->parallel.topk_ratio;
    gc->rank = s->parallel.powersgd_rank;
    gc->active = gc->int8 || gc->method != GRAD_COMPRESSION_NONE;
    if (gc->method == GRAD_COMPRESSION_POWERSGD) {
        gc->layer = powersgd_unit_of(gc, 0);
        gc->embedding = powersgd_unit_of(gc, 1);
    }
}

void compression_plan_bucket(const grad_compressor *gc, double elements, int embedding, coll_group dp,
                             compressed_bucket *out)
{
    memset(out, 0, sizeof *out);
    double E = elements, n = dp.ranks > 1 ? dp.ranks : 1, nat = gc->natural, v = gc->value_bytes;
    if (gc->int8) {
        /* ZeRO++ qgZ. Quantise the bucket (read nat E, write q E, q = 1 + 4/GRAD_INT8_BLOCK with
         * the fp32 block scales). Reduce-scatter by all-to-all, hierarchically (the paper's
         * 2-hop form): inside the node, slice j of every GPU goes to GPU j ((g-1)/g of q E over
         * NVLink), which dequantises the g copies, reduces them in fp32 (read q E, write 4 E/g)
         * and requantises (read 4 E/g, write q E/g); across nodes the same on the node's 1/g
         * slice, one rail per GPU ((N-1)/N of q E/g per NIC), then dequantise and reduce into
         * the fp32 shard (read q E/g, write 4 E/n). The sums never round through int8. Those
         * wire bytes are exactly a hierarchical reduce-scatter of q E, which collective.c
         * prices (ring, or NVLink then rails) and the flow replay simulates, so it is sent as
         * that collective; the reductions are the compute tasks here, charged after it (the
         * between-hop requantisation included: the chain is serial either way). A single-hop
         * all-to-all would push (n-g)/n of q E through each GPU's one NIC instead.
         * ZeRO >= 1 stops there (each rank owns its shard). ZeRO 0 needs the whole reduced
         * gradient everywhere: requantise the shard (read 4 E/n, write q E/n), all-gather it
         * (q E bytes gathered), dequantise (read q E, write nat E). */
        double q = gc->wire_elem, g = dp.per_node > 1 && dp.nodes > 1 ? dp.per_node : n;
        out->pre_s = mem_s(gc, E * (nat + q));
        out->coll1 = COLL_REDUCE_SCATTER;
        out->bytes1 = E * q;
        out->name1 = "dp_grad_qgz_reduce_scatter_int8";
        double reduce_s = mem_s(gc, E * q + 4 * E / g);
        if (g < n) /* the second hop */
            reduce_s += mem_s(gc, E / g * (4 + q)) + mem_s(gc, q * E / g + 4 * E / n);
        if (gc->zero_stage == 0) {
            out->mid_s = reduce_s + mem_s(gc, E / n * (4 + q));
            out->coll2 = COLL_ALL_GATHER;
            out->bytes2 = E * q;
            out->name2 = "dp_grad_allgather_int8";
            out->post_s = mem_s(gc, E * (q + nat));
        } else {
            out->post_s = reduce_s;
        }
        return;
    }
    if (gc->method == GRAD_COMPRESSION_TOPK) {
        /* DGC-style top-k with error feedback, k = ratio E:
         *  acc = grad + residual (read nat E and 4 E of the fp32 residual, write 4 E);
         *  radix select of the k-th magnitude, TOPK_RADIX_PASSES counting passes over 4 E;
         *  gather the k (value, int32 index) pairs (read 4 E, write (v + 4) k);
         *  residual = acc with the sent entries zeroed (read the k indices, write 4 k);
         *  all-gather of every rank's k pairs: n k (v + 4) bytes gathered;
         *  scatter-add: zero the dense gradient (write nat E), read the n k pairs and
         *  read-modify-write their entries (n k (v + 4 + 2 nat)). */
        double k = gc->ratio * E;
        out->pre_s = mem_s(gc, E * (nat + 8)) + TOPK_RADIX_PASSES * mem_s(gc, 4 * E) +
                     mem_s(gc, 4 * E + k * (v + 4)) + mem_s(gc, 8 * k);
        out->coll1 = COLL_ALL_GATHER;
        out->bytes1 = n * k * (v + 4);
        out->name1 = "dp_grad_allgather_topk";
        out->post_s = mem_s(gc, E * nat) + mem_s(gc, n * k * (v + 4 + 2 * nat));
        return;
    }
    /* PowerSGD: the bucket holds `elements` worth of its unit's matrices and vectors */
    const powersgd_unit *u = embedding ? &gc->embedding : &gc->layer;
    double f = u->elements > 0 ? E / u->elements : 0;
    out->pre_s = f * u->pre_s;
    out->flops = f * u->flops;
    out->coll1 = COLL_ALL_REDUCE;
    out->bytes1 = f * u->p_elements * v;
    out->name1 = "dp_grad_allreduce_powersgd_p";
    if (u->q_elements > 0) {
        out->mid_s = f * u->mid_s;
        out->coll2 = COLL_ALL_REDUCE;
        out->bytes2 = f * u->q_elements * v;
        out->name2 = "dp_grad_allreduce_powersgd_q";
    }
    out->post_s = f * (u->post_s + (u->q_elements > 0 ? 0 : u->mid_s));
}

static int add_task(step_workload *w, int stage, task_kind kind, task_lane lane, const char *name, double dur,
                    int dep)
{
    sim_task t = workload_task(kind, lane, stage, name);
    t.comm = COMM_DP;
    t.duration_s = dur;
    int id = workload_add_task(w, &t);
    if (dep >= 0)
        workload_add_dep(w, id, dep);
    return id;
}

/* bytes: one bucket's; repeat: buckets the task stands for (compression_emit_bucket) */
static int add_coll(step_workload *w, const grad_compressor *gc, int stage, const char *name, coll_kind kind,
                    double bytes, coll_group g, double calls, double repeat, int dep)
{
    int id = add_task(w, stage, TASK_COLLECTIVE, LANE_COMM, name,
                      repeat * collective_time(&gc->s->platform, &gc->s->calibration, kind, bytes, g).time_s, dep);
    w->tasks[id].coll = kind;
    w->tasks[id].group = g.ranks;
    w->tasks[id].span_nodes = g.nodes;
    w->tasks[id].bytes = repeat * bytes;
    w->tasks[id].calls = repeat * calls;
    return id;
}

int compression_emit_bucket(step_workload *w, const grad_compressor *gc, int stage, int dep, double elements,
                            int embedding, coll_group dp, double calls, double repeat)
{
    static const char *const pre[] = {"gradcomp_quantize_int8", "gradcomp_topk_select", "gradcomp_powersgd_p"};
    static const char *const mid[] = {"gradcomp_requantize_int8", "", "gradcomp_powersgd_q"};
    static const char *const post[] = {"gradcomp_dequantize_int8", "gradcomp_topk_scatter_add",
                                       "gradcomp_powersgd_decompress"};
    int which = gc->int8 ? 0 : gc->method == GRAD_COMPRESSION_TOPK ? 1 : 2;
    compressed_bucket cb;
    compression_plan_bucket(gc, elements, embedding, dp, &cb);
    /* Compression runs on the compute stream as the backward hook launches it; what follows a
     * collective is chained to it on the communication stream (PyTorch runs a comm hook's
     * future callbacks on a side stream), so it delays the optimizer, not the backward. */
    int id = add_task(w, stage, TASK_COMPUTE, LANE_COMPUTE, pre[which], repeat * cb.pre_s, dep);
    w->tasks[id].flops = repeat * cb.flops;
    id = add_coll(w, gc, stage, cb.name1, cb.coll1, cb.bytes1, dp, calls, repeat, id);
    if (cb.bytes2 > 0) {
        id = add_task(w, stage, TASK_COMPUTE, LANE_COMM, mid[which], repeat * cb.mid_s, id);
        id = add_coll(w, gc, stage, cb.name2, cb.coll2, cb.bytes2, dp, calls, repeat, id);
    }
    return add_task(w, stage, TASK_COMPUTE, LANE_COMM, post[which], repeat * cb.post_s, id);
}

double compression_wire_bytes(coll_kind kind, double bytes, int n)
{
    if (n <= 1)
        return 0;
    return (kind == COLL_ALL_REDUCE ? 2.0 : 1.0) * (n - 1) / n * bytes;
}

int compression_is_compute(const sim_task *t)
{
    return t->kind == TASK_COMPUTE && t->name && strncmp(t->name, "gradcomp_", 9) == 0;
}

void compression_totals(const step_workload *w, int stage, dp_sync_totals *t)
{
    memset(t, 0, sizeof *t);
    for (int i = 0; i < w->n_tasks; i++) {
        const sim_task *k = &w->tasks[i];
        if (k->stage != stage)
            continue;
        if (k->kind == TASK_COLLECTIVE && k->comm == COMM_DP) {
            t->wire_bytes += compression_wire_bytes(k->coll, k->bytes, k->group);
            t->comm_s += k->duration_s;
        } else if (compression_is_compute(k)) {
            t->compute_s += k->duration_s;
        }
    }
}

const char *compression_describe(const scenario_config *s, char *buf, int size)
{
    double natural = (s->training.precision == PREC_FP32 || s->training.precision == PREC_TF32) ? 4 : 2;
    buf[0] = 0;
    if (s->parallel.grad_compression == GRAD_COMPRESSION_TOPK)
        snprintf(buf, (size_t)size, "top-k %g with error feedback", s->parallel.topk_ratio);
    else if (s->parallel.grad_compression == GRAD_COMPRESSION_POWERSGD)
        snprintf(buf, (size_t)size, "PowerSGD rank %d", s->parallel.powersgd_rank);
    else if (s->parallel.grad_reduce_int8)
        snprintf(buf, (size_t)size, "int8 (ZeRO++ qgZ)");
    else if (s->parallel.grad_reduce_bytes > 0 && s->parallel.grad_reduce_bytes < natural)
        snprintf(buf, (size_t)size, "%g-bit reduction", 8 * s->parallel.grad_reduce_bytes);
    return buf;
}
