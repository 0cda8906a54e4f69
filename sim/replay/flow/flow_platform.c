/* Finds the platform module and describes the cluster to it (see railzone.cpp). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <simgrid/engine.h>
#include "collective.h"
#include "flow_internal.h"
#include "wall_clock.h"

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

/* A link's usable bandwidth is the analytic replay's own (collective_link_Bps: the calibrated
 * all-reduce bus bandwidth of its class, bounded by the platform's rate): flows on links at the
 * nominal rate would beat the analytic replay on every uncontended ring by the calibration's
 * efficiency. */
void flow_platform_describe(const platform_config *p, const calibration_config *c, int nodes_used)
{
    char params[1024];
    snprintf(params, sizeof params,
             "nodes=%d;gpus=%d;topology=%d;leaf_radix=%d;tiers=%d;nvlink_Bps=%.17g;nvlink_lat=%.17g;nic_Bps=%.17g;"
             "link_lat=%.17g;switch_lat=%.17g;oversubscription=%.17g;adaptive=%d",
             nodes_used, p->node.gpus, (int)p->network.topology, p->network.leaf_radix, p->network.tiers,
             collective_link_Bps(p, c, LINK_NVLINK, COLL_ALL_REDUCE, NULL), p->node.nvlink_latency_us * 1e-6,
             collective_link_Bps(p, c, LINK_NETWORK, COLL_ALL_REDUCE, NULL), p->network.link_latency_us * 1e-6,
             p->network.switch_latency_us * 1e-6, p->network.oversubscription, p->network.adaptive_routing);
    setenv("DTSIM_RAILZONE", params, 1);
}

void flow_platform_describe_offload(const platform_config *p)
{
    const char *base = getenv("DTSIM_RAILZONE");
    char params[1536];
    snprintf(params, sizeof params, "%s;offload=1;pcie_Bps=%.17g;hostmem_Bps=%.17g;nvme_read_Bps=%.17g;nvme_write_Bps=%.17g",
             base ? base : "", p->node.pcie_bandwidth_gbs * 1e9, p->node.host_memory_bandwidth_gbs * 1e9,
             p->node.nvme_read_gbs * 1e9, p->node.nvme_write_gbs * 1e9);
    setenv("DTSIM_RAILZONE", params, 1);
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

int flow_write_all(int fd, const void *buf, size_t n)
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

double flow_simgrid_start(const char *name, const char *so)
{
    /* contexts/guard-size:0: no guard page under each actor's stack. With one, SimGrid maps the
     * stack and mprotects a page of it, two memory maps an actor, and the kernel's
     * vm.max_map_count (65,530 by default) stops a replay near 32,000 actors; without, one map
     * (the stack's own mmap). The lane actors' frames hold a few kilobytes of the 8 MiB stack. */
    char *argv0[] = {(char *)name, "--cfg=network/model:CM02", "--cfg=network/crosstraffic:0",
                     "--cfg=contexts/guard-size:0", "--log=root.thres:critical", NULL};
    int argc = 5;
    simgrid_init(&argc, argv0);
    double t0 = wall_clock_s();
    simgrid_load_platform(so);
    return wall_clock_s() - t0;
}

int flow_run_child(const char *who, const char *what, const char *platform, flow_child_fn child,
                   flow_reader_fn reader, void *ctx, config_error *err)
{
    int fds[2];
    if (pipe(fds) != 0) {
        snprintf(err->msg, sizeof err->msg, "%s: pipe failed", who);
        return -1;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t parent = getpid(), pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        snprintf(err->msg, sizeof err->msg, "%s: fork failed", who);
        return -1;
    }
    if (pid == 0) {
        close(fds[0]);
        /* the child dies with its parent (an interrupted dtsim leaves no SimGrid running) */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) /* it died before the request was in place */
            _exit(1);
        _exit(child(ctx, platform, fds[1]));
    }
    close(fds[1]);
    int rc = reader(ctx, fds[0]);
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (rc || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        snprintf(err->msg, sizeof err->msg, "%s: %s failed (child status %d)", who, what, status);
        return -1;
    }
    return 0;
}

int flow_in_child(const char *who, const char *what, flow_child_fn child, flow_reader_fn reader, void *ctx,
                  config_error *err)
{
    char so[4096];
    if (flow_platform_path(so, sizeof so) != 0) {
        snprintf(err->msg, sizeof err->msg,
                 "%s: the SimGrid platform module libdtsim_railzone.so was not found next to the program (../lib/) "
                 "nor in DTSIM_RAILZONE_SO", who);
        return -1;
    }
    return flow_run_child(who, what, so, child, reader, ctx, err);
}
