/*
 * Writes the valid seed inputs of tests/fuzz/corpus/ with the library's own
 * writers, so each target starts from files that load:
 *   build-fuzz/tests/fuzz/fuzz_make_seeds tests/fuzz/corpus
 * (the committed seeds came from this; rerun it when a format changes).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tfcore/tfcore.h"

static const char *root;

static void ok(tfc_status s, const char *what) {
    if (s != TFC_OK) {
        fprintf(stderr, "make_seeds: %s: %s\n", what, tfc_last_error());
        exit(1);
    }
}

static char *path_of(const char *target, const char *name) {
    static char buf[4][1024];
    static int k;
    char *p = buf[k++ % 4];
    snprintf(p, 1024, "%s/%s", root, target);
    if (mkdir(p, 0755) != 0 && errno != EEXIST) exit(1);
    snprintf(p, 1024, "%s/%s/%s", root, target, name);
    return p;
}

/* Write prefix (plen bytes) followed by the parts. */
static void put(const char *path, const void *prefix, size_t plen, const void *a, size_t alen, const void *b,
                size_t blen) {
    FILE *f = fopen(path, "wb");
    if (!f) exit(1);
    fwrite(prefix, 1, plen, f);
    if (alen) fwrite(a, 1, alen, f);
    if (blen) fwrite(b, 1, blen, f);
    fclose(f);
}

static const char text[] = "the cat sat on the mat, and then that cat sat there. It's 12 o'clock!\n"
                           "Ünïcödé café 日本 🙂 <|endoftext|> more   spaces\tand tabs\r\n";

static void safetensors_seeds(void) {
    float f32[6] = {1, 2, 3, 4, 5, 6};
    int64_t i64[2] = {-1, 1LL << 40};
    uint16_t bf16[3] = {0x3f80, 0x4000, 0xc040};
    int64_t d23[2] = {2, 3}, d2[1] = {2}, d3[1] = {3}, d0[1] = {0};
    tfc_tensor *t[4];
    ok(tfc_tensor_from_data(f32, d23, 2, TFC_DTYPE_F32, &t[0]), "f32");
    ok(tfc_tensor_from_data(i64, d2, 1, TFC_DTYPE_I64, &t[1]), "i64");
    ok(tfc_tensor_from_data(bf16, d3, 1, TFC_DTYPE_BF16, &t[2]), "bf16");
    ok(tfc_tensor_empty(d0, 1, TFC_DTYPE_U8, &t[3]), "empty");
    const char *names[4] = {"weight", "ids", "half", "empty"};
    const char *mk[1] = {"format"}, *mv[1] = {"pt"};
    ok(tfc_safetensors_save(path_of("safetensors", "four.safetensors"), names, t, 4, mk, mv, 1), "save");
    ok(tfc_safetensors_save(path_of("safetensors", "none.safetensors"), names, t, 0, NULL, NULL, 0), "save");
    for (int i = 0; i < 4; i++) tfc_tensor_release(t[i]);
}

static void gpt_seeds(void) {
    tfc_gpt_config c = TFC_GPT_CONFIG_INIT;
    c.n_layer = 1, c.n_head = 2, c.n_embd = 8, c.block_size = 8, c.vocab_size = 16;
    tfc_gpt *m;
    ok(tfc_gpt_new(&c, 1, &m), "gpt");
    ok(tfc_gpt_save(m, path_of("gpt_load", "tiny.safetensors"), NULL, NULL, 0), "gpt save");
    tfc_gpt_release(m);
    c.bias = 0, c.tie_weights = 0, c.vocab_size = 4, c.n_embd = 4, c.block_size = 2;
    ok(tfc_gpt_new(&c, 2, &m), "gpt");
    ok(tfc_gpt_save(m, path_of("gpt_load", "untied_nobias.safetensors"), NULL, NULL, 0), "gpt save");
    tfc_gpt_release(m);
    /* quantized checkpoints (NAME.qcodes / NAME.qscales, tfc.quant.* metadata): int8, and int4 in groups of 32 */
    c = (tfc_gpt_config)TFC_GPT_CONFIG_INIT;
    c.n_layer = 1, c.n_head = 2, c.n_embd = 32, c.block_size = 4, c.vocab_size = 8;
    ok(tfc_gpt_new(&c, 3, &m), "gpt");
    ok(tfc_gpt_quantize(m, TFC_QFORMAT_INT8, 0), "gpt quantize");
    ok(tfc_gpt_save(m, path_of("gpt_load", "int8.safetensors"), NULL, NULL, 0), "gpt save");
    tfc_gpt_release(m);
    ok(tfc_gpt_new(&c, 4, &m), "gpt");
    ok(tfc_gpt_quantize(m, TFC_QFORMAT_INT4, 32), "gpt quantize");
    ok(tfc_gpt_save(m, path_of("gpt_load", "int4_g32.safetensors"), NULL, NULL, 0), "gpt save");
    tfc_gpt_release(m);
    /* an llm.c checkpoint (vocabulary 5 padded to 128) */
    c = (tfc_gpt_config)TFC_GPT_CONFIG_INIT;
    c.n_layer = 1, c.n_head = 1, c.n_embd = 2, c.block_size = 2, c.vocab_size = 5;
    ok(tfc_gpt_new(&c, 5, &m), "gpt");
    ok(tfc_gpt_save_llmc(m, path_of("gpt_llmc", "tiny.bin")), "gpt save llmc");
    tfc_gpt_release(m);
}

static void tokenizer_seeds(void) {
    /* native: a trained tokenizer with a special token */
    tfc_tokenizer *t;
    ok(tfc_tokenizer_new(TFC_SPLIT_GPT2, &t), "tok");
    ok(tfc_tokenizer_train(t, text, sizeof text - 1, 290), "train");
    ok(tfc_tokenizer_add_special(t, "<|endoftext|>", 290), "special");
    ok(tfc_tokenizer_save(t, path_of("native_tokenizer", "trained.tfctok")), "save");
    tfc_tokenizer_release(t);
    ok(tfc_tokenizer_new(TFC_SPLIT_NONE, &t), "tok");
    ok(tfc_tokenizer_save(t, path_of("native_tokenizer", "bytes.tfctok")), "save");
    tfc_tokenizer_release(t);

    /* tiktoken: 256 byte tokens, then "ab" "bc" "abc" "cd"; first byte = pattern */
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *s = malloc(256 * 12 + 64), *p = s;
    for (int b = 0; b < 256; b++) p += sprintf(p, "%c%c== %d\n", b64[b >> 2], b64[(b & 3) << 4], b);
    p += sprintf(p, "YWI= 256\nYmM= 257\nYWJj 258\nY2Q= 259\n");
    put(path_of("tiktoken", "tiny.tiktoken"), "\x01", 1, s, strlen(s), NULL, 0);
    free(s);

    /* GPT-2: encoder.json, NUL, vocab.bpe (" t" = Ġt, " th", "\n\n" = ĊĊ, a special) */
    char *j = malloc(256 * 16 + 256);
    p = j;
    p += sprintf(p, "{");
    int extra = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        unsigned cp = printable ? (unsigned)b : 256u + (unsigned)extra++;
        if (cp == '"' || cp == '\\')
            p += sprintf(p, "\"\\%c\": %d, ", (char)cp, b);
        else if (cp < 0x80)
            p += sprintf(p, "\"%c\": %d, ", (char)cp, b);
        else
            p += sprintf(p, "\"\\u%04x\": %d, ", cp, b);
    }
    p += sprintf(p, "\"\\u0120t\": 256, \"\\u0120th\": 257, \"\\u010a\\u010a\": 258, \"<|endoftext|>\": 259}");
    static const char bpe[] = "#version: 0.2\n\xc4\xa0 t\n\xc4\xa0t h\n\xc4\x8a \xc4\x8a\n";
    put(path_of("gpt2_vocab", "tiny.json_bpe"), j, strlen(j), "", 1, bpe, sizeof bpe - 1);
    free(j);
}

static void token_file_seeds(void) {
    int32_t ids[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 99};
    ok(tfc_token_file_write(path_of("token_file", "u16.tok"), ids, 10, 100), "tokens");
    int32_t big[4] = {70000, 1, 65536, 3};
    ok(tfc_token_file_write(path_of("token_file", "u32.tok"), big, 4, 70001), "tokens");
}

/* token_shards: byte 0 = format (0 llm.c, 1 u16) + 2 for two shards, byte 1 = vocab choice, then the file(s). */
static void token_shards_seeds(void) {
    unsigned char shard[1024 + 20] = {0}, lead[2];
    const uint32_t head[3] = {20240520, 1, 10}; /* llm.c GPT-2: magic, version, count; then 10 u16 tokens */
    for (int i = 0; i < 3; i++)
        for (int b = 0; b < 4; b++) shard[4 * i + b] = (unsigned char)(head[i] >> (8 * b));
    for (int i = 0; i < 10; i++) shard[1024 + 2 * i] = (unsigned char)(i * 25);
    lead[0] = 0;
    lead[1] = 1; /* vocab 258 */
    put(path_of("token_shards", "llmc_gpt2"), lead, 2, shard, sizeof shard, NULL, 0);
    lead[0] = 2; /* the same shard twice */
    put(path_of("token_shards", "llmc_two"), lead, 2, shard, sizeof shard, shard, sizeof shard);
    unsigned char llama[1024 + 16] = {0};
    const uint32_t lhead[3] = {20240801, 7, 4}; /* Llama 3: u32 tokens */
    for (int i = 0; i < 3; i++)
        for (int b = 0; b < 4; b++) llama[4 * i + b] = (unsigned char)(lhead[i] >> (8 * b));
    llama[1024 + 4] = 0xff, llama[1024 + 5] = 0xf4, llama[1024 + 6] = 0x01; /* 128255 */
    lead[0] = 0;
    lead[1] = 255;
    put(path_of("token_shards", "llmc_llama3"), lead, 2, llama, sizeof llama, NULL, 0);
    lead[0] = 1;
    lead[1] = 1;
    put(path_of("token_shards", "u16"), lead, 2, shard + 1024, 20, NULL, 0);
}

static void text_seeds(void) {
    for (int k = 0; k < 9; k++) { /* encode: byte 0 = pattern + 3 * mode */
        char name[32];
        unsigned char lead = (unsigned char)k;
        snprintf(name, sizeof name, "text%d", k);
        put(path_of("encode", name), &lead, 1, text, sizeof text - 1, NULL, 0);
    }
    unsigned char invalid_utf8[] = {0x00, 0xff, 0xfe, 0xc3, 0x28, 0xe2, 0x82, 0x20, 0xf0, 0x9f, 0x99};
    put(path_of("encode", "invalid_utf8"), invalid_utf8, sizeof invalid_utf8, NULL, 0, NULL, 0);
    /* train: byte 0 = pattern (+0x40: a special first), bytes 1-2 = vocab - 256, 3-4 unused */
    unsigned char head[3][5] = {{0, 0, 40, 0, 0}, {1, 0, 100, 0, 0}, {0x42, 1, 0, 0, 0}};
    for (int k = 0; k < 3; k++) {
        char name[32];
        snprintf(name, sizeof name, "text%d", k);
        put(path_of("train", name), head[k], 5, text, sizeof text - 1, NULL, 0);
    }
}

static void dlpack_seeds(void) {
    /* flags, device, device_id, dtype code, bits index, ndim + 1, shape values, stride values, ... */
    unsigned char f32_2x3[] = {0x00, 0, 0, 2, 2, 3, 2, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 1};
    unsigned char compact[] = {0x02, 0, 0, 0, 3, 4, 2, 2, 2};
    unsigned char offset[] = {0x06, 1, 0, 1, 0, 2, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                              0,    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3};
    unsigned char versioned[] = {0x10, 0, 0, 4, 1, 2, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
    unsigned char broadcast[] = {0x00, 0, 0, 2, 2, 3, 8, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    put(path_of("dlpack", "f32_2x3"), f32_2x3, sizeof f32_2x3, NULL, 0, NULL, 0);
    put(path_of("dlpack", "compact"), compact, sizeof compact, NULL, 0, NULL, 0);
    put(path_of("dlpack", "offset"), offset, sizeof offset, NULL, 0, NULL, 0);
    put(path_of("dlpack", "versioned"), versioned, sizeof versioned, NULL, 0, NULL, 0);
    put(path_of("dlpack", "broadcast"), broadcast, sizeof broadcast, NULL, 0, NULL, 0);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: fuzz_make_seeds CORPUS_DIR\n");
        return 2;
    }
    root = argv[1];
    if (mkdir(root, 0755) != 0 && errno != EEXIST) return 1;
    safetensors_seeds();
    gpt_seeds();
    tokenizer_seeds();
    token_file_seeds();
    token_shards_seeds();
    text_seeds();
    dlpack_seeds();
}
