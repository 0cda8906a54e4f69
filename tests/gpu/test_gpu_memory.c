/* The CUDA backend's memory and timing: zero-filled allocation, host/device round trips,
 * device copies, memset, and events that time work in order. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "gpu_check.h"

static gpu_pair P;

static void test_alloc_zeroed(void **state)
{
    (void)state;
    size_t sizes[] = {1, 4099, (size_t)33 << 20};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        unsigned char *d = P.gpu->alloc(sizes[k]), *h = malloc(sizes[k]), *zero = calloc(1, sizes[k]);
        P.gpu->copy_to_host(h, d, sizes[k]);
        assert_memory_equal(h, zero, sizes[k]);
        free(h), free(zero);
        P.gpu->free(d);
    }
    void *empty = P.gpu->alloc(0);
    assert_non_null(empty);
    P.gpu->free(empty);
    P.gpu->free(NULL);
}

static void test_copies(void **state)
{
    (void)state;
    size_t n = 100003;
    float *x = gpu_rand(&P, n, 1);
    float *a = gpu_upload(&P, x, n), *b = P.gpu->alloc(n * sizeof(float));
    P.gpu->copy(b, a, n * sizeof(float));
    P.gpu->synchronize();
    gpu_expect_same_bytes(&P, "host -> device -> device -> host", x, b, n * sizeof(float));
    P.gpu->memset_zero(b + 1, (n - 2) * sizeof(float));
    float *h = gpu_download(&P, b, n);
    assert_memory_equal(&h[0], &x[0], sizeof(float));
    assert_memory_equal(&h[n - 1], &x[n - 1], sizeof(float));
    for (size_t i = 1; i < n - 1; i++)
        assert_true(h[i] == 0.0f);
    free(x), free(h);
    P.gpu->free(a), P.gpu->free(b);
}

static void test_events(void **state)
{
    (void)state;
    size_t n = (size_t)16 << 20;
    float *x = P.gpu->alloc(n * sizeof(float)), *y = P.gpu->alloc(n * sizeof(float));
    kernels_event *a = P.gpu->event_create(), *b = P.gpu->event_create();
    P.gpu->event_record(a);
    for (int r = 0; r < 10; r++)
        P.gpu->gelu_forward(y, x, n, KPREC_FP32);
    P.gpu->event_record(b);
    double s = P.gpu->event_elapsed_s(a, b);
    printf("  10 x gelu over %zu floats: %.3f ms\n", n, s * 1e3);
    assert_true(s > 0 && s < 10);
    P.gpu->event_destroy(a);
    P.gpu->event_destroy(b);
    P.gpu->free(x), P.gpu->free(y);
}

/* The description dtcal records with a GPU calibration: name, compute capability, SMs, memory,
 * driver and runtime. */
static void test_describe(void **state)
{
    (void)state;
    char what[512];
    P.gpu->describe(what, sizeof what);
    printf("device: %s\n", what);
    assert_non_null(strstr(what, " (sm_"));
    assert_non_null(strstr(what, " SMs, "));
    assert_non_null(strstr(what, "CUDA driver "));
    assert_non_null(strstr(what, ", runtime "));
    assert_null(strstr(what, "unknown"));
}

int main(void)
{
    int rc = gpu_pair_open(&P);
    if (rc)
        return rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alloc_zeroed),
        cmocka_unit_test(test_copies),
        cmocka_unit_test(test_events),
        cmocka_unit_test(test_describe),
    };
    return cmocka_run_group_tests_name("gpu_memory", tests, NULL, NULL);
}
