/*
 * Token files of other tools (tfc_token_file_open_shards): llm.c data
 * shards and nanoGPT's headerless u16 files, written here byte by byte from
 * the formats' documentation (llm.c dev/data/data_common.py, nanoGPT
 * data/DATASET/prepare.py), not by the library. Every malformed case is refused
 * with its file named and nothing handed out.
 */
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tfc_test.h"
#include "tfc_test_util.h"

static void put_le(FILE *fp, uint64_t v, int n) {
    for (int i = 0; i < n; i++) fputc((int)((v >> (8 * i)) & 0xff), fp);
}

/* An llm.c shard: 256 int32 header (magic, version, count given separately), then count tokens of width bytes. */
static void write_llmc(const char *path, int32_t magic, int32_t version, int32_t count_field, const uint32_t *ids,
                       int64_t n, int width) {
    FILE *fp = fopen(path, "wb");
    CHECK(fp != NULL);
    put_le(fp, (uint32_t)magic, 4);
    put_le(fp, (uint32_t)version, 4);
    put_le(fp, (uint32_t)count_field, 4);
    for (int i = 3; i < 256; i++) put_le(fp, 0, 4);
    for (int64_t i = 0; i < n; i++) put_le(fp, ids[i], width);
    fclose(fp);
}

static void write_u16(const char *path, const uint32_t *ids, int64_t n) {
    FILE *fp = fopen(path, "wb");
    CHECK(fp != NULL);
    for (int64_t i = 0; i < n; i++) put_le(fp, ids[i], 2);
    fclose(fp);
}

static char dir[64];
static const char *in_dir(const char *name) {
    static char bufs[4][128];
    static int k;
    char *b = bufs[k++ % 4];
    snprintf(b, sizeof bufs[0], "%s/%s", dir, name);
    return b;
}

static void make_dir(void) {
    snprintf(dir, sizeof dir, "/tmp/tfc_test_shards_XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
}

static void remove_dir(const char *const *names, int n) {
    for (int i = 0; i < n; i++) unlink(in_dir(names[i]));
    rmdir(dir);
}

TEST(llmc_gpt2_shards_read_as_one_stream) {
    make_dir();
    enum { N0 = 1500, N1 = 700 };
    static uint32_t all[N0 + N1];
    for (int i = 0; i < N0 + N1; i++) all[i] = (uint32_t)((i * 7919u + 11u) % 50257u);
    write_llmc(in_dir("train_000.bin"), 20240520, 1, N0, all, N0, 2);
    write_llmc(in_dir("train_001.bin"), 20240520, 1, N1, all + N0, N1, 2);
    struct stat st;
    CHECK(stat(in_dir("train_000.bin"), &st) == 0 && st.st_size == 1024 + 2 * N0);
    const char *paths[2] = {in_dir("train_000.bin"), in_dir("train_001.bin")};
    tfc_token_file *f = NULL;
    CHECK_OK(tfc_token_file_open_shards(paths, 2, TFC_TOKENS_LLMC, 50257, &f));
    CHECK(tfc_token_file_count(f) == N0 + N1 && tfc_token_file_vocab_size(f) == 50257);
    static int32_t back[N0 + N1];
    CHECK_OK(tfc_token_file_read(f, 0, N0 + N1, back));
    for (int i = 0; i < N0 + N1; i++) CHECK(back[i] == (int32_t)all[i]);
    /* a read across the boundary between the shards */
    int32_t mid[10];
    CHECK_OK(tfc_token_file_read(f, N0 - 5, 10, mid));
    for (int i = 0; i < 10; i++) CHECK(mid[i] == (int32_t)all[N0 - 5 + i]);
    CHECK_ERR(tfc_token_file_read(f, N0 + N1 - 1, 2, mid), TFC_ERR_INVALID_ARG, "outside the file's 2200 tokens");
    /* batches are windows of the concatenation, and the same as from one token file holding it */
    tfc_tensor *x, *y;
    const int32_t B = 8, T = 16;
    CHECK_OK(tfc_token_file_batch(f, 0, N0 + N1, B, T, 42, 3, &x, &y));
    const int32_t *xv = tfc_tensor_data(x), *yv = tfc_tensor_data(y);
    for (int b = 0; b < B; b++) {
        int s0 = -1; /* the window's start: the first i whose tokens match */
        for (int i = 0; i + T < N0 + N1 && s0 < 0; i++) {
            int ok = 1;
            for (int t = 0; t < T && ok; t++) ok = xv[b * T + t] == (int32_t)all[i + t];
            if (ok) s0 = i;
        }
        CHECK(s0 >= 0);
        for (int t = 0; t < T; t++) CHECK(yv[b * T + t] == (int32_t)all[s0 + t + 1]);
    }
    static int32_t ids32[N0 + N1];
    for (int i = 0; i < N0 + N1; i++) ids32[i] = (int32_t)all[i];
    const char *one = in_dir("one.tokens");
    CHECK_OK(tfc_token_file_write(one, ids32, N0 + N1, 50257));
    tfc_token_file *g = NULL;
    CHECK_OK(tfc_token_file_open(one, &g));
    tfc_tensor *x2, *y2;
    CHECK_OK(tfc_token_file_batch(g, 0, N0 + N1, B, T, 42, 3, &x2, &y2));
    CHECK(memcmp(xv, tfc_tensor_data(x2), (size_t)(B * T) * 4) == 0);
    CHECK(memcmp(yv, tfc_tensor_data(y2), (size_t)(B * T) * 4) == 0);
    tfc_tensor *rel[] = {x, y, x2, y2};
    for (int i = 0; i < 4; i++) tfc_tensor_release(rel[i]);
    tfc_token_file_close(g);
    tfc_token_file_close(f);
    const char *names[] = {"train_000.bin", "train_001.bin", "one.tokens"};
    remove_dir(names, 3);
}

TEST(llmc_llama3_and_headerless_u16) {
    make_dir();
    uint32_t big[5] = {0, 128255, 70000, 65536, 1};
    write_llmc(in_dir("llama.bin"), 20240801, 7, 5, big, 5, 4);
    const char *p = in_dir("llama.bin");
    tfc_token_file *f = NULL;
    CHECK_OK(tfc_token_file_open_shards(&p, 1, TFC_TOKENS_LLMC, 128256, &f));
    int32_t back[5];
    CHECK(tfc_token_file_count(f) == 5);
    CHECK_OK(tfc_token_file_read(f, 0, 5, back));
    for (int i = 0; i < 5; i++) CHECK(back[i] == (int32_t)big[i]);
    tfc_token_file_close(f);

    uint32_t small[1001];
    for (int i = 0; i < 1001; i++) small[i] = (uint32_t)(i * 31 % 65);
    write_u16(in_dir("train.bin"), small, 1001);
    p = in_dir("train.bin");
    CHECK_OK(tfc_token_file_open_shards(&p, 1, TFC_TOKENS_U16, 65, &f));
    CHECK(tfc_token_file_count(f) == 1001);
    int32_t all[1001];
    CHECK_OK(tfc_token_file_read(f, 0, 1001, all));
    for (int i = 0; i < 1001; i++) CHECK(all[i] == (int32_t)small[i]);
    tfc_token_file_close(f);
    /* an empty headerless file is an empty shard, not an error */
    write_u16(in_dir("empty.bin"), small, 0);
    const char *two[2] = {in_dir("empty.bin"), in_dir("train.bin")};
    CHECK_OK(tfc_token_file_open_shards(two, 2, TFC_TOKENS_U16, 65, &f));
    CHECK(tfc_token_file_count(f) == 1001);
    CHECK_OK(tfc_token_file_read(f, 0, 1001, all));
    CHECK(all[1000] == (int32_t)small[1000]);
    tfc_token_file_close(f);
    const char *names[] = {"llama.bin", "train.bin", "empty.bin"};
    remove_dir(names, 3);
}

/* Expect open_shards to fail with status and message fragment, leaving *out as it was. */
static void refused(const char *const *paths, int32_t n, tfc_token_format fmt, int32_t vocab, tfc_status want,
                    const char *frag) {
    tfc_token_file *sentinel = (tfc_token_file *)(uintptr_t)0x1, *f = sentinel;
    CHECK_ERR(tfc_token_file_open_shards(paths, n, fmt, vocab, &f), want, frag);
    CHECK(f == sentinel);
    CHECK(strstr(tfc_last_error(), "tfc_token_file_open_shards") != NULL);
}

TEST(bad_shards_are_refused_naming_the_file) {
    make_dir();
    uint32_t ids[1000];
    for (int i = 0; i < 1000; i++) ids[i] = (uint32_t)(i % 50257);
    const char *good = in_dir("good.bin"), *bad = in_dir("bad.bin");
    write_llmc(good, 20240520, 1, 1000, ids, 1000, 2);
    const char *pair[2] = {good, bad};

    write_llmc(bad, 20240521, 1, 1000, ids, 1000, 2); /* wrong magic */
    refused(pair, 2, TFC_TOKENS_LLMC, 50257, TFC_ERR_FORMAT, "magic 20240521");
    refused(pair + 1, 1, TFC_TOKENS_LLMC, 50257, TFC_ERR_FORMAT, bad);
    write_llmc(bad, 20240520, 1, 1000, ids, 1000, 2);
    CHECK(truncate(bad, 1000) == 0); /* truncated header */
    refused(pair, 2, TFC_TOKENS_LLMC, 50257, TFC_ERR_FORMAT, "shorter than llm.c's 1024-byte header");
    write_llmc(bad, 20240520, 1, 1001, ids, 1000, 2); /* count beyond the file */
    refused(pair, 2, TFC_TOKENS_LLMC, 50257, TFC_ERR_FORMAT, "claims 1001 tokens");
    write_llmc(bad, 20240520, 1, 999, ids, 1000, 2); /* bytes the header does not count */
    refused(pair, 2, TFC_TOKENS_LLMC, 50257, TFC_ERR_FORMAT, "claims 999 tokens");
    write_llmc(bad, 20240520, 1, -4, ids, 1000, 2);
    refused(pair, 2, TFC_TOKENS_LLMC, 50257, TFC_ERR_FORMAT, "claims -4 tokens");
    write_llmc(bad, 20240520, 2, 1000, ids, 1000, 2); /* a newer version */
    refused(pair, 2, TFC_TOKENS_LLMC, 50257, TFC_ERR_VERSION, "version 2");
    write_llmc(bad, 20240801, 1, 1000, ids, 1000, 4); /* Llama 3's magic with GPT-2's version */
    refused(pair, 2, TFC_TOKENS_LLMC, 50257, TFC_ERR_FORMAT, "version 1 for magic 20240801");
    ids[500] = 50257; /* a token >= vocab: its index and byte offset in that file */
    write_llmc(bad, 20240520, 1, 1000, ids, 1000, 2);
    refused(pair, 2, TFC_TOKENS_LLMC, 50257, TFC_ERR_FORMAT, "token 500 (byte offset 2024) is 50257");
    refused(pair, 2, TFC_TOKENS_LLMC, 50257, TFC_ERR_FORMAT, bad);
    ids[500] = 500;

    write_u16(bad, ids, 10);
    CHECK(truncate(bad, 19) == 0); /* odd length */
    refused(pair + 1, 1, TFC_TOKENS_U16, 50257, TFC_ERR_FORMAT, "odd length");
    ids[3] = 65;
    write_u16(bad, ids, 10);
    refused(pair + 1, 1, TFC_TOKENS_U16, 65, TFC_ERR_FORMAT, "token 3 (byte offset 6) is 65, not below vocab_size 65");

    /* past the first 4096-token block of the u16 scan */
    static uint32_t many[10000];
    for (int i = 0; i < 10000; i++) many[i] = (uint32_t)(i % 50257);
    many[9000] = 60000;
    write_u16(bad, many, 10000);
    refused(pair + 1, 1, TFC_TOKENS_U16, 50257, TFC_ERR_FORMAT, "token 9000 (byte offset 18000) is 60000");

    const char *missing = in_dir("missing.bin");
    refused(&missing, 1, TFC_TOKENS_LLMC, 50257, TFC_ERR_IO, missing);
    const char *d = dir;
    refused(&d, 1, TFC_TOKENS_U16, 50257, TFC_ERR_IO, "not a regular file");
    refused(pair, 0, TFC_TOKENS_LLMC, 50257, TFC_ERR_INVALID_ARG, "n is 0");
    refused(pair, 1, (tfc_token_format)3, 50257, TFC_ERR_INVALID_ARG, "format is 3");
    refused(pair, 1, TFC_TOKENS_LLMC, 0, TFC_ERR_INVALID_ARG, "vocab_size is 0");
    const char *with_null[2] = {good, NULL};
    refused(with_null, 2, TFC_TOKENS_LLMC, 50257, TFC_ERR_INVALID_ARG, "paths[1] is NULL");
    tfc_token_file *f = NULL;
    CHECK_ERR(tfc_token_file_open_shards(NULL, 1, TFC_TOKENS_LLMC, 50257, &f), TFC_ERR_INVALID_ARG, "paths");
    CHECK_ERR(tfc_token_file_open_shards(pair, 1, TFC_TOKENS_LLMC, 50257, NULL), TFC_ERR_INVALID_ARG, "out");
    const char *names[] = {"good.bin", "bad.bin"};
    remove_dir(names, 2);
}

static uint32_t le32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

TEST(write_shard_lays_out_bytes_as_documented) {
    make_dir();
    int32_t ids[6] = {0, 1, 50256, 65535, 7, 300};
    const char *p = in_dir("w.bin");
    CHECK_OK(tfc_token_file_write_shard(p, ids, 6, TFC_TOKENS_LLMC));
    size_t len;
    unsigned char *b = t_slurp(p, &len);
    CHECK(len == 1024 + 12);
    CHECK(le32(b) == 20240520 && le32(b + 4) == 1 && le32(b + 8) == 6);
    for (int i = 3; i < 256; i++) CHECK(le32(b + 4 * i) == 0);
    for (int i = 0; i < 6; i++) CHECK((uint32_t)(b[1024 + 2 * i] | b[1025 + 2 * i] << 8) == (uint32_t)ids[i]);
    free(b);
    CHECK_OK(tfc_token_file_write_shard(p, ids, 6, TFC_TOKENS_U16));
    b = t_slurp(p, &len);
    CHECK(len == 12);
    for (int i = 0; i < 6; i++) CHECK((uint32_t)(b[2 * i] | b[2 * i + 1] << 8) == (uint32_t)ids[i]);
    free(b);
    /* an id past 16 bits: Llama 3's layout, u32 */
    ids[1] = 128255;
    CHECK_OK(tfc_token_file_write_shard(p, ids, 6, TFC_TOKENS_LLMC));
    b = t_slurp(p, &len);
    CHECK(len == 1024 + 24 && le32(b) == 20240801 && le32(b + 4) == 7 && le32(b + 8) == 6);
    CHECK(le32(b + 1024 + 4) == 128255);
    free(b);
    tfc_token_file *f = NULL;
    CHECK_OK(tfc_token_file_open_shards(&p, 1, TFC_TOKENS_LLMC, 128256, &f));
    int32_t back[6];
    CHECK_OK(tfc_token_file_read(f, 0, 6, back));
    CHECK(memcmp(back, ids, sizeof ids) == 0);
    tfc_token_file_close(f);
    CHECK_ERR(tfc_token_file_write_shard(p, ids, 6, TFC_TOKENS_U16), TFC_ERR_INVALID_ARG,
              "id 128255 does not fit u16 tokens");
    ids[2] = -1;
    CHECK_ERR(tfc_token_file_write_shard(p, ids, 6, TFC_TOKENS_LLMC), TFC_ERR_INVALID_ARG, "ids[2] is -1");
    CHECK_ERR(tfc_token_file_write_shard(p, ids, 6, (tfc_token_format)0), TFC_ERR_INVALID_ARG, "format is 0");
    CHECK_ERR(tfc_token_file_write_shard(p, NULL, 6, TFC_TOKENS_U16), TFC_ERR_INVALID_ARG, "n is 6");
    CHECK_ERR(tfc_token_file_write_shard("/nonexistent/dir/x.bin", back, 1, TFC_TOKENS_U16), TFC_ERR_IO,
              "/nonexistent/dir/x.bin");
    /* the refused writes left the last good file as it was */
    b = t_slurp(p, &len);
    CHECK(len == 1024 + 24 && le32(b + 1024 + 4) == 128255);
    free(b);
    const char *names[] = {"w.bin"};
    remove_dir(names, 1);
}

TFC_TEST_MAIN
