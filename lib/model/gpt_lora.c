/*
 * LoRA adapters on the GPT's block Linear layers (include/tfcore/lora.h):
 * the adapter set a model owns, the adapted layer's forward (the LoRA
 * strategy of gpt_linear.c runs it over any base strategy, so training, the
 * KV-cache paths and generation all see it), merging, and the adapter files
 * in PEFT's names and layouts. The layers an adapter can target and their
 * module names are the parameter table's block Linear rows.
 *
 * Layouts follow PEFT: lora_A is an nn.Linear(in, r) weight [r, in], lora_B
 * an nn.Linear(r, out) weight [out, r], for GPT-2's Conv1D (fan_in_fan_out =
 * True) and the Llama family's nn.Linear alike; the delta merged into the
 * base weight is scale·B·A for an [out, in] weight and its transpose for
 * GPT-2's [in, out] one. The forward reads A and B through transposed views, so the
 * tensors the optimizer updates are the very arrays the file stores.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/json.h"
#include "model/gpt_impl.h"
#include "model/gpt_want.h"
#include "tfcore/io.h"

/* Block Linear j's module name, as PEFT's target_modules match it: the parameter table's column (gpt_params.c). */
static const char *module_name(const tfc_gpt *m, int j) { return tfc_gpt_linear_row(&m->arch, j)->module; }
/* PEFT's prefix of every adapter key (PeftModel → LoraModel → the model), before the table's block prefix. */
#define PEFT_BASE "base_model.model."

/* The slot (l·GPT_N_LINEAR + j) of LoRA want pair w/2 of the contract (tfc_gpt_want_lora: n_linear per block). */
static size_t slot_of_want(const tfc_gpt *m, int32_t w) {
    const int32_t n = m->arch.table->n_linear, i = w / 2;
    return (size_t)(i / n) * GPT_N_LINEAR + (size_t)(i % n);
}

/* The contract's want of slot k's A (its B follows), -1 for a slot the architecture does not use. */
static int32_t want_of_slot(const tfc_gpt *m, size_t k) {
    const int32_t n = m->arch.table->n_linear, j = (int32_t)(k % GPT_N_LINEAR), l = (int32_t)(k / GPT_N_LINEAR);
    return j < n ? 2 * (l * n + j) : -1;
}

/* The adapters a model owns: params[] holds the one reference to each tensor; layers[] alias them. */
typedef struct gpt_lora_set {
    int32_t rank;
    double alpha;
    char *targets; /* as given (add) or as stored (load) */
    uint64_t seed;
    gpt_lora *layers; /* n_layer · GPT_N_LINEAR slots; a slot is adapted when its .a is set */
    int32_t n_params;
    char **names;        /* PEFT names */
    tfc_tensor **params; /* A, B of each adapted layer in module order */
} gpt_lora_set;

/* Linear j's input and output widths in m (whatever its weight's layout). */
static void layer_dims(const tfc_gpt *m, int j, int64_t *in, int64_t *out) {
    tfc_gpt_linear_dims(&m->arch, j, in, out);
}

static void set_free(gpt_lora_set *st) {
    if (!st) return;
    for (int32_t i = 0; i < st->n_params; i++) {
        free(st->names[i]);
        tfc_tensor_release(st->params[i]);
    }
    free(st->names);
    free(st->params);
    free(st->layers);
    free(st->targets);
    free(st);
}

/* An empty set for m with room for every layer; NULL when out of memory. */
static gpt_lora_set *set_new(const tfc_gpt *m, int32_t rank, double alpha, const char *targets, uint64_t seed) {
    const size_t slots = (size_t)m->cfg.n_layer * GPT_N_LINEAR;
    gpt_lora_set *st = calloc(1, sizeof *st);
    if (!st) return NULL;
    st->rank = rank;
    st->alpha = alpha;
    st->seed = seed;
    st->targets = strdup(targets);
    st->layers = calloc(slots, sizeof *st->layers);
    st->names = calloc(2 * slots, sizeof *st->names);
    st->params = calloc(2 * slots, sizeof *st->params);
    if (!st->targets || !st->layers || !st->names || !st->params) {
        set_free(st);
        return NULL;
    }
    return st;
}

/*
 * Append slot (l, j)'s A and B (references taken over: released on error
 * too) to st, made leaves that require grad on the model's device.
 */
static tfc_status set_add(const tfc_gpt *m, gpt_lora_set *st, int32_t l, int j, tfc_tensor *a, tfc_tensor *b,
                          const char *fn) {
    tfc_tensor *ab[2] = {a, b};
    const tfc_device_type dev = tfc_tensor_device_type(m->wte);
    const int32_t di = tfc_tensor_device_index(m->wte);
    tfc_status s = TFC_OK;
    for (int k = 0; k < 2 && s == TFC_OK; k++) {
        if (dev != TFC_DEVICE_CPU) {
            tfc_tensor *d = NULL;
            s = tfc_tensor_to_device(ab[k], dev, di, &d);
            tfc_tensor_release(ab[k]);
            ab[k] = d;
        }
        if (s == TFC_OK) s = tfc_tensor_set_requires_grad(ab[k], 1);
    }
    for (int k = 0; k < 2 && s == TFC_OK; k++) {
        char name[160];
        tfc_gpt_lora_key(&m->arch, l, j, k, name, sizeof name);
        char *copy = strdup(name);
        if (!copy) {
            s = tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
            break;
        }
        st->names[st->n_params] = copy;
        st->params[st->n_params++] = ab[k];
        ab[k] = NULL;
    }
    tfc_tensor_release(ab[0]);
    tfc_tensor_release(ab[1]);
    if (s != TFC_OK) return s;
    gpt_lora *lo = &st->layers[l * GPT_N_LINEAR + j];
    lo->a = st->params[st->n_params - 2];
    lo->b = st->params[st->n_params - 1];
    lo->scale = st->alpha / (double)st->rank;
    return TFC_OK;
}

static void set_requires_grad_all(tfc_gpt *m, int32_t on) {
    /* a leaf's flag always takes (parameters are leaves): nothing to undo */
    for (int32_t i = 0; i < m->n_params; i++) {
        tfc_status s = tfc_tensor_set_requires_grad(m->params[i], on);
        (void)s;
    }
}

/* Make st m's adapters (ownership passes to m) and freeze the base. */
static void install(tfc_gpt *m, gpt_lora_set *st) {
    m->lora = st;
    for (int32_t l = 0; l < m->cfg.n_layer; l++)
        for (int j = 0; j < m->arch.table->n_linear; j++) {
            gpt_lora *lo = &st->layers[l * GPT_N_LINEAR + j];
            m->blocks[l].lin[j].lora = lo->a ? lo : NULL;
        }
    set_requires_grad_all(m, 0);
    tfc_gpt_choose_linears(m);
}

void tfc_gpt_lora_free(tfc_gpt *m) {
    if (!m || !m->lora) return;
    for (int32_t l = 0; m->blocks && l < m->cfg.n_layer; l++)
        for (int j = 0; j < GPT_N_LINEAR; j++) m->blocks[l].lin[j].lora = NULL;
    set_free(m->lora);
    m->lora = NULL;
    if (m->blocks) tfc_gpt_choose_linears(m);
}

/* ---- the forward ------------------------------------------------------------------------ */

tfc_status tfc_gpt_lora_apply(tfc_graph *g, const gpt_lora *lo, const tfc_tensor *x, const tfc_tensor *base,
                              tfc_tensor **y) {
    /*
     * scale on the [N, r] product (r ≪ out); B = 0 makes the update exactly 0,
     * so base + 0 is the base bit for bit. tfc_matmul rather than tfc_linear:
     * its GEMM takes the transposed views as flags (tfc_linear's path was 1.5x
     * slower here on char-small). The update u [N, out] is still a separate
     * tensor added to the base's output; fusing it into the base GEMM would
     * save that pass (docs/MODEL.md, "Fine-tuning with LoRA").
     */
    tfc_tensor *at = NULL, *bt = NULL, *t = NULL, *ts = NULL, *u = NULL;
    tfc_status s = tfc_transpose(g, lo->a, 0, 1, &at); /* [in, r] */
    if (s == TFC_OK) s = tfc_matmul(g, x, at, &t);
    if (s == TFC_OK) s = tfc_mul_scalar(g, t, lo->scale, &ts);
    if (s == TFC_OK) s = tfc_transpose(g, lo->b, 0, 1, &bt); /* [r, out] */
    if (s == TFC_OK) s = tfc_matmul(g, ts, bt, &u);
    if (s == TFC_OK) s = tfc_add(g, base, u, y);
    tfc_tensor_release(at);
    tfc_tensor_release(bt);
    tfc_tensor_release(t);
    tfc_tensor_release(ts);
    tfc_tensor_release(u);
    return s;
}

/* ---- tfc_gpt_add_lora ------------------------------------------------------------------- */

/* Whether PEFT's target item (len bytes) names module `full`: the whole name, or a suffix after a dot. */
static int item_matches(const char *full, const char *item, size_t len) {
    const size_t fl = strlen(full);
    if (len > fl || strncmp(full + fl - len, item, len) != 0) return 0;
    return len == fl || full[fl - len - 1] == '.';
}

static int module_char(char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '.' ||
        ch == '-';
}

/* Mark in sel[l·4 + j] the layers targets names; every item must name one. */
static tfc_status select_layers(const tfc_gpt *m, const char *fn, const char *targets, uint8_t *sel) {
    const char *p = targets;
    for (;;) {
        while (*p == ' ') p++;
        const char *end = p;
        while (*end && *end != ',') end++;
        size_t len = (size_t)(end - p);
        while (len > 0 && p[len - 1] == ' ') len--;
        if (len == 0)
            return tfc_err(TFC_ERR_INVALID_ARG, "%s: cfg->targets '%s' has an empty item (want e.g. \"c_attn,c_proj\")",
                           fn, targets);
        for (size_t i = 0; i < len; i++)
            if (!module_char(p[i]))
                return tfc_err(TFC_ERR_INVALID_ARG,
                               "%s: cfg->targets item '%.*s' has a character that is not in a module name", fn,
                               (int)len, p);
        int hits = 0;
        const int all = len == 10 && strncmp(p, "all-linear", 10) == 0;
        for (int32_t l = 0; l < m->cfg.n_layer; l++)
            for (int j = 0; j < m->arch.table->n_linear; j++) {
                char full[128];
                tfc_gpt_module_name(&m->arch, l, j, full, sizeof full);
                if (all || item_matches(full, p, len)) {
                    sel[l * GPT_N_LINEAR + j] = 1;
                    hits++;
                }
            }
        if (!hits) {
            char mods[256] = "";
            for (int j = 0; j < m->arch.table->n_linear; j++) {
                const size_t at = strlen(mods);
                snprintf(mods + at, sizeof mods - at, "%s%s", j ? ", " : "", module_name(m, j));
            }
            return tfc_err(TFC_ERR_INVALID_ARG,
                           "%s: cfg->targets item '%.*s' matches no Linear layer of the model (%d blocks, each with "
                           "%s; an item is a name or a suffix at a dot, e.g. %s, or all-linear)",
                           fn, (int)len, p, (int)m->cfg.n_layer, mods, module_name(m, 1));
        }
        if (!*end) break;
        p = end + 1;
    }
    return TFC_OK;
}

static const char *quant_refusal(const tfc_gpt *m, char *buf, size_t n) { return tfc_gpt_quant_desc(m, buf, n); }

TFC_API tfc_status tfc_gpt_add_lora(tfc_gpt *m, const tfc_lora_config *cfg) {
    const char *fn = "tfc_gpt_add_lora";
    TFC_CHECK_NOT_NULL(fn, m);
    TFC_CHECK_NOT_NULL(fn, cfg);
    if (cfg->struct_size < sizeof(tfc_lora_config))
        return tfc_err(TFC_ERR_VERSION, "%s: cfg->struct_size is %u, need %zu (use TFC_LORA_CONFIG_INIT)", fn,
                       (unsigned)cfg->struct_size, sizeof(tfc_lora_config));
    if (m->lora)
        return tfc_err(TFC_ERR_INVALID_ARG,
                       "%s: m has LoRA adapters already (rank %d on %s); merge them (tfc_gpt_merge_lora) first", fn,
                       (int)m->lora->rank, m->lora->targets);
    char what[64];
    if (tfc_gpt_is_quantized(m))
        return tfc_err(TFC_ERR_UNSUPPORTED,
                       "%s: m is quantized (%s), which is inference-only: train adapters on the f32 model "
                       "(tfc_gpt_load_lora can attach trained ones to a quantized model)",
                       fn, quant_refusal(m, what, sizeof what));
    if (!(isfinite(cfg->alpha) && cfg->alpha > 0))
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: cfg->alpha is %g, need a finite value > 0", fn, cfg->alpha);
    TFC_CHECK_NOT_NULL_AS(fn, cfg->targets, "cfg->targets");
    if (!*cfg->targets)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: cfg->targets is empty (want e.g. \"c_attn\" or \"c_attn,c_proj\")",
                       fn);
    const size_t slots = (size_t)m->cfg.n_layer * GPT_N_LINEAR;
    uint8_t *sel = calloc(slots, 1);
    if (!sel) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    tfc_status s = select_layers(m, fn, cfg->targets, sel);
    for (size_t k = 0; k < slots && s == TFC_OK; k++) {
        if (!sel[k]) continue;
        int64_t in, out;
        char name[128];
        layer_dims(m, (int)(k % GPT_N_LINEAR), &in, &out);
        if (cfg->rank < 1 || cfg->rank > (in < out ? in : out))
            s = tfc_err(
                TFC_ERR_INVALID_ARG, "%s: cfg->rank is %d, need 1 .. %lld for %s", fn, (int)cfg->rank,
                (long long)(in < out ? in : out),
                tfc_gpt_module_name(&m->arch, (int32_t)(k / GPT_N_LINEAR), (int)(k % GPT_N_LINEAR), name, sizeof name));
    }
    gpt_lora_set *st = NULL;
    if (s == TFC_OK && !(st = set_new(m, cfg->rank, cfg->alpha, cfg->targets, cfg->seed)))
        s = tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    uint64_t offset = 0;
    for (size_t k = 0; k < slots && s == TFC_OK; k++) {
        if (!sel[k]) continue;
        const int j = (int)(k % GPT_N_LINEAR);
        int64_t in, out;
        layer_dims(m, j, &in, &out);
        const int64_t da[2] = {cfg->rank, in}, db[2] = {out, cfg->rank};
        tfc_tensor *a = NULL, *b = NULL;
        /* PEFT: kaiming_uniform_(a=√5) on [r, in]: bound = √(6/((1+5)·in)) = 1/√in */
        const double bound = 1.0 / sqrt((double)in);
        s = tfc_tensor_empty(da, 2, m->cfg.dtype, &a);
        if (s == TFC_OK) s = tfc_tensor_fill_uniform(a, -bound, bound, cfg->seed, offset);
        offset += (uint64_t)(cfg->rank * in); /* past every counter A used, whatever the draws per counter */
        if (s == TFC_OK) s = tfc_tensor_zeros(db, 2, m->cfg.dtype, &b);
        if (s == TFC_OK)
            s = set_add(m, st, (int32_t)(k / GPT_N_LINEAR), j, a, b, fn);
        else {
            tfc_tensor_release(a);
            tfc_tensor_release(b);
        }
    }
    free(sel);
    if (s != TFC_OK) {
        set_free(st);
        return tfc_err_in(fn, s);
    }
    install(m, st);
    return TFC_OK;
}

TFC_API tfc_status tfc_gpt_lora_params(const tfc_gpt *m, int32_t *n, const char *const **names,
                                       tfc_tensor *const **params) {
    const char *fn = "tfc_gpt_lora_params";
    TFC_CHECK_NOT_NULL(fn, m);
    TFC_CHECK_NOT_NULL(fn, n);
    TFC_CHECK_NOT_NULL(fn, names);
    TFC_CHECK_NOT_NULL(fn, params);
    *n = m->lora ? m->lora->n_params : 0;
    *names = m->lora ? (const char *const *)m->lora->names : NULL;
    *params = m->lora ? m->lora->params : NULL;
    return TFC_OK;
}

TFC_API tfc_status tfc_gpt_get_lora_config(const tfc_gpt *m, tfc_lora_config *cfg) {
    const char *fn = "tfc_gpt_get_lora_config";
    TFC_CHECK_NOT_NULL(fn, m);
    TFC_CHECK_NOT_NULL(fn, cfg);
    if (cfg->struct_size < sizeof(tfc_lora_config))
        return tfc_err(TFC_ERR_VERSION, "%s: cfg->struct_size is %u, need %zu", fn, (unsigned)cfg->struct_size,
                       sizeof(tfc_lora_config));
    const gpt_lora_set *st = m->lora;
    cfg->rank = st ? st->rank : 0;
    cfg->alpha = st ? st->alpha : 0.0;
    cfg->targets = st ? st->targets : NULL;
    cfg->seed = st ? st->seed : 0;
    return TFC_OK;
}

/* ---- merging ---------------------------------------------------------------------------- */

TFC_API tfc_status tfc_gpt_merge_lora(tfc_gpt *m) {
    const char *fn = "tfc_gpt_merge_lora";
    TFC_CHECK_NOT_NULL(fn, m);
    if (!m->lora) return tfc_err(TFC_ERR_INVALID_ARG, "%s: m has no LoRA adapters to merge", fn);
    char what[64];
    if (tfc_gpt_is_quantized(m))
        return tfc_err(TFC_ERR_UNSUPPORTED,
                       "%s: m is quantized (%s): adapters cannot be merged into quantized weights (merge into the f32 "
                       "model, then quantize)",
                       fn, quant_refusal(m, what, sizeof what));
    const size_t slots = (size_t)m->cfg.n_layer * GPT_N_LINEAR;
    tfc_tensor **merged = calloc(slots, sizeof *merged);
    if (!merged) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    tfc_status s = TFC_OK;
    /* every new weight first, so a failure leaves the model as it was */
    for (size_t k = 0; k < slots && s == TFC_OK; k++) {
        const gpt_lora *lo = &m->lora->layers[k];
        if (!lo->a) continue;
        tfc_tensor *at = NULL, *bt = NULL, *d = NULL, *ds = NULL;
        const gpt_linear *lin = &m->blocks[k / GPT_N_LINEAR].lin[k % GPT_N_LINEAR];
        if (!lin->in_out)
            s = tfc_matmul(NULL, lo->b, lo->a, &d); /* B·A [out, in], nn.Linear's layout */
        else {
            s = tfc_transpose(NULL, lo->a, 0, 1, &at);
            if (s == TFC_OK) s = tfc_transpose(NULL, lo->b, 0, 1, &bt);
            if (s == TFC_OK) s = tfc_matmul(NULL, at, bt, &d); /* (B·A)ᵀ = Aᵀ·Bᵀ [in, out], Conv1D's */
        }
        if (s == TFC_OK) s = tfc_mul_scalar(NULL, d, lo->scale, &ds);
        if (s == TFC_OK) s = tfc_add(NULL, m->blocks[k / GPT_N_LINEAR].lin[k % GPT_N_LINEAR].w, ds, &merged[k]);
        tfc_tensor_release(at);
        tfc_tensor_release(bt);
        tfc_tensor_release(d);
        tfc_tensor_release(ds);
    }
    /* in place: tensors callers hold from tfc_gpt_params (optimizers) stay the model's */
    for (size_t k = 0; k < slots && s == TFC_OK; k++)
        if (merged[k]) s = tfc_tensor_copy_from(m->blocks[k / GPT_N_LINEAR].lin[k % GPT_N_LINEAR].w, merged[k]);
    for (size_t k = 0; k < slots; k++) tfc_tensor_release(merged[k]);
    free(merged);
    if (s != TFC_OK) return tfc_err_in(fn, s);
    tfc_gpt_lora_free(m);
    set_requires_grad_all(m, 1);
    return TFC_OK;
}

/* ---- device moves ----------------------------------------------------------------------- */

tfc_status tfc_gpt_lora_move(const tfc_gpt *m, tfc_device_type device, int32_t index, tfc_tensor ***moved) {
    *moved = NULL;
    if (!m->lora) return TFC_OK;
    const gpt_lora_set *st = m->lora;
    tfc_tensor **mv = calloc((size_t)st->n_params, sizeof *mv);
    if (!mv) return tfc_err(TFC_ERR_OOM, "tfc_gpt_to_device: out of memory");
    tfc_status s = TFC_OK;
    for (int32_t i = 0; i < st->n_params && s == TFC_OK; i++) {
        s = tfc_tensor_to_device(st->params[i], device, index, &mv[i]);
        /* a new leaf even on the same device: the old one's gradient must not carry over */
        if (s == TFC_OK && mv[i] == st->params[i]) {
            tfc_tensor_release(mv[i]);
            mv[i] = NULL;
            s = tfc_tensor_clone(st->params[i], &mv[i]);
        }
        if (s == TFC_OK) s = tfc_tensor_set_requires_grad(mv[i], 1);
        if (s != TFC_OK) s = tfc_err_in("tfc_gpt_to_device", s);
    }
    if (s != TFC_OK) {
        tfc_gpt_lora_drop_moved(m, mv);
        return s;
    }
    *moved = mv;
    return TFC_OK;
}

void tfc_gpt_lora_drop_moved(const tfc_gpt *m, tfc_tensor **moved) {
    if (!moved) return;
    for (int32_t i = 0; m->lora && i < m->lora->n_params; i++) tfc_tensor_release(moved[i]);
    free(moved);
}

void tfc_gpt_lora_install_moved(tfc_gpt *m, tfc_tensor **moved) {
    if (!moved) return;
    gpt_lora_set *st = m->lora;
    const size_t slots = (size_t)m->cfg.n_layer * GPT_N_LINEAR;
    for (size_t k = 0, i = 0; k < slots; k++) {
        gpt_lora *lo = &st->layers[k];
        if (!lo->a) continue;
        tfc_tensor_release(st->params[i]);
        tfc_tensor_release(st->params[i + 1]);
        st->params[i] = lo->a = moved[i];
        st->params[i + 1] = lo->b = moved[i + 1];
        i += 2;
    }
    free(moved);
}

/* ---- files ------------------------------------------------------------------------------ */

TFC_API tfc_status tfc_gpt_save_lora(const tfc_gpt *m, const char *path, const char *const *meta_keys,
                                     const char *const *meta_values, int32_t n_meta) {
    const char *fn = "tfc_gpt_save_lora";
    TFC_CHECK_NOT_NULL(fn, m);
    TFC_CHECK_NOT_NULL(fn, path);
    if (n_meta < 0) return tfc_err(TFC_ERR_INVALID_ARG, "%s: n_meta is %d, must be >= 0", fn, (int)n_meta);
    if (n_meta > 0) TFC_CHECK_NOT_NULL(fn, meta_keys);
    if (n_meta > 0) TFC_CHECK_NOT_NULL(fn, meta_values);
    if (!m->lora) return tfc_err(TFC_ERR_INVALID_ARG, "%s: m has no LoRA adapters to save", fn);
    const gpt_lora_set *st = m->lora;
    enum { N_OWN = 4 };
    const char **keys = malloc(((size_t)n_meta + N_OWN) * sizeof *keys);
    const char **vals = malloc(((size_t)n_meta + N_OWN) * sizeof *vals);
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    }
    char rank[32], alpha[40];
    snprintf(rank, sizeof rank, "%d", (int)st->rank);
    snprintf(alpha, sizeof alpha, "%.17g", st->alpha);
    const char *own_k[N_OWN] = {"format", "tfc.lora.rank", "tfc.lora.alpha", "tfc.lora.targets"};
    const char *own_v[N_OWN] = {"pt", rank, alpha, st->targets};
    for (int i = 0; i < N_OWN; i++) keys[i] = own_k[i], vals[i] = own_v[i];
    for (int32_t i = 0; i < n_meta; i++) keys[N_OWN + i] = meta_keys[i], vals[N_OWN + i] = meta_values[i];
    tfc_status s = tfc_safetensors_save(path, (const char *const *)st->names, st->params, st->n_params, keys, vals,
                                        n_meta + N_OWN);
    free(keys);
    free(vals);
    return tfc_err_in(fn, s);
}

/* s as a JSON string (quotes, escapes) into f. */
static void put_json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

TFC_API tfc_status tfc_gpt_save_lora_config(const tfc_gpt *m, const char *path, const char *base_model) {
    const char *fn = "tfc_gpt_save_lora_config";
    TFC_CHECK_NOT_NULL(fn, m);
    TFC_CHECK_NOT_NULL(fn, path);
    if (!m->lora) return tfc_err(TFC_ERR_INVALID_ARG, "%s: m has no LoRA adapters", fn);
    const gpt_lora_set *st = m->lora;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    fprintf(f, "{\n  \"peft_type\": \"LORA\",\n  \"task_type\": \"CAUSAL_LM\",\n  \"base_model_name_or_path\": ");
    if (base_model)
        put_json_string(f, base_model);
    else
        fputs("null", f);
    fprintf(f, ",\n  \"r\": %d,\n  \"lora_alpha\": %.17g,\n  \"lora_dropout\": 0.0,\n  \"target_modules\": [",
            (int)st->rank, st->alpha);
    /* the items as given; add_lora allowed only module-name characters in them */
    const char *p = st->targets;
    for (int first = 1; *p;) {
        while (*p == ' ' || *p == ',') p++;
        const char *end = p;
        while (*end && *end != ',') end++;
        size_t n = (size_t)(end - p);
        while (n > 0 && p[n - 1] == ' ') n--;
        if (n) {
            fprintf(f, "%s\"%.*s\"", first ? "" : ", ", (int)n, p);
            first = 0;
        }
        p = end;
    }
    /* PEFT's flag for GPT-2's Conv1D [in, out] weights; the Llama family's are nn.Linear's */
    fprintf(f,
            "],\n  \"fan_in_fan_out\": %s,\n  \"bias\": \"none\",\n  \"use_rslora\": false,\n"
            "  \"init_lora_weights\": true,\n  \"modules_to_save\": null,\n  \"inference_mode\": true\n}\n",
            m->blocks[0].lin[0].in_out ? "true" : "false");
    if (fclose(f) != 0) {
        free(text);
        return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    }
    tfc_atomic_file af;
    tfc_status s = tfc_atomic_open(fn, path, &af);
    if (s == TFC_OK) s = tfc_atomic_write(fn, &af, text, len);
    if (s == TFC_OK)
        s = tfc_atomic_commit(fn, &af);
    else if (af.fp)
        tfc_atomic_abort(&af);
    free(text);
    return s;
}

/* PEFT settings whose adapters this loader cannot reproduce: present and not "off" (null, {}, [], false), refused. */
static tfc_status refuse_peft_fields(const char *fn, const char *cfgpath, const json_t *root) {
    static const char *const unsupported[] = {"alpha_pattern",   "rank_pattern", "layers_to_transform",
                                              "modules_to_save", "use_dora",     "lora_bias"};
    for (size_t i = 0; i < sizeof unsupported / sizeof unsupported[0]; i++) {
        const json_t *v = json_object_get(root, unsupported[i]);
        const int off = !v || json_is_null(v) || json_is_false(v) ||
            ((json_is_object(v) && json_object_size(v) == 0) || (json_is_array(v) && json_array_size(v) == 0));
        if (!off)
            return tfc_err(TFC_ERR_UNSUPPORTED, "%s: %s sets \"%s\", which the loader cannot honour", fn, cfgpath,
                           unsupported[i]);
    }
    const char *bias = NULL, *type = NULL;
    TFC_TRY(tfc_json_get_string(fn, cfgpath, root, "bias", &bias, NULL));
    if (bias && strcmp(bias, "none") != 0)
        return tfc_err(TFC_ERR_UNSUPPORTED, "%s: %s sets \"bias\": \"%s\"; only \"none\" is read", fn, cfgpath, bias);
    TFC_TRY(tfc_json_get_string(fn, cfgpath, root, "peft_type", &type, NULL));
    if (type && strcmp(type, "LORA") != 0)
        return tfc_err(TFC_ERR_UNSUPPORTED, "%s: %s has peft_type \"%s\"; only \"LORA\" is read", fn, cfgpath, type);
    return TFC_OK;
}

/* What a PEFT adapter_config.json says of the adapters. */
typedef struct peft_config {
    int found;    /* there is one beside the file */
    double alpha; /* lora_alpha, > 0 */
    int64_t r;    /* "r"; -1 when absent */
    int rslora;   /* use_rslora */
    char path[4200];
} peft_config;

/*
 * The adapter_config.json beside file (a PEFT adapter file) into *pc;
 * pc->found = 0 and nothing else when there is none. The document is parsed
 * as JSON (lib/io/json.h: top-level keys only, the last of a repeated key
 * wins). Settings that change the adapters' math in ways the model does not
 * compute are refused by name; "r" becomes a claim the tensors are held
 * against (read_set).
 */
static tfc_status read_peft_config(const char *fn, const char *file, peft_config *pc) {
    const char *slash = strrchr(file, '/');
    if (slash)
        snprintf(pc->path, sizeof pc->path, "%.*s/adapter_config.json", (int)(slash - file), file);
    else
        snprintf(pc->path, sizeof pc->path, "adapter_config.json");
    const char *cfgpath = pc->path;
    pc->found = 0;
    pc->r = -1;
    FILE *f = fopen(cfgpath, "rb");
    if (!f) return TFC_OK;
    pc->found = 1;
    json_t *root = NULL;
    tfc_status s = tfc_json_read(fn, cfgpath, f, 1u << 20, 0, &root); /* PEFT writes about 1 KB */
    fclose(f);
    if (s == TFC_OK && !json_is_object(root)) s = tfc_err(TFC_ERR_FORMAT, "%s: %s is not a JSON object", fn, cfgpath);
    int have_a = 0, have_r = 0;
    if (s == TFC_OK) s = tfc_json_get_number(fn, cfgpath, root, "lora_alpha", -HUGE_VAL, HUGE_VAL, &pc->alpha, &have_a);
    if (s == TFC_OK && (!have_a || !(pc->alpha > 0)))
        s = tfc_err(TFC_ERR_FORMAT, "%s: %s has no usable \"lora_alpha\" (a number > 0)", fn, cfgpath);
    if (s == TFC_OK) s = tfc_json_get_int(fn, cfgpath, root, "r", 1, INT32_MAX, &pc->r, &have_r);
    if (s == TFC_OK && !have_r) pc->r = -1;
    if (s == TFC_OK) s = tfc_json_get_bool(fn, cfgpath, root, "use_rslora", &pc->rslora, NULL);
    if (s == TFC_OK && pc->rslora < 0) pc->rslora = 0;
    if (s == TFC_OK) s = refuse_peft_fields(fn, cfgpath, root);
    json_decref(root);
    return s;
}

/*
 * The adapters' alpha for rank `rank`, from the metadata tfc.lora.alpha and
 * from the adapter_config.json pc: either alone gives it. pc was read when
 * the file has PEFT's name, adapter_model.safetensors (a PEFT directory),
 * or has no alpha in its metadata; then both must agree, so a config whose
 * settings say another model (an rsLoRA scale, another lora_alpha, a field
 * refused by name) is never overridden by the metadata in silence. A file
 * of another name with alpha in its metadata is a save_lora file, which may
 * share a folder with other adapters' configs. use_rslora's scale
 * lora_alpha/√r is honoured as the plain-scaling alpha lora_alpha·√r (the
 * set keeps alpha with scale alpha/r).
 */
static tfc_status adapter_alpha(const char *fn, const char *file, const tfc_safetensors *f, const peft_config *pc,
                                int32_t rank, double *alpha) {
    double meta = NAN, cfg = NAN;
    const char *ameta = NULL;
    if (tfc_safetensors_metadata(f, "tfc.lora.alpha", &ameta) == TFC_OK && ameta) {
        char *end;
        meta = strtod(ameta, &end);
        if (end == ameta || *end || !isfinite(meta) || meta <= 0)
            return tfc_err(TFC_ERR_FORMAT, "%s: '%s': metadata tfc.lora.alpha is '%s', need a number > 0", fn, file,
                           ameta);
    }
    if (pc->found) {
        cfg = pc->rslora ? pc->alpha * sqrt((double)rank) : pc->alpha;
        if (!isfinite(cfg))
            return tfc_err(TFC_ERR_FORMAT, "%s: %s: \"lora_alpha\" %g at rank %d overflows", fn, pc->path, pc->alpha,
                           (int)rank);
    }
    if (!ameta && !pc->found)
        return tfc_err(TFC_ERR_FORMAT,
                       "%s: '%s' has no tfc.lora.alpha metadata and no adapter_config.json beside it to take "
                       "lora_alpha from",
                       fn, file);
    if (ameta && pc->found && fabs(meta - cfg) > 1e-12 * fabs(meta))
        return tfc_err(TFC_ERR_FORMAT,
                       "%s: '%s': metadata tfc.lora.alpha %s disagrees with the adapter_config.json beside it, "
                       "which gives the scale of alpha %.17g",
                       fn, file, ameta, cfg);
    *alpha = pc->found ? cfg : meta;
    return TFC_OK;
}

/* Parse a PEFT key into (layer, j); 0 when it is not a block Linear's lora_A/lora_B weight. */
static int parse_key(const tfc_gpt *m, const char *name, int32_t *layer, int *j) {
    const size_t bl = strlen(PEFT_BASE), pl = strlen(m->arch.table->block_prefix);
    if (strncmp(name, PEFT_BASE, bl) != 0 || strncmp(name + bl, m->arch.table->block_prefix, pl) != 0) return 0;
    const char *p = name + bl + pl;
    if (*p < '0' || *p > '9') return 0;
    char *end;
    errno = 0;
    long l = strtol(p, &end, 10);
    if (errno || l > INT32_MAX || *end != '.' || (end - p > 1 && *p == '0')) return 0;
    p = end + 1;
    for (int k = 0; k < m->arch.table->n_linear; k++) {
        size_t ln = strlen(module_name(m, k));
        if (strncmp(p, module_name(m, k), ln) != 0) continue;
        if (strcmp(p + ln, ".lora_A.weight") == 0 || strcmp(p + ln, ".lora_B.weight") == 0) {
            *layer = (int32_t)l;
            *j = k;
            return 1;
        }
    }
    return 0;
}

/* A copy of src (file dtype, CPU) in the model's dtype, checked finite. */
static tfc_status convert(const tfc_gpt *m, const char *fn, const char *name, const tfc_tensor *src, tfc_tensor **out) {
    int64_t d[2] = {tfc_tensor_dim(src, 0), tfc_tensor_dim(src, 1)};
    tfc_tensor *t = NULL, *f64 = NULL;
    tfc_status s = tfc_tensor_empty(d, 2, m->cfg.dtype, &t);
    if (s == TFC_OK) s = tfc_tensor_copy_from(t, src);
    if (s == TFC_OK) s = tfc_tensor_empty(d, 2, TFC_DTYPE_F64, &f64);
    if (s == TFC_OK) s = tfc_tensor_copy_from(f64, src);
    const size_t n = (size_t)(d[0] * d[1]);
    double *h = s == TFC_OK ? malloc(n * sizeof *h + 1) : NULL;
    if (s == TFC_OK && !h) s = tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    if (s == TFC_OK) s = tfc_tensor_copy_to_host(f64, h, n * sizeof *h);
    for (size_t i = 0; i < n && s == TFC_OK; i++)
        if (!isfinite(h[i]))
            s = tfc_err(TFC_ERR_NONFINITE, "%s: tensor '%s' has a non-finite value (%g) at element %zu", fn, name, h[i],
                        i);
    free(h);
    tfc_tensor_release(f64);
    if (s != TFC_OK) {
        tfc_tensor_release(t);
        return s;
    }
    *out = t;
    return TFC_OK;
}

/* The targets a loaded file covers when it does not say: the module names of its adapted layers. */
static void targets_of(const tfc_gpt *m, const tfc_contract *c, char *buf, size_t cap) {
    buf[0] = 0;
    for (int j = 0; j < m->arch.table->n_linear; j++) {
        int any = 0;
        for (int32_t l = 0; l < m->cfg.n_layer && !any; l++)
            any = tfc_contract_found(c, want_of_slot(m, (size_t)l * GPT_N_LINEAR + (size_t)j)) != NULL;
        if (!any) continue;
        size_t at = strlen(buf);
        snprintf(buf + at, cap - at, "%s%s", at ? "," : "", module_name(m, j));
    }
}

/* What the LoRA reader's words for contract faults need. */
typedef struct lora_words {
    const tfc_gpt *m;
    int32_t rank;       /* the symbol r */
    int32_t meta_claim; /* which claim is tfc.lora.rank's (-1: none); another is adapter_config.json's */
    const char *meta_text, *cfg_path;
    int64_t cfg_r;
} lora_words;

/* LoRA's words for the faults of its contract: the shapes in PEFT's terms, keys that are no adapter, the rank. */
static tfc_status lora_explain(void *ctx, const tfc_contract *c, const tfc_fault *f) {
    const lora_words *lw = ctx;
    const tfc_gpt *m = lw->m;
    const char *fn = c->fn, *file = c->file;
    if (f->kind == TFC_FAULT_STRANGER) {
        const char *name = c->held[f->held].name;
        int32_t l;
        int j;
        if (!parse_key(m, name, &l, &j)) {
            char mods[256] = "";
            for (int k = 0; k < m->arch.table->n_linear; k++) {
                const size_t at = strlen(mods);
                snprintf(mods + at, sizeof mods - at, "%s%s", k ? "," : "", module_name(m, k));
            }
            return tfc_err(TFC_ERR_FORMAT,
                           "%s: '%s': tensor '%s' is not a LoRA weight of a %s block Linear (want " PEFT_BASE
                           "%s<layer>.{%s}.lora_{A,B}.weight)",
                           fn, file, name, tfc_gpt_arch_name(m->cfg.arch), m->arch.table->block_prefix, mods);
        }
        return tfc_err(TFC_ERR_SHAPE, "%s: '%s': tensor '%s' is for block %d but the model has %d blocks", fn, file,
                       name, (int)l, (int)m->cfg.n_layer);
    }
    if (f->kind == TFC_FAULT_CLAIM) {
        if (f->other == lw->meta_claim)
            return tfc_err(TFC_ERR_FORMAT, "%s: '%s': metadata tfc.lora.rank is '%s' but the tensors have rank %lld",
                           fn, file, lw->meta_text, (long long)f->value);
        return tfc_err(TFC_ERR_FORMAT, "%s: %s has \"r\": %lld but the tensors of '%s' have rank %lld", fn,
                       lw->cfg_path, (long long)lw->cfg_r, file, (long long)f->value);
    }
    if (f->kind != TFC_FAULT_SHAPE && f->kind != TFC_FAULT_SYM_RANGE && f->kind != TFC_FAULT_SYM_DIFFER) return TFC_OK;
    const tfc_want *w = &c->want[f->want];
    const tfc_held *h = &c->held[f->held];
    const int is_b = f->want % 2;
    int64_t in, out;
    layer_dims(m, (int)(slot_of_want(m, f->want) % GPT_N_LINEAR), &in, &out);
    if (!is_b && f->kind == TFC_FAULT_SYM_DIFFER)
        return tfc_err(TFC_ERR_FORMAT, "%s: '%s': %s has rank %lld, other layers %lld (one rank per file)", fn, file,
                       w->name, (long long)f->value, (long long)f->expected);
    if (!is_b)
        return tfc_err(TFC_ERR_SHAPE, "%s: '%s': %s is %s, the model needs [r, %lld] with 1 <= r <= %lld", fn, file,
                       w->name, tfc_fmt_dims(h->dims, h->ndim), (long long)in, (long long)c->sym[lw->rank].hi);
    return tfc_err(TFC_ERR_SHAPE, "%s: '%s': %s is %s, the model needs [%lld, %lld]", fn, file, w->name,
                   tfc_fmt_dims(h->dims, h->ndim), (long long)out, (long long)c->sym[lw->rank].value);
}

/*
 * The contract of adapter file f for m (gpt_want.c: each block Linear's
 * A [r, in] and B [out, r], a pair or neither, one rank r): every tensor an
 * adapter of m, and the rank the metadata and adapter_config.json state
 * held against the tensors'. On success *out holds the checked contract.
 */
static tfc_status lora_contract(const tfc_gpt *m, const char *fn, const char *file, const tfc_safetensors *f,
                                const peft_config *pc, lora_words *lw, tfc_contract **out) {
    tfc_contract *c = NULL;
    char model[96];
    snprintf(model, sizeof model, "the model (%d blocks, n_embd %d)", (int)m->cfg.n_layer, (int)m->cfg.n_embd);
    TFC_TRY(tfc_contract_new(fn, file, model, &c));
    *lw = (lora_words){.m = m, .meta_claim = -1, .cfg_path = pc->path, .cfg_r = pc->r};
    tfc_status s = tfc_gpt_want_lora(m, c, &lw->rank);
    const char *rm = NULL;
    if (s == TFC_OK && tfc_safetensors_metadata(f, "tfc.lora.rank", &rm) == TFC_OK && rm) {
        char *end;
        errno = 0;
        const long long r = strtoll(rm, &end, 10);
        if (end == rm || *end || errno)
            s = tfc_err(TFC_ERR_FORMAT, "%s: '%s': metadata tfc.lora.rank is '%s', not a rank", fn, file, rm);
        lw->meta_claim = c->n_claim;
        lw->meta_text = rm;
        if (s == TFC_OK) s = tfc_contract_add_claim(c, lw->rank, r, "metadata tfc.lora.rank");
    }
    if (s == TFC_OK && pc->found && pc->r >= 0)
        s = tfc_contract_add_claim(c, lw->rank, pc->r, "adapter_config.json's \"r\"");
    if (s == TFC_OK) s = tfc_contract_hold_safetensors(c, f);
    tfc_contract_set_explain(c, lora_explain, lw);
    if (s == TFC_OK) s = tfc_contract_check(c);
    if (s != TFC_OK) {
        tfc_contract_free(c);
        return s;
    }
    *out = c;
    return TFC_OK;
}

/* The adapters of file f (opened from `file`) as a set for m. */
static tfc_status read_set(const tfc_gpt *m, const char *fn, const char *file, const tfc_safetensors *f,
                           gpt_lora_set **out) {
    const int32_t L = m->cfg.n_layer;
    const size_t slots = (size_t)L * GPT_N_LINEAR;
    peft_config pc = {0};
    const char *ameta = NULL, *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    tfc_status s = tfc_safetensors_metadata(f, "tfc.lora.alpha", &ameta);
    /* a PEFT directory's own config, or the one that gives alpha when the metadata does not */
    if (s == TFC_OK && (!ameta || strcmp(base, "adapter_model.safetensors") == 0)) s = read_peft_config(fn, file, &pc);
    tfc_contract *c = NULL;
    lora_words lw;
    if (s == TFC_OK) s = lora_contract(m, fn, file, f, &pc, &lw, &c);
    const int64_t r = s == TFC_OK ? tfc_contract_sym_value(c, lw.rank) : -1;
    if (s == TFC_OK && r < 0)
        s = tfc_err(TFC_ERR_FORMAT, "%s: '%s' holds no LoRA weights (no tensor named " PEFT_BASE "%s...lora_A.weight)",
                    fn, file, m->arch.table->block_prefix);
    const int32_t rank = (int32_t)r;
    double alpha = NAN;
    if (s == TFC_OK) s = adapter_alpha(fn, file, f, &pc, rank, &alpha);
    const char *tmeta = NULL;
    char found[160];
    if (s == TFC_OK && (tfc_safetensors_metadata(f, "tfc.lora.targets", &tmeta) != TFC_OK || !tmeta)) {
        targets_of(m, c, found, sizeof found);
        tmeta = found;
    }
    gpt_lora_set *st = NULL;
    if (s == TFC_OK && !(st = set_new(m, rank, alpha, tmeta, 0))) s = tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    for (size_t k = 0; k < slots && s == TFC_OK; k++) {
        const int32_t w = want_of_slot(m, k);
        if (w < 0) continue;
        const tfc_held *ha = tfc_contract_found(c, w), *hb = tfc_contract_found(c, w + 1);
        if (!ha) continue;
        tfc_tensor *a = NULL, *b = NULL;
        s = convert(m, fn, ha->name, ha->values, &a);
        if (s == TFC_OK) s = convert(m, fn, hb->name, hb->values, &b);
        if (s == TFC_OK)
            s = set_add(m, st, (int32_t)(k / GPT_N_LINEAR), (int)(k % GPT_N_LINEAR), a, b, fn);
        else {
            tfc_tensor_release(a);
            tfc_tensor_release(b);
        }
    }
    tfc_contract_free(c);
    if (s != TFC_OK) {
        set_free(st);
        return s;
    }
    *out = st;
    return TFC_OK;
}

TFC_API tfc_status tfc_gpt_load_lora(tfc_gpt *m, const char *path) {
    const char *fn = "tfc_gpt_load_lora";
    TFC_CHECK_NOT_NULL(fn, m);
    TFC_CHECK_NOT_NULL(fn, path);
    if (m->lora)
        return tfc_err(TFC_ERR_INVALID_ARG,
                       "%s: m has LoRA adapters already (rank %d on %s); merge them (tfc_gpt_merge_lora) first", fn,
                       (int)m->lora->rank, m->lora->targets);
    char file[4200];
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        snprintf(file, sizeof file, "%s/adapter_model.safetensors", path);
    else
        snprintf(file, sizeof file, "%s", path);
    tfc_safetensors *f = NULL;
    TFC_TRY(tfc_safetensors_load(file, &f));
    gpt_lora_set *st = NULL;
    tfc_status s = read_set(m, fn, file, f, &st);
    tfc_safetensors_release(f);
    if (s != TFC_OK) return tfc_err_in(fn, s);
    install(m, st);
    return TFC_OK;
}
