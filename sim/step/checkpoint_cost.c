/* See checkpoint_cost.h. */
#include <math.h>
#include <string.h>
#include "checkpoint_cost.h"
#include "params.h"

void checkpoint_cost_of(const scenario_config *s, checkpoint_cost *out)
{
    memset(out, 0, sizeof *out);
    /* Mixed precision: 2 bytes of bf16/fp16 weights plus 12 of fp32 master weights and Adam's two
     * moments per parameter; fp32 training: 4 + 8. SGD keeps no moments (momentum-free). */
    int half = s->training.precision != PREC_FP32 && s->training.precision != PREC_TF32;
    double weights = half ? 2 : 4, master = half ? 4 : 0;
    double moments = s->training.optimizer == OPTIMIZER_ADAM ? 8 : 0;
    out->bytes = params_total(s) * (weights + master + moments);
    double wr = s->platform.storage.checkpoint_write_gbs, rd = s->platform.storage.checkpoint_read_gbs;
    out->write_s = wr > 0 ? out->bytes / (wr * 1e9) : 0;
    out->read_s = rd > 0 ? out->bytes / (rd * 1e9) : 0;
    int gpus = scenario_gpus(s), gpn = s->platform.node.gpus > 0 ? s->platform.node.gpus : 1;
    int nodes = (gpus + gpn - 1) / gpn;
    /* Async: each GPU copies its shard (the checkpoint / GPUs, all shards moving at once) to host
     * memory over its PCIe link, then the step loop goes on. */
    double pcie = s->platform.node.pcie_bandwidth_gbs;
    out->block_s = s->faults.checkpoint_async && pcie > 0 ? out->bytes / gpus / (pcie * 1e9) : out->write_s;
    out->failure_rate = (s->faults.gpu_mtbf_hours > 0 ? gpus / (s->faults.gpu_mtbf_hours * 3600) : 0) +
                        (s->faults.node_mtbf_hours > 0 ? nodes / (s->faults.node_mtbf_hours * 3600) : 0);
    out->recovery_s = s->faults.detect_s + s->faults.restart_s + s->faults.restart_per_node_s * nodes + out->read_s;
}

double checkpoint_expected_goodput(const checkpoint_cost *c, double interval_s)
{
    if (interval_s <= 0)
        return 0;
    double work = interval_s, cycle = interval_s + c->block_s;
    if (c->failure_rate <= 0)
        return work / cycle;
    double M = 1.0 / c->failure_rate;
    double wall = M * exp(c->recovery_s / M) * expm1(cycle / M);
    return isfinite(wall) && wall > 0 ? work / wall : 0;
}
