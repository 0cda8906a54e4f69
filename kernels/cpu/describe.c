/* The CPU backend's description of the machine it runs on (kernels.h, describe). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "cpu_internal.h"

void cpu_describe(char *out, size_t len)
{
    char model[256] = "unknown CPU", line[512];
    FILE *f = fopen("/proc/cpuinfo", "r");
    while (f && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (!strncmp(line, "model name", 10) && colon) {
            colon += strspn(colon + 1, " \t") + 1;
            colon[strcspn(colon, "\n")] = 0;
            snprintf(model, sizeof model, "%s", colon);
            break;
        }
    }
    if (f)
        fclose(f);
    snprintf(out, len, "%s (%ld threads online)", model, sysconf(_SC_NPROCESSORS_ONLN));
}
