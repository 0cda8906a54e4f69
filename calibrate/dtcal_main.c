/* dtcal: calibrates the simulator from the engine's own kernels, from nccl-tests logs, and
 * checks the result by predicting the engine's own runs. */
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cal_writer.h"
#include "config.h"
#include "closed_loop.h"
#include "kernels_cal.h"
#include "collectives_cal.h"
#include "collectives_import.h"
#include "gemm_import.h"
#include "variability.h"
#include "overlap.h"
#include "rank_gemm.h"
#include <time.h>
#include <mpi.h>
#include <sys/stat.h>

static void usage(FILE *f)
{
    fprintf(f,
            "usage: dtcal COMMAND [options]\n\n"
            "  kernels [--device cpu|cuda] [--precision P[,P..]] [--quick] [--platform FILE] [-o FILE]\n"
            "      time the engine's kernels (GEMM grid, memory-bound ops, attention, launch overhead)\n"
            "      and write a calibration file (default: stdout); P: fp32 (default), bf16, fp16, a GEMM\n"
            "      table each; the first also times the memory-bound ops, attention and launches\n"
            "  import-nccl-tests LOG... [--kind NAME] [--link nvlink|network|nvls] [--into CAL.json] [-o FILE]\n"
            "                   [--platform FILE [--ranks N --hosts H] [--min-bytes B]]\n"
            "      fit alpha and bus bandwidth per collective from nccl-tests output; link class from\n"
            "      the hosts the log's ranks ran on (one: nvlink, several: network), or --link for\n"
            "      every log (needed for a log without its '# Using devices' block); nvls: one node's log\n"
            "      run through NVLink SHARP (NCCL's default where the NVSwitches have it: a bus bandwidth past\n"
            "      the links' own), read only where the platform sets node.nvls. --platform: print\n"
            "      dtsim's model of each size from B bytes up (default 1024) beside the measured time,\n"
            "      given only the fit and that platform (NCCL's tuner model unless it says mpi), and refuse a\n"
            "      one-node fit faster than a ring over its NVLink (node.nvlink_bandwidth_gbs); --ranks and\n"
            "      --hosts for a log that does not list its ranks\n"
            "  import-gemm CSV... [--precision P] [--column FIELD=HEADER]... [--where HEADER=VALUE]...\n"
            "              [--device NAME] [--into CAL.json] [-o FILE]\n"
            "      read GEMM measurements made by another tool (cuBLAS sweeps, torch.matmul benchmarks) into\n"
            "      the calibration's gemm table: columns m, n, k and tflops, or a time (time_us, time_ms,\n"
            "      time_s, or time with a unit column: TFLOP/s = 2mnk/time), and dtype or precision (fp32,\n"
            "      tf32, fp16, bf16, fp8, torch.bfloat16, float16, half, ...) or else --precision P for\n"
            "      every row (with a dtype column, --precision keeps only P's rows); FIELD (m n k tflops time\n"
            "      unit dtype) names its column; --where keeps the rows whose column has that value; a shape\n"
            "      given more than once keeps the median. --into replaces those precisions' tables in CAL,\n"
            "      keeps the rest, and adds a line to its sources\n"
            "  collectives [--backend mpi|nccl] [--quick] [--max-bytes N] [--iters N] [--log-dir D] [--into CAL.json]\n"
            "              [-o FILE]   (under mpirun)\n"
            "      time all-reduce, all-gather, reduce-scatter, all-to-all and send/recv from 8 B up (x4),\n"
            "      write nccl-tests style logs and fit alpha and bus bandwidth as import-nccl-tests does\n"
            "  variability [--device cpu|cuda] [--precision P] [--m M --n N --k K] [--repeats R] [--into CAL.json]\n"
            "              [-o FILE]   (under mpirun, one rank per device, at least 2)\n"
            "      every rank times the same GEMM through the engine's kernels on its own device (on a GPU the\n"
            "      node-local rank picks it) at once; rank 0 prints the rates and writes compute_variability_cv,\n"
            "      their sample standard deviation / mean, with a sources line giving the rates. Defaults: cpu:\n"
            "      fp32, 512^3; cuda: bf16, 4096^3; 21 repeats (the median counts). --into adds it to CAL\n"
            "  overlap [--device cpu|cuda] [--backend mpi|nccl] [--precision P] [--m M --n N --k K] [--bytes B]\n"
            "          [--repeats R] [--into CAL.json] [-o FILE]   (under mpirun, one rank per device, at least 2)\n"
            "      every rank times the same GEMM through the engine's kernels alone, then beside all-reduces of B\n"
            "      bytes over all ranks started right before it and outlasting it (nccl: on a second CUDA stream;\n"
            "      mpi: from a second thread); rank 0 writes overlap_slowdown, the mean over ranks of beside /\n"
            "      alone (at least 1), with a sources line giving every time. Defaults as variability's; cuda:\n"
            "      nccl, 256 MiB; cpu: mpi, 16 MiB. --into adds it to CAL\n"
            "  validate [--device cpu|cuda] [--precision fp32|bf16|fp16] [--model tiny|tiny-llama|small|FILE]\n"
            "           [--micro-batch B] [--steps N (at least 2; default 12)]\n"
            "           [--tp N --pp N --dp N --cp N --ep N [--mpirun PATH]] [--cp-comm-type p2p|all_gather|a2a]\n"
            "           [--grad-reduce fp32|bf16]\n"
            "           [--grad-compress none|powersgd:R] [--overlap-grad-reduce [--bucket-mb X]]\n"
            "           [--recompute-granularity none|selective|full] [--sequence-parallel]\n"
            "           [--zero 0|1|2|3] [--overlap-param-gather] [--tp-comm-overlap]\n"
            "           [--platform FILE]\n"
            "           [--calibration FILE] [--json FILE|-] [--dtrain-log FILE]\n"
            "      run dtrain (under mpirun for more than one rank, all on this machine), simulate the same\n"
            "      configuration, compare step times and ops; warns when a measured calibration's host or\n"
            "      device is not this machine's. With experts the simulation takes the run's measured\n"
            "      routing (model.moe_load_imbalance). --dtrain-log keeps dtrain's --log-json there\n"
            "exit: 0 ok, 2 bad input, 1 runtime failure\n");
}

/* "fp32,bf16" -> {KPREC_FP32, KPREC_BF16}; the count, or -1 on an unknown or repeated name. */
static int parse_precisions(const char *list, kernels_precision *out, int max)
{
    static const char *const names[] = {"fp32", "bf16", "fp16"};
    int n = 0;
    for (const char *p = list;; p++) {
        size_t len = strcspn(p, ",");
        int found = -1;
        for (int i = 0; i < 3; i++)
            if (strlen(names[i]) == len && !strncmp(p, names[i], len))
                found = i;
        for (int i = 0; i < n; i++)
            if (found >= 0 && out[i] == (kernels_precision)found)
                found = -1;
        if (found < 0 || n == max)
            return -1;
        out[n++] = (kernels_precision)found;
        p += len;
        if (!*p)
            return n;
    }
}

static int cmd_kernels(int argc, char **argv)
{
    const char *device = "cpu", *out = "-", *platform = NULL;
    kernels_precision precs[3] = {KPREC_FP32};
    int nprec = 1, quick = 0;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--device") && i + 1 < argc)
            device = argv[++i];
        else if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else if (!strcmp(argv[i], "-o") && i + 1 < argc)
            out = argv[++i];
        else if (!strcmp(argv[i], "--platform") && i + 1 < argc)
            platform = argv[++i];
        else if (!strcmp(argv[i], "--precision") && i + 1 < argc) {
            const char *p = argv[++i];
            nprec = parse_precisions(p, precs, 3);
            if (nprec < 1) {
                fprintf(stderr, "dtcal kernels: --precision: '%s' is not a list of distinct fp32, bf16, fp16\n", p);
                return 2;
            }
        } else {
            fprintf(stderr, "dtcal kernels: unknown option or missing value: %s\n", argv[i]);
            return 2;
        }
    }
    if (cal_out_checked("dtcal kernels", "-o", out) != 0) /* before minutes of measuring */
        return 2;
    char why[256];
    const kernels_backend *k = !strcmp(device, "cuda") ? kernels_cuda(why, sizeof why)
                               : !strcmp(device, "cpu") ? kernels_cpu() : NULL;
    if (!k) {
        fprintf(stderr, "dtcal kernels: --device %s: %s\n", device, strcmp(device, "cuda") ? "not cpu or cuda" : why);
        return strcmp(device, "cuda") ? 2 : 1;
    }
    double peak = 0;
    if (platform) {
        platform_config p;
        config_error err;
        if (platform_load(platform, &p, &err) != 0) {
            fprintf(stderr, "dtcal kernels: %s\n", err.msg);
            return 2;
        }
        peak = p.gpu.peak_tflops[precs[0] == KPREC_BF16 ? PREC_BF16 : precs[0] == KPREC_FP16 ? PREC_FP16 : PREC_FP32];
    }
    /* the device's name, and on a GPU its compute capability, driver and runtime: the provenance
     * a measured calibration keeps with it */
    char described[512]; /* the size of calibration_config.device, so dtsim reads back what is written */
    k->describe(described, sizeof described);
    json_t *doc = cal_new(described, "measured", argc, argv);
    /* the first precision gives the memory-bound ops, attention and launch figures */
    for (int i = 0; i < nprec; i++)
        kernels_calibrate(k, precs[i], quick, peak, i > 0, doc);
    int rc = cal_write(doc, out) ? 1 : 0;
    json_decref(doc);
    return rc;
}

/* dtcal import-gemm: CSVs of GEMM measurements into the calibration's gemm tables; nothing is
 * written unless every file reads. */
static int cmd_import_gemm(int argc, char **argv)
{
    const char *out = "-", *into = NULL, *device = NULL;
    gemm_import_options o = {.precision = -1};
    const char **files = malloc((size_t)argc * sizeof *files);
    char what[1024] = ""; /* the options that chose the rows, for the sources line */
    int nfiles = 0, rc = 0;
    for (int i = 2; i < argc && rc == 0; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (a[0] != '-') {
            files[nfiles++] = a;
            continue;
        }
        if (!v) {
            fprintf(stderr, "dtcal import-gemm: %s needs a value\n", a);
            rc = 2;
            break;
        }
        i++;
        const char *eq = strchr(v, '=');
        if (!strcmp(a, "-o")) {
            out = v;
        } else if (!strcmp(a, "--into")) {
            into = v;
        } else if (!strcmp(a, "--device")) {
            device = v;
        } else if (!strcmp(a, "--precision")) {
            o.precision = gemm_precision_parse(v);
            if (o.precision < 0) {
                fprintf(stderr, "dtcal import-gemm: --precision %s: not fp32, tf32, fp16, bf16 or fp8 (or an alias "
                                "such as torch.bfloat16, float16, half)\n", v);
                rc = 2;
            }
            snprintf(what + strlen(what), sizeof what - strlen(what), "%s--precision %s", what[0] ? ", " : "", v);
        } else if (!strcmp(a, "--column") || !strcmp(a, "--where")) {
            int field = -1;
            for (int f = 0; eq && f < GF_FIELDS; f++)
                if (strlen(gemm_field_names[f]) == (size_t)(eq - v) && !strncmp(v, gemm_field_names[f], (size_t)(eq - v)))
                    field = f;
            if (!eq || eq == v || !eq[1] || (!strcmp(a, "--column") && field < 0)) {
                fprintf(stderr, "dtcal import-gemm: %s %s: expected %s\n", a, v,
                        !strcmp(a, "--column") ? "FIELD=HEADER, FIELD one of m, n, k, tflops, time, unit, dtype"
                                               : "HEADER=VALUE");
                rc = 2;
            } else if (!strcmp(a, "--column")) {
                o.column[field] = eq + 1;
            } else if (o.nwhere == GEMM_WHERE_MAX) {
                fprintf(stderr, "dtcal import-gemm: more than %d --where\n", GEMM_WHERE_MAX);
                rc = 2;
            } else {
                char *col = strndup(v, (size_t)(eq - v));
                o.where_column[o.nwhere] = col;
                o.where_value[o.nwhere++] = eq + 1;
            }
            if (rc == 0)
                snprintf(what + strlen(what), sizeof what - strlen(what), "%s%s %s", what[0] ? ", " : "", a, v);
        } else {
            fprintf(stderr, "dtcal import-gemm: unknown option %s\n", a);
            rc = 2;
        }
    }
    if (rc == 0 && o.column[GF_TFLOPS] && o.column[GF_TIME]) {
        fprintf(stderr, "dtcal import-gemm: --column tflops and --column time: give one (the rate, or the time it "
                        "is computed from)\n");
        rc = 2;
    }
    if (rc == 0 && nfiles == 0) {
        fprintf(stderr, "dtcal import-gemm: no CSV given\n");
        rc = 2;
    }
    /* every file first: a bad one leaves nothing written */
    gemm_samples samples = {0};
    char from[4096] = "";
    for (int i = 0; i < nfiles && rc == 0; i++) {
        char err[2048];
        gemm_file_stats st;
        if (gemm_import_csv(files[i], &o, &samples, &st, err, sizeof err) != 0) {
            fprintf(stderr, "dtcal import-gemm: %s\n", err);
            rc = 2;
            break;
        }
        fprintf(stderr, "  %s: %ld rows, %ld kept, %ld left out by --where/--precision\n", files[i], st.rows, st.kept,
                st.left_out);
        snprintf(from + strlen(from), sizeof from - strlen(from), "%s%s (%ld of its %ld rows)", i ? ", " : "",
                 files[i], st.kept, st.rows);
    }
    json_t *doc = NULL, *tables = NULL;
    int shapes[GEMM_PRECISIONS];
    if (rc == 0 && !(tables = gemm_import_tables(&samples, shapes)))
        rc = 1;
    if (rc == 0 && into) {
        if (!(doc = cal_load_into(into, "dtcal import-gemm"))) {
            rc = 2;
        } else {
            /* figures made elsewhere, added to a calibration: a datasheet calibration stays one (its
             * sources say where each figure came from); a measured one becomes mixed */
            const char *src = json_string_value(json_object_get(doc, "source"));
            if (!src || (strcmp(src, "datasheet") && strcmp(src, "mixed")))
                json_object_set_new(doc, "source", json_string("mixed"));
        }
    } else if (rc == 0) {
        char named[300];
        snprintf(named, sizeof named, "%s", device ? device : samples.device_seen == 1 ? samples.device
                                                                  : "unknown (GEMM figures imported from CSV)");
        doc = cal_new(named, "datasheet", argc, argv);
        json_object_set_new(doc, "host", json_string("none (imported figures)"));
    }
    json_t *gemm = doc ? json_object_get(doc, "gemm") : NULL;
    if (rc == 0 && gemm && !json_is_object(gemm)) {
        fprintf(stderr, "dtcal import-gemm: --into %s: its \"gemm\" is not an object\n", into);
        rc = 2;
    }
    if (rc == 0) {
        if (!gemm)
            json_object_set_new(doc, "gemm", gemm = json_object());
        char line[8192], date[32], tabs[512] = "";
        time_t now = time(NULL);
        strftime(date, sizeof date, "%Y-%m-%d", gmtime(&now));
        for (int p = 0; p < GEMM_PRECISIONS; p++) {
            if (!shapes[p])
                continue;
            const char *key = gemm_precision_names[p];
            json_t *old = json_object_get(gemm, key);
            fprintf(stderr, "gemm.%s: %d shape%s%s", key, shapes[p], shapes[p] == 1 ? "" : "s",
                    old ? " (replacing " : "\n");
            if (old)
                fprintf(stderr, "%zu)\n", json_array_size(old));
            json_object_set(gemm, key, json_object_get(tables, key));
            snprintf(tabs + strlen(tabs), sizeof tabs - strlen(tabs), "%sgemm.%s (%d shape%s)", tabs[0] ? ", " : "",
                     key, shapes[p], shapes[p] == 1 ? "" : "s");
        }
        snprintf(line, sizeof line, "%s: imported by 'dtcal import-gemm' on %s from %s%s%s; a shape measured more "
                                    "than once keeps the median of its rates", tabs, date, from,
                 what[0] ? " with " : "", what);
        if (cal_add_source(doc, line) != 0) {
            fprintf(stderr, "dtcal import-gemm: --into %s: its \"sources\" is not a list\n", into);
            rc = 2;
        }
    }
    if (rc == 0)
        rc = cal_write(doc, out) ? 1 : 0;
    json_decref(doc);
    json_decref(tables);
    gemm_samples_free(&samples);
    for (int w = 0; w < o.nwhere; w++)
        free((char *)o.where_column[w]);
    free(files);
    return rc;
}

/* dtcal collectives --backend mpi|nccl, under mpirun: every rank times, rank 0 writes the logs, fits
 * them and writes the calibration. */
static int cmd_collectives(int argc, char **argv)
{
    const char *out = "-", *into = NULL, *backend = "mpi", *log_dir = NULL;
    coll_cal_options o = {64.0 * 1048576, 20, NULL};
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--quick")) {
            o.max_bytes = 4.0 * 1048576;
            o.iters = 10;
            continue;
        }
        if (!v) {
            fprintf(stderr, "dtcal collectives: %s needs a value\n", a);
            return 2;
        }
        i++;
        char *end;
        if (!strcmp(a, "-o")) {
            out = v;
        } else if (!strcmp(a, "--into")) {
            into = v;
        } else if (!strcmp(a, "--backend")) {
            backend = v;
        } else if (!strcmp(a, "--log-dir")) {
            log_dir = v;
        } else if (!strcmp(a, "--max-bytes")) {
            o.max_bytes = strtod(v, &end);
            if (*end || !(o.max_bytes >= 64 && o.max_bytes <= 8.0 * 1073741824)) {
                fprintf(stderr, "dtcal collectives: --max-bytes: '%s' is not a size in 64..8589934592\n", v);
                return 2;
            }
        } else if (!strcmp(a, "--iters")) {
            long n = strtol(v, &end, 10);
            if (*end || n < 2 || n > 100000) {
                fprintf(stderr, "dtcal collectives: --iters: '%s' is not a count in 2..100000\n", v);
                return 2;
            }
            o.iters = (int)n;
        } else {
            fprintf(stderr, "dtcal collectives: unknown option %s\n", a);
            return 2;
        }
    }
    coll_cal_backend be;
    if (!strcmp(backend, "mpi")) {
        coll_cal_mpi(&be);
    } else if (!strcmp(backend, "nccl")) {
        /* the ring's figures (collectives.nvlink): where the NVSwitches reduce, NCCL's default
         * all-reduce is NVLS, whose bus bandwidth passes the links' and belongs to
         * collectives.nvls (docs/model.md, "NVLS measured"); a user's own setting stands */
        setenv("NCCL_NVLS_ENABLE", "0", 0);
        if (coll_cal_nccl(&be) != 0) {
            fprintf(stderr, "dtcal collectives: --backend nccl: this build has no NCCL (it needs the CUDA toolkit "
                            "with NCCL at configure time); use --backend mpi, or import nccl-tests logs\n");
            return 2;
        }
    } else {
        fprintf(stderr, "dtcal collectives: --backend %s: not mpi or nccl\n", backend);
        return 2;
    }
    if (!getenv("OMPI_COMM_WORLD_SIZE") && !getenv("PMI_SIZE") && !getenv("PMIX_RANK")) {
        fprintf(stderr, "dtcal collectives: run it under mpirun (e.g. mpirun -np 4 dtcal collectives -o cal.json)\n");
        return 2;
    }
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    char dir[4096] = "";
    /* where the result goes, before minutes of measuring: an --into that does not read or an -o
     * that cannot be written is said once, and every rank stops (exit 2) */
    int bad = 0;
    if (rank == 0) {
        json_t *d = into ? cal_load_into(into, "dtcal collectives") : NULL;
        bad = (into && !d) || cal_out_checked("dtcal collectives", "-o", out) != 0;
        json_decref(d);
    }
    MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (bad) {
        MPI_Finalize();
        return 2;
    }
    if (rank == 0) {
        if (log_dir) {
            snprintf(dir, sizeof dir, "%s", log_dir);
            if (mkdir(dir, 0755) != 0 && access(dir, W_OK) != 0)
                dir[0] = 0;
        } else {
            snprintf(dir, sizeof dir, "/tmp/dtcal-collectives-XXXXXX");
            if (!mkdtemp(dir))
                dir[0] = 0;
        }
        if (!dir[0])
            fprintf(stderr, "dtcal collectives: cannot create the log folder %s\n", log_dir ? log_dir : "in /tmp");
    }
    MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
    int rc = 0;
    if (!dir[0]) {
        rc = 1;
    } else {
        o.log_dir = dir;
        char err[1024];
        if (rank == 0)
            fprintf(stderr, "dtcal collectives: %s, sizes up to %.0f bytes, %d calls per size; logs in %s\n",
                    be.name, o.max_bytes, o.iters, dir);
        if (collectives_measure(&o, &be, err, sizeof err) != 0) {
            if (rank == 0)
                fprintf(stderr, "dtcal collectives: %s\n", err);
            rc = 1;
        } else if (rank == 0) {
            static const char *const logs[] = {"all_reduce_perf", "all_gather_perf", "reduce_scatter_perf",
                                               "alltoall_perf", "sendrecv_perf"};
            json_t *colls = json_object();
            for (size_t k = 0; k < sizeof logs / sizeof logs[0] && rc == 0; k++) {
                char path[4200];
                snprintf(path, sizeof path, "%s/%s.log", dir, logs[k]);
                rc = collectives_add_fit(colls, path, NULL, NULL, "collectives", NULL);
            }
            if (rc == 0)
                rc = collectives_write(colls, into, out, strcmp(be.name, "nccl") ? "MPI host memory" : "NCCL device memory",
                                       "measured", argc, argv, "collectives");
            json_decref(colls);
        }
    }
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rc && rank == 0 && !log_dir && dir[0])
        rmdir(dir); /* our own temporary folder, when nothing was measured into it */
    MPI_Finalize();
    return rc;
}

/* dtcal variability, under mpirun: the spread of the devices' GEMM rate (variability.h). */
static int cmd_variability(int argc, char **argv)
{
    rank_gemm_options o;
    int rc = rank_gemm_parse("dtcal variability", argc, argv, &o, NULL, NULL);
    return rc ? rc : variability_run(&o);
}

/* dtcal overlap's own options: --backend, --bytes. */
static int overlap_option(const char *who, const char *a, const char *v, int loud, void *ctx)
{
    overlap_options *o = ctx;
    if (!strcmp(a, "--backend")) {
        if (strcmp(v, "mpi") && strcmp(v, "nccl")) {
            if (loud)
                fprintf(stderr, "%s: --backend %s: not mpi or nccl\n", who, v);
            return 2;
        }
        o->backend = v;
        return 1;
    }
    if (!strcmp(a, "--bytes")) {
        char *end;
        double b = strtod(v, &end);
        if (!*v || *end || !(b >= 4 && b <= 4294967296.0) || b != floor(b) || fmod(b, 4) != 0) {
            if (loud)
                fprintf(stderr, "%s: --bytes %s: not a whole number of 4-byte (fp32) elements in 4..4294967296\n",
                        who, v);
            return 2;
        }
        o->bytes = b;
        return 1;
    }
    return 0;
}

/* dtcal overlap, under mpirun: a GEMM's time beside a running all-reduce over its time alone
 * (overlap.h). */
static int cmd_overlap(int argc, char **argv)
{
    const char *who = "dtcal overlap";
    overlap_options o = {.backend = NULL, .bytes = 0};
    int rc = rank_gemm_parse(who, argc, argv, &o.g, overlap_option, &o);
    if (rc)
        return rc;
    int gpu = !strcmp(o.g.device, "cuda");
    if (!o.backend)
        o.backend = gpu ? "nccl" : "mpi";
    if (!o.bytes)
        o.bytes = gpu ? 256.0 * 1048576 : 16.0 * 1048576;
    coll_cal_backend probe;
    const char *bad = !strcmp(o.backend, "nccl") && !gpu ? "NCCL reduces between GPUs: give --device cuda (or "
                                                           "--backend mpi)"
                    : !strcmp(o.backend, "nccl") && coll_cal_nccl(&probe) != 0
                        ? "this build has no NCCL (it needs the CUDA toolkit with NCCL at configure time); use "
                          "--backend mpi"
                        : NULL;
    if (bad) {
        if (rank_gemm_first_rank())
            fprintf(stderr, "%s: --backend nccl: %s\n", who, bad);
        return 2;
    }
    return overlap_run(&o);
}

static int cmd_validate(int argc, char **argv)
{
    char dtrain[PATH_MAX + 16] = "dtrain", exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0) {
        exe[len] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = 0;
            snprintf(dtrain, sizeof dtrain, "%s/dtrain", exe);
        }
    }
    closed_loop_options o = {.dtrain = dtrain,
                             .model = "tiny",
                             .platform = "platforms/cpu-box.json",
                             .calibration = "calibrate/data/cpu-box-measured.json",
                             .device = "cpu",
                             .precision = "fp32",
                             .micro_batch = 8,
                             .steps = 12,
                             .tp = 1,
                             .pp = 1,
                             .dp = 1,
                             .grad_reduce = "fp32",
                             .bucket_mb = 40,
                             .mpirun = "mpirun"};
    int bucket_given = 0;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--overlap-grad-reduce")) {
            o.overlap_grad_reduce = 1;
            continue;
        }
        if (!strcmp(a, "--sequence-parallel")) {
            o.sequence_parallel = 1;
            continue;
        }
        if (!strcmp(a, "--overlap-param-gather")) {
            o.overlap_param_gather = 1;
            continue;
        }
        if (!strcmp(a, "--tp-comm-overlap")) {
            o.tp_comm_overlap = 1;
            continue;
        }
        if (!v) {
            fprintf(stderr, "dtcal validate: %s needs a value\n", a);
            return 2;
        }
        i++;
        if (!strcmp(a, "--device")) o.device = v;
        else if (!strcmp(a, "--model")) o.model = v;
        else if (!strcmp(a, "--platform")) o.platform = v;
        else if (!strcmp(a, "--calibration")) o.calibration = v;
        else if (!strcmp(a, "--json")) o.json_path = v;
        else if (!strcmp(a, "--dtrain-log")) o.dtrain_log = v;
        else if (!strcmp(a, "--mpirun")) o.mpirun = v;
        else if (!strcmp(a, "--precision")) {
            if (strcmp(v, "fp32") && strcmp(v, "bf16") && strcmp(v, "fp16")) {
                fprintf(stderr, "dtcal validate: --precision: '%s' is not fp32, bf16 or fp16\n", v);
                return 2;
            }
            o.precision = v;
        }
        else if (!strcmp(a, "--cp-comm-type")) {
            if (strcmp(v, "p2p") && strcmp(v, "all_gather") && strcmp(v, "a2a")) {
                fprintf(stderr, "dtcal validate: --cp-comm-type: '%s' is not p2p, all_gather or a2a (dtrain's forms)\n",
                        v);
                return 2;
            }
            o.cp_comm_type = v;
        }
        else if (!strcmp(a, "--grad-reduce")) {
            if (strcmp(v, "fp32") && strcmp(v, "bf16")) {
                fprintf(stderr, "dtcal validate: --grad-reduce: '%s' is not fp32 or bf16\n", v);
                return 2;
            }
            o.grad_reduce = v;
        }
        else if (!strcmp(a, "--zero")) {
            if (strcmp(v, "0") && strcmp(v, "1") && strcmp(v, "2") && strcmp(v, "3")) {
                fprintf(stderr, "dtcal validate: --zero: '%s' is not 0, 1, 2 or 3\n", v);
                return 2;
            }
            o.zero = v[0] - '0';
        }
        else if (!strcmp(a, "--recompute-granularity")) {
            if (strcmp(v, "none") && strcmp(v, "selective") && strcmp(v, "full")) {
                fprintf(stderr, "dtcal validate: --recompute-granularity: '%s' is not none, selective or full\n", v);
                return 2;
            }
            o.recompute = v;
        }
        else if (!strcmp(a, "--bucket-mb")) {
            char *end;
            double x = strtod(v, &end);
            if (!*v || *end || !(x >= 1e-6 && x <= 1e6)) {
                fprintf(stderr, "dtcal validate: --bucket-mb: '%s' is not a number in 1e-06..1e+06\n", v);
                return 2;
            }
            o.bucket_mb = x;
            bucket_given = 1;
        }
        else if (!strcmp(a, "--grad-compress")) {
            char *end = NULL;
            long r = !strncmp(v, "powersgd:", 9) ? strtol(v + 9, &end, 10) : -1;
            if (strcmp(v, "none") && (!end || end == v + 9 || *end || r < 1 || r > 65536)) {
                fprintf(stderr, "dtcal validate: --grad-compress: '%s' is not none or powersgd:R (R in 1..65536)\n", v);
                return 2;
            }
            o.powersgd_rank = strcmp(v, "none") ? (int)r : 0;
        }
        else if (!strcmp(a, "--micro-batch") || !strcmp(a, "--steps") || !strcmp(a, "--tp") || !strcmp(a, "--pp") ||
                 !strcmp(a, "--dp") || !strcmp(a, "--cp") || !strcmp(a, "--ep")) {
            char *end;
            long n = strtol(v, &end, 10);
            if (!*v || *end || n < 1 || n > 100000) {
                fprintf(stderr, "dtcal validate: %s: '%s' is not a positive whole number\n", a, v);
                return 2;
            }
            int *dst = !strcmp(a, "--steps") ? &o.steps : !strcmp(a, "--tp") ? &o.tp : !strcmp(a, "--pp") ? &o.pp
                     : !strcmp(a, "--dp") ? &o.dp : !strcmp(a, "--cp") ? &o.cp : !strcmp(a, "--ep") ? &o.ep
                     : &o.micro_batch;
            *dst = (int)n;
        } else {
            fprintf(stderr, "dtcal validate: unknown option %s\n", a);
            return 2;
        }
    }
    if (bucket_given && !o.overlap_grad_reduce) {
        fprintf(stderr, "dtcal validate: --bucket-mb sizes the buckets of --overlap-grad-reduce, which is not given\n");
        return 2;
    }
    /* Every flag is checked here, before dtrain runs (minutes on a GPU model): a value found
     * wrong after it, or a result with nowhere to go, wastes the run. */
    if (o.steps < 2) {
        fprintf(stderr, "dtcal validate: --steps %d: the step time is the median of the steps after the first "
                        "(warm-up), so it needs 2 or more\n", o.steps);
        return 2;
    }
    if (strcmp(o.device, "cpu") && strcmp(o.device, "cuda")) {
        fprintf(stderr, "dtcal validate: --device %s: not cpu or cuda (dtrain's devices)\n", o.device);
        return 2;
    }
    /* every rank on this machine, a node of that many slots: dtsim reads node.gpus up to 1024
     * (config_platform.c); the product in 64 bits, as four factors up to 100000 pass an int */
    long long ranks = (long long)o.tp * o.pp * o.dp * (o.cp > 1 ? o.cp : 1);
    if (ranks > 1024) {
        fprintf(stderr, "dtcal validate: --tp %d x --pp %d x --dp %d x --cp %d = %lld ranks, all on this machine: "
                        "at most 1024\n", o.tp, o.pp, o.dp, o.cp > 1 ? o.cp : 1, ranks);
        return 2;
    }
    if ((o.json_path && cal_out_checked("dtcal validate", "--json", o.json_path) != 0) ||
        (o.dtrain_log && cal_out_checked("dtcal validate", "--dtrain-log", o.dtrain_log) != 0))
        return 2;
    return closed_loop_run(&o);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(stdout);
        return 0;
    }
    for (int i = 2; i < argc; i++) /* "dtcal kernels --help" and the like */
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        }
    if (!strcmp(argv[1], "kernels"))
        return cmd_kernels(argc, argv);
    if (!strcmp(argv[1], "import-nccl-tests"))
        return cmd_import_nccl_tests(argc, argv);
    if (!strcmp(argv[1], "import-gemm"))
        return cmd_import_gemm(argc, argv);
    if (!strcmp(argv[1], "validate"))
        return cmd_validate(argc, argv);
    if (!strcmp(argv[1], "collectives"))
        return cmd_collectives(argc, argv);
    if (!strcmp(argv[1], "variability"))
        return cmd_variability(argc, argv);
    if (!strcmp(argv[1], "overlap"))
        return cmd_overlap(argc, argv);
    fprintf(stderr, "dtcal: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
