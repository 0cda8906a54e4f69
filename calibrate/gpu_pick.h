/* One GPU per MPI rank, picked by the rank's place on its node: the node-local rank (among the
 * ranks that share its memory, MPI_COMM_TYPE_SHARED) is the GPU's index, as nccl-tests and the
 * engine's --comm nccl pick it. Shared by dtcal collectives --backend nccl (NCCL will not put two
 * ranks on one GPU) and dtcal variability (each rank measures a device of its own). */
#ifndef DTSIM_CALIBRATE_GPU_PICK_H
#define DTSIM_CALIBRATE_GPU_PICK_H

typedef struct {
    int local_rank, local_size; /* this rank among the ranks on its node */
    int gpus;                   /* the node's GPUs as the CUDA runtime counts them (0 when it cannot) */
    int device;                 /* the GPU this rank uses: its local rank, or -1 */
    int short_of_gpus;          /* this rank failed because its node has fewer GPUs than ranks */
    char why[256];              /* this rank's failure: "2 ranks on this node but 1 GPU(s)" (with the
                                   runtime's error when it counted none), or "cudaSetDevice(1): ..." */
} gpu_pick;

/* Collective over MPI_COMM_WORLD (every rank calls it). Makes the node-local rank's GPU the
 * current device. 0 when every rank has its own GPU; -1 when this rank could not take one (why
 * says so); -2 when this rank did but another could not. A build without CUDA counts no GPU. */
int gpu_pick_device(gpu_pick *p);
#endif
