/* What the collective models share (collective.c: the dispatch and the alpha-beta models;
 * nccl_tuner.c: NCCL's tuner model). Not for other modules: they ask collective.h. */
#ifndef DTSIM_SIM_COLLECTIVE_INTERNAL_H
#define DTSIM_SIM_COLLECTIVE_INTERNAL_H

#include "collective.h"

/* A link's bus bandwidth for this collective (B/s): the calibration's busbw for it (or its link
 * class's all-reduce busbw), else the platform's rate: NVLink per GPU, and one NIC. */
double coll_nvlink_bw(const platform_config *p, const calibration_config *c, coll_kind kind);
double coll_nic_bw(const platform_config *p, const calibration_config *c, coll_kind kind);
/* The NICs a group's node-crossing rings use at once: min(g, NICs). */
int coll_nic_rails(const platform_config *p, coll_group g);
/* Bytes each rank of a ring of n moves per byte of buffer (nccl-tests' bus-bandwidth factors). */
double coll_ring_factor(coll_kind kind, int n);
coll_split coll_split_of(double fixed, double node, double net, double net_bytes, coll_algo a, coll_proto proto);
extern const coll_split COLL_NONE; /* does not apply: INFINITY */

/* NCCL's tuner model of its algorithms, each at the fastest of its protocols (nccl_tuner.c). */
coll_split nccl_ring_split(const platform_config *p, const calibration_config *c, coll_kind kind, double bytes,
                           coll_group g);
coll_split nccl_tree_split(const platform_config *p, const calibration_config *c, coll_kind kind, double bytes,
                           coll_group g);
coll_split nccl_pat_split(const platform_config *p, const calibration_config *c, coll_kind kind, double bytes,
                          coll_group g);
coll_split nccl_nvls_split(const platform_config *p, const calibration_config *c, coll_kind kind, double bytes,
                           coll_group g);
coll_split nccl_nvls_tree_split(const platform_config *p, const calibration_config *c, coll_kind kind, double bytes,
                                coll_group g);
coll_split nccl_collnet_split(const platform_config *p, const calibration_config *c, coll_kind kind, double bytes,
                              coll_group g, coll_algo a);

#endif
