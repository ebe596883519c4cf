/* The elementwise map kernel, instantiated for float and double. */
#include "cpu/elementwise.h"

#include <math.h>

#include "cpu/parallel.h"

#define T float
#define SFX f32
#define EXP expf
#define LOG logf
#define SQRT sqrtf
#define TANH tanhf
#define POW powf
#include "cpu/elementwise_impl.h"

#define T double
#define SFX f64
#define EXP exp
#define LOG log
#define SQRT sqrt
#define TANH tanh
#define POW pow
#include "cpu/elementwise_impl.h"

void tfc_cpu_map(tfc_map_op op, const tfc_sview *out, const tfc_sview *a, const tfc_sview *b, const tfc_sview *c,
                 double p, int accumulate) {
    if (out->dtype == TFC_DTYPE_F64) tfc_cpu_map_f64(op, out, a, b, c, p, accumulate);
    else tfc_cpu_map_f32(op, out, a, b, c, p, accumulate);
}
