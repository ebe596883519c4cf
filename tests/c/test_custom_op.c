/*
 * tfc_custom_op: a caller's forward/backward on the graph. Gradients equal
 * hand-derived values and f64 finite differences (tfc_gradcheck); the
 * destructor runs exactly once on every path (counted); saved tensors go
 * through the version check; failing callbacks and bad gradients give
 * errors naming the op; nothing leaks (run under ASan).
 */
#include "tfc_test_util.h"

TFC_TEST_MAIN

/* What the test ops read through ctx. */
typedef struct opctx {
    int destroyed; /* destroy calls */
    int forward_calls, backward_calls;
    int fail; /* 1 forward fails, 2 forward fails silently, 3 forward leaves out NULL,
                            4 backward fails, 5 backward returns a wrong shape, 6 backward returns an input's
                            gradient that is not needed, 7 forward returns the input handle itself */
    int32_t last_needs[4];
    int saw_null_gout; /* backward saw grad_outputs[1] NULL */
} opctx;

static void destroy(void *ctx) { ((opctx *)ctx)->destroyed++; }

/* y = x * x, saving x. */
static tfc_status sq_forward(void *ctx, const tfc_tensor *const *in, int32_t n_in, tfc_tensor **out, int32_t n_out,
                             tfc_tensor **saved) {
    (void)n_in;
    (void)n_out;
    opctx *c = ctx;
    c->forward_calls++;
    if (c->fail == 1) return tfc_reshape(NULL, in[0], (const int64_t[]){7}, 1, &out[0]);
    if (c->fail == 2) return TFC_ERR_CANCELLED;
    if (c->fail == 3) return TFC_OK;
    saved[0] = tfc_tensor_retain((tfc_tensor *)in[0]);
    if (c->fail == 7) {
        out[0] = tfc_tensor_retain((tfc_tensor *)in[0]);
        return TFC_OK;
    }
    return tfc_mul(NULL, in[0], in[0], &out[0]);
}

/* dx = 2 x dy. */
static tfc_status sq_backward(void *ctx, const tfc_tensor *const *saved, const tfc_tensor *const *gout, int32_t n_out,
                              const int32_t *needs, tfc_tensor **gin, int32_t n_in) {
    (void)n_out;
    (void)n_in;
    opctx *c = ctx;
    c->backward_calls++;
    c->last_needs[0] = needs[0];
    if (c->fail == 4) return tfc_reshape(NULL, saved[0], (const int64_t[]){7}, 1, &gin[0]);
    if (c->fail == 5) return tfc_tensor_zeros((const int64_t[]){5}, 1, TFC_DTYPE_F64, &gin[0]);
    if (c->fail == 7) return tfc_tensor_clone(gout[0], &gin[0]); /* y = x: dx = dy */
    tfc_tensor *t = NULL;
    tfc_status s = tfc_mul(NULL, saved[0], gout[0], &t);
    if (s == TFC_OK) s = tfc_mul_scalar(NULL, t, 2.0, &gin[0]);
    tfc_tensor_release(t);
    return s;
}

static const tfc_custom_op_def sq_def = {sizeof(tfc_custom_op_def), "my_square", sq_forward, sq_backward, destroy};

/* (p, q) = (a * b, a + b), saving a and b; b may not require grad. */
static tfc_status ab_forward(void *ctx, const tfc_tensor *const *in, int32_t n_in, tfc_tensor **out, int32_t n_out,
                             tfc_tensor **saved) {
    (void)n_in;
    (void)n_out;
    ((opctx *)ctx)->forward_calls++;
    saved[0] = tfc_tensor_retain((tfc_tensor *)in[0]);
    saved[3] = tfc_tensor_retain((tfc_tensor *)in[1]); /* any slot */
    tfc_status s = tfc_mul(NULL, in[0], in[1], &out[0]);
    if (s == TFC_OK) s = tfc_add(NULL, in[0], in[1], &out[1]);
    return s;
}

/* da = b dp + dq, db = a dp + dq (dq may be NULL: zeros). */
static tfc_status ab_backward(void *ctx, const tfc_tensor *const *saved, const tfc_tensor *const *gout, int32_t n_out,
                              const int32_t *needs, tfc_tensor **gin, int32_t n_in) {
    (void)n_out;
    opctx *c = ctx;
    c->backward_calls++;
    for (int32_t i = 0; i < n_in; i++) c->last_needs[i] = needs[i];
    c->saw_null_gout = gout[1] == NULL;
    tfc_status s = TFC_OK;
    for (int32_t i = 0; i < 2 && s == TFC_OK; i++) {
        if (!needs[i] && c->fail != 6) continue;
        tfc_tensor *t = NULL;
        s = tfc_mul(NULL, saved[i == 0 ? 3 : 0], gout[0], &t);
        if (s == TFC_OK && gout[1])
            s = tfc_add(NULL, t, gout[1], &gin[i]);
        else if (s == TFC_OK)
            gin[i] = tfc_tensor_retain(t);
        tfc_tensor_release(t);
    }
    return s;
}

static const tfc_custom_op_def ab_def = {sizeof(tfc_custom_op_def), "my_ab", ab_forward, ab_backward, destroy};

static tfc_tensor *leaf(const double *v, const int64_t *dims, int32_t nd) {
    tfc_tensor *t = t_from(v, dims, nd);
    if (tfc_tensor_set_requires_grad(t, 1) != TFC_OK) abort();
    return t;
}

/* loss = sum(y ⊙ w) for a fixed w. */
static tfc_status weighted_sum(tfc_graph *g, const tfc_tensor *y, const tfc_tensor *w, tfc_tensor **loss) {
    tfc_tensor *m = NULL;
    tfc_status s = tfc_mul(g, y, w, &m);
    if (s == TFC_OK) s = tfc_sum(g, m, NULL, 0, 0, loss);
    tfc_tensor_release(m);
    return s;
}

static const double XV[6] = {0.5, -1.25, 2.0, 0.75, -0.3, 1.5};
static const double WV[6] = {1.0, 2.0, -1.0, 0.5, 3.0, -2.0};
static const int64_t D23[2] = {2, 3};

TEST(square_gradient_is_hand_derived_and_destroy_runs_once) {
    opctx c = {0};
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    tfc_tensor *x = leaf(XV, D23, 2), *w = t_from(WV, D23, 2), *y = NULL, *loss = NULL;
    CHECK_OK(tfc_custom_op(g, &sq_def, &c, (const tfc_tensor *const[]){x}, 1, &y, 1));
    CHECK(c.forward_calls == 1 && c.destroyed == 0);
    CHECK(tfc_tensor_requires_grad(y) && !tfc_tensor_is_leaf(y));
    CHECK(tfc_graph_num_nodes(g) == 1);
    double *yv = t_vals(y);
    for (int i = 0; i < 6; i++) CHECK(yv[i] == XV[i] * XV[i]);
    free(yv);
    CHECK_OK(weighted_sum(g, y, w, &loss));
    CHECK_OK(tfc_graph_backward(g, loss, NULL));
    CHECK(c.backward_calls == 1 && c.last_needs[0] == 1);
    tfc_tensor *gx = NULL;
    CHECK_OK(tfc_tensor_grad(x, &gx));
    double *gv = t_vals(gx);
    for (int i = 0; i < 6; i++) CHECK(gv[i] == 2.0 * XV[i] * WV[i]);
    free(gv);
    tfc_tensor_release(gx);
    /* the node lives while the graph or an output holds it */
    tfc_graph_release(g);
    tfc_tensor_release(loss);
    CHECK(c.destroyed == 0);
    tfc_tensor_release(y);
    CHECK(c.destroyed == 1);
    tfc_tensor_release(x);
    tfc_tensor_release(w);
    CHECK(c.destroyed == 1);
}

/* tfc_gradcheck over a composition using the custom op (f64 finite differences). */
static tfc_status gc_fn(tfc_graph *g, tfc_tensor *const *in, int32_t n, tfc_tensor **out, void *ctx) {
    (void)n;
    tfc_tensor *y = NULL, *t = NULL;
    tfc_status s = tfc_custom_op(g, &sq_def, ctx, (const tfc_tensor *const[]){in[0]}, 1, &y, 1);
    if (s == TFC_OK) s = tfc_tanh(g, y, &t);
    if (s == TFC_OK) s = weighted_sum(g, t, in[1], out);
    tfc_tensor_release(y);
    tfc_tensor_release(t);
    return s;
}

TEST(gradcheck_through_custom_op) {
    opctx c = {0};
    tfc_tensor *x = leaf(XV, D23, 2), *w = t_from(WV, D23, 2);
    double err = 1.0;
    CHECK_OK(tfc_gradcheck(gc_fn, (tfc_tensor *const[]){x, w}, 2, &c, 1e-6, &err, NULL, NULL));
    CHECK(err < 1e-7);
    /* one analytic pass plus two evaluations per element; every call destroyed its ctx use */
    CHECK(c.forward_calls == 1 + 2 * 6);
    CHECK(c.destroyed == c.forward_calls);
    tfc_tensor_release(x);
    tfc_tensor_release(w);
}

TEST(two_inputs_two_outputs_needs_input_grad_and_null_output_gradient) {
    static const double AV[3] = {1.5, -2.0, 0.25}, BV[3] = {3.0, 0.5, -4.0};
    const int64_t d3[1] = {3};
    for (int b_grad = 0; b_grad < 2; b_grad++) {
        for (int use_q = 0; use_q < 2; use_q++) {
            opctx c = {0};
            tfc_graph *g = NULL;
            CHECK_OK(tfc_graph_new(&g));
            tfc_tensor *a = leaf(AV, d3, 1), *b = b_grad ? leaf(BV, d3, 1) : t_from(BV, d3, 1);
            tfc_tensor *outs[2] = {0}, *lp = NULL, *lq = NULL, *loss = NULL;
            CHECK_OK(tfc_custom_op(g, &ab_def, &c, (const tfc_tensor *const[]){a, b}, 2, outs, 2));
            CHECK_OK(tfc_sum(g, outs[0], NULL, 0, 0, &lp));
            if (use_q) {
                CHECK_OK(tfc_mul_scalar(g, outs[1], 3.0, &lq));
                tfc_tensor *sq = NULL;
                CHECK_OK(tfc_sum(g, lq, NULL, 0, 0, &sq));
                CHECK_OK(tfc_add(g, lp, sq, &loss));
                tfc_tensor_release(sq);
            } else {
                loss = tfc_tensor_retain(lp);
            }
            CHECK_OK(tfc_graph_backward(g, loss, NULL));
            CHECK(c.last_needs[0] == 1 && c.last_needs[1] == b_grad);
            CHECK(c.saw_null_gout == !use_q);
            tfc_tensor *ga = NULL, *gb = NULL;
            CHECK_OK(tfc_tensor_grad(a, &ga));
            CHECK_OK(tfc_tensor_grad(b, &gb));
            CHECK((gb != NULL) == b_grad);
            double *gav = t_vals(ga), *gbv = gb ? t_vals(gb) : NULL;
            for (int i = 0; i < 3; i++) {
                CHECK(gav[i] == BV[i] + (use_q ? 3.0 : 0.0));
                if (gbv) CHECK(gbv[i] == AV[i] + (use_q ? 3.0 : 0.0));
            }
            free(gav);
            free(gbv);
            tfc_tensor_release(ga);
            tfc_tensor_release(gb);
            tfc_tensor *rel[] = {a, b, outs[0], outs[1], lp, lq, loss};
            for (size_t i = 0; i < sizeof rel / sizeof *rel; i++) tfc_tensor_release(rel[i]);
            CHECK(c.destroyed == 0);
            tfc_graph_release(g);
            CHECK(c.destroyed == 1);
        }
    }
}

TEST(a_gradient_for_an_input_that_needs_none_is_ignored) {
    static const double AV[2] = {1.0, 2.0}, BV[2] = {3.0, 4.0};
    const int64_t d2[1] = {2};
    opctx c = {.fail = 6};
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    tfc_tensor *a = leaf(AV, d2, 1), *b = t_from(BV, d2, 1), *outs[2] = {0}, *loss = NULL;
    CHECK_OK(tfc_custom_op(g, &ab_def, &c, (const tfc_tensor *const[]){a, b}, 2, outs, 2));
    CHECK_OK(tfc_sum(g, outs[0], NULL, 0, 0, &loss));
    CHECK_OK(tfc_graph_backward(g, loss, NULL));
    tfc_tensor *gb = NULL;
    CHECK_OK(tfc_tensor_grad(b, &gb));
    CHECK(gb == NULL);
    tfc_tensor *rel[] = {a, b, outs[0], outs[1], loss};
    for (size_t i = 0; i < sizeof rel / sizeof *rel; i++) tfc_tensor_release(rel[i]);
    tfc_graph_release(g);
    CHECK(c.destroyed == 1);
}

TEST(nothing_recorded_destroys_at_once) {
    tfc_tensor *x = leaf(XV, D23, 2), *xc = t_from(XV, D23, 2);
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    /* g NULL; recording off; no input requiring grad */
    for (int k = 0; k < 3; k++) {
        opctx c = {0};
        tfc_tensor *y = NULL;
        if (k == 1) CHECK_OK(tfc_graph_set_grad_enabled(g, 0));
        if (k == 2) CHECK_OK(tfc_graph_set_grad_enabled(g, 1));
        CHECK_OK(tfc_custom_op(k == 0 ? NULL : g, &sq_def, &c, (const tfc_tensor *const[]){k == 2 ? xc : x}, 1, &y, 1));
        CHECK(c.destroyed == 1 && c.forward_calls == 1);
        CHECK(!tfc_tensor_requires_grad(y));
        CHECK(tfc_graph_num_nodes(g) == 0);
        double *yv = t_vals(y);
        CHECK(yv[1] == XV[1] * XV[1]);
        free(yv);
        tfc_tensor_release(y);
    }
    tfc_graph_release(g);
    tfc_tensor_release(x);
    tfc_tensor_release(xc);
}

TEST(an_input_returned_as_output_is_a_fresh_handle) {
    opctx c = {.fail = 7};
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    tfc_tensor *x = leaf(XV, D23, 2), *w = t_from(WV, D23, 2), *y = NULL, *loss = NULL;
    CHECK_OK(tfc_custom_op(g, &sq_def, &c, (const tfc_tensor *const[]){x}, 1, &y, 1));
    CHECK(y != x && tfc_tensor_is_leaf(x) && !tfc_tensor_is_leaf(y) && tfc_tensor_shares_storage(x, y));
    CHECK_OK(weighted_sum(g, y, w, &loss));
    CHECK_OK(tfc_graph_backward(g, loss, NULL));
    tfc_tensor *gx = NULL;
    CHECK_OK(tfc_tensor_grad(x, &gx));
    double *gv = t_vals(gx);
    for (int i = 0; i < 6; i++) CHECK(gv[i] == WV[i]);
    free(gv);
    tfc_tensor *rel[] = {gx, x, w, y, loss};
    for (size_t i = 0; i < sizeof rel / sizeof *rel; i++) tfc_tensor_release(rel[i]);
    tfc_graph_release(g);
    CHECK(c.destroyed == 1);
}

TEST(saved_tensor_modified_in_place_fails_backward) {
    opctx c = {0};
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    tfc_tensor *x = leaf(XV, D23, 2), *w = t_from(WV, D23, 2), *y = NULL, *loss = NULL;
    CHECK_OK(tfc_custom_op(g, &sq_def, &c, (const tfc_tensor *const[]){x}, 1, &y, 1));
    CHECK_OK(weighted_sum(g, y, w, &loss));
    CHECK_OK(tfc_tensor_fill(x, 1.0)); /* x is what the op saved */
    CHECK_ERR(tfc_graph_backward(g, loss, NULL), TFC_ERR_INVALID_ARG, "saved by my_square for backward was modified");
    CHECK(c.backward_calls == 0);
    tfc_tensor *gx = NULL;
    CHECK_OK(tfc_tensor_grad(x, &gx));
    CHECK(gx == NULL);
    tfc_tensor *rel[] = {x, w, y, loss};
    for (size_t i = 0; i < sizeof rel / sizeof *rel; i++) tfc_tensor_release(rel[i]);
    tfc_graph_release(g);
    CHECK(c.destroyed == 1);
}

TEST(failing_forward_records_nothing_and_destroys) {
    const char *want[] = {NULL, "tfc_custom_op: my_square forward: tfc_reshape",
                          "tfc_custom_op: my_square forward: returned TFC_ERR_CANCELLED without a message",
                          "tfc_custom_op: my_square forward: returned TFC_OK but left outputs[0] NULL"};
    tfc_status st[] = {TFC_OK, TFC_ERR_SHAPE, TFC_ERR_CANCELLED, TFC_ERR_INVALID_ARG};
    for (int k = 1; k <= 3; k++) {
        opctx c = {.fail = k};
        tfc_graph *g = NULL;
        CHECK_OK(tfc_graph_new(&g));
        tfc_tensor *x = leaf(XV, D23, 2), *sentinel = (tfc_tensor *)&c, *y = sentinel;
        CHECK_ERR(tfc_custom_op(g, &sq_def, &c, (const tfc_tensor *const[]){x}, 1, &y, 1), st[k], want[k]);
        CHECK(y == sentinel);
        CHECK(c.destroyed == 1);
        CHECK(tfc_graph_num_nodes(g) == 0);
        tfc_graph_release(g);
        tfc_tensor_release(x);
    }
}

TEST(failing_backward_and_bad_gradients_name_the_op) {
    for (int k = 4; k <= 5; k++) {
        opctx c = {.fail = k};
        tfc_graph *g = NULL;
        CHECK_OK(tfc_graph_new(&g));
        tfc_tensor *x = leaf(XV, D23, 2), *w = t_from(WV, D23, 2), *y = NULL, *loss = NULL;
        CHECK_OK(tfc_custom_op(g, &sq_def, &c, (const tfc_tensor *const[]){x}, 1, &y, 1));
        CHECK_OK(weighted_sum(g, y, w, &loss));
        if (k == 4)
            CHECK_ERR(tfc_graph_backward(g, loss, NULL), TFC_ERR_SHAPE, "my_square (custom op) backward: tfc_reshape");
        else
            CHECK_ERR(tfc_graph_backward(g, loss, NULL), TFC_ERR_INVALID_ARG,
                      "my_square (custom op) backward: grad_inputs[0] is f64 [5] but inputs[0] is f64 [2,3]");
        tfc_tensor *gx = NULL;
        CHECK_OK(tfc_tensor_grad(x, &gx));
        CHECK(gx == NULL);
        tfc_tensor *rel[] = {x, w, y, loss};
        for (size_t i = 0; i < sizeof rel / sizeof *rel; i++) tfc_tensor_release(rel[i]);
        tfc_graph_release(g);
        CHECK(c.destroyed == 1);
    }
}

TEST(cleared_graph_frees_the_node_when_outputs_go) {
    opctx c = {0};
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    tfc_tensor *x = leaf(XV, D23, 2), *w = t_from(WV, D23, 2), *y = NULL, *loss = NULL;
    CHECK_OK(tfc_custom_op(g, &sq_def, &c, (const tfc_tensor *const[]){x}, 1, &y, 1));
    CHECK_OK(weighted_sum(g, y, w, &loss));
    CHECK_OK(tfc_graph_clear(g));
    CHECK_ERR(tfc_graph_backward(g, loss, NULL), TFC_ERR_INVALID_ARG, "cleared");
    tfc_tensor_release(loss);
    CHECK(c.destroyed == 0);
    tfc_tensor_release(y);
    CHECK(c.destroyed == 1);
    tfc_graph_release(g);
    tfc_tensor_release(x);
    tfc_tensor_release(w);
    CHECK(c.destroyed == 1 && c.backward_calls == 0);
}

TEST(bad_arguments) {
    tfc_tensor *x = leaf(XV, D23, 2), *y = NULL;
    const tfc_tensor *in[1] = {x};
    opctx c = {0};
    CHECK_ERR(tfc_custom_op(NULL, NULL, &c, in, 1, &y, 1), TFC_ERR_INVALID_ARG, "tfc_custom_op: def is NULL");
    tfc_custom_op_def d = sq_def;
    d.struct_size = 8;
    CHECK_ERR(tfc_custom_op(NULL, &d, &c, in, 1, &y, 1), TFC_ERR_VERSION, "tfc_custom_op: def->struct_size is 8");
    CHECK(c.destroyed == 0); /* def not accepted: ctx stays the caller's */
    d = sq_def;
    d.name = NULL;
    CHECK_ERR(tfc_custom_op(NULL, &d, &c, in, 1, &y, 1), TFC_ERR_INVALID_ARG, "def->name is NULL");
    d.name = "";
    CHECK_ERR(tfc_custom_op(NULL, &d, &c, in, 1, &y, 1), TFC_ERR_INVALID_ARG, "def->name has 0 bytes");
    d.name = "a_name_that_is_far_too_long_for_a_node_name_in_the_profile_table_of_ops";
    CHECK_ERR(tfc_custom_op(NULL, &d, &c, in, 1, &y, 1), TFC_ERR_INVALID_ARG, "must have 1 to 63");
    d = sq_def;
    d.forward = NULL;
    CHECK_ERR(tfc_custom_op(NULL, &d, &c, in, 1, &y, 1), TFC_ERR_INVALID_ARG, "def->forward is NULL (op my_square)");
    d = sq_def;
    d.backward = NULL;
    CHECK_ERR(tfc_custom_op(NULL, &d, &c, in, 1, &y, 1), TFC_ERR_INVALID_ARG, "def->backward is NULL");
    CHECK_ERR(tfc_custom_op(NULL, &sq_def, &c, NULL, 1, &y, 1), TFC_ERR_INVALID_ARG, "tfc_custom_op: inputs is NULL");
    CHECK_ERR(tfc_custom_op(NULL, &sq_def, &c, in, 1, NULL, 1), TFC_ERR_INVALID_ARG, "tfc_custom_op: outputs is NULL");
    CHECK_ERR(tfc_custom_op(NULL, &sq_def, &c, in, 0, &y, 1), TFC_ERR_INVALID_ARG, "n_in is 0");
    CHECK_ERR(tfc_custom_op(NULL, &sq_def, &c, in, 1, &y, 0), TFC_ERR_INVALID_ARG, "n_out is 0");
    const tfc_tensor *none[1] = {NULL};
    CHECK_ERR(tfc_custom_op(NULL, &sq_def, &c, none, 1, &y, 1), TFC_ERR_INVALID_ARG, "inputs[0] is NULL");
    CHECK(y == NULL);
    CHECK(c.forward_calls == 0);
    CHECK(c.destroyed == 10); /* every call past the def check */
    tfc_tensor_release(x);
}
