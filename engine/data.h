/* Tokenized corpora and a deterministic loader.
 *
 * File format (little-endian), documented in data/README.md:
 *   bytes 0-3   magic "DTOK"
 *   bytes 4-7   version (1)
 *   bytes 8-11  bytes per token (2: uint16)
 *   bytes 12-15 vocabulary size
 *   bytes 16-23 token count
 *   then token count uint16 tokens, each < vocabulary size.
 * The loader draws sequence i of the run from a position that depends only on the seed and i,
 * so a run resumed at sequence i sees exactly the data an uninterrupted run would. */
#ifndef DTSIM_ENGINE_DATA_H
#define DTSIM_ENGINE_DATA_H
#include <stddef.h>
#include <stdint.h>

#define DTOK_HEADER_BYTES 24

typedef struct {
    uint16_t *tokens;
    uint64_t count;
    uint32_t vocab;
    uint64_t seed;
    uint64_t position;   /* sequences handed out so far (saved in checkpoints) */
} data_loader;

/* Opens and validates a token file; on error returns -1 with a message naming the file. */
int data_open(data_loader *d, const char *path, uint64_t seed, char *err, size_t errlen);
void data_close(data_loader *d);
/* Next B sequences of T tokens and their next-token targets (host arrays of B*T). Needs
 * count > T + 1. */
void data_next_batch(data_loader *d, int B, int T, int *tokens, int *targets);
/* Writes tokens to path in the format above (temporary name + rename). */
int data_write(const char *path, const uint16_t *tokens, uint64_t count, uint32_t vocab, char *err, size_t errlen);
#endif
