/* dtcal validate's warning for a calibration measured on another machine: a measured calibration
 * whose host (or device description) is not this machine's gets one line naming both machines and
 * the command that measures a calibration here; this machine's own, or a datasheet calibration,
 * gets none. Checked on the function and through dtcal validate with calibrations written here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include "../private_dir.h"
#include "machine_check.h"

static void warns_only_for_another_measuring_machine(void **state)
{
    char msg[2048];
    const char *dev = "AMD EPYC (2 threads online)";
    assert_int_equal(machine_mismatch("c.json", "measured", "box-a", dev, "box-a", dev, "cpu",
                                      "platforms/cpu-box.json", msg, sizeof msg), 0);
    assert_int_equal(machine_mismatch("c.json", "datasheet", "none (published figures)", "H100-SXM5-80GB", "box-a",
                                      dev, "cpu", "platforms/cpu-box.json", msg, sizeof msg), 0);
    assert_int_equal(machine_mismatch("c.json", "measured", "box-b", dev, "box-a", dev, "cpu",
                                      "platforms/cpu-box.json", msg, sizeof msg), 1);
    print_message("  %s\n", msg);
    assert_null(strchr(msg, '\n'));
    assert_non_null(strstr(msg, "c.json"));
    assert_non_null(strstr(msg, "host 'box-b'"));
    assert_non_null(strstr(msg, "host 'box-a'"));
    assert_non_null(strstr(msg, "build/bin/dtcal kernels --device cpu --platform platforms/cpu-box.json -o my-cal.json"));
    assert_non_null(strstr(msg, "--calibration my-cal.json"));
    /* the same host name on another CPU (or another core count) */
    assert_int_equal(machine_mismatch("c.json", "measured", "box-a", "Intel Xeon (64 threads online)", "box-a", dev,
                                      "cpu", "platforms/cpu-box.json", msg, sizeof msg), 1);
    assert_non_null(strstr(msg, "device 'Intel Xeon (64 threads online)'"));
    assert_non_null(strstr(msg, "device 'AMD EPYC (2 threads online)'"));
    assert_non_null(strstr(msg, "(device)"));
}

/* This machine's description is what `dtcal kernels --device cpu` writes. */
static void this_machine_is_described_as_dtcal_kernels_does(void **state)
{
    char host[256], dev[512], expect[256] = "";
    machine_this("cpu", host, sizeof host, dev, sizeof dev);
    gethostname(expect, sizeof expect - 1);
    assert_string_equal(host, expect);
    print_message("  %s: %s\n", host, dev);
    assert_non_null(strstr(dev, " threads online)"));
}

static int validate_warns(const char *cal_host, const char *cal_device)
{
    FILE *f = fopen("cal.json", "w");
    fprintf(f, "{ \"device\": \"%s\", \"source\": \"measured\", \"host\": \"%s\" }\n", cal_device, cal_host);
    fclose(f);
    /* The warning comes before anything is measured: a launcher that fails at once (two ranks run
     * under --mpirun) keeps this quick; the exit status is not what is checked. */
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "'%s' validate --dp 2 --mpirun /bin/false --steps 2 --platform '%s/platforms/cpu-box.json' "
             "--calibration cal.json >/dev/null 2>err.txt",
             DTCAL_BIN, DTSIM_SOURCE_DIR);
    if (system(cmd) == -1)
        fail_msg("cannot run dtcal");
    f = fopen("err.txt", "r");
    char line[4096];
    int warned = 0;
    while (fgets(line, sizeof line, f))
        if (strstr(line, "warning: calibration cal.json was measured on another machine")) {
            print_message("  %s", line);
            warned++;
        }
    fclose(f);
    return warned;
}

/* Through dtcal validate: one warning for another host's calibration, none for this machine's. */
static void dtcal_validate_warns_once(void **state)
{
    char host[256], dev[512];
    machine_this("cpu", host, sizeof host, dev, sizeof dev);
    assert_int_equal(validate_warns("another-host.example", dev), 1);
    assert_int_equal(validate_warns(host, dev), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(warns_only_for_another_measuring_machine),
        cmocka_unit_test(this_machine_is_described_as_dtcal_kernels_does),
        cmocka_unit_test(dtcal_validate_warns_once),
    };
    char dir[] = "/tmp/test_machine_check_XXXXXX";
    if (enter_private_dir(dir) != 0)
        return 1;
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    leave_private_dir(dir);
    return rc;
}
