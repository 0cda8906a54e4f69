/* Reductions returned to the host: squared norm (for clipping) and the overflow check (for
 * fp16 loss scaling). */
#include <math.h>
#include "cpu_internal.h"

void cpu_sum_squares(const float *const *x, const size_t *n, int count, double *out)
{
    for (int r = 0; r < count; r++) {
        double s = 0;
        for (size_t i = 0; i < n[r]; i++)
            s += (double)x[r][i] * x[r][i];
        out[r] = s;
    }
}

int cpu_has_inf_or_nan(const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return 1;
    return 0;
}
