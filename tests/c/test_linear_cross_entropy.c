/*
 * tfc_linear_cross_entropy (the fused LM head + loss): against naive loops
 * written here, against the unfused tfc_cross_entropy(tfc_matmul(h, wᵀ)),
 * f64 gradcheck across chunk boundaries with strided operands and ignored
 * rows, its memory (no [N, V] buffer), bad inputs, and the GPT's fused head
 * against its logits path.
 */
#include "ops/linear_cross_entropy.h"
#include "standin_backend.h"
#include "tfc_test_util.h"

TFC_TEST_MAIN

static tfc_tensor *rand_t(int64_t d0, int64_t d1, tfc_dtype dt, double lo, double hi, uint64_t seed) {
    tfc_tensor *t = NULL;
    if (tfc_tensor_uniform((int64_t[]){d0, d1}, 2, dt, lo, hi, seed, 0, &t) != TFC_OK) abort();
    return t;
}

static tfc_tensor *ids64(const int64_t *v, int64_t n) {
    tfc_tensor *t = NULL;
    if (tfc_tensor_from_data(v, &n, 1, TFC_DTYPE_I64, &t) != TFC_OK) abort();
    return t;
}

/* .grad of t as f64 values (caller frees), NULL when t has none. */
static double *grad_vals(const tfc_tensor *t) {
    tfc_tensor *g = NULL;
    if (tfc_tensor_grad(t, &g) != TFC_OK || !g) return NULL;
    double *v = t_vals(g);
    tfc_tensor_release(g);
    return v;
}

/* max |a − b| ≤ tol · max |b| (b the reference; scale 1 when b is all zero). */
static void check_vals(const char *what, const double *a, const double *b, int64_t n, double tol) {
    double err = 0, mag = 0;
    for (int64_t i = 0; i < n; i++) {
        err = fmax(err, fabs(a[i] - b[i]));
        mag = fmax(mag, fabs(b[i]));
    }
    tfc_test_checks++;
    if (!(err <= tol * (mag > 0 ? mag : 1))) TFC_FAIL_AT("%s: max error %g, max |ref| %g, tol %g", what, err, mag, tol);
}

/*
 * The definition, one row at a time in f64: z_r = W h_r, loss = Σ_valid
 * (lse(z_r) − z_{r,t_r}) / n_valid; for an upstream gradient of 1,
 * dz_r = (softmax(z_r) − e_{t_r}) / n_valid, dh_r = Wᵀ dz_r, dW += dz_r h_rᵀ.
 */
static double ref_lce(int64_t N, int64_t C, int64_t V, const double *h, const double *w, const int64_t *t,
                      int64_t ignore, double *dh, double *dw) {
    int64_t nv = 0;
    for (int64_t r = 0; r < N; r++) nv += t[r] != ignore;
    memset(dh, 0, sizeof(double) * (size_t)(N * C));
    memset(dw, 0, sizeof(double) * (size_t)(V * C));
    double loss = 0, *z = malloc(sizeof(double) * (size_t)V);
    for (int64_t r = 0; r < N; r++) {
        if (t[r] == ignore) continue;
        double m = -INFINITY, s = 0;
        for (int64_t v = 0; v < V; v++) {
            z[v] = 0;
            for (int64_t c = 0; c < C; c++) z[v] += h[r * C + c] * w[v * C + c];
            m = fmax(m, z[v]);
        }
        for (int64_t v = 0; v < V; v++) s += exp(z[v] - m);
        double lse = m + log(s);
        loss += lse - z[t[r]];
        for (int64_t v = 0; v < V; v++) {
            double d = (exp(z[v] - lse) - (v == t[r])) / (double)nv;
            for (int64_t c = 0; c < C; c++) {
                dh[r * C + c] += d * w[v * C + c];
                dw[v * C + c] += d * h[r * C + c];
            }
        }
    }
    free(z);
    return nv ? loss / (double)nv : NAN;
}

/* ---- against the naive loops ------------------------------------------------ */

TEST(matches_naive_loops_for_every_chunk_size) {
    enum { N = 7, C = 3, V = 5 };
    const int64_t t[N] = {1, -100, 4, 0, 3, -100, 2};
    tfc_tensor *h = rand_t(N, C, TFC_DTYPE_F64, -2, 2, 1), *w = rand_t(V, C, TFC_DTYPE_F64, -2, 2, 2);
    tfc_tensor *tg = ids64(t, N);
    double *hv = t_vals(h), *wv = t_vals(w), rdh[N * C], rdw[V * C];
    double rloss = ref_lce(N, C, V, hv, wv, t, -100, rdh, rdw);
    CHECK_OK(tfc_tensor_set_requires_grad(h, 1));
    CHECK_OK(tfc_tensor_set_requires_grad(w, 1));
    const int64_t chunks[] = {0, 1, 2, 3, 6, 7, 100};
    for (size_t k = 0; k < sizeof chunks / sizeof chunks[0]; k++) {
        int64_t prev = tfc_linear_cross_entropy_set_chunk_rows(chunks[k]);
        tfc_graph *g;
        tfc_tensor *loss = NULL;
        CHECK_OK(tfc_graph_new(&g));
        CHECK_OK(tfc_linear_cross_entropy(g, h, w, tg, -100, &loss));
        CHECK_OK(tfc_graph_backward(g, loss, NULL));
        CHECK_CLOSE(t_item(loss), rloss, 1e-13);
        double *dh = grad_vals(h), *dw = grad_vals(w);
        CHECK(dh && dw);
        if (dh && dw) {
            check_vals("dh", dh, rdh, N * C, 1e-12);
            check_vals("dw", dw, rdw, V * C, 1e-12);
        }
        free(dh);
        free(dw);
        CHECK_OK(tfc_tensor_zero_grad(h, 1));
        CHECK_OK(tfc_tensor_zero_grad(w, 1));
        tfc_tensor_release(loss);
        tfc_graph_release(g);
        tfc_linear_cross_entropy_set_chunk_rows(prev);
    }
    /* i32 targets, shaped [N, 1]: only the count has to match */
    int32_t t32[N];
    for (int i = 0; i < N; i++) t32[i] = (int32_t)t[i];
    tfc_tensor *tg32 = NULL, *loss = NULL;
    CHECK_OK(tfc_tensor_from_data(t32, (int64_t[]){N, 1}, 2, TFC_DTYPE_I32, &tg32));
    CHECK_OK(tfc_linear_cross_entropy(NULL, h, w, tg32, -100, &loss));
    CHECK_CLOSE(t_item(loss), rloss, 1e-13);
    tfc_tensor_release(loss);
    tfc_tensor_release(tg32);
    free(hv);
    free(wv);
    tfc_tensor_release(h);
    tfc_tensor_release(w);
    tfc_tensor_release(tg);
}

/* ---- against the unfused composition ------------------------------------------- */

/* loss = scale · CE(h · wᵀ) by the fused op (fused = 1) or by transpose + matmul + cross_entropy. */
static tfc_status lce_or_unfused(tfc_graph *g, int fused, tfc_tensor *h, tfc_tensor *w, tfc_tensor *tg, int64_t ignore,
                                 double scale, tfc_tensor **out) {
    tfc_tensor *l = NULL, *wt = NULL, *z = NULL;
    tfc_status s;
    if (fused) {
        s = tfc_linear_cross_entropy(g, h, w, tg, ignore, &l);
    } else {
        s = tfc_transpose(g, w, 0, 1, &wt);
        if (s == TFC_OK) s = tfc_matmul(g, h, wt, &z);
        if (s == TFC_OK) s = tfc_cross_entropy(g, z, tg, ignore, &l);
    }
    if (s == TFC_OK && scale != 1.0) {
        s = tfc_mul_scalar(g, l, scale, out);
        tfc_tensor_release(l);
    } else if (s == TFC_OK) {
        *out = l;
    }
    tfc_tensor_release(wt);
    tfc_tensor_release(z);
    return s;
}

/* Loss and the gradients of h and w (NULL when h/w gets none) of one path. */
static double run_path(int fused, tfc_tensor *h, tfc_tensor *w, tfc_tensor *tg, int64_t ignore, double scale,
                       double **dh, double **dw) {
    tfc_graph *g;
    tfc_tensor *loss = NULL;
    CHECK_OK(tfc_graph_new(&g));
    CHECK_OK(lce_or_unfused(g, fused, h, w, tg, ignore, scale, &loss));
    CHECK_OK(tfc_graph_backward(g, loss, NULL));
    double l = t_item(loss);
    *dh = grad_vals(h);
    *dw = grad_vals(w);
    CHECK_OK(tfc_tensor_zero_grad(h, 1));
    CHECK_OK(tfc_tensor_zero_grad(w, 1));
    tfc_tensor_release(loss);
    tfc_graph_release(g);
    return l;
}

static void compare_paths(tfc_dtype dt, int64_t chunk, double scale, double tol) {
    enum { N = 37, C = 6, V = 29 };
    int64_t t[N];
    for (int64_t r = 0; r < N; r++) t[r] = r % 5 == 3 ? -1 : (r * 11) % V;
    tfc_tensor *h = rand_t(N, C, dt, -2, 2, 11), *w = rand_t(V, C, dt, -1, 1, 12), *tg = ids64(t, N);
    CHECK_OK(tfc_tensor_set_requires_grad(h, 1));
    CHECK_OK(tfc_tensor_set_requires_grad(w, 1));
    int64_t prev = tfc_linear_cross_entropy_set_chunk_rows(chunk);
    double *fdh, *fdw, *udh, *udw;
    double fl = run_path(1, h, w, tg, -1, scale, &fdh, &fdw);
    double ul = run_path(0, h, w, tg, -1, scale, &udh, &udw);
    tfc_linear_cross_entropy_set_chunk_rows(prev);
    CHECK_CLOSE(fl, ul, tol);
    CHECK(fdh && fdw && udh && udw);
    if (fdh && fdw && udh && udw) {
        check_vals("dh fused vs unfused", fdh, udh, N * C, tol);
        check_vals("dw fused vs unfused", fdw, udw, V * C, tol);
    }
    free(fdh);
    free(fdw);
    free(udh);
    free(udw);
    tfc_tensor_release(h);
    tfc_tensor_release(w);
    tfc_tensor_release(tg);
}

TEST(equals_unfused_matmul_cross_entropy) {
    compare_paths(TFC_DTYPE_F64, 0, 1.0, 1e-12);
    compare_paths(TFC_DTYPE_F64, 8, 1.0, 1e-12);
    compare_paths(TFC_DTYPE_F64, 5, -2.5, 1e-12); /* upstream gradient != 1: scaled copies */
    compare_paths(TFC_DTYPE_F32, 0, 1.0, 1e-5);
    compare_paths(TFC_DTYPE_F32, 8, 0.5, 1e-5);
}

TEST(only_the_needed_gradients) {
    enum { N = 9, C = 4, V = 6 };
    const int64_t t[N] = {0, 1, 2, 3, 4, 5, 0, 1, 2};
    for (int which = 0; which < 2; which++) {
        tfc_tensor *h = rand_t(N, C, TFC_DTYPE_F64, -1, 1, 21), *w = rand_t(V, C, TFC_DTYPE_F64, -1, 1, 22);
        tfc_tensor *tg = ids64(t, N);
        CHECK_OK(tfc_tensor_set_requires_grad(which == 0 ? h : w, 1));
        double *fdh, *fdw, *udh, *udw;
        double fl = run_path(1, h, w, tg, -1, 1.0, &fdh, &fdw);
        double ul = run_path(0, h, w, tg, -1, 1.0, &udh, &udw);
        CHECK_CLOSE(fl, ul, 1e-12);
        CHECK((fdh != NULL) == (which == 0) && (fdw != NULL) == (which == 1));
        if (fdh && udh) check_vals("dh alone", fdh, udh, N * C, 1e-12);
        if (fdw && udw) check_vals("dw alone", fdw, udw, V * C, 1e-12);
        free(fdh);
        free(fdw);
        free(udh);
        free(udw);
        /* no graph, or a graph in no-grad mode: a loss and nothing recorded */
        tfc_graph *g;
        tfc_tensor *l1 = NULL, *l2 = NULL;
        CHECK_OK(tfc_graph_new(&g));
        CHECK_OK(tfc_graph_set_grad_enabled(g, 0));
        CHECK_OK(tfc_linear_cross_entropy(NULL, h, w, tg, -1, &l1));
        CHECK_OK(tfc_linear_cross_entropy(g, h, w, tg, -1, &l2));
        CHECK(tfc_graph_num_nodes(g) == 0);
        CHECK_CLOSE(t_item(l1), fl, 1e-15);
        CHECK_CLOSE(t_item(l2), fl, 1e-15);
        tfc_tensor_release(l1);
        tfc_tensor_release(l2);
        tfc_graph_release(g);
        tfc_tensor_release(h);
        tfc_tensor_release(w);
        tfc_tensor_release(tg);
    }
}

TEST(all_rows_ignored_nan_loss_zero_grads_like_unfused) {
    enum { N = 5, C = 3, V = 4 };
    const int64_t t[N] = {-1, -1, -1, -1, -1};
    tfc_tensor *h = rand_t(N, C, TFC_DTYPE_F64, -1, 1, 31), *w = rand_t(V, C, TFC_DTYPE_F64, -1, 1, 32);
    tfc_tensor *tg = ids64(t, N);
    CHECK_OK(tfc_tensor_set_requires_grad(h, 1));
    CHECK_OK(tfc_tensor_set_requires_grad(w, 1));
    int64_t prev = tfc_linear_cross_entropy_set_chunk_rows(2);
    for (int fused = 0; fused < 2; fused++) {
        double *dh, *dw;
        double l = run_path(fused, h, w, tg, -1, 1.0, &dh, &dw);
        CHECK(isnan(l));
        CHECK(dh && dw);
        for (int i = 0; dh && i < N * C; i++) CHECK(dh[i] == 0);
        for (int i = 0; dw && i < V * C; i++) CHECK(dw[i] == 0);
        free(dh);
        free(dw);
    }
    tfc_linear_cross_entropy_set_chunk_rows(prev);
    tfc_tensor_release(h);
    tfc_tensor_release(tg);
    /* N = 0 rows: no valid row either */
    tfc_tensor *h0 = NULL, *t0 = NULL, *loss = NULL;
    CHECK_OK(tfc_tensor_zeros((int64_t[]){0, C}, 2, TFC_DTYPE_F64, &h0));
    CHECK_OK(tfc_tensor_zeros((int64_t[]){0}, 1, TFC_DTYPE_I64, &t0));
    tfc_graph *g;
    CHECK_OK(tfc_graph_new(&g));
    CHECK_OK(tfc_linear_cross_entropy(g, h0, w, t0, -1, &loss));
    CHECK(isnan(t_item(loss)));
    CHECK_OK(tfc_graph_backward(g, loss, NULL));
    double *dw = grad_vals(w);
    CHECK(dw != NULL);
    for (int i = 0; dw && i < V * C; i++) CHECK(dw[i] == 0);
    free(dw);
    tfc_tensor_release(loss);
    tfc_graph_release(g);
    tfc_tensor_release(h0);
    tfc_tensor_release(t0);
    tfc_tensor_release(w);
}

/* ---- gradcheck ------------------------------------------------------------------- */

typedef struct gc_case {
    int layout; /* 0: h, w as given; 1: inputs are hᵀ, wᵀ (transposed views inside); 2: h, w sliced with step 2 */
    double scale;
} gc_case;

static tfc_status gc_fn(tfc_graph *g, tfc_tensor *const *in, int32_t n, tfc_tensor **out, void *ctx) {
    const gc_case *c = ctx;
    (void)n;
    const int64_t t[7] = {4, 0, -7, 3, 1, -7, 2};
    tfc_tensor *tg = ids64(t, 7), *h = NULL, *w = NULL, *l = NULL;
    tfc_status s = TFC_OK;
    if (c->layout == 0) {
        h = tfc_tensor_retain(in[0]);
        w = tfc_tensor_retain(in[1]);
    } else if (c->layout == 1) {
        s = tfc_transpose(g, in[0], 0, 1, &h);
        if (s == TFC_OK) s = tfc_transpose(g, in[1], 0, 1, &w);
    } else {
        tfc_tensor *a = NULL, *b = NULL;
        s = tfc_slice(g, in[0], 0, 0, 14, 2, &a);
        if (s == TFC_OK) s = tfc_slice(g, a, 1, 1, 6, 2, &h); /* [7, 3], strides (12, 2): not a BLAS operand */
        if (s == TFC_OK) s = tfc_slice(g, in[1], 1, 0, 6, 2, &b);
        if (s == TFC_OK) w = tfc_tensor_retain(b); /* [5, 3], strides (6, 2): compacted too */
        tfc_tensor_release(a);
        tfc_tensor_release(b);
    }
    if (s == TFC_OK) s = tfc_linear_cross_entropy(g, h, w, tg, -7, &l);
    if (s == TFC_OK) s = tfc_mul_scalar(g, l, c->scale, out);
    tfc_tensor_release(l);
    tfc_tensor_release(h);
    tfc_tensor_release(w);
    tfc_tensor_release(tg);
    return s;
}

static void gradcheck_case(int layout, double scale, int64_t chunk) {
    /* N = 7, C = 3, V = 5 after the views */
    tfc_tensor *in[2];
    const int64_t dims[3][4] = {{7, 3, 5, 3}, {3, 7, 3, 5}, {14, 6, 5, 6}}, *d = dims[layout];
    in[0] = rand_t(d[0], d[1], TFC_DTYPE_F64, -1.5, 1.5, 41 + 2 * (uint64_t)layout);
    in[1] = rand_t(d[2], d[3], TFC_DTYPE_F64, -1.5, 1.5, 42 + 2 * (uint64_t)layout);
    for (int i = 0; i < 2; i++) CHECK_OK(tfc_tensor_set_requires_grad(in[i], 1));
    int64_t prev = tfc_linear_cross_entropy_set_chunk_rows(chunk);
    gc_case c = {layout, scale};
    double err = 1;
    int32_t wi = -1;
    int64_t wk = -1;
    tfc_status s = tfc_gradcheck(gc_fn, in, 2, &c, 1e-6, &err, &wi, &wk);
    tfc_linear_cross_entropy_set_chunk_rows(prev);
    tfc_test_checks++;
    if (s != TFC_OK)
        TFC_FAIL_AT("layout %d chunk %lld: gradcheck did not run: %s", layout, (long long)chunk, tfc_last_error());
    else if (!(err < 1e-7))
        TFC_FAIL_AT("layout %d chunk %lld: max relative error %g at input %d element %lld", layout, (long long)chunk,
                    err, wi, (long long)wk);
    for (int i = 0; i < 2; i++) tfc_tensor_release(in[i]);
}

TEST(gradcheck_f64_chunks_strides_ignore_index) {
    gradcheck_case(0, 1.0, 3);  /* chunks 3 + 3 + 1 */
    gradcheck_case(0, 0.7, 0);  /* one chunk */
    gradcheck_case(1, 1.3, 2);  /* transposed h and w, chunks of 2 */
    gradcheck_case(2, -0.9, 4); /* h and w compacted first */
}

/* ---- memory ------------------------------------------------------------------------ */

TEST(never_allocates_the_logits) {
    enum { N = 512, C = 4, V = 8192 }; /* logits: 32 MiB of f64 */
    int64_t t[N];
    for (int64_t r = 0; r < N; r++) t[r] = (r * 977) % V;
    tfc_tensor *h = rand_t(N, C, TFC_DTYPE_F64, -1, 1, 51), *w = rand_t(V, C, TFC_DTYPE_F64, -1, 1, 52);
    tfc_tensor *tg = ids64(t, N);
    CHECK_OK(tfc_tensor_set_requires_grad(h, 1));
    CHECK_OK(tfc_tensor_set_requires_grad(w, 1));
    const uint64_t logits_bytes = (uint64_t)N * V * 8;
    int64_t prev = tfc_linear_cross_entropy_set_chunk_rows(16);
    uint64_t live0, peak0, peak1, peak2;
    tfc_memory_stats(NULL, &live0, NULL, &peak0);
    double *dh, *dw, *udh, *udw;
    double fl = run_path(1, h, w, tg, -1, 1.0, &dh, &dw);
    tfc_memory_stats(NULL, NULL, NULL, &peak1);
    /* chunk 16·V, dW, dh, the grad copies: well under one logits buffer */
    CHECK(peak1 <= (peak0 > live0 + logits_bytes / 4 ? peak0 : live0 + logits_bytes / 4));
    /* the same check fails for the unfused path, which holds logits and dlogits */
    double ul = run_path(0, h, w, tg, -1, 1.0, &udh, &udw);
    tfc_memory_stats(NULL, NULL, NULL, &peak2);
    CHECK(peak2 >= live0 + logits_bytes);
    CHECK_CLOSE(fl, ul, 1e-12);
    CHECK(dh && dw && udh && udw);
    if (dh && udh) check_vals("dh", dh, udh, N * C, 1e-12);
    if (dw && udw) check_vals("dw", dw, udw, V * C, 1e-12);
    tfc_linear_cross_entropy_set_chunk_rows(prev);
    free(dh);
    free(dw);
    free(udh);
    free(udw);
    tfc_tensor_release(h);
    tfc_tensor_release(w);
    tfc_tensor_release(tg);
}

/* ---- bad input ------------------------------------------------------------------------ */

TEST(bad_inputs_name_function_argument_shapes) {
    tfc_tensor *h = rand_t(4, 3, TFC_DTYPE_F64, -1, 1, 61), *w = rand_t(5, 3, TFC_DTYPE_F64, -1, 1, 62);
    CHECK_OK(tfc_tensor_set_requires_grad(h, 1));
    const int64_t t[4] = {0, 1, 2, 3}, big[4] = {0, 1, 5, 3}, neg[4] = {0, -3, 2, 3}, t5[5] = {0, 1, 2, 3, 4};
    tfc_tensor *tg = ids64(t, 4), *tbig = ids64(big, 4), *tneg = ids64(neg, 4), *tg5 = ids64(t5, 5);
    tfc_tensor *w32 = rand_t(5, 3, TFC_DTYPE_F32, -1, 1, 63), *w4 = rand_t(5, 4, TFC_DTYPE_F64, -1, 1, 64);
    tfc_tensor *tf = rand_t(4, 1, TFC_DTYPE_F64, 0, 1, 65), *hi = NULL, *h1 = NULL, *h0 = NULL, *w0 = NULL, *w3 = NULL;
    CHECK_OK(tfc_tensor_zeros((int64_t[]){4, 3}, 2, TFC_DTYPE_I64, &hi));
    CHECK_OK(tfc_tensor_zeros((int64_t[]){3}, 1, TFC_DTYPE_F64, &h1));
    CHECK_OK(tfc_tensor_zeros((int64_t[]){4, 0}, 2, TFC_DTYPE_F64, &h0));
    CHECK_OK(tfc_tensor_zeros((int64_t[]){0, 3}, 2, TFC_DTYPE_F64, &w0));
    CHECK_OK(tfc_tensor_zeros((int64_t[]){1, 5, 3}, 3, TFC_DTYPE_F64, &w3));
    tfc_graph *g;
    CHECK_OK(tfc_graph_new(&g));
    tfc_tensor *const sentinel = (tfc_tensor *)&g, *out = sentinel;
#define BAD(call, status, frag)                                              \
    do {                                                                     \
        CHECK_ERR(call, status, frag);                                       \
        CHECK(strstr(tfc_last_error(), "tfc_linear_cross_entropy") != NULL); \
        CHECK(out == sentinel);                                              \
        CHECK(tfc_graph_num_nodes(g) == 0);                                  \
    } while (0)
    BAD(tfc_linear_cross_entropy(g, h, w, tg, -1, NULL), TFC_ERR_INVALID_ARG, "loss is NULL");
    BAD(tfc_linear_cross_entropy(g, NULL, w, tg, -1, &out), TFC_ERR_INVALID_ARG, "h is NULL");
    BAD(tfc_linear_cross_entropy(g, h, NULL, tg, -1, &out), TFC_ERR_INVALID_ARG, "w is NULL");
    BAD(tfc_linear_cross_entropy(g, h, w, NULL, -1, &out), TFC_ERR_INVALID_ARG, "targets is NULL");
    BAD(tfc_linear_cross_entropy(g, hi, w, tg, -1, &out), TFC_ERR_DTYPE, "h is i64 [4,3]");
    BAD(tfc_linear_cross_entropy(g, h, w32, tg, -1, &out), TFC_ERR_DTYPE,
        "h is f64 [4,3], w is f32 [5,3]: dtypes differ");
    BAD(tfc_linear_cross_entropy(g, h, w, tf, -1, &out), TFC_ERR_DTYPE, "targets is f64 [4,1]");
    BAD(tfc_linear_cross_entropy(g, h1, w, tg, -1, &out), TFC_ERR_SHAPE, "h is [3], must be [N, C]");
    BAD(tfc_linear_cross_entropy(g, h0, w0, tg, -1, &out), TFC_ERR_SHAPE, "h is [4,0], must be [N, C] with C >= 1");
    BAD(tfc_linear_cross_entropy(g, h, w4, tg, -1, &out), TFC_ERR_SHAPE, "h is [4,3], w is [5,4]: w must be [V, C]");
    BAD(tfc_linear_cross_entropy(g, h, w0, tg, -1, &out), TFC_ERR_SHAPE, "w is [0,3]: w must be [V, C] with V >= 1");
    BAD(tfc_linear_cross_entropy(g, h, w3, tg, -1, &out), TFC_ERR_SHAPE, "w is [1,5,3]");
    BAD(tfc_linear_cross_entropy(g, h, w, tg5, -1, &out), TFC_ERR_SHAPE, "h is [4,3] (4 rows), targets is [5]");
    BAD(tfc_linear_cross_entropy(g, h, w, tbig, -1, &out), TFC_ERR_INVALID_ARG,
        "targets[2] is 5, outside [0, 5) and not ignore_index -1");
    BAD(tfc_linear_cross_entropy(g, h, w, tneg, -1, &out), TFC_ERR_INVALID_ARG, "targets[1] is -3");
#undef BAD
    /* the same call with good targets works and records one node */
    CHECK_OK(tfc_linear_cross_entropy(g, h, w, tg, -1, &out));
    CHECK(out != sentinel && tfc_graph_num_nodes(g) == 1);
    if (out != sentinel) tfc_tensor_release(out);
    tfc_graph_release(g);
    tfc_tensor *all[] = {h, w, tg, tbig, tneg, tg5, w32, w4, tf, hi, h1, h0, w0, w3};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tfc_tensor_release(all[i]);
}

/* ---- the autocast door ---------------------------------------------------------------------- */

/*
 * loss and (dh, dW) of the bf16 autocast head, fused (tfc_linear_cross_entropy_autocast) or composed
 * as the unfused path composes it: tfc_linear_bf16 (h · wᵀ on bf16 operands, ∂/∂z rounded) then the
 * f32 tfc_cross_entropy. Returns the loss; grads into gh, gw (caller frees).
 */
static double autocast_run(int fused, tfc_tensor *h, tfc_tensor *w, tfc_tensor *wb, tfc_tensor *tg, double **gh,
                           double **gw) {
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    tfc_tensor *loss = NULL, *wt = NULL, *wbt = NULL, *z = NULL;
    if (fused) {
        int did = 0;
        CHECK_OK(tfc_linear_cross_entropy_autocast(g, h, w, wb, tg, -1, &did, &loss));
        CHECK(did == 1);
    } else {
        CHECK_OK(tfc_transpose(g, w, 0, 1, &wt));
        CHECK_OK(tfc_transpose(NULL, wb, 0, 1, &wbt));
        CHECK_OK(tfc_linear_bf16(g, h, wt, wbt, NULL, &z));
        CHECK_OK(tfc_cross_entropy(g, z, tg, -1, &loss));
    }
    double l = NAN;
    if (loss) {
        CHECK_OK(tfc_tensor_item(loss, &l));
        CHECK_OK(tfc_graph_backward(g, loss, NULL));
    }
    *gh = grad_vals(h);
    *gw = grad_vals(w);
    CHECK_OK(tfc_tensor_zero_grad(h, 1));
    CHECK_OK(tfc_tensor_zero_grad(w, 1));
    tfc_tensor_release(loss), tfc_tensor_release(wt), tfc_tensor_release(wbt), tfc_tensor_release(z);
    tfc_graph_release(g);
    return l;
}

/*
 * The fused autocast head equals the composed one (same bf16 operands, same rounded ∂/∂z) for chunks
 * that split the rows unevenly, with an ignored target; and it is not the f32 head (it really rounds).
 */
TEST(autocast_door_equals_the_composed_bf16_head_across_chunks) {
    enum { N = 37, C = 24, V = 53 };
    tfc_tensor *h = rand_t(N, C, TFC_DTYPE_F32, -1, 1, 81), *w = rand_t(V, C, TFC_DTYPE_F32, -1, 1, 82), *wb = NULL;
    CHECK_OK(tfc_tensor_set_requires_grad(h, 1));
    CHECK_OK(tfc_tensor_set_requires_grad(w, 1));
    CHECK_OK(tfc_cast(NULL, w, TFC_DTYPE_BF16, &wb));
    int64_t t[N];
    for (int64_t i = 0; i < N; i++) t[i] = i == 5 ? -1 : (i * 7) % V;
    tfc_tensor *tg = ids64(t, N);
    double *rh = NULL, *rw = NULL;
    const double ref = autocast_run(0, h, w, wb, tg, &rh, &rw);
    const int64_t chunks[3] = {0, 8, 5};
    for (int i = 0; i < 3; i++) {
        int64_t prev = tfc_linear_cross_entropy_set_chunk_rows(chunks[i]);
        double *gh = NULL, *gw = NULL;
        const double l = autocast_run(1, h, w, wb, tg, &gh, &gw);
        tfc_linear_cross_entropy_set_chunk_rows(prev);
        CHECK(fabs(l - ref) <= 1e-6 * fabs(ref));
        if (gh && rh) check_vals("autocast dh", gh, rh, N * C, 1e-5);
        if (gw && rw) check_vals("autocast dW", gw, rw, V * C, 1e-5);
        CHECK(gh && gw);
        free(gh), free(gw);
    }
    /* the f32 fused head differs: by ~bf16 rounding (2^-9 relative), far above the tolerance above */
    tfc_graph *g = NULL;
    tfc_tensor *l32 = NULL;
    CHECK_OK(tfc_graph_new(&g));
    CHECK_OK(tfc_linear_cross_entropy(g, h, w, tg, -1, &l32));
    double v32 = NAN;
    CHECK_OK(tfc_tensor_item(l32, &v32));
    CHECK(fabs(v32 - ref) > 1e-5 * fabs(ref));
    tfc_tensor_release(l32);
    tfc_graph_release(g);
    free(rh), free(rw);
    tfc_tensor_release(h), tfc_tensor_release(w), tfc_tensor_release(wb), tfc_tensor_release(tg);
}

/*
 * Where the device has no fused rows entry (CUDA; here the stand-in table) the door declines; where
 * its bf16 GEMM multiplies bf16 (AMX) it runs on bf16 tensors, and where it widens, in f32 storage.
 */
TEST(autocast_door_declines_where_the_bf16_gemm_does_not_widen_and_refuses_bad_input) {
    tfc_tensor *h = rand_t(4, 3, TFC_DTYPE_F32, -1, 1, 91), *w = rand_t(5, 3, TFC_DTYPE_F32, -1, 1, 92), *wb = NULL;
    const int64_t t[4] = {0, 1, 2, 3};
    tfc_tensor *tg = ids64(t, 4), *h64 = NULL, *w6 = rand_t(6, 3, TFC_DTYPE_F32, -1, 1, 93), *wb6 = NULL;
    CHECK_OK(tfc_cast(NULL, w, TFC_DTYPE_BF16, &wb));
    CHECK_OK(tfc_cast(NULL, w6, TFC_DTYPE_BF16, &wb6));
    CHECK_OK(tfc_cast(NULL, h, TFC_DTYPE_F64, &h64));
    tfc_tensor *const sentinel = (tfc_tensor *)&h, *out = sentinel;
    int fused = 7;
    CHECK_ERR(tfc_linear_cross_entropy_autocast(NULL, h, w, NULL, tg, -1, &fused, &out), TFC_ERR_INVALID_ARG,
              "tfc_linear_cross_entropy_autocast: w_bf16 is NULL");
    CHECK(fused == 0 && out == sentinel);
    CHECK_ERR(tfc_linear_cross_entropy_autocast(NULL, h, w, wb, tg, -1, NULL, &out), TFC_ERR_INVALID_ARG,
              "tfc_linear_cross_entropy_autocast: fused is NULL");
    CHECK_ERR(tfc_linear_cross_entropy_autocast(NULL, h, w, wb, tg, -1, &fused, NULL), TFC_ERR_INVALID_ARG,
              "tfc_linear_cross_entropy_autocast: loss is NULL");
    CHECK_ERR(tfc_linear_cross_entropy_autocast(NULL, h, w, w, tg, -1, &fused, &out), TFC_ERR_SHAPE,
              "tfc_linear_cross_entropy_autocast: w_bf16 is f32 [5,3], w is [5,3]: need bf16 of w's shape");
    CHECK_ERR(tfc_linear_cross_entropy_autocast(NULL, h, w, wb6, tg, -1, &fused, &out), TFC_ERR_SHAPE,
              "w_bf16 is bf16 [6,3], w is [5,3]");
    CHECK_ERR(tfc_linear_cross_entropy_autocast(NULL, h64, w, wb, tg, -1, &fused, &out), TFC_ERR_DTYPE,
              "tfc_linear_cross_entropy_autocast: h is f64 [4,3], w is f32 [5,3]: dtypes differ");
    CHECK(fused == 0 && out == sentinel);
    tfc_backend *sb = standin_install();
    sb->caps.gemm_bf16_widen_rows = 0;
    tfc_tensor *hc = NULL, *wc = NULL, *wbc = NULL, *tc = NULL;
    CHECK_OK(tfc_tensor_to_device(h, TFC_DEVICE_CUDA, 0, &hc));
    CHECK_OK(tfc_tensor_to_device(w, TFC_DEVICE_CUDA, 0, &wc));
    CHECK_OK(tfc_tensor_to_device(wb, TFC_DEVICE_CUDA, 0, &wbc));
    CHECK_OK(tfc_tensor_to_device(tg, TFC_DEVICE_CUDA, 0, &tc));
    fused = 7;
    CHECK_OK(tfc_linear_cross_entropy_autocast(NULL, hc, wc, wbc, tc, -1, &fused, &out));
    double lb = NAN, lw = NAN; /* bf16 storage, then f32 storage: the same bf16 products */
    CHECK(fused == 1 && out != sentinel);
    if (out != sentinel) {
        CHECK_OK(tfc_tensor_item(out, &lb));
        tfc_tensor_release(out);
        out = sentinel;
    }
    sb->caps.gemm_bf16_widen_rows = 33;
    CHECK_OK(tfc_linear_cross_entropy_autocast(NULL, hc, wc, wbc, tc, -1, &fused, &out));
    CHECK(fused == 1 && out != sentinel);
    if (out != sentinel) {
        CHECK_OK(tfc_tensor_item(out, &lw));
        tfc_tensor_release(out);
        out = sentinel;
    }
    CHECK(isfinite(lb) && fabs(lb - lw) <= 1e-6 * fabs(lw));
    tfc_status (*const rows)(const tfc_ce_rows_problem *) = sb->cross_entropy_rows;
    sb->cross_entropy_rows = NULL;
    fused = 7;
    CHECK_OK(tfc_linear_cross_entropy_autocast(NULL, hc, wc, wbc, tc, -1, &fused, &out));
    CHECK(fused == 0 && out == sentinel);
    sb->cross_entropy_rows = rows;
    sb->caps.gemm_bf16_widen_rows = 0;
    sb->caps.gemm_dtypes &= ~(1u << TFC_DTYPE_BF16);
    CHECK_OK(tfc_linear_cross_entropy_autocast(NULL, hc, wc, wbc, tc, -1, &fused, &out));
    CHECK(fused == 0 && out == sentinel);
    tfc_tensor_release(hc), tfc_tensor_release(wc), tfc_tensor_release(wbc), tfc_tensor_release(tc);
    standin_remove();
    tfc_tensor_release(h), tfc_tensor_release(w), tfc_tensor_release(wb), tfc_tensor_release(tg);
    tfc_tensor_release(h64), tfc_tensor_release(w6), tfc_tensor_release(wb6);
}

/* ---- the GPT's fused head ------------------------------------------------------------------ */

/* Loss and every parameter's gradient of one forward + backward (logits wanted or not). */
static double gpt_step(tfc_gpt *m, tfc_tensor *x, tfc_tensor *y, int want_logits, double **grads, int64_t *nodes) {
    tfc_graph *g;
    tfc_tensor *loss = NULL, *logits = NULL;
    CHECK_OK(tfc_graph_new(&g));
    CHECK_OK(tfc_gpt_forward(m, g, x, y, want_logits ? &logits : NULL, &loss));
    *nodes = tfc_graph_num_nodes(g);
    CHECK_OK(tfc_graph_backward(g, loss, NULL));
    int32_t n;
    const char *const *names;
    tfc_tensor *const *ps;
    CHECK_OK(tfc_gpt_params(m, &n, &names, &ps));
    for (int32_t i = 0; i < n; i++) {
        grads[i] = grad_vals(ps[i]);
        CHECK_OK(tfc_tensor_zero_grad(ps[i], 1));
    }
    double l = t_item(loss);
    tfc_tensor_release(loss);
    tfc_tensor_release(logits);
    tfc_graph_release(g);
    return l;
}

static void gpt_fused_vs_logits(int32_t bias, int32_t tie) {
    tfc_gpt_config c = TFC_GPT_CONFIG_INIT;
    c.n_layer = 2, c.n_head = 2, c.n_embd = 8, c.vocab_size = 13, c.block_size = 8;
    c.bias = bias, c.tie_weights = tie, c.dtype = TFC_DTYPE_F64;
    tfc_gpt *m = NULL;
    CHECK_OK(tfc_gpt_new(&c, 5, &m));
    if (!m) return;
    const int32_t idx[12] = {1, 5, 3, 12, 0, 7, 7, 2, 9, 4, 11, 6},
                  tgt[12] = {5, 3, 12, 0, -100, 7, 2, 9, -100, 11, 6, 1};
    tfc_tensor *x = NULL, *y = NULL;
    CHECK_OK(tfc_tensor_from_data(idx, (int64_t[]){2, 6}, 2, TFC_DTYPE_I32, &x));
    CHECK_OK(tfc_tensor_from_data(tgt, (int64_t[]){2, 6}, 2, TFC_DTYPE_I32, &y));
    int64_t prev = tfc_linear_cross_entropy_set_chunk_rows(5); /* 12 rows: chunks 5 + 5 + 2 */
    int32_t n;
    const char *const *names;
    tfc_tensor *const *ps;
    CHECK_OK(tfc_gpt_params(m, &n, &names, &ps));
    double *ga[64], *gb[64];
    int64_t nodes_logits, nodes_fused;
    double la = gpt_step(m, x, y, 1, ga, &nodes_logits);
    double lb = gpt_step(m, x, y, 0, gb, &nodes_fused);
    tfc_linear_cross_entropy_set_chunk_rows(prev);
    CHECK_CLOSE(lb, la, 1e-12);
    CHECK(nodes_fused < nodes_logits); /* the head is one node, not transpose + matmul + views + cross_entropy */
    for (int32_t i = 0; i < n; i++) {
        CHECK(ga[i] && gb[i]);
        if (ga[i] && gb[i]) check_vals(names[i], gb[i], ga[i], tfc_tensor_numel(ps[i]), 1e-12);
        free(ga[i]);
        free(gb[i]);
    }
    tfc_tensor_release(x);
    tfc_tensor_release(y);
    tfc_gpt_release(m);
}

TEST(gpt_loss_and_every_gradient_equal_the_logits_path) {
    gpt_fused_vs_logits(1, 1); /* tied: the head is wte, which also gets the embedding's gradient */
    gpt_fused_vs_logits(0, 0); /* untied lm_head.weight [V, C] */
}
