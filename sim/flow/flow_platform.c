/* Finds the platform module and describes the cluster to it (see railzone.cpp). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "flow_internal.h"

int flow_platform_path(char *out, size_t n)
{
    const char *env = getenv("DTSIM_RAILZONE_SO");
    if (env && *env) {
        snprintf(out, n, "%s", env);
        return access(out, R_OK) == 0 ? 0 : -1;
    }
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0) {
        exe[len] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = 0;
            snprintf(out, n, "%s/../lib/libdtsim_railzone.so", exe);
            if (access(out, R_OK) == 0)
                return 0;
        }
    }
    return -1;
}

/* A link's usable bandwidth: the calibrated bus bandwidth of its class (nccl-tests all-reduce,
 * the figure the analytic replay's collectives use) where the calibration has one, else the
 * platform's nominal figure. Flows on links at the nominal rate would beat the analytic replay
 * on every uncontended ring by the calibration's efficiency. */
static double usable_Bps(const calibration_config *c, link_class lc, double nominal_Bps)
{
    const coll_fit *f = c ? &c->collectives[lc][COLL_ALL_REDUCE] : NULL;
    return f && f->present && f->busbw_gbs > 0 ? f->busbw_gbs * 1e9 : nominal_Bps;
}

void flow_platform_describe(const platform_config *p, const calibration_config *c, int nodes_used)
{
    char params[1024];
    snprintf(params, sizeof params,
             "nodes=%d;gpus=%d;topology=%d;leaf_radix=%d;tiers=%d;nvlink_Bps=%.17g;nvlink_lat=%.17g;nic_Bps=%.17g;"
             "link_lat=%.17g;switch_lat=%.17g;oversubscription=%.17g",
             nodes_used, p->node.gpus, (int)p->network.topology, p->network.leaf_radix, p->network.tiers,
             usable_Bps(c, LINK_NVLINK, p->node.nvlink_bandwidth_gbs * 1e9), p->node.nvlink_latency_us * 1e-6,
             usable_Bps(c, LINK_NETWORK, p->node.nic_bandwidth_gbps / 8.0 * 1e9), p->network.link_latency_us * 1e-6,
             p->network.switch_latency_us * 1e-6, p->network.oversubscription);
    setenv("DTSIM_RAILZONE", params, 1);
}
