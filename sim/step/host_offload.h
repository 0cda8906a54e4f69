/* ZeRO-Offload / ZeRO-Infinity in the step (Ren et al. 2021, arXiv:2101.06840; Rajbhandari et al.
 * 2021, arXiv:2104.07857): what moves between a GPU, its host and the node's NVMe, and when.
 * The memory side is memory_model_states_offload (memory.h).
 *
 * With parallel.offload_optimizer (cpu | nvme):
 *  - each reduced gradient bucket goes GPU -> host over the GPU's PCIe link ("offload_d2h_grads"),
 *    overlapping the rest of the backward: the rank's share, elements x gradient bytes / shards
 *    (ZeRO >= 1; all of them without ZeRO);
 *  - nvme: the rank's optimizer states are read from NVMe ("offload_nvme_read_states");
 *  - the optimizer runs on the CPU ("optimizer_cpu"), memory-bound on host DRAM: per parameter it
 *    reads the K bytes of optimizer state (fp32 master + Adam m, v = 12 under mixed precision;
 *    SGD: master + momentum) and the gradient (2 or 4 bytes), and writes the K bytes back plus,
 *    under mixed precision, the 2-byte parameter copy: 28 bytes per parameter for mixed-precision
 *    Adam. The node's GPUs step at once and share node.host_memory_bandwidth_gbs;
 *  - nvme: the states are written back ("offload_nvme_write_states"), at the node's NVMe write
 *    bandwidth shared by its GPUs;
 *  - the updated parameters go host -> GPU ("offload_h2d_params"), rank's share, over PCIe;
 *    ZeRO-1/2 then all-gathers them as without offload.
 * With parallel.offload_parameters (cpu | nvme; ZeRO-3): the updated parameters stay off the GPU
 * (nvme: written there, "offload_nvme_write_params"), and each ZeRO-3 parameter all-gather is
 * preceded by the rank's shard coming in ("offload_fetch_params"): over PCIe from the host, or
 * NVMe -> host -> GPU at the slower of PCIe and the NVMe read share.
 *
 * Assumptions: no one-step-delayed parameter update (the next step waits for the CPU step, as
 * ZeRO-Offload without DPU); NVMe reads, CPU step and writes run one after another (no
 * pipelining of the swap); DMA traffic does not consume host DRAM bandwidth; the host transfers
 * run on their own lane (LANE_HOST) of the stage, one at a time. In the metrics the transfers
 * count as "zero" communication (the GPU waiting for them is exposed zero communication); the
 * CPU step takes the GPU optimizer's place on the compute lane (the GPU idles through it) and
 * counts as the stage's compute time, as the GPU optimizer step did. */
#ifndef DTSIM_SIM_STEP_HOST_OFFLOAD_H
#define DTSIM_SIM_STEP_HOST_OFFLOAD_H

#include "config.h"
#include "workload_graph.h"

/* The name of the CPU optimizer step task (a compute-lane task whose `bytes` are its host
 * memory traffic). */
#define OFFLOAD_CPU_STEP_NAME "optimizer_cpu"

/* Bytes per parameter the CPU optimizer step reads and writes in host memory. */
void offload_cpu_step_bytes(const scenario_config *s, double *read, double *write);

/* GPUs of one node sharing its host memory and NVMe: min(node.gpus, the job's GPUs). */
int offload_gpus_sharing(const scenario_config *s);

/* Parameters whose optimizer step one GPU's rank of `stage` runs (its 1/(dp x cp) under ZeRO). */
double offload_step_params(const scenario_config *s, int stage);

/* The analytic durations of the step-end chain of one rank of `stage` (seconds; 0 where the
 * configuration does not have that part). */
typedef struct {
    double nvme_read_s, cpu_step_s, nvme_write_s, h2d_s;
} offload_step_times;
void offload_step_times_of(const scenario_config *s, int stage, offload_step_times *t);

/* Where a task of the step moves its bytes, for the flow replay (sim/replay/flow): the GPU's PCIe link
 * to its host, the node's NVMe read / write links, the node's DRAM (the CPU step). */
typedef enum {
    OFFLOAD_ROUTE_NONE = 0,   /* not an offload task */
    OFFLOAD_ROUTE_GPU_TO_CPU, OFFLOAD_ROUTE_CPU_TO_GPU, OFFLOAD_ROUTE_NVME_TO_CPU, OFFLOAD_ROUTE_CPU_TO_NVME,
    OFFLOAD_ROUTE_NVME_TO_GPU, OFFLOAD_ROUTE_CPU_TO_MEM
} offload_route;
offload_route offload_task_route(const scenario_config *s, const sim_task *k);

/* Emitting (workload.c, workload_emit.c and workload_step.c call these). Each returns the index of the last task added, or -1 when
 * the scenario offloads nothing of that kind. */
/* `elements` gradient elements were reduced (one or more buckets); dep: what they wait for. */
int offload_grads_to_host(step_workload *w, const scenario_config *s, int stage, double elements, int dep);
/* The optimizer step off the GPU, after dep_a and dep_b (either may be -1). */
int offload_optimizer_step(step_workload *w, const scenario_config *s, int stage, int dep_a, int dep_b);
/* Before a ZeRO-3 gather of `params` parameters (per GPU, gathered size): the rank's shard in. */
int offload_param_fetch(step_workload *w, const scenario_config *s, int stage, double params, int dep);

#endif
