/*
 * The Llama family's config.json (transformers' LlamaConfig, MistralConfig,
 * Qwen2Config) read into tfc_gpt_config and written back. Every key the
 * forward reads is taken; a key whose value the model cannot honour is
 * refused by name, never ignored; keys a family implies are implied as its
 * own modeling code does: Qwen2's q/k/v projections always have biases (its
 * attention sets bias=True whatever attention_bias says), Mistral's
 * sliding_window defaults to 4096 when the key is absent (MistralConfig's
 * default) and null means none, Qwen2's window applies only with
 * use_sliding_window true and then to the layers from max_window_layers on
 * (one window for every layer is what the model computes, so a split is
 * refused). Keys that do not change what the model computes (dropout rates
 * of training, ids, torch_dtype, use_cache, ...) are not read.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "io/json.h"
#include "model/gpt_hf.h"
#include "model/gpt_impl.h"

static const char *W = "config.json";

/* The rope_scaling object into c->rope (its type, factor and the llama3 fields). */
static tfc_status rope_scaling(const char *fn, const char *path, const json_t *rs, tfc_gpt_config *c) {
    if (!rs || json_is_null(rs)) return TFC_OK;
    if (!json_is_object(rs))
        return tfc_err(TFC_ERR_FORMAT, "%s: '%s': \"rope_scaling\" is not an object or null", fn, path);
    const char *type = NULL;
    TFC_TRY(tfc_json_get_string(fn, W, rs, "rope_type", &type, NULL));
    if (!type) TFC_TRY(tfc_json_get_string(fn, W, rs, "type", &type, NULL)); /* older files */
    if (!type) return tfc_err(TFC_ERR_FORMAT, "%s: '%s': \"rope_scaling\" has no \"rope_type\"", fn, path);
    static const struct {
        const char *name;
        int32_t type;
    } types[] = {{"default", TFC_ROPE_DEFAULT},
                 {"linear", TFC_ROPE_LINEAR},
                 {"dynamic", TFC_ROPE_DYNAMIC},
                 {"llama3", TFC_ROPE_LLAMA3}};
    int known = 0;
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (strcmp(type, types[i].name) == 0) {
            c->rope.rope_type = types[i].type;
            known = 1;
        }
    if (!known)
        return tfc_err(TFC_ERR_UNSUPPORTED,
                       "%s: '%s' has rope_scaling type \"%s\"; the model computes default, linear, dynamic and llama3",
                       fn, path, type);
    if (c->rope.rope_type == TFC_ROPE_DEFAULT) return TFC_OK;
    int found = 0;
    TFC_TRY(tfc_json_get_number(fn, W, rs, "factor", -HUGE_VAL, HUGE_VAL, &c->rope.factor, &found));
    if (!found) return tfc_err(TFC_ERR_FORMAT, "%s: '%s': rope_scaling \"%s\" has no \"factor\"", fn, path, type);
    if (c->rope.rope_type != TFC_ROPE_LLAMA3) return TFC_OK;
    static const char *const keys[2] = {"low_freq_factor", "high_freq_factor"};
    double *dst[2] = {&c->rope.low_freq_factor, &c->rope.high_freq_factor};
    for (int i = 0; i < 2; i++) {
        TFC_TRY(tfc_json_get_number(fn, W, rs, keys[i], -HUGE_VAL, HUGE_VAL, dst[i], &found));
        if (!found) return tfc_err(TFC_ERR_FORMAT, "%s: '%s': rope_scaling llama3 has no \"%s\"", fn, path, keys[i]);
    }
    int64_t omp = 0;
    TFC_TRY(tfc_json_get_int(fn, W, rs, "original_max_position_embeddings", 1, INT64_MAX, &omp, &found));
    if (!found)
        return tfc_err(TFC_ERR_FORMAT, "%s: '%s': rope_scaling llama3 has no \"original_max_position_embeddings\"", fn,
                       path);
    c->rope.original_max_position_embeddings = omp;
    return TFC_OK;
}

/* A key whose presence with another value than `ok` the model cannot honour. */
static tfc_status refuse_number(const char *fn, const char *path, const json_t *root, const char *key, double ok,
                                const char *why) {
    double v = ok;
    TFC_TRY(tfc_json_get_number(fn, W, root, key, -HUGE_VAL, HUGE_VAL, &v, NULL));
    if (v != ok) return tfc_err(TFC_ERR_UNSUPPORTED, "%s: '%s' has %s %g; %s", fn, path, key, v, why);
    return TFC_OK;
}

/* The sliding window of a Mistral or Qwen2 config into c->sliding_window. */
static tfc_status window(const char *fn, const char *path, const json_t *root, int32_t n_layer, tfc_gpt_config *c) {
    const json_t *sw = json_object_get(root, "sliding_window");
    int64_t w = 0;
    if (c->arch == TFC_GPT_ARCH_MISTRAL && !sw) w = 4096; /* MistralConfig's default */
    if (sw && !json_is_null(sw)) TFC_TRY(tfc_json_get_int(fn, W, root, "sliding_window", 1, INT32_MAX, &w, NULL));
    if (c->arch == TFC_GPT_ARCH_QWEN2) {
        int use = 0;
        TFC_TRY(tfc_json_get_bool(fn, W, root, "use_sliding_window", &use, NULL));
        if (!use) w = 0; /* Qwen2Config drops the window when use_sliding_window is false (its default) */
        int64_t mwl = n_layer;
        TFC_TRY(tfc_json_get_int(fn, W, root, "max_window_layers", 0, INT32_MAX, &mwl, NULL));
        if (w && mwl >= n_layer) w = 0; /* the layers from max_window_layers on: none */
        if (w && mwl > 0)
            return tfc_err(TFC_ERR_UNSUPPORTED,
                           "%s: '%s' has max_window_layers %lld of %d layers: a window on some layers only, where "
                           "the model has one attention for all",
                           fn, path, (long long)mwl, (int)n_layer);
    }
    c->sliding_window = (int32_t)w;
    return TFC_OK;
}

tfc_status tfc_gpt_llama_config_from_json(const char *fn, const char *path, const json_t *root, int32_t arch,
                                          tfc_gpt_config *c) {
    *c = (tfc_gpt_config)TFC_GPT_CONFIG_INIT;
    c->arch = arch;
    static const struct {
        const char *key;
        size_t off;
        int required;
    } ints[] = {
        {"num_hidden_layers", offsetof(tfc_gpt_config, n_layer), 1},
        {"num_attention_heads", offsetof(tfc_gpt_config, n_head), 1},
        {"hidden_size", offsetof(tfc_gpt_config, n_embd), 1},
        {"vocab_size", offsetof(tfc_gpt_config, vocab_size), 1},
        {"max_position_embeddings", offsetof(tfc_gpt_config, block_size), 1},
        {"num_key_value_heads", offsetof(tfc_gpt_config, n_kv_head), 0},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        int64_t v = 0;
        int found = 0;
        TFC_TRY(tfc_json_get_int(fn, W, root, ints[i].key, 1, INT32_MAX, &v, &found));
        if (!found && ints[i].required) return tfc_err(TFC_ERR_FORMAT, "%s: '%s' has no \"%s\"", fn, path, ints[i].key);
        *(int32_t *)((char *)c + ints[i].off) = (int32_t)v;
    }
    int found = 0;
    TFC_TRY(tfc_json_get_int(fn, W, root, "intermediate_size", 1, INT32_MAX, &c->mlp_hidden, &found));
    if (!found) return tfc_err(TFC_ERR_FORMAT, "%s: '%s' has no \"intermediate_size\"", fn, path);
    c->ln_eps = 1e-6; /* LlamaConfig's default */
    TFC_TRY(tfc_json_get_number(fn, W, root, "rms_norm_eps", -HUGE_VAL, HUGE_VAL, &c->ln_eps, NULL));
    if (!(c->ln_eps > 0 && c->ln_eps <= 1))
        return tfc_err(TFC_ERR_FORMAT, "%s: '%s' has rms_norm_eps %g, need an epsilon in (0, 1]", fn, path, c->ln_eps);
    TFC_TRY(tfc_json_get_number(fn, W, root, "rope_theta", -HUGE_VAL, HUGE_VAL, &c->rope.theta, NULL));
    c->rope.max_position_embeddings = c->block_size; /* dynamic scaling's L */
    TFC_TRY(rope_scaling(fn, path, json_object_get(root, "rope_scaling"), c));
    int tie = 0, ab = 0, mb = 0;
    TFC_TRY(tfc_json_get_bool(fn, W, root, "tie_word_embeddings", &tie, NULL));
    c->tie_weights = tie;
    c->bias = 0;
    if (arch == TFC_GPT_ARCH_LLAMA) {
        TFC_TRY(tfc_json_get_bool(fn, W, root, "attention_bias", &ab, NULL));
        TFC_TRY(tfc_json_get_bool(fn, W, root, "mlp_bias", &mb, NULL));
    }
    c->attention_bias = arch == TFC_GPT_ARCH_QWEN2 ? 1 : ab;
    c->mlp_bias = mb;
    const char *act = NULL;
    TFC_TRY(tfc_json_get_string(fn, W, root, "hidden_act", &act, NULL));
    if (act && strcmp(act, "silu") != 0)
        return tfc_err(TFC_ERR_UNSUPPORTED, "%s: '%s' has hidden_act \"%s\"; the model's MLP is SwiGLU (silu)", fn,
                       path, act);
    int64_t hd = 0;
    TFC_TRY(tfc_json_get_int(fn, W, root, "head_dim", 1, INT32_MAX, &hd, &found));
    if (found && c->n_head > 0 && hd * c->n_head != c->n_embd)
        return tfc_err(TFC_ERR_UNSUPPORTED,
                       "%s: '%s' has head_dim %lld; the model's heads are hidden_size / num_attention_heads = %d", fn,
                       path, (long long)hd, (int)(c->n_embd / c->n_head));
    TFC_TRY(refuse_number(fn, path, root, "pretraining_tp", 1, "the model computes each Linear whole (1)"));
    TFC_TRY(refuse_number(fn, path, root, "attention_dropout", 0,
                          "the model has no dropout on grouped-query attention's probabilities"));
    if (arch != TFC_GPT_ARCH_LLAMA) TFC_TRY(window(fn, path, root, c->n_layer, c));
    tfc_status s = tfc_gpt_check_config(fn, c);
    if (s != TFC_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", tfc_last_error());
        return tfc_err(TFC_ERR_FORMAT, "%s (from '%s')", why, path);
    }
    return TFC_OK;
}

/* d as JSON the way Python writes a float (1e-06, 10000.0). */
static void put_real(tfc_strbuf *b, double d) {
    char num[64];
    for (int prec = 6; prec <= 17; prec++) {
        snprintf(num, sizeof num, "%.*g", prec, d);
        if (strtod(num, NULL) == d) break;
    }
    if (!strpbrk(num, ".eEn")) strcat(num, ".0");
    tfc_sb_str(b, num);
}

static void put_key(tfc_strbuf *b, const char *key) {
    tfc_sb_str(b, "  ");
    tfc_sb_json_string(b, key);
    tfc_sb_str(b, ": ");
}

static void put_int(tfc_strbuf *b, const char *key, long long v) {
    char num[32];
    put_key(b, key);
    snprintf(num, sizeof num, "%lld,\n", v);
    tfc_sb_str(b, num);
}

static void put_raw(tfc_strbuf *b, const char *key, const char *json) {
    put_key(b, key);
    tfc_sb_str(b, json);
    tfc_sb_str(b, ",\n");
}

static void put_real_kv(tfc_strbuf *b, const char *key, double v) {
    put_key(b, key);
    put_real(b, v);
    tfc_sb_str(b, ",\n");
}

static void put_rope_scaling(tfc_strbuf *b, const tfc_rope_config *r) {
    put_key(b, "rope_scaling");
    static const char *const names[4] = {"default", "linear", "dynamic", "llama3"};
    if (r->rope_type == TFC_ROPE_DEFAULT) {
        tfc_sb_str(b, "null,\n");
        return;
    }
    tfc_sb_str(b, "{\n    \"factor\": ");
    put_real(b, r->factor);
    if (r->rope_type == TFC_ROPE_LLAMA3) {
        char num[32];
        tfc_sb_str(b, ",\n    \"high_freq_factor\": ");
        put_real(b, r->high_freq_factor);
        tfc_sb_str(b, ",\n    \"low_freq_factor\": ");
        put_real(b, r->low_freq_factor);
        snprintf(num, sizeof num, "%lld", (long long)r->original_max_position_embeddings);
        tfc_sb_str(b, ",\n    \"original_max_position_embeddings\": ");
        tfc_sb_str(b, num);
    }
    tfc_sb_str(b, ",\n    \"rope_type\": \"");
    tfc_sb_str(b, names[r->rope_type]);
    tfc_sb_str(b, "\"\n  },\n");
}

void tfc_gpt_llama_config_json(tfc_strbuf *b, const tfc_gpt_config *c, int32_t bos, int32_t eos,
                               const char *torch_dtype) {
    static const char *const classes[4] = {NULL, "LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM"};
    char arch[64];
    snprintf(arch, sizeof arch, "[\n    \"%s\"\n  ]", classes[c->arch]);
    tfc_sb_str(b, "{\n");
    put_raw(b, "architectures", arch);
    if (c->arch == TFC_GPT_ARCH_LLAMA) put_raw(b, "attention_bias", c->attention_bias ? "true" : "false");
    put_raw(b, "attention_dropout", "0.0");
    if (bos >= 0) put_int(b, "bos_token_id", bos);
    if (eos >= 0) put_int(b, "eos_token_id", eos);
    put_int(b, "head_dim", c->n_embd / c->n_head);
    put_raw(b, "hidden_act", "\"silu\"");
    put_int(b, "hidden_size", c->n_embd);
    put_raw(b, "initializer_range", "0.02");
    put_int(b, "intermediate_size", c->mlp_hidden);
    put_int(b, "max_position_embeddings", c->block_size);
    if (c->arch == TFC_GPT_ARCH_QWEN2) put_int(b, "max_window_layers", c->sliding_window ? 0 : c->n_layer);
    if (c->arch == TFC_GPT_ARCH_LLAMA) put_raw(b, "mlp_bias", c->mlp_bias ? "true" : "false");
    put_raw(b, "model_type",
            c->arch == TFC_GPT_ARCH_LLAMA         ? "\"llama\""
                : c->arch == TFC_GPT_ARCH_MISTRAL ? "\"mistral\""
                                                  : "\"qwen2\"");
    put_int(b, "num_attention_heads", c->n_head);
    put_int(b, "num_hidden_layers", c->n_layer);
    put_int(b, "num_key_value_heads", c->n_kv_head ? c->n_kv_head : c->n_head);
    if (c->arch == TFC_GPT_ARCH_LLAMA) put_raw(b, "pretraining_tp", "1");
    put_real_kv(b, "rms_norm_eps", c->ln_eps);
    put_rope_scaling(b, &c->rope);
    put_real_kv(b, "rope_theta", c->rope.theta);
    if (c->arch != TFC_GPT_ARCH_LLAMA) {
        if (c->sliding_window)
            put_int(b, "sliding_window", c->sliding_window);
        else
            put_raw(b, "sliding_window", "null");
    }
    put_raw(b, "tie_word_embeddings", c->tie_weights ? "true" : "false");
    put_raw(b, "torch_dtype", torch_dtype);
    put_raw(b, "use_cache", "true");
    if (c->arch == TFC_GPT_ARCH_QWEN2) put_raw(b, "use_sliding_window", c->sliding_window ? "true" : "false");
    put_key(b, "vocab_size");
    char num[32];
    snprintf(num, sizeof num, "%d\n}\n", (int)c->vocab_size);
    tfc_sb_str(b, num);
}
