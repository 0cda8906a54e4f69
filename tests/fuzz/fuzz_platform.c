/* Fuzz target: a platform file through platform_load. */
#include "config.h"
#include "fuzz_io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_setup(1, 0);
    const char *path = fuzz_write_file("platform.json", data, size);
    platform_config p;
    config_error err;
    memset(&p, 0, sizeof p);
    if (platform_load(path, &p, &err) != 0 && !err.msg[0])
        abort();
    return 0;
}
