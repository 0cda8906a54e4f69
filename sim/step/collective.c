/* Alpha-beta collective models; see collective.h. */
#include <math.h>
#include <string.h>
#include "collective.h"

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
    return a > ALGO_AUTO && a < ALGO_COUNT && a != ALGO_HALVING_DOUBLING;
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

static const coll_split NONE = {INFINITY, INFINITY, INFINITY, INFINITY, INFINITY, ALGO_AUTO};

static coll_split split_of(double fixed, double nvlink, double net, double net_bytes, coll_algo a)
{
    coll_split r = {fixed + nvlink + net, fixed, nvlink, net, net_bytes, a};
    return r;
}

static int nic_rails(const platform_config *p, coll_group g)
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
    *bw_s += ring_factor(kind, n) * bytes / nvlink_bw(p, c, kind);
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
    int rails = nic_rails(p, g);
    double wire = ring_factor(kind, n) * bytes;
    double net = wire / (rails * nic_bw(p, c, kind));
    double slowest = g.per_node > 1 ? fmax(net, wire / nvlink_bw(p, c, kind)) : net;
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
    int rails = nic_rails(p, g);
    double depth = ceil(log2((double)g.nodes));
    double lat = 2.0 * depth * net_lat(p, g.nodes) + 2.0 * (g.per_node - 1) * nvlink_lat(p);
    double net = 2.0 * bytes / (rails * nic_bw(p, c, kind));
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
    return split_of(alpha_s(c, LINK_NVLINK, kind) + lat + x.fixed_s, bw_s + x.nvlink_s, x.net_s, x.net_bytes,
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
    double wire = ring_factor(kind, g.ranks) * bytes;
    return split_of(alpha_s(c, LINK_NETWORK, kind) + steps * net_lat(p, g.nodes), 0, wire / nic_bw(p, c, kind), wire,
                    ALGO_PAT);
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
    double net = g.nodes > 1 ? inter / nic_bw(p, c, kind) : 0;
    link_class lc = g.nodes > 1 ? LINK_NETWORK : LINK_NVLINK;
    return split_of(alpha_s(c, lc, kind) + lat, intra / nvlink_bw(p, c, kind), net, g.nodes > 1 ? inter : 0,
                    ALGO_HALVING_DOUBLING);
}

/* Point-to-point and all-to-all: direct transfers. All-to-all sends (n-1)/n of the buffer,
 * the part for other nodes through the GPU's own NIC, the rest over NVLink, concurrently. */
static coll_split direct_split(const platform_config *p, const calibration_config *c, coll_kind kind, double bytes,
                               coll_group g)
{
    if (kind == COLL_SEND_RECV) {
        if (g.nodes <= 1)
            return split_of(alpha_s(c, LINK_NVLINK, kind) + nvlink_lat(p), bytes / nvlink_bw(p, c, kind), 0, 0,
                            ALGO_DIRECT);
        return split_of(alpha_s(c, LINK_NETWORK, kind) + net_lat(p, 2), 0, bytes / nic_bw(p, c, kind), bytes,
                        ALGO_DIRECT);
    }
    if (kind != COLL_ALL_TO_ALL)
        return NONE;
    int n = g.ranks;
    double intra = (double)(g.per_node - 1) / n * bytes;
    double inter = (double)(n - g.per_node) / n * bytes;
    double t_intra = intra / nvlink_bw(p, c, kind) + (g.per_node - 1) * nvlink_lat(p);
    double net = g.nodes > 1 ? inter / nic_bw(p, c, kind) : 0;
    double lat = g.nodes > 1 ? (g.nodes - 1) * net_lat(p, g.nodes) : 0;
    link_class lc = g.nodes > 1 ? LINK_NETWORK : LINK_NVLINK;
    /* the two parts run at once: the slower sets the time; what NVLink adds beyond the network
     * part is its nvlink_s */
    double slowest = fmax(t_intra, net + lat);
    return split_of(alpha_s(c, lc, kind) + lat, slowest - net - lat, net, g.nodes > 1 ? inter : 0, ALGO_DIRECT);
}

/* ---- NVLink SHARP and in-network reduction ---------------------------------------------
 * NCCL's own model of them, src/graph/tuning.cc of NVIDIA/nccl (master, commit 5067397c),
 * ncclTopoTuneModel, Simple protocol (the only one NVLS and CollNet run there). Its per-channel
 * bandwidth times its channels stands here for the link's bus bandwidth B (the model has no
 * channels); its per-channel caps (perChMaxNVLSTreeBws) are not applied for the same reason.
 * Its "latencyInter" (the network's latency, counted twice on Simple for the flush) is the
 * platform's NIC-to-NIC latency. baseLatencies of all four are 0. */
#define NVLS_EFFICIENCY 0.85          /* nvlsEfficiency[] Hopper (Blackwell's 0.74 not selected) */
#define NVLS_LAT_NVLINK_US 25.0       /* hwLatencies[NVLINK][NVLS][Simple] */
#define NVLS_LAT_NET_US 18.0          /* hwLatencies[NET][NVLS][Simple] */
#define NVLS_TREE_LAT_NVLINK_US 25.0  /* hwLatencies[NVLINK][NVLSTree][Simple] */
#define NVLS_TREE_LAT_NET_US 20.9     /* hwLatencies[NET][NVLSTree][Simple] */
#define COLLNET_DIRECT_LAT_NVLINK_US 3.7 /* hwLatencies[NVLINK][CollNetDirect][Simple] */
#define COLLNET_DIRECT_LAT_NET_US 31.0   /* hwLatencies[NET][CollNetDirect][Simple] */
#define COLLNET_CHAIN_LAT_NVLINK_US 2.8  /* hwLatencies[NVLINK][CollNetChain][Simple] */
#define COLLNET_CHAIN_LAT_NET_US 30.0    /* hwLatencies[NET][CollNetChain][Simple] */
#define TREE_LAT_NET_US 14.0          /* hwLatencies[NET][Tree][Simple]: the network latency of
                                         every algorithm at one GPU per node ("With ppn=1
                                         latencies are fully exposed") */
#define COLLNET_ARITY_US 0.4          /* "Add 0.4 us arity serialization latency" */
#define COLLNET_DIRECT_SM90 0.85      /* "if (minCompCap >= 90) busBw *= .85" */

/* NCCL's interLat: the table's figure (the tree's at one GPU per node) plus the network's
 * latency twice ("Also add the flush extra latency"). */
static double nccl_net_lat(const platform_config *p, coll_group g, double table_us)
{
    return (g.per_node == 1 ? TREE_LAT_NET_US : table_us) * 1e-6 + 2 * net_lat(p, g.nodes);
}

/* NVLS through the node's NVSwitch (n ranks, g of them per node, g >= 2: NVLS needs two
 * channels, one per local GPU). All-reduce: intraBw = bwIntra * nvlsEfficiency * (nCh-1)/nCh,
 * doubled ("AllReduce pipelines two operations"), to algorithm bandwidth by n / (2(n-1)); on one
 * node (n = g = nCh) that is S / (0.85 B): each GPU sends its buffer once and receives the
 * result once, against the ring's 2(n-1)/n S. All-gather, reduce-scatter: intraBw times
 * (ppn-1)/ppn, used as the algorithm bandwidth as it stands (tuning.cc converts only the ring's
 * and all-reduces'): S / (0.85 B ((g-1)/g)^2). */
static double nvls_nvlink_s(const platform_config *p, const calibration_config *c, coll_kind kind, double bytes,
                            coll_group g)
{
    double lanes = (double)(g.per_node - 1) / g.per_node, bw = NVLS_EFFICIENCY * nvlink_bw(p, c, kind) * lanes;
    if (kind == COLL_ALL_REDUCE) /* busBw 2 bw, algBw = busBw n / nsteps, nsteps = 2 (n-1) */
        return bytes / (2 * bw * g.ranks / (2.0 * (g.ranks - 1)));
    return bytes / (bw * lanes); /* busBw = bw (ppn-1)/ppn, taken as the algorithm bandwidth */
}

/* Through the NICs, after NVLS or the node's CollNet phase: each node's r heads (one per NIC)
 * hold S / r of the node's reduced data each (src/device/all_reduce.h: "Reduce, send to
 * network", "Recv from network, broadcast"); the switches reduce (SHARP): each head sends it
 * once and receives the result once. The NVLink and network phases are pipelined: the slower
 * sets the pace (tuning.cc: min(intraBw, interBw)). */
static coll_split innet_split(const platform_config *p, const calibration_config *c, double fixed, double nvl_s,
                              double per_nic, coll_algo a)
{
    double net = per_nic / nic_bw(p, c, COLL_ALL_REDUCE);
    return split_of(fixed, fmax(nvl_s, net) - net, net, per_nic, a);
}

/* NVLS (NCCL 2.17+): all-reduce, and from 2.19 all-gather and reduce-scatter (tuning.cc's
 * candidates for them: PAT, Ring, NVLS, CollNetDirect), on one node; across nodes all-reduce
 * only and only with SHARP (tuning.cc disables "Collnet+NVLS" without collnet; NVLS gathers
 * across nodes need the CollNet plugin's iallgather / ireducescatter, not modelled). Latency:
 * latencies = intraLat (+ interLat across nodes). */
static coll_split nvls_split(const platform_config *p, const calibration_config *c, coll_kind kind, double bytes,
                             coll_group g)
{
    if (!p->node.nvls || g.per_node < 2 ||
        (kind != COLL_ALL_REDUCE && kind != COLL_ALL_GATHER && kind != COLL_REDUCE_SCATTER))
        return NONE;
    double nvl = nvls_nvlink_s(p, c, kind, bytes, g);
    if (g.nodes <= 1)
        return split_of(alpha_s(c, LINK_NVLINK, kind) + NVLS_LAT_NVLINK_US * 1e-6, nvl, 0, 0, ALGO_NVLS);
    if (!p->network.sharp || kind != COLL_ALL_REDUCE)
        return NONE;
    double fixed = alpha_s(c, LINK_NETWORK, kind) + NVLS_LAT_NVLINK_US * 1e-6 + nccl_net_lat(p, g, NVLS_LAT_NET_US);
    return innet_split(p, c, fixed, nvl, bytes / nic_rails(p, g), ALGO_NVLS);
}

/* NVLSTree (NCCL 2.19+): all-reduce across nodes (tuning.cc disables it on one node): NVLS in
 * each node, then a tree across nodes among the heads, S / r each: up and down, 2 S / r through
 * each NIC; on two nodes one exchange, S / r ("Handle 2 node case of NVLSTree": interBw x 2).
 * Latency intraLat + 2 log2i(N) interLat. */
static coll_split nvls_tree_split(const platform_config *p, const calibration_config *c, coll_kind kind,
                                  double bytes, coll_group g)
{
    if (!p->node.nvls || kind != COLL_ALL_REDUCE || g.nodes <= 1 || g.per_node < 2)
        return NONE;
    double fixed = alpha_s(c, LINK_NETWORK, kind) + NVLS_TREE_LAT_NVLINK_US * 1e-6 +
                   2 * floor(log2((double)g.nodes)) * nccl_net_lat(p, g, NVLS_TREE_LAT_NET_US);
    double per_nic = (g.nodes <= 2 ? 1.0 : 2.0) * bytes / nic_rails(p, g);
    return innet_split(p, c, fixed, nvls_nvlink_s(p, c, kind, bytes, g), per_nic, ALGO_NVLS_TREE);
}

/* CollNet (SHARP) all-reduce across nodes; all-gather and reduce-scatter over CollNet need the
 * plugin's iallgather / ireducescatter (not modelled). Bandwidth as tuning.cc has it: bwIntra
 * (NVLink), to algorithm bandwidth by 0.5, so 2 S / B over NVLink: Direct scatters to and
 * gathers from the r heads directly, divided by the GPU/NIC factor f = (g/r + 1) / 2 ("Collnet+
 * Direct requires all GPUs to have a local NIC") and by 0.85 from compute capability 9.0 (the
 * platform tells Hopper and newer by a fp8 peak); Chain passes it along a chain of the g GPUs.
 * NIC bytes: S / r through each head's NIC (innet_split). Latency: Direct 2 (min(1, g-1)
 * intraLat + 0.4 us (g-1)) + interLat; Chain 2 (g-1) intraLat + interLat. */
static coll_split collnet_split(const platform_config *p, const calibration_config *c, coll_kind kind,
                                double bytes, coll_group g, coll_algo a)
{
    if (!p->network.sharp || kind != COLL_ALL_REDUCE || g.nodes <= 1)
        return NONE;
    int r = nic_rails(p, g), local = g.per_node - 1;
    double nvl = 0, fixed = alpha_s(c, LINK_NETWORK, kind);
    if (a == ALGO_COLLNET_DIRECT) {
        double f = ((double)g.per_node / r + 1) / 2;
        double eff = p->gpu.peak_tflops[PREC_FP8] > 0 ? COLLNET_DIRECT_SM90 : 1.0;
        nvl = local > 0 ? 2 * bytes * f / (eff * nvlink_bw(p, c, kind)) : 0;
        fixed += 2 * ((local > 0 ? COLLNET_DIRECT_LAT_NVLINK_US : 0) + local * COLLNET_ARITY_US) * 1e-6 +
                 nccl_net_lat(p, g, COLLNET_DIRECT_LAT_NET_US);
    } else {
        nvl = local > 0 ? 2 * bytes / nvlink_bw(p, c, kind) : 0;
        fixed += 2 * local * COLLNET_CHAIN_LAT_NVLINK_US * 1e-6 + nccl_net_lat(p, g, COLLNET_CHAIN_LAT_NET_US);
    }
    return innet_split(p, c, fixed, nvl, bytes / r, a);
}

coll_split collective_split_algo(const platform_config *p, const calibration_config *c, coll_kind kind,
                                 double bytes, coll_group g, coll_algo algo)
{
    if (g.ranks <= 1 && kind != COLL_SEND_RECV) {
        coll_split zero = {0, 0, 0, 0, 0, ALGO_RING};
        return zero;
    }
    switch (algo) {
    case ALGO_AUTO: return collective_split(p, c, kind, bytes, g);
    case ALGO_RING: return ring_split(p, c, kind, bytes, g);
    case ALGO_TREE: return tree_split(p, c, kind, bytes, g);
    case ALGO_HIERARCHICAL: return hierarchical_split(p, c, kind, bytes, g);
    case ALGO_DIRECT: return direct_split(p, c, kind, bytes, g);
    case ALGO_PAT: return pat_split(p, c, kind, bytes, g);
    case ALGO_HALVING_DOUBLING: return halving_doubling_split(p, c, kind, bytes, g);
    case ALGO_NVLS: return nvls_split(p, c, kind, bytes, g);
    case ALGO_NVLS_TREE: return nvls_tree_split(p, c, kind, bytes, g);
    case ALGO_COLLNET_DIRECT:
    case ALGO_COLLNET_CHAIN: return collnet_split(p, c, kind, bytes, g, algo);
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
    coll_split best = {0, 0, 0, 0, 0, ALGO_RING};
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
        if (!coll_algo_is_nccl((coll_algo)a))
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
    coll_cost r = {s.time_s, s.algo};
    return r;
}
