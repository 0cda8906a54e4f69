/* Shared by the flow replay's files. */
#ifndef DTSIM_SIM_FLOW_INTERNAL_H
#define DTSIM_SIM_FLOW_INTERNAL_H
#include <stddef.h>
#include "config.h"

/* The platform module's path: DTSIM_RAILZONE_SO, else ../lib/ next to the executable. */
int flow_platform_path(char *out, size_t n);
/* Puts the cluster's description in the environment for the module (nodes_used nodes). */
void flow_platform_describe(const platform_config *p, const calibration_config *c, int nodes_used);
/* Reads exactly n bytes from a pipe (the forked SimGrid child's report); 0 or -1. */
int flow_read_all(int fd, void *buf, size_t n);

#endif
