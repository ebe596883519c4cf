/*
 * The CPU kernels behind the backend table's entries (lib/cpu/cpu_backend.c
 * puts them in the table; formulas in lib/backend/backend.h and
 * include/tfcore/kernels.h).
 *
 * Conventions: dt is TFC_DTYPE_F32 or TFC_DTYPE_F64 and applies to every
 * float pointer; index pointers (ids, targets) are i32 or i64 as idt says.
 * Every buffer is contiguous, except attention operands which carry their
 * batch/head/row strides (last dim stride 1). Arguments are already
 * validated: shapes agree, indices are in range, outputs do not overlap
 * inputs. Outputs documented "or NULL" are skipped when NULL. accumulate != 0
 * makes gradient outputs += instead of =. Nothing here allocates; scratch
 * tiles live on the stack. Parallel with OpenMP; results never depend on
 * the thread count.
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
 * ignore_index when skip_ignore — or -1 when all are valid.
 */
int64_t tfc_cpu_first_bad_index(const void *ids, tfc_dtype idt, int64_t n, int64_t limit, int skip_ignore,
                                int64_t ignore_index);

/* LayerNorm over rows: x, y [n, c]; weight, bias [c] or NULL; mean, rstd [n] or NULL. */
void tfc_cpu_layernorm_forward(tfc_dtype dt, int64_t n, int64_t c, const void *x, const void *weight, const void *bias,
                               double eps, void *y, void *mean, void *rstd);
/* dy, x [n, c]; weight [c] or NULL; mean, rstd [n]; dx [n, c], dweight, dbias [c], each or NULL. */
void tfc_cpu_layernorm_backward(tfc_dtype dt, int64_t n, int64_t c, const void *dy, const void *x, const void *weight,
                                const void *mean, const void *rstd, void *dx, void *dweight, void *dbias,
                                int accumulate);

/* Softmax (log = 0) or log-softmax (log = 1) along the middle dim of x, y [outer, d, inner]. */
void tfc_cpu_softmax_forward(tfc_dtype dt, int64_t outer, int64_t d, int64_t inner, int is_log, const void *x, void *y);
/* Its gradient from y: dy, y, dx [outer, d, inner]. */
void tfc_cpu_softmax_backward(tfc_dtype dt, int64_t outer, int64_t d, int64_t inner, int is_log, const void *dy,
                              const void *y, void *dx, int accumulate);

/* Mean cross-entropy: logits [n, c], targets [n] (idt); loss one element; lse [n] or NULL. */
void tfc_cpu_cross_entropy_forward(tfc_dtype dt, tfc_dtype idt, int64_t n, int64_t c, const void *logits,
                                   const void *targets, int64_t ignore_index, void *loss, void *lse);
/* dlogits [n, c] from dloss (a value) and lse [n] (or NULL: recomputed). */
void tfc_cpu_cross_entropy_backward(tfc_dtype dt, tfc_dtype idt, int64_t n, int64_t c, double dloss, const void *logits,
                                    const void *targets, const void *lse, int64_t ignore_index, void *dlogits,
                                    int accumulate);
/*
 * One chunk of the fused linear + cross-entropy, in place on logits x [n, c]:
 * row_loss[r] (n doubles) = lse_r − x_{r,t_r}, 0 on ignored rows; with
 * to_grad, x becomes scale · (softmax(x) − onehot(t)), zero on ignored rows.
 */
void tfc_cpu_cross_entropy_rows(tfc_dtype dt, tfc_dtype idt, int64_t n, int64_t c, void *x, const void *targets,
                                int64_t ignore_index, int to_grad, double scale, double *row_loss);

/* out [n, c] = table [*, c] rows named by ids [n] (idt). */
void tfc_cpu_embedding_forward(tfc_dtype dt, tfc_dtype idt, int64_t n, int64_t c, const void *table, const void *ids,
                               void *out);
/* dtable [v, c] (+)= scatter-add of dout [n, c] by ids [n], in position order. */
void tfc_cpu_embedding_backward(tfc_dtype dt, tfc_dtype idt, int64_t n, int64_t v, int64_t c, const void *dout,
                                const void *ids, void *dtable, int accumulate);

/* GELU of n elements (approximate: 0 erf, 1 tanh). */
void tfc_cpu_gelu_forward(tfc_dtype dt, int64_t n, int approximate, const void *x, void *y);
void tfc_cpu_gelu_backward(tfc_dtype dt, int64_t n, int approximate, const void *dy, const void *x, void *dx,
                           int accumulate);

/* Linear layer bias: y [rows, n] = b [n] broadcast into every row (the GEMM then adds x·w with beta = 1). */
void tfc_cpu_bias_rows(tfc_dtype dt, int64_t rows, int64_t n, const void *b, void *y);
/* db [n] (+)= Σ_r dy[r, :], dy [rows, n] with row stride ld; each column summed in row order. */
void tfc_cpu_bias_grad(tfc_dtype dt, int64_t rows, int64_t n, const void *dy, int64_t ld, void *db, int accumulate);

/* Attention (tfc_attn_problem in backend/backend.h): flash-style, O(T) extra memory. */
void tfc_cpu_attention_forward(const tfc_attn_problem *p);
void tfc_cpu_attention_backward(const tfc_attn_problem *p);

/*
 * out = f(a, b, c; p) for a map of backend/map_ops.h, or out += f(...) when
 * accumulate. All float views share out's dtype (f32 or f64) except c of
 * MASK_SELECT, which may be bool/u8. Unused inputs may be NULL.
 */
void tfc_cpu_map(tfc_map_op op, const tfc_sview *out, const tfc_sview *a, const tfc_sview *b, const tfc_sview *c,
                 double p, int accumulate);

/* dst's elements in row-major order = a + b · r_i, r_i the Philox uniform/normal at index i. */
void tfc_cpu_random(tfc_random_kind kind, const tfc_sview *dst, double a, double b, uint64_t seed, uint64_t offset);

/* Inverted dropout of n elements (tfc_dropout_problem). */
void tfc_cpu_dropout(tfc_dtype dt, int64_t n, double p, uint64_t seed, uint64_t offset, const void *x, void *out);

/* Top-k and its scatter backward (tfc_topk_problem); TFC_ERR_OOM when a line's scratch cannot be had. */
tfc_status tfc_cpu_topk(const tfc_topk_problem *p);
/* The gather and scatter entries themselves (strided views; lib/cpu/gather_scatter.c). */
tfc_status tfc_cpu_gather(const tfc_index_problem *p);
tfc_status tfc_cpu_scatter(const tfc_index_problem *p);
void tfc_cpu_topk_backward(const tfc_topk_problem *p);

/* Inclusive prefix sums along a dim, forward or reversed (tfc_cumsum_problem). */
void tfc_cpu_cumsum(const tfc_cumsum_problem *p);

/* Categorical draws (tfc_multinomial_problem); TFC_ERR_INVALID_ARG for bad weights, TFC_ERR_OOM. */
tfc_status tfc_cpu_multinomial(const tfc_multinomial_problem *p);

/*
 * The CPU's backend table. Read it through tfc_cpu_backend_table(), which
 * settles its run-time fields first; the entries themselves never change.
 */
extern tfc_backend tfc_cpu_backend;

/*
 * The CPU table with its run-time fields settled, once and thread-safely:
 * gemm_bf16_widen_rows is 0 where the bf16 GEMM multiplies bf16 itself
 * (AMX tiles, or their emulation under TFC_BF16_GEMM=amx-emulated), so
 * the autocast Linear hands it bf16 operands (tfc_cpu_bf16_gemm_kind).
 */
const tfc_backend *tfc_cpu_backend_table(void);

#endif
