/* The collective models' dispatch and the alpha-beta models (MPI's collectives, and point-to-
 * point and all-to-all under both libraries); NCCL's tuner model is in nccl_tuner.c. See
 * collective.h. */
#include <math.h>
#include <string.h>
#include <strings.h>
#include "collective_internal.h"

static const char *const algo_names[ALGO_COUNT] = {"auto", "ring", "tree", "hierarchical", "direct", "pat",
                                                   "halving_doubling", "nvls", "nvlstree", "collnetdirect",
                                                   "collnetchain"};

const char *coll_algo_name(coll_algo a)
{
    return a >= 0 && a < ALGO_COUNT ? algo_names[a] : "?";
}

int coll_algo_from_name(const char *name)
{
    for (int a = 0; a < ALGO_COUNT; a++)
        if (!strcmp(name, algo_names[a]))
            return a;
    if (!strcmp(name, "collnet")) /* NCCL <= 2.13's ncclAlgoStr "CollNet" (src/init.cc, v2.13.4-1) */
        return ALGO_COLLNET_DIRECT;
    return -1;
}

int coll_algo_is_nccl(coll_algo a)
{
    return a > ALGO_AUTO && a < ALGO_COUNT && a != ALGO_HALVING_DOUBLING && a != ALGO_HIERARCHICAL;
}

static const char *const proto_names[PROTO_COUNT] = {"LL", "LL128", "Simple"};

const char *coll_proto_name(coll_proto p)
{
    return p >= 0 && p < PROTO_COUNT ? proto_names[p] : "?";
}

int coll_proto_from_name(const char *name)
{
    for (int p = 0; p < PROTO_COUNT; p++)
        if (!strcasecmp(name, proto_names[p]))
            return p;
    return -1;
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
double coll_ring_factor(coll_kind kind, int n)
{
    switch (kind) {
    case COLL_ALL_REDUCE: return 2.0 * (n - 1) / n;
    case COLL_ALL_GATHER:
    case COLL_REDUCE_SCATTER:
    case COLL_ALL_TO_ALL: return (double)(n - 1) / n;
    case COLL_SEND_RECV:
    case COLL_BROADCAST: return 1.0; /* a pipelined chain: every rank receives the buffer once */
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

double collective_link_Bps(const platform_config *p, const calibration_config *c, link_class lc, coll_kind kind,
                           int *bounded)
{
    double rate = lc == LINK_NVLINK ? p->node.nvlink_bandwidth_gbs * 1e9 : p->node.nic_bandwidth_gbps / 8.0 * 1e9;
    const coll_fit *f = c ? fit_for(c, lc, kind) : NULL;
    double fit = f && f->present && f->busbw_gbs > 0 ? f->busbw_gbs * 1e9 : 0;
    if (bounded)
        *bounded = fit > rate;
    return fit > 0 && fit < rate ? fit : rate;
}

double coll_nvlink_bw(const platform_config *p, const calibration_config *c, coll_kind kind)
{
    return collective_link_Bps(p, c, LINK_NVLINK, kind, NULL);
}

double coll_nic_bw(const platform_config *p, const calibration_config *c, coll_kind kind)
{
    return collective_link_Bps(p, c, LINK_NETWORK, kind, NULL);
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

const coll_split COLL_NONE = {INFINITY, INFINITY, INFINITY, INFINITY, INFINITY, ALGO_AUTO, PROTO_SIMPLE};
#define NONE COLL_NONE

coll_split coll_split_of(double fixed, double node, double net, double net_bytes, coll_algo a, coll_proto proto)
{
    coll_split r = {fixed + node + net, fixed, node, net, net_bytes, a, proto};
    return r;
}

static coll_split split_of(double fixed, double node, double net, double net_bytes, coll_algo a)
{
    return coll_split_of(fixed, node, net, net_bytes, a, PROTO_SIMPLE);
}

int coll_nic_rails(const platform_config *p, coll_group g)
{
    int nics = p->node.nics > 0 ? p->node.nics : 1;
    return g.per_node < nics ? g.per_node : nics;
}

/* Intra-node phase of n ranks over NVLink: its latency and its bandwidth time. */
static void nvlink_ring(const platform_config *p, const calibration_config *c, coll_kind kind, double bytes, int n,
                        double *lat, double *bw_s)
{
    if (n <= 1)
        return;
    *lat += ring_steps(kind, n) * nvlink_lat(p);
    *bw_s += coll_ring_factor(kind, n) * bytes / coll_nvlink_bw(p, c, kind);
}

static coll_split ring_split(const platform_config *p, const calibration_config *c, coll_kind kind, double bytes,
                             coll_group g)
{
    if (kind == COLL_SEND_RECV || kind == COLL_ALL_TO_ALL)
        return NONE;
    int n = g.ranks;
    if (g.nodes <= 1) {
        double lat = 0, bw_s = 0;
        nvlink_ring(p, c, kind, bytes, n, &lat, &bw_s);
        return split_of(alpha_s(c, LINK_NVLINK, kind) + lat, bw_s, 0, 0, ALGO_RING);
    }
    /* g rings in parallel, each crossing every node once through its own NIC; the slowest
     * edge (NIC vs NVLink) sets the pace. Each NIC carries one ring's share. */
    int rails = coll_nic_rails(p, g);
    double wire = coll_ring_factor(kind, n) * bytes;
    double net = wire / (rails * coll_nic_bw(p, c, kind));
    double slowest = g.per_node > 1 ? fmax(net, wire / coll_nvlink_bw(p, c, kind)) : net;
    double steps = ring_steps(kind, n);
    double inter_steps = steps * (double)g.nodes / n; /* steps that cross a NIC */
    double lat = inter_steps * net_lat(p, g.nodes) + (steps - inter_steps) * nvlink_lat(p);
    return split_of(alpha_s(c, LINK_NETWORK, kind) + lat, slowest - net, net, wire / rails, ALGO_RING);
}

/* Double binary tree (all-reduce only): log-depth latency across nodes; each rank sends and
 * receives the buffer about twice (reduce, then broadcast), split over two trees. */
static coll_split tree_split(const platform_config *p, const calibration_config *c, coll_kind kind, double bytes,
                             coll_group g)
{
    if (kind != COLL_ALL_REDUCE || g.nodes <= 1)
        return NONE;
    int rails = coll_nic_rails(p, g);
    double depth = ceil(log2((double)g.nodes));
    double lat = 2.0 * depth * net_lat(p, g.nodes) + 2.0 * (g.per_node - 1) * nvlink_lat(p);
    double net = 2.0 * bytes / (rails * coll_nic_bw(p, c, kind));
    return split_of(alpha_s(c, LINK_NETWORK, kind) + lat, 0, net, 2.0 * bytes / rails, ALGO_TREE);
}

/* Hierarchical: reduce-scatter inside the node, the collective across nodes on 1/g of the
 * data (g rails in parallel, one per GPU), all-gather inside the node. */
static coll_split hierarchical_split(const platform_config *p, const calibration_config *c, coll_kind kind,
                                     double bytes, coll_group g)
{
    if (g.nodes <= 1 || g.per_node <= 1 ||
        (kind != COLL_ALL_REDUCE && kind != COLL_ALL_GATHER && kind != COLL_REDUCE_SCATTER))
        return NONE;
    coll_group across = {g.nodes, g.nodes, 1};
    coll_split x = ring_split(p, c, kind, bytes / g.per_node, across);
    double lat = 0, bw_s = 0;
    if (kind != COLL_ALL_GATHER)
        nvlink_ring(p, c, COLL_REDUCE_SCATTER, bytes, g.per_node, &lat, &bw_s);
    if (kind != COLL_REDUCE_SCATTER)
        nvlink_ring(p, c, COLL_ALL_GATHER, bytes, g.per_node, &lat, &bw_s);
    return split_of(alpha_s(c, LINK_NVLINK, kind) + lat + x.fixed_s, bw_s + x.node_s, x.net_s, x.net_bytes,
                    ALGO_HIERARCHICAL);
}

/* PAT (NCCL 2.23+): all-gather and reduce-scatter over a binomial tree with a Bruck-like
 * schedule, for one GPU per node only (NCCL maintainers in NVIDIA/nccl issues #1473 and #1594):
 * log2(nodes) latency steps instead of the ring's nodes - 1, the same bytes through each NIC. */
static coll_split pat_split(const platform_config *p, const calibration_config *c, coll_kind kind, double bytes,
                            coll_group g)
{
    if ((kind != COLL_ALL_GATHER && kind != COLL_REDUCE_SCATTER) || g.per_node != 1 || g.nodes <= 1)
        return NONE;
    double steps = ceil(log2((double)g.nodes));
    double wire = coll_ring_factor(kind, g.ranks) * bytes;
    return split_of(alpha_s(c, LINK_NETWORK, kind) + steps * net_lat(p, g.nodes), 0, wire / coll_nic_bw(p, c, kind),
                    wire, ALGO_PAT);
}

/* Recursive halving-doubling (Thakur, Rabenseifner and Gropp, "Optimization of Collective
 * Communication Operations in MPICH", IJHPCA 2005): log2(n) exchanges with partners at halving
 * distances, each sending half of what the last did; all-reduce is a reduce-scatter by halving
 * then an all-gather by doubling. Ranks in node-major order: the first log2(N) exchanges cross
 * nodes (each GPU through its own NIC) and carry (1 - 1/N) of the phase's bytes, the rest stay on
 * NVLink. Powers of two only (MPICH's extra step for the remainder is not modelled). */
static coll_split halving_doubling_split(const platform_config *p, const calibration_config *c, coll_kind kind,
                                         double bytes, coll_group g)
{
    int n = g.ranks;
    if ((kind != COLL_ALL_REDUCE && kind != COLL_ALL_GATHER && kind != COLL_REDUCE_SCATTER) || (n & (n - 1)) ||
        (g.nodes & (g.nodes - 1)))
        return NONE;
    double phases = kind == COLL_ALL_REDUCE ? 2 : 1;
    double N = g.nodes, inter = phases * (1 - 1 / N) * bytes, intra = phases * (1 / N - 1.0 / n) * bytes;
    double lat = phases * (log2(N) * net_lat(p, g.nodes) + log2((double)g.per_node) * nvlink_lat(p));
    double net = g.nodes > 1 ? inter / coll_nic_bw(p, c, kind) : 0;
    link_class lc = g.nodes > 1 ? LINK_NETWORK : LINK_NVLINK;
    return split_of(alpha_s(c, lc, kind) + lat, intra / coll_nvlink_bw(p, c, kind), net, g.nodes > 1 ? inter : 0,
                    ALGO_HALVING_DOUBLING);
}

/* Point-to-point and all-to-all: direct transfers. All-to-all sends (n-1)/n of the buffer,
 * the part for other nodes through the GPU's own NIC, the rest over NVLink, concurrently. */
static coll_split direct_split(const platform_config *p, const calibration_config *c, coll_kind kind, double bytes,
                               coll_group g)
{
    if (kind == COLL_SEND_RECV) {
        if (g.nodes <= 1)
            return split_of(alpha_s(c, LINK_NVLINK, kind) + nvlink_lat(p), bytes / coll_nvlink_bw(p, c, kind), 0, 0,
                            ALGO_DIRECT);
        return split_of(alpha_s(c, LINK_NETWORK, kind) + net_lat(p, 2), 0, bytes / coll_nic_bw(p, c, kind), bytes,
                        ALGO_DIRECT);
    }
    if (kind != COLL_ALL_TO_ALL)
        return NONE;
    int n = g.ranks;
    double intra = (double)(g.per_node - 1) / n * bytes;
    double inter = (double)(n - g.per_node) / n * bytes;
    double t_intra = intra / coll_nvlink_bw(p, c, kind) + (g.per_node - 1) * nvlink_lat(p);
    double net = g.nodes > 1 ? inter / coll_nic_bw(p, c, kind) : 0;
    double lat = g.nodes > 1 ? (g.nodes - 1) * net_lat(p, g.nodes) : 0;
    link_class lc = g.nodes > 1 ? LINK_NETWORK : LINK_NVLINK;
    /* the two parts run at once: the slower sets the time; what NVLink adds beyond the network
     * part is its nvlink_s */
    double slowest = fmax(t_intra, net + lat);
    return split_of(alpha_s(c, lc, kind) + lat, slowest - net - lat, net, g.nodes > 1 ? inter : 0, ALGO_DIRECT);
}

/* log C(n, k); -INFINITY where C(n, k) is 0 */
static double lchoose(double n, double k)
{
    if (k < 0 || k > n)
        return -INFINITY;
    return lgamma(n + 1) - lgamma(k + 1) - lgamma(n - k + 1);
}

int moe_reach_modelled(int units, double groups)
{
    return units <= 1 || fmod(groups, units) == 0 || units % (int)groups == 0;
}

double moe_reach(int units, double experts, double groups, double group_topk, double topk)
{
    if (units <= 1)
        return 1;
    if (!moe_reach_modelled(units, groups))
        return NAN;
    double G = groups, j = group_topk, k = topk, U = j * experts / G; /* the experts of the chosen groups */
    double miss;
    if (fmod(G, units) == 0) { /* a unit holds G/units whole groups: t of them chosen, none of k in them */
        double mine = G / units;
        miss = 0;
        for (int t = 0; t <= mine && t <= j; t++)
            miss += exp(lchoose(mine, t) + lchoose(G - mine, j - t) - lchoose(G, j) +
                        lchoose(U - t * experts / G, k) - lchoose(U, k));
    } else { /* a group spans units/G units: its group chosen, none of k here */
        miss = (1 - j / G) + j / G * exp(lchoose(U - experts / units, k) - lchoose(U, k));
    }
    return units * (1 - miss);
}

double collective_moe_flex_time(const platform_config *p, const calibration_config *c, double bytes, coll_group g,
                                double experts, double topk, double groups, double group_topk)
{
    if (g.nodes <= 1 || g.ranks <= 1)
        return collective_time(p, c, COLL_ALL_TO_ALL, bytes, g).time_s;
    /* over RDMA: a token once to each node it reaches, its own included, as DeepEP counts and
     * measures its RDMA traffic (tests/legacy/test_internode.py: num_rdma_token_sent); over
     * NVLink: once to each GPU it reaches but the relay (the same local rank), sent or forwarded
     * (by symmetry each GPU forwards what it sent away); both at once (DeepEP's pipelined
     * kernels): the slower sets the time */
    double token = bytes / topk;
    double rdma = token * moe_reach(g.nodes, experts, groups, group_topk, topk);
    double nvlink = token * moe_reach(g.ranks, experts, groups, group_topk, topk) * (g.per_node - 1) / g.per_node;
    double net = rdma / coll_nic_bw(p, c, COLL_ALL_TO_ALL);
    double node =
        g.per_node > 1 ? nvlink / coll_nvlink_bw(p, c, COLL_ALL_TO_ALL) + (g.per_node - 1) * nvlink_lat(p) : 0;
    return alpha_s(c, LINK_NETWORK, COLL_ALL_TO_ALL) + fmax(net + net_lat(p, g.nodes), node);
}

double collective_userbuffers_time(const platform_config *p, const calibration_config *c, coll_kind kind,
                                   double bytes, coll_group g)
{
    return g.ranks <= 1 ? 0 : ring_split(p, c, kind, bytes, g).time_s;
}

/* The algorithms a library's own choice runs: NCCL's (its tuner's, and point-to-point); under
 * MPI the alpha-beta set as before NCCL's tuner was modelled (ring, tree, hierarchical, direct,
 * PAT), no in-network algorithm. */
static int library_chooses(const platform_config *p, coll_algo a)
{
    if (p->collective_library == COLL_LIBRARY_NCCL)
        return coll_algo_is_nccl(a);
    return a == ALGO_RING || a == ALGO_TREE || a == ALGO_HIERARCHICAL || a == ALGO_DIRECT || a == ALGO_PAT;
}

coll_split collective_split_algo(const platform_config *p, const calibration_config *c, coll_kind kind,
                                 double bytes, coll_group g, coll_algo algo)
{
    if (g.ranks <= 1 && kind != COLL_SEND_RECV) {
        coll_split zero = {0, 0, 0, 0, 0, ALGO_RING, PROTO_SIMPLE};
        return zero;
    }
    int nccl = p->collective_library == COLL_LIBRARY_NCCL;
    switch (algo) {
    case ALGO_AUTO: return collective_split(p, c, kind, bytes, g);
    case ALGO_RING: return nccl ? nccl_ring_split(p, c, kind, bytes, g) : ring_split(p, c, kind, bytes, g);
    case ALGO_TREE: return nccl ? nccl_tree_split(p, c, kind, bytes, g) : tree_split(p, c, kind, bytes, g);
    case ALGO_HIERARCHICAL: return hierarchical_split(p, c, kind, bytes, g);
    case ALGO_DIRECT: return direct_split(p, c, kind, bytes, g);
    case ALGO_PAT: return nccl ? nccl_pat_split(p, c, kind, bytes, g) : pat_split(p, c, kind, bytes, g);
    case ALGO_HALVING_DOUBLING: return halving_doubling_split(p, c, kind, bytes, g);
    case ALGO_NVLS: return nccl ? nccl_nvls_split(p, c, kind, bytes, g) : NONE;
    case ALGO_NVLS_TREE: return nccl ? nccl_nvls_tree_split(p, c, kind, bytes, g) : NONE;
    case ALGO_COLLNET_DIRECT:
    case ALGO_COLLNET_CHAIN: return nccl ? nccl_collnet_split(p, c, kind, bytes, g, algo) : NONE;
    default: return NONE;
    }
}

double collective_time_algo(const platform_config *p, const calibration_config *c, coll_kind kind,
                            double bytes, coll_group g, coll_algo algo)
{
    return collective_split_algo(p, c, kind, bytes, g, algo).time_s;
}

coll_split collective_split(const platform_config *p, const calibration_config *c, coll_kind kind, double bytes,
                            coll_group g)
{
    coll_split best = {0, 0, 0, 0, 0, ALGO_RING, PROTO_SIMPLE};
    if (g.ranks <= 1 && kind != COLL_SEND_RECV)
        return best;
    int forced = kind >= 0 && kind < COLL_KIND_COUNT ? p->nccl_algo[kind] : ALGO_AUTO;
    if (forced > ALGO_AUTO && forced < ALGO_COUNT) {
        best = collective_split_algo(p, c, kind, bytes, g, (coll_algo)forced);
        if (isfinite(best.time_s))
            return best;
    }
    best = NONE;
    for (int a = ALGO_AUTO + 1; a < ALGO_COUNT; a++) {
        if (!library_chooses(p, (coll_algo)a))
            continue;
        coll_split t = collective_split_algo(p, c, kind, bytes, g, (coll_algo)a);
        if (t.time_s < best.time_s)
            best = t;
    }
    return best;
}

coll_cost collective_time(const platform_config *p, const calibration_config *c, coll_kind kind,
                          double bytes, coll_group g)
{
    coll_split s = collective_split(p, c, kind, bytes, g);
    coll_cost r = {s.time_s, s.algo, s.proto};
    return r;
}
