/* Small helpers shared by the C tests: making tensors, reading them back, reading files. */
#ifndef TFC_TEST_UTIL_H
#define TFC_TEST_UTIL_H

#include "tfc_test.h"

/* f64 tensor of shape dims with values uniform in [lo, hi) from seed. */
static inline tfc_tensor *t_rand(const int64_t *dims, int32_t nd, double lo, double hi, uint64_t seed) {
    tfc_tensor *t = NULL;
    if (tfc_tensor_uniform(dims, nd, TFC_DTYPE_F64, lo, hi, seed, 0, &t) != TFC_OK) abort();
    return t;
}

static inline tfc_tensor *t_from(const double *v, const int64_t *dims, int32_t nd) {
    tfc_tensor *t = NULL;
    if (tfc_tensor_from_data(v, dims, nd, TFC_DTYPE_F64, &t) != TFC_OK) abort();
    return t;
}

/* Contiguous f64 copy of t's values (caller frees). */
static inline double *t_vals(const tfc_tensor *t) {
    int64_t n = tfc_tensor_numel(t);
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    tfc_tensor *c = NULL;
    if (tfc_cast(NULL, t, TFC_DTYPE_F64, &c) != TFC_OK) abort();
    if (tfc_tensor_copy_to_host(c, v, sizeof(double) * (size_t)n) != TFC_OK) abort();
    tfc_tensor_release(c);
    return v;
}

static inline double t_item(const tfc_tensor *t) {
    double v = NAN;
    if (tfc_tensor_item(t, &v) != TFC_OK) abort();
    return v;
}

/* A whole file read into a new buffer (free(); one spare byte at the end); *len its size. */
static inline unsigned char *t_slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(*len + 1);
    CHECK(fread(b, 1, *len, f) == *len);
    fclose(f);
    return b;
}

#endif
