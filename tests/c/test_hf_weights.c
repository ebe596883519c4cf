/*
 * Hugging Face weights directories (lib/io/hf_weights.c): single and
 * sharded directories written here byte by byte from the formats'
 * documentation (safetensors: 8-byte little-endian header length, JSON
 * header, data; the index: {"metadata": {"total_size": N}, "weight_map":
 * {tensor: shard}} as transformers' save_pretrained writes it), every
 * refusal with its message, the loader contract naming a shard, and the
 * writer's files read back as bytes: f32, bf16 and f16 against a rounding
 * written here with rint() (round to nearest, ties to even), not the
 * library's bit trick.
 */
#include <dirent.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/hf_weights.h"
#include "tensor/tensor_impl.h"
#include "tfc_test.h"
#include "tfc_test_util.h"

static char dir_[64];

static const char *new_dir(void) {
    snprintf(dir_, sizeof dir_, "/tmp/tfc_test_hf_XXXXXX");
    CHECK(mkdtemp(dir_) != NULL);
    return dir_;
}

/* dir/name (a ring of 8 buffers). */
static const char *at(const char *name) {
    static char ring[8][sizeof dir_ + 256];
    static int next;
    char *p = ring[next++ % 8];
    snprintf(p, sizeof ring[0], "%s/%.255s", dir_, name);
    return p;
}

static void put(const char *name, const void *data, size_t len) {
    FILE *f = fopen(at(name), "wb");
    CHECK(f != NULL);
    if (!f) return;
    CHECK(fwrite(data, 1, len, f) == len);
    fclose(f);
}

static void put_text(const char *name, const char *text) { put(name, text, strlen(text)); }

/* A safetensors file by hand: u64 LE header length, the header, the data. */
static void put_st(const char *name, const char *hdr, const void *data, size_t n) {
    const size_t hl = strlen(hdr);
    unsigned char *b = malloc(8 + hl + n);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(b + 8, hdr, hl);
    if (n) memcpy(b + 8 + hl, data, n);
    put(name, b, 8 + hl + n);
    free(b);
}

static void clear_dir(void) {
    DIR *d = opendir(dir_);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        const char *p = at(e->d_name);
        if (unlink(p) != 0) rmdir(p);
    }
    closedir(d);
}

static void remove_dir(void) {
    clear_dir();
    rmdir(dir_);
}

static int exists(const char *name) {
    struct stat st;
    return stat(at(name), &st) == 0;
}

#define SHARD1 "model-00001-of-00002.safetensors"
#define SHARD2 "model-00002-of-00002.safetensors"
#define INDEX "model.safetensors.index.json"

/* Shard 1: a F32 [2,3] = 0..5, c BF16 [2] = {1, -2}; shard 2: b F16 [4] = {1, 0.5, -1.5, 2}. */
static void put_shards(void) {
    unsigned char d1[28];
    for (int i = 0; i < 6; i++) {
        const float v = (float)i;
        memcpy(d1 + 4 * i, &v, 4);
    }
    const unsigned char c[4] = {0x80, 0x3F, 0x00, 0xC0}; /* bf16 1.0 = 0x3F80, -2.0 = 0xC000, little-endian */
    memcpy(d1 + 24, c, 4);
    put_st(SHARD1,
           "{\"__metadata__\":{\"format\":\"pt\"},\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
           "\"c\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[24,28]}}",
           d1, sizeof d1);
    const unsigned char d2[8] = {0x00, 0x3C, 0x00, 0x38, 0x00, 0xBE, 0x00, 0x40}; /* f16 1, 0.5, -1.5, 2 */
    put_st(SHARD2, "{\"b\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[0,8]}}", d2, sizeof d2);
}

static const char *good_index = "{\"metadata\": {\"total_size\": 40}, \"weight_map\": {\"a\": \"" SHARD1
                                "\", \"b\": \"" SHARD2 "\", \"c\": \"" SHARD1 "\"}}";

/* A contract for a [2,3], b [4], c [2] into new f32 destinations dest[3]. */
static tfc_contract *abc_contract(const char *file, tfc_tensor **dest, int64_t b_len) {
    tfc_contract *c = NULL;
    CHECK_OK(tfc_contract_new("test_fn", file, "the test model", &c));
    const char *names[3] = {"a", "b", "c"};
    const int64_t dims[3][2] = {{2, 3}, {b_len, 0}, {2, 0}};
    for (int i = 0; i < 3; i++) {
        const int32_t nd = i == 0 ? 2 : 1;
        CHECK_OK(tfc_tensor_zeros(dims[i], nd, TFC_DTYPE_F32, &dest[i]));
        tfc_want w = TFC_WANT_INIT;
        w.name = names[i];
        w.ndim = nd;
        memcpy(w.dims, dims[i], sizeof dims[i]);
        w.dtypes = TFC_DTYPES_FLOAT;
        w.dest = dest[i];
        CHECK_OK(tfc_contract_want(c, &w));
    }
    return c;
}

static void release3(tfc_tensor **t) {
    for (int i = 0; i < 3; i++) tfc_tensor_release(t[i]);
}

static int values_are(const tfc_tensor *t, const double *want, int n) {
    double *v = t_vals(t);
    int ok = 1;
    for (int i = 0; i < n; i++) ok &= v[i] == want[i];
    free(v);
    return ok;
}

static void check_abc(tfc_tensor **dest) {
    const double a[6] = {0, 1, 2, 3, 4, 5}, b[4] = {1, 0.5, -1.5, 2}, c[2] = {1, -2};
    CHECK(values_are(dest[0], a, 6));
    CHECK(values_are(dest[1], b, 4));
    CHECK(values_are(dest[2], c, 2));
}

TEST(a_sharded_directory_written_by_hand_loads) {
    new_dir();
    put_shards();
    put_text(INDEX, good_index);
    tfc_hf_weights *w = NULL;
    CHECK_OK(tfc_hf_weights_open("test_fn", dir_, &w));
    CHECK(tfc_hf_weights_sharded(w) == 1);
    CHECK(strcmp(tfc_hf_weights_path(w), at(INDEX)) == 0);
    CHECK(tfc_hf_weights_file_count(w) == 2);
    CHECK(strcmp(tfc_hf_weights_file(w, 0), at(SHARD1)) == 0 && strcmp(tfc_hf_weights_file(w, 1), at(SHARD2)) == 0);
    CHECK(tfc_hf_weights_file(w, 2) == NULL && tfc_hf_weights_shard(w, -1) == NULL);
    CHECK(tfc_safetensors_count(tfc_hf_weights_shard(w, 0)) == 2);
    CHECK(tfc_hf_weights_count(w) == 3 && tfc_hf_weights_numel(w) == 12);
    CHECK(tfc_hf_weights_metadata(w, "format") && strcmp(tfc_hf_weights_metadata(w, "format"), "pt") == 0);
    CHECK(tfc_hf_weights_metadata(w, "absent") == NULL);
    tfc_tensor *dest[3];
    tfc_contract *c = abc_contract(tfc_hf_weights_path(w), dest, 4);
    CHECK_OK(tfc_contract_hold_hf_weights(c, w));
    tfc_hf_weights_free(w); /* held values keep their mappings */
    CHECK(c->n_held == 3);
    CHECK(c->held[0].file && strcmp(c->held[0].file, at(SHARD1)) == 0);
    CHECK(c->held[2].file && strcmp(c->held[2].file, at(SHARD2)) == 0);
    CHECK(c->held[0].done != NULL);
    CHECK(tfc_tensor_is_read_only(c->held[0].values));
    CHECK_OK(tfc_contract_load(c));
    check_abc(dest);
    tfc_contract_free(c);
    release3(dest);
    remove_dir();
}

TEST(a_fault_names_the_shard_that_holds_the_tensor) {
    new_dir();
    put_shards();
    put_text(INDEX, good_index);
    tfc_hf_weights *w = NULL;
    CHECK_OK(tfc_hf_weights_open("test_fn", dir_, &w));
    tfc_tensor *dest[3];
    char want[512];
    /* a wrong shape: the shard of b */
    tfc_contract *c = abc_contract(tfc_hf_weights_path(w), dest, 5);
    CHECK_OK(tfc_contract_hold_hf_weights(c, w));
    snprintf(want, sizeof want, "test_fn: '%s' holds b as [4], the test model needs [5]", at(SHARD2));
    CHECK_ERR(tfc_contract_check(c), TFC_ERR_FORMAT, want);
    tfc_contract_free(c);
    release3(dest);
    /* a tensor nobody wants: its shard; a wanted tensor no shard has: the index */
    c = abc_contract(tfc_hf_weights_path(w), dest, 4);
    tfc_want extra = TFC_WANT_INIT;
    extra.name = "d";
    extra.ndim = -1;
    CHECK_OK(tfc_contract_want(c, &extra));
    CHECK_OK(tfc_contract_hold_hf_weights(c, w));
    snprintf(want, sizeof want, "test_fn: '%s' has no tensor 'd'", at(INDEX));
    CHECK_ERR(tfc_contract_check(c), TFC_ERR_FORMAT, want);
    tfc_contract_free(c);
    c = NULL;
    CHECK_OK(tfc_contract_new("test_fn", tfc_hf_weights_path(w), "the test model", &c));
    CHECK_OK(tfc_contract_hold_hf_weights(c, w));
    snprintf(want, sizeof want, "test_fn: '%s' holds a tensor 'a' that the test model does not have", at(SHARD1));
    CHECK_ERR(tfc_contract_check(c), TFC_ERR_FORMAT, want);
    tfc_contract_free(c);
    release3(dest);
    tfc_hf_weights_free(w);
    remove_dir();
}

TEST(model_safetensors_alone_or_beside_an_index_is_one_file) {
    new_dir();
    put_shards();
    /* the three tensors in one file, f32 a first, then bf16 c, then f16 b (sorted by alignment as writers do) */
    unsigned char d[40];
    for (int i = 0; i < 6; i++) {
        const float v = (float)i;
        memcpy(d + 4 * i, &v, 4);
    }
    const unsigned char hb[8] = {0x00, 0x3C, 0x00, 0x38, 0x00, 0xBE, 0x00, 0x40}, hc[4] = {0x80, 0x3F, 0x00, 0xC0};
    memcpy(d + 24, hb, 8);
    memcpy(d + 32, hc, 4);
    put_st("model.safetensors",
           "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
           "\"b\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[24,32]},"
           "\"c\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[32,36]}}",
           d, 36);
    put_text(INDEX, "{ not json"); /* transformers reads model.safetensors first: the index is never opened */
    tfc_hf_weights *w = NULL;
    CHECK_OK(tfc_hf_weights_open("test_fn", dir_, &w));
    CHECK(tfc_hf_weights_sharded(w) == 0 && tfc_hf_weights_file_count(w) == 1);
    CHECK(strcmp(tfc_hf_weights_path(w), at("model.safetensors")) == 0);
    tfc_tensor *dest[3];
    tfc_contract *c = abc_contract(tfc_hf_weights_path(w), dest, 4);
    CHECK_OK(tfc_contract_hold_hf_weights(c, w));
    CHECK(c->held[0].file == NULL); /* one file: faults name the contract's, as they always did */
    CHECK_OK(tfc_contract_load(c));
    check_abc(dest);
    tfc_contract_free(c);
    release3(dest);
    tfc_hf_weights_free(w);
    remove_dir();
}

/* The index `index` over the two good shards (plus what the case adds) must be refused with status and fragments. */
static void refused(const char *index, tfc_status status, const char *frag1, const char *frag2) {
    put_text(INDEX, index);
    tfc_hf_weights *w = NULL;
    tfc_clear_error();
    tfc_status s = tfc_hf_weights_open("test_fn", dir_, &w);
    CHECK(s == status && w == NULL);
    const char *m = tfc_last_error();
    if (s != status || strncmp(m, "test_fn: ", 9) != 0 || !strstr(m, frag1) || (frag2 && !strstr(m, frag2)))
        TFC_FAIL_AT("index %s -> %s '%s', wanted %s with '%s' and '%s'", index, tfc_status_name(s), m,
                    tfc_status_name(status), frag1, frag2 ? frag2 : "");
    tfc_hf_weights_free(w);
}

TEST(every_inconsistent_directory_is_refused_naming_file_and_tensor) {
    new_dir();
    tfc_hf_weights *w = NULL;
    CHECK_ERR(tfc_hf_weights_open("test_fn", dir_, &w), TFC_ERR_IO, "has neither model.safetensors nor");
    put_shards();
    char m1[512], m2[512];
    /* a missing shard */
    snprintf(m1, sizeof m1, "cannot open '%s', the shard '%s' maps tensor 'b' to",
             at("model-00003-of-00003.safetensors"), at(INDEX));
    refused("{\"weight_map\": {\"a\": \"" SHARD1 "\", \"b\": \"model-00003-of-00003.safetensors\", \"c\": \"" SHARD1
            "\"}}",
            TFC_ERR_IO, m1, "No such file");
    /* the index names a tensor its shard does not have */
    snprintf(m1, sizeof m1, "'%s' maps tensor 'd' to '" SHARD1 "', which does not hold it", at(INDEX));
    refused("{\"weight_map\": {\"a\": \"" SHARD1 "\", \"b\": \"" SHARD2 "\", \"c\": \"" SHARD1 "\", \"d\": \"" SHARD1
            "\"}}",
            TFC_ERR_FORMAT, m1, NULL);
    /* a shard holds a tensor the index does not list */
    snprintf(m1, sizeof m1, "'%s' holds tensor 'c', which '%s' does not list", at(SHARD1), at(INDEX));
    refused("{\"weight_map\": {\"a\": \"" SHARD1 "\", \"b\": \"" SHARD2 "\"}}", TFC_ERR_FORMAT, m1, NULL);
    /* ... or lists under another shard */
    snprintf(m1, sizeof m1, "'%s' holds tensor 'c', which '%s' maps to '" SHARD2 "'", at(SHARD1), at(INDEX));
    refused("{\"weight_map\": {\"a\": \"" SHARD1 "\", \"b\": \"" SHARD2 "\", \"c\": \"" SHARD2 "\"}}", TFC_ERR_FORMAT,
            m1, NULL);
    /* a tensor in two shards */
    const unsigned char d2[12] = {0x00, 0x3C, 0x00, 0x38, 0x00, 0xBE, 0x00, 0x40, 0x80, 0x3F, 0x00, 0xC0};
    put_st(SHARD2,
           "{\"b\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[0,8]},"
           "\"c\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[8,12]}}",
           d2, sizeof d2);
    snprintf(m1, sizeof m1, "tensor 'c' is in two shards, '%s' and '%s'", at(SHARD1), at(SHARD2));
    refused(good_index, TFC_ERR_FORMAT, m1, NULL);
    put_shards();
    /* a shard that is no safetensors file: the reader's own words, then whose shard it is */
    put(SHARD2, "12345", 5);
    snprintf(m2, sizeof m2, "(a shard of '%s')", at(INDEX));
    refused(good_index, TFC_ERR_FORMAT, "too short", m2);
    put_shards();
    /* shard names that are not files of this directory */
    refused("{\"weight_map\": {\"a\": \"../model-00001-of-00002.safetensors\"}}", TFC_ERR_FORMAT,
            "weight_map maps tensor 'a' to '../model-00001-of-00002.safetensors', which has a '/'", NULL);
    refused("{\"weight_map\": {\"a\": \"sub/x.safetensors\"}}", TFC_ERR_FORMAT, "which has a '/'", "tensor 'a'");
    refused("{\"weight_map\": {\"a\": \"..x.safetensors\"}}", TFC_ERR_FORMAT, "which has '..'", "tensor 'a'");
    refused("{\"weight_map\": {\"a\": \"pytorch_model-00001-of-00002.bin\"}}", TFC_ERR_FORMAT,
            "which does not end in .safetensors", "tensor 'a'");
    refused("{\"weight_map\": {\"a\": \".safetensors\"}}", TFC_ERR_FORMAT, "which does not end in .safetensors", NULL);
    /* malformed indexes */
    snprintf(m1, sizeof m1, "'%s' is not a JSON object", at(INDEX));
    refused("[\"" SHARD1 "\"]", TFC_ERR_FORMAT, m1, NULL);
    refused("{\"weight_map\": {\"a\": \"" SHARD1 "\"", TFC_ERR_FORMAT, "malformed model.safetensors.index.json", INDEX);
    refused("{\"metadata\": {\"total_size\": 40}}", TFC_ERR_FORMAT, "has no \"weight_map\"", INDEX);
    refused("{\"weight_map\": [\"a\"]}", TFC_ERR_FORMAT, "\"weight_map\" is not an object", INDEX);
    refused("{\"weight_map\": {\"a\": 1}}", TFC_ERR_FORMAT, "maps tensor 'a' to a non-string, not a shard file name",
            INDEX);
    refused("{\"weight_map\": {\"a\": null}}", TFC_ERR_FORMAT, "maps tensor 'a' to null", INDEX);
    refused("{\"metadata\": 40, \"weight_map\": {}}", TFC_ERR_FORMAT, "\"metadata\" is not an object", INDEX);
    refused("{\"weight_map\": {\"a\": \"" SHARD1 "\", \"a\": \"" SHARD2 "\"}}", TFC_ERR_FORMAT, "key 'a' appears twice",
            INDEX);
    remove_dir();
}

/* ---- the writer ------------------------------------------------------------------------------ */

/* f32 -> bf16 / f16 bits by arithmetic: the significand scaled to the format's precision and rint()ed (ties to even). */
static uint16_t ref_bf16(float x) {
    if (x == 0) return signbit(x) ? 0x8000 : 0;
    int e;
    const double m = frexp(fabs((double)x), &e); /* |x| = m·2^e, m in [0.5, 1) */
    double q = rint(m * 256);                    /* 8 significant bits */
    if (q == 256) {
        q = 128;
        e++;
    }
    /* normal bf16: exponent e-1 biased by 127, the 7 bits below the leading one */
    return (uint16_t)((signbit(x) ? 0x8000 : 0) | ((unsigned)(e - 1 + 127) << 7) | ((unsigned)q - 128));
}

static uint16_t ref_f16(float x) {
    const unsigned sign = signbit(x) ? 0x8000 : 0;
    const double a = fabs((double)x);
    if (a < ldexp(1, -14)) return (uint16_t)(sign | (unsigned)rint(a / ldexp(1, -24))); /* subnormal (or 0, or 2^-14) */
    int e;
    const double m = frexp(a, &e);
    double q = rint(m * 2048); /* 11 significant bits */
    if (q == 2048) {
        q = 1024;
        e++;
    }
    if (e - 1 > 15) return (uint16_t)(sign | 0x7C00); /* past 65504: rounds to infinity */
    return (uint16_t)(sign | ((unsigned)(e - 1 + 15) << 10) | ((unsigned)q - 1024));
}

static tfc_tensor *rand32(const int64_t *dims, int32_t nd, double lo, double hi, uint64_t seed) {
    tfc_tensor *t = NULL;
    CHECK_OK(tfc_tensor_uniform(dims, nd, TFC_DTYPE_F32, lo, hi, seed, 0, &t));
    return t;
}

/* The f32 tensors the writer tests save: A [10,10] 400 B, B [100] 400 B, C [300] 1200 B, D [25] 100 B. */
static void writer_tensors(tfc_tensor **t) {
    const int64_t da[2] = {10, 10}, db[1] = {100}, dc[1] = {300}, dd[1] = {25};
    t[0] = rand32(da, 2, -4, 4, 1);
    t[1] = rand32(db, 1, -4, 4, 2);
    t[2] = rand32(dc, 1, -1e-3, 1e-3, 3);
    /* D: ties and edges, by hand */
    float v[25] = {1.00390625f,            /* 1 + 2^-8: bf16 tie between 1 and 1 + 2^-7 -> 1 (even) */
                   1.01171875f,            /* 1 + 3·2^-8: tie -> 1 + 2^-6 (even) */
                   -1.00390625f,           /* sign kept */
                   1.00390625f + 0x1p-20f, /* above the tie -> up */
                   1.00048828125f,         /* 1 + 2^-11: f16 tie -> 1 */
                   1.00146484375f,         /* 1 + 3·2^-11: f16 tie -> 1 + 2^-9 */
                   0.1f,
                   65504.0f,
                   -2.0f,
                   0.0f,
                   -0.0f,
                   0x1p-24f,
                   0x1p-25f,
                   3.0e-5f,
                   65519.0f,
                   1e-8f,
                   300.0f,
                   -7.75f,
                   1.5f,
                   2.5f,
                   0.333333f,
                   1e30f,
                   -1e-30f,
                   6.1e-5f,
                   123.456f};
    t[3] = NULL;
    CHECK_OK(tfc_tensor_from_data(v, dd, 1, TFC_DTYPE_F32, &t[3]));
}

/* The values of t as stored in `dtype`, by the references above, as bytes. */
static void expected_bytes(const tfc_tensor *t, tfc_dtype dtype, unsigned char *out) {
    const int64_t n = tfc_tensor_numel(t);
    float *f = malloc((size_t)n * sizeof *f);
    CHECK_OK(tfc_tensor_copy_to_host(t, f, (size_t)n * sizeof *f));
    for (int64_t i = 0; i < n; i++) {
        if (dtype == TFC_DTYPE_F32) {
            memcpy(out + 4 * i, &f[i], 4);
            continue;
        }
        const uint16_t h = dtype == TFC_DTYPE_BF16 ? ref_bf16(f[i]) : ref_f16(f[i]);
        out[2 * i] = (unsigned char)(h & 0xFF);
        out[2 * i + 1] = (unsigned char)(h >> 8);
    }
    free(f);
}

/* File `name`'s header (malloc'd string) and data (pointer into *raw, malloc'd). */
static char *read_st(const char *name, unsigned char **raw, const unsigned char **data) {
    size_t len = 0;
    *raw = t_slurp(at(name), &len);
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++) hl |= (uint64_t)(*raw)[i] << (8 * i);
    CHECK(8 + hl <= len && hl % 8 == 0);
    *data = *raw + 8 + hl;
    return strndup((const char *)*raw + 8, hl);
}

static const char *dtype_tag(tfc_dtype d) { return d == TFC_DTYPE_F32 ? "F32" : d == TFC_DTYPE_BF16 ? "BF16" : "F16"; }

TEST(sharded_save_follows_transformers_and_reads_back_in_each_dtype) {
    new_dir();
    tfc_tensor *t[4];
    writer_tensors(t);
    const char *names[4] = {"A", "B", "C", "D"};
    const tfc_dtype dts[3] = {TFC_DTYPE_F32, TFC_DTYPE_BF16, TFC_DTYPE_F16};
    for (int k = 0; k < 3; k++) {
        const size_t es = tfc_dtype_size(dts[k]);
        /* at 1000 f32 bytes a shard: {A, B} 800, then C (1200, alone: over the limit by itself), then D */
        const uint64_t max = 1000 * es / 4;
        const char *mk[1] = {"note"}, *mv[1] = {"hi"};
        CHECK_OK(tfc_hf_weights_save("test_fn", dir_, names, t, 4, dts[k], max, mk, mv, 1));
        CHECK(!exists("model.safetensors"));
        CHECK(exists("model-00001-of-00003.safetensors") && exists("model-00002-of-00003.safetensors") &&
              exists("model-00003-of-00003.safetensors"));
        size_t len = 0;
        unsigned char *idx = t_slurp(at(INDEX), &len);
        char want[600];
        snprintf(want, sizeof want,
                 "{\n  \"metadata\": {\n    \"total_size\": %zu\n  },\n  \"weight_map\": {\n"
                 "    \"A\": \"model-00001-of-00003.safetensors\",\n"
                 "    \"B\": \"model-00001-of-00003.safetensors\",\n"
                 "    \"C\": \"model-00002-of-00003.safetensors\",\n"
                 "    \"D\": \"model-00003-of-00003.safetensors\"\n  }\n}\n",
                 525 * es);
        CHECK(len == strlen(want) && memcmp(idx, want, len) == 0);
        free(idx);
        /* shard 1 by hand: A then B (equal alignment: by name), the stored bytes, the metadata */
        unsigned char *raw;
        const unsigned char *data;
        char *hdr = read_st("model-00001-of-00003.safetensors", &raw, &data);
        char frag[200];
        snprintf(frag, sizeof frag, "\"A\":{\"dtype\":\"%s\",\"shape\":[10,10],\"data_offsets\":[0,%zu]}",
                 dtype_tag(dts[k]), 100 * es);
        CHECK(strstr(hdr, frag) != NULL);
        snprintf(frag, sizeof frag, "\"B\":{\"dtype\":\"%s\",\"shape\":[100],\"data_offsets\":[%zu,%zu]}",
                 dtype_tag(dts[k]), 100 * es, 200 * es);
        CHECK(strstr(hdr, frag) != NULL);
        CHECK(strstr(hdr, "\"__metadata__\":{\"note\":\"hi\",\"format\":\"pt\"}") != NULL);
        unsigned char *exp = malloc(300 * 4);
        expected_bytes(t[0], dts[k], exp);
        CHECK(memcmp(data, exp, 100 * es) == 0);
        expected_bytes(t[1], dts[k], exp);
        CHECK(memcmp(data + 100 * es, exp, 100 * es) == 0);
        free(hdr);
        free(raw);
        hdr = read_st("model-00003-of-00003.safetensors", &raw, &data);
        expected_bytes(t[3], dts[k], exp);
        CHECK(memcmp(data, exp, 25 * es) == 0);
        if (dts[k] != TFC_DTYPE_F32) { /* the ties, against hand-derived bits */
            const uint16_t h0 = (uint16_t)(data[0] | data[1] << 8), h1 = (uint16_t)(data[2] | data[3] << 8),
                           h4 = (uint16_t)(data[8] | data[9] << 8), h5 = (uint16_t)(data[10] | data[11] << 8);
            if (dts[k] == TFC_DTYPE_BF16)
                CHECK(h0 == 0x3F80 && h1 == 0x3F82);
            else
                CHECK(h4 == 0x3C00 && h5 == 0x3C02 && (uint16_t)(data[14] | data[15] << 8) == 0x7BFF);
        }
        free(hdr);
        free(raw);
        free(exp);
        /* read back through the reader and a contract into f32: the stored values, widened exactly */
        tfc_hf_weights *w = NULL;
        CHECK_OK(tfc_hf_weights_open("test_fn", dir_, &w));
        CHECK(tfc_hf_weights_sharded(w) && tfc_hf_weights_file_count(w) == 3 && tfc_hf_weights_count(w) == 4);
        tfc_contract *c = NULL;
        CHECK_OK(tfc_contract_new("test_fn", tfc_hf_weights_path(w), "the test", &c));
        tfc_tensor *back[4];
        for (int i = 0; i < 4; i++) {
            CHECK_OK(tfc_tensor_empty(t[i]->shape, t[i]->ndim, TFC_DTYPE_F32, &back[i]));
            tfc_want wt = TFC_WANT_INIT;
            wt.name = names[i];
            wt.ndim = t[i]->ndim;
            memcpy(wt.dims, t[i]->shape, sizeof wt.dims);
            wt.dest = back[i];
            CHECK_OK(tfc_contract_want(c, &wt));
        }
        CHECK_OK(tfc_contract_hold_hf_weights(c, w));
        CHECK_OK(tfc_contract_load(c));
        for (int i = 0; i < 4; i++) {
            const int64_t n = tfc_tensor_numel(t[i]);
            unsigned char *e1 = malloc((size_t)n * 4);
            float *got = malloc((size_t)n * 4);
            expected_bytes(t[i], dts[k], e1);
            CHECK_OK(tfc_tensor_copy_to_host(back[i], got, (size_t)n * 4));
            int ok = 1;
            for (int64_t j = 0; j < n; j++) {
                float want_v;
                if (dts[k] == TFC_DTYPE_F32) {
                    memcpy(&want_v, e1 + 4 * j, 4);
                } else {
                    const uint16_t h = (uint16_t)(e1[2 * j] | e1[2 * j + 1] << 8);
                    /* widening is exact: bf16 is the top half of an f32; f16 by its definition */
                    if (dts[k] == TFC_DTYPE_BF16) {
                        const uint32_t bits = (uint32_t)h << 16;
                        memcpy(&want_v, &bits, 4);
                    } else {
                        const int ex = (h >> 10) & 31, man = h & 1023;
                        const double mag = ex == 0 ? ldexp(man, -24)
                            : ex == 31             ? (man ? NAN : INFINITY)
                                                   : ldexp(1024 + man, ex - 25);
                        want_v = (float)((h & 0x8000) ? -mag : mag);
                    }
                }
                ok &= memcmp(&want_v, &got[j], 4) == 0;
            }
            CHECK(ok);
            free(e1);
            free(got);
            tfc_tensor_release(back[i]);
        }
        tfc_contract_free(c);
        tfc_hf_weights_free(w);
    }
    for (int i = 0; i < 4; i++) tfc_tensor_release(t[i]);
    remove_dir();
}

TEST(single_file_save_and_the_entry_points_it_replaces) {
    new_dir();
    tfc_tensor *t[4];
    writer_tensors(t);
    const char *names[4] = {"A", "B", "C", "D"};
    /* sharded first, then one file over it: the index goes, model.safetensors is the checkpoint */
    CHECK_OK(tfc_hf_weights_save("test_fn", dir_, names, t, 4, TFC_DTYPE_F32, 1000, NULL, NULL, 0));
    CHECK(exists(INDEX));
    CHECK_OK(tfc_hf_weights_save("test_fn", dir_, names, t, 4, TFC_DTYPE_BF16, 0, NULL, NULL, 0));
    CHECK(exists("model.safetensors") && !exists(INDEX));
    unsigned char *raw;
    const unsigned char *data;
    char *hdr = read_st("model.safetensors", &raw, &data);
    CHECK(strstr(hdr, "\"__metadata__\":{\"format\":\"pt\"}") != NULL);
    CHECK(strstr(hdr, "\"D\":{\"dtype\":\"BF16\",\"shape\":[25],\"data_offsets\":[1000,1050]}") != NULL);
    free(hdr);
    free(raw);
    tfc_hf_weights *w = NULL;
    CHECK_OK(tfc_hf_weights_open("test_fn", dir_, &w));
    CHECK(!tfc_hf_weights_sharded(w) && tfc_hf_weights_count(w) == 4);
    tfc_hf_weights_free(w);
    /* a limit every tensor fits in at once is one file too */
    CHECK_OK(tfc_hf_weights_save("test_fn", dir_, names, t, 4, TFC_DTYPE_F32, 2100, NULL, NULL, 0));
    CHECK(exists("model.safetensors") && !exists(INDEX));
    /* sharded over a single file: the single file goes (it would win over the index) */
    CHECK_OK(tfc_hf_weights_save("test_fn", dir_, names, t, 4, TFC_DTYPE_F16, 500, NULL, NULL, 0));
    CHECK(!exists("model.safetensors") && exists(INDEX));
    CHECK_OK(tfc_hf_weights_open("test_fn", dir_, &w));
    CHECK(tfc_hf_weights_sharded(w) && tfc_hf_weights_file_count(w) == 3);
    tfc_hf_weights_free(w);
    for (int i = 0; i < 4; i++) tfc_tensor_release(t[i]);
    remove_dir();
}

TEST(a_failed_sharded_save_leaves_no_checkpoint_that_looks_complete) {
    new_dir();
    tfc_tensor *t[4];
    writer_tensors(t);
    const char *names[4] = {"A", "B", "C", "D"};
    CHECK_OK(tfc_hf_weights_save("test_fn", dir_, names, t, 4, TFC_DTYPE_F32, 1000, NULL, NULL, 0));
    /* the second shard cannot be replaced (a directory stands in its place): the save fails part way */
    CHECK(unlink(at("model-00002-of-00003.safetensors")) == 0);
    CHECK(mkdir(at("model-00002-of-00003.safetensors"), 0700) == 0);
    CHECK(mkdir(at("model-00002-of-00003.safetensors/x"), 0700) == 0);
    CHECK_ERR(tfc_hf_weights_save("test_fn", dir_, names, t, 4, TFC_DTYPE_BF16, 500, NULL, NULL, 0), TFC_ERR_IO,
              "model-00002-of-00003.safetensors");
    CHECK(!exists(INDEX) && !exists("model.safetensors"));
    tfc_hf_weights *w = NULL;
    CHECK_ERR(tfc_hf_weights_open("test_fn", dir_, &w), TFC_ERR_IO, "has neither");
    rmdir(at("model-00002-of-00003.safetensors/x"));
    for (int i = 0; i < 4; i++) tfc_tensor_release(t[i]);
    remove_dir();
}

TEST(the_writer_refuses_bad_arguments_before_writing) {
    new_dir();
    tfc_tensor *t[4];
    writer_tensors(t);
    const char *names[4] = {"A", "B", "C", "A"};
    CHECK_ERR(tfc_hf_weights_save("test_fn", dir_, names, t, 4, TFC_DTYPE_F32, 1000, NULL, NULL, 0),
              TFC_ERR_INVALID_ARG, "test_fn: the name 'A' appears twice");
    names[3] = "D";
    CHECK_ERR(tfc_hf_weights_save("test_fn", dir_, names, t, 4, TFC_DTYPE_F64, 0, NULL, NULL, 0), TFC_ERR_DTYPE,
              "cannot store weights as f64");
    tfc_tensor *ints = NULL;
    const int64_t d1[1] = {3};
    CHECK_OK(tfc_tensor_zeros(d1, 1, TFC_DTYPE_I32, &ints));
    tfc_tensor *mixed[2] = {t[0], ints};
    CHECK_ERR(tfc_hf_weights_save("test_fn", dir_, names, mixed, 2, TFC_DTYPE_F32, 0, NULL, NULL, 0), TFC_ERR_DTYPE,
              "tensors[1] ('B') is i32, not a float tensor");
    CHECK_ERR(tfc_hf_weights_save("test_fn", dir_, names, t, 0, TFC_DTYPE_F32, 0, NULL, NULL, 0), TFC_ERR_INVALID_ARG,
              "n is 0");
    const char *meta_name[1] = {"__metadata__"};
    CHECK_ERR(tfc_hf_weights_save("test_fn", dir_, meta_name, t, 1, TFC_DTYPE_F32, 0, NULL, NULL, 0),
              TFC_ERR_INVALID_ARG, "reserved name");
    CHECK(!exists("model.safetensors") && !exists(INDEX));
    CHECK_ERR(tfc_hf_weights_save("test_fn", "/nonexistent/dir", names, t, 4, TFC_DTYPE_F32, 0, NULL, NULL, 0),
              TFC_ERR_IO, "/nonexistent/dir/model.safetensors");
    tfc_tensor_release(ints);
    for (int i = 0; i < 4; i++) tfc_tensor_release(t[i]);
    remove_dir();
}

TFC_TEST_MAIN
