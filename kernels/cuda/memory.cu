/* Device memory, copies and timing events: the "device" half of the backend table.
 * Copies are cudaMemcpy (synchronous for the host), so a host buffer may be reused as soon as
 * copy_to_device returns, and copy_to_host returns with the data in place. */
#include "cuda_common.cuh"

struct kernels_event {
    cudaEvent_t event;
};

void *cuda_alloc(size_t bytes)
{
    void *p = NULL;
    size_t n = bytes ? bytes : 1; /* a valid, freeable pointer even for 0 bytes */
    cudaError_t err = cudaMalloc(&p, n);
    if (err != cudaSuccess) {
        size_t free_b = 0, total_b = 0;
        (void)cudaGetLastError();
        (void)cudaMemGetInfo(&free_b, &total_b);
        fprintf(stderr, "kernels(cuda): out of device memory allocating %zu bytes (%zu of %zu free): %s\n", bytes,
                free_b, total_b, cudaGetErrorString(err));
        abort();
    }
    CUDA_CHECK(cudaMemset(p, 0, n)); /* the interface promises zero-filled memory */
    return p;
}

void cuda_free(void *p)
{
    if (p)
        CUDA_CHECK(cudaFree(p));
}

void cuda_memset_zero(void *p, size_t bytes)
{
    if (bytes)
        CUDA_CHECK(cudaMemset(p, 0, bytes));
}

void cuda_copy_to_device(void *dst, const void *host_src, size_t bytes)
{
    if (bytes)
        CUDA_CHECK(cudaMemcpy(dst, host_src, bytes, cudaMemcpyHostToDevice));
}

void cuda_copy_to_host(void *host_dst, const void *src, size_t bytes)
{
    if (bytes)
        CUDA_CHECK(cudaMemcpy(host_dst, src, bytes, cudaMemcpyDeviceToHost));
}

void cuda_copy(void *dst, const void *src, size_t bytes)
{
    if (bytes)
        CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice));
}

void cuda_synchronize(void)
{
    CUDA_CHECK(cudaDeviceSynchronize());
}

kernels_event *cuda_event_create(void)
{
    kernels_event *e = (kernels_event *)malloc(sizeof *e);
    if (!e) {
        fprintf(stderr, "kernels(cuda): out of host memory for an event\n");
        abort();
    }
    CUDA_CHECK(cudaEventCreate(&e->event));
    return e;
}

void cuda_event_destroy(kernels_event *e)
{
    if (!e)
        return;
    CUDA_CHECK(cudaEventDestroy(e->event));
    free(e);
}

/* Recorded on stream 0, where every kernel of this backend runs. */
void cuda_event_record(kernels_event *e)
{
    CUDA_CHECK(cudaEventRecord(e->event, 0));
}

double cuda_event_elapsed_s(kernels_event *start, kernels_event *end)
{
    float ms = 0;
    CUDA_CHECK(cudaEventSynchronize(end->event));
    CUDA_CHECK(cudaEventElapsedTime(&ms, start->event, end->event));
    return ms * 1e-3;
}
