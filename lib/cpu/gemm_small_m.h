/*
 * The f32 GEMM of a few rows (gemm_small_m.c): decode steps, where B is read
 * once per call and OpenBLAS's packing would read it three times.
 */
#ifndef TFC_CPU_GEMM_SMALL_M_H
#define TFC_CPU_GEMM_SMALL_M_H

#include <stdint.h>

#include "tfc_config.h"

enum { TFC_GEMM_SMALL_M_MAX = 32 };

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TFC_HAVE_GEMM_SMALL_M 1 /* the AVX-512 kernel is compiled (and runs where the CPU has it) */
#else
#define TFC_HAVE_GEMM_SMALL_M 0
#endif

/*
 * C[m,n] = alpha · A[m,k] · op(B) + beta · C (A not transposed; op(B) = B
 * [k,n] when tb == 0, else Bᵀ of B [n,k]) when 1 <= m <= 32, k >= 1 and the
 * CPU has AVX-512 (and TFC_GEMM_SMALL_M is not "off"): returns 1 having
 * done it, else 0 having touched nothing (the caller's GEMM then runs).
 */
int tfc_cpu_gemm_small_m(int tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                         const float *b, int64_t ldb, float beta, float *c, int64_t ldc);

/* 1 when tfc_cpu_gemm_small_m may run: AVX-512F on this CPU, TFC_GEMM_SMALL_M not "off", tests' switch on. */
int tfc_cpu_gemm_small_m_enabled(void);

/*
 * The same with B in bf16 (gemm_small_m_bf16.c; A and C f32): 1 having done
 * it when tfc_cpu_gemm_small_m_bf16_enabled(), else 0 having touched nothing.
 */
int tfc_cpu_gemm_small_m_bf16(int tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
                              const uint16_t *b, int64_t ldb, float beta, float *c, int64_t ldc);
/* 1 when the bf16 kernel may run: the f32 one may, AVX-512 BW/VL, TFC_BF16_GEMM not "portable". */
int tfc_cpu_gemm_small_m_bf16_enabled(void);

/* Tests: 0 forces the BLAS path, 1 (the default) lets the kernel run where it can. */
extern int tfc_cpu_gemm_small_m_allowed;

#endif
