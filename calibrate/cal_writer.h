/* Building a calibration document (DESIGN.md's calibration format) and writing it atomically. */
#ifndef DTSIM_CALIBRATE_CAL_WRITER_H
#define DTSIM_CALIBRATE_CAL_WRITER_H
#include <jansson.h>

/* A new document with the provenance fields (device, source, date now, host, command). */
json_t *cal_new(const char *device, const char *source, int argc, char **argv);
/* Writes doc to path ("-" = stdout) through a temporary file and a rename. 0 or -1. */
int cal_write(json_t *doc, const char *path);
#endif
