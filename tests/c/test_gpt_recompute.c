/*
 * tfc_gpt_set_recompute: char-tiny's loss and every parameter's gradient
 * are bitwise those of the plain forward (f32 and f64, tied and untied,
 * with and without biases), the graph holds one node per block instead of
 * the block's ops, and two optimizer steps later the weights still agree
 * bit for bit. With dropout (the same stream each way) and with LoRA
 * adapters (only they have gradients) the same holds.
 */
#include "tfc_test_util.h"

TFC_TEST_MAIN

static double g_dropout; /* the dropout tiny() gives its models */

static tfc_gpt *tiny(tfc_dtype dt, int32_t bias, int32_t tie) {
    tfc_gpt_config c = TFC_GPT_CONFIG_INIT;
    c.dropout = g_dropout;
    CHECK_OK(tfc_gpt_config_preset("char-tiny", &c));
    c.vocab_size = 65;
    c.dtype = dt;
    c.bias = bias;
    c.tie_weights = tie;
    tfc_gpt *m = NULL;
    CHECK_OK(tfc_gpt_new(&c, 1337, &m));
    return m;
}

static void batch(tfc_tensor **x, tfc_tensor **y) {
    int32_t xs[2 * 48], ys[2 * 48];
    for (int i = 0; i < 2 * 48; i++) {
        xs[i] = (i * 7 + 3) % 65;
        ys[i] = (i * 11 + 5) % 65;
    }
    const int64_t d[2] = {2, 48};
    CHECK_OK(tfc_tensor_from_data(xs, d, 2, TFC_DTYPE_I32, x));
    CHECK_OK(tfc_tensor_from_data(ys, d, 2, TFC_DTYPE_I32, y));
}

/* Bytes of t (caller frees). */
static unsigned char *bytes_of(const tfc_tensor *t, size_t *n) {
    *n = (size_t)tfc_tensor_numel(t) * tfc_dtype_size(tfc_tensor_dtype(t));
    unsigned char *b = malloc(*n);
    CHECK_OK(tfc_tensor_copy_to_host(t, b, *n));
    return b;
}

static int same(const tfc_tensor *a, const tfc_tensor *b) {
    if (!a || !b) return 0;
    size_t na, nb;
    unsigned char *x = bytes_of(a, &na), *y = bytes_of(b, &nb);
    int eq = na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return eq;
}

/* The trainable parameters: the LoRA adapters when m has them, else the model's. */
static void trainable(const tfc_gpt *m, int32_t *n, const char *const **names, tfc_tensor *const **ps) {
    if (tfc_gpt_lora_params(m, n, names, ps) == TFC_OK && *n > 0) return;
    CHECK_OK(tfc_gpt_params(m, n, names, ps));
}

/* Forward + backward on m; grads[i] gets a new reference to parameter i's gradient; returns the node count. */
static int64_t step(tfc_gpt *m, int want_logits, double *loss_out, tfc_tensor **grads) {
    tfc_tensor *x, *y, *loss = NULL, *lg = NULL;
    batch(&x, &y);
    CHECK_OK(tfc_gpt_set_dropout_stream(m, 99, 0)); /* both runs draw the same masks */
    tfc_graph *g;
    CHECK_OK(tfc_graph_new(&g));
    CHECK_OK(tfc_gpt_forward(m, g, x, y, want_logits ? &lg : NULL, &loss));
    int64_t nodes = tfc_graph_num_nodes(g);
    CHECK_OK(tfc_graph_backward(g, loss, NULL));
    CHECK_OK(tfc_tensor_item(loss, loss_out));
    int32_t n;
    const char *const *names;
    tfc_tensor *const *ps;
    trainable(m, &n, &names, &ps);
    for (int32_t i = 0; i < n; i++) {
        CHECK_OK(tfc_tensor_grad(ps[i], &grads[i]));
        CHECK_OK(tfc_tensor_zero_grad(ps[i], 1));
    }
    tfc_tensor_release(loss);
    tfc_tensor_release(lg);
    tfc_tensor_release(x);
    tfc_tensor_release(y);
    tfc_graph_release(g);
    return nodes;
}

static void check_same_grads_of(tfc_gpt *m, int want_logits) {
    int32_t n;
    const char *const *names;
    tfc_tensor *const *ps;
    trainable(m, &n, &names, &ps);
    tfc_tensor **plain = calloc((size_t)n, sizeof *plain), **rec = calloc((size_t)n, sizeof *rec);
    double lp = 0, lr = 1;
    CHECK(tfc_gpt_get_recompute(m) == 0);
    int64_t n_plain = step(m, want_logits, &lp, plain);
    CHECK_OK(tfc_gpt_set_recompute(m, 1));
    CHECK(tfc_gpt_get_recompute(m) == 1);
    int64_t n_rec = step(m, want_logits, &lr, rec);
    CHECK(memcmp(&lp, &lr, sizeof lp) == 0);
    for (int32_t i = 0; i < n; i++) {
        if (!same(plain[i], rec[i])) TFC_FAIL_AT("%s: the gradient differs with recompute", names[i]);
        tfc_test_checks++;
    }
    /* 4 blocks of (2 LayerNorms, 2 adds, ~12 attention/MLP ops) become 4 checkpoint nodes */
    CHECK(n_rec < n_plain - 4 * 10);
    for (int32_t i = 0; i < n; i++) {
        tfc_tensor_release(plain[i]);
        tfc_tensor_release(rec[i]);
    }
    free(plain);
    free(rec);
    tfc_gpt_release(m);
}

static void check_same_grads(tfc_dtype dt, int32_t bias, int32_t tie, int want_logits) {
    check_same_grads_of(tiny(dt, bias, tie), want_logits);
}

/* Dropout at all four sites: the replayed block draws the masks its forward drew. */
TEST(recompute_gradients_bitwise_dropout) {
    g_dropout = 0.2;
    tfc_gpt *m = tiny(TFC_DTYPE_F32, 1, 1);
    g_dropout = 0;
    /* the masks matter: the loss with dropout differs from the loss without */
    tfc_tensor *x, *y, *l0 = NULL;
    batch(&x, &y);
    tfc_graph *g;
    CHECK_OK(tfc_graph_new(&g));
    CHECK_OK(tfc_gpt_forward(m, g, x, y, NULL, &l0));
    tfc_tensor *l1 = NULL;
    CHECK_OK(tfc_gpt_forward(m, NULL, x, y, NULL, &l1));
    CHECK(t_item(l0) != t_item(l1));
    tfc_tensor_release(l0), tfc_tensor_release(l1), tfc_tensor_release(x), tfc_tensor_release(y);
    tfc_graph_release(g);
    check_same_grads_of(m, 1);
}

/* LoRA adapters on every Linear, B made non-zero so A's gradient is too: the adapters' gradients agree. */
TEST(recompute_gradients_bitwise_lora) {
    tfc_gpt *m = tiny(TFC_DTYPE_F32, 1, 1);
    tfc_lora_config lc = TFC_LORA_CONFIG_INIT;
    lc.rank = 4;
    lc.targets = "all-linear";
    CHECK_OK(tfc_gpt_add_lora(m, &lc));
    int32_t n;
    const char *const *names;
    tfc_tensor *const *ps;
    CHECK_OK(tfc_gpt_lora_params(m, &n, &names, &ps));
    CHECK(n == 4 * 4 * 2);
    for (int32_t i = 0; i < n; i++)
        if (strstr(names[i], "lora_B")) CHECK_OK(tfc_tensor_fill_uniform(ps[i], -0.05, 0.05, 7, (uint64_t)i));
    check_same_grads_of(m, 0);
}

TEST(recompute_gradients_bitwise_f32) { check_same_grads(TFC_DTYPE_F32, 1, 1, 0); }
TEST(recompute_gradients_bitwise_f32_logits_untied_nobias) { check_same_grads(TFC_DTYPE_F32, 0, 0, 1); }
TEST(recompute_gradients_bitwise_f64) { check_same_grads(TFC_DTYPE_F64, 1, 1, 0); }

/* A few AdamW steps each way from the same init: the same weights, bit for bit. */
TEST(recompute_training_bitwise) {
    tfc_gpt *ms[2] = {tiny(TFC_DTYPE_F32, 1, 1), tiny(TFC_DTYPE_F32, 1, 1)};
    CHECK_OK(tfc_gpt_set_recompute(ms[1], 1));
    tfc_tensor *x, *y;
    batch(&x, &y);
    for (int k = 0; k < 2; k++) {
        int32_t n;
        const char *const *names;
        tfc_tensor *const *ps;
        CHECK_OK(tfc_gpt_params(ms[k], &n, &names, &ps));
        tfc_optim_options o = TFC_ADAMW_OPTIONS_INIT;
        tfc_optim *opt;
        tfc_graph *g;
        CHECK_OK(tfc_optim_adamw(&o, &opt));
        CHECK_OK(tfc_optim_add_params(opt, ps, n, NULL));
        CHECK_OK(tfc_graph_new(&g));
        for (int s = 0; s < 3; s++) {
            tfc_tensor *loss;
            CHECK_OK(tfc_gpt_forward(ms[k], g, x, y, NULL, &loss));
            CHECK_OK(tfc_graph_backward(g, loss, NULL));
            CHECK_OK(tfc_graph_clear(g));
            CHECK_OK(tfc_optim_clip_grad_norm(opt, 1.0, NULL));
            CHECK_OK(tfc_optim_step(opt));
            CHECK_OK(tfc_optim_zero_grad(opt, 1));
            tfc_tensor_release(loss);
        }
        tfc_graph_release(g);
        tfc_optim_release(opt);
    }
    int32_t n;
    const char *const *names;
    tfc_tensor *const *p0, *const *p1;
    CHECK_OK(tfc_gpt_params(ms[0], &n, &names, &p0));
    CHECK_OK(tfc_gpt_params(ms[1], &n, &names, &p1));
    for (int32_t i = 0; i < n; i++) {
        if (!same(p0[i], p1[i])) TFC_FAIL_AT("%s differs after 3 steps with recompute", names[i]);
        tfc_test_checks++;
    }
    tfc_tensor_release(x);
    tfc_tensor_release(y);
    tfc_gpt_release(ms[0]);
    tfc_gpt_release(ms[1]);
}

/* No graph, or recording off: the flag changes nothing; bad values are refused. */
TEST(recompute_flag_checks) {
    tfc_gpt *m = tiny(TFC_DTYPE_F32, 1, 1);
    CHECK_ERR(tfc_gpt_set_recompute(m, 2), TFC_ERR_INVALID_ARG, "tfc_gpt_set_recompute: on is 2");
    CHECK_ERR(tfc_gpt_set_recompute(NULL, 1), TFC_ERR_INVALID_ARG, "tfc_gpt_set_recompute: m is NULL");
    CHECK(tfc_gpt_get_recompute(NULL) == 0);
    CHECK_OK(tfc_gpt_set_recompute(m, 1));
    tfc_tensor *x, *y, *l0 = NULL, *l1 = NULL;
    batch(&x, &y);
    CHECK_OK(tfc_gpt_forward(m, NULL, x, y, NULL, &l0));
    CHECK_OK(tfc_gpt_set_recompute(m, 0));
    CHECK_OK(tfc_gpt_forward(m, NULL, x, y, NULL, &l1));
    CHECK(t_item(l0) == t_item(l1));
    tfc_tensor_release(l0), tfc_tensor_release(l1), tfc_tensor_release(x), tfc_tensor_release(y);
    tfc_gpt_release(m);
}
