/* The calibration and platform sources for the report's assumptions; see markdown.h. The
 * loader validates these files but keeps no "sources" (nothing downstream computes with
 * them), so the report reads them again from the files the scenario names. */
#include <jansson.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "markdown.h"

#ifndef DTSIM_SOURCE_DIR
#define DTSIM_SOURCE_DIR "."
#endif

/* A path as the loader resolves it: relative to the referring file's folder, then to the
 * repository root. NULL when neither exists. */
static json_t *load_near(const char *ref_file, const char *name, char *found, size_t n)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", ref_file);
    const char *root = getenv("DTSIM_ROOT");
    const char *bases[] = {dirname(dir), root && *root ? root : DTSIM_SOURCE_DIR};
    for (int i = 0; i < 2; i++) {
        if (name[0] == '/')
            snprintf(found, n, "%s", name);
        else
            snprintf(found, n, "%s/%s", bases[i], name);
        if (access(found, R_OK) == 0) {
            json_error_t je;
            return json_load_file(found, 0, &je);
        }
    }
    return NULL;
}

static void list(FILE *f, const char *what, json_t *obj)
{
    json_t *src = json_object_get(obj, "sources"), *notes = json_object_get(obj, "notes");
    size_t i;
    json_t *v;
    if (json_is_string(src))
        fprintf(f, "- %s: %s\n", what, json_string_value(src));
    json_array_foreach(src, i, v) if (json_is_string(v)) fprintf(f, "- %s: %s\n", what, json_string_value(v));
    if (json_is_string(notes))
        fprintf(f, "- %s (notes): %s\n", what, json_string_value(notes));
}

void markdown_sources(FILE *f, const scenario_config *s)
{
    if (!s->path[0])
        return;
    json_error_t je;
    json_t *scen = json_load_file(s->path, 0, &je);
    if (!scen)
        return;
    list(f, "Scenario", scen);
    char plat_path[4400] = "", cal_path[4400] = "";
    json_t *plat = json_object_get(scen, "platform"), *cal = json_object_get(scen, "calibration");
    json_t *plat_owned = NULL, *cal_owned = NULL;
    const char *plat_ref = s->path; /* the file a platform-named calibration is relative to */
    if (json_is_string(plat)) {
        plat = plat_owned = load_near(s->path, json_string_value(plat), plat_path, sizeof plat_path);
        plat_ref = plat_path;
    }
    if (json_is_object(plat))
        list(f, "Platform", plat);
    if (json_is_string(cal))
        cal = cal_owned = load_near(s->path, json_string_value(cal), cal_path, sizeof cal_path);
    else if (!cal && json_is_object(plat) && json_is_string(json_object_get(plat, "calibration")))
        cal = cal_owned = load_near(plat_ref, json_string_value(json_object_get(plat, "calibration")), cal_path,
                                    sizeof cal_path);
    if (json_is_object(cal))
        list(f, "Calibration", cal);
    json_decref(plat_owned);
    json_decref(cal_owned);
    json_decref(scen);
}
