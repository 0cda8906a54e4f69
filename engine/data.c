/* Token files and the deterministic loader; see data.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "data.h"
#include "rng.h"
#include "atomic_file.h"

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int data_open(data_loader *d, const char *path, uint64_t seed, char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    unsigned char h[DTOK_HEADER_BYTES];
    if (fread(h, 1, sizeof h, f) != sizeof h) {
        snprintf(err, errlen, "%s: truncated header (a token file starts with a %d-byte header)", path,
                 DTOK_HEADER_BYTES);
        fclose(f);
        return -1;
    }
    if (memcmp(h, "DTOK", 4) != 0) {
        snprintf(err, errlen, "%s: bad magic (not a DTOK token file; make one with dtok)", path);
        fclose(f);
        return -1;
    }
    uint32_t version = le32(h + 4), width = le32(h + 8);
    uint64_t count = le32(h + 16) | (uint64_t)le32(h + 20) << 32;
    if (version != 1 || width != 2) {
        snprintf(err, errlen, "%s: unsupported version %u or token width %u (expected 1 and 2)", path, version, width);
        fclose(f);
        return -1;
    }
    d->vocab = le32(h + 12);
    if (d->vocab < 2 || d->vocab > 65536) {
        snprintf(err, errlen, "%s: vocabulary size %u out of range 2..65536", path, d->vocab);
        fclose(f);
        return -1;
    }
    if (fseek(f, 0, SEEK_END) != 0) {
        snprintf(err, errlen, "%s: cannot seek", path);
        fclose(f);
        return -1;
    }
    long size = ftell(f);
    if (size < 0 || (uint64_t)size != DTOK_HEADER_BYTES + count * 2) {
        snprintf(err, errlen, "%s: header says %llu tokens (%llu bytes) but the file has %ld bytes: truncated or corrupt",
                 path, (unsigned long long)count, (unsigned long long)(DTOK_HEADER_BYTES + count * 2), size);
        fclose(f);
        return -1;
    }
    d->tokens = malloc(count * 2 + 2);
    fseek(f, DTOK_HEADER_BYTES, SEEK_SET);
    if (!d->tokens || fread(d->tokens, 2, count, f) != count) {
        snprintf(err, errlen, "%s: cannot read %llu tokens", path, (unsigned long long)count);
        fclose(f);
        data_close(d);
        return -1;
    }
    fclose(f);
    for (uint64_t i = 0; i < count; i++) {
        /* The file is little-endian; so is every machine this runs on (checked at build time
         * would be better; this converts explicitly). */
        unsigned char *b = (unsigned char *)&d->tokens[i];
        d->tokens[i] = (uint16_t)(b[0] | b[1] << 8);
        if (d->tokens[i] >= d->vocab) {
            snprintf(err, errlen, "%s: token %llu is %u, not below the vocabulary size %u", path,
                     (unsigned long long)i, d->tokens[i], d->vocab);
            data_close(d);
            return -1;
        }
    }
    d->count = count;
    d->seed = seed;
    return 0;
}

void data_close(data_loader *d)
{
    free(d->tokens);
    memset(d, 0, sizeof *d);
}

void data_next_batch(data_loader *d, int B, int T, int *tokens, int *targets)
{
    uint64_t span = d->count - (uint64_t)T - 1;
    for (int b = 0; b < B; b++) {
        rng_t r;
        rng_seed(&r, d->seed * 0x9e3779b97f4a7c15ull + d->position++);
        uint64_t start = rng_next(&r) % (span + 1);
        for (int t = 0; t < T; t++) {
            tokens[b * T + t] = d->tokens[start + t];
            targets[b * T + t] = d->tokens[start + t + 1];
        }
    }
}

int data_write(const char *path, const uint16_t *tokens, uint64_t count, uint32_t vocab, char *err, size_t errlen)
{
    atomic_file a;
    if (atomic_file_open(&a, path, err, errlen) != 0)
        return -1;
    FILE *f = a.f;
    unsigned char h[DTOK_HEADER_BYTES] = {'D', 'T', 'O', 'K', 1, 0, 0, 0, 2, 0, 0, 0};
    for (int i = 0; i < 4; i++)
        h[12 + i] = (unsigned char)(vocab >> (8 * i));
    for (int i = 0; i < 8; i++)
        h[16 + i] = (unsigned char)(count >> (8 * i));
    int ok = fwrite(h, 1, sizeof h, f) == sizeof h;
    for (uint64_t i = 0; ok && i < count; i++) {
        unsigned char b[2] = {(unsigned char)(tokens[i] & 0xff), (unsigned char)(tokens[i] >> 8)};
        ok = fwrite(b, 1, 2, f) == 2;
    }
    if (!ok) {
        snprintf(err, errlen, "%s: write failed: %s", path, strerror(errno));
        atomic_file_abort(&a);
        return -1;
    }
    return atomic_file_commit(&a, 1, err, errlen);
}
