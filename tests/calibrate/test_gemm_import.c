/* dtcal import-gemm: GEMM CSVs written here come back as the calibration's gemm tables. A time
 * gives 2mnk/t TFLOP/s exactly (in each unit and header form); a shape given more than once keeps
 * the median of its rates (odd and even counts, across files); CSV quirks other tools write (BOM,
 * CRLF, quoted fields, comments) read as plain; every bad input is refused naming the file, the
 * line and the column, appends nothing, and through dtcal exits 2 with no file written; --into
 * replaces only the imported precision's table and adds a sources line, and dtsim reads the
 * result. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include "../private_dir.h"
#include "config.h"
#include "gemm_import.h"
#include "test_files.h"

/* The one point of gemm[precision] with this shape, or -1. */
static double rate(json_t *tables, const char *precision, double m, double n, double k)
{
    json_t *list = json_object_get(tables, precision), *p;
    size_t i;
    json_array_foreach(list, i, p) if (json_integer_value(json_object_get(p, "m")) == m &&
                                       json_integer_value(json_object_get(p, "n")) == n &&
                                       json_integer_value(json_object_get(p, "k")) == k)
        return json_real_value(json_object_get(p, "tflops"));
    return -1;
}

static json_t *import(const char *const *files, int nfiles, const gemm_import_options *o, int shapes[GEMM_PRECISIONS])
{
    gemm_samples s = {0};
    for (int i = 0; i < nfiles; i++) {
        char err[1024];
        gemm_file_stats st;
        if (gemm_import_csv(files[i], o, &s, &st, err, sizeof err) != 0)
            fail_msg("%s", err);
    }
    json_t *t = gemm_import_tables(&s, shapes);
    gemm_samples_free(&s);
    return t;
}

static void close_to(double got, double want)
{
    print_message("  %.9g TFLOP/s (expected %.9g)\n", got, want);
    assert_true(fabs(got - want) <= 1e-12 * want);
}

/* As written to a file: 6 significant digits. */
static void close_to_6(double got, double want)
{
    print_message("  %.9g TFLOP/s in the file (expected %.9g)\n", got, want);
    assert_true(fabs(got - want) <= 5e-6 * want);
}

/* TFLOP/s = 2 m n k / t, whatever the unit and wherever it is written. */
static void rate_from_time_is_closed_form(void **state)
{
    write_file("us.csv", "m,n,k,dtype,time_us\n4096,8192,2048,bf16,100\n");
    write_file("ms.csv", "M,N,K,precision,time,unit\n1024,2048,4096,fp16,0.05,ms\n");
    write_file("s.csv", "m,n,k,\"time (s)\"\n8192,8192,8192,0.002\n");
    write_file("ns.csv", "m,n,k,latency_ns\n256,512,1024,4000\n");
    write_file("rate.csv", "m,n,k,tflops\n512,512,512,123.5\n");
    int shapes[GEMM_PRECISIONS];
    gemm_import_options o = {.precision = -1};
    const char *a[] = {"us.csv", "ms.csv"};
    json_t *t = import(a, 2, &o, shapes);
    close_to(rate(t, "bf16", 4096, 8192, 2048), 2.0 * 4096 * 8192 * 2048 / 100e-6 / 1e12);
    close_to(rate(t, "fp16", 1024, 2048, 4096), 2.0 * 1024 * 2048 * 4096 / 0.05e-3 / 1e12);
    assert_int_equal(shapes[3], 1);
    assert_int_equal(shapes[2], 1);
    json_decref(t);
    o.precision = gemm_precision_parse("tf32");
    const char *b[] = {"s.csv"};
    t = import(b, 1, &o, shapes);
    close_to(rate(t, "tf32", 8192, 8192, 8192), 2.0 * 8192 * 8192 * 8192 / 0.002 / 1e12);
    json_decref(t);
    o.precision = gemm_precision_parse("fp8");
    o.column[GF_TIME] = "latency_ns";
    const char *c[] = {"ns.csv"};
    t = import(c, 1, &o, shapes);
    close_to(rate(t, "fp8", 256, 512, 1024), 2.0 * 256 * 512 * 1024 / 4000e-9 / 1e12);
    json_decref(t);
    o.column[GF_TIME] = NULL;
    const char *d[] = {"rate.csv"};
    t = import(d, 1, &o, shapes);
    close_to(rate(t, "fp8", 512, 512, 512), 123.5);
    json_decref(t);
}

/* The median, not the mean: 500, 700, 650 -> 650 (mean 616.7); 100, 1000 and 300, 200 from two
 * files -> 250 (mean 400). Another precision's point of the same shape stays apart. */
static void repeated_shapes_keep_the_median(void **state)
{
    write_file("r1.csv", "m,n,k,dtype,tflops\n"
                         "2048,2048,2048,bf16,500\n"
                         "1024,1024,1024,bf16,100\n"
                         "2048,2048,2048,bf16,700\n"
                         "2048,2048,2048,fp16,42\n"
                         "1024,1024,1024,bf16,1000\n"
                         "2048,2048,2048,bf16,650\n");
    write_file("r2.csv", "m,n,k,dtype,tflops\n1024,1024,1024,bf16,300\n1024,1024,1024,bf16,200\n");
    int shapes[GEMM_PRECISIONS];
    gemm_import_options o = {.precision = -1};
    const char *f[] = {"r1.csv", "r2.csv"};
    json_t *t = import(f, 2, &o, shapes);
    assert_int_equal(shapes[3], 2);
    assert_int_equal(shapes[2], 1);
    close_to(rate(t, "bf16", 2048, 2048, 2048), 650);
    close_to(rate(t, "bf16", 1024, 1024, 1024), 250);
    close_to(rate(t, "fp16", 2048, 2048, 2048), 42);
    /* sorted by shape */
    assert_int_equal(json_integer_value(json_object_get(json_array_get(json_object_get(t, "bf16"), 0), "m")), 1024);
    json_decref(t);
}

/* A byte-order mark, CRLF, comments, blank lines, spaces, quoted fields with commas, doubled
 * quotes and a line break: read as the plain file; a bad row after the quoted line break is
 * reported on its own line. */
static void csv_quirks_read_as_plain(void **state)
{
    write_file("q.csv", "\xef\xbb\xbf# sweep of 2026-01-01\r\n"
                        " m , n ,k,dtype , note,tflops\r\n"
                        "\r\n"
                        "1024, 2048 ,4096, torch.bfloat16 ,\"a, \"\"quoted\"\" note\",300.5\r\n"
                        "# a comment\r\n"
                        "\"2048\",2048,2048,BFloat16,\"two\r\nlines\",  400  \r\n"
                        "4096,4096,4096,bf16,,600");
    int shapes[GEMM_PRECISIONS];
    gemm_import_options o = {.precision = -1};
    const char *f[] = {"q.csv"};
    json_t *t = import(f, 1, &o, shapes);
    assert_int_equal(shapes[3], 3);
    close_to(rate(t, "bf16", 1024, 2048, 4096), 300.5);
    close_to(rate(t, "bf16", 2048, 2048, 2048), 400);
    close_to(rate(t, "bf16", 4096, 4096, 4096), 600);
    json_decref(t);
    write_file("q2.csv", "m,n,k,dtype,note,tflops\n1,2,3,bf16,\"two\nlines\",4\n5,6,x,bf16,,7\n");
    gemm_samples s = {0};
    char err[1024];
    assert_int_not_equal(gemm_import_csv("q2.csv", &o, &s, NULL, err, sizeof err), 0);
    print_message("  %s\n", err);
    assert_non_null(strstr(err, "q2.csv:4: column 3 ('k')"));
    gemm_samples_free(&s);
}

/* dtype aliases; --precision with a dtype column keeps that precision's rows; --where; --column. */
static void aliases_filters_and_columns(void **state)
{
    static const struct {
        const char *name;
        const char *precision;
    } names[] = {{"torch.bfloat16", "bf16"}, {"BFloat16", "bf16"}, {"float16", "fp16"}, {"half", "fp16"},
                 {"torch.half", "fp16"}, {"torch.float32", "fp32"}, {"float", "fp32"}, {"TF32", "tf32"},
                 {"float8_e4m3fn", "fp8"}, {"torch.float8_e5m2", "fp8"}, {"fp8", "fp8"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        assert_string_equal(gemm_precision_names[gemm_precision_parse(names[i].name)], names[i].precision);
    assert_int_equal(gemm_precision_parse("int8"), -1);
    assert_int_equal(gemm_precision_parse("fp64"), -1);
    /* the layout of a torch-vs-triton benchmark: rows of two backends and two dtypes */
    write_file("b.csv", "gpu,backend,M,N,K,dtype,p50_ms,tflops_p50\n"
                        "GPU X,torch,128,4096,4096,float16,0.032,134.4\n"
                        "GPU X,triton,128,4096,4096,float16,0.062,68.7\n"
                        "GPU X,torch,128,4096,4096,bfloat16,0.037,115.3\n"
                        "GPU X,triton,128,4096,4096,bfloat16,0.061,69.4\n");
    gemm_import_options o = {.precision = gemm_precision_parse("bf16"), .nwhere = 1};
    o.where_column[0] = "backend";
    o.where_value[0] = "torch";
    o.column[GF_TFLOPS] = "tflops_p50";
    gemm_samples s = {0};
    gemm_file_stats st;
    char err[1024];
    if (gemm_import_csv("b.csv", &o, &s, &st, err, sizeof err) != 0)
        fail_msg("%s", err);
    assert_int_equal(st.rows, 4);
    assert_int_equal(st.kept, 1);
    assert_int_equal(st.left_out, 3);
    assert_int_equal(s.n, 1);
    assert_true(s.v[0].tflops == 115.3);
    assert_string_equal(s.device, "GPU X");
    /* the time column instead: 2 x 128 x 4096 x 4096 / 0.037 ms */
    o.column[GF_TFLOPS] = NULL;
    o.column[GF_TIME] = "p50_ms";
    s.n = 0;
    if (gemm_import_csv("b.csv", &o, &s, &st, err, sizeof err) != 0)
        fail_msg("%s", err);
    close_to(s.v[0].tflops, 2.0 * 128 * 4096 * 4096 / 0.037e-3 / 1e12);
    gemm_samples_free(&s);
}

typedef struct {
    const char *csv;
    const char *precision;   /* --precision, or NULL */
    const char *where;       /* --where column (value "x"), or NULL */
    const char *expect;      /* in the message, after "bad.csv" */
} bad_case;

static const bad_case bad_cases[] = {
    {"m,n,k,tflops\n1024,1024,x,5\n", "bf16", NULL, ":2: column 3 ('k'): 'x' is not a whole number"},
    {"m,n,k,tflops\n1024,0,1024,5\n", "bf16", NULL, ":2: column 2 ('n'): '0' is not a whole number"},
    {"m,n,k,tflops\n1024,1024.5,1024,5\n", "bf16", NULL, ":2: column 2 ('n'): '1024.5' is not a whole number"},
    {"m,n,k,tflops\n1,1,1,5\n1,1,1,-5\n", "bf16", NULL, ":3: column 4 ('tflops'): '-5' is not a rate"},
    {"m,n,k,tflops\n1,1,1,\n", "bf16", NULL, ":2: column 4 ('tflops'): '' is not a rate"},
    {"m,n,k,tflops\n1,1,1,nan\n", "bf16", NULL, ":2: column 4 ('tflops'): 'nan' is not a rate"},
    {"m,n,k,dtype,tflops\n1,1,1,int8,5\n", NULL, NULL, ":2: column 4 ('dtype'): 'int8' is not a precision"},
    {"m,n,k,tflops\n1,1,1,5\n1,1,1\n", "bf16", NULL, ":3: 3 fields, the header has 4"},
    {"m,n,k,tflops\n1,1,1,\"5\n", "bf16", NULL, ":2: column 4: the quoted field opened on this line is not closed"},
    {"m,n,k,tflops\n1,1,\"1\"x,5\n", "bf16", NULL, ":2: column 3: text after the closing quote"},
    {"m,n,k,tflops\n1,1,1\"1,5\n", "bf16", NULL, ":2: column 3: a quote inside an unquoted field"},
    {"m,k,tflops\n1,1,5\n", "bf16", NULL, ":1: no column 'n'"},
    {"m,n,k,gflops\n1,1,1,5\n", "bf16", NULL, ":1: no column 'tflops' and no time column"},
    {"m,n,k,time\n1,1,1,5\n", "bf16", NULL, ":1: column 4 ('time') gives times without a unit"},
    {"m,n,k,time,unit\n1,1,1,5,min\n", "bf16", NULL, ":2: column 5 ('unit'): 'min' is not ns, us, ms or s"},
    {"m,n,k,time_ns\n100000,100000,100000,1\n", "bf16", NULL,
     ":2: column 4 ('time_ns'): 1 ns for 100000x100000x100000 is 2e+12 TFLOP/s, over 1e6"},
    {"m,n,k,time_us,time_ms\n1,1,1,5,6\n", "bf16", NULL, ":1: several time columns"},
    {"m,n,k,m,tflops\n1,1,1,1,5\n", "bf16", NULL, ":1: columns 1 and 4 are both the 'm' column"},
    {"b,m,n,k,tflops\n4,1,1,1,5\n", "bf16", NULL, ":2: column 1 ('b'): '4': only single GEMMs"},
    {"m,n,k,tflops\n1,1,1,5\n", NULL, NULL, ":1: no dtype or precision column: give --precision"},
    {"m,n,k,tflops\n1,1,1,5\n", "bf16", "backend", ":1: --where backend=x: the file has no column 'backend'"},
    {"m,n,k,dtype,tflops\n1,1,1,fp16,5\n", "bf16", NULL, ": no rows to import (1 data rows, all left out"},
    {"", "bf16", NULL, ": no header line (the file is empty)"},
    {"\xff\xfem\0,\0", "bf16", NULL, ": the file is UTF-16"},
};

/* Each bad input: refused with the file, line and column, and nothing appended. */
static void bad_input_names_file_line_column(void **state)
{
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        write_file("bad.csv", bad_cases[i].csv);
        gemm_import_options o = {.precision = bad_cases[i].precision ? gemm_precision_parse(bad_cases[i].precision) : -1};
        if (bad_cases[i].where) {
            o.nwhere = 1;
            o.where_column[0] = bad_cases[i].where;
            o.where_value[0] = "x";
        }
        gemm_samples s = {0};
        char err[1024], want[512];
        write_file("good.csv", "m,n,k,tflops\n8,8,8,1\n");
        gemm_import_options good = {.precision = 3};
        assert_int_equal(gemm_import_csv("good.csv", &good, &s, NULL, err, sizeof err), 0);
        assert_int_not_equal(gemm_import_csv("bad.csv", &o, &s, NULL, err, sizeof err), 0);
        snprintf(want, sizeof want, "bad.csv%s", bad_cases[i].expect);
        print_message("  %s\n", err);
        if (!strstr(err, want))
            fail_msg("case %zu: expected '%s' in '%s'", i, want, err);
        assert_int_equal(s.n, 1); /* the good file's row only */
        gemm_samples_free(&s);
    }
}

static int run(const char *args)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' import-gemm %s >stdout.txt 2>stderr.txt", DTCAL_BIN, args);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Through dtcal: exit 2, the reason on stderr, nothing on stdout, and no file written (an existing
 * -o file, the --into calibration itself, left as they were). */
static void dtcal_refuses_with_exit_2_and_writes_nothing(void **state)
{
    write_file("cal.json", "{ \"device\": \"X\", \"source\": \"datasheet\" }\n");
    static const char *const options[] = {"--precision fp64", "--column flops=x", "--column tflops=a --column time=b",
                                          "--where backend", "--bogus 1", "--precision"};
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0] + sizeof options / sizeof options[0]; i++) {
        char args[512];
        if (i < sizeof bad_cases / sizeof bad_cases[0]) {
            write_file("bad.csv", bad_cases[i].csv);
            snprintf(args, sizeof args, "bad.csv%s%s%s%s", bad_cases[i].precision ? " --precision " : "",
                     bad_cases[i].precision ? bad_cases[i].precision : "", bad_cases[i].where ? " --where " : "",
                     bad_cases[i].where ? bad_cases[i].where : "");
            if (bad_cases[i].where)
                strcat(args, "=x");
        } else {
            write_file("bad.csv", "m,n,k,tflops\n8,8,8,1\n");
            snprintf(args, sizeof args, "bad.csv %s", options[i - sizeof bad_cases / sizeof bad_cases[0]]);
        }
        for (int into = 0; into < 2; into++) {
            char full[1024];
            write_file("out.json", "untouched\n");
            snprintf(full, sizeof full, into ? "%s --into cal.json -o cal.json" : "%s -o out.json", args);
            int rc = run(full);
            char *out = read_all("stdout.txt"), *err = read_all("stderr.txt"), *file = read_all("out.json"),
                 *cal = read_all("cal.json");
            print_message("  dtcal import-gemm %s: exit %d: %s", full, rc, err);
            assert_int_equal(rc, 2);
            assert_string_equal(out, "");
            assert_string_equal(file, "untouched\n");
            assert_string_equal(cal, "{ \"device\": \"X\", \"source\": \"datasheet\" }\n");
            assert_non_null(strstr(err, "dtcal import-gemm: "));
            if (i < sizeof bad_cases / sizeof bad_cases[0])
                assert_non_null(strstr(err, "bad.csv"));
            free(out);
            free(err);
            free(file);
            free(cal);
        }
    }
    assert_int_equal(run("-o out.json"), 2); /* no CSV */
}

/* dtcal seals what it writes (calibration_crc32): its own output reads back into --into, an
 * edit of it since is refused (exit 2, naming the seal, nothing written), and with the seal
 * removed the edited file is taken as it is. */
static void an_edited_dtcal_calibration_is_refused_by_into(void **state)
{
    write_file("good.csv", "m,n,k,tflops\n1024,1024,1024,100\n");
    assert_int_equal(run("good.csv --precision bf16 -o sealed.json"), 0);
    json_error_t je;
    json_t *doc = json_load_file("sealed.json", 0, &je);
    assert_non_null(doc);
    assert_true(json_is_string(json_object_get(doc, "calibration_crc32")));
    assert_int_equal(run("good.csv --precision fp16 --into sealed.json -o again.json"), 0);
    json_object_set_new(doc, "device", json_string("edited"));
    assert_int_equal(json_dump_file(doc, "sealed.json", JSON_INDENT(2)), 0);
    write_file("out.json", "untouched\n");
    assert_int_equal(run("good.csv --precision fp16 --into sealed.json -o out.json"), 2);
    char *err = read_all("stderr.txt"), *file = read_all("out.json");
    assert_non_null(strstr(err, "it does not match its calibration_crc32"));
    assert_string_equal(file, "untouched\n");
    free(err);
    free(file);
    json_object_del(doc, "calibration_crc32");
    assert_int_equal(json_dump_file(doc, "sealed.json", JSON_INDENT(2)), 0);
    assert_int_equal(run("good.csv --precision fp16 --into sealed.json -o out.json"), 0);
    json_decref(doc);
}

/* --into: the imported precision's table is replaced; every other key, the other tables and the
 * sources already there are kept; a sources line names the file and the date; dtsim reads it. */
static void into_keeps_everything_else(void **state)
{
    const char *cal = "{\n"
                      "  \"device\": \"GPU X\", \"source\": \"datasheet\", \"date\": \"2026-01-01\",\n"
                      "  \"host\": \"none (published figures)\",\n"
                      "  \"gemm\": { \"bf16\": [ { \"m\": 1, \"n\": 1, \"k\": 1, \"tflops\": 1.5 } ],\n"
                      "            \"fp16\": [ { \"m\": 2, \"n\": 2, \"k\": 2, \"tflops\": 2.5 } ] },\n"
                      "  \"ops\": { \"layernorm\": { \"gbs\": 1000 }, \"attention\": { \"efficiency\": 0.4 } },\n"
                      "  \"launch_overhead_us\": 4.0,\n"
                      "  \"collectives\": { \"nvlink\": { \"all_reduce\": { \"alpha_us\": 10, \"busbw_gbs\": 300 } } },\n"
                      "  \"sources\": [ \"gemm.fp16: an older source\" ]\n"
                      "}\n";
    write_file("cal.json", cal);
    write_file("new.csv", "m,n,k,dtype,time_ms\n"
                          "4096,4096,4096,bf16,0.25\n"
                          "8192,8192,8192,bf16,2\n"
                          "8192,8192,8192,bf16,1.6\n"
                          "8192,8192,8192,bf16,1.7\n"
                          "4096,4096,4096,fp16,0.5\n");
    assert_int_equal(run("new.csv --precision bf16 --into cal.json -o merged.json"), 0);
    json_error_t je;
    json_t *before = json_loads(cal, 0, &je), *after = json_load_file("merged.json", 0, &je);
    assert_non_null(after);
    const char *key;
    json_t *v;
    json_object_foreach(before, key, v) if (strcmp(key, "gemm") && strcmp(key, "sources")) {
        print_message("  %s kept\n", key);
        assert_true(json_equal(v, json_object_get(after, key)));
    }
    json_t *gemm = json_object_get(after, "gemm");
    assert_int_equal(json_object_size(gemm), 2);
    assert_true(json_equal(json_object_get(json_object_get(before, "gemm"), "fp16"), json_object_get(gemm, "fp16")));
    assert_int_equal(json_array_size(json_object_get(gemm, "bf16")), 2);
    close_to_6(rate(gemm, "bf16", 4096, 4096, 4096), 2.0 * 4096 * 4096 * 4096 / 0.25e-3 / 1e12);
    close_to_6(rate(gemm, "bf16", 8192, 8192, 8192), 2.0 * 8192 * 8192 * 8192 / 1.7e-3 / 1e12);
    json_t *sources = json_object_get(after, "sources");
    assert_int_equal(json_array_size(sources), 2);
    assert_string_equal(json_string_value(json_array_get(sources, 0)), "gemm.fp16: an older source");
    const char *line = json_string_value(json_array_get(sources, 1));
    char today[32];
    time_t now = time(NULL);
    strftime(today, sizeof today, "%Y-%m-%d", gmtime(&now));
    print_message("  %s\n", line);
    assert_non_null(strstr(line, "gemm.bf16 (2 shapes)"));
    assert_non_null(strstr(line, "dtcal import-gemm"));
    assert_non_null(strstr(line, "new.csv"));
    assert_non_null(strstr(line, today));
    assert_null(strstr(line, "fp16"));
    /* the simulator reads it: its bf16 table is the two imported points */
    calibration_config c;
    config_error err;
    if (calibration_load("merged.json", &c, &err) != 0)
        fail_msg("%s", err.msg);
    assert_int_equal(c.gemm[PREC_BF16].count, 2);
    assert_int_equal(c.gemm[PREC_FP16].count, 1);
    assert_string_equal(c.source, "datasheet");
    calibration_free(&c);
    json_decref(before);
    json_decref(after);
    /* a measured calibration with imported figures is mixed; a new document takes the gpu column
     * as its device */
    write_file("measured.json", "{ \"device\": \"CPU\", \"source\": \"measured\", \"host\": \"h\" }\n");
    assert_int_equal(run("new.csv --into measured.json -o mixed.json"), 0);
    after = json_load_file("mixed.json", 0, &je);
    assert_string_equal(json_string_value(json_object_get(after, "source")), "mixed");
    assert_int_equal(json_array_size(json_object_get(json_object_get(after, "gemm"), "fp16")), 1);
    json_decref(after);
    write_file("dev.csv", "gpu,m,n,k,tflops\nNVIDIA H100 80GB HBM3,8,8,8,1\n");
    assert_int_equal(run("dev.csv --precision bf16 -o new.json"), 0);
    after = json_load_file("new.json", 0, &je);
    assert_string_equal(json_string_value(json_object_get(after, "device")), "NVIDIA H100 80GB HBM3");
    assert_string_equal(json_string_value(json_object_get(after, "source")), "datasheet");
    json_decref(after);
    if (calibration_load("new.json", &c, &err) != 0)
        fail_msg("%s", err.msg);
    calibration_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(rate_from_time_is_closed_form),
        cmocka_unit_test(repeated_shapes_keep_the_median),
        cmocka_unit_test(csv_quirks_read_as_plain),
        cmocka_unit_test(aliases_filters_and_columns),
        cmocka_unit_test(bad_input_names_file_line_column),
        cmocka_unit_test(dtcal_refuses_with_exit_2_and_writes_nothing),
        cmocka_unit_test(an_edited_dtcal_calibration_is_refused_by_into),
        cmocka_unit_test(into_keeps_everything_else),
    };
    char dir[] = "/tmp/test_gemm_import_XXXXXX";
    if (enter_private_dir(dir) != 0)
        return 1;
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    leave_private_dir(dir);
    return rc;
}
