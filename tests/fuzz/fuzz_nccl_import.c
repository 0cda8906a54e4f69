/* Fuzz target: an nccl-tests log through dtcal's importer (all_reduce_perf layout). */
#include "fuzz_io.h"
#include "nccl_import.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write_file("all_reduce_perf.log", data, size);
    nccl_fit fit;
    char err[1024] = "";
    if (nccl_import_file(path, "all_reduce", &fit, err, sizeof err) != 0) {
        if (!err[0])
            abort();
        return 0;
    }
    nccl_fit_free(&fit);
    return 0;
}
