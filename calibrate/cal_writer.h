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
/* Whether cal_write can put a file at path (atomic_file_check, as dtsim's outputs): "-", or a
 * folder that exists and takes new files, and no folder at path itself.
 * Checked before a measurement, which a result with nowhere to go would waste. 0, or -1 with
 * "who: flag path: ..." on stderr. */
int cal_out_checked(const char *who, const char *flag, const char *path);

/* For a command that adds one key to an existing calibration (--into path; who, e.g. "dtcal
 * overlap", starts the message): the document, a JSON object whose "sources", if any, is a list;
 * NULL with the reason on stderr. */
json_t *cal_load_into(const char *path, const char *who);
/* doc with key set to value (a reference stolen): in place where the key is there, else before
 * "sources" (the shipped files end with their sources), else last. A new reference (doc itself
 * or a reordered copy). */
json_t *cal_set_before_sources(json_t *doc, const char *key, json_t *value);
/* n host names, stride bytes apart, in rank order: the distinct ones, each once in order of first
 * appearance, at most `show` named and the rest counted ("a, b and 14 more"), into out. Returns
 * the number of distinct hosts. */
int cal_hosts(const char *hosts, int stride, int n, int show, char *out, size_t len);
#endif
