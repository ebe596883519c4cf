/*
 * Embedding lookup and its scatter-add gradient; table [v, c], ids [n]:
 *
 *   out[p, :] = table[ids[p], :]
 *   dtable[r, :] = Σ_{p : ids[p] = r} dout[p, :]
 *
 * The gradient is parallel over blocks of columns, every thread walking all
 * positions in order: duplicate ids never race, and each element's sum is
 * taken in position order, so dtable is bit-identical for any thread count.
 * Both check every id against [0, v) first and write nothing when one is
 * outside.
 */
#ifndef TFC_T

#include <string.h>

#include "core/dtype.h"
#include "core/error.h"
#include "cpu/kernels.h"

/* Columns per block of the scatter-add: a 64-byte line of f32. */
#define EMB_COLS 16

#define TFC_TMPL_FILE "cpu/embedding.c"
#include "cpu/kernel_tmpl.h"

static tfc_status check_ids(const tfc_embedding_problem *p) {
    int64_t bad = tfc_cpu_first_bad_index(p->ids, p->index_dtype, p->n, p->v, 0, 0);
    if (bad >= 0)
        return tfc_err(TFC_ERR_INVALID_ARG, "ids %s at flat position %lld is %lld, outside [0, %lld)",
                       tfc_fmt_dims(p->ids_shape, p->ids_ndim), (long long)bad,
                       (long long)tfc_index_at(p->ids, p->index_dtype, bad), (long long)p->v);
    return TFC_OK;
}

tfc_status tfc_cpu_embedding_forward(const tfc_embedding_problem *p) {
    TFC_TRY(check_ids(p));
    const tfc_dtype idt = p->index_dtype;
    const void *table = p->table, *ids = p->ids;
    char *out = p->out;
    const size_t row = (size_t)p->c * tfc_dtype_size(p->dtype);
    TFC_PARALLEL_RANGE(p->n, TFC_GRAIN(p->c), lo, hi) {
        for (int64_t i = lo; i < hi; i++)
            memcpy(out + i * row, (const char *)table + tfc_index_at(ids, idt, i) * row, row);
    }
    return TFC_OK;
}

/* Bit 0 of accumulate only: TFC_IDS_CHECKED changes nothing here, the ids are checked anyway. */
tfc_status tfc_cpu_embedding_backward(const tfc_embedding_problem *p) {
    TFC_TRY(check_ids(p));
    if (!(p->accumulate & 1)) {
        const size_t row = (size_t)p->c * tfc_dtype_size(p->dtype);
        char *dtable = p->dtable;
        TFC_PARALLEL_RANGE(p->v, TFC_GRAIN(p->c), lo, hi) { memset(dtable + lo * row, 0, (size_t)(hi - lo) * row); }
    }
    TFC_DISPATCH(p->dtype, embedding_scatter_add, p);
    return TFC_OK;
}

#else /* TFC_T */

static void FN(embedding_scatter_add)(const tfc_embedding_problem *p) {
    const tfc_dtype idt = p->index_dtype;
    const int64_t n = p->n, c = p->c;
    const T *dout = p->dout;
    const void *ids = p->ids;
    T *dtable = p->dtable;
    int64_t nblk = (c + EMB_COLS - 1) / EMB_COLS;
    TFC_PARALLEL_RANGE(nblk, TFC_GRAIN(n * EMB_COLS), lo, hi) {
        int64_t c0 = lo * EMB_COLS, c1 = hi * EMB_COLS < c ? hi * EMB_COLS : c;
        for (int64_t i = 0; i < n; i++) {
            T *dst = dtable + tfc_index_at(ids, idt, i) * c;
            const T *src = dout + i * c;
            for (int64_t j = c0; j < c1; j++) dst[j] += src[j];
        }
    }
}

#endif
