/*
 * bf16 GEMM on the CPU: bf16 A and B, products summed in f32, C in f32 or
 * rounded once to bf16. op(A) and op(B) are widened to f32 (exact: a bf16
 * is the top half of an f32) and multiplied by the f32 GEMM of gemm.c
 * (OpenBLAS, split over our threads). A product of two bf16s has at most
 * 16 significant bits, so it is exact in f32: this is f32 accumulation of
 * the exact products, on every CPU, with or without bf16 instructions.
 *
 * Why not vdpbf16ps or oneDNN (docs/PERFORMANCE.md, "bf16 GEMM"): on the
 * AVX512-BF16 Xeon this was measured on, vdpbf16ps issues at a quarter of
 * vfmadd's rate, so its peak (64 flops per instruction) is half the f32
 * FMA peak; our packed vdpbf16ps kernel (commit 901e1c9, removed) ran at
 * 40-50 GFLOP/s a core and oneDNN 2.6.3 (through PyTorch) at 60-80, against
 * 70-95 for this path. With AMX, tiles should win (the GPU machine's host:
 * 994 GFLOP/s a core of tdpbf16ps against 145 of f32 FMAs): gemm_bf16_amx.c
 * takes the products above the small-M rows when tfc_cpu_bf16_gemm_kind()
 * says so (TFC_BF16_GEMM=amx, opt-in until it has run on AMX hardware).
 * The scratch (the widened operands, and an f32 C when C is bf16) comes
 * from the caching allocator. Because this widens, the CPU table says so
 * (caps.gemm_bf16_widen_rows) and the autocast Linear rounds its operands straight
 * into f32 storage and skips this entry (lib/ops/linear_bf16.c).
 */
#include <string.h>

#include "core/alloc.h"
#include "core/dtype.h"
#include "core/error.h"
#include "cpu/gemm.h"
#include "cpu/gemm_bf16_amx.h"
#include "cpu/gemm_small_m.h"
#include "cpu/parallel.h"

/* Rows × cols of bf16 at src (row stride ld) widened into f32 dst (row stride cols). */
static void widen(const uint16_t *src, int64_t rows, int64_t cols, int64_t ld, float *dst) {
    TFC_PARALLEL_RANGE(rows, (1 << 15) / (cols > 0 ? cols : 1) + 1, lo, hi) {
        for (int64_t r = lo; r < hi; r++)
            for (int64_t j = 0; j < cols; j++) {
                uint32_t u = (uint32_t)src[r * ld + j] << 16;
                memcpy(&dst[r * cols + j], &u, 4);
            }
    }
}

static tfc_status oom(size_t bytes) {
    return tfc_err(TFC_ERR_OOM, "gemm: out of memory for %zu bytes of bf16 GEMM scratch", bytes);
}

/* f32 C = alpha · op(A) · op(B) + beta · C through the f32 GEMM on widened copies. */
static tfc_status widened(int ta, int tb, int64_t m, int64_t n, int64_t k, double alpha, const uint16_t *a, int64_t lda,
                          const uint16_t *b, int64_t ldb, double beta, float *c, int64_t ldc) {
    /* A is stored [M, K] (or [K, M] when ta), B [K, N] (or [N, K]). */
    int64_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
    size_t abytes = (size_t)(ar * ac) * 4, bbytes = (size_t)(br * bc) * 4;
    float *af = tfc_host_alloc(abytes), *bf = tfc_host_alloc(bbytes);
    if (!af || !bf) {
        tfc_host_free(af, abytes);
        tfc_host_free(bf, bbytes);
        return oom(abytes + bbytes);
    }
    widen(a, ar, ac, lda, af);
    widen(b, br, bc, ldb, bf);
    tfc_cpu_gemm_matrix(TFC_DTYPE_F32, ta, tb, m, n, k, alpha, af, ac, bf, bc, beta, c, ldc);
    tfc_host_free(af, abytes);
    tfc_host_free(bf, bbytes);
    return TFC_OK;
}

/*
 * A few rows (decode steps): A widened (m·k, small), B read as bf16 by the
 * small-M kernel (gemm_small_m_bf16.c): half the bytes of f32 B and no
 * widened copy of it. *done = 0 when the kernel does not take the case.
 */
static tfc_status small_m(int ta, int tb, int64_t m, int64_t n, int64_t k, double alpha, const uint16_t *a, int64_t lda,
                          const uint16_t *b, int64_t ldb, double beta, float *c, int64_t ldc, int *done) {
    *done = 0;
    if (ta || m > TFC_GEMM_SMALL_M_MAX || !tfc_cpu_gemm_small_m_bf16_enabled()) return TFC_OK;
    size_t bytes = (size_t)(m * k) * 4;
    float *af = tfc_host_alloc(bytes);
    if (!af) return oom(bytes);
    widen(a, m, k, lda, af);
    *done = tfc_cpu_gemm_small_m_bf16(tb, m, n, k, (float)alpha, af, k, b, ldb, (float)beta, c, ldc);
    tfc_host_free(af, bytes);
    return TFC_OK;
}

static tfc_status gemm_f32c(int ta, int tb, int64_t m, int64_t n, int64_t k, double alpha, const uint16_t *a,
                            int64_t lda, const uint16_t *b, int64_t ldb, double beta, float *c, int64_t ldc) {
    if (k == 0) {
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) c[i * ldc + j] = beta == 0 ? 0.0f : (float)beta * c[i * ldc + j];
        return TFC_OK;
    }
    int done;
    TFC_TRY(small_m(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, &done));
    if (done) return TFC_OK;
    const tfc_bf16_gemm_kind kind = tfc_cpu_bf16_gemm_kind();
    if (kind != TFC_BF16_GEMM_WIDEN)
        return tfc_cpu_gemm_bf16_tiles(kind == TFC_BF16_GEMM_AMX_EMU, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c,
                                       ldc);
    return widened(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

tfc_status tfc_cpu_gemm_bf16(int ta, int tb, int64_t m, int64_t n, int64_t k, double alpha, const uint16_t *a,
                             int64_t lda, const uint16_t *b, int64_t ldb, double beta, void *c, int64_t ldc,
                             int c_f32) {
    if (m == 0 || n == 0) return TFC_OK;
    if (c_f32) return gemm_f32c(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    /* bf16 C: the f32 result in scratch, rounded once. */
    size_t bytes = (size_t)(m * n) * 4;
    float *cf = tfc_host_alloc(bytes);
    if (!cf) return oom(bytes);
    uint16_t *cb = c;
    if (beta != 0)
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) cf[i * n + j] = tfc_bf16_to_f32(cb[i * ldc + j]);
    tfc_status s = gemm_f32c(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, cf, n);
    if (s == TFC_OK) {
        TFC_PARALLEL_RANGE(m, (1 << 15) / n + 1, lo, hi) {
            for (int64_t i = lo; i < hi; i++)
                for (int64_t j = 0; j < n; j++) cb[i * ldc + j] = tfc_f32_to_bf16(cf[i * n + j]);
        }
    }
    tfc_host_free(cf, bytes);
    return s;
}
