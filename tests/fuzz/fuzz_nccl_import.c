/* Fuzz target: an nccl-tests log through dtcal's importer (all_reduce_perf layout); what it
 * reads must be a fit dtcal can file. */
#include <math.h>
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
    /* what is read is a fit to file: finite, a bandwidth above 0, a time above 0 for sizes that
     * ascend (a NaN once reached the calibration, whose writer dropped it without a word) */
    if (!isfinite(fit.alpha_us) || !(fit.alpha_us > 0) || !isfinite(fit.busbw_gbs) || !(fit.busbw_gbs > 0))
        abort();
    for (int i = 0; i < fit.points; i++)
        if (!(fit.size[i] > 0) || !isfinite(fit.size[i]) || !(fit.time_us[i] > 0) || !isfinite(fit.time_us[i]) ||
            (i > 0 && !(fit.size[i] > fit.size[i - 1])))
            abort();
    nccl_fit_free(&fit);
    return 0;
}
