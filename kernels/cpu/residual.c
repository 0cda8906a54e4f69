/* The residual stream's add. Its backward is the identity (the caller adds dout into both
 * branches), so there is no residual_backward kernel. */
#include "cpu_internal.h"
#include "half_bits.h"

void cpu_residual_forward(float *out, const float *a, const float *b, size_t N, kernels_precision prec)
{
    for (size_t i = 0; i < N; i++)
        out[i] = half_round_to(a[i] + b[i], prec);
}
