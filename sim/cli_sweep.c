/* dtsim sweep: not built yet (placeholder until its module lands). */
#include <stdio.h>
#include "cli.h"

int cli_sweep(int argc, char **argv)
{
    fprintf(stderr, "dtsim sweep: not available in this version\n");
    return 2;
}
