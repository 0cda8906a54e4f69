/* dtok: turns a text file into a DTOK token file with the byte-level tokenizer (one token per
 * byte, vocabulary 256), the tokenizer dtrain's bundled corpus uses. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "data.h"

int main(int argc, char **argv)
{
    if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        printf("usage: dtok TEXT_FILE OUT.tok\nTokenizes bytes (vocabulary 256) into dtrain's token format.\n");
        return 0;
    }
    if (argc != 3) {
        fprintf(stderr, "usage: dtok TEXT_FILE OUT.tok\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
    if (!f) {
        fprintf(stderr, "dtok: %s: cannot open\n", argv[1]);
        return 2;
    }
    size_t cap = 1 << 20, n = 0;
    uint16_t *tok = malloc(cap * sizeof *tok);
    int c;
    while ((c = fgetc(f)) != EOF) {
        if (n == cap)
            tok = realloc(tok, (cap *= 2) * sizeof *tok);
        tok[n++] = (uint16_t)c;
    }
    fclose(f);
    if (n < 2) {
        fprintf(stderr, "dtok: %s: needs at least 2 bytes of text\n", argv[1]);
        free(tok);
        return 2;
    }
    char err[512];
    int rc = data_write(argv[2], tok, n, 256, err, sizeof err);
    free(tok);
    if (rc) {
        fprintf(stderr, "dtok: %s\n", err);
        return 1;
    }
    fprintf(stderr, "dtok: %zu tokens written to %s\n", n, argv[2]);
    return 0;
}
