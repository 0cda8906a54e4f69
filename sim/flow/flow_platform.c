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

void flow_platform_describe(const platform_config *p, int nodes_used)
{
    char params[1024];
    snprintf(params, sizeof params,
             "nodes=%d;gpus=%d;topology=%d;leaf_radix=%d;tiers=%d;nvlink_Bps=%.17g;nvlink_lat=%.17g;nic_Bps=%.17g;"
             "link_lat=%.17g;switch_lat=%.17g;oversubscription=%.17g",
             nodes_used, p->node.gpus, (int)p->network.topology, p->network.leaf_radix, p->network.tiers,
             p->node.nvlink_bandwidth_gbs * 1e9, p->node.nvlink_latency_us * 1e-6,
             p->node.nic_bandwidth_gbps / 8.0 * 1e9, p->network.link_latency_us * 1e-6,
             p->network.switch_latency_us * 1e-6, p->network.oversubscription);
    setenv("DTSIM_RAILZONE", params, 1);
}
