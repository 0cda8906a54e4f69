/* Reductions returned to the host: squared norm (for clipping) and the overflow check (for
 * fp16 loss scaling). */
#include <math.h>
#include "cpu_internal.h"

double cpu_sum_squares(const float *x, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += (double)x[i] * x[i];
    return s;
}

int cpu_has_inf_or_nan(const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return 1;
    return 0;
}
