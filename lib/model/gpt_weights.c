/*
 * GPT weights as safetensors: Hugging Face names and layouts (see gpt.h),
 * the config in the metadata so a file is self-describing. Reading builds
 * the model the metadata describes and holds the file against it with the
 * loader contract (io/tensor_contract.h, the wanted list from gpt_want.c):
 * every tensor consumed, every dtype checked before conversion, nothing
 * written before all of it checks out.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "model/gpt_impl.h"
#include "model/gpt_want.h"
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
enum { N_INT = sizeof int_fields / sizeof int_fields[0], N_CFG = N_INT + 4 };

static int32_t int_value(const tfc_gpt_config *c, size_t i) {
    return *(const int32_t *)((const char *)c + int_fields[i].offset);
}

/*
 * The Llama family's fields, stored only for those architectures (a GPT-2
 * checkpoint is what it was before them; a file without "tfc.arch" is
 * GPT-2): integers as text, the rope config's reals with %.17g.
 */
typedef enum { META_ARCH, META_I32, META_I64, META_F64 } meta_kind;
static const struct {
    const char *key;
    size_t offset;
    meta_kind kind;
} family_fields[] = {
    {"tfc.arch", offsetof(tfc_gpt_config, arch), META_ARCH}, /* its name: "llama", "mistral", "qwen2" */
    {"tfc.n_kv_head", offsetof(tfc_gpt_config, n_kv_head), META_I32},
    {"tfc.mlp_hidden", offsetof(tfc_gpt_config, mlp_hidden), META_I64},
    {"tfc.attention_bias", offsetof(tfc_gpt_config, attention_bias), META_I32},
    {"tfc.mlp_bias", offsetof(tfc_gpt_config, mlp_bias), META_I32},
    {"tfc.sliding_window", offsetof(tfc_gpt_config, sliding_window), META_I32},
    {"tfc.rope.type", offsetof(tfc_gpt_config, rope.rope_type), META_I32},
    {"tfc.rope.theta", offsetof(tfc_gpt_config, rope.theta), META_F64},
    {"tfc.rope.factor", offsetof(tfc_gpt_config, rope.factor), META_F64},
    {"tfc.rope.low_freq_factor", offsetof(tfc_gpt_config, rope.low_freq_factor), META_F64},
    {"tfc.rope.high_freq_factor", offsetof(tfc_gpt_config, rope.high_freq_factor), META_F64},
    {"tfc.rope.original_max_position_embeddings", offsetof(tfc_gpt_config, rope.original_max_position_embeddings),
     META_I64},
    {"tfc.rope.max_position_embeddings", offsetof(tfc_gpt_config, rope.max_position_embeddings), META_I64},
};
enum { N_FAMILY = sizeof family_fields / sizeof family_fields[0] };

/* Field i of family_fields as text into buf. */
static void family_value(const tfc_gpt_config *c, size_t i, char *buf, size_t n) {
    const char *p = (const char *)c + family_fields[i].offset;
    const char *an = NULL;
    switch (family_fields[i].kind) {
    case META_ARCH:
        an = tfc_gpt_arch_name(*(const int32_t *)p);
        snprintf(buf, n, "%s", an ? an : "?");
        break;
    case META_I32: snprintf(buf, n, "%d", (int)*(const int32_t *)p); break;
    case META_I64: snprintf(buf, n, "%lld", (long long)*(const int64_t *)p); break;
    case META_F64: snprintf(buf, n, "%.17g", *(const double *)p); break;
    }
}

/* The family fields of c from f's metadata; c keeps GPT-2's defaults when f has no "tfc.arch". */
static tfc_status read_family(const char *fn, const char *path, const tfc_safetensors *f, tfc_gpt_config *c) {
    const char *arch = NULL;
    TFC_TRY(tfc_safetensors_metadata(f, "tfc.arch", &arch));
    if (!arch) return TFC_OK;
    for (size_t i = 0; i < N_FAMILY; i++) {
        const char *v = NULL;
        TFC_TRY(tfc_safetensors_metadata(f, family_fields[i].key, &v));
        char *end = NULL;
        char *p = (char *)c + family_fields[i].offset;
        int ok = v && *v;
        if (ok && family_fields[i].kind == META_ARCH) {
            ok = tfc_gpt_arch_from_name(v, (int32_t *)p) == TFC_OK;
            static const char nothing[1] = "";
            end = (char *)nothing;
        } else if (ok && family_fields[i].kind == META_F64) {
            *(double *)p = strtod(v, &end);
        } else if (ok) {
            errno = 0;
            long long x = strtoll(v, &end, 10);
            ok = errno == 0 && (family_fields[i].kind == META_I64 || (x >= INT32_MIN && x <= INT32_MAX));
            if (family_fields[i].kind == META_I64)
                *(int64_t *)p = x;
            else
                *(int32_t *)p = (int32_t)x;
        }
        if (!ok || !end || *end)
            return tfc_err(TFC_ERR_FORMAT, "%s: '%s' has \"tfc.arch\" but lacks a valid metadata entry '%s'", fn, path,
                           family_fields[i].key);
    }
    return TFC_OK;
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
    keys[N_INT + 3] = "tfc.dropout"; /* a training setting, not a shape: files written before it load as 0 */
    snprintf(bufs[N_INT + 3], 32, "%.17g", c->dropout);
}

/*
 * A quantized model's extra tensors and metadata (docs/MODEL.md, "Quantized
 * inference"): each quantized weight NAME is stored as NAME.qcodes (u8) and
 * NAME.qscales (f32) in tfc_qweight_tensors' layouts, [out, in] like
 * nn.Linear (the f32 NAME was [in, out]); "tfc.quant.format" (int8|int4) and
 * "tfc.quant.group_size" say how to read them.
 */
#define QUANT_FORMAT_KEY "tfc.quant.format"
#define QUANT_GROUP_KEY "tfc.quant.group_size"
static const char *const qsuffix[2] = {".qcodes", ".qscales"};

/*
 * A quantized LM head (tfc_gpt_quantize_head), independent of the blocks:
 * lm_head.weight.qcodes / .qscales ([V, C], the head's own layout, tied or
 * not) read by "tfc.quant.head.format" / "tfc.quant.head.group_size". An
 * older file has neither and loads with an f32 head.
 */
#define HEAD_FORMAT_KEY "tfc.quant.head.format"
#define HEAD_GROUP_KEY "tfc.quant.head.group_size"
static const char *const head_names[2] = {"lm_head.weight.qcodes", "lm_head.weight.qscales"};

static const char *format_str(tfc_qformat f) { return f == TFC_QFORMAT_INT8 ? "int8" : "int4"; }

/* Block Linear j of layer l's quantized array k (codes, scales) as the file names it. */
static const char *qarray_name(const gpt_arch *a, int32_t l, int j, int k, char *buf, size_t n) {
    char module[128];
    snprintf(buf, n, "%s.weight%s", tfc_gpt_module_name(a, l, j, module, sizeof module), qsuffix[k]);
    return buf;
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
    const int32_t n_lin = m->arch.table->n_linear;
    const int32_t nqb = m->qformat ? 2 * n_lin * c.n_layer : 0, nq = nqb + (m->head_q ? 2 : 0);
    const int32_t n_fam = c.arch != TFC_GPT_ARCH_GPT2 ? N_FAMILY : 0;
    const int32_t n_cfg = N_CFG + (m->qformat ? 2 : 0) + (m->head_q ? 2 : 0) + n_fam;
    const char **keys = malloc(((size_t)n_meta + (size_t)n_cfg) * sizeof *keys);
    const char **vals = malloc(((size_t)n_meta + (size_t)n_cfg) * sizeof *vals);
    const char **tnames = calloc((size_t)n + (size_t)nq, sizeof *tnames);
    tfc_tensor **tensors = calloc((size_t)n + (size_t)nq, sizeof *tensors);
    char **qnames = calloc((size_t)nq + 1, sizeof *qnames);
    char bufs[N_CFG][32], group[32], hgroup[32], fam[N_FAMILY][32];
    tfc_status s = TFC_OK;
    if (!keys || !vals || !tnames || !tensors || !qnames) s = tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    if (s == TFC_OK) {
        config_to_meta(&c, keys, vals, bufs);
        if (m->qformat) {
            snprintf(group, sizeof group, "%d", (int)m->qgroup);
            keys[N_CFG] = QUANT_FORMAT_KEY;
            vals[N_CFG] = format_str(m->qformat);
            keys[N_CFG + 1] = QUANT_GROUP_KEY;
            vals[N_CFG + 1] = group;
        }
        if (m->head_q) {
            const int32_t at = N_CFG + (m->qformat ? 2 : 0);
            snprintf(hgroup, sizeof hgroup, "%d", (int)tfc_qweight_group_size(m->head_q));
            keys[at] = HEAD_FORMAT_KEY;
            vals[at] = format_str(tfc_qweight_format(m->head_q));
            keys[at + 1] = HEAD_GROUP_KEY;
            vals[at + 1] = hgroup;
        }
        for (int32_t i = 0; i < n_fam; i++) {
            const int32_t at = n_cfg - n_fam + i;
            family_value(&c, (size_t)i, fam[i], sizeof fam[i]);
            keys[at] = family_fields[i].key;
            vals[at] = fam[i];
        }
        for (int32_t i = 0; i < n_meta; i++) {
            keys[n_cfg + i] = meta_keys[i];
            vals[n_cfg + i] = meta_values[i];
        }
        for (int32_t i = 0; i < n; i++) {
            tnames[i] = names[i];
            tensors[i] = tfc_tensor_retain(params[i]);
        }
    }
    for (int32_t q = 0; s == TFC_OK && q < nqb / 2; q++) {
        const int32_t l = q / n_lin;
        const int j = q % n_lin;
        s = tfc_qweight_tensors(m->blocks[l].lin[j].q, &tensors[n + 2 * q], &tensors[n + 2 * q + 1]);
        for (int k = 0; k < 2 && s == TFC_OK; k++) {
            char name[160];
            qarray_name(&m->arch, l, j, k, name, sizeof name);
            qnames[2 * q + k] = strdup(name);
            if (!qnames[2 * q + k]) s = tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
            tnames[n + 2 * q + k] = qnames[2 * q + k];
        }
    }
    if (s == TFC_OK && m->head_q) {
        s = tfc_qweight_tensors(m->head_q, &tensors[n + nqb], &tensors[n + nqb + 1]);
        tnames[n + nqb] = head_names[0];
        tnames[n + nqb + 1] = head_names[1];
    }
    if (s == TFC_OK)
        s = tfc_safetensors_save(path, tnames, (tfc_tensor *const *)tensors, n + nq, keys, vals, n_cfg + n_meta);
    for (int32_t i = 0; tensors && i < n + nq; i++) tfc_tensor_release(tensors[i]);
    for (int32_t i = 0; qnames && i < nqb; i++) free(qnames[i]);
    free(qnames);
    free(tensors);
    free(tnames);
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
    const char *dp = NULL;
    TFC_TRY(tfc_safetensors_metadata(f, "tfc.dropout", &dp));
    c->dropout = 0.0;
    if (dp && !(c->dropout = strtod(dp, &end), end && !*end && *dp && c->dropout >= 0.0 && c->dropout < 1.0))
        return tfc_err(TFC_ERR_FORMAT, "%s: '%s' has metadata 'tfc.dropout' = '%s', need a number in [0, 1)", fn, path,
                       dp);
    return read_family(fn, path, f, c);
}

TFC_API tfc_status tfc_gpt_config_from_metadata(const tfc_safetensors *f, tfc_gpt_config *cfg) {
    const char *fn = "tfc_gpt_config_from_metadata";
    TFC_CHECK_NOT_NULL(fn, f);
    TFC_CHECK_NOT_NULL(fn, cfg);
    if (cfg->struct_size < sizeof(tfc_gpt_config))
        return tfc_err(TFC_ERR_VERSION, "%s: cfg->struct_size is %u, need %zu", fn, cfg->struct_size,
                       sizeof(tfc_gpt_config));
    tfc_gpt_config c = TFC_GPT_CONFIG_INIT;
    TFC_TRY(read_config(fn, "the file", f, &c));
    TFC_TRY(tfc_gpt_check_config(fn, &c));
    *cfg = c;
    return TFC_OK;
}

/* The file's quantization: *format 0 when it holds an f32/f64 model. */
static tfc_status read_quant_keys(const char *fn, const char *path, const tfc_safetensors *f, const char *format_key,
                                  const char *group_key, tfc_qformat *format, int32_t *group) {
    const char *v = NULL;
    TFC_TRY(tfc_safetensors_metadata(f, format_key, &v));
    *format = (tfc_qformat)0;
    *group = 0;
    if (!v) return TFC_OK;
    if (strcmp(v, "int8") == 0)
        *format = TFC_QFORMAT_INT8;
    else if (strcmp(v, "int4") == 0)
        *format = TFC_QFORMAT_INT4;
    else
        return tfc_err(TFC_ERR_FORMAT, "%s: '%s' has metadata '%s' = '%s', need int8 or int4", fn, path, format_key, v);
    return meta_int(fn, path, f, group_key, group);
}

static tfc_status read_quant(const char *fn, const char *path, const tfc_safetensors *f, tfc_qformat *format,
                             int32_t *group) {
    return read_quant_keys(fn, path, f, QUANT_FORMAT_KEY, QUANT_GROUP_KEY, format, group);
}

/* The head's quantization (*format 0: an f32 head). */
static tfc_status read_head_quant(const char *fn, const char *path, const tfc_safetensors *f, tfc_qformat *format,
                                  int32_t *group) {
    return read_quant_keys(fn, path, f, HEAD_FORMAT_KEY, HEAD_GROUP_KEY, format, group);
}

/*
 * The quantized arrays of a file as wants of c after the parameters: with
 * `blocks`, each block Linear's NAME.qcodes (u8) and NAME.qscales (f32),
 * layer by layer; with `head`, the head's two. Their exact shapes are the
 * quantized format's rule, checked by tfc_qweight_from_tensors as each
 * handle is built. *first: the index of the first.
 */
static tfc_status want_qarrays(const tfc_gpt *m, tfc_contract *c, int blocks, int head, int32_t *first) {
    *first = c->n_want;
    static const tfc_dtype dt[2] = {TFC_DTYPE_U8, TFC_DTYPE_F32};
    for (int32_t l = 0; blocks && l < m->cfg.n_layer; l++)
        for (int j = 0; j < m->arch.table->n_linear; j++)
            for (int k = 0; k < 2; k++) {
                char name[160];
                tfc_want w = TFC_WANT_INIT;
                w.name = qarray_name(&m->arch, l, j, k, name, sizeof name);
                w.ndim = -1;
                w.dtypes = TFC_DTYPE_BIT(dt[k]);
                TFC_TRY(tfc_contract_want(c, &w));
            }
    for (int k = 0; head && k < 2; k++) {
        tfc_want w = TFC_WANT_INIT;
        w.name = head_names[k];
        w.ndim = -1;
        w.dtypes = TFC_DTYPE_BIT(dt[k]);
        TFC_TRY(tfc_contract_want(c, &w));
    }
    return TFC_OK;
}

/* A tfcore checkpoint's words for a quantized array the metadata does not announce. */
static tfc_status ckpt_explain(void *ctx, const tfc_contract *c, const tfc_fault *f) {
    (void)ctx;
    if (f->kind != TFC_FAULT_STRANGER) return TFC_OK;
    const char *name = c->held[f->held].name;
    const int head = strcmp(name, head_names[0]) == 0 || strcmp(name, head_names[1]) == 0;
    const size_t n = strlen(name);
    int array = head;
    for (int k = 0; k < 2 && !array; k++)
        array = n > strlen(qsuffix[k]) && strcmp(name + n - strlen(qsuffix[k]), qsuffix[k]) == 0;
    if (!array) return TFC_OK;
    return tfc_err(TFC_ERR_FORMAT, "%s: '%s' has a tensor '%s' but no metadata '%s' saying how to read it", c->fn,
                   c->file, name, head ? HEAD_FORMAT_KEY : QUANT_FORMAT_KEY);
}

/*
 * The contract of a tfcore checkpoint f (tfc_gpt_save's names, exactly) for
 * m, whose config its metadata gave: m's parameters (less the quantized
 * ones; any float dtype) loaded into m, then the quantized arrays
 * (*qfirst). Every tensor of f must be one of them, or the metadata
 * describes another model than the tensors do (a tfc.n_layer or tfc.bias
 * that lies): refused, naming the tensor, before m is written.
 */
static tfc_status ckpt_contract(const char *fn, const char *path, tfc_gpt *m, const tfc_safetensors *f,
                                tfc_qformat format, tfc_qformat hformat, tfc_contract **out, int32_t *qfirst) {
    char model[200];
    snprintf(model, sizeof model,
             "the model of its metadata (n_layer %d, n_embd %d, vocab_size %d, bias %d, tie_weights %d)",
             (int)m->cfg.n_layer, (int)m->cfg.n_embd, (int)m->cfg.vocab_size, (int)m->cfg.bias,
             (int)m->cfg.tie_weights);
    tfc_contract *c = NULL;
    TFC_TRY(tfc_contract_new(fn, path, model, &c));
    /* any float dtype converts to the model's (tfc.dtype); integers are refused before anything converts */
    tfc_status s = tfc_gpt_want_params(m, c, TFC_DTYPES_FLOAT, 0, format != 0, hformat != 0, NULL);
    if (s == TFC_OK) s = want_qarrays(m, c, format != 0, hformat != 0, qfirst);
    if (s == TFC_OK) s = tfc_contract_hold_safetensors(c, f);
    tfc_contract_set_explain(c, ckpt_explain, NULL);
    if (s == TFC_OK) s = tfc_contract_check(c);
    if (s != TFC_OK) {
        tfc_contract_free(c);
        return s;
    }
    *out = c;
    return TFC_OK;
}

/* The file's quantized LM head (its arrays want q and q + 1 of c), built against m's [V, C] and installed in m. */
static tfc_status load_head(const char *fn, const char *path, tfc_gpt *m, const tfc_contract *c, int32_t q,
                            tfc_qformat format, int32_t group) {
    tfc_qweight *h = NULL;
    tfc_status s = tfc_qweight_from_tensors(format, m->cfg.vocab_size, m->cfg.n_embd, group,
                                            tfc_contract_found(c, q)->values, tfc_contract_found(c, q + 1)->values, &h);
    if (s != TFC_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", tfc_last_error());
        return tfc_err(TFC_ERR_FORMAT, "%s: '%s': %s / .qscales: %s", fn, path, head_names[0], why);
    }
    tfc_gpt_install_head(m, h);
    return TFC_OK;
}

/*
 * The quantized weights of a file written by tfc_gpt_save from a quantized
 * model (their arrays: wants q, q + 1, ... of c, two per block Linear),
 * built against m's shapes (tfc_qweight_from_tensors refuses a wrong shape
 * or a non-finite scale), then installed in m.
 */
static tfc_status load_qweights(const char *fn, const char *path, tfc_gpt *m, const tfc_contract *c, int32_t q,
                                tfc_qformat format, int32_t group) {
    const int32_t n_lin = m->arch.table->n_linear, n = m->cfg.n_layer * n_lin;
    tfc_qweight **qs = calloc((size_t)m->cfg.n_layer * GPT_N_LINEAR, sizeof *qs);
    if (!qs) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    tfc_status s = TFC_OK;
    for (int32_t i = 0; i < n && s == TFC_OK; i++) {
        int64_t in, out;
        tfc_gpt_linear_dims(&m->arch, i % n_lin, &in, &out);
        const int32_t slot = i / n_lin * GPT_N_LINEAR + i % n_lin;
        s = tfc_qweight_from_tensors(format, out, in, group, tfc_contract_found(c, q + 2 * i)->values,
                                     tfc_contract_found(c, q + 2 * i + 1)->values, &qs[slot]);
        if (s != TFC_OK) {
            char why[512];
            snprintf(why, sizeof why, "%s", tfc_last_error());
            s = tfc_err(TFC_ERR_FORMAT, "%s: '%s': %s / .qscales: %s", fn, path, c->want[q + 2 * i].name, why);
        }
    }
    return tfc_gpt_install_qweights(m, format, group, qs, s);
}

/*
 * The model a file's config describes is built before its tensors are
 * read, so a few bytes of metadata could ask for gigabytes: refuse a config
 * that needs more values than the file holds (each stored value takes at
 * least one byte, so memory stays O(file size)).
 */
static tfc_status check_file_holds_config(const char *fn, const char *path, const tfc_safetensors *f,
                                          const tfc_gpt_config *c, int int4) {
    TFC_TRY(tfc_gpt_check_config(fn, c));
    int64_t held = 0;
    for (int32_t i = 0; i < tfc_safetensors_count(f); i++) {
        tfc_tensor *t = NULL;
        TFC_TRY(tfc_safetensors_get(f, i, NULL, &t));
        /* a byte of int4 codes stands for two weights (with int4 in the blocks or the head, any u8 byte may) */
        const int64_t per = int4 && tfc_tensor_dtype(t) == TFC_DTYPE_U8 ? 2 : 1;
        held += per * tfc_tensor_numel(t);
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
    tfc_qformat format = (tfc_qformat)0, hformat = (tfc_qformat)0;
    int32_t group = 0, hgroup = 0;
    tfc_status s = read_config(fn, path, f, &c);
    if (s == TFC_OK) s = read_quant(fn, path, f, &format, &group);
    if (s == TFC_OK) s = read_head_quant(fn, path, f, &hformat, &hgroup);
    if (s == TFC_OK && (format || hformat) && c.dtype != TFC_DTYPE_F32)
        s = tfc_err(TFC_ERR_FORMAT, "%s: '%s' is quantized but its tfc.dtype is %s, need f32", fn, path,
                    tfc_dtype_name(c.dtype));
    if (s == TFC_OK)
        s = check_file_holds_config(fn, path, f, &c, format == TFC_QFORMAT_INT4 || hformat == TFC_QFORMAT_INT4);
    if (s == TFC_OK) s = tfc_gpt_alloc(fn, &c, &m); /* every value comes from the file */
    tfc_contract *ct = NULL;
    int32_t q = 0;
    if (s == TFC_OK) s = ckpt_contract(fn, path, m, f, format, hformat, &ct, &q);
    /* the quantized layers first: their f32 weights then leave m, and the contract skipped them */
    if (s == TFC_OK && format) s = load_qweights(fn, path, m, ct, q, format, group);
    if (s == TFC_OK && hformat)
        s = load_head(fn, path, m, ct, q + (format ? 2 * m->arch.table->n_linear * c.n_layer : 0), hformat, hgroup);
    if (s == TFC_OK) s = tfc_contract_copy(ct);
    tfc_contract_free(ct);
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
    if (tfc_gpt_is_quantized(m))
        return tfc_err(TFC_ERR_UNSUPPORTED, "%s: the model is quantized; load quantized checkpoints with tfc_gpt_load",
                       fn);
    tfc_gpt_config mine = TFC_GPT_CONFIG_INIT, theirs = TFC_GPT_CONFIG_INIT;
    TFC_TRY(tfc_gpt_get_config(m, &mine));
    tfc_safetensors *f;
    TFC_TRY(tfc_safetensors_load(path, &f));
    tfc_qformat format = (tfc_qformat)0;
    int32_t group = 0;
    tfc_status s = read_config(fn, path, f, &theirs);
    if (s == TFC_OK) s = read_quant(fn, path, f, &format, &group);
    if (s == TFC_OK && !format) s = read_head_quant(fn, path, f, &format, &group);
    if (s == TFC_OK && format)
        s = tfc_err(TFC_ERR_UNSUPPORTED, "%s: the file is quantized; load quantized checkpoints with tfc_gpt_load", fn);
    for (size_t i = 0; s == TFC_OK && i < N_INT; i++)
        if (int_value(&mine, i) != int_value(&theirs, i))
            s = tfc_err(TFC_ERR_INVALID_ARG, "%s: '%s' has %s %d but the model has %d", fn, path,
                        int_fields[i].key + strlen("tfc."), int_value(&theirs, i), int_value(&mine, i));
    if (s == TFC_OK) s = tfc_gpt_check_config(fn, &theirs);
    gpt_arch ta;
    if (s == TFC_OK) gpt_arch_of(&theirs, &ta);
    const int family = theirs.arch != TFC_GPT_ARCH_GPT2 || mine.arch != TFC_GPT_ARCH_GPT2;
    for (size_t i = 0; s == TFC_OK && family && i < N_FAMILY; i++) {
        char a[32], b[32];
        theirs.n_kv_head = ta.n_kv_head; /* the defaults resolved, as the model's own config has them */
        theirs.mlp_hidden = ta.mlp_hidden;
        family_value(&theirs, i, a, sizeof a);
        family_value(&mine, i, b, sizeof b);
        if (strcmp(a, b) != 0)
            s = tfc_err(TFC_ERR_INVALID_ARG, "%s: '%s' has %s %s but the model has %s", fn, path,
                        family_fields[i].key + strlen("tfc."), a, b);
    }
    /* every tensor checked before the first value of m is written */
    tfc_contract *ct = NULL;
    int32_t q = 0;
    if (s == TFC_OK) s = ckpt_contract(fn, path, m, f, (tfc_qformat)0, (tfc_qformat)0, &ct, &q);
    if (s == TFC_OK) s = tfc_contract_copy(ct);
    tfc_contract_free(ct);
    tfc_safetensors_release(f);
    return tfc_err_in(fn, s);
}
