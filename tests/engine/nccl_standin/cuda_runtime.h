/* Test double for <cuda_runtime.h>: what engine/comm_nccl.c calls, for the NCCL standin (see
 * nccl.h here). "Device" memory is host memory; the stream is synchronous. */
#ifndef DTSIM_TESTS_NCCL_STANDIN_CUDA_RUNTIME_H
#define DTSIM_TESTS_NCCL_STANDIN_CUDA_RUNTIME_H
#include "nccl.h"

typedef enum { cudaSuccess = 0 } cudaError_t;

#define cudaGetDeviceCount standin_cudaGetDeviceCount
#define cudaSetDevice standin_cudaSetDevice
#define cudaStreamSynchronize standin_cudaStreamSynchronize
#define cudaGetErrorString standin_cudaGetErrorString

cudaError_t cudaGetDeviceCount(int *count); /* as many as there are ranks on the node */
cudaError_t cudaSetDevice(int device);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
const char *cudaGetErrorString(cudaError_t e);
#endif
