/*
 * bf16 autocast of a GPT (tfc_gpt_set_autocast): every Linear of the blocks
 * and the LM head run as tfc_linear_bf16 — operands rounded to bf16 as they
 * enter the GEMM, f32 accumulation, f32 outputs and f32 gradients to the f32
 * master weights — while embeddings, LayerNorm, GELU, softmax,
 * cross-entropy and the optimizer stay f32. Attention takes the device's
 * autocast dtype (lib/ops/attention_autocast.c: bf16 on CUDA, f32 on the
 * CPU), chosen in gpt.c's attend(). The block Linears reach
 * tfc_gpt_autocast_linear through their strategy (gpt_linear.c), chosen
 * again whenever autocast is set or cleared.
 *
 * The bf16 weight copies: one slot per Linear weight (GPT_N_LINEAR per
 * layer, then the head), rounded when the slot's weight is first used and
 * again only when the weight's version changed (an optimizer step, a load,
 * a copy): once per optimizer step, not per GEMM. A refresh makes a new
 * bf16 tensor rather than overwriting the old one, so a graph that saved
 * the old copy for backward keeps a valid one. A slot holds a reference to
 * the weight it was rounded from, so a replaced weight (a device move, a
 * new parameter) can never be mistaken for the cached one by address.
 * Forwards without a graph may run on one model from several threads (the
 * header's promise), so slots are read and refreshed under a mutex, and a
 * caller gets its own reference to the copy.
 */
#include <pthread.h>
#include <stdlib.h>

#include "core/error.h"
#include "model/gpt_impl.h"
#include "ops/linear_bf16.h"
#include "ops/linear_cross_entropy.h"
#include "tensor/dispatch.h"

typedef struct ac_slot {
    tfc_tensor *src;  /* the f32 weight the copy was rounded from (a reference), or NULL */
    uint64_t version; /* src's version then */
    tfc_tensor *bf16; /* the rounded copy, same shape as src */
} ac_slot;

struct gpt_autocast {
    pthread_mutex_t mu;
    int32_t n; /* n_layer · GPT_N_LINEAR + 1 (the head) */
    ac_slot *slots;
    int64_t refreshes; /* copies made, for tests and the docs' claim (tfc_gpt_autocast_refreshes) */
};

static void free_slots(gpt_autocast *a) {
    for (int32_t i = 0; i < a->n; i++) {
        tfc_tensor_release(a->slots[i].src);
        tfc_tensor_release(a->slots[i].bf16);
    }
}

void tfc_gpt_autocast_free(tfc_gpt *m) {
    gpt_autocast *a = m->autocast;
    if (!a) return;
    free_slots(a);
    free(a->slots);
    pthread_mutex_destroy(&a->mu);
    free(a);
    m->autocast = NULL;
}

/*
 * bf16(w) [rows, C] for w [V, C] with rows ≥ V: the rows past V zero (the
 * LM head padded to the device's GEMM column multiple).
 */
/* Zeros [d] of dtype on like's device. */
static tfc_status zeros_on(const tfc_tensor *like, const int64_t *d, int32_t nd, tfc_dtype dtype, tfc_tensor **out) {
    tfc_tensor *r = NULL;
    TFC_TRY(tfc_tensor_new_on(like, d, nd, dtype, &r));
    tfc_status s = tfc_tensor_fill(r, 0.0);
    if (s != TFC_OK) {
        tfc_tensor_release(r);
        return s;
    }
    *out = r;
    return TFC_OK;
}

static tfc_status round_rows(const tfc_tensor *w, int64_t rows, tfc_tensor **out) {
    const int64_t V = tfc_tensor_dim(w, 0);
    if (rows == V) return tfc_cast(NULL, w, TFC_DTYPE_BF16, out);
    const int64_t d[2] = {rows, tfc_tensor_dim(w, 1)};
    tfc_tensor *r = NULL, *top = NULL;
    tfc_status s = zeros_on(w, d, 2, TFC_DTYPE_BF16, &r);
    if (s == TFC_OK) s = tfc_narrow(NULL, r, 0, 0, V, &top);
    if (s == TFC_OK) s = tfc_tensor_copy_from(top, w); /* f32 -> bf16, round to nearest even */
    tfc_tensor_release(top);
    if (s != TFC_OK) {
        tfc_tensor_release(r);
        return s;
    }
    *out = r;
    return TFC_OK;
}

/*
 * *wb: a new reference to slot i's bf16 copy of w ([rows, C], rows ≥ w's V: see round_rows), rounded now when the
 * cached one is not of w's current values.
 */
static tfc_status weight_copy(gpt_autocast *a, int32_t i, const tfc_tensor *w, int64_t rows, tfc_tensor **wb) {
    pthread_mutex_lock(&a->mu);
    ac_slot *sl = &a->slots[i];
    uint64_t v = tfc_tensor_version(w);
    tfc_status s = TFC_OK;
    if (sl->src != w || sl->version != v || !sl->bf16 || tfc_tensor_dim(sl->bf16, 0) != rows) {
        tfc_tensor *r = NULL;
        s = round_rows(w, rows, &r);
        if (s == TFC_OK) {
            tfc_tensor_release(sl->src);
            tfc_tensor_release(sl->bf16);
            sl->src = tfc_tensor_retain((tfc_tensor *)w);
            sl->version = v;
            sl->bf16 = r;
            a->refreshes++;
        }
    }
    if (s == TFC_OK) *wb = tfc_tensor_retain(sl->bf16);
    pthread_mutex_unlock(&a->mu);
    return s;
}

tfc_status tfc_gpt_autocast_linear(const tfc_gpt *m, tfc_graph *g, const gpt_linear *l, const tfc_tensor *x,
                                   tfc_tensor **y) {
    tfc_tensor *wb = NULL, *wt = NULL, *wbt = NULL;
    TFC_TRY(weight_copy(m->autocast, l->slot, l->w, tfc_tensor_dim(l->w, 0), &wb));
    if (l->in_out) {
        tfc_status s = tfc_linear_bf16(g, x, l->w, wb, l->b, y);
        tfc_tensor_release(wb);
        return s;
    }
    /* w [out, in] (nn.Linear's): transposed views of it and its copy, no copies (w's recorded on g) */
    tfc_status s = tfc_transpose(g, l->w, 0, 1, &wt);
    if (s == TFC_OK) s = tfc_transpose(NULL, wb, 0, 1, &wbt);
    if (s == TFC_OK) s = tfc_linear_bf16(g, x, wt, wbt, l->b, y);
    tfc_tensor_release(wb);
    tfc_tensor_release(wt);
    tfc_tensor_release(wbt);
    return s;
}

/*
 * The head under autocast. Where the device pads GEMM columns (caps.gemm_pad_cols: CUDA, V = 50257 → 50304), the bf16
 * copy of w has Vp ≥ V rows (the rest zero) and the GEMMs run Vp wide; the Vp − V padding logits get a bias of
 * PAD_LOGIT, so with `padded` (the loss path) the caller's softmax cross-entropy over all Vp columns is the one
 * over V — exp(PAD_LOGIT − max) is 0 in f32 and those columns' gradient is 0 — and otherwise *lg is the [N, V]
 * view of the first V columns. PAD_LOGIT is finite so anomaly detection does not see an infinity.
 */
#define PAD_LOGIT (-1e30)

tfc_status tfc_gpt_autocast_head(const tfc_gpt *m, tfc_graph *g, const tfc_tensor *h, const tfc_tensor *w, int padded,
                                 tfc_tensor **lg) {
    gpt_autocast *a = m->autocast;
    const int64_t V = tfc_tensor_dim(w, 0), Vp = tfc_gemm_pad_cols(w, V);
    tfc_tensor *wb = NULL, *wt = NULL, *wbt = NULL, *bias = NULL, *pad = NULL, *lp = NULL;
    TFC_TRY(weight_copy(a, a->n - 1, w, Vp, &wb));
    /* w is [V, C]; tfc_linear_bf16 takes [in, out]: transposed views, no copies (w's recorded on g, so its
     * gradient reaches w). */
    tfc_status s = tfc_transpose(g, w, 0, 1, &wt);
    if (s == TFC_OK) s = tfc_transpose(NULL, wb, 0, 1, &wbt);
    if (s == TFC_OK && Vp == V) s = tfc_linear_bf16(g, h, wt, wbt, NULL, lg);
    if (s == TFC_OK && Vp > V) {
        const int64_t nb[1] = {Vp};
        s = zeros_on(h, nb, 1, TFC_DTYPE_F32, &bias);
        if (s == TFC_OK) s = tfc_narrow(NULL, bias, 0, V, Vp - V, &pad);
        if (s == TFC_OK) s = tfc_tensor_fill(pad, PAD_LOGIT);
        if (s == TFC_OK) s = tfc_linear_bf16_padded(g, h, wt, wbt, bias, &lp);
        if (s == TFC_OK && padded) {
            *lg = lp;
            lp = NULL;
        } else if (s == TFC_OK) {
            s = tfc_narrow(g, lp, tfc_tensor_ndim(lp) - 1, 0, V, lg);
        }
    }
    tfc_tensor_release(wb);
    tfc_tensor_release(wt);
    tfc_tensor_release(wbt);
    tfc_tensor_release(bias);
    tfc_tensor_release(pad);
    tfc_tensor_release(lp);
    return s;
}

tfc_status tfc_gpt_autocast_loss(const tfc_gpt *m, tfc_graph *g, const tfc_tensor *h, const tfc_tensor *w,
                                 const tfc_tensor *targets, int64_t ignore_index, int *fused, tfc_tensor **loss) {
    *fused = 0;
    const int64_t V = tfc_tensor_dim(w, 0);
    /* A device that pads the head (CUDA) keeps the padded copy; its GEMMs are bf16 and it composes the head. */
    if (tfc_gemm_pad_cols(w, V) != V) return TFC_OK;
    tfc_tensor *wb = NULL;
    TFC_TRY(weight_copy(m->autocast, m->autocast->n - 1, w, V, &wb));
    tfc_status s = tfc_linear_cross_entropy_autocast(g, h, w, wb, targets, ignore_index, fused, loss);
    tfc_tensor_release(wb);
    return s;
}

/*
 * Whether m can run autocast: f32 and not quantized. Its device needs a bf16 GEMM with an f32 result (the gemm
 * entry's c_f32), which the CPU has and the CUDA module's cuBLASLt path provides; a backend without it fails the
 * first forward in tfc_linear_bf16 / the gemm entry, naming the device, rather than here.
 */
static tfc_status check_model(const char *fn, const tfc_gpt *m) {
    char what[64];
    if (tfc_gpt_is_quantized(m))
        return tfc_err(TFC_ERR_UNSUPPORTED,
                       "%s: the model is quantized (%s): bf16 autocast is for f32 models (set it before "
                       "quantizing, or quantize without it)",
                       fn, tfc_gpt_quant_desc(m, what, sizeof what));
    if (m->cfg.dtype != TFC_DTYPE_F32)
        return tfc_err(TFC_ERR_DTYPE, "%s: the model is %s; bf16 autocast needs an f32 model (its master weights)", fn,
                       tfc_dtype_name(m->cfg.dtype));
    return TFC_OK;
}

/*
 * The weights moved (tfc_gpt_to_device): the copies are of the old tensors, on the old device. Dropping them now
 * rather than at the next forward frees the old device's memory at once (a slot's reference would otherwise keep the
 * old f32 weight alive too, a whole model's worth on the device just left).
 */
void tfc_gpt_autocast_drop_copies(tfc_gpt *m) {
    gpt_autocast *a = m->autocast;
    if (!a) return;
    pthread_mutex_lock(&a->mu);
    free_slots(a);
    for (int32_t i = 0; i < a->n; i++) a->slots[i] = (ac_slot){0};
    pthread_mutex_unlock(&a->mu);
}

tfc_status tfc_gpt_autocast_check(const char *fn, const tfc_gpt *m) { return check_model(fn, m); }

TFC_API tfc_status tfc_gpt_set_autocast(tfc_gpt *m, tfc_dtype dtype) {
    const char *fn = "tfc_gpt_set_autocast";
    TFC_CHECK_NOT_NULL(fn, m);
    if (dtype == TFC_DTYPE_F32) {
        tfc_gpt_autocast_free(m);
        tfc_gpt_choose_linears(m);
        return TFC_OK;
    }
    if (dtype != TFC_DTYPE_BF16)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: dtype is %s; need bf16 (on) or f32 (off)", fn, tfc_dtype_name(dtype));
    TFC_TRY(check_model(fn, m));
    if (m->autocast) return TFC_OK;
    gpt_autocast *a = calloc(1, sizeof *a);
    int32_t n = m->cfg.n_layer * GPT_N_LINEAR + 1;
    ac_slot *slots = calloc((size_t)n, sizeof *slots);
    if (!a || !slots || pthread_mutex_init(&a->mu, NULL) != 0) {
        free(a);
        free(slots);
        return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    }
    a->n = n;
    a->slots = slots;
    m->autocast = a;
    tfc_gpt_choose_linears(m);
    return TFC_OK;
}

TFC_API tfc_dtype tfc_gpt_get_autocast(const tfc_gpt *m) { return m && m->autocast ? TFC_DTYPE_BF16 : TFC_DTYPE_F32; }

TFC_API int64_t tfc_gpt_autocast_refreshes(const tfc_gpt *m) {
    if (!m || !m->autocast) return 0;
    gpt_autocast *a = m->autocast;
    pthread_mutex_lock(&a->mu);
    int64_t r = a->refreshes;
    pthread_mutex_unlock(&a->mu);
    return r;
}
