/*
 * Every kernel of the CUDA module against straightforward CPU loops
 * written here, on random inputs, in f32 and bf16. Inputs are rounded to
 * the storage type before both sides see them, so the tolerances below
 * only cover accumulation order (f32) and output rounding (bf16: 8
 * mantissa bits, relative step 2^-8 = 0.0039).
 *
 * Without a CUDA device (or without the module) the program prints
 * "no CUDA device: <reason>" and exits 77, which meson counts as skipped.
 */
#include <math.h>

#include "core/rng.h"
#include "cuda_check.h"

#define main tfc_test_main_
TFC_TEST_MAIN
#undef main

const tfc_cuda_api *A;

static const int DTYPES[2] = {TFC_DTYPE_F32, TFC_DTYPE_BF16};
/* Elementwise results: f32 within float rounding, bf16 within one output rounding. */
static double tol_elem(int dt) { return dt == TFC_DTYPE_BF16 ? 8e-3 : 2e-6; }
/* Results of sums over up to a few thousand terms. */
static double tol_sum(int dt) { return dt == TFC_DTYPE_BF16 ? 1e-2 : 2e-5; }

TEST(memory_roundtrip) {
    size_t n = 1000;
    float *h = rand_host(n, -1, 1, TFC_DTYPE_F32, 1);
    void *d = up(h, n, TFC_DTYPE_F32), *d2 = dev(n, TFC_DTYPE_F32);
    CHECK_CU(A->memcpy(0, d2, d, n * 4, 2));
    float *g = down(d2, n, TFC_DTYPE_F32);
    CHECK(memcmp(g, h, n * 4) == 0);
    CHECK_CU(A->memset0(0, d2, n * 4));
    free(g);
    g = down(d2, n, TFC_DTYPE_F32);
    int zeros = 1;
    for (size_t i = 0; i < n; i++) zeros &= g[i] == 0.0f;
    CHECK(zeros);
    CHECK_CU(A->synchronize(0));
    CHECK_CU_ERR(A->memcpy(0, d2, d, 4, 7), TFC_ERR_INVALID_ARG, "kind 7");
    CHECK_CU_ERR(A->alloc(999, 16, &d), TFC_ERR_DEVICE, "device 999");
    free(g), free(h), dfree(d), dfree(d2);
}

TEST(fill_and_cast) {
    size_t n = 777;
    float *h = rand_host(n, -3, 3, TFC_DTYPE_F32, 2), *want = malloc(n * 4);
    void *f = up(h, n, TFC_DTYPE_F32), *b = dev(n, TFC_DTYPE_BF16), *f2 = dev(n, TFC_DTYPE_F32);
    CHECK_CU(A->cast(0, TFC_DTYPE_F32, f, TFC_DTYPE_BF16, b, n));
    CHECK_CU(A->cast(0, TFC_DTYPE_BF16, b, TFC_DTYPE_F32, f2, n));
    float *g = down(f2, n, TFC_DTYPE_F32);
    for (size_t i = 0; i < n; i++) want[i] = round_dt(h[i], TFC_DTYPE_BF16);
    CHECK_ALL(g, want, n, 0.0, "cast f32->bf16->f32 (round to nearest even)");
    free(g);
    CHECK_CU(A->fill(0, TFC_DTYPE_BF16, b, n, 1.5));
    g = down(b, n, TFC_DTYPE_BF16);
    for (size_t i = 0; i < n; i++) want[i] = 1.5f;
    CHECK_ALL(g, want, n, 0.0, "fill");
    CHECK_CU_ERR(A->cast(0, TFC_DTYPE_I32, f, TFC_DTYPE_F32, f2, n), TFC_ERR_DTYPE, "i32");
    free(g), free(h), free(want), dfree(f), dfree(b), dfree(f2);
}

static double ref_binary(int op, double a, double b) {
    switch (op) {
    case TFC_CUDA_ADD: return a + b;
    case TFC_CUDA_SUB: return a - b;
    case TFC_CUDA_MUL: return a * b;
    case TFC_CUDA_DIV: return a / b;
    case TFC_CUDA_MAX: return a > b ? a : b;
    case TFC_CUDA_MIN: return a < b ? a : b;
    case TFC_CUDA_POW: return pow(a, b);
    case TFC_CUDA_RSUB: return b - a;
    case TFC_CUDA_RDIV: return b / a;
    default: return a == b;
    }
}

TEST(binary_ops_same_shape_scalar_and_broadcast) {
    for (int di = 0; di < 2; di++) {
        int dt = DTYPES[di];
        size_t n = 3 * 4 * 5;
        /* Positive inputs so pow and the divisions are well defined. */
        float *a = rand_host(n, 0.5f, 2, dt, 3), *b = rand_host(n, 0.5f, 2, dt, 4), *want = malloc(n * 4);
        void *da = up(a, n, dt), *db = up(b, n, dt), *dout = dev(n, dt);
        for (int op = 0; op < TFC_CUDA_BINARY_COUNT; op++) {
            CHECK_CU(A->binary(0, op, dt, da, db, dout, n));
            float *g = down(dout, n, dt);
            for (size_t i = 0; i < n; i++) want[i] = (float)ref_binary(op, a[i], b[i]);
            CHECK_ALL(g, want, n, tol_elem(dt), "binary");
            free(g);
            CHECK_CU(A->binary_scalar(0, op, dt, da, 1.25, dout, n));
            g = down(dout, n, dt);
            for (size_t i = 0; i < n; i++) want[i] = (float)ref_binary(op, a[i], 1.25);
            CHECK_ALL(g, want, n, tol_elem(dt), "binary_scalar");
            free(g);
        }
        /* [3,1,5] (a's first 15 values) OP [1,4,5] (b's first 20) -> [3,4,5]. */
        tfc_cuda_strided L = {3, {3, 4, 5}, {5, 0, 1}, {0, 5, 1}};
        CHECK_CU(A->binary_strided(0, TFC_CUDA_SUB, dt, da, db, dout, &L));
        float *g = down(dout, n, dt);
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++)
                for (int k = 0; k < 5; k++) want[(i * 4 + j) * 5 + k] = a[i * 5 + k] - b[j * 5 + k];
        CHECK_ALL(g, want, n, tol_elem(dt), "binary_strided broadcast");
        free(g);
        CHECK_CU_ERR(A->binary(0, 42, dt, da, db, dout, n), TFC_ERR_INVALID_ARG, "op 42");
        CHECK_CU_ERR(A->binary(0, TFC_CUDA_ADD, dt, NULL, db, dout, n), TFC_ERR_INVALID_ARG, "a is NULL");
        /* EQ where it matters: the row max broadcast against its row. */
        tfc_cuda_strided E = {2, {3, 20}, {20, 1}, {1, 0}};
        void *dmax = dev(3, dt);
        CHECK_CU(A->reduce(0, TFC_CUDA_RMAX, dt, da, dmax, 3, 20, 1));
        CHECK_CU(A->binary_strided(0, TFC_CUDA_EQ, dt, da, dmax, dout, &E));
        g = down(dout, n, dt);
        for (int r = 0; r < 3; r++) {
            float m = -INFINITY;
            for (int k = 0; k < 20; k++) m = fmaxf(m, a[r * 20 + k]);
            for (int k = 0; k < 20; k++) want[r * 20 + k] = a[r * 20 + k] == m;
        }
        CHECK_ALL(g, want, n, 0.0, "EQ mask of the row max");
        free(g), dfree(dmax);
        free(a), free(b), free(want), dfree(da), dfree(db), dfree(dout);
    }
}

TEST(copy_strided_transpose_and_expand) {
    /* f32 [4,5] transposed to [5,4]. */
    float *x = rand_host(20, -1, 1, TFC_DTYPE_F32, 11), want[20];
    void *dx = up(x, 20, TFC_DTYPE_F32), *dy = dev(20, TFC_DTYPE_F32);
    tfc_cuda_strided T = {2, {5, 4}, {1, 5}, {0, 0}};
    CHECK_CU(A->copy_strided(0, TFC_DTYPE_F32, dx, dy, &T));
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 4; j++) want[i * 4 + j] = x[j * 5 + i];
    float *g = down(dy, 20, TFC_DTYPE_F32);
    CHECK_ALL(g, want, 20, 0.0, "transpose copy");
    free(g), free(x), dfree(dx), dfree(dy);
    /* i64 [3] expanded to [2,3] (stride 0), 8-byte elements moved intact. */
    int64_t ids[3] = {-1, (int64_t)1 << 40, 7}, got[6];
    void *di = dev(6, TFC_DTYPE_F32), *de = dev(12, TFC_DTYPE_F32); /* 3 and 6 int64 */
    CHECK_CU(A->memcpy(0, di, ids, sizeof ids, 0));
    tfc_cuda_strided X = {2, {2, 3}, {0, 1}, {0, 0}};
    CHECK_CU(A->copy_strided(0, TFC_DTYPE_I64, di, de, &X));
    CHECK_CU(A->memcpy(0, got, de, sizeof got, 1));
    for (int i = 0; i < 6; i++) CHECK(got[i] == ids[i % 3]);
    dfree(di), dfree(de);
}

static double ref_unary(int op, double x, double *grad) {
    double k = sqrt(2.0 / M_PI), u = k * (x + 0.044715 * x * x * x), t = tanh(u), s = 1.0 / (1.0 + exp(-x));
    switch (op) {
    case TFC_CUDA_NEG: *grad = -1; return -x;
    case TFC_CUDA_EXP: *grad = exp(x); return exp(x);
    case TFC_CUDA_LOG: *grad = 1 / x; return log(x);
    case TFC_CUDA_TANH: *grad = 1 - tanh(x) * tanh(x); return tanh(x);
    case TFC_CUDA_SIGMOID: *grad = s * (1 - s); return s;
    case TFC_CUDA_RELU: *grad = x > 0; return x > 0 ? x : 0;
    case TFC_CUDA_GELU:
        *grad = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x);
        return 0.5 * x * (1 + t);
    case TFC_CUDA_SQRT: *grad = 0.5 / sqrt(x); return sqrt(x);
    default: *grad = 2 * x; return x * x;
    }
}

TEST(unary_ops_and_backward) {
    for (int di = 0; di < 2; di++) {
        int dt = DTYPES[di];
        size_t n = 1025;
        float *x = rand_host(n, 0.1f, 3, dt, 5), *dy = rand_host(n, -1, 1, dt, 6), *want = malloc(n * 4);
        for (size_t i = 0; i < n; i += 2) x[i] = -x[i] * 0.5f; /* negatives too, except for log/sqrt */
        float *xp = rand_host(n, 0.1f, 3, dt, 7);
        void *dx = up(x, n, dt), *dxp = up(xp, n, dt), *ddy = up(dy, n, dt), *dout = dev(n, dt);
        for (int op = 0; op < TFC_CUDA_UNARY_COUNT; op++) {
            int positive = op == TFC_CUDA_LOG || op == TFC_CUDA_SQRT;
            const float *in = positive ? xp : x;
            void *din = positive ? dxp : dx;
            double gr;
            CHECK_CU(A->unary(0, op, dt, din, dout, n));
            float *g = down(dout, n, dt);
            for (size_t i = 0; i < n; i++) want[i] = (float)ref_unary(op, in[i], &gr);
            CHECK_ALL(g, want, n, tol_elem(dt) * 2, "unary");
            free(g);
            CHECK_CU(A->unary_backward(0, op, dt, ddy, din, dout, n, 0));
            g = down(dout, n, dt);
            for (size_t i = 0; i < n; i++) {
                ref_unary(op, in[i], &gr);
                want[i] = (float)(dy[i] * gr);
            }
            CHECK_ALL(g, want, n, tol_elem(dt) * 2, "unary_backward");
            /* Accumulate: dx += dy f'(x) doubles it. */
            CHECK_CU(A->unary_backward(0, op, dt, ddy, din, dout, n, TFC_GRAD_ACCUMULATE));
            free(g);
            g = down(dout, n, dt);
            for (size_t i = 0; i < n; i++) want[i] *= 2;
            CHECK_ALL(g, want, n, tol_elem(dt) * 3, "unary_backward accumulate");
            free(g);
        }
        free(x), free(xp), free(dy), free(want), dfree(dx), dfree(dxp), dfree(ddy), dfree(dout);
    }
}

TEST(reductions_last_and_middle_dim) {
    const size_t shapes[3][3] = {{7, 1000, 1}, {3, 50, 17}, {1, 4099, 1}};
    for (int di = 0; di < 2; di++)
        for (int si = 0; si < 3; si++)
            for (int op = 0; op < TFC_CUDA_REDUCE_COUNT; op++) {
                int dt = DTYPES[di];
                size_t O = shapes[si][0], N = shapes[si][1], I = shapes[si][2];
                float *x = rand_host(O * N * I, -1, 1, dt, 8 + si), *want = malloc(O * I * 4);
                void *dx = up(x, O * N * I, dt), *dout = dev(O * I, dt);
                CHECK_CU(A->reduce(0, op, dt, dx, dout, O, N, I));
                for (size_t o = 0; o < O; o++)
                    for (size_t j = 0; j < I; j++) {
                        double s = op == TFC_CUDA_RMAX ? -INFINITY : 0;
                        for (size_t k = 0; k < N; k++) {
                            double v = x[(o * N + k) * I + j];
                            s = op == TFC_CUDA_RMAX ? (v > s ? v : s) : s + v;
                        }
                        want[o * I + j] = (float)(op == TFC_CUDA_MEAN ? s / N : s);
                    }
                float *g = down(dout, O * I, dt);
                CHECK_ALL(g, want, O * I, tol_sum(dt), "reduce");
                free(g), free(x), free(want), dfree(dx), dfree(dout);
            }
}

TEST(softmax_and_log_softmax_forward_backward) {
    const size_t shapes[2][3] = {{9, 1000, 1}, {2, 33, 7}};
    for (int di = 0; di < 2; di++)
        for (int si = 0; si < 2; si++)
            for (int lg = 0; lg < 2; lg++) {
                int dt = DTYPES[di];
                size_t O = shapes[si][0], N = shapes[si][1], I = shapes[si][2], n = O * N * I;
                float *x = rand_host(n, -4, 4, dt, 20), *dy = rand_host(n, -1, 1, dt, 21);
                float *y = malloc(n * 4), *dx = malloc(n * 4);
                for (size_t o = 0; o < O; o++)
                    for (size_t j = 0; j < I; j++) {
                        double m = -INFINITY, s = 0, dot = 0;
                        for (size_t k = 0; k < N; k++) m = fmax(m, x[(o * N + k) * I + j]);
                        for (size_t k = 0; k < N; k++) s += exp(x[(o * N + k) * I + j] - m);
                        for (size_t k = 0; k < N; k++) {
                            size_t p = (o * N + k) * I + j;
                            double p_ = exp(x[p] - m) / s;
                            y[p] = (float)(lg ? x[p] - m - log(s) : p_);
                            dot += lg ? dy[p] : dy[p] * p_;
                        }
                        for (size_t k = 0; k < N; k++) {
                            size_t p = (o * N + k) * I + j;
                            double p_ = exp(x[p] - m) / s;
                            dx[p] = (float)(lg ? dy[p] - p_ * dot : p_ * (dy[p] - dot));
                        }
                    }
                void *d_x = up(x, n, dt), *d_y = dev(n, dt), *d_dy = up(dy, n, dt), *d_dx = dev(n, dt);
                CHECK_CU(A->softmax_forward(0, dt, lg, d_x, d_y, O, N, I));
                float *g = down(d_y, n, dt);
                CHECK_ALL(g, y, n, tol_sum(dt), "softmax forward");
                /* The backward takes the forward output as stored on the device. */
                free(g);
                g = down(d_y, n, dt);
                for (size_t o = 0; o < O; o++)
                    for (size_t j = 0; j < I; j++) {
                        double dot = 0;
                        for (size_t k = 0; k < N; k++) {
                            size_t p = (o * N + k) * I + j;
                            dot += lg ? dy[p] : (double)dy[p] * g[p];
                        }
                        for (size_t k = 0; k < N; k++) {
                            size_t p = (o * N + k) * I + j;
                            dx[p] = (float)(lg ? dy[p] - exp(g[p]) * dot : g[p] * (dy[p] - dot));
                        }
                    }
                CHECK_CU(A->softmax_backward(0, dt, lg, d_dy, d_y, d_dx, O, N, I, 0));
                free(g);
                g = down(d_dx, n, dt);
                CHECK_ALL(g, dx, n, tol_sum(dt), "softmax backward");
                free(g), free(x), free(dy), free(y), free(dx);
                dfree(d_x), dfree(d_y), dfree(d_dy), dfree(d_dx);
            }
}

TEST(layernorm_forward_backward) {
    for (int di = 0; di < 2; di++) {
        int dt = DTYPES[di];
        size_t R = 37, C = 200, n = R * C;
        float *x = rand_host(n, -2, 3, dt, 30), *w = rand_host(C, 0.5f, 1.5f, dt, 31), *b = rand_host(C, -1, 1, dt, 32);
        float *dy = rand_host(n, -1, 1, dt, 33);
        float *y = malloc(n * 4), *mean = malloc(R * 4), *rstd = malloc(R * 4), *dx = malloc(n * 4);
        double *dw = calloc(C, 8), *db = calloc(C, 8);
        for (size_t r = 0; r < R; r++) {
            double m = 0, v = 0, sg = 0, sgx = 0;
            for (size_t c = 0; c < C; c++) m += x[r * C + c];
            m /= C;
            for (size_t c = 0; c < C; c++) v += (x[r * C + c] - m) * (x[r * C + c] - m);
            double rs = 1.0 / sqrt(v / C + 1e-5);
            mean[r] = (float)m, rstd[r] = (float)rs;
            for (size_t c = 0; c < C; c++) {
                double xh = (x[r * C + c] - m) * rs, g = (double)dy[r * C + c] * w[c];
                y[r * C + c] = (float)(xh * w[c] + b[c]);
                sg += g, sgx += g * xh;
                dw[c] += dy[r * C + c] * xh, db[c] += dy[r * C + c];
            }
            for (size_t c = 0; c < C; c++) {
                double xh = (x[r * C + c] - m) * rs, g = (double)dy[r * C + c] * w[c];
                dx[r * C + c] = (float)(rs * (g - sg / C - xh * sgx / C));
            }
        }
        void *d_x = up(x, n, dt), *d_w = up(w, C, dt), *d_b = up(b, C, dt), *d_y = dev(n, dt), *d_dy = up(dy, n, dt);
        void *d_dx = dev(n, dt), *d_dw = dev(C, dt), *d_db = dev(C, dt);
        float *d_mean = dev(R, TFC_DTYPE_F32), *d_rstd = dev(R, TFC_DTYPE_F32);
        CHECK_CU(A->layernorm_forward(0, dt, d_x, d_w, d_b, 1e-5f, d_y, d_mean, d_rstd, R, C));
        float *g = down(d_y, n, dt);
        CHECK_ALL(g, y, n, tol_sum(dt), "layernorm y");
        free(g);
        g = down(d_mean, R, TFC_DTYPE_F32);
        CHECK_ALL(g, mean, R, 1e-5, "layernorm mean");
        free(g);
        g = down(d_rstd, R, TFC_DTYPE_F32);
        CHECK_ALL(g, rstd, R, 1e-5, "layernorm rstd");
        free(g);
        CHECK_CU(A->layernorm_backward(0, dt, d_dy, d_x, d_w, d_mean, d_rstd, d_dx, d_dw, d_db, R, C, 0));
        float *fw = malloc(C * 4), *fb = malloc(C * 4);
        for (size_t c = 0; c < C; c++) fw[c] = (float)dw[c], fb[c] = (float)db[c];
        g = down(d_dx, n, dt);
        CHECK_ALL(g, dx, n, tol_sum(dt) * 2, "layernorm dx");
        free(g);
        g = down(d_dw, C, dt);
        CHECK_ALL(g, fw, C, tol_sum(dt), "layernorm dw");
        free(g);
        g = down(d_db, C, dt);
        CHECK_ALL(g, fb, C, tol_sum(dt), "layernorm db");
        free(g);
        /* Accumulating db a second time doubles it; dx and dw may be NULL. */
        CHECK_CU(A->layernorm_backward(0, dt, d_dy, d_x, d_w, d_mean, d_rstd, NULL, NULL, d_db, R, C,
                                       TFC_GRAD_ACCUMULATE));
        for (size_t c = 0; c < C; c++) fb[c] *= 2;
        g = down(d_db, C, dt);
        CHECK_ALL(g, fb, C, tol_sum(dt) * 2, "layernorm db accumulated");
        free(g), free(fw), free(fb);
        free(x), free(w), free(b), free(dy), free(y), free(mean), free(rstd), free(dx), free(dw), free(db);
        dfree(d_x), dfree(d_w), dfree(d_b), dfree(d_y), dfree(d_dy), dfree(d_dx), dfree(d_dw), dfree(d_db);
        dfree(d_mean), dfree(d_rstd);
    }
}

TEST(cross_entropy_forward_backward_with_ignore_index) {
    for (int di = 0; di < 2; di++)
        for (int it = 0; it < 2; it++) {
            int dt = DTYPES[di], tdt = it ? TFC_DTYPE_I64 : TFC_DTYPE_I32;
            size_t N = 13, C = 3001;
            float *x = rand_host(N * C, -5, 5, dt, 40);
            int64_t t64[13];
            int32_t t32[13];
            uint64_t s = 99;
            for (size_t r = 0; r < N; r++) t64[r] = (int64_t)(rng_next(&s) % C), t32[r] = (int32_t)t64[r];
            t64[3] = t32[3] = -100, t64[8] = t32[8] = -100; /* ignored rows */
            double loss = 0, nvalid = 0;
            float *lse = malloc(N * 4), *dx = malloc(N * C * 4);
            for (size_t r = 0; r < N; r++) {
                double m = -INFINITY, sum = 0;
                for (size_t c = 0; c < C; c++) m = fmax(m, x[r * C + c]);
                for (size_t c = 0; c < C; c++) sum += exp(x[r * C + c] - m);
                lse[r] = (float)(m + log(sum));
                if (t64[r] != -100) loss += lse[r] - x[r * C + t64[r]], nvalid++;
            }
            loss /= nvalid;
            float dloss = 0.5f;
            for (size_t r = 0; r < N; r++)
                for (size_t c = 0; c < C; c++)
                    dx[r * C + c] = t64[r] == -100 ? 0.0f
                                                   : (float)(dloss / nvalid *
                                                             (exp(x[r * C + c] - (double)lse[r]) - (c == (size_t)t64[r])));
            void *d_x = up(x, N * C, dt), *d_t = dev(N, TFC_DTYPE_I64), *d_dx = dev(N * C, dt);
            float *d_loss = dev(1, TFC_DTYPE_F32), *d_lse = dev(N, TFC_DTYPE_F32), *d_dloss = up(&dloss, 1, TFC_DTYPE_F32);
            CHECK_CU(A->memcpy(0, d_t, it ? (void *)t64 : (void *)t32, N * (it ? 8 : 4), 0));
            CHECK_CU(A->cross_entropy_forward(0, dt, d_x, tdt, d_t, -100, N, C, d_loss, d_lse));
            float *g = down(d_loss, 1, TFC_DTYPE_F32), fl = (float)loss;
            CHECK_ALL(g, &fl, 1, 1e-5, "cross-entropy loss");
            free(g);
            g = down(d_lse, N, TFC_DTYPE_F32);
            CHECK_ALL(g, lse, N, 1e-5, "cross-entropy lse");
            free(g);
            CHECK_CU(A->cross_entropy_backward(0, dt, d_dloss, d_x, tdt, d_t, -100, d_lse, d_dx, N, C, 0));
            g = down(d_dx, N * C, dt);
            CHECK_ALL(g, dx, N * C, dt == TFC_DTYPE_BF16 ? 1e-3 : 1e-6, "cross-entropy dlogits");
            free(g);
            CHECK_CU(A->cross_entropy_backward(0, dt, d_dloss, d_x, tdt, d_t, -100, d_lse, d_dx, N, C,
                                               TFC_GRAD_ACCUMULATE));
            for (size_t i = 0; i < N * C; i++) dx[i] *= 2;
            g = down(d_dx, N * C, dt);
            CHECK_ALL(g, dx, N * C, dt == TFC_DTYPE_BF16 ? 2e-3 : 2e-6, "cross-entropy dlogits accumulated");
            free(g);
            /* A target outside [0, C) is an error naming the row. */
            t64[5] = t32[5] = (int32_t)C;
            CHECK_CU(A->memcpy(0, d_t, it ? (void *)t64 : (void *)t32, N * (it ? 8 : 4), 0));
            CHECK_CU_ERR(A->cross_entropy_forward(0, dt, d_x, tdt, d_t, -100, N, C, d_loss, d_lse),
                         TFC_ERR_INVALID_ARG, "targets[5] is 3001");
            CHECK_CU_ERR(A->cross_entropy_forward(0, dt, d_x, TFC_DTYPE_F32, d_t, -100, N, C, d_loss, d_lse),
                         TFC_ERR_DTYPE, "index dtype f32");
            free(x), free(lse), free(dx);
            dfree(d_x), dfree(d_t), dfree(d_dx), dfree(d_loss), dfree(d_lse), dfree(d_dloss);
        }
}

TEST(embedding_forward_backward_deterministic) {
    for (int di = 0; di < 2; di++) {
        int dt = DTYPES[di];
        size_t V = 50, C = 70, N = 300;
        float *w = rand_host(V * C, -1, 1, dt, 50), *dout = rand_host(N * C, -1, 1, dt, 51);
        int64_t ids[300];
        uint64_t s = 5;
        for (size_t r = 0; r < N; r++) ids[r] = (int64_t)(rng_next(&s) % 7) * 3; /* many repeats, unused rows */
        float *out = malloc(N * C * 4), *dw = calloc(V * C, 4);
        for (size_t r = 0; r < N; r++)
            for (size_t c = 0; c < C; c++) out[r * C + c] = w[ids[r] * C + c];
        /* Sequential f32 sums in increasing r: exactly what the kernel does. */
        for (size_t r = 0; r < N; r++)
            for (size_t c = 0; c < C; c++) dw[ids[r] * C + c] += dout[r * C + c];
        void *d_w = up(w, V * C, dt), *d_ids = dev(N, TFC_DTYPE_I64), *d_out = dev(N * C, dt), *d_do = up(dout, N * C, dt);
        void *d_dw = dev(V * C, dt);
        CHECK_CU(A->memcpy(0, d_ids, ids, N * 8, 0));
        CHECK_CU(A->embedding_forward(0, dt, d_w, TFC_DTYPE_I64, d_ids, d_out, N, V, C));
        float *g = down(d_out, N * C, dt);
        CHECK_ALL(g, out, N * C, 0.0, "embedding forward");
        free(g);
        CHECK_CU(A->fill(0, dt, d_dw, V * C, 7.0)); /* overwritten, including unused rows */
        CHECK_CU(A->embedding_backward(0, dt, d_do, TFC_DTYPE_I64, d_ids, d_dw, N, V, C, 0));
        g = down(d_dw, V * C, dt);
        float *g2;
        /* Same f32 additions in the same order, then (bf16) one rounding: bitwise equal. */
        for (size_t i = 0; i < V * C; i++) dw[i] = round_dt(dw[i], dt);
        CHECK_ALL(g, dw, V * C, 0.0, "embedding backward (same order as a CPU loop)");
        CHECK_CU(A->embedding_backward(0, dt, d_do, TFC_DTYPE_I64, d_ids, d_dw, N, V, C, 0));
        g2 = down(d_dw, V * C, dt);
        CHECK(memcmp(g, g2, V * C * 4) == 0); /* deterministic run to run */
        free(g), free(g2);
        ids[17] = -1;
        CHECK_CU(A->memcpy(0, d_ids, ids, N * 8, 0));
        CHECK_CU_ERR(A->embedding_forward(0, dt, d_w, TFC_DTYPE_I64, d_ids, d_out, N, V, C), TFC_ERR_INVALID_ARG,
                     "ids[17] is -1");
        CHECK_CU_ERR(A->embedding_backward(0, dt, d_do, TFC_DTYPE_I64, d_ids, d_dw, N, V, C, 0), TFC_ERR_INVALID_ARG,
                     "ids[17] is -1");
        free(w), free(dout), free(out), free(dw);
        dfree(d_w), dfree(d_ids), dfree(d_out), dfree(d_do), dfree(d_dw);
    }
}

static double gelu_ref(double x) {
    return 0.5 * x * (1 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

TEST(matmul_transposes_batches_epilogues) {
    for (int di = 0; di < 2; di++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int epi = 0; epi < 4; epi++) {
                    int dt = DTYPES[di];
                    int64_t M = 33, N = 40, K = 72, batch = 3;
                    float *a = rand_host(batch * M * K, -1, 1, dt, 60), *b = rand_host(K * N, -1, 1, dt, 61);
                    float *c0 = rand_host(batch * M * N, -1, 1, dt, 62), *bias = rand_host(N, -1, 1, dt, 63);
                    float *want = malloc(batch * M * N * 4);
                    float alpha = 0.75f, beta = epi == 0 ? 0.5f : 0.0f;
                    for (int64_t p = 0; p < batch; p++)
                        for (int64_t i = 0; i < M; i++)
                            for (int64_t j = 0; j < N; j++) {
                                double s = 0;
                                for (int64_t k = 0; k < K; k++) {
                                    double av = ta ? a[p * M * K + k * M + i] : a[p * M * K + i * K + k];
                                    double bv = tb ? b[j * K + k] : b[k * N + j];
                                    s += av * bv;
                                }
                                s = alpha * s + beta * c0[(p * M + i) * N + j];
                                if (epi & 1) s += bias[j];
                                if (epi & 2) s = gelu_ref(s);
                                want[(p * M + i) * N + j] = (float)s;
                            }
                    void *d_a = up(a, batch * M * K, dt), *d_b = up(b, K * N, dt), *d_c = up(c0, batch * M * N, dt);
                    void *d_bias = up(bias, N, dt);
                    tfc_cuda_matmul_desc d = {sizeof d, dt, M, N, K, batch, ta, tb, d_a, d_b, d_c, d_bias,
                                              M * K, 0 /* b shared */, M * N, alpha, beta, epi};
                    CHECK_CU(A->matmul(0, &d));
                    float *g = down(d_c, batch * M * N, dt);
                    /* cuBLASLt's GELU epilogue may use its own tanh approximation: looser in f32. */
                    CHECK_ALL(g, want, batch * M * N, dt == TFC_DTYPE_BF16 ? 1.5e-2 : (epi & 2) ? 1e-4 : 1e-5,
                              "matmul");
                    free(g), free(a), free(b), free(c0), free(bias), free(want);
                    dfree(d_a), dfree(d_b), dfree(d_c), dfree(d_bias);
                }
    tfc_cuda_matmul_desc bad = {sizeof bad, TFC_DTYPE_I32, 1, 1, 1, 1, 0, 0, NULL, NULL, NULL, NULL, 0, 0, 0, 1, 0, 0};
    CHECK_CU_ERR(A->matmul(0, &bad), TFC_ERR_DTYPE, "i32");
    bad.dtype = TFC_DTYPE_F32, bad.struct_size = 4;
    CHECK_CU_ERR(A->matmul(0, &bad), TFC_ERR_VERSION, "struct_size");
}

/* Naive attention in double: out, lse and (with dout) dq, dk, dv. */
static void attention_ref(const float *q, const float *k, const float *v, const float *dout, size_t BH, size_t T,
                          size_t S, size_t D, size_t Dv, double scale, int causal, float *out, float *lse, float *dq,
                          float *dk, float *dv) {
    double *p = malloc(S * 8), *dp = malloc(S * 8);
    memset(dq, 0, BH * T * D * 4), memset(dk, 0, BH * S * D * 4), memset(dv, 0, BH * S * Dv * 4);
    for (size_t bh = 0; bh < BH; bh++)
        for (size_t i = 0; i < T; i++) {
            const float *qi = q + (bh * T + i) * D;
            double m = -INFINITY, sum = 0;
            for (size_t j = 0; j < S; j++) {
                int vis = !causal || (long)j <= (long)i + (long)S - (long)T;
                double s = 0;
                for (size_t d = 0; d < D; d++) s += (double)qi[d] * k[(bh * S + j) * D + d];
                p[j] = vis ? s * scale : -INFINITY;
                m = fmax(m, p[j]);
            }
            for (size_t j = 0; j < S; j++) sum += m == -INFINITY ? 0 : exp(p[j] - m);
            lse[bh * T + i] = sum > 0 ? (float)(m + log(sum)) : -INFINITY;
            for (size_t j = 0; j < S; j++) p[j] = sum > 0 ? exp(p[j] - m) / sum : 0;
            double delta = 0;
            for (size_t d = 0; d < Dv; d++) {
                double o = 0;
                for (size_t j = 0; j < S; j++) o += p[j] * v[(bh * S + j) * Dv + d];
                out[(bh * T + i) * Dv + d] = (float)o;
                delta += o * dout[(bh * T + i) * Dv + d];
            }
            for (size_t j = 0; j < S; j++) {
                double g = 0;
                for (size_t d = 0; d < Dv; d++) g += (double)dout[(bh * T + i) * Dv + d] * v[(bh * S + j) * Dv + d];
                dp[j] = p[j] * (g - delta);
            }
            for (size_t j = 0; j < S; j++) {
                for (size_t d = 0; d < D; d++) {
                    dq[(bh * T + i) * D + d] += (float)(scale * dp[j] * k[(bh * S + j) * D + d]);
                    dk[(bh * S + j) * D + d] += (float)(scale * dp[j] * qi[d]);
                }
                for (size_t d = 0; d < Dv; d++) dv[(bh * S + j) * Dv + d] += (float)(p[j] * dout[(bh * T + i) * Dv + d]);
            }
        }
    free(p), free(dp);
}

TEST(attention_forward_backward) {
    /* (T, S, D, Dv, causal): square, T < S and T > S (bottom-right mask), D over 64, odd sizes. */
    const size_t cfg[6][5] = {{70, 70, 64, 64, 1}, {70, 70, 64, 64, 0}, {33, 100, 32, 48, 1},
                              {100, 40, 16, 16, 1}, {65, 65, 80, 96, 1}, {1, 129, 128, 128, 0}};
    for (int di = 0; di < 2; di++)
        for (int ci = 0; ci < 6; ci++) {
            int dt = DTYPES[di];
            size_t BH = 3, T = cfg[ci][0], S = cfg[ci][1], D = cfg[ci][2], Dv = cfg[ci][3];
            int causal = (int)cfg[ci][4];
            double scale = 1.0 / sqrt((double)D);
            float *q = rand_host(BH * T * D, -1, 1, dt, 70), *k = rand_host(BH * S * D, -1, 1, dt, 71);
            float *v = rand_host(BH * S * Dv, -1, 1, dt, 72), *dout = rand_host(BH * T * Dv, -1, 1, dt, 73);
            float *out = malloc(BH * T * Dv * 4), *lse = malloc(BH * T * 4), *dq = malloc(BH * T * D * 4);
            float *dk = malloc(BH * S * D * 4), *dv = malloc(BH * S * Dv * 4);
            attention_ref(q, k, v, dout, BH, T, S, D, Dv, scale, causal, out, lse, dq, dk, dv);
            void *d_q = up(q, BH * T * D, dt), *d_k = up(k, BH * S * D, dt), *d_v = up(v, BH * S * Dv, dt);
            void *d_out = dev(BH * T * Dv, dt), *d_do = up(dout, BH * T * Dv, dt);
            void *d_dq = dev(BH * T * D, dt), *d_dk = dev(BH * S * D, dt), *d_dv = dev(BH * S * Dv, dt);
            float *d_lse = dev(BH * T, TFC_DTYPE_F32);
            CHECK_CU(A->attention_forward(0, dt, d_q, d_k, d_v, d_out, d_lse, 1, BH, T, S, D, Dv, (float)scale, causal));
            double tol = dt == TFC_DTYPE_BF16 ? 1.5e-2 : 2e-5;
            float *g = down(d_out, BH * T * Dv, dt);
            CHECK_ALL(g, out, BH * T * Dv, tol, "attention out");
            free(g);
            g = down(d_lse, BH * T, TFC_DTYPE_F32);
            CHECK_ALL(g, lse, BH * T, 2e-5, "attention lse");
            free(g);
            CHECK_CU(A->attention_backward(0, dt, d_do, d_q, d_k, d_v, d_out, d_lse, d_dq, d_dk, d_dv, 1, BH, T, S, D,
                                           Dv, (float)scale, causal, 0));
            /* bf16 gradients: the saved out is rounded, so Delta carries bf16 error into dS. */
            double gtol = dt == TFC_DTYPE_BF16 ? 3e-2 : 5e-5;
            g = down(d_dq, BH * T * D, dt);
            CHECK_ALL(g, dq, BH * T * D, gtol, "attention dq");
            free(g);
            g = down(d_dk, BH * S * D, dt);
            CHECK_ALL(g, dk, BH * S * D, gtol, "attention dk");
            free(g);
            g = down(d_dv, BH * S * Dv, dt);
            CHECK_ALL(g, dv, BH * S * Dv, gtol, "attention dv");
            free(g);
            /* Accumulating (dk only asked for) doubles dk. */
            CHECK_CU(A->attention_backward(0, dt, d_do, d_q, d_k, d_v, d_out, d_lse, NULL, d_dk, NULL, 1, BH, T, S, D,
                                           Dv, (float)scale, causal, TFC_GRAD_ACCUMULATE));
            for (size_t i = 0; i < BH * S * D; i++) dk[i] *= 2;
            g = down(d_dk, BH * S * D, dt);
            CHECK_ALL(g, dk, BH * S * D, 2 * gtol, "attention dk accumulated");
            free(g);
            free(q), free(k), free(v), free(dout), free(out), free(lse), free(dq), free(dk), free(dv);
            dfree(d_q), dfree(d_k), dfree(d_v), dfree(d_out), dfree(d_do), dfree(d_dq), dfree(d_dk), dfree(d_dv);
            dfree(d_lse);
        }
    CHECK_CU_ERR(A->attention_forward(0, TFC_DTYPE_F32, NULL, NULL, NULL, NULL, NULL, 1, 1, 4, 4, 256, 64, 1.0f, 1),
                 TFC_ERR_UNSUPPORTED, "D 256");
}

TEST(grad_norm_and_adamw) {
    for (int di = 0; di < 2; di++) {
        int gdt = DTYPES[di];
        enum { NT = 4 };
        size_t numel[NT] = {5000, 1, 0, 12345};
        float *hp[NT], *hg[NT], *hm[NT], *hv[NT];
        void *dp[NT], *dg[NT], *dm[NT], *dvv[NT], *d16[NT];
        float wd[NT] = {0.1f, 0.0f, 0.1f, 0.01f};
        double sumsq = 0;
        for (int t = 0; t < NT; t++) {
            hp[t] = rand_host(numel[t], -1, 1, TFC_DTYPE_F32, 80 + t);
            hg[t] = rand_host(numel[t], -1, 1, gdt, 90 + t);
            hm[t] = rand_host(numel[t], -0.1f, 0.1f, TFC_DTYPE_F32, 100 + t);
            hv[t] = rand_host(numel[t], 0, 0.01f, TFC_DTYPE_F32, 110 + t);
            dp[t] = up(hp[t], numel[t], TFC_DTYPE_F32), dg[t] = up(hg[t], numel[t], gdt);
            dm[t] = up(hm[t], numel[t], TFC_DTYPE_F32), dvv[t] = up(hv[t], numel[t], TFC_DTYPE_F32);
            d16[t] = dev(numel[t], TFC_DTYPE_BF16);
            for (size_t i = 0; i < numel[t]; i++) sumsq += (double)hg[t][i] * hg[t][i];
        }
        float *d_norm = dev(1, TFC_DTYPE_F32), *d_clip = dev(1, TFC_DTYPE_F32);
        CHECK_CU(A->grad_norm(0, gdt, (const void *const *)dg, numel, NT, 10.0f, d_norm, d_clip));
        float *gn = down(d_norm, 1, TFC_DTYPE_F32), *gc = down(d_clip, 1, TFC_DTYPE_F32);
        float wn = (float)sqrt(sumsq), wc = (float)fmin(1.0, 10.0 / (sqrt(sumsq) + 1e-6));
        CHECK_ALL(gn, &wn, 1, 1e-5, "grad norm");
        CHECK_ALL(gc, &wc, 1, 1e-5, "clip scale");
        tfc_cuda_adamw_desc d = {sizeof d, NT, gdt, (float *const *)dp, (const void *const *)dg, (float *const *)dm,
                                 (float *const *)dvv, (void *const *)d16, numel, wd, d_clip,
                                 1e-3f, 0.9f, 0.95f, 1e-8f, 3};
        CHECK_CU(A->adamw(0, &d));
        double bc1 = 1 - pow(0.9, 3), bc2 = 1 - pow(0.95, 3);
        for (int t = 0; t < NT; t++) {
            size_t n = numel[t];
            float *wp = malloc((n + 1) * 4), *wm = malloc((n + 1) * 4), *wv = malloc((n + 1) * 4), *w16 = malloc((n + 1) * 4);
            for (size_t i = 0; i < n; i++) {
                double g = (double)hg[t][i] * wc, p = hp[t][i] * (1 - 1e-3 * wd[t]);
                double m = 0.9 * hm[t][i] + 0.1 * g, v = 0.95 * hv[t][i] + 0.05 * g * g;
                p -= 1e-3 * (m / bc1) / (sqrt(v / bc2) + 1e-8);
                wp[i] = (float)p, wm[i] = (float)m, wv[i] = (float)v, w16[i] = round_dt((float)p, TFC_DTYPE_BF16);
            }
            float *g = down(dp[t], n, TFC_DTYPE_F32);
            CHECK_ALL(g, wp, n, 1e-6, "adamw params");
            free(g);
            g = down(dm[t], n, TFC_DTYPE_F32);
            CHECK_ALL(g, wm, n, 1e-6, "adamw m");
            free(g);
            g = down(dvv[t], n, TFC_DTYPE_F32);
            CHECK_ALL(g, wv, n, 1e-6, "adamw v");
            free(g);
            g = down(d16[t], n, TFC_DTYPE_BF16);
            CHECK_ALL(g, w16, n, 8e-3, "adamw bf16 copy");
            free(g), free(wp), free(wm), free(wv), free(w16);
            free(hp[t]), free(hg[t]), free(hm[t]), free(hv[t]);
            dfree(dp[t]), dfree(dg[t]), dfree(dm[t]), dfree(dvv[t]), dfree(d16[t]);
        }
        free(gn), free(gc), dfree(d_norm), dfree(d_clip);
        d.step = 0;
        CHECK_CU_ERR(A->adamw(0, &d), TFC_ERR_INVALID_ARG, "step is 0");
    }
}

TEST(random_streams_match_cpu) {
    size_t n = 10003;
    uint64_t seed = 0x1234567890abcdefull, offset = 77;
    float *wu = malloc(n * 4), *wn = malloc(n * 4), *wd = malloc(n * 4), *x = rand_host(n, -1, 1, TFC_DTYPE_F32, 9);
    for (size_t i = 0; i < n; i++) {
        wu[i] = (float)(-2.0 + 5.0 * tfc_rng_uniform(seed, offset, i));
        wn[i] = (float)(0.5 + 0.02 * tfc_rng_normal(seed, offset, i));
        wd[i] = tfc_rng_uniform(seed, offset, i) >= 0.25 ? x[i] * (1.0f / 0.75f) : 0.0f;
    }
    void *d = dev(n, TFC_DTYPE_F32), *dx = up(x, n, TFC_DTYPE_F32);
    CHECK_CU(A->random_uniform(0, TFC_DTYPE_F32, d, n, seed, offset, -2.0, 3.0));
    float *g = down(d, n, TFC_DTYPE_F32);
    CHECK_ALL(g, wu, n, 1e-7, "uniform stream");
    free(g);
    CHECK_CU(A->random_normal(0, TFC_DTYPE_F32, d, n, seed, offset, 0.5, 0.02));
    g = down(d, n, TFC_DTYPE_F32);
    CHECK_ALL(g, wn, n, 1e-6, "normal stream");
    free(g);
    CHECK_CU(A->dropout(0, TFC_DTYPE_F32, dx, d, n, 0.25f, seed, offset));
    g = down(d, n, TFC_DTYPE_F32);
    CHECK_ALL(g, wd, n, 1e-7, "dropout mask and scale");
    free(g);
    CHECK_CU_ERR(A->dropout(0, TFC_DTYPE_F32, dx, d, n, 1.5f, seed, offset), TFC_ERR_INVALID_ARG, "p is 1.5");
    free(wu), free(wn), free(wd), free(x), dfree(d), dfree(dx);
}

int main(int argc, char **argv) {
    A = tfc_cuda();
    if (!A) {
        const char *why = tfc_last_error();
        const char *tail = strstr(why, "no CUDA device");
        if (tail) {
            printf("%s\n", tail);
            return 77;
        }
        /* The module was built but does not load: that is a failure, not a skip. */
        printf("FAIL: %s\n", why);
        return 1;
    }
    printf("CUDA: %s\n", A->describe());
    return tfc_test_main_(argc, argv);
}
