/*
 * Embedding lookup and its scatter-add gradient; table [v, c], ids [n]:
 *
 *   out[p, :] = table[ids[p], :]
 *   dtable[r, :] = Σ_{p : ids[p] = r} dout[p, :]
 *
 * The gradient is parallel over blocks of columns, every thread walking all
 * positions in order: duplicate ids never race, and each element's sum is
 * taken in position order, so dtable is bit-identical for any thread count.
 * Ids were range-checked by the caller.
 */
#ifndef TFC_T

#include <string.h>

#include "cpu/kernels.h"

/* Columns per block of the scatter-add: a 64-byte line of f32. */
#define EMB_COLS 16

#define TFC_TMPL_FILE "cpu/embedding.c"
#include "cpu/kernel_tmpl.h"

void tfc_cpu_embedding_forward(tfc_dtype dt, tfc_dtype idt, int64_t n, int64_t c, const void *table, const void *ids,
                               void *out) {
    size_t row = (size_t)c * tfc_dtype_size(dt);
    TFC_PARALLEL_RANGE(n, TFC_GRAIN(c), lo, hi) {
        for (int64_t p = lo; p < hi; p++)
            memcpy((char *)out + p * row, (const char *)table + tfc_index_at(ids, idt, p) * row, row);
    }
}

void tfc_cpu_embedding_backward(tfc_dtype dt, tfc_dtype idt, int64_t n, int64_t v, int64_t c, const void *dout,
                                const void *ids, void *dtable, int accumulate) {
    if (!accumulate) {
        size_t row = (size_t)c * tfc_dtype_size(dt);
        TFC_PARALLEL_RANGE(v, TFC_GRAIN(c), lo, hi) { memset((char *)dtable + lo * row, 0, (size_t)(hi - lo) * row); }
    }
    TFC_DISPATCH(dt, embedding_scatter_add, idt, n, c, dout, ids, dtable);
}

#else /* TFC_T */

static void FN(embedding_scatter_add)(tfc_dtype idt, int64_t n, int64_t c, const T *dout, const void *ids, T *dtable) {
    int64_t nblk = (c + EMB_COLS - 1) / EMB_COLS;
    TFC_PARALLEL_RANGE(nblk, TFC_GRAIN(n * EMB_COLS), lo, hi) {
        int64_t c0 = lo * EMB_COLS, c1 = hi * EMB_COLS < c ? hi * EMB_COLS : c;
        for (int64_t p = 0; p < n; p++) {
            T *dst = dtable + tfc_index_at(ids, idt, p) * c;
            const T *src = dout + p * c;
            for (int64_t j = c0; j < c1; j++) dst[j] += src[j];
        }
    }
}

#endif
