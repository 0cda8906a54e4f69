/* dtrain --offload-optimizer: AdamW and its state on the host.
 * argv[1]: dtrain, argv[2]: mpirun, argv[3]: "cpu" or "gpu".
 *   cpu: on the CPU backend the offloaded step runs the same adamw kernel on the same numbers,
 *        so the final params_crc32 must be bit-identical to the on-device optimizer's, for one
 *        rank, DP 2 ZeRO-0 and DP 2 ZeRO-1 (sharded moments) under mpirun; and a checkpoint
 *        written with offload resumes to the uninterrupted run's parameters (the host moments
 *        reach the checkpoint).
 *   gpu: CUDA backend, offloaded (CPU AdamW) against on-device (GPU AdamW); exits 77 without a
 *        GPU. The two AdamW kernels may round differently (sqrtf, division and FMA contraction
 *        on the GPU), a few ulp of a step of size ~lr per element; later steps then see slightly
 *        different weights, and AdamW divides each gradient by its own running size, so an
 *        element with a near-zero gradient can move by up to ~lr differently. Hence the bounds of
 *        the DP test: every step's loss within 1e-5 relative, parameters within 1e-5 relative L2
 *        and 1e-4 per element after 5 steps (lr 1e-3). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>
#include <cmocka.h>
#include "kernels.h"
#include "run_dtrain.h"

static const char *DTRAIN, *MPIRUN;
static json_t *A[64], *B[64];
static char ERR[65536];

static const char *final_crc(json_t **lines, int n)
{
    return n > 0 ? json_string_value(json_object_get(lines[n - 1], "params_crc32")) : NULL;
}

static void same_crc(int dp, int zero, const char *extra)
{
    char launcher[1024], args[512];
    if (dp > 1)
        snprintf(launcher, sizeof launcher, "%s' --oversubscribe -np %d '%s", MPIRUN, dp, DTRAIN);
    else
        snprintf(launcher, sizeof launcher, "%s", DTRAIN);
    int na, nb;
    snprintf(args, sizeof args, "--dp %d --zero %d --steps 6 --micro-batch 2 --global-batch 4 --seed 5 %s", dp, zero,
             extra);
    if (run_dtrain(launcher, args, A, 64, &na, ERR, sizeof ERR) != 0)
        fail_msg("%s: %s", args, ERR);
    snprintf(args, sizeof args,
             "--dp %d --zero %d --steps 6 --micro-batch 2 --global-batch 4 --seed 5 %s --offload-optimizer", dp, zero,
             extra);
    if (run_dtrain(launcher, args, B, 64, &nb, ERR, sizeof ERR) != 0)
        fail_msg("%s: %s", args, ERR);
    const char *a = final_crc(A, na), *b = final_crc(B, nb);
    print_message("dp %d zero %d %s: params_crc32 on-device %s, offloaded %s\n", dp, zero, extra, a ? a : "(none)",
                  b ? b : "(none)");
    assert_non_null(a);
    assert_non_null(b);
    assert_string_equal(a, b);
    free_lines(A, na);
    free_lines(B, nb);
}

static void offload_is_bit_identical_on_cpu(void **state)
{
    (void)state;
    same_crc(1, 0, "");
    same_crc(2, 0, "");
    same_crc(2, 1, "");
}

/* Checkpoint after step 3 with offload, resume to step 6: equal to the uninterrupted on-device
 * run (the host moments must reach the checkpoint for this). */
static void offload_checkpoint_resumes_exactly(void **state)
{
    (void)state;
    char launcher[1024], args[512];
    snprintf(launcher, sizeof launcher, "%s' --oversubscribe -np 2 '%s", MPIRUN, DTRAIN);
    const char *dir = "dtrain_offload_ckpt";
    char rm[256];
    snprintf(rm, sizeof rm, "rm -rf %s", dir);
    if (system(rm) != 0)
        fail_msg("cannot clear %s", dir);
    int na, nb;
    const char *common = "--dp 2 --zero 1 --steps 6 --micro-batch 2 --global-batch 4 --seed 5";
    if (run_dtrain(launcher, common, A, 64, &na, ERR, sizeof ERR) != 0)
        fail_msg("%s: %s", common, ERR);
    snprintf(args, sizeof args, "%s --offload-optimizer --ckpt-dir %s --ckpt-every 3 --ckpt-sync --stop-after 3",
             common, dir);
    if (run_dtrain(launcher, args, B, 64, &nb, ERR, sizeof ERR) != 0)
        fail_msg("%s: %s", args, ERR);
    free_lines(B, nb);
    snprintf(args, sizeof args, "%s --offload-optimizer --ckpt-dir %s --resume", common, dir);
    if (run_dtrain(launcher, args, B, 64, &nb, ERR, sizeof ERR) != 0)
        fail_msg("%s: %s", args, ERR);
    const char *a = final_crc(A, na), *b = final_crc(B, nb);
    assert_non_null(a);
    assert_non_null(b);
    print_message("resumed with offload: %s, uninterrupted: %s\n", b ? b : "(none)", a ? a : "(none)");
    assert_string_equal(a, b);
    free_lines(A, na);
    free_lines(B, nb);
    if (system(rm) != 0)
        fail_msg("cannot clear %s", dir);
}

static int gpu_variant(void)
{
    char why[256];
    if (!kernels_cuda(why, sizeof why)) {
        printf("no CUDA backend (%s): skipped\n", why);
        return 77;
    }
    int na, nb;
    const char *common = "--device cuda --steps 5 --micro-batch 2 --global-batch 4 --seed 5";
    char args[512];
    snprintf(args, sizeof args, "%s --dump-params dtrain_offload_dev.bin", common);
    if (run_dtrain(DTRAIN, args, A, 64, &na, ERR, sizeof ERR) != 0) {
        fprintf(stderr, "%s: %s\n", args, ERR);
        return 1;
    }
    snprintf(args, sizeof args, "%s --offload-optimizer --dump-params dtrain_offload_host.bin", common);
    if (run_dtrain(DTRAIN, args, B, 64, &nb, ERR, sizeof ERR) != 0) {
        fprintf(stderr, "%s: %s\n", args, ERR);
        return 1;
    }
    int ok = na == nb && na == 6;
    for (int i = 0; ok && i < na - 1; i++) {
        double a = json_number_value(json_object_get(A[i], "loss")), b = json_number_value(json_object_get(B[i], "loss"));
        if (fabs(a - b) > 1e-5 * fabs(a)) {
            fprintf(stderr, "step %d: loss %.9g offloaded vs %.9g on device\n", i + 1, b, a);
            ok = 0;
        }
    }
    size_t n1 = 0, n2 = 0;
    float *p1 = load_params("dtrain_offload_dev.bin", &n1), *p2 = load_params("dtrain_offload_host.bin", &n2);
    ok = ok && p1 && p2 && n1 == n2 && n1 > 0;
    double diff2 = 0, ref2 = 1e-30, worst = 0;
    for (size_t i = 0; ok && i < n1; i++) {
        double d = fabs((double)p1[i] - p2[i]);
        diff2 += d * d;
        ref2 += (double)p1[i] * p1[i];
        worst = fmax(worst, d);
    }
    printf("GPU: offloaded vs on-device AdamW after 5 steps: relative L2 %.2e, largest element difference %.2e\n",
           sqrt(diff2 / ref2), worst);
    ok = ok && sqrt(diff2 / ref2) <= 1e-5 && worst <= 1e-4;
    free(p1);
    free(p2);
    free_lines(A, na);
    free_lines(B, nb);
    remove("dtrain_offload_dev.bin");
    remove("dtrain_offload_host.bin");
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    int begun = dtrain_suite_begin(argc, argv, 4, &DTRAIN, &MPIRUN);
    if (begun >= 0)
        return begun;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(offload_is_bit_identical_on_cpu),
        cmocka_unit_test(offload_checkpoint_resumes_exactly),
    };
    char dir[] = "/tmp/test_offload_XXXXXX";
    if (enter_private_dir(dir) != 0)
        return 1;
    int rc = !strcmp(argv[3], "gpu") ? gpu_variant() : cmocka_run_group_tests(tests, NULL, NULL);
    leave_private_dir(dir);
    return rc;
}
