/* See workload_size.h. The counts follow workload.c's emit_pass and workload_emit.c. */
#include <math.h>
#include "params.h"
#include "workload_internal.h"
#include "workload_size.h"
#include "zero3.h"

/* The tasks one flush of `bytes` of gradients emits (workload_emit.c's flush_bucket): its full
 * buckets, grouped as workload_bucket_group says, and the partial one. A
 * compressed bucket is compress, all-reduce, (a second all-reduce), decompress: five tasks at
 * most, counted as communication, the lane most of them run on. */
static double flush_tasks(double bytes, double bucket, int compressed, int flow)
{
    double full = ceil(bytes / bucket);
    return (ceil(full / workload_bucket_group(full, compressed, flow)) + 1) * (compressed ? 5 : 1);
}

void workload_size_estimate(const scenario_config *s, workload_size *z)
{
    double P = s->parallel.pp > 0 ? s->parallel.pp : 1, V = s->parallel.vpp > 1 ? s->parallel.vpp : 1;
    double m = (double)scenario_micro_batches(s), passes = 2 * P * V * m;
    double layers_per_chunk = ceil((double)s->model.num_layers / (P * V));
    double dpcp = (double)(s->parallel.dp > 0 ? s->parallel.dp : 1) * (s->parallel.cp > 0 ? s->parallel.cp : 1);
    zero3_plan z3;
    zero3_plan_of(s, &z3);

    /* the buckets a layer's gradients fill, as the graph cuts them */
    layer_params lp = params_layer_per_gpu(s);
    double grad_elem = params_grad_reduce_bytes(s), call, bucket; /* call: unused here */
    workload_bucket_bytes(s, &z3, grad_elem, &call, &bucket);
    double layer_grad = (lp.dense + lp.expert) * grad_elem;
    int compressed = s->parallel.grad_compression != GRAD_COMPRESSION_NONE;

    double compute = passes, comm = 0;
    int streams = (dpcp > 1 && params_grad_reduce_overlapped(s)) ||
                  (dpcp <= 1 && s->parallel.offload_optimizer != OFFLOAD_NONE);
    if (P * V > 1)
        comm += passes; /* a send after every pass but the pipeline's ends */
    if (z3.active && !z3.reduce_every_backward) {
        /* FSDP2 under PP (zero3.h): the passes that gather, per layer with their gathers (a chunk's
         * first forward; with reshard_after_forward the m + 1 passes of a chunk that follow a
         * forward or start it), the rest whole; each chunk's gradients in one flush after its last
         * backward */
        double gathering = z3.reshard_after_forward ? passes / 2 + P * V : P * V;
        compute += gathering * (layers_per_chunk - 1);
        comm += gathering * layers_per_chunk + P * V * flush_tasks(layers_per_chunk * layer_grad, bucket, compressed, s->run.fidelity_flow);
    } else if (z3.active) {
        compute = passes * layers_per_chunk; /* a piece per layer */
        comm += (z3.reshard_after_forward ? passes : passes / 2) * layers_per_chunk; /* its gathers */
        if (z3.regather_rerun) /* DeepSpeed gathers a recomputed layer again for its re-run */
            comm += passes / 2 * scenario_recomputed_layers(s, (int)layers_per_chunk);
        /* every backward piece's buckets */
        comm += passes / 2 * layers_per_chunk * flush_tasks(layer_grad, bucket, compressed, s->run.fidelity_flow);
    } else if (streams) {
        compute += P * V * (layers_per_chunk - 1); /* the chunk's last backward, layer by layer */
        /* each layer's buckets, or on one GPU its gradients streamed to the host optimizer */
        comm += P * V * layers_per_chunk * (dpcp > 1 ? flush_tasks(layer_grad, bucket, compressed, s->run.fidelity_flow) : 2);
    } else if (dpcp > 1) {
        /* one flush of the stage's gradients */
        comm += P * flush_tasks(V * layers_per_chunk * layer_grad, bucket, compressed, s->run.fidelity_flow);
    }
    /* DeepSpeed's BF16_Optimizer adds each backward's gradients into its fp32 ones (workload.c) */
    if (params_deepspeed_bf16_optimizer(s))
        compute += passes / 2;
    /* the step's end on every stage: gradient norm, optimizer, buffers, syncs, parameter gathers */
    compute += P * 8;
    comm += P * 4;
    z->tasks = compute + comm;
    z->comm_tasks = comm;
}
