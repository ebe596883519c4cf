/*
 * The Llama family (llama, mistral, qwen2) through every door GPT-2 has:
 * decoding with the KV cache equals the full forward at every position,
 * past the sliding window too (the cache holds the kv heads only);
 * batched and speculative decoding give tfc_gpt_generate's tokens;
 * recompute gives bitwise the gradients of the plain backward; bf16
 * autocast and int8/int4 stay near f32; checkpoints and LoRA adapters
 * round-trip under Hugging Face's / PEFT's names, with the family's config
 * in the metadata; a checkpoint of another architecture is refused by
 * tfc_gpt_load_into. (Forward and gradients against an independent
 * PyTorch implementation: tests/python/test_llama_family.py.)
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tfc_test.h"
#include "tfcore/io.h"
#include "tfcore/lora.h"

TFC_TEST_MAIN

enum { V = 37, BLOCK = 24 };

static tfc_gpt_config config(int32_t arch, int32_t kv, int32_t window, int32_t bias, tfc_dtype dt) {
    tfc_gpt_config c = TFC_GPT_CONFIG_INIT;
    c.arch = arch;
    c.n_layer = 2;
    c.n_head = 4;
    c.n_kv_head = kv;
    c.n_embd = 32;
    c.mlp_hidden = 64;
    c.vocab_size = V;
    c.block_size = BLOCK;
    c.tie_weights = 0;
    c.attention_bias = bias;
    c.sliding_window = window;
    c.dtype = dt;
    c.ln_eps = 1e-6;
    return c;
}

/* One config of each family member: llama (GQA 2), mistral (GQA 2, window 5), qwen2 (q/k/v biases, MQA, window 4). */
static tfc_gpt_config family(int i, tfc_dtype dt) {
    static const int32_t arch[3] = {TFC_GPT_ARCH_LLAMA, TFC_GPT_ARCH_MISTRAL, TFC_GPT_ARCH_QWEN2};
    static const int32_t kv[3] = {2, 2, 1}, window[3] = {0, 5, 4}, bias[3] = {0, 0, 1};
    return config(arch[i], kv[i], window[i], bias[i], dt);
}

static tfc_gpt *model_of(tfc_gpt_config c, uint64_t seed) {
    tfc_gpt *m = NULL;
    CHECK_OK(tfc_gpt_new(&c, seed, &m));
    return m;
}

static tfc_tensor *ids(const int32_t *v, int64_t B, int64_t T) {
    const int64_t d[2] = {B, T};
    tfc_tensor *t = NULL;
    CHECK_OK(tfc_tensor_from_data(v, d, 2, TFC_DTYPE_I32, &t));
    return t;
}

/* Logits [.., V] of t as doubles (f32 or f64 tensor) into a malloc'd array. */
static double *host(const tfc_tensor *t) {
    const int64_t n = tfc_tensor_numel(t);
    double *d = malloc((size_t)n * sizeof *d);
    tfc_tensor *c = NULL;
    const int64_t dims[1] = {n};
    CHECK_OK(tfc_tensor_empty(dims, 1, TFC_DTYPE_F64, &c));
    tfc_tensor *flat = NULL;
    CHECK_OK(tfc_reshape(NULL, t, dims, 1, &flat));
    CHECK_OK(tfc_tensor_copy_from(c, flat));
    CHECK_OK(tfc_tensor_copy_to_host(c, d, (size_t)n * sizeof *d));
    tfc_tensor_release(c);
    tfc_tensor_release(flat);
    return d;
}

static const int32_t SEQ[20] = {3, 14, 15, 9, 26, 5, 35, 8, 9, 7, 9, 3, 23, 8, 4, 6, 2, 6, 33, 1};

/*
 * Position by position (one token a step after a 5-token prefill) the
 * cached logits equal the full forward's: 20 positions, window 4 or 3 in
 * the windowed cases, so most positions lie past it.
 */
static void check_cache(tfc_gpt_config c, double tol) {
    tfc_gpt *m = model_of(c, 7);
    tfc_tensor *all = ids(SEQ, 1, 20), *full = NULL;
    CHECK_OK(tfc_gpt_forward(m, NULL, all, NULL, &full, NULL));
    double *want = host(full);
    tfc_gpt_cache *kc = NULL;
    CHECK_OK(tfc_gpt_cache_new(m, 1, &kc));
    double worst = 0;
    int32_t at = 0;
    while (at < 20) {
        const int32_t n = at == 0 ? 5 : 1;
        tfc_tensor *step = ids(SEQ + at, 1, n), *lg = NULL;
        CHECK_OK(tfc_gpt_forward_cached(m, kc, step, &lg));
        double *got = host(lg);
        for (int32_t i = 0; i < n * V; i++) {
            const double e = fabs(got[i] - want[(int64_t)at * V + i]);
            if (e > worst) worst = e;
        }
        free(got);
        tfc_tensor_release(lg);
        tfc_tensor_release(step);
        at += n;
    }
    if (worst > tol)
        TFC_FAIL_AT("arch %d kv %d window %d: cached logits differ by %g", c.arch, c.n_kv_head, c.sliding_window,
                    worst);
    CHECK(tfc_gpt_cache_length(kc) == 20);
    free(want);
    tfc_gpt_cache_release(kc);
    tfc_tensor_release(full);
    tfc_tensor_release(all);
    tfc_gpt_release(m);
}

TEST(cache_equals_full_forward_past_the_window) {
    check_cache(config(TFC_GPT_ARCH_LLAMA, 2, 0, 0, TFC_DTYPE_F64), 1e-12);
    check_cache(config(TFC_GPT_ARCH_LLAMA, 1, 0, 0, TFC_DTYPE_F32), 1e-5);
    check_cache(config(TFC_GPT_ARCH_MISTRAL, 2, 4, 0, TFC_DTYPE_F64), 1e-12);
    check_cache(config(TFC_GPT_ARCH_QWEN2, 4, 3, 1, TFC_DTYPE_F64), 1e-12);
    check_cache(config(TFC_GPT_ARCH_QWEN2, 2, 3, 1, TFC_DTYPE_F32), 1e-5);
}

TEST(cache_holds_the_kv_heads_only) {
    /* 1 kv head of 8 dims: the cache is a quarter of a multi-head one's (checked by the logits above; here: it
     * exists and decodes a whole block, then refuses one more position) */
    tfc_gpt *m = model_of(config(TFC_GPT_ARCH_LLAMA, 1, 0, 0, TFC_DTYPE_F32), 1);
    tfc_gpt_cache *kc = NULL;
    CHECK_OK(tfc_gpt_cache_new(m, 2, &kc));
    int32_t two[2 * BLOCK];
    for (int i = 0; i < 2 * BLOCK; i++) two[i] = i % V;
    tfc_tensor *t = ids(two, 2, BLOCK), *lg = NULL;
    CHECK_OK(tfc_gpt_forward_cached(m, kc, t, &lg));
    tfc_tensor_release(lg);
    tfc_tensor *one = ids(two, 2, 1);
    CHECK_ERR(tfc_gpt_forward_cached(m, kc, one, &lg), TFC_ERR_INVALID_ARG, "exceed");
    tfc_tensor_release(one);
    tfc_tensor_release(t);
    tfc_gpt_cache_release(kc);
    tfc_gpt_release(m);
}

static void check_batched_and_speculative(tfc_gpt_config c) {
    tfc_gpt *m = model_of(c, 3);
    tfc_gpt *draft = model_of(c, 4);
    static const int32_t p0[] = {1, 2, 3}, p1[] = {4, 5, 6, 7, 8, 9, 10}, p2[] = {11};
    const int32_t *prompts[3] = {p0, p1, p2};
    const int32_t np[3] = {3, 7, 1};
    enum { NEW = 30 }; /* past block_size 24: the refill path too */
    int32_t out[3 * NEW], one[NEW];
    CHECK_OK(tfc_gpt_generate_batch(m, 3, prompts, np, NEW, 0.0, 0, 1.0, 0, out, 3 * NEW, NULL, NULL, NULL));
    for (int i = 0; i < 3; i++) {
        CHECK_OK(tfc_gpt_generate(m, prompts[i], np[i], NEW, 0.0, 0, 1.0, (uint64_t)i, one, NEW, NULL, NULL));
        for (int j = 0; j < NEW; j++)
            if (one[j] != out[i * NEW + j]) {
                TFC_FAIL_AT("sequence %d token %d: batch %d, alone %d", i, j, out[i * NEW + j], one[j]);
                break;
            }
    }
    int32_t spec[20];
    CHECK_OK(tfc_gpt_generate(m, p1, 7, 12, 0.0, 0, 1.0, 0, one, NEW, NULL, NULL));
    tfc_spec_stats st;
    memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    CHECK_OK(tfc_gpt_generate_speculative(m, draft, p1, 7, 12, 3, 0.0, 0, 1.0, 0, spec, 20, &st, NULL, NULL));
    CHECK(st.drafted > 0);
    for (int j = 0; j < 12; j++) CHECK(spec[j] == one[j]);
    tfc_gpt_release(draft);
    tfc_gpt_release(m);
}

TEST(batched_and_speculative_decoding_give_the_single_tokens) {
    for (int i = 0; i < 3; i++) check_batched_and_speculative(family(i, TFC_DTYPE_F64));
}

/* Every parameter's gradient of one forward/backward (of loss on SEQ), as doubles, concatenated. */
static double *grads(tfc_gpt *m, int64_t *n_out) {
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    tfc_tensor *x = ids(SEQ, 2, 9), *y = ids(SEQ + 1, 2, 9), *loss = NULL;
    CHECK_OK(tfc_gpt_forward(m, g, x, y, NULL, &loss));
    CHECK_OK(tfc_graph_backward(g, loss, NULL));
    int32_t n;
    const char *const *names;
    tfc_tensor *const *ps;
    CHECK_OK(tfc_gpt_params(m, &n, &names, &ps));
    int64_t total = 0;
    for (int32_t i = 0; i < n; i++) total += tfc_tensor_numel(ps[i]);
    double *out = malloc((size_t)total * sizeof *out);
    int64_t at = 0;
    for (int32_t i = 0; i < n; i++) {
        tfc_tensor *gr = NULL;
        CHECK_OK(tfc_tensor_grad(ps[i], &gr));
        double *h = host(gr);
        memcpy(out + at, h, (size_t)tfc_tensor_numel(ps[i]) * sizeof *h);
        at += tfc_tensor_numel(ps[i]);
        free(h);
        tfc_tensor_release(gr);
        CHECK_OK(tfc_tensor_zero_grad(ps[i], 1));
    }
    tfc_tensor_release(loss);
    tfc_tensor_release(x);
    tfc_tensor_release(y);
    tfc_graph_release(g);
    *n_out = total;
    return out;
}

TEST(recompute_gives_bitwise_the_same_gradients) {
    for (int i = 0; i < 3; i++) {
        tfc_gpt *m = model_of(family(i, TFC_DTYPE_F32), 5);
        int64_t n1, n2;
        double *plain = grads(m, &n1);
        CHECK_OK(tfc_gpt_set_recompute(m, 1));
        double *re = grads(m, &n2);
        CHECK(n1 == n2);
        if (memcmp(plain, re, (size_t)n1 * sizeof *plain) != 0) TFC_FAIL_AT("family %d: recompute differs", i);
        free(plain);
        free(re);
        tfc_gpt_release(m);
    }
}

/* The largest |a - b| over the logits of SEQ. */
static double logits_gap(tfc_gpt *a, tfc_gpt *b) {
    tfc_tensor *x = ids(SEQ, 1, 20), *la = NULL, *lb = NULL;
    CHECK_OK(tfc_gpt_forward(a, NULL, x, NULL, &la, NULL));
    CHECK_OK(tfc_gpt_forward(b, NULL, x, NULL, &lb, NULL));
    double *ha = host(la), *hb = host(lb), worst = 0;
    for (int i = 0; i < 20 * V; i++) worst = fmax(worst, fabs(ha[i] - hb[i]));
    free(ha);
    free(hb);
    tfc_tensor_release(la);
    tfc_tensor_release(lb);
    tfc_tensor_release(x);
    return worst;
}

TEST(checkpoints_round_trip_with_the_family_config_and_refuse_another) {
    char dir[] = "/tmp/tfc_llama_XXXXXX", path[128], other[128];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/m.safetensors", dir);
    snprintf(other, sizeof other, "%s/o.safetensors", dir);
    tfc_gpt_config c = config(TFC_GPT_ARCH_LLAMA, 2, 0, 0, TFC_DTYPE_F32);
    c.rope.rope_type = TFC_ROPE_LLAMA3;
    c.rope.factor = 8;
    c.rope.original_max_position_embeddings = 8;
    tfc_gpt *m = model_of(c, 9), *back = NULL;
    CHECK_OK(tfc_gpt_save(m, path, NULL, NULL, 0));
    CHECK_OK(tfc_gpt_load(path, &back));
    tfc_gpt_config bc = TFC_GPT_CONFIG_INIT;
    CHECK_OK(tfc_gpt_get_config(back, &bc));
    CHECK(bc.arch == TFC_GPT_ARCH_LLAMA && bc.n_kv_head == 2 && bc.mlp_hidden == 64);
    CHECK(bc.rope.rope_type == TFC_ROPE_LLAMA3 && bc.rope.factor == 8 && bc.rope.original_max_position_embeddings == 8);
    CHECK(logits_gap(m, back) == 0);
    /* the same shapes as a mistral: load_into refuses the other architecture by name */
    tfc_gpt *mis = model_of(config(TFC_GPT_ARCH_MISTRAL, 2, 0, 0, TFC_DTYPE_F32), 1);
    CHECK_ERR(tfc_gpt_load_into(mis, path), TFC_ERR_INVALID_ARG, "arch llama but the model has mistral");
    /* llm.c's files are GPT-2's */
    CHECK_ERR(tfc_gpt_save_llmc(m, other), TFC_ERR_UNSUPPORTED, "llm.c's files hold GPT-2 only");
    tfc_gpt_release(mis);
    tfc_gpt_release(back);
    tfc_gpt_release(m);
    unlink(path);
    rmdir(dir);
}

static void check_autocast_and_quantized(tfc_gpt_config c) {
    tfc_gpt *m = model_of(c, 11), *b = model_of(c, 11), *q8 = model_of(c, 11), *q4 = model_of(c, 11);
    CHECK_OK(tfc_gpt_set_autocast(b, TFC_DTYPE_BF16));
    CHECK_OK(tfc_gpt_quantize(q8, TFC_QFORMAT_INT8, 0));
    CHECK_OK(tfc_gpt_quantize(q4, TFC_QFORMAT_INT4, 32));
    CHECK_OK(tfc_gpt_quantize_head(q4, TFC_QFORMAT_INT8, 0));
    const double gb = logits_gap(m, b), g8 = logits_gap(m, q8), g4 = logits_gap(m, q4);
    /* logits of a fresh model are ~0.1: bf16 rounding ~1e-3, int8 ~1e-3, int4 ~1e-2 */
    if (!(gb > 0 && gb < 1e-2) || !(g8 > 0 && g8 < 1e-2) || !(g4 > 0 && g4 < 5e-2))
        TFC_FAIL_AT("gaps: bf16 %g, int8 %g, int4 %g", gb, g8, g4);
    /* a quantized llama saves and loads under its names (the .qcodes of model.layers.N.self_attn.q_proj) */
    char dir[] = "/tmp/tfc_llama_q_XXXXXX", path[128];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/q.safetensors", dir);
    CHECK_OK(tfc_gpt_save(q4, path, NULL, NULL, 0));
    tfc_gpt *back = NULL;
    CHECK_OK(tfc_gpt_load(path, &back));
    CHECK(logits_gap(q4, back) == 0);
    tfc_safetensors *f = NULL;
    tfc_tensor *t = NULL;
    CHECK_OK(tfc_safetensors_load(path, &f));
    CHECK_OK(tfc_safetensors_find(f, "model.layers.1.mlp.down_proj.weight.qcodes", &t));
    tfc_tensor_release(t);
    tfc_safetensors_release(f);
    unlink(path);
    rmdir(dir);
    tfc_gpt_release(back);
    tfc_gpt_release(m);
    tfc_gpt_release(b);
    tfc_gpt_release(q8);
    tfc_gpt_release(q4);
}

TEST(autocast_and_quantized_stay_near_f32) {
    for (int i = 0; i < 3; i++) check_autocast_and_quantized(family(i, TFC_DTYPE_F32));
}

static void check_lora(tfc_gpt_config fc) {
    tfc_gpt *m = model_of(fc, 13);
    tfc_lora_config lc = TFC_LORA_CONFIG_INIT;
    lc.rank = 2;
    lc.alpha = 4;
    lc.targets = "q_proj,v_proj,down_proj";
    lc.seed = 1;
    CHECK_OK(tfc_gpt_add_lora(m, &lc));
    int32_t n;
    const char *const *names;
    tfc_tensor *const *ps;
    CHECK_OK(tfc_gpt_lora_params(m, &n, &names, &ps));
    CHECK(n == 12);
    CHECK(strcmp(names[0], "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight") == 0);
    CHECK(strcmp(names[5], "base_model.model.model.layers.0.mlp.down_proj.lora_B.weight") == 0);
    /* make B non-zero, then the merged model must compute what the adapted one does */
    for (int32_t i = 1; i < n; i += 2) CHECK_OK(tfc_tensor_fill(ps[i], 0.01 * (i + 1)));
    tfc_gpt *ref = model_of(fc, 13);
    char dir[] = "/tmp/tfc_llama_lora_XXXXXX", path[128];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/a.safetensors", dir);
    CHECK_OK(tfc_gpt_save_lora(m, path, NULL, NULL, 0));
    CHECK_OK(tfc_gpt_load_lora(ref, path));
    CHECK(logits_gap(m, ref) == 0);
    tfc_gpt *merged = model_of(fc, 13);
    CHECK_OK(tfc_gpt_load_lora(merged, path));
    CHECK_OK(tfc_gpt_merge_lora(merged));
    const double gap = logits_gap(m, merged);
    if (!(gap < 1e-12)) TFC_FAIL_AT("merged llama differs from the adapted one by %g", gap);
    /* a GPT-2 adapter name is not a llama one */
    lc.targets = "c_attn";
    CHECK_ERR(tfc_gpt_add_lora(merged, &lc), TFC_ERR_INVALID_ARG, "self_attn.q_proj");
    unlink(path);
    rmdir(dir);
    tfc_gpt_release(merged);
    tfc_gpt_release(ref);
    tfc_gpt_release(m);
}

TEST(lora_uses_peft_names_and_merges_into_the_nn_linear_layout) {
    for (int i = 0; i < 3; i++) check_lora(family(i, TFC_DTYPE_F64));
}
