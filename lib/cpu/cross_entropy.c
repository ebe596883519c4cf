/*
 * Softmax cross-entropy over rows of logits x [n, c] with class targets t [n]:
 *
 *   lse_r = m_r + log Σ_c exp(x_rc − m_r)          (m_r = max_c x_rc)
 *   loss  = Σ_{r valid} (lse_r − x_{r,t_r}) / n_valid       (NaN when n_valid = 0)
 *   dx_rc = dloss / n_valid · (exp(x_rc − lse_r) − [c = t_r]),   0 on ignored rows
 *
 * A row is valid when t_r != ignore_index. The forward and backward check
 * every target against [0, c) first and write nothing when one is outside
 * (cross_entropy_rows' targets were checked by its caller). The backward is one fused pass per row: softmax, minus the
 * one-hot, times the scale — the [n, c] probabilities are never stored.
 * The forward reads each row once (chunked online log-sum-exp, see
 * row_lse). The loss sums rows in f64 in CE_BLOCKS blocks whose boundaries depend only
 * on n, then adds the blocks in order: the same loss for any thread count.
 * cross_entropy_rows is the row pass of the fused linear + cross-entropy
 * (lib/ops/linear_cross_entropy.c): per-row losses, and the gradient
 * written over the logits in place.
 */
#ifndef TFC_T

#include "core/dtype.h"
#include "core/error.h"
#include "cpu/kernels.h"

/* Most row blocks of the loss sum (their partial sums live on the stack). */
#define CE_BLOCKS 256
/* Values per chunk of a row's log-sum-exp (8 KB of f32: stays in L1). */
#define CE_CHUNK 2048

#define TFC_TMPL_FILE "cpu/cross_entropy.c"
#include "cpu/kernel_tmpl.h"

/* Every target in [0, c) or ignore_index, checked before anything is written. */
static tfc_status check_targets(const tfc_cross_entropy_problem *p) {
    int64_t bad = tfc_cpu_first_bad_index(p->targets, p->index_dtype, p->n, p->c, 1, p->ignore_index);
    if (bad >= 0)
        return tfc_err(TFC_ERR_INVALID_ARG, "targets[%lld] is %lld, outside [0, %lld) and not ignore_index %lld",
                       (long long)bad, (long long)tfc_index_at(p->targets, p->index_dtype, bad), (long long)p->c,
                       (long long)p->ignore_index);
    return TFC_OK;
}

tfc_status tfc_cpu_cross_entropy_forward(const tfc_cross_entropy_problem *p) {
    TFC_TRY(check_targets(p));
    TFC_DISPATCH(p->dtype, cross_entropy_forward, p);
    return TFC_OK;
}

tfc_status tfc_cpu_cross_entropy_backward(const tfc_cross_entropy_problem *p) {
    TFC_TRY(check_targets(p));
    TFC_DISPATCH(p->dtype, cross_entropy_backward, p);
    return TFC_OK;
}

tfc_status tfc_cpu_cross_entropy_rows(const tfc_ce_rows_problem *p) {
    TFC_DISPATCH(p->dtype, cross_entropy_rows, p);
    return TFC_OK;
}

#else /* TFC_T */

/*
 * log Σ exp(x) of one row of c values in one pass over memory: per chunk of
 * CE_CHUNK values (in L1 after the max), m_k = max and s_k = Σ exp(x − m_k),
 * merged into the running (m, s) by rescaling the one with the smaller max.
 */
static ACC FN(row_lse)(int64_t c, const T *x) {
    ACC m = -INFINITY, s = 0;
    for (int64_t j0 = 0; j0 < c; j0 += CE_CHUNK) {
        const T *xc = x + j0;
        const int64_t n = c - j0 < CE_CHUNK ? c - j0 : CE_CHUNK;
        T cm = -INFINITY;
        SIMD_MAX(cm)
        for (int64_t j = 0; j < n; j++) cm = xc[j] > cm ? xc[j] : cm;
        if (cm == -INFINITY) continue; /* all −∞: adds nothing */
        ACC cs = 0;
        SIMD_SUM(cs)
        for (int64_t j = 0; j < n; j++) cs += EXP(xc[j] - cm);
        if (cm > m) {
            s = s * exp(m - (ACC)cm) + cs;
            m = cm;
        } else {
            s += cs * exp((ACC)cm - m);
        }
    }
    return m + log(s);
}

static void FN(cross_entropy_forward)(const tfc_cross_entropy_problem *p) {
    const tfc_dtype idt = p->index_dtype;
    const int64_t n = p->n, c = p->c, ignore_index = p->ignore_index;
    const T *x = p->logits;
    const void *targets = p->targets;
    T *loss = p->loss, *lse = p->lse;
    int64_t nblk = n < CE_BLOCKS ? n : CE_BLOCKS;
    ACC part[CE_BLOCKS];
    int64_t valid[CE_BLOCKS];
    TFC_PARALLEL_RANGE(nblk, TFC_GRAIN(c * (n / (nblk > 0 ? nblk : 1))), lo, hi) {
        for (int64_t blk = lo; blk < hi; blk++) {
            ACC sum = 0;
            int64_t nv = 0;
            for (int64_t r = n * blk / nblk; r < n * (blk + 1) / nblk; r++) {
                int64_t t = tfc_index_at(targets, idt, r);
                int ignored = t == ignore_index;
                if (ignored && !lse) continue;
                ACC l = FN(row_lse)(c, x + r * c);
                if (lse) lse[r] = (T)l;
                if (!ignored) {
                    sum += l - (ACC)x[r * c + t];
                    nv++;
                }
            }
            part[blk] = sum;
            valid[blk] = nv;
        }
    }
    ACC total = 0;
    int64_t nv = 0;
    for (int64_t blk = 0; blk < nblk; blk++) {
        total += part[blk];
        nv += valid[blk];
    }
    *loss = nv ? (T)(total / (ACC)nv) : (T)NAN;
}

static void FN(cross_entropy_backward)(const tfc_cross_entropy_problem *p) {
    const tfc_dtype idt = p->index_dtype;
    const int64_t n = p->n, c = p->c, ignore_index = p->ignore_index;
    const double dloss = tfc_scalar_load(p->dloss, p->dtype, 0);
    const T *x = p->logits, *lse = p->lse_in;
    const void *targets = p->targets;
    T *dx = p->dlogits;
    const int accumulate = p->accumulate;
    int64_t nv = 0;
    for (int64_t r = 0; r < n; r++) nv += tfc_index_at(targets, idt, r) != ignore_index;
    T g = nv ? (T)(dloss / (double)nv) : 0;
    TFC_PARALLEL_RANGE(n, TFC_GRAIN(c), lo, hi) {
        for (int64_t r = lo; r < hi; r++) {
            const T *xr = x + r * c;
            T *dr = dx + r * c;
            int64_t t = tfc_index_at(targets, idt, r);
            if (t == ignore_index) {
                if (!accumulate)
                    for (int64_t j = 0; j < c; j++) dr[j] = 0;
                continue;
            }
            T l = lse ? lse[r] : (T)FN(row_lse)(c, xr);
            if (accumulate)
                for (int64_t j = 0; j < c; j++) dr[j] += g * EXP(xr[j] - l);
            else
                for (int64_t j = 0; j < c; j++) dr[j] = g * EXP(xr[j] - l);
            dr[t] -= g;
        }
    }
}

/*
 * The rows of one chunk of the fused linear + cross-entropy: per-row losses
 * (row_loss[r] = lse_r − x_{r,t_r}, 0 on ignored rows, kept apart so the
 * caller sums them in a fixed order), then, with to_grad, x overwritten by
 * its own gradient scale · (softmax − onehot): each row is read for its
 * log-sum-exp and rewritten in the same place, with no second buffer.
 */
static void FN(cross_entropy_rows)(const tfc_ce_rows_problem *p) {
    const tfc_dtype idt = p->index_dtype;
    const int64_t n = p->n, c = p->c, ignore_index = p->ignore_index;
    T *x = p->x;
    const void *targets = p->targets;
    const int to_grad = p->to_grad;
    double *row_loss = p->row_loss;
    const T g = (T)p->scale;
    TFC_PARALLEL_RANGE(n, TFC_GRAIN(c), lo, hi) {
        for (int64_t r = lo; r < hi; r++) {
            T *xr = x + r * c;
            int64_t t = tfc_index_at(targets, idt, r);
            if (t == ignore_index) {
                row_loss[r] = 0;
                if (to_grad)
                    for (int64_t j = 0; j < c; j++) xr[j] = 0;
                continue;
            }
            ACC l = FN(row_lse)(c, xr);
            row_loss[r] = l - (ACC)xr[t];
            if (!to_grad) continue;
            const T lt = (T)l;
            for (int64_t j = 0; j < c; j++) xr[j] = g * EXP(xr[j] - lt);
            xr[t] -= g;
        }
    }
}

#endif
