/* A seal over a JSON document that a program wrote and will read back: zlib's CRC32 of the
 * document serialised compactly with sorted keys, the seal's own key left out, reals at the
 * precision the writer used (so the seal survives the write and the read back). Checkpoint
 * manifests (manifest_crc32), sweep parts (rows_crc32) and calibration files written by dtcal
 * (calibration_crc32) carry one. */
#ifndef DTSIM_ENGINE_JSON_SEAL_H
#define DTSIM_ENGINE_JSON_SEAL_H
#include <jansson.h>
#include <stdint.h>

/* skip_key: a top-level key left out (NULL: none); real_digits: the significant digits the
 * writer prints reals with (0: jansson's default, 17). */
uint32_t json_seal_crc32(json_t *doc, const char *skip_key, int real_digits);
/* The same as 8 lowercase hex digits. */
void json_seal_hex(json_t *doc, const char *skip_key, int real_digits, char out[9]);
/* 1 when doc carries no seal at key, or a string equal to the seal the rest of it gives; 0 when
 * it does not match. found: what the content gives ("" without a seal). */
int json_seal_matches(json_t *doc, const char *key, int real_digits, char found[9]);
#endif
