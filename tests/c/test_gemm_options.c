/*
 * What the ops layer asks of the gemm entry, checked without a GPU:
 *   - tfc_set/get_float32_matmul_precision: default, round trip, bad values
 *     refused with the setting unchanged;
 *   - the CPU ignores it (f32 products bit for bit the same under "high");
 *   - the CPU's gemm refuses an epilogue it does not fuse (no silent drop);
 *   - through a stand-in "cuda" table (the CPU's entries, standin_backend.h)
 *     that records each gemm problem: tfc_linear with a bias is one GEMM
 *     with the bias epilogue where the table advertises it (gemm_epilogues)
 *     and bias rows + GEMM where not, both against loops written here;
 *     allow_tf32 reaches every f32 GEMM of matmul and linear (forward and
 *     backward) under "high", none under "highest", never an f64 one.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tfc_test.h"

#include "cpu/kernels.h"
#include "standin_backend.h"
#include "tensor/tensor_impl.h"

TFC_TEST_MAIN

/* ---- the recording stand-in ---- */

static int g_gemms, g_fused, g_tf32, g_bias_rows;

/* The CPU's gemm, plus the bias epilogue done here by a loop over C's rows. */
static tfc_status rec_gemm(const tfc_gemm_problem *p) {
    g_gemms++;
    g_tf32 += p->allow_tf32 != 0;
    tfc_gemm_problem q = *p;
    q.epilogue = TFC_GEMM_EPI_NONE, q.bias = NULL;
    tfc_status s = tfc_cpu_backend.gemm(&q);
    if (s != TFC_OK || p->epilogue != TFC_GEMM_EPI_BIAS) return s;
    g_fused++;
    if (p->batch != 1) return TFC_ERR_INTERNAL; /* only what the tests send */
    for (int64_t m = 0; m < p->M; m++)
        for (int64_t n = 0; n < p->N; n++)
            if (p->dtype == TFC_DTYPE_F64)
                ((double *)p->c)[m * p->ldc + n] += ((const double *)p->bias)[n];
            else
                ((float *)p->c)[m * p->ldc + n] += ((const float *)p->bias)[n];
    return TFC_OK;
}

static tfc_status rec_bias_rows(const tfc_bias_problem *p) {
    g_bias_rows++;
    return tfc_cpu_backend.bias_rows(p);
}

static void recorder_install(uint32_t epilogues) {
    tfc_backend *sb = standin_install();
    sb->gemm = rec_gemm;
    sb->bias_rows = rec_bias_rows;
    sb->caps.gemm_epilogues = epilogues;
    g_gemms = g_fused = g_tf32 = g_bias_rows = 0;
}

/* ---- helpers ---- */

static tfc_tensor *rand_f(const int64_t *d, int nd, tfc_dtype dt, uint64_t seed) {
    tfc_tensor *t = NULL;
    CHECK_OK(tfc_tensor_uniform(d, nd, dt, -1, 1, seed, 0, &t));
    return t;
}

static tfc_tensor *to_cuda(const tfc_tensor *t) {
    tfc_tensor *r = NULL;
    CHECK_OK(tfc_tensor_to_device(t, TFC_DEVICE_CUDA, 0, &r));
    return r;
}

/* Host f64 copy of any float tensor (stand-in memory is host memory). */
static double *vals(const tfc_tensor *t) {
    int64_t n = tfc_tensor_numel(t);
    double *v = calloc((size_t)(n ? n : 1), sizeof(double));
    tfc_tensor *c = NULL, *h = NULL;
    CHECK_OK(tfc_tensor_to_device(t, TFC_DEVICE_CPU, 0, &h));
    CHECK_OK(tfc_cast(NULL, h, TFC_DTYPE_F64, &c));
    CHECK_OK(tfc_tensor_copy_to_host(c, v, sizeof(double) * (size_t)n));
    tfc_tensor_release(c);
    tfc_tensor_release(h);
    return v;
}

/* ---- the switch ---- */

TEST(precision_switch_default_round_trip_and_bad_values) {
    CHECK(tfc_get_float32_matmul_precision() == TFC_MATMUL_PRECISION_HIGHEST);
    CHECK_OK(tfc_set_float32_matmul_precision(TFC_MATMUL_PRECISION_HIGH));
    CHECK(tfc_get_float32_matmul_precision() == TFC_MATMUL_PRECISION_HIGH);
    CHECK_OK(tfc_set_float32_matmul_precision(TFC_MATMUL_PRECISION_MEDIUM));
    CHECK(tfc_get_float32_matmul_precision() == TFC_MATMUL_PRECISION_MEDIUM);
    CHECK_ERR(tfc_set_float32_matmul_precision((tfc_matmul_precision)3), TFC_ERR_INVALID_ARG,
              "tfc_set_float32_matmul_precision: precision is 3");
    CHECK_ERR(tfc_set_float32_matmul_precision((tfc_matmul_precision)-1), TFC_ERR_INVALID_ARG,
              "tfc_set_float32_matmul_precision: precision is -1");
    CHECK(tfc_get_float32_matmul_precision() == TFC_MATMUL_PRECISION_MEDIUM); /* unchanged */
    CHECK_OK(tfc_set_float32_matmul_precision(TFC_MATMUL_PRECISION_HIGHEST));
    CHECK(tfc_get_float32_matmul_precision() == TFC_MATMUL_PRECISION_HIGHEST);
}

TEST(the_cpu_ignores_the_precision) {
    const int64_t da[2] = {33, 65}, db[2] = {65, 17};
    tfc_tensor *a = rand_f(da, 2, TFC_DTYPE_F32, 1), *b = rand_f(db, 2, TFC_DTYPE_F32, 2), *c0 = NULL, *c1 = NULL;
    CHECK_OK(tfc_matmul(NULL, a, b, &c0));
    CHECK_OK(tfc_set_float32_matmul_precision(TFC_MATMUL_PRECISION_HIGH));
    CHECK_OK(tfc_matmul(NULL, a, b, &c1));
    CHECK_OK(tfc_set_float32_matmul_precision(TFC_MATMUL_PRECISION_HIGHEST));
    CHECK(memcmp(tfc_data(c0), tfc_data(c1), 33 * 17 * sizeof(float)) == 0);
    /* and it is the product (f64 loops), to f32 accuracy: TF32 rounding would miss by ~1e-3 */
    double *va = vals(a), *vb = vals(b), *vc = vals(c1), worst = 0;
    for (int i = 0; i < 33; i++)
        for (int j = 0; j < 17; j++) {
            double r = 0;
            for (int k = 0; k < 65; k++) r += va[i * 65 + k] * vb[k * 17 + j];
            worst = fmax(worst, fabs(vc[i * 17 + j] - r));
        }
    CHECK(worst < 1e-5);
    free(va), free(vb), free(vc);
    tfc_tensor_release(a), tfc_tensor_release(b), tfc_tensor_release(c0), tfc_tensor_release(c1);
}

TEST(the_cpu_gemm_refuses_an_epilogue_it_does_not_fuse) {
    CHECK(tfc_cpu_backend.caps.gemm_epilogues == 0);
    CHECK(tfc_cpu_backend.native_stream == NULL); /* ABI 9: no streams on the CPU */
    float a[4] = {1, 2, 3, 4}, b[4] = {1, 0, 0, 1}, bias[2] = {5, 6}, c[4] = {-1, -1, -1, -1};
    tfc_gemm_problem p = {.dtype = TFC_DTYPE_F32,
                          .M = 2,
                          .N = 2,
                          .K = 2,
                          .batch = 1,
                          .alpha = 1,
                          .a = a,
                          .b = b,
                          .c = c,
                          .lda = 2,
                          .ldb = 2,
                          .ldc = 2,
                          .bias = bias,
                          .epilogue = TFC_GEMM_EPI_BIAS};
    CHECK_ERR(tfc_cpu_backend.gemm(&p), TFC_ERR_UNSUPPORTED, "epilogue 1 is not fused on the CPU");
    for (int i = 0; i < 4; i++) CHECK(c[i] == -1.0f); /* nothing written */
}

/* ---- the ops layer through the recording stand-in ---- */

/* out = x·w + b for x [2,3,K], w [K,5], b [5] on the stand-in "cuda", vs f64 loops of the same f32 inputs. */
static void linear_case(int64_t K, double *worst) {
    const int64_t dx[3] = {2, 3, K}, dw[2] = {K, 5}, db[1] = {5};
    tfc_tensor *xh = rand_f(dx, 3, TFC_DTYPE_F32, 3), *wh = rand_f(dw, 2, TFC_DTYPE_F32, 4),
               *bh = rand_f(db, 1, TFC_DTYPE_F32, 5);
    tfc_tensor *x = to_cuda(xh), *w = to_cuda(wh), *b = to_cuda(bh), *y = NULL;
    CHECK_OK(tfc_linear(NULL, x, w, b, &y));
    double *vx = vals(xh), *vw = vals(wh), *vb = vals(bh), *vy = y ? vals(y) : NULL;
    *worst = vy ? 0 : INFINITY;
    for (int m = 0; m < 6 && vy; m++)
        for (int n = 0; n < 5; n++) {
            double r = vb[n];
            for (int k = 0; k < K; k++) r += vx[m * K + k] * vw[k * 5 + n];
            *worst = fmax(*worst, fabs(vy[m * 5 + n] - r));
        }
    free(vx), free(vw), free(vb), free(vy);
    tfc_tensor *all[] = {xh, wh, bh, x, w, b, y};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tfc_tensor_release(all[i]);
}

TEST(linear_is_one_gemm_with_the_bias_epilogue_where_the_backend_fuses_it) {
    double worst;
    recorder_install(1u << TFC_GEMM_EPI_BIAS);
    linear_case(4, &worst);
    CHECK(g_gemms == 1 && g_fused == 1 && g_bias_rows == 0);
    CHECK(worst < 1e-5);
    /* K = 0: no product to fuse into; the bias rows are the whole answer */
    g_gemms = g_fused = g_bias_rows = 0;
    linear_case(0, &worst);
    CHECK(g_fused == 0 && g_bias_rows == 1);
    CHECK(worst == 0);
    standin_remove();

    recorder_install(0); /* a backend without the epilogue: bias rows, then the GEMM onto them */
    linear_case(4, &worst);
    CHECK(g_gemms == 1 && g_fused == 0 && g_bias_rows == 1);
    CHECK(worst < 1e-5);
    standin_remove();
}

/* Forward and backward of linear (with bias) and matmul on the stand-in; returns the gemm calls made. */
static int train_step(tfc_dtype dt) {
    const int64_t dx[2] = {4, 3}, dw[2] = {3, 5}, db[1] = {5}, dm[2] = {5, 2};
    tfc_tensor *xh = rand_f(dx, 2, dt, 6), *wh = rand_f(dw, 2, dt, 7), *bh = rand_f(db, 1, dt, 8),
               *mh = rand_f(dm, 2, dt, 9);
    tfc_tensor *x = to_cuda(xh), *w = to_cuda(wh), *b = to_cuda(bh), *m = to_cuda(mh), *y = NULL, *z = NULL,
               *loss = NULL;
    tfc_tensor *ps[] = {x, w, b, m};
    for (int i = 0; i < 4; i++) CHECK_OK(tfc_tensor_set_requires_grad(ps[i], 1));
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    int before = g_gemms;
    CHECK_OK(tfc_linear(g, x, w, b, &y));
    CHECK_OK(tfc_matmul(g, y, m, &z));
    CHECK_OK(tfc_sum(g, z, NULL, 0, 0, &loss));
    CHECK_OK(tfc_graph_backward(g, loss, NULL));
    int calls = g_gemms - before;
    tfc_graph_release(g);
    tfc_tensor *all[] = {xh, wh, bh, mh, x, w, b, m, y, z, loss};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tfc_tensor_release(all[i]);
    return calls;
}

TEST(allow_tf32_reaches_every_f32_gemm_under_high_and_none_otherwise) {
    recorder_install(1u << TFC_GEMM_EPI_BIAS);
    int calls = train_step(TFC_DTYPE_F32);
    CHECK(calls == 6); /* linear fwd + dx + dw, matmul fwd + da + db */
    CHECK(g_tf32 == 0);
    CHECK_OK(tfc_set_float32_matmul_precision(TFC_MATMUL_PRECISION_HIGH));
    g_tf32 = 0;
    calls = train_step(TFC_DTYPE_F32);
    CHECK(calls == 6 && g_tf32 == 6);
    CHECK_OK(tfc_set_float32_matmul_precision(TFC_MATMUL_PRECISION_MEDIUM));
    g_tf32 = 0;
    calls = train_step(TFC_DTYPE_F32);
    CHECK(calls == 6 && g_tf32 == 6);
    g_tf32 = 0;
    calls = train_step(TFC_DTYPE_F64); /* TF32 is about f32 inputs only */
    CHECK(calls == 6 && g_tf32 == 0);
    CHECK_OK(tfc_set_float32_matmul_precision(TFC_MATMUL_PRECISION_HIGHEST));
    standin_remove();
}
