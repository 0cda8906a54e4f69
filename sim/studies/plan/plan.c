/* The layout planner; see plan.h. */
#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "collective.h"
#include "params.h"
#include "plan.h"

const char *recompute_name(recompute_kind r)
{
    static const char *names[] = {"none", "selective", "full"};
    return r <= RECOMPUTE_FULL ? names[r] : "?";
}

void plan_apply(const scenario_config *base, const plan_layout *l, scenario_config *out)
{
    *out = *base;
    plan_reapply(base, l, out);
}

void plan_reapply(const scenario_config *base, const plan_layout *l, scenario_config *out)
{
    out->parallel.tp = l->tp;
    out->parallel.pp = l->pp;
    out->parallel.dp = l->dp;
    out->parallel.cp = l->cp;
    out->parallel.ep = l->ep;
    out->parallel.vpp = l->vpp;
    out->parallel.sequence_parallel = l->sp;
    out->parallel.zero_stage = l->zero;
    out->parallel.schedule = l->schedule;
    out->training.micro_batch_size = l->micro_batch;
    out->training.global_batch_size = l->global_batch > 0 ? l->global_batch : base->training.global_batch_size;
    out->training.recompute = l->recompute;
    /* The scenario's overlaps where the layout has what they overlap, off where it has not, as a
     * user would pass Megatron-LM's flags for that layout (config.h, scenario_fits_*: the rules'
     * own test). Carried unconditionally, they had made every layout without them invalid: a
     * recipe's scenario never saw its ZeRO-0 and ZeRO-3 layouts. Where dtsim does not model the
     * MoE overlap (full recomputation, ZeRO-3) the layout stays refused, not quietly run without. */
    out->parallel.tp_comm_overlap = base->parallel.tp_comm_overlap && scenario_fits_tp_comm_overlap(out);
    out->parallel.overlap_param_gather = base->parallel.overlap_param_gather && scenario_fits_param_gather_overlap(out);
    out->parallel.overlap_moe_a2a = base->parallel.overlap_moe_a2a && scenario_fits_moe_a2a_overlap(out);
    out->parallel.overlap_p2p_comm = base->parallel.overlap_p2p_comm && scenario_fits_p2p_overlap(out);
    /* The experts' own TP as the scenario meant it: TP itself (given as TP's number, or not at
     * all) follows the layout's TP; 1 (MoE parallel folding) stays 1 where TP > 1 has the
     * sequence parallelism it needs, and is TP's own 1 elsewhere. */
    if (base->parallel.etp > 0 && base->parallel.etp == base->parallel.tp)
        out->parallel.etp = 0;
    else if (base->parallel.etp == 1 && (l->tp <= 1 || !l->sp))
        out->parallel.etp = 0;
    /* A hand-made uneven split belongs to the scenario's own pipeline depth only. */
    int own_depth = l->pp == base->parallel.pp && l->vpp == base->parallel.vpp;
    out->parallel.pipeline_layers = own_depth ? base->parallel.pipeline_layers : NULL;
    out->parallel.pipeline_layers_count = own_depth ? base->parallel.pipeline_layers_count : 0;
    out->run.fidelity_flow = 0;
}

void plan_tally_add(plan_tally *t, const char *msg)
{
    /* Fold every number into N: the rule stays, the instance goes. */
    char rule[sizeof t->reason[0].rule];
    size_t n = 0;
    for (const char *m = msg; *m && n + 2 < sizeof rule;) {
        if (isdigit((unsigned char)*m)) {
            rule[n++] = 'N';
            while (isdigit((unsigned char)*m) || (*m == '.' && isdigit((unsigned char)m[1])))
                m++;
        } else {
            rule[n++] = *m++;
        }
    }
    while (n > 0 && rule[n - 1] == ' ')
        n--;
    rule[n] = 0;
    plan_tally_count(t, rule, 1);
}

void plan_tally_count(plan_tally *t, const char *rule, long count)
{
    for (int i = 0; i < t->count; i++)
        if (!strcmp(t->reason[i].rule, rule)) {
            t->reason[i].count += count;
            return;
        }
    if (t->count == PLAN_MAX_REASONS - 1) { /* full: the last slot counts the rest, by name */
        t->count = PLAN_MAX_REASONS;
        snprintf(t->reason[PLAN_MAX_REASONS - 1].rule, sizeof t->reason[0].rule, "other rules");
    }
    if (t->count == PLAN_MAX_REASONS) {
        t->reason[PLAN_MAX_REASONS - 1].count += count;
        return;
    }
    snprintf(t->reason[t->count].rule, sizeof t->reason[0].rule, "%s", rule);
    t->reason[t->count++].count = count;
}

static int reason_cmp(const void *a, const void *b)
{
    const plan_reason *p = a, *q = b;
    if (p->count != q->count)
        return (q->count > p->count) - (q->count < p->count);
    return strcmp(p->rule, q->rule); /* equal counts: by name, the same order every run */
}

void plan_tally_sort(plan_tally *t)
{
    if (t->count > 1)
        qsort(t->reason, (size_t)t->count, sizeof t->reason[0], reason_cmp);
}

void *plan_tally_to_json(const plan_tally *t)
{
    json_t *o = json_object();
    for (int i = 0; i < t->count; i++)
        json_object_set_new(o, t->reason[i].rule, json_integer(t->reason[i].count));
    return o;
}

/* Why a layout does not fit: its largest state names the lever (recompute or smaller
 * micro-batches for activations, a higher ZeRO stage for optimizer states and gradients,
 * more TP x PP for weights). */
void plan_oom_reason(const run_memory *m, plan_tally *t)
{
    const char *names[] = {"weights", "gradients", "optimizer states", "activations", "buffers"};
    double parts[] = {m->weights, m->gradients, m->optimizer, m->activations, m->buffers};
    int big = 0;
    for (int i = 1; i < 5; i++)
        if (parts[i] > parts[big])
            big = i;
    char msg[160];
    snprintf(msg, sizeof msg, "over the GPU's memory, the largest part being %s", names[big]);
    plan_tally_add(t, msg);
}

double plan_exposed_comm_s(const plan_layout *l)
{
    double exposed = 0;
    for (int c = 0; c < COMM_CLASS_COUNT; c++)
        exposed += l->result.comm_exposed_s[c];
    return exposed;
}

void plan_layout_label(const plan_layout *l, char *buf, size_t n)
{
    static const char *rec[] = {"none", "sel", "full"};
    char cp[32] = "", vpp[16] = "";
    if (l->cp > 1)
        snprintf(cp, sizeof cp, " CP%d", l->cp);
    if (l->ep > 1)
        snprintf(cp + strlen(cp), sizeof cp - strlen(cp), " EP%d", l->ep);
    if (l->vpp > 1)
        snprintf(vpp, sizeof vpp, " V%d", l->vpp);
    snprintf(buf, n, "TP%d PP%d DP%d%s%s%s Z%d mb%lld %s", l->tp, l->pp, l->dp, cp, vpp, l->sp ? " SP" : "", l->zero,
             l->micro_batch, l->recompute <= RECOMPUTE_FULL ? rec[l->recompute] : "?");
}

/* The layout's other parallel keys, as the scenario has them, so that the "parallel" object can
 * be pasted back into a scenario and run the same. */
static void plan_parallel_extras_to_json(const scenario_config *s, json_t *par)
{
    static const char *const cp_comms[] = {"p2p", "all_gather", "a2a"};
    json_object_set_new(par, "cp_comm_type", json_string(cp_comms[s->parallel.cp_comm]));
    if (s->model.num_experts > 0)
        json_object_set_new(par, "moe_token_dispatcher_type",
                            json_string(moe_token_dispatcher_name(s->parallel.moe_flex_dispatcher)));
    if (s->parallel.etp > 0) /* the experts' own TP, where the scenario gave one */
        json_object_set_new(par, "expert_tensor_parallel_size", json_integer(s->parallel.etp));
    json_object_set_new(par, "tp_comm_overlap", json_boolean(s->parallel.tp_comm_overlap));
    json_object_set_new(par, "tp_comm_overlap_chunks", json_integer(s->parallel.tp_comm_overlap_chunks));
    json_object_set_new(par, "overlap_param_gather", json_boolean(s->parallel.overlap_param_gather));
    json_object_set_new(par, "pipeline_engine", json_string(pipeline_engine_name(s->parallel.pipeline_engine)));
    if (s->parallel.framework != FRAMEWORK_UNSET) /* it decides grad_reduce_dtype's auto */
        json_object_set_new(par, "framework", json_string(framework_kind_name(s->parallel.framework)));
    if (s->parallel.fsdp_reshard_after_forward != FSDP_RESHARD_UNSET) { /* FSDP's rule: no DeepSpeed knobs */
        json_object_set_new(par, "fsdp_reshard_after_forward",
                            json_string(fsdp_reshard_name(s->parallel.fsdp_reshard_after_forward)));
    } else if (s->parallel.framework != FRAMEWORK_MEGATRON && s->parallel.framework != FRAMEWORK_NANOTRON) {
        /* DeepSpeed's knobs (Megatron-FSDP has its own, nanotron no ZeRO-3) */
        json_object_set_new(par, "stage3_prefetch_bucket_size", json_real(s->parallel.stage3_prefetch_bucket_size));
        json_object_set_new(par, "stage3_param_persistence_threshold",
                            json_real(s->parallel.stage3_param_persistence_threshold));
        json_object_set_new(par, "stage3_max_live_parameters", json_real(s->parallel.stage3_max_live_parameters));
        json_object_set_new(par, "stage3_max_reuse_distance", json_real(s->parallel.stage3_max_reuse_distance));
        json_object_set_new(par, "reduce_bucket_size", json_real(s->parallel.reduce_bucket_size));
        json_object_set_new(par, "stage3_list_collectives", json_boolean(s->parallel.stage3_list_collectives));
    }
    json_t *algo = json_object();
    for (int k = 0; k < COLL_KIND_COUNT; k++)
        if (s->platform.nccl_algo[k] != ALGO_AUTO)
            json_object_set_new(algo, coll_kind_name((coll_kind)k),
                                json_string(coll_algo_name((coll_algo)s->platform.nccl_algo[k])));
    json_object_set_new(par, "nccl_algo", algo);
    json_t *proto = json_object();
    for (int k = 0; k < COLL_KIND_COUNT; k++)
        if (s->platform.nccl_proto[k] > 0)
            json_object_set_new(proto, coll_kind_name((coll_kind)k),
                                json_string(coll_proto_name((coll_proto)(s->platform.nccl_proto[k] - 1))));
    json_object_set_new(par, "nccl_proto", proto);
}

void *plan_layout_to_json(const scenario_config *base, const plan_layout *l)
{
    const run_result *r = &l->result;
    scenario_config s;
    plan_apply(base, l, &s);
    json_t *par = json_pack("{s:i,s:i,s:i,s:i,s:i,s:b,s:i,s:i,s:s,s:b,s:b,s:b}",
                            "tensor_model_parallel_size", l->tp,
                            "pipeline_model_parallel_size", l->pp, "data_parallel_size", l->dp,
                            "context_parallel_size", l->cp, "virtual_pipeline_model_parallel_size", l->vpp,
                            "sequence_parallel", l->sp, "expert_model_parallel_size", s.parallel.ep, "zero_stage",
                            l->zero, "schedule", pipeline_kind_name(l->schedule), "overlap_grad_reduce",
                            s.parallel.overlap_grad_reduce, "overlap_p2p_comm", s.parallel.overlap_p2p_comm,
                            "scatter_gather_p2p", s.parallel.scatter_gather_p2p);
    /* the bucket the layout ran with: the scenario's, or the framework's default at its DP */
    json_object_set_new(par, "bucket_size_mb", json_real(params_dp_bucket_bytes(&s) / 1048576.0));
    plan_parallel_extras_to_json(&s, par);
    if (s.parallel.pipeline_layers_count > 0) { /* the scenario's own uneven split, kept */
        json_t *pl = json_array();
        for (int i = 0; i < s.parallel.pipeline_layers_count; i++)
            json_array_append_new(pl, json_integer(s.parallel.pipeline_layers[i]));
        json_object_set_new(par, "pipeline_layers", pl);
    }
    json_t *mem = json_pack("{s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:b}", "weights", r->memory.weights, "gradients",
                            r->memory.gradients, "optimizer", r->memory.optimizer, "activations", r->memory.activations,
                            "buffers", r->memory.buffers, "total", r->memory.total, "capacity", r->memory.capacity,
                            "oom", r->memory.oom);
    return json_pack("{s:o,s:{s:I,s:I,s:s},s:f,s:f,s:f,s:f,s:f,s:o,s:o,s:b}", "parallel", par, "training",
                     "global_batch_size", (json_int_t)s.training.global_batch_size,
                     "micro_batch_size", (json_int_t)l->micro_batch, "recompute_granularity",
                     recompute_name(l->recompute), "step_time_s", r->step_time_s, "mfu", r->mfu, "bubble_fraction",
                     r->bubble_mean, "exposed_comm_s", plan_exposed_comm_s(l), "tokens_per_s", r->tokens_per_s,
                     "memory_gib", mem, "time_to_train", time_to_train_to_json(&l->to_train, s.platform.price_per_gpu_hour),
                     "scenario_own_layout", l->is_scenario_own);
}

int plan_compare(const void *a, const void *b)
{
    const plan_layout *p = a, *q = b;
    double x = p->result.step_time_s, y = q->result.step_time_s;
    if (x != y)
        return (x > y) - (x < y);
    /* Equal time (ZeRO 1 and 2 often are): the one with more memory headroom first, then the
     * order of enumeration, so the ranking is the same on every run and every libc. */
    x = p->result.memory.total;
    y = q->result.memory.total;
    if (x != y)
        return (x > y) - (x < y);
    return (p->order > q->order) - (p->order < q->order);
}

void plan_result_free(plan_result *r)
{
    free(r->layouts);
    memset(r, 0, sizeof *r);
}
