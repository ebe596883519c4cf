/*
 * Raw CPU kernels of the transformer's fused ops (the public, validating
 * wrappers are in lib/ops/<op>_kernels.c; formulas in include/tfcore/kernels.h).
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

#include "tfcore/core.h"

/* 1 when the AVX2+FMA f32 instances may run: the CPU has both and
 * tfc_cpu_avx2_disabled is 0. */
int tfc_cpu_use_avx2(void);
/* Set non-zero (tests, benchmarks) to force the portable f32 kernels. */
extern int tfc_cpu_avx2_disabled;

/* Element i of an i32 or i64 index buffer. */
static inline int64_t tfc_index_at(const void *ids, tfc_dtype idt, int64_t i) {
    return idt == TFC_DTYPE_I32 ? (int64_t)((const int32_t *)ids)[i] : ((const int64_t *)ids)[i];
}
/*
 * Position of the first index outside [0, limit) — skipping those equal to
 * ignore_index when skip_ignore — or -1 when all are valid.
 */
int64_t tfc_cpu_first_bad_index(const void *ids, tfc_dtype idt, int64_t n, int64_t limit, int skip_ignore,
                                int64_t ignore_index);

/* LayerNorm over rows: x, y [n, c]; weight, bias [c] or NULL; mean, rstd [n] or NULL. */
void tfc_cpu_layernorm_forward(tfc_dtype dt, int64_t n, int64_t c, const void *x, const void *weight,
                               const void *bias, double eps, void *y, void *mean, void *rstd);
/* dy, x [n, c]; weight [c] or NULL; mean, rstd [n]; dx [n, c], dweight, dbias [c], each or NULL. */
void tfc_cpu_layernorm_backward(tfc_dtype dt, int64_t n, int64_t c, const void *dy, const void *x,
                                const void *weight, const void *mean, const void *rstd, void *dx, void *dweight,
                                void *dbias, int accumulate);

/* Softmax (log = 0) or log-softmax (log = 1) along the middle dim of x, y [outer, d, inner]. */
void tfc_cpu_softmax_forward(tfc_dtype dt, int64_t outer, int64_t d, int64_t inner, int is_log, const void *x,
                             void *y);
/* Its gradient from y: dy, y, dx [outer, d, inner]. */
void tfc_cpu_softmax_backward(tfc_dtype dt, int64_t outer, int64_t d, int64_t inner, int is_log, const void *dy,
                              const void *y, void *dx, int accumulate);

/* Mean cross-entropy: logits [n, c], targets [n] (idt); loss one element; lse [n] or NULL. */
void tfc_cpu_cross_entropy_forward(tfc_dtype dt, tfc_dtype idt, int64_t n, int64_t c, const void *logits,
                                   const void *targets, int64_t ignore_index, void *loss, void *lse);
/* dlogits [n, c] from dloss (a value) and lse [n] (or NULL: recomputed). */
void tfc_cpu_cross_entropy_backward(tfc_dtype dt, tfc_dtype idt, int64_t n, int64_t c, double dloss,
                                    const void *logits, const void *targets, const void *lse,
                                    int64_t ignore_index, void *dlogits, int accumulate);
/*
 * One chunk of the fused linear + cross-entropy, in place on logits x [n, c]:
 * row_loss[r] (n doubles) = lse_r − x_{r,t_r}, 0 on ignored rows; with
 * to_grad, x becomes scale · (softmax(x) − onehot(t)), zero on ignored rows.
 */
void tfc_cpu_cross_entropy_rows(tfc_dtype dt, tfc_dtype idt, int64_t n, int64_t c, void *x, const void *targets,
                                int64_t ignore_index, int to_grad, double scale, double *row_loss);

/* out [n, c] = table [*, c] rows named by ids [n] (idt). */
void tfc_cpu_embedding_forward(tfc_dtype dt, tfc_dtype idt, int64_t n, int64_t c, const void *table,
                               const void *ids, void *out);
/* dtable [v, c] (+)= scatter-add of dout [n, c] by ids [n], in position order. */
void tfc_cpu_embedding_backward(tfc_dtype dt, tfc_dtype idt, int64_t n, int64_t v, int64_t c, const void *dout,
                                const void *ids, void *dtable, int accumulate);

/* GELU of n elements (approximate: 0 erf, 1 tanh). */
void tfc_cpu_gelu_forward(tfc_dtype dt, int64_t n, int approximate, const void *x, void *y);
void tfc_cpu_gelu_backward(tfc_dtype dt, int64_t n, int approximate, const void *dy, const void *x, void *dx,
                           int accumulate);

/* An attention operand [B, H, rows, cols]: element strides of b, h and row; cols has stride 1. */
typedef struct tfc_attn_operand {
    const void *data;
    int64_t sb, sh, sr;
} tfc_attn_operand;

/*
 * Attention problem: q [B,H,T,D], k [B,H,S,D], v [B,H,S,Dv], out/dout
 * [B,H,T,Dv] as strided operands; lse [B,H,T] and the written outputs
 * contiguous. Forward writes out_w (required) and lse_w (or NULL) from q, k,
 * v. Backward reads dout, q, k, v, out, lse and writes dq, dk, dv (each or NULL).
 */
typedef struct tfc_attn_problem {
    tfc_dtype dtype;
    int64_t B, H, Tq, S, D, Dv; /* Tq: query rows (T in the docs) */
    int causal;
    double scale;
    tfc_attn_operand q, k, v, out, dout;
    const void *lse;
    void *out_w, *lse_w;
    void *dq, *dk, *dv;
    int accumulate;
} tfc_attn_problem;

void tfc_cpu_attention_forward(const tfc_attn_problem *p);
void tfc_cpu_attention_backward(const tfc_attn_problem *p);

#endif
