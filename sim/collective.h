/* Collective communication times on an idle fabric (alpha-beta), with the algorithm chosen
 * as NCCL does: the fastest predicted of ring, double binary tree and hierarchical.
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
 * rings in parallel, one per NIC (rail), so its inter-node bandwidth is g NICs. */
#ifndef DTSIM_SIM_COLLECTIVE_H
#define DTSIM_SIM_COLLECTIVE_H

#include "config.h"

typedef enum { ALGO_RING = 0, ALGO_TREE, ALGO_HIERARCHICAL, ALGO_DIRECT, ALGO_PAT, ALGO_COUNT } coll_algo;
const char *coll_algo_name(coll_algo a);

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

/* bytes: the nccl-tests "size" (the full buffer of one rank). */
coll_cost collective_time(const platform_config *p, const calibration_config *c, coll_kind kind,
                          double bytes, coll_group g);
/* Same with a given algorithm (INFINITY where it does not apply). */
double collective_time_algo(const platform_config *p, const calibration_config *c, coll_kind kind,
                            double bytes, coll_group g, coll_algo algo);

/* The fixed cost of one call (the calibration's alpha for this collective, or its link class's
 * all-reduce alpha when it was not measured), without the links' latency. */
double collective_alpha_s(const calibration_config *c, link_class lc, coll_kind kind);

#endif
