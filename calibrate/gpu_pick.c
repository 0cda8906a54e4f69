/* See gpu_pick.h. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include "gpu_pick.h"
#ifdef DTSIM_HAVE_CUDA
#include <cuda_runtime.h>
#endif

int gpu_pick_device(gpu_pick *p)
{
    memset(p, 0, sizeof *p);
    p->device = -1;
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &p->local_rank);
    MPI_Comm_size(node, &p->local_size);
    MPI_Comm_free(&node);
    const char *count_err = "this build has no CUDA";
#ifdef DTSIM_HAVE_CUDA
    cudaError_t rc = cudaGetDeviceCount(&p->gpus);
    if (rc != cudaSuccess) {
        p->gpus = 0; /* no driver or no device */
        (void)cudaGetLastError();
        count_err = cudaGetErrorString(rc);
    } else {
        count_err = NULL;
    }
#endif
    int ok = p->local_size <= p->gpus;
    if (!ok) {
        p->short_of_gpus = 1;
        snprintf(p->why, sizeof p->why, "%d ranks on this node but %d GPU(s)%s%s%s", p->local_size, p->gpus,
                 count_err ? " (" : "", count_err ? count_err : "", count_err ? ")" : "");
    }
#ifdef DTSIM_HAVE_CUDA
    if (ok) {
        cudaError_t e = cudaSetDevice(p->local_rank);
        ok = e == cudaSuccess;
        if (ok)
            p->device = p->local_rank;
        else
            snprintf(p->why, sizeof p->why, "cudaSetDevice(%d): %s", p->local_rank, cudaGetErrorString(e));
    }
#endif
    int all = ok;
    MPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return all ? 0 : ok ? -2 : -1;
}
