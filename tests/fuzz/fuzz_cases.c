/* Fuzz target: a validation cases file through `dtsim validate` (analytic fidelity). */
#include "cli.h"
#include "fuzz_io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_setup(1, 1);
    const char *path = fuzz_write_file("cases.json", data, size);
    char *argv[] = {"validate", (char *)path, "--fidelity", "analytic", NULL};
    cli_validate(4, argv);
    return 0;
}
