/* Model files and "from" (model_file.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "model_file.h"

int repo_file_find(const char *name, const char *base_dir, char *out, size_t n)
{
    struct stat st;
    if (name[0] == '/') {
        snprintf(out, n, "%s", name);
        return stat(out, &st) == 0 ? 0 : -1;
    }
    if (base_dir && *base_dir) {
        snprintf(out, n, "%s/%s", base_dir, name);
        if (stat(out, &st) == 0)
            return 0;
    }
    const char *root = getenv("DTSIM_ROOT");
    snprintf(out, n, "%s/%s", root && *root ? root : DTSIM_SOURCE_DIR, name);
    return stat(out, &st) == 0 ? 0 : -1;
}

static void dir_of(const char *path, char *out, size_t n)
{
    snprintf(out, n, "%s", path);
    char *slash = strrchr(out, '/');
    if (slash)
        *slash = 0;
    else
        snprintf(out, n, ".");
}

static json_t *resolve(json_t *value, const char *base_dir, int depth, char *err, size_t errlen)
{
    if (depth > MODEL_FROM_DEPTH) {
        snprintf(err, errlen, "model: more than %d files chained by \"from\" (a loop?)", MODEL_FROM_DEPTH);
        return NULL;
    }
    json_t *from = json_is_object(value) ? json_object_get(value, "from") : value;
    if (json_is_object(value) && !from)
        return json_incref(value);
    if (!json_is_string(from)) {
        snprintf(err, errlen, "model%s: a model object, a model file's path, or {\"from\": PATH, ...}",
                 json_is_object(value) ? ".from" : "");
        return NULL;
    }
    char path[4096], dir[4096];
    if (repo_file_find(json_string_value(from), base_dir, path, sizeof path) != 0) {
        snprintf(err, errlen, "model: '%s' not found (looked in %s and the repository root)", json_string_value(from),
                 base_dir && *base_dir ? base_dir : ".");
        return NULL;
    }
    if (description_file_ok(path, err, errlen) != 0)
        return NULL;
    json_error_t je;
    json_t *file = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!file) {
        snprintf(err, errlen, "%s:%d:%d: %s", path, je.line, je.column, je.text);
        return NULL;
    }
    json_t *inner = json_object_get(file, "model");
    dir_of(path, dir, sizeof dir);
    json_t *base = resolve(inner ? inner : file, dir, depth + 1, err, errlen);
    json_decref(file);
    if (!base)
        return NULL;
    json_t *model = json_deep_copy(base); /* the file's keys, then this object's over them */
    json_decref(base);
    if (json_is_object(value)) {
        const char *key;
        json_t *v;
        json_object_foreach(value, key, v) if (strcmp(key, "from"))
            json_object_set(model, key, v);
    }
    return model;
}

int description_file_ok(const char *path, char *err, size_t errlen)
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > MODEL_FILE_MAX_BYTES) {
        snprintf(err, errlen, "%s is not a regular file of at most %d MiB", path, MODEL_FILE_MAX_BYTES >> 20);
        return -1;
    }
    return 0;
}

json_t *model_resolve(json_t *value, const char *base_dir, char *err, size_t errlen)
{
    return resolve(value, base_dir, 0, err, errlen);
}
