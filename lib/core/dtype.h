/* dtype facts and scalar conversions shared by every layer. */
#ifndef TFC_CORE_DTYPE_H
#define TFC_CORE_DTYPE_H

#include <stdint.h>
#include <string.h>

#include "tfcore/core.h"

/*
 * Bytes per element of d, 0 for an unknown dtype: tfc_dtype_size's body,
 * inline here so the CUDA module (which does not link libtfcore) uses the
 * same table.
 */
static inline size_t tfc_dtype_bytes(tfc_dtype d) {
    switch (d) {
    case TFC_DTYPE_F64:
    case TFC_DTYPE_I64: return 8;
    case TFC_DTYPE_F32:
    case TFC_DTYPE_I32: return 4;
    case TFC_DTYPE_BF16:
    case TFC_DTYPE_F16: return 2;
    case TFC_DTYPE_U8:
    case TFC_DTYPE_BOOL: return 1;
    default: return 0;
    }
}

int tfc_dtype_valid(tfc_dtype d);
int tfc_dtype_is_float(tfc_dtype d); /* f32, f64, bf16, f16 */
int tfc_dtype_is_int(tfc_dtype d);   /* i32, i64, u8, bool */

/* Read element i of a buffer of dtype d as double / write a double into it. */
double tfc_scalar_load(const void *base, tfc_dtype d, int64_t i);
void tfc_scalar_store(void *base, tfc_dtype d, int64_t i, double v);

/* bf16: the top 16 bits of an f32, rounded to nearest even; NaN stays NaN. */
static inline uint16_t tfc_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static inline float tfc_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
/* IEEE binary16, round to nearest even, with subnormals, Inf and NaN. */
uint16_t tfc_f32_to_f16(float f);
float tfc_f16_to_f32(uint16_t h);

#endif
