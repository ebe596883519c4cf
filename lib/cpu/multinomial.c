/*
 * Categorical sampling (tfc_multinomial_problem). Every row is validated
 * before any draw is written, so bad weights leave out untouched. Draw k of
 * row r takes a 53-bit uniform u from Philox block offset + r·num_samples + k
 * and picks the first category whose running weight sum exceeds u · total:
 * a category of weight 0 is never picked. Without replacement the picked
 * weight is zeroed in a per-row copy and the total recomputed, which is the
 * sequential "draw, remove, renormalise" process torch.multinomial samples.
 */
#include <math.h>
#include <stdlib.h>

#include "core/dtype.h"
#include "core/error.h"
#include "core/rng.h"
#include "cpu/kernels.h"

static tfc_status check_rows(const tfc_multinomial_problem *p) {
    for (int64_t r = 0; r < p->rows; r++) {
        double total = 0;
        int64_t positive = 0;
        for (int64_t j = 0; j < p->n; j++) {
            double w = tfc_scalar_load(p->probs, p->dtype, r * p->n + j);
            if (!isfinite(w) || w < 0)
                return tfc_err(TFC_ERR_INVALID_ARG,
                               "probs row %lld holds %g at column %lld; weights must be finite and >= 0", (long long)r,
                               w, (long long)j);
            total += w;
            positive += w > 0;
        }
        if (!(total > 0) || !isfinite(total))
            return tfc_err(TFC_ERR_INVALID_ARG, "probs row %lld sums to %g; it must sum to a positive finite value",
                           (long long)r, total);
        if (!p->replacement && positive < p->num_samples)
            return tfc_err(TFC_ERR_INVALID_ARG,
                           "probs row %lld has %lld non-zero weights, fewer than num_samples %lld without replacement",
                           (long long)r, (long long)positive, (long long)p->num_samples);
    }
    return TFC_OK;
}

static double draw_unit(const tfc_multinomial_problem *p, int64_t i) {
    uint32_t w[4];
    tfc_philox4x32_10(p->seed, p->offset + (uint64_t)i, w);
    return tfc_u64_to_unit_f64(w[0], w[1]);
}

/* The first j with w[j] > 0 whose running sum exceeds t (the last positive one if rounding runs past). */
static int64_t pick(const double *w, int64_t n, double t) {
    double run = 0;
    int64_t last = -1;
    for (int64_t j = 0; j < n; j++) {
        if (w[j] <= 0) continue;
        run += w[j];
        last = j;
        if (run > t) return j;
    }
    return last;
}

tfc_status tfc_cpu_multinomial(const tfc_multinomial_problem *p) {
    TFC_TRY(check_rows(p));
    if (p->rows == 0 || p->num_samples == 0) return TFC_OK;
    double *w = malloc(sizeof *w * (size_t)p->n);
    if (!w) return tfc_err(TFC_ERR_OOM, "out of memory for a row of %lld weights", (long long)p->n);
    for (int64_t r = 0; r < p->rows; r++) {
        double total = 0;
        for (int64_t j = 0; j < p->n; j++) total += w[j] = tfc_scalar_load(p->probs, p->dtype, r * p->n + j);
        for (int64_t k = 0; k < p->num_samples; k++) {
            int64_t i = r * p->num_samples + k;
            int64_t j = pick(w, p->n, draw_unit(p, i) * total);
            p->out[i] = j;
            if (!p->replacement) {
                w[j] = 0;
                total = 0; /* re-summed, not decremented: no drift from repeated subtraction */
                for (int64_t m = 0; m < p->n; m++) total += w[m];
            }
        }
    }
    free(w);
    return TFC_OK;
}
