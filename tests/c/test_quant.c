/*
 * Quantized weights (include/tfcore/quant.h): the packed layouts decoded
 * here byte by byte from the header's description (an independent
 * reference), round-trip error bounds, exact values on the grid, the
 * [in, out] layout flag, tfc_qlinear against an f64 dequantize-then-matmul
 * on odd shapes for every instruction family this CPU has (portable, AVX2,
 * AVX-512), thread-count independence, the tensor round trip, and every bad
 * input with the public function's name in the message.
 */
#include <float.h>

#include "cpu/quant.h"
#include "standin_backend.h"
#include "tfc_test_util.h"

TFC_TEST_MAIN

static tfc_tensor *f32_rand(const int64_t *dims, int32_t nd, double lo, double hi, uint64_t seed) {
    tfc_tensor *t = NULL;
    if (tfc_tensor_uniform(dims, nd, TFC_DTYPE_F32, lo, hi, seed, 0, &t) != TFC_OK) abort();
    return t;
}

static tfc_tensor *f32_from(const float *v, const int64_t *dims, int32_t nd) {
    tfc_tensor *t = NULL;
    if (tfc_tensor_from_data(v, dims, nd, TFC_DTYPE_F32, &t) != TFC_OK) abort();
    return t;
}

static int64_t dim(const tfc_tensor *t, int32_t i) {
    int64_t d[8] = {0};
    if (tfc_tensor_shape(t, d, 8) != TFC_OK) abort();
    return d[i];
}

static const float *fdata(const tfc_tensor *t) { return (const float *)tfc_tensor_data(t); }

/*
 * W [N, K] (f64 of the f32 products) and the integer codes, decoded from q's
 * arrays as quant.h lays them out: int8 byte n·K + k, scale[n]; int4 byte
 * n·K/2 + k/2, low nibble for even k, value nibble − 8, scale[n, k/G].
 */
static void decode(const tfc_qweight *q, double *w, int *codes) {
    tfc_tensor *p = NULL, *s = NULL;
    if (tfc_qweight_tensors(q, &p, &s) != TFC_OK) abort();
    const int64_t N = tfc_qweight_out_features(q), K = tfc_qweight_in_features(q);
    const int32_t G = tfc_qweight_group_size(q);
    const uint8_t *b = tfc_tensor_data(p);
    const float *sc = fdata(s);
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++) {
            int c;
            float scale;
            if (tfc_qweight_format(q) == TFC_QFORMAT_INT8) {
                c = (int8_t)b[n * K + k];
                scale = sc[n];
            } else {
                uint8_t byte = b[n * (K / 2) + k / 2];
                c = (k % 2 == 0 ? byte & 15 : byte >> 4) - 8;
                scale = sc[n * (K / G) + k / G];
            }
            codes[n * K + k] = c;
            w[n * K + k] = (double)((float)c * scale);
        }
    tfc_tensor_release(p);
    tfc_tensor_release(s);
}

/* The round trip of one random weight [N, K]: scales, code range, error bound, dequantize = decode. */
static void roundtrip_case(tfc_qformat fmt, int32_t G, int64_t N, int64_t K, uint64_t seed) {
    tfc_tensor *w = f32_rand((int64_t[]){N, K}, 2, -2, 2, seed);
    const float *wv = fdata(w);
    tfc_qweight *q = NULL;
    CHECK_OK(tfc_quantize(w, fmt, G, 0, &q));
    if (!q) {
        tfc_tensor_release(w);
        return;
    }
    CHECK(tfc_qweight_format(q) == fmt && tfc_qweight_out_features(q) == N && tfc_qweight_in_features(q) == K);
    const int64_t gs = fmt == TFC_QFORMAT_INT8 ? K : G, ng = K / gs;
    CHECK(tfc_qweight_nbytes(q) == (fmt == TFC_QFORMAT_INT8 ? N * K : N * K / 2) + 4 * N * ng);
    double *ref = malloc(sizeof(double) * (size_t)(N * K));
    int *codes = malloc(sizeof(int) * (size_t)(N * K));
    decode(q, ref, codes);
    tfc_tensor *scales = NULL, *deq = NULL;
    CHECK_OK(tfc_qweight_tensors(q, NULL, &scales));
    CHECK_OK(tfc_qweight_dequantize(q, 0, &deq));
    const float qmax = fmt == TFC_QFORMAT_INT8 ? 127.0f : 7.0f;
    int bad_scale = 0, bad_code = 0, bad_err = 0, bad_deq = 0;
    for (int64_t n = 0; n < N; n++)
        for (int64_t g = 0; g < ng; g++) {
            float amax = 0;
            for (int64_t k = g * gs; k < (g + 1) * gs; k++) amax = fmaxf(amax, fabsf(wv[n * K + k]));
            const float s = fdata(scales)[n * ng + g];
            bad_scale += s != amax / qmax;
            for (int64_t k = g * gs; k < (g + 1) * gs; k++) {
                const int64_t e = n * K + k;
                bad_code += codes[e] < -qmax || codes[e] > qmax;
                bad_err += fabs(wv[e] - ref[e]) > 0.5 * s * (1 + 1e-6) + 1e-7 * fabs(wv[e]);
                bad_deq += (double)fdata(deq)[e] != ref[e];
            }
        }
    CHECK(bad_scale == 0);
    CHECK(bad_code == 0);
    CHECK(bad_err == 0);
    CHECK(bad_deq == 0);
    if (bad_scale + bad_code + bad_err + bad_deq)
        fprintf(stderr, "  roundtrip fmt %d G %d [%lld,%lld]: %d scales, %d codes, %d errors, %d dequantized\n",
                (int)fmt, G, (long long)N, (long long)K, bad_scale, bad_code, bad_err, bad_deq);
    free(ref);
    free(codes);
    tfc_tensor_release(scales);
    tfc_tensor_release(deq);
    tfc_qweight_release(q);
    tfc_tensor_release(w);
}

TEST(int8_round_trip_is_within_half_a_step) {
    const int64_t Ns[] = {1, 3, 17}, Ks[] = {1, 5, 33, 100, 130};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 5; j++) roundtrip_case(TFC_QFORMAT_INT8, 0, Ns[i], Ks[j], 10 + (uint64_t)(i * 5 + j));
}

TEST(int4_round_trip_is_within_half_a_step) {
    const int64_t Ns[] = {1, 3, 17}, Ks[] = {32, 64, 96, 160};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++) {
            roundtrip_case(TFC_QFORMAT_INT4, 32, Ns[i], Ks[j], 40 + (uint64_t)(i * 4 + j));
            if (Ks[j] % 64 == 0) roundtrip_case(TFC_QFORMAT_INT4, 64, Ns[i], Ks[j], 70 + (uint64_t)(i * 4 + j));
        }
}

/* Values already on the grid (codes with the group's extreme at ±qmax, scales exact in f32) come back exactly. */
static void on_grid_case(tfc_qformat fmt, int32_t G, int64_t N, int64_t K) {
    const int qmax = fmt == TFC_QFORMAT_INT8 ? 127 : 7;
    const int64_t gs = fmt == TFC_QFORMAT_INT8 ? K : G;
    float *v = malloc(sizeof(float) * (size_t)(N * K));
    int *want = malloc(sizeof(int) * (size_t)(N * K));
    uint32_t r = 12345;
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++) {
            r = r * 1664525u + 1013904223u;
            int c = (int)(r >> 8) % (2 * qmax + 1) - qmax;
            if (k % gs == 0) c = (n + k) % 2 ? qmax : -qmax; /* each group reaches its scale */
            const float s = (float)(n + 1 + k / gs) / 64.0f;
            want[n * K + k] = c;
            v[n * K + k] = (float)c * s;
        }
    tfc_tensor *w = f32_from(v, (int64_t[]){N, K}, 2), *deq = NULL;
    tfc_qweight *q = NULL;
    CHECK_OK(tfc_quantize(w, fmt, G, 0, &q));
    CHECK_OK(tfc_qweight_dequantize(q, 0, &deq));
    double *ref = malloc(sizeof(double) * (size_t)(N * K));
    int *codes = malloc(sizeof(int) * (size_t)(N * K));
    decode(q, ref, codes);
    int exact = 1;
    for (int64_t e = 0; e < N * K; e++) exact &= fdata(deq)[e] == v[e] && codes[e] == want[e];
    CHECK(exact);
    free(v), free(want), free(ref), free(codes);
    tfc_tensor_release(w);
    tfc_tensor_release(deq);
    tfc_qweight_release(q);
}

TEST(values_on_the_grid_are_exact) {
    on_grid_case(TFC_QFORMAT_INT8, 0, 3, 33);
    on_grid_case(TFC_QFORMAT_INT8, 0, 17, 130);
    on_grid_case(TFC_QFORMAT_INT4, 32, 3, 96);
    on_grid_case(TFC_QFORMAT_INT4, 64, 17, 128);
}

TEST(all_zero_rows_get_scale_zero) {
    tfc_tensor *w = NULL, *deq = NULL, *s = NULL;
    CHECK_OK(tfc_tensor_zeros((int64_t[]){2, 64}, 2, TFC_DTYPE_F32, &w));
    tfc_qweight *q = NULL;
    CHECK_OK(tfc_quantize(w, TFC_QFORMAT_INT4, 32, 0, &q));
    CHECK_OK(tfc_qweight_dequantize(q, 0, &deq));
    CHECK_OK(tfc_qweight_tensors(q, NULL, &s));
    int zero = 1;
    for (int64_t e = 0; e < 128; e++) zero &= fdata(deq)[e] == 0;
    for (int64_t e = 0; e < 4; e++) zero &= fdata(s)[e] == 0;
    CHECK(zero);
    tfc_tensor_release(w), tfc_tensor_release(deq), tfc_tensor_release(s);
    tfc_qweight_release(q);
}

/* [in, out] (Conv1D) with TFC_QUANT_IN_OUT: the same codes as its transpose [out, in]; dequantize gives it back. */
TEST(in_out_layout_quantizes_the_transpose) {
    const tfc_qformat fmts[] = {TFC_QFORMAT_INT8, TFC_QFORMAT_INT4};
    for (int f = 0; f < 2; f++) {
        tfc_tensor *wio = f32_rand((int64_t[]){64, 5}, 2, -1, 1, 3), *wt = NULL, *woi = NULL;
        CHECK_OK(tfc_transpose(NULL, wio, 0, 1, &wt));
        CHECK_OK(tfc_contiguous(NULL, wt, &woi));
        tfc_qweight *a = NULL, *b = NULL;
        const int32_t G = fmts[f] == TFC_QFORMAT_INT4 ? 32 : 0;
        CHECK_OK(tfc_quantize(wio, fmts[f], G, TFC_QUANT_IN_OUT, &a));
        CHECK_OK(tfc_quantize(woi, fmts[f], G, 0, &b));
        CHECK(tfc_qweight_out_features(a) == 5 && tfc_qweight_in_features(a) == 64);
        tfc_tensor *pa = NULL, *pb = NULL, *sa = NULL, *sb = NULL, *da = NULL, *db = NULL;
        CHECK_OK(tfc_qweight_tensors(a, &pa, &sa));
        CHECK_OK(tfc_qweight_tensors(b, &pb, &sb));
        CHECK(!memcmp(tfc_tensor_data(pa), tfc_tensor_data(pb), (size_t)tfc_tensor_numel(pa)));
        CHECK(!memcmp(tfc_tensor_data(sa), tfc_tensor_data(sb), 4 * (size_t)tfc_tensor_numel(sa)));
        CHECK_OK(tfc_qweight_dequantize(a, TFC_QUANT_IN_OUT, &da));
        CHECK_OK(tfc_qweight_dequantize(b, 0, &db));
        CHECK(dim(da, 0) == 64 && dim(da, 1) == 5);
        int same = 1;
        for (int64_t k = 0; k < 64; k++)
            for (int64_t n = 0; n < 5; n++) same &= fdata(da)[k * 5 + n] == fdata(db)[n * 64 + k];
        CHECK(same);
        tfc_tensor *all[] = {wio, wt, woi, pa, pb, sa, sb, da, db};
        for (int i = 0; i < 9; i++) tfc_tensor_release(all[i]);
        tfc_qweight_release(a);
        tfc_qweight_release(b);
    }
}

/*
 * y = x · Wᵀ + b against f64 loops over the decoded W; the bound is f32
 * summation error, far below what a wrong code, scale or element gives.
 */
static int check_linear(const tfc_qweight *q, const tfc_tensor *x, const tfc_tensor *b, const tfc_tensor *y,
                        int64_t M) {
    const int64_t N = tfc_qweight_out_features(q), K = tfc_qweight_in_features(q);
    double *w = malloc(sizeof(double) * (size_t)(N * K));
    int *codes = malloc(sizeof(int) * (size_t)(N * K));
    decode(q, w, codes);
    double *xv = t_vals(x);
    int bad = 0;
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double ref = b ? (double)fdata(b)[n] : 0, mag = fabs(ref);
            for (int64_t k = 0; k < K; k++) {
                ref += xv[m * K + k] * w[n * K + k];
                mag += fabs(xv[m * K + k] * w[n * K + k]);
            }
            const double got = fdata(y)[m * N + n];
            if (!(fabs(got - ref) <= 1e-5 * mag + 1e-30)) {
                if (bad++ < 3)
                    fprintf(stderr, "  y[%lld,%lld] = %.9g, reference %.9g (N %lld K %lld M %lld)\n", (long long)m,
                            (long long)n, got, ref, (long long)N, (long long)K, (long long)M);
            }
        }
    free(w), free(codes), free(xv);
    return bad;
}

static void linear_case(tfc_qformat fmt, int32_t G, int64_t N, int64_t K, int64_t M, int with_bias, uint64_t seed) {
    tfc_tensor *w = f32_rand((int64_t[]){N, K}, 2, -1, 1, seed), *x = f32_rand((int64_t[]){M, K}, 2, -1, 1, seed + 1);
    tfc_tensor *b = with_bias ? f32_rand((int64_t[]){N}, 1, -1, 1, seed + 2) : NULL;
    tfc_qweight *q = NULL;
    CHECK_OK(tfc_quantize(w, fmt, G, 0, &q));
    const int best = tfc_cpu_qisa();
    for (int isa = 0; isa <= best; isa++) {
        tfc_cpu_qisa_cap = isa;
        tfc_tensor *y = NULL;
        CHECK_OK(tfc_qlinear(NULL, x, q, b, &y));
        if (y) {
            CHECK(dim(y, 0) == M && dim(y, 1) == N);
            int bad = check_linear(q, x, b, y, M);
            CHECK(bad == 0);
            if (bad)
                fprintf(stderr, "  qlinear %s fmt %d G %d N %lld K %lld M %lld bias %d: %d wrong\n",
                        tfc_cpu_qisa_name(isa), (int)fmt, G, (long long)N, (long long)K, (long long)M, with_bias, bad);
        }
        tfc_tensor_release(y);
    }
    tfc_cpu_qisa_cap = -1;
    tfc_qweight_release(q);
    tfc_tensor_release(w), tfc_tensor_release(x), tfc_tensor_release(b);
}

TEST(qlinear_int8_matches_dequantize_then_matmul_on_every_path) {
    printf("  kernel families here: portable..%s\n", tfc_cpu_qisa_name(tfc_cpu_qisa()));
    const int64_t Ns[] = {1, 3, 17}, Ks[] = {1, 5, 33, 100, 130}, Ms[] = {1, 2, 7, 64};
    uint64_t seed = 100;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 5; j++)
            for (int m = 0; m < 4; m++) linear_case(TFC_QFORMAT_INT8, 0, Ns[i], Ks[j], Ms[m], (i + m) % 2, seed += 3);
    linear_case(TFC_QFORMAT_INT8, 0, 64, 768, 5, 1, 999);
}

TEST(qlinear_int4_matches_dequantize_then_matmul_on_every_path) {
    const int64_t Ns[] = {1, 3, 17}, Ks[] = {32, 64, 96, 160}, Ms[] = {1, 2, 7, 64};
    uint64_t seed = 500;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++)
            for (int m = 0; m < 4; m++) {
                linear_case(TFC_QFORMAT_INT4, 32, Ns[i], Ks[j], Ms[m], (i + m) % 2, seed += 3);
                if (Ks[j] % 64 == 0) linear_case(TFC_QFORMAT_INT4, 64, Ns[i], Ks[j], Ms[m], (i + j) % 2, seed += 3);
            }
    linear_case(TFC_QFORMAT_INT4, 64, 64, 768, 5, 1, 998);
}

/*
 * From 16 rows of x on for int8 and 6 for int4 (batched decoding),
 * tfc_qlinear dequantizes W in tiles of 16 rows by 768 columns and runs the
 * f32 GEMM, summing the K chunks in y: several tiles with a partial last
 * one, K in one, several and a partial chunk, both formats, with and
 * without bias, at the thresholds and above.
 */
TEST(qlinear_tiled_path_matches_dequantize_then_matmul) {
    linear_case(TFC_QFORMAT_INT8, 0, 200, 768, 16, 1, 1234);
    linear_case(TFC_QFORMAT_INT8, 0, 37, 3072, 33, 0, 1235);
    linear_case(TFC_QFORMAT_INT8, 0, 21, 1000, 64, 1, 1236);
    linear_case(TFC_QFORMAT_INT8, 0, 300, 5, 17, 1, 1237);
    linear_case(TFC_QFORMAT_INT4, 32, 200, 768, 6, 1, 1238);
    linear_case(TFC_QFORMAT_INT4, 64, 37, 3072, 64, 1, 1239);
    linear_case(TFC_QFORMAT_INT4, 32, 19, 800, 16, 0, 1240);
    linear_case(TFC_QFORMAT_INT4, 32, 5, 96, 9, 0, 1241);
}

/* Leading dims fold into rows; a strided x is read through its strides; a 1-D x gives a 1-D y. */
TEST(qlinear_batched_and_strided_x) {
    tfc_tensor *w = f32_rand((int64_t[]){17, 64}, 2, -1, 1, 7), *x = f32_rand((int64_t[]){3, 2, 64}, 3, -1, 1, 8);
    tfc_qweight *q = NULL;
    CHECK_OK(tfc_quantize(w, TFC_QFORMAT_INT4, 32, 0, &q));
    tfc_tensor *xp = NULL, *xc = NULL, *y = NULL, *yc = NULL, *x1 = NULL, *y1 = NULL;
    CHECK_OK(tfc_permute(NULL, x, (int32_t[]){1, 0, 2}, 3, &xp)); /* [2,3,64], strided */
    CHECK_OK(tfc_contiguous(NULL, xp, &xc));
    CHECK_OK(tfc_qlinear(NULL, xp, q, NULL, &y));
    CHECK(tfc_tensor_ndim(y) == 3 && dim(y, 0) == 2 && dim(y, 2) == 17);
    CHECK(check_linear(q, xc, NULL, y, 6) == 0);
    CHECK_OK(tfc_qlinear(NULL, xc, q, NULL, &yc));
    CHECK(!memcmp(tfc_tensor_data(y), tfc_tensor_data(yc), 6 * 17 * 4));
    x1 = f32_rand((int64_t[]){64}, 1, -1, 1, 9);
    CHECK_OK(tfc_qlinear(NULL, x1, q, NULL, &y1));
    CHECK(tfc_tensor_ndim(y1) == 1 && dim(y1, 0) == 17);
    CHECK(check_linear(q, x1, NULL, y1, 1) == 0);
    tfc_tensor *all[] = {w, x, xp, xc, y, yc, x1, y1};
    for (int i = 0; i < 8; i++) tfc_tensor_release(all[i]);
    tfc_qweight_release(q);
}

/* Each output row is computed by one thread with one code path: the thread count changes no bit. */
static void thread_count_case(const tfc_tensor *w, const tfc_tensor *x, int64_t M);

TEST(qlinear_does_not_depend_on_the_thread_count) {
    for (int tiled = 0; tiled < 2; tiled++) { /* 3 rows: the row kernels; 16: dequantized tiles and the f32 GEMM */
        const int64_t M = tiled ? 16 : 3;
        tfc_tensor *w = f32_rand((int64_t[]){300, 256}, 2, -1, 1, 11), *x = f32_rand((int64_t[]){M, 256}, 2, -1, 1, 12);
        thread_count_case(w, x, M);
        tfc_tensor_release(w), tfc_tensor_release(x);
    }
}

static void thread_count_case(const tfc_tensor *w, const tfc_tensor *x, int64_t M) {
    const tfc_qformat fmts[] = {TFC_QFORMAT_INT8, TFC_QFORMAT_INT4};
    const int32_t nt = tfc_get_num_threads();
    for (int f = 0; f < 2; f++) {
        tfc_qweight *q = NULL;
        tfc_tensor *y1 = NULL, *y2 = NULL;
        CHECK_OK(tfc_quantize(w, fmts[f], f ? 64 : 0, 0, &q));
        CHECK_OK(tfc_set_num_threads(1));
        CHECK_OK(tfc_qlinear(NULL, x, q, NULL, &y1));
        CHECK_OK(tfc_set_num_threads(4));
        CHECK_OK(tfc_qlinear(NULL, x, q, NULL, &y2));
        CHECK(y1 && y2 && !memcmp(tfc_tensor_data(y1), tfc_tensor_data(y2), (size_t)M * 300 * 4));
        tfc_tensor_release(y1), tfc_tensor_release(y2);
        tfc_qweight_release(q);
    }
    CHECK_OK(tfc_set_num_threads(nt));
}

/* packed + scales out and back in: the same weight; the tensors share the handle's memory. */
TEST(tensors_round_trip_through_from_tensors) {
    tfc_tensor *w = f32_rand((int64_t[]){3, 128}, 2, -1, 1, 21), *x = f32_rand((int64_t[]){2, 128}, 2, -1, 1, 22);
    const tfc_qformat fmts[] = {TFC_QFORMAT_INT8, TFC_QFORMAT_INT4};
    for (int f = 0; f < 2; f++) {
        const int32_t G = f ? 64 : 0;
        tfc_qweight *q = NULL, *r = NULL;
        tfc_tensor *p = NULL, *s = NULL, *p2 = NULL, *y1 = NULL, *y2 = NULL;
        CHECK_OK(tfc_quantize(w, fmts[f], G, 0, &q));
        CHECK_OK(tfc_qweight_tensors(q, &p, &s));
        CHECK_OK(tfc_qweight_tensors(q, &p2, NULL));
        CHECK(tfc_tensor_data(p) == tfc_tensor_data(p2));
        CHECK(tfc_tensor_dtype(p) == TFC_DTYPE_U8 && tfc_tensor_dtype(s) == TFC_DTYPE_F32);
        CHECK(dim(p, 1) == (f ? 64 : 128) && tfc_tensor_ndim(s) == (f ? 2 : 1));
        CHECK_OK(tfc_qweight_from_tensors(fmts[f], 3, 128, G, p, s, &r));
        tfc_qweight_release(q); /* r keeps the arrays alive */
        CHECK(tfc_qweight_retain(r) == r);
        tfc_qweight_release(r);
        CHECK_OK(tfc_quantize(w, fmts[f], G, 0, &q));
        CHECK_OK(tfc_qlinear(NULL, x, q, NULL, &y1));
        CHECK_OK(tfc_qlinear(NULL, x, r, NULL, &y2));
        CHECK(y1 && y2 && !memcmp(tfc_tensor_data(y1), tfc_tensor_data(y2), 2 * 3 * 4));
        tfc_tensor *all[] = {p, s, p2, y1, y2};
        for (int i = 0; i < 5; i++) tfc_tensor_release(all[i]);
        tfc_qweight_release(q);
        tfc_qweight_release(r);
    }
    tfc_tensor_release(w), tfc_tensor_release(x);
}

TEST(bad_quantize_arguments) {
    tfc_tensor *w = f32_rand((int64_t[]){3, 96}, 2, -1, 1, 1), *w3 = f32_rand((int64_t[]){2, 3, 4}, 3, -1, 1, 2);
    tfc_tensor *w64 = t_rand((int64_t[]){3, 96}, 2, -1, 1, 3), *w0 = NULL;
    CHECK_OK(tfc_tensor_empty((int64_t[]){0, 32}, 2, TFC_DTYPE_F32, &w0));
    tfc_qweight *q = NULL;
    CHECK_ERR(tfc_quantize(NULL, TFC_QFORMAT_INT8, 0, 0, &q), TFC_ERR_INVALID_ARG, "tfc_quantize: w is NULL");
    CHECK_ERR(tfc_quantize(w, TFC_QFORMAT_INT8, 0, 0, NULL), TFC_ERR_INVALID_ARG, "tfc_quantize: out is NULL");
    CHECK_ERR(tfc_quantize(w3, TFC_QFORMAT_INT8, 0, 0, &q), TFC_ERR_SHAPE, "tfc_quantize: w is [2,3,4]; need a 2-D");
    CHECK_ERR(tfc_quantize(w0, TFC_QFORMAT_INT8, 0, 0, &q), TFC_ERR_SHAPE, "non-empty");
    CHECK_ERR(tfc_quantize(w64, TFC_QFORMAT_INT8, 0, 0, &q), TFC_ERR_DTYPE, "tfc_quantize: w is f64 [3,96]");
    CHECK_ERR(tfc_quantize(w, (tfc_qformat)7, 0, 0, &q), TFC_ERR_INVALID_ARG, "format 7 is not a tfc_qformat");
    CHECK_ERR(tfc_quantize(w, TFC_QFORMAT_INT8, 32, 0, &q), TFC_ERR_INVALID_ARG, "group_size must be 0");
    CHECK_ERR(tfc_quantize(w, TFC_QFORMAT_INT4, 0, 0, &q), TFC_ERR_INVALID_ARG, "positive multiple of 32");
    CHECK_ERR(tfc_quantize(w, TFC_QFORMAT_INT4, 48, 0, &q), TFC_ERR_INVALID_ARG, "group_size 48");
    CHECK_ERR(tfc_quantize(w, TFC_QFORMAT_INT4, 64, 0, &q), TFC_ERR_INVALID_ARG,
              "tfc_quantize: group_size 64 does not divide K = 96");
    CHECK_ERR(tfc_quantize(w, TFC_QFORMAT_INT4, 32, 2, &q), TFC_ERR_INVALID_ARG, "flags 0x2");
    /* [3, 96] read as [in, out]: K = 3, not a multiple of the group. */
    CHECK_ERR(tfc_quantize(w, TFC_QFORMAT_INT4, 32, TFC_QUANT_IN_OUT, &q), TFC_ERR_INVALID_ARG, "divide K = 3");
    float v[64] = {0};
    v[32 + 5] = NAN;
    tfc_tensor *wn = f32_from(v, (int64_t[]){2, 32}, 2);
    CHECK_ERR(tfc_quantize(wn, TFC_QFORMAT_INT8, 0, 0, &q), TFC_ERR_NONFINITE, "tfc_quantize: w[1,5]");
    CHECK(q == NULL);
    tfc_tensor *all[] = {w, w3, w64, w0, wn};
    for (int i = 0; i < 5; i++) tfc_tensor_release(all[i]);
}

TEST(bad_qlinear_arguments) {
    tfc_tensor *w = f32_rand((int64_t[]){3, 64}, 2, -1, 1, 1), *x = f32_rand((int64_t[]){2, 64}, 2, -1, 1, 2);
    tfc_tensor *x64 = t_rand((int64_t[]){2, 64}, 2, -1, 1, 3), *xk = f32_rand((int64_t[]){2, 63}, 2, -1, 1, 4);
    tfc_tensor *b2 = f32_rand((int64_t[]){4}, 1, -1, 1, 5), *xs = NULL, *y = NULL;
    CHECK_OK(tfc_tensor_full(NULL, 0, TFC_DTYPE_F32, 1.0, &xs));
    tfc_qweight *q = NULL;
    CHECK_OK(tfc_quantize(w, TFC_QFORMAT_INT8, 0, 0, &q));
    CHECK_ERR(tfc_qlinear(NULL, NULL, q, NULL, &y), TFC_ERR_INVALID_ARG, "tfc_qlinear: x is NULL");
    CHECK_ERR(tfc_qlinear(NULL, x, NULL, NULL, &y), TFC_ERR_INVALID_ARG, "tfc_qlinear: w is NULL");
    CHECK_ERR(tfc_qlinear(NULL, x, q, NULL, NULL), TFC_ERR_INVALID_ARG, "tfc_qlinear: out is NULL");
    CHECK_ERR(tfc_qlinear(NULL, x64, q, NULL, &y), TFC_ERR_DTYPE, "tfc_qlinear: x is f64 [2,64]");
    CHECK_ERR(tfc_qlinear(NULL, xk, q, NULL, &y), TFC_ERR_SHAPE, "tfc_qlinear: x is [2,63], W is [3,64]");
    CHECK_ERR(tfc_qlinear(NULL, xs, q, NULL, &y), TFC_ERR_SHAPE, "x is a scalar");
    CHECK_ERR(tfc_qlinear(NULL, x, q, b2, &y), TFC_ERR_SHAPE, "tfc_qlinear: b is [4], W is [3,64]: need b [3]");
    CHECK(y == NULL);
    /* A recording graph: refused when x needs a gradient, fine otherwise. */
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    CHECK_OK(tfc_qlinear(g, x, q, NULL, &y));
    tfc_tensor_release(y);
    y = NULL;
    CHECK_OK(tfc_tensor_set_requires_grad(x, 1));
    CHECK_ERR(tfc_qlinear(g, x, q, NULL, &y), TFC_ERR_UNSUPPORTED, "tfc_qlinear: x or b requires grad");
    CHECK_OK(tfc_qlinear(NULL, x, q, NULL, &y)); /* no graph: plain inference */
    tfc_tensor_release(y);
    tfc_graph_release(g);
    tfc_qweight_release(q);
    tfc_tensor *all[] = {w, x, x64, xk, b2, xs};
    for (int i = 0; i < 6; i++) tfc_tensor_release(all[i]);
}

TEST(bad_handle_arguments_and_corrupt_arrays) {
    tfc_tensor *w = f32_rand((int64_t[]){3, 64}, 2, -1, 1, 1), *p = NULL, *s = NULL, *t = NULL;
    tfc_qweight *q = NULL, *r = NULL;
    CHECK_OK(tfc_quantize(w, TFC_QFORMAT_INT4, 32, 0, &q));
    CHECK_OK(tfc_qweight_tensors(q, &p, &s)); /* p [3,32] u8, s [3,2] f32 */
    CHECK_ERR(tfc_qweight_from_tensors(TFC_QFORMAT_INT4, 3, 64, 32, NULL, s, &r), TFC_ERR_INVALID_ARG,
              "tfc_qweight_from_tensors: packed is NULL");
    CHECK_ERR(tfc_qweight_from_tensors(TFC_QFORMAT_INT4, 3, 64, 32, p, NULL, &r), TFC_ERR_INVALID_ARG,
              "scales is NULL");
    CHECK_ERR(tfc_qweight_from_tensors(TFC_QFORMAT_INT4, 3, 64, 32, p, s, NULL), TFC_ERR_INVALID_ARG, "out is NULL");
    CHECK_ERR(tfc_qweight_from_tensors(TFC_QFORMAT_INT4, 0, 64, 32, p, s, &r), TFC_ERR_INVALID_ARG, "n = 0");
    CHECK_ERR(tfc_qweight_from_tensors(TFC_QFORMAT_INT4, 3, 64, 40, p, s, &r), TFC_ERR_INVALID_ARG,
              "tfc_qweight_from_tensors: group_size 40");
    /* The arrays do not fit the claimed weight. */
    CHECK_ERR(tfc_qweight_from_tensors(TFC_QFORMAT_INT4, 3, 128, 32, p, s, &r), TFC_ERR_SHAPE,
              "tfc_qweight_from_tensors: packed is [3,32]; the format needs [3,64]");
    CHECK_ERR(tfc_qweight_from_tensors(TFC_QFORMAT_INT4, 3, 64, 64, p, s, &r), TFC_ERR_SHAPE,
              "scales is [3,2]; the format needs [3,1]");
    CHECK_ERR(tfc_qweight_from_tensors(TFC_QFORMAT_INT8, 3, 32, 0, p, s, &r), TFC_ERR_SHAPE,
              "scales is [3,2]; the format needs [3]");
    CHECK_ERR(tfc_qweight_from_tensors(TFC_QFORMAT_INT4, 3, 64, 32, s, s, &r), TFC_ERR_DTYPE, "packed is f32");
    CHECK_ERR(tfc_qweight_from_tensors(TFC_QFORMAT_INT4, 3, 64, 32, p, p, &r), TFC_ERR_DTYPE, "scales is u8");
    /* A corrupt scale. */
    CHECK_OK(tfc_tensor_clone(s, &t));
    ((float *)tfc_tensor_data(t))[3] = INFINITY;
    CHECK_ERR(tfc_qweight_from_tensors(TFC_QFORMAT_INT4, 3, 64, 32, p, t, &r), TFC_ERR_NONFINITE,
              "tfc_qweight_from_tensors: scales element 3");
    CHECK(r == NULL);
    /* Other functions on NULL. */
    tfc_tensor *d = NULL;
    CHECK_ERR(tfc_qweight_dequantize(NULL, 0, &d), TFC_ERR_INVALID_ARG, "tfc_qweight_dequantize: q is NULL");
    CHECK_ERR(tfc_qweight_dequantize(q, 0, NULL), TFC_ERR_INVALID_ARG, "tfc_qweight_dequantize: out is NULL");
    CHECK_ERR(tfc_qweight_dequantize(q, 4, &d), TFC_ERR_INVALID_ARG, "flags 0x4");
    CHECK_ERR(tfc_qweight_tensors(NULL, &d, NULL), TFC_ERR_INVALID_ARG, "tfc_qweight_tensors: q is NULL");
    CHECK(tfc_qweight_format(NULL) == 0 && tfc_qweight_out_features(NULL) == -1 &&
          tfc_qweight_in_features(NULL) == -1 && tfc_qweight_group_size(NULL) == -1 && tfc_qweight_nbytes(NULL) == -1);
    CHECK(tfc_qweight_retain(NULL) == NULL);
    tfc_qweight_release(NULL);
    tfc_qweight_release(q);
    tfc_tensor_release(w), tfc_tensor_release(p), tfc_tensor_release(s), tfc_tensor_release(t);
}

/* Through the stand-in: a backend without the entries refuses by name; mixed devices are a device error. */
TEST(a_backend_without_the_entries_refuses_clearly) {
    tfc_backend *sb = standin_install();
    sb->quantize = NULL;
    sb->qlinear = NULL;
    tfc_tensor *w = f32_rand((int64_t[]){3, 64}, 2, -1, 1, 1), *wc = NULL, *x = NULL, *y = NULL;
    CHECK_OK(tfc_tensor_to_device(w, TFC_DEVICE_CUDA, 0, &wc));
    tfc_qweight *q = NULL;
    CHECK_ERR(tfc_quantize(wc, TFC_QFORMAT_INT8, 0, 0, &q), TFC_ERR_UNSUPPORTED,
              "tfc_quantize: quantize is not implemented on cuda:0");
    CHECK_OK(tfc_quantize(w, TFC_QFORMAT_INT8, 0, 0, &q));
    tfc_tensor *xh = f32_rand((int64_t[]){2, 64}, 2, -1, 1, 2);
    CHECK_OK(tfc_tensor_to_device(xh, TFC_DEVICE_CUDA, 0, &x));
    tfc_tensor_release(xh);
    CHECK_ERR(tfc_qlinear(NULL, x, q, NULL, &y), TFC_ERR_DEVICE, "tfc_qlinear");
    tfc_qweight_release(q);
    tfc_tensor_release(w), tfc_tensor_release(wc), tfc_tensor_release(x);
    standin_remove();
}
