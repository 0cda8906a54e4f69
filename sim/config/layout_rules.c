/* The parallel layout's rules (Megatron-LM's) on a filled scenario: the scenario reader applies
 * them after parsing (config_scenario.c), and the planner to every candidate layout, so both
 * enforce exactly the same rules (config.h: scenario_validate_layout and its two parts). */
#include <stdio.h>
#include "config_internal.h"

#define S "scenario"

/* The rules are checked in three parts, in this order: those before the global batch's, the
 * global batch's (scenario_validate_batch) and those after; a layout that breaks several is
 * refused for the first. */
static const char *const schedule_names[] = {"gpipe", "1f1b", "interleaved"};

int scenario_fits_tp_comm_overlap(const scenario_config *s)
{
    return s->parallel.tp <= 1 || s->parallel.sequence_parallel;
}

int scenario_fits_param_gather_overlap(const scenario_config *s)
{
    return (s->parallel.zero_stage == 1 || s->parallel.zero_stage == 2) && s->parallel.overlap_grad_reduce;
}

int scenario_fits_p2p_overlap(const scenario_config *s)
{
    /* framework megatron only: a scenario that names no framework may run another engine's
     * pipeline (dtrain's posts its sends beside compute under 1F1B: engine_scenario.c) */
    int megatron_lm = s->parallel.pipeline_engine == PIPELINE_ENGINE_MEGATRON &&
                      s->parallel.framework == FRAMEWORK_MEGATRON;
    return !megatron_lm || s->parallel.pp <= 1 || s->parallel.schedule == PIPELINE_INTERLEAVED;
}

int scenario_fits_moe_a2a_overlap(const scenario_config *s)
{
    return s->parallel.ep > 1 && (s->parallel.pp <= 1 || s->parallel.vpp > 1) &&
           s->parallel.schedule != PIPELINE_GPIPE;
}

static int rules_before_batch(const scenario_config *s, config_error *err)
{
    const char *p = S ".parallel";
    long long tp = s->parallel.tp, pp = s->parallel.pp, dp = s->parallel.dp, cp = s->parallel.cp;
    long long ep = s->parallel.ep, vpp = s->parallel.vpp;
    long long platform_gpus = (long long)s->platform.network.nodes * s->platform.node.gpus;
    if (tp < 1 || pp < 1 || dp < 1 || cp < 1 || ep < 1 || vpp < 1)
        return config_fail(err, "%s: parallel sizes must be >= 1", p);
    if (tp * pp * cp * dp > platform_gpus)
        return config_fail(err, "%s: TP x PP x CP x DP = %lld GPUs, more than the platform's %lld", p,
                           tp * pp * cp * dp, platform_gpus);
    if (s->model.num_attention_heads % tp)
        return config_fail(err, "%s.tensor_model_parallel_size: %lld does not divide num_attention_heads=%lld", p, tp,
                           s->model.num_attention_heads);
    if (s->model.num_query_groups % tp)
        return config_fail(err, "%s.tensor_model_parallel_size: %lld does not divide num_query_groups=%lld", p, tp,
                           s->model.num_query_groups);
    if (s->model.ffn_hidden_size % tp)
        return config_fail(err, "%s.tensor_model_parallel_size: %lld does not divide ffn_hidden_size=%lld", p, tp,
                           s->model.ffn_hidden_size);
    if (s->model.vocab_size % tp)
        return config_fail(err, "%s.tensor_model_parallel_size: %lld does not divide vocab_size=%lld (the vocabulary "
                                "is split over TP; pad it)", p, tp, s->model.vocab_size);
    if (s->model.seq_length % cp)
        return config_fail(err, "%s.context_parallel_size: %lld does not divide seq_length=%lld", p, cp,
                           s->model.seq_length);
    if (s->parallel.tp_comm_overlap && !scenario_fits_tp_comm_overlap(s))
        return config_fail(err, "%s.tp_comm_overlap: needs sequence_parallel (as in Megatron-LM: it overlaps the "
                                "all-gathers and reduce-scatters of sequence parallelism)", p);
    if (s->parallel.overlap_param_gather && !scenario_fits_param_gather_overlap(s))
        return config_fail(err, "%s.overlap_param_gather: needs zero_stage 1 or 2 (the distributed optimizer) and "
                                "overlap_grad_reduce, as in Megatron-LM", p);
    if (s->parallel.overlap_p2p_comm && !scenario_fits_p2p_overlap(s))
        return config_fail(err, "%s.overlap_p2p_comm: Megatron-LM overlaps pipeline transfers only under the "
                                "interleaved schedule (megatron/training/arguments.py sets it false otherwise, since "
                                "October 2023): set it false, or the schedule interleaved", p);
    if (s->parallel.framework == FRAMEWORK_MEGATRON && s->parallel.schedule == PIPELINE_INTERLEAVED && pp == 2 &&
        !s->parallel.overlap_p2p_comm)
        return config_fail(err, "%s.overlap_p2p_comm: Megatron-LM's interleaved schedule needs it at PP 2 (arguments.py "
                                "asserts PP > 2 without it: two exchanges between the same two ranks in one batch)",
                           p);
    if (cp > 1 && s->parallel.cp_comm == CP_COMM_A2A && s->model.num_query_groups % (tp * cp))
        return config_fail(err, "%s.cp_comm_type: a2a (Ulysses) splits the heads over TP x CP = %lld, which does "
                                "not divide num_query_groups=%lld; use p2p or all_gather", p, tp * cp,
                           s->model.num_query_groups);
    if (s->parallel.sequence_parallel && s->model.seq_length / cp % tp)
        return config_fail(err, "%s.sequence_parallel: seq_length/CP = %lld is not a multiple of TP=%lld", p,
                           s->model.seq_length / cp, tp);
    if (ep > 1 && (s->model.num_experts == 0 || s->model.num_experts % ep))
        return config_fail(err, "%s.expert_model_parallel_size: %lld does not divide num_experts=%lld", p, ep,
                           s->model.num_experts);
    /* Megatron-Core's MoE parallel folding: the experts' grid (ETP innermost, then EP, then
     * expert DP) re-cuts a stage's TP x CP x DP ranks. dtsim models the experts' TP as TP itself
     * or 1 (each GPU runs whole experts on its own sequence shard); with TP > 1 that needs
     * sequence parallelism, as Megatron-Core requires for MoE. */
    long long etp = s->parallel.etp > 0 ? s->parallel.etp : tp;
    if (etp != tp && etp != 1)
        return config_fail(err, "%s.expert_tensor_parallel_size: %lld; dtsim models 1 or tensor_model_parallel_size "
                                "(%lld)", p, etp, tp);
    if (etp != tp && s->model.num_experts == 0)
        return config_fail(err, "%s.expert_tensor_parallel_size: needs num_experts", p);
    if (etp != tp && !s->parallel.sequence_parallel)
        return config_fail(err, "%s.expert_tensor_parallel_size: 1 with TP %lld needs sequence_parallel (Megatron-Core "
                                "requires it for MoE with tensor parallelism)", p, tp);
    if (ep > 1 && etp == tp && (dp * cp) % ep)
        return config_fail(err, "%s.expert_model_parallel_size: %lld does not divide data x context parallel = %lld", p,
                           ep, dp * cp);
    if (ep > 1 && etp != tp && (tp * cp * dp) % ep)
        return config_fail(err, "%s.expert_model_parallel_size: %lld does not divide tensor x context x data parallel "
                                "= %lld (expert_tensor_parallel_size 1)", p, ep, tp * cp * dp);
    /* Megatron-Core's combined 1F1B (docs: moe_a2a_overlap): its hard requirements, each named,
     * and two combinations dtsim does not model */
    if (s->parallel.overlap_moe_a2a && !scenario_fits_moe_a2a_overlap(s)) {
        if (ep <= 1)
            return config_fail(err, "%s.overlap_moe_expert_parallel_comm: needs expert_model_parallel_size > 1 (with "
                                    "EP 1 there is no all-to-all to overlap)", p);
        if (pp > 1 && vpp <= 1)
            return config_fail(err, "%s.overlap_moe_expert_parallel_comm: with pipeline parallelism needs "
                                    "virtual_pipeline_model_parallel_size > 1, as Megatron-Core requires", p);
        return config_fail(err, "%s.overlap_moe_expert_parallel_comm: needs the 1f1b or interleaved schedule (it "
                                "pairs each backward with the next forward)", p);
    }
    if (s->parallel.overlap_moe_a2a && (s->training.recompute == RECOMPUTE_FULL || s->parallel.zero_stage == 3))
        return config_fail(err, "%s.overlap_moe_expert_parallel_comm: not modelled with %s", p,
                           s->parallel.zero_stage == 3 ? "zero_stage 3" : "full recomputation");
    /* Megatron-LM's arguments.py: "can distribute recomputed activations only across tensor
     * model parallel groups" */
    if (s->training.distribute_saved_activations && s->parallel.tp < 2)
        return config_fail(err, S ".training.distribute_saved_activations: splits the kept inputs over the TP ranks: "
                                "needs tensor_model_parallel_size > 1 (got %d)", s->parallel.tp);
    return 0;
}

int scenario_validate_batch(const scenario_config *s, config_error *err)
{
    const char *p = S ".parallel";
    long long pp = s->parallel.pp, dp = s->parallel.dp, vpp = s->parallel.vpp;
    int sched = s->parallel.schedule;
    long long per_replica = s->training.micro_batch_size * dp;
    if (per_replica < 1)
        return config_fail(err, "%s: micro_batch_size x data_parallel_size must be >= 1", p);
    if (s->training.global_batch_size % per_replica)
        return config_fail(err, S ".training.global_batch_size: %lld is not a multiple of micro_batch_size x "
                                "data_parallel_size = %lld x %lld", s->training.global_batch_size,
                           s->training.micro_batch_size, dp);
    long long m = s->training.global_batch_size / per_replica;
    if (sched == PIPELINE_INTERLEAVED) {
        if (vpp < 2)
            return config_fail(err, "%s.schedule: interleaved needs virtual_pipeline_model_parallel_size > 1, got %lld",
                               p, vpp);
        if (m % pp)
            return config_fail(err, "%s.schedule: interleaved needs the micro-batches per pipeline (%lld) to be a "
                                    "multiple of pipeline_model_parallel_size=%lld", p, m, pp);
    } else if (vpp > 1) {
        return config_fail(err, "%s.virtual_pipeline_model_parallel_size: %lld needs schedule \"interleaved\", got "
                                "\"%s\"", p, vpp, schedule_names[sched]);
    }
    return 0;
}

static int rules_after_batch(const scenario_config *s, config_error *err)
{
    const char *p = S ".parallel";
    long long pp = s->parallel.pp, vpp = s->parallel.vpp;
    if (!s->parallel.pipeline_layers) {
        if (s->model.num_layers % pp)
            return config_fail(err, "%s.pipeline_model_parallel_size: %lld does not divide num_layers=%lld (give "
                                    "pipeline_layers for an uneven split)", p, pp, s->model.num_layers);
        /* Megatron-LM's rule for an equal split: every model chunk holds the same number of
         * layers. An uneven split is what pipeline_layers is for (each stage >= vpp). */
        if (s->model.num_layers % (pp * vpp))
            return config_fail(err, "%s.virtual_pipeline_model_parallel_size: PP x VPP = %lld x %lld = %lld does "
                                    "not divide num_layers=%lld (give pipeline_layers for an uneven split)", p, pp, vpp,
                               pp * vpp, s->model.num_layers);
    }
    if (s->parallel.zero_stage < 0 || s->parallel.zero_stage > 3)
        return config_fail(err, "%s.zero_stage: %d is outside the allowed range 0..3", p, s->parallel.zero_stage);
    return config_validate_playbook(s, err);
}

int scenario_validate_layout(const scenario_config *s, config_error *err)
{
    if (rules_before_batch(s, err) != 0 || scenario_validate_batch(s, err) != 0)
        return -1;
    return rules_after_batch(s, err);
}

int scenario_validate_layout_batchless(const scenario_config *s, config_error *err)
{
    if (rules_before_batch(s, err) != 0)
        return -1;
    return rules_after_batch(s, err);
}
