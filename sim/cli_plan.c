/* dtsim plan: not built yet (placeholder until its module lands). */
#include <stdio.h>
#include "cli.h"

int cli_plan(int argc, char **argv)
{
    fprintf(stderr, "dtsim plan: not available in this version\n");
    return 2;
}
