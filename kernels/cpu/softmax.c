/* Row softmax, stable: the row's max is subtracted before exp so large logits cannot overflow;
 * the normaliser is summed in double so long rows lose nothing to the order of the sum. */
#include <math.h>
#include "cpu_internal.h"

void cpu_softmax_forward(float *out, const float *inp, int rows, int cols)
{
    for (int r = 0; r < rows; r++) {
        const float *x = inp + (size_t)r * cols;
        float *y = out + (size_t)r * cols;
        float m = -INFINITY;
        for (int c = 0; c < cols; c++)
            m = fmaxf(m, x[c]);
        double s = 0;
        for (int c = 0; c < cols; c++) {
            y[c] = expf(x[c] - m);
            s += y[c];
        }
        float inv = (float)(1.0 / s);
        for (int c = 0; c < cols; c++)
            y[c] *= inv;
    }
}
