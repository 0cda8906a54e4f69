/* `dtrain --model tiny --steps 200` on the bundled corpus drives the loss below 60% of its
 * first value, in each precision. argv[1]: dtrain, argv[2]: precision. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "run_dtrain.h"

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    static json_t *lines[256];
    static char err[1 << 16];
    char args[128];
    /* Micro-batch 4 (the default is 8) keeps each precision near 15 s on two cores. */
    snprintf(args, sizeof args, "--device cpu --model tiny --steps 200 --micro-batch 4 --precision %s", argv[2]);
    int n;
    int rc = run_dtrain(argv[1], args, lines, 256, &n, err, sizeof err);
    if (rc != 0 || n != 201) {
        fprintf(stderr, "dtrain %s exited %d with %d log lines:\n%s\n", args, rc, n, err);
        return 1;
    }
    double first = json_number_value(json_object_get(lines[0], "loss"));
    double last = json_number_value(json_object_get(lines[n - 1], "loss"));
    printf("%s: loss %.4f -> %.4f (%.1f%% of the first)\n", argv[2], first, last, 100 * last / first);
    free_lines(lines, n);
    return last < 0.6 * first ? 0 : 1;
}
