/* Fuzz target: a scenario file through the loader and validation `dtsim run` uses. Inputs are
 * scenario JSON; relative platform/calibration paths resolve against the repository
 * (DTSIM_ROOT), as for a file in scenarios/. */
#include "config.h"
#include "fuzz_io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_setup(1, 0);
    const char *path = fuzz_write_file("scenario.json", data, size);
    scenario_config s;
    config_error err;
    if (scenario_load(path, NULL, 0, &s, &err) == 0)
        scenario_free(&s);
    else if (!err.msg[0])
        abort(); /* a refusal must say why */
    return 0;
}
