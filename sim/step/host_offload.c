/* ZeRO-Offload / ZeRO-Infinity tasks of the step; see host_offload.h for the model. */
#include <string.h>
#include "host_offload.h"
#include "params.h"

static int is_fp32(const scenario_config *s)
{
    return s->training.precision == PREC_FP32 || s->training.precision == PREC_TF32;
}

/* Bytes of one parameter (and of one gradient) as the GPU holds it. */
static double param_bytes(const scenario_config *s)
{
    return is_fp32(s) ? 4 : 2;
}

/* Optimizer state bytes per parameter: Adam's two fp32 moments (SGD: one momentum), plus the
 * fp32 master copy under mixed precision (as memory_model_states counts them). */
static double state_bytes(const scenario_config *s)
{
    return (s->training.optimizer == OPTIMIZER_SGD ? 4 : 8) + (is_fp32(s) ? 0 : 4);
}

static int dp_shards(const scenario_config *s)
{
    int n = (s->parallel.dp > 0 ? s->parallel.dp : 1) * (s->parallel.cp > 0 ? s->parallel.cp : 1);
    return n > 0 ? n : 1;
}

void offload_cpu_step_bytes(const scenario_config *s, double *read, double *write)
{
    double k = state_bytes(s), g = param_bytes(s);
    *read = k + g;                          /* states + the gradient */
    *write = k + (is_fp32(s) ? 0 : g);      /* states + the half-precision parameter copy */
}

int offload_gpus_sharing(const scenario_config *s)
{
    int gpn = s->platform.node.gpus > 0 ? s->platform.node.gpus : 1, gpus = scenario_gpus(s);
    return gpus > 0 && gpus < gpn ? gpus : gpn;
}

double offload_step_params(const scenario_config *s, int stage)
{
    return params_stage_per_gpu(s, stage) / (s->parallel.zero_stage >= 1 ? dp_shards(s) : 1);
}

static double share_Bps(const scenario_config *s, double node_gbs)
{
    return node_gbs * 1e9 / offload_gpus_sharing(s);
}

static double pcie_Bps(const scenario_config *s)
{
    return s->platform.node.pcie_bandwidth_gbs * 1e9;
}

void offload_step_times_of(const scenario_config *s, int stage, offload_step_times *t)
{
    memset(t, 0, sizeof *t);
    offload_device opt = s->parallel.offload_optimizer, par = s->parallel.offload_parameters;
    if (opt == OFFLOAD_NONE)
        return;
    double n = offload_step_params(s, stage), rd, wr;
    offload_cpu_step_bytes(s, &rd, &wr);
    t->cpu_step_s = n * (rd + wr) / share_Bps(s, s->platform.node.host_memory_bandwidth_gbs);
    if (opt == OFFLOAD_NVME) {
        t->nvme_read_s = n * state_bytes(s) / share_Bps(s, s->platform.node.nvme_read_gbs);
        t->nvme_write_s = n * state_bytes(s) / share_Bps(s, s->platform.node.nvme_write_gbs);
    }
    if (par == OFFLOAD_NVME)
        t->nvme_write_s += n * param_bytes(s) / share_Bps(s, s->platform.node.nvme_write_gbs);
    if (par == OFFLOAD_NONE)
        t->h2d_s = n * param_bytes(s) / pcie_Bps(s);
}

/* A host transfer of one rank: "zero" communication on the stage's host lane. */
static int add_transfer(step_workload *w, int stage, const char *name, double bytes, double seconds, int dep_a,
                        int dep_b)
{
    sim_task t = workload_task(TASK_COLLECTIVE, LANE_HOST, stage, name);
    t.comm = COMM_ZERO;
    t.coll = COLL_SEND_RECV;
    t.bytes = bytes;
    t.duration_s = seconds;
    int id = workload_add_task(w, &t);
    if (dep_a >= 0)
        workload_add_dep(w, id, dep_a);
    if (dep_b >= 0 && dep_b != dep_a)
        workload_add_dep(w, id, dep_b);
    return id;
}

int offload_grads_to_host(step_workload *w, const scenario_config *s, int stage, double elements, int dep)
{
    if (s->parallel.offload_optimizer == OFFLOAD_NONE || elements <= 0)
        return -1;
    /* The rank keeps only its shard of the reduced gradients (reduce-scatter under ZeRO). */
    double bytes = elements * param_bytes(s) / (s->parallel.zero_stage >= 1 ? dp_shards(s) : 1);
    return add_transfer(w, stage, "offload_d2h_grads", bytes, bytes / pcie_Bps(s), dep, -1);
}

int offload_optimizer_step(step_workload *w, const scenario_config *s, int stage, int dep_a, int dep_b)
{
    offload_device opt = s->parallel.offload_optimizer, par = s->parallel.offload_parameters;
    if (opt == OFFLOAD_NONE)
        return -1;
    offload_step_times t;
    offload_step_times_of(s, stage, &t);
    double n = offload_step_params(s, stage);
    /* The stage's last host transfer so far: its last gradient copy. */
    int last_copy = -1;
    for (int i = w->n_tasks - 1; i >= 0 && last_copy < 0; i--)
        if (w->tasks[i].stage == stage && w->tasks[i].lane == LANE_HOST)
            last_copy = i;
    int last = -1;
    if (opt == OFFLOAD_NVME) /* the host lane's order puts it after the gradient copies */
        last = add_transfer(w, stage, "offload_nvme_read_states", n * state_bytes(s), t.nvme_read_s, dep_a, dep_b);

    /* The CPU step stands where the GPU optimizer stood, on the compute lane: the GPU has
     * nothing else to do until the parameters come back (no one-step-delayed update). */
    double rd, wr;
    offload_cpu_step_bytes(s, &rd, &wr);
    sim_task c = workload_task(TASK_COMPUTE, LANE_COMPUTE, stage, OFFLOAD_CPU_STEP_NAME);
    c.bytes = n * (rd + wr); /* host memory traffic (the flow replay moves it over the node's DRAM link) */
    c.duration_s = t.cpu_step_s;
    int step = workload_add_task(w, &c);
    int deps[4] = {dep_a, dep_b, last_copy, last};
    for (int i = 0; i < 4; i++) {
        int dup = deps[i] < 0;
        for (int j = 0; j < i; j++)
            dup |= deps[j] == deps[i];
        if (!dup)
            workload_add_dep(w, step, deps[i]);
    }
    last = step;

    if (t.nvme_write_s > 0) {
        double bytes = (opt == OFFLOAD_NVME ? n * state_bytes(s) : 0) + (par == OFFLOAD_NVME ? n * param_bytes(s) : 0);
        last = add_transfer(w, stage, par == OFFLOAD_NVME && opt != OFFLOAD_NVME ? "offload_nvme_write_params"
                                                                                 : "offload_nvme_write_states",
                            bytes, t.nvme_write_s, last, -1);
    }
    if (t.h2d_s > 0)
        last = add_transfer(w, stage, "offload_h2d_params", n * param_bytes(s), t.h2d_s, last, -1);
    return last;
}

offload_route offload_task_route(const scenario_config *s, const sim_task *k)
{
    if (!k->name || strncmp(k->name, "offload_", 8) != 0)
        return strcmp(k->name ? k->name : "", OFFLOAD_CPU_STEP_NAME) == 0 ? OFFLOAD_ROUTE_CPU_TO_MEM
                                                                             : OFFLOAD_ROUTE_NONE;
    if (strcmp(k->name, "offload_d2h_grads") == 0)
        return OFFLOAD_ROUTE_GPU_TO_CPU;
    if (strcmp(k->name, "offload_h2d_params") == 0)
        return OFFLOAD_ROUTE_CPU_TO_GPU;
    if (strcmp(k->name, "offload_nvme_read_states") == 0)
        return OFFLOAD_ROUTE_NVME_TO_CPU;
    if (strncmp(k->name, "offload_nvme_write_", 19) == 0)
        return OFFLOAD_ROUTE_CPU_TO_NVME;
    if (strcmp(k->name, "offload_fetch_params") == 0)
        return s->parallel.offload_parameters == OFFLOAD_NVME ? OFFLOAD_ROUTE_NVME_TO_GPU : OFFLOAD_ROUTE_CPU_TO_GPU;
    return OFFLOAD_ROUTE_NONE;
}

int offload_param_fetch(step_workload *w, const scenario_config *s, int stage, double params, int dep)
{
    offload_device par = s->parallel.offload_parameters;
    if (par == OFFLOAD_NONE || params <= 0)
        return -1;
    double bytes = params * param_bytes(s) / dp_shards(s);
    double Bps = pcie_Bps(s);
    if (par == OFFLOAD_NVME) { /* NVMe -> host -> GPU, streamed: the slower of the two */
        double nvme = share_Bps(s, s->platform.node.nvme_read_gbs);
        Bps = nvme < Bps ? nvme : Bps;
    }
    return add_transfer(w, stage, "offload_fetch_params", bytes, bytes / Bps, dep, -1);
}
