/* Combined 1F1B's layer pairs on two streams; see moe_overlap.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "moe_overlap.h"

/* The nodes of one pair, by stream position. */
enum { F_ATTN, B_EXPERTS, F_EXPERTS, B_ATTN };       /* compute stream */
enum { B_COMBINE, F_DISPATCH, B_DISPATCH, F_COMBINE }; /* communication stream */

typedef struct {
    double work;   /* seconds alone (compute) or seconds (communication) */
    int dep_comm;  /* the node it waits for on the other stream (index into that stream), or -1 */
    int dep_comp;
} node;

int moe_pair_time(const moe_layer_parts *f, const moe_layer_parts *b, int pairs, double overlap_slowdown,
                  moe_pair_result *out)
{
    memset(out, 0, sizeof *out);
    const double parts[8] = {f->attn, f->dispatch, f->experts, f->combine, b->attn, b->dispatch, b->experts, b->combine};
    for (int i = 0; i < 8; i++)
        if (!(parts[i] >= 0) || !isfinite(parts[i]))
            return -1;
    if (pairs < 0)
        return -1;
    if (pairs == 0)
        return 0;
    double slow = overlap_slowdown >= 1 ? overlap_slowdown : 1;
    int n = 4 * pairs;
    node *comp = calloc((size_t)n, sizeof *comp), *comm = calloc((size_t)n, sizeof *comm);
    if (!comp || !comm) {
        free(comp);
        free(comm);
        return -1;
    }
    /* Each node's dependency on the other stream (its own stream's order is implicit). Across
     * pairs: the next forward attention waits for this pair's forward combine; the next
     * backward combine for this pair's backward attention. */
    for (int p = 0; p < pairs; p++) {
        int c = 4 * p;
        comp[c + F_ATTN] = (node){f->attn, p > 0 ? c - 4 + F_COMBINE : -1, -1};
        comp[c + B_EXPERTS] = (node){b->experts, c + B_COMBINE, -1};
        comp[c + F_EXPERTS] = (node){f->experts, c + F_DISPATCH, -1};
        comp[c + B_ATTN] = (node){b->attn, c + B_DISPATCH, -1};
        comm[c + B_COMBINE] = (node){b->combine, -1, p > 0 ? c - 4 + B_ATTN : -1};
        comm[c + F_DISPATCH] = (node){f->dispatch, -1, c + F_ATTN};
        comm[c + B_DISPATCH] = (node){b->dispatch, -1, c + B_EXPERTS};
        comm[c + F_COMBINE] = (node){f->combine, -1, c + F_EXPERTS};
    }
    /* Event by event: each stream runs its next node once what it waits for is done; the
     * compute progresses at 1 / slow while an all-to-all runs. */
    int ci = 0, mi = 0, c_run = 0, m_run = 0;
    double t = 0, c_left = 0, m_left = 0;
    for (;;) {
        /* start what can start; a node of no work ends at once, which may free the other stream */
        for (int moved = 1; moved;) {
            moved = 0;
            while (!c_run && ci < n && (comp[ci].dep_comm < 0 || comp[ci].dep_comm < mi)) {
                if (comp[ci].work > 0) {
                    c_run = 1;
                    c_left = comp[ci].work;
                } else {
                    ci++;
                    moved = 1;
                }
            }
            while (!m_run && mi < n && (comm[mi].dep_comp < 0 || comm[mi].dep_comp < ci)) {
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
    return ci == n && mi == n ? 0 : -1;
}
