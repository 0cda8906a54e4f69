/* The datasheet peaks MFU is taken against (engine/device_peak.c), checked against the
 * datasheets' own figures written out here: dense (half the "with sparsity" figure where a sheet
 * prints only that), the tensor-core figure for bf16/fp16, plain FP32 for fp32 (dtrain's
 * fp32 GEMMs use no TF32). Device names as cudaGetDeviceProperties reports them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "device_peak.h"

static void known_gpus_have_their_datasheet_peaks(void **state)
{
    (void)state;
    const char *src = NULL;
    /* H100 SXM5 (NVIDIA H100 architecture whitepaper, table 3): BF16/FP16 989.4 dense
     * (1,978.9 with sparsity), FP32 67 */
    assert_true(device_peak_tflops("NVIDIA H100 80GB HBM3", KPREC_BF16, &src) == 989.4);
    assert_non_null(src);
    assert_true(device_peak_tflops("NVIDIA H100 80GB HBM3", KPREC_FP16, NULL) == 989.4);
    assert_true(device_peak_tflops("NVIDIA H100 80GB HBM3", KPREC_FP32, NULL) == 67.0);
    /* H100 PCIe (same whitepaper): BF16 756.5 dense (1,513 with sparsity) */
    assert_true(device_peak_tflops("NVIDIA H100 PCIe", KPREC_BF16, NULL) == 1513.0 / 2);
    /* H200: the H100 SXM's compute */
    assert_true(device_peak_tflops("NVIDIA H200", KPREC_BF16, NULL) == 989.4);
    /* A100 (SXM4 and PCIe, 40 and 80 GB): BF16 312 dense, FP32 19.5 */
    assert_true(device_peak_tflops("NVIDIA A100-SXM4-80GB", KPREC_BF16, NULL) == 312.0);
    assert_true(device_peak_tflops("NVIDIA A100 80GB PCIe", KPREC_FP32, NULL) == 19.5);
}

static void unknown_devices_have_no_peak(void **state)
{
    (void)state;
    const char *src = "x";
    assert_true(device_peak_tflops("AMD EPYC 7B13", KPREC_FP32, &src) == 0);
    assert_null(src);
    assert_true(device_peak_tflops(NULL, KPREC_BF16, NULL) == 0);
    assert_true(device_peak_tflops("NVIDIA H100 NVL", KPREC_BF16, NULL) == 0); /* other clocks */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(known_gpus_have_their_datasheet_peaks),
        cmocka_unit_test(unknown_devices_have_no_peak),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
