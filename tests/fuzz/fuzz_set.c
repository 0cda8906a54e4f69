/* Fuzz target: `--set PATH=VALUE` overrides (split on newlines: up to 4 of them) applied to the
 * default scenario, then validated as the CLI does. */
#include "config.h"
#include "fuzz_io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_setup(1, 0);
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = 0;
    const char *sets[4];
    int n = 0;
    for (char *p = text; p && n < 4;) {
        sets[n++] = p;
        p = strchr(p, '\n');
        if (p)
            *p++ = 0;
    }
    scenario_config s;
    config_error err;
    if (scenario_load(DTSIM_SOURCE_DIR "/scenarios/gpt3-175b-1024-a100.json", sets, n, &s, &err) == 0)
        scenario_free(&s);
    else if (!err.msg[0])
        abort();
    free(text);
    return 0;
}
