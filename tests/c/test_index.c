/*
 * Indexing ops (lib/ops/index.c): tfc_index_select, tfc_gather,
 * tfc_scatter_add and tfc_index_put against naive loops written here,
 * gradients by tfc_gradcheck in f64 (repeated indices and strided inputs
 * included), and every bad input: an index out of range is refused before
 * anything is written.
 */
#include "tfc_test_util.h"

TFC_TEST_MAIN

static tfc_tensor *ids(const int64_t *v, const int64_t *dims, int32_t nd) {
    tfc_tensor *t = NULL;
    if (tfc_tensor_from_data(v, dims, nd, TFC_DTYPE_I64, &t) != TFC_OK) abort();
    return t;
}

static tfc_tensor *ids32(const int32_t *v, const int64_t *dims, int32_t nd) {
    tfc_tensor *t = NULL;
    if (tfc_tensor_from_data(v, dims, nd, TFC_DTYPE_I32, &t) != TFC_OK) abort();
    return t;
}

static void check_vals(const tfc_tensor *t, const double *want, int64_t n) {
    CHECK(tfc_tensor_numel(t) == n);
    double *v = t_vals(t);
    for (int64_t i = 0; i < n; i++) CHECK_CLOSE(v[i], want[i], 0);
    free(v);
}

TEST(index_select_matches_loops_on_every_dim_with_repeats) {
    int64_t xd[3] = {3, 4, 5};
    tfc_tensor *x = t_rand(xd, 3, -1, 1, 1);
    double *xv = t_vals(x);
    int64_t iv[5] = {2, 0, 2, 1, 2}, idim[1] = {5};
    tfc_tensor *index = ids(iv, idim, 1);
    for (int32_t dim = 0; dim < 3; dim++) {
        int64_t k = dim == 0 ? 3 : 5; /* dim 0 has 3 rows: use the first 3 indices */
        tfc_tensor *ix = index;
        if (dim == 0) CHECK_OK(tfc_narrow(NULL, index, 0, 0, 3, &ix));
        tfc_tensor *y = NULL;
        CHECK_OK(tfc_index_select(NULL, x, dim - 3 * (dim == 2), ix, &y)); /* dim 2 passed as -1 */
        int64_t od[3] = {3, 4, 5};
        od[dim] = k;
        double *want = malloc(sizeof(double) * 100);
        for (int64_t a = 0; a < od[0]; a++)
            for (int64_t b = 0; b < od[1]; b++)
                for (int64_t c = 0; c < od[2]; c++) {
                    int64_t s[3] = {a, b, c};
                    s[dim] = iv[s[dim]];
                    want[(a * od[1] + b) * od[2] + c] = xv[(s[0] * 4 + s[1]) * 5 + s[2]];
                }
        int64_t yd[3];
        CHECK_OK(tfc_tensor_shape(y, yd, 3));
        CHECK(yd[0] == od[0] && yd[1] == od[1] && yd[2] == od[2]);
        check_vals(y, want, od[0] * od[1] * od[2]);
        free(want);
        tfc_tensor_release(y);
        if (ix != index) tfc_tensor_release(ix);
    }
    free(xv);
    tfc_tensor_release(index);
    tfc_tensor_release(x);
}

TEST(index_select_of_a_strided_view_with_i32_and_0d_index) {
    int64_t xd[2] = {4, 3};
    tfc_tensor *x = t_rand(xd, 2, -1, 1, 2), *xt = NULL, *y = NULL;
    double *xv = t_vals(x);
    CHECK_OK(tfc_transpose(NULL, x, 0, 1, &xt)); /* [3, 4], strides (1, 3) */
    int32_t iv[3] = {3, 3, 0};
    int64_t idim[1] = {3};
    tfc_tensor *index = ids32(iv, idim, 1);
    CHECK_OK(tfc_index_select(NULL, xt, 1, index, &y));
    double want[9];
    for (int r = 0; r < 3; r++)
        for (int k = 0; k < 3; k++) want[r * 3 + k] = xv[iv[k] * 3 + r];
    check_vals(y, want, 9);
    tfc_tensor_release(y);
    int64_t one = 2;
    tfc_tensor *i0 = ids(&one, NULL, 0);
    CHECK_OK(tfc_index_select(NULL, x, 0, i0, &y));
    CHECK(tfc_tensor_ndim(y) == 2 && tfc_tensor_dim(y, 0) == 1);
    check_vals(y, xv + 6, 3);
    tfc_tensor_release(y);
    tfc_tensor_release(i0);
    free(xv);
    tfc_tensor_release(index);
    tfc_tensor_release(xt);
    tfc_tensor_release(x);
}

TEST(gather_matches_loops) {
    int64_t xd[2] = {3, 4};
    tfc_tensor *x = t_rand(xd, 2, -1, 1, 3);
    double *xv = t_vals(x);
    /* dim 1: index [3, 2] (smaller than x at dim 0 would also be fine) */
    int64_t i1[6] = {3, 0, 1, 1, 2, 3}, d1[2] = {3, 2};
    tfc_tensor *index = ids(i1, d1, 2), *y = NULL;
    CHECK_OK(tfc_gather(NULL, x, 1, index, &y));
    double want[8];
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 2; c++) want[r * 2 + c] = xv[r * 4 + i1[r * 2 + c]];
    check_vals(y, want, 6);
    tfc_tensor_release(y);
    tfc_tensor_release(index);
    /* dim 0: index [2, 3], a corner of x's other dims */
    int64_t i0[6] = {2, 0, 1, 0, 0, 2}, d0[2] = {2, 3};
    index = ids(i0, d0, 2);
    CHECK_OK(tfc_gather(NULL, x, -2, index, &y));
    for (int r = 0; r < 2; r++)
        for (int c = 0; c < 3; c++) want[r * 3 + c] = xv[i0[r * 3 + c] * 4 + c];
    check_vals(y, want, 6);
    tfc_tensor_release(y);
    tfc_tensor_release(index);
    free(xv);
    tfc_tensor_release(x);
}

TEST(scatter_add_matches_loops_and_leaves_x_alone) {
    int64_t xd[2] = {3, 4}, sd[2] = {3, 5};
    tfc_tensor *x = t_rand(xd, 2, -1, 1, 4), *src = t_rand(sd, 2, -1, 1, 5);
    double *xv = t_vals(x), *sv = t_vals(src);
    int64_t iv[8] = {0, 2, 2, 1, 2, 2, 0, 0}, id[2] = {2, 4}; /* repeats along dim 0 */
    tfc_tensor *index = ids(iv, id, 2), *y = NULL;
    CHECK_OK(tfc_scatter_add(NULL, x, 0, index, src, &y));
    double want[12];
    memcpy(want, xv, sizeof want);
    for (int r = 0; r < 2; r++)
        for (int c = 0; c < 4; c++) want[iv[r * 4 + c] * 4 + c] += sv[r * 5 + c];
    check_vals(y, want, 12);
    check_vals(x, xv, 12);
    tfc_tensor_release(y);
    tfc_tensor_release(index);
    free(xv);
    free(sv);
    tfc_tensor_release(src);
    tfc_tensor_release(x);
}

TEST(index_put_writes_through_a_strided_view_last_repeat_wins) {
    int64_t bd[2] = {2, 3};
    double base[6] = {0, 1, 2, 3, 4, 5};
    tfc_tensor *b = t_from(base, bd, 2), *v = NULL;
    CHECK_OK(tfc_transpose(NULL, b, 0, 1, &v)); /* v [3, 2]: v[i][j] = b[j][i] */
    int64_t iv[3] = {1, 4, 1}, id[1] = {3};     /* v's flat positions: (0,1), (2,0), (0,1) again */
    double vals[3] = {10, 20, 30};
    int64_t vd[1] = {3};
    tfc_tensor *index = ids(iv, id, 1), *values = t_from(vals, vd, 1);
    uint64_t ver0 = tfc_tensor_version(b);
    CHECK_OK(tfc_index_put(NULL, v, index, values, 0));
    CHECK(tfc_tensor_version(b) > ver0);
    double want[6] = {0, 1, 20, 30, 4, 5}; /* v(0,1) = b(1,0) = 30 (the last repeat); v(2,0) = b(0,2) = 20 */
    check_vals(b, want, 6);
    CHECK_OK(tfc_index_put(NULL, v, index, values, 1));
    double want2[6] = {0, 1, 40, 70, 4, 5};
    check_vals(b, want2, 6);
    /* values broadcast from a scalar */
    double one = -1;
    tfc_tensor *s = t_from(&one, NULL, 0);
    CHECK_OK(tfc_index_put(NULL, b, index, s, 0));
    double want3[6] = {0, -1, 40, 70, -1, 5};
    check_vals(b, want3, 6);
    tfc_tensor_release(s);
    tfc_tensor_release(index);
    tfc_tensor_release(values);
    tfc_tensor_release(v);
    tfc_tensor_release(b);
}

/* ---- gradients ---- */

static tfc_status weighted_loss(tfc_graph *g, tfc_tensor *out, tfc_tensor **loss) {
    int64_t dims[8];
    int32_t nd = tfc_tensor_ndim(out);
    tfc_status s = tfc_tensor_shape(out, dims, 8);
    tfc_tensor *w = NULL, *p = NULL;
    if (s == TFC_OK) s = tfc_tensor_uniform(dims, nd, TFC_DTYPE_F64, -1, 1, 77, 0, &w);
    if (s == TFC_OK) s = tfc_mul(g, out, w, &p);
    if (s == TFC_OK) s = tfc_sum(g, p, NULL, 0, 0, loss);
    tfc_tensor_release(w);
    tfc_tensor_release(p);
    tfc_tensor_release(out);
    return s;
}

typedef struct {
    int which;
} gc_ctx;

static tfc_status run_index_op(tfc_graph *g, tfc_tensor *const *in, int32_t n, tfc_tensor **loss, void *vctx) {
    (void)n;
    const gc_ctx *c = vctx;
    tfc_tensor *out = NULL, *xt = NULL, *index = NULL;
    tfc_status s = TFC_OK;
    if (c->which == 0) { /* index_select on dim 1 of a transposed view, repeats */
        int64_t iv[4] = {2, 0, 2, 2}, id[1] = {4};
        index = ids(iv, id, 1);
        s = tfc_transpose(g, in[0], 0, 1, &xt);
        if (s == TFC_OK) s = tfc_index_select(g, xt, 1, index, &out);
    } else if (c->which == 1) { /* gather on dim 0 with repeats */
        int64_t iv[6] = {1, 1, 0, 3, 1, 2}, id[2] = {2, 3};
        index = ids(iv, id, 2);
        s = tfc_gather(g, in[0], 0, index, &out);
    } else { /* scatter_add on dim 1, index smaller than src, repeats */
        int64_t iv[4] = {2, 2, 0, 2}, id[2] = {2, 2};
        index = ids(iv, id, 2);
        s = tfc_transpose(g, in[1], 0, 1, &xt); /* src as a strided view [4, 3] */
        if (s == TFC_OK) s = tfc_scatter_add(g, in[0], 1, index, xt, &out);
    }
    tfc_tensor_release(xt);
    tfc_tensor_release(index);
    if (s != TFC_OK) return s;
    return weighted_loss(g, out, loss);
}

static void gradcheck_index(int which, tfc_tensor **in, int32_t n) {
    for (int32_t i = 0; i < n; i++) CHECK_OK(tfc_tensor_set_requires_grad(in[i], 1));
    gc_ctx c = {which};
    double err = 1;
    CHECK_OK(tfc_gradcheck(run_index_op, in, n, &c, 1e-6, &err, NULL, NULL));
    CHECK(err < 1e-7);
    for (int32_t i = 0; i < n; i++) tfc_tensor_release(in[i]);
}

TEST(gradients_by_finite_differences) {
    int64_t a[2] = {4, 3}, b[2] = {4, 3}, s[2] = {3, 4};
    gradcheck_index(0, (tfc_tensor *[]){t_rand(a, 2, -1, 1, 10)}, 1);
    gradcheck_index(1, (tfc_tensor *[]){t_rand(b, 2, -1, 1, 11)}, 1);
    gradcheck_index(2, (tfc_tensor *[]){t_rand(a, 2, -1, 1, 12), t_rand(s, 2, -1, 1, 13)}, 2);
}

TEST(hand_derived_gradient_of_repeated_rows) {
    /* y = index_select(x, 0, [1, 1, 0]); sum(y) => dx = [1, 2] per column */
    int64_t xd[2] = {2, 2};
    tfc_tensor *x = t_rand(xd, 2, -1, 1, 20), *y = NULL, *l = NULL;
    CHECK_OK(tfc_tensor_set_requires_grad(x, 1));
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    int64_t iv[3] = {1, 1, 0}, id[1] = {3};
    tfc_tensor *index = ids(iv, id, 1);
    CHECK_OK(tfc_index_select(g, x, 0, index, &y));
    CHECK_OK(tfc_sum(g, y, NULL, 0, 0, &l));
    CHECK_OK(tfc_graph_backward(g, l, NULL));
    double want[4] = {1, 1, 2, 2};
    tfc_tensor *gx = NULL;
    CHECK_OK(tfc_tensor_grad(x, &gx));
    check_vals(gx, want, 4);
    tfc_tensor_release(gx);
    tfc_tensor_release(l);
    tfc_tensor_release(y);
    tfc_tensor_release(index);
    tfc_graph_release(g);
    tfc_tensor_release(x);
}

/* ---- bad input ---- */

TEST(out_of_range_indices_are_refused_before_any_write) {
    int64_t xd[2] = {2, 3};
    double xv[6] = {1, 2, 3, 4, 5, 6};
    tfc_tensor *x = t_from(xv, xd, 2), *y = NULL;
    int64_t bad[3] = {0, 3, 1}, neg[3] = {0, -1, 1}, d1[1] = {3};
    tfc_tensor *ib = ids(bad, d1, 1), *in = ids(neg, d1, 1);
    CHECK_ERR(tfc_index_select(NULL, x, 1, ib, &y), TFC_ERR_INVALID_ARG,
              "tfc_index_select: index [3] at flat position 1 is 3, out of range: outside [0, 3)");
    CHECK(y == NULL);
    CHECK_ERR(tfc_index_select(NULL, x, 1, in, &y), TFC_ERR_INVALID_ARG, "is -1, out of range");
    int64_t gd[2] = {1, 3};
    tfc_tensor *gi = NULL;
    CHECK_OK(tfc_reshape(NULL, ib, gd, 2, &gi));
    CHECK_ERR(tfc_gather(NULL, x, 1, gi, &y), TFC_ERR_INVALID_ARG, "tfc_gather: index [1,3] at flat position 1");
    CHECK_ERR(tfc_scatter_add(NULL, x, 1, gi, x, &y), TFC_ERR_INVALID_ARG, "tfc_scatter_add: index [1,3]");
    /* index_put: position 6 of 6 elements; the first write (position 0) must not have happened */
    int64_t pb[2] = {0, 6}, pd[1] = {2};
    tfc_tensor *pi = ids(pb, pd, 1);
    double z[2] = {-9, -9};
    tfc_tensor *vals = t_from(z, pd, 1);
    CHECK_ERR(tfc_index_put(NULL, x, pi, vals, 0), TFC_ERR_INVALID_ARG,
              "tfc_index_put: index [2] at flat position 1 is 6, out of range: outside [0, 6)");
    check_vals(x, xv, 6);
    tfc_tensor_release(vals);
    tfc_tensor_release(pi);
    tfc_tensor_release(gi);
    tfc_tensor_release(ib);
    tfc_tensor_release(in);
    tfc_tensor_release(x);
}

TEST(bad_shapes_dtypes_and_modes) {
    int64_t xd[2] = {2, 3}, i2[2] = {3, 1}, i1[1] = {2};
    tfc_tensor *x = t_rand(xd, 2, -1, 1, 30), *y = NULL;
    int64_t iv[3] = {0, 1, 0};
    tfc_tensor *idx2 = ids(iv, i2, 2), *idx1 = ids(iv, i1, 1);
    CHECK_ERR(tfc_index_select(NULL, x, 0, idx2, &y), TFC_ERR_SHAPE,
              "tfc_index_select: index is [3,1]; it must be 1-D");
    CHECK_ERR(tfc_index_select(NULL, x, 2, idx1, &y), TFC_ERR_INVALID_ARG, "tfc_index_select: dim 2");
    CHECK_ERR(tfc_index_select(NULL, x, 0, x, &y), TFC_ERR_DTYPE, "index");
    CHECK_ERR(tfc_gather(NULL, x, 1, idx2, &y), TFC_ERR_SHAPE,
              "tfc_gather: index is [3,1], larger than x [2,3] at dim 0");
    CHECK_ERR(tfc_gather(NULL, x, 1, idx1, &y), TFC_ERR_SHAPE, "same number of dims");
    int64_t sd[2] = {1, 1};
    tfc_tensor *small = t_rand(sd, 2, -1, 1, 31), *i22 = NULL;
    int64_t d22[2] = {1, 2};
    CHECK_OK(tfc_reshape(NULL, idx1, d22, 2, &i22));
    CHECK_ERR(tfc_scatter_add(NULL, x, 1, i22, small, &y), TFC_ERR_SHAPE,
              "tfc_scatter_add: index is [1,2], larger than src [1,1] at dim 1");
    tfc_tensor *x32 = NULL;
    CHECK_OK(tfc_cast(NULL, x, TFC_DTYPE_F32, &x32));
    CHECK_ERR(tfc_scatter_add(NULL, x, 1, i22, x32, &y), TFC_ERR_DTYPE, "tfc_scatter_add: src is f32 but x is f64");
    CHECK(y == NULL);
    /* index_put: mode, dtype, broadcast, overlap, recording */
    double vals[2] = {1, 2};
    tfc_tensor *v = t_from(vals, i1, 1);
    CHECK_ERR(tfc_index_put(NULL, x, idx1, v, 2), TFC_ERR_INVALID_ARG, "tfc_index_put: accumulate is 2");
    CHECK_ERR(tfc_index_put(NULL, x32, idx1, v, 0), TFC_ERR_DTYPE, "tfc_index_put: values are f64 but x is f32");
    CHECK_ERR(tfc_index_put(NULL, x, idx2, v, 0), TFC_ERR_SHAPE,
              "tfc_index_put: values [2] do not broadcast to index [3,1]");
    tfc_tensor *xv = NULL;
    CHECK_OK(tfc_narrow(NULL, x, 1, 0, 2, &xv));
    tfc_tensor *row = NULL;
    CHECK_OK(tfc_narrow(NULL, xv, 0, 0, 1, &row));
    CHECK_ERR(tfc_index_put(NULL, x, idx1, row, 0), TFC_ERR_INVALID_ARG, "tfc_index_put");
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    CHECK_OK(tfc_tensor_set_requires_grad(x, 1));
    CHECK_ERR(tfc_index_put(g, x, idx1, v, 0), TFC_ERR_UNSUPPORTED, "tfc_index_put: x requires grad and g records");
    CHECK_OK(tfc_index_put(NULL, x, idx1, v, 0)); /* the no_grad write of a parameter */
    int64_t ibd[1] = {2};
    tfc_tensor *ib = NULL;
    CHECK_OK(tfc_tensor_zeros(ibd, 1, TFC_DTYPE_BOOL, &ib));
    CHECK_ERR(tfc_index_put(NULL, ib, idx1, ib, 1), TFC_ERR_DTYPE, "tfc_index_put");
    tfc_graph_release(g);
    tfc_tensor_release(ib);
    tfc_tensor_release(row);
    tfc_tensor_release(xv);
    tfc_tensor_release(v);
    tfc_tensor_release(x32);
    tfc_tensor_release(i22);
    tfc_tensor_release(small);
    tfc_tensor_release(idx1);
    tfc_tensor_release(idx2);
    tfc_tensor_release(x);
}

TEST(a_write_after_save_fails_backward) {
    int64_t xd[1] = {3};
    tfc_tensor *x = t_rand(xd, 1, -1, 1, 40), *y = NULL, *l = NULL;
    CHECK_OK(tfc_tensor_set_requires_grad(x, 1));
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    CHECK_OK(tfc_mul(g, x, x, &y));
    CHECK_OK(tfc_sum(g, y, NULL, 0, 0, &l));
    int64_t i = 1;
    double v = 5;
    tfc_tensor *index = ids(&i, NULL, 0), *val = t_from(&v, NULL, 0);
    CHECK_OK(tfc_index_put(NULL, x, index, val, 0));
    CHECK_ERR(tfc_graph_backward(g, l, NULL), TFC_ERR_INVALID_ARG, "modified");
    tfc_tensor_release(index);
    tfc_tensor_release(val);
    tfc_tensor_release(l);
    tfc_tensor_release(y);
    tfc_graph_release(g);
    tfc_tensor_release(x);
}

/* ---- masks ---- */

TEST(nonzero_lists_positions_in_row_major_order) {
    int64_t d[2] = {2, 3};
    double mv[6] = {0, 1, 0, 2, 0, -1};
    tfc_tensor *m = t_from(mv, d, 2), *mt = NULL, *nz = NULL;
    CHECK_OK(tfc_nonzero(m, &nz));
    CHECK(tfc_tensor_dtype(nz) == TFC_DTYPE_I64 && tfc_tensor_dim(nz, 0) == 3 && tfc_tensor_dim(nz, 1) == 2);
    double want[6] = {0, 1, 1, 0, 1, 2};
    check_vals(nz, want, 6);
    tfc_tensor_release(nz);
    /* a transposed view: positions of the view, not of the memory */
    CHECK_OK(tfc_transpose(NULL, m, 0, 1, &mt));
    CHECK_OK(tfc_nonzero(mt, &nz));
    double want_t[6] = {0, 1, 1, 0, 2, 1};
    check_vals(nz, want_t, 6);
    tfc_tensor_release(nz);
    tfc_tensor_release(mt);
    /* all zero: [0, 2] */
    CHECK_OK(tfc_tensor_fill(m, 0));
    CHECK_OK(tfc_nonzero(m, &nz));
    CHECK(tfc_tensor_dim(nz, 0) == 0 && tfc_tensor_dim(nz, 1) == 2);
    tfc_tensor_release(nz);
    tfc_tensor_release(m);
}

TEST(masked_select_values_gradient_and_broadcast) {
    int64_t d[2] = {2, 3}, md[1] = {3};
    tfc_tensor *x = t_rand(d, 2, -1, 1, 50), *mask = NULL, *y = NULL, *l = NULL;
    double *xv = t_vals(x);
    uint8_t mv[3] = {1, 0, 1};
    CHECK_OK(tfc_tensor_from_data(mv, md, 1, TFC_DTYPE_BOOL, &mask));
    CHECK_OK(tfc_tensor_set_requires_grad(x, 1));
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    CHECK_OK(tfc_masked_select(g, x, mask, &y)); /* mask [3] broadcast over x's rows */
    double want[4] = {xv[0], xv[2], xv[3], xv[5]};
    check_vals(y, want, 4);
    CHECK_OK(tfc_sum(g, y, NULL, 0, 0, &l));
    CHECK_OK(tfc_graph_backward(g, l, NULL));
    tfc_tensor *gx = NULL;
    CHECK_OK(tfc_tensor_grad(x, &gx));
    double wg[6] = {1, 0, 1, 1, 0, 1};
    check_vals(gx, wg, 6);
    int64_t bd[1] = {2};
    tfc_tensor *bad = NULL, *fm = NULL;
    CHECK_OK(tfc_tensor_zeros(bd, 1, TFC_DTYPE_BOOL, &bad));
    CHECK_ERR(tfc_masked_select(NULL, x, bad, &y), TFC_ERR_SHAPE, "tfc_masked_select: mask [2] does not broadcast");
    CHECK_OK(tfc_tensor_zeros(md, 1, TFC_DTYPE_F64, &fm));
    CHECK_ERR(tfc_masked_select(NULL, x, fm, &y), TFC_ERR_DTYPE, "tfc_masked_select: mask is f64");
    tfc_tensor_release(fm);
    tfc_tensor_release(bad);
    tfc_tensor_release(gx);
    tfc_tensor_release(l);
    tfc_tensor_release(y);
    tfc_graph_release(g);
    tfc_tensor_release(mask);
    free(xv);
    tfc_tensor_release(x);
}
