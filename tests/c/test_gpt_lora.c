/*
 * LoRA adapters (include/tfcore/lora.h): a fresh adapter leaves the logits
 * bit for bit; training changes the adapters only; the adapted logits
 * against an independent reference (a second model whose weights are
 * W + (alpha/r)·Aᵀ·Bᵀ computed here in double), the cached path, merging;
 * gradients against f64 central differences; PEFT's names and shapes; file
 * round trips (ours and a PEFT-style file with only adapter_config.json);
 * and every bad input getting a clear status with the model unchanged.
 */
#include <sys/stat.h>
#include <unistd.h>

#include "tfc_test_util.h"

TFC_TEST_MAIN

static const char *const LNAMES[4] = {"attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj"};
enum { L = 2, C = 16, V = 23, T = 8 };

static tfc_gpt *model(tfc_dtype dt, uint64_t seed) {
    tfc_gpt_config c = TFC_GPT_CONFIG_INIT;
    c.n_layer = L;
    c.n_head = 2;
    c.n_embd = C;
    c.block_size = 16;
    c.vocab_size = V;
    c.dtype = dt;
    tfc_gpt *m = NULL;
    if (tfc_gpt_new(&c, seed, &m) != TFC_OK) abort();
    t_gpt_randomize_biases(m, seed);
    return m;
}

static tfc_tensor *lora_param(const tfc_gpt *m, const char *name) {
    int32_t n;
    const char *const *names;
    tfc_tensor *const *ps;
    if (tfc_gpt_lora_params(m, &n, &names, &ps) != TFC_OK) abort();
    for (int32_t i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0) return ps[i];
    return NULL;
}

static tfc_tensor *ids(uint64_t seed, int64_t b, int64_t t) {
    int32_t v[64];
    for (int64_t i = 0; i < b * t; i++) v[i] = (int32_t)((seed * 7 + (uint64_t)i * 13 + (uint64_t)(i * i)) % V);
    const int64_t d[2] = {b, t};
    tfc_tensor *x = NULL;
    if (tfc_tensor_from_data(v, d, 2, TFC_DTYPE_I32, &x) != TFC_OK) abort();
    return x;
}

/* The logits of m on x as f32 (B·T·V floats; caller frees). */
static float *logits_f32(tfc_gpt *m, const tfc_tensor *x) {
    tfc_tensor *lg = NULL, *f = NULL;
    CHECK_OK(tfc_gpt_forward(m, NULL, x, NULL, &lg, NULL));
    CHECK_OK(tfc_cast(NULL, lg, TFC_DTYPE_F32, &f));
    const int64_t n = tfc_tensor_numel(f);
    float *v = malloc((size_t)n * sizeof *v);
    CHECK_OK(tfc_tensor_copy_to_host(f, v, (size_t)n * sizeof *v));
    tfc_tensor_release(lg);
    tfc_tensor_release(f);
    return v;
}

static double max_rel_diff(const float *a, const float *b, int64_t n) {
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]) / (1.0 + fabs((double)b[i]));
        if (!(d <= worst)) worst = d;
    }
    return worst;
}

static tfc_lora_config lcfg(int32_t rank, double alpha, const char *targets) {
    tfc_lora_config c = TFC_LORA_CONFIG_INIT;
    c.rank = rank;
    c.alpha = alpha;
    c.targets = targets;
    c.seed = 5;
    return c;
}

/* Fill every lora_B with normal(0, 0.1) values: a trained-looking adapter whose update is not zero. */
static void randomize_b(tfc_gpt *m, uint64_t seed) {
    int32_t n;
    const char *const *names;
    tfc_tensor *const *ps;
    CHECK_OK(tfc_gpt_lora_params(m, &n, &names, &ps));
    for (int32_t i = 0; i < n; i++)
        if (strstr(names[i], "lora_B")) CHECK_OK(tfc_tensor_fill_normal(ps[i], 0.0, 0.1, seed, 777u * (uint64_t)i));
}

TEST(fresh_adapters_leave_the_logits_bit_for_bit) {
    tfc_gpt *m = model(TFC_DTYPE_F32, 1);
    tfc_tensor *x = ids(3, 2, T);
    float *base = logits_f32(m, x);
    tfc_lora_config c = lcfg(4, 8.0, "c_attn,c_proj,c_fc");
    CHECK_OK(tfc_gpt_add_lora(m, &c));
    float *ad = logits_f32(m, x);
    CHECK(memcmp(base, ad, sizeof(float) * 2 * T * V) == 0);
    /* the cached path too: T positions one at a time */
    tfc_gpt_cache *cache = NULL;
    CHECK_OK(tfc_gpt_cache_new(m, 2, &cache));
    for (int t = 0; t < T; t++) {
        tfc_tensor *xt = NULL, *lg = NULL;
        CHECK_OK(tfc_narrow(NULL, x, 1, t, 1, &xt));
        CHECK_OK(tfc_gpt_forward_cached(m, cache, xt, &lg));
        float row[V];
        tfc_tensor *r0 = NULL;
        CHECK_OK(tfc_narrow(NULL, lg, 0, 1, 1, &r0));
        CHECK_OK(tfc_tensor_copy_to_host(r0, row, sizeof row));
        CHECK(max_rel_diff(row, base + (T + t) * V, V) < 1e-5);
        tfc_tensor_release(r0);
        tfc_tensor_release(xt);
        tfc_tensor_release(lg);
    }
    tfc_gpt_cache_release(cache);
    free(base);
    free(ad);
    tfc_tensor_release(x);
    tfc_gpt_release(m);
}

TEST(peft_names_shapes_and_frozen_base) {
    tfc_gpt *m = model(TFC_DTYPE_F32, 1);
    tfc_lora_config c = lcfg(3, 6.0, "c_proj");
    CHECK_OK(tfc_gpt_add_lora(m, &c));
    int32_t n;
    const char *const *names;
    tfc_tensor *const *ps;
    CHECK_OK(tfc_gpt_lora_params(m, &n, &names, &ps));
    /* PEFT matches suffixes: c_proj is both attn.c_proj and mlp.c_proj, in module order */
    static const char *const want[8] = {
        "base_model.model.transformer.h.0.attn.c_proj.lora_A.weight",
        "base_model.model.transformer.h.0.attn.c_proj.lora_B.weight",
        "base_model.model.transformer.h.0.mlp.c_proj.lora_A.weight",
        "base_model.model.transformer.h.0.mlp.c_proj.lora_B.weight",
        "base_model.model.transformer.h.1.attn.c_proj.lora_A.weight",
        "base_model.model.transformer.h.1.attn.c_proj.lora_B.weight",
        "base_model.model.transformer.h.1.mlp.c_proj.lora_A.weight",
        "base_model.model.transformer.h.1.mlp.c_proj.lora_B.weight",
    };
    CHECK(n == 8);
    for (int32_t i = 0; i < n && i < 8; i++) {
        if (strcmp(names[i], want[i]) != 0) TFC_FAIL_AT("name %d is %s, want %s", (int)i, names[i], want[i]);
        CHECK(tfc_tensor_requires_grad(ps[i]));
    }
    /* A [r, in], B [out, r]: attn.c_proj C -> C, mlp.c_proj 4C -> C */
    CHECK(tfc_tensor_dim(ps[0], 0) == 3 && tfc_tensor_dim(ps[0], 1) == C);
    CHECK(tfc_tensor_dim(ps[1], 0) == C && tfc_tensor_dim(ps[1], 1) == 3);
    CHECK(tfc_tensor_dim(ps[2], 0) == 3 && tfc_tensor_dim(ps[2], 1) == 4 * C);
    CHECK(tfc_tensor_dim(ps[3], 0) == C && tfc_tensor_dim(ps[3], 1) == 3);
    /* A Kaiming-uniform as PEFT draws it (|a| <= 1/sqrt(in), not all zero), B zero */
    double *a = t_vals(ps[2]), *b = t_vals(ps[3]), amax = 0, bmax = 0;
    for (int i = 0; i < 3 * 4 * C; i++) amax = fmax(amax, fabs(a[i]));
    for (int i = 0; i < 3 * C; i++) bmax = fmax(bmax, fabs(b[i]));
    CHECK(amax > 0.5 / sqrt(4.0 * C) && amax <= 1.0 / sqrt(4.0 * C));
    CHECK(bmax == 0);
    free(a);
    free(b);
    /* the base is frozen */
    int32_t nb;
    const char *const *bn;
    tfc_tensor *const *bp;
    CHECK_OK(tfc_gpt_params(m, &nb, &bn, &bp));
    for (int32_t i = 0; i < nb; i++) CHECK(!tfc_tensor_requires_grad(bp[i]));
    tfc_lora_config got = {.struct_size = sizeof got};
    CHECK_OK(tfc_gpt_get_lora_config(m, &got));
    CHECK(got.rank == 3 && got.alpha == 6.0 && strcmp(got.targets, "c_proj") == 0);
    /* one layer by a longer suffix; all-linear */
    tfc_gpt *m2 = model(TFC_DTYPE_F32, 1);
    tfc_lora_config c2 = lcfg(2, 2.0, "h.1.mlp.c_fc, attn.c_proj");
    CHECK_OK(tfc_gpt_add_lora(m2, &c2));
    CHECK_OK(tfc_gpt_lora_params(m2, &n, &names, &ps));
    CHECK(n == 6);
    CHECK(lora_param(m2, "base_model.model.transformer.h.1.mlp.c_fc.lora_B.weight") != NULL);
    CHECK(lora_param(m2, "base_model.model.transformer.h.0.mlp.c_fc.lora_B.weight") == NULL);
    tfc_gpt_release(m2);
    m2 = model(TFC_DTYPE_F32, 1);
    c2.targets = "all-linear";
    CHECK_OK(tfc_gpt_add_lora(m2, &c2));
    CHECK_OK(tfc_gpt_lora_params(m2, &n, &names, &ps));
    CHECK(n == 2 * 4 * L);
    tfc_gpt_release(m2);
    tfc_gpt_release(m);
}

/* m2's block weights set to W + scale·Aᵀ·Bᵀ of m's adapters, computed here in double. */
static void reference_weights(const tfc_gpt *m, tfc_gpt *ref, double scale, int32_t r) {
    for (int l = 0; l < L; l++)
        for (int j = 0; j < 4; j++) {
            char an[128], bn[128], wn[96];
            snprintf(an, sizeof an, "base_model.model.transformer.h.%d.%s.lora_A.weight", l, LNAMES[j]);
            snprintf(bn, sizeof bn, "base_model.model.transformer.h.%d.%s.lora_B.weight", l, LNAMES[j]);
            snprintf(wn, sizeof wn, "transformer.h.%d.%s.weight", l, LNAMES[j]);
            tfc_tensor *ta = lora_param(m, an), *tb = lora_param(m, bn), *tw = t_gpt_param(ref, wn);
            if (!ta) continue;
            const int64_t in = tfc_tensor_dim(tw, 0), out = tfc_tensor_dim(tw, 1);
            double *a = t_vals(ta), *b = t_vals(tb), *w = t_vals(tw);
            for (int64_t i = 0; i < in; i++)
                for (int64_t o = 0; o < out; o++) {
                    double d = 0;
                    for (int32_t k = 0; k < r; k++) d += a[k * in + i] * b[o * r + k];
                    w[i * out + o] += scale * d;
                }
            tfc_tensor *nw = NULL;
            const int64_t dims[2] = {in, out};
            CHECK_OK(tfc_tensor_from_data(w, dims, 2, TFC_DTYPE_F64, &nw));
            CHECK_OK(tfc_tensor_copy_from(tw, nw));
            tfc_tensor_release(nw);
            free(a);
            free(b);
            free(w);
        }
}

TEST(training_changes_only_the_adapters_and_matches_a_reference) {
    tfc_gpt *m = model(TFC_DTYPE_F32, 2);
    tfc_lora_config c = lcfg(4, 8.0, "c_attn,c_proj,mlp.c_fc");
    CHECK_OK(tfc_gpt_add_lora(m, &c));
    int32_t nb, n;
    const char *const *bn, *const *names;
    tfc_tensor *const *bp, *const *ps;
    CHECK_OK(tfc_gpt_params(m, &nb, &bn, &bp));
    double **before = calloc((size_t)nb, sizeof *before);
    for (int32_t i = 0; i < nb; i++) before[i] = t_vals(bp[i]);
    CHECK_OK(tfc_gpt_lora_params(m, &n, &names, &ps));
    tfc_optim_options oo = TFC_ADAMW_OPTIONS_INIT;
    oo.lr = 1e-2;
    tfc_optim *opt = NULL;
    tfc_graph *g = NULL;
    CHECK_OK(tfc_optim_adamw(&oo, &opt));
    CHECK_OK(tfc_optim_add_params(opt, ps, n, NULL));
    CHECK_OK(tfc_graph_new(&g));
    tfc_tensor *x = ids(4, 2, T), *y = ids(5, 2, T);
    double first = 0, last = 0;
    for (int step = 0; step < 8; step++) {
        tfc_tensor *loss = NULL;
        CHECK_OK(tfc_gpt_forward(m, g, x, y, NULL, &loss));
        CHECK_OK(tfc_graph_backward(g, loss, NULL));
        CHECK_OK(tfc_optim_step(opt));
        CHECK_OK(tfc_optim_zero_grad(opt, 1));
        CHECK_OK(tfc_graph_clear(g));
        if (step == 0) first = t_item(loss);
        last = t_item(loss);
        tfc_tensor_release(loss);
    }
    CHECK(last < first);
    /* the base bit for bit, no gradients on it; every adapter tensor moved */
    for (int32_t i = 0; i < nb; i++) {
        double *now = t_vals(bp[i]);
        if (memcmp(now, before[i], sizeof(double) * (size_t)tfc_tensor_numel(bp[i])) != 0)
            TFC_FAIL_AT("base parameter %s changed", bn[i]);
        tfc_tensor *gr = NULL;
        CHECK_OK(tfc_tensor_grad(bp[i], &gr));
        CHECK(gr == NULL);
        tfc_tensor_release(gr);
        free(now);
        free(before[i]);
    }
    free(before);
    for (int32_t i = 0; i < n; i++) {
        double *v = t_vals(ps[i]), mx = 0;
        for (int64_t k = 0; k < tfc_tensor_numel(ps[i]); k++) mx = fmax(mx, fabs(v[k]));
        if (strstr(names[i], "lora_B") && !(mx > 0)) TFC_FAIL_AT("%s did not train", names[i]);
        free(v);
    }
    /* the adapted logits against an independent reference model */
    tfc_gpt *ref = model(TFC_DTYPE_F32, 2);
    reference_weights(m, ref, 8.0 / 4, 4);
    float *a = logits_f32(m, x), *r = logits_f32(ref, x);
    CHECK(max_rel_diff(a, r, 2 * T * V) < 2e-5);
    /* the cached path: the whole prompt, then one more position */
    tfc_gpt_cache *cache = NULL;
    tfc_tensor *x1 = NULL, *x2 = NULL, *lg1 = NULL, *lg2 = NULL;
    CHECK_OK(tfc_gpt_cache_new(m, 2, &cache));
    CHECK_OK(tfc_narrow(NULL, x, 1, 0, T - 1, &x1));
    CHECK_OK(tfc_narrow(NULL, x, 1, T - 1, 1, &x2));
    CHECK_OK(tfc_gpt_forward_cached(m, cache, x1, &lg1));
    CHECK_OK(tfc_gpt_forward_cached(m, cache, x2, &lg2));
    float last_row[V];
    tfc_tensor *row = NULL;
    CHECK_OK(tfc_narrow(NULL, lg2, 0, 1, 1, &row));
    CHECK_OK(tfc_tensor_copy_to_host(row, last_row, sizeof last_row));
    CHECK(max_rel_diff(last_row, a + (2 * T - 1) * V, V) < 1e-5);
    /* merged equals unmerged to f32 rounding, and the base requires grad again */
    CHECK_OK(tfc_gpt_merge_lora(m));
    float *merged = logits_f32(m, x);
    CHECK(max_rel_diff(merged, a, 2 * T * V) < 2e-5);
    CHECK_OK(tfc_gpt_lora_params(m, &n, &names, &ps));
    CHECK(n == 0);
    for (int32_t i = 0; i < nb; i++) CHECK(tfc_tensor_requires_grad(bp[i]));
    free(merged);
    free(a);
    free(r);
    tfc_tensor_release(row);
    tfc_tensor_release(x1);
    tfc_tensor_release(x2);
    tfc_tensor_release(lg1);
    tfc_tensor_release(lg2);
    tfc_gpt_cache_release(cache);
    tfc_tensor_release(x);
    tfc_tensor_release(y);
    tfc_graph_release(g);
    tfc_optim_release(opt);
    tfc_gpt_release(ref);
    tfc_gpt_release(m);
}

static double loss_f64(tfc_gpt *m, const tfc_tensor *x, const tfc_tensor *y) {
    tfc_tensor *l = NULL;
    CHECK_OK(tfc_gpt_forward(m, NULL, x, y, NULL, &l));
    double v = t_item(l);
    tfc_tensor_release(l);
    return v;
}

static void set_elem(tfc_tensor *t, int64_t i, double v) {
    const int64_t n = tfc_tensor_numel(t);
    double *h = t_vals(t);
    h[i] = v;
    tfc_tensor *src = NULL;
    const int64_t d[1] = {n};
    CHECK_OK(tfc_tensor_from_data(h, d, 1, TFC_DTYPE_F64, &src));
    tfc_tensor *flat = NULL;
    CHECK_OK(tfc_reshape(NULL, t, d, 1, &flat));
    CHECK_OK(tfc_tensor_copy_from(flat, src));
    tfc_tensor_release(flat);
    tfc_tensor_release(src);
    free(h);
}

TEST(gradients_match_f64_finite_differences) {
    tfc_gpt *m = model(TFC_DTYPE_F64, 3);
    tfc_lora_config c = lcfg(2, 3.0, "all-linear");
    CHECK_OK(tfc_gpt_add_lora(m, &c));
    randomize_b(m, 9);
    tfc_tensor *x = ids(6, 2, 5), *y = ids(7, 2, 5);
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    tfc_tensor *loss = NULL;
    CHECK_OK(tfc_gpt_forward(m, g, x, y, NULL, &loss));
    CHECK_OK(tfc_graph_backward(g, loss, NULL));
    tfc_tensor_release(loss);
    int32_t n;
    const char *const *names;
    tfc_tensor *const *ps;
    CHECK_OK(tfc_gpt_lora_params(m, &n, &names, &ps));
    int checked = 0;
    for (int32_t i = 0; i < n; i++) {
        tfc_tensor *gr = NULL;
        CHECK_OK(tfc_tensor_grad(ps[i], &gr));
        CHECK(gr != NULL);
        if (!gr) continue;
        double *gv = t_vals(gr);
        const int64_t ne = tfc_tensor_numel(ps[i]);
        for (int64_t k = 0; k < ne; k += ne / 3 + 1) {
            double *v = t_vals(ps[i]);
            const double h = 1e-5, v0 = v[k];
            set_elem(ps[i], k, v0 + h);
            double lp = loss_f64(m, x, y);
            set_elem(ps[i], k, v0 - h);
            double lm = loss_f64(m, x, y);
            set_elem(ps[i], k, v0);
            double fd = (lp - lm) / (2 * h);
            if (!(fabs(fd - gv[k]) <= 1e-7 + 1e-5 * fabs(fd)))
                TFC_FAIL_AT("%s[%lld]: backward %.12g, finite differences %.12g", names[i], (long long)k, gv[k], fd);
            checked++;
            free(v);
        }
        free(gv);
        tfc_tensor_release(gr);
    }
    CHECK(checked >= 2 * 4 * L);
    tfc_tensor_release(x);
    tfc_tensor_release(y);
    tfc_graph_release(g);
    tfc_gpt_release(m);
}

static char dir_[256];
static const char *tmp(const char *name) {
    if (!dir_[0]) {
        snprintf(dir_, sizeof dir_, "/tmp/tfc_lora_test_%d", (int)getpid());
        mkdir(dir_, 0700);
    }
    static char buf[4][512];
    static int k;
    char *b = buf[k++ % 4];
    snprintf(b, sizeof buf[0], "%s/%s", dir_, name);
    return b;
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

TEST(files_round_trip_and_read_peft_files) {
    tmp("");
    tfc_gpt *m = model(TFC_DTYPE_F32, 4);
    tfc_lora_config c = lcfg(4, 16.0, "c_attn,mlp.c_proj");
    CHECK_OK(tfc_gpt_add_lora(m, &c));
    randomize_b(m, 11);
    tfc_tensor *x = ids(8, 1, T);
    float *a = logits_f32(m, x);
    const char *mk[1] = {"train.step"}, *mv[1] = {"12"};
    CHECK_OK(tfc_gpt_save_lora(m, tmp("adapter_model.safetensors"), mk, mv, 1));
    CHECK_OK(tfc_gpt_save_lora_config(m, tmp("adapter_config.json"), "gpt2 \"base\""));
    /* the file: PEFT names only, our metadata */
    tfc_safetensors *f = NULL;
    CHECK_OK(tfc_safetensors_load(tmp("adapter_model.safetensors"), &f));
    CHECK(tfc_safetensors_count(f) == 2 * 2 * L);
    const char *v = NULL;
    CHECK_OK(tfc_safetensors_metadata(f, "tfc.lora.alpha", &v));
    CHECK(v && strcmp(v, "16") == 0);
    CHECK_OK(tfc_safetensors_metadata(f, "train.step", &v));
    CHECK(v && strcmp(v, "12") == 0);
    tfc_tensor *t = NULL;
    CHECK_OK(tfc_safetensors_find(f, "base_model.model.transformer.h.1.mlp.c_proj.lora_A.weight", &t));
    CHECK(tfc_tensor_dim(t, 0) == 4 && tfc_tensor_dim(t, 1) == 4 * C);
    tfc_tensor_release(t);
    tfc_safetensors_release(f);
    size_t len;
    char *js = (char *)t_slurp(tmp("adapter_config.json"), &len);
    js[len] = 0;
    CHECK(strstr(js, "\"peft_type\": \"LORA\"") && strstr(js, "\"r\": 4,") && strstr(js, "\"lora_alpha\": 16,") &&
          strstr(js, "\"target_modules\": [\"c_attn\", \"mlp.c_proj\"]") && strstr(js, "\"fan_in_fan_out\": true") &&
          strstr(js, "\"base_model_name_or_path\": \"gpt2 \\\"base\\\"\""));
    free(js);
    /* loaded from the directory onto the same base: the same logits bit for bit */
    tfc_gpt *m2 = model(TFC_DTYPE_F32, 4);
    CHECK_OK(tfc_gpt_load_lora(m2, dir_));
    float *b = logits_f32(m2, x);
    CHECK(memcmp(a, b, sizeof(float) * T * V) == 0);
    tfc_lora_config got = {.struct_size = sizeof got};
    CHECK_OK(tfc_gpt_get_lora_config(m2, &got));
    CHECK(got.rank == 4 && got.alpha == 16.0 && strcmp(got.targets, "c_attn,mlp.c_proj") == 0);
    free(b);
    /* a PEFT file: the tensors without our metadata, alpha from adapter_config.json beside it */
    int32_t n;
    const char *const *names;
    tfc_tensor *const *ps;
    CHECK_OK(tfc_gpt_lora_params(m, &n, &names, &ps));
    mkdir(tmp("peft"), 0700);
    CHECK_OK(tfc_safetensors_save(tmp("peft/adapter_model.safetensors"), names, ps, n, NULL, NULL, 0));
    write_text(tmp("peft/adapter_config.json"),
               "{\"peft_type\": \"LORA\", \"r\": 4, \"lora_alpha\": 16, \"fan_in_fan_out\": true, "
               "\"use_rslora\": false, \"target_modules\": [\"c_attn\", \"c_proj\"]}");
    tfc_gpt *m3 = model(TFC_DTYPE_F32, 4);
    CHECK_OK(tfc_gpt_load_lora(m3, tmp("peft/adapter_model.safetensors")));
    b = logits_f32(m3, x);
    CHECK(memcmp(a, b, sizeof(float) * T * V) == 0);
    CHECK_OK(tfc_gpt_get_lora_config(m3, &got));
    CHECK(got.alpha == 16.0 && strcmp(got.targets, "attn.c_attn,mlp.c_proj") == 0);
    free(b);
    /* rsLoRA scales by lora_alpha/sqrt(r): lora_alpha 8 at r 4 is the plain 16/4 above, bit for bit */
    write_text(tmp("peft/adapter_config.json"), "{\"r\": 4, \"lora_alpha\": 8, \"use_rslora\": true}");
    tfc_gpt *m4 = model(TFC_DTYPE_F32, 4);
    CHECK_OK(tfc_gpt_load_lora(m4, tmp("peft")));
    b = logits_f32(m4, x);
    CHECK(memcmp(a, b, sizeof(float) * T * V) == 0);
    free(b);
    tfc_gpt_release(m4);
    m4 = model(TFC_DTYPE_F32, 4);
    unlink(tmp("peft/adapter_config.json"));
    CHECK_ERR(tfc_gpt_load_lora(m4, tmp("peft")), TFC_ERR_FORMAT, "lora_alpha");
    CHECK_OK(tfc_gpt_lora_params(m4, &n, &names, &ps));
    CHECK(n == 0);
    /* an f64 model takes the f32 file (converted) */
    tfc_gpt *m5 = model(TFC_DTYPE_F64, 4);
    CHECK_OK(tfc_gpt_load_lora(m5, dir_));
    b = logits_f32(m5, x);
    CHECK(max_rel_diff(b, a, T * V) < 1e-5);
    free(b);
    free(a);
    tfc_tensor_release(x);
    tfc_gpt_release(m);
    tfc_gpt_release(m2);
    tfc_gpt_release(m3);
    tfc_gpt_release(m4);
    tfc_gpt_release(m5);
}

/* A model of another width, a file with a layer too many, a corrupt file, half an adapter, a NaN. */
TEST(bad_inputs_are_refused_by_name_and_leave_the_model_as_it_was) {
    tfc_gpt *m = model(TFC_DTYPE_F32, 1);
    tfc_lora_config c = lcfg(4, 8.0, "q_proj");
    CHECK_ERR(tfc_gpt_add_lora(m, &c), TFC_ERR_INVALID_ARG, "tfc_gpt_add_lora: cfg->targets item 'q_proj' matches no");
    c.targets = "c_attn,,c_fc";
    CHECK_ERR(tfc_gpt_add_lora(m, &c), TFC_ERR_INVALID_ARG, "empty item");
    c.targets = "attn";
    CHECK_ERR(tfc_gpt_add_lora(m, &c), TFC_ERR_INVALID_ARG, "'attn' matches no");
    c.targets = "";
    CHECK_ERR(tfc_gpt_add_lora(m, &c), TFC_ERR_INVALID_ARG, "cfg->targets is empty");
    c.targets = "c_attn";
    c.rank = 0;
    CHECK_ERR(tfc_gpt_add_lora(m, &c), TFC_ERR_INVALID_ARG, "tfc_gpt_add_lora: cfg->rank is 0, need 1 .. 16");
    c.rank = C + 1;
    CHECK_ERR(tfc_gpt_add_lora(m, &c), TFC_ERR_INVALID_ARG,
              "cfg->rank is 17, need 1 .. 16 for transformer.h.0.attn.c_attn");
    c.rank = 4;
    c.alpha = NAN;
    CHECK_ERR(tfc_gpt_add_lora(m, &c), TFC_ERR_INVALID_ARG, "cfg->alpha");
    c.alpha = 8;
    c.struct_size = 4;
    CHECK_ERR(tfc_gpt_add_lora(m, &c), TFC_ERR_VERSION, "struct_size");
    c.struct_size = sizeof c;
    int32_t n;
    const char *const *names;
    tfc_tensor *const *ps;
    CHECK_OK(tfc_gpt_lora_params(m, &n, &names, &ps));
    CHECK(n == 0);
    CHECK(tfc_tensor_requires_grad(t_gpt_param(m, "transformer.wte.weight")));
    CHECK_ERR(tfc_gpt_merge_lora(m), TFC_ERR_INVALID_ARG, "tfc_gpt_merge_lora: m has no LoRA adapters");
    CHECK_ERR(tfc_gpt_save_lora(m, tmp("x.safetensors"), NULL, NULL, 0), TFC_ERR_INVALID_ARG, "no LoRA adapters");
    CHECK_OK(tfc_gpt_add_lora(m, &c));
    CHECK_ERR(tfc_gpt_add_lora(m, &c), TFC_ERR_INVALID_ARG, "adapters already");
    CHECK_ERR(tfc_gpt_load_lora(m, dir_), TFC_ERR_INVALID_ARG, "adapters already");
    randomize_b(m, 3);
    CHECK_OK(tfc_gpt_save_lora(m, tmp("good.safetensors"), NULL, NULL, 0));
    /* a model of another width: the shapes do not fit */
    tfc_gpt_config wide = TFC_GPT_CONFIG_INIT;
    wide.n_layer = L;
    wide.n_head = 2;
    wide.n_embd = 2 * C;
    wide.vocab_size = V;
    tfc_gpt *w = NULL;
    CHECK_OK(tfc_gpt_new(&wide, 1, &w));
    CHECK_ERR(tfc_gpt_load_lora(w, tmp("good.safetensors")), TFC_ERR_SHAPE,
              "h.0.attn.c_attn.lora_A.weight is [4,16], the model needs [r, 32]");
    /* fewer blocks than the file */
    wide.n_embd = C;
    wide.n_layer = 1;
    tfc_gpt *one = NULL;
    CHECK_OK(tfc_gpt_new(&wide, 1, &one));
    CHECK_ERR(tfc_gpt_load_lora(one, tmp("good.safetensors")), TFC_ERR_SHAPE, "is for block 1 but the model has 1");
    /* corrupt: cut in the middle */
    size_t len;
    unsigned char *bytes = t_slurp(tmp("good.safetensors"), &len);
    FILE *fp = fopen(tmp("cut.safetensors"), "wb");
    fwrite(bytes, 1, len / 2, fp);
    fclose(fp);
    free(bytes);
    tfc_gpt *fresh = model(TFC_DTYPE_F32, 1);
    CHECK_ERR(tfc_gpt_load_lora(fresh, tmp("cut.safetensors")), TFC_ERR_FORMAT, "tfc_gpt_load_lora");
    CHECK_ERR(tfc_gpt_load_lora(fresh, tmp("missing.safetensors")), TFC_ERR_IO, "tfc_gpt_load_lora");
    /* half an adapter; a stranger tensor; a NaN */
    CHECK_OK(tfc_gpt_lora_params(m, &n, &names, &ps));
    const char *mk[1] = {"tfc.lora.alpha"}, *mv[1] = {"8"};
    CHECK_OK(tfc_safetensors_save(tmp("half.safetensors"), names, ps, n - 1, mk, mv, 1));
    CHECK_ERR(tfc_gpt_load_lora(fresh, tmp("half.safetensors")), TFC_ERR_FORMAT, "lora_A.weight but not");
    const char *odd[1] = {"base_model.model.transformer.h.0.attn.c_attn.weight"};
    CHECK_OK(tfc_safetensors_save(tmp("odd.safetensors"), odd, ps, 1, mk, mv, 1));
    CHECK_ERR(tfc_gpt_load_lora(fresh, tmp("odd.safetensors")), TFC_ERR_FORMAT, "is not a LoRA weight");
    tfc_tensor *nan = NULL;
    CHECK_OK(tfc_tensor_clone(ps[1], &nan));
    CHECK_OK(tfc_tensor_fill(nan, NAN));
    tfc_tensor *pair[2] = {ps[0], nan};
    const char *pn[2] = {names[0], names[1]};
    CHECK_OK(tfc_safetensors_save(tmp("nan.safetensors"), pn, pair, 2, mk, mv, 1));
    CHECK_ERR(tfc_gpt_load_lora(fresh, tmp("nan.safetensors")), TFC_ERR_NONFINITE, "lora_B.weight");
    tfc_tensor_release(nan);
    CHECK_OK(tfc_gpt_lora_params(fresh, &n, &names, &ps));
    CHECK(n == 0);
    CHECK(tfc_tensor_requires_grad(t_gpt_param(fresh, "transformer.wte.weight")));
    /* quantized: inference with loaded adapters works; training and merging are refused */
    tfc_tensor *x = ids(2, 1, T);
    float *f32 = logits_f32(m, x);
    tfc_gpt *q = model(TFC_DTYPE_F32, 1);
    CHECK_OK(tfc_gpt_quantize(q, TFC_QFORMAT_INT8, 0));
    tfc_lora_config qc = lcfg(4, 8.0, "c_attn");
    CHECK_ERR(tfc_gpt_add_lora(q, &qc), TFC_ERR_UNSUPPORTED, "inference-only");
    CHECK_OK(tfc_gpt_load_lora(q, tmp("good.safetensors")));
    float *qv = logits_f32(q, x);
    CHECK(max_rel_diff(qv, f32, T * V) < 0.05); /* int8 weights: close, not equal */
    CHECK_ERR(tfc_gpt_merge_lora(q), TFC_ERR_UNSUPPORTED, "quantized");
    free(qv);
    free(f32);
    tfc_tensor_release(x);
    tfc_gpt_release(q);
    tfc_gpt_release(fresh);
    tfc_gpt_release(one);
    tfc_gpt_release(w);
    tfc_gpt_release(m);
}

TEST(device_moves_keep_adapters_and_the_frozen_base) {
    tfc_gpt *m = model(TFC_DTYPE_F32, 6);
    tfc_lora_config c = lcfg(2, 4.0, "c_fc");
    CHECK_OK(tfc_gpt_add_lora(m, &c));
    randomize_b(m, 2);
    tfc_tensor *x = ids(1, 1, T);
    float *a = logits_f32(m, x);
    CHECK_OK(tfc_gpt_to_device(m, TFC_DEVICE_CPU, 0));
    float *b = logits_f32(m, x);
    CHECK(memcmp(a, b, sizeof(float) * T * V) == 0);
    CHECK(!tfc_tensor_requires_grad(t_gpt_param(m, "transformer.h.0.mlp.c_fc.weight")));
    CHECK(tfc_tensor_requires_grad(lora_param(m, "base_model.model.transformer.h.0.mlp.c_fc.lora_A.weight")));
    free(a);
    free(b);
    tfc_tensor_release(x);
    tfc_gpt_release(m);
}
