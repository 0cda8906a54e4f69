/* Shared by the flow replay's files. */
#ifndef DTSIM_SIM_FLOW_INTERNAL_H
#define DTSIM_SIM_FLOW_INTERNAL_H
#include <stddef.h>
#include "config.h"

/* The platform module's path: DTSIM_RAILZONE_SO, else ../lib/ next to the executable. */
int flow_platform_path(char *out, size_t n);
/* Puts the cluster's description in the environment for the module (nodes_used nodes). */
void flow_platform_describe(const platform_config *p, const calibration_config *c, int nodes_used);
/* ZeRO-Offload: adds the hosts' PCIe, DRAM and NVMe links to the description (after
 * flow_platform_describe; see railzone.cpp). */
void flow_platform_describe_offload(const platform_config *p);
/* Reads / writes exactly n bytes through a pipe (the forked SimGrid child's report); 0 or -1. */
int flow_read_all(int fd, void *buf, size_t n);
int flow_write_all(int fd, const void *buf, size_t n);

/* In the child: starts SimGrid with the network model every replay uses and loads the platform
 * module; returns the load time in seconds. */
double flow_simgrid_start(const char *name, const char *so);

/* SimGrid initialises once per process: child(ctx, so, fd) runs in a forked process and writes
 * its report to fd, which reader(ctx, fd) reads. Returns 0, or -1 with err ("WHO: WHAT failed
 * (child status N)", or why no child could run). */
typedef int (*flow_child_fn)(void *ctx, const char *so, int fd);
typedef int (*flow_reader_fn)(void *ctx, int fd);
int flow_in_child(const char *who, const char *what, flow_child_fn child, flow_reader_fn reader, void *ctx,
                  config_error *err);
/* The same with any platform file (e.g. a generated XML): child(ctx, platform, fd). */
int flow_run_child(const char *who, const char *what, const char *platform, flow_child_fn child,
                   flow_reader_fn reader, void *ctx, config_error *err);

#endif
