/*
 * safetensors and token files: round trips, byte-level layout checked by
 * hand, and every malformed-header case the reader must refuse.
 */
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/safetensors_impl.h"
#include "tfc_test.h"
#include "tfc_test_util.h"

static char *tmp_path(void) {
    static char p[64];
    snprintf(p, sizeof p, "/tmp/tfc_test_st_XXXXXX");
    int fd = mkstemp(p);
    CHECK(fd >= 0);
    close(fd);
    return p;
}

TEST(round_trip_every_dtype_with_metadata) {
    const tfc_dtype dts[8] = {TFC_DTYPE_F32, TFC_DTYPE_F64, TFC_DTYPE_BF16, TFC_DTYPE_F16,
                              TFC_DTYPE_I32, TFC_DTYPE_I64, TFC_DTYPE_U8,   TFC_DTYPE_BOOL};
    const char *names[9] = {"f32", "f64", "bf16", "f16", "i32", "i64", "u8", "bool", "strided"};
    tfc_tensor *ts[9];
    const int64_t d[2] = {3, 5};
    for (int i = 0; i < 8; i++) {
        tfc_tensor *a;
        CHECK_OK(tfc_tensor_arange(0, 15, 1, TFC_DTYPE_F64, &a));
        tfc_tensor *r, *c;
        CHECK_OK(tfc_reshape(NULL, a, d, 2, &r));
        CHECK_OK(tfc_cast(NULL, r, dts[i], &c));
        ts[i] = c;
        tfc_tensor_release(a);
        tfc_tensor_release(r);
    }
    CHECK_OK(tfc_transpose(NULL, ts[0], 0, 1, &ts[8])); /* a non-contiguous view is written row-major */
    const char *k[2] = {"format", "quote\"and\\slash\n"}, *v[2] = {"pt", "ünïcödé \t tab"};
    char *path = tmp_path();
    CHECK_OK(tfc_safetensors_save(path, names, ts, 9, k, v, 2));
    /* layout by hand: header length, padding, alignment order */
    size_t len;
    unsigned char *raw = t_slurp(path, &len);
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)raw[i] << (8 * i);
    CHECK(hlen % 8 == 0 && 8 + hlen <= len);
    CHECK(raw[8] == '{' && raw[8 + hlen - 1] == ' ' ? 1 : raw[8 + hlen - 1] == '}');
    char *hdr = strndup((const char *)raw + 8, hlen);
    /* 8-byte dtypes come first (f64 then i64 by name), then 4-byte: f32, i32, strided */
    CHECK(strstr(hdr, "\"f64\":{\"dtype\":\"F64\",\"shape\":[3,5],\"data_offsets\":[0,120]}") != NULL);
    CHECK(strstr(hdr, "\"i64\":{\"dtype\":\"I64\",\"shape\":[3,5],\"data_offsets\":[120,240]}") != NULL);
    CHECK(strstr(hdr, "\"f32\":{\"dtype\":\"F32\",\"shape\":[3,5],\"data_offsets\":[240,300]}") != NULL);
    CHECK(strstr(hdr, "\"strided\":{\"dtype\":\"F32\",\"shape\":[5,3]") != NULL);
    CHECK(strstr(hdr, "\"bool\":{\"dtype\":\"BOOL\"") != NULL);
    CHECK(strstr(hdr, "\"quote\\\"and\\\\slash\\u000a\":\"ünïcödé \\u0009 tab\"") != NULL);
    free(hdr);
    /* f64 data at offset 0 of the data section: 0, 1, 2, ... */
    double first[3];
    memcpy(first, raw + 8 + hlen, sizeof first);
    CHECK(first[0] == 0 && first[1] == 1 && first[2] == 2);
    free(raw);

    tfc_safetensors *f;
    CHECK_OK(tfc_safetensors_load(path, &f));
    CHECK(tfc_safetensors_count(f) == 9);
    CHECK(tfc_safetensors_metadata_count(f) == 2);
    const char *val, *key;
    CHECK_OK(tfc_safetensors_metadata(f, "quote\"and\\slash\n", &val));
    CHECK(val && strcmp(val, "ünïcödé \t tab") == 0);
    CHECK_OK(tfc_safetensors_metadata(f, "absent", &val));
    CHECK(val == NULL);
    CHECK_OK(tfc_safetensors_metadata_at(f, 0, &key, &val));
    CHECK(strcmp(key, "format") == 0 && strcmp(val, "pt") == 0);
    for (int i = 0; i < 9; i++) {
        tfc_tensor *t;
        CHECK_OK(tfc_safetensors_find(f, names[i], &t));
        CHECK(tfc_tensor_dtype(t) == tfc_tensor_dtype(ts[i]));
        CHECK(tfc_tensor_dim(t, 0) == tfc_tensor_dim(ts[i], 0) && tfc_tensor_dim(t, 1) == tfc_tensor_dim(ts[i], 1));
        unsigned char a[120], b[120];
        size_t nb = (size_t)15 * tfc_dtype_size(tfc_tensor_dtype(t));
        CHECK_OK(tfc_tensor_copy_to_host(t, a, sizeof a));
        CHECK_OK(tfc_tensor_copy_to_host(ts[i], b, sizeof b));
        CHECK(memcmp(a, b, nb) == 0);
        tfc_tensor_release(t);
    }
    const char *nm;
    tfc_tensor *t0;
    CHECK_OK(tfc_safetensors_get(f, 0, &nm, &t0));
    CHECK(strcmp(nm, "f64") == 0);
    tfc_tensor_release(t0);
    CHECK_ERR(tfc_safetensors_get(f, 9, &nm, NULL), TFC_ERR_INVALID_ARG, "i is 9");
    CHECK_ERR(tfc_safetensors_find(f, "nope", &t0), TFC_ERR_INVALID_ARG, "no tensor named 'nope'");
    tfc_safetensors_release(f);

    /* writer argument errors: nothing written over the good file */
    const char *dup[2] = {"a", "a"};
    tfc_tensor *two[2] = {ts[0], ts[1]};
    CHECK_ERR(tfc_safetensors_save(path, dup, two, 2, NULL, NULL, 0), TFC_ERR_INVALID_ARG, "'a' appears twice");
    const char *meta[1] = {"__metadata__"};
    CHECK_ERR(tfc_safetensors_save(path, meta, two, 1, NULL, NULL, 0), TFC_ERR_INVALID_ARG, "reserved name");
    CHECK_ERR(tfc_safetensors_save("/nonexistent/dir/x.safetensors", names, ts, 1, NULL, NULL, 0), TFC_ERR_IO,
              "/nonexistent/dir/x.safetensors");
    CHECK_OK(tfc_safetensors_load(path, &f));
    CHECK(tfc_safetensors_count(f) == 9);
    tfc_safetensors_release(f);
    /* an empty file with no tensors is valid */
    CHECK_OK(tfc_safetensors_save(path, NULL, NULL, 0, NULL, NULL, 0));
    CHECK_OK(tfc_safetensors_load(path, &f));
    CHECK(tfc_safetensors_count(f) == 0);
    tfc_safetensors_release(f);
    for (int i = 0; i < 9; i++) tfc_tensor_release(ts[i]);
    unlink(path);
}

/* A file image: 8-byte length of hdr, hdr, then ndata zero bytes. */
static tfc_status load_image(const char *hdr, size_t ndata) {
    size_t hl = strlen(hdr), len = 8 + hl + ndata;
    unsigned char *b = calloc(len, 1);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(b + 8, hdr, hl);
    tfc_safetensors *f = NULL;
    tfc_status s = tfc_safetensors_load_buffer(b, len, &f);
    tfc_safetensors_release(f);
    free(b);
    return s;
}

TEST(malformed_files_are_refused) {
    CHECK_OK(load_image("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8));
    CHECK_OK(load_image("{}", 0));
    CHECK_OK(load_image("{\"s\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[0,8]}, \"__metadata__\":{}}  ", 8));
    static const struct {
        const char *hdr;
        size_t ndata;
        const char *msg;
    } bad[] = {
        {"{\"a\":{\"dtype\":\"F8_E4M3\",\"shape\":[2],\"data_offsets\":[0,2]}}", 2,
         "unknown or unsupported dtype 'F8_E4M3'"},
        {"{\"a\":{\"dtype\":\"I16\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4, "dtype 'I16'"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8,
         "(12 bytes) but data_offsets [0, 8] hold 8"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
         12, "overlaps"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
         12, "gap"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, "gap"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 12,
         "12 data bytes but the tensors cover 8"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, "past the 4 data bytes"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8, "end before they begin"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, "non-negative integer"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2.5],\"data_offsets\":[0,8]}}", 8, "expected an integer"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", 8, "two entries"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, "lacks data_offsets"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":1}}", 8, "unknown or repeated key 'x'"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,8]}}",
         8, "'a' appears twice"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],\"data_offsets\":[0,8]}}", 8,
         "overflows"},
        {"{\"__metadata__\":{\"k\":1}}", 0, "__metadata__ values must be strings"},
        {"{\"__metadata__\":[]}", 0, "__metadata__ must be an object"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}", 8, "expected '}'"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}} x", 8, "trailing bytes"},
        {"[1,2]", 0, "must be a JSON object"},
        {"{\"a\\q\":{}}", 0, "bad escape"},
        {"{\"a\\ud800\":{}}", 0, "unpaired surrogate"},
        {"{\"a", 0, "unterminated string"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1,2,3,4,5,6,7,8,9],\"data_offsets\":[0,8]}}", 8, "array too long"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tfc_clear_error();
        tfc_status s = load_image(bad[i].hdr, bad[i].ndata);
        tfc_test_checks++;
        if (s != TFC_ERR_FORMAT || !strstr(tfc_last_error(), bad[i].msg))
            TFC_FAIL_AT("case %zu: %s -> %s '%s', wanted '%s'", i, bad[i].hdr, tfc_status_name(s), tfc_last_error(),
                        bad[i].msg);
    }
    /* header length fields that lie */
    unsigned char b[16] = {0};
    tfc_safetensors *f = NULL;
    CHECK_ERR(tfc_safetensors_load_buffer(b, 7, &f), TFC_ERR_FORMAT, "too short");
    b[0] = 9; /* 9-byte header in a 16-byte file */
    CHECK_ERR(tfc_safetensors_load_buffer(b, 16, &f), TFC_ERR_FORMAT, "runs past the end");
    memset(b, 0, 8);
    b[4] = 1; /* 2^32 */
    CHECK_ERR(tfc_safetensors_load_buffer(b, 16, &f), TFC_ERR_FORMAT, "exceeds the limit");
    CHECK(f == NULL);
    CHECK_ERR(tfc_safetensors_load("/nonexistent/file.safetensors", &f), TFC_ERR_IO, "/nonexistent/file.safetensors");
    /* a truncated real file names the path */
    char *path = tmp_path();
    FILE *fp = fopen(path, "wb");
    const char hdr[] = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    unsigned char len8[8] = {(unsigned char)(sizeof hdr - 1)};
    fwrite(len8, 1, 8, fp);
    fwrite(hdr, 1, sizeof hdr - 1, fp);
    fwrite("1234", 1, 4, fp);
    fclose(fp);
    CHECK_ERR(tfc_safetensors_load(path, &f), TFC_ERR_FORMAT, path);
    unlink(path);
}

/* VmRSS of this process in MiB (/proc/self/status); -1 when unreadable. */
static double rss_mb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    double v = -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0) v = atof(line + 6) / 1024.0;
    fclose(f);
    return v;
}

static double sum_f32(const tfc_tensor *t) {
    const float *v = tfc_tensor_data(t);
    double s = 0;
    for (int64_t i = 0; i < tfc_tensor_numel(t); i++) s += v[i];
    return s;
}

TEST(a_loaded_file_is_a_read_only_mapping_given_back_page_by_page) {
    /* "big": 16 MiB of f32, element i = i % 1000; its sum by hand: 4096 full cycles plus 0..303 */
    const int64_t n = (int64_t)4 << 20, dims[1] = {n};
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = (float)(i % 1000);
    const double want = 4194.0 * 499500.0 + 303.0 * 304.0 / 2.0;
    tfc_tensor *big = NULL, *t = NULL;
    CHECK_OK(tfc_tensor_from_data(v, dims, 1, TFC_DTYPE_F32, &big));
    free(v);
    const char *names[1] = {"big"};
    char *path = tmp_path();
    CHECK_OK(tfc_safetensors_save(path, names, &big, 1, NULL, NULL, 0));
    tfc_tensor_release(big);
    tfc_safetensors *f = NULL;
    CHECK_OK(tfc_safetensors_load(path, &f));
    CHECK_OK(tfc_safetensors_find(f, "big", &t));
    tfc_safetensors_release(f); /* the tensor keeps the mapping */
    CHECK(tfc_tensor_is_read_only(t));
    CHECK_ERR(tfc_tensor_fill(t, 1.0), TFC_ERR_INVALID_ARG, "read-only");
    tfc_tensor *w = NULL;
    CHECK_OK(tfc_tensor_clone(t, &w));
    CHECK(!tfc_tensor_is_read_only(w));
    CHECK_OK(tfc_tensor_fill(w, 1.0));
    tfc_tensor_release(w);
    /* touched, the pages count in RSS; given back, they leave it; touched again, they read back from the file */
    CHECK(sum_f32(t) == want);
    const double touched = rss_mb();
    tfc_safetensors_done(NULL, t, 0, (uint64_t)n * 4);
    const double given_back = rss_mb();
    if (!(touched - given_back >= 15.0))
        TFC_FAIL_AT("VmRSS %.1f MiB with the 16 MiB tensor touched, %.1f after giving it back", touched, given_back);
    CHECK(sum_f32(t) == want);
    /* a span outside the mapping, or a tensor that is no view of one, is left alone */
    tfc_safetensors_done(NULL, t, (uint64_t)n * 4, (uint64_t)n * 8);
    tfc_tensor *own = NULL;
    CHECK_OK(tfc_tensor_ones(dims, 1, TFC_DTYPE_F32, &own));
    tfc_safetensors_done(NULL, own, 0, (uint64_t)n * 4);
    CHECK(sum_f32(own) == (double)n);
    tfc_tensor_release(own);
    tfc_tensor_release(t);
    unlink(path);

    /* a header of 54 bytes puts the data at byte 62: not aligned for f32, so the tensor is a (read-only) copy */
    const char hdr[] = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    CHECK(sizeof hdr - 1 == 54);
    const float ab[2] = {1.5f, -2.25f};
    FILE *fp = fopen(path, "wb");
    const unsigned char len8[8] = {54};
    CHECK(fwrite(len8, 1, 8, fp) == 8 && fwrite(hdr, 1, 54, fp) == 54 && fwrite(ab, 4, 2, fp) == 2);
    fclose(fp);
    CHECK_OK(tfc_safetensors_load(path, &f));
    CHECK_OK(tfc_safetensors_find(f, "a", &t));
    CHECK(((uintptr_t)tfc_tensor_data(t)) % 4 == 0 && tfc_tensor_is_read_only(t));
    CHECK(((const float *)tfc_tensor_data(t))[0] == 1.5f && ((const float *)tfc_tensor_data(t))[1] == -2.25f);
    tfc_safetensors_done(NULL, t, 0, 8);
    tfc_tensor_release(t);
    tfc_safetensors_release(f);
    unlink(path);
    /* only regular files are mapped */
    CHECK_ERR(tfc_safetensors_load("/tmp", &f), TFC_ERR_IO, "'/tmp': it is a directory");
}

TEST(token_file_round_trip_batches_and_errors) {
    char *path = tmp_path();
    int32_t ids[300];
    for (int i = 0; i < 300; i++) ids[i] = (i * 37) % 70000;
    CHECK_OK(tfc_token_file_write(path, ids, 300, 70000)); /* > 65536: u32 */
    struct stat st;
    CHECK(stat(path, &st) == 0 && st.st_size == 32 + 300 * 4);
    tfc_token_file *f;
    CHECK_OK(tfc_token_file_open(path, &f));
    CHECK(tfc_token_file_count(f) == 300 && tfc_token_file_vocab_size(f) == 70000);
    int32_t back[300];
    CHECK_OK(tfc_token_file_read(f, 0, 300, back));
    CHECK(memcmp(back, ids, sizeof ids) == 0);
    CHECK_ERR(tfc_token_file_read(f, 290, 11, back), TFC_ERR_INVALID_ARG, "outside the file's 300 tokens");
    tfc_token_file_close(f);

    for (int i = 0; i < 300; i++) ids[i] = i % 65;
    CHECK_OK(tfc_token_file_write(path, ids, 300, 65)); /* u16 */
    CHECK(stat(path, &st) == 0 && st.st_size == 32 + 300 * 2);
    CHECK_OK(tfc_token_file_open(path, &f));
    tfc_tensor *x, *y, *x2, *y2;
    CHECK_OK(tfc_token_file_batch(f, 100, 200, 4, 8, 3, 5, &x, &y));
    CHECK_OK(tfc_token_file_batch(f, 100, 200, 4, 8, 3, 5, &x2, &y2));
    const int32_t *xv = tfc_tensor_data(x), *yv = tfc_tensor_data(y);
    CHECK(memcmp(xv, tfc_tensor_data(x2), 32 * 4) == 0);
    for (int b = 0; b < 4; b++) {
        /* a window of ids[i] = i % 65 starting inside [100, 200 - 9] */
        int32_t s0 = xv[b * 8];
        for (int t = 0; t < 8; t++) {
            CHECK(xv[b * 8 + t] == (s0 + t) % 65);
            CHECK(yv[b * 8 + t] == (s0 + t + 1) % 65);
        }
        CHECK(s0 >= 100 % 65 || s0 <= (200 - 9) % 65);
    }
    tfc_tensor *x3, *y3;
    CHECK_OK(tfc_token_file_batch(f, 100, 200, 4, 8, 3, 6, &x3, &y3));
    CHECK(memcmp(xv, tfc_tensor_data(x3), 32 * 4) != 0); /* another step, another batch */
    /* offsets cover the whole range: over many steps the first and last windows appear */
    int seen_first = 0, seen_last = 0;
    for (uint64_t step = 0; step < 400; step++) {
        tfc_tensor *a, *c;
        CHECK_OK(tfc_token_file_batch(f, 0, 12, 1, 8, 1, step, &a, &c));
        int32_t s0 = ((const int32_t *)tfc_tensor_data(a))[0];
        CHECK(s0 >= 0 && s0 <= 3);
        seen_first |= s0 == 0;
        seen_last |= s0 == 3;
        tfc_tensor_release(a);
        tfc_tensor_release(c);
    }
    CHECK(seen_first && seen_last);
    CHECK_ERR(tfc_token_file_batch(f, 0, 8, 1, 8, 1, 0, &x3, &y3), TFC_ERR_INVALID_ARG, "T+1 = 9");
    CHECK_ERR(tfc_token_file_batch(f, 0, 301, 1, 8, 1, 0, &x3, &y3), TFC_ERR_INVALID_ARG, "300-token file");
    CHECK_ERR(tfc_token_file_batch(f, 0, 100, 0, 8, 1, 0, &x3, &y3), TFC_ERR_INVALID_ARG, "B is 0");
    tfc_tensor *all[] = {x, y, x2, y2, x3, y3};
    for (int i = 0; i < 6; i++) tfc_tensor_release(all[i]);
    tfc_token_file_close(f);

    int32_t badid[2] = {1, 65};
    CHECK_ERR(tfc_token_file_write(path, badid, 2, 65), TFC_ERR_INVALID_ARG, "ids[1] is 65");
    /* corrupt files */
    FILE *fp = fopen(path, "r+b");
    fwrite("XXXX", 1, 4, fp);
    fclose(fp);
    CHECK_ERR(tfc_token_file_open(path, &f), TFC_ERR_FORMAT, "bad magic");
    CHECK_OK(tfc_token_file_write(path, ids, 10, 65));
    CHECK(truncate(path, 32 + 19) == 0);
    CHECK_ERR(tfc_token_file_open(path, &f), TFC_ERR_FORMAT, "claims 10 tokens");
    CHECK_OK(tfc_token_file_write(path, ids, 10, 65));
    fp = fopen(path, "r+b");
    fseek(fp, 8, SEEK_SET);
    fputc(9, fp);
    fclose(fp);
    CHECK_ERR(tfc_token_file_open(path, &f), TFC_ERR_VERSION, "version 9");
    CHECK_ERR(tfc_token_file_open("/nonexistent/tokens.bin", &f), TFC_ERR_IO, "/nonexistent/tokens.bin");
    unlink(path);
}

TFC_TEST_MAIN
