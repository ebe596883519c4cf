/*
 * bf16 GEMM on AMX tiles (Sapphire Rapids and later Xeons):
 *   C[m, n] (f32) = alpha · op(A)[m, k] · op(B)[k, n] + beta · C
 * with bf16 A and B and f32 products summed in f32, as gemm_bf16.c's
 * contract. tdpbf16ps multiplies a 16×32 bf16 tile of A by a 32×16 tile of
 * B, stored as 16 rows of k-pairs (VNNI: B[2p][j], B[2p+1][j] side by
 * side), into a 16×16 f32 tile of C:
 *   C[i][j] += A[i][2p]·B[2p][j] + A[i][2p+1]·B[2p+1][j],  p = 0..15.
 *
 * Layout. op(A) is packed into 16-row × 32-k panels, op(B) into 32-k × 16-
 * column panels in the pair layout, both zero-padded to multiples of 32
 * rows / columns and 32 k, so every tile is whole and the padding adds
 * zeros. C is computed in 32×32 blocks, each of four accumulator tiles fed
 * by two A and two B tiles per 32-k step (8 tiles: all of them), so the
 * four tdpbf16ps of a step are independent (blocks in L2-sized column
 * groups, block_at); a block's accumulators are
 * stored to a 32×32 f32 scratch and merged into C with alpha and beta
 * (beta = 0 never reads C). Blocks are split between threads; each thread
 * loads the tile configuration (tile state is per thread) and releases it.
 *
 * The same tile program runs on emulated tiles (plain C, the instruction's
 * definition above, f32 sums in its order) where TFC_BF16_GEMM=amx-emulated
 * asks for it: that is how the packing, padding, blocking and the alpha /
 * beta merge are tested on machines without AMX (tests/c/test_bf16.c, the
 * bf16_amx_emulated suite). Which path runs: tfc_cpu_bf16_gemm_kind()
 * (cpu_features.c); the real tiles only with TFC_BF16_GEMM=amx, until they
 * have run on AMX hardware (bench/amx_probe.sh does that).
 */
#include <stdint.h>
#include <string.h>

#include "core/alloc.h"
#include "core/error.h"
#include "cpu/gemm_bf16_amx.h"
#include "cpu/parallel.h"

enum { TILE_ROWS = 16, TILE_K = 32, BLOCK = 32 };

static int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

/* One 16-row × 32-k block of X, row-major; as 16 × 16 k-pairs (32-bit words) for the pair layout. */
typedef union block16 {
    uint16_t h[TILE_ROWS][TILE_K];
    uint32_t w[TILE_ROWS][TILE_K / 2];
} block16;

/* X[r0.., k0..] into b, X[r][kk] = trans ? x[kk·ld + r] : x[r·ld + kk], zero outside [rows, k]. */
static void gather(const uint16_t *x, int64_t ld, int trans, int64_t rows, int64_t k, int64_t r0, int64_t k0,
                   block16 *b) {
    if (r0 + TILE_ROWS <= rows && k0 + TILE_K <= k) { /* whole: no bounds to check per element */
        if (!trans)
            for (int r = 0; r < TILE_ROWS; r++) memcpy(b->h[r], x + (r0 + r) * ld + k0, sizeof b->h[r]);
        else
            for (int c = 0; c < TILE_K; c++) {
                const uint16_t *s = x + (k0 + c) * ld + r0;
                for (int r = 0; r < TILE_ROWS; r++) b->h[r][c] = s[r];
            }
        return;
    }
    const int64_t nr = rows - r0 < TILE_ROWS ? rows - r0 : TILE_ROWS, nc = k - k0 < TILE_K ? k - k0 : TILE_K;
    memset(b, 0, sizeof *b);
    for (int64_t r = 0; r < nr; r++)
        for (int64_t c = 0; c < nc; c++) b->h[r][c] = trans ? x[(k0 + c) * ld + r0 + r] : x[(r0 + r) * ld + k0 + c];
}

/*
 * X [rows, k] → panels of 16 rows × 32 k, zero outside [rows, k]: panel
 * (rb, kb) at out + (rb · kp/32 + kb) · 512, X as gather() reads it. Inside
 * a panel, for A (pairs = 0) row-major, 32 k a row (a 64-byte tile row); for
 * B (pairs = 1, X = op(B)ᵀ, its 16 columns as the rows) the pair layout:
 * k-pair p's row holds (X[j][2p], X[j][2p+1]) for j = 0..15, at
 * (p · 16 + j) · 2, i.e. the 16 × 16 transpose of the block's 32-bit pairs.
 * A transposed X in the pair layout is two of its stored rows interleaved,
 * read straight from x. Whole blocks take no per-element bounds checks: at
 * AMX's rate (~1 TFLOP/s a core) the packing is the GEMM's visible cost;
 * this form packs at 0.14-0.62 ns an element against 1.4-1.8 for the
 * per-element loop it replaced (side by side on an AVX-512 Xeon, gcc -O2,
 * 768-3072-sized operands, all four layouts; docs/PERFORMANCE.md).
 */
static void pack(const uint16_t *x, int64_t ld, int trans, int64_t rows, int64_t k, int64_t rowsp, int64_t kp,
                 int pairs, uint16_t *out) {
    const int64_t nkb = kp / TILE_K;
    TFC_PARALLEL_RANGE(rowsp / TILE_ROWS, 4, lo, hi) {
        for (int64_t rb = lo; rb < hi; rb++)
            for (int64_t kb = 0; kb < nkb; kb++) {
                uint16_t *t = out + (rb * nkb + kb) * (TILE_ROWS * TILE_K);
                const int64_t r0 = rb * TILE_ROWS, k0 = kb * TILE_K;
                block16 b, o;
                if (pairs && trans && r0 + TILE_ROWS <= rows && k0 + TILE_K <= k) {
                    for (int p = 0; p < TILE_K / 2; p++) {
                        const uint16_t *s0 = x + (k0 + 2 * p) * ld + r0, *s1 = s0 + ld;
                        for (int r = 0; r < TILE_ROWS; r++) o.h[p][2 * r] = s0[r], o.h[p][2 * r + 1] = s1[r];
                    }
                } else {
                    gather(x, ld, trans, rows, k, r0, k0, &b);
                    if (!pairs) {
                        memcpy(t, &b, sizeof b);
                        continue;
                    }
                    for (int p = 0; p < TILE_K / 2; p++)
                        for (int r = 0; r < TILE_ROWS; r++) o.w[p][r] = b.w[r][p];
                }
                memcpy(t, &o, sizeof o);
            }
    }
}

/* Block (bi, bj)'s 32×32 f32 products from its scratch into C: alpha · acc + beta · C, inside [m, n] only. */
static void merge(const float *acc, int64_t i0, int64_t j0, int64_t m, int64_t n, float alpha, float beta, float *c,
                  int64_t ldc) {
    const int64_t ie = i0 + BLOCK < m ? i0 + BLOCK : m, je = j0 + BLOCK < n ? j0 + BLOCK : n;
    for (int64_t i = i0; i < ie; i++) {
        const float *s = acc + (i - i0) * BLOCK;
        float *d = c + i * ldc;
        if (beta == 0)
            for (int64_t j = j0; j < je; j++) d[j] = alpha * s[j - j0];
        else
            for (int64_t j = j0; j < je; j++) d[j] = alpha * s[j - j0] + beta * d[j];
    }
}

/*
 * Block blk's coordinates in an L2-friendly order: the block columns go in
 * groups of gj (a group's B panels, gj · 32 columns × kp of bf16, about
 * B_GROUP_BYTES: L2-sized), and inside a group every block row before the
 * next group. A thread's consecutive blocks then reuse one A panel across
 * the group's columns and the group's B panels across rows from L2, where
 * row-major block order streamed all of op(B) past every A panel (e.g. a
 * 3072×768 weight is 4.7 MB of panels). All groups but the last are whole.
 */
enum { B_GROUP_BYTES = 1 << 20 };

static int64_t group_cols(int64_t nbj, int64_t nkb) {
    const int64_t gj = B_GROUP_BYTES / (BLOCK * nkb * TILE_K * 2);
    return gj < 1 ? 1 : gj < nbj ? gj : nbj;
}

static void block_at(int64_t blk, int64_t nbi, int64_t nbj, int64_t gj, int64_t *bi, int64_t *bj) {
    const int64_t g = blk / (nbi * gj), r = blk % (nbi * gj);
    const int64_t gw = nbj - g * gj < gj ? nbj - g * gj : gj;
    *bi = r / gw;
    *bj = g * gj + r % gw;
}

/* ---- emulated tiles: tdpbf16ps by its definition ---- */

typedef struct etile {
    uint8_t row[TILE_ROWS][64];
} etile;

static float bf16_value(const uint8_t *p) {
    uint32_t u = (uint32_t)(p[0] | p[1] << 8) << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void etile_load(etile *t, const void *base, int64_t stride) {
    for (int r = 0; r < TILE_ROWS; r++) memcpy(t->row[r], (const uint8_t *)base + r * stride, 64);
}

/* c += a · b: a 16 rows × 16 bf16 pairs, b 16 pair-rows × 16 columns, c 16 × 16 f32 */
static void etile_dp(etile *c, const etile *a, const etile *b) {
    for (int i = 0; i < TILE_ROWS; i++)
        for (int j = 0; j < TILE_ROWS; j++) {
            float s;
            memcpy(&s, &c->row[i][4 * j], 4);
            for (int p = 0; p < TILE_K / 2; p++) {
                s += bf16_value(&a->row[i][4 * p]) * bf16_value(&b->row[p][4 * j]);
                s += bf16_value(&a->row[i][4 * p + 2]) * bf16_value(&b->row[p][4 * j + 2]);
            }
            memcpy(&c->row[i][4 * j], &s, 4);
        }
}

static void blocks_emulated(int64_t lo, int64_t hi, int64_t nbi, int64_t nbj, int64_t nkb, const uint16_t *ap,
                            const uint16_t *bp, int64_t m, int64_t n, float alpha, float beta, float *c, int64_t ldc) {
    etile t[8];
    float acc[BLOCK * BLOCK];
    const int64_t gj = group_cols(nbj, nkb);
    for (int64_t blk = lo; blk < hi; blk++) {
        int64_t bi, bj;
        block_at(blk, nbi, nbj, gj, &bi, &bj);
        memset(t, 0, 4 * sizeof *t);
        for (int64_t kb = 0; kb < nkb; kb++) {
            etile_load(&t[4], ap + ((2 * bi) * nkb + kb) * 512, 64);
            etile_load(&t[5], ap + ((2 * bi + 1) * nkb + kb) * 512, 64);
            etile_load(&t[6], bp + ((2 * bj) * nkb + kb) * 512, 64);
            etile_load(&t[7], bp + ((2 * bj + 1) * nkb + kb) * 512, 64);
            etile_dp(&t[0], &t[4], &t[6]);
            etile_dp(&t[1], &t[4], &t[7]);
            etile_dp(&t[2], &t[5], &t[6]);
            etile_dp(&t[3], &t[5], &t[7]);
        }
        for (int q = 0; q < 4; q++) /* tile q is rows (q/2)·16.., columns (q%2)·16.. of the block */
            for (int r = 0; r < TILE_ROWS; r++)
                memcpy(acc + ((q / 2) * TILE_ROWS + r) * BLOCK + (q % 2) * TILE_ROWS, t[q].row[r], 64);
        merge(acc, bi * BLOCK, bj * BLOCK, m, n, alpha, beta, c, ldc);
    }
}

/* ---- AMX tiles: the same program ---- */

#if TFC_HAVE_AMX
#include <immintrin.h>

typedef struct tilecfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tilecfg;

__attribute__((target("amx-tile,amx-bf16"))) static void blocks_amx(int64_t lo, int64_t hi, int64_t nbi, int64_t nbj,
                                                                    int64_t nkb, const uint16_t *ap, const uint16_t *bp,
                                                                    int64_t m, int64_t n, float alpha, float beta,
                                                                    float *c, int64_t ldc) {
    tilecfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) {
        cfg.rows[t] = TILE_ROWS;
        cfg.colsb[t] = 64;
    }
    _tile_loadconfig(&cfg);
    _Alignas(64) float acc[BLOCK * BLOCK];
    const int64_t gj = group_cols(nbj, nkb);
    for (int64_t blk = lo; blk < hi; blk++) {
        int64_t bi, bj;
        block_at(blk, nbi, nbj, gj, &bi, &bj);
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
        for (int64_t kb = 0; kb < nkb; kb++) {
            _tile_loadd(4, ap + ((2 * bi) * nkb + kb) * 512, 64);
            _tile_loadd(5, ap + ((2 * bi + 1) * nkb + kb) * 512, 64);
            _tile_loadd(6, bp + ((2 * bj) * nkb + kb) * 512, 64);
            _tile_loadd(7, bp + ((2 * bj + 1) * nkb + kb) * 512, 64);
            _tile_dpbf16ps(0, 4, 6);
            _tile_dpbf16ps(1, 4, 7);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
        }
        /* tile q at rows (q/2)·16, columns (q%2)·16 of the 32×32 scratch (row stride 128 bytes) */
        _tile_stored(0, acc, BLOCK * 4);
        _tile_stored(1, acc + TILE_ROWS, BLOCK * 4);
        _tile_stored(2, acc + TILE_ROWS * BLOCK, BLOCK * 4);
        _tile_stored(3, acc + TILE_ROWS * BLOCK + TILE_ROWS, BLOCK * 4);
        merge(acc, bi * BLOCK, bj * BLOCK, m, n, alpha, beta, c, ldc);
    }
    _tile_release();
}
#endif

tfc_status tfc_cpu_gemm_bf16_tiles(int emulated, int ta, int tb, int64_t m, int64_t n, int64_t k, double alpha,
                                   const uint16_t *a, int64_t lda, const uint16_t *b, int64_t ldb, double beta,
                                   float *c, int64_t ldc) {
#if !TFC_HAVE_AMX
    if (!emulated) return tfc_err(TFC_ERR_UNSUPPORTED, "gemm: this build has no AMX code");
#endif
    const int64_t mp = round_up(m, BLOCK), np = round_up(n, BLOCK), kp = round_up(k, TILE_K);
    const size_t abytes = (size_t)(mp * kp) * 2, bbytes = (size_t)(np * kp) * 2;
    uint16_t *ap = tfc_host_alloc(abytes), *bp = tfc_host_alloc(bbytes);
    if (!ap || !bp) {
        tfc_host_free(ap, abytes);
        tfc_host_free(bp, bbytes);
        return tfc_err(TFC_ERR_OOM, "gemm: out of memory for %zu bytes of bf16 tile panels", abytes + bbytes);
    }
    pack(a, lda, ta, m, k, mp, kp, 0, ap);  /* op(A) [m, k] */
    pack(b, ldb, !tb, n, k, np, kp, 1, bp); /* op(B)ᵀ [n, k]: element (j, kk) is op(B)[kk][j] */
    const int64_t nbi = mp / BLOCK, nbj = np / BLOCK, nkb = kp / TILE_K;
    /* a block is 32·32·k multiply-adds: a few blocks a thread pay for waking it */
    TFC_PARALLEL_RANGE(nbi * nbj, 4, lo, hi) {
#if TFC_HAVE_AMX
        if (!emulated)
            blocks_amx(lo, hi, nbi, nbj, nkb, ap, bp, m, n, (float)alpha, (float)beta, c, ldc);
        else
#endif
            blocks_emulated(lo, hi, nbi, nbj, nkb, ap, bp, m, n, (float)alpha, (float)beta, c, ldc);
    }
    tfc_host_free(ap, abytes);
    tfc_host_free(bp, bbytes);
    return TFC_OK;
}
