/*
 * Reductions over trailing dimensions of a strided view: the caller
 * permutes the reduced dims to the end, so in = [kept..., reduced...] and
 * out is a contiguous array over the kept dims.
 */
#ifndef TFC_CPU_REDUCE_H
#define TFC_CPU_REDUCE_H

#include "backend/backend.h"
#include "cpu/strided.h"

/* in: f32/f64 view; out: in's dtype (i64 for arg ops), numel(kept) elements. */
void tfc_cpu_reduce(tfc_reduce_op op, const tfc_sview *in, int32_t nkeep, void *out, double scale);

/*
 * Backward of max/min: dst (zeroed, permuted like the forward input) gets
 * dy[o] at reduced position pos[o] of each kept index o.
 */
void tfc_cpu_reduce_scatter(const tfc_sview *dst, int32_t nkeep, const int64_t *pos, const tfc_sview *dy);

#endif
