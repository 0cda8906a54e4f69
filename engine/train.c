/* dtrain's training loop; see train.h. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <unistd.h>
#include "atomic_file.h"
#include "checkpoint.h"
#include "data.h"
#include "data_parallel.h"
#include "gpt.h"
#include "group_staging.h"
#include "profiler.h"
#include "run_dir.h"
#include "schedule.h"
#include "train.h"
#include "lr_schedule.h"
#include "train_log.h"
#include "wall_clock.h"

/* SIGTERM asks for one last checkpoint at the end of the current step. A signal handler can
 * only reach process state, so this one flag is the engine's single global. */
static volatile sig_atomic_t g_term_requested;

static void on_sigterm(int sig)
{
    (void)sig;
    g_term_requested = 1;
}

static train_state state_of(const train_options *o, int step, int updates, const data_loader *d, double scale,
                            int good_steps)
{
    train_state st = {step, updates, d->position, o->seed, scale, good_steps, o->lr, o->warmup, lr_decay_steps(o),
                      (int)o->precision};
    return st;
}

static const char *precision_label(kernels_precision p)
{
    return p == KPREC_BF16 ? "bf16" : p == KPREC_FP16 ? "fp16" : "fp32";
}

/* This rank's place in the pipeline: the layer range of each of its chunks. */
typedef struct {
    int P, V, s;                  /* stages, chunks per stage, this stage */
    int *first;                   /* first[vs], first[vs + 1]: layers of virtual stage vs */
    pipeline_schedule sched;
    float *in, *out;              /* host staging of one activation (B*T*C floats) */
} pipeline_plan;

static int pipeline_plan_build(pipeline_plan *pl, const train_options *o, int L, int micro_batches,
                               unsigned char *runs_layer, char *err, size_t errlen)
{
    memset(pl, 0, sizeof *pl);
    pl->P = o->comm->pp;
    pl->V = o->vpp > 0 ? o->vpp : 1;
    pl->s = o->comm->pp_rank;
    pl->first = calloc((size_t)pl->P * pl->V + 1, sizeof(int));
    /* One stage runs its micro-batches forward then backward one by one (1F1B with p = 1). */
    pipeline_kind kind = pl->P == 1 ? PIPELINE_1F1B : (pipeline_kind)o->schedule;
    if (pipeline_stage_layers(L, pl->P, pl->V, o->stage_layers, pl->s, runs_layer, pl->first, err, errlen) != 0)
        return -1;
    return pipeline_schedule_build(&pl->sched, kind, pl->P, micro_batches, pl->V, err, errlen);
}

static void pipeline_plan_free(pipeline_plan *pl)
{
    free(pl->first);
    free(pl->in);
    free(pl->out);
    pipeline_schedule_free(&pl->sched);
}

/* Message tag of the activation into (mb, vs) (dir 0) or its gradient out of it (dir 1). */
static int pipe_tag(const pipeline_plan *pl, int mb, int vs, int dir)
{
    return (mb * pl->P * pl->V + vs) * 2 + dir;
}

/* Reads micro-batch mb of this DP rank's share of the step: DP rank r takes sequences
 * [r G/dp, (r+1) G/dp) of the step's G; together, exactly the single-rank batch. */
static void read_micro_batch(const train_options *o, data_loader *d, int step, int mb, int *tokens, int *targets,
                             int T)
{
    int dp = o->comm->dp;
    d->position = (uint64_t)(step - 1) * o->global_batch + (uint64_t)o->comm->dp_rank * (o->global_batch / dp) +
                  (uint64_t)mb * o->micro_batch;
    data_next_batch(d, o->micro_batch, T, tokens, targets);
}

/* One step's forwards and backwards in the schedule's order, with the pipeline transfers.
 * Returns the sum of the micro-batch losses (last stage; 0 elsewhere). */
static double run_pipeline(const train_options *o, pipeline_plan *pl, gpt_model *m, data_loader *d, int step,
                           float dloss, int *tokens, int *targets)
{
    comm_ctx *c = o->comm;
    int T = m->cfg.seq_len, last = pl->P * pl->V - 1; /* whole sequences: CP ranks keep their positions */
    size_t act = gpt_stream_floats(m); /* under SP, each TP rank sends its block of tokens */
    double loss_sum = 0;
    for (int i = 0; i < pl->sched.count[pl->s]; i++) {
        pipe_action a = pl->sched.actions[pl->s][i];
        int vs = pipeline_virtual_stage(pl->P, pl->s, a.chunk), l0 = pl->first[vs], l1 = pl->first[vs + 1];
        int slot = m->shard.slots > 1 ? a.micro_batch : 0;
        if (a.phase == PIPE_FORWARD) {
            if (vs == 0 || vs == last)
                read_micro_batch(o, d, step, a.micro_batch, tokens, targets, T);
            if (vs > 0)
                comm_recv(c, comm_world_rank(c, c->tp_rank, (vs - 1) % pl->P, c->dp_rank),
                          pipe_tag(pl, a.micro_batch, vs, 0), pl->in, act);
            float loss = 0;
            const float *out = gpt_forward_layers(m, slot, l0, l1, tokens, targets, pl->in, &loss);
            if (vs == last) {
                loss_sum += loss;
            } else {
                m->k->copy_to_host(pl->out, out, act * sizeof(float));
                comm_send(c, comm_world_rank(c, c->tp_rank, (vs + 1) % pl->P, c->dp_rank),
                          pipe_tag(pl, a.micro_batch, vs + 1, 0), pl->out, act);
            }
        } else {
            if (vs < last)
                comm_recv(c, comm_world_rank(c, c->tp_rank, (vs + 1) % pl->P, c->dp_rank),
                          pipe_tag(pl, a.micro_batch, vs, 1), pl->in, act);
            const float *dx = gpt_backward_layers(m, slot, l0, l1, dloss, pl->in);
            if (vs > 0) {
                m->k->copy_to_host(pl->out, dx, act * sizeof(float));
                comm_send(c, comm_world_rank(c, c->tp_rank, (vs - 1) % pl->P, c->dp_rank),
                          pipe_tag(pl, a.micro_batch, vs - 1, 1), pl->out, act);
            }
        }
    }
    comm_wait_sends(c);
    return loss_sum;
}

/* The tied embedding's two copies (first and last stage) get the sum of both gradients. Under
 * ZeRO-2/3 each end's gradient is already summed over its DP group and sharded: it is gathered
 * whole for the sum, and each rank keeps its part. */
static void reduce_tied_embedding(const train_options *o, gpt_model *m, dp_state *dps, comm_nccl *nccl)
{
    if (o->comm->pp == 1 || m->cfg.untied || m->tensors[GPT_WTE].count == 0)
        return;
    size_t n = m->tensors[GPT_WTE].count;
    float *g = dp_grad_gather(dps, m, GPT_WTE);
    if (nccl) {
        comm_nccl_allreduce_sum(nccl, g, n);
    } else {
        float *host = malloc(n * sizeof(float));
        m->k->copy_to_host(host, g, n * sizeof(float));
        comm_allreduce_sum(o->comm->embed_group, host, n);
        m->k->copy_to_device(g, host, n * sizeof(float));
        free(host);
    }
    dp_grad_scatter(dps, m, GPT_WTE);
}

/* The whole model's parameters in the single-rank layout, on every rank (host, malloc'd). */
static float *gather_global(const train_options *o, dp_state *d, const gpt_model *m)
{
    float *local = malloc((m->num_params ? m->num_params : 1) * sizeof(float));
    dp_params_to_host(d, m, local);
    if (o->comm->tp * o->comm->pp * o->comm->ep == 1)
        return local;
    float *global = calloc(m->global_params, sizeof(float));
    if (o->comm->dp_rank == 0 && o->comm->cp_rank == 0)
        gpt_write_global(m, local, global);
    else if (o->comm->ep > 1 && o->comm->edp_rank == 0) /* the first EP group's other experts */
        gpt_write_global_experts(m, local, global);
    comm_allreduce_sum(o->comm->world, global, m->global_params);
    free(local);
    return global;
}

/* Completes a pending checkpoint (collective; NULL: nothing to do) and prunes old ones.
 * Returns 0, or -1 after printing why. */
static int complete_checkpoint(const train_options *o, checkpoint_job **pending, gpt_model *m, int step)
{
    if (!*pending)
        return 0;
    double write_s = 0;
    char err[1024];
    int rc = checkpoint_finish(*pending, o->comm, &write_s, err, sizeof err);
    *pending = NULL;
    if (rc != 0) {
        fprintf(stderr, "dtrain: checkpoint: %s\n", err);
        return -1;
    }
    profiler_record(m->prof, "checkpoint_write", -1, "background shard write", write_s, 3.0 * m->num_params * 4);
    if (o->comm->world_rank == 0) {
        fprintf(stderr, "dtrain: checkpoint complete at step %d (shard written in %.3f s)\n", step, write_s);
        checkpoint_prune(o->ckpt_dir, o->ckpt_keep);
        char rerr[1200];
        if (o->run && run_dir_checkpoints(o->run, o->ckpt_dir, rerr, sizeof rerr) != 0 && rerr[0])
            fprintf(stderr, "dtrain: %s (run tracking stops; training goes on)\n", rerr);
    }
    return 0;
}

/* --resume: loads the newest intact checkpoint into m and *st (*loaded = 1), or none (a fresh
 * start). Returns -1 to train on, else the exit code to stop with: 2 when no intact checkpoint
 * is left or this run's flags contradict the checkpoint's, 0 when it already holds --steps.
 * Every rank returns the same (the checkpoint is agreed on). */
static int resume(train_options *o, gpt_model *m, const ckpt_layout *layout, train_state *st, int *loaded)
{
    char err[1024], where[1200];
    int leader = o->comm->world_rank == 0;
    int got = checkpoint_load_latest(o->ckpt_dir, m, st, o->comm, layout, err, sizeof err);
    *loaded = got == 1;
    if (got < 0) {
        fprintf(stderr, "dtrain: --resume: %s\n", err);
        return 2;
    }
    if (got == 0) {
        if (leader)
            fprintf(stderr, "dtrain: no checkpoint in %s: starting fresh\n", o->ckpt_dir);
        return -1;
    }
    snprintf(where, sizeof where, "%s/step-%08d", o->ckpt_dir, st->step);
    if (st->precision != (int)o->precision) {
        if (leader)
            fprintf(stderr, "dtrain: --resume: %s was made in %s, this run asks for --precision %s\n", where,
                    precision_label((kernels_precision)st->precision), precision_label(o->precision));
        return 2;
    }
    /* The seed orders the data: another one would continue on another sequence of batches. */
    if (st->seed != o->seed) {
        if (leader)
            fprintf(stderr, "dtrain: --resume: %s was made with --seed %llu, this run has --seed %llu: the data order "
                            "would change mid-run (give --seed %llu, or another --ckpt-dir to start anew)\n",
                    where, (unsigned long long)st->seed, o->seed, (unsigned long long)st->seed);
        return 2;
    }
    if (st->step >= o->steps) {
        if (leader)
            fprintf(stderr, "dtrain: --resume: %s is at step %d and --steps %d asks for no more: nothing to do\n",
                    where, st->step, o->steps);
        return 0;
    }
    if (lr_schedule_resume(o, st, where, leader) == 2) /* the learning-rate schedule, as Megatron-LM checks it */
        return 2;
    if (leader)
        fprintf(stderr, "dtrain: resumed from %s (step %d done)\n", where, st->step);
    return -1;
}

/* Opens --log-json on world rank 0 (the others log nothing); every rank stops alike when it
 * cannot. 0, or -1 (said why). */
static int open_log(const train_options *o, train_log *log)
{
    int leader = o->comm->world_rank == 0;
    int bad = train_log_open(log, leader ? o->log_json : NULL) != 0;
    return comm_allreduce_max_int(o->comm->world, bad) ? -1 : 0;
}

int train_run(const train_options *given)
{
    /* this run's options; --resume may take the checkpoint's learning-rate schedule into them */
    train_options run = *given;
    const train_options *o = &run;
    char err[1024];
    int dp = o->comm->dp, cp = o->comm->cp > 1 ? o->comm->cp : 1, leader = o->comm->world_rank == 0;
    if (o->global_batch % (o->micro_batch * dp)) {
        if (leader)
            fprintf(stderr, "dtrain: --global-batch %d is not a multiple of --micro-batch %d x --dp %d\n",
                    o->global_batch, o->micro_batch, dp);
        return 2;
    }
    const kernels_backend *k = kernels_cpu();
    if (!strcmp(o->device, "cuda")) {
        k = kernels_cuda(err, sizeof err);
        if (!k) {
            fprintf(stderr, "dtrain: --device cuda: %s\n", err);
            return 1;
        }
    }
    if (o->test_plain_attention) /* test aid: CUDA's context-parallel fallbacks on the CPU */
        k = gpt_cp_plain_backend(k);
    data_loader data;
    if (data_open(&data, o->data, o->seed, err, sizeof err) != 0) {
        fprintf(stderr, "dtrain: --data %s\n", err);
        return 2;
    }
    gpt_config cfg;
    if (gpt_config_from_name(o->model, (int)data.vocab, &cfg, err, sizeof err) != 0) {
        fprintf(stderr, "dtrain: --model: %s\n", err);
        data_close(&data);
        return 2;
    }
    if (data.count < (uint64_t)cfg.seq_len + 2) {
        fprintf(stderr, "dtrain: --data %s: %llu tokens, fewer than one sequence of %d\n", o->data,
                (unsigned long long)data.count, cfg.seq_len + 1);
        data_close(&data);
        return 2;
    }
    gpt_model m;
    int B = o->micro_batch, T = cfg.seq_len, accum = o->global_batch / (o->micro_batch * dp);
    pipeline_plan pl;
    unsigned char *runs_layer = malloc((size_t)cfg.num_layers);
    if (pipeline_plan_build(&pl, o, cfg.num_layers, accum, runs_layer, err, sizeof err) != 0) {
        if (leader)
            fprintf(stderr, "dtrain: pipeline (--pp %d --vpp %d --schedule %s): %s\n", o->comm->pp, pl.V,
                    pipeline_kind_name((pipeline_kind)o->schedule), err);
        pipeline_plan_free(&pl);
        free(runs_layer);
        data_close(&data);
        return 2;
    }
    tp_staging tps = {.group = o->comm->tp_group, .k = k}, cps = {.group = o->comm->cp_group, .k = k};
    gpt_shard shard = {.tp = o->comm->tp, .tp_rank = o->comm->tp_rank, .layers = runs_layer,
                       .embedding = o->comm->pp_rank == 0, .head = o->comm->pp_rank == o->comm->pp - 1,
                       .slots = o->comm->pp > 1 ? accum : 1, .tp_allreduce = tp_allreduce_staged,
                       .sequence_parallel = o->sequence_parallel, .tp_allgather = tp_allgather_staged,
                       .tp_reduce_scatter = tp_reduce_scatter_staged, .tp_comm_overlap = o->tp_comm_overlap,
                       .tp_ring_start = tp_ring_start, .tp_ring_wait = tp_ring_wait, .cp = cp,
                       .cp_rank = o->comm->cp_rank, .cp_allgather = tp_allgather_staged,
                       .cp_reduce_scatter = tp_reduce_scatter_staged, .cp_ctx = &cps,
                       .cp_ring_p2p = !o->cp_all_gather && !o->cp_a2a, .cp_ring_start = tp_ring_start, .cp_ring_wait = tp_ring_wait,
                       .cp_allreduce_host = tp_allreduce_host, .cp_a2a = o->cp_a2a, .cp_alltoall = tp_alltoall_host,
                       .tp_allreduce_host = tp_allreduce_host, .tp_ctx = &tps,
                       .dp = comm_group_size(o->comm->dp_group), /* ZeRO shards over DP x CP */
                       .dp_rank = comm_group_rank(o->comm->dp_group), .zero = o->zero, .recompute = o->recompute,
                       .recompute_block = o->recompute_block, .recompute_layers = o->recompute_layers,
                       .moe_aux_loss_coeff = o->moe_aux_loss_coeff, .ep = o->comm->ep,
                       .ep_rank = o->comm->ep_rank, .ep_alltoall_int = ep_alltoall_int, .ep_alltoallv = ep_alltoallv,
                       .ep_ctx = o->comm->ep_group};
    if (gpt_init_shard(&m, &cfg, k, o->precision, o->micro_batch, o->seed, &shard, err, sizeof err) != 0) {
        if (leader)
            fprintf(stderr, "dtrain: --tp %d --expert-model-parallel-size %d: %s\n", o->comm->tp, o->comm->ep, err);
        pipeline_plan_free(&pl);
        free(runs_layer);
        data_close(&data);
        return 2;
    }
    free(runs_layer);
    size_t act_floats = gpt_stream_floats(&m);
    pl.in = malloc(act_floats * sizeof(float));
    pl.out = malloc(act_floats * sizeof(float));
    /* The run folder keeps a profile too, except on CUDA without --profile: timing ops with CUDA
     * events waits for each op, which would slow the steps the run's metrics measure. */
    if (o->profile || (o->run && strcmp(k->name, "cuda")))
        m.prof = profiler_create(k);
    dp_state dps;
    dp_init(&dps, o->comm, o->zero, &m);
    dps.bf16 = o->grad_reduce_bf16;
    dp_enable_powersgd(&dps, &m, o->grad_compress_rank, o->seed);
    if (o->offload_optimizer)
        dp_enable_offload(&dps);
    comm_nccl *embed_nccl = NULL;
    if (o->comm_nccl) {
        /* One communicator per group, created in the same order on every rank (each creation
         * waits for its group's members): TP, CP, DP (and under EP the expert-DP group's, inside
         * dp_enable_nccl), then the tied embedding's two ends. CP's
         * gives its all-gather form's collectives on the device; ring attention's steps, the
         * all-to-all form's exchanges and the MoE counts' sums stay on host copies over MPI.
         * After each group every rank of the world agrees, so a failure stops them all at once
         * instead of leaving the others waiting for the failed group's next collective. */
        char nerr[256] = "";
        int ends = o->comm->pp > 1 && (o->comm->pp_rank == 0 || o->comm->pp_rank == o->comm->pp - 1);
        int bad = !(tps.nccl = comm_nccl_create(o->comm->tp_group, nerr, sizeof nerr));
        if (!comm_allreduce_max_int(o->comm->world, bad) && cp > 1)
            bad = !(cps.nccl = comm_nccl_create(o->comm->cp_group, nerr, sizeof nerr));
        if (!comm_allreduce_max_int(o->comm->world, bad))
            bad = dp_enable_nccl(&dps, &m, nerr, sizeof nerr) != 0;
        if (!comm_allreduce_max_int(o->comm->world, bad) && ends)
            bad = !(embed_nccl = comm_nccl_create(o->comm->embed_group, nerr, sizeof nerr));
        if (comm_allreduce_max_int(o->comm->world, bad)) {
            if (bad)
                fprintf(stderr, "dtrain: rank %d: %s\n", o->comm->world_rank, nerr);
            exit(1);
        }
    }
    if ((o->overlap_grad_reduce && dp_enable_overlap(&dps, &m, accum, o->bucket_mb, err, sizeof err) != 0) ||
        (o->overlap_param_gather && dps.dp > 1 &&
         dp_enable_overlap_param_gather(&dps, &m, o->bucket_mb, err, sizeof err) != 0)) {
        if (leader) /* every rank has the same options: all stop here */
            fprintf(stderr, "dtrain: %s\n", err);
        dp_free(&dps);
        tp_staging_free(&tps);
        tp_staging_free(&cps);
        comm_nccl_free(embed_nccl);
        gpt_free(&m);
        pipeline_plan_free(&pl);
        data_close(&data);
        return 2;
    }
    int *tokens = malloc((size_t)B * T * sizeof(int)), *targets = malloc((size_t)B * T * sizeof(int));
    char recompute_note[128] = "";
    if (o->recompute == GPT_RECOMPUTE_SELECTIVE)
        snprintf(recompute_note, sizeof recompute_note, "; selective recomputation");
    else if (o->recompute == GPT_RECOMPUTE_FULL)
        snprintf(recompute_note, sizeof recompute_note, "; full recomputation (%s, %d layer%s)",
                 o->recompute_block ? "block" : "uniform", o->recompute_layers, o->recompute_layers > 1 ? "s" : "");
    if (o->sequence_parallel)
        snprintf(recompute_note + strlen(recompute_note), sizeof recompute_note - strlen(recompute_note),
                 "; sequence parallel%s", o->tp_comm_overlap ? ", TP communication overlapped" : "");
    char shape[256];
    gpt_config_describe(&m.cfg, shape, sizeof shape);
    if (leader)
        fprintf(stderr, "dtrain: %s model, %s, %.2fM parameters "
                        "(%.2fM on rank 0); %s on %s; TP %d x PP %d (%s, %d chunks) x DP %d; batch %d sequences = "
                        "DP %d x %d micro-batches x %d; ZeRO-%d%s\n",
                o->model, shape, m.global_params / 1e6,
                m.num_params / 1e6, precision_label(o->precision), k->name, o->comm->tp, o->comm->pp,
                pipeline_kind_name(pl.sched.kind), pl.V, dp, o->global_batch, dp, accum, B, o->zero, recompute_note);

    ckpt_layout layout = {.tp = o->comm->tp, .pp = o->comm->pp, .dp = dp, .vpp = pl.V, .zero = o->zero,
                          .ep = o->comm->ep, .cp = cp};
    for (int i = 0; o->stage_layers && i < o->comm->pp && i < CKPT_MAX_STAGES; i++)
        layout.stage_layers[i] = o->stage_layers[i];
    double scale = o->precision == KPREC_FP16 ? o->loss_scale : 1.0;
    int good_steps = 0, updates = 0, first_step = 1;
    float loss = 0;
    train_state st;
    int got = 0, stop = o->resume ? resume(&run, &m, &layout, &st, &got) : -1;
    train_log log;
    if (stop < 0 && open_log(o, &log) != 0)
        stop = 2;
    if (stop >= 0) {
        dp_free(&dps);
        tp_staging_free(&tps);
        tp_staging_free(&cps);
        comm_nccl_free(embed_nccl);
        gpt_free(&m);
        pipeline_plan_free(&pl);
        free(tokens);
        free(targets);
        data_close(&data);
        return stop;
    }
    if (got) {
        first_step = st.step + 1;
        updates = st.updates;
        data.position = st.data_position;
        scale = st.loss_scale;
        good_steps = st.good_steps;
    }
    if (o->run && run_dir_start(o->run, o, &cfg, m.global_params, k, first_step, err, sizeof err) != 0 && err[0])
        fprintf(stderr, "dtrain: %s (run tracking stops; training goes on)\n", err);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigterm;
    sigaction(SIGTERM, &sa, NULL);
    checkpoint_job *pending = NULL;
    int rc = 0, last_step = first_step - 1, stopped = 0, diverged = 0;
    for (int step = first_step; step <= o->steps; step++) {
        double t0 = wall_clock_s();
        profiler_set_step(m.prof, step);
        k->memset_zero(m.grads, m.grad_range.n * sizeof(float)); /* all of them, or a ZeRO-2/3 shard */
        if (step == o->inject_nan_step && m.runs_layer[0]) {
            /* layer 0's first norm weight (tensor 0 of the layer): every token's activations, and
             * so the loss, turn NaN, as a diverged run's do */
            float nan = NAN;
            k->copy_to_device(gpt_param(&m, gpt_layer_tensor(&m, 0, 0)), &nan, sizeof nan);
        }
        /* Mean loss over all tokens of the step, times the loss scale. */
        float dloss = (float)(scale / ((double)B * T * accum * dp));
        double loss_sum = run_pipeline(o, &pl, &m, &data, step, dloss, tokens, targets);
        /* the busiest EP group and pipeline stage's routing (each rank's: the mean over its MoE
         * layers and micro-batches): the step waits for the slowest; 0: dense */
        double moe_load = gpt_moe_load_take(&m);
        if (m.cfg.num_experts > 0)
            moe_load = comm_allreduce_max_double(o->comm->world, moe_load);
        data.position = (uint64_t)step * o->global_batch;
        /* The loss lives on the last stage: its TP rank 0 of each replica contributes. */
        int reports = o->comm->pp_rank == o->comm->pp - 1 && o->comm->tp_rank == 0;
        /* (with CP, each rank's loss is the mean over its positions, equally many on every rank) */
        loss = (float)(comm_allreduce_sum_double(o->comm->world, reports ? loss_sum / accum : 0) / (dp * cp));
        reduce_tied_embedding(o, &m, &dps, embed_nccl);
        if (!dp_grads_sharded(&dps)) { /* ZeRO-2/3 reduced pass by pass, each pass profiled on its own */
            profiler_begin(m.prof);
            dp_reduce_gradients(&dps, &m); /* with PowerSGD, its compression too */
            profiler_end(m.prof, "dp_grad_reduce", -1, "DP gradient reduction", 0, (double)m.num_params * 4);
        }
        if (step == o->inject_overflow_step) {
            float inf = INFINITY;
            if (m.grad_range.n) /* this rank's first gradient (its shard's, under ZeRO-2/3) */
                k->copy_to_device(m.grads, &inf, sizeof inf);
        }
        double lr = train_lr(o, step);
        int overflow, fp16 = o->precision == KPREC_FP16;
        profiler_begin(m.prof);
        double grad_norm = dp_grad_norm(&dps, &m, fp16, scale, &overflow); /* fp16: found_inf first */
        profiler_end(m.prof, "grad_norm", -1, "all parameters", 0,
                     (double)m.num_params * 4 * (fp16 ? 2 : 1));
        if (overflow) {
            /* Skip the update. With fp16 this is the loss scaler's signal: halve the scale. */
            if (fp16)
                scale = scale > 1 ? scale / 2 : 1;
            good_steps = 0;
            if (leader)
                fprintf(stderr, "dtrain: step %d: gradients overflowed; step skipped%s\n", step,
                        fp16 ? ", loss scale halved" : "");
        } else {
            double clip = o->grad_clip > 0 && grad_norm > o->grad_clip ? o->grad_clip / grad_norm : 1.0;
            float grad_scale = (float)(clip / scale);
            updates++;
            profiler_begin(m.prof);
            dp_optimizer_step(&dps, &m, (float)lr, (float)o->weight_decay, updates, grad_scale);
            profiler_end(m.prof, "optimizer", -1, "all parameters", 0, (double)m.num_params * 28);
            if (fp16 && ++good_steps >= o->loss_scale_window) {
                scale *= 2;
                good_steps = 0;
            }
        }
        k->synchronize();
        double dt = wall_clock_s() - t0;
        json_t *line = json_pack("{s:i,s:o,s:f,s:f,s:f,s:f,s:f}", "step", step, "loss", train_log_number(loss), "grad_norm",
                                 isfinite(grad_norm) ? grad_norm : -1.0, "loss_scale", scale, "lr", lr,
                                 "step_time_s", dt, "tokens_per_s", (double)o->global_batch * T / dt); /* the whole job's */
        if (o->log_crc) {
            float *global = gather_global(o, &dps, &m);
            char crc[16];
            snprintf(crc, sizeof crc, "%08x", gpt_crc32_floats(global, m.global_params));
            free(global);
            json_object_set_new(line, "params_crc32", json_string(crc));
        }
        if (moe_load > 0)
            json_object_set_new(line, "moe_load_imbalance", json_real(moe_load));
        train_log_line(&log, line);
        if (o->run && run_dir_step(o->run, step, loss, isfinite(grad_norm) ? grad_norm : -1.0, scale, lr, dt,
                                   moe_load, err, sizeof err) != 0 && err[0])
            fprintf(stderr, "dtrain: %s (run tracking stops; training goes on)\n", err);
        if (leader && (step == 1 || step % 10 == 0 || step == o->steps))
            fprintf(stderr, "step %5d/%d  loss %.4f  grad norm %.3f  lr %.2e  %.3f s  %.0f tok/s\n", step, o->steps,
                    loss, grad_norm, lr, dt, (double)B * T * accum / dt);

        last_step = step;
        /* A loss that is not finite (every rank has the same, all-reduced): the run has diverged
         * and every later step would train on NaN. Stop, as Megatron-LM's
         * --check-for-nan-in-loss-and-grad does, keeping the checkpoints made before it. */
        if (!isfinite(loss) && !o->no_nan_check) {
            if (leader)
                fprintf(stderr, "dtrain: step %d: the loss is %s; stopping (exit 3) with the checkpoints made "
                                "before it (--no-check-for-nan-in-loss-and-grad trains on)\n",
                        step, isnan(loss) ? "NaN" : "infinite");
            diverged = 1;
            break;
        }
        /* A background checkpoint is completed (manifest written) as soon as every rank's
         * shard is on disk; the check is collective, so every rank finishes it at one step. */
        if (pending && !comm_allreduce_max_int(o->comm->world, !checkpoint_shard_written(pending)) &&
            complete_checkpoint(o, &pending, &m, step) != 0) {
            rc = 1;
            break;
        }
        if (o->kill_rank >= 0 && step == o->kill_step && o->comm->world_rank == o->kill_rank &&
            access(o->kill_marker, F_OK) != 0) {
            /* test aid: die as a crashed rank would, once (the marker keeps a resumed run alive) */
            FILE *mk = fopen(o->kill_marker, "w");
            if (mk)
                fclose(mk);
            fprintf(stderr, "dtrain: rank %d: test aid: %s after step %d\n", o->comm->world_rank,
                    o->kill_signal == SIGSTOP ? "SIGSTOP (hang)" : "SIGKILL", step);
            raise(o->kill_signal == SIGSTOP ? SIGSTOP : SIGKILL);
        }
        /* agreed by every rank, so all write the last checkpoint at the same step */
        int term = comm_allreduce_max_int(o->comm->world, g_term_requested);
        if (o->ckpt_dir && ((o->ckpt_every > 0 && step % o->ckpt_every == 0) || term)) {
            if (complete_checkpoint(o, &pending, &m, step) != 0) {
                rc = 1;
                break;
            }
            train_state st = state_of(o, step, updates, &data, scale, good_steps);
            double t1 = wall_clock_s();
            int sync = o->ckpt_sync || term;
            dp_sync_optimizer_state(&dps, &m);
            profiler_begin(m.prof);
            pending = checkpoint_save_async(o->ckpt_dir, &m, &st, o->comm, &layout, !sync);
            profiler_end(m.prof, "checkpoint_blocked", -1, "host copy", 0, 3.0 * m.num_params * 4);
            if (sync && complete_checkpoint(o, &pending, &m, step) != 0) {
                rc = 1;
                break;
            }
            if (leader)
                fprintf(stderr, "dtrain: checkpoint step %d: step loop blocked %.3f s%s\n", step, wall_clock_s() - t1,
                        sync ? " (synchronous write)" : ", writing in the background");
        }
        if (term) {
            if (leader)
                fprintf(stderr, "dtrain: SIGTERM: stopped after step %d with a checkpoint\n", step);
            break;
        }
        if (o->stop_after > 0 && step == o->stop_after) {
            if (leader)
                fprintf(stderr, "dtrain: --stop-after %d: stopping as if killed\n", step);
            stopped = 1;
            break;
        }
    }
    if (complete_checkpoint(o, &pending, &m, last_step) != 0)
        rc = 1;
    int ckpt_failed = rc != 0; /* only a checkpoint sets rc so far */
    if (stopped || ckpt_failed || diverged) {
        /* no final line: a run stopped as if killed leaves things as a crash would, one whose
         * checkpoint failed did not finish (checkpoint_finish removed what it left), and a
         * diverged one did not either */
        train_log_close(&log);
    }
    char crc[16];
    float *global = gather_global(o, &dps, &m);
    snprintf(crc, sizeof crc, "%08x", gpt_crc32_floats(global, m.global_params));
    train_log_line(&log, json_pack("{s:b,s:i,s:o,s:s}", "final", 1, "step", last_step, "loss",
                                   train_log_number(loss), "params_crc32", crc));
    if (o->rank_params) {
        /* Parameters each rank holds (its part of the model), in world-rank order: the figure the
         * simulator's memory model predicts per GPU for the same layout. */
        json_t *per_rank = json_array(), *moments = json_array(), *resident = json_array(), *grads = json_array(),
               *peak = json_array(), *acts = json_array();
        for (int r = 0; r < o->comm->world_size; r++) {
            int me = r == o->comm->world_rank;
            json_array_append_new(per_rank, json_integer((json_int_t)comm_allreduce_sum_double(
                                                o->comm->world, me ? (double)m.num_params : 0)));
            /* the parameter floats the rank keeps on its device between passes (ZeRO-3: its shard) */
            json_array_append_new(resident, json_integer((json_int_t)comm_allreduce_sum_double(
                                                o->comm->world, me ? (double)m.param_range.n : 0)));
            /* and the gradient floats it keeps between passes (ZeRO-2/3: its shard) */
            json_array_append_new(grads, json_integer((json_int_t)comm_allreduce_sum_double(
                                             o->comm->world, me ? (double)m.grad_range.n : 0)));
            /* the AdamW moment floats the rank keeps on its device (2 per owned parameter) */
            json_array_append_new(moments, json_integer((json_int_t)comm_allreduce_sum_double(
                                               o->comm->world, me ? 2.0 * (double)m.moments_n : 0)));
            /* the most parameter, gradient and moment floats it ever held at once */
            json_array_append_new(peak, json_integer((json_int_t)comm_allreduce_sum_double(
                                            o->comm->world, me ? (double)m.state_floats_peak : 0)));
            /* the activation floats it holds for the micro-batches in flight (gpt_acts.c) */
            json_array_append_new(acts, json_integer((json_int_t)comm_allreduce_sum_double(
                                            o->comm->world, me ? (double)m.act_floats : 0)));
        }
        json_t *doc = json_pack("{s:i,s:i,s:i,s:i,s:I,s:o,s:o,s:o,s:o,s:o,s:o,s:f}", "tp", o->comm->tp, "pp", o->comm->pp, "dp",
                                o->comm->dp, "zero", o->zero, "params_total", (json_int_t)m.global_params,
                                "params_per_rank", per_rank, "optimizer_floats_per_rank", moments,
                                "param_floats_per_rank", resident, "grad_floats_per_rank", grads,
                                "state_floats_peak_per_rank", peak, "activation_floats_per_rank", acts,
                                "dp_bytes_sent_rank0", comm_bytes_sent(o->comm->dp_group));
        char *text = leader ? json_dumps(doc, JSON_INDENT(1)) : NULL;
        if (text && atomic_file_write(o->rank_params, text, strlen(text), 0, err, sizeof err) != 0) {
            fprintf(stderr, "dtrain: --rank-params: %s\n", err);
            rc = 1;
        }
        free(text);
        json_decref(doc);
    }
    if (diverged)
        rc = 3;
    if (leader && ckpt_failed)
        fprintf(stderr, "dtrain: stopped after step %d: its checkpoint could not be written (see above)\n", last_step);
    else if (leader && diverged)
        fprintf(stderr, "dtrain: stopped at step %d: the loss is not finite\n", last_step);
    else if (leader)
        fprintf(stderr, "dtrain: done, final loss %.4f, params_crc32 %s\n", loss, crc);
    if (leader && o->dump_params &&
        atomic_file_write(o->dump_params, global, m.global_params * sizeof(float), 0, err, sizeof err) != 0) {
        fprintf(stderr, "dtrain: --dump-params: %s\n", err);
        rc = 1;
    }
    free(global);
    dp_free(&dps);
    pipeline_plan_free(&pl);
    tp_staging_free(&tps);
    tp_staging_free(&cps);
    comm_nccl_free(embed_nccl);

    if (m.prof) {
        /* rank 0's profile (every rank of a layout runs the same ops on its part) */
        if (leader && o->profile &&
            profiler_write(m.prof, o->profile, precision_label(o->precision), k->name, err, sizeof err) != 0) {
            fprintf(stderr, "dtrain: --profile: %s\n", err);
            rc = 1;
        }
        if (o->run && profiler_write(m.prof, run_dir_profile_path(o->run), precision_label(o->precision), k->name, err,
                                     sizeof err) != 0) {
            fprintf(stderr, "dtrain: --run-dir: profile: %s\n", err);
            rc = 1;
        }
        profiler_free(m.prof);
        m.prof = NULL;
    }
    /* a run stopped as if killed leaves no summary, as a crash would not write one */
    if (o->run && stopped)
        run_dir_free(o->run);
    else if (o->run && run_dir_finish(o->run, last_step, loss, crc, last_step == o->steps && !ckpt_failed && !diverged, err,
                                      sizeof err) != 0) {
        if (err[0])
            fprintf(stderr, "dtrain: %s\n", err);
        fprintf(stderr, "dtrain: --run-dir: the run's record is incomplete (see above)\n");
        rc = 1;
    }
    if (train_log_close(&log) != 0)
        rc = 1;
    free(tokens);
    free(targets);
    gpt_free(&m);
    data_close(&data);
    return rc;
}
