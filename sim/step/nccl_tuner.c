/* NCCL's tuner model of its collectives: how NCCL itself predicts a call's time to choose its
 * algorithm and protocol. Ported from src/graph/tuning.cc of NVIDIA/nccl (master, commit
 * 5067397c, 2026-06-11): ncclTopoTuneModel (latencies and bandwidths per collective, algorithm
 * and protocol) and ncclTopoGetAlgoTime (time = latency + bytes / bandwidth). Each function below
 * returns its algorithm at the fastest of the protocols it runs, as NCCL's choice does.
 *
 * What stands for what NCCL reads from its topology graphs:
 *  - NCCL's per-channel bandwidth times its channels is the link's bus bandwidth B here: the
 *    calibration's busbw (nccl-tests at large sizes: Simple), else the datasheet rate; the model
 *    has no channels, so the per-channel caps (perChMax*Bws) are not applied;
 *  - `latencyInter`, the network plugin's latency, is 0 as NCCL's InfiniBand and socket plugins
 *    report it (src/transport/net_ib/init.cc, net_socket.cc: "props->latency = 0; // Not set"):
 *    the per-step constants are NCCL's measurements and hold the wire's latency;
 *  - the compute capability is told by the platform's peaks (fp8: Hopper, bf16: Ampere, else
 *    Volta; an fp8 Ada or Blackwell reads as Hopper); the CPU vendor is platform.node.cpu_vendor;
 *  - LL128 is taken as enabled (NCCL enables it on NVLink nodes whose NICs sit on the GPUs' PCIe
 *    switches, as DGX and HGX nodes have them), the tree's pattern as the balanced tree NCCL
 *    builds across nodes (not NCCL_TOPO_PATTERN_TREE's extra 0.85).
 * Bytes through the NICs count each protocol's flags: LL sends 8-byte lines of 4 data bytes, LL128
 * 128-byte lines of 120. What NCCL's bandwidth leaves slower than those bytes on the wire is node
 * time (coll_split.node_s), paid per call as the flow replay pays it. docs/model.md has the
 * formulas. */
#include <math.h>
#include "collective_internal.h"

/* tuning.cc's algorithm order in its tables */
enum { T_TREE, T_RING, T_COLLNET_DIRECT, T_COLLNET_CHAIN, T_NVLS, T_NVLS_TREE, T_PAT, T_ALGOS };

/* baseLatencies (us), per protocol LL, LL128, Simple */
static const double base_us[T_ALGOS][PROTO_COUNT] = {
    {6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {8.0, 8.0, 8.0}};
/* hwLatencies[NVLINK] and hwLatencies[NET] (us): a step's latency inside a node and across nodes */
static const double nvlink_us[T_ALGOS][PROTO_COUNT] = {
    {0.6, 1.25, 4.0}, {0.6, 1.9, 3.4}, {0, 0, 3.7}, {0, 0, 2.8}, {0, 0, 25}, {0, 0, 25}, {0, 0, 4.0}};
static const double net_us[T_ALGOS][PROTO_COUNT] = {
    {5.0, 8.5, 14}, {2.7, 4.0, 14.0}, {0, 0, 31}, {0, 0, 30}, {0, 0, 18}, {0, 0, 20.9}, {0, 0, 14}};
/* llMaxBws (GB/s, the whole call's LL bus bandwidth): one node by compute capability (Volta,
 * Ampere, Hopper), across 2 and more nodes by CPU (row 0: Intel and others, row 1: AMD) */
static const double ll_max_gbs[3][3] = {{39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {141.0, 45.0, 35.0}};
/* treeCorrectionFactor: the tree's bandwidth at medium sizes, powers of two from 64 B */
static const double tree_correction[PROTO_COUNT][24] = {
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9}};
#define NVLS_EFFICIENCY 0.85     /* nvlsEfficiency[] Hopper (Blackwell's 0.74 not told apart) */
#define COLLNET_ARITY_US 0.4     /* "Add 0.4 us arity serialization latency" */
#define COLLNET_DIRECT_SM90 0.85 /* "if (minCompCap >= 90) busBw *= .85" */
#define LL128_BW 0.92            /* the ring's LL128 bandwidth (tuning.cc: "0.92", beside a
                                    commented 120.0/128.0), and the tree's all-reduce */
/* Bytes on the wire per data byte: LL's 8-byte lines carry 4, LL128's 128-byte lines 120
 * (src/device/prims_ll.h, prims_ll128.h) */
static const double wire_per_byte[PROTO_COUNT] = {2.0, 128.0 / 120.0, 1.0};

enum { CC_VOLTA, CC_AMPERE, CC_HOPPER };
static int compute_capability(const platform_config *p)
{
    return p->gpu.peak_tflops[PREC_FP8] > 0 ? CC_HOPPER : p->gpu.peak_tflops[PREC_BF16] > 0 ? CC_AMPERE : CC_VOLTA;
}

/* log2i of tuning.cc: floor(log2 n), -1 for 0 */
static int log2i(double n)
{
    int l = -1;
    for (double v = floor(n); v >= 1; v = floor(v / 2))
        l++;
    return l;
}

/* getNetOverhead: the network post overhead per step (us), Intel 1, AMD 2, others 1 */
static double net_overhead_us(const platform_config *p)
{
    return p->node.cpu_vendor == CPU_VENDOR_AMD ? 2.0 : 1.0;
}

static double ll_max_bw(const platform_config *p, coll_group g)
{
    int nodes = g.nodes <= 2 ? g.nodes - 1 : 2;
    int row = g.nodes == 1 ? compute_capability(p) : p->node.cpu_vendor == CPU_VENDOR_AMD ? 1 : 0;
    return ll_max_gbs[row][nodes] * 1e9;
}

/* interLat: the algorithm's network step, the tree's at one GPU per node ("With ppn=1
 * latencies are fully exposed, use the Tree network latency"); latencyInter is 0 (see above) */
static double inter_lat_s(coll_group g, int algo, coll_proto pr)
{
    return (g.per_node == 1 ? net_us[T_TREE][pr] : net_us[algo][pr]) * 1e-6;
}

/* A protocol's time for `wire` bytes at bus bandwidth busbw, `nic_bytes` of them through each
 * NIC of bandwidth nic (0: none cross a node): the wire time is the network's, the rest node
 * time. */
static coll_split timed(double lat, double bw_s, double nic_bytes, double nic, coll_algo a, coll_proto pr)
{
    double net = nic_bytes > 0 ? nic_bytes / nic : 0;
    return coll_split_of(lat, fmax(0, bw_s - net), net, nic_bytes, a, pr);
}

static coll_split faster(coll_split a, coll_split b)
{
    return b.time_s < a.time_s ? b : a;
}

/* Whether protocol pr may run this kind of call: all unless the scenario forces one
 * (parallel.nccl_proto, as NCCL_PROTO does: "^LL128" style lists are not modelled). */
static int proto_enabled(const platform_config *p, coll_kind kind, int pr)
{
    int forced = kind >= 0 && kind < COLL_KIND_COUNT ? p->nccl_proto[kind] - 1 : -1;
    return forced < 0 || forced == pr;
}

/* Ring: nsteps = 2(n-1) (all-reduce), n-1 (gathers); N-1 of a pass's steps cross nodes. latency
 * base + (nsteps - nInter) intraLat + nInter interLat, intraLat at least the network post
 * overhead (x3 on Simple) across nodes; Simple all-reduce across nodes x1.4 from Ampere (x1.9
 * before: "Plateau effect of ring", once a channel's share of a rank is >= 64 B, taken here with
 * one channel). Broadcast: base + one step (NCCL's sameChannels rings). Bandwidth B x 0.5 (LL,
 * at most llMaxBw), x 0.92 (LL128), x 1 (Simple), to algorithm bandwidth by n / nsteps. */
coll_split nccl_ring_split(const platform_config *p, const calibration_config *c, coll_kind kind, double bytes,
                           coll_group g)
{
    if (kind == COLL_SEND_RECV || kind == COLL_ALL_TO_ALL)
        return COLL_NONE;
    int n = g.ranks, N = g.nodes;
    int ar = kind == COLL_ALL_REDUCE;
    double nsteps = ar ? 2.0 * (n - 1) : (double)(n - 1);
    double n_inter = N <= 1 ? 0 : ar ? 2.0 * (N - 1) : (double)(N - 1);
    double wire = coll_ring_factor(kind, n) * bytes, nic = coll_nic_bw(p, c, kind), B;
    int rails = 0;
    if (N <= 1) {
        B = coll_nvlink_bw(p, c, kind);
    } else {
        rails = coll_nic_rails(p, g);
        B = rails * nic;
        if (g.per_node > 1)
            B = fmin(B, coll_nvlink_bw(p, c, kind));
    }
    coll_split best = COLL_NONE;
    for (int pr = 0; pr < PROTO_COUNT; pr++) {
        if (!proto_enabled(p, kind, pr))
            continue;
        double busbw = pr == PROTO_LL ? fmin(0.5 * B, ll_max_bw(p, g)) : pr == PROTO_LL128 ? LL128_BW * B : B;
        double lat = base_us[T_RING][pr] * 1e-6;
        if (kind == COLL_BROADCAST) {
            lat += (N <= 1 ? nvlink_us[T_RING][pr] : net_us[T_RING][pr]) * 1e-6;
        } else {
            double intra = nvlink_us[T_RING][pr];
            if (N > 1)
                intra = fmax(intra, net_overhead_us(p) * (pr == PROTO_SIMPLE ? 3 : 1));
            lat += (nsteps - n_inter) * intra * 1e-6 + n_inter * inter_lat_s(g, T_RING, (coll_proto)pr);
        }
        if (pr == PROTO_SIMPLE && ar && N > 1 && bytes / n >= 64)
            lat *= compute_capability(p) >= CC_AMPERE ? 1.4 : 1.9;
        double nic_bytes = rails > 0 ? wire / rails * wire_per_byte[pr] : 0;
        best = faster(best, timed(lat, wire / busbw, nic_bytes, nic, ALGO_RING, (coll_proto)pr));
    }
    return best;
}

/* Double binary tree, all-reduce across nodes: latency base + 2 ((g-1) intraLat + log2i(N)
 * interLat); bus bandwidth r B_nic x 0.92, then / 3.8 (LL, at most llMaxBw) or x 120/128 (LL128),
 * times treeCorrectionFactor at the call's size; algorithm bandwidth half of it (each rank sends
 * and receives the buffer about twice: reduce, then broadcast). */
coll_split nccl_tree_split(const platform_config *p, const calibration_config *c, coll_kind kind, double bytes,
                           coll_group g)
{
    if (kind != COLL_ALL_REDUCE || g.nodes <= 1)
        return COLL_NONE;
    int rails = coll_nic_rails(p, g), size_class = log2i(bytes / 64);
    double nic = coll_nic_bw(p, c, kind), B = rails * nic;
    coll_split best = COLL_NONE;
    for (int pr = 0; pr < PROTO_COUNT; pr++) {
        if (!proto_enabled(p, kind, pr))
            continue;
        double busbw = LL128_BW * B;
        if (pr == PROTO_LL)
            busbw = fmin(busbw / 3.8, ll_max_bw(p, g));
        else if (pr == PROTO_LL128)
            busbw *= 120.0 / 128.0;
        if (size_class >= 0 && size_class < 23)
            busbw *= tree_correction[pr][size_class];
        double lat = base_us[T_TREE][pr] * 1e-6 +
                     2 * ((g.per_node - 1) * nvlink_us[T_TREE][pr] * 1e-6 +
                          log2i(g.nodes) * inter_lat_s(g, T_TREE, (coll_proto)pr));
        best = faster(best, timed(lat, 2 * bytes / busbw, 2 * bytes / rails * wire_per_byte[pr], nic, ALGO_TREE,
                                  (coll_proto)pr));
    }
    return best;
}

/* PAT (NCCL 2.23+): all-gather and reduce-scatter at one GPU per node, Simple only (NCCL enables
 * it there only: ncclPatEnable). Latency 8 us + log2i(N) interLat / 3.5 + 2.8 us n ("Still a
 * linear part"); bandwidth 0.75 B_nic taken as the algorithm bandwidth (tuning.cc converts only
 * the ring's gathers). */
coll_split nccl_pat_split(const platform_config *p, const calibration_config *c, coll_kind kind, double bytes,
                          coll_group g)
{
    if ((kind != COLL_ALL_GATHER && kind != COLL_REDUCE_SCATTER) || g.per_node != 1 || g.nodes <= 1 ||
        !proto_enabled(p, kind, PROTO_SIMPLE))
        return COLL_NONE;
    double nic = coll_nic_bw(p, c, kind);
    double lat = base_us[T_PAT][PROTO_SIMPLE] * 1e-6 +
                 log2i(g.nodes) * inter_lat_s(g, T_PAT, PROTO_SIMPLE) / 3.5 + g.ranks * 2.8e-6;
    return timed(lat, bytes / (0.75 * nic), coll_ring_factor(kind, g.ranks) * bytes, nic, ALGO_PAT, PROTO_SIMPLE);
}

/* ---- NVLink SHARP and in-network reduction (Simple, the only protocol they run) -------------
 * Two departures from tuning.cc, kept because they follow the bytes (docs/model.md): NVLS across
 * nodes is priced by what each NIC moves, S / r each way, where tuning.cc's min(intraBw,
 * interBw) converted by n / 2(n-1) gives about twice that network time; CollNet takes the slower
 * of its NVLink and network phases, where tuning.cc reads bwIntra alone. */

/* intraBw of NVLS, bwIntra * nvlsEfficiency * (nCh-1)/nCh (lanes: (g-1)/g of the group's g GPUs
 * on a node), or where the calibration holds NVLS measured (collectives.nvls: nccl-tests on one
 * whole node of G GPUs with NVLS on) the intraBw that gives its bus bandwidth there by the
 * formulas below (all-reduce busbw = 2 intraBw, all-gather and reduce-scatter busbw = intraBw
 * ((G-1)/G)^2), scaled to the group's lanes as tuning.cc scales bwIntra: bwIntra nvlsEfficiency
 * is the measured intraBw over (G-1)/G. A gather or reduction not measured takes the all-reduce's
 * (one switch, one bwIntra in tuning.cc). The ring's fit (collectives.nvlink) is not NVLS's: a
 * switch that reduces moves less over the links than a ring, so an NVLS log read as a ring
 * prices every ring above what its links carry. */
static double nvls_intra_bw(const platform_config *p, const calibration_config *c, coll_kind kind, double lanes)
{
    const coll_fit *own = &c->collectives[LINK_NVLS][kind], *ar = &c->collectives[LINK_NVLS][COLL_ALL_REDUCE];
    double node = p->node.gpus > 1 ? (p->node.gpus - 1.0) / p->node.gpus : 1; /* as measured */
    if (own->present && own->busbw_gbs > 0)
        return own->busbw_gbs * 1e9 / (kind == COLL_ALL_REDUCE ? 2 : node * node) * lanes / node;
    if (ar->present && ar->busbw_gbs > 0)
        return ar->busbw_gbs * 1e9 / 2 * lanes / node;
    return NVLS_EFFICIENCY * coll_nvlink_bw(p, c, kind) * lanes;
}

/* NVLS through the node's NVSwitch (n ranks, g of them per node, g >= 2: NVLS needs two
 * channels, one per local GPU). All-reduce: intraBw = bwIntra * nvlsEfficiency * (nCh-1)/nCh,
 * doubled ("AllReduce pipelines two operations"), to algorithm bandwidth by n / (2(n-1)); on one
 * node (n = g = nCh) that is S / (0.85 B): each GPU sends its buffer once and receives the
 * result once, against the ring's 2(n-1)/n S. All-gather, reduce-scatter: intraBw times
 * (ppn-1)/ppn, used as the algorithm bandwidth as it stands (tuning.cc converts only the ring's
 * and all-reduces'): S / (0.85 B ((g-1)/g)^2). */
static double nvls_node_s(const platform_config *p, const calibration_config *c, coll_kind kind, double bytes,
                          coll_group g)
{
    double lanes = (double)(g.per_node - 1) / g.per_node, bw = nvls_intra_bw(p, c, kind, lanes);
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
    double net = per_nic / coll_nic_bw(p, c, COLL_ALL_REDUCE);
    return coll_split_of(fixed, fmax(nvl_s, net) - net, net, per_nic, a, PROTO_SIMPLE);
}

/* NVLS (NCCL 2.17+): all-reduce, and from 2.19 all-gather and reduce-scatter (tuning.cc's
 * candidates for them: PAT, Ring, NVLS, CollNetDirect), on one node; across nodes all-reduce
 * only and only with SHARP (tuning.cc disables "Collnet+NVLS" without collnet; NVLS gathers
 * across nodes need the CollNet plugin's iallgather / ireducescatter, not modelled). Latency:
 * intraLat (+ interLat across nodes). */
coll_split nccl_nvls_split(const platform_config *p, const calibration_config *c, coll_kind kind, double bytes,
                           coll_group g)
{
    if (!p->node.nvls || g.per_node < 2 || !proto_enabled(p, kind, PROTO_SIMPLE) ||
        (kind != COLL_ALL_REDUCE && kind != COLL_ALL_GATHER && kind != COLL_REDUCE_SCATTER))
        return COLL_NONE;
    double nvl = nvls_node_s(p, c, kind, bytes, g), intra = nvlink_us[T_NVLS][PROTO_SIMPLE] * 1e-6;
    if (g.nodes <= 1)
        return coll_split_of(intra, nvl, 0, 0, ALGO_NVLS, PROTO_SIMPLE);
    if (!p->network.sharp || kind != COLL_ALL_REDUCE)
        return COLL_NONE;
    return innet_split(p, c, intra + inter_lat_s(g, T_NVLS, PROTO_SIMPLE), nvl, bytes / coll_nic_rails(p, g),
                       ALGO_NVLS);
}

/* NVLSTree (NCCL 2.19+): all-reduce across nodes (tuning.cc disables it on one node): NVLS in
 * each node, then a tree across nodes among the heads, S / r each: up and down, 2 S / r through
 * each NIC; on two nodes one exchange, S / r ("Handle 2 node case of NVLSTree": interBw x 2).
 * Latency intraLat + 2 log2i(N) interLat. */
coll_split nccl_nvls_tree_split(const platform_config *p, const calibration_config *c, coll_kind kind, double bytes,
                                coll_group g)
{
    if (!p->node.nvls || kind != COLL_ALL_REDUCE || g.nodes <= 1 || g.per_node < 2 ||
        !proto_enabled(p, kind, PROTO_SIMPLE))
        return COLL_NONE;
    double fixed = nvlink_us[T_NVLS_TREE][PROTO_SIMPLE] * 1e-6 +
                   2 * log2i(g.nodes) * inter_lat_s(g, T_NVLS_TREE, PROTO_SIMPLE);
    double per_nic = (g.nodes <= 2 ? 1.0 : 2.0) * bytes / coll_nic_rails(p, g);
    return innet_split(p, c, fixed, nvls_node_s(p, c, kind, bytes, g), per_nic, ALGO_NVLS_TREE);
}

/* CollNet (SHARP) all-reduce across nodes; all-gather and reduce-scatter over CollNet need the
 * plugin's iallgather / ireducescatter (not modelled). Bandwidth as tuning.cc has it: bwIntra
 * (NVLink), to algorithm bandwidth by 0.5, so 2 S / B over NVLink: Direct scatters to and
 * gathers from the r heads directly, divided by the GPU/NIC factor f = (g/r + 1) / 2 ("Collnet+
 * Direct requires all GPUs to have a local NIC") and by 0.85 from compute capability 9.0; Chain
 * passes it along a chain of the g GPUs. NIC bytes: S / r through each head's NIC (innet_split).
 * Latency: Direct 2 (min(1, g-1) intraLat + 0.4 us (g-1)) + interLat; Chain 2 (g-1) intraLat +
 * interLat. */
coll_split nccl_collnet_split(const platform_config *p, const calibration_config *c, coll_kind kind, double bytes,
                              coll_group g, coll_algo a)
{
    if (!p->network.sharp || kind != COLL_ALL_REDUCE || g.nodes <= 1 || !proto_enabled(p, kind, PROTO_SIMPLE))
        return COLL_NONE;
    int r = coll_nic_rails(p, g), local = g.per_node - 1;
    double nvl = 0, fixed;
    if (a == ALGO_COLLNET_DIRECT) {
        double f = ((double)g.per_node / r + 1) / 2;
        double eff = compute_capability(p) >= CC_HOPPER ? COLLNET_DIRECT_SM90 : 1.0;
        nvl = local > 0 ? 2 * bytes * f / (eff * coll_nvlink_bw(p, c, kind)) : 0;
        fixed = 2 * ((local > 0 ? nvlink_us[T_COLLNET_DIRECT][PROTO_SIMPLE] : 0) + local * COLLNET_ARITY_US) * 1e-6 +
                inter_lat_s(g, T_COLLNET_DIRECT, PROTO_SIMPLE);
    } else {
        nvl = local > 0 ? 2 * bytes / coll_nvlink_bw(p, c, kind) : 0;
        fixed = 2 * local * nvlink_us[T_COLLNET_CHAIN][PROTO_SIMPLE] * 1e-6 +
                inter_lat_s(g, T_COLLNET_CHAIN, PROTO_SIMPLE);
    }
    return innet_split(p, c, fixed, nvl, bytes / r, a);
}
