/* Combined 1F1B's layer pairs on two streams; see moe_overlap.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "moe_overlap.h"

/* The nodes of one pair, by stream position. */
enum { B_PRE, F_ATTN, B_EXPERTS, F_EXPERTS, B_ATTN, F_POST, COMPUTE_NODES }; /* compute stream */
enum { B_COMBINE, F_DISPATCH, B_DISPATCH, F_COMBINE, COMM_NODES };          /* communication stream */

typedef struct {
    double work;   /* seconds alone (compute) or seconds (communication) */
    int dep_comm;  /* the node it waits for on the other stream (index into that stream), or -1 */
    int dep_comp;
} node;

int moe_pair_time(const moe_layer_parts *f, const moe_layer_parts *b, int pairs, double overlap_slowdown,
                  moe_pair_result *out)
{
    memset(out, 0, sizeof *out);
    const double parts[10] = {f->attn, f->dispatch, f->experts, f->combine, f->combine_compute,
                              b->attn, b->dispatch, b->experts, b->combine, b->combine_compute};
    for (int i = 0; i < 10; i++)
        if (!(parts[i] >= 0) || !isfinite(parts[i]))
            return -1;
    if (pairs < 0)
        return -1;
    if (pairs == 0)
        return 0;
    double slow = overlap_slowdown >= 1 ? overlap_slowdown : 1;
    int nc = COMPUTE_NODES * pairs, nm = COMM_NODES * pairs;
    node *comp = calloc((size_t)nc, sizeof *comp), *comm = calloc((size_t)nm, sizeof *comm);
    if (!comp || !comm) {
        free(comp);
        free(comm);
        return -1;
    }
    /* Each node's dependency on the other stream (its own stream's order holds the rest: the
     * next pair's B.pre and F.attn after this pair's B.attn and F.post). */
    for (int p = 0; p < pairs; p++) {
        int c = COMPUTE_NODES * p, m = COMM_NODES * p;
        comp[c + F_ATTN] = (node){f->attn, -1, -1};
        comp[c + B_PRE] = (node){b->combine_compute, -1, -1};
        comp[c + B_EXPERTS] = (node){b->experts, m + B_COMBINE, -1};
        comp[c + F_EXPERTS] = (node){f->experts, m + F_DISPATCH, -1};
        comp[c + B_ATTN] = (node){b->attn, m + B_DISPATCH, -1};
        comp[c + F_POST] = (node){f->combine_compute, m + F_COMBINE, -1};
        comm[m + B_COMBINE] = (node){b->combine, -1, c + B_PRE};
        comm[m + F_DISPATCH] = (node){f->dispatch, -1, c + F_ATTN};
        comm[m + B_DISPATCH] = (node){b->dispatch, -1, c + B_EXPERTS};
        comm[m + F_COMBINE] = (node){f->combine, -1, c + F_EXPERTS};
    }
    /* Event by event: each stream runs its next node once what it waits for is done; the
     * compute progresses at 1 / slow while an all-to-all runs. */
    int ci = 0, mi = 0, c_run = 0, m_run = 0;
    double t = 0, c_left = 0, m_left = 0;
    for (;;) {
        /* start what can start; a node of no work ends at once, which may free the other stream */
        for (int moved = 1; moved;) {
            moved = 0;
            while (!c_run && ci < nc && (comp[ci].dep_comm < 0 || comp[ci].dep_comm < mi)) {
                if (comp[ci].work > 0) {
                    c_run = 1;
                    c_left = comp[ci].work;
                } else {
                    ci++;
                    moved = 1;
                }
            }
            while (!m_run && mi < nm && (comm[mi].dep_comp < 0 || comm[mi].dep_comp < ci)) {
                if (comm[mi].work > 0) {
                    m_run = 1;
                    m_left = comm[mi].work;
                    out->comm_total_s += comm[mi].work;
                } else {
                    mi++;
                    moved = 1;
                }
            }
        }
        if (!c_run && !m_run)
            break; /* both streams done (the dependencies form no cycle: each points backwards) */
        double rate = m_run ? 1 / slow : 1;
        double dt = fmin(c_run ? c_left / rate : INFINITY, m_run ? m_left : INFINITY);
        t += dt;
        if (c_run) {
            out->compute_s += dt;
            out->overlap_cost_s += m_run ? dt * (1 - rate) : 0;
            c_left -= dt * rate;
            if (c_left <= 1e-15 * (1 + t)) {
                c_run = 0;
                ci++;
            }
        } else {
            out->comm_exposed_s += dt;
        }
        if (m_run) {
            m_left -= dt;
            if (m_left <= 1e-15 * (1 + t)) {
                m_run = 0;
                mi++;
            }
        }
    }
    out->time_s = t;
    free(comp);
    free(comm);
    return ci == nc && mi == nm ? 0 : -1;
}
