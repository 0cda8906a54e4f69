/* See json_seal.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include "json_seal.h"

uint32_t json_seal_crc32(json_t *doc, const char *skip_key, int real_digits)
{
    json_t *copy = json_is_object(doc) && skip_key ? json_copy(doc) : json_incref(doc); /* shallow copy */
    if (json_is_object(copy) && skip_key)
        json_object_del(copy, skip_key);
    size_t flags = JSON_SORT_KEYS | JSON_COMPACT | JSON_ENCODE_ANY;
    if (real_digits > 0)
        flags |= JSON_REAL_PRECISION(real_digits);
    char *text = json_dumps(copy, flags);
    json_decref(copy);
    uLong c = crc32(0L, Z_NULL, 0);
    for (size_t n = text ? strlen(text) : 0, off = 0; off < n;) { /* crc32 takes under 4 GiB a call */
        size_t chunk = n - off > ((size_t)1 << 30) ? ((size_t)1 << 30) : n - off;
        c = crc32(c, (const Bytef *)text + off, (uInt)chunk);
        off += chunk;
    }
    free(text);
    return (uint32_t)c;
}

void json_seal_hex(json_t *doc, const char *skip_key, int real_digits, char out[9])
{
    snprintf(out, 9, "%08x", (unsigned)json_seal_crc32(doc, skip_key, real_digits));
}

int json_seal_matches(json_t *doc, const char *key, int real_digits, char found[9])
{
    found[0] = 0;
    json_t *seal = json_is_object(doc) ? json_object_get(doc, key) : NULL;
    if (!seal)
        return 1;
    json_seal_hex(doc, key, real_digits, found);
    return json_is_string(seal) && !strcmp(json_string_value(seal), found);
}
