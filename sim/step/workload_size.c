/* See workload_size.h. The counts follow workload.c's emit_pass and workload_emit.c. */
#include <math.h>
#include "params.h"
#include "workload_internal.h"
#include "workload_size.h"
#include "zero3.h"

void workload_size_estimate(const scenario_config *s, workload_size *z)
{
    double P = s->parallel.pp > 0 ? s->parallel.pp : 1, V = s->parallel.vpp > 1 ? s->parallel.vpp : 1;
    double m = (double)scenario_micro_batches(s), passes = 2 * P * V * m;
    double layers_per_chunk = ceil((double)s->model.num_layers / (P * V));
    double dpcp = (double)(s->parallel.dp > 0 ? s->parallel.dp : 1) * (s->parallel.cp > 0 ? s->parallel.cp : 1);
    zero3_plan z3;
    zero3_plan_of(s, &z3);

    /* gradient buckets a layer's gradients fill (a flush emits at most WORKLOAD_BUCKET_TASKS) */
    layer_params lp = params_layer_per_gpu(s);
    double grad_elem = params_grad_reduce_bytes(s);
    double call = s->parallel.bucket_size_mb > 0 ? s->parallel.bucket_size_mb * 1048576.0 : 40 * 1048576.0;
    if (z3.active)
        call = z3.reduce_bucket_params * grad_elem;
    if (call < grad_elem)
        call = grad_elem;
    double bucket = s->run.fidelity_flow && s->run.flow_bucket_mb * 1048576.0 > call && !z3.active
                        ? s->run.flow_bucket_mb * 1048576.0 : call;
    double layer_grad = (lp.dense + lp.expert) * grad_elem;
    /* a compressed bucket is compress, all-reduce, (second all-reduce), decompress (compression.c):
     * five tasks at most, counted here as communication, the lane most of them run on */
    double per_bucket = s->parallel.grad_compression != GRAD_COMPRESSION_NONE ? 5 : 1;
    /* past WORKLOAD_BUCKET_TASKS buckets a flush is one task, or that many when compressed
     * (workload_bucket_group) */
#define FLUSH_TASKS(bytes)                                                                                   \
    ((ceil((bytes) / bucket) <= WORKLOAD_BUCKET_TASKS ? ceil((bytes) / bucket)                                 \
                                                      : (per_bucket > 1 ? WORKLOAD_BUCKET_TASKS : 1)) +        \
     1) * per_bucket

    double compute = passes, comm = 0;
    int streams = (dpcp > 1 && s->parallel.overlap_grad_reduce) ||
                  (dpcp <= 1 && s->parallel.offload_optimizer != OFFLOAD_NONE);
    if (P * V > 1)
        comm += passes; /* a send after every pass but the pipeline's ends */
    if (z3.active) {
        compute = passes * layers_per_chunk;                       /* a piece per layer */
        comm += passes * layers_per_chunk;                         /* its gather */
        comm += passes / 2 * layers_per_chunk * FLUSH_TASKS(layer_grad); /* every backward piece's buckets */
    } else if (streams) {
        compute += P * V * (layers_per_chunk - 1); /* the chunk's last backward, layer by layer */
        /* each layer's buckets, or on one GPU its gradients streamed to the host optimizer */
        comm += P * V * layers_per_chunk * (dpcp > 1 ? FLUSH_TASKS(layer_grad) : 2);
    } else if (dpcp > 1) {
        comm += P * FLUSH_TASKS(V * layers_per_chunk * layer_grad); /* one flush of the stage's gradients */
    }
#undef FLUSH_TASKS
    /* the step's end on every stage: gradient norm, optimizer, buffers, syncs, parameter gathers */
    compute += P * 8;
    comm += P * 4;
    z->tasks = compute + comm;
    z->comm_tasks = comm;
}
