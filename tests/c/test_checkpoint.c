/*
 * tfc_graph_checkpoint: gradients through a checkpoint equal f64 finite
 * differences and are bitwise those of the plain recording (parameters
 * reached through ctx included, several outputs, nested checkpoints);
 * dropout seeded from ctx replays its mask; the graph keeps one node;
 * bad arguments and a failing function give clear errors and leak nothing.
 */
#include "tfc_test_util.h"

#include "core/error.h"

TFC_TEST_MAIN

/* What the test functions read through ctx: a weight that requires grad and a dropout offset. */
typedef struct fctx {
    tfc_tensor *w;
    uint64_t offset; /* advanced by each forward call, as a model's dropout counter would be */
    double p;        /* dropout probability; 0: none */
    int fail_at;     /* 1: fail in the forward call, 2: fail in the replay (call count) */
    int calls;
} fctx;

/* y = tanh(x·w) ⊙ x (x [n, k], w [k, k]), then dropout(p) seeded from ctx. */
static tfc_status body(tfc_graph *g, const tfc_tensor *x, fctx *c, tfc_tensor **y) {
    tfc_tensor *xw = NULL, *th = NULL, *m = NULL;
    tfc_status s = tfc_matmul(g, x, c->w, &xw);
    if (s == TFC_OK) s = tfc_tanh(g, xw, &th);
    if (s == TFC_OK) s = tfc_mul(g, th, x, &m);
    if (s == TFC_OK && c->p > 0) {
        s = tfc_dropout(g, m, c->p, 42, c->offset, y);
        c->offset += (uint64_t)tfc_tensor_numel(m);
    } else if (s == TFC_OK) {
        *y = m;
        m = NULL;
    }
    tfc_tensor_release(xw);
    tfc_tensor_release(th);
    tfc_tensor_release(m);
    return s;
}

static tfc_status one_out(tfc_graph *g, const tfc_tensor *const *in, int32_t n_in, tfc_tensor **out, int32_t n_out,
                          void *ctx) {
    (void)n_in;
    (void)n_out;
    fctx *c = ctx;
    if (++c->calls == c->fail_at) return tfc_err(TFC_ERR_SHAPE, "planted failure");
    return body(g, in[0], c, &out[0]);
}

/* Two outputs: body(x) and body(x)·z, z a second input. */
static tfc_status two_out(tfc_graph *g, const tfc_tensor *const *in, int32_t n_in, tfc_tensor **out, int32_t n_out,
                          void *ctx) {
    (void)n_in;
    (void)n_out;
    tfc_tensor *y = NULL;
    tfc_status s = body(g, in[0], ctx, &y);
    if (s == TFC_OK) s = tfc_mul(g, y, in[1], &out[1]);
    if (s == TFC_OK)
        out[0] = y;
    else
        tfc_tensor_release(y);
    return s;
}

/* A checkpoint inside a checkpoint: one_out(one_out(x)). */
static tfc_status nested(tfc_graph *g, const tfc_tensor *const *in, int32_t n_in, tfc_tensor **out, int32_t n_out,
                         void *ctx) {
    (void)n_in;
    tfc_tensor *mid = NULL;
    tfc_status s = tfc_graph_checkpoint(g, one_out, ctx, 0, in, 1, &mid, 1);
    if (s != TFC_OK) return s;
    const tfc_tensor *m1[1] = {mid};
    s = tfc_graph_checkpoint(g, one_out, ctx, 0, m1, 1, out, n_out);
    tfc_tensor_release(mid);
    return s;
}

/* Returns TFC_ERR_CANCELLED without a message. */
static tfc_status fails_silently(tfc_graph *g, const tfc_tensor *const *in, int32_t n_in, tfc_tensor **out,
                                 int32_t n_out, void *ctx) {
    (void)g, (void)in, (void)n_in, (void)out, (void)n_out, (void)ctx;
    return TFC_ERR_CANCELLED;
}

static tfc_status leaves_null(tfc_graph *g, const tfc_tensor *const *in, int32_t n_in, tfc_tensor **out, int32_t n_out,
                              void *ctx) {
    (void)g, (void)n_in, (void)n_out, (void)ctx;
    out[0] = NULL;
    (void)in;
    return TFC_OK;
}

/* Returns its input's own handle. */
static tfc_status identity(tfc_graph *g, const tfc_tensor *const *in, int32_t n_in, tfc_tensor **out, int32_t n_out,
                           void *ctx) {
    (void)g, (void)n_in, (void)n_out, (void)ctx;
    out[0] = tfc_tensor_retain((tfc_tensor *)in[0]);
    return TFC_OK;
}

static tfc_tensor *leaf(const int64_t *dims, int32_t nd, tfc_dtype dt, uint64_t seed) {
    tfc_tensor *t = NULL, *c = NULL;
    t = t_rand(dims, nd, -1.0, 1.0, seed);
    if (tfc_cast(NULL, t, dt, &c) != TFC_OK || tfc_tensor_set_requires_grad(c, 1) != TFC_OK) abort();
    tfc_tensor_release(t);
    return c;
}

/* memcmp of two tensors' bytes (same dtype and shape). */
static int same_bits(const tfc_tensor *a, const tfc_tensor *b) {
    if (!a || !b) return a == b;
    int64_t n = tfc_tensor_numel(a);
    if (n != tfc_tensor_numel(b) || tfc_tensor_dtype(a) != tfc_tensor_dtype(b)) return 0;
    size_t bytes = (size_t)n * tfc_dtype_size(tfc_tensor_dtype(a));
    unsigned char *x = malloc(bytes), *y = malloc(bytes);
    int eq = tfc_tensor_copy_to_host(a, x, bytes) == TFC_OK && tfc_tensor_copy_to_host(b, y, bytes) == TFC_OK &&
        memcmp(x, y, bytes) == 0;
    free(x);
    free(y);
    return eq;
}

static tfc_tensor *grad_of(const tfc_tensor *t) {
    tfc_tensor *g = NULL;
    CHECK_OK(tfc_tensor_grad(t, &g));
    return g;
}

/*
 * loss = Σ y0 + 0.5·Σ y1 (or Σ y0 with one output) of x, z, ctx's w: through
 * the checkpoint (ckpt 1, nested 2) or recorded plainly (0). Gradients land
 * in x, z, w's .grad; *nodes gets the graph's node count before backward.
 */
static void run_loss(int ckpt, int outputs, tfc_tensor *x, tfc_tensor *z, fctx *c, int64_t *nodes) {
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    tfc_tensor *y[2] = {NULL, NULL}, *s0 = NULL, *s1 = NULL, *h = NULL, *loss = NULL;
    const tfc_tensor *in[2] = {x, z};
    tfc_checkpoint_fn f = outputs == 2 ? two_out : ckpt == 2 ? nested : one_out;
    if (ckpt)
        CHECK_OK(tfc_graph_checkpoint(g, f, c, ckpt == 2 ? 0 : sizeof *c, in, outputs, y, outputs));
    else
        CHECK_OK(f(g, in, outputs, y, outputs, c));
    CHECK_OK(tfc_sum(g, y[0], NULL, 0, 0, &s0));
    if (outputs == 2) {
        CHECK_OK(tfc_sum(g, y[1], NULL, 0, 0, &s1));
        CHECK_OK(tfc_mul_scalar(g, s1, 0.5, &h));
        CHECK_OK(tfc_add(g, s0, h, &loss));
    } else {
        loss = tfc_tensor_retain(s0);
    }
    *nodes = tfc_graph_num_nodes(g);
    CHECK_OK(tfc_graph_backward(g, loss, NULL));
    tfc_tensor *ts[] = {y[0], y[1], s0, s1, h, loss};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) tfc_tensor_release(ts[i]);
    tfc_graph_release(g);
}

static void zero_grads(tfc_tensor *const *ts, int n) {
    for (int i = 0; i < n; i++) CHECK_OK(tfc_tensor_zero_grad(ts[i], 1));
}

/* Gradients of x, z, w through a checkpoint vs the plain recording: the same bits. */
static void check_bitwise(int ckpt, int outputs, double p) {
    const int64_t xd[2] = {6, 5}, wd[2] = {5, 5};
    tfc_tensor *x = leaf(xd, 2, TFC_DTYPE_F32, 1), *z = leaf(xd, 2, TFC_DTYPE_F32, 2),
               *w = leaf(wd, 2, TFC_DTYPE_F32, 3);
    tfc_tensor *all[3] = {x, z, w}, *plain[3], *ck[3];
    fctx c = {.w = w, .offset = 7, .p = p};
    int64_t n_plain = 0, n_ck = 0;
    run_loss(0, outputs, x, z, &c, &n_plain);
    for (int i = 0; i < 3; i++) plain[i] = grad_of(all[i]);
    zero_grads(all, 3);
    c.offset = 7;
    run_loss(ckpt, outputs, x, z, &c, &n_ck);
    for (int i = 0; i < 3; i++) ck[i] = grad_of(all[i]);
    for (int i = 0; i < 3; i++) {
        if (i == 1 && outputs == 1) continue; /* z unused */
        CHECK(plain[i] != NULL);
        CHECK(same_bits(plain[i], ck[i]));
    }
    /* the checkpoint's body is one node on the tape (its ops: matmul, tanh, mul [, dropout] [, mul]) */
    CHECK(n_ck < n_plain);
    CHECK(n_ck == (outputs == 2 ? 5 : 2));
    /* the forward advanced the caller's counter, as the plain run did */
    CHECK(c.offset == (p > 0 ? 7 + (uint64_t)(ckpt == 2 ? 60 : 30) : 7));
    for (int i = 0; i < 3; i++) {
        tfc_tensor_release(plain[i]);
        tfc_tensor_release(ck[i]);
        tfc_tensor_release(all[i]);
    }
}

TEST(bitwise_one_output) { check_bitwise(1, 1, 0.0); }
TEST(bitwise_two_outputs) { check_bitwise(1, 2, 0.0); }
TEST(bitwise_dropout_replays_its_mask) { check_bitwise(1, 1, 0.3); }
TEST(bitwise_two_outputs_dropout) { check_bitwise(1, 2, 0.3); }

/* Nested: the outer replay runs two inner checkpoints, each replayed in turn. */
TEST(nested_matches_plain_composition) {
    const int64_t xd[2] = {6, 5}, wd[2] = {5, 5};
    tfc_tensor *x = leaf(xd, 2, TFC_DTYPE_F32, 1), *w = leaf(wd, 2, TFC_DTYPE_F32, 3);
    fctx c = {.w = w};
    tfc_tensor *all[2] = {x, w}, *plain[2], *ck[2];
    /* plain: body(body(x)) */
    tfc_graph *g = NULL;
    tfc_tensor *a = NULL, *b = NULL, *l = NULL;
    CHECK_OK(tfc_graph_new(&g));
    CHECK_OK(body(g, x, &c, &a));
    CHECK_OK(body(g, a, &c, &b));
    CHECK_OK(tfc_sum(g, b, NULL, 0, 0, &l));
    CHECK_OK(tfc_graph_backward(g, l, NULL));
    tfc_tensor_release(a), tfc_tensor_release(b), tfc_tensor_release(l);
    tfc_graph_release(g);
    for (int i = 0; i < 2; i++) plain[i] = grad_of(all[i]);
    zero_grads(all, 2);
    int64_t nodes = 0;
    run_loss(2, 1, x, NULL, &c, &nodes);
    CHECK(nodes == 2);
    for (int i = 0; i < 2; i++) {
        ck[i] = grad_of(all[i]);
        CHECK(same_bits(plain[i], ck[i]));
        tfc_tensor_release(plain[i]);
        tfc_tensor_release(ck[i]);
        tfc_tensor_release(all[i]);
    }
}

/* gradcheck's function: Σ checkpoint(one_out)(x) with w from ctx (f64). */
static tfc_status gc_fn(tfc_graph *g, tfc_tensor *const *inputs, int32_t n, tfc_tensor **out, void *ctx) {
    (void)n;
    fctx *c = ctx;
    c->w = inputs[1];
    c->offset = 0; /* every evaluation draws one mask; the forward call advances the counter */
    tfc_tensor *y = NULL;
    const tfc_tensor *in[1] = {inputs[0]};
    tfc_status s = tfc_graph_checkpoint(g, one_out, c, sizeof *c, in, 1, &y, 1);
    if (s == TFC_OK) s = tfc_sum(g, y, NULL, 0, 0, out);
    tfc_tensor_release(y);
    return s;
}

/* Against f64 central finite differences, for the input and for the weight reached through ctx. */
TEST(finite_differences_f64) {
    const int64_t xd[2] = {4, 3}, wd[2] = {3, 3};
    tfc_tensor *in[2] = {leaf(xd, 2, TFC_DTYPE_F64, 11), leaf(wd, 2, TFC_DTYPE_F64, 12)};
    fctx c = {0};
    double err = 1;
    CHECK_OK(tfc_gradcheck(gc_fn, in, 2, &c, 1e-6, &err, NULL, NULL));
    CHECK(err < 1e-7);
    /* and with dropout (the mask must replay, or the analytic gradient disagrees) */
    c = (fctx){.p = 0.25};
    for (int i = 0; i < 2; i++) CHECK_OK(tfc_tensor_zero_grad(in[i], 1));
    CHECK_OK(tfc_gradcheck(gc_fn, in, 2, &c, 1e-6, &err, NULL, NULL));
    CHECK(err < 1e-7);
    tfc_tensor_release(in[0]);
    tfc_tensor_release(in[1]);
}

/* Without recording the function simply runs: outputs as it made them, nothing on the tape. */
TEST(no_recording_runs_directly) {
    const int64_t xd[2] = {2, 3}, wd[2] = {3, 3};
    tfc_tensor *x = leaf(xd, 2, TFC_DTYPE_F32, 1), *w = leaf(wd, 2, TFC_DTYPE_F32, 2), *y = NULL;
    fctx c = {.w = w};
    const tfc_tensor *in[1] = {x};
    CHECK_OK(tfc_graph_checkpoint(NULL, one_out, &c, 0, in, 1, &y, 1));
    CHECK(y && !tfc_tensor_requires_grad(y));
    tfc_tensor_release(y);
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    CHECK_OK(tfc_graph_set_grad_enabled(g, 0));
    CHECK_OK(tfc_graph_checkpoint(g, one_out, &c, 0, in, 1, &y, 1));
    CHECK(tfc_graph_num_nodes(g) == 0 && !tfc_tensor_requires_grad(y));
    tfc_tensor_release(y);
    tfc_graph_release(g);
    tfc_tensor_release(x);
    tfc_tensor_release(w);
}

/* An output that is the input's own handle: its gradient passes straight through. */
TEST(identity_output) {
    const int64_t xd[1] = {4};
    tfc_tensor *x = leaf(xd, 1, TFC_DTYPE_F64, 1), *y = NULL, *l = NULL, *gx = NULL;
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    const tfc_tensor *in[1] = {x};
    CHECK_OK(tfc_graph_checkpoint(g, identity, NULL, 0, in, 1, &y, 1));
    CHECK(y != x && tfc_tensor_requires_grad(y) && tfc_tensor_is_leaf(x));
    CHECK_OK(tfc_sum(g, y, NULL, 0, 0, &l));
    CHECK_OK(tfc_graph_backward(g, l, NULL));
    gx = grad_of(x);
    double *v = gx ? t_vals(gx) : NULL;
    CHECK(v && v[0] == 1.0 && v[3] == 1.0);
    free(v);
    tfc_tensor_release(gx), tfc_tensor_release(y), tfc_tensor_release(l), tfc_tensor_release(x);
    tfc_graph_release(g);
}

TEST(bad_arguments) {
    const int64_t xd[2] = {2, 3}, wd[2] = {3, 3};
    tfc_tensor *x = leaf(xd, 2, TFC_DTYPE_F32, 1), *w = leaf(wd, 2, TFC_DTYPE_F32, 2), *y = NULL;
    fctx c = {.w = w};
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    const tfc_tensor *in[2] = {x, NULL};
    CHECK_ERR(tfc_graph_checkpoint(g, NULL, &c, 0, in, 1, &y, 1), TFC_ERR_INVALID_ARG,
              "tfc_graph_checkpoint: fn is NULL");
    CHECK_ERR(tfc_graph_checkpoint(g, one_out, &c, 0, in, 0, &y, 1), TFC_ERR_INVALID_ARG, "n_in is 0");
    CHECK_ERR(tfc_graph_checkpoint(g, one_out, &c, 0, in, 9, &y, 1), TFC_ERR_INVALID_ARG, "n_in is 9, must be 1 to 8");
    CHECK_ERR(tfc_graph_checkpoint(g, one_out, &c, 0, in, 2, &y, 1), TFC_ERR_INVALID_ARG, "inputs[1] is NULL");
    CHECK_ERR(tfc_graph_checkpoint(g, one_out, &c, 0, NULL, 1, &y, 1), TFC_ERR_INVALID_ARG, "inputs is NULL");
    CHECK_ERR(tfc_graph_checkpoint(g, one_out, &c, 0, in, 1, NULL, 1), TFC_ERR_INVALID_ARG, "outputs is NULL");
    CHECK_ERR(tfc_graph_checkpoint(g, one_out, &c, 0, in, 1, &y, 0), TFC_ERR_INVALID_ARG, "n_out is 0");
    CHECK_ERR(tfc_graph_checkpoint(g, one_out, NULL, 8, in, 1, &y, 1), TFC_ERR_INVALID_ARG,
              "ctx is NULL but ctx_size is 8");
    CHECK(y == NULL && tfc_graph_num_nodes(g) == 0);
    /* fn failing in forward: its status and message, nothing recorded, outputs untouched */
    CHECK_ERR(tfc_graph_checkpoint(g, fails_silently, &c, 0, in, 1, &y, 1), TFC_ERR_CANCELLED,
              "tfc_graph_checkpoint: fn returned TFC_ERR_CANCELLED");
    CHECK(y == NULL && tfc_graph_num_nodes(g) == 0);
    c.fail_at = 1;
    CHECK_ERR(tfc_graph_checkpoint(g, one_out, &c, sizeof c, in, 1, &y, 1), TFC_ERR_SHAPE,
              "tfc_graph_checkpoint: planted failure");
    CHECK(y == NULL && tfc_graph_num_nodes(g) == 0);
    CHECK_ERR(tfc_graph_checkpoint(g, leaves_null, &c, 0, in, 1, &y, 1), TFC_ERR_INVALID_ARG, "left outputs[0] NULL");
    CHECK(y == NULL && tfc_graph_num_nodes(g) == 0);
    /* fn failing in the replay: backward fails with its message; nothing leaks (ASan) */
    c = (fctx){.w = w, .fail_at = 2};
    tfc_tensor *l = NULL;
    /* (ctx_size 0: the replay sees the caller's counter, which the forward call advanced) */
    CHECK_OK(tfc_graph_checkpoint(g, one_out, &c, 0, in, 1, &y, 1));
    CHECK_OK(tfc_sum(g, y, NULL, 0, 0, &l));
    CHECK_ERR(tfc_graph_backward(g, l, NULL), TFC_ERR_SHAPE,
              "tfc_graph_backward: tfc_graph_checkpoint (replay): planted failure");
    tfc_tensor *gx = grad_of(x);
    CHECK(gx == NULL); /* the input's gradient comes only from a successful replay */
    tfc_tensor_release(l), tfc_tensor_release(y);
    /* a silent failure in the replay still gets a message */
    tfc_tensor_release(gx);
    tfc_graph_release(g);
    tfc_tensor_release(x);
    tfc_tensor_release(w);
}
