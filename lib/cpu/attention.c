/*
 * Scaled dot-product attention, flash style, for one (batch, head) at a time:
 * q [T, D] of query head h, k [S, D] and v [S, Dv] of its kv head h / G,
 * G = H / Hkv (rows strided, columns contiguous; repeated K/V are never made).
 *
 *   s_ij = scale · q_i · k_j   for visible j, −∞ otherwise
 *   P_ij = exp(s_ij − lse_i),   lse_i = log Σ_j exp(s_ij)
 *   out_i = Σ_j P_ij v_j
 *
 * Visible keys are one range per query, [att_key_lo(i), att_visible(i)):
 * everything, or with causal j <= i + S − T (bottom-right aligned), and
 * with a window W also j > i + S − T − W — Hugging Face's sliding window
 * (kv_idx > q_idx − W with q_idx = i + S − T, the query's position), so a
 * query sees at most W keys, itself included. Tiles outside every row's
 * range are skipped.
 *
 * Forward: keys in tiles of ATT_BK; each query row keeps a running max m,
 * sum l and unnormalised output o, and for each tile
 *   m' = max(m, max_j s_ij),  c = exp(m − m'),  l = c·l + Σ_j exp(s_ij − m'),
 *   o = c·o + Σ_j exp(s_ij − m') v_j
 * so only o (in out itself), m and l live per row: out = o / l, lse = m + log l.
 *
 * Backward, per tile of ATT_BQ queries × ATT_BK keys, recomputing P from lse:
 *   Di = dout_i · out_i,  dP_ij = dout_i · v_j,  dS_ij = P_ij (dP_ij − Di)
 *   dv_j += Σ_i P_ij dout_i,  dk_j += scale Σ_i dS_ij q_i,  dq_i += scale Σ_j dS_ij k_j
 * accumulated straight into the (pre-zeroed) outputs: extra memory is two
 * tiles on the stack. dk/dv of a kv head sum over its G query heads, so one
 * thread owns a whole kv head with its G query heads (heads in order, then
 * key blocks, then query blocks), and nothing races; when there are fewer
 * kv heads than threads, dk/dv run parallel over key blocks (each looping
 * over the G query heads in the same order) and dq over query blocks in a
 * second pass (P recomputed) — the same tile arithmetic in the same order,
 * so the result does not change.
 *
 * With BLAS, each tile's products are small single-threaded GEMMs (see
 * att_forward_block_blas). Without it, scores are dots of a row with a key
 * tile transposed on the stack (head dims up to ATT_DT_MAX), vectorised
 * along the keys, or — larger head dims — dot products 4 keys at a time
 * (one load of the q/dout row feeds 4 FMAs); the row updates take 8 rows
 * at a time (one load/store of the updated row per 8 FMAs) and vectorise
 * along D.
 */
#ifndef TFC_T

#include <limits.h>

#include "cpu/kernels.h"
#include "tfc_config.h"
#if TFC_HAVE_BLAS
#include <cblas.h>
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h> /* used by the AVX2 instance only */
#endif

#define ATT_BQ 32 /* query rows per tile */
#define ATT_BK 64 /* keys per tile */
/* Head dims up to this use transposed key/value tiles on the stack. */
#define ATT_DT_MAX 128

#define TFC_TMPL_FILE "cpu/attention.c"
#include "cpu/kernel_tmpl.h"

tfc_status tfc_cpu_attention_forward(const tfc_attn_problem *p) {
    TFC_DISPATCH(p->dtype, attention_forward, p);
    return TFC_OK;
}

tfc_status tfc_cpu_attention_backward(const tfc_attn_problem *p) {
    TFC_DISPATCH(p->dtype, attention_backward, p);
    return TFC_OK;
}

#else /* TFC_T */

#if T_IS_F32 && defined(__AVX2__) && defined(__FMA__)
/*
 * out[0..3] = a · b0..b3 over n elements — AVX2 instance. As the portable
 * version below, but the four 8-lane sums are folded together with two
 * rounds of hadd instead of four separate horizontal reductions, which
 * cost as much as the dot products themselves at D = 64.
 */
static inline void FN(att_dot4)(int64_t n, const float *a, const float *b0, const float *b1, const float *b2,
                                const float *b3, float *out) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps(), s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
    int64_t e = 0;
    for (; e + 8 <= n; e += 8) {
        const __m256 x = _mm256_loadu_ps(a + e);
        s0 = _mm256_fmadd_ps(x, _mm256_loadu_ps(b0 + e), s0);
        s1 = _mm256_fmadd_ps(x, _mm256_loadu_ps(b1 + e), s1);
        s2 = _mm256_fmadd_ps(x, _mm256_loadu_ps(b2 + e), s2);
        s3 = _mm256_fmadd_ps(x, _mm256_loadu_ps(b3 + e), s3);
    }
    /* hadd(hadd(s0,s1), hadd(s2,s3)) = [Σs0..Σs3 over lanes 0-3 | the same over lanes 4-7] */
    const __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(s0, s1), _mm256_hadd_ps(s2, s3));
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1)));
    for (; e < n; e++) {
        out[0] += a[e] * b0[e];
        out[1] += a[e] * b1[e];
        out[2] += a[e] * b2[e];
        out[3] += a[e] * b3[e];
    }
}
#else
/* out[0..3] = a · b0..b3 over n elements. */
static inline void FN(att_dot4)(int64_t n, const T *a, const T *b0, const T *b1, const T *b2, const T *b3, T *out) {
    T s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    SIMD_SUM(s0, s1, s2, s3)
    for (int64_t e = 0; e < n; e++) {
        s0 += a[e] * b0[e];
        s1 += a[e] * b1[e];
        s2 += a[e] * b2[e];
        s3 += a[e] * b3[e];
    }
    out[0] = s0;
    out[1] = s1;
    out[2] = s2;
    out[3] = s3;
}
#endif

static inline T FN(att_dot)(int64_t n, const T *a, const T *b) {
    T s = 0;
    SIMD_SUM(s)
    for (int64_t e = 0; e < n; e++) s += a[e] * b[e];
    return s;
}

/* out[j] = scale · a · rows[j] for j < m, rows `stride` apart. */
static void FN(att_dots)(int64_t n, T scale, const T *a, const T *rows, int64_t stride, int64_t m, T *out) {
    int64_t j = 0;
    for (; j + 4 <= m; j += 4) {
        const T *r = rows + j * stride;
        FN(att_dot4)(n, a, r, r + stride, r + 2 * stride, r + 3 * stride, out + j);
    }
    for (; j < m; j++) out[j] = FN(att_dot)(n, a, rows + j * stride);
    for (j = 0; j < m; j++) out[j] *= scale;
}

/*
 * The same dots against a key tile stored transposed, kt[e·ATT_BK + j] =
 * key j's element e: the loop runs along keys, so every q element feeds
 * ATT_BK/8 vector FMAs with no horizontal sums. Columns j >= m of kt are
 * zero (att_transpose fills them); out[j] is written for j < m.
 */
static void FN(att_transpose)(int64_t n, const T *rows, int64_t stride, int64_t m, T *restrict kt) {
    for (int64_t e = 0; e < n; e++) {
        T *ke = kt + e * ATT_BK;
        for (int64_t j = 0; j < m; j++) ke[j] = rows[j * stride + e];
        for (int64_t j = m; j < ATT_BK; j++) ke[j] = 0;
    }
}

static void FN(att_dots_t)(int64_t n, T scale, const T *a, const T *restrict kt, int64_t m, T *out) {
    T acc[ATT_BK];
    for (int64_t j = 0; j < ATT_BK; j++) acc[j] = 0;
    for (int64_t e = 0; e < n; e++) {
        const T ae = a[e], *ke = kt + e * ATT_BK;
        for (int64_t j = 0; j < ATT_BK; j++) acc[j] += ae * ke[j];
    }
    for (int64_t j = 0; j < m; j++) out[j] = scale * acc[j];
}

/* y += Σ_{j<m} w[j] · rows[j], rows `stride` apart (w[j] may be 0); 8 rows per pass over y. */
static void FN(att_axpys)(int64_t n, const T *w, const T *rows, int64_t stride, int64_t m, T *restrict y) {
    int64_t j = 0;
    for (; j + 8 <= m; j += 8) {
        const T *r0 = rows + j * stride, *r1 = r0 + stride, *r2 = r1 + stride, *r3 = r2 + stride;
        const T *r4 = r3 + stride, *r5 = r4 + stride, *r6 = r5 + stride, *r7 = r6 + stride;
        T w0 = w[j], w1 = w[j + 1], w2 = w[j + 2], w3 = w[j + 3];
        T w4 = w[j + 4], w5 = w[j + 5], w6 = w[j + 6], w7 = w[j + 7];
        for (int64_t e = 0; e < n; e++)
            y[e] += (w0 * r0[e] + w1 * r1[e] + w2 * r2[e] + w3 * r3[e]) +
                (w4 * r4[e] + w5 * r5[e] + w6 * r6[e] + w7 * r7[e]);
    }
    for (; j + 4 <= m; j += 4) {
        const T *r0 = rows + j * stride, *r1 = r0 + stride, *r2 = r1 + stride, *r3 = r2 + stride;
        T w0 = w[j], w1 = w[j + 1], w2 = w[j + 2], w3 = w[j + 3];
        for (int64_t e = 0; e < n; e++) y[e] += w0 * r0[e] + w1 * r1[e] + w2 * r2[e] + w3 * r3[e];
    }
    for (; j < m; j++) {
        const T *r = rows + j * stride;
        T wj = w[j];
        for (int64_t e = 0; e < n; e++) y[e] += wj * r[e];
    }
}

/* One past the last key query i sees (capped to [0, S]). */
static inline int64_t FN(att_visible)(const tfc_attn_problem *p, int64_t i) {
    if (!p->causal) return p->S;
    int64_t e = i + p->S - p->Tq + 1;
    return e < 0 ? 0 : e > p->S ? p->S : e;
}

/* The first key query i sees: the window keeps j > i + S − T − W (0 without one; the door keeps W < S). */
static inline int64_t FN(att_key_lo)(const tfc_attn_problem *p, int64_t i) {
    if (!p->causal || p->window <= 0) return 0;
    int64_t l = i + p->S - p->Tq - p->window + 1;
    return l < 0 ? 0 : l > p->S ? p->S : l;
}

/* Query i's visible keys within the tile [j0, j0 + nk): [*a, *b), both in [0, nk]. */
static inline void FN(att_tile_range)(const tfc_attn_problem *p, int64_t i, int64_t j0, int64_t nk, int64_t *a,
                                      int64_t *b) {
    int64_t lo = FN(att_key_lo)(p, i) - j0, hi = FN(att_visible)(p, i) - j0;
    *a = lo < 0 ? 0 : lo > nk ? nk : lo;
    *b = hi < 0 ? 0 : hi > nk ? nk : hi;
}

/*
 * Forward for query rows [i0, i0 + nq) of head (b, h): key tiles outer,
 * rows inner, so a tile is transposed once for the whole block; each row
 * keeps its running max and sum in m[r], l[r] and its output in out. The
 * tiles run from the first row's first key to the last row's last.
 */
static void FN(att_forward_block)(const tfc_attn_problem *p, int64_t b, int64_t h, int64_t i0, int64_t nq) {
    const int64_t D = p->D, Dv = p->Dv, bh = b * p->H + h, hk = h / (p->H / p->Hkv);
    const T *q = (const T *)p->q.data + b * p->q.sb + h * p->q.sh;
    const T *k = (const T *)p->k.data + b * p->k.sb + hk * p->k.sh;
    const T *v = (const T *)p->v.data + b * p->v.sb + hk * p->v.sh;
    T *out = (T *)p->out_w + (bh * p->Tq) * Dv;
    T *lse = p->lse_w ? (T *)p->lse_w + bh * p->Tq : NULL;
    const T scale = (T)p->scale;
    const int use_t = D <= ATT_DT_MAX;
    T s[ATT_BK], m[ATT_BQ], kt[ATT_DT_MAX * ATT_BK];
    ACC l[ATT_BQ];
    for (int64_t r = 0; r < nq; r++) {
        T *oi = out + (i0 + r) * Dv;
        for (int64_t e = 0; e < Dv; e++) oi[e] = 0;
        m[r] = -INFINITY;
        l[r] = 0;
    }
    /* Rows' key ranges only move right: the last row sees the last key, the first row the first. */
    const int64_t vis_max = FN(att_visible)(p, i0 + nq - 1), vis_min = FN(att_key_lo)(p, i0);
    for (int64_t j0 = vis_min; j0 < vis_max; j0 += ATT_BK) {
        const int64_t nk = vis_max - j0 < ATT_BK ? vis_max - j0 : ATT_BK;
        if (use_t) FN(att_transpose)(D, k + j0 * p->k.sr, p->k.sr, nk, kt);
        for (int64_t r = 0; r < nq; r++) {
            const int64_t i = i0 + r;
            int64_t ja, jz;
            FN(att_tile_range)(p, i, j0, nk, &ja, &jz);
            if (jz <= ja) continue;
            const T *qi = q + i * p->q.sr;
            T *oi = out + i * Dv;
            if (use_t)
                FN(att_dots_t)(D, scale, qi, kt, jz, s); /* writes s[0, jz); keys [ja, jz) are used */
            else
                FN(att_dots)(D, scale, qi, k + (j0 + ja) * p->k.sr, p->k.sr, jz - ja, s + ja);
            T mt = m[r];
            SIMD_MAX(mt)
            for (int64_t j = ja; j < jz; j++) mt = s[j] > mt ? s[j] : mt;
            const T corr = EXP(m[r] - mt); /* 0 on the first tile (m = −∞) */
            T ls = 0;
            SIMD_SUM(ls)
            for (int64_t j = ja; j < jz; j++) {
                s[j] = EXP(s[j] - mt);
                ls += s[j];
            }
            l[r] = l[r] * corr + ls;
            if (corr != 1)
                for (int64_t e = 0; e < Dv; e++) oi[e] *= corr;
            FN(att_axpys)(Dv, s + ja, v + (j0 + ja) * p->v.sr, p->v.sr, jz - ja, oi);
            m[r] = mt;
        }
    }
    for (int64_t r = 0; r < nq; r++) {
        const int64_t i = i0 + r;
        const int vis = FN(att_visible)(p, i) > 0;
        T *oi = out + i * Dv;
        if (vis) {
            const T inv = (T)(1.0 / l[r]);
            for (int64_t e = 0; e < Dv; e++) oi[e] *= inv;
        }
        if (lse) lse[i] = vis ? (T)((ACC)m[r] + log(l[r])) : (T)-INFINITY;
    }
}

#if TFC_HAVE_BLAS
/*
 * With BLAS, a tile's products are small GEMMs (at most ATT_BQ × ATT_BK ×
 * D: below OpenBLAS's threading threshold, so each runs on the calling
 * thread, safe inside our parallel loop):
 *   forward   S = scale · Q_blk · K_tileᵀ,   O_blk = c ⊙ O_blk + P · V_tile
 *   backward  P = exp(scale · Q Kᵀ − lse),  dP = dO · Vᵀ,  dq += scale · dS · K,
 *             dk += scale · dSᵀ · Q,  dv += Pᵀ · dO
 * The per-row softmax bookkeeping is the same as the loop version's.
 */
#if T_IS_F32
#define ATT_GEMM cblas_sgemm
#else
#define ATT_GEMM cblas_dgemm
#endif

/* BLAS needs leading dimensions >= the row length and ints. */
static int FN(att_blas_ok)(const tfc_attn_problem *p) {
    const tfc_attn_operand *ops[5] = {&p->q, &p->k, &p->v, &p->out, &p->dout};
    const int64_t widths[5] = {p->D, p->D, p->Dv, p->Dv, p->Dv};
    for (int i = 0; i < 5; i++)
        if (ops[i]->data && (ops[i]->sr < widths[i] || ops[i]->sr > INT_MAX)) return 0;
    return p->D <= INT_MAX && p->Dv <= INT_MAX;
}

static void FN(att_forward_block_blas)(const tfc_attn_problem *p, int64_t b, int64_t h, int64_t i0, int64_t nq) {
    const int64_t D = p->D, Dv = p->Dv, bh = b * p->H + h, hk = h / (p->H / p->Hkv);
    const T *q = (const T *)p->q.data + b * p->q.sb + h * p->q.sh + i0 * p->q.sr;
    const T *k = (const T *)p->k.data + b * p->k.sb + hk * p->k.sh;
    const T *v = (const T *)p->v.data + b * p->v.sb + hk * p->v.sh;
    T *out = (T *)p->out_w + (bh * p->Tq + i0) * Dv;
    T *lse = p->lse_w ? (T *)p->lse_w + bh * p->Tq : NULL;
    T S[ATT_BQ * ATT_BK], m[ATT_BQ];
    ACC l[ATT_BQ];
    for (int64_t r = 0; r < nq; r++) {
        for (int64_t e = 0; e < Dv; e++) out[r * Dv + e] = 0;
        m[r] = -INFINITY;
        l[r] = 0;
    }
    const int64_t vis_max = FN(att_visible)(p, i0 + nq - 1), vis_min = FN(att_key_lo)(p, i0);
    for (int64_t j0 = vis_min; j0 < vis_max; j0 += ATT_BK) {
        const int64_t nk = vis_max - j0 < ATT_BK ? vis_max - j0 : ATT_BK;
        ATT_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nq, (int)nk, (int)D, (T)p->scale, q, (int)p->q.sr,
                 k + j0 * p->k.sr, (int)p->k.sr, 0, S, ATT_BK);
        for (int64_t r = 0; r < nq; r++) {
            T *sr = S + r * ATT_BK;
            int64_t ja, jz;
            FN(att_tile_range)(p, i0 + r, j0, nk, &ja, &jz);
            if (jz < ja) jz = ja;
            for (int64_t j = 0; j < ja; j++) sr[j] = 0; /* P · V runs over the whole tile */
            for (int64_t j = jz; j < nk; j++) sr[j] = 0;
            if (jz == ja) continue;
            T mt = m[r];
            SIMD_MAX(mt)
            for (int64_t j = ja; j < jz; j++) mt = sr[j] > mt ? sr[j] : mt;
            const T corr = EXP(m[r] - mt);
            T ls = 0;
            SIMD_SUM(ls)
            for (int64_t j = ja; j < jz; j++) {
                sr[j] = EXP(sr[j] - mt);
                ls += sr[j];
            }
            l[r] = l[r] * corr + ls;
            if (corr != 1)
                for (int64_t e = 0; e < Dv; e++) out[r * Dv + e] *= corr;
            m[r] = mt;
        }
        ATT_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)nq, (int)Dv, (int)nk, 1, S, ATT_BK, v + j0 * p->v.sr,
                 (int)p->v.sr, 1, out, (int)Dv);
    }
    for (int64_t r = 0; r < nq; r++) {
        const int vis = FN(att_visible)(p, i0 + r) > 0;
        if (vis) {
            const T inv = (T)(1.0 / l[r]);
            for (int64_t e = 0; e < Dv; e++) out[r * Dv + e] *= inv;
        }
        if (lse) lse[i0 + r] = vis ? (T)((ACC)m[r] + log(l[r])) : (T)-INFINITY;
    }
}

static void FN(att_backward_tile_blas)(const tfc_attn_problem *p, int64_t b, int64_t h, int64_t i0, int64_t nq,
                                       int64_t j0, int64_t nk, int want_dq, int want_dkv) {
    const int64_t D = p->D, Dv = p->Dv, bh = b * p->H + h, hk = h / (p->H / p->Hkv), bhk = b * p->Hkv + hk;
    const T *q = (const T *)p->q.data + b * p->q.sb + h * p->q.sh + i0 * p->q.sr;
    const T *k = (const T *)p->k.data + b * p->k.sb + hk * p->k.sh + j0 * p->k.sr;
    const T *v = (const T *)p->v.data + b * p->v.sb + hk * p->v.sh + j0 * p->v.sr;
    const T *o = (const T *)p->out.data + b * p->out.sb + h * p->out.sh;
    const T *go = (const T *)p->dout.data + b * p->dout.sb + h * p->dout.sh;
    const T *lse = (const T *)p->lse + bh * p->Tq;
    T *dq = p->dq ? (T *)p->dq + (bh * p->Tq + i0) * D : NULL;
    T *dk = p->dk ? (T *)p->dk + (bhk * p->S + j0) * D : NULL;
    T *dv = p->dv ? (T *)p->dv + (bhk * p->S + j0) * Dv : NULL;
    const T scale = (T)p->scale;
    const int need_ds = (want_dq && dq) || (want_dkv && dk);
    T P[ATT_BQ * ATT_BK], dS[ATT_BQ * ATT_BK];
    ATT_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nq, (int)nk, (int)D, scale, q, (int)p->q.sr, k, (int)p->k.sr,
             0, P, ATT_BK);
    if (need_ds)
        ATT_GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nq, (int)nk, (int)Dv, 1, go + i0 * p->dout.sr,
                 (int)p->dout.sr, v, (int)p->v.sr, 0, dS, ATT_BK);
    for (int64_t r = 0; r < nq; r++) {
        const int64_t i = i0 + r;
        T *pr = P + r * ATT_BK, *dr = dS + r * ATT_BK;
        int64_t ja, jz;
        FN(att_tile_range)(p, i, j0, nk, &ja, &jz);
        const T L = lse[i];
        if (L == -INFINITY || jz < ja) jz = ja;
        for (int64_t j = 0; j < ja; j++) pr[j] = dr[j] = 0;
        for (int64_t j = jz; j < nk; j++) pr[j] = dr[j] = 0;
        if (jz == ja) continue;
        for (int64_t j = ja; j < jz; j++) pr[j] = EXP(pr[j] - L);
        if (!need_ds) continue;
        const T Di = FN(att_dot)(Dv, go + i * p->dout.sr, o + i * p->out.sr);
        for (int64_t j = ja; j < jz; j++) dr[j] = pr[j] * (dr[j] - Di);
    }
    if (want_dq && dq)
        ATT_GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)nq, (int)D, (int)nk, scale, dS, ATT_BK, k,
                 (int)p->k.sr, 1, dq, (int)D);
    if (want_dkv && dv)
        ATT_GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, (int)nk, (int)Dv, (int)nq, 1, P, ATT_BK, go + i0 * p->dout.sr,
                 (int)p->dout.sr, 1, dv, (int)Dv);
    if (want_dkv && dk)
        ATT_GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, (int)nk, (int)D, (int)nq, scale, dS, ATT_BK, q, (int)p->q.sr,
                 1, dk, (int)D);
}
#undef ATT_GEMM
#endif

static void FN(attention_forward)(const tfc_attn_problem *p) {
    const int64_t nqb = (p->Tq + ATT_BQ - 1) / ATT_BQ;
    const int64_t work = p->S * (p->D + p->Dv) * ATT_BQ; /* per item, roughly */
#if TFC_HAVE_BLAS
    const int use_blas = FN(att_blas_ok)(p);
#endif
    TFC_PARALLEL_RANGE(p->B * p->H * nqb, work >= 16384 ? 1 : 16384 / (work + 1), lo, hi) {
        for (int64_t w = lo; w < hi; w++) {
            const int64_t bh = w / nqb, i0 = (w % nqb) * ATT_BQ;
            const int64_t nq = p->Tq - i0 < ATT_BQ ? p->Tq - i0 : ATT_BQ;
#if TFC_HAVE_BLAS
            if (use_blas) {
                FN(att_forward_block_blas)(p, bh / p->H, bh % p->H, i0, nq);
                continue;
            }
#endif
            FN(att_forward_block)(p, bh / p->H, bh % p->H, i0, nq);
        }
    }
}

/* ---- backward ---------------------------------------------------------------- */

/*
 * One tile: queries [i0, i0+nq) × keys [j0, j0+nk) of head (b, h). Adds the
 * tile's share to dq rows (want_dq) and/or dk, dv rows (want_dkv).
 */
static void FN(att_backward_tile)(const tfc_attn_problem *p, int64_t b, int64_t h, int64_t i0, int64_t nq, int64_t j0,
                                  int64_t nk, int want_dq, int want_dkv) {
    const int64_t D = p->D, Dv = p->Dv, bh = b * p->H + h, hk = h / (p->H / p->Hkv), bhk = b * p->Hkv + hk;
    const T *q = (const T *)p->q.data + b * p->q.sb + h * p->q.sh;
    const T *k = (const T *)p->k.data + b * p->k.sb + hk * p->k.sh + j0 * p->k.sr;
    const T *v = (const T *)p->v.data + b * p->v.sb + hk * p->v.sh + j0 * p->v.sr;
    const T *o = (const T *)p->out.data + b * p->out.sb + h * p->out.sh;
    const T *go = (const T *)p->dout.data + b * p->dout.sb + h * p->dout.sh;
    const T *lse = (const T *)p->lse + bh * p->Tq;
    T *dq = p->dq ? (T *)p->dq + bh * p->Tq * D : NULL;
    T *dk = p->dk ? (T *)p->dk + (bhk * p->S + j0) * D : NULL;
    T *dv = p->dv ? (T *)p->dv + (bhk * p->S + j0) * Dv : NULL;
    const T scale = (T)p->scale;
    const int need_ds = (want_dq && dq) || (want_dkv && dk);
    const int use_t = D <= ATT_DT_MAX && Dv <= ATT_DT_MAX;
    T P[ATT_BQ][ATT_BK], dS[ATT_BQ][ATT_BK], kt[ATT_DT_MAX * ATT_BK], vt[ATT_DT_MAX * ATT_BK];
    if (use_t) {
        FN(att_transpose)(D, k, p->k.sr, nk, kt);
        if (need_ds) FN(att_transpose)(Dv, v, p->v.sr, nk, vt);
    }

    for (int64_t r = 0; r < nq; r++) {
        const int64_t i = i0 + r;
        int64_t ja, jz;
        FN(att_tile_range)(p, i, j0, nk, &ja, &jz);
        const T L = lse[i];
        if (L == -INFINITY || jz < ja) jz = ja;
        if (jz > ja) {
            if (use_t)
                FN(att_dots_t)(D, scale, q + i * p->q.sr, kt, jz, P[r]); /* writes [0, jz); [ja, jz) are kept */
            else
                FN(att_dots)(D, scale, q + i * p->q.sr, k + ja * p->k.sr, p->k.sr, jz - ja, P[r] + ja);
            for (int64_t j = ja; j < jz; j++) P[r][j] = EXP(P[r][j] - L);
            if (need_ds) {
                const T *goi = go + i * p->dout.sr;
                const T Di = FN(att_dot)(Dv, goi, o + i * p->out.sr);
                if (use_t)
                    FN(att_dots_t)(Dv, 1, goi, vt, jz, dS[r]);
                else
                    FN(att_dots)(Dv, 1, goi, v + ja * p->v.sr, p->v.sr, jz - ja, dS[r] + ja);
                for (int64_t j = ja; j < jz; j++) dS[r][j] = P[r][j] * (dS[r][j] - Di);
            }
        }
        /* Keys the row does not see weigh nothing in the tile's products below. */
        for (int64_t j = 0; j < ja; j++) P[r][j] = dS[r][j] = 0;
        for (int64_t j = jz; j < nk; j++) P[r][j] = dS[r][j] = 0;
    }

    if (want_dq && dq) {
        for (int64_t r = 0; r < nq; r++) {
            T w[ATT_BK];
            for (int64_t j = 0; j < nk; j++) w[j] = scale * dS[r][j];
            FN(att_axpys)(D, w, k, p->k.sr, nk, dq + (i0 + r) * D);
        }
    }
    if (want_dkv && (dk || dv)) {
        for (int64_t j = 0; j < nk; j++) {
            T wp[ATT_BQ], ws[ATT_BQ];
            for (int64_t r = 0; r < nq; r++) {
                wp[r] = P[r][j];
                ws[r] = scale * dS[r][j];
            }
            if (dv) FN(att_axpys)(Dv, wp, go + i0 * p->dout.sr, p->dout.sr, nq, dv + j * Dv);
            if (dk) FN(att_axpys)(D, ws, q + i0 * p->q.sr, p->q.sr, nq, dk + j * D);
        }
    }
}

/* The BLAS tile when the operands allow it, else the loop tile. */
static void FN(att_backward_tile_any)(const tfc_attn_problem *p, int64_t b, int64_t h, int64_t i0, int64_t nq,
                                      int64_t j0, int64_t nk, int want_dq, int want_dkv) {
#if TFC_HAVE_BLAS
    if (FN(att_blas_ok)(p)) {
        FN(att_backward_tile_blas)(p, b, h, i0, nq, j0, nk, want_dq, want_dkv);
        return;
    }
#endif
    FN(att_backward_tile)(p, b, h, i0, nq, j0, nk, want_dq, want_dkv);
}

/*
 * The tiles visited: query block [i0, i0+nq) × key block [j0, j0+nk) is
 * visited iff some row sees some key of it. Rows' key ranges only move
 * right, so the rows that see any key of a key block are one range,
 * [att_first_query(j0), att_query_end(j0 + nk)), and the keys any row of a
 * query block sees are [att_key_lo(i0), att_visible(i0 + nq − 1)): both
 * passes below visit the same tiles.
 */

/* First query row that sees key j (rows before it skip the key's tile). */
static inline int64_t FN(att_first_query)(const tfc_attn_problem *p, int64_t j) {
    if (!p->causal) return 0;
    int64_t i = j - (p->S - p->Tq);
    return i < 0 ? 0 : i;
}

/* One past the last query row that sees a key before j (the window: lo(i) < j); T without a window. */
static inline int64_t FN(att_query_end)(const tfc_attn_problem *p, int64_t j) {
    if (!p->causal || p->window <= 0) return p->Tq;
    int64_t i = j - (p->S - p->Tq) + p->window - 1;
    return i < 0 ? 0 : i > p->Tq ? p->Tq : i;
}

/* dk, dv of key block [j0, j0+nk) of query head (b, h)'s kv head (and dq too when want_dq). */
static void FN(att_backward_keys)(const tfc_attn_problem *p, int64_t b, int64_t h, int64_t j0, int64_t nk,
                                  int want_dq) {
    const int64_t iend = FN(att_query_end)(p, j0 + nk);
    for (int64_t i0 = FN(att_first_query)(p, j0) / ATT_BQ * ATT_BQ; i0 < iend; i0 += ATT_BQ) {
        const int64_t nq = p->Tq - i0 < ATT_BQ ? p->Tq - i0 : ATT_BQ;
        FN(att_backward_tile_any)(p, b, h, i0, nq, j0, nk, want_dq, 1);
    }
}

/* dq of query block [i0, i0+nq) of head (b, h). */
static void FN(att_backward_queries)(const tfc_attn_problem *p, int64_t b, int64_t h, int64_t i0, int64_t nq) {
    const int64_t jend = FN(att_visible)(p, i0 + nq - 1);
    for (int64_t j0 = FN(att_key_lo)(p, i0) / ATT_BK * ATT_BK; j0 < jend; j0 += ATT_BK) {
        const int64_t nk = p->S - j0 < ATT_BK ? p->S - j0 : ATT_BK;
        FN(att_backward_tile_any)(p, b, h, i0, nq, j0, nk, 1, 0);
    }
}

static void FN(att_zero)(T *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] = 0;
}

static void FN(attention_backward)(const tfc_attn_problem *p) {
    const int64_t BH = p->B * p->H, BHkv = p->B * p->Hkv, G = p->H / p->Hkv;
    const int64_t T_ = p->Tq, S = p->S, D = p->D, Dv = p->Dv;
    const int64_t nqb = (T_ + ATT_BQ - 1) / ATT_BQ, nkb = (S + ATT_BK - 1) / ATT_BK;
    const int64_t group_work = G * T_ * S * (D + Dv);
    const int64_t threads = tfc_threads_for(BHkv * (group_work + 1), 16384);
    if (BHkv >= threads || (nqb <= 1 && nkb <= 1)) {
        /* A thread per kv head: its G query heads' dq and the group's dk, dv in one pass over the tiles. */
        TFC_PARALLEL_RANGE(BHkv, group_work >= 16384 ? 1 : 16384 / (group_work + 1), lo, hi) {
            for (int64_t bk = lo; bk < hi; bk++) {
                const int64_t b = bk / p->Hkv, h0 = bk % p->Hkv * G; /* query heads h0 .. h0 + G − 1 */
                if (!p->accumulate) {
                    if (p->dq) FN(att_zero)((T *)p->dq + (b * p->H + h0) * T_ * D, G * T_ * D);
                    if (p->dk) FN(att_zero)((T *)p->dk + bk * S * D, S * D);
                    if (p->dv) FN(att_zero)((T *)p->dv + bk * S * Dv, S * Dv);
                }
                for (int64_t g = 0; g < G; g++)
                    for (int64_t j0 = 0; j0 < S; j0 += ATT_BK)
                        FN(att_backward_keys)(p, b, h0 + g, j0, S - j0 < ATT_BK ? S - j0 : ATT_BK, 1);
            }
        }
        return;
    }
    /* Few kv heads: dk, dv parallel over key blocks (the group's heads in order), then dq over query blocks. */
    if (p->dk || p->dv) {
        TFC_PARALLEL_RANGE(BHkv * nkb, 1, lo, hi) {
            for (int64_t w = lo; w < hi; w++) {
                const int64_t bk = w / nkb, j0 = (w % nkb) * ATT_BK, nk = S - j0 < ATT_BK ? S - j0 : ATT_BK;
                const int64_t b = bk / p->Hkv, h0 = bk % p->Hkv * G;
                if (!p->accumulate) {
                    if (p->dk) FN(att_zero)((T *)p->dk + (bk * S + j0) * D, nk * D);
                    if (p->dv) FN(att_zero)((T *)p->dv + (bk * S + j0) * Dv, nk * Dv);
                }
                for (int64_t g = 0; g < G; g++) FN(att_backward_keys)(p, b, h0 + g, j0, nk, 0);
            }
        }
    }
    if (p->dq) {
        TFC_PARALLEL_RANGE(BH * nqb, 1, lo, hi) {
            for (int64_t w = lo; w < hi; w++) {
                const int64_t bh = w / nqb, i0 = (w % nqb) * ATT_BQ, nq = T_ - i0 < ATT_BQ ? T_ - i0 : ATT_BQ;
                if (!p->accumulate) FN(att_zero)((T *)p->dq + (bh * T_ + i0) * D, nq * D);
                FN(att_backward_queries)(p, bh / p->H, bh % p->H, i0, nq);
            }
        }
    }
}

#endif
