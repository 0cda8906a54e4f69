/* A checkpoint's manifest.json (checkpoint.h): sealed with a CRC32 when written, and read back
 * as untrusted input, every field range-checked before any of it is used.
 *
 * The seal, "manifest_crc32", is zlib's CRC32 of the manifest without that key, serialised
 * canonically (jansson, JSON_SORT_KEYS | JSON_COMPACT, reals at full precision), so it does not
 * depend on the file's layout: an edited value fails it, a re-indented file does not. Format 3
 * manifests carry it; format 2 ones, written before it existed, load without it (range-checked
 * all the same). Internal to checkpoint.c. */
#ifndef DTSIM_ENGINE_CHECKPOINT_MANIFEST_H
#define DTSIM_ENGINE_CHECKPOINT_MANIFEST_H
#include <jansson.h>
#include <stddef.h>
#include "checkpoint.h"

#define MANIFEST_FORMAT 3        /* 3: sealed by manifest_crc32; 2: the same keys without it */
#define MANIFEST_SHARD_HEADER 64 /* a shard's header bytes (checkpoint.c writes them) */

/* What a manifest says, every value in range. */
typedef struct {
    train_state st;
    ckpt_layout layout;
    int world;          /* tp x pp x dp: the shard count */
    gpt_config model;   /* as recorded (compare with the run's before using anything) */
    json_t *shards;     /* the "shards" array, each entry checked (borrowed from the document) */
} ckpt_manifest;

/* Adds "manifest_crc32" to a manifest about to be written. */
void manifest_seal(json_t *man);

/* Reads path, the manifest of the folder of step folder_step. Returns 0 with *out and *doc (the
 * parsed document, json_decref it; out->shards points into it), 1 when there is no manifest (an
 * incomplete checkpoint), or -1 with why naming the file and the field at fault. */
int manifest_read(const char *path, int folder_step, ckpt_manifest *out, json_t **doc, char *why, size_t len);
#endif
