/* See nccl_model_check.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "collective.h"
#include "nccl_model_check.h"

int nccl_model_check(FILE *out, const platform_config *p, const nccl_fit *fit, link_class cls, int ranks, int hosts,
                     double min_bytes, nccl_model_check_result *r, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    int kind = coll_kind_from_name(fit->collective);
    if (kind < 0) {
        snprintf(err, errlen, "%s: not a collective dtsim models", fit->collective);
        return -1;
    }
    if (ranks < 2 || hosts < 1 || ranks % hosts) {
        snprintf(err, errlen, "%d ranks on %d host(s): need at least 2 ranks, the same number on every host", ranks,
                 hosts);
        return -1;
    }
    /* the calibration holds only this log's fit: what dtsim would read after importing it */
    calibration_config cal;
    memset(&cal, 0, sizeof cal);
    cal.collectives[cls][kind] = (coll_fit){1, fit->alpha_us, fit->busbw_gbs};
    coll_group g = coll_group_of(ranks, 1, ranks / hosts);
    platform_config with_nvls; /* an NVLS log was measured where the switches reduce */
    if (cls == LINK_NVLS) {
        with_nvls = *p;
        with_nvls.node.nvls = 1;
        p = &with_nvls;
    }
    double sum = 0;
    fprintf(out, "    %14s %12s %12s %8s  %s\n", "size (B)", "measured us", "model us", "error", "model's choice");
    for (int i = 0; i < fit->points; i++) {
        double S = fit->size[i], t = fit->time_us[i];
        if (S < min_bytes || !(t > 0))
            continue;
        coll_cost c = collective_time(p, &cal, (coll_kind)kind, S, g);
        double model = c.time_s * 1e6, e = model / t - 1;
        fprintf(out, "    %14.0f %12.2f %12.2f %+7.1f%%  %s/%s\n", S, t, model, 100 * e, coll_algo_name(c.algo),
                coll_proto_name(c.proto));
        sum += fabs(e);
        if (fabs(e) >= fabs(r->worst_error)) {
            r->worst_error = e;
            r->worst_size = S;
        }
        r->compared++;
    }
    if (r->compared == 0) {
        snprintf(err, errlen, "no size of %.0f bytes or more in the log", min_bytes);
        return -1;
    }
    r->mean_abs_error = sum / r->compared;
    return 0;
}

int nccl_model_check_option(int argc, char **argv, int *i, nccl_model_check_opts *o, int *rc)
{
    const char *opt = argv[*i];
    if (*i + 1 >= argc)
        return 0;
    if (!strcmp(opt, "--platform")) {
        config_error err;
        if (platform_load(argv[++*i], &o->platform, &err) != 0) {
            fprintf(stderr, "dtcal import-nccl-tests: --platform %s: %s\n", argv[*i], err.msg);
            *rc = 2;
        }
        o->present = 1;
        return 1;
    }
    int bytes = !strcmp(opt, "--min-bytes");
    if (!bytes && strcmp(opt, "--ranks") && strcmp(opt, "--hosts"))
        return 0;
    char *end;
    double v = strtod(argv[++*i], &end);
    if (*end || !(v >= (bytes ? 0 : 1)) || v > (bytes ? 1e15 : 1 << 30) || (!bytes && v != floor(v))) {
        fprintf(stderr, "dtcal import-nccl-tests: %s %s: not a %s\n", opt, argv[*i],
                bytes ? "size in bytes" : "whole number from 1 to 2^30");
        *rc = 2;
    } else if (bytes) {
        o->min_bytes = v;
    } else {
        *(!strcmp(opt, "--ranks") ? &o->ranks : &o->hosts) = (int)v;
    }
    return 1;
}

int nccl_model_check_log(const char *path, const nccl_fit *fit, link_class cls, const nccl_model_check_opts *o,
                         const char *who)
{
    int ranks = o->ranks ? o->ranks : fit->ranks, hosts = o->hosts ? o->hosts : fit->hosts;
    if (!ranks || !hosts) {
        fprintf(stderr, "dtcal %s: %s: the log lists no ranks, so dtsim's model cannot be given the group: give "
                        "--ranks N and --hosts H\n", who, path);
        return 2;
    }
    nccl_model_check_result r;
    char err[256];
    fprintf(stderr, "  dtsim's %s model on platform %s, %d ranks on %d host(s), against %s:\n",
            o->platform.collective_library == COLL_LIBRARY_MPI ? "alpha-beta" : "NCCL tuner", o->platform.name, ranks,
            hosts, path);
    if (nccl_model_check(stderr, &o->platform, fit, cls, ranks, hosts, o->min_bytes, &r, err, sizeof err) != 0) {
        fprintf(stderr, "dtcal %s: %s: %s\n", who, path, err);
        return 2;
    }
    fprintf(stderr, "  %s: %d sizes from %.0f B: mean |error| %.1f%%, worst %+.1f%% at %.0f B\n", fit->collective,
            r.compared, o->min_bytes, 100 * r.mean_abs_error, 100 * r.worst_error, r.worst_size);
    return 0;
}
