/* A scenario's "model" resolved to one object, the one way dtsim and dtrain both read it:
 *  - an object is the model as it is;
 *  - a string names a model file (models/ holds the common open models): relative to base_dir,
 *    then to the repository root; the file is {"model": {...}, "source": "..."} or a bare model
 *    object;
 *  - an object with "from": PATH is that file's model, the object's other keys overriding its
 *    keys one by one ("from" may chain, up to MODEL_FROM_DEPTH files).
 * Shared with sim/ (dtengine_core). */
#ifndef DTSIM_ENGINE_MODEL_FILE_H
#define DTSIM_ENGINE_MODEL_FILE_H

#include <jansson.h>
#include <stddef.h>

#define MODEL_FROM_DEPTH 8
#define MODEL_FILE_MAX_BYTES (64 << 20) /* as dtsim's CONFIG_MAX_FILE_BYTES */

/* Returns a new reference to the resolved model object, or NULL with err naming the file or key
 * and what is wrong. */
json_t *model_resolve(json_t *value, const char *base_dir, char *err, size_t errlen);

/* The one way a file named in another is found (dtsim's config_resolve_path too): an absolute
 * name as it is, else relative to base_dir, else to the repository root ($DTSIM_ROOT, else the
 * source tree). 0 with the path in out, or -1 when it is in neither place. */
int repo_file_find(const char *name, const char *base_dir, char *out, size_t n);

/* A description file worth parsing: a regular file of at most MODEL_FILE_MAX_BYTES (a device
 * or a pipe may never end). 0, or -1 with err saying which. */
int description_file_ok(const char *path, char *err, size_t errlen);

#endif
