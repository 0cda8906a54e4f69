/* dtrain: the training engine's command line (DESIGN.md, CLI contract). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "comm.h"
#include "comm_nccl.h"
#include "data_parallel.h"
#include "powersgd.h"
#include "schedule.h"
#include "run_dir.h"
#include "train.h"

#ifndef DTRAIN_DEFAULT_DATA
#define DTRAIN_DEFAULT_DATA "build/data/corpus.tok"
#endif

static void usage(FILE *f)
{
    fprintf(f,
            "usage: dtrain [options]\n"
            "Trains a GPT-2 style model on one rank, or on TP x CP x PP x DP ranks under mpirun.\n\n"
            "  --device cpu|cuda        kernels to run on (default cpu)\n"
            "  --model tiny|tiny-llama|small|FILE  tiny: 4 layers, hidden 128, 4 heads, seq 64; tiny-llama:\n"
            "                           the same with Llama's blocks (2 query groups, SwiGLU 352, RMSNorm,\n"
            "                           rope, untied head); small: GPT-2 124M; FILE.json: {num_layers, hidden,\n"
            "                           heads, seq_len[, vocab]} or dtsim's model keys, experts included\n"
            "                           (num_experts, moe_router_topk, moe_expert_capacity_factor; default tiny)\n"
            "  --data FILE              token file (default: the bundled corpus, %s)\n"
            "  --micro-batch B          sequences per micro-batch (default 8)\n"
            "  --global-batch G         sequences per step, a multiple of B (default B)\n"
            "  --precision fp32|bf16|fp16  compute precision, fp32 master weights (default fp32)\n"
            "  --steps N                optimizer steps (default 200)\n"
            "  --lr X                   peak learning rate (default 1e-3)\n"
            "  --warmup N               warm-up steps (default steps/10)\n"
            "  --lr-decay-steps N       the cosine decay's length in steps (default --steps)\n"
            "  --weight-decay W         AdamW decay of the weight matrices (default 0.1)\n"
            "  --grad-clip C            global gradient norm clip, 0 = off (default 1.0)\n"
            "  --loss-scale S           initial fp16 loss scale (default 65536)\n"
            "  --loss-scale-window N    good steps before the fp16 scale doubles (default 1000)\n"
            "  --seed S                 initialisation and data order (default 1)\n"
            "  --log-json FILE|-        one JSON object per step, then the final one with params_crc32\n"
            "  --log-crc                add params_crc32 to every step line\n"
            "  --profile FILE           per-op times to FILE and a Chrome trace to FILE.trace.json\n"
            "  --inject-overflow STEP   test aid: an inf in the gradients at STEP (exercises loss scaling)\n"
            "  --inject-nan STEP        test aid: a NaN in layer 0's norm weight before STEP (a diverged run)\n"
            "  --no-check-for-nan-in-loss-and-grad  train on past a loss that is not finite (Megatron-LM's\n"
            "                           flag); by default the run logs that step (loss null) and exits 3\n"
            "  --dump-params FILE       test aid: the final parameters, fp32, in the single-rank layout\n"
            "  --comm-timeout S         a rank blocked in one collective or transfer this long stops with a\n"
            "                           message (a peer died or hangs; default 60)\n"
            "  --test-kill R:STEP:FILE  test aid: rank R SIGKILLs itself after STEP unless FILE exists (creates it)\n"
            "  --test-hang R:STEP:FILE  test aid: the same with SIGSTOP (a rank that hangs)\n"
            "  --rank-params FILE       JSON: the parameters each rank holds (to compare with dtsim's memory model)\n"
            "                           and the DP gradient bytes rank 0 sent\n"
            "  --ckpt-dir D             checkpoint folder (D/step-NNNNNNNN/: shard + manifest, written last)\n"
            "  --ckpt-every N           checkpoint every N steps (written in the background from a host copy)\n"
            "  --ckpt-keep K            complete checkpoints to keep (default 3)\n"
            "  --ckpt-sync              write checkpoints on the step loop instead\n"
            "  --resume                 start from the newest intact checkpoint in --ckpt-dir (bit-exact; the\n"
            "                           same --seed; exit 0 doing nothing when it already holds --steps); a\n"
            "                           checkpoint of another learning-rate schedule (--lr, --warmup, decay\n"
            "                           steps) is refused unless one of the two below says which holds\n"
            "  --use-checkpoint-opt-param-scheduler  on --resume: the checkpoint's schedule (Megatron-LM's\n"
            "                           --use-checkpoint-opt_param-scheduler); --steps only says where to stop\n"
            "  --override-opt-param-scheduler  on --resume: this run's schedule from the next step on\n"
            "  --stop-after N           test aid: stop after step N as if killed (no final checkpoint)\n"
            "  --test-plain-attention   test aid: run without the optional attention kernels (as CUDA does\n"
            "                           for now): context parallelism's whole-sequence fallbacks on the CPU\n"
            "  SIGTERM                  finishes the current step, writes a checkpoint, exits 0\n"
            "  --tp N                   tensor-parallel ranks (Megatron: heads and MLP columns split; N divides heads)\n"
            "  --pp N                   pipeline stages (layers split evenly, or by --pipeline-layers)\n"
            "  --pipeline-layers a,b,.. layers of each stage (uneven split; sums to the model's layers)\n"
            "  --schedule gpipe|1f1b|interleaved  pipeline schedule (default 1f1b)\n"
            "  --vpp V                  model chunks per stage for interleaved 1F1B (default 1; interleaved needs 2+)\n"
            "  --dp N                   data-parallel replicas; launch TP x CP x PP x DP ranks with mpirun\n"
            "  --cp N, --context-parallel-size N  context parallelism: each sequence's positions split over N\n"
            "                           ranks in 2N chunks (causal load balancing); N x 2 divides --model's\n"
            "                           seq_len (Megatron-Core)\n"
            "  --cp-comm-type p2p|all_gather|a2a  context parallelism's attention (Megatron-LM): p2p, ring\n"
            "                           attention, K/V blocks passed around the CP ranks (default); all_gather,\n"
            "                           K/V gathered from every CP rank first; a2a (DeepSpeed-Ulysses), an\n"
            "                           all-to-all gives each rank the whole sequence of 1/N of the heads\n"
            "                           (N divides each TP rank's heads and query groups)\n"
            "  --ep N, --expert-model-parallel-size N  expert parallelism (Megatron-Core): each MoE layer's\n"
            "                           experts spread over N ranks carved out of DP x CP (groups of N\n"
            "                           consecutive ranks of a position's replicas, CP ranks first), tokens sent\n"
            "                           to their experts' ranks by all-to-all; N divides --dp x --cp and\n"
            "                           num_experts; no --grad-compress, --offload-optimizer; under --comm\n"
            "                           nccl its gradients and shards go over NCCL, the tokens' all-to-alls\n"
            "                           over MPI; a checkpoint resumes only at its own EP layout\n"
            "  --zero 0|1|2|3           ZeRO stage: sharded optimizer (1), + gradients (2), + parameters (3)\n"
            "  --sequence-parallel      with --tp: LayerNorms and residuals on each rank's block of the\n"
            "                           micro-batch's tokens, all-gather / reduce-scatter in place of the\n"
            "                           TP all-reduces (Megatron-LM)\n"
            "  --tp-comm-overlap        with --sequence-parallel over MPI: each TP all-gather and reduce-scatter\n"
            "                           runs as a ring, a step at a time beside the GEMM of the block of\n"
            "                           tokens at hand (Megatron-LM's --tp-comm-overlap)\n"
            "  --recompute-granularity full|selective  activation recomputation (Megatron-LM): full keeps\n"
            "                           each recomputed group's input and reruns its forward in the backward;\n"
            "                           selective reruns the attention core (default: none)\n"
            "  --recompute-method uniform|block  full: groups of --recompute-num-layers layers over each\n"
            "                           pipeline chunk (uniform, default), or only its first that many (block)\n"
            "  --recompute-num-layers N full: the group size (uniform) or the count (block); default 1\n"
            "  --moe-aux-loss-coeff X   mixture of experts (the model's num_experts): the weight of the\n"
            "                           load-balancing loss, Megatron-LM's switch loss (default 0)\n"
            "  --grad-reduce fp32|bf16  DP gradient reduction precision: bf16 halves the bytes (default fp32)\n"
            "  --grad-compress none|powersgd:R  PowerSGD rank-R compression of the DP reduction of the\n"
            "                           weight matrices, with error feedback (--dp 2+, ZeRO-0, fp32 reduction)\n"
            "  --overlap-grad-reduce    start the DP gradient reduction in buckets as the last micro-batch's\n"
            "                           backward produces them, overlapped with the rest of the backward\n"
            "                           (ZeRO-0/1, --comm mpi, fp32 reduction; default: one reduction after it)\n"
            "  --bucket-mb X            bucket size for --overlap-grad-reduce, MiB of fp32 gradients (default 40)\n"
            "  --overlap-param-gather   with --zero 1 and --overlap-grad-reduce: the updated parameters'\n"
            "                           all-gather starts in buckets after the optimizer step and the next\n"
            "                           forward waits for each bucket when it first reads it (Megatron-LM)\n"
            "  --offload-optimizer      AdamW and its state (fp32 master, moments) on the host CPU\n"
            "  --comm mpi|nccl          TP, DP/ZeRO and tied-embedding collectives: mpi (default; device\n"
            "                           buffers staged through the host, ranks may share a GPU) or nccl (on\n"
            "                           the GPU, one GPU per rank; --device cuda, fp32 reduction, no\n"
            "                           --grad-compress); pipeline transfers stay on MPI\n"
            "  --run-dir DIR            run tracking: DIR/config.json, metrics.jsonl (per step, with MFU),\n"
            "                           profile.json, checkpoints.json, summary.json (engine/README.md); a DIR\n"
            "                           that holds a run is refused unless --resume (which appends to it)\n"
            "  --peak-tflops X          per-device peak (TFLOP/s) for MFU; default: the datasheet figure of a\n"
            "                           known GPU (H100, H200, A100) in the precision; none on a CPU (null)\n"
            "Megatron-LM's names are read too: --tensor-model-parallel-size (--tp),\n"
            "--pipeline-model-parallel-size (--pp), --virtual-pipeline-model-parallel-size (--vpp),\n"
            "--context-parallel-size (--cp), --micro-batch-size, --global-batch-size, --train-iters (--steps),\n"
            "--lr-warmup-iters (--warmup), --lr-decay-iters (--lr-decay-steps), --clip-grad (--grad-clip),\n"
            "--bf16 and --fp16 (--precision), --use-distributed-optimizer (--zero 1),\n"
            "--override-opt_param-scheduler, --use-checkpoint-opt_param-scheduler\n"
            "exit: 0 ok, 2 bad input, 1 runtime failure, 3 the loss diverged (not finite)\n",
            DTRAIN_DEFAULT_DATA);
}

static int parse_long(const char *flag, const char *v, long lo, long hi, long *out)
{
    char *end;
    long x = strtol(v, &end, 10);
    if (!*v || *end || x < lo || x > hi) {
        fprintf(stderr, "dtrain: %s: '%s' is not a whole number in %ld..%ld\n", flag, v, lo, hi);
        return -1;
    }
    *out = x;
    return 0;
}

static int parse_double(const char *flag, const char *v, double lo, double hi, double *out)
{
    char *end;
    double x = strtod(v, &end);
    if (!*v || *end || !(x >= lo && x <= hi)) {
        fprintf(stderr, "dtrain: %s: '%s' is not a number in %g..%g\n", flag, v, lo, hi);
        return -1;
    }
    *out = x;
    return 0;
}

static int run(int argc, char **argv, comm_ctx *comm);

int main(int argc, char **argv)
{
    comm_ctx comm;
    comm_start(&comm, &argc, &argv);
    int rc = run(argc, argv, &comm);
    comm_finish(&comm);
    return rc;
}

/* "a,b,c" -> counts; returns how many, or -1. */
static int parse_layer_list(const char *v, int *out, int max)
{
    int n = 0;
    const char *p = v;
    while (*p) {
        char *end;
        long x = strtol(p, &end, 10);
        if (end == p || x < 1 || x > 100000 || n == max || (*end && *end != ','))
            return -1;
        out[n++] = (int)x;
        p = *end ? end + 1 : end;
        if (*end && !*p)
            return -1;
    }
    return n;
}

/* Megatron-LM's names for dtrain's flags, so a launch script's arguments read as they are: each
 * is rewritten to dtrain's own (a value-less one to a flag and its value) before parsing. */
static const struct {
    const char *megatron, *dtrain, *value; /* value: what a value-less Megatron flag stands for */
} ALIASES[] = {
    {"--tensor-model-parallel-size", "--tp", NULL},
    {"--pipeline-model-parallel-size", "--pp", NULL},
    {"--virtual-pipeline-model-parallel-size", "--vpp", NULL},
    {"--micro-batch-size", "--micro-batch", NULL},
    {"--global-batch-size", "--global-batch", NULL},
    {"--train-iters", "--steps", NULL},
    {"--lr-warmup-iters", "--warmup", NULL},
    {"--lr-decay-iters", "--lr-decay-steps", NULL},
    {"--override-opt_param-scheduler", "--override-opt-param-scheduler", NULL},
    {"--use-checkpoint-opt_param-scheduler", "--use-checkpoint-opt-param-scheduler", NULL},
    {"--clip-grad", "--grad-clip", NULL},
    {"--bf16", "--precision", "bf16"},
    {"--fp16", "--precision", "fp16"},
    {"--use-distributed-optimizer", "--zero", "1"},
};

/* argv with the aliases rewritten (the array is malloc'd; its strings are argv's or static). */
static char **megatron_names(int argc, char **argv, int *out_argc)
{
    char **out = malloc(((size_t)argc * 2 + 1) * sizeof *out);
    int n = 0;
    for (int i = 0; i < argc; i++) {
        size_t k = 0, count = sizeof ALIASES / sizeof ALIASES[0];
        while (k < count && strcmp(argv[i], ALIASES[k].megatron))
            k++;
        if (i == 0 || k == count) {
            out[n++] = argv[i];
            continue;
        }
        out[n++] = (char *)ALIASES[k].dtrain;
        if (ALIASES[k].value)
            out[n++] = (char *)ALIASES[k].value;
    }
    out[n] = NULL;
    *out_argc = n;
    return out;
}

static int run_flags(int argc, char **argv, comm_ctx *comm);

static int run(int argc, char **argv, comm_ctx *comm)
{
    int n;
    char **args = megatron_names(argc, argv, &n);
    int rc = run_flags(n, args, comm);
    free(args);
    return rc;
}

static int run_flags(int argc, char **argv, comm_ctx *comm)
{
    int dp = 1, tp = 1, pp = 1, cp = 1, ep = 1, n_stage_layers = 0, bucket_given = 0, recompute_method_given = 0;
    static int stage_layers[1024];
    train_options o = {.device = "cpu", .model = "tiny", .data = DTRAIN_DEFAULT_DATA, .micro_batch = 8,
                       .global_batch = 0, .steps = 200, .warmup = -1, .seed = 1, .lr = 1e-3,
                       .weight_decay = 0.1, .grad_clip = 1.0, .precision = KPREC_FP32, .loss_scale = 65536,
                       .loss_scale_window = 1000, .ckpt_keep = 3, .bucket_mb = 40, .vpp = 1, .kill_rank = -1,
                       .comm_timeout_s = 60, .schedule = PIPELINE_1F1B};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long n;
        double x;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--log-crc")) {
            o.log_crc = 1;
            continue;
        } else if (!strcmp(a, "--sequence-parallel")) {
            o.sequence_parallel = 1;
            continue;
        } else if (!strcmp(a, "--tp-comm-overlap")) {
            o.tp_comm_overlap = 1;
            continue;
        } else if (!strcmp(a, "--test-plain-attention")) {
            o.test_plain_attention = 1;
            continue;
        } else if (!strcmp(a, "--resume")) {
            o.resume = 1;
            continue;
        } else if (!strcmp(a, "--no-check-for-nan-in-loss-and-grad")) {
            o.no_nan_check = 1;
            continue;
        } else if (!strcmp(a, "--override-opt-param-scheduler") || !strcmp(a, "--use-checkpoint-opt-param-scheduler")) {
            int from = a[2] == 'o' ? LR_SCHEDULE_OVERRIDE : LR_SCHEDULE_CHECKPOINT;
            if (o.lr_schedule_from && o.lr_schedule_from != from) {
                fprintf(stderr, "dtrain: --override-opt-param-scheduler and --use-checkpoint-opt-param-scheduler "
                                "contradict each other: give one\n");
                return 2;
            }
            o.lr_schedule_from = from;
            continue;
        } else if (!strcmp(a, "--overlap-param-gather")) {
            o.overlap_param_gather = 1;
            continue;
        } else if (!strcmp(a, "--overlap-grad-reduce")) {
            o.overlap_grad_reduce = 1;
            continue;
        } else if (!strcmp(a, "--offload-optimizer")) {
            o.offload_optimizer = 1;
            continue;
        } else if (!strcmp(a, "--ckpt-sync")) {
            o.ckpt_sync = 1;
            continue;
        }
        if (!v) {
            fprintf(stderr, "dtrain: %s needs a value (see --help)\n", a);
            return 2;
        }
        i++;
        if (!strcmp(a, "--device")) {
            if (strcmp(v, "cpu") && strcmp(v, "cuda")) {
                fprintf(stderr, "dtrain: --device: '%s' is not cpu or cuda\n", v);
                return 2;
            }
            o.device = v;
        } else if (!strcmp(a, "--model")) {
            o.model = v;
        } else if (!strcmp(a, "--data")) {
            o.data = v;
        } else if (!strcmp(a, "--micro-batch")) {
            if (parse_long(a, v, 1, 1 << 20, &n)) return 2;
            o.micro_batch = (int)n;
        } else if (!strcmp(a, "--global-batch")) {
            if (parse_long(a, v, 1, 1 << 24, &n)) return 2;
            o.global_batch = (int)n;
        } else if (!strcmp(a, "--steps")) {
            if (parse_long(a, v, 1, 100000000, &n)) return 2;
            o.steps = (int)n;
        } else if (!strcmp(a, "--warmup")) {
            if (parse_long(a, v, 0, 100000000, &n)) return 2;
            o.warmup = (int)n;
        } else if (!strcmp(a, "--lr-decay-steps")) {
            if (parse_long(a, v, 1, 100000000, &n)) return 2;
            o.lr_decay_steps = (int)n;
        } else if (!strcmp(a, "--seed")) {
            if (parse_long(a, v, 0, 2147483647L, &n)) return 2;
            o.seed = (unsigned long long)n;
        } else if (!strcmp(a, "--lr")) {
            if (parse_double(a, v, 0, 10, &x)) return 2;
            o.lr = x;
        } else if (!strcmp(a, "--weight-decay")) {
            if (parse_double(a, v, 0, 10, &x)) return 2;
            o.weight_decay = x;
        } else if (!strcmp(a, "--grad-clip")) {
            if (parse_double(a, v, 0, 1e9, &x)) return 2;
            o.grad_clip = x;
        } else if (!strcmp(a, "--loss-scale")) {
            if (parse_double(a, v, 1, 1e30, &x)) return 2;
            o.loss_scale = x;
        } else if (!strcmp(a, "--loss-scale-window")) {
            if (parse_long(a, v, 1, 100000000, &n)) return 2;
            o.loss_scale_window = (int)n;
        } else if (!strcmp(a, "--inject-overflow")) {
            if (parse_long(a, v, 0, 100000000, &n)) return 2;
            o.inject_overflow_step = (int)n;
        } else if (!strcmp(a, "--inject-nan")) {
            if (parse_long(a, v, 0, 100000000, &n)) return 2;
            o.inject_nan_step = (int)n;
        } else if (!strcmp(a, "--precision")) {
            if (!strcmp(v, "fp32")) o.precision = KPREC_FP32;
            else if (!strcmp(v, "bf16")) o.precision = KPREC_BF16;
            else if (!strcmp(v, "fp16")) o.precision = KPREC_FP16;
            else {
                fprintf(stderr, "dtrain: --precision: '%s' is not fp32, bf16 or fp16\n", v);
                return 2;
            }
        } else if (!strcmp(a, "--log-json")) {
            o.log_json = v;
        } else if (!strcmp(a, "--profile")) {
            o.profile = v;
        } else if (!strcmp(a, "--dump-params")) {
            o.dump_params = v;
        } else if (!strcmp(a, "--test-kill") || !strcmp(a, "--test-hang")) {
            static char marker[4096];
            int r, st, used = 0;
            if (sscanf(v, "%d:%d:%n", &r, &st, &used) != 2 || used == 0 || r < 0 || st < 1 || !v[used] ||
                strlen(v + used) >= sizeof marker) {
                fprintf(stderr, "dtrain: %s: '%s' is not RANK:STEP:MARKER_FILE\n", a, v);
                return 2;
            }
            snprintf(marker, sizeof marker, "%s", v + used);
            o.kill_rank = r;
            o.kill_step = st;
            o.kill_marker = marker;
            o.kill_signal = !strcmp(a, "--test-hang") ? SIGSTOP : SIGKILL;
        } else if (!strcmp(a, "--comm-timeout")) {
            if (parse_double(a, v, 0.1, 1e6, &x)) return 2;
            o.comm_timeout_s = x;
        } else if (!strcmp(a, "--rank-params")) {
            o.rank_params = v;
        } else if (!strcmp(a, "--cp") || !strcmp(a, "--context-parallel-size")) {
            if (parse_long(a, v, 1, 1024, &n)) return 2;
            cp = (int)n;
        } else if (!strcmp(a, "--cp-comm-type")) {
            if (!strcmp(v, "p2p") || !strcmp(v, "all_gather") || !strcmp(v, "a2a")) {
                o.cp_all_gather = !strcmp(v, "all_gather");
                o.cp_a2a = !strcmp(v, "a2a");
            } else {
                fprintf(stderr, "dtrain: --cp-comm-type: '%s' is not p2p, all_gather or a2a%s\n", v,
                        !strcmp(v, "a2a+p2p") ? " (Megatron-Core's hierarchical a2a+p2p is not built)" : "");
                return 2;
            }
        } else if (!strcmp(a, "--ep") || !strcmp(a, "--expert-model-parallel-size")) {
            if (parse_long(a, v, 1, 1024, &n)) return 2;
            ep = (int)n;
        } else if (!strcmp(a, "--tp")) {
            if (parse_long(a, v, 1, 1024, &n)) return 2;
            tp = (int)n;
        } else if (!strcmp(a, "--pp")) {
            if (parse_long(a, v, 1, 1024, &n)) return 2;
            pp = (int)n;
        } else if (!strcmp(a, "--vpp")) {
            if (parse_long(a, v, 1, 64, &n)) return 2;
            o.vpp = (int)n;
        } else if (!strcmp(a, "--pipeline-layers")) {
            n_stage_layers = parse_layer_list(v, stage_layers, 1024);
            if (n_stage_layers < 1) {
                fprintf(stderr, "dtrain: --pipeline-layers: '%s' is not a list of positive layer counts like 3,5\n", v);
                return 2;
            }
        } else if (!strcmp(a, "--dp")) {
            if (parse_long(a, v, 1, 1 << 20, &n)) return 2;
            dp = (int)n;
        } else if (!strcmp(a, "--grad-compress")) {
            char why[160];
            if (powersgd_parse(v, &o.grad_compress_rank, why, sizeof why) != 0) {
                fprintf(stderr, "dtrain: --grad-compress: %s\n", why);
                return 2;
            }
        } else if (!strcmp(a, "--comm")) {
            if (strcmp(v, "mpi") && strcmp(v, "nccl")) {
                fprintf(stderr, "dtrain: --comm: '%s' is not mpi or nccl\n", v);
                return 2;
            }
            o.comm_nccl = !strcmp(v, "nccl");
        } else if (!strcmp(a, "--grad-reduce")) {
            if (strcmp(v, "fp32") && strcmp(v, "bf16")) {
                fprintf(stderr, "dtrain: --grad-reduce: '%s' is not fp32 or bf16\n", v);
                return 2;
            }
            o.grad_reduce_bf16 = !strcmp(v, "bf16");
        } else if (!strcmp(a, "--recompute-granularity")) {
            if (strcmp(v, "full") && strcmp(v, "selective")) {
                fprintf(stderr, "dtrain: --recompute-granularity: '%s' is not full or selective\n", v);
                return 2;
            }
            o.recompute = !strcmp(v, "full") ? GPT_RECOMPUTE_FULL : GPT_RECOMPUTE_SELECTIVE;
        } else if (!strcmp(a, "--recompute-method")) {
            if (strcmp(v, "uniform") && strcmp(v, "block")) {
                fprintf(stderr, "dtrain: --recompute-method: '%s' is not uniform or block\n", v);
                return 2;
            }
            o.recompute_block = !strcmp(v, "block");
            recompute_method_given = 1;
        } else if (!strcmp(a, "--recompute-num-layers")) {
            if (parse_long(a, v, 1, 1024, &n)) return 2;
            o.recompute_layers = (int)n;
        } else if (!strcmp(a, "--moe-aux-loss-coeff")) {
            if (parse_double(a, v, 0, 1e3, &x)) return 2;
            o.moe_aux_loss_coeff = x;
        } else if (!strcmp(a, "--zero")) {
            if (parse_long(a, v, 0, 3, &n)) return 2;
            o.zero = (int)n;
        } else if (!strcmp(a, "--schedule")) {
            int kind = pipeline_kind_from_name(v);
            if (kind < 0) {
                fprintf(stderr, "dtrain: --schedule: '%s' is not gpipe, 1f1b or interleaved\n", v);
                return 2;
            }
            o.schedule = kind;
        } else if (!strcmp(a, "--ckpt-dir")) {
            o.ckpt_dir = v;
        } else if (!strcmp(a, "--ckpt-every")) {
            if (parse_long(a, v, 1, 100000000, &n)) return 2;
            o.ckpt_every = (int)n;
        } else if (!strcmp(a, "--ckpt-keep")) {
            if (parse_long(a, v, 1, 1000000, &n)) return 2;
            o.ckpt_keep = (int)n;
        } else if (!strcmp(a, "--run-dir")) {
            o.run_dir = v;
        } else if (!strcmp(a, "--peak-tflops")) {
            if (parse_double(a, v, 1e-9, 1e9, &x)) return 2;
            o.peak_tflops = x;
        } else if (!strcmp(a, "--bucket-mb")) {
            if (parse_double(a, v, 1e-6, 1e6, &x)) return 2;
            o.bucket_mb = x;
            bucket_given = 1;
        } else if (!strcmp(a, "--stop-after")) {
            if (parse_long(a, v, 1, 100000000, &n)) return 2;
            o.stop_after = (int)n;
        } else {
            fprintf(stderr, "dtrain: unknown option %s (see --help)\n", a);
            return 2;
        }
    }
    if (o.global_batch == 0)
        o.global_batch = o.micro_batch;
    if (o.global_batch % o.micro_batch) {
        fprintf(stderr, "dtrain: --global-batch %d is not a multiple of --micro-batch %d\n", o.global_batch,
                o.micro_batch);
        return 2;
    }
    if (o.warmup < 0)
        o.warmup = o.steps / 10;
    char overlap_why[256];
    if (o.overlap_param_gather && dp_param_gather_overlap_applies(o.zero, o.overlap_grad_reduce, o.comm_nccl,
                                                                  o.offload_optimizer, overlap_why,
                                                                  sizeof overlap_why) != 0) {
        fprintf(stderr, "dtrain: %s\n", overlap_why);
        return 2;
    }
    if (o.tp_comm_overlap && (!o.sequence_parallel || o.comm_nccl)) {
        fprintf(stderr, "dtrain: --tp-comm-overlap overlaps the sequence-parallel all-gathers and reduce-scatters "
                        "over MPI: it needs --sequence-parallel%s\n", o.comm_nccl ? ", not --comm nccl" : "");
        return 2;
    }
    if (ep > 1 && (o.grad_compress_rank || o.offload_optimizer)) {
        /* the expert tensors differ between EP ranks: each of these would treat the flat buffer as
         * one replica's over the whole DP group (matrices, the host optimizer's shard) */
        fprintf(stderr, "dtrain: --expert-model-parallel-size %d: expert parallelism reduces its gradients "
                        "compressed by precision alone (fp32 or bf16), for now: not with %s\n", ep,
                o.grad_compress_rank ? "--grad-compress" : "--offload-optimizer");
        return 2;
    }
    if (o.sequence_parallel && tp < 2) {
        fprintf(stderr, "dtrain: --sequence-parallel splits the tokens over the TP ranks: it needs --tp 2 or more\n");
        return 2;
    }
    if ((recompute_method_given || o.recompute_layers) && o.recompute != GPT_RECOMPUTE_FULL) {
        fprintf(stderr, "dtrain: --recompute-method and --recompute-num-layers apply to --recompute-granularity "
                        "full only\n");
        return 2;
    }
    if (!o.recompute_layers)
        o.recompute_layers = 1;
    if (o.zero >= 3 && dp > 1 && o.recompute == GPT_RECOMPUTE_FULL && !o.recompute_block &&
        o.recompute_layers > DP_WINDOWS) {
        fprintf(stderr, "dtrain: --zero 3 keeps a recomputed group's gathered layers until their backward: "
                        "--recompute-num-layers %d is more than the %d it holds (use %d or fewer, or "
                        "--recompute-method block)\n", o.recompute_layers, DP_WINDOWS, DP_WINDOWS);
        return 2;
    }
    if (o.grad_compress_rank && (dp < 2 || o.zero != 0 || o.grad_reduce_bf16)) {
        fprintf(stderr, "dtrain: --grad-compress powersgd:%d compresses the DP all-reduce: it needs --dp 2 or more "
                        "(got %d), --zero 0 (got %d) and --grad-reduce fp32 (got %s)\n",
                o.grad_compress_rank, dp, o.zero, o.grad_reduce_bf16 ? "bf16" : "fp32");
        return 2;
    }
    if (bucket_given && !o.overlap_grad_reduce) {
        fprintf(stderr, "dtrain: --bucket-mb sizes the buckets of --overlap-grad-reduce, which is not given\n");
        return 2;
    }
    char why[256];
    if (o.overlap_grad_reduce &&
        dp_overlap_applies(o.zero, o.grad_reduce_bf16, o.grad_compress_rank, o.comm_nccl, why, sizeof why) != 0) {
        fprintf(stderr, "dtrain: %s\n", why);
        return 2;
    }
#ifdef DTRAIN_NCCL_STANDIN
    /* the test build whose NCCL is MPI on host memory (tests/engine/nccl_standin) runs on any device */
    int nccl_needs_cuda = 0;
#else
    int nccl_needs_cuda = strcmp(o.device, "cuda") != 0;
#endif
    if (o.comm_nccl && (nccl_needs_cuda || o.grad_reduce_bf16 || o.grad_compress_rank)) {
        fprintf(stderr, "dtrain: --comm nccl runs the collectives on the GPU: it needs --device cuda (got %s), "
                        "--grad-reduce fp32 (got %s) and no --grad-compress (bf16 and PowerSGD reductions run on "
                        "the host: --comm mpi)\n", o.device, o.grad_reduce_bf16 ? "bf16" : "fp32");
        return 2;
    }
    if (o.inject_nan_step && o.zero == 3) {
        fprintf(stderr, "dtrain: --inject-nan writes into layer 0's weights, which ZeRO-3 holds only inside "
                        "its passes: not with --zero 3\n");
        return 2;
    }
    if (o.lr_schedule_from && !o.resume) {
        fprintf(stderr, "dtrain: --override-opt-param-scheduler and --use-checkpoint-opt-param-scheduler choose "
                        "between a checkpoint's learning-rate schedule and this run's: they need --resume\n");
        return 2;
    }
    if ((o.resume || o.ckpt_every) && !o.ckpt_dir) {
        fprintf(stderr, "dtrain: --resume and --ckpt-every need --ckpt-dir\n");
        return 2;
    }
    char err[256];
    if (n_stage_layers && n_stage_layers != pp) {
        fprintf(stderr, "dtrain: --pipeline-layers gives %d stages but --pp is %d\n", n_stage_layers, pp);
        return 2;
    }
    o.stage_layers = n_stage_layers ? stage_layers : NULL;
    if (comm_layout_cp(comm, tp, cp, pp, dp, err, sizeof err) != 0 || comm_layout_ep(comm, ep, err, sizeof err) != 0) {
        if (comm->world_rank == 0)
            fprintf(stderr, "dtrain: %s\n", err);
        return 2;
    }
    o.comm = comm;
    comm_set_timeout(comm, o.comm_timeout_s);
    if (o.comm_nccl && comm_nccl_select_device(comm, err, sizeof err) != 0) { /* before the model allocates */
        if (comm->world_rank == 0)
            fprintf(stderr, "dtrain: %s\n", err);
        return 2;
    }
    if (o.run_dir) {
        /* rank 0 keeps the record; every rank stops alike when it cannot */
        char rerr[4600] = "";
        if (comm->world_rank == 0)
            o.run = run_dir_open(o.run_dir, o.resume, argc, argv, rerr, sizeof rerr);
        if (comm_allreduce_max_int(comm->world, comm->world_rank == 0 && !o.run)) {
            if (comm->world_rank == 0)
                fprintf(stderr, "dtrain: %s\n", rerr);
            return 2;
        }
    }
    return train_run(&o);
}
