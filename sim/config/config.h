/* Scenario, platform and calibration: the validated, in-memory form of the three JSON
 * formats of DESIGN.md. Everything downstream (cost model, memory model, workload, replays)
 * reads these structs, never JSON. */
#ifndef DTSIM_SIM_CONFIG_H
#define DTSIM_SIM_CONFIG_H

#include <stddef.h>
#include "oplist.h"
#include "rank_grid.h"
#include "schedule.h"

#define CFG_NAME_MAX 128
#define CFG_PATH_MAX 4096
#define GRAD_INT8_BLOCK 2048                 /* elements sharing one fp32 scale in int8 reduction */

typedef enum { PREC_FP32 = 0, PREC_TF32, PREC_FP16, PREC_BF16, PREC_FP8, PREC_COUNT } precision_kind;
/* How FP8 scales are found (Megatron-LM's --fp8-recipe, Transformer Engine's recipes): delayed
 * (the default) from an amax history, tensorwise from the tensor itself (current scaling: one
 * more pass over it), mxfp8 and blockwise per block inside the cast (engine/oplist.c, fp8_quantize). */
typedef enum { FP8_RECIPE_DELAYED = 0, FP8_RECIPE_TENSORWISE, FP8_RECIPE_MXFP8, FP8_RECIPE_BLOCKWISE } fp8_recipe_kind;
const char *precision_name(precision_kind p);           /* "fp32", "tf32", "fp16", "bf16", "fp8" */
int precision_from_name(const char *name);              /* -1 if unknown */

typedef enum { RECOMPUTE_NONE = 0, RECOMPUTE_SELECTIVE, RECOMPUTE_FULL } recompute_kind;
typedef enum { TOPO_RAIL_OPTIMIZED_FAT_TREE = 0, TOPO_FAT_TREE, TOPO_SINGLE_SWITCH } topology_kind;
typedef enum { OPTIMIZER_ADAM = 0, OPTIMIZER_SGD } optimizer_kind;
/* Gradient compression of the DP reduction beyond a narrower dtype (parallel.grad_compression) */
typedef enum { GRAD_COMPRESSION_NONE = 0, GRAD_COMPRESSION_TOPK, GRAD_COMPRESSION_POWERSGD } grad_compression_kind;
/* Where ZeRO-Offload / ZeRO-Infinity keeps optimizer states or parameters */
typedef enum { OFFLOAD_NONE = 0, OFFLOAD_CPU, OFFLOAD_NVME } offload_device;
/* Whose engine runs the pipeline schedule (parallel.pipeline_engine): Megatron-LM's (batched
 * send/recv pairs) or DeepSpeed's PipelineEngine (TrainSchedule's steps, each send and receive
 * a blocking call of its own: sim/step/workload.c, deepspeed_schedule). */
typedef enum { PIPELINE_ENGINE_MEGATRON = 0, PIPELINE_ENGINE_DEEPSPEED } pipeline_engine_kind;
/* ZeRO-3 as PyTorch FSDP2 runs it, as torchtitan sets it (parallel.fsdp_reshard_after_forward,
 * its --parallelism.fsdp_reshard_after_forward): whether a forward lets its layers go (always,
 * never, or torchtitan's "default": never under pipeline parallelism, always without), and under
 * pipeline parallelism PyTorch's pipelining, which keeps them after every backward and reduces the
 * gradients once a step. Unset: Megatron-FSDP's and DeepSpeed stage 3's rule, a gather before
 * every pass and a reduction after every backward. sim/step/zero3.h. */
typedef enum {
    FSDP_RESHARD_UNSET = 0,
    FSDP_RESHARD_ALWAYS,
    FSDP_RESHARD_NEVER,
    FSDP_RESHARD_DEFAULT
} fsdp_reshard_kind;
/* Which framework ran the step (parallel.framework): it decides the defaults of the keys above
 * and of grad_reduce_dtype's "auto", and which ZeRO stages and pipelines exist. Unset: Megatron-LM's
 * defaults with whatever pipeline_engine and fsdp_reshard_after_forward say (as before the key).
 *  - megatron: Megatron-LM / Megatron-Core (ZeRO-3 is Megatron-FSDP's rule);
 *  - deepspeed: DeepSpeed's engine (pipeline_engine deepspeed; stage 3 with its stage3_* keys);
 *  - fsdp: PyTorch FSDP1 (FullyShardedDataParallel) as Composer / llm-foundry and Hugging Face
 *    Accelerate run it: NO_SHARD = ZeRO 0, FULL_SHARD = ZeRO-3 with FSDP's unit resharded after
 *    forward (fsdp_reshard_after_forward always), SHARD_GRAD_OP = ZeRO-3 with never; no pipeline;
 *  - torchtitan: PyTorch FSDP2 (fully_shard) and PyTorch's pipelining as torchtitan runs them
 *    (fsdp_reshard_after_forward default; gradients reduced in fp32);
 *  - nanotron: Hugging Face's nanotron (the Ultra-Scale Playbook's runs): ZeRO 0 as PyTorch DDP
 *    (25 MB buckets, its fp32 hook in the last micro-batch's backward), ZeRO 1 as its
 *    ZeroDistributedOptimizer with fp32 accumulation: no DDP, one all-reduce of the whole fp32
 *    gradient after the backward, the optimizer on this rank's shard, then a synchronous
 *    all-gather of the parameters (nanotron's trainer.py and optim/zero.py); 1F1B. */
typedef enum {
    FRAMEWORK_UNSET = 0,
    FRAMEWORK_MEGATRON,
    FRAMEWORK_DEEPSPEED,
    FRAMEWORK_FSDP,
    FRAMEWORK_TORCHTITAN,
    FRAMEWORK_NANOTRON
} framework_kind;
const char *framework_kind_name(framework_kind f); /* "megatron", ...; "unset" */
const char *pipeline_engine_name(pipeline_engine_kind e); /* "megatron", "deepspeed" */
const char *moe_token_dispatcher_name(int flex);          /* "alltoall", "flex" */
const char *fsdp_reshard_name(fsdp_reshard_kind r);       /* "always", "never", "default"; "unset" */
/* PyTorch's FSDP runs it (framework fsdp or torchtitan): what Megatron-LM cannot express */
static inline int framework_is_pytorch_fsdp(framework_kind f)
{
    return f == FRAMEWORK_FSDP || f == FRAMEWORK_TORCHTITAN;
}
/* nanotron's ZeRO-1 (config.h, framework nanotron): the whole gradient all-reduced, not reduce-scattered */
static inline int framework_all_reduces_zero1(framework_kind f, int zero_stage)
{
    return f == FRAMEWORK_NANOTRON && zero_stage == 1;
}

/* ---- platform ------------------------------------------------------------------------ */
/* What runs the collectives (sim/step/collective.h): NCCL (GPU platforms, the default) or MPI (the
 * CPU engine's ranks) */
typedef enum { COLL_LIBRARY_NCCL = 0, COLL_LIBRARY_MPI } coll_library;
/* The host CPU's vendor, which NCCL's tuner reads (src/graph/tuning.cc: the network post
 * overhead, the LL protocol's bandwidth cap across nodes) */
typedef enum { CPU_VENDOR_OTHER = 0, CPU_VENDOR_INTEL, CPU_VENDOR_AMD } cpu_vendor_kind;

typedef struct {
    char name[CFG_NAME_MAX];
    struct {
        char name[CFG_NAME_MAX];
        double memory_gib;
        double hbm_bandwidth_gbs;            /* GB/s (1e9 B/s) */
        double peak_tflops[PREC_COUNT];      /* dense peak per precision; 0 = not supported */
    } gpu;
    struct {
        int gpus;                            /* rank slots: GPUs, one rank each */
        /* The compute devices (GPUs, or the CPU cores of a CPU engine run) the gpus slots share;
         * = gpus unless the ranks on a node outnumber its devices (several ranks per GPU over
         * the host-staged MPI backend, or more CPU ranks than cores). See cost.h. */
        int compute_devices;
        double nvlink_bandwidth_gbs;         /* per GPU, per direction, GB/s */
        double nvlink_latency_us;
        int nics;
        double nic_bandwidth_gbps;           /* per NIC, per direction, Gb/s */
        double pcie_bandwidth_gbs;           /* host <-> one GPU, per direction, GB/s */
        double host_memory_bandwidth_gbs;    /* the node's CPU DRAM bandwidth, GB/s (0 = not given) */
        double nvme_read_gbs, nvme_write_gbs; /* the node's local NVMe, GB/s (0 = not given) */
        int nvls;                            /* NVLink SHARP: the NVSwitch reduces and multicasts
                                                (Hopper and newer; NCCL's NVLS, NVLSTree) */
        cpu_vendor_kind cpu_vendor;          /* "intel", "amd", "other" (default) */
    } node;
    struct {
        int nodes;
        topology_kind topology;
        int tiers;                           /* 1 (single switch), 2 (leaf-spine), 3 (+core) */
        int leaf_radix;                      /* ports of a leaf switch toward nodes */
        double oversubscription;             /* leaf down:up bandwidth ratio, >= 1 */
        double link_latency_us;
        double switch_latency_us;
        int sharp;                           /* in-network reduction in the switches (InfiniBand
                                                SHARP; NCCL's CollNet) */
        int adaptive_routing;                /* the switches spread each flow's packets over every
                                                uplink (InfiniBand adaptive routing): a leaf's (and a
                                                pod's) uplinks act as one bundle; else one uplink per
                                                destination (d-mod-k static routing), where flows to
                                                destinations equal mod the uplinks collide */
    } network;
    /* The scenario's parallel.nccl_algo, as NCCL_ALGO forces it, per collective kind
     * (ALGO_AUTO: NCCL's own choice); copied here by the scenario loader because the collective
     * model reads the platform. */
    int nccl_algo[COLL_KIND_COUNT];
    /* parallel.nccl_proto likewise, as NCCL_PROTO forces a protocol (0: NCCL's choice, as a
     * zeroed struct has it; else 1 + a coll_proto of sim/step/collective.h) */
    int nccl_proto[COLL_KIND_COUNT];
    coll_library collective_library;         /* "nccl" (default) or "mpi" */
    struct {
        double checkpoint_write_gbs;
        double checkpoint_read_gbs;
        double dataset_read_gbs;             /* training data, aggregate over the cluster (default:
                                                checkpoint_read_gbs) */
    } storage;
    char calibration[CFG_PATH_MAX];          /* default calibration path ("" if none) */
    double price_per_gpu_hour;               /* what one GPU costs an hour, in the user's currency
                                                (0: unknown; time_to_train then has no cost) */
} platform_config;

/* ---- calibration --------------------------------------------------------------------- */
typedef struct { double m, n, k, tflops; } gemm_point;

typedef struct {
    int count;
    gemm_point *points;                      /* owned */
    double *log2_mnk;                        /* owned, 3 a point: log2 of m, n, k, which every lookup
                                                needs (tables run to thousands of points); NULL in a
                                                table built by hand: the lookup takes the logs itself */
    unsigned long long id;                   /* unique to each table parsed in this process (0: built
                                                by hand): what the lookup's memo is keyed by */
} gemm_table;

typedef struct {
    int present;
    double alpha_us;                         /* fixed cost per collective call */
    double busbw_gbs;                        /* nccl-tests bus bandwidth, GB/s */
} coll_fit;

/* What a collective fit was measured through: the node's NVLink as a ring (or any algorithm that
 * moves every byte over the links), the network, or NVLink SHARP (NVLS: the NVSwitches reduce
 * and multicast, so its bus bandwidth can pass the links' own; read only where platform.node.nvls
 * says the node has it) */
typedef enum { LINK_NVLINK = 0, LINK_NETWORK = 1, LINK_NVLS = 2, LINK_CLASS_COUNT } link_class;

/* Fused attention's measured speed: a table by shape, or one efficiency. */
#define ATTENTION_TABLE_MAX 128
typedef struct {
    double efficiency;                       /* fraction of the precision's peak (0 = unknown) */
    int points;                              /* entries of table (0 = none) */
    /* tflops: the forward's rate (4 B T^2 C FLOPs over its time); tflops_backward: the
     * backward's (twice the FLOPs over its time), 0 where not measured: then the forward's;
     * batch: the (sequence, head) pairs of the call, B x heads (0: not recorded), which sets how
     * much of the device one call fills; tagged: 1 where the row says which precision it ran in */
    struct {
        double seq, head_dim, tflops, tflops_backward, batch;
        int tagged;
        precision_kind precision;
    } table[ATTENTION_TABLE_MAX];
} attention_calibration;

/* Megatron-LM's --attention-backend for fused attention: flash (the flash-attn library's kernels)
 * or fused (Transformer Engine's FusedAttention, cuDNN's kernels; what TE picks on Hopper when
 * both could run). */
typedef enum { ATTN_BACKEND_FLASH = 0, ATTN_BACKEND_FUSED = 1, ATTN_BACKENDS } attention_backend;

typedef struct {
    char device[512];                        /* what was measured, with its details (dtcal writes them) */
    char source[CFG_NAME_MAX];               /* measured | datasheet | nccl-tests */
    char date[CFG_NAME_MAX];
    char host[CFG_NAME_MAX];
    gemm_table gemm[PREC_COUNT];             /* empty table: roofline with default efficiency */
    double op_gbs[OPCLASS_COUNT];            /* achieved bandwidth of memory-bound ops, GB/s (0 = unknown: use HBM x 0.7) */
    double op_gbs_backward[OPCLASS_COUNT];   /* the same of their backward kernels, in the op list's byte count
                                                (twice the forward's); 0 = unknown: op_gbs */
    /* Fused attention per backend (ATTN_BACKEND_*): ops.attention (flash) and ops.attention_fused
     * (fused). A backend with neither figure runs at flash's. */
    attention_calibration attention[ATTN_BACKENDS];
    double launch_overhead_us;
    double host_issue_us;       /* the host's time to issue one kernel from eager PyTorch (Python,
                                   dispatcher, autograd and the launch); 0: not measured, no host
                                   model (sim/step/host_issue.h) */
    double overlap_slowdown;                 /* a GEMM's time beside a running collective over its
                                                time alone (>= 1; 1 when absent: not measured) */
    double compute_variability_cv;           /* devices' sustained speed across devices of this kind,
                                                standard deviation / mean (dtcal variability); < 0:
                                                not in the file, the documented default (cost.h) */
    coll_fit collectives[LINK_CLASS_COUNT][COLL_KIND_COUNT];
} calibration_config;

/* ---- scenario ------------------------------------------------------------------------ */
typedef struct {
    int node, nic;
    double bandwidth_factor;
    double flap_period_s, flap_down_s;   /* 0: degraded all the time; else down (at the factor)
                                            for the last flap_down_s of every flap_period_s */
} degraded_link;
typedef struct { int gpu; double slowdown; } straggler;

typedef struct {
    char name[CFG_NAME_MAX];
    char path[CFG_PATH_MAX];                 /* the scenario file ("" when built in memory) */
    platform_config platform;
    calibration_config calibration;
    struct {
        long long num_layers, hidden_size, num_attention_heads, ffn_hidden_size,
                  seq_length, vocab_size, num_query_groups, num_experts;
        long long kv_channels;               /* Megatron-LM's --kv-channels (Hugging Face head_dim): one
                                                attention head's width; 0: hidden_size / heads */
        int moe_router_topk;
        long long moe_router_num_groups;     /* Megatron-Core's group-limited routing: the experts in
                                                this many equal groups (0: none) ... */
        int moe_router_group_topk;           /* ... a token's experts from this many of them
                                                (DeepSeek-V3's node-limited routing: groups = the EP
                                                group's nodes) */
        int swiglu;
        attention_impl attention;            /* "attention": "flash" (default: what Megatron-Core runs
                                                today) | "unfused" (2021-2023 Megatron/DeepSpeed runs) */
        attention_backend attention_backend; /* "attention_backend" (Megatron-LM's --attention-backend)
                                                of fused attention: "flash" (default) | "fused" */
        double moe_expert_capacity_factor;   /* Megatron's --moe-expert-capacity-factor: an expert
                                                takes at most this times its even share of tokens and
                                                drops the rest (0: dropless, Megatron's default) */
        int moe_pad_expert_input_to_capacity;/* and pads every expert to that capacity */
        double moe_load_imbalance;           /* tokens of the busiest EP rank over the mean (>= 1);
                                                0: the sampling floor of a balanced router (workload_costs.c) */
        int rmsnorm;                         /* normalization: "LayerNorm" (0) | "RMSNorm" (1, no bias);
                                                default RMSNorm with swiglu, else LayerNorm */
        int rope;                            /* position_embedding_type: "learned_absolute" (0: a
                                                seq_length x hidden table) | "rope" (1: q and k turned
                                                in every layer); default rope with swiglu */
        int untie_embeddings;                /* untie_embeddings_and_output_weights (Megatron's name;
                                                Llama): the LM head is its own matrix, so there is
                                                no embedding-gradient all-reduce between the ends */
        int cross_entropy_loss_fusion;       /* Megatron-LM's --cross-entropy-loss-fusion (default
                                                off): the loss in one fused pass over the logits,
                                                not the fp32 vocab-parallel path (workload_costs.c) */
        int cross_entropy_fusion_impl;       /* --cross-entropy-fusion-impl: 0 native (Megatron's
                                                jit-fused functions), 1 te (one pass over the
                                                logits, as dtrain's own kernel) */
    } model;
    struct {
        long long global_batch_size, micro_batch_size;
        precision_kind precision;
        recompute_kind recompute;
        /* Megatron-LM's --recompute-method and --recompute-num-layers, for full recomputation:
         * uniform groups of recompute_num_layers layers over each chunk (each group keeps its
         * input; the backward reruns the group), or block: the first recompute_num_layers layers
         * of each chunk recomputed one by one, the others keep their activations. */
        int recompute_block;                 /* 0 uniform (default), 1 block */
        long long recompute_num_layers;      /* default 1 */
        /* Megatron-LM's --distribute-saved-activations (full recomputation, TP > 1): each kept
         * layer input is split over the TP ranks and all-gathered before its re-run; no effect
         * with sequence parallelism, whose inputs are already split (Megatron-LM turns it off) */
        int distribute_saved_activations;
        optimizer_kind optimizer;
        int activation_bytes;                /* bytes an activation element is stored in; 0: the
                                                precision's (scenario_activation_bytes) */
        fp8_recipe_kind fp8_recipe;          /* Megatron-LM's --fp8-recipe, with precision fp8 */
        double tokens;                       /* token budget for time_to_train (0 = unset); also set
                                                from Megatron-LM's train_iters (x global batch x
                                                seq_length) or train_samples (x seq_length) */
        long long train_iters, train_samples; /* as given (0 = not given) */
        struct {                             /* training.data_loader (absent: input is free) */
            int present;
            double sample_bytes;             /* bytes read from storage per sample */
            double decode_ms_per_sample;     /* CPU time to decode one sample, one worker */
            int workers;                     /* loader worker processes per reading rank */
            int prefetch_batches;            /* micro-batches loaded ahead of use (queue depth) */
            double cv;                       /* coefficient of variation of a micro-batch's load time */
        } data_loader;
    } training;
    struct {
        int tp, pp, dp, vpp, cp, ep;
        int etp;                             /* expert_tensor_parallel_size (Megatron-Core's MoE
                                                parallel folding): the experts' own TP, TP itself
                                                (the default) or 1; EP then spans TP x CP x DP / ETP */
        int sequence_parallel;
        int tp_comm_overlap;                 /* Megatron's --tp-comm-overlap (needs SP): each SP
                                                all-gather / reduce-scatter runs in chunks beside the
                                                GEMM it feeds or follows */
        int tp_comm_overlap_chunks;          /* chunks of that pipelining (4) */
        int overlap_moe_a2a;                 /* overlap_moe_expert_parallel_comm (Megatron-Core's
                                                --overlap-moe-expert-parallel-comm, combined 1F1B):
                                                a backward and the next forward of a stage run as
                                                one pass, each one's EP all-to-alls beside the
                                                other's compute (sim/step/moe_overlap.h) */
        int overlap_param_gather;            /* Megatron's --overlap-param-gather (ZeRO-1/2 with
                                                overlap_grad_reduce): the updated parameters'
                                                all-gather runs beside the next step's forward */
        int moe_flex_dispatcher;             /* moe_token_dispatcher_type: "alltoall" (0, NCCL's
                                                all-to-all, a token's every copy sent on its own) |
                                                "flex" (1: DeepEP / HybridEP, a token sent once to
                                                each node that holds one of its experts, fanned out
                                                over NVLink there; collective.h) */
        cp_comm_kind cp_comm;                /* cp_comm_type: "p2p" (Megatron-Core's default: ring
                                                attention), "all_gather", "a2a" (Ulysses) */
        int zero_stage;
        pipeline_kind schedule;
        int overlap_grad_reduce;
        int overlap_p2p_comm;                /* 1: pipeline sends run beside compute; 0: a stage's
                                                next pass waits for its last send (blocking) */
        pipeline_engine_kind pipeline_engine;
        fsdp_reshard_kind fsdp_reshard_after_forward; /* ZeRO-3 as FSDP2 runs it (above) */
        framework_kind framework;            /* whose defaults (above); unset: Megatron-LM's */
        int scatter_gather_p2p;              /* 1 (default): without SP each TP rank sends 1/TP of
                                                the activation and the receivers all-gather it over
                                                NVLink; 0: each sends all of it */
        double bucket_size_mb;               /* 0: the framework's default (params_dp_bucket_bytes) */
        double grad_reduce_bytes;            /* DP gradient reduction, bytes per element: 4 fp32,
                                                2 bf16/fp16, 1 + 4/GRAD_INT8_BLOCK int8 (a fp32 scale
                                                per block), 0 the training precision's ("auto") */
        int grad_reduce_int8;                /* 1: int8 quantized (reduced in fp32 after a
                                                quantized all-to-all, as ZeRO++'s qgZ) */
        grad_compression_kind grad_compression;
        double topk_ratio;                   /* top-k: fraction of the gradient's elements sent */
        int powersgd_rank;                   /* PowerSGD: rank r of the P and Q factors */
        offload_device offload_optimizer;    /* ZeRO-Offload: optimizer states and step on the host */
        offload_device offload_parameters;   /* ZeRO-Infinity: fp16 parameters too (needs zero_stage 3) */
        /* ZeRO-3 (DeepSpeed's names and units, elements; defaults DeepSpeed's; sim/step/zero3.h) */
        double stage3_prefetch_bucket_size;  /* fetched ahead of use (5e7) */
        double stage3_param_persistence_threshold; /* smaller tensors stay whole (1e5) */
        double stage3_max_live_parameters;   /* gathered at once at most (1e9) */
        double stage3_max_reuse_distance;    /* kept, not released, when used again within (1e9) */
        double reduce_bucket_size;           /* gradient elements per reduce-scatter (5e8) */
        int stage3_list_collectives;         /* DeepSpeed <= 0.5.4: an all-gather a parameter into a
                                                list, one copy a rank (false) */
        int pipeline_layers_count;           /* 0 = equal split */
        int *pipeline_layers;                /* owned, one per stage */
    } parallel;
    struct {
        double gpu_mtbf_hours, node_mtbf_hours, weibull_shape;
        double detect_s, restart_s, checkpoint_interval_s;
        double restart_per_node_s;               /* restart time added per node of the job (launch
                                                    and communicator set-up growing with scale) */
        int checkpoint_async;
        double horizon_days;
        unsigned long long seed;
        int degraded_count; degraded_link *degraded;   /* owned */
        int straggler_count; straggler *stragglers;    /* owned */
        int step_failure;                               /* 1: GPU step_failure_gpu fails ... */
        int step_failure_gpu;
        double step_failure_at_s;                       /* ... this far into the step (flow) */
        int spare_nodes;                     /* spares swapped in on a node loss */
        double repair_hours;                 /* wait for repair when no spare and not elastic */
        int elastic;                         /* shrink DP instead of waiting */
        char failure_trace[CFG_PATH_MAX];    /* replay failures from a file ("" = draw them) */
    } faults;
    struct {                                 /* parameter_server (absent: synchronous all-reduce only) */
        int present;
        int servers;                         /* server hosts the parameters are sharded over */
        double server_nic_gbps;              /* each server's network bandwidth (default: a node's NICs) */
        int steps;                           /* steps per worker to simulate */
        int max_staleness;                   /* stale-synchronous bound (0 = fully asynchronous) */
        double compute_cv;                   /* variation of a worker's step compute time */
    } parameter_server;
    struct {
        int steps;
        int fidelity_flow;                   /* 0 analytic, 1 flow */
        double flow_bucket_mb;               /* set by run.c for flow fidelity: buckets coarsened
                                                to this size (0: the scenario's bucket_size_mb) */
        int flow_progress;                   /* set by dtsim run, never read from a file: 0 the flow
                                                replay is silent; else 1 + its progress_mode
                                                (progress.h: its tasks on stderr) */
    } run;
} scenario_config;

/* Error report for every loader: the JSON path, the value, the rule. Room for a whole file path
 * (an output's temporary name beside it too, atomic_file.h) and the words around it, so that a
 * message naming one is not cut. */
typedef struct {
    char msg[CFG_PATH_MAX + 1024];
} config_error;

/* Loads and validates a scenario file. overrides: "--set" strings "path=value" (n of them).
 * Returns 0, or -1 with err filled ("scenario.parallel.tensor_model_parallel_size: 3 does not
 * divide num_attention_heads=32"). The caller frees with scenario_free. */
int scenario_load(const char *path, const char *const *overrides, int n_overrides,
                  scenario_config *out, config_error *err);
/* Same from an already parsed JSON object (json_t*), e.g. a validation case's "scenario";
 * base_dir is where relative paths are looked up first. */
int scenario_load_json(void *json_root, const char *base_dir, const char *const *overrides,
                       int n_overrides, scenario_config *out, config_error *err);
void scenario_free(scenario_config *s);
/* A model object (json_t*: a scenario's "model", a model file's) checked by the scenario
 * reader's own rules into s->model, so that a writer of model files (dtsim import hf) refuses
 * exactly what the reader would. path prefixes the key in errors ("scenario.model"). 0, or -1
 * with err. */
int scenario_parse_model(void *model_json, const char *path, scenario_config *s, config_error *err);

int platform_load(const char *path, platform_config *out, config_error *err);
int calibration_load(const char *path, calibration_config *out, config_error *err);
void calibration_free(calibration_config *c);

/* The parallel-layout rules on an already filled scenario (the loader applies them; the
 * planner checks each candidate with them). 0, or -1 with err. */
int scenario_validate_layout(const scenario_config *s, config_error *err);
/* Its two parts, for one layout tried at several global batches: the batch's rules (it splits
 * into micro-batches of DP x micro_batch_size; the schedule's, as interleaving takes a multiple of
 * PP of them) and every other one. A layout is valid at a batch exactly when both accept it
 * (scenario_validate_layout checks the same rules, in its own order). 0, or -1 with err (err NULL:
 * no message is written, for a caller that asks only whether). */
int scenario_validate_batch(const scenario_config *s, config_error *err);
int scenario_validate_layout_batchless(const scenario_config *s, config_error *err);
/* Whether s's layout has what each overlap flag overlaps, as Megatron-LM requires it: the rules
 * refuse a scenario that sets a flag without it, and the planner keeps a recipe's flag on the
 * candidates that have it. TP overlap: sequence parallelism where TP > 1; the parameter gather's:
 * the distributed optimizer (ZeRO 1-2) with the reduction overlapped; the MoE all-to-all's: EP > 1
 * and a 1F1B-style schedule, with virtual stages under a pipeline (the combinations dtsim does not
 * model are the rules' own, apart); the pipeline transfers' (overlap_p2p_comm), under framework
 * megatron: the interleaved schedule where PP > 1. */
int scenario_fits_tp_comm_overlap(const scenario_config *s);
int scenario_fits_p2p_overlap(const scenario_config *s);
int scenario_fits_param_gather_overlap(const scenario_config *s);
int scenario_fits_moe_a2a_overlap(const scenario_config *s);

/* Derived facts used everywhere: the GPU count, micro-batches, the rank grid and the layer
 * split per pipeline stage (layout.c). */
int scenario_gpus(const scenario_config *s);                      /* tp*pp*dp*cp */
long long scenario_micro_batches(const scenario_config *s);       /* per pipeline per step */
/* s with `micro_batches` per pipeline per step (its global batch set to match): a shorter or
 * longer step of the same layout */
scenario_config scenario_with_micro_batches(const scenario_config *s, long long micro_batches);
/* The same in place (a scenario is large: a caller that tries many lengths sets and restores). */
void scenario_set_micro_batches(scenario_config *s, long long micro_batches);
/* The scenario's rank grid (engine/rank_grid.h: TP innermost, then CP, DP, PP outermost). */
rank_grid scenario_rank_grid(const scenario_config *s);
/* The layers of each virtual stage (pp x vpp counts, by virtual stage), from num_layers and
 * parallel.pipeline_layers as Megatron-LM splits them (engine/schedule.h). 0, or -1 with why. */
int scenario_layer_split(const scenario_config *s, int *counts, char *why, size_t len);
/* The layers pipeline stage `stage` holds over all its chunks; -1 where the split is invalid. */
int scenario_stage_layers(const scenario_config *s, int stage);
/* The pipeline schedule of one step (engine/schedule.h): built once per run and passed to the
 * workload and the memory model. 0, or -1 with err; free with pipeline_schedule_free. */
int scenario_schedule(const scenario_config *s, pipeline_schedule *out, config_error *err);
/* Bytes an activation element is stored and moved in: training.activation_bytes where given,
 * else 2 under bf16, fp16 and fp8 (whose GEMM inputs are cast from 16-bit activations) and 4
 * under fp32 and tf32. The step costs and the memory model both ask here. */
int scenario_activation_bytes(const scenario_config *s);
/* One attention head's width (model.kv_channels, else hidden / heads), and the widths of the
 * queries (heads x it) and of the keys or values (query groups x it). */
double scenario_head_dim(const scenario_config *s);
/* The experts' tensor-parallel size (parallel.etp, else TP) and their data-parallel replicas:
 * TP x CP x DP / (ETP x EP) GPUs of a stage hold each expert shard (Megatron-Core's expert grid). */
int scenario_expert_tp(const scenario_config *s);
int scenario_expert_dp(const scenario_config *s);
double scenario_query_width(const scenario_config *s);
double scenario_kv_width(const scenario_config *s);
/* Of a chunk of chunk_layers layers, how many the backward recomputes: all of them (selective;
 * full, uniform), the first recompute_num_layers (full, block), or none. */
int scenario_recomputed_layers(const scenario_config *s, int chunk_layers);

#endif
