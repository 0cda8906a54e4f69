/* Strict typed JSON access shared by the scenario, platform and calibration loaders. */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "config_json.h"
#include "model_file.h"

#ifndef DTSIM_SOURCE_DIR
#define DTSIM_SOURCE_DIR "."
#endif

int config_fail(config_error *err, const char *fmt, ...)
{
    if (!err) /* only whether: the message is not written */
        return -1;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    if (n >= (int)sizeof err->msg) /* past the room (a huge --set value): said, not cut silently */
        memcpy(err->msg + sizeof err->msg - sizeof CONFIG_CUT, CONFIG_CUT, sizeof CONFIG_CUT);
    return -1;
}

json_t *config_load_file(const char *path, const char *label, config_error *err)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        config_fail(err, "%s: cannot read %s", label, path);
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        config_fail(err, "%s: %s is not a regular file", label, path);
        return NULL;
    }
    if (st.st_size > CONFIG_MAX_FILE_BYTES) {
        config_fail(err, "%s: %s is %lld bytes, over the %ld-byte limit for a description file", label, path,
                    (long long)st.st_size, CONFIG_MAX_FILE_BYTES);
        return NULL;
    }
    json_error_t je;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        if (je.line > 0) /* a place in the text */
            config_fail(err, "%s: %s:%d:%d: %s", label, path, je.line, je.column, je.text);
        else /* the file as a whole (jansson says -1 for no line) */
            config_fail(err, "%s: %s: %s", label, path, je.text);
        return NULL;
    }
    if (!json_is_object(root)) {
        config_fail(err, "%s: %s: the top level must be an object", label, path);
        json_decref(root);
        return NULL;
    }
    return root;
}

static int edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63)
        return 99;
    int d[64][64];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            int sub = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            int del = d[i - 1][j] + 1, ins = d[i][j - 1] + 1;
            d[i][j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
    return d[la][lb];
}

int config_check_keys(json_t *obj, const char *path, const char *const *allowed, config_error *err)
{
    const char *key;
    json_t *val;
    json_object_foreach(obj, key, val) {
        if (!strcmp(key, "sources") || !strcmp(key, "notes"))
            continue;
        int known = 0;
        const char *best = NULL;
        int best_d = 1 << 20;
        for (int i = 0; allowed[i]; i++) {
            if (!strcmp(key, allowed[i])) {
                known = 1;
                break;
            }
            int d = edit_distance(key, allowed[i]);
            if (d < best_d) {
                best_d = d;
                best = allowed[i];
            }
        }
        if (known)
            continue;
        int len = (int)strlen(key);
        if (best && best_d <= (len > 6 ? len / 3 : 2))
            return config_fail(err, "%s.%s: unknown key (did you mean '%s'?)", path, key, best);
        return config_fail(err, "%s.%s: unknown key", path, key);
    }
    return 0;
}

static const char *type_name(json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "a list";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "?";
}

int config_int(json_t *obj, const char *path, const char *key, int required, long long def, long long lo,
               long long hi, long long *out, config_error *err)
{
    json_t *v = json_object_get(obj, key);
    if (!v) {
        if (required)
            return config_fail(err, "%s.%s: required (an integer)", path, key);
        *out = def;
        return 0;
    }
    long long x;
    if (json_is_integer(v)) {
        x = json_integer_value(v);
    } else if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)) &&
               fabs(json_real_value(v)) < 9e15) {
        x = (long long)json_real_value(v); /* 1e3 and 1536.0 are whole numbers too */
    } else if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v))) {
        /* a whole number beyond what a double holds exactly: out of every range here */
        return config_fail(err, "%s.%s: %g is outside the allowed range %lld..%lld", path, key, json_real_value(v), lo,
                           hi);
    } else {
        return config_fail(err, "%s.%s: expected an integer, got %s", path, key, type_name(v));
    }
    if (x < lo || x > hi)
        return config_fail(err, "%s.%s: %lld is outside the allowed range %lld..%lld", path, key, x, lo, hi);
    *out = x;
    return 0;
}

int config_num(json_t *obj, const char *path, const char *key, int required, double def, double lo, double hi,
               int positive, double *out, config_error *err)
{
    json_t *v = json_object_get(obj, key);
    if (!v) {
        if (required)
            return config_fail(err, "%s.%s: required (a number)", path, key);
        *out = def;
        return 0;
    }
    if (!json_is_number(v))
        return config_fail(err, "%s.%s: expected a number, got %s", path, key, type_name(v));
    double x = json_number_value(v);
    if (!isfinite(x) || x < lo || x > hi)
        return config_fail(err, "%s.%s: %g is outside the allowed range %g..%g", path, key, x, lo, hi);
    if (positive && x <= 0)
        return config_fail(err, "%s.%s: %g must be greater than 0", path, key, x);
    *out = x;
    return 0;
}

int config_bool(json_t *obj, const char *path, const char *key, int def, int *out, config_error *err)
{
    json_t *v = json_object_get(obj, key);
    if (!v) {
        *out = def;
        return 0;
    }
    if (!json_is_boolean(v))
        return config_fail(err, "%s.%s: expected true or false, got %s", path, key, type_name(v));
    *out = json_is_true(v);
    return 0;
}

int config_str(json_t *obj, const char *path, const char *key, int required, const char *def, char *out,
               size_t n, config_error *err)
{
    json_t *v = json_object_get(obj, key);
    if (!v) {
        if (required)
            return config_fail(err, "%s.%s: required (a string)", path, key);
        snprintf(out, n, "%s", def ? def : "");
        return 0;
    }
    if (!json_is_string(v))
        return config_fail(err, "%s.%s: expected a string, got %s", path, key, type_name(v));
    if (strlen(json_string_value(v)) >= n)
        return config_fail(err, "%s.%s: longer than %zu characters", path, key, n - 1);
    snprintf(out, n, "%s", json_string_value(v));
    return 0;
}

int config_enum(json_t *obj, const char *path, const char *key, const char *const *names, int def, int *out,
                config_error *err)
{
    json_t *v = json_object_get(obj, key);
    if (!v) {
        *out = def;
        return 0;
    }
    char list[512] = "";
    for (int i = 0; names[i]; i++) {
        if (json_is_string(v) && !strcmp(json_string_value(v), names[i])) {
            *out = i;
            return 0;
        }
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", names[i]);
    }
    if (!json_is_string(v))
        return config_fail(err, "%s.%s: expected one of %s, got %s", path, key, list, type_name(v));
    return config_fail(err, "%s.%s: '%s' is not one of %s", path, key, json_string_value(v), list);
}

int config_object(json_t *obj, const char *path, const char *key, json_t **out, config_error *err)
{
    json_t *v = json_object_get(obj, key);
    *out = NULL;
    if (!v)
        return 0;
    if (!json_is_object(v))
        return config_fail(err, "%s.%s: expected an object, got %s", path, key, type_name(v));
    *out = v;
    return 0;
}

int config_apply_override(json_t *root, const char *assignment, config_error *err)
{
    const char *eq = strchr(assignment, '=');
    if (!eq || eq == assignment)
        return config_fail(err, "--set '%s': expected PATH=VALUE", assignment);
    char path[512];
    size_t plen = (size_t)(eq - assignment);
    if (plen >= sizeof path)
        return config_fail(err, "--set: path too long");
    memcpy(path, assignment, plen);
    path[plen] = 0;
    const char *value = eq + 1;
    json_error_t je;
    json_t *val = json_loads(value, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
    char *end;
    errno = 0;
    double x = val ? 0 : strtod(value, &end);
    if (!val && *value && !*end && errno == ERANGE) /* 1e400: a number past a double, so past any key's range */
        val = json_real(fabs(x) < 1 ? 0.0 : copysign(DBL_MAX, x));
    if (!val)
        val = json_string(value); /* not JSON: take it as a string */
    if (!val)
        return config_fail(err, "--set '%s': the value is neither JSON nor a UTF-8 string", assignment);

    json_t *node = root;
    /* Split by hand, not with strtok: "a..b", ".a" and "a." are typos to report, not to
     * silently fold into "a.b". */
    char *seg = path;
    for (;;) {
        char *dot = strchr(seg, '.');
        if (dot)
            *dot = 0;
        if (!*seg) {
            json_decref(val);
            return config_fail(err, "--set '%s': empty path segment", assignment);
        }
        if (!dot) {
            json_object_set_new(node, seg, val);
            return 0;
        }
        json_t *child = json_object_get(node, seg);
        if (!child) {
            /* absent along the path: created here, judged by the loader like a key in the file */
            child = json_object();
            json_object_set_new(node, seg, child);
        } else if (!json_is_object(child)) {
            json_decref(val);
            /* the path walked so far, seg last: the assignment's text up to this dot */
            return config_fail(err, "--set '%s': scenario.%.*s is %s, not an object", assignment, (int)(dot - path),
                               assignment, type_name(child));
        }
        node = child;
        seg = dot + 1;
    }
}

void config_dirname(const char *path, char *out, size_t n)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(out, n, ".");
    else if (slash == path)
        snprintf(out, n, "/");
    else
        snprintf(out, n, "%.*s", (int)(slash - path), path);
}

int config_resolve_path(const char *name, const char *base_dir, char *out, size_t n)
{
    return repo_file_find(name, base_dir, out, n);
}
