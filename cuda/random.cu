/*
 * Counter-based random numbers on the GPU, the same streams as
 * lib/core/rng.h (the CPU side): Philox 4x32-10 keyed by seed, block b of
 * stream (seed, offset) is philox(counter = offset + b); element i uses
 * word i % 4 of block i / 4. Uniforms take the top 24 bits of a word;
 * normals use Box-Muller in double on the word pair (2*(i/2)%4, +1) of the
 * block, cosine for even i, sine for odd: exactly tfc_rng_normal. Each
 * thread computes one Philox block and writes its four elements.
 */
#include "common.cuh"
#include "entries.h"

/* Mirror of tfc_philox4x32_10 in lib/core/rng.h (tests compare the two). */
__device__ __forceinline__ void philox4x32_10(uint64_t seed, uint64_t counter, uint32_t out[4]) {
    uint32_t c0 = (uint32_t)counter, c1 = (uint32_t)(counter >> 32), c2 = 0, c3 = 0;
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
#pragma unroll
    for (int r = 0; r < 10; r++) {
        uint32_t hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
        uint32_t hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
        uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
        c0 = n0, c1 = n1, c2 = n2, c3 = n3;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

__device__ __forceinline__ float unit_f32(uint32_t x) { return (float)(x >> 8) * (1.0f / 16777216.0f); }

enum { KIND_UNIFORM, KIND_NORMAL };

template <class T>
__global__ void random_kernel(int kind, T *x, size_t n, uint64_t seed, uint64_t offset, double a, double b) {
    size_t blocks = (n + 3) / 4;
    for (size_t blk = blockIdx.x * (size_t)blockDim.x + threadIdx.x; blk < blocks;
         blk += (size_t)gridDim.x * blockDim.x) {
        uint32_t w[4];
        philox4x32_10(seed, offset + blk, w);
        double val[4];
        if (kind == KIND_UNIFORM) {
#pragma unroll
            for (int k = 0; k < 4; k++) val[k] = a + (b - a) * (double)unit_f32(w[k]);
        } else {
#pragma unroll
            for (int k = 0; k < 4; k += 2) {
                double u1 = 1.0 - (double)unit_f32(w[k]), u2 = (double)unit_f32(w[k + 1]);
                double r = sqrt(-2.0 * log(u1)), th = 6.283185307179586 * u2;
                val[k] = a + b * (r * cos(th));
                val[k + 1] = a + b * (r * sin(th));
            }
        }
#pragma unroll
        for (int k = 0; k < 4; k++)
            if (4 * blk + k < n) x[4 * blk + k] = tfcu_from_f<T>((float)val[k]);
    }
}

template <class T>
__global__ void dropout_kernel(const T *x, T *out, size_t n, float p, float scale, uint64_t seed, uint64_t offset) {
    size_t blocks = (n + 3) / 4;
    for (size_t blk = blockIdx.x * (size_t)blockDim.x + threadIdx.x; blk < blocks;
         blk += (size_t)gridDim.x * blockDim.x) {
        uint32_t w[4];
        philox4x32_10(seed, offset + blk, w);
#pragma unroll
        for (int k = 0; k < 4; k++) {
            size_t i = 4 * blk + k;
            if (i < n) out[i] = tfcu_from_f<T>(unit_f32(w[k]) >= p ? tfcu_load(x, i) * scale : 0.0f);
        }
    }
}

/* The table's random entry: dst = a + b·u (uniform: [a, a + b)) or a + b·z (normal), contiguous views only. */
tfc_status tfcu_random(const tfc_random_problem *p) {
    const char *fn = "tfcu_random";
    if (!tfc_sview_is_contiguous(&p->dst))
        return tfcu_err(TFC_ERR_UNSUPPORTED, "%s: a random fill of a non-contiguous view", fn);
    const size_t n = (size_t)tfc_sview_numel(&p->dst);
    const int kind = p->kind == TFC_RANDOM_NORMAL ? KIND_NORMAL : KIND_UNIFORM;
    /* the kernel takes (lo, hi) for uniform, (mean, std) for normal */
    const double a = p->a, b = kind == KIND_UNIFORM ? p->a + p->b : p->b;
    const uint64_t seed = p->seed, offset = p->offset;
    void *x = p->dst.data;
    tfcu_ctx *c;
    if (!n) return TFC_OK;
    TFCU_TRY(tfcu_ctx_get(p->device, fn, &c));
    return tfcu_dispatch_float(fn, p->dst.dtype, [&](auto t) {
        typedef decltype(t) T;
        random_kernel<T><<<tfcu_blocks(c, (n + 3) / 4, 256), 256, 0, c->stream>>>(kind, (T *)x, n, seed, offset, a, b);
        return TFCU_LAUNCHED(fn, "random_kernel");
    });
}

tfc_status tfcu_dropout(const tfc_dropout_problem *pr) {
    const char *fn = "tfcu_dropout";
    const size_t n = (size_t)pr->n;
    const float p = (float)pr->p;
    const void *x = pr->x;
    void *out = pr->out;
    const uint64_t seed = pr->seed, offset = pr->offset;
    tfcu_ctx *c;
    if (!(p >= 0.0f && p <= 1.0f)) return tfcu_err(TFC_ERR_INVALID_ARG, "%s: p is %g, not in [0, 1]", fn, (double)p);
    if (!n) return TFC_OK;
    TFCU_TRY(tfcu_ctx_get(pr->device, fn, &c));
    float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
    return tfcu_dispatch_float(fn, pr->dtype, [&](auto t) {
        typedef decltype(t) T;
        dropout_kernel<T><<<tfcu_blocks(c, (n + 3) / 4, 256), 256, 0, c->stream>>>((const T *)x, (T *)out, n, p, scale,
                                                                                   seed, offset);
        return TFCU_LAUNCHED(fn, "dropout_kernel");
    });
}
