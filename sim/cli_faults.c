/* dtsim faults: not built yet (placeholder until its module lands). */
#include <stdio.h>
#include "cli.h"

int cli_faults(int argc, char **argv)
{
    fprintf(stderr, "dtsim faults: not available in this version\n");
    return 2;
}
