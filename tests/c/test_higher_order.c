/*
 * The autograd engine's PyTorch features: create_graph (gradients of
 * gradients, checked against hand-derived derivatives), tfc_autograd_grad
 * (returns gradients, touches no .grad), per-loss graphs (a backward
 * without retain_graph frees only its own nodes; going through them again
 * names retain_graph; a training loop's node count stays flat), fused ops
 * refusing create_graph by name, and anomaly detection naming the op.
 */
#include <math.h>

#include "tfc_test_util.h"

TFC_TEST_MAIN

static tfc_tensor *leaf(const double *v, int64_t n) {
    tfc_tensor *t = t_from(v, &n, 1);
    CHECK_OK(tfc_tensor_set_requires_grad(t, 1));
    return t;
}

static tfc_tensor *sum_all(tfc_graph *g, const tfc_tensor *x) {
    tfc_tensor *s = NULL;
    CHECK_OK(tfc_sum(g, x, NULL, 0, 0, &s));
    return s;
}

/* y = Σ x³: dy/dx = 3x², d²/dx² (of Σ dy/dx) = 6x, third 6. */
TEST(cube_second_and_third_derivative) {
    const double xv[3] = {0.5, -1.25, 2.0};
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    tfc_tensor *x = leaf(xv, 3), *x3 = NULL;
    CHECK_OK(tfc_pow_scalar(g, x, 3.0, &x3));
    tfc_tensor *y = sum_all(g, x3);
    const tfc_tensor *outs[1] = {y}, *ins[1] = {x};
    tfc_tensor *d1 = NULL, *d2 = NULL, *d3 = NULL;
    CHECK_OK(tfc_autograd_grad(g, outs, 1, ins, 1, NULL, 1, 1, 0, &d1));
    CHECK(tfc_tensor_requires_grad(d1));
    double *v1 = t_vals(d1);
    for (int i = 0; i < 3; i++) CHECK_CLOSE(v1[i], 3 * xv[i] * xv[i], 1e-12);
    free(v1);
    tfc_tensor *s1 = sum_all(g, d1);
    outs[0] = s1;
    CHECK_OK(tfc_autograd_grad(g, outs, 1, ins, 1, NULL, 1, 1, 0, &d2));
    double *v2 = t_vals(d2);
    for (int i = 0; i < 3; i++) CHECK_CLOSE(v2[i], 6 * xv[i], 1e-12);
    free(v2);
    tfc_tensor *s2 = sum_all(g, d2);
    outs[0] = s2;
    CHECK_OK(tfc_autograd_grad(g, outs, 1, ins, 1, NULL, 0, 0, 0, &d3));
    double *v3 = t_vals(d3);
    for (int i = 0; i < 3; i++) CHECK_CLOSE(v3[i], 6.0, 1e-12);
    free(v3);
    /* autograd_grad wrote no .grad */
    tfc_tensor *gx = NULL;
    CHECK_OK(tfc_tensor_grad(x, &gx));
    CHECK(gx == NULL);
    tfc_tensor *all[] = {x, x3, y, d1, d2, d3, s1, s2};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tfc_tensor_release(all[i]);
    tfc_graph_release(g);
}

/* backward_ex(create_graph) leaves .grad with history: x.grad = 3x², then backward of Σ x.grad² gives 36x³ more. */
TEST(backward_ex_create_graph_grad_has_history) {
    const double xv[2] = {1.5, -0.5};
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    tfc_tensor *x = leaf(xv, 2), *x3 = NULL;
    CHECK_OK(tfc_pow_scalar(g, x, 3.0, &x3));
    tfc_tensor *y = sum_all(g, x3);
    CHECK_OK(tfc_graph_backward_ex(g, y, NULL, 1, 1));
    tfc_tensor *gx = NULL, *sq = NULL;
    CHECK_OK(tfc_tensor_grad(x, &gx));
    CHECK(gx && tfc_tensor_requires_grad(gx));
    /* penalty = Σ (3x²)² = 9 Σ x⁴: d/dx = 36 x³ */
    CHECK_OK(tfc_mul(g, gx, gx, &sq));
    tfc_tensor *pen = sum_all(g, sq);
    CHECK_OK(tfc_tensor_set_grad(x, NULL));
    CHECK_OK(tfc_graph_backward_ex(g, pen, NULL, 0, 0));
    tfc_tensor *g2 = NULL;
    CHECK_OK(tfc_tensor_grad(x, &g2));
    double *v = t_vals(g2);
    for (int i = 0; i < 2; i++) CHECK_CLOSE(v[i], 36 * xv[i] * xv[i] * xv[i], 1e-12);
    free(v);
    tfc_tensor *all[] = {x, x3, y, gx, sq, pen, g2};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tfc_tensor_release(all[i]);
    tfc_graph_release(g);
}

/* Ops whose backward is a fused kernel refuse create_graph by name, before writing any gradient. */
TEST(fused_ops_refuse_create_graph) {
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    int64_t qd[4] = {1, 1, 3, 4};
    tfc_tensor *q = t_rand(qd, 4, -1, 1, 1), *o = NULL;
    CHECK_OK(tfc_tensor_set_requires_grad(q, 1));
    CHECK_OK(tfc_attention(g, q, q, q, 1, 0.5, &o));
    tfc_tensor *l = sum_all(g, o), *d = NULL;
    const tfc_tensor *outs[1] = {l}, *ins[1] = {q};
    CHECK_ERR(tfc_autograd_grad(g, outs, 1, ins, 1, NULL, 1, 1, 0, &d), TFC_ERR_UNSUPPORTED, "tfc_attention");
    CHECK(d == NULL);
    CHECK_ERR(tfc_graph_backward_ex(g, l, NULL, 1, 1), TFC_ERR_UNSUPPORTED, "create_graph");
    tfc_tensor *gq = NULL;
    CHECK_OK(tfc_tensor_grad(q, &gq));
    CHECK(gq == NULL);
    /* once, without create_graph, it works */
    CHECK_OK(tfc_autograd_grad(g, outs, 1, ins, 1, NULL, 0, 0, 0, &d));
    CHECK(d != NULL);
    tfc_tensor_release(d);

    int64_t hd[2] = {2, 3}, wd[2] = {5, 3}, td[1] = {2};
    tfc_tensor *h = t_rand(hd, 2, -1, 1, 2), *w = t_rand(wd, 2, -1, 1, 3), *tg = NULL, *lce = NULL;
    const int64_t tv[2] = {1, 4};
    CHECK_OK(tfc_tensor_from_data(tv, td, 1, TFC_DTYPE_I64, &tg));
    CHECK_OK(tfc_tensor_set_requires_grad(h, 1));
    CHECK_OK(tfc_linear_cross_entropy(g, h, w, tg, -100, &lce));
    CHECK_ERR(tfc_graph_backward_ex(g, lce, NULL, 1, 1), TFC_ERR_UNSUPPORTED, "tfc_linear_cross_entropy");
    tfc_tensor *all[] = {q, o, l, h, w, tg, lce};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tfc_tensor_release(all[i]);
    tfc_graph_release(g);
}

/* autograd_grad: an input that no gradient reaches is an error unless allow_unused. */
TEST(autograd_grad_unused_input) {
    const double v[2] = {1, 2};
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    tfc_tensor *x = leaf(v, 2), *z = leaf(v, 2), *y = NULL;
    CHECK_OK(tfc_mul(g, x, x, &y));
    tfc_tensor *l = sum_all(g, y), *d[2] = {NULL, NULL};
    const tfc_tensor *outs[1] = {l}, *ins[2] = {x, z};
    CHECK_ERR(tfc_autograd_grad(g, outs, 1, ins, 2, NULL, 1, 0, 0, d), TFC_ERR_INVALID_ARG, "inputs[1]");
    CHECK(d[0] == NULL && d[1] == NULL);
    CHECK_OK(tfc_autograd_grad(g, outs, 1, ins, 2, NULL, 1, 0, 1, d));
    CHECK(d[0] != NULL && d[1] == NULL);
    double *dv = t_vals(d[0]);
    CHECK_CLOSE(dv[0], 2.0, 1e-15);
    CHECK_CLOSE(dv[1], 4.0, 1e-15);
    free(dv);
    /* a non-leaf input: dl/dy = 1 */
    const tfc_tensor *ins2[1] = {y};
    tfc_tensor *dy = NULL;
    CHECK_OK(tfc_autograd_grad(g, outs, 1, ins2, 1, NULL, 1, 0, 0, &dy));
    dv = t_vals(dy);
    CHECK_CLOSE(dv[0], 1.0, 1e-15);
    CHECK_CLOSE(dv[1], 1.0, 1e-15);
    free(dv);
    tfc_tensor *all[] = {x, z, y, l, d[0], dy};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tfc_tensor_release(all[i]);
    tfc_graph_release(g);
}

/* Two losses sharing x·x: backward of one without retain_graph leaves the other's graph usable. */
TEST(two_losses_share_a_graph) {
    const double v[2] = {0.5, 2.0};
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    tfc_tensor *x = leaf(v, 2), *h = NULL, *e = NULL, *t = NULL;
    CHECK_OK(tfc_mul_scalar(g, x, 3.0, &h)); /* saves nothing: shared */
    CHECK_OK(tfc_exp(g, h, &e));
    CHECK_OK(tfc_tanh(g, h, &t));
    tfc_tensor *l1 = sum_all(g, e), *l2 = sum_all(g, t);
    CHECK_OK(tfc_graph_backward_ex(g, l1, NULL, 0, 0));
    CHECK_OK(tfc_graph_backward_ex(g, l2, NULL, 0, 0));
    tfc_tensor *gx = NULL;
    CHECK_OK(tfc_tensor_grad(x, &gx));
    double *gv = t_vals(gx);
    for (int i = 0; i < 2; i++) {
        double th = tanh(3 * v[i]);
        CHECK_CLOSE(gv[i], 3 * exp(3 * v[i]) + 3 * (1 - th * th), 1e-12);
    }
    free(gv);
    /* l1 again: exp's saved output was freed */
    CHECK_ERR(tfc_graph_backward_ex(g, l1, NULL, 0, 0), TFC_ERR_INVALID_ARG, "retain_graph");
    CHECK_ERR(tfc_graph_backward(g, l2, NULL), TFC_ERR_INVALID_ARG, "retain_graph");
    tfc_tensor *all[] = {x, h, e, t, l1, l2, gx};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tfc_tensor_release(all[i]);
    tfc_graph_release(g);
}

/* backward twice without retain_graph: the second names retain_graph; with retain_graph it accumulates. */
TEST(backward_twice_needs_retain_graph) {
    const double v[2] = {1.0, 3.0};
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    tfc_tensor *x = leaf(v, 2), *y = NULL;
    CHECK_OK(tfc_mul(g, x, x, &y));
    tfc_tensor *l = sum_all(g, y);
    CHECK_OK(tfc_graph_backward_ex(g, l, NULL, 1, 0));
    CHECK_OK(tfc_graph_backward_ex(g, l, NULL, 0, 0));
    tfc_tensor *gx = NULL;
    CHECK_OK(tfc_tensor_grad(x, &gx));
    double *gv = t_vals(gx);
    CHECK_CLOSE(gv[0], 4.0, 1e-15);
    CHECK_CLOSE(gv[1], 12.0, 1e-15);
    free(gv);
    CHECK_ERR(tfc_graph_backward_ex(g, l, NULL, 0, 0), TFC_ERR_INVALID_ARG,
              "saved tensors were freed by a backward without retain_graph=True");
    const tfc_tensor *outs[1] = {l}, *ins[1] = {x};
    tfc_tensor *d = NULL;
    CHECK_ERR(tfc_autograd_grad(g, outs, 1, ins, 1, NULL, 0, 0, 0, &d), TFC_ERR_INVALID_ARG, "retain_graph");
    CHECK_ERR(tfc_graph_backward_ex(g, l, NULL, 2, 0), TFC_ERR_INVALID_ARG, "retain_graph");
    tfc_tensor *all[] = {x, y, l, gx};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tfc_tensor_release(all[i]);
    tfc_graph_release(g);
}

/* A training loop that never clears the graph: nodes do not pile up (backward frees, dead forwards go). */
TEST(training_loop_node_count_flat) {
    int64_t wd[2] = {4, 3}, xd[2] = {5, 4};
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    tfc_tensor *w = t_rand(wd, 2, -1, 1, 7), *x = t_rand(xd, 2, -1, 1, 8);
    CHECK_OK(tfc_tensor_set_requires_grad(w, 1));
    int64_t after_first = -1, max_nodes = 0;
    for (int step = 0; step < 300; step++) {
        tfc_tensor *h = NULL, *a = NULL, *l = NULL, *ev = NULL;
        CHECK_OK(tfc_matmul(g, x, w, &h));
        CHECK_OK(tfc_tanh(g, h, &a));
        l = sum_all(g, a);
        /* a forward that is never backpropagated (an evaluation left recording) */
        CHECK_OK(tfc_exp(g, h, &ev));
        tfc_tensor_release(ev);
        CHECK_OK(tfc_graph_backward_ex(g, l, NULL, 0, 0));
        tfc_tensor_release(h);
        tfc_tensor_release(a);
        tfc_tensor_release(l);
        CHECK_OK(tfc_tensor_zero_grad(w, 1));
        int64_t nn = tfc_graph_num_nodes(g);
        if (step == 0) after_first = nn;
        if (nn > max_nodes) max_nodes = nn;
    }
    CHECK(after_first <= 1);
    CHECK(max_nodes <= 4);
    tfc_tensor_release(w);
    tfc_tensor_release(x);
    tfc_graph_release(g);
}

/* Anomaly mode: a forward NaN (log of a negative) and a backward Inf (sqrt at 0) stop with the op named. */
TEST(detect_anomaly_names_the_op) {
    const double v[3] = {1.0, -2.0, 3.0}, z[3] = {0.0, 1.0, 4.0};
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    CHECK(!tfc_graph_is_detect_anomaly(g));
    CHECK_OK(tfc_graph_set_detect_anomaly(g, 1));
    CHECK(tfc_graph_is_detect_anomaly(g));
    tfc_tensor *x = leaf(v, 3), *y = NULL;
    CHECK_ERR(tfc_log(g, x, &y), TFC_ERR_INVALID_ARG, "anomaly detected: tfc_log");
    CHECK(y == NULL);
    tfc_tensor *s = leaf(z, 3), *r = NULL;
    CHECK_OK(tfc_sqrt(g, s, &r));
    tfc_tensor *l = sum_all(g, r);
    CHECK_ERR(tfc_graph_backward(g, l, NULL), TFC_ERR_INVALID_ARG, "the backward of tfc_sqrt");
    CHECK_ERR(tfc_graph_backward(g, l, NULL), TFC_ERR_INVALID_ARG, "[3]");
    /* off: the same runs through */
    CHECK_OK(tfc_graph_set_detect_anomaly(g, 0));
    CHECK_OK(tfc_graph_backward(g, l, NULL));
    CHECK_OK(tfc_log(g, x, &y));
    CHECK_ERR(tfc_graph_set_detect_anomaly(g, 2), TFC_ERR_INVALID_ARG, "on");
    tfc_tensor *all[] = {x, y, s, r, l};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tfc_tensor_release(all[i]);
    tfc_graph_release(g);
}

/* create_graph through add hands one gradient to two leaves: each .grad is its own (a later += shows in one only). */
TEST(create_graph_grads_are_not_shared) {
    const double v[2] = {1.0, 2.0};
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    tfc_tensor *x = leaf(v, 2), *y = leaf(v, 2), *s = NULL, *q = NULL, *x2 = NULL, *gx = NULL, *gy = NULL;
    CHECK_OK(tfc_add(g, x, y, &s));
    CHECK_OK(tfc_mul(g, s, s, &q)); /* ds = 2s, with history: add hands it to both leaves */
    tfc_tensor *l = sum_all(g, q);
    CHECK_OK(tfc_graph_backward_ex(g, l, NULL, 1, 1));
    CHECK_OK(tfc_tensor_grad(x, &gx));
    CHECK_OK(tfc_tensor_grad(y, &gy));
    CHECK(gx != gy);
    tfc_tensor_release(gx);
    tfc_tensor_release(gy);
    /* Σ x² adds 2x into x.grad only */
    CHECK_OK(tfc_mul(g, x, x, &x2));
    tfc_tensor *l2 = sum_all(g, x2);
    CHECK_OK(tfc_graph_backward_ex(g, l2, NULL, 0, 0));
    CHECK_OK(tfc_tensor_grad(x, &gx));
    CHECK_OK(tfc_tensor_grad(y, &gy));
    double *a = t_vals(gx), *b = t_vals(gy);
    CHECK_CLOSE(a[0], 6.0, 1e-15);
    CHECK_CLOSE(a[1], 12.0, 1e-15);
    CHECK_CLOSE(b[0], 4.0, 1e-15);
    CHECK_CLOSE(b[1], 8.0, 1e-15);
    free(a);
    free(b);
    /* the leaves' .grad refer to the graph (as in torch): drop them so nothing stays alive */
    CHECK_OK(tfc_tensor_set_grad(x, NULL));
    CHECK_OK(tfc_tensor_set_grad(y, NULL));
    tfc_tensor *all[] = {x, y, s, q, x2, l, l2, gx, gy};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tfc_tensor_release(all[i]);
    tfc_graph_release(g);
}

/*
 * autograd_grad runs only what leads to its inputs (torch.autograd.grad):
 * create_graph for x works although the loss also goes through attention
 * on a branch x does not reach, and that branch keeps its saved tensors.
 */
TEST(autograd_grad_prunes_branches_away_from_inputs) {
    const double xv[2] = {0.5, -2.0};
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    int64_t qd[4] = {1, 1, 3, 4};
    tfc_tensor *q = t_rand(qd, 4, -1, 1, 4), *o = NULL, *x = leaf(xv, 2), *x3 = NULL, *tot = NULL;
    CHECK_OK(tfc_tensor_set_requires_grad(q, 1));
    CHECK_OK(tfc_attention(g, q, q, q, 1, 0.5, &o));
    CHECK_OK(tfc_pow_scalar(g, x, 3.0, &x3));
    tfc_tensor *lo = sum_all(g, o), *lx = sum_all(g, x3);
    CHECK_OK(tfc_add(g, lo, lx, &tot));
    const tfc_tensor *outs[1] = {tot}, *ins[1] = {x};
    tfc_tensor *d1 = NULL, *d2 = NULL;
    CHECK_OK(tfc_autograd_grad(g, outs, 1, ins, 1, NULL, 0, 1, 0, &d1));
    tfc_tensor *s1 = sum_all(g, d1);
    const tfc_tensor *outs2[1] = {s1};
    CHECK_OK(tfc_autograd_grad(g, outs2, 1, ins, 1, NULL, 0, 0, 0, &d2));
    double *v = t_vals(d2);
    CHECK_CLOSE(v[0], 6 * xv[0], 1e-13);
    CHECK_CLOSE(v[1], 6 * xv[1], 1e-13);
    free(v);
    /* the attention branch was not run, so not freed: a plain backward through it still works */
    tfc_tensor *gq = NULL;
    CHECK_OK(tfc_graph_backward_ex(g, lo, NULL, 0, 0));
    CHECK_OK(tfc_tensor_grad(q, &gq));
    CHECK(gq != NULL);
    tfc_tensor *all[] = {q, o, x, x3, tot, lo, lx, d1, d2, s1, gq};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tfc_tensor_release(all[i]);
    tfc_graph_release(g);
}

/* ---- the #16 ops: second derivatives of Σ f(x) by hand, x = (0.5, −1.25, 2) ---- */

static const double x16[3] = {0.5, -1.25, 2.0};

/* y = Σ sin x: d1 = cos x, d2 (of Σ d1) = −sin x. */
static tfc_tensor *f_sin(tfc_graph *g, tfc_tensor *x) {
    tfc_tensor *s = NULL;
    CHECK_OK(tfc_sin(g, x, &s));
    return s;
}
/* y = Σ max(x, 0)³: d1 = 3x²[x > 0], d2 = 6x[x > 0]. */
static tfc_tensor *f_max_cube(tfc_graph *g, tfc_tensor *x) {
    const double zv[3] = {0, 0, 0};
    const int64_t n = 3;
    tfc_tensor *z = t_from(zv, &n, 1), *m = NULL, *c = NULL;
    CHECK_OK(tfc_maximum(g, x, z, &m));
    CHECK_OK(tfc_pow_scalar(g, m, 3.0, &c));
    tfc_tensor_release(z);
    tfc_tensor_release(m);
    return c;
}
/* y = Σ cumsum(x)²: d1_i = 2 Σ_{j ≥ i} c_j, d2_m = 2 Σ_{j ≥ m} (j + 1) = 12, 10, 6. */
static tfc_tensor *f_cumsum_sq(tfc_graph *g, tfc_tensor *x) {
    tfc_tensor *c = NULL, *q = NULL;
    CHECK_OK(tfc_cumsum(g, x, 0, &c));
    CHECK_OK(tfc_mul(g, c, c, &q));
    tfc_tensor_release(c);
    return q;
}
/* y = Σ gather(x, [2, 0, 2])³: d1_i = 3 n_i x_i², d2_i = 6 n_i x_i, n = (1, 0, 2). */
static tfc_tensor *f_gather_cube(tfc_graph *g, tfc_tensor *x) {
    const int64_t iv[3] = {2, 0, 2}, n = 3;
    tfc_tensor *i = NULL, *y = NULL, *c = NULL;
    CHECK_OK(tfc_tensor_from_data(iv, &n, 1, TFC_DTYPE_I64, &i));
    CHECK_OK(tfc_gather(g, x, 0, i, &y));
    CHECK_OK(tfc_pow_scalar(g, y, 3.0, &c));
    tfc_tensor_release(i);
    tfc_tensor_release(y);
    return c;
}

static void check_second(tfc_tensor *(*f)(tfc_graph *, tfc_tensor *), const double *e1, const double *e2) {
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    tfc_tensor *x = leaf(x16, 3), *fx = f(g, x), *y = sum_all(g, fx), *d1 = NULL, *d2 = NULL;
    const tfc_tensor *outs[1] = {y}, *ins[1] = {x};
    CHECK_OK(tfc_autograd_grad(g, outs, 1, ins, 1, NULL, 1, 1, 0, &d1));
    tfc_tensor *s1 = sum_all(g, d1);
    outs[0] = s1;
    CHECK_OK(tfc_autograd_grad(g, outs, 1, ins, 1, NULL, 0, 0, 0, &d2));
    double *v1 = t_vals(d1), *v2 = t_vals(d2);
    for (int i = 0; i < 3; i++) {
        CHECK_CLOSE(v1[i], e1[i], 1e-12);
        CHECK_CLOSE(v2[i], e2[i], 1e-12);
    }
    free(v1);
    free(v2);
    tfc_tensor *all[] = {x, fx, y, d1, s1, d2};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tfc_tensor_release(all[i]);
    tfc_graph_release(g);
}

TEST(issue16_ops_second_derivatives_by_hand) {
    double e1[3], e2[3];
    for (int i = 0; i < 3; i++) e1[i] = cos(x16[i]), e2[i] = -sin(x16[i]);
    check_second(f_sin, e1, e2);
    for (int i = 0; i < 3; i++) {
        int pos = x16[i] > 0;
        e1[i] = pos ? 3 * x16[i] * x16[i] : 0.0;
        e2[i] = pos ? 6 * x16[i] : 0.0;
    }
    check_second(f_max_cube, e1, e2);
    const double c[3] = {x16[0], x16[0] + x16[1], x16[0] + x16[1] + x16[2]};
    const double e1c[3] = {2 * (c[0] + c[1] + c[2]), 2 * (c[1] + c[2]), 2 * c[2]}, e2c[3] = {12, 10, 6};
    check_second(f_cumsum_sq, e1c, e2c);
    const double n[3] = {1, 0, 2};
    for (int i = 0; i < 3; i++) e1[i] = 3 * n[i] * x16[i] * x16[i], e2[i] = 6 * n[i] * x16[i];
    check_second(f_gather_cube, e1, e2);
}
