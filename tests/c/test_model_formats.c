/*
 * llm.c checkpoints and Hugging Face GPT-2 directories in C, so the readers'
 * error paths also run under ASan/UBSan (the Python suite, which compares
 * with torch GPT-2 on files written from the formats' documentation, cannot
 * load an ASan library): writer -> reader round trips give the same logits,
 * and every malformed file is refused with its reason, *out untouched and
 * nothing leaked.
 */
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tfc_test.h"
#include "tfc_test_util.h"

static char dir[64];
static const char *in_dir(const char *name) {
    static char bufs[4][160];
    static int k;
    char *b = bufs[k++ % 4];
    snprintf(b, sizeof bufs[0], "%s/%s", dir, name);
    return b;
}

/* The largest difference between the logits of a and b on one fixed sequence. */
static double logits_diff(tfc_gpt *a, tfc_gpt *b) {
    const int32_t ids[6] = {1, 5, 10, 0, 3, 3};
    const int64_t d[2] = {1, 6};
    tfc_tensor *x = NULL, *la = NULL, *lb = NULL;
    CHECK_OK(tfc_tensor_from_data(ids, d, 2, TFC_DTYPE_I32, &x));
    CHECK_OK(tfc_gpt_forward(a, NULL, x, NULL, &la, NULL));
    CHECK_OK(tfc_gpt_forward(b, NULL, x, NULL, &lb, NULL));
    float va[66], vb[66];
    CHECK_OK(tfc_tensor_copy_to_host(la, va, sizeof va));
    CHECK_OK(tfc_tensor_copy_to_host(lb, vb, sizeof vb));
    double worst = 0;
    for (int i = 0; i < 66; i++) worst = fabs(va[i] - vb[i]) > worst ? fabs(va[i] - vb[i]) : worst;
    tfc_tensor_release(x);
    tfc_tensor_release(la);
    tfc_tensor_release(lb);
    return worst;
}

static void put_file(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (len) CHECK(fwrite(data, 1, len, f) == len);
    fclose(f);
}

static void set_i32(unsigned char *b, int i, int32_t v) {
    for (int k = 0; k < 4; k++) b[4 * i + k] = (unsigned char)((uint32_t)v >> (8 * k));
}

TEST(llmc_round_trip_and_bad_files) {
    snprintf(dir, sizeof dir, "/tmp/tfc_test_formats_XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    for (int bias = 0; bias <= 1; bias++) {
        tfc_gpt *m = t_gpt_small(bias, 1), *back = NULL;
        CHECK_OK(tfc_gpt_save_llmc(m, in_dir("m.bin")));
        CHECK_OK(tfc_gpt_load_llmc(in_dir("m.bin"), &back));
        if (back) CHECK(logits_diff(m, back) < 1e-6);
        tfc_gpt_release(back);
        tfc_gpt_release(m);
    }
    size_t len = 0;
    unsigned char *good = t_slurp(in_dir("m.bin"), &len);
    CHECK(
        len ==
        1024 +
            4 * (size_t)(128 * 8 + 6 * 8 + 2 * (8 + 8 + 24 * 8 + 24 + 64 + 8 + 8 + 8 + 32 * 8 + 32 + 32 * 8 + 8) + 16));
    unsigned char *b = malloc(len + 8);
    struct {
        int field;
        int32_t value;
        tfc_status want;
        const char *why;
    } bad[] = {
        {0, 20240520, TFC_ERR_FORMAT, "magic 20240520"}, {1, 4, TFC_ERR_VERSION, "version 4"},
        {2, -3, TFC_ERR_FORMAT, "maxT (int 2) = -3"},    {4, 0, TFC_ERR_FORMAT, "L (int 4) = 0"},
        {7, 10, TFC_ERR_FORMAT, "Vp 10 below V 11"},     {6, 7, TFC_ERR_FORMAT, "C 7 not a multiple of NH 2"},
        {7, INT32_MAX, TFC_ERR_FORMAT, "needs"},         {4, INT32_MAX, TFC_ERR_FORMAT, "overflow"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memcpy(b, good, len);
        set_i32(b, bad[i].field, bad[i].value);
        if (bad[i].field == 4 && bad[i].value == INT32_MAX) set_i32(b, 6, INT32_MAX - 1); /* L·C·C overflows */
        put_file(in_dir("bad.bin"), b, len);
        tfc_gpt *out = (tfc_gpt *)b; /* a sentinel: must stay */
        CHECK_ERR(tfc_gpt_load_llmc(in_dir("bad.bin"), &out), bad[i].want, bad[i].why);
        CHECK(out == (tfc_gpt *)b);
        CHECK(strstr(tfc_last_error(), "tfc_gpt_load_llmc") == tfc_last_error());
    }
    const struct {
        size_t len;
        const char *why;
    } sizes[] = {{0, "shorter than llm.c's 1024-byte header"},
                 {1000, "shorter than llm.c's 1024-byte header"},
                 {1024, "truncated parameters"},
                 {len - 1, "truncated parameters"},
                 {len + 4, "trailing bytes"}};
    memcpy(b, good, len);
    memset(b + len, 0, 8);
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        put_file(in_dir("bad.bin"), b, sizes[i].len);
        tfc_gpt *out = NULL;
        CHECK_ERR(tfc_gpt_load_llmc(in_dir("bad.bin"), &out), TFC_ERR_FORMAT, sizes[i].why);
        CHECK(out == NULL);
    }
    tfc_gpt *out = NULL;
    CHECK_ERR(tfc_gpt_load_llmc(in_dir("absent.bin"), &out), TFC_ERR_IO, "cannot open");
    CHECK_ERR(tfc_gpt_load_llmc(dir, &out), TFC_ERR_IO, "not a regular file");
    tfc_gpt *untied = t_gpt_small(1, 0);
    CHECK_ERR(tfc_gpt_save_llmc(untied, in_dir("u.bin")), TFC_ERR_UNSUPPORTED, "lm_head");
    tfc_gpt_release(untied);
    free(b);
    free(good);
    unlink(in_dir("m.bin"));
    unlink(in_dir("bad.bin"));
    rmdir(dir);
}

static const char *cfg_json(int n_embd, const char *extra) {
    static char buf[512];
    snprintf(buf, sizeof buf,
             "{\"model_type\": \"gpt2\", \"n_layer\": 2, \"n_head\": 2, \"n_embd\": %d, \"n_positions\": 6, "
             "\"vocab_size\": 11, \"layer_norm_epsilon\": 1e-05, \"n_inner\": null, \"task_specific_params\": "
             "{\"a\": [1, 2.5e3, true, {\"b\": null}]}%s}",
             n_embd, extra);
    return buf;
}

TEST(hf_round_trip_and_bad_directories) {
    snprintf(dir, sizeof dir, "/tmp/tfc_test_formats_XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    const char *hf = in_dir("hf");
    for (int v = 0; v < 3; v++) {
        tfc_gpt *m = t_gpt_small(v != 1, v != 2), *back = NULL;
        CHECK_OK(tfc_gpt_save_hf(m, hf, -1, 10));
        CHECK_OK(tfc_gpt_load_hf(hf, &back));
        if (back) CHECK(logits_diff(m, back) < 1e-6);
        tfc_gpt_release(back);
        tfc_gpt_release(m);
    }
    char cpath[200], wpath[200];
    snprintf(cpath, sizeof cpath, "%s/config.json", hf);
    snprintf(wpath, sizeof wpath, "%s/model.safetensors", hf); /* the tied model with biases of v = 0 ... */
    tfc_gpt *m = t_gpt_small(1, 1);
    CHECK_OK(tfc_gpt_save_hf(m, hf, -1, -1));
    /* our own config.json written back with the test's: still loads (unknown keys of any kind skipped) */
    put_file(cpath, cfg_json(8, ""), strlen(cfg_json(8, "")));
    tfc_gpt *back = NULL;
    CHECK_OK(tfc_gpt_load_hf(hf, &back));
    if (back) CHECK(logits_diff(m, back) < 1e-6);
    tfc_gpt_release(back);
    const struct {
        const char *json;
        tfc_status want;
        const char *why;
    } bad[] = {
        {"", TFC_ERR_FORMAT, "malformed config.json at byte 0"},
        {"{\"n_layer\": 2,}", TFC_ERR_FORMAT, "expected a string"},
        {"{\"n_layer\": \"2\"}", TFC_ERR_FORMAT, "\"n_layer\" must be an integer"},
        {"{\"n_layer\": 2} x", TFC_ERR_FORMAT, "trailing bytes"},
        {"{\"n_layer\": 1e400}", TFC_ERR_FORMAT, "out of range"},
        {"{\"a\": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}",
         TFC_ERR_FORMAT, "nested more than 64 deep"},
        {"{\"n_head\": 2, \"n_embd\": 8, \"n_positions\": 6, \"vocab_size\": 11}", TFC_ERR_FORMAT,
         "has no \"n_layer\""},
        {"{\"n_layer\": 2, \"n_head\": 3, \"n_embd\": 8, \"n_positions\": 6, \"vocab_size\": 11}", TFC_ERR_FORMAT,
         "not a multiple"},
        {"{\"n_layer\": 2, \"n_head\": 2, \"n_embd\": 8, \"n_positions\": 6, \"vocab_size\": 11, \"model_type\": \"bert\"}",
         TFC_ERR_UNSUPPORTED, "model_type \"bert\""},
        {"{\"n_layer\": 2, \"n_head\": 2, \"n_embd\": 8, \"n_positions\": 6, \"vocab_size\": 11, "
         "\"scale_attn_by_inverse_layer_idx\": true}",
         TFC_ERR_UNSUPPORTED, "scale_attn_by_inverse_layer_idx"},
        {"{\"n_layer\": 2, \"n_head\": 2, \"n_embd\": 8, \"n_positions\": 6, \"vocab_size\": 11, "
         "\"tie_word_embeddings\": false}",
         TFC_ERR_FORMAT, "has no tensor 'lm_head.weight'"},
        {"{\"n_layer\": 3, \"n_head\": 2, \"n_embd\": 8, \"n_positions\": 6, \"vocab_size\": 11}", TFC_ERR_FORMAT,
         "has no tensor 'transformer.h.2.ln_1.weight'"},
        {"{\"n_layer\": 1, \"n_head\": 2, \"n_embd\": 8, \"n_positions\": 6, \"vocab_size\": 11}", TFC_ERR_FORMAT,
         "tensor 'transformer.h.1."},
        {"{\"n_layer\": 2, \"n_head\": 2, \"n_embd\": 8, \"n_positions\": 9, \"vocab_size\": 11}", TFC_ERR_FORMAT,
         "holds transformer.wpe.weight as [6,8], its config.json"},
        {"{\"n_layer\": 100000, \"n_head\": 2, \"n_embd\": 8192, \"n_positions\": 6, \"vocab_size\": 11}",
         TFC_ERR_FORMAT, "tensors but config.json"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        put_file(cpath, bad[i].json, strlen(bad[i].json));
        tfc_gpt *out = (tfc_gpt *)cpath; /* a sentinel: must stay */
        CHECK_ERR(tfc_gpt_load_hf(hf, &out), bad[i].want, bad[i].why);
        CHECK(out == (tfc_gpt *)cpath);
        CHECK(strstr(tfc_last_error(), "tfc_gpt_load_hf") == tfc_last_error());
    }
    /* a safetensors file lacking one parameter, then none at all, then config.json gone */
    put_file(cpath, cfg_json(8, ""), strlen(cfg_json(8, "")));
    int32_t n;
    const char *const *names;
    tfc_tensor *const *params;
    CHECK_OK(tfc_gpt_params(m, &n, &names, &params));
    CHECK_OK(tfc_safetensors_save(wpath, names, params, n - 1, NULL, NULL, 0));
    tfc_gpt *out = NULL;
    CHECK_ERR(tfc_gpt_load_hf(hf, &out), TFC_ERR_FORMAT, names[n - 1]);
    unlink(wpath);
    CHECK_ERR(tfc_gpt_load_hf(hf, &out), TFC_ERR_IO, "model.safetensors");
    unlink(cpath);
    CHECK_ERR(tfc_gpt_load_hf(hf, &out), TFC_ERR_IO, "config.json");
    CHECK(out == NULL);
    CHECK_ERR(tfc_gpt_save_hf(m, hf, 11, -1), TFC_ERR_INVALID_ARG, "bos_token_id is 11");
    tfc_gpt_release(m);
    rmdir(hf);
    rmdir(dir);
}

TFC_TEST_MAIN
