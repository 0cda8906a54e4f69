/* Fuzz target: a model file (or a scenario naming one) through dtrain's model reader, which
 * resolves "from" and model paths with engine/model_file.c as dtsim does. */
#include "fuzz_io.h"
#include "gpt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_setup(1, 1);
    const char *path = fuzz_write_file("model.json", data, size);
    gpt_config cfg;
    char err[512] = "";
    if (gpt_config_from_name(path, 256, &cfg, err, sizeof err) != 0 && !err[0])
        abort(); /* a refusal always says why */
    return 0;
}
