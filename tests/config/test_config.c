/* The scenario / platform / calibration readers: every validation rule has a rejecting case
 * whose error names the JSON path and the rule; defaults; --set overrides; path resolution;
 * and every shipped file loads. */
#include <dirent.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "collective.h"
#include "config.h"
#include "config_internal.h"
#include "params.h"

/* A valid scenario on the shipped A100 platform: 64 GPUs of 8-GPU nodes. */
static const char *BASE =
    "{\"name\": \"t\", \"platform\": \"platforms/dgx-a100-superpod.json\","
    " \"model\": {\"num_layers\": 8, \"hidden_size\": 1024, \"num_attention_heads\": 16,"
    "             \"seq_length\": 2048, \"vocab_size\": 51200},"
    " \"training\": {\"global_batch_size\": 64, \"micro_batch_size\": 1, \"precision\": \"bf16\"},"
    " \"parallel\": {\"tensor_model_parallel_size\": 2, \"pipeline_model_parallel_size\": 2,"
    "              \"data_parallel_size\": 16}}";

static int load_with(const char *const *sets, int n, scenario_config *s, config_error *err)
{
    json_error_t je;
    json_t *root = json_loads(BASE, 0, &je);
    assert_non_null(root);
    int rc = scenario_load_json(root, DTSIM_SOURCE_DIR, sets, n, s, err);
    json_decref(root);
    return rc;
}

static void base_is_valid_and_defaults_apply(void **state)
{
    scenario_config s;
    config_error err;
    int rc = load_with(NULL, 0, &s, &err);
    if (rc)
        fail_msg("%s", err.msg);
    assert_int_equal(s.model.ffn_hidden_size, 4096);   /* 4 x hidden */
    assert_int_equal(s.model.num_query_groups, 16);    /* = heads */
    assert_int_equal(s.parallel.vpp, 1);
    assert_int_equal(s.parallel.cp, 1);
    assert_int_equal(s.parallel.zero_stage, 1);
    assert_false(s.parallel.stage3_list_collectives); /* DeepSpeed's flat-buffer gathers (v0.6 on) */
    assert_int_equal(s.parallel.schedule, PIPELINE_1F1B);
    assert_false(s.parallel.overlap_grad_reduce); /* Megatron-LM's default */
    assert_false(s.parallel.overlap_p2p_comm);    /* likewise: blocking pipeline sends */
    assert_true(s.parallel.scatter_gather_p2p);   /* Megatron-LM's pipeline scatter/gather */
    assert_true(s.parallel.bucket_size_mb == 0); /* the framework's default (params_dp_bucket_bytes) */
    assert_int_equal(s.training.recompute, RECOMPUTE_NONE);
    assert_int_equal(s.run.steps, 1);
    assert_int_equal(s.run.fidelity_flow, 0);
    assert_true(s.faults.detect_s == 120 && s.faults.restart_s == 600);
    assert_int_equal(s.parallel.ep, 1);
    assert_false(s.parallel.sequence_parallel);
    assert_null(s.parallel.pipeline_layers);
    assert_int_equal(s.parallel.pipeline_layers_count, 0);
    assert_false(s.model.swiglu);
    assert_int_equal(s.model.num_experts, 0);
    assert_int_equal(s.model.moe_router_topk, 0);
    assert_int_equal(s.model.attention, ATTENTION_FLASH); /* Megatron-Core's default */
    assert_int_equal(s.training.optimizer, OPTIMIZER_ADAM);
    assert_true(s.training.tokens == 0);
    assert_true(s.faults.gpu_mtbf_hours == 0 && s.faults.node_mtbf_hours == 0);
    assert_true(s.faults.weibull_shape == 1);
    assert_true(s.faults.checkpoint_interval_s == 1800);
    assert_true(s.faults.checkpoint_async);
    assert_true(s.faults.horizon_days == 30);
    assert_int_equal(s.faults.seed, 1);
    assert_int_equal(s.faults.degraded_count, 0);
    assert_int_equal(s.faults.straggler_count, 0);
    assert_int_equal(s.faults.spare_nodes, 0);
    assert_true(s.faults.repair_hours == 24);
    assert_false(s.faults.elastic);
    assert_string_equal(s.faults.failure_trace, "");
    assert_int_equal(scenario_gpus(&s), 64);
    assert_int_equal(scenario_micro_batches(&s), 4);
    assert_int_equal(s.platform.node.compute_devices, s.platform.node.gpus); /* one device per rank slot */
    /* The platform's default calibration was loaded. */
    assert_string_equal(s.calibration.device, "A100-SXM4-80GB");
    scenario_free(&s);
}

typedef struct {
    const char *set[6];
    const char *expect[2]; /* fragments the error must contain */
} reject_case;

static const reject_case REJECTS[] = {
    /* model */
    {{"model.num_layers=0"}, {"scenario.model.num_layers", "range"}},
    {{"model.untie_embeddings_and_output_weights=1"}, {"scenario.model.untie_embeddings_and_output_weights", NULL}},
    {{"model.cross_entropy_loss_fusion=1"}, {"scenario.model.cross_entropy_loss_fusion", NULL}},
    {{"model.cross_entropy_fusion_impl=\"te\""}, {"scenario.model.cross_entropy_fusion_impl", "needs cross_entropy_loss_fusion"}},
    {{"model.cross_entropy_loss_fusion=true", "model.cross_entropy_fusion_impl=\"triton\""},
     {"scenario.model.cross_entropy_fusion_impl", "is not one of native, te"}},
    /* parallel.nccl_algo */
    {{"parallel.nccl_algo=\"ring\""}, {"scenario.parallel.nccl_algo", "expected an object"}},
    {{"parallel.nccl_algo={\"allreduce\": \"ring\"}"}, {"scenario.parallel.nccl_algo.allreduce", "not a collective"}},
    {{"parallel.nccl_algo={\"all_reduce\": \"rings\"}"}, {"scenario.parallel.nccl_algo.all_reduce", "expected one of"}},
    {{"parallel.nccl_algo={\"all_gather\": \"tree\"}"}, {"scenario.parallel.nccl_algo.all_gather", "does not implement"}},
    {{"parallel.nccl_algo={\"all_reduce\": \"nvls\"}"}, {"scenario.parallel.nccl_algo.all_reduce", "platform.node.nvls"}},
    {{"parallel.nccl_algo={\"all_reduce\": \"nvlstree\"}"}, {"scenario.parallel.nccl_algo.all_reduce", "node.nvls is false"}},
    {{"parallel.nccl_algo={\"all_reduce\": \"collnet\"}"}, {"scenario.parallel.nccl_algo.all_reduce", "platform.network.sharp"}},
    {{"platform.network.sharp=true", "parallel.nccl_algo={\"all_gather\": \"collnetchain\"}"},
     {"scenario.parallel.nccl_algo.all_gather", "does not implement"}},
    {{"platform.node.nvls=1"}, {"scenario.platform.node.nvls", "expected true or false"}},
    {{"platform.network.sharp=\"yes\""}, {"scenario.platform.network.sharp", "expected true or false, got a string"}},
    {{"platform.collective_library=\"gloo\""}, {"scenario.platform.collective_library", "nccl"}},
    /* parallel.nccl_proto */
    {{"parallel.nccl_proto=\"simple\""}, {"scenario.parallel.nccl_proto", "expected an object"}},
    {{"parallel.nccl_proto={\"all_reduce\": \"LL64\"}"}, {"scenario.parallel.nccl_proto.all_reduce", "ll128"}},
    {{"parallel.nccl_proto={\"send_recv\": \"simple\"}"}, {"scenario.parallel.nccl_proto.send_recv", "point-to-point"}},
    {{"platform.collective_library=\"mpi\"", "parallel.nccl_proto={\"all_reduce\": \"simple\"}"},
     {"scenario.parallel.nccl_proto", "collective_library is mpi"}},
    {{"platform.node.cpu_vendor=\"arm\""}, {"scenario.platform.node.cpu_vendor", "amd"}},
    {{"model.hidden_size=1000"}, {"scenario.model.hidden_size", "num_attention_heads"}},
    {{"model.num_query_groups=3"}, {"scenario.model.num_query_groups", "does not divide"}},
    {{"model.num_experts=8", "model.moe_router_topk=9"}, {"scenario.model.moe_router_topk", "num_experts"}},
    {{"model.moe_router_topk=2"}, {"scenario.model.moe_router_topk", "without num_experts"}},
    {{"parallel.moe_token_dispatcher_type=\"flex\""}, {"scenario.parallel.moe_token_dispatcher_type", "needs model.num_experts"}},
    {{"model.num_experts=8", "model.moe_router_topk=2", "parallel.moe_token_dispatcher_type=\"allgather\""}, {"scenario.parallel.moe_token_dispatcher_type", "flex"}},
    {{"platform={\"from\": \"platforms/nope.json\"}"}, {"scenario.platform.from", "not found"}},
    {{"platform={\"from\": 7}"}, {"scenario.platform.from", "path of a platform file"}},
    {{"platform={\"from\": \"platforms/dgx-a100-superpod.json\", \"node\": {\"nvls\": 1}}"}, {"scenario.platform.node.nvls", "true or false"}},
    {{"model.num_experts=8", "model.moe_router_topk=2", "model.moe_router_num_groups=2"}, {"scenario.model", "go together"}},
    {{"model.num_experts=8", "model.moe_router_topk=2", "model.moe_router_num_groups=3", "model.moe_router_group_topk=1"}, {"scenario.model.moe_router_num_groups", "divide num_experts=8"}},
    {{"model.num_experts=8", "model.moe_router_topk=2", "model.moe_router_num_groups=4", "model.moe_router_group_topk=3"}, {"scenario.model.moe_router_group_topk", "moe_router_topk=2"}},
    {{"model.moe_router_num_groups=2", "model.moe_router_group_topk=1"}, {"scenario.model.moe_router_num_groups", "needs num_experts"}},
    {{"model.num_experts=8", "model.moe_router_topk=4", "model.moe_router_num_groups=4", "model.moe_router_group_topk=1"}, {"scenario.model.moe_router_topk", "groups of 2"}},
    {{"model.num_experts=8", "model.moe_router_topk=2", "parallel.tensor_model_parallel_size=2", "parallel.moe_token_dispatcher_type=\"flex\""}, {"scenario.parallel.moe_token_dispatcher_type", "expert_tensor_parallel_size 1"}},
    {{"model.attention=\"sparse\""}, {"scenario.model.attention", "not one of"}},
    {{"model.swiglu=1"}, {"scenario.model.swiglu", "true or false"}},
    {{"model.hidden_sise=1024"}, {"scenario.model.hidden_sise", "did you mean 'hidden_size'"}},
    {{"model.num_layers=200000"}, {"scenario.model.num_layers", "range"}},
    {{"model.hidden_size=2000000"}, {"scenario.model.hidden_size", "range"}}, /* resource limit */
    {{"model.seq_length=0"}, {"scenario.model.seq_length", "range"}},
    {{"model.vocab_size=-5"}, {"scenario.model.vocab_size", "range"}},
    {{"model.num_attention_heads=0"}, {"scenario.model.num_attention_heads", "range"}},
    {{"model.num_layers=8.5"}, {"scenario.model.num_layers", "expected an integer"}},
    /* past a double, or past what one holds exactly: out of range, with the key's range */
    {{"training.global_batch_size=1e400"}, {"scenario.training.global_batch_size", "outside the allowed range 1..100000000"}},
    {{"training.global_batch_size=1e16"}, {"scenario.training.global_batch_size", "1e+16 is outside the allowed range"}},
    {{"platform.price_per_gpu_hour=-1e400"}, {"scenario.platform.price_per_gpu_hour", "outside the allowed range"}},
    {{"training.train_iters=10", "training.tokens=1e9"}, {"scenario.training", "one of tokens, train_iters"}},
    {{"model.num_layers=\"8\""}, {"scenario.model.num_layers", "expected an integer, got a string"}},
    {{"model.num_experts=8", "model.moe_router_topk=0"}, {"scenario.model.moe_router_topk", "1..num_experts=8"}},
    /* training */
    {{"training.precision=\"fp8\""}, {"scenario.training.precision", "not supported"}},
    {{"training.precision=\"fp64\""}, {"scenario.training.precision", "not one of"}},
    {{"training.global_batch_size=60"}, {"scenario.training.global_batch_size", "multiple"}},
    {{"training.recompute_granularity=\"some\""}, {"scenario.training.recompute_granularity", "not one of"}},
    {{"training.recompute_method=\"uniform\""}, {"scenario.training.recompute_method", "full only"}},
    {{"training.recompute_granularity=\"selective\"", "training.recompute_num_layers=2"},
     {"scenario.training.recompute_method", "full only"}},
    {{"training.recompute_granularity=\"full\"", "training.recompute_method=\"blocks\""},
     {"scenario.training.recompute_method", "not one of"}},
    {{"training.recompute_granularity=\"full\"", "training.recompute_num_layers=0"},
     {"scenario.training.recompute_num_layers", "range"}},
    {{"training.distribute_saved_activations=true"}, {"scenario.training.distribute_saved_activations", "full only"}},
    {{"training.recompute_granularity=\"full\"", "training.distribute_saved_activations=true",
      "parallel.tensor_model_parallel_size=1"},
     {"scenario.training.distribute_saved_activations", "tensor_model_parallel_size > 1 (got 1)"}},
    {{"training.distribute_saved_activations=1"}, {"scenario.training.distribute_saved_activations", "true or false"}},
    {{"training.micro_batch_size=\"one\""}, {"scenario.training.micro_batch_size", "integer"}},
    {{"training.micro_batch_size=0"}, {"scenario.training.micro_batch_size", "range"}},
    {{"training.global_batch_size=200000000"}, {"scenario.training.global_batch_size", "range"}}, /* limit */
    {{"training.micro_batch_size=3"}, {"scenario.training.global_batch_size", "micro_batch_size x data_parallel_size = 3 x 16"}},
    {{"training.optimizer=\"lamb\""}, {"scenario.training.optimizer", "not one of"}},
    {{"training.fp8_recipe=\"tensorwise\""}, {"scenario.training.fp8_recipe", "applies to precision fp8 only"}},
    {{"training.fp8_recipe=\"nvfp4\""}, {"scenario.training.fp8_recipe", "not one of"}},
    {{"training.tokens=-1"}, {"scenario.training.tokens", "range"}},
    {{"training.activation_bytes=0"}, {"scenario.training.activation_bytes", "range"}},
    {{"training.activation_bytes=16"}, {"scenario.training.activation_bytes", "range"}},
    {{"training.global_batch_sise=64"}, {"scenario.training.global_batch_sise", "did you mean 'global_batch_size'"}},
    /* parallel */
    {{"parallel.tensor_model_parallel_size=3"}, {"scenario.parallel.tensor_model_parallel_size", "does not divide num_attention_heads=16"}},
    {{"model.num_query_groups=2", "parallel.tensor_model_parallel_size=4"}, {"tensor_model_parallel_size", "num_query_groups=2"}},
    {{"model.ffn_hidden_size=4097"}, {"tensor_model_parallel_size", "ffn_hidden_size=4097"}},
    {{"model.vocab_size=51201"}, {"tensor_model_parallel_size", "vocab_size=51201"}},
    {{"parallel.pipeline_model_parallel_size=3", "parallel.data_parallel_size=8"}, {"pipeline_model_parallel_size", "does not divide num_layers=8"}},
    {{"parallel.context_parallel_size=3"}, {"context_parallel_size", "seq_length"}},
    {{"parallel.data_parallel_size=100000"}, {"data_parallel_size", "platform"}},
    {{"parallel.schedule=\"interleaved\""}, {"scenario.parallel.schedule", "virtual_pipeline_model_parallel_size > 1"}},
    {{"parallel.schedule=\"interleaved\"", "parallel.virtual_pipeline_model_parallel_size=2", "training.global_batch_size=48"}, {"scenario.parallel.schedule", "multiple"}},
    {{"parallel.virtual_pipeline_model_parallel_size=2"}, {"virtual_pipeline_model_parallel_size", "interleaved"}},
    {{"parallel.zero_stage=4"}, {"scenario.parallel.zero_stage", "range"}},
    {{"parallel.pipeline_layers=[3,3]"}, {"scenario.parallel.pipeline_layers", "sum to 6"}},
    {{"parallel.pipeline_layers=[8]"}, {"scenario.parallel.pipeline_layers", "2 layer counts"}},
    {{"parallel.pipeline_layers=[0,8]"}, {"scenario.parallel.pipeline_layers[0]", ">="}},
    {{"parallel.expert_model_parallel_size=2"}, {"expert_model_parallel_size", "num_experts"}},
    {{"parallel.bucket_size_mb=0"}, {"scenario.parallel.bucket_size_mb", "greater than 0"}},
    {{"parallel.sequence_parallel=true", "model.seq_length=2047"}, {"scenario.parallel.sequence_parallel", "multiple of TP"}},
    {{"parallel.schedul=\"1f1b\""}, {"scenario.parallel.schedul", "did you mean 'schedule'"}},
    /* Megatron-LM sets overlap_p2p_comm false under the non-interleaved schedule (arguments.py) */
    {{"parallel.framework=\"megatron\"", "parallel.overlap_p2p_comm=true"},
     {"scenario.parallel.overlap_p2p_comm", "only under the interleaved schedule"}},
    {{"parallel.framework=\"megatron\"", "parallel.schedule=\"interleaved\"",
      "parallel.virtual_pipeline_model_parallel_size=2", "training.global_batch_size=128"},
     {"scenario.parallel.overlap_p2p_comm", "needs it at PP 2"}},
    {{"parallel.tensor_parallel_size=2"}, {"scenario.parallel.tensor_parallel_size", "did you mean 'tensor_model_parallel_size'"}},
    {{"parallel.tensor_model_parallel_size=0"}, {"scenario.parallel.tensor_model_parallel_size", "range"}},
    {{"parallel.data_parallel_size=0"}, {"scenario.parallel.data_parallel_size", "range"}},
    {{"parallel.schedule=\"interleaved\"", "parallel.virtual_pipeline_model_parallel_size=3"}, {"scenario.parallel.virtual_pipeline_model_parallel_size", "does not divide num_layers=8"}},
    {{"parallel.schedule=\"interleaved\"", "parallel.virtual_pipeline_model_parallel_size=2", "parallel.pipeline_layers=[1,7]"}, {"scenario.parallel.pipeline_layers[0]", ">= 2"}},
    {{"parallel.pipeline_layers={\"a\":1}"}, {"scenario.parallel.pipeline_layers", "list of 2"}},
    {{"model.num_experts=64", "model.moe_router_topk=2", "parallel.expert_model_parallel_size=32"}, {"scenario.parallel.expert_model_parallel_size", "data x context parallel = 16"}},
    {{"model.num_experts=6", "model.moe_router_topk=2", "parallel.expert_model_parallel_size=4"}, {"scenario.parallel.expert_model_parallel_size", "num_experts=6"}},
    /* the experts' own TP: TP (2 here) or 1, the latter with SP; EP then spans TP x CP x DP = 32 */
    {{"model.num_experts=64", "model.moe_router_topk=2", "parallel.expert_tensor_parallel_size=4"}, {"scenario.parallel.expert_tensor_parallel_size", "1 or tensor_model_parallel_size (2)"}},
    {{"parallel.expert_tensor_parallel_size=1"}, {"scenario.parallel.expert_tensor_parallel_size", "needs num_experts"}},
    {{"model.num_experts=64", "model.moe_router_topk=2", "parallel.expert_tensor_parallel_size=1"}, {"scenario.parallel.expert_tensor_parallel_size", "needs sequence_parallel"}},
    {{"model.num_experts=128", "model.moe_router_topk=2", "parallel.sequence_parallel=true", "parallel.expert_tensor_parallel_size=1", "parallel.expert_model_parallel_size=64"}, {"scenario.parallel.expert_model_parallel_size", "tensor x context x data parallel = 32"}},
    {{"parallel.context_parallel_size=4", "platform.network.nodes=1"}, {"scenario.parallel", "more than the platform's 8"}},
    {{"parallel.data_parallel_size=4000"}, {"scenario.parallel.data_parallel_size", "more than the platform's 12288"}},
    {{"parallel.zero_stage=-1"}, {"scenario.parallel.zero_stage", "range"}},
    {{"parallel.sequence_parallel=\"yes\""}, {"scenario.parallel.sequence_parallel", "true or false"}},
    {{"parallel.overlap_p2p_comm=1"}, {"scenario.parallel.overlap_p2p_comm", "true or false"}},
    {{"parallel.scatter_gather_p2p=\"no\""}, {"scenario.parallel.scatter_gather_p2p", "true or false"}},
    /* DeepSpeed's PipelineEngine runs TrainSchedule only, with blocking sends, the gradient
     * reduction after the last micro-batch and ZeRO below stage 2 */
    {{"parallel.pipeline_engine=\"pipedream\""}, {"scenario.parallel.pipeline_engine", "not one of"}},
    {{"parallel.pipeline_engine=\"deepspeed\"", "parallel.schedule=\"gpipe\""}, {"scenario.parallel.pipeline_engine", "schedule 1f1b"}},
    {{"parallel.pipeline_engine=\"deepspeed\"", "parallel.overlap_p2p_comm=true"}, {"scenario.parallel.pipeline_engine", "overlap_p2p_comm false"}},
    {{"parallel.pipeline_engine=\"deepspeed\"", "parallel.overlap_grad_reduce=true"}, {"scenario.parallel.pipeline_engine", "overlap_grad_reduce false"}},
    {{"parallel.pipeline_engine=\"deepspeed\"", "parallel.zero_stage=2"}, {"scenario.parallel.pipeline_engine", "zero_stage 0 or 1"}},
    /* parallel.framework: its values, and what each framework does not run (BASE: PP 2, ZeRO-1) */
    {{"parallel.framework=\"jax\""}, {"scenario.parallel.framework", "not one of"}},
    {{"parallel.framework=\"fsdp\"", "parallel.zero_stage=3"}, {"scenario.parallel.framework", "runs no pipeline"}},
    {{"parallel.framework=\"torchtitan\""}, {"scenario.parallel.framework", "zero_stage 0 (data_parallel_replicate_degree) or 3"}},
    {{"parallel.framework=\"fsdp\"", "parallel.pipeline_model_parallel_size=1", "parallel.data_parallel_size=32",
      "parallel.zero_stage=2"}, {"scenario.parallel.framework", "SHARD_GRAD_OP is 3 with fsdp_reshard_after_forward never"}},
    {{"parallel.framework=\"megatron\"", "parallel.fsdp_reshard_after_forward=\"never\""}, {"scenario.parallel.fsdp_reshard_after_forward", "not framework megatron's"}},
    {{"parallel.framework=\"deepspeed\"", "parallel.fsdp_reshard_after_forward=\"always\""}, {"scenario.parallel.fsdp_reshard_after_forward", "not framework deepspeed's"}},
    {{"parallel.framework=\"torchtitan\"", "parallel.pipeline_engine=\"deepspeed\""}, {"scenario.parallel.pipeline_engine", "not framework torchtitan's pipeline"}},
    {{"parallel.framework=\"deepspeed\"", "parallel.pipeline_engine=\"megatron\""}, {"scenario.parallel.pipeline_engine", "not framework deepspeed's pipeline"}},
    {{"parallel.framework=\"torchtitan\"", "parallel.zero_stage=3", "parallel.offload_optimizer=\"cpu\""}, {"scenario.parallel.offload_optimizer", "not framework torchtitan's"}},
    {{"parallel.framework=\"torchtitan\"", "parallel.zero_stage=0"}, {"scenario.parallel.framework", "DDP (zero_stage 0) only as the whole layout"}},
    {{"parallel.framework=\"fsdp\"", "parallel.pipeline_model_parallel_size=1", "parallel.data_parallel_size=32",
      "parallel.zero_stage=3", "parallel.stage3_max_live_parameters=1e9"}, {"scenario.parallel.stage3_max_live_parameters", "FSDP's rule (fsdp)"}},
    {{"parallel.fsdp_reshard_after_forward=\"always\"", "parallel.reduce_bucket_size=1e8"}, {"scenario.parallel.reduce_bucket_size", "FSDP's rule (fsdp_reshard_after_forward)"}},
    {{"parallel.framework=\"megatron\"", "parallel.stage3_prefetch_bucket_size=1e8"}, {"scenario.parallel.stage3_prefetch_bucket_size", "which Megatron-FSDP (framework megatron) does not have"}},
    {{"parallel.framework=\"megatron\"", "parallel.stage3_list_collectives=true"}, {"scenario.parallel.stage3_list_collectives", "which Megatron-FSDP (framework megatron) does not have"}},
    {{"parallel.fsdp_reshard_after_forward=\"always\"", "parallel.stage3_list_collectives=false"}, {"scenario.parallel.stage3_list_collectives", "FSDP's rule"}},
    {{"parallel.stage3_list_collectives=1"}, {"scenario.parallel.stage3_list_collectives", "expected true or false"}},
    {{"parallel.zero_stage=3", "parallel.stage3_list_collectives=true", "parallel.grad_reduce_dtype=\"int8\""}, {"scenario.parallel.grad_reduce_dtype", "not with stage3_list_collectives"}},
    {{"parallel.framework=\"megatron\"", "parallel.zero_stage=2"}, {"scenario.parallel.framework", "runs ZeRO-2 only as Megatron-FSDP's optim_grads"}},
    /* nanotron: ZeRO 0 and 1, its ZeRO-1 reduction after the backward, no virtual stages, no ZeRO-3 knobs */
    {{"parallel.framework=\"nanotron\"", "parallel.zero_stage=2"}, {"scenario.parallel.framework", "nanotron needs zero_stage 0 or 1"}},
    {{"parallel.framework=\"nanotron\"", "parallel.overlap_grad_reduce=true", "parallel.overlap_param_gather=true"}, {"scenario.parallel.framework", "overlap_param_gather false"}},
    {{"parallel.framework=\"nanotron\"", "parallel.schedule=\"interleaved\"", "parallel.virtual_pipeline_model_parallel_size=2"}, {"scenario.parallel.framework", "schedule 1f1b or gpipe"}},
    {{"parallel.framework=\"nanotron\"", "parallel.fsdp_reshard_after_forward=\"never\""}, {"scenario.parallel.fsdp_reshard_after_forward", "framework nanotron has no ZeRO-3"}},
    {{"parallel.framework=\"nanotron\"", "parallel.stage3_prefetch_bucket_size=1e8"}, {"scenario.parallel.stage3_prefetch_bucket_size", "which framework nanotron does not have"}},
    {{"parallel.framework=\"nanotron\"", "parallel.zero_stage=0", "parallel.sequence_parallel=true", "parallel.offload_optimizer=\"cpu\""}, {"scenario.parallel.offload_optimizer", "not framework nanotron's"}},
    {{"parallel.framework=\"nanotron\"", "parallel.grad_reduce_dtype=\"bf16\""}, {"scenario.parallel.framework", "grad_reduce_dtype auto or fp32"}},
    {{"parallel.framework=\"nanotron\"", "training.precision=\"fp32\""}, {"scenario.parallel.framework", "precision bf16 or fp16"}},
    {{"parallel.framework=\"nanotron\"", "training.recompute_granularity=\"selective\""}, {"scenario.parallel.framework", "recompute_granularity none or full"}},
    {{"parallel.framework=\"nanotron\"", "parallel.sequence_parallel=false"}, {"scenario.parallel.framework", "sequence_parallel true with TP"}},
    {{"parallel.framework=\"nanotron\"", "model.num_experts=8", "model.moe_router_topk=2"}, {"scenario.parallel.framework", "num_experts 0"}},
    {{"parallel.framework=\"nanotron\"", "parallel.zero_stage=0", "parallel.grad_compression.method=\"topk\""}, {"scenario.parallel.framework", "grad_compression none"}},
    {{"parallel.framework=\"megatron\"", "parallel.offload_optimizer=\"cpu\""}, {"scenario.parallel.offload_optimizer", "not framework megatron's CPU offload"}},
    /* faults */
    {{"faults.degraded_links=[{\"node\":1,\"nic\":0,\"bandwidth_factor\":1.5}]"}, {"scenario.faults.degraded_links[0].bandwidth_factor", "range"}},
    {{"faults.degraded_links=[{\"node\":99,\"nic\":0,\"bandwidth_factor\":0.5}]"}, {"scenario.faults.degraded_links[0].node", "range"}},
    {{"faults.degraded_links=[{\"node\":1,\"nic\":8,\"bandwidth_factor\":0.5}]"}, {"scenario.faults.degraded_links[0].nic", "range"}},
    {{"faults.stragglers=[{\"gpu\":64,\"slowdown\":1.3}]"}, {"scenario.faults.stragglers[0].gpu", "range"}},
    {{"faults.stragglers=[{\"gpu\":3,\"slowdown\":0.5}]"}, {"scenario.faults.stragglers[0].slowdown", "range"}},
    {{"faults.gpu_mtbf_hours=-1"}, {"scenario.faults.gpu_mtbf_hours", "range"}},
    {{"faults.checkpoint_interval_s=0"}, {"scenario.faults.checkpoint_interval_s", "greater than 0"}},
    {{"faults.checkpoint_write=\"lazy\""}, {"scenario.faults.checkpoint_write", "not one of"}},
    {{"faults.node_mtbf_hours=-0.5"}, {"scenario.faults.node_mtbf_hours", "range"}},
    {{"faults.horizon_days=0"}, {"scenario.faults.horizon_days", "greater than 0"}},
    {{"faults.degraded_links=[{\"node\":1,\"nic\":0,\"bandwidth_factor\":0}]"}, {"scenario.faults.degraded_links[0].bandwidth_factor", "greater than 0"}},
    {{"faults.degraded_links=[{\"node\":1,\"nic\":0}]"}, {"scenario.faults.degraded_links[0].bandwidth_factor", "required"}},
    {{"faults.degraded_links=[{\"node\":1,\"nic\":0,\"factor\":0.5}]"}, {"scenario.faults.degraded_links[0].factor", "unknown key"}},
    {{"faults.stragglers={\"gpu\":1}"}, {"scenario.faults.stragglers", "expected a list"}},
    {{"faults.stragglers=[5]"}, {"scenario.faults.stragglers[0]", "expected an object"}},
    {{"faults.spare_nodes=-1"}, {"scenario.faults.spare_nodes", "range"}},
    {{"faults.elastic=\"no\""}, {"scenario.faults.elastic", "true or false"}},
    {{"faults.mtbf_hours=5"}, {"scenario.faults.mtbf_hours", "unknown key"}},
    /* run */
    {{"run.fidelity=\"exact\""}, {"scenario.run.fidelity", "not one of"}},
    {{"run.steps=0"}, {"scenario.run.steps", "range"}},
    /* top level and --set syntax */
    {{"platfrom=\"x\""}, {"scenario.platfrom", "did you mean 'platform'"}},
    {{"modle.num_layers=8"}, {"scenario.modle", "did you mean 'model'"}}, /* objects along a --set path are created, then judged */
    {{"model=[1,2]"}, {"scenario.model", "expected an object, got a list"}},
    {{"platform=42"}, {"scenario.platform", "a file path or an object"}},
    {{"calibration=true"}, {"scenario.calibration", "a file path or an object"}},
    {{"name=12"}, {"scenario.name", "expected a string"}},
    {{"model..num_layers=8"}, {"--set", "empty path segment"}},
    {{"platform=\"platforms/none.json\""}, {"scenario.platform", "not found"}},
    {{"calibration=\"calibrate/data/none.json\""}, {"scenario.calibration", "not found"}},
    {{"model.num_layers.x=3"}, {"model.num_layers", "not an object"}},
    {{"noequals"}, {"--set", "PATH=VALUE"}},
    /* platform (through --set, which inlines the file first) */
    {{"platform.node.gpus=0"}, {"platform.node.gpus", "range"}},
    {{"platform.node.compute_devices=0"}, {"scenario.platform.node.compute_devices", "range"}},
    {{"platform.node.compute_devices=9"}, {"scenario.platform.node.compute_devices", "range"}}, /* > gpus (8) */
    {{"platform.node.compute_devices=1.5"}, {"scenario.platform.node.compute_devices", "integer"}},
    {{"platform.network.topology=\"torus\""}, {"platform.network.topology", "not one of"}},
    {{"platform.network.oversubscription=0.5"}, {"platform.network.oversubscription", "range"}},
    {{"platform.gpu.peak_tflops.fp64=10"}, {"platform.gpu.peak_tflops.fp64", "unknown key"}},
    {{"platform.gpu.memory_gib=0"}, {"platform.gpu.memory_gib", "greater than 0"}},
    {{"platform.node.nics=0"}, {"platform.node", "nics >= 1"}},
    {{"platform.network.nodes=2000000"}, {"platform.network.nodes", "range"}},
    {{"platform.network.nodes=200000"}, {"scenario.platform", "over the limit of 1,048,576 GPUs"}}, /* limit */
    {{"platform.node.nvlink_bandwidth_gbs=0"}, {"scenario.platform.node.nvlink_bandwidth_gbs", "greater than 0"}},
    {{"platform.node.nic_bandwidth_gbps=0"}, {"scenario.platform.node", "nic_bandwidth_gbps > 0"}},
    {{"platform.node.pcie_bandwidth_gbs=-1"}, {"scenario.platform.node.pcie_bandwidth_gbs", "range"}},
    {{"platform.hbm_bandwidth_gbs=1"}, {"scenario.platform.hbm_bandwidth_gbs", "unknown key"}},
    {{"platform.node.gpu=8"}, {"scenario.platform.node.gpu", "did you mean 'gpus'"}},
    {{"platform.gpu.peak_tflops={\"fp32\":0}"}, {"scenario.platform.gpu.peak_tflops", "at least one precision"}},
    {{"platform.network.topology=\"single_switch\"", "platform.network.tiers=2"}, {"scenario.platform.network.tiers", "single_switch"}},
    {{"platform.network.tiers=4"}, {"scenario.platform.network.tiers", "range"}},
    {{"platform.storage.checkpoint_write_gbs=0"}, {"scenario.platform.storage.checkpoint_write_gbs", "greater than 0"}},
    {{"platform.calibration=\"nowhere.json\""}, {"scenario.platform.calibration", "not found"}},
    /* calibration (inlined likewise) */
    {{"calibration.gemm.bf16=[{\"m\":1,\"n\":1,\"k\":1,\"tflops\":-5}]"}, {"calibration.gemm.bf16[0].tflops", "range"}},
    {{"calibration.gemm.int4=[{\"m\":1,\"n\":1,\"k\":1,\"tflops\":5}]"}, {"calibration.gemm.int4", "unknown precision"}},
    {{"calibration.ops.layernorm={\"gbs\":0}"}, {"calibration.ops.layernorm.gbs", "greater than 0"}},
    {{"calibration.ops.attention={\"efficiency\":1.5}"}, {"calibration.ops.attention.efficiency", "range"}},
    {{"calibration.collectives.infiniband={}"}, {"calibration.collectives.infiniband", "unknown key"}},
    {{"calibration.collectives.nvlink.all_reduce={\"alpha_us\":1}"}, {"busbw_gbs", "required"}},
    {{"calibration.source=\"guess\""}, {"calibration.source", "not one of"}},
    {{"calibration.gemm.bf16=[{\"m\":0,\"n\":1,\"k\":1,\"tflops\":5}]"}, {"scenario.calibration.gemm.bf16[0].m", "greater than 0"}},
    {{"calibration.gemm.bf16=[]"}, {"scenario.calibration.gemm.bf16", "non-empty list"}},
    {{"calibration.gemm.bf16=[{\"m\":1,\"n\":1,\"k\":1,\"tflop\":5}]"}, {"scenario.calibration.gemm.bf16[0].tflop", "did you mean 'tflops'"}},
    {{"calibration.ops.layer_norm={\"gbs\":1}"}, {"scenario.calibration.ops.layer_norm", "did you mean 'layernorm'"}},
    {{"calibration.ops.attention={\"efficiency\":0}"}, {"scenario.calibration.ops.attention.efficiency", "greater than 0"}},
    {{"calibration.collectives.nvlink.all_reduc={\"alpha_us\":1,\"busbw_gbs\":1}"}, {"scenario.calibration.collectives.nvlink.all_reduc", "did you mean 'all_reduce'"}},
    {{"calibration.collectives.network.send_recv={\"alpha_us\":-1,\"busbw_gbs\":1}"}, {"scenario.calibration.collectives.network.send_recv.alpha_us", "range"}},
    {{"calibration.collectives.nvls.all_to_all={\"alpha_us\":1,\"busbw_gbs\":1}"}, {"scenario.calibration.collectives.nvls.all_to_all", "NVLink SHARP runs all_reduce, all_gather and reduce_scatter only"}},
    {{"calibration.launch_overhead_us=-1"}, {"scenario.calibration.launch_overhead_us", "range"}},
    {{"calibration.device=7"}, {"scenario.calibration.device", "expected a string"}},
    {{"calibration.ops.gelu={\"gbs\":100,\"gbs_backward\":0}"}, {"scenario.calibration.ops.gelu.gbs_backward", "greater than 0"}},
    {{"calibration.ops.gelu={\"gbs\":100,\"gbs_backwards\":5}"}, {"scenario.calibration.ops.gelu.gbs_backwards", "did you mean 'gbs_backward'"}},
};

static void every_rule_rejects(void **state)
{
    for (size_t i = 0; i < sizeof REJECTS / sizeof REJECTS[0]; i++) {
        const reject_case *c = &REJECTS[i];
        int n = 0;
        while (n < (int)(sizeof c->set / sizeof c->set[0]) && c->set[n])
            n++;
        scenario_config s;
        config_error err;
        int rc = load_with(c->set, n, &s, &err);
        if (rc == 0) {
            scenario_free(&s);
            fail_msg("case %zu (%s) was accepted", i, c->set[0]);
        }
        for (int k = 0; k < 2; k++)
            if (c->expect[k] && !strstr(err.msg, c->expect[k]))
                fail_msg("case %zu (%s): error '%s' lacks '%s'", i, c->set[0], err.msg, c->expect[k]);
    }
}

static void nccl_algo_reaches_the_collective_model(void **state)
{
    (void)state;
    const char *sets[] = {"parallel.nccl_algo={\"all_reduce\": \"ring\", \"reduce_scatter\": \"pat\"}"};
    scenario_config s;
    config_error err;
    if (load_with(sets, 1, &s, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(s.platform.nccl_algo[COLL_ALL_REDUCE], ALGO_RING);
    assert_int_equal(s.platform.nccl_algo[COLL_REDUCE_SCATTER], ALGO_PAT);
    assert_int_equal(s.platform.nccl_algo[COLL_ALL_GATHER], ALGO_AUTO);
    scenario_free(&s);
}

/* NVLink SHARP and SHARP are off unless the platform says so; NCCL_ALGO's names force them
 * where it does (lower case, "collnet" as NCCL 2.13 named CollNetDirect). */
static void nvls_and_sharp_keys_reach_the_collective_model(void **state)
{
    (void)state;
    scenario_config s;
    config_error err;
    if (load_with(NULL, 0, &s, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(s.platform.node.nvls, 0);
    assert_int_equal(s.platform.network.sharp, 0);
    scenario_free(&s);
    const char *sets[] = {"platform.node.nvls=true", "platform.network.sharp=true",
                          "parallel.nccl_algo={\"all_reduce\": \"collnet\", \"all_gather\": \"nvls\"}"};
    if (load_with(sets, 3, &s, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(s.platform.node.nvls, 1);
    assert_int_equal(s.platform.network.sharp, 1);
    assert_int_equal(s.platform.nccl_algo[COLL_ALL_REDUCE], ALGO_COLLNET_DIRECT);
    assert_int_equal(s.platform.nccl_algo[COLL_ALL_GATHER], ALGO_NVLS);
    scenario_free(&s);
    const char *names[] = {"nvls", "nvlstree", "collnetdirect", "collnetchain"};
    const coll_algo algos[] = {ALGO_NVLS, ALGO_NVLS_TREE, ALGO_COLLNET_DIRECT, ALGO_COLLNET_CHAIN};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(coll_algo_from_name(names[i]), algos[i]);
        assert_string_equal(coll_algo_name(algos[i]), names[i]);
        assert_true(coll_algo_is_nccl(algos[i]));
    }
}

/* "platform": {"from": FILE, ...}: the file with the object's keys merged over it, objects key by
 * key: the H100 platform with NVLink SHARP off keeps every other figure of the file (its GPU, its
 * node's NICs, its calibration), and --set of the same key agrees with it. */
static void platform_from_a_file_with_changes(void **state)
{
    (void)state;
    scenario_config s, f;
    config_error err;
    const char *file[] = {"platform=\"platforms/dgx-h100-superpod.json\""};
    if (load_with(file, 1, &f, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(f.platform.node.nvls, 1); /* the file's */
    const char *from[] = {"platform={\"from\": \"platforms/dgx-h100-superpod.json\", \"node\": {\"nvls\": false},"
                          " \"network\": {\"nodes\": 16}}"};
    if (load_with(from, 1, &s, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(s.platform.node.nvls, 0);
    assert_int_equal(s.platform.network.nodes, 16);
    assert_int_equal(s.platform.node.nics, f.platform.node.nics); /* the rest of node: the file's */
    assert_true(s.platform.node.nic_bandwidth_gbps == f.platform.node.nic_bandwidth_gbps);
    assert_true(s.platform.gpu.peak_tflops[PREC_BF16] == f.platform.gpu.peak_tflops[PREC_BF16]);
    assert_true(s.calibration.gemm[PREC_BF16].count > 0 &&
                s.calibration.gemm[PREC_BF16].count == f.calibration.gemm[PREC_BF16].count);
    scenario_free(&s);
    const char *then_set[] = {from[0], "platform.node.nvls=true"}; /* a --set after it still applies */
    if (load_with(then_set, 2, &s, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(s.platform.node.nvls, 1);
    assert_int_equal(s.platform.network.nodes, 16);
    scenario_free(&s);
    scenario_free(&f);
}

static void overrides_apply_like_the_file(void **state)
{
    const char *sets[] = {"parallel.pipeline_model_parallel_size=4", "parallel.data_parallel_size=8",
                          "faults.degraded_links=[{\"node\":5,\"nic\":0,\"bandwidth_factor\":0.5}]",
                          "platform.node.nvlink_bandwidth_gbs=150", "name=renamed"};
    scenario_config s;
    config_error err;
    if (load_with(sets, 5, &s, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(s.parallel.pp, 4);
    assert_int_equal(s.faults.degraded_count, 1);
    assert_int_equal(s.faults.degraded[0].node, 5);
    assert_true(s.faults.degraded[0].bandwidth_factor == 0.5);
    assert_true(s.platform.node.nvlink_bandwidth_gbs == 150);
    assert_string_equal(s.name, "renamed"); /* not JSON: taken as a string */
    assert_string_equal(s.calibration.device, "A100-SXM4-80GB"); /* still found after inlining */
    scenario_free(&s);
}

/* Omitted keys take their documented defaults (docs/formats.md), here precision and
 * micro-batch, which BASE states. */
static void training_defaults(void **state)
{
    json_error_t je;
    json_t *root = json_loads(BASE, 0, &je);
    json_t *t = json_object_get(root, "training");
    json_object_del(t, "precision");
    json_object_del(t, "micro_batch_size");
    scenario_config s;
    config_error err;
    if (scenario_load_json(root, DTSIM_SOURCE_DIR, NULL, 0, &s, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(s.training.precision, PREC_BF16);
    assert_int_equal(s.training.micro_batch_size, 1);
    scenario_free(&s);
    json_decref(root);
}

static void more_overrides(void **state)
{
    /* A value that is not JSON is a string; an absent object along the path is created; an
     * object value replaces the object; a list replaces a list. */
    const char *sets[] = {"training.precision=fp16", "run.fidelity=flow", "faults.seed=9",
                          "faults.stragglers=[{\"gpu\":3,\"slowdown\":1.5},{\"gpu\":63,\"slowdown\":2}]",
                          "model={\"num_layers\":4,\"hidden_size\":512,\"num_attention_heads\":8,"
                          "\"seq_length\":1024,\"vocab_size\":1000,\"swiglu\":true}",
                          "parallel.pipeline_layers=[1,3]", "parallel.stage3_list_collectives=true"};
    scenario_config s;
    config_error err;
    if (load_with(sets, 7, &s, &err))
        fail_msg("%s", err.msg);
    assert_true(s.parallel.stage3_list_collectives);
    assert_int_equal(s.training.precision, PREC_FP16);
    assert_int_equal(s.run.fidelity_flow, 1);
    assert_int_equal(s.faults.seed, 9);
    assert_int_equal(s.faults.straggler_count, 2);
    assert_int_equal(s.faults.stragglers[1].gpu, 63);
    assert_true(s.faults.stragglers[1].slowdown == 2);
    assert_int_equal(s.model.num_layers, 4);
    assert_int_equal(s.model.ffn_hidden_size, 2048); /* the default follows the overridden hidden */
    assert_true(s.model.swiglu);
    assert_int_equal(s.parallel.pipeline_layers_count, 2);
    assert_int_equal(s.parallel.pipeline_layers[0], 1);
    assert_int_equal(s.parallel.pipeline_layers[1], 3);
    scenario_free(&s);

    /* Overrides apply in order: the last one wins. */
    const char *twice[] = {"run.steps=3", "run.steps=5"};
    if (load_with(twice, 2, &s, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(s.run.steps, 5);
    scenario_free(&s);

    /* The caller's JSON document is not changed by overrides. */
    json_error_t je;
    json_t *root = json_loads(BASE, 0, &je);
    const char *one[] = {"parallel.tensor_model_parallel_size=4"};
    if (scenario_load_json(root, DTSIM_SOURCE_DIR, one, 1, &s, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(s.parallel.tp, 4);
    scenario_free(&s);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(root, "parallel"),
                                                        "tensor_model_parallel_size")), 2);
    json_decref(root);
}

static void precision_names_round_trip(void **state)
{
    const char *names[] = {"fp32", "tf32", "fp16", "bf16", "fp8"};
    for (int p = 0; p < PREC_COUNT; p++) {
        assert_string_equal(precision_name((precision_kind)p), names[p]);
        assert_int_equal(precision_from_name(names[p]), p);
    }
    assert_int_equal(precision_from_name("fp64"), -1);
    assert_int_equal(precision_from_name(""), -1);
    assert_int_equal(precision_from_name("BF16"), -1); /* names are exact */
}

/* parallel.framework resolves the pipeline engine, the ZeRO-3 rule and grad_reduce_dtype's auto
 * as each framework's code does (config.h; the reduction dtypes: Megatron-LM's validate_args fp32
 * under bf16, DeepSpeed's communication_data_type and PyTorch FSDP1's MixedPrecision.reduce_dtype
 * the model's bf16, torchtitan's mixed_precision_reduce fp32), and a key the scenario sets wins;
 * the planner's candidates (other ZeRO stages, PP) obey the framework's rules. */
static void framework_decides_the_defaults(void **state)
{
    (void)state;
    static const struct {
        const char *set[4];
        pipeline_engine_kind engine;
        fsdp_reshard_kind reshard;
        double reduce_bytes;
    } cases[] = {
        {{"parallel.zero_stage=1"}, PIPELINE_ENGINE_MEGATRON, FSDP_RESHARD_UNSET, 4},
        {{"parallel.zero_stage=3"}, PIPELINE_ENGINE_MEGATRON, FSDP_RESHARD_UNSET, 2},
        {{"parallel.pipeline_engine=\"deepspeed\"", "parallel.zero_stage=1"}, PIPELINE_ENGINE_DEEPSPEED, FSDP_RESHARD_UNSET, 2},
        {{"parallel.framework=\"megatron\"", "parallel.zero_stage=3"}, PIPELINE_ENGINE_MEGATRON, FSDP_RESHARD_UNSET, 2},
        {{"parallel.framework=\"deepspeed\"", "parallel.zero_stage=1"}, PIPELINE_ENGINE_DEEPSPEED, FSDP_RESHARD_UNSET, 2},
        {{"parallel.framework=\"fsdp\"", "parallel.pipeline_model_parallel_size=1", "parallel.zero_stage=3"},
         PIPELINE_ENGINE_MEGATRON, FSDP_RESHARD_ALWAYS, 2},
        {{"parallel.framework=\"fsdp\"", "parallel.pipeline_model_parallel_size=1", "parallel.zero_stage=0"},
         PIPELINE_ENGINE_MEGATRON, FSDP_RESHARD_ALWAYS, 2},
        {{"parallel.framework=\"fsdp\"", "parallel.pipeline_model_parallel_size=1", "parallel.zero_stage=3",
          "parallel.fsdp_reshard_after_forward=\"never\""}, PIPELINE_ENGINE_MEGATRON, FSDP_RESHARD_NEVER, 2},
        {{"parallel.framework=\"torchtitan\"", "parallel.zero_stage=3"}, PIPELINE_ENGINE_MEGATRON, FSDP_RESHARD_DEFAULT, 4},
        {{"parallel.framework=\"torchtitan\"", "parallel.zero_stage=0", "parallel.pipeline_model_parallel_size=1",
          "parallel.tensor_model_parallel_size=1"}, PIPELINE_ENGINE_MEGATRON, FSDP_RESHARD_DEFAULT, 4},
        /* without DDP (DP 1), TP and PP are torchtitan's to run at ZeRO 0 */
        {{"parallel.framework=\"torchtitan\"", "parallel.zero_stage=0", "parallel.data_parallel_size=1"},
         PIPELINE_ENGINE_MEGATRON, FSDP_RESHARD_DEFAULT, 4},
        {{"parallel.framework=\"torchtitan\"", "parallel.zero_stage=3", "parallel.grad_reduce_dtype=\"bf16\""},
         PIPELINE_ENGINE_MEGATRON, FSDP_RESHARD_DEFAULT, 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int n = 0;
        while (n < 4 && cases[i].set[n])
            n++;
        scenario_config s;
        config_error err;
        if (load_with(cases[i].set, n, &s, &err))
            fail_msg("case %zu: %s", i, err.msg);
        assert_int_equal(s.parallel.pipeline_engine, cases[i].engine);
        assert_int_equal(s.parallel.fsdp_reshard_after_forward, cases[i].reshard);
        if (params_grad_reduce_bytes(&s) != cases[i].reduce_bytes)
            fail_msg("case %zu (%s): reduces in %g bytes, not %g", i, cases[i].set[0], params_grad_reduce_bytes(&s),
                     cases[i].reduce_bytes);
        scenario_free(&s);
    }
    /* the planner varies ZeRO and PP on the struct: torchtitan's candidates at ZeRO-2 and fsdp's
     * at PP 2 are refused there too */
    const char *tt[] = {"parallel.framework=\"torchtitan\"", "parallel.zero_stage=3"};
    scenario_config s;
    config_error err;
    if (load_with(tt, 2, &s, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(scenario_validate_layout(&s, &err), 0);
    s.parallel.zero_stage = 2;
    assert_int_equal(scenario_validate_layout(&s, &err), -1);
    assert_non_null(strstr(err.msg, "framework: torchtitan"));
    scenario_free(&s);
    const char *fs[] = {"parallel.framework=\"fsdp\"", "parallel.pipeline_model_parallel_size=1", "parallel.zero_stage=3"};
    if (load_with(fs, 3, &s, &err))
        fail_msg("%s", err.msg);
    s.parallel.pp = 2;
    s.parallel.dp = 16;
    assert_int_equal(scenario_validate_layout(&s, &err), -1);
    assert_non_null(strstr(err.msg, "runs no pipeline"));
    scenario_free(&s);
}

/* The planner checks candidate layouts on the struct: the same rules as the loader. */
static void layout_rules_on_the_struct(void **state)
{
    scenario_config s;
    config_error err;
    if (load_with(NULL, 0, &s, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(scenario_validate_layout(&s, &err), 0);
    scenario_config c = s;
    c.parallel.tp = 3;
    assert_int_equal(scenario_validate_layout(&c, &err), -1);
    assert_non_null(strstr(err.msg, "tensor_model_parallel_size: 3 does not divide num_attention_heads=16"));
    c = s;
    c.parallel.dp = 8; /* 64 % (1 x 8) == 0, but 8 GPUs fewer is fine: DP may use fewer GPUs */
    assert_int_equal(scenario_validate_layout(&c, &err), 0);
    c.parallel.vpp = 2; /* without interleaved */
    assert_int_equal(scenario_validate_layout(&c, &err), -1);
    assert_non_null(strstr(err.msg, "needs schedule \"interleaved\""));
    c = s;
    c.parallel.zero_stage = 5;
    assert_int_equal(scenario_validate_layout(&c, &err), -1);
    assert_non_null(strstr(err.msg, "zero_stage"));
    c = s;
    c.parallel.pp = 4; /* 8 layers over 4 stages fine; 8 x 2 x 4 = 64 GPUs */
    c.parallel.dp = 8;
    assert_int_equal(scenario_validate_layout(&c, &err), 0);
    c.parallel.dp = 2000; /* 2 x 4 x 2000 = 16,000 > 12,288 */
    assert_int_equal(scenario_validate_layout(&c, &err), -1);
    assert_non_null(strstr(err.msg, "more than the platform's 12288"));
    scenario_free(&s);
}

static void data_parallel_size_is_derived(void **state)
{
    json_error_t je;
    json_t *root = json_loads(BASE, 0, &je);
    json_object_del(json_object_get(root, "parallel"), "data_parallel_size");
    const char *sets[] = {"training.global_batch_size=6144"};
    scenario_config s;
    config_error err;
    if (scenario_load_json(root, DTSIM_SOURCE_DIR, sets, 1, &s, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(s.parallel.dp, 12288 / 4); /* all the platform's GPUs */
    scenario_free(&s);
    json_decref(root);
}

static void files_load_from_disk_and_bad_json_is_located(void **state)
{
    char path[] = "/tmp/dtsim_cfg_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs("{\"name\": \"x\",\n \"model\": {,}}\n", f);
    fclose(f);
    scenario_config s;
    config_error err;
    assert_int_not_equal(scenario_load(path, NULL, 0, &s, &err), 0);
    assert_non_null(strstr(err.msg, path));
    assert_non_null(strstr(err.msg, ":2:")); /* line number of the syntax error */
    remove(path);
    assert_int_not_equal(scenario_load("/nonexistent/s.json", NULL, 0, &s, &err), 0);
    assert_non_null(strstr(err.msg, "cannot read"));
}

static void load_dir(const char *sub, int kind)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/%s", DTSIM_SOURCE_DIR, sub);
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".json"))
            continue;
        char path[8400];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        config_error err;
        int rc;
        if (kind == 0) {
            platform_config p;
            rc = platform_load(path, &p, &err);
        } else if (kind == 1) {
            calibration_config c;
            rc = calibration_load(path, &c, &err);
            if (rc == 0)
                calibration_free(&c);
        } else {
            scenario_config s;
            rc = scenario_load(path, NULL, 0, &s, &err);
            if (rc == 0)
                scenario_free(&s);
        }
        if (rc)
            fail_msg("%s: %s", path, err.msg);
        n++;
    }
    closedir(d);
    assert_true(n > 0);
}

/* No message is cut silently: one past its room (a --set echoing a huge value) ends saying so,
 * and a calibration whose name leaves no room for its points' paths is refused, not read with
 * them cut. */
static void too_long_is_said_not_cut(void **state)
{
    (void)state;
    static char set[8000];
    snprintf(set, sizeof set, "training..micro_batch_size=%*s", 7000, "x");
    const char *sets[] = {set};
    scenario_config s;
    config_error err;
    assert_int_not_equal(load_with(sets, 1, &s, &err), 0);
    assert_memory_equal(err.msg, "--set 'training..", 17); /* the reason comes after the value: cut */
    size_t n = strlen(err.msg);
    assert_int_equal(n, sizeof err.msg - 1);
    assert_string_equal(err.msg + n - strlen(CONFIG_CUT), CONFIG_CUT);

    json_error_t je;
    json_t *root = json_loads("{\"device\": \"d\", \"source\": \"datasheet\", \"gemm\": {\"bf16\": "
                              "[{\"m\": 1, \"n\": 1, \"k\": 1, \"tflops\": 100}]}}", 0, &je);
    assert_non_null(root);
    static char label[2 * CFG_PATH_MAX - 8]; /* "LABEL.gemm.bf16[0]" passes 2 * CFG_PATH_MAX */
    memset(label, 'c', sizeof label - 1);
    calibration_config c;
    assert_int_equal(calibration_parse(root, "short", &c, &err), 0); /* the same file, named briefly */
    calibration_free(&c);
    assert_int_not_equal(calibration_parse(root, label, &c, &err), 0);
    assert_non_null(strstr(err.msg, "...: path too long"));
    calibration_free(&c);
    json_decref(root);
}

static void shipped_files_load(void **state)
{
    load_dir("platforms", 0);
    load_dir("calibrate/data", 1);
    load_dir("scenarios", 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(base_is_valid_and_defaults_apply),
        cmocka_unit_test(platform_from_a_file_with_changes),
        cmocka_unit_test(every_rule_rejects),
        cmocka_unit_test(overrides_apply_like_the_file),
        cmocka_unit_test(nccl_algo_reaches_the_collective_model),
        cmocka_unit_test(nvls_and_sharp_keys_reach_the_collective_model),
        cmocka_unit_test(training_defaults),
        cmocka_unit_test(more_overrides),
        cmocka_unit_test(precision_names_round_trip),
        cmocka_unit_test(framework_decides_the_defaults),
        cmocka_unit_test(layout_rules_on_the_struct),
        cmocka_unit_test(data_parallel_size_is_derived),
        cmocka_unit_test(files_load_from_disk_and_bad_json_is_located),
        cmocka_unit_test(shipped_files_load),
        cmocka_unit_test(too_long_is_said_not_cut),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
