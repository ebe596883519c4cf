/*
 * GPT weights as safetensors: Hugging Face names and layouts (see gpt.h),
 * the config in the metadata so a file is self-describing.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "model/gpt_impl.h"
#include "tfcore/io.h"
#include "tfcore/ops.h"

/*
 * The config's integer fields as metadata keys, in the order files hold
 * them; "format", ln_eps and dtype go around them. Saving, loading and
 * tfc_gpt_load_into's check all walk this list.
 */
static const struct {
    const char *key; /* "tfc." + the field's name */
    size_t offset;
} int_fields[] = {
    {"tfc.n_layer", offsetof(tfc_gpt_config, n_layer)},
    {"tfc.n_head", offsetof(tfc_gpt_config, n_head)},
    {"tfc.n_embd", offsetof(tfc_gpt_config, n_embd)},
    {"tfc.block_size", offsetof(tfc_gpt_config, block_size)},
    {"tfc.vocab_size", offsetof(tfc_gpt_config, vocab_size)},
    {"tfc.bias", offsetof(tfc_gpt_config, bias)},
    {"tfc.tie_weights", offsetof(tfc_gpt_config, tie_weights)},
};
enum { N_INT = sizeof int_fields / sizeof int_fields[0], N_CFG = N_INT + 3 };

static int32_t int_value(const tfc_gpt_config *c, size_t i) {
    return *(const int32_t *)((const char *)c + int_fields[i].offset);
}

/* The config as N_CFG metadata pairs; the values are written into bufs. */
static void config_to_meta(const tfc_gpt_config *c, const char **keys, const char **vals, char bufs[N_CFG][32]) {
    for (int i = 0; i < N_CFG; i++) vals[i] = bufs[i];
    keys[0] = "format"; /* what safetensors readers (transformers) look for */
    snprintf(bufs[0], 32, "pt");
    for (size_t i = 0; i < N_INT; i++) {
        keys[1 + i] = int_fields[i].key;
        snprintf(bufs[1 + i], 32, "%d", int_value(c, i));
    }
    keys[N_INT + 1] = "tfc.ln_eps";
    snprintf(bufs[N_INT + 1], 32, "%.17g", c->ln_eps);
    keys[N_INT + 2] = "tfc.dtype";
    snprintf(bufs[N_INT + 2], 32, "%s", tfc_dtype_name(c->dtype));
}

TFC_API tfc_status tfc_gpt_save(const tfc_gpt *m, const char *path, const char *const *meta_keys,
                                const char *const *meta_values, int32_t n_meta) {
    const char *fn = "tfc_gpt_save";
    TFC_CHECK_NOT_NULL(fn, m);
    TFC_CHECK_NOT_NULL(fn, path);
    if (n_meta < 0) return tfc_err(TFC_ERR_INVALID_ARG, "%s: n_meta is %d, must be >= 0", fn, n_meta);
    if (n_meta > 0) TFC_CHECK_NOT_NULL(fn, meta_keys);
    if (n_meta > 0) TFC_CHECK_NOT_NULL(fn, meta_values);
    tfc_gpt_config c = TFC_GPT_CONFIG_INIT;
    TFC_TRY(tfc_gpt_get_config(m, &c));
    int32_t n;
    const char *const *names;
    tfc_tensor *const *params;
    TFC_TRY(tfc_gpt_params(m, &n, &names, &params));
    const char **keys = malloc(((size_t)n_meta + N_CFG) * sizeof *keys);
    const char **vals = malloc(((size_t)n_meta + N_CFG) * sizeof *vals);
    char bufs[N_CFG][32];
    tfc_status s = TFC_OK;
    if (!keys || !vals) s = tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    if (s == TFC_OK) {
        config_to_meta(&c, keys, vals, bufs);
        for (int32_t i = 0; i < n_meta; i++) {
            keys[N_CFG + i] = meta_keys[i];
            vals[N_CFG + i] = meta_values[i];
        }
        s = tfc_safetensors_save(path, names, params, n, keys, vals, N_CFG + n_meta);
    }
    free(keys);
    free(vals);
    return tfc_err_in(fn, s);
}

static tfc_status meta_int(const char *fn, const char *path, const tfc_safetensors *f, const char *key, int32_t *v) {
    const char *s = NULL;
    TFC_TRY(tfc_safetensors_metadata(f, key, &s));
    char *end = NULL;
    long x = s ? strtol(s, &end, 10) : 0;
    if (!s || !*s || *end || x < INT32_MIN || x > INT32_MAX)
        return tfc_err(TFC_ERR_FORMAT, "%s: '%s' lacks a valid integer metadata entry '%s'", fn, path, key);
    *v = (int32_t)x;
    return TFC_OK;
}

static tfc_status read_config(const char *fn, const char *path, const tfc_safetensors *f, tfc_gpt_config *c) {
    for (size_t i = 0; i < N_INT; i++)
        TFC_TRY(meta_int(fn, path, f, int_fields[i].key, (int32_t *)((char *)c + int_fields[i].offset)));
    const char *eps = NULL, *dt = NULL;
    TFC_TRY(tfc_safetensors_metadata(f, "tfc.ln_eps", &eps));
    TFC_TRY(tfc_safetensors_metadata(f, "tfc.dtype", &dt));
    char *end = NULL;
    if (!eps || !(c->ln_eps = strtod(eps, &end), end && !*end))
        return tfc_err(TFC_ERR_FORMAT, "%s: '%s' lacks a valid metadata entry 'tfc.ln_eps'", fn, path);
    if (dt && strcmp(dt, "f64") == 0)
        c->dtype = TFC_DTYPE_F64;
    else if (dt && strcmp(dt, "f32") == 0)
        c->dtype = TFC_DTYPE_F32;
    else
        return tfc_err(TFC_ERR_FORMAT, "%s: '%s' lacks a valid metadata entry 'tfc.dtype'", fn, path);
    return TFC_OK;
}

/* Copy every parameter of m from f, converting dtype; shapes must match. Nothing is written unless all match. */
static tfc_status copy_params(const char *fn, const char *path, tfc_gpt *m, const tfc_safetensors *f) {
    int32_t n;
    const char *const *names;
    tfc_tensor *const *params;
    TFC_TRY(tfc_gpt_params(m, &n, &names, &params));
    tfc_tensor **src = calloc((size_t)n + 1, sizeof *src);
    if (!src) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    tfc_status s = TFC_OK;
    for (int32_t i = 0; i < n && s == TFC_OK; i++) {
        s = tfc_safetensors_find(f, names[i], &src[i]);
        if (s != TFC_OK) {
            s = tfc_err(TFC_ERR_FORMAT, "%s: '%s' has no tensor '%s'", fn, path, names[i]);
            break;
        }
        int64_t a[TFC_MAX_DIMS], b[TFC_MAX_DIMS];
        int32_t na = tfc_tensor_ndim(src[i]), nb = tfc_tensor_ndim(params[i]);
        if (tfc_tensor_shape(src[i], a, TFC_MAX_DIMS) != TFC_OK ||
            tfc_tensor_shape(params[i], b, TFC_MAX_DIMS) != TFC_OK || na != nb ||
            memcmp(a, b, (size_t)na * sizeof a[0]) != 0)
            s = tfc_err(TFC_ERR_FORMAT, "%s: '%s' holds %s as %s, the model needs %s", fn, path, names[i],
                        tfc_fmt_dims(a, na), tfc_fmt_dims(b, nb));
        tfc_dtype dt = tfc_tensor_dtype(src[i]);
        if (s == TFC_OK && dt != TFC_DTYPE_F32 && dt != TFC_DTYPE_F64 && dt != TFC_DTYPE_BF16 && dt != TFC_DTYPE_F16)
            s = tfc_err(TFC_ERR_FORMAT, "%s: '%s' holds %s as %s, need a float dtype", fn, path, names[i],
                        tfc_dtype_name(dt));
    }
    for (int32_t i = 0; i < n && s == TFC_OK; i++) s = tfc_tensor_copy_from(params[i], src[i]);
    for (int32_t i = 0; i < n; i++) tfc_tensor_release(src[i]);
    free(src);
    return tfc_err_in(fn, s);
}

/*
 * The model a file's config describes is built before its tensors are
 * read, so a few bytes of metadata could ask for gigabytes: refuse a config
 * that needs more values than the file holds (each stored value takes at
 * least one byte, so memory stays O(file size)).
 */
static tfc_status check_file_holds_config(const char *fn, const char *path, const tfc_safetensors *f,
                                          const tfc_gpt_config *c) {
    TFC_TRY(tfc_gpt_check_config(fn, c));
    int64_t held = 0;
    for (int32_t i = 0; i < tfc_safetensors_count(f); i++) {
        tfc_tensor *t = NULL;
        TFC_TRY(tfc_safetensors_get(f, i, NULL, &t));
        held += tfc_tensor_numel(t);
        tfc_tensor_release(t);
    }
    const int64_t need = tfc_gpt_config_numel(c);
    if (need > held)
        return tfc_err(TFC_ERR_FORMAT,
                       "%s: '%s' holds %lld values but its config (n_layer %d, n_embd %d, vocab_size %d, "
                       "block_size %d) needs %lld",
                       fn, path, (long long)held, (int)c->n_layer, (int)c->n_embd, (int)c->vocab_size,
                       (int)c->block_size, (long long)need);
    return TFC_OK;
}

TFC_API tfc_status tfc_gpt_load(const char *path, tfc_gpt **out) {
    const char *fn = "tfc_gpt_load";
    TFC_CHECK_NOT_NULL(fn, path);
    TFC_CHECK_NOT_NULL(fn, out);
    tfc_safetensors *f;
    TFC_TRY(tfc_safetensors_load(path, &f));
    tfc_gpt_config c = TFC_GPT_CONFIG_INIT;
    tfc_gpt *m = NULL;
    tfc_status s = read_config(fn, path, f, &c);
    if (s == TFC_OK) s = check_file_holds_config(fn, path, f, &c);
    if (s == TFC_OK) s = tfc_gpt_new(&c, 0, &m);
    if (s == TFC_OK) s = copy_params(fn, path, m, f);
    tfc_safetensors_release(f);
    if (s != TFC_OK) {
        tfc_gpt_release(m);
        return tfc_err_in(fn, s);
    }
    *out = m;
    return TFC_OK;
}

TFC_API tfc_status tfc_gpt_load_into(tfc_gpt *m, const char *path) {
    const char *fn = "tfc_gpt_load_into";
    TFC_CHECK_NOT_NULL(fn, m);
    TFC_CHECK_NOT_NULL(fn, path);
    tfc_gpt_config mine = TFC_GPT_CONFIG_INIT, theirs = TFC_GPT_CONFIG_INIT;
    TFC_TRY(tfc_gpt_get_config(m, &mine));
    tfc_safetensors *f;
    TFC_TRY(tfc_safetensors_load(path, &f));
    tfc_status s = read_config(fn, path, f, &theirs);
    for (size_t i = 0; s == TFC_OK && i < N_INT; i++)
        if (int_value(&mine, i) != int_value(&theirs, i))
            s = tfc_err(TFC_ERR_INVALID_ARG, "%s: '%s' has %s %d but the model has %d", fn, path,
                        int_fields[i].key + strlen("tfc."), int_value(&theirs, i), int_value(&mine, i));
    if (s == TFC_OK) s = copy_params(fn, path, m, f);
    tfc_safetensors_release(f);
    return tfc_err_in(fn, s);
}
