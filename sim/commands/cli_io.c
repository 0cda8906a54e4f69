/* Output shared by the dtsim subcommands (their argument parsing is cli_args.c). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

/* A folder path may be written into: an existing writable folder, or absent with a writable
 * folder above it (the command makes it). 0, or -1 with why. */
static int folder_writable(const char *path, char *why, size_t len)
{
    struct stat st;
    if (stat(path, &st) == 0) {
        if (!S_ISDIR(st.st_mode)) {
            snprintf(why, len, "it exists and is not a folder");
            return -1;
        }
        if (access(path, W_OK | X_OK) != 0) {
            snprintf(why, len, "%s", strerror(errno));
            return -1;
        }
        return 0;
    }
    char parent[4096];
    snprintf(parent, sizeof parent, "%s", path);
    size_t n = strlen(parent);
    while (n > 1 && parent[n - 1] == '/') /* "out/" names out */
        parent[--n] = 0;
    char *slash = strrchr(parent, '/');
    if (!slash)
        snprintf(parent, sizeof parent, ".");
    else if (slash == parent)
        parent[1] = 0;
    else
        *slash = 0;
    if (stat(parent, &st) != 0 || !S_ISDIR(st.st_mode) || access(parent, W_OK | X_OK) != 0) {
        snprintf(why, len, "cannot make it in %s: %s", parent,
                 stat(parent, &st) != 0 ? strerror(errno) : !S_ISDIR(st.st_mode) ? "not a folder" : strerror(errno));
        return -1;
    }
    return 0;
}

int cli_check_outputs(const char *command, const cli_output *outs, int n)
{
    for (int i = 0; i < n; i++) {
        const cli_output *o = &outs[i];
        if (!o->path)
            continue;
        char why[4400];
        if (!*o->path) {
            fprintf(stderr, "dtsim %s: %s: an empty path\n", command, o->flag);
            return 2;
        }
        if (!strcmp(o->path, "-")) {
            if (o->stdout_ok)
                continue;
            fprintf(stderr, "dtsim %s: %s -: this output is written to a file only; give its path\n", command,
                    o->flag);
            return 2;
        }
        for (int j = 0; j < i; j++)
            if (outs[j].path && !strcmp(outs[j].path, o->path)) {
                fprintf(stderr, "dtsim %s: %s and %s both name %s: give each its own path\n", command, outs[j].flag,
                        o->flag, o->path);
                return 2;
            }
        if (o->folder && folder_writable(o->path, why, sizeof why) != 0) {
            fprintf(stderr, "dtsim %s: %s %s: %s\n", command, o->flag, o->path, why);
            return 2;
        }
        if (!o->folder && atomic_file_check(o->path, why, sizeof why) != 0) { /* why names the path */
            fprintf(stderr, "dtsim %s: %s: %s\n", command, o->flag, why);
            return 2;
        }
    }
    return 0;
}
