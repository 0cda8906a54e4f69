/* Fuzz target: a failure trace file through `dtsim faults`' reader (64 GPUs on 8 nodes). */
#include "faults.h"
#include "fuzz_io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write_file("trace.txt", data, size);
    faults_trace t;
    config_error err;
    memset(&t, 0, sizeof t);
    err.msg[0] = 0;
    if (faults_trace_load(path, 64, 8, &t, &err) == 0)
        faults_trace_free(&t);
    else if (!err.msg[0])
        abort();
    return 0;
}
