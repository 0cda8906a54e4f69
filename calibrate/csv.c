/* The CSV reader; see csv.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "csv.h"

#define CSV_MAX_BYTES ((size_t)1 << 30)

int csv_open(csv_reader *r, const char *path, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    size_t cap = 65536, n = 0;
    char *d = malloc(cap);
    while (d) {
        n += fread(d + n, 1, cap - n, f);
        if (n < cap || cap >= CSV_MAX_BYTES)
            break;
        char *bigger = realloc(d, cap * 2);
        if (!bigger) {
            free(d);
            d = NULL;
            break;
        }
        d = bigger;
        cap *= 2;
    }
    int bad = ferror(f);
    fclose(f);
    if (!d || bad || n >= CSV_MAX_BYTES) {
        free(d);
        snprintf(err, errlen, "%s: %s", path, !d ? "out of memory" : bad ? "read error" : "larger than 1 GiB");
        return -1;
    }
    if (n >= 2 && ((unsigned char)d[0] == 0xFF && (unsigned char)d[1] == 0xFE)) {
        free(d);
        snprintf(err, errlen, "%s: the file is UTF-16; save it as UTF-8 (or ASCII)", path);
        return -1;
    }
    if (n >= 2 && ((unsigned char)d[0] == 0xFE && (unsigned char)d[1] == 0xFF)) {
        free(d);
        snprintf(err, errlen, "%s: the file is UTF-16; save it as UTF-8 (or ASCII)", path);
        return -1;
    }
    r->data = d;
    r->size = n;
    r->line = 1;
    if (n >= 3 && (unsigned char)d[0] == 0xEF && (unsigned char)d[1] == 0xBB && (unsigned char)d[2] == 0xBF)
        r->pos = 3; /* the UTF-8 byte-order mark */
    return 0;
}

void csv_close(csv_reader *r)
{
    free(r->data);
    free(r->buf);
    free(r->field);
    memset(r, 0, sizeof *r);
}

static int put(csv_reader *r, size_t *len, char c)
{
    if (*len + 1 >= r->buf_cap) {
        size_t cap = r->buf_cap ? r->buf_cap * 2 : 4096;
        char *b = realloc(r->buf, cap);
        if (!b)
            return -1;
        r->buf = b;
        r->buf_cap = cap;
    }
    r->buf[(*len)++] = c;
    return 0;
}

static int start_field(csv_reader *r, size_t at)
{
    if (r->nfield == r->field_cap) {
        size_t cap = r->field_cap ? r->field_cap * 2 : 64;
        size_t *f = realloc(r->field, cap * sizeof *f);
        if (!f)
            return -1;
        r->field = f;
        r->field_cap = cap;
    }
    r->field[r->nfield++] = at;
    return 0;
}

/* At a line end (LF, CRLF or CR)? */
static int at_eol(csv_reader *r)
{
    return r->pos < r->size && (r->data[r->pos] == '\n' || r->data[r->pos] == '\r');
}

/* Steps over the line end at pos and counts the line. */
static void skip_eol(csv_reader *r)
{
    if (r->data[r->pos] == '\r' && r->pos + 1 < r->size && r->data[r->pos + 1] == '\n')
        r->pos++;
    r->pos++;
    r->line++;
}

static int is_blank(char c) { return c == ' ' || c == '\t'; }

int csv_next(csv_reader *r, long *line, char *err, size_t errlen)
{
    const char *d = r->data;
    /* blank lines, lines of spaces and '#' comment lines */
    for (;;) {
        size_t p = r->pos;
        while (p < r->size && is_blank(d[p]))
            p++;
        if (p == r->size) {
            r->pos = p;
            return 0;
        }
        if (d[p] == '#') {
            while (p < r->size && d[p] != '\n' && d[p] != '\r')
                p++;
        }
        if (p < r->size && (d[p] == '\n' || d[p] == '\r')) {
            r->pos = p;
            skip_eol(r);
            continue;
        }
        if (p == r->size) {
            r->pos = p;
            return 0;
        }
        break;
    }
    *line = r->line;
    r->nfield = 0;
    size_t len = 0;
    for (;;) {
        while (r->pos < r->size && is_blank(d[r->pos]))
            r->pos++;
        if (start_field(r, len) != 0)
            goto oom;
        size_t column = r->nfield;
        if (r->pos < r->size && d[r->pos] == '"') {
            long opened = r->line;
            r->pos++;
            for (;;) {
                if (r->pos == r->size) {
                    snprintf(err, errlen, "%ld: column %zu: the quoted field opened on this line is not closed", opened,
                             column);
                    return -1;
                }
                char c = d[r->pos];
                if (c == '"') {
                    if (r->pos + 1 < r->size && d[r->pos + 1] == '"') {
                        if (put(r, &len, '"') != 0)
                            goto oom;
                        r->pos += 2;
                        continue;
                    }
                    r->pos++;
                    break;
                }
                if (c == '\n' || (c == '\r' && !(r->pos + 1 < r->size && d[r->pos + 1] == '\n')))
                    r->line++;
                if (put(r, &len, c) != 0)
                    goto oom;
                r->pos++;
            }
            while (r->pos < r->size && is_blank(d[r->pos]))
                r->pos++;
            if (r->pos < r->size && d[r->pos] != ',' && !at_eol(r)) {
                snprintf(err, errlen, "%ld: column %zu: text after the closing quote of a quoted field",
                         r->line, column);
                return -1;
            }
        } else {
            size_t end = len;
            while (r->pos < r->size && d[r->pos] != ',' && !at_eol(r)) {
                if (d[r->pos] == '"') {
                    snprintf(err, errlen, "%ld: column %zu: a quote inside an unquoted field (quote the "
                                          "whole field and double the quote)", r->line, column);
                    return -1;
                }
                if (put(r, &len, d[r->pos]) != 0)
                    goto oom;
                if (!is_blank(d[r->pos]))
                    end = len;
                r->pos++;
            }
            len = end; /* trailing spaces dropped */
        }
        if (put(r, &len, '\0') != 0)
            goto oom;
        if (r->pos < r->size && d[r->pos] == ',') {
            r->pos++;
            continue;
        }
        if (r->pos < r->size)
            skip_eol(r);
        return 1;
    }
oom:
    snprintf(err, errlen, "%ld: out of memory", r->line);
    return -1;
}
