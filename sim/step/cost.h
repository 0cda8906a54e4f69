/* Time of one op on one GPU, from the calibration and the platform's datasheet figures.
 *  - GEMMs: efficiency interpolated from the calibration's (m, n, k) table in log space,
 *    bounded by the table (never extrapolated past a known efficiency); shapes outside the
 *    table use a roofline at the table's best efficiency; always at least bytes / HBM.
 *  - memory-bound ops: bytes / calibrated bandwidth of their op class.
 *  - fused (flash) attention: FLOPs at the calibrated attention efficiency.
 *  - every kernel pays the calibrated launch overhead.
 *  - the step waits for the slowest of its GPUs (cost_slowest_device_factor below).
 *  - ranks sharing a compute device: where a node holds more ranks of the step than it has
 *    compute devices (platform node.compute_devices < the ranks placed on it), the devices are
 *    time-shared equally among the ranks computing at the time (processor sharing; a rank
 *    waiting in communication gives its share away). TP and DP ranks compute together; a
 *    pipeline stage is busy m v / (m v + p - 1) of its schedule. So every op above takes
 *    max(1, ranks x busy / devices) times its time alone, a mean over the step: exact for TP x
 *    DP layouts, an average through a pipeline's fill and drain. The calibration is the
 *    device's alone.
 * Collectives are in collective.h. */
#ifndef DTSIM_SIM_COST_H
#define DTSIM_SIM_COST_H

#include "config.h"

typedef struct {
    const platform_config *platform;
    const calibration_config *calibration;
    precision_kind precision;   /* the training precision: picks GEMM table and peak */
    int act_bytes;              /* bytes per activation element */
    const attention_calibration *attention; /* fused attention's figures for the scenario's backend */
    double ranks_per_device;    /* >= 1: how many ranks time-share one compute device */
    double slowest_device;      /* >= 1: the slowest device's time over the mean device's */
    double pace;                /* what every compute op's time is multiplied by: both above */
} cost_model;

void cost_model_init(cost_model *cm, const scenario_config *s);

/* Seconds for one GEMM (or `batch` identical GEMMs) of (m x k)(k x n). */
double cost_gemm_s(const cost_model *cm, double m, double n, double k, double batch);
/* Efficiency (fraction of peak) the table gives for one shape; exposed for tests. */
double cost_gemm_efficiency(const cost_model *cm, double m, double n, double k);
/* Where the platform bounds s's calibrated device rates (the caps of cost_gemm_efficiency and of
 * the memory-bound kernels): the fastest GEMM of the table its precision uses, where above the
 * peak, and the fastest memory-bound kernel, where above HBM's rate; each 0 where within. */
void cost_rates_over_platform(const scenario_config *s, double *gemm_tflops, double *memory_gbs);
/* Seconds for a memory-bound op moving `bytes`. */
double cost_memory_s(const cost_model *cm, op_class cls, double bytes);
/* ... its bytes' part alone, without the kernel's launch: traffic that rides in another kernel
 * or whose launches are counted apart. */
double cost_memory_bytes_s(const cost_model *cm, op_class cls, double bytes);
/* Seconds for a compute op of the layer op list (not OPK_COMM). */
double cost_compute_op_s(const cost_model *cm, const layer_op *op);
/* The factor above: how many ranks time-share one compute device (1 when each has its own). */
double cost_ranks_per_device(const scenario_config *s);
/* The slowest device: a synchronous step moves at the pace of its slowest GPU (every rank waits
 * for it at the next collective, every stage for the slowest stage). Device speeds across N GPUs
 * vary with coefficient of variation cv (calibration compute_variability_cv, else a published
 * default; cost.c): the slowest is expected 1 + cv E[max of N standard normals] slower than the
 * mean. */
double cost_slowest_device_factor(const scenario_config *s);
/* E[max of n standard normals] (Blom's approximation; 0 for n <= 1); exposed for tests. */
double cost_expected_max_normal(double n);
/* Peak FLOP/s of the training precision. */
double cost_peak_flops(const cost_model *cm);

/* Contention between overlapped communication and compute on one device. A collective or
 * transfer kernel running beside the compute stream takes a share 1 - 1/slowdown of the device
 * (calibration overlap_slowdown: a GEMM alone takes t, beside a collective slowdown * t), never
 * more than an equal share with the compute. With n such kernels running, the compute keeps the
 * max-min fair share: 1 - n (1 - 1/slowdown), or 1/(n + 1) when that is smaller. The analytic
 * replay integrates compute at this rate; the flow replay gets the same rate from SimGrid's
 * max-min sharing of the GPU host (a bounded exec per running collective). */
double cost_overlap_comm_share(double slowdown);
double cost_overlap_compute_share(int n_comm, double slowdown);

#endif
