/* Fuzz target: a token data file (header and tokens) through dtrain's loader; when it opens,
 * one batch is read, so every token the loader hands out passes its checks. */
#include "data.h"
#include "fuzz_io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write_file("data.tok", data, size);
    data_loader d;
    char err[1024] = "";
    if (data_open(&d, path, 1, err, sizeof err) != 0) {
        if (!err[0])
            abort();
        return 0;
    }
    if (d.count >= 10) {
        int tokens[8], targets[8];
        data_next_batch(&d, 1, 8, tokens, targets);
        for (int i = 0; i < 8; i++)
            if (tokens[i] < 0 || (uint32_t)tokens[i] >= d.vocab || targets[i] < 0 || (uint32_t)targets[i] >= d.vocab)
                abort(); /* the loader promised in-range tokens */
    }
    data_close(&d);
    return 0;
}
