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

/* m's parameter `name` (borrowed), or NULL when m has none of that name. */
static inline tfc_tensor *t_gpt_param(const tfc_gpt *m, const char *name) {
    int32_t n;
    const char *const *names;
    tfc_tensor *const *ps;
    if (tfc_gpt_params(m, &n, &names, &ps) != TFC_OK) abort();
    for (int32_t i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0) return ps[i];
    return NULL;
}

/* GPT-2 starts its biases at 0: give them values from seed, so a layer that dropped its bias shows. */
static inline void t_gpt_randomize_biases(tfc_gpt *m, uint64_t seed) {
    int32_t n;
    const char *const *names;
    tfc_tensor *const *ps;
    if (tfc_gpt_params(m, &n, &names, &ps) != TFC_OK) abort();
    for (int32_t i = 0; i < n; i++)
        if (strstr(names[i], ".bias") && tfc_tensor_fill_normal(ps[i], 0.0, 0.1, seed, 1000u * (uint64_t)i) != TFC_OK)
            abort();
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

/*
 * The model the file-format tests write and read: 2 layers, 2 heads, 8
 * dims, block 6, vocabulary 11, seed 7; every parameter drawn from
 * normal(0.1, 0.1) (GPT-2's init zeroes the biases), so each one matters.
 */
static inline tfc_gpt *t_gpt_small(int bias, int tie) {
    tfc_gpt_config c = TFC_GPT_CONFIG_INIT;
    c.n_layer = 2, c.n_head = 2, c.n_embd = 8, c.block_size = 6, c.vocab_size = 11, c.bias = bias, c.tie_weights = tie;
    tfc_gpt *m = NULL;
    CHECK_OK(tfc_gpt_new(&c, 7, &m));
    int32_t n;
    const char *const *names;
    tfc_tensor *const *params;
    CHECK_OK(tfc_gpt_params(m, &n, &names, &params));
    for (int32_t i = 0; i < n; i++) CHECK_OK(tfc_tensor_fill_normal(params[i], 0.1, 0.1, 3, (uint64_t)i * 1000));
    return m;
}

#endif
