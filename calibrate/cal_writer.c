/* Calibration documents; see cal_writer.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "atomic_file.h"
#include "cal_writer.h"
#include "config_json.h"
#include "json_seal.h"

json_t *cal_new(const char *device, const char *source, int argc, char **argv)
{
    char date[64], host[256] = "unknown", cmd[2048] = "";
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    gethostname(host, sizeof host - 1);
    for (int i = 0; i < argc; i++)
        snprintf(cmd + strlen(cmd), sizeof cmd - strlen(cmd), "%s%s", i ? " " : "", argv[i]);
    return json_pack("{s:s,s:s,s:s,s:s,s:s}", "device", device, "source", source, "date", date, "host", host,
                     "command", cmd);
}

int cal_add_source(json_t *doc, const char *line)
{
    json_t *sources = json_object_get(doc, "sources");
    if (!sources)
        json_object_set_new(doc, "sources", sources = json_array());
    if (!json_is_array(sources))
        return -1;
    return json_array_append_new(sources, json_string(line));
}

static int is_scalar(const json_t *v) { return !json_is_object(v) && !json_is_array(v); }

static int scalar(FILE *f, const json_t *v)
{
    char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_REAL_PRECISION(DTCAL_JSON_REAL_DIGITS));
    if (!s)
        return -1;
    int rc = fputs(s, f) < 0 ? -1 : 0;
    free(s);
    return rc;
}

static int key(FILE *f, const char *k)
{
    json_t *s = json_string(k);
    int rc = s ? scalar(f, s) : -1;
    json_decref(s);
    return rc < 0 || fputs(": ", f) < 0 ? -1 : 0;
}

/* The shipped files' layout: an object of scalars on one line ({ "m": 512, "tflops": 21.8 }),
 * anything else one member or element a line, indented by two. */
static int dump(FILE *f, json_t *v, int indent)
{
    const char *k;
    json_t *m;
    size_t i, n = json_is_object(v) ? json_object_size(v) : json_is_array(v) ? json_array_size(v) : 0;
    if (is_scalar(v))
        return scalar(f, v);
    if (n == 0)
        return fputs(json_is_object(v) ? "{}" : "[]", f) < 0 ? -1 : 0;
    int flat = json_is_object(v);
    json_object_foreach(v, k, m) flat &= is_scalar(m);
    if (flat) {
        fputs("{ ", f);
        i = 0;
        json_object_foreach(v, k, m) if ((i++ && fputs(", ", f) < 0) || key(f, k) || scalar(f, m)) return -1;
        return fputs(" }", f) < 0 ? -1 : 0;
    }
    fputs(json_is_object(v) ? "{\n" : "[\n", f);
    i = 0;
    if (json_is_object(v)) {
        json_object_foreach(v, k, m) {
            if (fprintf(f, "%*s", indent + 2, "") < 0 || key(f, k) || dump(f, m, indent + 2) ||
                fputs(++i < n ? ",\n" : "\n", f) < 0)
                return -1;
        }
    } else {
        json_array_foreach(v, i, m) {
            if (fprintf(f, "%*s", indent + 2, "") < 0 || dump(f, m, indent + 2) || fputs(i + 1 < n ? ",\n" : "\n", f) < 0)
                return -1;
        }
    }
    return fprintf(f, "%*s%s", indent, "", json_is_object(v) ? "}" : "]") < 0 ? -1 : 0;
}

int cal_dump(json_t *doc, FILE *f)
{
    return dump(f, doc, 0) || fputc('\n', f) == EOF ? -1 : 0;
}

int cal_write(json_t *doc, const char *path)
{
    /* sealed as written, so dtsim and dtcal can tell an edit or damage from what dtcal wrote */
    char crc[9];
    json_seal_hex(doc, "calibration_crc32", DTCAL_JSON_REAL_DIGITS, crc);
    json_object_set_new(doc, "calibration_crc32", json_string(crc));
    if (!strcmp(path, "-"))
        return cal_dump(doc, stdout) || fflush(stdout) ? -1 : 0;
    atomic_file a;
    char why[4400];
    if (atomic_file_open(&a, path, why, sizeof why) != 0) {
        fprintf(stderr, "dtcal: %s\n", why);
        return -1;
    }
    if (cal_dump(doc, a.f) != 0) {
        atomic_file_abort(&a);
        fprintf(stderr, "dtcal: cannot write %s\n", path);
        return -1;
    }
    if (atomic_file_commit(&a, 0, why, sizeof why) != 0) {
        fprintf(stderr, "dtcal: %s\n", why);
        return -1;
    }
    return 0;
}

int cal_out_checked(const char *who, const char *flag, const char *path)
{
    if (!strcmp(path, "-"))
        return 0;
    /* the file is written beside itself and renamed: asked of atomic_file itself, as dtsim's
     * outputs are (a folder at path is refused with its own words) */
    char dir[4096], why[4400];
    if ((size_t)snprintf(dir, sizeof dir, "%s", path) >= sizeof dir) {
        fprintf(stderr, "%s: %s %.64s...: a path longer than %zu characters\n", who, flag, path, sizeof dir - 1);
        return -1;
    }
    if (atomic_file_check(path, why, sizeof why) == 0)
        return 0;
    int cause = errno;
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        fprintf(stderr, "%s: %s %s: it is a folder\n", who, flag, path);
        return -1;
    }
    char *slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else
        slash[slash == dir] = 0; /* "/f" is in "/" */
    fprintf(stderr, "%s: %s %s: cannot write in the folder %s: %s\n", who, flag, path, dir, strerror(cause));
    return -1;
}

json_t *cal_load_into(const char *path, const char *who)
{
    json_error_t je;
    json_t *doc = json_load_file(path, 0, &je);
    char crc[9];
    const char *bad = !doc ? je.text : !json_is_object(doc) ? "not a calibration (a JSON object)"
                    : json_object_get(doc, "sources") && !json_is_array(json_object_get(doc, "sources"))
                        ? "its \"sources\" is not a list"
                    : !json_seal_matches(doc, "calibration_crc32", DTCAL_JSON_REAL_DIGITS, crc)
                        ? "it does not match its calibration_crc32: edited or damaged since dtcal wrote it (remove "
                          "calibration_crc32 to use it as it is)" : NULL;
    if (bad) {
        if (doc || je.line < 1)
            fprintf(stderr, "%s: --into %s: %s\n", who, path, bad);
        else
            fprintf(stderr, "%s: --into %s:%d: %s\n", who, path, je.line, bad);
        json_decref(doc);
        return NULL;
    }
    return doc;
}

json_t *cal_set_before_sources(json_t *doc, const char *key, json_t *value)
{
    if (json_object_get(doc, key) || !json_object_get(doc, "sources")) {
        json_object_set_new(doc, key, value);
        return json_incref(doc);
    }
    json_t *out = json_object(), *v;
    const char *k;
    json_object_foreach(doc, k, v) {
        if (!strcmp(k, "sources"))
            json_object_set_new(out, key, value);
        json_object_set(out, k, v);
    }
    return out;
}

int cal_hosts(const char *hosts, int stride, int n, int show, char *out, size_t len)
{
    int distinct = 0;
    size_t used = 0;
    out[0] = 0;
    for (int i = 0; i < n; i++) {
        const char *h = hosts + (size_t)i * stride;
        int seen = 0;
        for (int j = 0; j < i && !seen; j++)
            seen = !strcmp(h, hosts + (size_t)j * stride);
        if (seen)
            continue;
        if (distinct++ < show && used < len)
            used += (size_t)snprintf(out + used, len - used, "%s%s", distinct > 1 ? ", " : "", h);
    }
    if (distinct > show && used < len)
        snprintf(out + used, len - used, " and %d more", distinct - show);
    return distinct;
}
