/* flow_platform_probe PLATFORM.json [GPUS]: loads the platform's cluster (its first GPUS GPUs,
 * rounded up to whole nodes; default all) as the flow replay would, and prints one line:
 * "gpus G hosts H links L load_s T peak_rss_mib M". For bench/flow_bench.sh. */
#include <stdio.h>
#include <stdlib.h>
#include "config.h"
#include "flow/flow.h"

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s PLATFORM.json [GPUS]\n", argv[0]);
        return 2;
    }
    platform_config p;
    config_error err;
    if (platform_load(argv[1], &p, &err) != 0) {
        fprintf(stderr, "%s\n", err.msg);
        return 2;
    }
    int gpn = p.node.gpus > 0 ? p.node.gpus : 1;
    int gpus = argc == 3 ? atoi(argv[2]) : p.network.nodes * gpn;
    int nodes = (gpus + gpn - 1) / gpn;
    if (gpus < 1 || nodes > p.network.nodes) {
        fprintf(stderr, "%s: %d GPUs do not fit in %d nodes of %d\n", argv[0], gpus, p.network.nodes, gpn);
        return 2;
    }
    flow_platform_info info;
    if (flow_platform_probe(&p, nodes, NULL, 0, NULL, &info, &err) != 0) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    printf("gpus %d hosts %ld links %ld load_s %.3f peak_rss_mib %.0f\n", nodes * gpn, info.hosts, info.links,
           info.load_s, info.peak_rss_mib);
    return 0;
}
