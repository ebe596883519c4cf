/*
 * Helpers for the CUDA kernel tests: upload/download host f32 arrays as
 * f32 or bf16 device buffers through the module's backend table
 * (lib/backend/backend.h), strided views for the table's view-taking
 * entries, deterministic random inputs, and an all-elements comparison
 * that reports the worst element once.
 */
#ifndef TFC_CUDA_CHECK_H
#define TFC_CUDA_CHECK_H

#include <stdint.h>
#include <stdlib.h>

#include "core/dtype.h"
#include "device/device.h"
#include "tfc_test.h"

extern const tfc_backend *A; /* the CUDA module's backend table, set by main */

/* Round x to what dtype stores (identity for f32). */
static inline float round_dt(float x, int dt) { return dt == TFC_DTYPE_BF16 ? tfc_bf16_to_f32(tfc_f32_to_bf16(x)) : x; }

static inline uint64_t rng_next(uint64_t *s) {
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return *s;
}

/* n values uniform in [lo, hi), rounded to dtype so CPU and GPU see the same inputs. */
static inline float *rand_host(size_t n, float lo, float hi, int dt, uint64_t seed) {
    float *x = malloc((n ? n : 1) * sizeof *x);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++)
        x[i] = round_dt(lo + (hi - lo) * (float)((rng_next(&s) >> 40) * (1.0 / 16777216.0)), dt);
    return x;
}

/* Bytes per element of dt (i64 index buffers included). */
static inline size_t dt_size(int dt) {
    switch (dt) {
    case TFC_DTYPE_BF16:
    case TFC_DTYPE_F16: return 2;
    case TFC_DTYPE_F64:
    case TFC_DTYPE_I64: return 8;
    case TFC_DTYPE_U8:
    case TFC_DTYPE_BOOL: return 1;
    default: return 4;
    }
}

/* Device copy of host f32 data stored as dt (f32 or bf16). */
static inline void *up(const float *h, size_t n, int dt) {
    void *d = NULL;
    size_t es = dt_size(dt);
    if (A->alloc(0, n * es, &d) != TFC_OK) {
        /* Fail this test only: the next test (or process) may still run. */
        TFC_FAIL_AT("alloc of %zu bytes: %s", n * es, A->last_error());
        tfc_test_bail();
    }
    if (dt == TFC_DTYPE_BF16) {
        uint16_t *t = malloc((n ? n : 1) * 2);
        for (size_t i = 0; i < n; i++) t[i] = tfc_f32_to_bf16(h[i]);
        CHECK(A->memcpy(0, d, t, n * 2, TFC_MEMCPY_H2D) == TFC_OK);
        free(t);
    } else {
        CHECK(A->memcpy(0, d, h, n * 4, TFC_MEMCPY_H2D) == TFC_OK);
    }
    return d;
}

/* Uninitialised device buffer of n elements of dt. */
static inline void *dev(size_t n, int dt) {
    void *d = NULL;
    if (A->alloc(0, (n ? n : 1) * dt_size(dt), &d) != TFC_OK) {
        TFC_FAIL_AT("alloc of %zu bytes: %s", (n ? n : 1) * dt_size(dt), A->last_error());
        tfc_test_bail();
    }
    return d;
}

/* Host f32 copy of a device buffer of dt, f32 or bf16 (waits for the stream). */
static inline float *down(const void *d, size_t n, int dt) {
    float *h = malloc((n ? n : 1) * sizeof *h);
    if (dt == TFC_DTYPE_BF16) {
        uint16_t *t = malloc((n ? n : 1) * 2);
        if (A->memcpy(0, t, d, n * 2, TFC_MEMCPY_D2H) != TFC_OK) TFC_FAIL_AT("memcpy: %s", A->last_error());
        for (size_t i = 0; i < n; i++) h[i] = tfc_bf16_to_f32(t[i]);
        free(t);
    } else if (A->memcpy(0, h, d, n * 4, TFC_MEMCPY_D2H) != TFC_OK) {
        TFC_FAIL_AT("memcpy: %s", A->last_error());
    }
    return h;
}

/* The CUDA module's free ignores the size (its pool knows it), so none is passed. */
static inline void dfree(void *d) { A->free(0, d, 0); }

/* A view of device memory d: dtype, shape and element strides (ndim <= TFC_MAX_DIMS). */
static inline tfc_sview view_nd(void *d, int dt, int32_t ndim, const int64_t *shape, const int64_t *strides) {
    tfc_sview v;
    memset(&v, 0, sizeof v);
    v.data = (char *)d;
    v.dtype = (tfc_dtype)dt;
    v.ndim = ndim;
    for (int32_t i = 0; i < ndim; i++) v.shape[i] = shape[i], v.strides[i] = strides[i];
    return v;
}

/* A contiguous row-major view of shape. */
static inline tfc_sview view_c(void *d, int dt, int32_t ndim, const int64_t *shape) {
    int64_t st[TFC_MAX_DIMS], s = 1;
    for (int32_t i = ndim - 1; i >= 0; i--) st[i] = s, s *= shape[i];
    return view_nd(d, dt, ndim, shape, st);
}

/* A contiguous 1-D view of n elements. */
static inline tfc_sview view_flat(void *d, int dt, int64_t n) { return view_c(d, dt, 1, &n); }

/* Every |got - want| <= tol (1 + |want|); reports the worst element once. */
#define CHECK_ALL(got, want, n, tol, what)                                                            \
    do {                                                                                              \
        tfc_test_checks++;                                                                            \
        size_t worst_ = 0;                                                                            \
        double werr_ = -1.0;                                                                          \
        for (size_t i_ = 0; i_ < (size_t)(n); i_++) {                                                 \
            double g_ = (got)[i_], w_ = (want)[i_];                                                   \
            double e_ = fabs(g_ - w_) / (1.0 + fabs(w_));                                             \
            if (g_ != g_ || w_ != w_) e_ = (g_ != g_ && w_ != w_) ? 0.0 : INFINITY;                   \
            if (isinf(w_) && g_ == w_) e_ = 0.0;                                                      \
            if (e_ > werr_) werr_ = e_, worst_ = i_;                                                  \
        }                                                                                             \
        if ((size_t)(n) > 0 && !(werr_ <= (tol)))                                                     \
            TFC_FAIL_AT("%s: element %zu is %.9g, want %.9g (rel err %.3g > tol %.3g)", what, worst_, \
                        (double)(got)[worst_], (double)(want)[worst_], werr_, (double)(tol));         \
    } while (0)

/* CHECK_ALL of n elements of dtype dt downloaded from device buffer d. */
#define CHECK_DEVICE(d, n, dt, want, tol, what)      \
    do {                                             \
        float *got_ = down((d), (n), (dt));          \
        CHECK_ALL(got_, (want), (n), (tol), (what)); \
        free(got_);                                  \
    } while (0)

/* CHECK_OK for table entries: the module's message on failure. */
#define CHECK_CU(expr)                                                                              \
    do {                                                                                            \
        tfc_test_checks++;                                                                          \
        tfc_status s_ = (expr);                                                                     \
        if (s_ != TFC_OK) TFC_FAIL_AT("%s -> %s: %s", #expr, tfc_status_name(s_), A->last_error()); \
    } while (0)

/* The entry must fail with want and a message containing fragment. */
#define CHECK_CU_ERR(expr, want, fragment)                                                             \
    do {                                                                                               \
        tfc_test_checks++;                                                                             \
        tfc_status s_ = (expr);                                                                        \
        if (s_ != (want))                                                                              \
            TFC_FAIL_AT("%s -> %s, wanted %s (%s)", #expr, tfc_status_name(s_), tfc_status_name(want), \
                        A->last_error());                                                              \
        else if (!strstr(A->last_error(), (fragment)))                                                 \
            TFC_FAIL_AT("%s: message '%s' lacks '%s'", #expr, A->last_error(), (fragment));            \
    } while (0)

#endif
