/* Reading and writing whole files in the calibration tests (dtcal's inputs and outputs). Include
 * after cmocka.h. */
#ifndef DTSIM_TESTS_CALIBRATE_TEST_FILES_H
#define DTSIM_TESTS_CALIBRATE_TEST_FILES_H
#include <stdio.h>
#include <stdlib.h>

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* The file as a string (at most 1 MiB; the caller frees), or NULL. */
static char *read_all(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *s = calloc(1, 1 << 20);
    size_t n = fread(s, 1, (1 << 20) - 1, f);
    s[n] = 0;
    fclose(f);
    return s;
}

#endif
