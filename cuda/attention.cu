/*
 * Scaled dot-product attention, forward and backward, FlashAttention-2
 * style: K/V (or Q/dO) tiles are staged in shared memory, the softmax is
 * computed online (running max m and running sum l per query row, the
 * output rescaled when m grows), and only the log-sum-exp per row is
 * saved, never the [T, S] score matrix.
 *
 * Shapes (contiguous): q [B,H,T,D], k [B,Hkv,S,D], v [B,Hkv,S,Dv],
 * out [B,H,T,Dv], lse [B,H,T] f32; query head bh = b·H + h reads kv head
 * bh / G = b·Hkv + h / G (G = H / Hkv, grouped-query attention; K and V
 * are never repeated).
 *   s_ij = scale q_i.k_j, visible iff !causal or j <= i + (S - T), and
 *          with a window W > 0 also j > i + (S - T) - W (fa_visible,
 *          attention_tiles.h)
 *   lse_i = log sum_{visible j} exp(s_ij),  P_ij = exp(s_ij - lse_i)
 *   out_i = sum_j P_ij v_j            (rows seeing no key: out 0, lse -inf)
 * Backward, with Delta_i = dout_i . out_i:
 *   dP_ij = dout_i . v_j,  dS_ij = P_ij (dP_ij - Delta_i)
 *   dq_i = scale sum_j dS_ij k_j,  dk_j = scale sum_i dS_ij q_i,
 *   dv_j = sum_i P_ij dout_i
 * The backward recomputes P from lse in two kernels, one parallel over
 * query rows (dq) and one over key rows of a kv head (dk, dv: the thread
 * loops over the kv head's G query heads in order, summing dk_j, dv_j over
 * the group), so every gradient is written by exactly one thread:
 * deterministic, no atomics.
 *
 * This is the portable f32-accumulate version: one thread per query (or
 * key) row, scalar FMAs against tiles broadcast from shared memory; it is
 * correct for every T, S, D, Dv <= 128 but does not use tensor cores.
 * DM (64 or 128) is the compile-time bound on D and Dv.
 *
 * The backend's attention entries (tfc_attn_problem) are at the end: they
 * compact strided operands into contiguous scratch copies, then run the
 * tensor-core kernels of attention_flash.cu where those apply and these
 * otherwise.
 */
#include <stdlib.h>
#include <string.h>

#include "attention_tiles.h"
#include "common.cuh"
#include "entries.h"

#define ROWS 64 /* query rows (forward, dq) or key rows (dk/dv) per block: one per thread */

/* Stage rows [r0, r0+R) of x [n, d] into tile [R][DM] as f32, zero-padded. */
template <class T, int R, int DM>
__device__ __forceinline__ void load_tile(float *tile, const T *x, int r0, int n, int d) {
    for (int idx = threadIdx.x; idx < R * DM; idx += blockDim.x) {
        int r = idx / DM, c = idx % DM;
        tile[idx] = (r0 + r < n && c < d) ? tfcu_load(x, (size_t)(r0 + r) * d + c) : 0.0f;
    }
}

template <class T, int DM, int BK>
__global__ void __launch_bounds__(ROWS)
    attn_fwd_kernel(const T *q, const T *k, const T *v, T *out, float *lse, int T_, int S, int G, int D, int Dv,
                    float scale, bool causal, int window) {
    __shared__ float ks[BK * DM], vs[BK * DM];
    size_t bh = blockIdx.y, bhk = bh / G;
    int q0 = blockIdx.x * ROWS, i = q0 + threadIdx.x;
    bool row_ok = i < T_;
    const T *kb = k + bhk * S * D, *vb = v + bhk * S * Dv;
    /* Scores in log2 units so the exponentials are exp2. */
    const float sl2 = scale * 1.4426950408889634f;
    float qr[DM], o[DM];
#pragma unroll
    for (int d = 0; d < DM; d++) {
        qr[d] = (row_ok && d < D) ? tfcu_load(q, (bh * T_ + i) * D + d) * sl2 : 0.0f;
        o[d] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    int kend = fa_key_end(q0, ROWS, T_, S, causal);
    for (int j0 = fa_key_start(q0, T_, S, causal, window); j0 < kend; j0 += BK) {
        load_tile<T, BK, DM>(ks, kb, j0, S, D);
        load_tile<T, BK, DM>(vs, vb, j0, S, Dv);
        __syncthreads();
        /* Per-key online softmax: rescale o only when the running max grows. */
#pragma unroll 1
        for (int jj = 0; jj < BK; jj++) {
            int j = j0 + jj;
            if (!row_ok || !fa_visible(i, j, T_, S, causal, window)) continue;
            float s = 0.0f;
#pragma unroll
            for (int d = 0; d < DM; d++) s += qr[d] * ks[jj * DM + d];
            if (s > m) {
                float corr = exp2f(m - s); /* 0 for the first visible key */
                l *= corr;
#pragma unroll
                for (int d = 0; d < DM; d++) o[d] *= corr;
                m = s;
            }
            float p = exp2f(s - m);
            l += p;
#pragma unroll
            for (int d = 0; d < DM; d++) o[d] += p * vs[jj * DM + d];
        }
        __syncthreads();
    }
    if (!row_ok) return;
    float inv = l > 0.0f ? 1.0f / l : 0.0f;
#pragma unroll
    for (int d = 0; d < DM; d++)
        if (d < Dv) out[(bh * T_ + i) * Dv + d] = tfcu_from_f<T>(o[d] * inv);
    lse[bh * T_ + i] = l > 0.0f ? (m + log2f(l)) * 0.6931471805599453f : -INFINITY;
}

/* delta[r] = dout_r . out_r over Dv, one warp per row. */
template <class T> __global__ void attn_delta_kernel(const T *dout, const T *out, float *delta, size_t rows, int Dv) {
    int lane = threadIdx.x & 31;
    size_t warps = (size_t)gridDim.x * (blockDim.x >> 5);
    for (size_t r = blockIdx.x * (size_t)(blockDim.x >> 5) + (threadIdx.x >> 5); r < rows; r += warps) {
        float s = 0.0f;
        for (int d = lane; d < Dv; d += 32) s += tfcu_load(dout, r * Dv + d) * tfcu_load(out, r * Dv + d);
        s = tfcu_warp_sum(s);
        if (lane == 0) delta[r] = s;
    }
}

template <class T, int DM, int BK>
__global__ void __launch_bounds__(ROWS)
    attn_bwd_dq_kernel(const T *dout, const T *q, const T *k, const T *v, const float *lse, const float *delta, T *dq,
                       int T_, int S, int G, int D, int Dv, float scale, bool causal, int window, bool acc) {
    __shared__ float ks[BK * DM], vs[BK * DM];
    size_t bh = blockIdx.y, bhk = bh / G;
    int q0 = blockIdx.x * ROWS, i = q0 + threadIdx.x;
    bool row_ok = i < T_;
    const T *kb = k + bhk * S * D, *vb = v + bhk * S * Dv;
    float qr[DM], dor[DM], dqa[DM];
#pragma unroll
    for (int d = 0; d < DM; d++) {
        qr[d] = (row_ok && d < D) ? tfcu_load(q, (bh * T_ + i) * D + d) : 0.0f;
        dor[d] = (row_ok && d < Dv) ? tfcu_load(dout, (bh * T_ + i) * Dv + d) : 0.0f;
        dqa[d] = 0.0f;
    }
    float L = row_ok ? lse[bh * T_ + i] : -INFINITY, Di = row_ok ? delta[bh * T_ + i] : 0.0f;
    bool live = row_ok && L != -INFINITY;
    int kend = fa_key_end(q0, ROWS, T_, S, causal);
    for (int j0 = fa_key_start(q0, T_, S, causal, window); j0 < kend; j0 += BK) {
        load_tile<T, BK, DM>(ks, kb, j0, S, D);
        load_tile<T, BK, DM>(vs, vb, j0, S, Dv);
        __syncthreads();
#pragma unroll 1
        for (int jj = 0; jj < BK; jj++) {
            int j = j0 + jj;
            if (!live || !fa_visible(i, j, T_, S, causal, window)) continue;
            float s = 0.0f, dp = 0.0f;
#pragma unroll
            for (int d = 0; d < DM; d++) s += qr[d] * ks[jj * DM + d];
#pragma unroll
            for (int d = 0; d < DM; d++) dp += dor[d] * vs[jj * DM + d];
            float p = expf(scale * s - L), ds = p * (dp - Di);
#pragma unroll
            for (int d = 0; d < DM; d++) dqa[d] += ds * ks[jj * DM + d];
        }
        __syncthreads();
    }
    if (!row_ok) return;
#pragma unroll
    for (int d = 0; d < DM; d++)
        if (d < D) tfcu_store_grad(dq, (bh * T_ + i) * D + d, scale * dqa[d], acc);
}

/* Key rows of kv head blockIdx.y; each thread sums its key's dk, dv over the G query heads of the kv head, in order. */
template <class T, int DM, int BQ>
__global__ void __launch_bounds__(ROWS)
    attn_bwd_dkdv_kernel(const T *dout, const T *q, const T *k, const T *v, const float *lse, const float *delta, T *dk,
                         T *dv, int T_, int S, int G, int D, int Dv, float scale, bool causal, int window, bool acc) {
    __shared__ float qs[BQ * DM], dos[BQ * DM], Ls[BQ], Ds[BQ];
    size_t bhk = blockIdx.y;
    int k0 = blockIdx.x * ROWS, j = k0 + threadIdx.x;
    bool key_ok = j < S;
    float kr[DM], vr[DM], dka[DM], dva[DM];
#pragma unroll
    for (int d = 0; d < DM; d++) {
        kr[d] = (key_ok && d < D) ? tfcu_load(k, (bhk * S + j) * D + d) : 0.0f;
        vr[d] = (key_ok && d < Dv) ? tfcu_load(v, (bhk * S + j) * Dv + d) : 0.0f;
        dka[d] = dva[d] = 0.0f;
    }
    /* The queries that see any key of the block: [qstart, qend) (attention_tiles.h). */
    int qstart = fa_query_start(k0, T_, S, causal), qend = fa_query_end(k0, ROWS, T_, S, causal, window);
    for (int g = 0; g < G; g++) {
        size_t bh = bhk * G + g; /* the query head */
        const T *qb = q + bh * T_ * D, *dob = dout + bh * T_ * Dv;
        for (int i0 = qstart; i0 < qend; i0 += BQ) {
            load_tile<T, BQ, DM>(qs, qb, i0, T_, D);
            load_tile<T, BQ, DM>(dos, dob, i0, T_, Dv);
            for (int r = threadIdx.x; r < BQ; r += blockDim.x) {
                bool in = i0 + r < T_;
                Ls[r] = in ? lse[bh * T_ + i0 + r] : -INFINITY;
                Ds[r] = in ? delta[bh * T_ + i0 + r] : 0.0f;
            }
            __syncthreads();
#pragma unroll 1
            for (int ii = 0; ii < BQ; ii++) {
                int i = i0 + ii;
                if (!key_ok || Ls[ii] == -INFINITY || !fa_visible(i, j, T_, S, causal, window)) continue;
                float s = 0.0f, dp = 0.0f;
#pragma unroll
                for (int d = 0; d < DM; d++) s += qs[ii * DM + d] * kr[d];
#pragma unroll
                for (int d = 0; d < DM; d++) dp += dos[ii * DM + d] * vr[d];
                float p = expf(scale * s - Ls[ii]), ds = p * (dp - Ds[ii]);
#pragma unroll
                for (int d = 0; d < DM; d++) {
                    dva[d] += p * dos[ii * DM + d];
                    dka[d] += ds * qs[ii * DM + d];
                }
            }
            __syncthreads();
        }
    }
    if (!key_ok) return;
#pragma unroll
    for (int d = 0; d < DM; d++) {
        if (dk && d < D) tfcu_store_grad(dk, (bhk * S + j) * D + d, scale * dka[d], acc);
        if (dv && d < Dv) tfcu_store_grad(dv, (bhk * S + j) * Dv + d, dva[d], acc);
    }
}

static tfc_status check_shape(const char *fn, size_t B, size_t H, size_t T, size_t S, size_t D, size_t Dv) {
    if (D == 0 || Dv == 0 || D > 128 || Dv > 128)
        return tfcu_err(TFC_ERR_UNSUPPORTED, "%s: head dims D %zu, Dv %zu must be in 1..128 on CUDA", fn, D, Dv);
    if (B * H > 65535 || T > (size_t)INT32_MAX / 2 || S > (size_t)INT32_MAX / 2)
        return tfcu_err(TFC_ERR_UNSUPPORTED, "%s: B*H %zu must be <= 65535 and T %zu, S %zu < 2^30 on CUDA", fn, B * H,
                        T, S);
    return TFC_OK;
}

/* The forward on contiguous operands (lse [B,H,T] f32 always written); k, v have Hkv heads. */
static tfc_status simple_forward(int32_t device, int32_t dtype, const void *q, const void *k, const void *v, void *out,
                                 float *lse, size_t B, size_t H, size_t Hkv, size_t T, size_t S, size_t D, size_t Dv,
                                 float scale, int32_t causal, int64_t window) {
    const char *fn = "tfcu_attention_forward";
    tfcu_ctx *c;
    TFCU_TRY(check_shape(fn, B, H, T, S, D, Dv));
    const int G = Hkv ? (int)(H / Hkv) : 1, W = (int)window; /* the door keeps window < S < 2^30 */
    if (!B || !H || !T) return TFC_OK;
    TFCU_TRY(tfcu_ctx_get(device, fn, &c));
    dim3 grid((unsigned)((T + ROWS - 1) / ROWS), (unsigned)(B * H));
    return tfcu_dispatch_float(fn, dtype, [&](auto t) {
        typedef decltype(t) TT;
        if (D <= 64 && Dv <= 64)
            attn_fwd_kernel<TT, 64, 32><<<grid, ROWS, 0, c->stream>>>((const TT *)q, (const TT *)k, (const TT *)v,
                                                                      (TT *)out, lse, (int)T, (int)S, G, (int)D,
                                                                      (int)Dv, scale, causal != 0, W);
        else
            attn_fwd_kernel<TT, 128, 16><<<grid, ROWS, 0, c->stream>>>((const TT *)q, (const TT *)k, (const TT *)v,
                                                                       (TT *)out, lse, (int)T, (int)S, G, (int)D,
                                                                       (int)Dv, scale, causal != 0, W);
        return TFCU_LAUNCHED(fn, "attn_fwd_kernel");
    });
}

/* The backward on contiguous operands; dq, dk, dv each or NULL; k, v, dk, dv have Hkv heads. */
static tfc_status simple_backward(int32_t device, int32_t dtype, const void *dout, const void *q, const void *k,
                                  const void *v, const void *out, const float *lse, void *dq, void *dk, void *dv,
                                  size_t B, size_t H, size_t Hkv, size_t T, size_t S, size_t D, size_t Dv, float scale,
                                  int32_t causal, int64_t window, uint32_t flags) {
    const char *fn = "tfcu_attention_backward";
    tfcu_ctx *c;
    TFCU_TRY(check_shape(fn, B, H, T, S, D, Dv));
    if (!B || !H || !Hkv) return TFC_OK;
    const int G = (int)(H / Hkv), W = (int)window; /* the door keeps window < S < 2^30 */
    bool acc = (flags & TFC_GRAD_ACCUMULATE) != 0;
    if (!T || !S) {
        /* No (query, key) pair: the gradients are zero. */
        TFCU_TRY(tfcu_ctx_get(device, fn, &c));
        if (acc) return TFC_OK;
        size_t es = dtype == TFC_DTYPE_F32 ? 4 : 2;
        if (dq && T) TFCU_TRY(tfcu_memset0(device, dq, B * H * T * D * es));
        if (dk && S) TFCU_TRY(tfcu_memset0(device, dk, B * Hkv * S * D * es));
        if (dv && S) TFCU_TRY(tfcu_memset0(device, dv, B * Hkv * S * Dv * es));
        return TFC_OK;
    }
    TFCU_TRY(tfcu_ctx_get(device, fn, &c));
    return tfcu_dispatch_float(fn, dtype, [&](auto t) -> tfc_status {
        typedef decltype(t) TT;
        if (!dq && !dk && !dv) return TFC_OK;
        size_t rows = B * H * T;
        float *delta;
        TFCU_TRY(tfcu_scratch(c, fn, rows * sizeof(float), (void **)&delta));
        size_t db = (rows + 7) / 8;
        attn_delta_kernel<TT><<<(unsigned)(db < 65535u * 16 ? db : 65535u * 16), 256, 0, c->stream>>>(
            (const TT *)dout, (const TT *)out, delta, rows, (int)Dv);
        tfc_status s = TFCU_LAUNCHED(fn, "attn_delta_kernel");
        bool small = D <= 64 && Dv <= 64;
        if (s == TFC_OK && dq) {
            dim3 grid((unsigned)((T + ROWS - 1) / ROWS), (unsigned)(B * H));
            if (small)
                attn_bwd_dq_kernel<TT, 64, 32><<<grid, ROWS, 0, c->stream>>>(
                    (const TT *)dout, (const TT *)q, (const TT *)k, (const TT *)v, lse, delta, (TT *)dq, (int)T, (int)S,
                    G, (int)D, (int)Dv, scale, causal != 0, W, acc);
            else
                attn_bwd_dq_kernel<TT, 128, 16><<<grid, ROWS, 0, c->stream>>>(
                    (const TT *)dout, (const TT *)q, (const TT *)k, (const TT *)v, lse, delta, (TT *)dq, (int)T, (int)S,
                    G, (int)D, (int)Dv, scale, causal != 0, W, acc);
            s = TFCU_LAUNCHED(fn, "attn_bwd_dq_kernel");
        }
        if (s == TFC_OK && (dk || dv)) {
            dim3 grid((unsigned)((S + ROWS - 1) / ROWS), (unsigned)(B * Hkv)); /* a block row per kv head */
            if (small)
                attn_bwd_dkdv_kernel<TT, 64, 32><<<grid, ROWS, 0, c->stream>>>(
                    (const TT *)dout, (const TT *)q, (const TT *)k, (const TT *)v, lse, delta, (TT *)dk, (TT *)dv,
                    (int)T, (int)S, G, (int)D, (int)Dv, scale, causal != 0, W, acc);
            else
                attn_bwd_dkdv_kernel<TT, 128, 16><<<grid, ROWS, 0, c->stream>>>(
                    (const TT *)dout, (const TT *)q, (const TT *)k, (const TT *)v, lse, delta, (TT *)dk, (TT *)dv,
                    (int)T, (int)S, G, (int)D, (int)Dv, scale, causal != 0, W, acc);
            s = TFCU_LAUNCHED(fn, "attn_bwd_dkdv_kernel");
        }
        tfcu_scratch_free(c, delta);
        return s;
    });
}

/* ---- the backend's entries ---- */

/*
 * An attention operand as the kernels read it: contiguous [B, heads, rows, cols] (heads: H for q, out, dout;
 * Hkv for k, v), compacted into scratch if not.
 */
static tfc_status attn_contiguous(tfcu_scratch_set &s, const char *fn, const tfc_attn_problem *p,
                                  const tfc_attn_operand &o, int64_t heads, int64_t rows, int64_t cols,
                                  const void **out) {
    *out = o.data;
    if (o.sr == cols && o.sh == rows * cols && o.sb == heads * rows * cols) return TFC_OK;
    void *buf;
    TFCU_TRY(s.get(fn, (size_t)(p->B * heads * rows * cols) * tfcu_float_size(p->dtype), &buf));
    tfc_copy_problem c = {};
    c.device = p->device;
    c.dst = tfcu_flat_view(buf, p->dtype, 0);
    c.dst.ndim = 4;
    const int64_t shape[4] = {p->B, heads, rows, cols}, src_st[4] = {o.sb, o.sh, o.sr, 1};
    int64_t st = 1;
    for (int d = 3; d >= 0; d--) c.dst.shape[d] = shape[d], c.dst.strides[d] = st, st *= shape[d];
    c.src = c.dst;
    c.src.data = (char *)o.data;
    for (int d = 0; d < 4; d++) c.src.strides[d] = src_st[d];
    TFCU_TRY(tfcu_copy(&c));
    *out = buf;
    return TFC_OK;
}

/*
 * Which attention kernels run (attention section, see docs/CUDA.md):
 * TFC_CUDA_ATTENTION=flash (the default) takes the tensor-core kernels of
 * attention_flash.cu where they apply (bf16, D = Dv = 64 or 128, aligned
 * operands) and this file's otherwise; =simple always takes this file's.
 * Read on every call so one process (the device check) can compare both
 * paths against the CPU.
 */
static tfc_status attn_use_flash(const char *fn, const tfc_attn_problem *p, const void *const *ptrs, int nptrs,
                                 bool *use) {
    const char *e = getenv("TFC_CUDA_ATTENTION");
    *use = false;
    if (e && *e && strcmp(e, "flash") != 0) {
        if (strcmp(e, "simple") == 0) return TFC_OK;
        return tfcu_err(TFC_ERR_INVALID_ARG, "%s: TFC_CUDA_ATTENTION is '%s', want 'flash' or 'simple'", fn, e);
    }
    *use = tfcu_flash_attention_applies(p->dtype, (size_t)p->D, (size_t)p->Dv, (size_t)p->Tq, (size_t)p->S, ptrs,
                                        nptrs) != 0;
    return TFC_OK;
}

/* out_w and lse_w (scratch when NULL: the kernels always write it). */
tfc_status tfcu_attention_forward(const tfc_attn_problem *p) {
    const char *fn = "tfcu_attention_forward";
    if (p->B * p->H * p->Tq == 0) return TFC_OK;
    tfcu_scratch_set s;
    TFCU_TRY(tfcu_ctx_get(p->device, fn, &s.c));
    const void *q, *k, *v;
    void *lse = p->lse_w;
    TFCU_TRY(attn_contiguous(s, fn, p, p->q, p->H, p->Tq, p->D, &q));
    TFCU_TRY(attn_contiguous(s, fn, p, p->k, p->Hkv, p->S, p->D, &k));
    TFCU_TRY(attn_contiguous(s, fn, p, p->v, p->Hkv, p->S, p->Dv, &v));
    if (!lse) TFCU_TRY(s.get(fn, (size_t)(p->B * p->H * p->Tq) * 4, &lse));
    const void *ptrs[4] = {q, k, v, p->out_w};
    bool flash;
    TFCU_TRY(attn_use_flash(fn, p, ptrs, 4, &flash));
    if (flash)
        return tfcu_flash_attention_forward(p->device, q, k, v, p->out_w, (float *)lse, (size_t)p->B, (size_t)p->H,
                                            (size_t)p->Hkv, (size_t)p->Tq, (size_t)p->S, (size_t)p->D, (float)p->scale,
                                            p->causal, p->window);
    return simple_forward(p->device, p->dtype, q, k, v, p->out_w, (float *)lse, (size_t)p->B, (size_t)p->H,
                          (size_t)p->Hkv, (size_t)p->Tq, (size_t)p->S, (size_t)p->D, (size_t)p->Dv, (float)p->scale,
                          p->causal, p->window);
}

/* dq, dk, dv from dout, q, k, v, out and the forward's lse. */
tfc_status tfcu_attention_backward(const tfc_attn_problem *p) {
    const char *fn = "tfcu_attention_backward";
    if (p->B * p->H * (p->Tq + p->S) == 0) return TFC_OK;
    tfcu_scratch_set s;
    TFCU_TRY(tfcu_ctx_get(p->device, fn, &s.c));
    const void *q, *k, *v, *out, *dout;
    TFCU_TRY(attn_contiguous(s, fn, p, p->q, p->H, p->Tq, p->D, &q));
    TFCU_TRY(attn_contiguous(s, fn, p, p->k, p->Hkv, p->S, p->D, &k));
    TFCU_TRY(attn_contiguous(s, fn, p, p->v, p->Hkv, p->S, p->Dv, &v));
    TFCU_TRY(attn_contiguous(s, fn, p, p->out, p->H, p->Tq, p->Dv, &out));
    TFCU_TRY(attn_contiguous(s, fn, p, p->dout, p->H, p->Tq, p->Dv, &dout));
    const void *ptrs[8] = {q, k, v, out, dout, p->dq, p->dk, p->dv};
    bool flash;
    TFCU_TRY(attn_use_flash(fn, p, ptrs, 8, &flash));
    if (flash)
        return tfcu_flash_attention_backward(p->device, dout, q, k, v, out, (const float *)p->lse, p->dq, p->dk, p->dv,
                                             (size_t)p->B, (size_t)p->H, (size_t)p->Hkv, (size_t)p->Tq, (size_t)p->S,
                                             (size_t)p->D, (float)p->scale, p->causal, p->window,
                                             p->accumulate ? TFC_GRAD_ACCUMULATE : 0);
    return simple_backward(p->device, p->dtype, dout, q, k, v, out, (const float *)p->lse, p->dq, p->dk, p->dv,
                           (size_t)p->B, (size_t)p->H, (size_t)p->Hkv, (size_t)p->Tq, (size_t)p->S, (size_t)p->D,
                           (size_t)p->Dv, (float)p->scale, p->causal, p->window,
                           p->accumulate ? TFC_GRAD_ACCUMULATE : 0);
}
