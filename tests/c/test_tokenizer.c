/*
 * Tokenizer: training against a slow textbook BPE written here, encode and
 * decode round trips on arbitrary bytes, special-token modes, the three
 * file formats, and every bad input we can think of. (Ids against the real
 * tiktoken: tests/tokenizer/.)
 */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tfc_test.h"
#include "tokenizer/split.h"

TFC_TEST_MAIN

/* ---- helpers ------------------------------------------------------------- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) { /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 0x2545F4914F6CDD1Dull) >> 32);
}

static const char *words[] = {"the", "cat",   "sat",  "on",    "mat", "and",     "then", "that", "there",
                              "hat", "is",    "it",   "a",     "ab",  "abab",    "ba",   "I",    "The",
                              "THE", "don't", "it's", "we're", "42",  "1234567", "3.14"};

/* ASCII prose-like text: words, spaces (runs too), punctuation, newlines. */
static char *make_ascii_text(size_t n) {
    char *s = malloc(n + 1);
    size_t k = 0;
    while (k < n) {
        const char *w = words[rnd() % (sizeof words / sizeof *words)];
        uint32_t r = rnd() % 20;
        const char *sep = r < 12 ? " "
            : r < 14             ? "  "
            : r < 15             ? ", "
            : r < 16             ? ".\n"
            : r < 17             ? "\n\n"
            : r < 18             ? "!?"
            : r < 19             ? "\t"
                                 : "   \n ";
        for (const char *p = w; *p && k < n; p++) s[k++] = *p;
        for (const char *p = sep; *p && k < n; p++) s[k++] = *p;
    }
    s[n] = 0;
    return s;
}

static char *tmp_path(const char *name) {
    static char buf[8][256];
    static int next;
    char *p = buf[next++ % 8];
    snprintf(p, 256, "/tmp/tfc_tok_test_%d_%s", (int)getpid(), name);
    return p;
}

static void write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) {
        TFC_FAIL_AT("cannot write %s", path);
        return;
    }
    fwrite(data, 1, n, f);
    fclose(f);
}

static void write_text(const char *path, const char *text) { write_file(path, text, strlen(text)); }

/* encode then decode must give back exactly the input. */
static void check_round_trip(const tfc_tokenizer *t, const char *text, size_t n) {
    int32_t *ids = NULL;
    size_t n_ids = 0;
    CHECK_OK(tfc_tokenizer_encode(t, text, n, TFC_SPECIAL_AS_TEXT, &ids, &n_ids));
    char *back = NULL;
    size_t len = 0;
    CHECK_OK(tfc_tokenizer_decode(t, ids, n_ids, &back, &len));
    CHECK(len == n && (n == 0 || memcmp(back, text, n) == 0));
    CHECK(back && back[len] == 0);
    tfc_free(back);
    tfc_free(ids);
}

/* ---- the textbook reference ---------------------------------------------- */

/*
 * GPT-2's split pattern on ASCII text, written out by hand from the regex
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * (leftmost alternative that matches wins). Returns the chunk length at i.
 */
static int is_ws(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }
static int is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_other(char c) { return !is_ws(c) && !is_alpha(c) && !is_digit(c); }

static size_t ref_gpt2_chunk(const char *s, size_t n, size_t i) {
    static const char *contr[] = {"'s", "'t", "'re", "'ve", "'m", "'ll", "'d"};
    for (int k = 0; k < 7; k++) {
        size_t l = strlen(contr[k]);
        if (i + l <= n && memcmp(s + i, contr[k], l) == 0) return l;
    }
    size_t j = i + (s[i] == ' ' && i + 1 < n);
    int (*classes[3])(char) = {is_alpha, is_digit, is_other};
    for (int c = 0; c < 3; c++) {
        size_t k = j;
        while (k < n && classes[c](s[k])) k++;
        if (k > j) return k - i;
    }
    size_t k = i;
    while (k < n && is_ws(s[k])) k++;
    if (k == n || k - i == 1) return k - i; /* \s+(?!\S) to the end, or \s+ of one */
    return k - i - 1;                       /* leave the last space for the next word */
}

typedef struct ref_bpe {
    int32_t **chunk; /* chunk symbols */
    size_t *len, n_chunks;
    int32_t (*merges)[3]; /* left, right, id */
    int n_merges;
} ref_bpe;

/* minbpe's train(): count all pairs, merge the most frequent (smallest pair on ties), repeat. */
static void ref_train(ref_bpe *r, const char *text, size_t n, int use_gpt2_split, int vocab_size) {
    r->chunk = malloc((n + 1) * sizeof *r->chunk);
    r->len = malloc((n + 1) * sizeof *r->len);
    r->n_chunks = 0;
    for (size_t i = 0; i < n;) {
        size_t l = use_gpt2_split ? ref_gpt2_chunk(text, n, i) : n;
        if (l == 0 || l > n - i) { /* cannot happen; keeps the loop finite if the splitter were wrong */
            TFC_FAIL_AT("reference split gave %zu at %zu", l, i);
            l = 1;
        }
        int32_t *c = malloc(l * sizeof *c);
        for (size_t k = 0; k < l; k++) c[k] = (uint8_t)text[i + k];
        r->chunk[r->n_chunks] = c;
        r->len[r->n_chunks++] = l;
        i += l;
    }
    r->merges = malloc((size_t)(vocab_size > 256 ? vocab_size - 256 : 1) * sizeof *r->merges);
    r->n_merges = 0;
    int64_t *count = malloc((size_t)vocab_size * vocab_size * sizeof *count);
    for (int id = 256; id < vocab_size; id++) {
        memset(count, 0, (size_t)vocab_size * vocab_size * sizeof *count);
        for (size_t c = 0; c < r->n_chunks; c++)
            for (size_t k = 0; k + 1 < r->len[c]; k++) count[r->chunk[c][k] * vocab_size + r->chunk[c][k + 1]]++;
        int64_t best = 0;
        int ba = -1, bb = -1;
        for (int a = 0; a < id; a++)
            for (int b = 0; b < id; b++)
                if (count[a * vocab_size + b] > best) {
                    best = count[a * vocab_size + b];
                    ba = a;
                    bb = b;
                }
        if (best == 0) break;
        for (size_t c = 0; c < r->n_chunks; c++) {
            size_t w = 0;
            for (size_t k = 0; k < r->len[c]; k++) {
                if (k + 1 < r->len[c] && r->chunk[c][k] == ba && r->chunk[c][k + 1] == bb) {
                    r->chunk[c][w++] = id;
                    k++;
                } else {
                    r->chunk[c][w++] = r->chunk[c][k];
                }
            }
            r->len[c] = w;
        }
        r->merges[r->n_merges][0] = ba;
        r->merges[r->n_merges][1] = bb;
        r->merges[r->n_merges][2] = id;
        r->n_merges++;
    }
    free(count);
}

static void ref_free(ref_bpe *r) {
    for (size_t c = 0; c < r->n_chunks; c++) free(r->chunk[c]);
    free(r->chunk);
    free(r->len);
    free(r->merges);
}

/* Train ours and the reference on text; merges and the training text's ids must agree. */
static void check_training(const char *text, size_t n, int32_t pattern, int vocab_size) {
    tfc_tokenizer *t = NULL;
    CHECK_OK(tfc_tokenizer_new(pattern, &t));
    CHECK_OK(tfc_tokenizer_train(t, text, n, vocab_size));
    ref_bpe r;
    ref_train(&r, text, n, pattern == TFC_SPLIT_GPT2, vocab_size);
    int32_t n_merges = -1, vs = -1;
    CHECK_OK(tfc_tokenizer_n_merges(t, &n_merges));
    CHECK_OK(tfc_tokenizer_vocab_size(t, &vs));
    CHECK(n_merges == r.n_merges);
    CHECK(vs == 256 + r.n_merges);
    int bad = 0;
    for (int32_t i = 0; i < n_merges && i < r.n_merges; i++) {
        int32_t l, rr, id, rank;
        CHECK_OK(tfc_tokenizer_get_merge(t, i, &l, &rr, &id, &rank));
        if (l != r.merges[i][0] || rr != r.merges[i][1] || id != r.merges[i][2] || rank != id) {
            if (!bad++)
                TFC_FAIL_AT("pattern %d merge %d: ours (%d,%d)->%d, reference (%d,%d)->%d", (int)pattern, (int)i,
                            (int)l, (int)rr, (int)id, r.merges[i][0], r.merges[i][1], r.merges[i][2]);
        }
    }
    CHECK(bad == 0);
    /* encoding the training text gives the reference's final segmentation */
    int32_t *ids;
    size_t n_ids;
    CHECK_OK(tfc_tokenizer_encode(t, text, n, TFC_SPECIAL_AS_TEXT, &ids, &n_ids));
    size_t k = 0, mismatch = 0;
    for (size_t c = 0; c < r.n_chunks; c++)
        for (size_t j = 0; j < r.len[c]; j++, k++) mismatch += k >= n_ids || ids[k] != r.chunk[c][j];
    CHECK(k == n_ids && mismatch == 0);
    tfc_free(ids);
    check_round_trip(t, text, n);
    ref_free(&r);
    tfc_tokenizer_release(t);
}

TEST(training_matches_textbook_bpe_without_split) {
    /* bytes from a small alphabet including NUL and invalid UTF-8, so pairs repeat */
    static const char alphabet[] = {'a', 'b', 'c', ' ', '\0', (char)0xFF, (char)0xC3, 'a', 'b', 'a'};
    size_t n = 6000;
    char *s = malloc(n);
    for (size_t i = 0; i < n; i++) s[i] = alphabet[rnd() % sizeof alphabet];
    check_training(s, n, TFC_SPLIT_NONE, 256 + 150);
    free(s);
}

TEST(training_matches_textbook_bpe_with_gpt2_split) {
    size_t n = 30000;
    char *s = make_ascii_text(n);
    check_training(s, n, TFC_SPLIT_GPT2, 256 + 200);
    free(s);
}

TEST(training_overlapping_pairs) {
    /* "aaaa...": (a,a) merges left to right without overlap, then (aa,aa), ... */
    char s[1000];
    memset(s, 'a', sizeof s);
    check_training(s, 999, TFC_SPLIT_NONE, 256 + 12);
    check_training("abababab ababab aaa aaaa aaaaa", 30, TFC_SPLIT_GPT2, 256 + 10);
}

TEST(training_stops_when_no_pairs_are_left) {
    tfc_tokenizer *t;
    CHECK_OK(tfc_tokenizer_new(TFC_SPLIT_NONE, &t));
    CHECK_OK(tfc_tokenizer_train(t, "abcd", 4, 1000));
    int32_t n = 0, vs = 0;
    CHECK_OK(tfc_tokenizer_n_merges(t, &n));
    CHECK_OK(tfc_tokenizer_vocab_size(t, &vs));
    CHECK(n == 3 && vs == 259); /* ab, abc, abcd (ties: smallest pair first) */
    int32_t *ids;
    size_t n_ids;
    CHECK_OK(tfc_tokenizer_encode(t, "abcd", 4, TFC_SPECIAL_AS_TEXT, &ids, &n_ids));
    CHECK(n_ids == 1 && ids[0] == 258);
    tfc_free(ids);
    const char *b;
    size_t len;
    int32_t sp = -1;
    CHECK_OK(tfc_tokenizer_token_bytes(t, 258, &b, &len, &sp));
    CHECK(len == 4 && memcmp(b, "abcd", 4) == 0 && sp == 0);
    tfc_tokenizer_release(t);
}

TEST(train_files_equals_train_on_the_same_text) {
    size_t n = 2600000; /* more than two 1 MiB blocks, so the stream is cut */
    char *s = make_ascii_text(n);
    const char *path = tmp_path("corpus.txt");
    write_file(path, s, n);
    int32_t patterns[] = {TFC_SPLIT_GPT2, TFC_SPLIT_CL100K, TFC_SPLIT_NONE};
    for (int p = 0; p < 3; p++) {
        size_t len = p == 2 ? 20000 : n;
        if (p == 2) write_file(path, s, len);
        tfc_tokenizer *a, *b;
        CHECK_OK(tfc_tokenizer_new(patterns[p], &a));
        CHECK_OK(tfc_tokenizer_new(patterns[p], &b));
        CHECK_OK(tfc_tokenizer_train(a, s, len, 256 + 64));
        CHECK_OK(tfc_tokenizer_train_files(b, &path, 1, 256 + 64));
        int32_t na = 0, nb = 1;
        CHECK_OK(tfc_tokenizer_n_merges(a, &na));
        CHECK_OK(tfc_tokenizer_n_merges(b, &nb));
        CHECK(na == nb && na == 64);
        int same = 1;
        for (int32_t i = 0; i < na && i < nb; i++) {
            int32_t l1, r1, i1, k1, l2, r2, i2, k2;
            CHECK_OK(tfc_tokenizer_get_merge(a, i, &l1, &r1, &i1, &k1));
            CHECK_OK(tfc_tokenizer_get_merge(b, i, &l2, &r2, &i2, &k2));
            same &= l1 == l2 && r1 == r2 && i1 == i2;
        }
        CHECK(same);
        tfc_tokenizer_release(a);
        tfc_tokenizer_release(b);
    }
    remove(path);
    free(s);
}

/* ---- encode / decode ----------------------------------------------------- */

TEST(round_trips_on_arbitrary_bytes) {
    char *train = make_ascii_text(20000);
    int32_t patterns[] = {TFC_SPLIT_NONE, TFC_SPLIT_GPT2, TFC_SPLIT_CL100K};
    for (int p = 0; p < 3; p++) {
        tfc_tokenizer *t;
        CHECK_OK(tfc_tokenizer_new(patterns[p], &t));
        CHECK_OK(tfc_tokenizer_train(t, train, 20000, 256 + 300));
        check_round_trip(t, "", 0);
        check_round_trip(t, "\0", 1);
        check_round_trip(t, "a\0b\0\0c", 6);
        check_round_trip(t, "\xff\xfe\xc3\x28\xa0\xa1\xe2\x28\xa1\xf0\x28\x8c\xbc\xed\xa0\x80 ok", 19);
        check_round_trip(t, "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80 \xc2\x85\xef\xbb\xbf", 21);
        for (int rep = 0; rep < 200; rep++) {
            char buf[600];
            size_t n = rnd() % sizeof buf;
            for (size_t i = 0; i < n; i++) buf[i] = rep % 2 ? (char)rnd() : "ab \n'\x80\xc3\xa9"[rnd() % 8];
            check_round_trip(t, buf, n);
        }
        /* long single chunks take the heap-based merge path */
        size_t big = 200000;
        char *s = malloc(big);
        memset(s, 'a', big);
        check_round_trip(t, s, big);
        for (size_t i = 0; i < big; i++) s[i] = " \t"[rnd() % 2];
        check_round_trip(t, s, big);
        /* long non-ASCII runs go through PCRE2 (ideographic space, NBSP, é, Arabic-Indic digit) */
        static const char *units[] = {"\xe3\x80\x80", "\xc2\xa0", "\xc3\xa9", "\xd9\xa3", " \xc2\x85"};
        for (int u = 0; u < 5; u++) {
            size_t ul = strlen(units[u]), m = big / ul * ul;
            for (size_t i = 0; i < m; i += ul) memcpy(s + i, units[u], ul);
            check_round_trip(t, s, m);
        }
        free(s);
        tfc_tokenizer_release(t);
    }
    free(train);
}

/* Long chunks (heap path) must merge exactly like the textbook: one merge rank at a time, left to right. */
TEST(long_chunk_merge_equals_reference) {
    size_t n = 3000;
    char *s = malloc(n);
    for (size_t i = 0; i < n; i++) s[i] = "aab"[rnd() % 3];
    tfc_tokenizer *t;
    CHECK_OK(tfc_tokenizer_new(TFC_SPLIT_NONE, &t));
    char *train = malloc(4000);
    for (size_t i = 0; i < 4000; i++) train[i] = "aabb"[rnd() % 4];
    CHECK_OK(tfc_tokenizer_train(t, train, 4000, 256 + 40));
    ref_bpe r;
    ref_train(&r, train, 4000, 0, 256 + 40);
    /* reference encode of s: apply each merge, in order, everywhere */
    int32_t *sym = malloc(n * sizeof *sym);
    size_t m = n;
    for (size_t i = 0; i < n; i++) sym[i] = (uint8_t)s[i];
    for (int k = 0; k < r.n_merges; k++) {
        size_t w = 0;
        for (size_t i = 0; i < m; i++) {
            if (i + 1 < m && sym[i] == r.merges[k][0] && sym[i + 1] == r.merges[k][1]) {
                sym[w++] = r.merges[k][2];
                i++;
            } else {
                sym[w++] = sym[i];
            }
        }
        m = w;
    }
    int32_t *ids;
    size_t n_ids;
    CHECK_OK(tfc_tokenizer_encode(t, s, n, TFC_SPECIAL_AS_TEXT, &ids, &n_ids));
    CHECK(n_ids == m && memcmp(ids, sym, m * sizeof *sym) == 0);
    tfc_free(ids);
    free(sym);
    ref_free(&r);
    free(train);
    free(s);
    tfc_tokenizer_release(t);
}

TEST(decode_utf8_replaces_maximal_subparts) {
    tfc_tokenizer *t;
    CHECK_OK(tfc_tokenizer_new(TFC_SPLIT_GPT2, &t));
    const char in[] = "a\xf0\x9f\x98"
                      "b\xff"
                      "c\xed\xa0\x80\xe2\x82";
    int32_t *ids;
    size_t n_ids;
    CHECK_OK(tfc_tokenizer_encode(t, in, sizeof in - 1, TFC_SPECIAL_AS_TEXT, &ids, &n_ids));
    char *text;
    size_t len;
    CHECK_OK(tfc_tokenizer_decode_utf8(t, ids, n_ids, &text, &len));
    /* Python: b'a\xf0\x9f\x98b\xffc\xed\xa0\x80\xe2\x82'.decode('utf-8', 'replace') */
    const char want[] = "a\xef\xbf\xbd"
                        "b\xef\xbf\xbd"
                        "c\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd";
    CHECK(len == sizeof want - 1 && memcmp(text, want, len) == 0);
    tfc_free(text);
    tfc_free(ids);
    tfc_tokenizer_release(t);
}

TEST(decode_rejects_bad_ids) {
    tfc_tokenizer *t;
    CHECK_OK(tfc_tokenizer_new(TFC_SPLIT_GPT2, &t));
    CHECK_OK(tfc_tokenizer_add_special(t, "<|end|>", 300));
    char *out = (char *)0x1;
    size_t len = 7;
    int32_t bad1[] = {65, -1};
    CHECK_ERR(tfc_tokenizer_decode(t, bad1, 2, &out, &len), TFC_ERR_INVALID_ARG, "ids[1] is -1");
    int32_t bad2[] = {301};
    CHECK_ERR(tfc_tokenizer_decode(t, bad2, 1, &out, &len), TFC_ERR_INVALID_ARG, "ids[0] is 301");
    int32_t unused[] = {299}; /* below vocab size 301 but not a token */
    CHECK_ERR(tfc_tokenizer_decode_utf8(t, unused, 1, &out, &len), TFC_ERR_INVALID_ARG, "not a token");
    CHECK_ERR(tfc_tokenizer_decode(t, NULL, 3, &out, &len), TFC_ERR_INVALID_ARG, "ids is NULL");
    CHECK_ERR(tfc_tokenizer_decode(NULL, bad1, 1, &out, &len), TFC_ERR_INVALID_ARG, "tok");
    CHECK(out == (char *)0x1 && len == 7); /* untouched on error */
    int32_t sp[] = {300, 104, 105};
    CHECK_OK(tfc_tokenizer_decode(t, sp, 3, &out, &len));
    CHECK(len == 9 && memcmp(out, "<|end|>hi", 9) == 0);
    tfc_free(out);
    CHECK_OK(tfc_tokenizer_decode(t, NULL, 0, &out, &len));
    CHECK(len == 0 && out[0] == 0);
    tfc_free(out);
    const char *b;
    CHECK_ERR(tfc_tokenizer_token_bytes(t, 299, &b, &len, NULL), TFC_ERR_INVALID_ARG, "id 299");
    CHECK_ERR(tfc_tokenizer_token_bytes(t, -5, &b, &len, NULL), TFC_ERR_INVALID_ARG, "id -5");
    tfc_tokenizer_release(t);
}

TEST(encode_rejects_bad_arguments) {
    tfc_tokenizer *t;
    CHECK_OK(tfc_tokenizer_new(TFC_SPLIT_CL100K, &t));
    int32_t *ids = (int32_t *)0x1;
    size_t n = 5;
    CHECK_ERR(tfc_tokenizer_encode(NULL, "a", 1, 0, &ids, &n), TFC_ERR_INVALID_ARG, "tok");
    CHECK_ERR(tfc_tokenizer_encode(t, NULL, 1, 0, &ids, &n), TFC_ERR_INVALID_ARG, "text is NULL");
    CHECK_ERR(tfc_tokenizer_encode(t, "a", 1, 7, &ids, &n), TFC_ERR_INVALID_ARG, "special_mode is 7");
    CHECK_ERR(tfc_tokenizer_encode(t, "a", 1, 0, NULL, &n), TFC_ERR_INVALID_ARG, "ids");
    CHECK(ids == (int32_t *)0x1 && n == 5);
    CHECK_OK(tfc_tokenizer_encode(t, NULL, 0, 0, &ids, &n));
    CHECK(n == 0);
    tfc_free(ids);
    tfc_tokenizer *u = (tfc_tokenizer *)0x1;
    CHECK_ERR(tfc_tokenizer_new(5, &u), TFC_ERR_INVALID_ARG, "pattern is 5");
    CHECK_ERR(tfc_tokenizer_new(TFC_SPLIT_GPT2, NULL), TFC_ERR_INVALID_ARG, "out");
    CHECK(u == (tfc_tokenizer *)0x1);
    tfc_tokenizer_release(NULL);
    tfc_tokenizer_release(t);
}

/* ---- special tokens ------------------------------------------------------ */

TEST(special_token_modes) {
    tfc_tokenizer *t;
    CHECK_OK(tfc_tokenizer_new(TFC_SPLIT_GPT2, &t));
    char *train = make_ascii_text(5000);
    CHECK_OK(tfc_tokenizer_add_special(t, "<|end|>", 1000));
    CHECK_OK(tfc_tokenizer_add_special(t, "<|end|>X", 1001)); /* longer one at the same place */
    CHECK_OK(tfc_tokenizer_train(t, train, 5000, 300));
    free(train);
    const char text[] = "hi<|end|> there<|end|>X<|end|";
    int32_t *ids;
    size_t n;
    /* default: the text is ordinary bytes */
    CHECK_OK(tfc_tokenizer_encode(t, text, sizeof text - 1, TFC_SPECIAL_AS_TEXT, &ids, &n));
    int any_special = 0;
    for (size_t i = 0; i < n; i++) any_special |= ids[i] >= 1000;
    CHECK(!any_special);
    tfc_free(ids);
    /* allowed: leftmost, longest */
    CHECK_OK(tfc_tokenizer_encode(t, text, sizeof text - 1, TFC_SPECIAL_ALLOWED, &ids, &n));
    int32_t n_1000 = 0, n_1001 = 0;
    for (size_t i = 0; i < n; i++) {
        n_1000 += ids[i] == 1000;
        n_1001 += ids[i] == 1001;
    }
    CHECK(n_1000 == 1 && n_1001 == 1);
    char *back;
    size_t len;
    CHECK_OK(tfc_tokenizer_decode(t, ids, n, &back, &len));
    CHECK(len == sizeof text - 1 && memcmp(back, text, len) == 0);
    tfc_free(back);
    /* the text before a special token is encoded on its own: "hi" then the token */
    int32_t *hi;
    size_t n_hi;
    CHECK_OK(tfc_tokenizer_encode(t, "hi", 2, TFC_SPECIAL_ALLOWED, &hi, &n_hi));
    CHECK(n > n_hi && memcmp(ids, hi, n_hi * sizeof *hi) == 0 && ids[n_hi] == 1000);
    tfc_free(hi);
    tfc_free(ids);
    /* disallowed: an error naming the token and offset; fine when absent */
    ids = (int32_t *)0x1;
    CHECK_ERR(tfc_tokenizer_encode(t, text, sizeof text - 1, TFC_SPECIAL_DISALLOWED, &ids, &n), TFC_ERR_INVALID_ARG,
              "special token '<|end|>' (id 1000) at byte 2");
    CHECK(ids == (int32_t *)0x1);
    CHECK_OK(tfc_tokenizer_encode(t, "plain", 5, TFC_SPECIAL_DISALLOWED, &ids, &n));
    tfc_free(ids);
    /* registration errors */
    CHECK_ERR(tfc_tokenizer_add_special(t, "<|end|>", 2000), TFC_ERR_INVALID_ARG, "already special token 1000");
    CHECK_ERR(tfc_tokenizer_add_special(t, "<|other|>", 1000), TFC_ERR_INVALID_ARG, "already the special");
    CHECK_ERR(tfc_tokenizer_add_special(t, "<|other|>", 100), TFC_ERR_INVALID_ARG, "already the ordinary");
    CHECK_ERR(tfc_tokenizer_add_special(t, "", 2000), TFC_ERR_INVALID_ARG, "0 bytes");
    CHECK_ERR(tfc_tokenizer_add_special(t, "x", -1), TFC_ERR_INVALID_ARG, "id -1");
    CHECK_ERR(tfc_tokenizer_add_special(t, NULL, 2000), TFC_ERR_INVALID_ARG, "text is NULL");
    tfc_tokenizer_release(t);
}

TEST(batch_encode_matches_single_and_reports_the_failing_text) {
    tfc_tokenizer *t;
    CHECK_OK(tfc_tokenizer_new(TFC_SPLIT_CL100K, &t));
    char *train = make_ascii_text(20000);
    CHECK_OK(tfc_tokenizer_train(t, train, 20000, 400));
    CHECK_OK(tfc_tokenizer_add_special(t, "<|eot|>", 400));
    enum { N = 50 };
    const char *texts[N];
    size_t lens[N];
    for (int i = 0; i < N; i++) {
        texts[i] = train + i * 300;
        lens[i] = (size_t)(i * 7 % 300);
    }
    int32_t *ids;
    size_t *offs;
    CHECK_OK(tfc_tokenizer_encode_batch(t, texts, lens, N, TFC_SPECIAL_AS_TEXT, 3, &ids, &offs));
    for (int i = 0; i < N; i++) {
        int32_t *one;
        size_t n;
        CHECK_OK(tfc_tokenizer_encode(t, texts[i], lens[i], TFC_SPECIAL_AS_TEXT, &one, &n));
        CHECK(offs[i + 1] - offs[i] == n && (n == 0 || memcmp(ids + offs[i], one, n * sizeof *one) == 0));
        tfc_free(one);
    }
    tfc_free(ids);
    tfc_free(offs);
    texts[7] = "a <|eot|> b";
    lens[7] = strlen(texts[7]);
    texts[9] = "<|eot|>";
    lens[9] = strlen(texts[9]);
    CHECK_ERR(tfc_tokenizer_encode_batch(t, texts, lens, N, TFC_SPECIAL_DISALLOWED, 4, &ids, &offs),
              TFC_ERR_INVALID_ARG, "(texts[7])");
    texts[3] = NULL;
    CHECK_ERR(tfc_tokenizer_encode_batch(t, texts, lens, N, TFC_SPECIAL_AS_TEXT, 4, &ids, &offs), TFC_ERR_INVALID_ARG,
              "texts[3] is NULL");
    CHECK_OK(tfc_tokenizer_encode_batch(t, NULL, NULL, 0, TFC_SPECIAL_AS_TEXT, 0, &ids, &offs));
    CHECK(offs[0] == 0);
    tfc_free(ids);
    tfc_free(offs);
    free(train);
    tfc_tokenizer_release(t);
}

/* ---- training errors ----------------------------------------------------- */

TEST(train_rejects_bad_requests) {
    tfc_tokenizer *t;
    CHECK_OK(tfc_tokenizer_new(TFC_SPLIT_GPT2, &t));
    CHECK_ERR(tfc_tokenizer_train(t, "abc", 3, 255), TFC_ERR_INVALID_ARG, "vocab_size is 255");
    CHECK_ERR(tfc_tokenizer_train(t, NULL, 3, 300), TFC_ERR_INVALID_ARG, "text is NULL");
    CHECK_ERR(tfc_tokenizer_train(NULL, "a", 1, 300), TFC_ERR_INVALID_ARG, "tok");
    CHECK_OK(tfc_tokenizer_add_special(t, "<s>", 280));
    CHECK_ERR(tfc_tokenizer_train(t, "abcabc", 6, 300), TFC_ERR_INVALID_ARG, "special token 280");
    CHECK_OK(tfc_tokenizer_train(t, "abcabc", 6, 260));
    CHECK_ERR(tfc_tokenizer_train(t, "abcabc", 6, 270), TFC_ERR_INVALID_ARG, "already has merges");
    const char *missing = tmp_path("does-not-exist.txt");
    tfc_tokenizer *u;
    CHECK_OK(tfc_tokenizer_new(TFC_SPLIT_GPT2, &u));
    CHECK_ERR(tfc_tokenizer_train_files(u, &missing, 1, 300), TFC_ERR_IO, "does-not-exist.txt");
    CHECK_ERR(tfc_tokenizer_train_files(u, &missing, 0, 300), TFC_ERR_INVALID_ARG, "n_paths is 0");
    const char *nulls[1] = {NULL};
    CHECK_ERR(tfc_tokenizer_train_files(u, nulls, 1, 300), TFC_ERR_INVALID_ARG, "paths[0] is NULL");
    /* after the failures the tokenizer is still fresh and trains */
    CHECK_OK(tfc_tokenizer_train(u, "", 0, 300));
    tfc_tokenizer_release(u);
    tfc_tokenizer_release(t);
}

/* ---- file formats -------------------------------------------------------- */

static void check_same_tokenizer(const tfc_tokenizer *a, const tfc_tokenizer *b, const char *text, size_t n) {
    int32_t va, vb, ma, mb;
    CHECK_OK(tfc_tokenizer_vocab_size(a, &va));
    CHECK_OK(tfc_tokenizer_vocab_size(b, &vb));
    CHECK_OK(tfc_tokenizer_n_merges(a, &ma));
    CHECK_OK(tfc_tokenizer_n_merges(b, &mb));
    CHECK(va == vb && ma == mb);
    for (int32_t i = 0; i < ma && i < mb; i++) {
        int32_t x[4], y[4];
        CHECK_OK(tfc_tokenizer_get_merge(a, i, &x[0], &x[1], &x[2], &x[3]));
        CHECK_OK(tfc_tokenizer_get_merge(b, i, &y[0], &y[1], &y[2], &y[3]));
        if (memcmp(x, y, sizeof x)) {
            TFC_FAIL_AT("merge %d differs", (int)i);
            break;
        }
    }
    for (int mode = 0; mode < 2; mode++) {
        int32_t *ia, *ib;
        size_t na, nb;
        CHECK_OK(tfc_tokenizer_encode(a, text, n, mode, &ia, &na));
        CHECK_OK(tfc_tokenizer_encode(b, text, n, mode, &ib, &nb));
        CHECK(na == nb && memcmp(ia, ib, na * sizeof *ia) == 0);
        tfc_free(ia);
        tfc_free(ib);
    }
}

TEST(save_load_round_trip) {
    char *text = make_ascii_text(20000);
    int32_t patterns[] = {TFC_SPLIT_NONE, TFC_SPLIT_GPT2, TFC_SPLIT_CL100K};
    const char *path = tmp_path("tok.tfctok");
    for (int p = 0; p < 3; p++) {
        tfc_tokenizer *t, *u;
        CHECK_OK(tfc_tokenizer_new(patterns[p], &t));
        CHECK_OK(tfc_tokenizer_train(t, text, 20000, 700));
        CHECK_OK(tfc_tokenizer_add_special(t, "<|endoftext|>", 800));
        CHECK_OK(tfc_tokenizer_add_special(t, "<|a b|>", 700));
        CHECK_OK(tfc_tokenizer_save(t, path));
        CHECK_OK(tfc_tokenizer_load(path, &u));
        strcpy(text + 100, "<|endoftext|>");
        text[113] = ' ';
        check_same_tokenizer(t, u, text, 20000);
        tfc_tokenizer_release(t);
        tfc_tokenizer_release(u);
    }
    remove(path);
    free(text);
}

/* A tiny tiktoken file: 256 byte tokens, ranks 0..255 = bytes, then merges. */
static char *tiny_tiktoken(const char *extra) {
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *s = malloc(256 * 12 + strlen(extra) + 1), *p = s;
    for (int b = 0; b < 256; b++) p += sprintf(p, "%c%c== %d\n", b64[b >> 2], b64[(b & 3) << 4], b);
    strcpy(p, extra);
    return s;
}

TEST(load_tiktoken_merges_by_whole_token_rank) {
    /* "ab"=256 YWI=, "bc"=257 YmM=, "abc"=258 YWJj, "cd"=259 Y2Q= */
    char *s = tiny_tiktoken("YWI= 256\nYmM= 257\nYWJj 258\nY2Q= 259\n");
    const char *path = tmp_path("tiny.tiktoken");
    write_text(path, s);
    tfc_tokenizer *t;
    CHECK_OK(tfc_tokenizer_load_tiktoken(path, TFC_SPLIT_NONE, &t));
    int32_t *ids;
    size_t n;
    /* "abcd": ab (256) before bc (257) -> [ab, c, d]; then ab+c = "abc" (258) vs c+d (259): 258 -> [abc, d] */
    CHECK_OK(tfc_tokenizer_encode(t, "abcd", 4, TFC_SPECIAL_AS_TEXT, &ids, &n));
    CHECK(n == 2 && ids[0] == 258 && ids[1] == 'd');
    tfc_free(ids);
    /* "bcd": bc (257) -> [bc, d]; bc+d "bcd" is no token -> [257, 'd'] */
    CHECK_OK(tfc_tokenizer_encode(t, "bcd", 3, TFC_SPECIAL_AS_TEXT, &ids, &n));
    CHECK(n == 2 && ids[0] == 257 && ids[1] == 'd');
    tfc_free(ids);
    /* the merges are every split into two tokens: a+bc and ab+c both make abc */
    int32_t nm;
    CHECK_OK(tfc_tokenizer_n_merges(t, &nm));
    CHECK(nm == 5);
    tfc_tokenizer_release(t);
    remove(path);
    free(s);
}

TEST(load_tiktoken_rejects_bad_files) {
    const char *path = tmp_path("bad.tiktoken");
    tfc_tokenizer *t = (tfc_tokenizer *)0x1;
    struct {
        const char *extra, *fragment;
    } cases[] = {
        {"YWI 256\n", "line 257: bad base64"},
        {"YWI=256\n", "line 257: expected '<base64> <rank>'"},
        {"YWI= x\n", "line 257: rank 'x' is not an integer"},
        {"YWI= 255\n", "line 257: rank 255 appears twice"},
        {"YWI= 256\nYWI= 257\n", "line 258: token already has rank 256"},
        {"YWI= 1073741824\n", "line 257: rank '1073741824' is not an integer in [0, 2^30)"},
        {"YWI= 99999999999999999999\n", "is not an integer"},
        {"YW!= 256\n", "bad base64"},
        {"YWJ= 256\n", "bad base64"}, /* non-zero padding bits */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *s = tiny_tiktoken(cases[i].extra);
        write_text(path, s);
        CHECK_ERR(tfc_tokenizer_load_tiktoken(path, TFC_SPLIT_GPT2, &t), TFC_ERR_FORMAT, cases[i].fragment);
        free(s);
    }
    /* a missing byte token */
    char *s = tiny_tiktoken("");
    char *line = strstr(s, "QQ== 65\n");
    memcpy(line, "QUI= 65\n", 8); /* rank 65 is now "AB", byte 'A' has no token */
    write_text(path, s);
    CHECK_ERR(tfc_tokenizer_load_tiktoken(path, TFC_SPLIT_GPT2, &t), TFC_ERR_FORMAT, "byte 0x41 has no token");
    free(s);
    /* a NUL byte in the file */
    s = tiny_tiktoken("YWI= 256\n");
    size_t n = strlen(s);
    s[n - 3] = 0;
    write_file(path, s, n);
    CHECK_ERR(tfc_tokenizer_load_tiktoken(path, TFC_SPLIT_GPT2, &t), TFC_ERR_FORMAT, "NUL byte");
    free(s);
    /* a huge line: a 1 MB token */
    size_t huge = 1 << 20;
    s = malloc(huge + 16);
    memset(s, 'Q', huge);
    strcpy(s + huge, " 300\n");
    write_text(path, s);
    CHECK_ERR(tfc_tokenizer_load_tiktoken(path, TFC_SPLIT_GPT2, &t), TFC_ERR_FORMAT, "longer than 65536");
    free(s);
    /* truncated: the last line cut inside its base64 */
    s = tiny_tiktoken("");
    s[strlen(s) - 6] = 0;
    write_text(path, s);
    CHECK_ERR(tfc_tokenizer_load_tiktoken(path, TFC_SPLIT_GPT2, &t), TFC_ERR_FORMAT, "line 256");
    free(s);
    write_text(path, "");
    CHECK_ERR(tfc_tokenizer_load_tiktoken(path, TFC_SPLIT_GPT2, &t), TFC_ERR_FORMAT, "byte 0x00 has no token");
    remove(path);
    CHECK_ERR(tfc_tokenizer_load_tiktoken(path, TFC_SPLIT_GPT2, &t), TFC_ERR_IO, "cannot open");
    CHECK_ERR(tfc_tokenizer_load_tiktoken(path, 9, &t), TFC_ERR_INVALID_ARG, "pattern is 9");
    CHECK_ERR(tfc_tokenizer_load_tiktoken(NULL, 1, &t), TFC_ERR_INVALID_ARG, "path is NULL");
    CHECK(t == (tfc_tokenizer *)0x1);
}

/* GPT-2's alphabet: printable Latin-1 as itself, the other bytes from U+0100 in order ("Ġ" = U+0120 = space). */
static char *tiny_encoder_json(const char *extra_entries) {
    char *s = malloc(256 * 16 + strlen(extra_entries) + 8), *p = s;
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
    p += sprintf(p, "%s}", extra_entries);
    return s;
}

TEST(load_gpt2_undoes_the_byte_alphabet) {
    const char *ej = tmp_path("encoder.json"), *vb = tmp_path("vocab.bpe");
    /* 256 = " t" (Ġt), 257 = " th", 258 = "\n\n" (ĊĊ), 259 = <|endoftext|> */
    char *json = tiny_encoder_json("\"\\u0120t\": 256, \"\\u0120th\": 257, \"\\u010a\\u010a\": 258, "
                                   "\"<|endoftext|>\": 259");
    write_text(ej, json);
    write_text(vb, "#version: 0.2\n\xc4\xa0 t\n\xc4\xa0t h\n\xc4\x8a \xc4\x8a\n");
    tfc_tokenizer *t;
    CHECK_OK(tfc_tokenizer_load_gpt2(ej, vb, &t));
    int32_t *ids;
    size_t n;
    CHECK_OK(tfc_tokenizer_encode(t, "a th\n\n<|endoftext|>", 19, TFC_SPECIAL_ALLOWED, &ids, &n));
    CHECK(n == 4 && ids[0] == 'a' && ids[1] == 257 && ids[2] == 258 && ids[3] == 259);
    tfc_free(ids);
    const char *b;
    size_t len;
    int32_t sp;
    CHECK_OK(tfc_tokenizer_token_bytes(t, 259, &b, &len, &sp));
    CHECK(sp == 1 && len == 13);
    CHECK_OK(tfc_tokenizer_token_bytes(t, 0, &b, &len, &sp)); /* byte 0 is U+0100 */
    CHECK(sp == 0 && len == 1 && b[0] == 0);
    tfc_tokenizer_release(t);

    struct {
        const char *json_extra, *bpe, *fragment;
        tfc_status want;
    } cases[] = {
        {"\"\\u0120t\": 256", "#version: 0.2\n\xc4\xa0 x\n", "line 2: merge '\xc4\xa0 x' makes a token not in",
         TFC_ERR_FORMAT},
        {"\"\\u0120t\": 256", "#version: 0.2\n\xc4\xa0 tq\n", "refers to a token not in encoder.json", TFC_ERR_FORMAT},
        {"\"\\u0120t\": 256", "\xc4\xa0 t extra\n", "line 1: expected 'left right'", TFC_ERR_FORMAT},
        {"\"\\u0120t\": 256", "\xc4\xa0 t\n\xc4\xa0 t\n", "appears twice", TFC_ERR_FORMAT},
        {"\"\\u0120t\": 255", "", "id 255 appears twice", TFC_ERR_FORMAT},
        {"\"\\u0120t\": 256, \"\\u0120t\": 257", "", "token appears twice", TFC_ERR_FORMAT},
        {"\"\\u4e00\": 256", "", "outside GPT-2's byte alphabet", TFC_ERR_FORMAT},
        {"\"a\": 256", "", "token appears twice", TFC_ERR_FORMAT},
        {"\"\\ud800\": 256", "", "expected a JSON string key", TFC_ERR_FORMAT},
        {"\"x\" 256", "", "expected ':'", TFC_ERR_FORMAT},
        {"\"xy\": -3", "", "expected an id", TFC_ERR_FORMAT},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *j = tiny_encoder_json(cases[i].json_extra);
        write_text(ej, j);
        write_text(vb, cases[i].bpe);
        CHECK_ERR(tfc_tokenizer_load_gpt2(ej, vb, &t), cases[i].want, cases[i].fragment);
        free(j);
    }
    /* truncated JSON */
    json[strlen(json) / 2] = 0;
    write_text(ej, json);
    CHECK_ERR(tfc_tokenizer_load_gpt2(ej, vb, &t), TFC_ERR_FORMAT, "encoder.json");
    free(json);
    write_text(ej, "[1, 2]");
    CHECK_ERR(tfc_tokenizer_load_gpt2(ej, vb, &t), TFC_ERR_FORMAT, "does not start with a JSON object");
    write_text(ej, "{}");
    write_text(vb, "");
    CHECK_ERR(tfc_tokenizer_load_gpt2(ej, vb, &t), TFC_ERR_FORMAT, "byte 0x00 has no token");
    remove(ej);
    CHECK_ERR(tfc_tokenizer_load_gpt2(ej, vb, &t), TFC_ERR_IO, "encoder.json");
    remove(vb);
}

/* ---- loaders' memory is bounded by the file (issue #21, defect 3) ------------ */

/* A process's resident set in KiB (VmRSS or VmHWM from /proc/<pid>/status), -1 when unreadable. */
static long proc_kib(pid_t pid, const char *key) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long v = -1;
    if (!f) return -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, strlen(key)) == 0) v = strtol(line + strlen(key), NULL, 10);
    fclose(f);
    return v;
}

typedef struct bounded_load {
    const char *paths[2];
    int kind; /* 0 tiktoken, 1 native, 2 gpt2, 3 train on paths[0] as text with vocab_size 2^30 */
    tfc_status status;
    char msg[512];
    long grew_kib; /* peak RSS minus RSS before the call */
} bounded_load;

#define LOAD_KILL_KIB (512L << 10) /* a child growing past this is stopped: the bound is broken */

/*
 * Run one load in a child process and report its status, message and how
 * much its resident set grew. The parent watches the child and kills it
 * once it has grown by LOAD_KILL_KIB, so a regression fails fast instead of
 * taking gigabytes (no RLIMIT_AS: ASan reserves terabytes of address space).
 */
static void run_bounded_load(bounded_load *b) {
    int fd[2];
    b->status = TFC_ERR_INTERNAL;
    b->grew_kib = -1;
    snprintf(b->msg, sizeof b->msg, "(child reported nothing)");
    if (pipe(fd)) {
        TFC_FAIL_AT("pipe failed");
        return;
    }
    long before = proc_kib(getpid(), "VmRSS:");
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
#if !defined(__SANITIZE_ADDRESS__)
        /* Without ASan also cap the address space, so one big malloc fails instead of being granted lazily. */
        struct rlimit lim;
        lim.rlim_cur = lim.rlim_max = (rlim_t)proc_kib(getpid(), "VmSize:") * 1024 + ((rlim_t)1 << 30);
        setrlimit(RLIMIT_AS, &lim);
#endif
        long start = proc_kib(getpid(), "VmRSS:");
        tfc_tokenizer *t = NULL;
        tfc_status s;
        if (b->kind == 3) {
            s = tfc_tokenizer_new(TFC_SPLIT_GPT2, &t);
            if (s == TFC_OK) s = tfc_tokenizer_train(t, b->paths[0], strlen(b->paths[0]), 1 << 30);
        } else if (b->kind == 0) {
            s = tfc_tokenizer_load_tiktoken(b->paths[0], TFC_SPLIT_NONE, &t);
        } else if (b->kind == 1) {
            s = tfc_tokenizer_load(b->paths[0], &t);
        } else {
            s = tfc_tokenizer_load_gpt2(b->paths[0], b->paths[1], &t);
        }
        tfc_tokenizer_release(t);
        bounded_load r = *b;
        r.status = s;
        snprintf(r.msg, sizeof r.msg, "%s", tfc_last_error());
        r.grew_kib = proc_kib(getpid(), "VmHWM:") - start;
        ssize_t w = write(fd[1], &r, sizeof r);
        _exit(w == (ssize_t)sizeof r ? 0 : 1);
    }
    close(fd[1]);
    int killed = 0, st = 0;
    while (waitpid(pid, &st, WNOHANG) == 0) {
        long rss = proc_kib(pid, "VmRSS:");
        if (!killed && rss > 0 && before > 0 && rss - before > LOAD_KILL_KIB) {
            kill(pid, SIGKILL);
            killed = 1;
        }
        usleep(2000);
    }
    bounded_load r;
    if (!killed && read(fd[0], &r, sizeof r) == (ssize_t)sizeof r) *b = r;
    close(fd[0]);
    if (killed) {
        b->grew_kib = LOAD_KILL_KIB;
        snprintf(b->msg, sizeof b->msg, "killed after growing by %ld MiB", LOAD_KILL_KIB >> 10);
    }
}

/* A file of a few bytes naming a huge id is refused before the id table grows to it. */
TEST(loaders_memory_is_bounded_by_the_file) {
    const char *a = tmp_path("huge_id.a"), *bpe = tmp_path("huge_id.bpe");
    struct {
        int kind;
        const char *text, *fragment;
    } cases[] = {
        /* the 15-byte file of the issue: it used to ask for 2^30 ids (9 GiB) */
        {0, "QQ== 536870000\n", "tfc_tokenizer_load_tiktoken: '"},
        {0, "QQ== 536870000\n", "line 1: rank 536870000 is beyond what a file of 1 lines can hold"},
        {1, "tfcore-tokenizer 1\npattern none\ndirect merges\ntokens 1\n536870000 QQ==\nmerges 0\nspecials 0\nend\n",
         "line 5: id 536870000 is beyond what a file of 8 lines can hold"},
        {1, "tfcore-tokenizer 1\npattern none\ndirect merges\ntokens 0\nmerges 0\nspecials 1\n1000000 PHM+\nend\n",
         "line 7: id 1000000 is beyond"},
        {2, "{\"A\": 536870000}", "tfc_tokenizer_load_gpt2: '"},
        {2, "{\"A\": 536870000}", "id 536870000 is beyond what a file of 1 entries can hold"},
    };
    write_text(bpe, "#version: 0.2\n");
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        write_text(a, cases[i].text);
        bounded_load b = {{a, bpe}, cases[i].kind, TFC_OK, "", 0};
        run_bounded_load(&b);
        if (b.status != TFC_ERR_FORMAT || !strstr(b.msg, cases[i].fragment))
            TFC_FAIL_AT("case %zu: %s: '%s', wanted TFC_ERR_FORMAT with '%s'", i, tfc_status_name(b.status), b.msg,
                        cases[i].fragment);
        if (b.grew_kib < 0 || b.grew_kib > (16L << 10))
            TFC_FAIL_AT("case %zu: loading %zu bytes grew the process by %ld KiB", i, strlen(cases[i].text),
                        b.grew_kib);
        tfc_test_checks += 2;
    }
    remove(a);
    remove(bpe);
}

/*
 * Found by tests/fuzz/fuzz_train: the merge table was sized by vocab_size
 * alone, 16 GiB for vocab_size 2^30 on a few bytes of text. The text
 * bounds the merges it can yield; training learns what it can and succeeds.
 */
TEST(train_memory_is_bounded_by_the_text) {
    bounded_load b = {{"hello hello world"}, 3, TFC_OK, "", 0};
    run_bounded_load(&b);
    if (b.status != TFC_OK) TFC_FAIL_AT("train: %s: %s", tfc_status_name(b.status), b.msg);
    if (b.grew_kib < 0 || b.grew_kib > (16L << 10)) TFC_FAIL_AT("training grew the process by %ld KiB", b.grew_kib);
    tfc_test_checks += 2;
}

/* The bound leaves room for what real files do: special tokens far past a small vocabulary. */
TEST(loaders_accept_specials_past_the_vocabulary) {
    const char *path = tmp_path("far_special.tfctok");
    tfc_tokenizer *t, *u;
    CHECK_OK(tfc_tokenizer_new(TFC_SPLIT_GPT2, &t));
    CHECK_OK(tfc_tokenizer_add_special(t, "<|im_end|>", 100276)); /* cl100k's id, on 256 tokens */
    CHECK_OK(tfc_tokenizer_save(t, path));
    CHECK_OK(tfc_tokenizer_load(path, &u));
    const char *bytes;
    size_t len;
    int32_t sp = 0, n = 0;
    CHECK_OK(tfc_tokenizer_token_bytes(u, 100276, &bytes, &len, &sp));
    CHECK(sp == 1 && len == 10 && memcmp(bytes, "<|im_end|>", 10) == 0);
    CHECK_OK(tfc_tokenizer_vocab_size(u, &n));
    CHECK(n == 100277);
    tfc_tokenizer_release(t);
    tfc_tokenizer_release(u);
    remove(path);
}

TEST(load_rejects_bad_native_files) {
    const char *path = tmp_path("t.tfctok");
    tfc_tokenizer *t;
    CHECK_OK(tfc_tokenizer_new(TFC_SPLIT_GPT2, &t));
    CHECK_OK(tfc_tokenizer_train(t, "hello hello hello world world", 29, 262));
    CHECK_OK(tfc_tokenizer_add_special(t, "<eot>", 262));
    CHECK_OK(tfc_tokenizer_save(t, path));
    tfc_tokenizer_release(t);
    FILE *f = fopen(path, "rb");
    char good[1 << 14];
    size_t n = fread(good, 1, sizeof good - 1, f);
    fclose(f);
    good[n] = 0;
    CHECK(strncmp(good, "tfcore-tokenizer 1\npattern gpt2\ndirect merges\ntokens 262\n", 56) == 0);

    /* each case replaces the first occurrence of `from` by `to` in the good file */
    struct {
        const char *from, *to, *fragment;
        tfc_status want;
    } cases[] = {
        {"tfcore-tokenizer 1", "tfcore-tokenizer 7", "format version 7", TFC_ERR_VERSION},
        {"tfcore-tokenizer 1", "tokenizer 1", "not a tfcore tokenizer file", TFC_ERR_FORMAT},
        {"pattern gpt2", "pattern gpt3", "line 2: expected 'pattern", TFC_ERR_FORMAT},
        {"direct merges", "direct some", "line 3", TFC_ERR_FORMAT},
        {"tokens 262", "tokens 263", "line 267: expected '<id> <base64>'", TFC_ERR_FORMAT},
        {"tokens 262", "tokens x", "line 4: expected 'tokens <count>'", TFC_ERR_FORMAT},
        {"\n1 AQ==\n", "\n0 AQ==\n", "line 6: id appears twice", TFC_ERR_FORMAT},
        {"\n1 AQ==\n", "\n1 A!==\n", "bad base64", TFC_ERR_FORMAT},
        {"\n1 AQ==\n", "\n1 AQ== 5\n", "expected '<id> <base64>'", TFC_ERR_FORMAT},
        {"merges 6\n256", "merges 6\n999", "merges are not in rank order", TFC_ERR_FORMAT},
        {"merges 6\n256 101 108", "merges 6\n256 101 9999", "merge refers to an unknown token", TFC_ERR_FORMAT},
        {"merges 6\n256 101 108", "merges 6\n256 101 109", "merged token's bytes are not left's + right's",
         TFC_ERR_FORMAT},
        {"merges 6\n256 101 108 256", "merges 6\n256 101 108", "expected '<rank> <left> <right> <id>'", TFC_ERR_FORMAT},
        {"specials 1\n262", "specials 1\n100", "line 275: id appears twice", TFC_ERR_FORMAT},
        {"end\n", "end\nmore\n", "text after 'end'", TFC_ERR_FORMAT},
        {"end\n", "", "file ends early (truncated?)", TFC_ERR_FORMAT},
    };
    char buf[1 << 14];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *at = strstr(good, cases[i].from);
        if (!at) {
            TFC_FAIL_AT("case %zu: '%s' not in the saved file", i, cases[i].from);
            continue;
        }
        size_t pre = (size_t)(at - good);
        snprintf(buf, sizeof buf, "%.*s%s%s", (int)pre, good, cases[i].to, at + strlen(cases[i].from));
        write_text(path, buf);
        t = (tfc_tokenizer *)0x1;
        CHECK_ERR(tfc_tokenizer_load(path, &t), cases[i].want, cases[i].fragment);
        CHECK(t == (tfc_tokenizer *)0x1);
    }
    /* truncated anywhere: never a crash, always a clear error */
    for (size_t cut = 0; cut + 5 < n; cut += 97) {
        write_file(path, good, cut);
        CHECK_ERR(tfc_tokenizer_load(path, &t), TFC_ERR_FORMAT, "line");
    }
    /* a NUL byte */
    memcpy(buf, good, n);
    buf[30] = 0;
    write_file(path, buf, n);
    CHECK_ERR(tfc_tokenizer_load(path, &t), TFC_ERR_FORMAT, "NUL byte");
    remove(path);
    CHECK_ERR(tfc_tokenizer_load(path, &t), TFC_ERR_IO, "cannot open");
    CHECK_ERR(tfc_tokenizer_save(NULL, path), TFC_ERR_INVALID_ARG, "tok");
    CHECK_OK(tfc_tokenizer_new(TFC_SPLIT_NONE, &t));
    CHECK_ERR(tfc_tokenizer_save(t, "/nonexistent-dir/x.tfctok"), TFC_ERR_IO, "cannot create");
    tfc_tokenizer_release(t);
}

/* ---- threads -------------------------------------------------------------- */

typedef struct job {
    const tfc_tokenizer *t;
    const char *text;
    size_t n;
    int32_t *ids;
    size_t n_ids;
    tfc_status s;
} job;

static void *encode_job(void *arg) {
    job *j = arg;
    for (int rep = 0; rep < 5; rep++) {
        tfc_free(j->ids);
        j->s = tfc_tokenizer_encode(j->t, j->text, j->n, TFC_SPECIAL_AS_TEXT, &j->ids, &j->n_ids);
    }
    return NULL;
}

TEST(encode_from_many_threads_on_one_tokenizer) {
    char *text = make_ascii_text(50000);
    tfc_tokenizer *t;
    CHECK_OK(tfc_tokenizer_new(TFC_SPLIT_CL100K, &t));
    CHECK_OK(tfc_tokenizer_train(t, text, 50000, 600));
    int32_t *want;
    size_t n_want;
    CHECK_OK(tfc_tokenizer_encode(t, text, 50000, TFC_SPECIAL_AS_TEXT, &want, &n_want));
    job jobs[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (job){t, text, 50000, NULL, 0, TFC_OK};
        pthread_create(&th[i], NULL, encode_job, &jobs[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK(jobs[i].s == TFC_OK && jobs[i].n_ids == n_want && memcmp(jobs[i].ids, want, n_want * 4) == 0);
        tfc_free(jobs[i].ids);
    }
    tfc_free(want);
    tfc_tokenizer_release(t);
    free(text);
}

/* ---- the ASCII fast path of the split against PCRE2 alone ----------------- */

static size_t split_all(const tfc_splitter *sp, const uint8_t *s, size_t n, int pcre2_only, size_t *ends) {
    split_iter it;
    if (split_iter_init("test", &it, sp, s, n) != TFC_OK) return 0;
    it.pcre2_only = pcre2_only;
    size_t a, b, k = 0;
    while (split_next("test", &it, &a, &b) > 0) ends[k++] = b;
    split_iter_free(&it);
    return k;
}

TEST(ascii_fast_path_splits_like_pcre2) {
    /* pieces chosen to hit every branch: contractions in all cases, runs of each
       class, \r\n, digits up to and past 3, non-ASCII letters/digits/spaces next
       to ASCII, invalid bytes */
    static const char *pieces[] = {"'s",
                                   "'S",
                                   "'t",
                                   "'re",
                                   "'RE",
                                   "'Ve",
                                   "'ll",
                                   "'LL",
                                   "'d",
                                   "'m",
                                   "'x",
                                   "'",
                                   "''",
                                   "\xc5\xbf",
                                   "a",
                                   "Zz",
                                   "9",
                                   "12",
                                   "1234",
                                   " ",
                                   "  ",
                                   "\t",
                                   "\n",
                                   "\r\n",
                                   "\r",
                                   "\x0b",
                                   "\x0c",
                                   "\x1c",
                                   "\x1f",
                                   ".",
                                   "!!",
                                   "-",
                                   "\xc2\x85",
                                   "\xc2\xa0",
                                   "\xc3\xa9",
                                   "\xd9\xa3",
                                   "\xe3\x80\x80",
                                   "\xef\xbb\xbf",
                                   "\xe1\xa0\x8e",
                                   "\xff",
                                   "\xc3",
                                   "\x80",
                                   "\xf0\x9f\x98\x80",
                                   "\x00",
                                   "\x7f"};
    int32_t patterns[] = {TFC_SPLIT_GPT2, TFC_SPLIT_CL100K, TFC_SPLIT_LLAMA3, TFC_SPLIT_QWEN2};
    uint8_t text[400];
    size_t e1[400], e2[400];
    for (int p = 0; p < 4; p++) {
        tfc_splitter sp;
        CHECK_OK(splitter_init("test", &sp, patterns[p]));
        int bad = 0;
        for (int rep = 0; rep < 20000; rep++) {
            size_t n = 0;
            int count = 1 + (int)(rnd() % 12);
            for (int k = 0; k < count; k++) {
                const char *piece = pieces[rnd() % (sizeof pieces / sizeof *pieces)];
                size_t l = strlen(piece);
                if (l == 0) l = 1; /* "\x00" */
                if (n + l > sizeof text) break;
                memcpy(text + n, piece, l);
                n += l;
            }
            size_t k1 = split_all(&sp, text, n, 0, e1), k2 = split_all(&sp, text, n, 1, e2);
            if ((k1 != k2 || memcmp(e1, e2, k1 * sizeof *e1) != 0) && bad++ < 3) {
                char hex[1300];
                size_t h = 0;
                for (size_t i = 0; i < n && h + 4 < sizeof hex; i++)
                    h += (size_t)snprintf(hex + h, sizeof hex - h, "%02x", text[i]);
                TFC_FAIL_AT("pattern %d: fast path and PCRE2 split %s differently (%zu vs %zu chunks)",
                            (int)patterns[p], hex, k1, k2);
            }
        }
        CHECK(bad == 0);
        splitter_free(&sp);
    }
}
