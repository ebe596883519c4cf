/*
 * bf16 on the CPU: f32 <-> bf16 conversion (round to nearest even) through
 * tfc_cast, the bf16 GEMM entry (lib/cpu/gemm_bf16.c: one path on every
 * CPU, widening to f32), tfc_matmul and its backward on bf16 tensors, and
 * the refusals (mixed dtypes, a backend whose gemm takes no bf16, bf16
 * where only gemm takes it).
 *
 * References are f64 sums over the same bf16-rounded inputs, written here;
 * the tolerance is the f32 accumulation bound (K + 4) · 2^-24 · Σ|a·b|
 * (plus bf16's half ulp, 2^-8 relative, when C is bf16).
 */
#include <stdint.h>

#include "backend/backend.h"
#include "core/dtype.h"
#include "cpu/gemm.h"
#include "cpu/gemm_bf16_amx.h"
#include "cpu/gemm_small_m.h"
#include "cpu/kernels.h"
#include "ops/attention_autocast.h"
#include "ops/op_util.h"
#include "standin_backend.h"
#include "tfc_test_util.h"

TFC_TEST_MAIN

/* ---- conversion ---------------------------------------------------------- */

static uint16_t cast_bits(uint32_t f32_bits) {
    float f;
    memcpy(&f, &f32_bits, 4);
    tfc_tensor *x = NULL, *y = NULL;
    const int64_t d[1] = {1};
    CHECK_OK(tfc_tensor_from_data(&f, d, 1, TFC_DTYPE_F32, &x));
    CHECK_OK(tfc_cast(NULL, x, TFC_DTYPE_BF16, &y));
    uint16_t h = 0xdead;
    if (y) CHECK_OK(tfc_tensor_copy_to_host(y, &h, 2));
    tfc_tensor_release(x);
    tfc_tensor_release(y);
    return h;
}

/* Hand-derived: bf16 keeps the top 16 bits; the low 16 decide the rounding. */
static const struct {
    uint32_t in;
    uint16_t out;
} rne_cases[] = {
    {0x3f800000u, 0x3f80}, /* 1 */
    {0x3f807fffu, 0x3f80}, /* just below the halfway point: down */
    {0x3f808000u, 0x3f80}, /* 1 + 2^-8, halfway, even neighbour 0x3f80: down */
    {0x3f808001u, 0x3f81}, /* just above halfway: up */
    {0x3f818000u, 0x3f82}, /* halfway between 0x3f81 (odd) and 0x3f82: up to even */
    {0xbf818000u, 0xbf82}, /* the same, negative */
    {0x80000000u, 0x8000}, /* -0 */
    {0x7f7f7fffu, 0x7f7f}, /* below the largest bf16's halfway: stays finite */
    {0x7f7f8000u, 0x7f80}, /* halfway above the largest (odd) bf16: to even = +inf */
    {0x7f7fffffu, 0x7f80}, /* FLT_MAX overflows to +inf */
    {0xff7fffffu, 0xff80}, /* -FLT_MAX to -inf */
    {0x7f800000u, 0x7f80}, /* +inf */
    {0xff800000u, 0xff80}, /* -inf */
    {0x00010001u, 0x0001}, /* subnormal, above halfway of nothing: keeps 0x0001 */
    {0x00008000u, 0x0000}, /* subnormal halfway between 0 (even) and 0x0001: 0 */
    {0x00018000u, 0x0002}, /* subnormal halfway between 0x0001 (odd) and 0x0002: up */
    {0x007fffffu, 0x0080}, /* largest subnormal rounds up to the smallest normal */
};
#define N_RNE (sizeof rne_cases / sizeof *rne_cases)

TEST(cast_to_bf16_rounds_to_nearest_even) {
    for (size_t i = 0; i < N_RNE; i++) {
        uint16_t got = cast_bits(rne_cases[i].in);
        if (got != rne_cases[i].out)
            TFC_FAIL_AT("cast 0x%08x: got 0x%04x, want 0x%04x", rne_cases[i].in, got, rne_cases[i].out);
        tfc_test_checks++;
    }
    /* NaN stays NaN: exponent all ones, mantissa non-zero (a signalling NaN
     * whose payload sits in the low bits would round to inf by truncation). */
    static const uint32_t nans[] = {0x7fc00000u, 0x7f800001u, 0xff800001u, 0x7fffffffu};
    for (size_t i = 0; i < sizeof nans / sizeof *nans; i++) {
        uint16_t h = cast_bits(nans[i]);
        CHECK((h & 0x7f80) == 0x7f80 && (h & 0x007f) != 0);
    }
}

TEST(cast_from_bf16_is_exact) {
    const uint16_t in[5] = {0x3f81, 0xc2f7, 0x0001, 0x7f80, 0xff7f};
    tfc_tensor *x = NULL, *y = NULL;
    const int64_t d[1] = {5};
    CHECK_OK(tfc_tensor_from_data(in, d, 1, TFC_DTYPE_BF16, &x));
    CHECK_OK(tfc_cast(NULL, x, TFC_DTYPE_F32, &y));
    uint32_t out[5] = {0};
    CHECK_OK(tfc_tensor_copy_to_host(y, out, sizeof out));
    for (int i = 0; i < 5; i++) CHECK(out[i] == (uint32_t)in[i] << 16);
    tfc_tensor_release(x);
    tfc_tensor_release(y);
}

/*
 * The same cases through long rows (the vectorized loop and its tail, at
 * every lane) and through a strided view [R, C] read column-major (the
 * converting loop with strides), both directions, and f32 <-> f64 too.
 */
TEST(casts_of_long_and_strided_rows_round_alike) {
    enum { R = 23, C = 41 }; /* R·C = 943: not a multiple of any vector width */
    static uint32_t in[R * C];
    for (int i = 0; i < R * C; i++) in[i] = rne_cases[(size_t)i % N_RNE].in;
    tfc_tensor *x = NULL, *y = NULL, *xt = NULL, *yt = NULL, *back = NULL, *x64 = NULL, *back32 = NULL;
    CHECK_OK(tfc_tensor_from_data(in, (int64_t[]){R, C}, 2, TFC_DTYPE_F32, &x));
    CHECK_OK(tfc_cast(NULL, x, TFC_DTYPE_BF16, &y));
    static uint16_t out[R * C];
    CHECK_OK(tfc_tensor_copy_to_host(y, out, sizeof out));
    for (int i = 0; i < R * C; i++)
        if (out[i] != rne_cases[(size_t)i % N_RNE].out) TFC_FAIL_AT("dense element %d: got 0x%04x", i, out[i]);
    /* xt [C, R] is x's transpose: its rows stride C elements through x. */
    CHECK_OK(tfc_transpose(NULL, x, 0, 1, &xt));
    CHECK_OK(tfc_cast(NULL, xt, TFC_DTYPE_BF16, &yt));
    CHECK_OK(tfc_tensor_copy_to_host(yt, out, sizeof out));
    for (int c = 0; c < C; c++)
        for (int r = 0; r < R; r++)
            if (out[c * R + r] != rne_cases[(size_t)(r * C + c) % N_RNE].out)
                TFC_FAIL_AT("strided element [%d, %d]: got 0x%04x", c, r, out[c * R + r]);
    /* bf16 -> f32 through the strided view of y: exact, the bits shifted up. */
    tfc_tensor *ytt = NULL;
    CHECK_OK(tfc_transpose(NULL, y, 0, 1, &ytt));
    CHECK_OK(tfc_cast(NULL, ytt, TFC_DTYPE_F32, &back));
    static uint32_t got32[R * C];
    CHECK_OK(tfc_tensor_copy_to_host(back, got32, sizeof got32));
    for (int c = 0; c < C; c++)
        for (int r = 0; r < R; r++)
            if (got32[c * R + r] != (uint32_t)rne_cases[(size_t)(r * C + c) % N_RNE].out << 16)
                TFC_FAIL_AT("widened element [%d, %d]: got 0x%08x", c, r, got32[c * R + r]);
    /* f32 -> f64 -> f32 through the strided view: exact both ways. */
    CHECK_OK(tfc_cast(NULL, xt, TFC_DTYPE_F64, &x64));
    static double got64[R * C];
    CHECK_OK(tfc_tensor_copy_to_host(x64, got64, sizeof got64));
    for (int c = 0; c < C; c++)
        for (int r = 0; r < R; r++) {
            float f;
            memcpy(&f, &in[r * C + c], 4);
            if (!(got64[c * R + r] == (double)f)) TFC_FAIL_AT("f64 element [%d, %d]: got %g", c, r, got64[c * R + r]);
        }
    CHECK_OK(tfc_cast(NULL, x64, TFC_DTYPE_F32, &back32));
    CHECK_OK(tfc_tensor_copy_to_host(back32, got32, sizeof got32));
    for (int c = 0; c < C; c++)
        for (int r = 0; r < R; r++)
            if (got32[c * R + r] != in[r * C + c])
                TFC_FAIL_AT("f32 element [%d, %d]: got 0x%08x", c, r, got32[c * R + r]);
    tfc_test_checks += 5 * R * C;
    tfc_tensor_release(x);
    tfc_tensor_release(y);
    tfc_tensor_release(xt);
    tfc_tensor_release(yt);
    tfc_tensor_release(ytt);
    tfc_tensor_release(back);
    tfc_tensor_release(x64);
    tfc_tensor_release(back32);
}

/*
 * The ROUND_BF16 map (autocast's operands in f32 storage where the bf16 GEMM
 * widens) rounds like the cast: the hand-derived cases, through one long
 * dense row (70001 elements: the threads split the row), through a strided
 * view, and the long dense cast to bf16 and back the same way.
 */
TEST(round_bf16_map_and_long_casts_round_like_the_table) {
    enum { L = 70001, R = 23, C = 41 };
    static uint32_t in[L], got[L];
    static uint16_t half[L];
    for (int i = 0; i < L; i++) in[i] = rne_cases[(size_t)i % N_RNE].in;
    tfc_tensor *x = NULL, *r = NULL, *h = NULL, *back = NULL, *m = NULL, *mt = NULL, *rt = NULL;
    CHECK_OK(tfc_tensor_from_data(in, (int64_t[]){L}, 1, TFC_DTYPE_F32, &x));
    CHECK_OK(tfc_map_new("test", TFC_MAP_ROUND_BF16, (int64_t[]){L}, 1, TFC_DTYPE_F32, x, NULL, NULL, 0.0, &r));
    CHECK_OK(tfc_tensor_copy_to_host(r, got, sizeof got));
    for (int i = 0; i < L; i++)
        if (got[i] != (uint32_t)rne_cases[(size_t)i % N_RNE].out << 16)
            TFC_FAIL_AT("map element %d: 0x%08x", i, got[i]);
    CHECK_OK(tfc_cast(NULL, x, TFC_DTYPE_BF16, &h));
    CHECK_OK(tfc_tensor_copy_to_host(h, half, sizeof half));
    for (int i = 0; i < L; i++)
        if (half[i] != rne_cases[(size_t)i % N_RNE].out) TFC_FAIL_AT("cast element %d: 0x%04x", i, half[i]);
    CHECK_OK(tfc_cast(NULL, h, TFC_DTYPE_F32, &back));
    CHECK_OK(tfc_tensor_copy_to_host(back, got, sizeof got));
    for (int i = 0; i < L; i++)
        if (got[i] != (uint32_t)half[i] << 16) TFC_FAIL_AT("widened element %d: 0x%08x", i, got[i]);
    /* strided: the transpose of an [R, C] matrix of the same inputs */
    CHECK_OK(tfc_tensor_from_data(in, (int64_t[]){R, C}, 2, TFC_DTYPE_F32, &m));
    CHECK_OK(tfc_transpose(NULL, m, 0, 1, &mt));
    CHECK_OK(tfc_map_new("test", TFC_MAP_ROUND_BF16, (int64_t[]){C, R}, 2, TFC_DTYPE_F32, mt, NULL, NULL, 0.0, &rt));
    CHECK_OK(tfc_tensor_copy_to_host(rt, got, (size_t)R * C * 4));
    for (int c = 0; c < C; c++)
        for (int q = 0; q < R; q++)
            if (got[c * R + q] != (uint32_t)rne_cases[(size_t)(q * C + c) % N_RNE].out << 16)
                TFC_FAIL_AT("strided map element [%d, %d]: 0x%08x", c, q, got[c * R + q]);
    tfc_test_checks += 3 * L + R * C;
    tfc_tensor_release(x), tfc_tensor_release(r), tfc_tensor_release(h), tfc_tensor_release(back);
    tfc_tensor_release(m), tfc_tensor_release(mt), tfc_tensor_release(rt);
}

/* ---- the gemm entry -------------------------------------------------------- */

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
/* A bf16 uniform in (-1, 1), away from 0. */
static uint16_t rand_bf16(void) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    float f = (float)((double)(g_rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    if (f > -1e-3f && f < 1e-3f) f = 0.5f;
    return tfc_f32_to_bf16(f);
}

static double bf(uint16_t h) { return tfc_bf16_to_f32(h); }

typedef struct gemm_case {
    int ta, tb, c_f32;
    int64_t m, n, k, batch;
    double alpha, beta;
} gemm_case;

/*
 * One problem through the CPU table's gemm entry, every item checked against
 * the f64 reference. Leading dims carry 3 elements of padding, batch items
 * are apart by more than one matrix (b shared when batch = 2), and the
 * padding of C must come back untouched.
 */
static int run_gemm_case(const gemm_case *g) {
    const int64_t ar = g->ta ? g->k : g->m, ac = g->ta ? g->m : g->k;
    const int64_t br = g->tb ? g->n : g->k, bc = g->tb ? g->k : g->n;
    const int64_t lda = ac + 3, ldb = bc + 3, ldc = g->n + 3;
    const int64_t sa = ar * lda + 5, sb = g->batch == 2 ? 0 : br * ldb + 7, sc = g->m * ldc + 2;
    const int64_t na = sa * g->batch, nb = (sb ? sb * g->batch : br * ldb), nc = sc * g->batch;
    if (na < 0 || nb < 0 || nc < 0) { /* never: keeps GCC's malloc-size check quiet */
        TFC_FAIL_AT("bad sizes");
        return 1;
    }
    uint16_t *a = malloc((size_t)na * 2 + 2), *b = malloc((size_t)nb * 2 + 2);
    void *c = malloc((size_t)nc * 4);
    double *c0 = malloc(sizeof(double) * (size_t)nc);
    for (int64_t i = 0; i < na; i++) a[i] = rand_bf16();
    for (int64_t i = 0; i < nb; i++) b[i] = rand_bf16();
    for (int64_t i = 0; i < nc; i++) {
        uint16_t h = rand_bf16();
        c0[i] = bf(h);
        if (g->c_f32)
            ((float *)c)[i] = (float)c0[i];
        else
            ((uint16_t *)c)[i] = h;
    }
    tfc_gemm_problem p = {.dtype = TFC_DTYPE_BF16,
                          .trans_a = g->ta,
                          .trans_b = g->tb,
                          .M = g->m,
                          .N = g->n,
                          .K = g->k,
                          .batch = g->batch,
                          .alpha = g->alpha,
                          .beta = g->beta,
                          .a = a,
                          .b = b,
                          .c = c,
                          .lda = lda,
                          .ldb = ldb,
                          .ldc = ldc,
                          .stride_a = sa,
                          .stride_b = sb,
                          .stride_c = sc,
                          .c_f32 = g->c_f32};
    int bad = 0;
    tfc_status s = tfc_cpu_backend.gemm(&p);
    if (s != TFC_OK) {
        TFC_FAIL_AT("gemm -> %s: %s", tfc_status_name(s), tfc_last_error());
        bad = 1;
    }
    for (int64_t it = 0; it < g->batch && !bad; it++)
        for (int64_t i = 0; i < g->m; i++)
            for (int64_t j = 0; j < ldc && !bad; j++) {
                int64_t ci = it * sc + i * ldc + j;
                double got = g->c_f32 ? ((float *)c)[ci] : bf(((uint16_t *)c)[ci]);
                if (j >= g->n) { /* padding */
                    bad = got != c0[ci];
                    if (bad)
                        TFC_FAIL_AT("C padding [%lld,%lld] of item %lld written", (long long)i, (long long)j,
                                    (long long)it);
                    continue;
                }
                double sum = 0, mag = 0;
                for (int64_t q = 0; q < g->k; q++) {
                    double x = bf(a[it * sa + (g->ta ? q * lda + i : i * lda + q)]);
                    double y = bf(b[it * sb + (g->tb ? j * ldb + q : q * ldb + j)]);
                    sum += x * y;
                    mag += fabs(x * y);
                }
                double want = g->alpha * sum + (g->beta != 0 ? g->beta * c0[ci] : 0);
                double tol = (double)(g->k + 4) * 0x1p-24 * (fabs(g->alpha) * mag + fabs(g->beta * c0[ci]));
                if (!g->c_f32) tol = tol * (1 + 0x1p-8) + 0x1p-8 * fabs(want);
                if (!(fabs(got - want) <= tol)) {
                    TFC_FAIL_AT("gemm ta %d tb %d c_f32 %d m %lld n %lld k %lld batch %lld: C[%lld][%lld,%lld] = "
                                "%.9g, want %.9g (tol %.3g)",
                                g->ta, g->tb, g->c_f32, (long long)g->m, (long long)g->n, (long long)g->k,
                                (long long)g->batch, (long long)it, (long long)i, (long long)j, got, want, tol);
                    bad = 1;
                }
            }
    tfc_test_checks++;
    free(a), free(b), free(c), free(c0);
    return bad;
}

static void gemm_cases(void) {
    /* ragged sizes: vectors, odd K, sizes around the 64-row blocks gemm.c splits over threads; the last
       takes the AMX tiles' blocks in two column groups (gemm_bf16_amx.c, block_at: 20 of 22 block columns) */
    static const int64_t mnk[][3] = {{1, 1, 1},     {7, 17, 65},   {17, 130, 7},    {65, 7, 130},
                                     {130, 65, 17}, {13, 33, 385}, {1, 100, 777},   {100, 1, 64},
                                     {24, 64, 768}, {37, 45, 2},   {200, 150, 300}, {40, 700, 800}};
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (size_t s = 0; s < sizeof mnk / sizeof *mnk; s++)
                for (int c_f32 = 0; c_f32 < 2; c_f32++) {
                    gemm_case g = {ta, tb, c_f32, mnk[s][0], mnk[s][1], mnk[s][2], 1, 1.0, 0.0};
                    run_gemm_case(&g);
                }
    /* alpha, beta and batches (b shared at batch 2, strided at 3) */
    static const gemm_case more[] = {
        {0, 0, 1, 19, 35, 50, 3, 1.5, -0.5}, {1, 1, 0, 19, 35, 50, 2, 0.25, 2.0}, {0, 1, 1, 33, 20, 400, 2, -1, 1},
        {1, 0, 0, 5, 70, 9, 3, 1, 1},        {0, 0, 0, 9, 9, 0, 2, 1, 0.5},       {0, 0, 1, 9, 9, 0, 1, 1, 0},
    };
    for (size_t i = 0; i < sizeof more / sizeof *more; i++) run_gemm_case(&more[i]);
}

TEST(bf16_gemm_against_f64) { gemm_cases(); }

/*
 * Which path ran: the small-M bf16 kernel (gemm_small_m_bf16.c) where the
 * CPU has AVX-512 F/BW/VL, unless TFC_BF16_GEMM=portable (the bf16_portable
 * run of this file) forces the widening path; gemm_cases above then checked
 * that path's small-M cases (m <= 32, A not transposed) against f64.
 */
TEST(bf16_small_m_kernel_runs_where_it_can) {
    const char *e = getenv("TFC_BF16_GEMM");
    __builtin_cpu_init();
    int want = TFC_HAVE_GEMM_SMALL_M && tfc_cpu_gemm_small_m_enabled() && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && !(e && !strcmp(e, "portable"));
    CHECK(tfc_cpu_gemm_small_m_bf16_enabled() == want);
    const float a[2] = {1.5f, -2.0f};
    const uint16_t b[4] = {0x3f80, 0x4000, 0x4040, 0x3f00}; /* [[1, 2], [3, 0.5]] */
    float c[2] = {7, 7};
    CHECK(tfc_cpu_gemm_small_m_bf16(0, 1, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2) == want);
    if (want) CHECK(c[0] == 1.5f - 6.0f && c[1] == 3.0f - 1.0f);
    printf("      (small-M bf16 kernel %s)\n", want ? "on" : "off: the widening path");
}

/* Large products are split over threads (gemm.c); each element is still summed by one thread in K order. */
TEST(bf16_gemm_bits_do_not_depend_on_the_thread_count) {
    const int64_t m = 300, n = 200, k = 800;
    uint16_t *a = malloc((size_t)(m * k) * 2), *b = malloc((size_t)(k * n) * 2);
    float *c1 = malloc((size_t)(m * n) * 4), *c2 = malloc((size_t)(m * n) * 4);
    for (int64_t i = 0; i < m * k; i++) a[i] = rand_bf16();
    for (int64_t i = 0; i < k * n; i++) b[i] = rand_bf16();
    int32_t saved = tfc_get_num_threads();
    CHECK_OK(tfc_set_num_threads(1));
    CHECK_OK(tfc_cpu_gemm_bf16(0, 0, m, n, k, 1.0, a, k, b, n, 0.0, c1, n, 1));
    CHECK_OK(tfc_set_num_threads(saved > 1 ? saved : 2));
    CHECK_OK(tfc_cpu_gemm_bf16(0, 0, m, n, k, 1.0, a, k, b, n, 0.0, c2, n, 1));
    CHECK_OK(tfc_set_num_threads(saved));
    CHECK(!memcmp(c1, c2, (size_t)(m * n) * 4));
    free(a), free(b), free(c1), free(c2);
}

TEST(gemm_entry_refuses_what_it_does_not_do) {
    float x = 1, y = 1, z = 0;
    tfc_gemm_problem p = {.dtype = TFC_DTYPE_F32,
                          .M = 1,
                          .N = 1,
                          .K = 1,
                          .batch = 1,
                          .alpha = 1,
                          .a = &x,
                          .b = &y,
                          .c = &z,
                          .lda = 1,
                          .ldb = 1,
                          .ldc = 1,
                          .c_f32 = 1};
    CHECK_ERR(tfc_cpu_backend.gemm(&p), TFC_ERR_UNSUPPORTED, "an f32 C is for bf16 A and B only, not f32");
    p.c_f32 = 0, p.dtype = TFC_DTYPE_F16;
    CHECK_ERR(tfc_cpu_backend.gemm(&p), TFC_ERR_UNSUPPORTED, "gemm: f16 is not implemented on the CPU");
    CHECK(z == 0);
    CHECK((tfc_cpu_backend.caps.gemm_dtypes >> TFC_DTYPE_BF16) & 1u);
    CHECK(!tfc_backend_takes(&tfc_cpu_backend, TFC_DTYPE_BF16)); /* only gemm takes bf16 on the CPU */
}

/* ---- tfc_matmul ------------------------------------------------------------ */

static tfc_tensor *rand_of(const int64_t *d, int32_t nd, tfc_dtype dt, uint64_t seed) {
    tfc_tensor *x = t_rand(d, nd, -1, 1, seed), *y = NULL;
    CHECK_OK(tfc_cast(NULL, x, dt, &y));
    tfc_tensor_release(x);
    return y;
}

/*
 * out [.., M, N] against f64 loops over the bf16 values of a [B?, M, K] and
 * b [B?, K, N] (batch 1 broadcasts); out is bf16, so tolerance adds its
 * rounding.
 */
static void check_product(const tfc_tensor *out, const tfc_tensor *a, const tfc_tensor *b, int64_t batch, int64_t m,
                          int64_t n, int64_t k, int64_t a_batch, int64_t b_batch) {
    double *av = t_vals(a), *bv = t_vals(b), *ov = t_vals(out);
    CHECK(tfc_tensor_dtype(out) == TFC_DTYPE_BF16);
    int bad = 0;
    for (int64_t t = 0; t < batch && !bad; t++)
        for (int64_t i = 0; i < m && !bad; i++)
            for (int64_t j = 0; j < n && !bad; j++) {
                double s = 0, mag = 0;
                for (int64_t q = 0; q < k; q++) {
                    double x = av[(a_batch > 1 ? t : 0) * m * k + i * k + q];
                    double y = bv[(b_batch > 1 ? t : 0) * k * n + q * n + j];
                    s += x * y, mag += fabs(x * y);
                }
                double got = ov[(t * m + i) * n + j], tol = (k + 4) * 0x1p-24 * mag * 1.01 + 0x1p-8 * fabs(s);
                if (!(fabs(got - s) <= tol)) {
                    TFC_FAIL_AT("out[%lld][%lld,%lld] = %.9g, want %.9g", (long long)t, (long long)i, (long long)j, got,
                                s);
                    bad = 1;
                }
            }
    tfc_test_checks++;
    free(av), free(bv), free(ov);
}

static void matmul_cases(void) {
    const int64_t da[3] = {3, 7, 66}, db[2] = {66, 45}, dbt[2] = {45, 66}, dv[1] = {66};
    tfc_tensor *a = rand_of(da, 3, TFC_DTYPE_BF16, 1), *b = rand_of(db, 2, TFC_DTYPE_BF16, 2);
    tfc_tensor *bt0 = rand_of(dbt, 2, TFC_DTYPE_BF16, 3), *bt = NULL, *out = NULL;
    /* batch folded into M (b shared) */
    CHECK_OK(tfc_matmul(NULL, a, b, &out));
    if (out) check_product(out, a, b, 3, 7, 45, 66, 3, 1);
    tfc_tensor_release(out), out = NULL;
    /* b a transposed view: trans_b, no copy */
    CHECK_OK(tfc_transpose(NULL, bt0, 0, 1, &bt));
    CHECK_OK(tfc_matmul(NULL, a, bt, &out));
    tfc_tensor *btc = NULL;
    CHECK_OK(tfc_contiguous(NULL, bt, &btc));
    if (out) check_product(out, a, btc, 3, 7, 45, 66, 3, 1);
    tfc_tensor_release(out), out = NULL;
    /* batched b: one strided-batch gemm call */
    const int64_t db3[3] = {3, 66, 45};
    tfc_tensor *b3 = rand_of(db3, 3, TFC_DTYPE_BF16, 4);
    CHECK_OK(tfc_matmul(NULL, a, b3, &out));
    if (out) check_product(out, a, b3, 3, 7, 45, 66, 3, 3);
    tfc_tensor_release(out), out = NULL;
    /* matrix · vector (1-D promotion) */
    tfc_tensor *v = rand_of(dv, 1, TFC_DTYPE_BF16, 5);
    CHECK_OK(tfc_matmul(NULL, a, v, &out));
    if (out) {
        CHECK(tfc_tensor_ndim(out) == 2);
        check_product(out, a, v, 3, 7, 1, 66, 3, 1);
    }
    tfc_tensor_release(out);
    tfc_tensor_release(a), tfc_tensor_release(b), tfc_tensor_release(bt0), tfc_tensor_release(bt);
    tfc_tensor_release(btc), tfc_tensor_release(b3), tfc_tensor_release(v);
}

TEST(matmul_bf16_is_bf16_with_f32_accumulation) { matmul_cases(); }

/*
 * Backward through the graph: a [2, 5, 40] · b [1, 40, 9] (b broadcast over
 * the batch, so db is a sum: computed in f32, rounded once). Gradients are
 * bf16 like torch's, against f64 loops over the bf16 values of the seed.
 */
TEST(matmul_bf16_backward) {
    const int64_t da[3] = {2, 5, 40}, db[3] = {1, 40, 9}, dd[3] = {2, 5, 9};
    tfc_tensor *a = rand_of(da, 3, TFC_DTYPE_BF16, 11), *b = rand_of(db, 3, TFC_DTYPE_BF16, 12);
    tfc_tensor *dout = rand_of(dd, 3, TFC_DTYPE_BF16, 13), *out = NULL, *ga = NULL, *gb = NULL;
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    CHECK_OK(tfc_tensor_set_requires_grad(a, 1));
    CHECK_OK(tfc_tensor_set_requires_grad(b, 1));
    CHECK_OK(tfc_matmul(g, a, b, &out));
    CHECK_OK(tfc_graph_backward(g, out, dout));
    CHECK_OK(tfc_tensor_grad(a, &ga));
    CHECK_OK(tfc_tensor_grad(b, &gb));
    if (ga && gb) {
        CHECK(tfc_tensor_dtype(ga) == TFC_DTYPE_BF16 && tfc_tensor_dtype(gb) == TFC_DTYPE_BF16);
        CHECK(tfc_tensor_ndim(gb) == 3 && tfc_tensor_dim(gb, 0) == 1);
        double *av = t_vals(a), *bv = t_vals(b), *dv = t_vals(dout), *gav = t_vals(ga), *gbv = t_vals(gb);
        int bad = 0;
        for (int64_t t = 0; t < 2; t++) /* da = dout · bᵀ */
            for (int64_t i = 0; i < 5; i++)
                for (int64_t q = 0; q < 40; q++) {
                    double s = 0, mag = 0;
                    for (int64_t j = 0; j < 9; j++)
                        s += dv[(t * 5 + i) * 9 + j] * bv[q * 9 + j],
                            mag += fabs(dv[(t * 5 + i) * 9 + j] * bv[q * 9 + j]);
                    double got = gav[(t * 5 + i) * 40 + q];
                    if (!(fabs(got - s) <= 13 * 0x1p-24 * mag + 0x1p-8 * fabs(s))) bad++;
                }
        for (int64_t q = 0; q < 40; q++) /* db = Σ_t aᵀ · dout */
            for (int64_t j = 0; j < 9; j++) {
                double s = 0, mag = 0;
                for (int64_t t = 0; t < 2; t++)
                    for (int64_t i = 0; i < 5; i++)
                        s += av[(t * 5 + i) * 40 + q] * dv[(t * 5 + i) * 9 + j],
                            mag += fabs(av[(t * 5 + i) * 40 + q] * dv[(t * 5 + i) * 9 + j]);
                double got = gbv[q * 9 + j];
                if (!(fabs(got - s) <= 16 * 0x1p-24 * mag + 0x1p-8 * fabs(s))) bad++;
            }
        CHECK(bad == 0);
        free(av), free(bv), free(dv), free(gav), free(gbv);
    }
    tfc_tensor_release(ga), tfc_tensor_release(gb), tfc_tensor_release(out);
    tfc_graph_release(g);
    tfc_tensor_release(a), tfc_tensor_release(b), tfc_tensor_release(dout);
}

/*
 * a [2, 1, 5, 40] · b [1, 3, 40, 9]: both broadcast, so the GEMMs of the
 * backward loop over batch items and both gradients are sums (in f32,
 * rounded once). Against the same backward in f64 (test_autograd.c checks
 * that one by finite differences) on the bf16 values.
 */
TEST(matmul_bf16_backward_with_both_operands_broadcast) {
    const int64_t da[4] = {2, 1, 5, 40}, db[4] = {1, 3, 40, 9}, dd[4] = {2, 3, 5, 9};
    tfc_tensor *a = rand_of(da, 4, TFC_DTYPE_BF16, 41), *b = rand_of(db, 4, TFC_DTYPE_BF16, 42);
    tfc_tensor *dout = rand_of(dd, 4, TFC_DTYPE_BF16, 43), *ga = NULL, *gb = NULL, *x[3] = {NULL, NULL, NULL};
    tfc_tensor *ra = NULL, *rb = NULL;
    CHECK_OK(tfc_tensor_zeros(da, 4, TFC_DTYPE_BF16, &ga));
    CHECK_OK(tfc_tensor_zeros(db, 4, TFC_DTYPE_BF16, &gb));
    CHECK_OK(tfc_matmul_backward(dout, a, b, ga, gb, 0));
    CHECK_OK(tfc_cast(NULL, a, TFC_DTYPE_F64, &x[0]));
    CHECK_OK(tfc_cast(NULL, b, TFC_DTYPE_F64, &x[1]));
    CHECK_OK(tfc_cast(NULL, dout, TFC_DTYPE_F64, &x[2]));
    CHECK_OK(tfc_tensor_zeros(da, 4, TFC_DTYPE_F64, &ra));
    CHECK_OK(tfc_tensor_zeros(db, 4, TFC_DTYPE_F64, &rb));
    CHECK_OK(tfc_matmul_backward(x[2], x[0], x[1], ra, rb, 0));
    double *g1 = t_vals(ga), *r1 = t_vals(ra), *g2 = t_vals(gb), *r2 = t_vals(rb);
    int bad = 0;
    for (int i = 0; i < 2 * 5 * 40; i++) bad += !(fabs(g1[i] - r1[i]) <= 0x1p-8 * fabs(r1[i]) + 1e-5);
    for (int i = 0; i < 3 * 40 * 9; i++) bad += !(fabs(g2[i] - r2[i]) <= 0x1p-8 * fabs(r2[i]) + 1e-5);
    CHECK(bad == 0);
    free(g1), free(r1), free(g2), free(r2);
    tfc_tensor_release(a), tfc_tensor_release(b), tfc_tensor_release(dout), tfc_tensor_release(ga);
    tfc_tensor_release(gb), tfc_tensor_release(ra), tfc_tensor_release(rb);
    for (int i = 0; i < 3; i++) tfc_tensor_release(x[i]);
}

/* ---- refusals ---------------------------------------------------------- */

TEST(mixed_and_unsupported_dtypes_are_refused_clearly) {
    const int64_t d[2] = {3, 4}, d2[2] = {4, 2};
    tfc_tensor *a16 = rand_of(d, 2, TFC_DTYPE_BF16, 21), *b32 = rand_of(d2, 2, TFC_DTYPE_F32, 22);
    tfc_tensor *b16 = rand_of(d2, 2, TFC_DTYPE_BF16, 23), *h = rand_of(d, 2, TFC_DTYPE_F16, 24);
    tfc_tensor *r = NULL, *sentinel = (tfc_tensor *)&r;
    r = sentinel;
    CHECK_ERR(tfc_matmul(NULL, a16, b32, &r), TFC_ERR_DTYPE,
              "tfc_matmul: a is bf16 [3,4], b is f32 [4,2]: dtypes differ");
    CHECK_ERR(tfc_matmul(NULL, h, b16, &r), TFC_ERR_DTYPE,
              "tfc_matmul: a is f16 [3,4]; matmul needs f32, f64 or bf16 on cpu");
    CHECK(r == sentinel);
    /* the explicit backward: dout must have the operands' dtype */
    const int64_t dd[2] = {3, 2};
    tfc_tensor *dout32 = rand_of(dd, 2, TFC_DTYPE_F32, 25), *dout16 = rand_of(dd, 2, TFC_DTYPE_BF16, 26);
    tfc_tensor *da = rand_of(d, 2, TFC_DTYPE_BF16, 27), *da_before = NULL;
    CHECK_OK(tfc_cast(NULL, da, TFC_DTYPE_BF16, &da_before));
    CHECK_ERR(tfc_matmul_backward(dout32, a16, b16, da, NULL, 0), TFC_ERR_DTYPE,
              "tfc_matmul_backward: dout is f32 [3,2], a and b are bf16: dtypes differ");
    /* accumulating a bf16 gradient needs an elementwise add, which the CPU has in f32/f64 only: refused, da intact */
    CHECK_ERR(tfc_matmul_backward(dout16, a16, b16, da, NULL, TFC_GRAD_ACCUMULATE), TFC_ERR_UNSUPPORTED,
              "map is not implemented on cpu:0 for bf16");
    uint16_t x1[12], x2[12];
    CHECK_OK(tfc_tensor_copy_to_host(da, x1, sizeof x1));
    CHECK_OK(tfc_tensor_copy_to_host(da_before, x2, sizeof x2));
    CHECK(!memcmp(x1, x2, sizeof x1));
    /* without accumulation it works */
    CHECK_OK(tfc_matmul_backward(dout16, a16, b16, da, NULL, 0));
    /* the other ops still refuse bf16 on the CPU at their door */
    CHECK_ERR(tfc_add(NULL, a16, a16, &r), TFC_ERR_DTYPE, "tfc_add: a is bf16 [3,4]; this op needs f32 or f64 on cpu");
    tfc_tensor_release(a16), tfc_tensor_release(b32), tfc_tensor_release(b16), tfc_tensor_release(h);
    tfc_tensor_release(dout32), tfc_tensor_release(dout16), tfc_tensor_release(da), tfc_tensor_release(da_before);
}

/* A backend whose gemm takes no bf16 (the stand-in "cuda" with its mask cut) refuses it at the door. */
TEST(bf16_on_a_backend_whose_gemm_cannot_is_refused) {
    tfc_backend *sb = standin_install();
    const int64_t d[2] = {3, 4}, d2[2] = {4, 2};
    tfc_tensor *a = rand_of(d, 2, TFC_DTYPE_BF16, 31), *b = rand_of(d2, 2, TFC_DTYPE_BF16, 32);
    tfc_tensor *ac = NULL, *bc = NULL, *r = NULL, *sentinel = (tfc_tensor *)&r;
    CHECK_OK(tfc_tensor_to_device(a, TFC_DEVICE_CUDA, 0, &ac));
    CHECK_OK(tfc_tensor_to_device(b, TFC_DEVICE_CUDA, 0, &bc));
    /* the stand-in is the CPU's table: bf16 runs there */
    CHECK_OK(tfc_matmul(NULL, ac, bc, &r));
    tfc_tensor_release(r);
    sb->caps.gemm_dtypes = (1u << TFC_DTYPE_F32) | (1u << TFC_DTYPE_F64);
    r = sentinel;
    CHECK_ERR(tfc_matmul(NULL, ac, bc, &r), TFC_ERR_DTYPE,
              "tfc_matmul: a is bf16 [3,4]; matmul needs f32 or f64 on cuda:0");
    CHECK(r == sentinel);
    tfc_tensor_release(ac), tfc_tensor_release(bc), tfc_tensor_release(a), tfc_tensor_release(b);
    standin_remove();
}

/* ---- tfc_linear_bf16 (the autocast Linear) ----------------------------------- */

static tfc_tensor *f32_of(const float *v, int64_t r, int64_t c) {
    tfc_tensor *t = NULL;
    const int64_t d[2] = {r, c};
    CHECK_OK(tfc_tensor_from_data(v, d, 2, TFC_DTYPE_F32, &t));
    return t;
}

/* Hand-derived: 1 + 2^-8 is halfway between the bf16s 1 and 1 + 2^-7 and rounds to even (1). */
TEST(linear_bf16_rounds_operands_and_keeps_f32_results) {
    const float xv[2] = {1.00390625f, 1.0f}, wv[2] = {3.0f, 1.0f + 0x1p-10f}, bv[1] = {0x1p-12f};
    tfc_tensor *x = f32_of(xv, 1, 2), *w = f32_of(wv, 2, 1), *b = NULL, *y = NULL, *y32 = NULL;
    const int64_t n1[1] = {1};
    CHECK_OK(tfc_tensor_from_data(bv, n1, 1, TFC_DTYPE_F32, &b));
    CHECK_OK(tfc_linear_bf16(NULL, x, w, NULL, b, &y));
    CHECK_OK(tfc_linear(NULL, x, w, b, &y32));
    float got = 0, f32 = 0;
    CHECK_OK(tfc_tensor_copy_to_host(y, &got, 4));
    CHECK_OK(tfc_tensor_copy_to_host(y32, &f32, 4));
    CHECK(tfc_tensor_dtype(y) == TFC_DTYPE_F32);
    /* bf16: 1·3 + 1·1 + 2^-12 (the bias is added in f32, unrounded); f32: 3.01171875 + 1.0009765625 + 2^-12 */
    CHECK(got == 4.0f + 0x1p-12f);
    CHECK(f32 == 1.00390625f * 3.0f + (1.0f + 0x1p-10f) + 0x1p-12f);
    tfc_tensor_release(x), tfc_tensor_release(w), tfc_tensor_release(b), tfc_tensor_release(y);
    tfc_tensor_release(y32);
}

TEST(linear_bf16_refuses_mixed_dtypes_and_a_backend_without_bf16) {
    const float v[6] = {1, 2, 3, 4, 5, 6};
    tfc_tensor *x = f32_of(v, 2, 3), *w = f32_of(v, 3, 2), *wb = NULL, *x64 = NULL, *r = NULL,
               *sentinel = (tfc_tensor *)&r;
    CHECK_OK(tfc_cast(NULL, w, TFC_DTYPE_BF16, &wb));
    CHECK_OK(tfc_cast(NULL, x, TFC_DTYPE_F64, &x64));
    r = sentinel;
    CHECK_ERR(tfc_linear_bf16(NULL, x64, w, NULL, NULL, &r), TFC_ERR_DTYPE,
              "tfc_linear_bf16: x is f64 [2,3]; need f32");
    CHECK_ERR(tfc_linear_bf16(NULL, x, wb, NULL, NULL, &r), TFC_ERR_DTYPE,
              "tfc_linear_bf16: w is bf16 [3,2]; need f32");
    CHECK_ERR(tfc_linear_bf16(NULL, x, w, w, NULL, &r), TFC_ERR_DTYPE,
              "tfc_linear_bf16: w_bf16 is f32 [3,2]; need bf16");
    CHECK(r == sentinel);
    tfc_backend *sb = standin_install();
    tfc_tensor *xc = NULL, *wc = NULL;
    CHECK_OK(tfc_tensor_to_device(x, TFC_DEVICE_CUDA, 0, &xc));
    CHECK_OK(tfc_tensor_to_device(w, TFC_DEVICE_CUDA, 0, &wc));
    sb->caps.gemm_dtypes = (1u << TFC_DTYPE_F32) | (1u << TFC_DTYPE_F64);
    CHECK_ERR(tfc_linear_bf16(NULL, xc, wc, NULL, NULL, &r), TFC_ERR_UNSUPPORTED,
              "tfc_linear_bf16: x is on cuda:0, whose backend has no bf16 GEMM");
    CHECK(r == sentinel);
    tfc_tensor_release(xc), tfc_tensor_release(wc);
    standin_remove();
    tfc_tensor_release(x), tfc_tensor_release(w), tfc_tensor_release(wb), tfc_tensor_release(x64);
}

/*
 * The two operand forms of tfc_linear_bf16 (backend gemm_bf16_widen_rows): the
 * CPU's (bf16 values in f32 storage, the f32 GEMM) and the one a tensor-core
 * backend takes (bf16 tensors, the bf16 GEMM; here the CPU's own widening
 * bf16 GEMM under the stand-in table with gemm_bf16_widen_rows = 0) run the same
 * products and sums: output and all three gradients bitwise equal, with and
 * without the cached bf16 weight.
 */
TEST(linear_bf16_operand_forms_agree_bitwise) {
    /* the CPU's table: 33 where its bf16 GEMM widens, 0 on (emulated) AMX tiles */
    CHECK(tfc_cpu_backend_table()->caps.gemm_bf16_widen_rows ==
          (tfc_cpu_bf16_gemm_kind() == TFC_BF16_GEMM_WIDEN ? TFC_GEMM_SMALL_M_MAX + 1 : 0));
    enum { B = 3, T = 37, K = 29, N = 23 };
    const int64_t dx[3] = {B, T, K}, dw[2] = {K, N}, db[1] = {N}, dy[3] = {B, T, N};
    const size_t bytes[4] = {B * T * N * 4, B * T * K * 4, K * N * 4, N * 4}; /* y, dx, dw, db */
    for (int cached = 0; cached < 2; cached++) {
        static float res[2][4][B * T * K];
        for (int form = 0; form < 2; form++) {
            if (form) standin_install()->caps.gemm_bf16_widen_rows = 0;
            tfc_tensor *h[4] = {rand_of(dx, 3, TFC_DTYPE_F32, 60), rand_of(dw, 2, TFC_DTYPE_F32, 61),
                                rand_of(db, 1, TFC_DTYPE_F32, 62), rand_of(dy, 3, TFC_DTYPE_F32, 63)};
            tfc_tensor *t[4] = {NULL}, *wb = NULL, *y = NULL, *gr[3] = {NULL};
            for (int i = 0; i < 4; i++) {
                if (form)
                    CHECK_OK(tfc_tensor_to_device(h[i], TFC_DEVICE_CUDA, 0, &t[i]));
                else
                    t[i] = tfc_tensor_retain(h[i]);
                if (i < 3) CHECK_OK(tfc_tensor_set_requires_grad(t[i], 1));
            }
            if (cached) CHECK_OK(tfc_cast(NULL, t[1], TFC_DTYPE_BF16, &wb));
            tfc_graph *g = NULL;
            CHECK_OK(tfc_graph_new(&g));
            CHECK_OK(tfc_linear_bf16(g, t[0], t[1], wb, t[2], &y));
            CHECK_OK(tfc_graph_backward(g, y, t[3]));
            CHECK_OK(tfc_tensor_copy_to_host(y, res[form][0], bytes[0]));
            for (int i = 0; i < 3; i++) {
                CHECK_OK(tfc_tensor_grad(t[i], &gr[i]));
                CHECK_OK(tfc_tensor_copy_to_host(gr[i], res[form][1 + i], bytes[1 + i]));
                tfc_tensor_release(gr[i]);
            }
            tfc_graph_release(g);
            tfc_tensor_release(y), tfc_tensor_release(wb);
            for (int i = 0; i < 4; i++) tfc_tensor_release(t[i]), tfc_tensor_release(h[i]);
            if (form) standin_remove();
        }
        for (int k = 0; k < 4; k++)
            if (memcmp(res[0][k], res[1][k], bytes[k]) != 0)
                TFC_FAIL_AT("cached %d: result %d (y, dx, dw, db) differs between the forms", cached, k);
        tfc_test_checks += 4;
    }
}

/*
 * tfc_attention_autocast on the CPU, whose backend leaves autocast attention
 * f32 (autocast_attention 0): tfc_attention itself, bitwise, gradients too.
 * (CUDA's bf16 path: tests/cuda/test_cuda_ops.c.)
 */
TEST(attention_autocast_on_the_cpu_is_f32_attention) {
    const int64_t d[4] = {2, 2, 9, 8};
    tfc_tensor *x[2][3], *o[2] = {NULL, NULL}, *l[2] = {NULL, NULL}, *gq[2] = {NULL, NULL};
    for (int r = 0; r < 2; r++) {
        for (int i = 0; i < 3; i++) {
            x[r][i] = rand_of(d, 4, TFC_DTYPE_F32, 40 + (uint64_t)i);
            CHECK_OK(tfc_tensor_set_requires_grad(x[r][i], 1));
        }
        tfc_graph *g = NULL;
        CHECK_OK(tfc_graph_new(&g));
        if (r)
            CHECK_OK(tfc_attention_autocast(g, x[r][0], x[r][1], x[r][2], 1, 0.3, &o[r]));
        else
            CHECK_OK(tfc_attention(g, x[r][0], x[r][1], x[r][2], 1, 0.3, &o[r]));
        CHECK(tfc_tensor_dtype(o[r]) == TFC_DTYPE_F32);
        CHECK_OK(tfc_sum(g, o[r], NULL, 0, 0, &l[r]));
        CHECK_OK(tfc_graph_backward(g, l[r], NULL));
        CHECK_OK(tfc_tensor_grad(x[r][0], &gq[r]));
        tfc_graph_release(g);
    }
    CHECK(memcmp(tfc_tensor_data(o[0]), tfc_tensor_data(o[1]), 2 * 2 * 9 * 8 * 4) == 0);
    CHECK(gq[0] && gq[1] && memcmp(tfc_tensor_data(gq[0]), tfc_tensor_data(gq[1]), 2 * 2 * 9 * 8 * 4) == 0);
    tfc_tensor *out = (tfc_tensor *)0x1;
    CHECK_ERR(tfc_attention_autocast(NULL, NULL, x[0][1], x[0][2], 1, 0.3, &out), TFC_ERR_INVALID_ARG,
              "tfc_attention_autocast: q is NULL");
    for (int r = 0; r < 2; r++) {
        for (int i = 0; i < 3; i++) tfc_tensor_release(x[r][i]);
        tfc_tensor_release(o[r]), tfc_tensor_release(l[r]), tfc_tensor_release(gq[r]);
    }
}
