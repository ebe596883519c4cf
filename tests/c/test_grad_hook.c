/*
 * tfc_graph_set_grad_hook: the hook fires once per reachable leaf per
 * backward, after the leaf's last contribution (its .grad then equals the
 * pass's final gradient, checked against hand-derived values), in the
 * order leaves become final; errors from the hook stop backward with their
 * message; NULL removes it; re-entering the graph from the hook is refused.
 */
#include "tfc_test_util.h"

#include "autograd/node.h"
#include "tensor/tensor_impl.h"

TFC_TEST_MAIN

/* A test-only op: out = x, but its backward returns no gradient (NULL) for x. */
static tfc_status stop_backward(tfc_node *n, tfc_tensor *const *gout, tfc_tensor **gin) {
    (void)n;
    (void)gout;
    gin[0] = NULL;
    return TFC_OK;
}

static tfc_status stop_grad(tfc_graph *g, tfc_tensor *x, tfc_tensor **out) {
    tfc_status s = tfc_tensor_clone(x, out);
    tfc_node *n = NULL;
    if (s == TFC_OK) s = tfc_node_new(g, "stop", stop_backward, 1, 1, 0, &n);
    if (s != TFC_OK) return s;
    s = tfc_node_set_input(n, 0, x);
    tfc_node_attach_output(n, 0, *out);
    return s;
}

enum { A, W, B, Z, U, N_LEAVES };
static const double av[2] = {0.5, -1.5}, wv[2] = {2.0, 3.0}, bv[2] = {-1.0, 0.25}, zv[2] = {4.0, 5.0},
                    uv[2] = {7.0, 8.0};

/*
 * Five f64 [2] leaves that require grad: loss = Σ ((a·w·w + stop(z))·b + w·w).
 * a is used first, w by three edges of two nodes (a·w·w) and one node
 * (w·w), b late, z only through a node that passes no gradient, u not at
 * all.
 */
typedef struct fixture {
    tfc_graph *g;
    tfc_tensor *leaf[N_LEAVES];
    tfc_tensor *loss;
} fixture;

/* Record the forward on f->g into f->loss (8 nodes). */
static void fixture_forward(fixture *f) {
    tfc_tensor *h1 = NULL, *h2 = NULL, *s = NULL, *h3 = NULL, *h4 = NULL, *q = NULL, *h5 = NULL;
    tfc_tensor_release(f->loss);
    f->loss = NULL;
    CHECK_OK(tfc_mul(f->g, f->leaf[A], f->leaf[W], &h1));
    CHECK_OK(tfc_mul(f->g, h1, f->leaf[W], &h2));
    CHECK_OK(stop_grad(f->g, f->leaf[Z], &s));
    CHECK_OK(tfc_add(f->g, h2, s, &h3));
    CHECK_OK(tfc_mul(f->g, h3, f->leaf[B], &h4));
    CHECK_OK(tfc_mul(f->g, f->leaf[W], f->leaf[W], &q));
    CHECK_OK(tfc_add(f->g, h4, q, &h5));
    CHECK_OK(tfc_sum(f->g, h5, NULL, 0, 0, &f->loss));
    tfc_tensor *tmp[] = {h1, h2, s, h3, h4, q, h5};
    for (int i = 0; i < 7; i++) tfc_tensor_release(tmp[i]);
}

static void fixture_build(fixture *f) {
    int64_t d[1] = {2};
    const double *vals[N_LEAVES] = {av, wv, bv, zv, uv};
    CHECK_OK(tfc_graph_new(&f->g));
    for (int i = 0; i < N_LEAVES; i++) {
        f->leaf[i] = t_from(vals[i], d, 1);
        CHECK_OK(tfc_tensor_set_requires_grad(f->leaf[i], 1));
    }
    fixture_forward(f);
}

static void fixture_free(fixture *f) {
    tfc_tensor_release(f->loss);
    for (int i = 0; i < N_LEAVES; i++) tfc_tensor_release(f->leaf[i]);
    tfc_graph_release(f->g);
}

/* d loss / d leaf by hand, times k backward passes: a: w²b, w: 2awb + 2w, b: aw² + z. */
static double want_grad(int leaf, int i, int k) {
    switch (leaf) {
    case A: return k * wv[i] * wv[i] * bv[i];
    case W: return k * (2 * av[i] * wv[i] * bv[i] + 2 * wv[i]);
    case B: return k * (av[i] * wv[i] * wv[i] + zv[i]);
    default: return NAN;
    }
}

/* What the hook saw: each call's leaf and the values of its .grad then. */
typedef struct record {
    fixture *f;
    int n_calls;
    int which[32];
    int had_grad[32];
    double grad[32][2];
} record;

static int leaf_index(const fixture *f, const tfc_tensor *t) {
    for (int i = 0; i < N_LEAVES; i++)
        if (f->leaf[i] == t) return i;
    return -1;
}

static tfc_status recording_hook(tfc_tensor *leaf, void *user) {
    record *r = user;
    if (r->n_calls == 32) return TFC_ERR_INTERNAL;
    int c = r->n_calls++;
    r->which[c] = leaf_index(r->f, leaf);
    tfc_tensor *gr = NULL;
    tfc_status s = tfc_tensor_grad(leaf, &gr);
    if (s != TFC_OK) return s;
    r->had_grad[c] = gr != NULL;
    if (gr) {
        double *v = t_vals(gr);
        r->grad[c][0] = v[0];
        r->grad[c][1] = v[1];
        free(v);
    }
    tfc_tensor_release(gr);
    return TFC_OK;
}

/* Calls of the hook for leaf since call `from`. */
static int calls_for(const record *r, int from, int leaf) {
    int n = 0;
    for (int c = from; c < r->n_calls; c++) n += r->which[c] == leaf;
    return n;
}

static int first_call(const record *r, int from, int leaf) {
    for (int c = from; c < r->n_calls; c++)
        if (r->which[c] == leaf) return c;
    return -1;
}

/* After pass k (1-based) whose calls start at `from`: counts, grads at call time, order. */
static void check_pass(const fixture *f, const record *r, int from, int k) {
    CHECK(r->n_calls - from == 4); /* a, w, b, z; not u */
    CHECK(calls_for(r, from, A) == 1);
    CHECK(calls_for(r, from, W) == 1);
    CHECK(calls_for(r, from, B) == 1);
    CHECK(calls_for(r, from, Z) == 1);
    CHECK(calls_for(r, from, U) == 0);
    CHECK(calls_for(r, from, -1) == 0);
    for (int leaf = A; leaf <= B; leaf++) {
        int c = first_call(r, from, leaf);
        if (c < 0) continue;
        CHECK(r->had_grad[c]);
        tfc_tensor *gr = NULL;
        CHECK_OK(tfc_tensor_grad(f->leaf[leaf], &gr));
        CHECK(gr != NULL);
        if (!gr) continue;
        double *v = t_vals(gr);
        for (int i = 0; i < 2; i++) {
            CHECK_CLOSE(r->grad[c][i], v[i], 0);                      /* what backward ended with */
            CHECK_CLOSE(r->grad[c][i], want_grad(leaf, i, k), 1e-15); /* and the hand-derived value */
        }
        free(v);
        tfc_tensor_release(gr);
    }
    /* z: called although no gradient reached it, and it has none. */
    int cz = first_call(r, from, Z);
    if (cz >= 0) CHECK(!r->had_grad[cz]);
    tfc_tensor *gz = NULL;
    CHECK_OK(tfc_tensor_grad(f->leaf[Z], &gz));
    CHECK(gz == NULL);
    tfc_tensor_release(gz);
    /* b (used last in the forward) is final before a and w (used first). */
    int cb = first_call(r, from, B), ca = first_call(r, from, A), cw = first_call(r, from, W);
    CHECK(cb >= 0 && ca >= 0 && cw >= 0 && cb < ca && cb < cw);
}

TEST(hook_fires_once_per_leaf_with_final_grad) {
    fixture f = {0};
    fixture_build(&f);
    record r = {.f = &f};
    CHECK_OK(tfc_graph_set_grad_hook(f.g, recording_hook, &r));
    CHECK_OK(tfc_graph_backward(f.g, f.loss, NULL));
    check_pass(&f, &r, 0, 1);
    /* Again on the kept graph: .grad accumulates, and the hook sees the sum. */
    int from = r.n_calls;
    CHECK_OK(tfc_graph_backward(f.g, f.loss, NULL));
    check_pass(&f, &r, from, 2);
    fixture_free(&f);
}

TEST(null_removes_the_hook_and_setting_replaces_it) {
    fixture f = {0};
    fixture_build(&f);
    record r1 = {.f = &f}, r2 = {.f = &f};
    CHECK_OK(tfc_graph_set_grad_hook(f.g, recording_hook, &r1));
    CHECK_OK(tfc_graph_set_grad_hook(f.g, recording_hook, &r2)); /* replaces: r1 sees nothing */
    CHECK_OK(tfc_graph_backward(f.g, f.loss, NULL));
    CHECK(r1.n_calls == 0);
    check_pass(&f, &r2, 0, 1);
    CHECK_OK(tfc_graph_set_grad_hook(f.g, NULL, &r2));
    CHECK_OK(tfc_graph_backward(f.g, f.loss, NULL));
    CHECK(r2.n_calls == 4);
    /* Gradients still accumulate without a hook. */
    tfc_tensor *gw = NULL;
    CHECK_OK(tfc_tensor_grad(f.leaf[W], &gw));
    double *v = t_vals(gw);
    CHECK_CLOSE(v[1], want_grad(W, 1, 2), 1e-15);
    free(v);
    tfc_tensor_release(gw);
    fixture_free(&f);
}

/* Forward a failure of a library call made inside the hook (its message is the reason). */
static tfc_status failing_hook(tfc_tensor *leaf, void *user) {
    int *calls = user;
    ++*calls;
    tfc_tensor *wrong = NULL;
    int64_t d[1] = {3};
    tfc_status s = tfc_tensor_zeros(d, 1, TFC_DTYPE_F64, &wrong);
    if (s == TFC_OK) s = tfc_tensor_set_grad(leaf, wrong); /* [3] for a [2] leaf: TFC_ERR_SHAPE */
    tfc_tensor_release(wrong);
    return s;
}

static tfc_status cancelling_hook(tfc_tensor *leaf, void *user) {
    (void)leaf;
    ++*(int *)user;
    return TFC_ERR_CANCELLED;
}

TEST(hook_error_stops_backward_with_its_message) {
    fixture f = {0};
    fixture_build(&f);
    int calls = 0;
    CHECK_OK(tfc_graph_set_grad_hook(f.g, failing_hook, &calls));
    CHECK_ERR(tfc_graph_backward(f.g, f.loss, NULL), TFC_ERR_SHAPE, "tfc_graph_backward: tfc_tensor_set_grad: grad is");
    CHECK(calls == 1); /* the first failure stops the pass */
    CHECK_OK(tfc_graph_set_grad_hook(f.g, cancelling_hook, &calls));
    CHECK_ERR(tfc_graph_backward(f.g, f.loss, NULL), TFC_ERR_CANCELLED,
              "tfc_graph_backward: the grad hook returned TFC_ERR_CANCELLED for leaf f64 [2]");
    CHECK(calls == 2);
    /* A hook left over from a failed pass works normally on the next one. */
    for (int i = 0; i < N_LEAVES; i++) CHECK_OK(tfc_tensor_zero_grad(f.leaf[i], 1));
    record r = {.f = &f};
    CHECK_OK(tfc_graph_set_grad_hook(f.g, recording_hook, &r));
    CHECK_OK(tfc_graph_backward(f.g, f.loss, NULL));
    check_pass(&f, &r, 0, 1);
    fixture_free(&f);
}

/* Inside the hook: backward and clear on the same graph are refused; release waits. */
typedef struct reenter {
    fixture *f;
    tfc_status backward_s, clear_s, set_s;
    int calls, release;
} reenter;

static tfc_status reentering_hook(tfc_tensor *leaf, void *user) {
    (void)leaf;
    reenter *r = user;
    if (r->calls++ > 0) return TFC_OK;
    r->backward_s = tfc_graph_backward(r->f->g, r->f->loss, NULL);
    r->clear_s = tfc_graph_clear(r->f->g);
    r->set_s = tfc_graph_set_grad_hook(r->f->g, NULL, NULL); /* allowed: takes effect next pass */
    if (r->release) tfc_graph_release(r->f->g);
    return TFC_OK;
}

TEST(hook_may_not_reenter_the_graph) {
    fixture f = {0};
    fixture_build(&f);
    reenter r = {.f = &f};
    CHECK_OK(tfc_graph_set_grad_hook(f.g, reentering_hook, &r));
    CHECK_OK(tfc_graph_backward(f.g, f.loss, NULL));
    CHECK(r.backward_s == TFC_ERR_INVALID_ARG);
    CHECK(r.clear_s == TFC_ERR_INVALID_ARG);
    CHECK(r.set_s == TFC_OK);
    CHECK(r.calls == 4); /* the pass keeps the hook it started with */
    CHECK(tfc_graph_num_nodes(f.g) == 8);
    r.calls = 0;
    CHECK_OK(tfc_graph_backward(f.g, f.loss, NULL));
    CHECK(r.calls == 0); /* removed for the next pass */
    /* tfc_graph_release from the hook: deferred until backward returns (ASan sees no use after free). */
    CHECK_OK(tfc_graph_set_grad_hook(f.g, reentering_hook, &r));
    r.release = 1;
    CHECK_OK(tfc_graph_backward(f.g, f.loss, NULL));
    CHECK(r.calls == 4);
    f.g = NULL; /* released by the hook */
    fixture_free(&f);
}

TEST(hook_survives_clear) {
    fixture f = {0};
    fixture_build(&f);
    record r = {.f = &f};
    CHECK_OK(tfc_graph_set_grad_hook(f.g, recording_hook, &r));
    CHECK_OK(tfc_graph_clear(f.g));
    fixture_forward(&f); /* record again on the cleared graph */
    CHECK_OK(tfc_graph_backward(f.g, f.loss, NULL));
    check_pass(&f, &r, 0, 1);
    fixture_free(&f);
}

TEST(bad_arguments) {
    CHECK_ERR(tfc_graph_set_grad_hook(NULL, recording_hook, NULL), TFC_ERR_INVALID_ARG,
              "tfc_graph_set_grad_hook: g is NULL");
    CHECK_ERR(tfc_graph_set_grad_hook(NULL, NULL, NULL), TFC_ERR_INVALID_ARG, "tfc_graph_set_grad_hook: g is NULL");
}
