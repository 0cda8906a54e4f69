/* The report as one self-contained HTML page; see markdown.h. Only the Markdown the report
 * itself writes is understood: "#"/"##" headings, paragraphs, "- " lists, "|" tables, ```
 * blocks, images on their own line, **bold** and `code`. Images are embedded (data: URLs), so the
 * page can be mailed or attached on its own; one that cannot be read stays a link. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "markdown.h"
#include "atomic_file.h"

static void escaped(FILE *o, const char *t, size_t n)
{
    for (size_t i = 0; i < n && t[i]; i++) {
        char c = t[i];
        if (c == '<')
            fputs("&lt;", o);
        else if (c == '>')
            fputs("&gt;", o);
        else if (c == '&')
            fputs("&amp;", o);
        else if (c == '"')
            fputs("&quot;", o);
        else
            fputc(c, o);
    }
}

/* Inline text: **bold** and `code`, the rest escaped. */
static void inline_text(FILE *o, const char *t)
{
    int bold = 0, code = 0;
    while (*t) {
        if (!code && t[0] == '*' && t[1] == '*') {
            fputs(bold ? "</b>" : "<b>", o);
            bold = !bold;
            t += 2;
        } else if (*t == '`') {
            fputs(code ? "</code>" : "<code>", o);
            code = !code;
            t++;
        } else {
            escaped(o, t, 1);
            t++;
        }
    }
    if (code)
        fputs("</code>", o);
    if (bold)
        fputs("</b>", o);
}

static void table_row(FILE *o, char *line, int header)
{
    fputs("<tr>", o);
    char *cell = line + 1; /* after the leading '|' */
    for (char *bar; (bar = strchr(cell, '|')); cell = bar + 1) {
        *bar = 0;
        fputs(header ? "<th>" : "<td>", o);
        inline_text(o, cell);
        fputs(header ? "</th>" : "</td>", o);
    }
    fputs("</tr>\n", o);
}

#define IMAGE_MAX_BYTES (16 << 20) /* a picture gnuplot drew is a few hundred KB */

/* The image at src (relative to the page's folder, as the report writes it) as a data: URL in
 * base64 (RFC 4648). 0, or -1 (unreadable, too large, or not a .png / .svg). */
static int embed_image(FILE *o, const char *html_path, const char *src)
{
    const char *ext = strrchr(src, '.');
    const char *type = ext && !strcmp(ext, ".png") ? "image/png" : ext && !strcmp(ext, ".svg") ? "image/svg+xml" : NULL;
    if (!type || strstr(src, "://"))
        return -1;
    char path[8192];
    const char *slash = strrchr(html_path, '/');
    if (src[0] == '/' || !slash)
        snprintf(path, sizeof path, "%s", src);
    else
        snprintf(path, sizeof path, "%.*s/%s", (int)(slash - html_path), html_path, src);
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    unsigned char *data = malloc(IMAGE_MAX_BYTES);
    size_t n = data ? fread(data, 1, IMAGE_MAX_BYTES, f) : 0;
    int whole = data && feof(f) && !ferror(f);
    fclose(f);
    if (!whole || n == 0) {
        free(data);
        return -1;
    }
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    fprintf(o, "data:%s;base64,", type);
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)data[i] << 16 | (i + 1 < n ? (unsigned)data[i + 1] << 8 : 0) | (i + 2 < n ? data[i + 2] : 0);
        fputc(b64[v >> 18 & 63], o);
        fputc(b64[v >> 12 & 63], o);
        fputc(i + 1 < n ? b64[v >> 6 & 63] : '=', o);
        fputc(i + 2 < n ? b64[v & 63] : '=', o);
    }
    free(data);
    return 0;
}

int markdown_to_html(const char *md_path, const char *html_path)
{
    FILE *in = fopen(md_path, "r");
    if (!in)
        return -1;
    atomic_file out;
    char why[4400];
    if (atomic_file_open(&out, html_path, why, sizeof why) != 0) {
        fclose(in);
        return -1;
    }
    FILE *o = out.f;
    fputs("<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>dtsim capacity plan</title>\n"
          "<style>body{font-family:sans-serif;max-width:70em;margin:2em auto}pre{background:#f4f4f4;padding:1em;"
          "overflow-x:auto}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2em .5em;"
          "text-align:right}img{max-width:100%}</style></head><body>\n", o);
    char line[8192];
    int pre = 0, list = 0, table = 0;
    while (fgets(line, sizeof line, in)) {
        line[strcspn(line, "\n")] = 0;
        if (!strncmp(line, "```", 3)) {
            fputs(pre ? "</pre>\n" : "<pre>", o);
            pre = !pre;
            continue;
        }
        if (pre) {
            escaped(o, line, sizeof line);
            fputc('\n', o);
            continue;
        }
        if (list && strncmp(line, "- ", 2)) {
            fputs("</ul>\n", o);
            list = 0;
        }
        if (table && line[0] != '|') {
            fputs("</table>\n", o);
            table = 0;
        }
        if (line[0] == '#') {
            int lvl = line[1] == '#' ? (line[2] == '#' ? 3 : 2) : 1;
            fprintf(o, "<h%d>", lvl);
            inline_text(o, line + lvl + 1);
            fprintf(o, "</h%d>\n", lvl);
        } else if (!strncmp(line, "- ", 2)) {
            if (!list)
                fputs("<ul>\n", o);
            list = 1;
            fputs("<li>", o);
            inline_text(o, line + 2);
            fputs("</li>\n", o);
        } else if (line[0] == '|') {
            if (strspn(line, "|-: ") == strlen(line))
                continue; /* the header separator */
            if (!table)
                fputs("<table>\n", o);
            table_row(o, line, !table);
            table = 1;
        } else if (!strncmp(line, "![", 2) && strstr(line, "](")) {
            char *alt = line + 2, *close = strstr(line, "](");
            *close = 0;
            char *src = close + 2;
            src[strcspn(src, ")")] = 0;
            fputs("<p><img alt=\"", o);
            escaped(o, alt, sizeof line);
            fputs("\" src=\"", o);
            if (embed_image(o, html_path, src) != 0)
                escaped(o, src, sizeof line);
            fputs("\"></p>\n", o);
        } else if (line[0]) {
            fputs("<p>", o);
            inline_text(o, line);
            fputs("</p>\n", o);
        }
    }
    if (list)
        fputs("</ul>\n", o);
    if (table)
        fputs("</table>\n", o);
    if (pre)
        fputs("</pre>\n", o);
    fputs("</body></html>\n", o);
    int bad = ferror(in);
    fclose(in);
    if (bad) {
        atomic_file_abort(&out);
        return -1;
    }
    return atomic_file_commit(&out, 0, why, sizeof why);
}
