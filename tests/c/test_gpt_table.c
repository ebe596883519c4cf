/*
 * The model as data (lib/model/gpt_table.h): every list of the GPT's
 * parameters is derived from one table, and each derived list must equal
 * what its outside reference says, written out here by hand: Hugging Face
 * GPT-2's state_dict names for a 2-layer model, llm.c's parameter order
 * (train_gpt2.c's ParameterTensors), the Linears tfc_gpt_quantize replaces,
 * the LoRA keys PEFT writes for GPT-2's target_modules, and GPT-2's
 * weight-decay groups. And the loader driven by it (issue 41): a tfcore
 * checkpoint whose metadata describes another model than its tensors is
 * refused, naming the tensor.
 */
#include <stdint.h>
#include <unistd.h>

#include "model/gpt_impl.h"
#include "model/gpt_table.h"
#include "tfc_test.h"

static tfc_gpt *small(int bias, int tie) {
    tfc_gpt_config c = TFC_GPT_CONFIG_INIT;
    c.n_layer = 2, c.n_head = 2, c.n_embd = 8, c.block_size = 6, c.vocab_size = 11, c.bias = bias, c.tie_weights = tie;
    tfc_gpt *m = NULL;
    CHECK_OK(tfc_gpt_new(&c, 7, &m));
    return m;
}

/* HF GPT2LMHeadModel's per-block names, in state_dict order. */
static const char *const hf_block[12] = {
    "ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight", "attn.c_proj.bias",
    "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight",    "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias",
};

static int is_bias(const char *name) { return strstr(name, ".bias") != NULL; }

/* The names HF gives a 2-layer GPT-2 (bias: with the biases; untied: with lm_head.weight) into out; the count. */
static int hf_names(int bias, int untied, char out[64][64]) {
    int n = 0;
    snprintf(out[n++], 64, "transformer.wte.weight");
    snprintf(out[n++], 64, "transformer.wpe.weight");
    for (int l = 0; l < 2; l++)
        for (int k = 0; k < 12; k++)
            if (bias || !is_bias(hf_block[k])) snprintf(out[n++], 64, "transformer.h.%d.%s", l, hf_block[k]);
    snprintf(out[n++], 64, "transformer.ln_f.weight");
    if (bias) snprintf(out[n++], 64, "transformer.ln_f.bias");
    if (untied) snprintf(out[n++], 64, "lm_head.weight");
    return n;
}

/* The model's parameter names equal want[0..n) in order. */
static void check_names(const tfc_gpt *m, char want[64][64], int n) {
    int32_t got;
    const char *const *names;
    tfc_tensor *const *params;
    CHECK_OK(tfc_gpt_params(m, &got, &names, &params));
    CHECK(got == n);
    for (int i = 0; i < n && i < got; i++)
        if (strcmp(names[i], want[i]) != 0) TFC_FAIL_AT("parameter %d is '%s', HF's is '%s'", i, names[i], want[i]);
}

TEST(hf_names_and_shapes) {
    for (int bias = 0; bias <= 1; bias++)
        for (int untied = 0; untied <= 1; untied++) {
            tfc_gpt *m = small(bias, !untied);
            char want[64][64];
            check_names(m, want, hf_names(bias, untied, want));
            /* HF's Conv1D shapes: C = 8, 3C = 24, 4C = 32, V = 11, n_positions = 6 */
            CHECK(tfc_tensor_dim(m->wte, 0) == 11 && tfc_tensor_dim(m->wte, 1) == 8);
            CHECK(tfc_tensor_dim(m->wpe, 0) == 6 && tfc_tensor_dim(m->wpe, 1) == 8);
            const gpt_block *b = &m->blocks[1];
            CHECK(tfc_tensor_dim(b->lin[0].w, 0) == 8 && tfc_tensor_dim(b->lin[0].w, 1) == 24);
            CHECK(tfc_tensor_dim(b->lin[1].w, 0) == 8 && tfc_tensor_dim(b->lin[1].w, 1) == 8);
            CHECK(tfc_tensor_dim(b->lin[2].w, 0) == 8 && tfc_tensor_dim(b->lin[2].w, 1) == 32);
            CHECK(tfc_tensor_dim(b->lin[3].w, 0) == 32 && tfc_tensor_dim(b->lin[3].w, 1) == 8);
            CHECK(bias ? tfc_tensor_dim(b->lin[0].b, 0) == 24 : b->lin[0].b == NULL);
            CHECK(untied ? tfc_tensor_dim(m->lm_head, 0) == 11 : m->lm_head == NULL);
            tfc_gpt_release(m);
        }
}

TEST(decay_groups) {
    tfc_gpt *m = small(1, 0);
    char want[64][64];
    const int n = hf_names(1, 1, want);
    for (int i = 0; i < n; i++) {
        int32_t d = -1;
        CHECK_OK(tfc_gpt_param_decay(m, i, &d));
        /* GPT-2 (nanoGPT's configure_optimizers): the 2-D matrices and embeddings decay; biases and LayerNorm not */
        const int want_decay = !is_bias(want[i]) && !strstr(want[i], "ln_");
        if (d != want_decay) TFC_FAIL_AT("%s: decay %d, want %d", want[i], (int)d, want_decay);
    }
    tfc_gpt_release(m);
}

TEST(llmc_order) {
    /* llm.c train_gpt2.c's ParameterTensors, in file order, and which are nn.Linear [out, in] there */
    static const char *const want[16] = {"wte",  "wpe",  "ln1w", "ln1b", "qkvw",    "qkvb",    "attprojw", "attprojb",
                                         "ln2w", "ln2b", "fcw",  "fcb",  "fcprojw", "fcprojb", "lnfw",     "lnfb"};
    static const int transposed[16] = {0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 1, 0, 1, 0, 0, 0};
    const gpt_param_row *rows[32];
    const int32_t n = tfc_gpt_llmc_rows(rows, 32);
    CHECK(n == 16);
    for (int i = 0; i < 16 && i < n; i++) {
        if (strcmp(rows[i]->llmc, want[i]) != 0)
            TFC_FAIL_AT("llm.c tensor %d is %s, want %s", i, rows[i]->llmc, want[i]);
        CHECK(rows[i]->transpose == transposed[i]);
    }
}

/* GPT-2's architecture as the table sees it. */
static gpt_arch gpt2_arch(void) {
    tfc_gpt_config c = TFC_GPT_CONFIG_INIT;
    gpt_arch a;
    gpt_arch_of(&c, &a);
    return a;
}

TEST(quantizable_set) {
    static const char *const linears[4] = {"attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight",
                                           "mlp.c_proj.weight"};
    const gpt_arch a = gpt2_arch();
    CHECK(a.table->n_linear == 4);
    for (int j = 0; j < 4; j++) {
        CHECK(strcmp(tfc_gpt_linear_row(&a, j)->name, linears[j]) == 0);
        CHECK(tfc_gpt_linear_row(&a, j)->field == offsetof(gpt_block, lin[0].w) + (size_t)j * sizeof(gpt_linear));
    }
    CHECK(tfc_gpt_linear_row(&a, 4) == NULL);
    /* quantized: exactly the four Linear weights of each block leave the parameter list */
    tfc_gpt *m = small(1, 1);
    CHECK_OK(tfc_gpt_quantize(m, TFC_QFORMAT_INT8, 0));
    char all[64][64], want[64][64];
    const int n = hf_names(1, 0, all);
    int k = 0;
    for (int i = 0; i < n; i++) {
        int lin = 0;
        for (int j = 0; j < 4; j++)
            lin |= strstr(all[i], linears[j]) != NULL && strlen(strstr(all[i], linears[j])) == strlen(linears[j]);
        if (!lin) memcpy(want[k++], all[i], 64);
    }
    check_names(m, want, k);
    CHECK(k == n - 8);
    tfc_gpt_release(m);
}

/* PEFT's keys for a GPT2LMHeadModel adapter on the given modules of both blocks, A then B, block by block. */
static int peft_keys(const char *const *modules, int n_mod, char out[64][96]) {
    int n = 0;
    for (int l = 0; l < 2; l++)
        for (int j = 0; j < n_mod; j++)
            for (int ab = 0; ab < 2; ab++)
                snprintf(out[n++], 96, "base_model.model.transformer.h.%d.%s.lora_%c.weight", l, modules[j],
                         ab ? 'B' : 'A');
    return n;
}

static void check_lora(const char *targets, const char *const *modules, int n_mod) {
    tfc_gpt *m = small(1, 1);
    tfc_lora_config lc = TFC_LORA_CONFIG_INIT;
    lc.rank = 2;
    lc.alpha = 4;
    lc.targets = targets;
    CHECK_OK(tfc_gpt_add_lora(m, &lc));
    char want[64][96];
    const int n = peft_keys(modules, n_mod, want);
    int32_t got;
    const char *const *names;
    tfc_tensor *const *params;
    CHECK_OK(tfc_gpt_lora_params(m, &got, &names, &params));
    CHECK(got == n);
    for (int i = 0; i < n && i < got; i++)
        if (strcmp(names[i], want[i]) != 0)
            TFC_FAIL_AT("%s: adapter %d is '%s', PEFT's is '%s'", targets, i, names[i], want[i]);
    tfc_gpt_release(m);
}

TEST(lora_targets) {
    static const char *const all[4] = {"attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj"};
    static const char *const proj[2] = {"attn.c_proj", "mlp.c_proj"};
    static const char *const fc[1] = {"mlp.c_fc"};
    check_lora("all-linear", all, 4);
    check_lora("c_attn,attn.c_proj,mlp.c_fc,mlp.c_proj", all, 4);
    check_lora("c_proj", proj, 2); /* a suffix at a dot names both projections, as PEFT matches it */
    check_lora("mlp.c_fc", fc, 1);
    const gpt_arch a = gpt2_arch();
    for (int j = 0; j < 4; j++) CHECK(strcmp(tfc_gpt_linear_row(&a, j)->module, all[j]) == 0);
}

/* A model without biases is written to HF with zero biases under HF's names (derived from the table's bias rows). */
TEST(hf_zero_biases) {
    char dir[] = "/tmp/tfc_gpt_table_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    tfc_gpt *m = small(0, 1);
    CHECK_OK(tfc_gpt_save_hf(m, dir, -1, -1));
    char path[96];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    tfc_safetensors *f = NULL;
    CHECK_OK(tfc_safetensors_load(path, &f));
    char want[64][64];
    const int n = hf_names(1, 0, want);
    CHECK(tfc_safetensors_count(f) == n);
    for (int i = 0; i < n; i++) {
        tfc_tensor *t = NULL;
        if (tfc_safetensors_find(f, want[i], &t) != TFC_OK) TFC_FAIL_AT("the HF file lacks '%s'", want[i]);
        tfc_tensor_release(t);
    }
    tfc_safetensors_release(f);
    tfc_gpt *back = NULL;
    CHECK_OK(tfc_gpt_load_hf(dir, &back));
    tfc_gpt_release(back);
    tfc_gpt_release(m);
    unlink(path);
    snprintf(path, sizeof path, "%s/config.json", dir);
    unlink(path);
    rmdir(dir);
}

/* The architecture GPT-2's config describes, as the forward reads it. */
TEST(arch_of_gpt2) {
    tfc_gpt *m = small(0, 0);
    const gpt_arch *a = &m->arch;
    CHECK(a->norm == GPT_NORM_LAYER && a->pos == GPT_POS_LEARNED && a->mlp == GPT_MLP_GELU_TANH);
    CHECK(a->n_head == 2 && a->n_kv_head == 2 && a->head_dim == 4 && a->mlp_hidden == 32);
    CHECK(a->bias == 0 && a->tied_head == 0 && a->norm_eps == 1e-5);
    tfc_gpt_release(m);
}

/* ---- issue 41: a tfcore checkpoint whose metadata lies is refused, naming the tensor it cannot place ---- */

/* m saved to path, then rewritten with metadata key `key` set to `val` (NULL: as saved) and, if extra, one more tensor. */
static void lying_file(const tfc_gpt *m, const char *path, const char *key, const char *val, int extra) {
    CHECK_OK(tfc_gpt_save(m, path, NULL, NULL, 0));
    static const char *const keys[11] = {"format",         "tfc.n_layer",    "tfc.n_head", "tfc.n_embd",
                                         "tfc.block_size", "tfc.vocab_size", "tfc.bias",   "tfc.tie_weights",
                                         "tfc.ln_eps",     "tfc.dtype",      "tfc.dropout"};
    tfc_safetensors *f = NULL;
    CHECK_OK(tfc_safetensors_load(path, &f));
    const char *vals[11];
    char held[11][64];
    for (int k = 0; k < 11; k++) {
        const char *v = NULL;
        CHECK_OK(tfc_safetensors_metadata(f, keys[k], &v));
        snprintf(held[k], sizeof held[k], "%s", v ? v : "");
        vals[k] = key && strcmp(key, keys[k]) == 0 ? val : held[k];
    }
    const int32_t n = tfc_safetensors_count(f);
    const char *names[128];
    char own[128][96];
    tfc_tensor *ts[128];
    for (int32_t i = 0; i < n && i < 127; i++) {
        const char *nm = NULL;
        CHECK_OK(tfc_safetensors_get(f, i, &nm, &ts[i]));
        snprintf(own[i], sizeof own[i], "%s", nm);
        names[i] = own[i];
    }
    int32_t total = n;
    if (extra) {
        const int64_t d[1] = {3};
        CHECK_OK(tfc_tensor_zeros(d, 1, TFC_DTYPE_F32, &ts[total]));
        names[total++] = "transformer.extra.weight";
    }
    tfc_safetensors_release(f);
    CHECK_OK(tfc_safetensors_save(path, names, ts, total, keys, vals, 11));
    for (int32_t i = 0; i < total; i++) tfc_tensor_release(ts[i]);
}

static tfc_gpt *layers(int32_t n_layer, int bias) {
    tfc_gpt_config c = TFC_GPT_CONFIG_INIT;
    c.n_layer = n_layer, c.n_head = 2, c.n_embd = 8, c.block_size = 6, c.vocab_size = 11, c.bias = bias;
    tfc_gpt *m = NULL;
    CHECK_OK(tfc_gpt_new(&c, 7, &m));
    return m;
}

TEST(load_refuses_lying_metadata) {
    char path[] = "/tmp/tfc_gpt_lie_XXXXXX";
    const int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    tfc_gpt *four = layers(4, 1), *got = NULL, *one = layers(1, 1);
    /* tfc.n_layer says 1, the file holds 4 layers: the first layer-1 tensor is named */
    lying_file(four, path, "tfc.n_layer", "1", 0);
    CHECK_ERR(tfc_gpt_load(path, &got), TFC_ERR_FORMAT, "'transformer.h.1.");
    CHECK(got == NULL);
    CHECK_ERR(tfc_gpt_load_into(one, path), TFC_ERR_FORMAT, "'transformer.h.1.");
    /* tfc.bias says 0, the file holds biases */
    lying_file(four, path, "tfc.bias", "0", 0);
    CHECK_ERR(tfc_gpt_load(path, &got), TFC_ERR_FORMAT, ".bias' that the model of its metadata");
    CHECK(got == NULL);
    /* tfc.tie_weights says 1, the file holds lm_head.weight */
    tfc_gpt_config c = TFC_GPT_CONFIG_INIT;
    c.n_layer = 1, c.n_head = 2, c.n_embd = 8, c.block_size = 6, c.vocab_size = 11, c.tie_weights = 0;
    tfc_gpt *untied = NULL;
    CHECK_OK(tfc_gpt_new(&c, 7, &untied));
    lying_file(untied, path, "tfc.tie_weights", "1", 0);
    CHECK_ERR(tfc_gpt_load(path, &got), TFC_ERR_FORMAT, "lm_head.weight");
    /* a tensor no model has */
    lying_file(four, path, NULL, NULL, 1);
    CHECK_ERR(tfc_gpt_load(path, &got), TFC_ERR_FORMAT, "transformer.extra.weight");
    CHECK(got == NULL);
    /* nothing half-loaded: the model load_into refused is unchanged */
    tfc_gpt *ref = layers(1, 1);
    lying_file(one, path, NULL, NULL, 1);
    CHECK_OK(tfc_tensor_fill(one->wte, 0.5));
    CHECK_ERR(tfc_gpt_load_into(one, path), TFC_ERR_FORMAT, "transformer.extra.weight");
    float v[88] = {0};
    CHECK_OK(tfc_tensor_copy_to_host(one->wte, v, sizeof v));
    for (int i = 0; i < 88; i++) CHECK(v[i] == 0.5f);
    /* the honest files still load, quantized ones with their .qcodes/.qscales */
    CHECK_OK(tfc_gpt_save(four, path, NULL, NULL, 0));
    CHECK_OK(tfc_gpt_load(path, &got));
    tfc_gpt_release(got);
    got = NULL;
    CHECK_OK(tfc_gpt_quantize(four, TFC_QFORMAT_INT8, 0));
    CHECK_OK(tfc_gpt_quantize_head(four, TFC_QFORMAT_INT8, 0));
    CHECK_OK(tfc_gpt_save(four, path, NULL, NULL, 0));
    CHECK_OK(tfc_gpt_load(path, &got));
    tfc_gpt_release(got);
    tfc_gpt_release(ref);
    tfc_gpt_release(untied);
    tfc_gpt_release(one);
    tfc_gpt_release(four);
    unlink(path);
}

TFC_TEST_MAIN
