/*
 * Rotary position embedding, HF's rotate-half form (tfc_rope_problem in
 * backend.h), x [B,H,T,D] strided (row strides sb, sh, sr; stride 1 along
 * D), y / dx contiguous [B,H,T,D], h = D/2; for row (b, head, t) with
 * p = pos[b·pos_sb + t] and a_i = p · inv_freq[i] in f32, i < h:
 *   forward:  y[i]  = x[i] cos a_i − x[i+h] sin a_i,    y[i+h]  = x[i+h] cos a_i + x[i] sin a_i
 *   backward: dx[i] = dy[i] cos a_i + dy[i+h] sin a_i,  dx[i+h] = dy[i+h] cos a_i − dy[i] sin a_i
 * f32 or bf16 storage, f32 arithmetic, inv_freq f32; the angle is the f32
 * product as transformers computes it, and sincosf is the accurate one
 * (the module is not built with fast math). A block is rows of tokens ×
 * lanes over i: each thread takes one (token, i), computes its cos/sin
 * once and walks the H heads, reading x[i] and x[i+h] (consecutive lanes,
 * consecutive addresses). A negative position is an error found by a check
 * kernel before the rotation runs, costing one stream sync unless the door
 * knew the positions (pos_checked).
 */
#include "common.cuh"
#include "entries.h"
#include "strided.cuh"

template <class T, bool INVERSE>
__global__ void rope_kernel(const T *x, int64_t sb, int64_t sh, int64_t sr, T *y, const int64_t *pos, int64_t pos_sb,
                            const float *inv_freq, int64_t B, int64_t H, int64_t T_, int64_t D, bool acc) {
    const int64_t half = D / 2, BT = B * T_;
    for (int64_t bt = blockIdx.x * (int64_t)blockDim.y + threadIdx.y; bt < BT; bt += (int64_t)gridDim.x * blockDim.y) {
        const int64_t b = bt / T_, t = bt - b * T_;
        const float p = (float)pos[b * pos_sb + t];
        for (int64_t i = threadIdx.x; i < half; i += blockDim.x) {
            float s, c;
            sincosf(p * inv_freq[i], &s, &c);
            if (INVERSE) s = -s;
            for (int64_t h = 0; h < H; h++) {
                const T *xr = x + b * sb + h * sh + t * sr;
                const size_t o = (size_t)(((b * H + h) * T_ + t) * D);
                const float x1 = tfcu_load(xr, (size_t)i), x2 = tfcu_load(xr, (size_t)(i + half));
                tfcu_store_grad(y, o + (size_t)i, x1 * c - x2 * s, acc);
                tfcu_store_grad(y, o + (size_t)(i + half), x2 * c + x1 * s, acc);
            }
        }
    }
}

/* bad = the smallest flat index of a negative position (stays all ones when none is). */
__global__ void rope_check_kernel(const int64_t *pos, int64_t n, unsigned long long *bad) {
    TFCU_GRID_STRIDE(i, n) if (pos[i] < 0) atomicMin(bad, (unsigned long long)i);
}

/* Every position >= 0, or TFC_ERR_INVALID_ARG naming the first negative one; waits for the stream. */
static tfc_status check_positions(tfcu_ctx *c, const char *fn, const tfc_rope_problem *p) {
    const int64_t n = p->pos_sb ? p->B * p->Tn : p->Tn;
    unsigned long long *bad, row = ~0ull;
    TFCU_TRY(tfcu_scratch(c, fn, 8, (void **)&bad));
    tfc_status s = tfcu_cuda(cudaMemsetAsync(bad, 0xff, 8, c->stream), fn, "cudaMemsetAsync");
    if (s == TFC_OK) {
        rope_check_kernel<<<tfcu_blocks(c, (size_t)n, 256), 256, 0, c->stream>>>(p->pos, n, bad);
        s = TFCU_LAUNCHED(fn, "rope_check_kernel");
    }
    if (s == TFC_OK)
        s = tfcu_cuda(cudaMemcpyAsync(&row, bad, 8, cudaMemcpyDeviceToHost, c->stream), fn, "cudaMemcpyAsync");
    if (s == TFC_OK) s = tfcu_cuda(cudaStreamSynchronize(c->stream), fn, "cudaStreamSynchronize");
    tfcu_scratch_free(c, bad);
    if (s != TFC_OK || row == ~0ull) return s;
    long long v = 0;
    TFCU_TRY(tfcu_cuda(cudaMemcpy(&v, p->pos + row, sizeof v, cudaMemcpyDeviceToHost), fn, "cudaMemcpy"));
    return tfcu_err(TFC_ERR_INVALID_ARG, "positions holds %lld at flat index %llu; positions must be >= 0", v, row);
}

static tfc_status rope(const char *fn, const tfc_rope_problem *p, bool inverse) {
    tfcu_ctx *c;
    if (!p->B || !p->Tn) return TFC_OK;
    TFCU_TRY(tfcu_ctx_get(p->device, fn, &c));
    if (!p->pos_checked) TFCU_TRY(check_positions(c, fn, p));
    if (!p->H || !p->D) return TFC_OK;
    const tfc_attn_operand in = inverse ? p->dy : p->x;
    void *out = inverse ? p->dx : p->y;
    const bool acc = inverse && p->accumulate;
    const int64_t half = p->D / 2, bt = p->B * p->Tn;
    const unsigned lanes = half <= 32 ? 32u : half <= 64 ? 64u : 128u, rows = 256u / lanes;
    const dim3 threads(lanes, rows);
    size_t blocks = ((size_t)bt + rows - 1) / rows, cap = (size_t)c->sm_count * 32;
    if (blocks > cap) blocks = cap;
    return tfcu_dispatch_float(fn, p->dtype, [&](auto t) {
        typedef decltype(t) T;
        if (inverse)
            rope_kernel<T, true><<<(unsigned)blocks, threads, 0, c->stream>>>(
                (const T *)in.data, in.sb, in.sh, in.sr, (T *)out, p->pos, p->pos_sb, (const float *)p->inv_freq, p->B,
                p->H, p->Tn, p->D, acc);
        else
            rope_kernel<T, false><<<(unsigned)blocks, threads, 0, c->stream>>>(
                (const T *)in.data, in.sb, in.sh, in.sr, (T *)out, p->pos, p->pos_sb, (const float *)p->inv_freq, p->B,
                p->H, p->Tn, p->D, acc);
        return TFCU_LAUNCHED(fn, "rope_kernel");
    });
}

tfc_status tfcu_rope_forward(const tfc_rope_problem *p) { return rope("rope_forward", p, false); }

tfc_status tfcu_rope_backward(const tfc_rope_problem *p) { return rope("rope_backward", p, true); }
