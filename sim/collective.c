/* Alpha-beta collective models; see collective.h. */
#include <math.h>
#include "collective.h"

const char *coll_algo_name(coll_algo a)
{
    static const char *names[] = {"ring", "tree", "hierarchical", "direct", "pat"};
    return a < ALGO_COUNT ? names[a] : "?";
}

coll_group coll_group_of(int size, int stride, int gpus_per_node)
{
    coll_group g = {size, 1, size};
    if (size <= 1 || gpus_per_node <= 0)
        return g;
    if (stride >= gpus_per_node) {
        g.nodes = size; /* every member on its own node */
    } else {
        long span = (long)size * stride;
        g.nodes = (int)((span + gpus_per_node - 1) / gpus_per_node);
    }
    if (g.nodes < 1)
        g.nodes = 1;
    g.per_node = (size + g.nodes - 1) / g.nodes;
    return g;
}

/* Bytes each rank moves per byte of buffer, by collective, for a ring of n (nccl-tests'
 * bus-bandwidth factors). */
static double ring_factor(coll_kind kind, int n)
{
    switch (kind) {
    case COLL_ALL_REDUCE: return 2.0 * (n - 1) / n;
    case COLL_ALL_GATHER:
    case COLL_REDUCE_SCATTER:
    case COLL_ALL_TO_ALL: return (double)(n - 1) / n;
    case COLL_SEND_RECV: return 1.0;
    default: return 1.0;
    }
}

static double ring_steps(coll_kind kind, int n)
{
    return kind == COLL_ALL_REDUCE ? 2.0 * (n - 1) : (double)(n - 1);
}

/* The calibration's fit for a collective, or its link class's all-reduce fit when that
 * collective was not measured (nccl-tests bus bandwidth is comparable across collectives). */
static const coll_fit *fit_for(const calibration_config *c, link_class lc, coll_kind kind)
{
    const coll_fit *f = &c->collectives[lc][kind];
    return f->present ? f : &c->collectives[lc][COLL_ALL_REDUCE];
}

static double nvlink_bw(const platform_config *p, const calibration_config *c, coll_kind kind)
{
    const coll_fit *f = fit_for(c, LINK_NVLINK, kind);
    return (f->present && f->busbw_gbs > 0 ? f->busbw_gbs : p->node.nvlink_bandwidth_gbs) * 1e9;
}

/* One NIC's usable bandwidth for this collective. */
static double nic_bw(const platform_config *p, const calibration_config *c, coll_kind kind)
{
    const coll_fit *f = fit_for(c, LINK_NETWORK, kind);
    return (f->present && f->busbw_gbs > 0 ? f->busbw_gbs : p->node.nic_bandwidth_gbps / 8.0) * 1e9;
}

static double alpha_s(const calibration_config *c, link_class lc, coll_kind kind)
{
    const coll_fit *f = fit_for(c, lc, kind);
    return f->present ? f->alpha_us * 1e-6 : 0;
}

double collective_alpha_s(const calibration_config *c, link_class lc, coll_kind kind)
{
    return alpha_s(c, lc, kind);
}

static double nvlink_lat(const platform_config *p)
{
    return p->node.nvlink_latency_us * 1e-6;
}

/* One hop across the fabric: NIC -> leaf -> (spine -> leaf)... -> NIC. Average over a
 * group: beyond one leaf, traffic climbs to the spine (and core with 3 tiers). */
static double net_lat(const platform_config *p, int nodes)
{
    int tiers = p->network.tiers > 0 ? p->network.tiers : 1;
    int leaf_nodes = p->network.leaf_radix > 0 ? p->network.leaf_radix : nodes;
    int switches = 1, links = 2;
    if (nodes > leaf_nodes && tiers >= 2) {
        switches = 3;
        links = 4;
        if (tiers >= 3 && nodes > leaf_nodes * leaf_nodes / 2) {
            switches = 5;
            links = 6;
        }
    }
    return (links * p->network.link_latency_us + switches * p->network.switch_latency_us) * 1e-6;
}

/* Intra-node phase of n ranks over NVLink. */
static double nvlink_ring(const platform_config *p, const calibration_config *c, coll_kind kind,
                          double bytes, int n)
{
    if (n <= 1)
        return 0;
    return ring_steps(kind, n) * nvlink_lat(p) + ring_factor(kind, n) * bytes / nvlink_bw(p, c, kind);
}

static double ring_time(const platform_config *p, const calibration_config *c, coll_kind kind,
                        double bytes, coll_group g)
{
    int n = g.ranks;
    if (g.nodes <= 1)
        return alpha_s(c, LINK_NVLINK, kind) + nvlink_ring(p, c, kind, bytes, n);
    /* g rings in parallel, each crossing every node once through its own NIC; the slowest
     * edge (NIC vs NVLink) sets the pace. */
    int nics = p->node.nics > 0 ? p->node.nics : 1;
    int rails = g.per_node < nics ? g.per_node : nics;
    double bw = fmin(rails * nic_bw(p, c, kind), g.per_node > 1 ? nvlink_bw(p, c, kind) : INFINITY);
    double steps = ring_steps(kind, n);
    double inter_steps = steps * (double)g.nodes / n; /* steps that cross a NIC */
    double lat = inter_steps * net_lat(p, g.nodes) + (steps - inter_steps) * nvlink_lat(p);
    return alpha_s(c, LINK_NETWORK, kind) + lat + ring_factor(kind, n) * bytes / bw;
}

/* Double binary tree (all-reduce only): log-depth latency across nodes; each rank sends and
 * receives the buffer about twice (reduce, then broadcast), split over two trees. */
static double tree_time(const platform_config *p, const calibration_config *c, coll_kind kind,
                        double bytes, coll_group g)
{
    if (kind != COLL_ALL_REDUCE || g.nodes <= 1)
        return INFINITY;
    int nics = p->node.nics > 0 ? p->node.nics : 1;
    int rails = g.per_node < nics ? g.per_node : nics;
    double depth = ceil(log2((double)g.nodes));
    double lat = 2.0 * depth * net_lat(p, g.nodes) + 2.0 * (g.per_node - 1) * nvlink_lat(p);
    double bw = rails * nic_bw(p, c, kind);
    return alpha_s(c, LINK_NETWORK, kind) + lat + 2.0 * bytes / bw;
}

/* Hierarchical: reduce-scatter inside the node, the collective across nodes on 1/g of the
 * data (g rails in parallel), all-gather inside the node. */
static double hierarchical_time(const platform_config *p, const calibration_config *c,
                                coll_kind kind, double bytes, coll_group g)
{
    if (g.nodes <= 1 || g.per_node <= 1 || kind == COLL_SEND_RECV || kind == COLL_ALL_TO_ALL)
        return INFINITY;
    coll_group across = {g.nodes, g.nodes, 1};
    double t = alpha_s(c, LINK_NVLINK, kind);
    switch (kind) {
    case COLL_ALL_REDUCE:
        t += nvlink_ring(p, c, COLL_REDUCE_SCATTER, bytes, g.per_node);
        t += ring_time(p, c, COLL_ALL_REDUCE, bytes / g.per_node, across);
        t += nvlink_ring(p, c, COLL_ALL_GATHER, bytes, g.per_node);
        break;
    case COLL_ALL_GATHER:
        t += ring_time(p, c, COLL_ALL_GATHER, bytes / g.per_node, across);
        t += nvlink_ring(p, c, COLL_ALL_GATHER, bytes, g.per_node);
        break;
    case COLL_REDUCE_SCATTER:
        t += nvlink_ring(p, c, COLL_REDUCE_SCATTER, bytes, g.per_node);
        t += ring_time(p, c, COLL_REDUCE_SCATTER, bytes / g.per_node, across);
        break;
    default:
        return INFINITY;
    }
    return t;
}

/* PAT (NCCL 2.23+): all-gather and reduce-scatter over a binomial tree with a Bruck-like
 * schedule, for one GPU per node only (NCCL maintainers in NVIDIA/nccl issues #1473 and #1594):
 * log2(nodes) latency steps instead of the ring's nodes - 1, the same bytes through each NIC. */
static double pat_time(const platform_config *p, const calibration_config *c, coll_kind kind, double bytes,
                       coll_group g)
{
    if ((kind != COLL_ALL_GATHER && kind != COLL_REDUCE_SCATTER) || g.per_node != 1 || g.nodes <= 1)
        return INFINITY;
    double steps = ceil(log2((double)g.nodes));
    return alpha_s(c, LINK_NETWORK, kind) + steps * net_lat(p, g.nodes) + ring_factor(kind, g.ranks) * bytes /
                                                                              nic_bw(p, c, kind);
}

/* Point-to-point and all-to-all: direct transfers. All-to-all sends (n-1)/n of the buffer,
 * the part for other nodes through the GPU's own NIC, the rest over NVLink, concurrently. */
static double direct_time(const platform_config *p, const calibration_config *c, coll_kind kind,
                          double bytes, coll_group g)
{
    if (kind == COLL_SEND_RECV) {
        if (g.nodes <= 1)
            return alpha_s(c, LINK_NVLINK, kind) + nvlink_lat(p) + bytes / nvlink_bw(p, c, kind);
        return alpha_s(c, LINK_NETWORK, kind) + net_lat(p, 2) + bytes / nic_bw(p, c, kind);
    }
    if (kind != COLL_ALL_TO_ALL)
        return INFINITY;
    int n = g.ranks;
    double intra = (double)(g.per_node - 1) / n * bytes;
    double inter = (double)(n - g.per_node) / n * bytes;
    double t_intra = intra / nvlink_bw(p, c, kind) + (g.per_node - 1) * nvlink_lat(p);
    double t_inter = g.nodes > 1 ? inter / nic_bw(p, c, kind) + (g.nodes - 1) * net_lat(p, g.nodes) : 0;
    return alpha_s(c, g.nodes > 1 ? LINK_NETWORK : LINK_NVLINK, kind) + fmax(t_intra, t_inter);
}

double collective_time_algo(const platform_config *p, const calibration_config *c, coll_kind kind,
                            double bytes, coll_group g, coll_algo algo)
{
    if (g.ranks <= 1 && kind != COLL_SEND_RECV)
        return 0;
    switch (algo) {
    case ALGO_RING:
        return (kind == COLL_SEND_RECV || kind == COLL_ALL_TO_ALL) ? INFINITY : ring_time(p, c, kind, bytes, g);
    case ALGO_TREE:
        return tree_time(p, c, kind, bytes, g);
    case ALGO_HIERARCHICAL:
        return hierarchical_time(p, c, kind, bytes, g);
    case ALGO_DIRECT:
        return direct_time(p, c, kind, bytes, g);
    case ALGO_PAT:
        return pat_time(p, c, kind, bytes, g);
    default:
        return INFINITY;
    }
}

coll_cost collective_time(const platform_config *p, const calibration_config *c, coll_kind kind,
                          double bytes, coll_group g)
{
    coll_cost best = {0, ALGO_RING};
    if (g.ranks <= 1 && kind != COLL_SEND_RECV)
        return best;
    best.time_s = INFINITY;
    for (int a = 0; a < ALGO_COUNT; a++) {
        double t = collective_time_algo(p, c, kind, bytes, g, (coll_algo)a);
        if (t < best.time_s) {
            best.time_s = t;
            best.algo = (coll_algo)a;
        }
    }
    return best;
}
