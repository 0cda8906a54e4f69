/* Fuzz target: a Hugging Face config.json through dtsim import hf (import_hf). */
#include "cli_import.h"
#include "fuzz_io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_setup(1, 1);
    const char *path = fuzz_write_file("config.json", data, size);
    json_t *out = NULL;
    int rc = import_hf(path, 0, &out);
    if (rc == 0 && !json_is_object(out))
        abort(); /* a success always gives the model file */
    json_decref(out);
    return 0;
}
