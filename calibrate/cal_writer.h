/* Building a calibration document (DESIGN.md's calibration format) and writing it atomically. */
#ifndef DTSIM_CALIBRATE_CAL_WRITER_H
#define DTSIM_CALIBRATE_CAL_WRITER_H
#include <jansson.h>
#include <stdio.h>

/* A new document with the provenance fields (device, source, date now, host, command). */
json_t *cal_new(const char *device, const char *source, int argc, char **argv);
/* Appends a line to the document's "sources" list (made when missing). 0, or -1 where "sources"
 * is not a list. */
int cal_add_source(json_t *doc, const char *line);
/* Writes doc to f as the shipped calibrations are laid out (objects of plain values on one line,
 * two-space indent, reals to 6 significant digits), with a final newline. 0 or -1. */
int cal_dump(json_t *doc, FILE *f);
/* Writes doc to path ("-" = stdout) through a temporary file and a rename. 0 or -1. */
int cal_write(json_t *doc, const char *path);
#endif
