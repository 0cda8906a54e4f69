/* See collectives_import.h. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cal_writer.h"
#include "collectives_import.h"
#include "config.h"
#include "nccl_import.h"

int cmd_import_nccl_tests(int argc, char **argv)
{
    const char *out = "-", *kind = NULL, *into = NULL, *link = NULL;
    const char **logs = malloc((size_t)argc * sizeof *logs); /* the options apply to every log */
    json_t *colls = json_object();
    nccl_model_check_opts chk = {.min_bytes = 1024};
    int files = 0, rc = 0;
    for (int i = 2; i < argc && rc == 0; i++) {
        if (!strcmp(argv[i], "-o") && i + 1 < argc) {
            out = argv[++i];
        } else if (nccl_model_check_option(argc, argv, &i, &chk, &rc)) {
            /* --platform, --ranks, --hosts, --min-bytes (nccl_model_check.h) */
        } else if (!strcmp(argv[i], "--kind") && i + 1 < argc) {
            /* filed under the calibration's name: dtsim refuses any other (config_scenario.c) */
            kind = nccl_kind_name(argv[++i]);
            if (!kind) {
                fprintf(stderr, "dtcal import-nccl-tests: --kind %s: not all_reduce, all_gather, reduce_scatter, "
                                "all_to_all (alltoall) or send_recv (sendrecv)\n", argv[i]);
                rc = 2;
            }
        } else if (!strcmp(argv[i], "--into") && i + 1 < argc) {
            into = argv[++i];
        } else if (!strcmp(argv[i], "--link") && i + 1 < argc) {
            link = argv[++i];
            if (strcmp(link, "nvlink") && strcmp(link, "network") && strcmp(link, "nvls")) {
                fprintf(stderr, "dtcal import-nccl-tests: --link %s: not nvlink, network or nvls\n", link);
                rc = 2;
            }
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "dtcal import-nccl-tests: unknown option or missing value: %s\n", argv[i]);
            rc = 2;
        } else {
            logs[files++] = argv[i];
        }
    }
    if (rc == 0 && !chk.present && (chk.ranks || chk.hosts))
        fprintf(stderr, "dtcal import-nccl-tests: --ranks and --hosts describe the log for --platform's comparison; "
                        "without --platform they do nothing\n");
    for (int i = 0; i < files && rc == 0; i++)
        rc = collectives_add_fit(colls, logs[i], kind, link, "import-nccl-tests", chk.present ? &chk : NULL);
    free(logs);
    if (rc == 0 && files == 0) {
        fprintf(stderr, "dtcal import-nccl-tests: no log given\n");
        rc = 2;
    }
    if (rc == 0)
        rc = collectives_write(colls, into, out, "from nccl-tests", "nccl-tests", argc, argv, "import-nccl-tests");
    json_decref(colls);
    return rc;
}

int collectives_add_fit(json_t *colls, const char *path, const char *kind, const char *link, const char *who,
                   const nccl_model_check_opts *chk)
{
    nccl_fit fit;
    char err[1024];
    if (nccl_import_file(path, kind, &fit, err, sizeof err) != 0) {
        fprintf(stderr, "dtcal %s: %s\n", who, err);
        return 2;
    }
    if (!link && fit.hosts == 0) {
        fprintf(stderr, "dtcal %s: %s: the log lists no ranks (no '# Using devices' block), so whether they ran on "
                        "one host (nvlink) or several (network) is unknown: give --link nvlink|network\n", who, path);
        nccl_fit_free(&fit);
        return 2;
    }
    const char *cls = link ? link : fit.hosts > 1 ? "network" : "nvlink";
    link_class lc = !strcmp(cls, "network") ? LINK_NETWORK : !strcmp(cls, "nvls") ? LINK_NVLS : LINK_NVLINK;
    /* A ring moves each byte over a GPU's links, so its bus bandwidth stays below what they carry
     * one way; more, on a platform whose collectives are NCCL's, is a switch that reduces (NVLS),
     * whose log read as a ring prices every ring on the node too fast (docs/model.md, "NVLS
     * measured"). */
    int nccl = chk && chk->platform.collective_library == COLL_LIBRARY_NCCL;
    double links_gbs = nccl ? chk->platform.node.nvlink_bandwidth_gbs : 0;
    if (lc == LINK_NVLINK && links_gbs > 0 && fit.busbw_gbs > links_gbs) {
        fprintf(stderr, "dtcal %s: %s: %s bus bandwidth %.1f GB/s is more than a ring can move over NVLink (the "
                        "platform's node.nvlink_bandwidth_gbs %.0f GB/s each way): the log ran NVLS (NVLink SHARP, "
                        "NCCL's default where the NVSwitches have it)%s; import it with --link nvls, and measure the "
                        "ring with NCCL_NVLS_ENABLE=0 (or NCCL_ALGO=Ring) for --link nvlink\n",
                who, path, fit.collective, fit.busbw_gbs, links_gbs,
                chk->platform.node.nvls ? "" : ", which this platform does not have (set node.nvls where it does)");
        nccl_fit_free(&fit);
        return 2;
    }
    /* NVLS runs all-reduce, all-gather and reduce-scatter inside one node; its rate is read as of
     * all the node's GPUs (sim/step/nccl_tuner.c), which --platform says */
    int ranks = chk && chk->ranks ? chk->ranks : fit.ranks, hosts = chk && chk->hosts ? chk->hosts : fit.hosts;
    int measured = coll_kind_from_name(fit.collective);
    if (lc == LINK_NVLS && (hosts > 1 || measured == COLL_ALL_TO_ALL || measured == COLL_SEND_RECV ||
                            (chk && ranks > 0 && ranks != chk->platform.node.gpus))) {
        fprintf(stderr, "dtcal %s: %s: --link nvls is one whole node's NVLink SHARP: all_reduce, all_gather or "
                        "reduce_scatter on all of its GPUs; this log is %s of %d rank(s) on %d host(s)\n", who, path,
                fit.collective, ranks, hosts);
        nccl_fit_free(&fit);
        return 2;
    }
    fprintf(stderr, "  %s: %s over %d ranks on %d host(s) (%s): alpha %.2f us, busbw %.2f GB/s (%d sizes, up "
                    "to %.0f bytes)\n", path, fit.collective, fit.ranks, fit.hosts, cls, fit.alpha_us, fit.busbw_gbs,
            fit.points, fit.max_bytes);
    json_t *c = json_object_get(colls, cls);
    if (!c)
        json_object_set_new(colls, cls, c = json_object());
    /* json_pack refuses a NaN or an infinity, and json_object_set_new then drops the fit without a
     * word: the import would write a calibration without it and exit 0. nccl_import_file refuses
     * such a fit with its cause; this keeps anything that passes it from being lost unsaid. */
    json_t *entry = isfinite(fit.alpha_us) && isfinite(fit.busbw_gbs)
                        ? json_pack("{s:f,s:f}", "alpha_us", fit.alpha_us, "busbw_gbs", fit.busbw_gbs)
                        : NULL;
    if (!entry || json_object_set_new(c, fit.collective, entry) != 0) {
        fprintf(stderr, "dtcal %s: %s: the fit (alpha %g us, busbw %g GB/s) cannot be written to the calibration\n",
                who, path, fit.alpha_us, fit.busbw_gbs);
        nccl_fit_free(&fit);
        return 2;
    }
    int rc = chk ? nccl_model_check_log(path, &fit, lc, chk, who) : 0;
    nccl_fit_free(&fit);
    return rc;
}

int collectives_write(json_t *colls, const char *into, const char *out, const char *device, const char *source,
                             int argc, char **argv, const char *who)
{
    json_t *doc;
    if (into) {
        char label[64];
        snprintf(label, sizeof label, "dtcal %s", who);
        if (!(doc = cal_load_into(into, label)))
            return 2;
        json_object_set_new(doc, "source", json_string("mixed"));
    } else {
        doc = cal_new(device, source, argc, argv);
    }
    json_t *old = json_object_get(doc, "collectives");
    if (json_is_object(old))
        json_object_update_recursive(old, colls);
    else
        json_object_set(doc, "collectives", colls);
    int rc = cal_write(doc, out) ? 1 : 0;
    json_decref(doc);
    return rc;
}
