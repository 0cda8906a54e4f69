/* Output shared by the dtsim subcommands (their argument parsing is cli_args.c). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli.h"

int cli_write_json(void *doc, const char *path)
{
    if (strcmp(path, "-") == 0) {
        int rc = json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
        fputc('\n', stdout);
        fflush(stdout);
        return rc;
    }
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    if (json_dump_file(doc, tmp, JSON_INDENT(2) | JSON_REAL_PRECISION(10)) != 0) {
        fprintf(stderr, "dtsim: cannot write %s: %s\n", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    if (rename(tmp, path) != 0) {
        fprintf(stderr, "dtsim: cannot rename %s to %s: %s\n", tmp, path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}
