/* Input and output helpers shared by the dtsim subcommands. */
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

int cli_parse_int(const char *command, const char *flag, const char *value, long lo, long hi, int *out)
{
    char *end;
    long n = strtol(value, &end, 10);
    if (!*value || *end || n < lo || n > hi) {
        fprintf(stderr, "dtsim %s: %s: '%s' is not a whole number in %ld..%ld\n", command, flag, value, lo, hi);
        return -1;
    }
    *out = (int)n;
    return 0;
}

int cli_take_scenario_arg(const char *command, const char *arg, const char **scenario_path)
{
    if (arg[0] == '-' && arg[1]) {
        fprintf(stderr, "dtsim %s: unknown option or missing value: %s (see dtsim %s --help)\n", command, arg,
                command);
        return -1;
    }
    if (*scenario_path) {
        fprintf(stderr, "dtsim %s: one scenario file expected, got '%s' as well\n", command, arg);
        return -1;
    }
    *scenario_path = arg;
    return 0;
}
