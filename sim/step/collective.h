/* Collective communication times on an idle fabric (alpha-beta), with the algorithm chosen
 * as NCCL's tuner does: the fastest predicted of its algorithms that the platform has, unless
 * the scenario forces one (parallel.nccl_algo, as NCCL_ALGO does). One model for both replays:
 * the analytic replay takes time_s; the flow replay moves net_bytes through the NICs as SimGrid
 * flows (contention decides how long they take) and charges the rest (fixed_s per call and
 * nvlink_s) exactly as here, so the two agree wherever nothing contends.
 *
 * Link classes: NVLink inside a node, the GPU's NIC across nodes. Each has
 *  - a per-step latency from the platform (nvlink_latency_us; NIC->leaf->(spine->leaf)->NIC
 *    link and switch latencies),
 *  - a bus bandwidth per GPU: the calibration's busbw for that collective and link class
 *    (nccl-tests definition) when present, else the platform's raw per-direction rate,
 *  - a fixed per-call cost: the calibration's alpha_us (launch and synchronisation).
 * Ring all-reduce over n ranks of bandwidth B and step latency a costs
 *     alpha + 2(n-1) a + 2(n-1)/n * S / B,
 * the closed form the tests check. A group spread over N nodes with g GPUs in each runs g
 * rings in parallel, one per NIC (rail), so its inter-node bandwidth is g NICs. Every
 * algorithm's formula and its source are in docs/model.md, "Collectives". */
#ifndef DTSIM_SIM_COLLECTIVE_H
#define DTSIM_SIM_COLLECTIVE_H

#include "config.h"

/* ALGO_AUTO: NCCL's choice. ALGO_HALVING_DOUBLING is MPI's recursive halving-doubling (Thakur
 * et al. 2005), not one of NCCL's: only a forced choice (parallel.nccl_algo) runs it. The last
 * four run only where the platform has the hardware: NVLink SHARP (platform.node.nvls: NCCL's
 * NVLS, NVLSTree) and in-network reduction (platform.network.sharp: CollNetDirect,
 * CollNetChain; NVLS across nodes needs both, as NCCL's CollNet+NVLS). */
typedef enum {
    ALGO_AUTO = 0, ALGO_RING, ALGO_TREE, ALGO_HIERARCHICAL, ALGO_DIRECT, ALGO_PAT, ALGO_HALVING_DOUBLING,
    ALGO_NVLS, ALGO_NVLS_TREE, ALGO_COLLNET_DIRECT, ALGO_COLLNET_CHAIN,
    ALGO_COUNT
} coll_algo;
/* "auto", "ring", "tree", ..., "pat", "halving_doubling", "nvls", "nvlstree", "collnetdirect",
 * "collnetchain" (NCCL_ALGO's names, lower case) */
const char *coll_algo_name(coll_algo a);
/* -1 if unknown; "collnet" (NCCL 2.13's one CollNet, its "Oneshot CollNet", which 2.14 split
 * into CollNetDirect and CollNetChain) reads as collnetdirect */
int coll_algo_from_name(const char *name);
int coll_algo_is_nccl(coll_algo a);        /* one NCCL's tuner may pick */

typedef struct {
    int ranks;            /* n */
    int nodes;            /* N: nodes the group spans */
    int per_node;         /* g = n / N: group members in each node */
} coll_group;

/* Group geometry of ranks {0, stride, ..., (size-1)*stride} of the rank grid on nodes of
 * gpus_per_node GPUs. */
coll_group coll_group_of(int size, int stride, int gpus_per_node);

typedef struct {
    double time_s;
    coll_algo algo;
} coll_cost;

/* One call of an algorithm, split as the flow replay needs it (time_s = fixed_s + nvlink_s +
 * net_s; INFINITY where the algorithm does not apply). */
typedef struct {
    double time_s;
    double fixed_s;   /* alpha and link latencies: paid once per call */
    double nvlink_s;  /* bandwidth time of the phases inside nodes */
    double net_s;     /* bandwidth time of the bytes through the NICs on an idle fabric */
    double net_bytes; /* bytes each GPU sends through its NIC(s) */
    coll_algo algo;
} coll_split;

/* bytes: the nccl-tests "size" (the full buffer of one rank). The platform's nccl_algo for
 * this kind decides the algorithm when set (a forced algorithm that does not apply to the call
 * falls back to NCCL's choice, as NCCL does); else the fastest of NCCL's. */
coll_cost collective_time(const platform_config *p, const calibration_config *c, coll_kind kind,
                          double bytes, coll_group g);
coll_split collective_split(const platform_config *p, const calibration_config *c, coll_kind kind,
                            double bytes, coll_group g);
/* Same with a given algorithm (INFINITY where it does not apply; ALGO_AUTO: the choice above). */
double collective_time_algo(const platform_config *p, const calibration_config *c, coll_kind kind,
                            double bytes, coll_group g, coll_algo algo);
coll_split collective_split_algo(const platform_config *p, const calibration_config *c, coll_kind kind,
                                 double bytes, coll_group g, coll_algo algo);

/* The fixed cost of one call (the calibration's alpha for this collective, or its link class's
 * all-reduce alpha when it was not measured), without the links' latency. */
double collective_alpha_s(const calibration_config *c, link_class lc, coll_kind kind);

#endif
