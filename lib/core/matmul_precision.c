/*
 * The process-wide f32 matmul precision (tfc_set_float32_matmul_precision).
 * One atomic int: the GEMM door reads it once per product, so a setting
 * changed while another thread multiplies takes effect at its next GEMM.
 */
#include <stdatomic.h>

#include "core/error.h"

static atomic_int g_precision = TFC_MATMUL_PRECISION_HIGHEST;

TFC_API tfc_status tfc_set_float32_matmul_precision(tfc_matmul_precision precision) {
    /* Through int: an enum argument from C or cffi can hold any int value. */
    int v = (int)precision;
    if (v < TFC_MATMUL_PRECISION_HIGHEST || v > TFC_MATMUL_PRECISION_MEDIUM)
        return tfc_err(TFC_ERR_INVALID_ARG,
                       "tfc_set_float32_matmul_precision: precision is %d; need TFC_MATMUL_PRECISION_HIGHEST (0), "
                       "HIGH (1) or MEDIUM (2)",
                       v);
    atomic_store(&g_precision, v);
    return TFC_OK;
}

TFC_API tfc_matmul_precision tfc_get_float32_matmul_precision(void) {
    return (tfc_matmul_precision)atomic_load(&g_precision);
}
