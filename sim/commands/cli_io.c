/* Output shared by the dtsim subcommands (their argument parsing is cli_args.c). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli.h"
#include "atomic_file.h"
#include "config_json.h"

int cli_write_json(void *doc, const char *path)
{
    if (strcmp(path, "-") == 0) {
        int rc = json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(DTSIM_JSON_REAL_DIGITS));
        fputc('\n', stdout);
        if (fflush(stdout) != 0 || ferror(stdout) || rc != 0) { /* a full disk, a closed pipe */
            fprintf(stderr, "dtsim: writing the JSON to the standard output: %s\n",
                    errno ? strerror(errno) : "failed");
            return -1;
        }
        return 0;
    }
    atomic_file a;
    char why[4400];
    if (atomic_file_open(&a, path, why, sizeof why) != 0) {
        fprintf(stderr, "dtsim: %s\n", why);
        return -1;
    }
    if (json_dumpf(doc, a.f, JSON_INDENT(2) | JSON_REAL_PRECISION(DTSIM_JSON_REAL_DIGITS)) != 0) {
        fprintf(stderr, "dtsim: cannot write %s\n", path);
        atomic_file_abort(&a);
        return -1;
    }
    if (atomic_file_commit(&a, 0, why, sizeof why) != 0) {
        fprintf(stderr, "dtsim: %s\n", why);
        return -1;
    }
    return 0;
}
