/* The CPU backend's table. */
#include "cpu_internal.h"

static const kernels_backend cpu_backend = {
    .name = "cpu",
    .describe = cpu_describe,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .memset_zero = cpu_memset_zero,
    .copy_to_device = cpu_copy,
    .copy_to_host = cpu_copy,
    .copy = cpu_copy,
    .synchronize = cpu_synchronize,
    .event_create = cpu_event_create,
    .event_destroy = cpu_event_destroy,
    .event_record = cpu_event_record,
    .event_elapsed_s = cpu_event_elapsed_s,
    .encoder_forward = cpu_encoder_forward,
    .encoder_backward = cpu_encoder_backward,
    .layernorm_forward = cpu_layernorm_forward,
    .layernorm_backward = cpu_layernorm_backward,
    .rmsnorm_forward = cpu_rmsnorm_forward,
    .rmsnorm_backward = cpu_rmsnorm_backward,
    .matmul_forward = cpu_matmul_forward,
    .matmul_backward = cpu_matmul_backward,
    .attention_forward = cpu_attention_forward,
    .attention_backward = cpu_attention_backward,
    .attention_forward_at = cpu_attention_forward_at,
    .attention_backward_at = cpu_attention_backward_at,
    .rope_forward = cpu_rope_forward,
    .rope_backward = cpu_rope_backward,
    .kv_repeat_forward = cpu_kv_repeat_forward,
    .kv_repeat_backward = cpu_kv_repeat_backward,
    .swiglu_forward = cpu_swiglu_forward,
    .swiglu_backward = cpu_swiglu_backward,
    .gelu_forward = cpu_gelu_forward,
    .gelu_backward = cpu_gelu_backward,
    .residual_forward = cpu_residual_forward,
    .softmax_forward = cpu_softmax_forward,
    .cross_entropy_forward = cpu_cross_entropy_forward,
    .cross_entropy_backward = cpu_cross_entropy_backward,
    .adamw_update = cpu_adamw_update,
    .round_to_precision = cpu_round_to_precision,
    .cast_to_half = cpu_cast_to_half,
    .cast_from_half = cpu_cast_from_half,
    .sum_squares = cpu_sum_squares,
    .has_inf_or_nan = cpu_has_inf_or_nan,
};

const kernels_backend *kernels_cpu(void)
{
    return &cpu_backend;
}
