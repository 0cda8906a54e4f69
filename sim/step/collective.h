/* Collective communication times on an idle fabric, with the algorithm chosen as NCCL's tuner
 * does: the fastest predicted of its algorithms (and protocols) that the platform has, unless
 * the scenario forces one (parallel.nccl_algo, as NCCL_ALGO does). One model for both replays:
 * the analytic replay takes time_s; the flow replay moves net_bytes through the NICs as SimGrid
 * flows (contention decides how long they take) and charges the rest (fixed_s per call and
 * node_s) exactly as here, so the two agree wherever nothing contends.
 *
 * Link classes: NVLink inside a node, the GPU's NIC across nodes. Each has a bus bandwidth per
 * GPU: the calibration's busbw for that collective and link class (nccl-tests definition, which
 * at large sizes is NCCL's Simple protocol) when present, else the platform's raw per-direction
 * rate. What a call costs besides its bytes depends on the library that runs it
 * (platform.collective_library):
 *  - nccl (GPU platforms): NCCL's own tuner model (nccl_tuner.h): per protocol (LL, LL128,
 *    Simple) a base latency, a latency per ring or tree step, and a share of the bus bandwidth,
 *    the constants of NCCL's src/graph/tuning.cc;
 *  - mpi (the CPU engine's MPI collectives): alpha-beta, with the calibration's alpha_us per call
 *    and the platform's hop latencies per step (nvlink_latency_us; NIC->leaf->(spine->leaf)->NIC
 *    link and switch latencies). Ring all-reduce over n ranks of bandwidth B and step latency a
 *    costs alpha + 2(n-1) a + 2(n-1)/n * S / B.
 * A group spread over N nodes with g GPUs in each runs g rings in parallel, one per NIC (rail),
 * so its inter-node bandwidth is g NICs. Point-to-point and all-to-all (no tuner in NCCL) are
 * alpha-beta under both. Every formula and its source are in docs/model.md, "Collectives". */
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

/* NCCL's protocols (NCCL_PROTO's names): LL moves 8-byte lines of 4 data and 4 flag bytes, LL128
 * 128-byte lines of 120 data bytes, Simple plain buffers with a synchronisation per chunk. */
typedef enum { PROTO_LL = 0, PROTO_LL128, PROTO_SIMPLE, PROTO_COUNT } coll_proto;
const char *coll_proto_name(coll_proto p); /* "LL", "LL128", "Simple" */
/* -1 if unknown; NCCL_PROTO's names in any case ("ll", "LL128", "simple") */
int coll_proto_from_name(const char *name);

typedef struct {
    double time_s;
    coll_algo algo;
    coll_proto proto;
} coll_cost;

/* One call of an algorithm, split as the flow replay needs it (time_s = fixed_s + node_s +
 * net_s; INFINITY where the algorithm does not apply). */
typedef struct {
    double time_s;
    double fixed_s;   /* latencies: paid once per call */
    double node_s;    /* bandwidth time beyond the NIC transfer: the phases inside nodes, and
                         what the protocol's bandwidth share leaves slower than the wire */
    double net_s;     /* bandwidth time of the bytes through the NICs on an idle fabric */
    double net_bytes; /* bytes each GPU sends through its NIC(s), the protocol's flags included */
    coll_algo algo;
    coll_proto proto; /* PROTO_SIMPLE under mpi and for point-to-point */
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

/* A tensor-parallel all-gather or reduce-scatter that Transformer Engine's userbuffers runs beside
 * its GEMM (Megatron-LM's --tp-comm-overlap): TE's own kernels and copies pass the chunks around
 * the NVLink ring (transformer_engine/common/comm_gemm_overlap), no NCCL call and so none of
 * NCCL's protocol latencies; priced as the alpha-beta ring: the calibration's alpha, the
 * platform's NVLink step latency per step, the bytes at the NVLink bus bandwidth. */
double collective_userbuffers_time(const platform_config *p, const calibration_config *c, coll_kind kind,
                                   double bytes, coll_group g);

/* An MoE token dispatch or combine by a hierarchical dispatcher (Megatron-Core's
 * moe_token_dispatcher_type "flex": DeepEP's internode kernels, HybridEP): a token goes once
 * over RDMA to each node that holds one of its experts (to the GPU of the same local rank there)
 * and is fanned out over NVLink to the GPUs holding them; the combine mirrors it. bytes: the
 * rank's token copies (the all-to-all buffer: tokens x topk x hidden x bytes an element);
 * groups / group_topk: the expert groups a token draws from (group-limited routing; without it
 * the experts and topk). Inside one node it is the all-to-all of collective_time. */
double collective_moe_flex_time(const platform_config *p, const calibration_config *c, double bytes, coll_group g,
                                double experts, double topk, double groups, double group_topk);
/* How many of `units` equal parts (nodes, GPUs) holding the experts in order a token's experts
 * reach on average, its own part included: group_topk of the `groups` equal expert groups drawn
 * evenly, then topk experts evenly among theirs (group-limited routing; without it groups =
 * experts and group_topk = topk). Exact where a part holds whole groups or a group spans whole
 * parts; NAN otherwise. */
double moe_reach(int units, double experts, double groups, double group_topk, double topk);
/* Whether moe_reach models that split of groups over units (not NAN). */
int moe_reach_modelled(int units, double groups);

/* The bus bandwidth (B/s) a ring of this collective gets on one link of a class (LINK_NVLINK:
 * per GPU; LINK_NETWORK: one NIC), for both fidelities (the flow replay's links carry it): the
 * calibration's busbw for the collective (or its class's all-reduce busbw) where it has one, but
 * never more than the platform's link rate, which a ring cannot pass (a calibration from a faster
 * machine, or a platform set to slower links, is bounded by the links); else the link's rate.
 * *bounded (may be NULL) is set when the platform's rate bounds a calibrated figure. */
double collective_link_Bps(const platform_config *p, const calibration_config *c, link_class lc, coll_kind kind,
                           int *bounded);
/* The fixed cost of one call (the calibration's alpha for this collective, or its link class's
 * all-reduce alpha when it was not measured), without the links' latency. */
double collective_alpha_s(const calibration_config *c, link_class lc, coll_kind kind);

#endif
