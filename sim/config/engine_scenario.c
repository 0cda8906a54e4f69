/* See engine_scenario.h. */
#include <jansson.h>
#include <string.h>
#include "config_json.h"
#include "engine_scenario.h"

int engine_scenario_load(const engine_run_shape *r, const char *platform_path, const char *calibration_path,
                         scenario_config *out, config_error *err)
{
    /* the platform as dtsim finds a scenario's: as given, then from the repository root */
    char found[CFG_PATH_MAX];
    if (config_resolve_path(platform_path, ".", found, sizeof found) != 0)
        return config_fail(err, "platform '%s' not found (looked here and in the repository root)", platform_path);
    json_t *plat = config_load_file(found, "platform", err);
    if (!plat)
        return -1;
    int cp = r->cp > 1 ? r->cp : 1, ranks = r->tp * r->pp * r->dp * cp;
    /* Every rank of the run is on this one machine: a node of `ranks` slots. Where the machine
     * has fewer devices (GPUs, or cores for the CPU engine) than ranks, the ranks share them,
     * and the cost model time-shares the devices (cost.h). */
    json_t *node = json_object_get(plat, "node");
    json_int_t slots = json_integer_value(json_object_get(node, "gpus"));
    if (json_is_object(node) && json_is_integer(json_object_get(node, "gpus")) && slots < ranks) {
        if (!json_object_get(node, "compute_devices"))
            json_object_set_new(node, "compute_devices", json_integer(slots));
        json_object_set_new(node, "gpus", json_integer(ranks));
    }
    json_object_del(plat, "calibration");
    json_t *scen = json_pack("{s:s,s:o,s:s,s:{s:I,s:I,s:I,s:I,s:I,s:I,s:s},s:{s:I,s:I,s:s},"
                             "s:{s:i,s:i,s:i,s:i,s:i,s:s,s:s}}",
                             "name", "dtrain-run", "platform", plat, "calibration", calibration_path,
                             "model", "num_layers", r->num_layers, "hidden_size", r->hidden, "num_attention_heads",
                             r->heads, "ffn_hidden_size", r->ffn_hidden > 0 ? r->ffn_hidden : 4 * r->hidden,
                             "seq_length", r->seq_len, "vocab_size", r->vocab, "attention", "flash",
                             "training", "global_batch_size", r->global_batch, "micro_batch_size", r->micro_batch,
                             "precision", r->precision,
                             "parallel", "tensor_model_parallel_size", r->tp, "pipeline_model_parallel_size", r->pp,
                             "data_parallel_size", r->dp, "virtual_pipeline_model_parallel_size",
                             r->vpp > 0 ? r->vpp : 1, "zero_stage", r->zero, "schedule",
                             r->schedule ? r->schedule : "1f1b", "grad_reduce_dtype",
                             r->grad_reduce ? r->grad_reduce : "fp32");
    if (!scen)
        return config_fail(err, "cannot build the scenario of the run (out of memory or a missing value)");
    /* the scenario's bucket_size_mb counts bytes as they travel (grad_reduce_dtype); dtrain
     * overlaps fp32 reductions only, and counts its buckets in fp32 too */
    json_object_set_new(json_object_get(scen, "parallel"), "overlap_grad_reduce",
                        json_boolean(r->overlap_grad_reduce));
    /* the block's choices, named as dtsim and dtrain read them */
    json_t *model = json_object_get(scen, "model");
    json_object_set_new(model, "num_query_groups", json_integer(r->kv_groups > 0 ? r->kv_groups : r->heads));
    json_object_set_new(model, "swiglu", json_boolean(r->swiglu));
    json_object_set_new(model, "normalization", json_string(r->rmsnorm ? "RMSNorm" : "LayerNorm"));
    json_object_set_new(model, "position_embedding_type", json_string(r->rope ? "rope" : "learned_absolute"));
    json_object_set_new(model, "untie_embeddings_and_output_weights", json_boolean(r->untied));
    if (r->num_experts > 0) {
        json_object_set_new(model, "num_experts", json_integer(r->num_experts));
        json_object_set_new(model, "moe_router_topk", json_integer(r->moe_topk));
        if (r->moe_capacity_factor > 0)
            json_object_set_new(model, "moe_expert_capacity_factor", json_real(r->moe_capacity_factor));
        /* dtrain's expert parallelism: E/ep experts a rank, all-to-all dispatch and combine over
         * the EP group (engine/gpt_moe_ep.c), its ranks TP apart as Megatron-Core's expert grid
         * places them (carved from CP and DP, CP first, engine/comm.c); under TP with sequence
         * parallelism each TP rank
         * routes its own tokens and the experts' rows go through the TP group, as Megatron-Core's
         * alltoall dispatcher does (engine/gpt_moe.c) */
        if (r->ep > 1)
            json_object_set_new(json_object_get(scen, "parallel"), "expert_model_parallel_size", json_integer(r->ep));
    }
    /* dtrain's loss is one pass over the logits each way, with two TP all-reduces (engine/gpt.c) */
    json_object_set_new(json_object_get(scen, "model"), "cross_entropy_loss_fusion", json_true());
    json_object_set_new(json_object_get(scen, "model"), "cross_entropy_fusion_impl", json_string("te"));
    /* dtrain posts its pipeline sends (MPI_Isend of a copy, engine/comm.c) and goes on computing */
    json_object_set_new(json_object_get(scen, "parallel"), "overlap_p2p_comm", json_true());
    /* and every TP rank sends its whole activation (no scatter/gather); under sequence parallelism
     * its block of tokens */
    json_object_set_new(json_object_get(scen, "parallel"), "scatter_gather_p2p", json_false());
    json_object_set_new(json_object_get(scen, "parallel"), "sequence_parallel", json_boolean(r->sequence_parallel));
    /* dtrain's TP overlap is a ring of TP steps, each beside one block's GEMM (engine/gpt_sp.c) */
    if (r->tp_comm_overlap) {
        json_object_set_new(json_object_get(scen, "parallel"), "tp_comm_overlap", json_true());
        json_object_set_new(json_object_get(scen, "parallel"), "tp_comm_overlap_chunks", json_integer(r->tp));
    }
    /* dtrain's context parallelism as it ran: ring attention (p2p, engine/gpt_cp_ring.c), its
     * default, or K and V gathered over the CP group (all_gather, engine/gpt_cp.c) */
    if (cp > 1) {
        json_object_set_new(json_object_get(scen, "parallel"), "context_parallel_size", json_integer(cp));
        json_object_set_new(json_object_get(scen, "parallel"), "cp_comm_type",
                            json_string(r->cp_comm_type ? r->cp_comm_type : "p2p"));
    }
    if (r->overlap_param_gather)
        json_object_set_new(json_object_get(scen, "parallel"), "overlap_param_gather", json_true());
    /* recomputation as dtrain runs it (engine/gpt_acts.c), under Megatron-LM's names */
    json_t *training = json_object_get(scen, "training");
    /* dtrain emulates bf16 and fp16: its activations are fp32 floats rounded to the precision,
     * 4 bytes each in memory and through every memory-bound kernel (measured on an H200,
     * 2026-11-26: bf16 LayerNorm, GELU and residual kernels took as long as fp32's or longer,
     * docs/gpu-runs/2026-11-26-h200) */
    json_object_set_new(training, "activation_bytes", json_integer(4));
    if (r->recompute && strcmp(r->recompute, "none")) {
        json_object_set_new(training, "recompute_granularity", json_string(r->recompute));
        if (!strcmp(r->recompute, "full")) {
            json_object_set_new(training, "recompute_method",
                                json_string(r->recompute_method ? r->recompute_method : "uniform"));
            json_object_set_new(training, "recompute_num_layers",
                                json_integer(r->recompute_num_layers > 0 ? r->recompute_num_layers : 1));
        }
    }
    /* dtrain's buckets: with --overlap-grad-reduce its --bucket-mb, default 40 MiB
     * (engine/dtrain_main.c); without, one all-reduce of every gradient (engine/data_parallel.c,
     * dp_reduce_gradients), the default's one bucket */
    if (r->overlap_grad_reduce)
        json_object_set_new(json_object_get(scen, "parallel"), "bucket_size_mb",
                            json_real(r->bucket_mb > 0 ? r->bucket_mb : 40));
    if (r->powersgd_rank > 0)
        json_object_set_new(json_object_get(scen, "parallel"), "grad_compression",
                            json_pack("{s:s,s:i}", "method", "powersgd", "powersgd_rank", r->powersgd_rank));
    int rc = scenario_load_json(scen, ".", NULL, 0, out, err);
    json_decref(scen);
    return rc;
}
