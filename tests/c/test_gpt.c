/*
 * GPT model tests: config and argument errors, the forward pass and every
 * parameter gradient against an independent composition of ops (one-hot
 * matmuls for embeddings, LayerNorm from mean/var, attention head by head
 * with an explicit mask, GELU from tanh, cross-entropy from log_softmax),
 * gradcheck in f64, KV-cache decoding against full recomputation, greedy
 * generation, weight save/load.
 */
#include <stdint.h>
#include <unistd.h>

#include "tfc_test.h"

static tfc_gpt *small_model(int32_t L, int32_t H, int32_t C, int32_t V, int32_t block, int32_t bias, int32_t tie,
                            tfc_dtype dt, uint64_t seed) {
    tfc_gpt_config c = TFC_GPT_CONFIG_INIT;
    c.n_layer = L;
    c.n_head = H;
    c.n_embd = C;
    c.vocab_size = V;
    c.block_size = block;
    c.bias = bias;
    c.tie_weights = tie;
    c.dtype = dt;
    tfc_gpt *m = NULL;
    CHECK_OK(tfc_gpt_new(&c, seed, &m));
    return m;
}

static tfc_tensor *ids_tensor(const int32_t *v, int64_t B, int64_t T) {
    const int64_t d[2] = {B, T};
    tfc_tensor *t = NULL;
    CHECK_OK(tfc_tensor_from_data(v, d, 2, TFC_DTYPE_I32, &t));
    return t;
}

static tfc_tensor *param(const tfc_gpt *m, const char *name) {
    int32_t n;
    const char *const *names;
    tfc_tensor *const *ps;
    CHECK_OK(tfc_gpt_params(m, &n, &names, &ps));
    for (int32_t i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0) return ps[i];
    return NULL;
}

/* ---- config --------------------------------------------------------------------- */

TEST(presets_and_config_errors) {
    tfc_gpt_config c = TFC_GPT_CONFIG_INIT;
    c.vocab_size = 65;
    CHECK_OK(tfc_gpt_config_preset("char-small", &c));
    CHECK(c.n_layer == 6 && c.n_head == 6 && c.n_embd == 384 && c.block_size == 256 && c.vocab_size == 65);
    CHECK_OK(tfc_gpt_config_preset("gpt2", &c));
    CHECK(c.n_layer == 12 && c.n_head == 12 && c.n_embd == 768 && c.block_size == 1024 && c.vocab_size == 50257);
    CHECK_OK(tfc_gpt_config_preset("gpt2-mini", &c));
    CHECK(c.n_layer == 4 && c.n_embd == 256 && c.block_size == 128 && c.vocab_size == 50257);
    CHECK_OK(tfc_gpt_config_preset("char-tiny", &c));
    CHECK(c.n_layer == 4 && c.n_head == 4 && c.n_embd == 128 && c.block_size == 128);
    CHECK_ERR(tfc_gpt_config_preset("gpt3", &c), TFC_ERR_INVALID_ARG, "unknown preset 'gpt3'");
    CHECK_ERR(tfc_gpt_config_preset(NULL, &c), TFC_ERR_INVALID_ARG, "name is NULL");

    tfc_gpt *m = NULL;
    tfc_gpt_config bad = TFC_GPT_CONFIG_INIT;
    bad.n_head = 3;
    CHECK_ERR(tfc_gpt_new(&bad, 0, &m), TFC_ERR_INVALID_ARG, "not a multiple of cfg->n_head 3");
    bad = (tfc_gpt_config)TFC_GPT_CONFIG_INIT;
    bad.vocab_size = 0;
    CHECK_ERR(tfc_gpt_new(&bad, 0, &m), TFC_ERR_INVALID_ARG, "cfg->vocab_size is 0");
    bad = (tfc_gpt_config)TFC_GPT_CONFIG_INIT;
    bad.dtype = TFC_DTYPE_I32;
    CHECK_ERR(tfc_gpt_new(&bad, 0, &m), TFC_ERR_DTYPE, "cfg->dtype is i32");
    bad = (tfc_gpt_config)TFC_GPT_CONFIG_INIT;
    bad.struct_size = 4;
    CHECK_ERR(tfc_gpt_new(&bad, 0, &m), TFC_ERR_VERSION, "struct_size");
    CHECK(m == NULL);
}

/* ---- init and parameter list ------------------------------------------------------- */

TEST(params_names_shapes_and_init) {
    tfc_gpt *m = small_model(2, 2, 16, 11, 8, 1, 1, TFC_DTYPE_F64, 7);
    int32_t n;
    const char *const *names;
    tfc_tensor *const *ps;
    CHECK_OK(tfc_gpt_params(m, &n, &names, &ps));
    CHECK(n == 2 + 12 * 2 + 2);
    CHECK(strcmp(names[0], "transformer.wte.weight") == 0);
    CHECK(strcmp(names[2], "transformer.h.0.ln_1.weight") == 0);
    CHECK(strcmp(names[4], "transformer.h.0.attn.c_attn.weight") == 0);
    CHECK(strcmp(names[n - 1], "transformer.ln_f.bias") == 0);
    tfc_tensor *w = param(m, "transformer.h.1.attn.c_attn.weight");
    CHECK(w && tfc_tensor_dim(w, 0) == 16 && tfc_tensor_dim(w, 1) == 48); /* Conv1D [in, out] */
    w = param(m, "transformer.h.1.mlp.c_proj.weight");
    CHECK(w && tfc_tensor_dim(w, 0) == 64 && tfc_tensor_dim(w, 1) == 16);
    CHECK(tfc_gpt_num_elements(m) ==
          11 * 16 + 8 * 16 + 2 * (4 * 16 + 16 * 48 + 48 + 16 * 16 + 16 + 16 * 64 + 64 + 64 * 16 + 16) + 32);

    /* standard deviations: 0.02 for weights, 0.02/sqrt(2L) for residual projections */
    tfc_gpt *big = small_model(2, 4, 256, 64, 16, 1, 1, TFC_DTYPE_F64, 7);
    const char *which[2] = {"transformer.h.0.mlp.c_fc.weight", "transformer.h.0.mlp.c_proj.weight"};
    const double want[2] = {0.02, 0.02 / 2.0};
    for (int k = 0; k < 2; k++) {
        tfc_tensor *t = param(big, which[k]);
        int64_t cnt = tfc_tensor_numel(t);
        const double *v = tfc_tensor_data(t);
        double s = 0, s2 = 0;
        for (int64_t i = 0; i < cnt; i++) s += v[i], s2 += v[i] * v[i];
        double mean = s / (double)cnt, sd = sqrt(s2 / (double)cnt - mean * mean);
        CHECK(fabs(mean) < 3 * want[k] / sqrt((double)cnt) * 3);
        CHECK_CLOSE(sd, want[k], 0.02);
    }
    const double *lw = tfc_tensor_data(param(big, "transformer.h.1.ln_2.weight"));
    const double *cb = tfc_tensor_data(param(big, "transformer.h.1.attn.c_attn.bias"));
    CHECK(lw[0] == 1.0 && lw[255] == 1.0 && cb[0] == 0.0 && cb[767] == 0.0);
    /* the same seed gives the same model; another seed another */
    tfc_gpt *again = small_model(2, 4, 256, 64, 16, 1, 1, TFC_DTYPE_F64, 7),
            *other = small_model(2, 4, 256, 64, 16, 1, 1, TFC_DTYPE_F64, 8);
    const double *a = tfc_tensor_data(param(big, "transformer.wte.weight")),
                 *b = tfc_tensor_data(param(again, "transformer.wte.weight")),
                 *o = tfc_tensor_data(param(other, "transformer.wte.weight"));
    CHECK(memcmp(a, b, 64 * 256 * sizeof(double)) == 0);
    CHECK(memcmp(a, o, 64 * 256 * sizeof(double)) != 0);
    tfc_gpt_release(again);
    tfc_gpt_release(other);
    tfc_gpt_release(big);

    tfc_gpt *untied = small_model(1, 2, 16, 11, 8, 0, 0, TFC_DTYPE_F32, 1);
    CHECK_OK(tfc_gpt_params(untied, &n, &names, &ps));
    CHECK(n == 2 + 6 + 1 + 1); /* no biases; ln_f.weight; lm_head */
    CHECK(strcmp(names[n - 1], "lm_head.weight") == 0);
    CHECK(param(untied, "transformer.h.0.ln_1.bias") == NULL);
    tfc_gpt_release(untied);
    tfc_gpt_release(m);
}

/* GPT-2's recipe by name: every weight matrix and embedding decays, no bias or LayerNorm parameter does. */
TEST(param_decay_follows_gpt2) {
    tfc_gpt *tied = small_model(2, 2, 16, 11, 8, 1, 1, TFC_DTYPE_F32, 7),
            *untied = small_model(1, 2, 16, 11, 8, 0, 0, TFC_DTYPE_F32, 1);
    tfc_gpt *models[2] = {tied, untied};
    for (int k = 0; k < 2; k++) {
        int32_t n, decay = -1, ndecay = 0;
        const char *const *names;
        tfc_tensor *const *ps;
        CHECK_OK(tfc_gpt_params(models[k], &n, &names, &ps));
        for (int32_t i = 0; i < n; i++) {
            CHECK_OK(tfc_gpt_param_decay(models[k], i, &decay));
            int want = strstr(names[i], ".bias") == NULL && strstr(names[i], "ln_") == NULL;
            if (decay != want) TFC_FAIL_AT("%s: decay %d, want %d", names[i], (int)decay, want);
            ndecay += decay;
        }
        CHECK(ndecay == (k == 0 ? 2 + 4 * 2 : 2 + 4 + 1)); /* wte, wpe, 4 matrices per block (+ lm_head) */
        decay = 7;
        CHECK_ERR(tfc_gpt_param_decay(models[k], n, &decay), TFC_ERR_INVALID_ARG, "tfc_gpt_param_decay: i is");
        CHECK_ERR(tfc_gpt_param_decay(models[k], -1, &decay), TFC_ERR_INVALID_ARG, "parameters");
        CHECK(decay == 7);
    }
    CHECK_ERR(tfc_gpt_param_decay(NULL, 0, &(int32_t){0}), TFC_ERR_INVALID_ARG, "m is NULL");
    CHECK_ERR(tfc_gpt_param_decay(tied, 0, NULL), TFC_ERR_INVALID_ARG, "decay is NULL");
    tfc_gpt_release(tied);
    tfc_gpt_release(untied);
}

TEST(forward_argument_errors) {
    tfc_gpt *m = small_model(1, 2, 16, 11, 8, 1, 1, TFC_DTYPE_F32, 1);
    int32_t v[18] = {0};
    tfc_tensor *x = ids_tensor(v, 2, 9), *ok = ids_tensor(v, 2, 4), *y3 = ids_tensor(v, 2, 3), *lg = NULL, *loss = NULL;
    CHECK_ERR(tfc_gpt_forward(m, NULL, x, NULL, &lg, NULL), TFC_ERR_INVALID_ARG, "exceed block_size 8");
    CHECK_ERR(tfc_gpt_forward(m, NULL, ok, y3, &lg, &loss), TFC_ERR_SHAPE, "targets is [2,3] but idx is [2,4]");
    CHECK_ERR(tfc_gpt_forward(m, NULL, ok, ok, &lg, NULL), TFC_ERR_INVALID_ARG, "loss is NULL");
    CHECK_ERR(tfc_gpt_forward(NULL, NULL, ok, NULL, &lg, NULL), TFC_ERR_INVALID_ARG, "m is NULL");
    int32_t big[4] = {0, 1, 11, 2};
    tfc_tensor *oob = ids_tensor(big, 1, 4);
    CHECK(tfc_gpt_forward(m, NULL, oob, NULL, &lg, NULL) != TFC_OK);
    const int64_t d3[3] = {1, 2, 2};
    tfc_tensor *x3, *xf;
    CHECK_OK(tfc_tensor_zeros(d3, 3, TFC_DTYPE_I32, &x3));
    CHECK_ERR(tfc_gpt_forward(m, NULL, x3, NULL, &lg, NULL), TFC_ERR_SHAPE, "need [B, T]");
    CHECK_OK(tfc_tensor_zeros(d3, 2, TFC_DTYPE_F32, &xf));
    CHECK_ERR(tfc_gpt_forward(m, NULL, xf, NULL, &lg, NULL), TFC_ERR_DTYPE, "idx is f32");
    CHECK(lg == NULL && loss == NULL);
    /* i64 ids work as i32 ids do */
    int64_t v64[4] = {1, 2, 3, 4};
    int32_t v32[4] = {1, 2, 3, 4};
    const int64_t d2[2] = {1, 4};
    tfc_tensor *x64, *x32 = ids_tensor(v32, 1, 4), *l64, *l32;
    CHECK_OK(tfc_tensor_from_data(v64, d2, 2, TFC_DTYPE_I64, &x64));
    CHECK_OK(tfc_gpt_forward(m, NULL, x64, NULL, &l64, NULL));
    CHECK_OK(tfc_gpt_forward(m, NULL, x32, NULL, &l32, NULL));
    CHECK(tfc_tensor_dim(l32, 2) == 11 && memcmp(tfc_tensor_data(l64), tfc_tensor_data(l32), 44 * sizeof(float)) == 0);
    tfc_tensor *tensors[] = {x, ok, y3, oob, x3, xf, x64, x32, l64, l32};
    for (size_t i = 0; i < sizeof tensors / sizeof tensors[0]; i++) tfc_tensor_release(tensors[i]);
    tfc_gpt_release(m);
}

/* ---- the reference composition ------------------------------------------------------ */

typedef struct refctx {
    tfc_tensor *tmp[4096];
    int n;
} refctx;

static tfc_tensor *K(refctx *r, tfc_status s, tfc_tensor *t) {
    CHECK_OK(s);
    r->tmp[r->n++] = t;
    return t;
}
/* R(op(..., &o_)) runs op, checks it, keeps the result for release, and yields it (nests freely). */
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wshadow=compatible-local"
#define R(call_with_out)               \
    __extension__({                    \
        tfc_tensor *o_ = NULL;         \
        tfc_status s_ = call_with_out; \
        K(rc, s_, o_);                 \
    })

static tfc_tensor *onehot(refctx *rc, const int32_t *ids, int64_t n, int64_t V) {
    double *v = calloc((size_t)(n * V), sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i * V + ids[i]] = 1.0;
    const int64_t d[2] = {n, V};
    tfc_tensor *t = R(tfc_tensor_from_data(v, d, 2, TFC_DTYPE_F64, &o_));
    free(v);
    return t;
}

static tfc_tensor *ref_ln(refctx *rc, tfc_graph *g, tfc_tensor *x, tfc_tensor *w, tfc_tensor *b) {
    int32_t last = -1;
    tfc_tensor *mu = R(tfc_mean(g, x, &last, 1, 1, &o_));
    tfc_tensor *xc = R(tfc_sub(g, x, mu, &o_));
    tfc_tensor *sq = R(tfc_mul(g, xc, xc, &o_));
    tfc_tensor *var = R(tfc_mean(g, sq, &last, 1, 1, &o_));
    tfc_tensor *inv = R(tfc_rsqrt(g, R(tfc_add_scalar(g, var, 1e-5, &o_)), &o_));
    tfc_tensor *y = R(tfc_mul(g, R(tfc_mul(g, xc, inv, &o_)), w, &o_));
    return b ? R(tfc_add(g, y, b, &o_)) : y;
}

static tfc_tensor *ref_linear(refctx *rc, tfc_graph *g, tfc_tensor *x, tfc_tensor *w, tfc_tensor *b) {
    tfc_tensor *y = R(tfc_matmul(g, x, w, &o_));
    return b ? R(tfc_add(g, y, b, &o_)) : y;
}

static tfc_tensor *ref_gelu(refctx *rc, tfc_graph *g, tfc_tensor *x) {
    tfc_tensor *x3 = R(tfc_pow_scalar(g, x, 3.0, &o_));
    tfc_tensor *in = R(tfc_add(g, x, R(tfc_mul_scalar(g, x3, 0.044715, &o_)), &o_));
    tfc_tensor *t = R(tfc_tanh(g, R(tfc_mul_scalar(g, in, sqrt(2.0 / M_PI), &o_)), &o_));
    return R(tfc_mul(g, R(tfc_mul_scalar(g, x, 0.5, &o_)), R(tfc_add_scalar(g, t, 1.0, &o_)), &o_));
}

/* Loss of the model on (idx, tgt) [B, T], rebuilt from elementary ops. */
static tfc_tensor *ref_loss(refctx *rc, tfc_graph *g, const tfc_gpt *m, const int32_t *idx, const int32_t *tgt,
                            int64_t B, int64_t T, tfc_tensor **logits_out) {
    tfc_gpt_config c = TFC_GPT_CONFIG_INIT;
    CHECK_OK(tfc_gpt_get_config(m, &c));
    const int64_t C = c.n_embd, H = c.n_head, D = C / H, V = c.vocab_size, N = B * T;
    char name[128];
#define PRM(fmt, ...) (snprintf(name, sizeof name, fmt, __VA_ARGS__), param(m, name))
    tfc_tensor *wte = param(m, "transformer.wte.weight"), *wpe = param(m, "transformer.wpe.weight");
    tfc_tensor *tok = R(tfc_matmul(g, onehot(rc, idx, N, V), wte, &o_));
    int32_t pos[64];
    for (int64_t i = 0; i < N; i++) pos[i] = (int32_t)(i % T);
    tfc_tensor *pe = R(tfc_matmul(g, onehot(rc, pos, N, c.block_size), wpe, &o_));
    tfc_tensor *x = R(tfc_add(g, tok, pe, &o_));
    /* causal mask: key j hidden from query i when j > i */
    uint8_t mk[64 * 64];
    for (int64_t i = 0; i < T; i++)
        for (int64_t j = 0; j < T; j++) mk[i * T + j] = j > i;
    const int64_t dT[2] = {T, T};
    tfc_tensor *mask = R(tfc_tensor_from_data(mk, dT, 2, TFC_DTYPE_U8, &o_));
    for (int32_t l = 0; l < c.n_layer; l++) {
        tfc_tensor *h = ref_ln(rc, g, x, PRM("transformer.h.%d.ln_1.weight", l), PRM("transformer.h.%d.ln_1.bias", l));
        tfc_tensor *qkv = ref_linear(rc, g, h, PRM("transformer.h.%d.attn.c_attn.weight", l),
                                     PRM("transformer.h.%d.attn.c_attn.bias", l));
        tfc_tensor *rows[16];
        for (int64_t b = 0; b < B; b++) {
            tfc_tensor *hs[16];
            tfc_tensor *qkv_b = R(tfc_narrow(g, qkv, 0, b * T, T, &o_));
            for (int64_t hh = 0; hh < H; hh++) {
                tfc_tensor *q = R(tfc_narrow(g, qkv_b, 1, hh * D, D, &o_));
                tfc_tensor *k = R(tfc_narrow(g, qkv_b, 1, C + hh * D, D, &o_));
                tfc_tensor *v = R(tfc_narrow(g, qkv_b, 1, 2 * C + hh * D, D, &o_));
                tfc_tensor *sc = R(tfc_mul_scalar(g, R(tfc_matmul(g, q, R(tfc_transpose(g, k, 0, 1, &o_)), &o_)),
                                                  1.0 / sqrt((double)D), &o_));
                tfc_tensor *p = R(tfc_softmax(g, R(tfc_masked_fill(g, sc, mask, -1e30, &o_)), -1, &o_));
                hs[hh] = R(tfc_matmul(g, p, v, &o_));
            }
            rows[b] = R(tfc_concat(g, (const tfc_tensor *const *)hs, (int32_t)H, 1, &o_));
        }
        tfc_tensor *att = R(tfc_concat(g, (const tfc_tensor *const *)rows, (int32_t)B, 0, &o_));
        tfc_tensor *y = ref_linear(rc, g, att, PRM("transformer.h.%d.attn.c_proj.weight", l),
                                   PRM("transformer.h.%d.attn.c_proj.bias", l));
        x = R(tfc_add(g, x, y, &o_));
        h = ref_ln(rc, g, x, PRM("transformer.h.%d.ln_2.weight", l), PRM("transformer.h.%d.ln_2.bias", l));
        tfc_tensor *f = ref_gelu(
            rc, g,
            ref_linear(rc, g, h, PRM("transformer.h.%d.mlp.c_fc.weight", l), PRM("transformer.h.%d.mlp.c_fc.bias", l)));
        y = ref_linear(rc, g, f, PRM("transformer.h.%d.mlp.c_proj.weight", l),
                       PRM("transformer.h.%d.mlp.c_proj.bias", l));
        x = R(tfc_add(g, x, y, &o_));
    }
#undef PRM
    tfc_tensor *h = ref_ln(rc, g, x, param(m, "transformer.ln_f.weight"), param(m, "transformer.ln_f.bias"));
    tfc_tensor *head = c.tie_weights ? wte : param(m, "lm_head.weight");
    tfc_tensor *logits = R(tfc_matmul(g, h, R(tfc_transpose(g, head, 0, 1, &o_)), &o_));
    *logits_out = logits;
    tfc_tensor *lp = R(tfc_log_softmax(g, logits, -1, &o_));
    tfc_tensor *picked = R(tfc_mul(g, lp, onehot(rc, tgt, N, V), &o_));
    return R(tfc_mul_scalar(g, R(tfc_sum(g, picked, NULL, 0, 0, &o_)), -1.0 / (double)N, &o_));
}

static void compare_with_reference(int32_t bias, int32_t tie) {
    tfc_gpt *m = small_model(2, 2, 8, 11, 8, bias, tie, TFC_DTYPE_F64, 42);
    const int64_t B = 2, T = 5;
    const int32_t idx[10] = {1, 5, 3, 10, 0, 7, 7, 2, 9, 4}, tgt[10] = {5, 3, 10, 0, 6, 7, 2, 9, 4, 1};
    tfc_tensor *x = ids_tensor(idx, B, T), *y = ids_tensor(tgt, B, T), *logits, *loss;
    tfc_graph *g;
    CHECK_OK(tfc_graph_new(&g));
    CHECK_OK(tfc_gpt_forward(m, g, x, y, &logits, &loss));
    CHECK_OK(tfc_graph_backward(g, loss, NULL));
    int32_t n;
    const char *const *names;
    tfc_tensor *const *ps;
    CHECK_OK(tfc_gpt_params(m, &n, &names, &ps));
    tfc_tensor *grads[64];
    for (int32_t i = 0; i < n; i++) {
        CHECK_OK(tfc_tensor_grad(ps[i], &grads[i]));
        CHECK(grads[i] != NULL);
        CHECK_OK(tfc_tensor_zero_grad(ps[i], 1));
    }
    refctx *rc = calloc(1, sizeof *rc);
    tfc_graph *g2;
    CHECK_OK(tfc_graph_new(&g2));
    tfc_tensor *rlogits, *rloss = ref_loss(rc, g2, m, idx, tgt, B, T, &rlogits);
    CHECK_OK(tfc_graph_backward(g2, rloss, NULL));
    double a, b;
    CHECK_OK(tfc_tensor_item(loss, &a));
    CHECK_OK(tfc_tensor_item(rloss, &b));
    CHECK_CLOSE(a, b, 1e-10);
    const double *la = tfc_tensor_data(logits), *lb = tfc_tensor_data(rlogits);
    double worst = 0;
    for (int64_t i = 0; i < B * T * 11; i++) worst = fmax(worst, fabs(la[i] - lb[i]));
    CHECK(worst < 1e-10);
    for (int32_t i = 0; i < n; i++) {
        tfc_tensor *rg;
        CHECK_OK(tfc_tensor_grad(ps[i], &rg));
        CHECK(rg != NULL);
        if (!rg) continue;
        const double *ga = tfc_tensor_data(grads[i]), *gb = tfc_tensor_data(rg);
        double err = 0, mag = 0;
        for (int64_t k = 0; k < tfc_tensor_numel(rg); k++) {
            err = fmax(err, fabs(ga[k] - gb[k]));
            mag = fmax(mag, fabs(gb[k]));
        }
        if (!(err <= 1e-10 * (1 + mag))) TFC_FAIL_AT("grad of %s differs by %g (max |g| %g)", names[i], err, mag);
        tfc_test_checks++;
        CHECK(mag > 0); /* every parameter receives a gradient */
        tfc_tensor_release(rg);
        tfc_tensor_release(grads[i]);
    }
    for (int i = 0; i < rc->n; i++) tfc_tensor_release(rc->tmp[i]);
    free(rc);
    tfc_tensor_release(x);
    tfc_tensor_release(y);
    tfc_tensor_release(logits);
    tfc_tensor_release(loss);
    tfc_graph_release(g);
    tfc_graph_release(g2);
    tfc_gpt_release(m);
}

TEST(loss_and_grads_equal_reference_composition) {
    compare_with_reference(1, 1);
    compare_with_reference(0, 0);
}

/* ---- gradcheck ------------------------------------------------------------------------ */

typedef struct gc_ctx {
    tfc_gpt *m;
    tfc_tensor *x, *y;
} gc_ctx;

static tfc_status gc_fn(tfc_graph *g, tfc_tensor *const *inputs, int32_t n, tfc_tensor **out, void *ctx) {
    gc_ctx *c = ctx;
    (void)inputs;
    (void)n;
    return tfc_gpt_forward(c->m, g, c->x, c->y, NULL, out);
}

TEST(gradcheck_one_layer_two_heads_16_dims) {
    tfc_gpt *m = small_model(1, 2, 16, 7, 6, 1, 1, TFC_DTYPE_F64, 3);
    const int32_t idx[8] = {1, 2, 3, 4, 6, 5, 0, 2}, tgt[8] = {2, 3, 4, 5, 5, 0, 2, 1};
    gc_ctx c = {m, ids_tensor(idx, 2, 4), ids_tensor(tgt, 2, 4)};
    int32_t n;
    const char *const *names;
    tfc_tensor *const *ps;
    CHECK_OK(tfc_gpt_params(m, &n, &names, &ps));
    /* GPT-2 init makes attention nearly uniform, so q and k would get gradients near 1e-9,
       all roundoff for finite differences: give every parameter O(0.3) random values */
    for (int32_t i = 0; i < n; i++)
        CHECK_OK(tfc_tensor_fill_normal(ps[i], i % 2 ? 0.1 : 0.0, 0.3, 17, (uint64_t)i * 1000));
    /* c_attn.bias is left out: its key part has an exactly zero gradient (softmax is
       shift-invariant), where a relative error is pure finite-difference noise; its
       gradient is checked against the reference composition above */
    tfc_tensor *checked[32];
    const char *checked_names[32];
    int32_t nc = 0;
    for (int32_t i = 0; i < n; i++)
        if (!strstr(names[i], "c_attn.bias")) checked_names[nc] = names[i], checked[nc++] = ps[i];
    CHECK(nc == n - 1);
    double err = 1;
    int32_t wi = -1;
    int64_t wk = -1;
    /* Some q/k weights get gradients near 4e-8, where f64 roundoff in the loss
       (~1e-16 / eps) dominates the difference quotient: eps 1e-5 keeps that
       floor at ~2e-4 relative, while a wrong gradient term shows as O(1). */
    CHECK_OK(tfc_gradcheck(gc_fn, checked, nc, &c, 1e-5, &err, &wi, &wk));
    if (!(err < 1e-3)) {
        tfc_tensor *gr = NULL;
        CHECK_OK(tfc_tensor_grad(checked[wi], &gr));
        TFC_FAIL_AT("gradcheck max rel err %g at %s[%lld] (analytic %g)", err, checked_names[wi], (long long)wk,
                    gr ? ((double *)tfc_tensor_data(gr))[wk] : 0.0);
        tfc_tensor_release(gr);
    }
    tfc_test_checks++;
    for (int32_t i = 0; i < n; i++) CHECK_OK(tfc_tensor_zero_grad(ps[i], 1));
    tfc_tensor_release(c.x);
    tfc_tensor_release(c.y);
    tfc_gpt_release(m);
}

/* ---- KV cache -------------------------------------------------------------------------- */

TEST(kv_cache_logits_equal_full_recompute) {
    tfc_gpt *m = small_model(2, 2, 16, 13, 12, 1, 0, TFC_DTYPE_F64, 5);
    const int32_t seq[2][9] = {{1, 4, 9, 12, 0, 3, 3, 7, 11}, {2, 2, 8, 5, 1, 0, 12, 6, 9}};
    tfc_tensor *full_ids = ids_tensor(&seq[0][0], 2, 9), *full;
    CHECK_OK(tfc_gpt_forward(m, NULL, full_ids, NULL, &full, NULL));
    tfc_gpt_cache *c;
    CHECK_OK(tfc_gpt_cache_new(m, 2, &c));
    const int chunks[4] = {4, 1, 3, 1};
    int start = 0;
    const double *f = tfc_tensor_data(full);
    double worst = 0;
    for (int k = 0; k < 4; k++) {
        int32_t part[2 * 4];
        for (int b = 0; b < 2; b++)
            for (int t = 0; t < chunks[k]; t++) part[b * chunks[k] + t] = seq[b][start + t];
        tfc_tensor *ids = ids_tensor(part, 2, chunks[k]), *lg;
        CHECK_OK(tfc_gpt_forward_cached(m, c, ids, &lg));
        CHECK(tfc_tensor_dim(lg, 1) == chunks[k]);
        const double *p = tfc_tensor_data(lg);
        for (int b = 0; b < 2; b++)
            for (int t = 0; t < chunks[k]; t++)
                for (int v = 0; v < 13; v++)
                    worst = fmax(worst, fabs(p[(b * chunks[k] + t) * 13 + v] - f[(b * 9 + start + t) * 13 + v]));
        start += chunks[k];
        tfc_tensor_release(ids);
        tfc_tensor_release(lg);
    }
    CHECK(worst < 1e-12);
    CHECK(tfc_gpt_cache_length(c) == 9);
    /* 9 + 4 > block 12: refused, cache unchanged */
    int32_t four[8] = {0};
    tfc_tensor *ids4 = ids_tensor(four, 2, 4), *lg = NULL, *ids1 = ids_tensor(four, 1, 1);
    CHECK_ERR(tfc_gpt_forward_cached(m, c, ids4, &lg), TFC_ERR_INVALID_ARG, "exceed block_size 12");
    CHECK_ERR(tfc_gpt_forward_cached(m, c, ids1, &lg), TFC_ERR_SHAPE, "cache holds 2 sequences");
    CHECK(tfc_gpt_cache_length(c) == 9 && lg == NULL);
    tfc_gpt *other = small_model(2, 2, 16, 13, 12, 1, 0, TFC_DTYPE_F64, 5);
    CHECK_ERR(tfc_gpt_forward_cached(other, c, ids4, &lg), TFC_ERR_INVALID_ARG, "another model");
    CHECK_OK(tfc_gpt_cache_reset(c));
    CHECK(tfc_gpt_cache_length(c) == 0);
    tfc_gpt_release(other);
    tfc_tensor_release(ids4);
    tfc_tensor_release(ids1);
    tfc_gpt_cache_release(c);
    tfc_tensor_release(full_ids);
    tfc_tensor_release(full);
    tfc_gpt_release(m);
}

static int32_t count_tokens(int32_t tok, void *ctx) {
    (void)tok;
    return ++*(int *)ctx >= 3; /* stop after three */
}

TEST(greedy_generation_equals_argmax_of_full_recompute) {
    tfc_gpt *m = small_model(2, 2, 16, 13, 10, 1, 1, TFC_DTYPE_F32, 9);
    int32_t ctx[32] = {3, 1, 4}, n = 3, out[12];
    /* 12 new tokens after 3 runs past block 10: exercises the refill too */
    CHECK_OK(tfc_gpt_generate(m, ctx, 3, 12, 0.0, 0, 1.0, 0, out, 12, NULL, NULL));
    int32_t window_start = 0;
    for (int i = 0; i < 12; i++) {
        /* reference: full forward over what the cache holds (refill keeps the last half block) */
        if (n - window_start > 10) window_start = n - 5;
        tfc_tensor *ids = ids_tensor(ctx + window_start, 1, n - window_start), *lg, *am;
        CHECK_OK(tfc_gpt_forward(m, NULL, ids, NULL, &lg, NULL));
        tfc_tensor *last;
        CHECK_OK(tfc_narrow(NULL, lg, 1, n - window_start - 1, 1, &last));
        CHECK_OK(tfc_argmax(last, 2, 0, &am));
        double want;
        CHECK_OK(tfc_tensor_item(am, &want));
        if ((int32_t)want != out[i]) TFC_FAIL_AT("token %d: generated %d, argmax %d", i, out[i], (int)want);
        ctx[n++] = out[i];
        tfc_tensor_release(ids);
        tfc_tensor_release(lg);
        tfc_tensor_release(last);
        tfc_tensor_release(am);
    }
    /* seeded sampling is reproducible, and the callback can stop it */
    int32_t s1[8], s2[8], s3[8];
    CHECK_OK(tfc_gpt_generate(m, ctx, 3, 8, 1.0, 5, 0.9, 77, s1, 8, NULL, NULL));
    CHECK_OK(tfc_gpt_generate(m, ctx, 3, 8, 1.0, 5, 0.9, 77, s2, 8, NULL, NULL));
    CHECK(memcmp(s1, s2, sizeof s1) == 0);
    int seen = 0;
    CHECK_ERR(tfc_gpt_generate(m, ctx, 3, 8, 1.0, 5, 0.9, 77, s3, 8, count_tokens, &seen), TFC_ERR_CANCELLED,
              "after 3");
    CHECK(seen == 3 && memcmp(s1, s3, 3 * sizeof *s1) == 0);
    int32_t badp[1] = {13};
    CHECK_ERR(tfc_gpt_generate(m, badp, 1, 2, 1.0, 0, 1.0, 0, s3, 8, NULL, NULL), TFC_ERR_INVALID_ARG,
              "prompt[0] is 13");
    CHECK_ERR(tfc_gpt_generate(m, ctx, 0, 2, 1.0, 0, 1.0, 0, s3, 8, NULL, NULL), TFC_ERR_INVALID_ARG, "n_prompt is 0");
    CHECK_ERR(tfc_gpt_generate(m, ctx, 1, 9, 1.0, 0, 1.0, 0, s3, 8, NULL, NULL), TFC_ERR_BUFFER_TOO_SMALL, "cap 8");
    CHECK_ERR(tfc_gpt_generate(m, ctx, 1, 2, -1.0, 0, 1.0, 0, s3, 8, NULL, NULL), TFC_ERR_INVALID_ARG, "temperature");
    tfc_gpt_release(m);
}

/* ---- sampling rules ---------------------------------------------------------------------- */

/* The token tfc_sample must pick: inverse CDF over the kept set, with the same uniform number. */
static int32_t expected_draw(const double *p_sorted, const int32_t *id_sorted, int keep, uint64_t seed, uint64_t off) {
    const int64_t one[1] = {1};
    tfc_tensor *u;
    CHECK_OK(tfc_tensor_rand(one, 1, TFC_DTYPE_F32, seed, off, &u));
    double uu = *(float *)tfc_tensor_data(u), mass = 0, cum = 0;
    tfc_tensor_release(u);
    for (int i = 0; i < keep; i++) mass += p_sorted[i];
    for (int i = 0; i < keep; i++) {
        cum += p_sorted[i];
        if (uu * mass < cum) return id_sorted[i];
    }
    return id_sorted[keep - 1];
}

TEST(sampling_rules_on_hand_made_logits) {
    /* probabilities 0.05 0.5 0.15 0.3 at ids 0..3 */
    const double p[4] = {0.05, 0.5, 0.15, 0.3};
    float lg[4];
    for (int i = 0; i < 4; i++) lg[i] = (float)log(p[i]) + 2.0f;
    const double ps[4] = {0.5, 0.3, 0.15, 0.05};
    const int32_t ids[4] = {1, 3, 2, 0};
    int32_t tok;
    /* greedy: the maximum, first one on ties; seed irrelevant */
    CHECK_OK(tfc_sample(lg, 4, 0.0, 0, 1.0, 123, 9, &tok));
    CHECK(tok == 1);
    float tie[3] = {1.0f, 3.0f, 3.0f};
    CHECK_OK(tfc_sample(tie, 3, 0.0, 0, 1.0, 0, 0, &tok));
    CHECK(tok == 1);
    int counts[4][4] = {{0}};
    const int N = 4000;
    for (int i = 0; i < N; i++) {
        /* top-k 1 is greedy */
        CHECK_OK(tfc_sample(lg, 4, 1.0, 1, 1.0, 5, (uint64_t)i, &tok));
        if (tok != 1) TFC_FAIL_AT("top_k=1 drew %d", tok);
        /* full distribution, top-k 2, top-p 0.6 (0.5 < 0.6 <= 0.8: keeps ids 1 and 3), top-k 3 + top-p 0.99 */
        int32_t t0, t1, t2, t3;
        CHECK_OK(tfc_sample(lg, 4, 1.0, 0, 1.0, 5, (uint64_t)i, &t0));
        CHECK_OK(tfc_sample(lg, 4, 1.0, 2, 1.0, 5, (uint64_t)i, &t1));
        CHECK_OK(tfc_sample(lg, 4, 1.0, 0, 0.6, 5, (uint64_t)i, &t2));
        CHECK_OK(tfc_sample(lg, 4, 1.0, 3, 0.99, 5, (uint64_t)i, &t3));
        counts[0][t0]++, counts[1][t1]++, counts[2][t2]++, counts[3][t3]++;
        if (i < 200) {
            if (t0 != expected_draw(ps, ids, 4, 5, (uint64_t)i)) TFC_FAIL_AT("draw %d full: %d", i, t0);
            if (t1 != expected_draw(ps, ids, 2, 5, (uint64_t)i)) TFC_FAIL_AT("draw %d top-k 2: %d", i, t1);
            if (t2 != expected_draw(ps, ids, 2, 5, (uint64_t)i)) TFC_FAIL_AT("draw %d top-p 0.6: %d", i, t2);
            /* top-k 3 leaves 0.95; 0.99 of it needs all three */
            if (t3 != expected_draw(ps, ids, 3, 5, (uint64_t)i)) TFC_FAIL_AT("draw %d top-k 3 top-p .99: %d", i, t3);
        }
    }
    for (int k = 0; k < 4; k++) CHECK_CLOSE(counts[0][k] / (double)N, p[k], 0.03);
    CHECK(counts[1][0] == 0 && counts[1][2] == 0 && counts[2][0] == 0 && counts[2][2] == 0 && counts[3][0] == 0);
    CHECK_CLOSE(counts[1][1] / (double)N, 0.5 / 0.8, 0.03);
    CHECK_CLOSE(counts[2][3] / (double)N, 0.3 / 0.8, 0.03);
    CHECK_CLOSE(counts[3][2] / (double)N, 0.15 / 0.95, 0.03);
    /* top-p 0.4: the most probable token alone crosses it */
    for (int i = 0; i < 50; i++) {
        CHECK_OK(tfc_sample(lg, 4, 1.0, 0, 0.4, 1, (uint64_t)i, &tok));
        CHECK(tok == 1);
    }
    /* temperature 2 flattens: p^(1/2) normalised */
    int hot[4] = {0};
    for (int i = 0; i < N; i++) {
        CHECK_OK(tfc_sample(lg, 4, 2.0, 0, 1.0, 11, (uint64_t)i, &tok));
        hot[tok]++;
    }
    double z = 0;
    for (int k = 0; k < 4; k++) z += sqrt(p[k]);
    for (int k = 0; k < 4; k++) CHECK_CLOSE(hot[k] / (double)N, sqrt(p[k]) / z, 0.03);
    /* reproducible */
    int32_t a, b;
    CHECK_OK(tfc_sample(lg, 4, 0.8, 3, 0.9, 99, 7, &a));
    CHECK_OK(tfc_sample(lg, 4, 0.8, 3, 0.9, 99, 7, &b));
    CHECK(a == b);
    /* bad arguments */
    tok = -7;
    CHECK_ERR(tfc_sample(lg, 4, -1.0, 0, 1.0, 0, 0, &tok), TFC_ERR_INVALID_ARG, "temperature is -1");
    CHECK_ERR(tfc_sample(lg, 4, NAN, 0, 1.0, 0, 0, &tok), TFC_ERR_INVALID_ARG, "temperature");
    CHECK_ERR(tfc_sample(lg, 4, 1.0, -2, 1.0, 0, 0, &tok), TFC_ERR_INVALID_ARG, "top_k is -2");
    CHECK_ERR(tfc_sample(lg, 4, 1.0, 0, 0.0, 0, 0, &tok), TFC_ERR_INVALID_ARG, "top_p is 0");
    CHECK_ERR(tfc_sample(lg, 4, 1.0, 0, 1.5, 0, 0, &tok), TFC_ERR_INVALID_ARG, "top_p is 1.5");
    CHECK_ERR(tfc_sample(lg, 0, 1.0, 0, 1.0, 0, 0, &tok), TFC_ERR_INVALID_ARG, "n is 0");
    CHECK_ERR(tfc_sample(NULL, 4, 1.0, 0, 1.0, 0, 0, &tok), TFC_ERR_INVALID_ARG, "logits is NULL");
    float nan_lg[2] = {0.0f, NAN};
    CHECK_ERR(tfc_sample(nan_lg, 2, 1.0, 0, 1.0, 0, 0, &tok), TFC_ERR_INVALID_ARG, "logits[1]");
    CHECK(tok == -7);
}

/* ---- weights on disk ------------------------------------------------------------------------ */

TEST(weights_save_load_round_trip) {
    char path[] = "/tmp/tfc_test_gpt_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    tfc_gpt *m = small_model(2, 2, 16, 13, 10, 1, 0, TFC_DTYPE_F32, 21);
    const char *k[1] = {"note"}, *v[1] = {"hello"};
    CHECK_OK(tfc_gpt_save(m, path, k, v, 1));
    tfc_gpt *back = NULL;
    CHECK_OK(tfc_gpt_load(path, &back));
    tfc_gpt_config c = TFC_GPT_CONFIG_INIT;
    CHECK_OK(tfc_gpt_get_config(back, &c));
    CHECK(c.n_layer == 2 && c.n_embd == 16 && c.vocab_size == 13 && c.tie_weights == 0 && c.bias == 1);
    int32_t n, n2;
    const char *const *names, *const *names2;
    tfc_tensor *const *ps, *const *ps2;
    CHECK_OK(tfc_gpt_params(m, &n, &names, &ps));
    CHECK_OK(tfc_gpt_params(back, &n2, &names2, &ps2));
    CHECK(n == n2);
    for (int32_t i = 0; i < n && i < n2; i++) {
        CHECK(strcmp(names[i], names2[i]) == 0);
        CHECK(memcmp(tfc_tensor_data(ps[i]), tfc_tensor_data(ps2[i]), (size_t)tfc_tensor_numel(ps[i]) * 4) == 0);
    }
    tfc_safetensors *f;
    CHECK_OK(tfc_safetensors_load(path, &f));
    const char *val;
    CHECK_OK(tfc_safetensors_metadata(f, "note", &val));
    CHECK(val && strcmp(val, "hello") == 0);
    CHECK_OK(tfc_safetensors_metadata(f, "format", &val));
    CHECK(val && strcmp(val, "pt") == 0);
    tfc_safetensors_release(f);
    /* into a model of another config: refused, nothing copied */
    tfc_gpt *other = small_model(2, 2, 16, 14, 10, 1, 0, TFC_DTYPE_F32, 1);
    float before = *(float *)tfc_tensor_data(param(other, "transformer.wpe.weight"));
    CHECK_ERR(tfc_gpt_load_into(other, path), TFC_ERR_INVALID_ARG, "vocab_size 13 but the model has 14");
    CHECK(before == *(float *)tfc_tensor_data(param(other, "transformer.wpe.weight")));
    tfc_gpt *same = small_model(2, 2, 16, 13, 10, 1, 0, TFC_DTYPE_F32, 99);
    CHECK_OK(tfc_gpt_load_into(same, path));
    CHECK(memcmp(tfc_tensor_data(param(same, "lm_head.weight")), tfc_tensor_data(param(m, "lm_head.weight")),
                 13 * 16 * 4) == 0);
    CHECK_ERR(tfc_gpt_load("/nonexistent/dir/model.safetensors", &back), TFC_ERR_IO, "/nonexistent/dir");
    tfc_gpt_release(same);
    tfc_gpt_release(other);
    tfc_gpt_release(back);
    tfc_gpt_release(m);
    unlink(path);
}

/*
 * A checkpoint's config is read before its tensors: a small file whose
 * metadata claims a large model is refused before the model is built
 * (it used to allocate and initialise the whole claimed model first).
 */
TEST(weights_load_refuses_a_config_the_file_cannot_hold) {
    char path[] = "/tmp/tfc_test_gpt_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    tfc_gpt *m = small_model(1, 2, 8, 16, 8, 1, 1, TFC_DTYPE_F32, 3);
    CHECK_OK(tfc_gpt_save(m, path, NULL, NULL, 0));
    tfc_gpt_release(m);
    /* the same tensors, metadata claiming 4 layers of width 1024 (~200 MB) or 2^31-1 layers */
    const char *claims[2][2] = {{"4", "1024"}, {"2147483647", "2147483640"}};
    for (int k = 0; k < 2; k++) {
        tfc_safetensors *f;
        CHECK_OK(tfc_safetensors_load(path, &f));
        int32_t n = tfc_safetensors_count(f), nm = tfc_safetensors_metadata_count(f);
        const char *names[64], *keys[32], *vals[32];
        tfc_tensor *ts[64];
        for (int32_t i = 0; i < n && i < 64; i++) CHECK_OK(tfc_safetensors_get(f, i, &names[i], &ts[i]));
        for (int32_t i = 0; i < nm && i < 32; i++) {
            CHECK_OK(tfc_safetensors_metadata_at(f, i, &keys[i], &vals[i]));
            if (strcmp(keys[i], "tfc.n_layer") == 0) vals[i] = claims[k][0];
            if (strcmp(keys[i], "tfc.n_embd") == 0) vals[i] = claims[k][1];
        }
        char big[sizeof path + 4];
        snprintf(big, sizeof big, "%s.big", path);
        CHECK_OK(tfc_safetensors_save(big, names, ts, n, keys, vals, nm));
        tfc_gpt *back = NULL;
        CHECK_ERR(tfc_gpt_load(big, &back), TFC_ERR_FORMAT, "values but its config (n_layer");
        CHECK(back == NULL);
        for (int32_t i = 0; i < n && i < 64; i++) tfc_tensor_release(ts[i]);
        tfc_safetensors_release(f);
        unlink(big);
    }
    unlink(path);
}

/* A caller built before cfg.dropout existed passes a struct ending at ln_eps: it still builds a model (dropout 0). */
TEST(config_without_dropout_field) {
    struct old_config {
        uint32_t struct_size;
        int32_t n_layer, n_head, n_embd, block_size, vocab_size, bias, tie_weights;
        tfc_dtype dtype;
        double ln_eps;
    } old = {sizeof old, 1, 2, 8, 4, 5, 1, 1, TFC_DTYPE_F32, 1e-5};
    CHECK(sizeof old == offsetof(tfc_gpt_config, dropout));
    tfc_gpt *m = NULL;
    CHECK_OK(tfc_gpt_new((const tfc_gpt_config *)&old, 1, &m));
    tfc_gpt_config back = TFC_GPT_CONFIG_INIT;
    back.dropout = 0.5;
    CHECK_OK(tfc_gpt_get_config(m, &back));
    CHECK(back.dropout == 0.0 && back.n_embd == 8);
    tfc_gpt_release(m);
    CHECK_OK(tfc_gpt_config_preset("char-small", (tfc_gpt_config *)&old));
    CHECK(old.n_embd == 384);
    tfc_gpt_config bad = TFC_GPT_CONFIG_INIT;
    bad.dropout = 1.0;
    CHECK_ERR(tfc_gpt_new(&bad, 1, &m), TFC_ERR_INVALID_ARG, "cfg->dropout is 1");
}

/* Targets of -100 (PyTorch's ignore_index) are skipped by both loss paths (logits materialised, and the fused head
 * when logits are not wanted); the mean runs over the other positions. Reference: log-sum-exp of the logits by hand. */
TEST(loss_skips_targets_of_minus_100) {
    tfc_gpt *m = small_model(1, 2, 8, 7, 8, 1, 1, TFC_DTYPE_F64, 3);
    const int32_t idx[8] = {1, 2, 3, 4, 5, 6, 0, 1}, tgt[8] = {2, -100, 4, 6, -100, 0, 1, -100};
    tfc_tensor *x = ids_tensor(idx, 2, 4), *y = NULL, *lg = NULL, *loss = NULL, *fused = NULL;
    const int64_t d[2] = {2, 4};
    CHECK_OK(tfc_tensor_from_data(tgt, d, 2, TFC_DTYPE_I32, &y));
    CHECK_OK(tfc_gpt_forward(m, NULL, x, y, &lg, &loss));
    CHECK_OK(tfc_gpt_forward(m, NULL, x, y, NULL, &fused));
    if (!lg || !loss || !fused) { /* already reported; nothing to compare */
        tfc_tensor_release(x);
        tfc_tensor_release(y);
        tfc_tensor_release(lg);
        tfc_tensor_release(loss);
        tfc_tensor_release(fused);
        tfc_gpt_release(m);
        return;
    }
    const double *z = tfc_tensor_data(lg);
    double want = 0;
    int n = 0;
    for (int r = 0; r < 8; r++) {
        if (tgt[r] == -100) continue;
        double mx = z[r * 7], s = 0;
        for (int c = 1; c < 7; c++) mx = z[r * 7 + c] > mx ? z[r * 7 + c] : mx;
        for (int c = 0; c < 7; c++) s += exp(z[r * 7 + c] - mx);
        want += mx + log(s) - z[r * 7 + tgt[r]];
        n++;
    }
    want /= n;
    double got = 0, got_fused = 0;
    CHECK_OK(tfc_tensor_item(loss, &got));
    CHECK_OK(tfc_tensor_item(fused, &got_fused));
    CHECK(fabs(got - want) < 1e-12 && fabs(got_fused - want) < 1e-12);
    /* -1 is an ordinary id now (out of range), as in torch */
    const int32_t neg[8] = {2, -1, 4, 6, 0, 0, 1, 1};
    tfc_tensor *yn = NULL, *bad = NULL;
    CHECK_OK(tfc_tensor_from_data(neg, d, 2, TFC_DTYPE_I32, &yn));
    CHECK_ERR(tfc_gpt_forward(m, NULL, x, yn, NULL, &bad), TFC_ERR_INVALID_ARG, "targets[1] is -1");
    tfc_tensor *tensors[] = {x, y, lg, loss, fused, yn};
    for (size_t i = 0; i < sizeof tensors / sizeof tensors[0]; i++) tfc_tensor_release(tensors[i]);
    tfc_gpt_release(m);
}

TFC_TEST_MAIN
