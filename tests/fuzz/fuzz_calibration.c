/* Fuzz target: a calibration file through calibration_load. */
#include "config.h"
#include "fuzz_io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_setup(0, 0);
    const char *path = fuzz_write_file("calibration.json", data, size);
    calibration_config c;
    config_error err;
    memset(&c, 0, sizeof c);
    if (calibration_load(path, &c, &err) == 0)
        calibration_free(&c);
    else if (!err.msg[0])
        abort();
    return 0;
}
