/* Loads the platform module alone and reports what it built: host and link counts, load time,
 * memory, and the routes between chosen GPUs. Used by the platform tests (rails, PXN, the
 * 16,384-GPU load) and by bench/flow_bench.sh. Like the replay, it runs SimGrid in a forked
 * child, since SimGrid initialises once per process. */
#include <simgrid/engine.h>
#include <simgrid/host.h>
#include <simgrid/link.h>
#include <xbt/dynar.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "flow.h"
#include "flow_internal.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t put = write(fd, p, n);
        if (put <= 0)
            return -1;
        p += put;
        n -= (size_t)put;
    }
    return 0;
}

int flow_read_all(int fd, void *buf, size_t n)
{
    char *p = buf;
    while (n > 0) {
        ssize_t got = read(fd, p, n);
        if (got <= 0)
            return -1;
        p += got;
        n -= (size_t)got;
    }
    return 0;
}

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

static int child_probe(const platform_config *p, int nodes, const int *pairs, int n_pairs, const char *so, int fd)
{
    flow_platform_describe(p, NULL, nodes);
    char *argv0[] = {"dtsim-flow-probe", "--cfg=network/model:CM02", "--cfg=network/crosstraffic:0",
                     "--log=root.thres:critical", NULL};
    int argc = 4;
    simgrid_init(&argc, argv0);
    double t0 = now_s();
    simgrid_load_platform(so);
    flow_platform_info info;
    memset(&info, 0, sizeof info);
    info.load_s = now_s() - t0;
    info.hosts = (long)sg_host_count();
    info.links = (long)sg_link_count();
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    info.peak_rss_mib = ru.ru_maxrss / 1024.0;
    if (write_all(fd, &info, sizeof info) != 0)
        return 1;
    char route[FLOW_ROUTE_MAX];
    for (int i = 0; i < n_pairs; i++) {
        route_names(p->node.gpus, pairs[2 * i], pairs[2 * i + 1], route, sizeof route);
        if (write_all(fd, route, sizeof route) != 0)
            return 1;
    }
    return 0;
}

int flow_platform_probe(const platform_config *p, int nodes, const int *pairs, int n_pairs,
                        char (*routes)[FLOW_ROUTE_MAX], flow_platform_info *info, config_error *err)
{
    char so[4096];
    if (flow_platform_path(so, sizeof so) != 0) {
        snprintf(err->msg, sizeof err->msg,
                 "flow fidelity: the SimGrid platform module libdtsim_railzone.so was not found next to the "
                 "program (../lib/) nor in DTSIM_RAILZONE_SO");
        return -1;
    }
    int fds[2];
    if (pipe(fds) != 0) {
        snprintf(err->msg, sizeof err->msg, "flow probe: pipe failed");
        return -1;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        snprintf(err->msg, sizeof err->msg, "flow probe: fork failed");
        return -1;
    }
    if (pid == 0) {
        close(fds[0]);
        _exit(child_probe(p, nodes, pairs, n_pairs, so, fds[1]));
    }
    close(fds[1]);
    flow_platform_info got;
    int rc = flow_read_all(fds[0], &got, sizeof got);
    for (int i = 0; rc == 0 && i < n_pairs; i++)
        rc = flow_read_all(fds[0], routes[i], FLOW_ROUTE_MAX);
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (rc || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        snprintf(err->msg, sizeof err->msg, "flow probe: loading the platform failed (child status %d)", status);
        return -1;
    }
    if (info)
        *info = got;
    return 0;
}
