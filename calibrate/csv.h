/* A small CSV reader (RFC 4180 with the usual leniencies), for measurement files written by
 * other tools: comma-separated fields; a field in double quotes may hold commas, line breaks and
 * doubled quotes (""); LF, CRLF or CR line ends; a UTF-8 byte-order mark at the start is skipped;
 * spaces and tabs around a field are dropped; blank lines and lines starting with '#' are
 * skipped. Refused, with the line and column: a quoted field that is never closed, text after a
 * closing quote, a quote inside an unquoted field, a file in UTF-16. */
#ifndef DTSIM_CALIBRATE_CSV_H
#define DTSIM_CALIBRATE_CSV_H
#include <stddef.h>

typedef struct {
    char *data;          /* the whole file */
    size_t size, pos;
    long line;           /* the line of data[pos], from 1 */
    char *buf;           /* the current record's fields, each NUL-terminated */
    size_t buf_cap;
    size_t *field;       /* offsets of the fields in buf */
    size_t nfield, field_cap;
} csv_reader;

/* Reads path into r. 0, or -1 with err. */
int csv_open(csv_reader *r, const char *path, char *err, size_t errlen);
/* The next record: 1 with its fields (csv_field) and *line the line it starts on, 0 at the end,
 * -1 with err ("L: column C: ..."; the caller puts the file's name and a colon before it). */
int csv_next(csv_reader *r, long *line, char *err, size_t errlen);
static inline const char *csv_field(const csv_reader *r, size_t i) { return r->buf + r->field[i]; }
void csv_close(csv_reader *r);
#endif
