/* Forward ops against naive loops written here, strided and broadcast cases, bad input. */
#include "tfc_test_util.h"

TFC_TEST_MAIN

TEST(binary_broadcast_matches_naive) {
    int64_t da[3] = {2, 1, 4}, db[2] = {3, 1};
    tfc_tensor *a = t_rand(da, 3, -2, 2, 1), *b = t_rand(db, 2, 0.5, 2, 2);
    double *va = t_vals(a), *vb = t_vals(b);
    tfc_tensor *r[4] = {0};
    CHECK_OK(tfc_add(NULL, a, b, &r[0]));
    CHECK_OK(tfc_sub(NULL, a, b, &r[1]));
    CHECK_OK(tfc_mul(NULL, a, b, &r[2]));
    CHECK_OK(tfc_div(NULL, a, b, &r[3]));
    int64_t shape[8];
    CHECK_OK(tfc_tensor_shape(r[0], shape, 8));
    CHECK(tfc_tensor_ndim(r[0]) == 3 && shape[0] == 2 && shape[1] == 3 && shape[2] == 4);
    for (int k = 0; k < 4; k++) {
        double *v = t_vals(r[k]);
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++)
                for (int l = 0; l < 4; l++) {
                    double x = va[i * 4 + l], y = vb[j],
                           want = k == 0 ? x + y
                        : k == 1         ? x - y
                        : k == 2         ? x * y
                                         : x / y;
                    CHECK_CLOSE(v[(i * 3 + j) * 4 + l], want, 1e-15);
                }
        free(v);
        tfc_tensor_release(r[k]);
    }
    free(va);
    free(vb);
    tfc_tensor_release(a);
    tfc_tensor_release(b);
}

TEST(unary_and_scalar_ops) {
    double xs[5] = {-1.5, -0.2, 0.3, 1.0, 2.5};
    int64_t d[1] = {5};
    tfc_tensor *x = t_from(xs, d, 1), *pos = NULL, *r = NULL;
    CHECK_OK(tfc_add_scalar(NULL, x, 2.0, &pos)); /* all positive for log/sqrt */
    struct {
        tfc_status (*f)(tfc_graph *, const tfc_tensor *, tfc_tensor **);
        int positive;
        int id;
    } fs[] = {{tfc_neg, 0, 0},   {tfc_exp, 0, 1},  {tfc_log, 1, 2},     {tfc_sqrt, 1, 3},
              {tfc_rsqrt, 1, 4}, {tfc_tanh, 0, 5}, {tfc_sigmoid, 0, 6}, {tfc_relu, 0, 7}};
    for (size_t k = 0; k < sizeof fs / sizeof fs[0]; k++) {
        CHECK_OK(fs[k].f(NULL, fs[k].positive ? pos : x, &r));
        double *v = t_vals(r);
        for (int i = 0; i < 5; i++) {
            double a = fs[k].positive ? xs[i] + 2 : xs[i], want;
            switch (fs[k].id) {
            case 0: want = -a; break;
            case 1: want = exp(a); break;
            case 2: want = log(a); break;
            case 3: want = sqrt(a); break;
            case 4: want = 1 / sqrt(a); break;
            case 5: want = tanh(a); break;
            case 6: want = 1 / (1 + exp(-a)); break;
            default: want = a > 0 ? a : 0; break;
            }
            CHECK_CLOSE(v[i], want, 1e-14);
        }
        free(v);
        tfc_tensor_release(r);
    }
    CHECK_OK(tfc_pow_scalar(NULL, pos, 1.5, &r));
    double *v = t_vals(r);
    for (int i = 0; i < 5; i++) CHECK_CLOSE(v[i], pow(xs[i] + 2, 1.5), 1e-14);
    free(v);
    tfc_tensor_release(r);
    CHECK_OK(tfc_rdiv_scalar(NULL, pos, 3.0, &r));
    v = t_vals(r);
    for (int i = 0; i < 5; i++) CHECK_CLOSE(v[i], 3.0 / (xs[i] + 2), 1e-14);
    free(v);
    tfc_tensor_release(r);
    CHECK_OK(tfc_gelu(NULL, x, TFC_GELU_ERF, &r));
    v = t_vals(r);
    for (int i = 0; i < 5; i++) CHECK_CLOSE(v[i], 0.5 * xs[i] * (1 + erf(xs[i] / sqrt(2.0))), 1e-14);
    free(v);
    tfc_tensor_release(r);
    CHECK_OK(tfc_gelu(NULL, x, TFC_GELU_TANH, &r));
    v = t_vals(r);
    for (int i = 0; i < 5; i++) {
        double a = xs[i];
        CHECK_CLOSE(v[i], 0.5 * a * (1 + tanh(sqrt(2 / M_PI) * (a + 0.044715 * a * a * a))), 1e-14);
    }
    free(v);
    tfc_tensor_release(r);
    CHECK_ERR(tfc_gelu(NULL, x, 7, &r), TFC_ERR_INVALID_ARG, "approximate");
    tfc_tensor_release(x);
    tfc_tensor_release(pos);
}

TEST(reductions_match_naive) {
    int64_t d[3] = {3, 4, 5};
    tfc_tensor *x = t_rand(d, 3, -1, 1, 3), *r = NULL;
    double *v = t_vals(x);
    int32_t dims[2] = {0, 2};
    CHECK_OK(tfc_sum(NULL, x, dims, 2, 0, &r));
    CHECK(tfc_tensor_ndim(r) == 1 && tfc_tensor_dim(r, 0) == 4);
    double *s = t_vals(r);
    for (int j = 0; j < 4; j++) {
        double want = 0;
        for (int i = 0; i < 3; i++)
            for (int k = 0; k < 5; k++) want += v[(i * 4 + j) * 5 + k];
        CHECK_CLOSE(s[j], want, 1e-14);
    }
    free(s);
    tfc_tensor_release(r);
    /* mean over everything, keepdim */
    CHECK_OK(tfc_mean(NULL, x, NULL, 0, 1, &r));
    CHECK(tfc_tensor_ndim(r) == 3 && tfc_tensor_numel(r) == 1);
    double total = 0;
    for (int i = 0; i < 60; i++) total += v[i];
    CHECK_CLOSE(t_item(r), total / 60, 1e-14);
    tfc_tensor_release(r);
    /* max/min/argmax/var over dim -1 */
    int32_t last = -1;
    tfc_tensor *mx = NULL, *mn = NULL, *am = NULL, *var = NULL;
    CHECK_OK(tfc_max(NULL, x, &last, 1, 0, &mx));
    CHECK_OK(tfc_min(NULL, x, &last, 1, 1, &mn));
    CHECK_OK(tfc_argmax(x, -1, 0, &am));
    CHECK_OK(tfc_var(NULL, x, &last, 1, 1, 0, &var));
    CHECK(tfc_tensor_dtype(am) == TFC_DTYPE_I64 && tfc_tensor_ndim(mn) == 3);
    double *vmx = t_vals(mx), *vmn = t_vals(mn), *vvar = t_vals(var);
    int64_t iam[12];
    CHECK_OK(tfc_tensor_copy_to_host(am, iam, sizeof iam));
    for (int r0 = 0; r0 < 12; r0++) {
        double hi = -1e9, lo = 1e9, mean = 0, ss = 0;
        int64_t at = 0;
        for (int k = 0; k < 5; k++) {
            double e = v[r0 * 5 + k];
            if (e > hi) {
                hi = e;
                at = k;
            }
            if (e < lo) lo = e;
            mean += e / 5;
        }
        for (int k = 0; k < 5; k++) ss += (v[r0 * 5 + k] - mean) * (v[r0 * 5 + k] - mean);
        CHECK(vmx[r0] == hi && vmn[r0] == lo && iam[r0] == at);
        CHECK_CLOSE(vvar[r0], ss / 4, 1e-13);
    }
    free(vmx);
    free(vmn);
    free(vvar);
    tfc_tensor_release(mx);
    tfc_tensor_release(mn);
    tfc_tensor_release(am);
    tfc_tensor_release(var);
    CHECK_ERR(tfc_sum(NULL, x, (int32_t[]){5}, 1, 0, &r), TFC_ERR_INVALID_ARG, "dim 5");
    CHECK_ERR(tfc_sum(NULL, x, (int32_t[]){1, 1}, 2, 0, &r), TFC_ERR_INVALID_ARG, "twice");
    free(v);
    tfc_tensor_release(x);
}

/* Naive C[i,j] = Σ_k A[i,k] B[k,j] on dense row-major buffers. */
static void naive_mm(const double *a, const double *b, double *c, int m, int n, int k) {
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int p = 0; p < k; p++) s += a[i * k + p] * b[p * n + j];
            c[i * n + j] = s;
        }
}

TEST(matmul_2d_batched_broadcast_transposed) {
    int64_t da[3] = {2, 3, 4}, db[2] = {4, 5};
    tfc_tensor *a = t_rand(da, 3, -1, 1, 4), *b = t_rand(db, 2, -1, 1, 5), *r = NULL;
    CHECK_OK(tfc_matmul(NULL, a, b, &r));
    CHECK(tfc_tensor_ndim(r) == 3 && tfc_tensor_dim(r, 1) == 3 && tfc_tensor_dim(r, 2) == 5);
    double *va = t_vals(a), *vb = t_vals(b), *vr = t_vals(r), want[15];
    for (int bi = 0; bi < 2; bi++) {
        naive_mm(va + bi * 12, vb, want, 3, 5, 4);
        for (int i = 0; i < 15; i++) CHECK_CLOSE(vr[bi * 15 + i], want[i], 1e-14);
    }
    free(vr);
    tfc_tensor_release(r);
    /* a · (bᵀ)ᵀ through a transposed view: same numbers, no copy needed */
    int64_t dbt[2] = {5, 4};
    tfc_tensor *bt = t_rand(dbt, 2, -1, 1, 6), *btt = NULL;
    CHECK_OK(tfc_transpose(NULL, bt, 0, 1, &btt));
    CHECK(!tfc_tensor_is_contiguous(btt));
    CHECK_OK(tfc_matmul(NULL, a, btt, &r));
    double *vbt = t_vals(btt);
    vr = t_vals(r);
    for (int bi = 0; bi < 2; bi++) {
        naive_mm(va + bi * 12, vbt, want, 3, 5, 4);
        for (int i = 0; i < 15; i++) CHECK_CLOSE(vr[bi * 15 + i], want[i], 1e-14);
    }
    free(vr);
    free(vbt);
    tfc_tensor_release(r);
    /* broadcast batch: [2,1,3,4] @ [3,4,2] -> [2,3,3,2] */
    int64_t d4[4] = {2, 1, 3, 4}, d5[3] = {3, 4, 2};
    tfc_tensor *x = t_rand(d4, 4, -1, 1, 7), *y = t_rand(d5, 3, -1, 1, 8);
    CHECK_OK(tfc_matmul(NULL, x, y, &r));
    CHECK(tfc_tensor_ndim(r) == 4 && tfc_tensor_dim(r, 0) == 2 && tfc_tensor_dim(r, 1) == 3);
    double *vx = t_vals(x), *vy = t_vals(y);
    vr = t_vals(r);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) {
            double w[6];
            naive_mm(vx + i * 12, vy + j * 8, w, 3, 2, 4);
            for (int e = 0; e < 6; e++) CHECK_CLOSE(vr[(i * 3 + j) * 6 + e], w[e], 1e-14);
        }
    free(vx);
    free(vy);
    free(vr);
    tfc_tensor_release(r);
    /* 1-D operands: vector · matrix and matrix · vector */
    int64_t d1[1] = {4};
    tfc_tensor *v1 = t_rand(d1, 1, -1, 1, 9);
    CHECK_OK(tfc_matmul(NULL, v1, b, &r));
    CHECK(tfc_tensor_ndim(r) == 1 && tfc_tensor_dim(r, 0) == 5);
    tfc_tensor_release(r);
    /* the DESIGN's message */
    int64_t e1[2] = {4, 8}, e2[2] = {7, 3};
    tfc_tensor *p = t_rand(e1, 2, 0, 1, 1), *q = t_rand(e2, 2, 0, 1, 1);
    CHECK_ERR(tfc_matmul(NULL, p, q, &r), TFC_ERR_SHAPE,
              "tfc_matmul: a is [4,8], b is [7,3]: inner dimensions 8 and 7 differ");
    tfc_tensor *f32 = NULL;
    CHECK_OK(tfc_cast(NULL, p, TFC_DTYPE_F32, &f32));
    CHECK_ERR(tfc_matmul(NULL, f32, p, &r), TFC_ERR_DTYPE, "dtypes differ");
    free(va);
    free(vb);
    tfc_tensor_release(p);
    tfc_tensor_release(q);
    tfc_tensor_release(f32);
    tfc_tensor_release(v1);
    tfc_tensor_release(x);
    tfc_tensor_release(y);
    tfc_tensor_release(bt);
    tfc_tensor_release(btt);
    tfc_tensor_release(a);
    tfc_tensor_release(b);
}

TEST(blocked_gemm_fallback_matches_naive) {
    /* The non-BLAS kernel is compiled in every build; check it directly. */
    extern void tfc_cpu_gemm_blocked(tfc_dtype, int, int, int64_t, int64_t, int64_t, double, const void *, int64_t,
                                     const void *, int64_t, double, void *, int64_t);
    double a[6 * 7], b[7 * 5], c[6 * 5], w[6 * 5], at[7 * 6];
    for (int i = 0; i < 42; i++) a[i] = sin(i), at[(i % 7) * 6 + i / 7] = sin(i);
    for (int i = 0; i < 35; i++) b[i] = cos(i);
    naive_mm(a, b, w, 6, 5, 7);
    tfc_cpu_gemm_blocked(TFC_DTYPE_F64, 0, 0, 6, 5, 7, 1.0, a, 7, b, 5, 0.0, c, 5);
    for (int i = 0; i < 30; i++) CHECK_CLOSE(c[i], w[i], 1e-14);
    tfc_cpu_gemm_blocked(TFC_DTYPE_F64, 1, 0, 6, 5, 7, 1.0, at, 6, b, 5, 0.0, c, 5);
    for (int i = 0; i < 30; i++) CHECK_CLOSE(c[i], w[i], 1e-14);
}

TEST(gemm_split_over_threads_matches_naive) {
    /* Products above the split threshold (2^18 multiply-adds) are cut into
     * blocks of C, one BLAS call per thread (lib/cpu/gemm.c): rows when
     * M >= N, columns otherwise. Odd sizes leave a ragged last block; every
     * transpose combination moves the block's operand pointer differently;
     * beta = 1 checks each block reads its own part of C. */
    extern void tfc_cpu_gemm_matrix(tfc_dtype, int, int, int64_t, int64_t, int64_t, double, const void *, int64_t,
                                    const void *, int64_t, double, void *, int64_t);
    const int64_t shapes[2][3] = {{301, 67, 97}, {45, 611, 83}}; /* m, n, k: row split, column split */
    for (int sh = 0; sh < 2; sh++) {
        int64_t m = shapes[sh][0], n = shapes[sh][1], k = shapes[sh][2];
        double *a = malloc(sizeof(double) * m * k), *b = malloc(sizeof(double) * k * n),
               *at = malloc(sizeof(double) * m * k), *bt = malloc(sizeof(double) * k * n),
               *c = malloc(sizeof(double) * m * n), *w = malloc(sizeof(double) * m * n);
        for (int64_t i = 0; i < m * k; i++) a[i] = sin(0.37 * i), at[(i % k) * m + i / k] = a[i];
        for (int64_t i = 0; i < k * n; i++) b[i] = cos(0.11 * i), bt[(i % n) * k + i / n] = b[i];
        naive_mm(a, b, w, m, n, k);
        for (int threads = 1; threads <= 2; threads++) {
            CHECK_OK(tfc_set_num_threads(threads));
            for (int ta = 0; ta < 2; ta++)
                for (int tb = 0; tb < 2; tb++) {
                    for (int64_t i = 0; i < m * n; i++) c[i] = 0.5 * i;
                    tfc_cpu_gemm_matrix(TFC_DTYPE_F64, ta, tb, m, n, k, 2.0, ta ? at : a, ta ? m : k, tb ? bt : b,
                                        tb ? k : n, 1.0, c, n);
                    for (int64_t i = 0; i < m * n; i++) CHECK_CLOSE(c[i], 2.0 * w[i] + 0.5 * i, 1e-12);
                }
        }
        CHECK_OK(tfc_set_num_threads(0));
        free(a), free(b), free(at), free(bt), free(c), free(w);
    }
}

TEST(views_share_storage_and_read_right) {
    int64_t d[3] = {2, 3, 4};
    tfc_tensor *x = NULL, *t = NULL, *p = NULL, *s = NULL, *e = NULL, *v = NULL, *c = NULL;
    CHECK_OK(tfc_tensor_arange(0, 24, 1, TFC_DTYPE_F64, &t));
    CHECK_OK(tfc_view(NULL, t, d, 3, &x));
    CHECK(tfc_tensor_shares_storage(x, t));
    int32_t perm[3] = {2, 0, 1};
    CHECK_OK(tfc_permute(NULL, x, perm, 3, &p)); /* [4,2,3] */
    double *vp = t_vals(p);
    CHECK(vp[0] == 0 && vp[1] == 4 && vp[3] == 12 && vp[6] == 1);
    free(vp);
    CHECK_OK(tfc_slice(NULL, x, 2, 1, 4, 2, &s)); /* [2,3,2]: columns 1,3 */
    double *vs = t_vals(s);
    CHECK(tfc_tensor_dim(s, 2) == 2 && vs[0] == 1 && vs[1] == 3 && vs[2] == 5);
    free(vs);
    CHECK_ERR(tfc_view(NULL, p, (int64_t[]){24}, 1, &v), TFC_ERR_SHAPE, "tfc_reshape");
    CHECK_OK(tfc_reshape(NULL, p, (int64_t[]){-1}, 1, &v)); /* copies */
    CHECK(!tfc_tensor_shares_storage(v, t));
    tfc_tensor_release(v);
    CHECK_OK(tfc_view(NULL, x, (int64_t[]){6, -1}, 2, &v));
    CHECK(tfc_tensor_dim(v, 1) == 4 && tfc_tensor_shares_storage(v, t));
    tfc_tensor_release(v);
    tfc_tensor *one = NULL;
    CHECK_OK(tfc_tensor_ones((int64_t[]){3, 1}, 2, TFC_DTYPE_F64, &one));
    CHECK_OK(tfc_expand(NULL, one, (int64_t[]){2, 3, 5}, 3, &e));
    int64_t st[3];
    CHECK_OK(tfc_tensor_strides(e, st, 3));
    CHECK(st[0] == 0 && st[2] == 0);
    CHECK_ERR(tfc_expand(NULL, one, (int64_t[]){4, 5}, 2, &v), TFC_ERR_SHAPE, "[3,1]");
    CHECK_OK(tfc_contiguous(NULL, p, &c));
    CHECK(tfc_tensor_is_contiguous(c) && !tfc_tensor_shares_storage(c, p));
    tfc_tensor *u = NULL, *sq = NULL, *fl = NULL;
    CHECK_OK(tfc_unsqueeze(NULL, x, 1, &u));
    CHECK(tfc_tensor_ndim(u) == 4 && tfc_tensor_dim(u, 1) == 1);
    CHECK_OK(tfc_squeeze(NULL, u, 1, &sq));
    CHECK(tfc_tensor_ndim(sq) == 3);
    CHECK_ERR(tfc_squeeze(NULL, x, 0, &v), TFC_ERR_SHAPE, "not 1");
    CHECK_OK(tfc_flatten(NULL, x, 1, 2, &fl));
    CHECK(tfc_tensor_ndim(fl) == 2 && tfc_tensor_dim(fl, 1) == 12 && tfc_tensor_shares_storage(fl, t));
    tfc_tensor *n1 = NULL;
    CHECK_ERR(tfc_narrow(NULL, x, 1, 2, 5, &n1), TFC_ERR_INVALID_ARG, "out of range");
    CHECK_ERR(tfc_permute(NULL, x, (int32_t[]){0, 0, 1}, 3, &v), TFC_ERR_INVALID_ARG, "repeats");
    tfc_tensor *objs[] = {x, t, p, s, e, one, c, u, sq, fl};
    for (size_t i = 0; i < sizeof objs / sizeof objs[0]; i++) tfc_tensor_release(objs[i]);
}

TEST(where_masked_fill_concat_split_topk_dropout) {
    double xs[6] = {1, -2, 3, -4, 5, -6};
    uint8_t ms[6] = {1, 0, 1, 0, 0, 1};
    int64_t d[2] = {2, 3};
    tfc_tensor *x = t_from(xs, d, 2), *m = NULL, *r = NULL;
    CHECK_OK(tfc_tensor_from_data(ms, d, 2, TFC_DTYPE_BOOL, &m));
    CHECK_OK(tfc_masked_fill(NULL, x, m, 9.0, &r));
    double *v = t_vals(r);
    for (int i = 0; i < 6; i++) CHECK(v[i] == (ms[i] ? 9.0 : xs[i]));
    free(v);
    tfc_tensor_release(r);
    CHECK_ERR(tfc_masked_fill(NULL, x, x, 0, &r), TFC_ERR_DTYPE, "bool or u8");
    tfc_tensor *parts[2] = {x, x};
    CHECK_OK(tfc_concat(NULL, (const tfc_tensor *const *)parts, 2, 1, &r));
    CHECK(tfc_tensor_dim(r, 1) == 6);
    v = t_vals(r);
    CHECK(v[3] == 1 && v[6] == -4 && v[11] == -6);
    free(v);
    tfc_tensor *sp[2] = {0};
    CHECK_OK(tfc_split(NULL, r, (int64_t[]){4, 2}, 2, 1, sp));
    CHECK(tfc_tensor_dim(sp[0], 1) == 4 && tfc_tensor_dim(sp[1], 1) == 2 && tfc_tensor_shares_storage(sp[0], r));
    CHECK_ERR(tfc_split(NULL, r, (int64_t[]){4, 1}, 2, 1, sp), TFC_ERR_SHAPE, "sum to 5");
    tfc_tensor_release(sp[0]);
    tfc_tensor_release(sp[1]);
    tfc_tensor_release(r);
    tfc_tensor *vals = NULL, *idx = NULL;
    CHECK_OK(tfc_topk(NULL, x, 2, 1, 1, &vals, &idx));
    double *tv = t_vals(vals);
    int64_t ti[4];
    CHECK_OK(tfc_tensor_copy_to_host(idx, ti, sizeof ti));
    CHECK(tv[0] == 3 && tv[1] == 1 && ti[0] == 2 && ti[1] == 0 && tv[2] == 5 && tv[3] == -4);
    free(tv);
    tfc_tensor_release(vals);
    tfc_tensor_release(idx);
    CHECK_ERR(tfc_topk(NULL, x, 4, 1, 1, &vals, &idx), TFC_ERR_INVALID_ARG, "k is 4");
    /* dropout: same seed same mask; kept values scaled by 1/(1-p); rate near p */
    int64_t big[1] = {100000};
    tfc_tensor *ones = NULL, *d1 = NULL, *d2 = NULL;
    CHECK_OK(tfc_tensor_ones(big, 1, TFC_DTYPE_F64, &ones));
    CHECK_OK(tfc_dropout(NULL, ones, 0.25, 11, 0, &d1));
    CHECK_OK(tfc_dropout(NULL, ones, 0.25, 11, 0, &d2));
    double *a1 = t_vals(d1), *a2 = t_vals(d2);
    int zeros = 0, same = 1;
    for (int i = 0; i < 100000; i++) {
        zeros += a1[i] == 0;
        same &= a1[i] == a2[i];
        if (a1[i] != 0) CHECK_CLOSE(a1[i], 1 / 0.75, 1e-15);
    }
    CHECK(same);
    CHECK(fabs(zeros / 100000.0 - 0.25) < 0.01);
    free(a1);
    free(a2);
    CHECK_ERR(tfc_dropout(NULL, ones, 1.0, 0, 0, &r), TFC_ERR_INVALID_ARG, "[0, 1)");
    tfc_tensor_release(ones);
    tfc_tensor_release(d1);
    tfc_tensor_release(d2);
    tfc_tensor_release(x);
    tfc_tensor_release(m);
}

TEST(f32_ops_and_bad_inputs) {
    int64_t d[2] = {2, 2};
    tfc_tensor *a = NULL, *i32 = NULL, *r = NULL;
    CHECK_OK(tfc_tensor_full(d, 2, TFC_DTYPE_F32, 1.5, &a));
    CHECK_OK(tfc_tensor_ones(d, 2, TFC_DTYPE_I32, &i32));
    CHECK_OK(tfc_mul(NULL, a, a, &r));
    double *v = t_vals(r);
    CHECK(tfc_tensor_dtype(r) == TFC_DTYPE_F32 && v[0] == 2.25 && v[3] == 2.25);
    free(v);
    tfc_tensor_release(r);
    CHECK_ERR(tfc_add(NULL, a, i32, &r), TFC_ERR_DTYPE, "f32 or f64");
    CHECK_ERR(tfc_add(NULL, NULL, a, &r), TFC_ERR_INVALID_ARG, "a is NULL");
    CHECK_ERR(tfc_exp(NULL, a, NULL), TFC_ERR_INVALID_ARG, "out is NULL");
    int64_t d3[1] = {3};
    tfc_tensor *b = NULL;
    CHECK_OK(tfc_tensor_ones(d3, 1, TFC_DTYPE_F32, &b));
    CHECK_ERR(tfc_add(NULL, a, b, &r), TFC_ERR_SHAPE, "a is [2,2], b is [3]");
    tfc_tensor_release(a);
    tfc_tensor_release(b);
    tfc_tensor_release(i32);
}
