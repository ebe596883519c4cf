/*
 * Top-k along the middle dim of x [outer, d, inner] (tfc_topk_problem):
 * each of the outer·inner lines is sorted by value (ties by index, so the
 * order is total and the result deterministic) and its first k kept.
 * Backward scatters dy back to the kept positions.
 */
#include <stdlib.h>

#include "core/dtype.h"
#include "core/error.h"
#include "cpu/kernels.h"

typedef struct ranked {
    double v;
    int64_t i;
} ranked;

/*
 * NaN ranks above every number (torch's order for sort and topk), so the
 * comparison stays a total order: without this, x != y holds for a NaN
 * and qsort's result would depend on where the NaN sat.
 */
static int cmp_value(double x, double y) {
    int xn = x != x, yn = y != y;
    if (xn || yn) return xn - yn;
    return x < y ? -1 : x > y;
}
static int cmp_desc(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    int c = cmp_value(y->v, x->v);
    if (c) return c;
    return x->i < y->i ? -1 : x->i > y->i;
}
static int cmp_asc(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    int c = cmp_value(x->v, y->v);
    if (c) return c;
    return x->i < y->i ? -1 : x->i > y->i;
}

tfc_status tfc_cpu_topk(const tfc_topk_problem *p) {
    const int64_t D = p->d, k = p->k;
    ranked *buf = malloc(sizeof *buf * (size_t)(D ? D : 1));
    if (!buf) return tfc_err(TFC_ERR_OOM, "out of memory for a line of %lld values", (long long)D);
    for (int64_t o = 0; o < p->outer; o++)
        for (int64_t in = 0; in < p->inner; in++) {
            for (int64_t j = 0; j < D; j++) {
                buf[j].v = tfc_scalar_load(p->x, p->dtype, (o * D + j) * p->inner + in);
                buf[j].i = j;
            }
            qsort(buf, (size_t)D, sizeof *buf, p->largest ? cmp_desc : cmp_asc);
            for (int64_t j = 0; j < k; j++) {
                int64_t at = (o * k + j) * p->inner + in;
                tfc_scalar_store(p->values, p->dtype, at, buf[j].v);
                p->indices[at] = buf[j].i;
            }
        }
    free(buf);
    return TFC_OK;
}

tfc_status tfc_cpu_topk_backward(const tfc_topk_problem *p) {
    const int64_t D = p->d, k = p->k;
    for (int64_t o = 0; o < p->outer; o++)
        for (int64_t j = 0; j < k; j++)
            for (int64_t in = 0; in < p->inner; in++) {
                int64_t src = (o * k + j) * p->inner + in, dst = (o * D + p->indices_in[src]) * p->inner + in;
                if (p->dtype == TFC_DTYPE_F64)
                    ((double *)p->dx)[dst] += ((const double *)p->dy)[src];
                else
                    ((float *)p->dx)[dst] += ((const float *)p->dy)[src];
            }
    return TFC_OK;
}
