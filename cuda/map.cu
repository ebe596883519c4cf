/*
 * The elementwise maps out = f(a, b, c; p) of lib/backend/map_ops.h — the
 * same formula table the CPU instantiates, here for f32 and bf16 storage
 * with f32 arithmetic. Any strides (stride 0 broadcasts), any number of
 * dims; out may alias an input element for element. The op is a switch
 * inside the kernel: uniform across the grid, nothing next to the memory
 * traffic, and one instantiation per storage type.
 */
#include "common.cuh"
#include "entries.h"
#include "strided.cuh"

#define EXP(x) expf(x)
#define LOG(x) logf(x)
#define SQRT(x) sqrtf(x)
#define TANH(x) tanhf(x)
#define POW(x, y) powf(x, y)
#define FABS(x) fabsf(x)
#define SIN(x) sinf(x)
#define COS(x) cosf(x)
#define FLOOR(x) floorf(x)
#define CEIL(x) ceilf(x)
#define RINT(x) rintf(x)
#define ROUND_BF16(x) __bfloat162float(__float2bfloat16_rn(x))

__device__ __forceinline__ float map_value(int op, float a, float b, float c, float p) {
    typedef float T;
    switch (op) {
#define TFCU_MAP_CASE(name, expr) \
    case TFC_MAP_##name: return (expr);
        TFC_MAP_OPS(TFCU_MAP_CASE)
#undef TFCU_MAP_CASE
    default: return 0.0f;
    }
}

template <class T>
__global__ void map_kernel(int op, tfc_sview out, tfc_sview a, tfc_sview b, tfc_sview c, bool has_a, bool has_b,
                           bool has_c, float p, bool accumulate, int64_t n) {
    const bool mask = op == TFC_MAP_MASK_SELECT, small = n <= INT32_MAX;
    TFCU_GRID_STRIDE(i, n) {
        float va = has_a ? tfcu_load((const T *)a.data, (size_t)tfcu_offset_n(a, i, small)) : 0.0f;
        float vb = has_b ? tfcu_load((const T *)b.data, (size_t)tfcu_offset_n(b, i, small)) : 0.0f;
        float r;
        if (mask) { /* where(c, a, b): c is a bool/u8 mask */
            r = ((const unsigned char *)c.data)[tfcu_offset_n(c, i, small)] ? va : vb;
        } else {
            float vc = has_c ? tfcu_load((const T *)c.data, (size_t)tfcu_offset_n(c, i, small)) : 0.0f;
            r = map_value(op, va, vb, vc, p);
        }
        size_t o = (size_t)tfcu_offset_n(out, i, small);
        T *po = (T *)out.data;
        po[o] = tfcu_from_f<T>(accumulate ? tfcu_load(po, o) + r : r);
    }
}

tfc_status tfcu_map(const tfc_map_problem *p) {
    const char *fn = "map";
    tfcu_ctx *c;
    if (p->op < 0 || p->op >= TFC_MAP_COUNT_)
        return tfcu_err(TFC_ERR_INVALID_ARG, "%s: unknown map %d", fn, (int)p->op);
    const tfc_sview &out = *p->out;
    int64_t n = tfcu_view_numel(out);
    if (!n) return TFC_OK;
    const tfc_sview none = {};
    TFCU_TRY(tfcu_ctx_get(p->device, fn, &c));
    return tfcu_dispatch_float(fn, out.dtype, [&](auto t) {
        typedef decltype(t) T;
        map_kernel<T><<<tfcu_blocks(c, (size_t)n, 256), 256, 0, c->stream>>>(
            p->op, tfcu_coalesce(out), p->a ? tfcu_coalesce(*p->a) : none, p->b ? tfcu_coalesce(*p->b) : none,
            p->c ? tfcu_coalesce(*p->c) : none, p->a != NULL, p->b != NULL, p->c != NULL, (float)p->p,
            p->accumulate != 0, n);
        return TFCU_LAUNCHED(fn, "map_kernel");
    });
}
