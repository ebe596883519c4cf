/*
 * C = alpha · op(A) · op(B) + beta · C for row-major matrices, where op(X)
 * is X or Xᵀ. Transposes are flags, never copies. Backed by CBLAS
 * (OpenBLAS) when built with it, else by the blocked C kernel below.
 */
#ifndef TFC_CPU_GEMM_H
#define TFC_CPU_GEMM_H

#include <stdint.h>

#include "tfcore/core.h"

void tfc_cpu_gemm(tfc_dtype dtype, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                  const void *a, int64_t lda, const void *b, int64_t ldb, double beta, void *c, int64_t ldc);

/* The portable kernel, also used when BLAS is off (exposed for tests). */
void tfc_cpu_gemm_blocked(tfc_dtype dtype, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                          const void *a, int64_t lda, const void *b, int64_t ldb, double beta, void *c, int64_t ldc);

/*
 * Below this many multiply-adds (~0.5 MFLOP, tens of microseconds) waking a
 * second thread costs more than it saves; OpenBLAS's own threshold is of the
 * same order.
 */
#define TFC_GEMM_SPLIT_MIN_MNK (1 << 18)

/*
 * bf16 GEMM (gemm_bf16.c): C = alpha · op(A) · op(B) + beta · C for bf16 A
 * and B, products summed in f32; C is f32 (c_f32) or bf16, rounded once at
 * the end. TFC_ERR_OOM (message set) when scratch cannot be allocated;
 * nothing is written then.
 */
tfc_status tfc_cpu_gemm_bf16(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, double alpha, const uint16_t *a,
                             int64_t lda, const uint16_t *b, int64_t ldb, double beta, void *c, int64_t ldc, int c_f32);

/* "avx512bf16" or "portable": the path tfc_cpu_gemm_bf16 takes now. */
const char *tfc_cpu_bf16_gemm_path(void);
/* 1 when the CPU has AVX512-BF16 (and the library was built with the kernel). */
int tfc_cpu_has_avx512bf16(void);
/* Nonzero forces the portable path (tests; TFC_BF16_GEMM=portable does the same). */
extern int tfc_cpu_bf16_force_portable;

/* The vdpbf16ps kernel exists on x86-64 with a compiler that knows the ISA (GCC 10, clang 9). */
#if defined(__x86_64__) && ((defined(__GNUC__) && __GNUC__ >= 10) || (defined(__clang__) && __clang_major__ >= 9))
#define TFC_BF16_AVX512_BUILT 1
/* f32 C (+)= … as above on a CPU with AVX512-BF16; -1 when scratch cannot be allocated. */
int tfc_cpu_gemm_bf16_avx512(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t *a,
                             int64_t lda, const uint16_t *b, int64_t ldb, float beta, float *c, int64_t ldc);
#else
#define TFC_BF16_AVX512_BUILT 0
#endif

/* OpenBLAS's kernel family before (before != 0) and after the load-time
 * choice in blas_coretype.c; "" without a DYNAMIC_ARCH OpenBLAS. */
const char *tfc_cpu_blas_coretype(int before);

/* 1 when libtfcore set OpenBLAS to one thread at load (blas_threads.c) and
 * tfc_cpu_gemm splits large products over its own OpenMP threads. */
int tfc_cpu_blas_threads_owned(void);

#endif
