/* Loads the platform module alone and reports what it built: host and link counts, load time,
 * memory, and the routes between chosen GPUs. Used by the platform tests (rails, PXN, the
 * 16,384-GPU load) and by bench/flow_bench.sh. Like the replay, it runs SimGrid in a forked
 * child, since SimGrid initialises once per process. */
#include <simgrid/host.h>
#include <simgrid/link.h>
#include <xbt/dynar.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include "flow.h"
#include "flow_internal.h"

/* The route from GPU a to GPU b as "link link ...", or "?" when a host is missing. */
static void route_names(int gpn, int a, int b, char *out, size_t n)
{
    char na[32], nb[32];
    snprintf(na, sizeof na, "n%dg%d", a / gpn, a % gpn);
    snprintf(nb, sizeof nb, "n%dg%d", b / gpn, b % gpn);
    sg_host_t ha = sg_host_by_name(na), hb = sg_host_by_name(nb);
    if (!ha || !hb) {
        snprintf(out, n, "?");
        return;
    }
    xbt_dynar_t links = xbt_dynar_new(sizeof(sg_link_t), NULL);
    sg_host_get_route(ha, hb, links);
    size_t used = 0;
    out[0] = 0;
    unsigned int it;
    sg_link_t l;
    xbt_dynar_foreach (links, it, l) {
        int k = snprintf(out + used, n - used, "%s%s", used ? " " : "", sg_link_get_name(l));
        if (k < 0 || (size_t)k >= n - used)
            break;
        used += (size_t)k;
    }
    xbt_dynar_free(&links);
}

typedef struct {
    const platform_config *p;
    int nodes, n_pairs;
    const int *pairs;
    char (*routes)[FLOW_ROUTE_MAX];
    flow_platform_info info;
} probe_ctx;

static int child_probe(void *arg, const char *so, int fd)
{
    probe_ctx *x = arg;
    flow_platform_describe(x->p, NULL, x->nodes);
    flow_platform_info info;
    memset(&info, 0, sizeof info);
    info.load_s = flow_simgrid_start("dtsim-flow-probe", so);
    info.hosts = (long)sg_host_count();
    info.links = (long)sg_link_count();
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    info.peak_rss_mib = ru.ru_maxrss / 1024.0;
    if (flow_write_all(fd, &info, sizeof info) != 0)
        return 1;
    char route[FLOW_ROUTE_MAX];
    for (int i = 0; i < x->n_pairs; i++) {
        route_names(x->p->node.gpus, x->pairs[2 * i], x->pairs[2 * i + 1], route, sizeof route);
        if (flow_write_all(fd, route, sizeof route) != 0)
            return 1;
    }
    return 0;
}

static int read_probe(void *arg, int fd)
{
    probe_ctx *x = arg;
    int rc = flow_read_all(fd, &x->info, sizeof x->info);
    for (int i = 0; rc == 0 && i < x->n_pairs; i++)
        rc = flow_read_all(fd, x->routes[i], FLOW_ROUTE_MAX);
    return rc;
}

int flow_platform_probe(const platform_config *p, int nodes, const int *pairs, int n_pairs,
                        char (*routes)[FLOW_ROUTE_MAX], flow_platform_info *info, config_error *err)
{
    probe_ctx x = {.p = p, .nodes = nodes, .n_pairs = n_pairs, .pairs = pairs, .routes = routes};
    if (flow_in_child("flow probe", "loading the platform", child_probe, read_probe, &x, err) != 0)
        return -1;
    if (info)
        *info = x.info;
    return 0;
}
