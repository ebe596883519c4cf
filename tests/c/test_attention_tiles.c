/*
 * The tile algorithm of the tensor-core attention (cuda/attention_flash.cu)
 * emulated on the CPU, against a naive double reference. This validates
 * the ALGORITHM and its bookkeeping - the tile-wise online softmax, the
 * log-sum-exp saved for backward, the dk/dv and dq recurrences, which tiles
 * are visited or skipped and which are masked (the functions of
 * cuda/attention_tiles.h, which the kernels include too) on ragged and
 * bottom-right-causal shapes. It does NOT validate the CUDA code: mma
 * fragment layouts, ldmatrix addressing, swizzles and cp.async pipelining
 * are checked only by tests/cuda/test_cuda.c on a GPU (and the kernels'
 * own source by tests/cuda/flash_emulation.cpp).
 *
 * Causal cases run with and without a sliding window W (query i sees keys
 * i + S - T - W < j <= i + S - T): key blocks left of every row's window
 * are skipped, the tiles on its edge masked.
 *
 * The emulation follows the kernels' order: 64-row blocks, key blocks of
 * 64 (forward; dq: 64 for head dim 64, 32 for 128), query steps of 64 / 32
 * (dk/dv), scores in log2 units, P and dS rounded to bf16 before the
 * products they feed (as the kernels' A fragments are), f32 accumulators.
 */
#include <math.h>
#include <stdint.h>

#include "../../cuda/attention_tiles.h"
#include "core/dtype.h"
#include "tfc_test.h"

TFC_TEST_MAIN

static float bf(float x, int round) { return round ? tfc_bf16_to_f32(tfc_f32_to_bf16(x)) : x; }

static float *rnd(size_t n, uint64_t seed) {
    float *x = malloc((n ? n : 1) * sizeof *x);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        x[i] = bf(-1.0f + 2.0f * (float)((s >> 40) * (1.0 / 16777216.0)), 1);
    }
    return x;
}

/* Naive double reference (one head): out, lse, dq, dk, dv; window W as tfc_attention_options.window. */
static void naive(const float *q, const float *k, const float *v, const float *dout, int T, int S, int D, double scale,
                  int causal, int W, double *out, double *lse, double *dq, double *dk, double *dv) {
    double *p = malloc((size_t)S * 8);
    memset(dq, 0, (size_t)T * D * 8), memset(dk, 0, (size_t)S * D * 8), memset(dv, 0, (size_t)S * D * 8);
    for (int i = 0; i < T; i++) {
        double m = -INFINITY, sum = 0, delta = 0;
        for (int j = 0; j < S; j++) {
            double s = 0;
            for (int d = 0; d < D; d++) s += (double)q[i * D + d] * k[j * D + d];
            int seen = !causal || (j <= i + S - T && (W <= 0 || j > i + S - T - W));
            p[j] = seen ? s * scale : -INFINITY;
            m = fmax(m, p[j]);
        }
        for (int j = 0; j < S; j++) sum += m == -INFINITY ? 0 : exp(p[j] - m);
        lse[i] = sum > 0 ? m + log(sum) : -INFINITY;
        for (int j = 0; j < S; j++) p[j] = sum > 0 ? exp(p[j] - m) / sum : 0;
        for (int d = 0; d < D; d++) {
            double o = 0;
            for (int j = 0; j < S; j++) o += p[j] * v[j * D + d];
            out[i * D + d] = o;
            delta += o * dout[i * D + d];
        }
        for (int j = 0; j < S; j++) {
            double g = 0;
            for (int d = 0; d < D; d++) g += (double)dout[i * D + d] * v[j * D + d];
            double ds = p[j] * (g - delta);
            for (int d = 0; d < D; d++) {
                dq[i * D + d] += scale * ds * k[j * D + d];
                dk[j * D + d] += scale * ds * q[i * D + d];
                dv[j * D + d] += p[j] * dout[i * D + d];
            }
        }
    }
    free(p);
}

/* Masked score of the tile element (i, j), as the kernels compute it: -inf when masked in a masked tile. */
static int tile_keeps(int mask, int i, int j, int T, int S, int causal, int W) {
    return !mask || fa_visible(i, j, T, S, causal, W);
}

/* Forward, query block by query block; visits[] counts the tiles each (i, j) pair is in. */
static void emu_forward(const float *q, const float *k, const float *v, int T, int S, int D, float scale, int causal,
                        int W, int round, float *out, float *lse, int *visits) {
    const int BM = 64, BN = 64;
    const float sl2 = scale * 1.4426950408889634f;
    float *s = malloc(sizeof(float) * BN), *o = malloc(sizeof(float) * D);
    for (int q0 = 0; q0 < T; q0 += BM) {
        int kend = fa_key_end(q0, BM, T, S, causal), kstart = fa_key_start(q0, T, S, causal, W) / BN * BN;
        for (int i = q0; i < q0 + BM && i < T; i++) {
            float m = -INFINITY, l = 0;
            for (int d = 0; d < D; d++) o[d] = 0;
            for (int j0 = kstart; j0 < kend; j0 += BN) {
                int mask = fa_tile_needs_mask(q0, BM, j0, BN, T, S, causal, W);
                float mx = m;
                for (int jj = 0; jj < BN; jj++) {
                    int j = j0 + jj;
                    float acc = 0;
                    /* rows past S are zero-filled in shared memory */
                    if (j < S)
                        for (int d = 0; d < D; d++) acc += q[i * D + d] * k[j * D + d];
                    s[jj] = tile_keeps(mask, i, j, T, S, causal, W) ? acc * sl2 : -INFINITY;
                    if (j < S && s[jj] != -INFINITY) visits[(size_t)i * S + j]++;
                    mx = fmaxf(mx, s[jj]);
                }
                float mu = mx == -INFINITY ? 0.0f : mx, corr = exp2f(m - mu);
                m = mx;
                l *= corr;
                for (int d = 0; d < D; d++) o[d] *= corr;
                for (int jj = 0; jj < BN; jj++) {
                    float p = exp2f(s[jj] - mu);
                    l += p;
                    float pb = bf(p, round);
                    if (j0 + jj < S)
                        for (int d = 0; d < D; d++) o[d] += pb * v[(j0 + jj) * D + d];
                }
            }
            float inv = l > 0 ? 1.0f / l : 0.0f;
            for (int d = 0; d < D; d++) out[i * D + d] = bf(o[d] * inv, round);
            lse[i] = l > 0 ? (m + log2f(l)) * 0.6931471805599453f : -INFINITY;
        }
    }
    free(s), free(o);
}

/* Backward: prep (Delta, lse in log2 units), the dk/dv pass over key blocks, the dq pass over query blocks. */
static void emu_backward(const float *q, const float *k, const float *v, const float *out, const float *dout,
                         const float *lse, int T, int S, int D, float scale, int causal, int W, int round, float *dq,
                         float *dk, float *dv, int *visits_kv, int *visits_q) {
    const int BN = 64, BQ = D == 64 ? 64 : 32, BM = 64, BN2 = D == 64 ? 64 : 32;
    const float sl2 = scale * 1.4426950408889634f;
    float *delta = malloc(sizeof(float) * (T ? T : 1)), *l2 = malloc(sizeof(float) * (T ? T : 1));
    for (int i = 0; i < T; i++) {
        float s = 0;
        for (int d = 0; d < D; d++) s += dout[i * D + d] * out[i * D + d];
        delta[i] = s;
        l2[i] = lse[i] == -INFINITY ? INFINITY : lse[i] * 1.4426950408889634f;
    }
    float *dka = malloc(sizeof(float) * D), *dva = malloc(sizeof(float) * D);
    for (int k0 = 0; k0 < S; k0 += BN) {
        int qs = fa_query_start(k0, T, S, causal), qe = fa_query_end(k0, BN, T, S, causal, W);
        for (int j = k0; j < k0 + BN && j < S; j++) {
            for (int d = 0; d < D; d++) dka[d] = dva[d] = 0;
            for (int i0 = qs; i0 < qe; i0 += BQ) {
                int mask = fa_tile_needs_mask(i0, BQ, k0, BN, T, S, causal, W);
                for (int i = i0; i < i0 + BQ; i++) {
                    float s = 0, dp = 0;
                    int in = i < T; /* rows past T are zero-filled, lse +inf, Delta 0 */
                    for (int d = 0; in && d < D; d++)
                        s += k[j * D + d] * q[i * D + d], dp += v[j * D + d] * dout[i * D + d];
                    float p = exp2f(s * sl2 - (in ? l2[i] : INFINITY));
                    if (!tile_keeps(mask, i, j, T, S, causal, W)) p = 0;
                    if (in && p > 0) visits_kv[(size_t)i * S + j]++;
                    float ds = p * (dp - (in ? delta[i] : 0.0f));
                    float pb = bf(p, round), dsb = bf(ds, round);
                    for (int d = 0; in && d < D; d++) dva[d] += pb * dout[i * D + d], dka[d] += dsb * q[i * D + d];
                }
            }
            for (int d = 0; d < D; d++) dk[j * D + d] = bf(dka[d] * scale, round), dv[j * D + d] = bf(dva[d], round);
        }
    }
    float *dqa = malloc(sizeof(float) * D);
    for (int q0 = 0; q0 < T; q0 += BM) {
        int kend = fa_key_end(q0, BM, T, S, causal), kstart = fa_key_start(q0, T, S, causal, W) / BN2 * BN2;
        for (int i = q0; i < q0 + BM && i < T; i++) {
            for (int d = 0; d < D; d++) dqa[d] = 0;
            for (int j0 = kstart; j0 < kend; j0 += BN2) {
                int mask = fa_tile_needs_mask(q0, BM, j0, BN2, T, S, causal, W);
                for (int j = j0; j < j0 + BN2; j++) {
                    float s = 0, dp = 0;
                    for (int d = 0; j < S && d < D; d++)
                        s += q[i * D + d] * k[j * D + d], dp += dout[i * D + d] * v[j * D + d];
                    float p = exp2f(s * sl2 - l2[i]);
                    if (!tile_keeps(mask, i, j, T, S, causal, W)) p = 0;
                    if (j < S && p > 0) visits_q[(size_t)i * S + j]++;
                    float dsb = bf(p * (dp - delta[i]), round);
                    for (int d = 0; j < S && d < D; d++) dqa[d] += dsb * k[j * D + d];
                }
            }
            for (int d = 0; d < D; d++) dq[i * D + d] = bf(dqa[d] * scale, round);
        }
    }
    free(delta), free(l2), free(dka), free(dva), free(dqa);
}

/* Worst |got - want| / (1 + |want|); -inf == -inf counts as equal. */
static double worst(const float *got, const double *want, size_t n) {
    double w = 0;
    for (size_t i = 0; i < n; i++) {
        if (isinf(want[i]) && got[i] == want[i]) continue;
        double e = fabs(got[i] - want[i]) / (1 + fabs(want[i]));
        if (!(e <= w)) w = isnan(e) ? INFINITY : e;
    }
    return w;
}

static void run_case(int T, int S, int D, int causal, int W, int round) {
    const float scale = 1.0f / sqrtf((float)D);
    float *q = rnd((size_t)T * D, 1), *k = rnd((size_t)S * D, 2), *v = rnd((size_t)S * D, 3),
          *dout = rnd((size_t)T * D, 4);
    double *ro = malloc(sizeof(double) * T * D + 8), *rl = malloc(sizeof(double) * T + 8),
           *rdq = malloc(sizeof(double) * T * D + 8), *rdk = malloc(sizeof(double) * S * D + 8),
           *rdv = malloc(sizeof(double) * S * D + 8);
    naive(q, k, v, dout, T, S, D, scale, causal, W, ro, rl, rdq, rdk, rdv);
    float *o = malloc(sizeof(float) * T * D + 4), *l = malloc(sizeof(float) * T + 4);
    float *dq = malloc(sizeof(float) * T * D + 4), *dk = malloc(sizeof(float) * S * D + 4),
          *dv = malloc(sizeof(float) * S * D + 4);
    int *vf = calloc((size_t)T * S + 1, sizeof(int)), *vkv = calloc((size_t)T * S + 1, sizeof(int)),
        *vq = calloc((size_t)T * S + 1, sizeof(int));
    emu_forward(q, k, v, T, S, D, scale, causal, W, round, o, l, vf);
    emu_backward(q, k, v, o, dout, l, T, S, D, scale, causal, W, round, dq, dk, dv, vkv, vq);
    /* Every visible pair is in exactly one visited tile of each pass, and no invisible pair contributes. */
    size_t bad = 0;
    for (int i = 0; i < T; i++)
        for (int j = 0; j < S; j++) {
            int want = fa_visible(i, j, T, S, causal, W);
            size_t ij = (size_t)i * S + j;
            /* A visible p can underflow to 0 in the backward passes; only extra visits are impossible there. */
            if (vf[ij] != want || vkv[ij] > want || vq[ij] > want) bad++;
        }
    char what[160];
    snprintf(what, sizeof what, "T %d S %d D %d causal %d window %d bf16 %d", T, S, D, causal, W, round);
    if (bad) TFC_FAIL_AT("%s: %zu (query, key) pairs visited wrongly", what, bad);
    tfc_test_checks++;
    double tol = round ? 2e-2 : 2e-5, tl = round ? 1e-4 : 2e-5;
    double e[6] = {worst(o, ro, (size_t)T * D),   worst(l, rl, (size_t)T),       worst(dq, rdq, (size_t)T * D),
                   worst(dk, rdk, (size_t)S * D), worst(dv, rdv, (size_t)S * D), 0};
    const char *names[5] = {"out", "lse", "dq", "dk", "dv"};
    for (int n = 0; n < 5; n++) {
        tfc_test_checks++;
        if (!(e[n] <= (n == 1 ? tl : tol))) TFC_FAIL_AT("%s: %s rel err %.3g > %.3g", what, names[n], e[n], tol);
    }
    free(q), free(k), free(v), free(dout), free(ro), free(rl), free(rdq), free(rdk), free(rdv);
    free(o), free(l), free(dq), free(dk), free(dv), free(vf), free(vkv), free(vq);
}

TEST(tile_algorithm_matches_naive_attention_f32) {
    /* (T, S, D, causal): ragged T around the 64-row tiles, bottom-right causal with T < S and T > S. */
    const int cfg[][4] = {{1, 1, 64, 1},    {17, 17, 64, 1}, {100, 100, 64, 1}, {100, 100, 128, 1}, {64, 64, 64, 1},
                          {65, 65, 128, 1}, {70, 70, 64, 0}, {33, 100, 64, 1},  {100, 40, 128, 1},  {100, 40, 64, 0},
                          {1, 129, 128, 0}, {129, 1, 64, 1}, {200, 130, 64, 1}, {1000, 1000, 64, 1}};
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) run_case(cfg[c][0], cfg[c][1], cfg[c][2], cfg[c][3], 0, 0);
}

TEST(tile_algorithm_with_a_sliding_window_matches_naive_attention_f32) {
    /* (T, S, D, window): windows inside one tile, across tiles, of one key, at S - 1, with T < S (a KV cache). */
    const int cfg[][4] = {{100, 100, 64, 10},   {100, 100, 128, 64}, {200, 200, 64, 65},
                          {300, 300, 64, 1},    {33, 200, 64, 20},   {1, 300, 128, 100},
                          {130, 130, 128, 129}, {100, 40, 64, 7},    {1000, 1000, 64, 256}};
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) run_case(cfg[c][0], cfg[c][1], cfg[c][2], 1, cfg[c][3], 0);
}

TEST(tile_algorithm_with_bf16_p_and_ds_stays_within_bf16_tolerance) {
    const int cfg[][4] = {{17, 17, 64, 1}, {100, 100, 128, 1}, {33, 100, 64, 1}, {100, 40, 64, 1}, {300, 300, 64, 1}};
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) run_case(cfg[c][0], cfg[c][1], cfg[c][2], cfg[c][3], 0, 1);
    run_case(300, 300, 64, 1, 100, 1);
}

TEST(tile_bookkeeping_edges) {
    /* T > S causal: the first T - S queries see no key. */
    CHECK(fa_key_end(0, 64, 100, 40, 1) == 4);  /* query 63 sees keys 0..3 */
    CHECK(fa_key_end(0, 64, 200, 40, 1) == 0);  /* queries 0..63 see nothing */
    CHECK(fa_key_end(64, 64, 70, 70, 1) == 70); /* ragged last block, square */
    CHECK(fa_key_end(0, 64, 33, 100, 1) == 100);
    CHECK(fa_query_start(64, 100, 40, 1) == 124); /* key 64 > S - 1 anyway: no query */
    CHECK(fa_query_start(0, 100, 40, 1) == 60);
    CHECK(fa_query_start(64, 33, 100, 1) == 0);
    /* A diagonal tile needs the mask, the tile left of it does not. */
    CHECK(fa_tile_needs_mask(64, 64, 64, 64, 1024, 1024, 1, 0));
    CHECK(!fa_tile_needs_mask(64, 64, 0, 64, 1024, 1024, 1, 0));
    CHECK(fa_tile_needs_mask(0, 64, 960, 64, 1024, 1000, 0, 0)); /* a tile past S is masked */
    /* Window 100, T = S = 1024: query 200 sees keys 101..200. */
    CHECK(fa_key_start(200, 1024, 1024, 1, 100) == 101);
    CHECK(fa_key_start(50, 1024, 1024, 1, 100) == 0);
    CHECK(fa_key_start(200, 1024, 1024, 0, 100) == 0); /* no window without causal */
    CHECK(fa_visible(200, 101, 1024, 1024, 1, 100) && !fa_visible(200, 100, 1024, 1024, 1, 100));
    CHECK(fa_query_end(0, 64, 1024, 1024, 1, 100) == 163);    /* key 63 is seen by queries 63..162 */
    CHECK(fa_query_end(960, 64, 1024, 1000, 1, 100) == 1024); /* ragged last key block: key 999 */
    CHECK(fa_query_end(0, 64, 1024, 1024, 1, 0) == 1024);
    /* A tile wholly inside the band needs no mask; one crossing its left edge does. */
    CHECK(!fa_tile_needs_mask(128, 64, 64, 64, 1024, 1024, 1, 200));
    CHECK(fa_tile_needs_mask(128, 64, 64, 64, 1024, 1024, 1, 100));
    /* KV cache, T = 1 of S = 300, window 100: keys 200..299. */
    CHECK(fa_key_start(0, 1, 300, 1, 100) == 200 && fa_key_end(0, 64, 1, 300, 1) == 300);
}
