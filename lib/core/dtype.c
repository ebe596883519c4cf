/* dtype names, sizes and the f16 conversion. */
#include "core/dtype.h"

#include <math.h>

TFC_API const char *tfc_dtype_name(tfc_dtype d) {
    switch (d) {
    case TFC_DTYPE_F32: return "f32";
    case TFC_DTYPE_F64: return "f64";
    case TFC_DTYPE_BF16: return "bf16";
    case TFC_DTYPE_F16: return "f16";
    case TFC_DTYPE_I32: return "i32";
    case TFC_DTYPE_I64: return "i64";
    case TFC_DTYPE_U8: return "u8";
    case TFC_DTYPE_BOOL: return "bool";
    default: return "?";
    }
}

TFC_API size_t tfc_dtype_size(tfc_dtype d) { return tfc_dtype_bytes(d); }

int tfc_dtype_valid(tfc_dtype d) { return tfc_dtype_size(d) != 0; }

int tfc_dtype_is_float(tfc_dtype d) {
    return d == TFC_DTYPE_F32 || d == TFC_DTYPE_F64 || d == TFC_DTYPE_BF16 || d == TFC_DTYPE_F16;
}

int tfc_dtype_is_int(tfc_dtype d) {
    return d == TFC_DTYPE_I32 || d == TFC_DTYPE_I64 || d == TFC_DTYPE_U8 || d == TFC_DTYPE_BOOL;
}

double tfc_scalar_load(const void *base, tfc_dtype d, int64_t i) {
    switch (d) {
    case TFC_DTYPE_F32: return ((const float *)base)[i];
    case TFC_DTYPE_F64: return ((const double *)base)[i];
    case TFC_DTYPE_BF16: return tfc_bf16_to_f32(((const uint16_t *)base)[i]);
    case TFC_DTYPE_F16: return tfc_f16_to_f32(((const uint16_t *)base)[i]);
    case TFC_DTYPE_I32: return ((const int32_t *)base)[i];
    case TFC_DTYPE_I64: return (double)((const int64_t *)base)[i];
    case TFC_DTYPE_U8: return ((const uint8_t *)base)[i];
    case TFC_DTYPE_BOOL: return ((const uint8_t *)base)[i] != 0;
    default: return 0.0;
    }
}

/* Float to integer conversion saturates and maps NaN to 0 so it is never UB. */
static int64_t sat_i64(double v, double lo, double hi) {
    if (isnan(v)) return 0;
    if (v <= lo) return (int64_t)lo;
    if (v >= hi) return (int64_t)hi;
    return (int64_t)v;
}

void tfc_scalar_store(void *base, tfc_dtype d, int64_t i, double v) {
    switch (d) {
    case TFC_DTYPE_F32: ((float *)base)[i] = (float)v; break;
    case TFC_DTYPE_F64: ((double *)base)[i] = v; break;
    case TFC_DTYPE_BF16: ((uint16_t *)base)[i] = tfc_f32_to_bf16((float)v); break;
    case TFC_DTYPE_F16: ((uint16_t *)base)[i] = tfc_f32_to_f16((float)v); break;
    case TFC_DTYPE_I32: ((int32_t *)base)[i] = (int32_t)sat_i64(v, -2147483648.0, 2147483647.0); break;
    case TFC_DTYPE_I64: ((int64_t *)base)[i] = sat_i64(v, -9223372036854775808.0, 9223372036854774784.0); break;
    case TFC_DTYPE_U8: ((uint8_t *)base)[i] = (uint8_t)sat_i64(v, 0.0, 255.0); break;
    case TFC_DTYPE_BOOL: ((uint8_t *)base)[i] = v != 0.0; break;
    default: break;
    }
}

uint16_t tfc_f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t absx = x & 0x7fffffffu;
    if (absx > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);  /* NaN */
    if (absx >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to Inf */
    if (absx < 0x38800000u) {                                   /* subnormal or zero */
        /* value = absx as float; scale to units of 2^-24 and round to even. */
        float af;
        memcpy(&af, &absx, 4);
        float scaled = af * 16777216.0f; /* 2^24 */
        uint32_t q = (uint32_t)scaled;
        float rem = scaled - (float)q;
        if (rem > 0.5f || (rem == 0.5f && (q & 1u))) q++;
        return (uint16_t)(sign | q);
    }
    uint32_t mant = absx & 0x7fffffu;
    uint32_t exp = (absx >> 23) - 127 + 15;
    uint32_t h = (exp << 10) | (mant >> 13);
    uint32_t rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++;
    return (uint16_t)(sign | h);
}

float tfc_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, u;
    if (exp == 0) {
        float f = (float)mant * (1.0f / 16777216.0f);
        return sign ? -f : f;
    }
    if (exp == 31)
        u = sign | 0x7f800000u | (mant << 13);
    else
        u = sign | ((exp - 15 + 127) << 23) | (mant << 13);
    float f;
    memcpy(&f, &u, 4);
    return f;
}
