/*
 * The CPU kernels that are the backend table's entries: each is
 * tfc_status tfc_cpu_<entry>(const tfc_<x>_problem *p), and
 * lib/cpu/cpu_backend.c puts it in the table as it is. The problem struct
 * in lib/backend/backend.h is the signature and carries the formula and
 * shapes; a kernel file's head comment adds how the CPU computes it. The
 * optimizer entries are in cpu/optim_kernels.h, the quantized-weight ones
 * in cpu/quant.h; the positional building blocks kernels share (the matrix
 * GEMMs, the strided iterator) in cpu/gemm.h and cpu/strided.h.
 *
 * Conventions: the problem's dtype is f32 or f64 (gemm also takes bf16)
 * and applies to every float buffer; index buffers (ids, targets) are i32
 * or i64 as index_dtype says. Buffers are contiguous except where the
 * problem says otherwise: copy, fill, random, map, reduce, gather and
 * scatter take strided views, attention and RoPE operands carry their
 * batch/head/row strides, bias_grad's dy its row stride, swiglu's operands
 * theirs. The door has
 * validated shapes and overlaps; data only a kernel sees (an id or target
 * out of range, a bad multinomial weight) is checked by the kernel before
 * it writes anything. Outputs documented "or NULL" are skipped when NULL;
 * accumulate != 0 makes gradient outputs += instead of =. Most kernels
 * keep their scratch on the stack; those that allocate say so and fail
 * with TFC_ERR_OOM only where no fallback exists. Parallel with OpenMP;
 * results never depend on the thread count.
 */
#ifndef TFC_CPU_KERNELS_H
#define TFC_CPU_KERNELS_H

#include <stdint.h>

#include "backend/backend.h"
#include "cpu/strided.h"

/* 1 when the AVX2+FMA f32 instances may run: the CPU has both and
 * tfc_cpu_avx2_disabled is 0. */
int tfc_cpu_use_avx2(void);
/* Set non-zero (tests, benchmarks) to force the portable f32 kernels. */
extern int tfc_cpu_avx2_disabled;

/*
 * Position of the first index outside [0, limit) — skipping those equal to
 * ignore_index when skip_ignore — or -1 when all are valid (the id and
 * target checks of embedding.c and cross_entropy.c).
 */
int64_t tfc_cpu_first_bad_index(const void *ids, tfc_dtype idt, int64_t n, int64_t limit, int skip_ignore,
                                int64_t ignore_index);

/* ---- data movement ---- */

/* Copy with dtype conversion, and fill, of strided views (strided.c). */
tfc_status tfc_cpu_copy(const tfc_copy_problem *p);
tfc_status tfc_cpu_fill(const tfc_fill_problem *p);
/* dst's elements in row-major order = a + b · r_i, any strides. */
tfc_status tfc_cpu_random(const tfc_random_problem *p);

/* ---- elementwise and reductions ---- */

/* The maps of backend/map_ops.h on strided views; a bf16 out, a or b is TFC_ERR_UNSUPPORTED (tfc_cpu_check_float_view). */
tfc_status tfc_cpu_map(const tfc_map_problem *p);
/* Reductions over the trailing dims of a strided view (bf16 refused like map), and the max/min backward scatter. */
tfc_status tfc_cpu_reduce(const tfc_reduce_problem *p);
tfc_status tfc_cpu_reduce_scatter(const tfc_scatter_problem *p);

/* ---- products ---- */

/*
 * f32 and f64 through gemm.h's matrix product (BLAS), bf16 A and B through
 * gemm_bf16.c, which allocates f32 copies of the operands (TFC_ERR_OOM); a
 * fused epilogue is TFC_ERR_UNSUPPORTED (caps.gemm_epilogues is 0).
 */
tfc_status tfc_cpu_gemm(const tfc_gemm_problem *p);
/* bias_rows: rows of y = b (the GEMM then adds x·w with beta = 1); bias_grad: db = column sums of dy. */
tfc_status tfc_cpu_bias_rows(const tfc_bias_problem *p);
tfc_status tfc_cpu_bias_grad(const tfc_bias_problem *p);

/* ---- the transformer's fused kernels ---- */

/*
 * The backwards allocate [⌈rows/64⌉, np, cols] partials for a one-pass dweight/dbias (np = 2 with dbias, else 1;
 * two passes without them). RMSNorm's backward is LayerNorm's with the mean taken as 0 (layernorm.c).
 */
tfc_status tfc_cpu_layernorm_forward(const tfc_layernorm_problem *p);
tfc_status tfc_cpu_layernorm_backward(const tfc_layernorm_problem *p);
tfc_status tfc_cpu_rmsnorm_forward(const tfc_rmsnorm_problem *p);
tfc_status tfc_cpu_rmsnorm_backward(const tfc_rmsnorm_problem *p);
tfc_status tfc_cpu_softmax_forward(const tfc_softmax_problem *p);
tfc_status tfc_cpu_softmax_backward(const tfc_softmax_problem *p);
/* Forward and backward check every target first (TFC_ERR_INVALID_ARG); the backward reads dloss as one element. */
tfc_status tfc_cpu_cross_entropy_forward(const tfc_cross_entropy_problem *p);
tfc_status tfc_cpu_cross_entropy_backward(const tfc_cross_entropy_problem *p);
/* One chunk of the fused linear + cross-entropy, in place on x; its targets were checked by the caller. */
tfc_status tfc_cpu_cross_entropy_rows(const tfc_ce_rows_problem *p);
/* Both check every id against [0, v) first (TFC_ERR_INVALID_ARG). */
tfc_status tfc_cpu_embedding_forward(const tfc_embedding_problem *p);
tfc_status tfc_cpu_embedding_backward(const tfc_embedding_problem *p);
tfc_status tfc_cpu_gelu_forward(const tfc_gelu_problem *p);
tfc_status tfc_cpu_gelu_backward(const tfc_gelu_problem *p);
/* Flash-style tiles on the stack: O(T) extra memory, strided operands. */
tfc_status tfc_cpu_attention_forward(const tfc_attn_problem *p);
tfc_status tfc_cpu_attention_backward(const tfc_attn_problem *p);
/* RoPE: positions checked first (TFC_ERR_INVALID_ARG); cos/sin of a token's angles on the stack, shared by its heads. */
tfc_status tfc_cpu_rope_forward(const tfc_rope_problem *p);
tfc_status tfc_cpu_rope_backward(const tfc_rope_problem *p);
tfc_status tfc_cpu_dropout(const tfc_dropout_problem *p);
/* Operands with row strides (column halves of one [rows, 2·cols] buffer); σ from e^{−|g|}. */
tfc_status tfc_cpu_swiglu_forward(const tfc_swiglu_problem *p);
tfc_status tfc_cpu_swiglu_backward(const tfc_swiglu_problem *p);
/* topk allocates a line's buffer of d (value, index) pairs (TFC_ERR_OOM). */
tfc_status tfc_cpu_topk(const tfc_topk_problem *p);
tfc_status tfc_cpu_topk_backward(const tfc_topk_problem *p);

/* ---- indexing, prefix sums, sampling ---- */

/* Strided views; every index checked before anything is written (gather_scatter.c). */
tfc_status tfc_cpu_gather(const tfc_index_problem *p);
tfc_status tfc_cpu_scatter(const tfc_index_problem *p);
tfc_status tfc_cpu_cumsum(const tfc_cumsum_problem *p);
/* Allocates a row's n weights; TFC_ERR_INVALID_ARG for bad weights (before writing), TFC_ERR_OOM. */
tfc_status tfc_cpu_multinomial(const tfc_multinomial_problem *p);

/*
 * The CPU's backend table. Read it through tfc_cpu_backend_table(), which
 * settles its run-time fields first; the entries themselves never change.
 */
extern tfc_backend tfc_cpu_backend;

/*
 * The CPU table with its run-time fields settled, once and thread-safely:
 * caps.gemm_bf16_widen_rows is 0 where the bf16 GEMM multiplies bf16 itself
 * (AMX tiles, or their emulation under TFC_BF16_GEMM=amx-emulated), so
 * the autocast Linear hands it bf16 operands (tfc_cpu_bf16_gemm_kind).
 */
const tfc_backend *tfc_cpu_backend_table(void);

#endif
