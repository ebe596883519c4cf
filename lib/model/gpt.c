/*
 * The forward pass of every architecture (GPT-2 and the Llama family),
 * written as a composition of the library's public ops (so autograd gives
 * every gradient). What differs between architectures is read from
 * m->arch by small functions — norm_op(), positions(), project_heads(),
 * mlp() — never by a second forward. The parameters it reads are made in
 * gpt_params.c; configs are gpt_config.c's.
 *
 * Shapes: B batch, T positions, C = n_embd, H query heads, Hkv key/value
 * heads, D = C/H, F the MLP width, V vocab. The residual stream is kept as a
 * [B·T, C] matrix so every Linear layer is one GEMM.
 */
#include <math.h>
#include <stdlib.h>

#include "core/error.h"
#include "model/gpt_impl.h"
#include "ops/attention_autocast.h"
#include "tensor/tensor_impl.h"

/* t on the model's device: a new reference to t, or a copy of a CPU t (ids, targets, positions). */
static tfc_status on_model_device(const tfc_gpt *m, const char *fn, const char *arg, const tfc_tensor *t,
                                  tfc_tensor **out) {
    tfc_device_type md = tfc_tensor_device_type(m->wte), td = tfc_tensor_device_type(t);
    int32_t mi = tfc_tensor_device_index(m->wte), ti = tfc_tensor_device_index(t);
    if (md == td && mi == ti) {
        *out = tfc_tensor_retain((tfc_tensor *)t);
        return TFC_OK;
    }
    if (td != TFC_DEVICE_CPU)
        return tfc_err(TFC_ERR_DEVICE,
                       "%s: %s lives on cuda:%d but the model on %s:%d; pass it on the CPU or the "
                       "model's device",
                       fn, arg, (int)ti, md == TFC_DEVICE_CPU ? "cpu" : "cuda", (int)mi);
    return tfc_tensor_to_device(t, md, mi, out);
}

/*
 * Temporaries of one forward pass. Every op result is pushed here and
 * released at the end; the graph keeps what backward needs alive.
 */
typedef struct scope {
    tfc_tensor **t;
    int32_t n, cap;
} scope;

static tfc_status keep(scope *sc, tfc_tensor *t) {
    if (sc->n == sc->cap) {
        int32_t cap = sc->cap ? 2 * sc->cap : 64;
        tfc_tensor **nt = realloc(sc->t, (size_t)cap * sizeof *nt);
        if (!nt) {
            tfc_tensor_release(t);
            return tfc_err(TFC_ERR_OOM, "tfc_gpt_forward: out of memory");
        }
        sc->t = nt;
        sc->cap = cap;
    }
    sc->t[sc->n++] = t;
    return TFC_OK;
}

static void scope_free(scope *sc) {
    for (int32_t i = 0; i < sc->n; i++) tfc_tensor_release(sc->t[i]);
    free(sc->t);
}

/* A training forward's dropout (gpt_dropout.c): on when train, masks from (the model's seed, counter, site). */
typedef struct gpt_drop {
    int train;
    uint64_t counter;
} gpt_drop;

/*
 * One forward pass as the blocks see it: the model (whose arch says what
 * to compute), the graph (NULL: nothing recorded), the temporaries, the
 * dropout stream, and where the keys and values go: a cache (positions
 * start .. start+T-1 after what it holds), per-sequence caches (seqs, T =
 * 1) or neither (a training or scoring forward).
 */
typedef struct fwd {
    tfc_gpt *m;
    tfc_graph *g;
    scope sc;
    gpt_drop dr;
    tfc_gpt_cache *cache;
    tfc_gpt_cache *const *seqs;
    int64_t B, T, start;
    const tfc_tensor *pos;      /* i64 positions on the model's device: [T], or [B, 1] with seqs */
    const tfc_tensor *inv_freq; /* GPT_POS_ROPE: the rotary frequencies [D/2] of this forward */
} fwd;

/* Run an op that writes its result to &r (r may also be an input: it is only written on success) and push r. */
#define KEEP(f, r, call)            \
    do {                            \
        TFC_TRY(call);              \
        TFC_TRY(keep(&(f)->sc, r)); \
    } while (0)

/* y = x through Linear l, by the strategy chosen for it (gpt_linear.c); x [N, in], *y [N, out], pushed. */
static tfc_status linear(fwd *f, const gpt_linear *l, const tfc_tensor *x, tfc_tensor **y) {
    tfc_tensor *r;
    KEEP(f, r, l->ops->run(f->m, f->g, l, x, &r));
    *y = r;
    return TFC_OK;
}

/* The architecture's normalization of x [N, C] (arch.norm); *y is not pushed. */
static tfc_status norm_op(const fwd *f, const tfc_tensor *w, const tfc_tensor *b, const tfc_tensor *x, tfc_tensor **y) {
    switch (f->m->arch.norm) {
    case GPT_NORM_LAYER: return tfc_layernorm(f->g, x, w, b, f->m->arch.norm_eps, y);
    case GPT_NORM_RMS: return tfc_rmsnorm(f->g, x, w, f->m->arch.norm_eps, y);
    }
    return tfc_err(TFC_ERR_INTERNAL, "gpt: norm kind %d", (int)f->m->arch.norm);
}

static tfc_status norm(fwd *f, const tfc_tensor *w, const tfc_tensor *b, const tfc_tensor *x, tfc_tensor **y) {
    tfc_tensor *r;
    KEEP(f, r, norm_op(f, w, b, x, &r));
    *y = r;
    return TFC_OK;
}

/* x after dropout site `site` (x itself when not training), pushed. */
static tfc_status drop(fwd *f, int64_t site, const tfc_tensor *x, tfc_tensor **y) {
    tfc_tensor *r;
    KEEP(f, r, tfc_gpt_dropout_site(f->m, f->g, f->dr.train, f->dr.counter, site, x, &r));
    *y = r;
    return TFC_OK;
}

/* The architecture's attention options: its sliding window (0: none). */
static tfc_attention_options attn_options(const tfc_gpt *m) {
    tfc_attention_options o = TFC_ATTENTION_OPTIONS_INIT;
    o.window = m->arch.window;
    return o;
}

/*
 * Decoding step of B independent sequences (T = 1; q [B,H,1,D], k, v [B,Hkv,1,D]):
 * sequence b appends its key and value to its own cache at its own length
 * L_b and its query attends over those L_b + 1 positions. *att is [B,H,1,D].
 */
static tfc_status attend_per_sequence(fwd *f, int32_t layer, tfc_tensor *const heads[3], double scale,
                                      tfc_tensor **att) {
    const int64_t B = f->B;
    tfc_tensor **outs = calloc((size_t)B, sizeof *outs);
    if (!outs) return tfc_err(TFC_ERR_OOM, "tfc_gpt_run_seqs: out of memory");
    tfc_status s = TFC_OK;
    for (int64_t b = 0; b < B && s == TFC_OK; b++) {
        tfc_gpt_cache *c = f->seqs[b];
        tfc_tensor *mine[3] = {NULL, NULL, NULL}, *all[2] = {NULL, NULL}, *kv[2] = {c->k[layer], c->v[layer]};
        for (int i = 0; i < 3 && s == TFC_OK; i++) s = tfc_narrow(NULL, heads[i], 0, b, 1, &mine[i]);
        for (int i = 0; i < 2 && s == TFC_OK; i++) {
            tfc_tensor *dst;
            s = tfc_narrow(NULL, kv[i], 2, c->len, 1, &dst);
            if (s == TFC_OK) {
                s = tfc_tensor_copy_from(dst, mine[1 + i]);
                tfc_tensor_release(dst);
            }
            if (s == TFC_OK) s = tfc_narrow(NULL, kv[i], 2, 0, c->len + 1, &all[i]);
        }
        /* the same causal kernel tfc_gpt_generate's T = 1 steps run (only the window masks at T = 1) */
        const tfc_attention_options o = attn_options(f->m);
        if (s == TFC_OK) s = tfc_attention_ex(NULL, mine[0], all[0], all[1], 1, scale, &o, &outs[b]);
        for (int i = 0; i < 3; i++) tfc_tensor_release(mine[i]);
        for (int i = 0; i < 2; i++) tfc_tensor_release(all[i]);
    }
    tfc_tensor *r = NULL;
    if (s == TFC_OK) s = tfc_concat(NULL, (const tfc_tensor *const *)outs, (int32_t)B, 0, &r);
    for (int64_t b = 0; b < B; b++) tfc_tensor_release(outs[b]);
    free(outs);
    if (s == TFC_OK) s = keep(&f->sc, r);
    if (s == TFC_OK) *att = r;
    return s;
}

/*
 * Causal attention of q [B,H,T,D] over k, v [B,Hkv,T,D] at positions
 * start .. start+T-1 (grouped-query heads and the window read in place by
 * the kernel); with a cache, k and v are first appended to it and the query
 * attends over all start+T cached positions. *att is [B,H,T,D].
 */
static tfc_status attend(fwd *f, int32_t layer, tfc_tensor *const heads[3], double scale, tfc_tensor **att) {
    const tfc_tensor *k = heads[1], *v = heads[2];
    if (f->cache) {
        tfc_tensor *kv[2] = {f->cache->k[layer], f->cache->v[layer]};
        for (int i = 0; i < 2; i++) {
            tfc_tensor *dst, *all;
            TFC_TRY(tfc_narrow(NULL, kv[i], 2, f->start, f->T, &dst));
            tfc_status s = tfc_tensor_copy_from(dst, heads[1 + i]);
            tfc_tensor_release(dst);
            TFC_TRY(s);
            KEEP(f, all, tfc_narrow(NULL, kv[i], 2, 0, f->start + f->T, &all));
            if (i == 0)
                k = all;
            else
                v = all;
        }
    }
    tfc_tensor *r;
    const tfc_attention_options o = attn_options(f->m);
    /* Autocast: the device's attention dtype (bf16 on CUDA); with a cache (sampling) the f32 cache stays f32. */
    if (f->m->autocast && !f->cache)
        KEEP(f, r, tfc_attention_autocast_ex(f->g, heads[0], k, v, 1, scale, &o, &r));
    else
        KEEP(f, r, tfc_attention_ex(f->g, heads[0], k, v, 1, scale, &o, &r));
    *att = r;
    return TFC_OK;
}

/*
 * GPT-2's q, k, v [B,H,T,D] of qkv [B·T, 3C]: [B,T,3,H,D] → [3,B,H,T,D],
 * split on the leading 3, so q, k, v are strided views of qkv and backward
 * writes dq, dk, dv into one dqkv buffer already in qkv's layout (one copy,
 * no zero fills, no adds).
 */
static tfc_status split_heads(fwd *f, const tfc_tensor *qkv, tfc_tensor *heads[3]) {
    const gpt_arch *a = &f->m->arch;
    const int64_t bt3hd[5] = {f->B, f->T, 3, a->n_head, a->head_dim};
    const int32_t to_qkv_heads[5] = {2, 0, 3, 1, 4};
    tfc_tensor *qkv5, *qkv_h, *parts[3] = {NULL, NULL, NULL};
    KEEP(f, qkv5, tfc_view(f->g, qkv, bt3hd, 5, &qkv5));
    KEEP(f, qkv_h, tfc_permute(f->g, qkv5, to_qkv_heads, 5, &qkv_h));
    const int64_t ones[3] = {1, 1, 1};
    TFC_TRY(tfc_split(f->g, qkv_h, ones, 3, 0, parts));
    tfc_status s = TFC_OK;
    for (int i = 0; i < 3; i++)
        if (s == TFC_OK)
            s = keep(&f->sc, parts[i]);
        else
            tfc_tensor_release(parts[i]);
    TFC_TRY(s);
    for (int i = 0; i < 3; i++) KEEP(f, heads[i], tfc_squeeze(f->g, parts[i], 0, &heads[i])); /* [B,H,T,D] */
    return TFC_OK;
}

/*
 * Causal self-attention on h [B·T, C] at positions start .. start+T-1:
 * q [B,H,T,D], k, v [B,Hkv,T,D] (project_heads); keys/values appended to
 * the cache (if any) and attention taken over all S = start+T positions,
 * or with seqs (T = 1) per sequence over its own cache
 * (attend_per_sequence); y = dropout(concat_heads(softmax(q kᵀ/√D + causal
 * [+ window]) v) · W_o (+ b)).
 */
/* y [B·T, n·D] as heads [B,n,T,D]: a strided view (the kernels read it in place), pushed. */
static tfc_status as_heads(fwd *f, const tfc_tensor *y, int32_t n, tfc_tensor **heads) {
    const int64_t bthd[4] = {f->B, f->T, n, f->m->arch.head_dim};
    const int32_t to_heads[4] = {0, 2, 1, 3};
    tfc_tensor *v4;
    KEEP(f, v4, tfc_view(f->g, y, bthd, 4, &v4));
    KEEP(f, *heads, tfc_permute(f->g, v4, to_heads, 4, heads));
    return TFC_OK;
}

/* x [B,n,T,D] rotated at the forward's positions (the Llama family's RoPE), pushed. */
static tfc_status rotate(fwd *f, tfc_tensor **x) {
    tfc_tensor *r;
    KEEP(f, r, tfc_rope(f->g, *x, f->pos, f->inv_freq, &r));
    *x = r;
    return TFC_OK;
}

/*
 * The attention's q [B,H,T,D], k and v [B,Hkv,T,D] of h [B·T, C], with the
 * positions applied: GPT-2's one fused c_attn split into heads; the Llama
 * family's q_proj, k_proj, v_proj, then q and k rotated.
 */
static tfc_status project_heads(fwd *f, const gpt_block *bl, const tfc_tensor *h, tfc_tensor *heads[3]) {
    const gpt_arch *a = &f->m->arch;
    if (a->table->n_linear == 4) { /* GPT-2 */
        tfc_tensor *qkv;
        TFC_TRY(linear(f, &bl->lin[GPT_LIN_QKV], h, &qkv));
        return split_heads(f, qkv, heads);
    }
    static const int lin[3] = {GPT_LIN_Q, GPT_LIN_K, GPT_LIN_V};
    for (int i = 0; i < 3; i++) {
        tfc_tensor *y;
        TFC_TRY(linear(f, &bl->lin[lin[i]], h, &y));
        TFC_TRY(as_heads(f, y, i == 0 ? a->n_head : a->n_kv_head, &heads[i]));
    }
    if (a->pos == GPT_POS_ROPE)
        for (int i = 0; i < 2; i++) TFC_TRY(rotate(f, &heads[i]));
    return TFC_OK;
}

static tfc_status attention(fwd *f, const gpt_block *bl, int32_t layer, const tfc_tensor *h, tfc_tensor **y) {
    const tfc_gpt *m = f->m;
    tfc_tensor *heads[3];
    TFC_TRY(project_heads(f, bl, h, heads));
    const double scale = 1.0 / sqrt((double)m->arch.head_dim);
    tfc_tensor *att, *att_t, *att2, *proj;
    if (f->seqs)
        TFC_TRY(attend_per_sequence(f, layer, heads, scale, &att));
    else if (f->dr.train && m->cfg.dropout > 0) {
        const uint64_t key = tfc_gpt_dropout_key(m->drop_seed, f->dr.counter, 1 + 3 * (int64_t)layer);
        KEEP(f, att, tfc_gpt_attention_dropout(f->g, heads[0], heads[1], heads[2], scale, m->cfg.dropout, key, &att));
    } else
        TFC_TRY(attend(f, layer, heads, scale, &att));
    const int32_t to_heads[4] = {0, 2, 1, 3};
    KEEP(f, att_t, tfc_permute(f->g, att, to_heads, 4, &att_t)); /* [B,T,H,D] */
    const int64_t btc[2] = {f->B * f->T, m->arch.n_embd};
    KEEP(f, att2, tfc_reshape(f->g, att_t, btc, 2, &att2));
    const int out = m->arch.table->n_linear == 4 ? GPT_LIN_ATTN_OUT : GPT_LIN_O; /* GPT-2's c_proj, or o_proj */
    TFC_TRY(linear(f, &bl->lin[out], att2, &proj));
    return drop(f, 2 + 3 * (int64_t)layer, proj, y);
}

/*
 * The architecture's MLP on h [B·T, C] (arch.mlp), *y [B·T, C]:
 *   GPT-2:  y = dropout(gelu_tanh(h · W_fc + b_fc) · W_proj + b_proj)
 *   SwiGLU: y = dropout(down(silu(gate(h)) ⊙ up(h))), gate, up [B·T, F]
 */
static tfc_status mlp(fwd *f, const gpt_block *bl, int32_t layer, const tfc_tensor *h, tfc_tensor **y) {
    tfc_tensor *u, *gate, *a, *proj;
    const gpt_linear *out = &bl->lin[GPT_LIN_MLP_OUT];
    switch (f->m->arch.mlp) {
    case GPT_MLP_GELU_TANH:
        TFC_TRY(linear(f, &bl->lin[GPT_LIN_MLP_IN], h, &u));
        KEEP(f, a, tfc_gelu(f->g, u, TFC_GELU_TANH, &a));
        break;
    case GPT_MLP_SWIGLU:
        TFC_TRY(linear(f, &bl->lin[GPT_LIN_GATE], h, &gate));
        TFC_TRY(linear(f, &bl->lin[GPT_LIN_UP], h, &u));
        KEEP(f, a, tfc_swiglu(f->g, gate, u, &a));
        out = &bl->lin[GPT_LIN_DOWN];
        break;
    default: return tfc_err(TFC_ERR_INTERNAL, "gpt: mlp kind %d", (int)f->m->arch.mlp);
    }
    TFC_TRY(linear(f, out, a, &proj));
    return drop(f, 3 + 3 * (int64_t)layer, proj, y);
}

/*
 * One transformer block, x [B·T, C] → *out (a new reference, not pushed):
 * x + attention(norm(x)), then that + mlp(norm(that)). The trunk's loop
 * and the recompute checkpoint (block_fn) both run exactly this, so a
 * replay's gradients are bitwise those of the plain forward
 * (tests/c/test_gpt_recompute.c).
 */
static tfc_status block(fwd *f, int32_t layer, const tfc_tensor *x, tfc_tensor **out) {
    const gpt_block *bl = &f->m->blocks[layer];
    tfc_tensor *h, *y, *x1;
    TFC_TRY(norm(f, bl->ln1_w, bl->ln1_b, x, &h));
    TFC_TRY(attention(f, bl, layer, h, &y));
    KEEP(f, x1, tfc_add(f->g, x, y, &x1));
    TFC_TRY(norm(f, bl->ln2_w, bl->ln2_b, x1, &h));
    TFC_TRY(mlp(f, bl, layer, h, &y));
    return tfc_add(f->g, x1, y, out);
}

static tfc_status check_ids(const char *fn, const char *arg, const tfc_tensor *t) {
    if (tfc_tensor_ndim(t) != 2) {
        int64_t d[TFC_MAX_DIMS];
        int32_t nd = tfc_tensor_ndim(t);
        if (tfc_tensor_shape(t, d, TFC_MAX_DIMS) != TFC_OK) nd = 0;
        return tfc_err(TFC_ERR_SHAPE, "%s: %s is %s, need [B, T]", fn, arg, tfc_fmt_dims(d, nd));
    }
    tfc_dtype dt = tfc_tensor_dtype(t);
    if (dt != TFC_DTYPE_I32 && dt != TFC_DTYPE_I64)
        return tfc_err(TFC_ERR_DTYPE, "%s: %s is %s, need i32 or i64", fn, arg, tfc_dtype_name(dt));
    return TFC_OK;
}

/*
 * Positions of a decoding step of B sequences, each at its own length: an
 * i64 [B, 1] tensor, after checking that every cache has room.
 */
static tfc_status seq_positions(const tfc_gpt *m, tfc_gpt_cache *const *seqs, int64_t B, const char *fn,
                                tfc_tensor **pos) {
    int64_t *p = malloc((size_t)B * sizeof *p);
    if (!p) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    for (int64_t b = 0; b < B; b++) {
        const tfc_gpt_cache *c = seqs[b];
        if (c->model != m || c->batch != 1 || c->len + 1 > c->cap) {
            free(p);
            return tfc_err(TFC_ERR_INVALID_ARG,
                           "%s: sequence %lld's cache (%d of %d positions, batch %d) cannot take a token", fn,
                           (long long)b, c->len, c->cap, c->batch);
        }
        p[b] = c->len;
    }
    const int64_t dims[2] = {B, 1};
    tfc_status s = tfc_tensor_from_data(p, dims, 2, TFC_DTYPE_I64, pos);
    free(p);
    return s;
}

/*
 * The rotary frequencies of this forward [D/2] (tfc_rope_inv_freq of the
 * model's rope config), in the angle dtype tfc_rope takes (f64 for an f64
 * model, else f32), on the model's device, pushed. seq_len, the largest
 * position + 1, is what the dynamic type reads.
 */
static tfc_status rope_freqs(fwd *f, const char *fn, int64_t seq_len, tfc_tensor **out) {
    const gpt_arch *a = &f->m->arch;
    const int64_t half = a->head_dim / 2;
    double *inv = malloc((size_t)half * sizeof *inv);
    if (!inv) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    tfc_status s = tfc_rope_inv_freq(&a->rope, a->head_dim, seq_len, inv);
    tfc_tensor *t = NULL;
    if (s == TFC_OK && f->m->cfg.dtype == TFC_DTYPE_F64)
        s = tfc_tensor_from_data(inv, &half, 1, TFC_DTYPE_F64, &t);
    else if (s == TFC_OK) {
        float *f32 = (float *)inv; /* transformers computes them in f32: round each, in place */
        for (int64_t i = 0; i < half; i++) f32[i] = (float)inv[i];
        s = tfc_tensor_from_data(f32, &half, 1, TFC_DTYPE_F32, &t);
    }
    free(inv);
    TFC_TRY(s);
    TFC_TRY(keep(&f->sc, t));
    KEEP(f, *out, on_model_device(f->m, fn, "rope frequencies", t, out));
    return TFC_OK;
}

/*
 * The forward's positions (f->pos: start .. start+T-1 as [T]; with seqs
 * [B, 1], sequence b's own length) and the architecture's position signal
 * (arch.pos): GPT-2's is learned, *pe = wpe[pos] ([T, C] or [B, 1, C]),
 * pushed, which the trunk adds to the token embeddings; rotary positions
 * give *pe = NULL, set f->inv_freq and act in attention (project_heads).
 */
static tfc_status positions(fwd *f, const char *fn, tfc_tensor **pe) {
    tfc_gpt *m = f->m;
    tfc_tensor *pos;
    int64_t seq_len = f->start + f->T;
    if (f->seqs) {
        KEEP(f, pos, seq_positions(m, f->seqs, f->B, fn, &pos));
        for (int64_t b = 0; b < f->B; b++)
            if (f->seqs[b]->len + 1 > seq_len) seq_len = f->seqs[b]->len + 1;
    } else
        KEEP(f, pos, tfc_tensor_arange((double)f->start, (double)(f->start + f->T), 1.0, TFC_DTYPE_I64, &pos));
    KEEP(f, pos, on_model_device(m, fn, "positions", pos, &pos));
    f->pos = pos;
    *pe = NULL;
    switch (m->arch.pos) {
    case GPT_POS_LEARNED: KEEP(f, *pe, tfc_embedding(f->g, m->wpe, pos, pe)); return TFC_OK;
    case GPT_POS_ROPE: {
        tfc_tensor *inv;
        TFC_TRY(rope_freqs(f, fn, seq_len, &inv));
        f->inv_freq = inv;
        return TFC_OK;
    }
    }
    return tfc_err(TFC_ERR_INTERNAL, "%s: position kind %d", fn, (int)m->arch.pos);
}

/* The tokens idx [B, T] embedded with their positions: *x [B·T, C] after the embedding dropout, pushed. */
static tfc_status embed(fwd *f, const char *fn, const tfc_tensor *idx, tfc_tensor **x) {
    tfc_tensor *pe = NULL, *idx_d, *te, *r;
    TFC_TRY(positions(f, fn, &pe));
    KEEP(f, idx_d, on_model_device(f->m, fn, "idx", idx, &idx_d));
    KEEP(f, te, tfc_embedding(f->g, f->m->wte, idx_d, &te)); /* [B, T, C] */
    r = te;
    if (pe) KEEP(f, r, tfc_add(f->g, te, pe, &r));
    TFC_TRY(drop(f, 0, r, &r));
    const int64_t btc[2] = {f->B * f->T, f->m->arch.n_embd};
    KEEP(f, *x, tfc_view(f->g, r, btc, 2, x));
    return TFC_OK;
}

/* The recompute checkpoint's context: what block() needs to replay layer `layer` of one training forward. */
typedef struct block_ctx {
    tfc_gpt *m;
    int32_t layer;
    int64_t B, T;
    gpt_drop dr; /* the forward's: a replay draws the masks the forward drew */
} block_ctx;

/* block() as the checkpoint's function (tfc_gpt_set_recompute): training only, no cache. */
static tfc_status block_fn(tfc_graph *g, const tfc_tensor *const *in, int32_t n_in, tfc_tensor **out, int32_t n_out,
                           void *ctx) {
    (void)n_out;
    const block_ctx *b = ctx;
    /* rotary positions come as inputs 1 and 2, so the checkpoint keeps them for the replay */
    fwd f = {.m = b->m, .g = g, .dr = b->dr, .B = b->B, .T = b->T};
    if (n_in == 3) {
        f.pos = in[1];
        f.inv_freq = in[2];
    }
    tfc_status s = block(&f, b->layer, in[0], &out[0]);
    scope_free(&f.sc);
    return s;
}

static tfc_status check_trunk(const tfc_gpt *m, const tfc_tensor *idx, const tfc_gpt_cache *cache,
                              tfc_gpt_cache *const *seqs, const char *fn) {
    TFC_TRY(check_ids(fn, "idx", idx));
    const tfc_gpt_config *c = &m->cfg;
    const int64_t B = tfc_tensor_dim(idx, 0), T = tfc_tensor_dim(idx, 1);
    const int64_t start = cache ? cache->len : 0;
    if (T < 1 || B < 1)
        return tfc_err(TFC_ERR_SHAPE, "%s: idx is [%lld,%lld], need B >= 1 and T >= 1", fn, (long long)B, (long long)T);
    if (start + T > c->block_size)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: %lld positions (%lld cached + %lld new) exceed block_size %d", fn,
                       (long long)(start + T), (long long)start, (long long)T, c->block_size);
    if (cache && B != cache->batch)
        return tfc_err(TFC_ERR_SHAPE, "%s: idx has batch %lld but the cache holds %d sequences", fn, (long long)B,
                       cache->batch);
    if (cache && start + T > cache->cap)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: %lld positions exceed the cache's %d", fn, (long long)(start + T),
                       cache->cap);
    if (seqs && T != 1)
        return tfc_err(TFC_ERR_SHAPE, "%s: idx is [%lld,%lld], need one token per sequence", fn, (long long)B,
                       (long long)T);
    if (m->autocast) TFC_TRY(tfc_gpt_autocast_check(fn, m)); /* quantized since it was set */
    return TFC_OK;
}

/*
 * The blocks over x [B·T, C] (the last tensor pushed on f's scope) and the
 * final norm: *hidden [B·T, C], not pushed.
 */
static tfc_status run_blocks(fwd *f, tfc_tensor *x, tfc_tensor **hidden) {
    tfc_gpt *m = f->m;
    /* --recompute: each block a checkpoint keeping only its input for backward */
    const int recompute = m->recompute && tfc_graph_is_grad_enabled(f->g) && !f->cache && !f->seqs;
    /*
     * A block's temporaries die with it, not at the trunk's end: the graph
     * holds what backward needs, and the rest (with nothing recorded, all of
     * it) is dead once the block's output exists. Under autocast that rest
     * includes each Linear's f32 input, whose bf16-rounded copy is what the
     * graph keeps: held to the trunk's end they were 7·B·T·C values a layer
     * beside their copies (char-small's bf16 step peaked 36 % above f32's).
     */
    for (int32_t l = 0; l < m->arch.n_layer; l++) {
        if (recompute) {
            block_ctx bc = {m, l, f->B, f->T, f->dr};
            const tfc_tensor *in[3] = {x, f->pos, f->inv_freq};
            const int32_t n_in = f->inv_freq ? 3 : 1;
            KEEP(f, x, tfc_graph_checkpoint(f->g, block_fn, &bc, sizeof bc, in, n_in, &x, 1));
            continue;
        }
        const int32_t mark = f->sc.n; /* sc.t[mark - 1] is x, the block's input */
        tfc_tensor *out;
        TFC_TRY(block(f, l, x, &out));
        for (int32_t i = mark - 1; i < f->sc.n; i++) tfc_tensor_release(f->sc.t[i]);
        f->sc.t[mark - 1] = x = out;
        f->sc.n = mark;
    }
    return norm_op(f, m->lnf_w, m->lnf_b, x, hidden);
}

/*
 * Everything up to the LM head: embeds idx [B,T] at positions start ..
 * start+T-1 (with seqs: T = 1, sequence b at seqs[b]->len), runs the blocks
 * (with the cache as in tfc_gpt_run, or seqs as in tfc_gpt_run_seqs) and
 * returns the final norm's output [B·T, C] in *hidden.
 */
static tfc_status gpt_trunk(tfc_gpt *m, tfc_graph *g, const tfc_tensor *idx, tfc_gpt_cache *cache,
                            tfc_gpt_cache *const *seqs, const char *fn, tfc_tensor **hidden) {
    TFC_TRY(check_trunk(m, idx, cache, seqs, fn));
    fwd f = {.m = m, .g = g, .cache = cache, .seqs = seqs};
    f.B = tfc_tensor_dim(idx, 0);
    f.T = tfc_tensor_dim(idx, 1);
    f.start = cache ? cache->len : 0;
    /* dropout only in a training forward: a graph that records gradients, no cache */
    f.dr = (gpt_drop){.train = g && tfc_graph_is_grad_enabled(g) && !cache && !seqs && m->cfg.dropout > 0,
                      .counter = m->drop_counter};
    tfc_tensor *x, *out = NULL;
    tfc_status s = embed(&f, fn, idx, &x);
    if (s == TFC_OK) s = run_blocks(&f, x, &out);
    if (s == TFC_OK && f.dr.train) m->drop_counter++; /* the next training forward draws new masks */
    scope_free(&f.sc);
    if (s == TFC_OK) *hidden = out;
    return tfc_err_in(fn, s);
}

tfc_status tfc_gpt_run(tfc_gpt *m, tfc_graph *g, const tfc_tensor *idx, tfc_gpt_cache *cache, const char *fn,
                       tfc_tensor **logits) {
    tfc_tensor *h, *lg = NULL;
    TFC_TRY(gpt_trunk(m, g, idx, cache, NULL, fn, &h));
    const int64_t btv[3] = {tfc_tensor_dim(idx, 0), tfc_tensor_dim(idx, 1), m->cfg.vocab_size};
    tfc_status s = m->head->logits(m, g, h, 0, &lg); /* [B·T, V] */
    if (s == TFC_OK) s = tfc_view(g, lg, btv, 3, logits);
    tfc_tensor_release(h);
    tfc_tensor_release(lg);
    return tfc_err_in(fn, s);
}

tfc_status tfc_gpt_run_seqs(tfc_gpt *m, const tfc_tensor *idx, tfc_gpt_cache *const *seqs, const char *fn,
                            tfc_tensor **logits) {
    tfc_tensor *h;
    TFC_TRY(gpt_trunk(m, NULL, idx, NULL, seqs, fn, &h));
    tfc_status s = m->head->logits(m, NULL, h, 0, logits); /* [B, V] */
    tfc_tensor_release(h);
    if (s == TFC_OK)
        for (int64_t b = 0; b < tfc_tensor_dim(idx, 0); b++) seqs[b]->len++;
    return tfc_err_in(fn, s);
}

TFC_API tfc_status tfc_gpt_forward(tfc_gpt *m, tfc_graph *g, const tfc_tensor *idx, const tfc_tensor *targets,
                                   tfc_tensor **logits, tfc_tensor **loss) {
    const char *fn = "tfc_gpt_forward";
    TFC_CHECK_NOT_NULL(fn, m);
    TFC_CHECK_NOT_NULL(fn, idx);
    if (targets && !loss) return tfc_err(TFC_ERR_INVALID_ARG, "%s: targets given but loss is NULL", fn);
    if (!logits && !targets) return tfc_err(TFC_ERR_INVALID_ARG, "%s: neither logits nor targets/loss asked for", fn);
    char what[64];
    if (tfc_gpt_is_quantized(m) && g)
        return tfc_err(TFC_ERR_UNSUPPORTED,
                       "%s: the model is quantized (%s), which is inference-only: pass g = NULL (train the f32 "
                       "model, then quantize it)",
                       fn, tfc_gpt_quant_desc(m, what, sizeof what));
    if (targets) {
        TFC_TRY(check_ids(fn, "targets", targets));
        if (tfc_tensor_dim(targets, 0) != tfc_tensor_dim(idx, 0) ||
            tfc_tensor_dim(targets, 1) != tfc_tensor_dim(idx, 1))
            return tfc_err(TFC_ERR_SHAPE, "%s: targets is [%lld,%lld] but idx is [%lld,%lld]", fn,
                           (long long)tfc_tensor_dim(targets, 0), (long long)tfc_tensor_dim(targets, 1),
                           (long long)tfc_tensor_dim(idx, 0), (long long)tfc_tensor_dim(idx, 1));
    }
    tfc_tensor *lg = NULL, *flat = NULL, *tflat = NULL, *l = NULL;
    if (!logits) {
        /* Only the loss: the head's (fused where its strategy has a fused kernel) need not make the [B·T, V] logits. */
        tfc_tensor *h;
        const int64_t n1[1] = {-1};
        TFC_TRY(gpt_trunk(m, g, idx, NULL, NULL, fn, &h));
        tfc_tensor *tdev = NULL;
        tfc_status s = on_model_device(m, fn, "targets", targets, &tdev);
        if (s == TFC_OK) s = tfc_reshape(NULL, tdev, n1, 1, &tflat);
        tfc_tensor_release(tdev);
        if (s == TFC_OK) s = m->head->loss(m, g, h, tflat, &l);
        tfc_tensor_release(h);
        tfc_tensor_release(tflat);
        TFC_TRY(s);
        *loss = l;
        return TFC_OK;
    }
    TFC_TRY(tfc_gpt_run(m, g, idx, NULL, fn, &lg));
    tfc_status s = TFC_OK;
    if (targets) {
        const int64_t nv[2] = {-1, m->cfg.vocab_size}, n1[1] = {-1};
        s = tfc_reshape(g, lg, nv, 2, &flat);
        tfc_tensor *tdev = NULL;
        if (s == TFC_OK) s = on_model_device(m, fn, "targets", targets, &tdev);
        if (s == TFC_OK) s = tfc_reshape(NULL, tdev, n1, 1, &tflat);
        tfc_tensor_release(tdev);
        if (s == TFC_OK) s = tfc_cross_entropy(g, flat, tflat, TFC_GPT_IGNORE_INDEX, &l);
        tfc_tensor_release(flat);
        tfc_tensor_release(tflat);
        if (s != TFC_OK) {
            tfc_tensor_release(lg);
            return tfc_err_in(fn, s);
        }
        *loss = l;
    }
    if (logits)
        *logits = lg;
    else
        tfc_tensor_release(lg);
    return TFC_OK;
}

TFC_API tfc_status tfc_gpt_set_recompute(tfc_gpt *m, int32_t on) {
    const char *fn = "tfc_gpt_set_recompute";
    TFC_CHECK_NOT_NULL(fn, m);
    if (on != 0 && on != 1) return tfc_err(TFC_ERR_INVALID_ARG, "%s: on is %d, must be 0 or 1", fn, (int)on);
    m->recompute = on;
    return TFC_OK;
}

TFC_API int32_t tfc_gpt_get_recompute(const tfc_gpt *m) { return m ? m->recompute : 0; }
