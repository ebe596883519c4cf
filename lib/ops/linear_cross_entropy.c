/*
 * tfc_linear_cross_entropy: an LM head and its loss in one op,
 *
 *   loss = Σ_{r valid} (lse(z_r) − z_{r,t_r}) / n_valid,   z = h · wᵀ,
 *
 * h [N, C], w [V, C], targets t [N], without the [N, V] logits or their
 * gradient ever existing. Rows go in chunks of R; for each chunk
 *
 *   z_c  = h_c · wᵀ                                    [R, V], one reused buffer
 *   loss += Σ_r lse(z_c,r) − z_c,r,t_r                  (the cross_entropy_rows entry)
 *
 * and, when backward will want a gradient, in the same pass:
 *
 *   z_c  ← (softmax(z_c) − onehot(t_c)) / n_valid      in place: ∂loss/∂z_c
 *   dh_c = z_c · w                                     [R, C], rows r0..r1 of dh
 *   dW  += z_c ᵀ · h_c                                 [V, C], = on the first chunk
 *
 * dh and dW are the gradients for an upstream gradient of 1; the backward
 * node only scales them (or hands them out unchanged). Memory: R·V for the
 * chunk plus N·C and V·C for the gradients (which the unfused path needs
 * too) against 2·N·V for logits and dlogits. Every GEMM takes h, w and their
 * transposes as BLAS flags. This is llm.c's fused classifier and the
 * chunked linear + cross-entropy of Liger-Kernel / Cut Cross-Entropy, with
 * BLAS chunks in place of a custom kernel.
 *
 * Under bf16 autocast (tfc_linear_cross_entropy_autocast) the same pass runs
 * on bf16(h) and bf16(w) and rounds each chunk's ∂loss/∂z to bf16 before the
 * two gradient GEMMs: the autocast Linear's formula (lib/ops/linear_bf16.c)
 * followed by the f32 loss. The operands take the storage form the
 * backend's GEMM asks for (tfc_backend_bf16_operands, for products of any
 * size: h and w go into products of the chunk's rows and of the
 * vocabulary's): bf16 values in f32 storage and the f32 GEMM where its
 * bf16 GEMM would widen (the CPU), or bf16 tensors and the bf16 GEMM with
 * f32 C where it multiplies bf16 (the CPU on AMX tiles); z, the loss and
 * the gradients are f32 in both.
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>

#include "ops/linear_cross_entropy.h"
#include "ops/matmul_into.h"
#include "ops/op_util.h"
#include "ops/operands.h"

/*
 * Rows per chunk: at least LCE_MIN_ROWS, more while the chunk's logits stay
 * under LCE_CHUNK_BYTES (small vocabularies then take the batch in one or
 * two chunks). The floor is set by dW += z_cᵀ · h_c, a GEMM whose inner
 * dimension is the chunk's row count: below OpenBLAS's K block (256 here)
 * it re-reads and re-writes all of dW [V, C] for too little work. Measured on
 * gpt2-mini's head (h [1024, 256], w [50257, 256], f32, one thread, forward
 * + backward): 64 rows 932 ms, 128 800, 256 760, 512 727; unfused 742.
 * 256 rows of 50257 f32 are a 51 MB buffer, against 412 MB of logits and
 * dlogits unfused.
 */
#define LCE_MIN_ROWS 256
#define LCE_CHUNK_BYTES ((int64_t)8 << 20)

static int64_t forced_rows;

int64_t tfc_linear_cross_entropy_set_chunk_rows(int64_t rows) {
    int64_t prev = forced_rows;
    forced_rows = rows > 0 ? rows : 0;
    return prev;
}

static int64_t chunk_rows(int64_t n, int64_t v, size_t es) {
    int64_t r = forced_rows;
    if (!r) {
        r = LCE_CHUNK_BYTES / (v * (int64_t)es);
        if (r < LCE_MIN_ROWS) r = LCE_MIN_ROWS;
    }
    return r < n ? r : n;
}

/* x [rows, cols] as a BLAS operand both as it is and transposed. */
static int blas_addressable(const tfc_tensor *x) {
    int tr;
    int64_t ld;
    return tfc_gemm_layout(x->shape[0], x->shape[1], x->strides[0], x->strides[1], &tr, &ld) &&
        tfc_gemm_layout(x->shape[1], x->shape[0], x->strides[1], x->strides[0], &tr, &ld);
}

static tfc_status check_args(const char *fn, const tfc_tensor *h, const tfc_tensor *w, const tfc_tensor *targets) {
    TFC_TRY(tfc_check_float(fn, "h", h));
    TFC_TRY(tfc_check_float(fn, "w", w));
    TFC_TRY(tfc_karg_index(fn, "targets", targets));
    const tfc_tensor *ts[3] = {h, w, targets};
    const char *names[3] = {"h", "w", "targets"};
    TFC_TRY(tfc_same_device(fn, ts, names, 3));
    if (h->ndim != 2 || h->shape[1] < 1)
        return tfc_err(TFC_ERR_SHAPE, "%s: h is %s, must be [N, C] with C >= 1", fn, SHAPE(h));
    if (w->ndim != 2 || w->shape[0] < 1 || w->shape[1] != h->shape[1])
        return tfc_err(TFC_ERR_SHAPE, "%s: h is %s, w is %s: w must be [V, C] with V >= 1 and C = %lld", fn, SHAPE(h),
                       SHAPE(w), (long long)h->shape[1]);
    if (w->dtype != h->dtype)
        return tfc_err(TFC_ERR_DTYPE, "%s: h is %s %s, w is %s %s: dtypes differ", fn, tfc_dtype_name(h->dtype),
                       SHAPE(h), tfc_dtype_name(w->dtype), SHAPE(w));
    if (tfc_numel(targets) != h->shape[0])
        return tfc_err(TFC_ERR_SHAPE, "%s: h is %s (%lld rows), targets is %s", fn, SHAPE(h), (long long)h->shape[0],
                       SHAPE(targets));
    if (h->shape[0] > INT_MAX || w->shape[0] > INT_MAX || h->shape[1] > INT_MAX)
        return tfc_err(TFC_ERR_UNSUPPORTED, "%s: h is %s, w is %s: dims above 2^31 are not supported", fn, SHAPE(h),
                       SHAPE(w));
    return TFC_OK;
}

/*
 * The chunked pass of the header comment; dh / dw NULL when not wanted.
 * The backend's gemm entry runs the three GEMMs, its cross_entropy_rows
 * entry the loss rows and ∂loss/∂z; t holds nv valid targets. bf16 h and w
 * (the autocast operands in bf16 storage) go to the bf16 GEMM with f32 C:
 * z, the loss, dh and dW are then f32, and each chunk's ∂loss/∂z is rounded
 * into a bf16 buffer for the gradient GEMMs (round_dz is implied).
 */
static tfc_status lce_pass(const char *fn, const tfc_backend *be, const tfc_tensor *h, const tfc_tensor *w,
                           const void *t, tfc_dtype idt, int64_t nv, int64_t ignore_index, int round_dz,
                           tfc_tensor *loss, tfc_tensor *dh, tfc_tensor *dw) {
    const tfc_dtype odt = h->dtype; /* the GEMM operands' */
    const int bf16_ops = odt == TFC_DTYPE_BF16;
    const tfc_dtype dt = bf16_ops ? TFC_DTYPE_F32 : odt; /* z's, the loss's and the gradients' */
    const size_t es = tfc_dtype_size(dt), oes = tfc_dtype_size(odt);
    const int64_t N = h->shape[0], C = h->shape[1], V = w->shape[0];
    /* w as the right operand of z = h · wᵀ ([C, V]) and of dh = z · w ([V, C]). */
    int twt, tw;
    int64_t ldwt, ldw;
    if (!tfc_gemm_layout(C, V, w->strides[1], w->strides[0], &twt, &ldwt) ||
        !tfc_gemm_layout(V, C, w->strides[0], w->strides[1], &tw, &ldw))
        return tfc_err(TFC_ERR_INTERNAL, "%s: w %s is not a GEMM operand", fn, SHAPE(w));
    const int64_t R = chunk_rows(N, V, es);
    tfc_tensor *z = NULL, *zb = NULL; /* zb: bf16(∂loss/∂z_c), the gradient GEMMs' operand, when bf16_ops */
    double *row_loss = NULL;
    if (N > 0) {
        tfc_status s = tfc_tensor_new_on(h, (int64_t[]){R, V}, 2, dt, &z);
        if (s == TFC_OK && bf16_ops && (dh || dw)) s = tfc_tensor_new_on(h, (int64_t[]){R, V}, 2, odt, &zb);
        if (s == TFC_OK && !(row_loss = malloc(sizeof(double) * (size_t)R)))
            s = tfc_err(TFC_ERR_OOM, "%s: out of memory for %lld row losses", fn, (long long)R);
        if (s != TFC_OK) {
            tfc_tensor_release(z);
            tfc_tensor_release(zb);
            return tfc_err_in(fn, s);
        }
    }
    const tfc_gemm_problem base = {.device = tfc_device_index(h),
                                   .dtype = odt,
                                   .c_f32 = bf16_ops,
                                   .batch = 1,
                                   .alpha = 1.0,
                                   .allow_tf32 = tfc_gemm_allow_tf32(odt)};
    const char *hp = tfc_data(h);
    double total = 0;
    tfc_status s = TFC_OK;
    for (int64_t r0 = 0; r0 < N && s == TFC_OK; r0 += R) {
        const int64_t nc = N - r0 < R ? N - r0 : R;
        const char *hc = hp + (size_t)(r0 * h->strides[0]) * oes;
        int th;
        int64_t ldh;
        if (!tfc_gemm_layout(nc, C, h->strides[0], h->strides[1], &th, &ldh)) {
            s = tfc_err(TFC_ERR_INTERNAL, "%s: h %s is not a GEMM operand", fn, SHAPE(h));
            break;
        }
        tfc_gemm_problem zc = base; /* z_c = h_c · wᵀ */
        zc.trans_a = th, zc.trans_b = twt, zc.M = nc, zc.N = V, zc.K = C;
        zc.a = hc, zc.lda = ldh, zc.b = tfc_data(w), zc.ldb = ldwt, zc.c = tfc_data(z), zc.ldc = V;
        s = TFC_BACKEND_RUN(fn, be, gemm, &zc);
        tfc_ce_rows_problem rows = {.device = base.device,
                                    .dtype = dt,
                                    .index_dtype = idt,
                                    .n = nc,
                                    .c = V,
                                    .ignore_index = ignore_index,
                                    .x = tfc_data(z),
                                    .targets = (const char *)t + (size_t)r0 * tfc_dtype_size(idt),
                                    .to_grad = dh || dw,
                                    .scale = nv ? 1.0 / (double)nv : 0.0,
                                    .row_loss = row_loss};
        if (s == TFC_OK) s = TFC_BACKEND_RUN(fn, be, cross_entropy_rows, &rows);
        for (int64_t r = 0; r < nc && s == TFC_OK; r++) total += row_loss[r];
        if (s == TFC_OK && (round_dz || bf16_ops) && (dh || dw)) { /* autocast: ∂loss/∂z_c enters as bf16 values */
            tfc_tensor *zc_view = NULL, *zbc_view = NULL;
            s = tfc_tensor_alias(z, (int64_t[]){nc, V}, (int64_t[]){V, 1}, 2, 0, &zc_view);
            if (s == TFC_OK && bf16_ops) {
                s = tfc_tensor_alias(zb, (int64_t[]){nc, V}, (int64_t[]){V, 1}, 2, 0, &zbc_view);
                if (s == TFC_OK) s = tfc_tensor_copy_view(fn, zbc_view, zc_view);
            } else if (s == TFC_OK) {
                s = tfc_tensor_map(fn, TFC_MAP_ROUND_BF16, zc_view, zc_view, NULL, NULL, 0.0, 0);
            }
            tfc_tensor_release(zc_view);
            tfc_tensor_release(zbc_view);
        }
        const void *dz = bf16_ops && (dh || dw) ? tfc_data(zb) : tfc_data(z);
        if (s == TFC_OK && dh) { /* dh_c = z_c · w */
            tfc_gemm_problem g = base;
            g.trans_b = tw, g.M = nc, g.N = C, g.K = V;
            g.a = dz, g.lda = V, g.b = tfc_data(w), g.ldb = ldw;
            g.c = (char *)tfc_data(dh) + (size_t)(r0 * C) * es, g.ldc = C;
            s = TFC_BACKEND_RUN(fn, be, gemm, &g);
        }
        if (s == TFC_OK && dw) { /* dW (+)= z_cᵀ · h_c */
            tfc_gemm_problem g = base;
            g.trans_a = 1, g.trans_b = th, g.M = V, g.N = C, g.K = nc, g.beta = r0 == 0 ? 0.0 : 1.0;
            g.a = dz, g.lda = V, g.b = hc, g.ldb = ldh, g.c = tfc_data(dw), g.ldc = C;
            s = TFC_BACKEND_RUN(fn, be, gemm, &g);
        }
    }
    if (s == TFC_OK && dw && N == 0) s = tfc_tensor_fill(dw, 0.0);
    if (s == TFC_OK) s = tfc_tensor_fill(loss, nv ? total / (double)nv : (double)NAN);
    free(row_loss);
    tfc_tensor_release(z);
    tfc_tensor_release(zb);
    return tfc_err_in(fn, s);
}

/*
 * For a backend without the fused row entry (CUDA): the unfused composition
 * z = h · wᵀ (wᵀ as a flag), then the fused softmax + cross-entropy op,
 * recorded as ordinary nodes. Same loss and gradients; it does materialise
 * the [N, V] logits and their gradient.
 */
static tfc_status composed(tfc_graph *g, const tfc_tensor *h, const tfc_tensor *w, const tfc_tensor *targets,
                           int64_t ignore_index, tfc_tensor **loss) {
    tfc_tensor *wt = NULL, *z = NULL;
    tfc_status s = tfc_transpose(g, w, 0, 1, &wt);
    if (s == TFC_OK) s = tfc_matmul(g, h, wt, &z);
    if (s == TFC_OK) s = tfc_cross_entropy(g, z, targets, ignore_index, loss);
    tfc_tensor_release(wt);
    tfc_tensor_release(z);
    return s;
}

/* Count the valid targets, checking each is in [0, V) or ignore_index (host memory: the fused path's backends). */
static tfc_status count_targets(const char *fn, const void *t, tfc_dtype idt, int64_t n, int64_t V,
                                int64_t ignore_index, int64_t *nv) {
    *nv = 0;
    for (int64_t r = 0; r < n; r++) {
        int64_t id = tfc_index_at(t, idt, r);
        if (id == ignore_index) continue;
        if (id < 0 || id >= V)
            return tfc_err(TFC_ERR_INVALID_ARG,
                           "%s: targets[%lld] is %lld, outside [0, %lld) and not ignore_index %lld", fn, (long long)r,
                           (long long)id, (long long)V, (long long)ignore_index);
        ++*nv;
    }
    return TFC_OK;
}

/* The gradients for an upstream gradient of 1, computed during the forward (each only when wanted). */
typedef struct lce_ctx {
    tfc_saved dh, dw;
} lce_ctx;

/* grad_in = g_loss · (dh, dW); the saved tensors themselves when g_loss is 1. */
static tfc_status lce_node_backward(tfc_node *n, tfc_tensor *const *gout, tfc_tensor **gin) {
    if (!gout[0]) return TFC_OK;
    const lce_ctx *c = n->ctx;
    double gl;
    TFC_TRY(tfc_tensor_item(gout[0], &gl));
    for (int32_t i = 0; i < 2; i++) {
        tfc_tensor *saved = i == 0 ? c->dh.t : c->dw.t;
        if (!tfc_node_needs_grad(n, i) || !saved) continue;
        if (gl == 1.0)
            gin[i] = tfc_tensor_retain(saved);
        else
            TFC_TRY(tfc_mul_scalar(NULL, saved, gl, &gin[i]));
    }
    return TFC_OK;
}

/*
 * The fused op with the gradients recorded for h and w (when they want them)
 * but the pass run on h_op and w_op (h and w themselves, or their autocast
 * roundings, of the same shapes), ∂loss/∂z rounded to bf16 when round_dz.
 * Arguments checked; the backend has cross_entropy_rows.
 */
static tfc_status lce(const char *fn, const tfc_backend *be, tfc_graph *g, const tfc_tensor *h, const tfc_tensor *w,
                      const tfc_tensor *h_op, const tfc_tensor *w_op, const tfc_tensor *targets, int64_t ignore_index,
                      int round_dz, tfc_tensor **loss) {
    const int64_t N = h->shape[0], C = h->shape[1], V = w->shape[0];
    const tfc_tensor *ins[2] = {h, w};
    const int record = tfc_should_record(g, ins, 2);
    const int need_dh = record && h->requires_grad, need_dw = record && w->requires_grad;
    tfc_tensor *ht = NULL, *wt = NULL, *out = NULL, *dh = NULL, *dw = NULL;
    const tfc_tensor *hu = h_op, *wu = w_op;
    const void *tp;
    int64_t nv = 0;
    tfc_operands o = {0};
    tfc_status s = tfc_operand(&o, targets, &tp);
    if (s == TFC_OK) s = count_targets(fn, tp, targets->dtype, N, V, ignore_index, &nv);
    if (s == TFC_OK && !blas_addressable(hu)) s = tfc_make_contiguous(hu, &ht), hu = ht;
    if (s == TFC_OK && !blas_addressable(wu)) s = tfc_make_contiguous(wu, &wt), wu = wt;
    if (s == TFC_OK) s = tfc_tensor_new_on(h, NULL, 0, h->dtype, &out);
    if (s == TFC_OK && need_dh) s = tfc_tensor_new_on(h, (int64_t[]){N, C}, 2, h->dtype, &dh);
    if (s == TFC_OK && need_dw) s = tfc_tensor_new_on(h, (int64_t[]){V, C}, 2, h->dtype, &dw);
    if (s == TFC_OK) s = lce_pass(fn, be, hu, wu, tp, targets->dtype, nv, ignore_index, round_dz, out, dh, dw);
    if (s == TFC_OK && record) {
        tfc_node *n;
        s = tfc_node_new(g, fn, lce_node_backward, 2, 1, sizeof(lce_ctx), &n);
        if (s == TFC_OK) {
            lce_ctx *c = n->ctx;
            tfc_node_set_input(n, 0, h);
            tfc_node_set_input(n, 1, w);
            s = tfc_node_keep(n, &c->dh, dh);
            if (s == TFC_OK) s = tfc_node_keep(n, &c->dw, dw);
            if (s == TFC_OK) s = tfc_node_attach_output(n, 0, out);
        }
    }
    tfc_operands_release(&o);
    tfc_tensor_release(ht);
    tfc_tensor_release(wt);
    tfc_tensor_release(dh);
    tfc_tensor_release(dw);
    if (s != TFC_OK) {
        tfc_tensor_release(out);
        return tfc_err_in(fn, s);
    }
    *loss = out;
    return TFC_OK;
}

TFC_API tfc_status tfc_linear_cross_entropy(tfc_graph *g, const tfc_tensor *h, const tfc_tensor *w,
                                            const tfc_tensor *targets, int64_t ignore_index, tfc_tensor **loss) {
    const char *fn = "tfc_linear_cross_entropy";
    TFC_CHECK_NOT_NULL(fn, loss);
    TFC_TRY(check_args(fn, h, w, targets));
    const tfc_backend *be;
    TFC_TRY(tfc_tensor_backend(fn, h, &be));
    if (!be->cross_entropy_rows) return composed(g, h, w, targets, ignore_index, loss);
    return lce(fn, be, g, h, w, h, w, targets, ignore_index, 0, loss);
}

tfc_status tfc_linear_cross_entropy_autocast(tfc_graph *g, const tfc_tensor *h, const tfc_tensor *w,
                                             const tfc_tensor *w_bf16, const tfc_tensor *targets, int64_t ignore_index,
                                             int *fused, tfc_tensor **loss) {
    const char *fn = "tfc_linear_cross_entropy_autocast";
    TFC_CHECK_NOT_NULL(fn, fused);
    *fused = 0;
    TFC_CHECK_NOT_NULL(fn, loss);
    TFC_CHECK_NOT_NULL(fn, w_bf16);
    TFC_TRY(check_args(fn, h, w, targets));
    if (h->dtype != TFC_DTYPE_F32)
        return tfc_err(TFC_ERR_DTYPE, "%s: h is %s %s; need f32 (autocast rounds f32 operands)", fn,
                       tfc_dtype_name(h->dtype), SHAPE(h));
    if (w_bf16->dtype != TFC_DTYPE_BF16 || w_bf16->ndim != 2 || w_bf16->shape[0] != w->shape[0] ||
        w_bf16->shape[1] != w->shape[1])
        return tfc_err(TFC_ERR_SHAPE, "%s: w_bf16 is %s %s, w is %s: need bf16 of w's shape", fn,
                       tfc_dtype_name(w_bf16->dtype), SHAPE(w_bf16), SHAPE(w));
    const tfc_tensor *ts[2] = {h, w_bf16};
    const char *names[2] = {"h", "w_bf16"};
    TFC_TRY(tfc_same_device(fn, ts, names, 2));
    const tfc_backend *be;
    TFC_TRY(tfc_tensor_backend(fn, h, &be));
    const int32_t form = tfc_backend_bf16_operands(be, INT64_MAX);
    if (!be->cross_entropy_rows || form < 0) return TFC_OK; /* the caller composes */
    tfc_tensor *hr = NULL, *wr = NULL;
    tfc_status s;
    if (form == TFC_DTYPE_F32) { /* bf16 values in f32 storage, the f32 GEMM */
        s = tfc_map_new(fn, TFC_MAP_ROUND_BF16, h->shape, 2, TFC_DTYPE_F32, h, NULL, NULL, 0.0, &hr);
        if (s == TFC_OK) s = tfc_cast(NULL, w_bf16, TFC_DTYPE_F32, &wr);
    } else { /* bf16 storage, the bf16 GEMM */
        s = tfc_cast(NULL, h, TFC_DTYPE_BF16, &hr);
        wr = tfc_tensor_retain((tfc_tensor *)w_bf16);
    }
    if (s == TFC_OK) s = lce(fn, be, g, h, w, hr, wr, targets, ignore_index, 1, loss);
    tfc_tensor_release(hr);
    tfc_tensor_release(wr);
    if (s == TFC_OK) *fused = 1;
    return tfc_err_in(fn, s);
}
