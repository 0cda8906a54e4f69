/* Output shared by the dtsim subcommands (their argument parsing is cli_args.c). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cli.h"
#include "cli_args.h"
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
    else
        slash[slash == parent] = 0; /* "/out" is made in "/" */
    const char *fault = NULL;
    if (stat(parent, &st) != 0)
        fault = strerror(errno);
    else if (!S_ISDIR(st.st_mode))
        fault = "not a folder";
    else if (access(parent, W_OK | X_OK) != 0)
        fault = strerror(errno);
    if (fault) {
        snprintf(why, len, "cannot make it in %s: %s", parent, fault);
        return -1;
    }
    return 0;
}

/* The file a path names, as a key two spellings of one file share: its device and inode where it
 * exists, else its folder's (the file would be made there) and its last name. 0, or -1 when the
 * folder does not exist either (a later check says so). */
typedef struct {
    dev_t dev;
    ino_t ino;
    const char *name; /* NULL: an existing file, named by dev and ino alone */
} file_key;

static int key_of(const char *path, file_key *k)
{
    struct stat st;
    if (stat(path, &st) == 0) {
        *k = (file_key){st.st_dev, st.st_ino, NULL};
        return 0;
    }
    char dir[4096];
    config_dirname(path, dir, sizeof dir);
    const char *slash = strrchr(path, '/');
    if (stat(dir, &st) != 0)
        return -1;
    *k = (file_key){st.st_dev, st.st_ino, slash ? slash + 1 : path};
    return 0;
}

/* Whether paths a and b name one file ("out.json", "./out.json", a link to it). */
static int same_file(const char *a, const char *b)
{
    file_key ka, kb;
    if (!strcmp(a, b))
        return 1;
    if (key_of(a, &ka) != 0 || key_of(b, &kb) != 0)
        return 0;
    if (ka.dev != kb.dev || ka.ino != kb.ino || !ka.name != !kb.name)
        return 0;
    return !ka.name || !strcmp(ka.name, kb.name);
}

int cli_check_outputs(const char *command, const cli_output *outs, const char *const *inputs, int n_inputs)
{
    for (int i = 0; outs[i].flag; i++) {
        const cli_output *o = &outs[i];
        const char *path = o->path ? *o->path : NULL;
        if (!path)
            continue;
        char why[4400];
        if (!*path) {
            fprintf(stderr, "dtsim %s: %s: an empty path\n", command, o->flag);
            return 2;
        }
        if (!strcmp(path, "-")) {
            if (o->stdout_ok)
                continue;
            fprintf(stderr, "dtsim %s: %s -: this output is written to a file only; give its path\n", command,
                    o->flag);
            return 2;
        }
        for (int j = 0; j < i; j++)
            if (outs[j].path && *outs[j].path && strcmp(*outs[j].path, "-") && same_file(*outs[j].path, path)) {
                fprintf(stderr, "dtsim %s: %s and %s both name %s: give each its own path\n", command, outs[j].flag,
                        o->flag, path);
                return 2;
            }
        /* the command reads its inputs after this check: an output over one would replace what it
         * is about to read (and what the user wrote) with its own result */
        for (int j = 0; j < n_inputs; j++)
            if (inputs[j] && !o->folder && same_file(inputs[j], path)) {
                fprintf(stderr, "dtsim %s: %s %s: that is the input %s; write the output elsewhere\n", command,
                        o->flag, path, inputs[j]);
                return 2;
            }
        if (o->folder && folder_writable(path, why, sizeof why) != 0) {
            fprintf(stderr, "dtsim %s: %s %s: %s\n", command, o->flag, path, why);
            return 2;
        }
        if (!o->folder && atomic_file_check(path, why, sizeof why) != 0) { /* why names the path */
            fprintf(stderr, "dtsim %s: %s: %s\n", command, o->flag, why);
            return 2;
        }
    }
    return 0;
}
