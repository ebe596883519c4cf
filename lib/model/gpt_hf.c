/*
 * Hugging Face directories (transformers' save_pretrained of
 * GPT2LMHeadModel, LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM):
 * config.json and model.safetensors under HF's names. Our parameter names
 * and layouts are HF's already (gpt.h), so tensors travel as they are; what
 * this file adds is config.json (parsed by jansson through lib/io/json.h;
 * GPT2Config's schema here, the Llama family's in gpt_hf_llama.c).
 * The tensors model.safetensors may hold — the parameters under HF's or
 * GPT2Model's bare names ("h.0.attn.c_attn.weight", "wte.weight"), the
 * attention mask buffers older transformers saved, an lm_head.weight stored
 * although tied — are gpt_want.c's list, held against the file by the
 * loader contract (io/tensor_contract.h). Tokenizer files (vocab.json,
 * merges.txt) belong to the tokenizer layer and the CLI.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/hf_weights.h"
#include "io/json.h"
#include "model/gpt_hf.h"
#include "model/gpt_impl.h"
#include "model/gpt_want.h"
#include "tfcore/io.h"

#define HF_CONFIG_MAX (16u << 20) /* a GPT2Config is a few hundred bytes; anything huge is not one */

static char *join(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* ---- config.json ------------------------------------------------------------------ */

typedef struct hf_config {
    int32_t n_layer, n_head, n_embd, n_positions, n_ctx, vocab_size, n_inner; /* -1: absent (n_inner: null too) */
    double eps;                                                               /* NAN: absent */
    int tie;                                                                  /* -1 absent */
    int inverse_layer_idx, cross_attention, scale_attn;                       /* -1 absent */
    char *model_type, *activation;                                            /* NULL: absent */
} hf_config;

static void hf_config_free(hf_config *h) {
    free(h->model_type);
    free(h->activation);
}

/*
 * h from config.json's tree. Numbers are range-checked here, by name: the
 * sizes as 32-bit integers (INT32_MIN marks "absent"; tfc_gpt_check_config
 * then wants them >= 1), n_ctx >= 1, n_inner >= 1 or null, and
 * layer_norm_epsilon a LayerNorm epsilon in (0, 1] (1e308 or 1e-400 would
 * be taken as such and give a silently different model).
 * Keys the forward pass does not read (dropout rates, ids, task params) are
 * not looked at; a key twice: the last wins, as in JSON.
 */
static tfc_status parse_config(const char *fn, const json_t *root, hf_config *h) {
    static const char *W = "config.json";
    if (!json_is_object(root)) return tfc_err(TFC_ERR_FORMAT, "%s: malformed config.json: expected a JSON object", fn);
    static const struct {
        const char *key;
        size_t off;
        int64_t lo;
    } ints[] = {
        {"n_layer", offsetof(hf_config, n_layer), INT32_MIN + 1},
        {"n_head", offsetof(hf_config, n_head), INT32_MIN + 1},
        {"n_embd", offsetof(hf_config, n_embd), INT32_MIN + 1},
        {"n_positions", offsetof(hf_config, n_positions), INT32_MIN + 1},
        {"n_ctx", offsetof(hf_config, n_ctx), 1},
        {"vocab_size", offsetof(hf_config, vocab_size), INT32_MIN + 1},
        {"n_inner", offsetof(hf_config, n_inner), 1},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        int32_t *dst = (int32_t *)((char *)h + ints[i].off);
        if (strcmp(ints[i].key, "n_inner") == 0 && json_is_null(json_object_get(root, "n_inner"))) {
            *dst = -1;
            continue;
        }
        int64_t v = *dst;
        TFC_TRY(tfc_json_get_int(fn, W, root, ints[i].key, ints[i].lo, INT32_MAX, &v, NULL));
        *dst = (int32_t)v;
    }
    int found = 0;
    TFC_TRY(tfc_json_get_number(fn, W, root, "layer_norm_epsilon", -HUGE_VAL, HUGE_VAL, &h->eps, &found));
    if (found && !(h->eps > 0 && h->eps <= 1))
        return tfc_err(TFC_ERR_FORMAT,
                       "%s: config.json: \"layer_norm_epsilon\" is %g, need a LayerNorm epsilon in (0, 1]", fn, h->eps);
    TFC_TRY(tfc_json_get_bool(fn, W, root, "tie_word_embeddings", &h->tie, NULL));
    TFC_TRY(tfc_json_get_bool(fn, W, root, "scale_attn_by_inverse_layer_idx", &h->inverse_layer_idx, NULL));
    TFC_TRY(tfc_json_get_bool(fn, W, root, "add_cross_attention", &h->cross_attention, NULL));
    TFC_TRY(tfc_json_get_bool(fn, W, root, "scale_attn_weights", &h->scale_attn, NULL));
    const char *mt = NULL, *act = NULL;
    TFC_TRY(tfc_json_get_string(fn, W, root, "model_type", &mt, NULL));
    TFC_TRY(tfc_json_get_string(fn, W, root, "activation_function", &act, NULL));
    if ((mt && !(h->model_type = strdup(mt))) || (act && !(h->activation = strdup(act))))
        return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    return TFC_OK;
}

/* config.json's GPT2Config as our config; anything our GPT-2 cannot compute is refused by name. */
static tfc_status config_from_hf(const char *fn, const char *path, const hf_config *h, tfc_gpt_config *c) {
    if (h->model_type && strcmp(h->model_type, "gpt2") != 0)
        return tfc_err(TFC_ERR_UNSUPPORTED,
                       "%s: '%s' has model_type \"%s\"; the model types read are gpt2, llama, mistral and qwen2", fn,
                       path, h->model_type);
    const struct {
        const char *key;
        int32_t v;
    } req[] = {{"n_layer", h->n_layer}, {"n_head", h->n_head}, {"n_embd", h->n_embd}, {"vocab_size", h->vocab_size}};
    for (size_t i = 0; i < sizeof req / sizeof req[0]; i++)
        if (req[i].v == INT32_MIN) return tfc_err(TFC_ERR_FORMAT, "%s: '%s' has no \"%s\"", fn, path, req[i].key);
    if (h->n_positions == INT32_MIN && h->n_ctx == INT32_MIN)
        return tfc_err(TFC_ERR_FORMAT, "%s: '%s' has no \"n_positions\"", fn, path);

    if (h->activation && strcmp(h->activation, "gelu_new") != 0 && strcmp(h->activation, "gelu_pytorch_tanh") != 0 &&
        strcmp(h->activation, "gelu_fast") != 0)
        return tfc_err(TFC_ERR_UNSUPPORTED,
                       "%s: '%s' has activation_function \"%s\"; the model computes GELU's tanh form (gelu_new)", fn,
                       path, h->activation);
    if (h->n_inner != INT32_MIN && h->n_inner != -1 && (int64_t)h->n_inner != 4 * (int64_t)h->n_embd)
        return tfc_err(TFC_ERR_UNSUPPORTED, "%s: '%s' has n_inner %d; the model's MLP is 4 x n_embd = %lld", fn, path,
                       (int)h->n_inner, 4 * (long long)h->n_embd);
    if (h->inverse_layer_idx == 1)
        return tfc_err(TFC_ERR_UNSUPPORTED, "%s: '%s' sets scale_attn_by_inverse_layer_idx, which the model lacks", fn,
                       path);
    if (h->scale_attn == 0)
        return tfc_err(TFC_ERR_UNSUPPORTED, "%s: '%s' sets scale_attn_weights false, which the model lacks", fn, path);
    if (h->cross_attention == 1)
        return tfc_err(TFC_ERR_UNSUPPORTED, "%s: '%s' sets add_cross_attention, which the model lacks", fn, path);
    if (h->n_positions != INT32_MIN && h->n_ctx != INT32_MIN && h->n_ctx > h->n_positions)
        return tfc_err(TFC_ERR_FORMAT, "%s: '%s' has n_ctx %d above n_positions %d", fn, path, (int)h->n_ctx,
                       (int)h->n_positions);
    *c = (tfc_gpt_config)TFC_GPT_CONFIG_INIT;
    c->n_layer = h->n_layer;
    c->n_head = h->n_head;
    c->n_embd = h->n_embd;
    c->vocab_size = h->vocab_size;
    c->block_size = h->n_positions != INT32_MIN ? h->n_positions : h->n_ctx; /* wpe has n_positions rows */
    c->bias = 1;
    c->tie_weights = h->tie != 0;
    c->ln_eps = isnan(h->eps) ? 1e-5 : h->eps;
    tfc_status s = tfc_gpt_check_config(fn, c);
    if (s != TFC_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", tfc_last_error());
        return tfc_err(TFC_ERR_FORMAT, "%s (from '%s')", why, path);
    }
    return TFC_OK;
}

static tfc_status read_config_json(const char *fn, const char *path, tfc_gpt_config *c) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return tfc_err(TFC_ERR_IO, "%s: cannot open '%s': %s", fn, path, strerror(errno));
    hf_config h = {INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN,
                   NAN,       -1,        -1,        -1,        -1,        NULL,      NULL};
    json_t *root = NULL;
    tfc_status s = tfc_json_read(fn, "config.json", fp, HF_CONFIG_MAX, 0, &root);
    fclose(fp);
    /* the Llama family's schema is its own (gpt_hf_llama.c) */
    const char *mt = NULL;
    int32_t arch = TFC_GPT_ARCH_GPT2;
    if (s == TFC_OK && json_is_object(root) &&
        tfc_json_get_string(fn, "config.json", root, "model_type", &mt, NULL) == TFC_OK && mt &&
        tfc_gpt_arch_from_name(mt, &arch) == TFC_OK && arch != TFC_GPT_ARCH_GPT2) {
        s = tfc_gpt_llama_config_from_json(fn, path, root, arch, c);
        json_decref(root);
        return s;
    }
    if (s == TFC_OK) {
        tfc_clear_error(); /* the lookups above, for a file that is not of the family */
        s = parse_config(fn, root, &h);
    }
    json_decref(root);
    if (s != TFC_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", tfc_last_error());
        s = tfc_err(s, "%s ('%s')", why, path);
    }
    if (s == TFC_OK) s = config_from_hf(fn, path, &h, c);
    hf_config_free(&h);
    return s;
}

/* ---- loading ---------------------------------------------------------------------- */

/*
 * The contract of the directory's weights w (model.safetensors or the shards
 * of its index) for the model of config c (gpt_want.h): its parameters under
 * HF's names or GPT2Model's bare ones, any float dtype; each block's buffers
 * ignored; a tied model's stored lm_head.weight wte's copy. Anything else is
 * refused, naming the tensor and its file, before the model is allocated: a
 * config.json that lies about the sizes costs nothing (the wants get their
 * destinations once it checks out).
 */
static tfc_status hf_contract(const char *fn, const tfc_hf_weights *w, const tfc_gpt_config *c, tfc_contract **out) {
    gpt_arch a;
    gpt_arch_of(c, &a);
    char model[240];
    snprintf(model, sizeof model,
             "its config.json (%s, n_layer %d, n_head %d, n_kv_head %d, n_embd %d, mlp %lld, vocab_size %d)",
             tfc_gpt_arch_name(c->arch), (int)c->n_layer, (int)c->n_head, (int)a.n_kv_head, (int)c->n_embd,
             (long long)a.mlp_hidden, (int)c->vocab_size);
    tfc_contract *ct = NULL;
    TFC_TRY(tfc_contract_new(fn, tfc_hf_weights_path(w), model, &ct));
    /* an untied model's head is required: say why when it is missing */
    tfc_status s = tfc_gpt_want_config(c, ct, TFC_DTYPES_FLOAT, 1, " (config.json says tie_word_embeddings false)");
    if (s == TFC_OK)
        s = tfc_gpt_want_hf_extras(c, ct,
                                   ", but config.json ties them (tie_word_embeddings true or absent): set "
                                   "tie_word_embeddings false to read it");
    if (s == TFC_OK) s = tfc_contract_hold_hf_weights(ct, w);
    if (s == TFC_OK) s = tfc_contract_check(ct);
    if (s != TFC_OK) {
        tfc_contract_free(ct);
        return s;
    }
    *out = ct;
    return TFC_OK;
}

/* The directory's weights, or the error a user needs (a pytorch_model.bin without safetensors beside it). */
static tfc_status open_weights(const char *fn, const char *dir, tfc_hf_weights **w) {
    tfc_status s = tfc_hf_weights_open(fn, dir, w);
    if (s != TFC_ERR_IO) return s;
    char *bin = join(dir, "pytorch_model.bin");
    struct stat st;
    if (bin && stat(bin, &st) == 0)
        s = tfc_err(TFC_ERR_UNSUPPORTED,
                    "%s: '%s' has pytorch_model.bin but no model.safetensors; save it with safe_serialization=True", fn,
                    dir);
    free(bin);
    return s;
}

TFC_API tfc_status tfc_gpt_load_hf(const char *dir, tfc_gpt **out) {
    const char *fn = "tfc_gpt_load_hf";
    TFC_CHECK_NOT_NULL(fn, dir);
    TFC_CHECK_NOT_NULL(fn, out);
    char *cpath = join(dir, "config.json");
    if (!cpath) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    tfc_gpt_config c;
    tfc_status s = read_config_json(fn, cpath, &c);
    free(cpath);
    tfc_hf_weights *w = NULL; /* mapped: the pages are read as the contract copies them, and given back */
    if (s == TFC_OK) s = open_weights(fn, dir, &w);
    /*
     * config.json alone decides how long the wanted list is: refuse one far larger than the files (a lie about the
     * sizes costs O(file size)); a near miss is left to the contract, which names the tensor
     */
    const int64_t held = s == TFC_OK ? tfc_hf_weights_numel(w) : 0;
    const int64_t n_want = s == TFC_OK ? tfc_gpt_list_params(&c, NULL, 0) : 0; /* c is valid only then */
    const int32_t n_held = s == TFC_OK ? tfc_hf_weights_count(w) : 0;
    if (s == TFC_OK && (tfc_gpt_config_numel(&c) / 2 > held + (1 << 20) || n_want > 2 * (int64_t)n_held + 64))
        s = tfc_err(TFC_ERR_FORMAT,
                    "%s: '%s' holds %lld values in %d tensors but config.json (n_layer %d, n_embd %d, vocab_size %d) "
                    "needs %lld in %lld",
                    fn, tfc_hf_weights_path(w), (long long)held, (int)n_held, (int)c.n_layer, (int)c.n_embd,
                    (int)c.vocab_size, (long long)tfc_gpt_config_numel(&c), (long long)n_want);
    /* every tensor checked against config.json before the model exists */
    tfc_contract *ct = NULL;
    if (s == TFC_OK) s = hf_contract(fn, w, &c, &ct);
    tfc_gpt *m = NULL;
    if (s == TFC_OK) s = tfc_gpt_alloc(fn, &c, &m); /* every value comes from the files */
    if (s == TFC_OK) s = tfc_gpt_want_set_dest(m, ct);
    if (s == TFC_OK) s = tfc_contract_copy(ct);
    tfc_contract_free(ct);
    tfc_hf_weights_free(w);
    if (s != TFC_OK) {
        tfc_gpt_release(m);
        return tfc_err_in(fn, s);
    }
    *out = m;
    return TFC_OK;
}

/* ---- saving ----------------------------------------------------------------------- */

static void put_kv_int(tfc_strbuf *b, const char *key, long long v, int last) {
    char num[64];
    tfc_sb_str(b, "  ");
    tfc_sb_json_string(b, key);
    snprintf(num, sizeof num, ": %lld%s\n", v, last ? "" : ",");
    tfc_sb_str(b, num);
}

static void put_kv_raw(tfc_strbuf *b, const char *key, const char *json, int last) {
    tfc_sb_str(b, "  ");
    tfc_sb_json_string(b, key);
    tfc_sb_str(b, ": ");
    tfc_sb_str(b, json);
    tfc_sb_str(b, last ? "\n" : ",\n");
}

/* GPT2Config's JSON for c, keys sorted as transformers writes them. */
static void config_json(tfc_strbuf *b, const tfc_gpt_config *c, int32_t bos, int32_t eos, const char *torch_dtype) {
    char eps[64];
    /* the shortest form that reads back as the same double (1e-05, as Python writes it) */
    for (int prec = 6; prec <= 17; prec++) {
        snprintf(eps, sizeof eps, "%.*g", prec, c->ln_eps);
        if (strtod(eps, NULL) == c->ln_eps) break;
    }
    if (!strpbrk(eps, ".eEn")) strcat(eps, ".0"); /* a float in JSON terms, as Python writes 1e-05 */
    tfc_sb_str(b, "{\n");
    put_kv_raw(b, "activation_function", "\"gelu_new\"", 0);
    put_kv_raw(b, "architectures", "[\n    \"GPT2LMHeadModel\"\n  ]", 0);
    put_kv_raw(b, "attn_pdrop", "0.1", 0);
    if (bos >= 0) put_kv_int(b, "bos_token_id", bos, 0);
    put_kv_raw(b, "embd_pdrop", "0.1", 0);
    if (eos >= 0) put_kv_int(b, "eos_token_id", eos, 0);
    put_kv_raw(b, "initializer_range", "0.02", 0);
    put_kv_raw(b, "layer_norm_epsilon", eps, 0);
    put_kv_raw(b, "model_type", "\"gpt2\"", 0);
    put_kv_int(b, "n_ctx", c->block_size, 0);
    put_kv_int(b, "n_embd", c->n_embd, 0);
    put_kv_int(b, "n_head", c->n_head, 0);
    put_kv_raw(b, "n_inner", "null", 0);
    put_kv_int(b, "n_layer", c->n_layer, 0);
    put_kv_int(b, "n_positions", c->block_size, 0);
    put_kv_raw(b, "reorder_and_upcast_attn", "false", 0);
    put_kv_raw(b, "resid_pdrop", "0.1", 0);
    put_kv_raw(b, "scale_attn_by_inverse_layer_idx", "false", 0);
    put_kv_raw(b, "scale_attn_weights", "true", 0);
    put_kv_raw(b, "tie_word_embeddings", c->tie_weights ? "true" : "false", 0);
    put_kv_raw(b, "torch_dtype", torch_dtype, 0);
    put_kv_raw(b, "use_cache", "true", 0);
    put_kv_int(b, "vocab_size", c->vocab_size, 1);
    tfc_sb_str(b, "}\n");
}

/*
 * HF's GPT-2 always has biases: the ones a model without them lacks (the
 * table's rows that exist only with biases, in checkpoint order), as zero
 * tensors named and shaped as in a model with them, into names[0..n) and
 * ts[0..n) (n: their count, *n_out). Zero biases compute the same.
 */
static tfc_status zero_biases(const char *fn, const tfc_gpt *m, char ***names_out, tfc_tensor ***ts_out,
                              int32_t *n_out) {
    tfc_gpt_config c = m->cfg;
    c.bias = 1;
    gpt_arch a;
    gpt_arch_of(&c, &a);
    const int64_t total = tfc_gpt_list_params(&c, NULL, 0);
    gpt_param_at *at = calloc((size_t)total, sizeof *at);
    char **names = calloc((size_t)total, sizeof *names);
    tfc_tensor **ts = calloc((size_t)total, sizeof *ts);
    tfc_status s = at && names && ts ? TFC_OK : tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    int32_t n = 0;
    if (s == TFC_OK) tfc_gpt_list_params(&c, at, total);
    for (int64_t i = 0; s == TFC_OK && i < total; i++) {
        if (at[i].row->when != GPT_IF_BIAS) continue;
        char name[128];
        const int64_t len = tfc_gpt_dim_size(at[i].row->shape[0], &a);
        names[n] = strdup(tfc_gpt_param_name(at[i], name, sizeof name));
        if (!names[n]) s = tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
        if (s == TFC_OK) s = tfc_tensor_zeros(&len, 1, TFC_DTYPE_F32, &ts[n]);
        n++;
    }
    free(at);
    *names_out = names;
    *ts_out = ts;
    *n_out = n;
    return s;
}

static tfc_status save_hf(const char *fn, const tfc_gpt *m, const char *dir, const tfc_hf_save_options *o);

TFC_API tfc_status tfc_gpt_save_hf(const tfc_gpt *m, const char *dir, int32_t bos_token_id, int32_t eos_token_id) {
    tfc_hf_save_options o = TFC_HF_SAVE_OPTIONS_INIT;
    o.bos_token_id = bos_token_id;
    o.eos_token_id = eos_token_id;
    return save_hf("tfc_gpt_save_hf", m, dir, &o);
}

TFC_API tfc_status tfc_gpt_save_hf_ex(const tfc_gpt *m, const char *dir, const tfc_hf_save_options *opts) {
    const char *fn = "tfc_gpt_save_hf_ex";
    TFC_CHECK_NOT_NULL(fn, opts);
    if (opts->struct_size < sizeof(tfc_hf_save_options))
        return tfc_err(TFC_ERR_VERSION, "%s: opts->struct_size is %u, need %zu (use TFC_HF_SAVE_OPTIONS_INIT)", fn,
                       (unsigned)opts->struct_size, sizeof(tfc_hf_save_options));
    if (opts->dtype != TFC_DTYPE_F32 && opts->dtype != TFC_DTYPE_BF16 && opts->dtype != TFC_DTYPE_F16)
        return tfc_err(TFC_ERR_DTYPE, "%s: opts->dtype is %s, need f32, bf16 or f16", fn, tfc_dtype_name(opts->dtype));
    return save_hf(fn, m, dir, opts);
}

static tfc_status save_hf(const char *fn, const tfc_gpt *m, const char *dir, const tfc_hf_save_options *o) {
    TFC_CHECK_NOT_NULL(fn, m);
    TFC_CHECK_NOT_NULL(fn, dir);
    const int32_t bos_token_id = o->bos_token_id, eos_token_id = o->eos_token_id;
    const tfc_gpt_config *c = &m->cfg;
    if (tfc_gpt_is_quantized(m))
        return tfc_err(TFC_ERR_UNSUPPORTED,
                       "%s: the model is quantized; a GPT2LMHeadModel directory holds float weights", fn);
    if (bos_token_id < -1 || bos_token_id >= c->vocab_size)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: bos_token_id is %d, need -1 (none) or an id below vocab_size %d", fn,
                       (int)bos_token_id, (int)c->vocab_size);
    if (eos_token_id < -1 || eos_token_id >= c->vocab_size)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: eos_token_id is %d, need -1 (none) or an id below vocab_size %d", fn,
                       (int)eos_token_id, (int)c->vocab_size);
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return tfc_err(TFC_ERR_IO, "%s: cannot create the directory '%s': %s", fn, dir, strerror(errno));
    int32_t n;
    const char *const *names;
    tfc_tensor *const *params;
    TFC_TRY(tfc_gpt_params(m, &n, &names, &params));
    /* HF's GPT-2 always has biases: a model without them is written with zero biases, which compute the same */
    char **owned = NULL;
    tfc_tensor **zeros = NULL;
    int32_t extra = 0;
    tfc_status s = c->bias || c->arch != TFC_GPT_ARCH_GPT2 ? TFC_OK : zero_biases(fn, m, &owned, &zeros, &extra);
    const char **tn = calloc((size_t)(n + extra) + 1, sizeof *tn);
    tfc_tensor **ts = calloc((size_t)(n + extra) + 1, sizeof *ts);
    if (s == TFC_OK && (!tn || !ts)) s = tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    for (int32_t i = 0; s == TFC_OK && i < n; i++) { /* f32, whatever the model's dtype */
        tn[i] = names[i];
        if (tfc_tensor_dtype(params[i]) == TFC_DTYPE_F32)
            ts[i] = tfc_tensor_retain(params[i]);
        else
            s = tfc_cast(NULL, params[i], TFC_DTYPE_F32, &ts[i]);
    }
    for (int32_t k = 0; s == TFC_OK && k < extra; k++) {
        tn[n + k] = owned[k];
        ts[n + k] = zeros[k];
        zeros[k] = NULL;
    }
    tfc_strbuf js = {0};
    char *cpath = join(dir, "config.json");
    if (s == TFC_OK && !cpath) s = tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    /* one model.safetensors, or shards and their index (hf_weights.h), in the storage dtype asked for */
    if (s == TFC_OK)
        s = tfc_hf_weights_save(fn, dir, tn, (tfc_tensor *const *)ts, n + extra, o->dtype, o->max_shard_bytes, NULL,
                                NULL, 0);
    const char *torch_dtype = o->dtype == TFC_DTYPE_BF16 ? "\"bfloat16\""
        : o->dtype == TFC_DTYPE_F16                      ? "\"float16\""
                                                         : "\"float32\"";
    if (s == TFC_OK) {
        if (c->arch == TFC_GPT_ARCH_GPT2)
            config_json(&js, c, bos_token_id, eos_token_id, torch_dtype);
        else
            tfc_gpt_llama_config_json(&js, c, bos_token_id, eos_token_id, torch_dtype);
        if (js.oom) s = tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    }
    tfc_atomic_file af = {0};
    if (s == TFC_OK) s = tfc_atomic_open(fn, cpath, &af);
    if (s == TFC_OK) {
        s = tfc_atomic_write(fn, &af, js.p, js.n);
        if (s == TFC_OK)
            s = tfc_atomic_commit(fn, &af);
        else
            tfc_atomic_abort(&af);
    }
    for (int32_t i = 0; ts && i < n + extra; i++) tfc_tensor_release(ts[i]);
    for (int32_t k = 0; k < extra; k++) {
        free(owned[k]);
        tfc_tensor_release(zeros[k]);
    }
    free(owned);
    free(zeros);
    free(ts);
    free(tn);
    free(js.p);
    free(cpath);
    return tfc_err_in(fn, s);
}
