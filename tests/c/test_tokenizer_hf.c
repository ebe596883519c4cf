/*
 * tfc_tokenizer_load_hf_json on small tokenizer.json files written here,
 * with ids derived by hand from the rules of Hugging Face's tokenizers
 * (the BPE model's merge order, byte fallback, the unknown token,
 * Metaspace, the Prepend/Replace normalizer, added tokens, the template),
 * NFC against the Unicode tables' own examples, the Llama 3 / Qwen2 split
 * patterns, and every refusal of a file the library cannot honour. The
 * comparison with Hugging Face's implementation on the real vocabularies
 * is tests/tokenizer/compare_hf.sh.
 */
#include <stdarg.h>
#include <unistd.h>

#include "tfc_test.h"
#include "tokenizer/nfc.h"
#include "tokenizer/split.h"

static const char *tmp_path(const char *name) {
    static char p[8][256];
    static int k;
    char *s = p[k++ % 8];
    snprintf(s, 256, "/tmp/tfc_tokhf_%d_%s", (int)getpid(), name);
    return s;
}

static const char *write_json(const char *name, const char *text) {
    const char *path = tmp_path(name);
    FILE *f = fopen(path, "wb");
    if (!f) tfc_test_bail();
    fputs(text, f);
    fclose(f);
    return path;
}

/* text with the first `from` replaced by `to` (static buffer) */
static const char *edit(const char *text, const char *from, const char *to) {
    static char out[1 << 16];
    const char *at = strstr(text, from);
    if (!at || strlen(text) + strlen(to) >= sizeof out) {
        fprintf(stderr, "edit: '%s' not in the base file\n", from);
        tfc_test_bail();
    }
    size_t a = (size_t)(at - text);
    memcpy(out, text, a);
    strcpy(out + a, to);
    strcat(out, at + strlen(from));
    return out;
}

static tfc_tokenizer *load(const char *name, const char *json, uint32_t flags) {
    tfc_tokenizer *t = NULL;
    const char *path = write_json(name, json);
    tfc_status s = tfc_tokenizer_load_hf_json(path, flags, &t);
    remove(path);
    if (s != TFC_OK) {
        TFC_FAIL_AT("loading %s: %s", name, tfc_last_error());
        tfc_test_bail();
    }
    return t;
}

/* encode(text) in mode must be exactly want[0..n) */
static void check_ids(const tfc_tokenizer *t, const char *text, int32_t mode, const int32_t *want, size_t n) {
    int32_t *ids = NULL;
    size_t got = 0;
    tfc_test_checks++;
    tfc_status s = tfc_tokenizer_encode(t, text, strlen(text), mode, &ids, &got);
    if (s != TFC_OK) {
        TFC_FAIL_AT("encode '%s': %s", text, tfc_last_error());
        return;
    }
    int same = got == n && (n == 0 || memcmp(ids, want, n * sizeof *ids) == 0);
    if (!same) {
        char buf[512];
        size_t k = 0;
        for (size_t i = 0; i < got && k + 16 < sizeof buf; i++)
            k += (size_t)snprintf(buf + k, sizeof buf - k, " %d", ids[i]);
        buf[k] = 0;
        TFC_FAIL_AT("encode '%s' gave [%s ] (%zu ids, wanted %zu)", text, buf, got, n);
    }
    tfc_free(ids);
}
#define IDS(t, text, mode, ...)                                          \
    do {                                                                 \
        static const int32_t want_[] = {__VA_ARGS__};                    \
        check_ids(t, text, mode, want_, sizeof want_ / sizeof want_[0]); \
    } while (0)
#define NO_IDS(t, text, mode) check_ids(t, text, mode, NULL, 0)

static void check_decode(const tfc_tokenizer *t, const int32_t *ids, size_t n, int utf8, const char *want,
                         size_t want_len) {
    char *s = NULL;
    size_t len = 0;
    tfc_test_checks++;
    tfc_status st = utf8 ? tfc_tokenizer_decode_utf8(t, ids, n, &s, &len) : tfc_tokenizer_decode(t, ids, n, &s, &len);
    if (st != TFC_OK)
        TFC_FAIL_AT("decode: %s", tfc_last_error());
    else if (len != want_len || memcmp(s, want, len) != 0)
        TFC_FAIL_AT("decode gave '%.*s' (%zu bytes), wanted '%s' (%zu bytes)", (int)len, s, len, want, want_len);
    tfc_free(s);
}
#define DECODES(t, utf8, want, ...)                                                        \
    do {                                                                                   \
        static const int32_t ids_[] = {__VA_ARGS__};                                       \
        check_decode(t, ids_, sizeof ids_ / sizeof ids_[0], utf8, want, sizeof(want) - 1); \
    } while (0)

/* ---- a character-level BPE: the merge order, the unknown token, ignore_merges --------------------- */

static const char *tiny(const char *unk, const char *fuse, const char *ignore, const char *merges) {
    static char buf[2048];
    snprintf(buf, sizeof buf,
             "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,\"added_tokens\":[],\"normalizer\":null,"
             "\"pre_tokenizer\":null,\"post_processor\":null,\"decoder\":{\"type\":\"Fuse\"},"
             "\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":%s,\"continuing_subword_prefix\":null,"
             "\"end_of_word_suffix\":null,\"fuse_unk\":%s,\"byte_fallback\":false,\"ignore_merges\":%s,"
             "\"vocab\":{\"u\":0,\"a\":1,\"b\":2,\"c\":3,\"ab\":4,\"bc\":5,\"abc\":6},\"merges\":%s}}",
             unk, fuse, ignore, merges);
    return buf;
}

TEST(hf_bpe_merge_order_by_hand) {
    /* "abc": (a,b) has rank 0, (b,c) rank 1: ab first, then (ab,c) has no rule. x and d are unknown. */
    tfc_tokenizer *t = load("m1", tiny("\"u\"", "false", "false", "[\"a b\",\"b c\"]"), 0);
    IDS(t, "abcxxd", TFC_SPECIAL_ALLOWED, 4, 3, 0, 0, 0);
    DECODES(t, 1, "abcuuu", 4, 3, 0, 0, 0);
    tfc_tokenizer_release(t);
    /* the other order: bc first */
    t = load("m2", tiny("\"u\"", "false", "false", "[\"b c\",\"a b\"]"), 0);
    IDS(t, "abcxxd", TFC_SPECIAL_ALLOWED, 1, 5, 0, 0, 0);
    tfc_tokenizer_release(t);
    /* a pair listed twice keeps its later rank (2, after b c): tokenizers builds a map from the list */
    t = load("m3", tiny("\"u\"", "false", "false", "[\"a b\",\"b c\",\"a b\"]"), 0);
    IDS(t, "abc", TFC_SPECIAL_ALLOWED, 1, 5);
    int32_t n = 0;
    CHECK_OK(tfc_tokenizer_n_merges(t, &n));
    CHECK(n == 2);
    tfc_tokenizer_release(t);
    /* "#version" lines are skipped and take no rank; the pair form reads the same */
    t = load("m4", tiny("\"u\"", "false", "false", "[\"#version: 0.2\",\"b c\",\"a b\"]"), 0);
    IDS(t, "abc", TFC_SPECIAL_ALLOWED, 1, 5);
    int32_t l, r, id, rank;
    CHECK_OK(tfc_tokenizer_get_merge(t, 0, &l, &r, &id, &rank));
    CHECK(l == 2 && r == 3 && id == 5 && rank == 0);
    tfc_tokenizer_release(t);
    t = load("m5", tiny("\"u\"", "false", "false", "[[\"a\",\"b\"],[\"b\",\"c\"]]"), 0);
    IDS(t, "abc", TFC_SPECIAL_ALLOWED, 4, 3);
    tfc_tokenizer_release(t);
    /* fuse_unk: a run of unknown characters is one unknown token */
    t = load("m6", tiny("\"u\"", "true", "false", "[\"a b\"]"), 0);
    IDS(t, "abcxxdab", TFC_SPECIAL_ALLOWED, 4, 3, 0, 4);
    IDS(t, "x", TFC_SPECIAL_ALLOWED, 0);
    tfc_tokenizer_release(t);
    /* no unknown token and no byte fallback: tokenizers drops the character, so a and b meet and merge */
    t = load("m7", tiny("null", "false", "false", "[\"a b\"]"), 0);
    IDS(t, "axb", TFC_SPECIAL_ALLOWED, 4);
    NO_IDS(t, "x", TFC_SPECIAL_ALLOWED);
    tfc_tokenizer_release(t);
    /* ignore_merges: a word that is itself a token maps to it, though no merge makes it */
    t = load("m8", tiny("\"u\"", "false", "true", "[\"a b\",\"b c\"]"), 0);
    IDS(t, "abc", TFC_SPECIAL_ALLOWED, 6);
    IDS(t, "abcc", TFC_SPECIAL_ALLOWED, 4, 3, 3);
    tfc_tokenizer_release(t);
    t = load("m9", tiny("\"u\"", "false", "false", "[\"a b\",\"b c\"]"), 0);
    IDS(t, "abc", TFC_SPECIAL_ALLOWED, 4, 3);
    tfc_tokenizer_release(t);
    /* the empty text has no ids */
    t = load("m10", tiny("\"u\"", "false", "false", "[]"), 0);
    NO_IDS(t, "", TFC_SPECIAL_ALLOWED);
    IDS(t, "ab", TFC_SPECIAL_ALLOWED, 1, 2);
    tfc_tokenizer_release(t);
}

/* ---- byte-level: Llama 3's split, ByteLevel, the template ------------------------------------------ */

/* The character byte b is written as in GPT-2's alphabet, JSON-escaped, appended to out. */
static size_t alphabet_char(int b, char *out) {
    int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    static int extra[256];
    static int ready;
    if (!ready) {
        int k = 0;
        for (int i = 0; i < 256; i++) {
            int p = (i >= '!' && i <= '~') || (i >= 0xA1 && i <= 0xAC) || (i >= 0xAE && i <= 0xFF);
            extra[i] = p ? -1 : k++;
        }
        ready = 1;
    }
    unsigned cp = printable ? (unsigned)b : 256u + (unsigned)extra[b];
    if (cp == '"' || cp == '\\') {
        out[0] = '\\';
        out[1] = (char)cp;
        return 2;
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    out[0] = (char)(0xC0 | cp >> 6);
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}

/*
 * 256 byte tokens (id = byte), "Hi" 256, " t" 257 ("Ġt"), added <s> 258 and </s> 259; merges "H i", "Ġ t";
 * pre_tokenizer (a JSON value); template <s> A </s>.
 */
static const char *byte_level(const char *pre_tokenizer) {
    static char buf[1 << 15];
    size_t k = 0;
    k += (size_t)snprintf(buf + k, sizeof buf - k,
                          "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,\"added_tokens\":["
                          "{\"id\":258,\"content\":\"<s>\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,"
                          "\"normalized\":false,\"special\":true},"
                          "{\"id\":259,\"content\":\"</s>\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,"
                          "\"normalized\":false,\"special\":true}],\"normalizer\":null,\"pre_tokenizer\":%s,"
                          "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":"
                          "\"<s>\",\"type_id\":0}},{\"Sequence\":{\"id\":\"A\",\"type_id\":0}},{\"SpecialToken\":{"
                          "\"id\":\"</s>\",\"type_id\":0}}],\"pair\":[],\"special_tokens\":{\"<s>\":{\"id\":\"<s>\","
                          "\"ids\":[258],\"tokens\":[\"<s>\"]},\"</s>\":{\"id\":\"</s>\",\"ids\":[259],\"tokens\":["
                          "\"</s>\"]}}},\"decoder\":{\"type\":\"ByteLevel\",\"add_prefix_space\":true,"
                          "\"trim_offsets\":true,\"use_regex\":true},\"model\":{\"type\":\"BPE\",\"dropout\":null,"
                          "\"unk_token\":null,\"continuing_subword_prefix\":null,\"end_of_word_suffix\":null,"
                          "\"fuse_unk\":false,\"byte_fallback\":false,\"ignore_merges\":false,\"vocab\":{",
                          pre_tokenizer);
    for (int b = 0; b < 256; b++) {
        buf[k++] = '"';
        k += alphabet_char(b, buf + k);
        k += (size_t)snprintf(buf + k, sizeof buf - k, "\":%d,", b);
    }
    k += (size_t)snprintf(buf + k, sizeof buf - k,
                          "\"Hi\":256,\"\xC4\xA0t\":257},\"merges\":[\"H i\",\"\xC4\xA0 t\"]}}");
    return buf;
}

#define LLAMA3_SPLIT                                                                                                \
    "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(?i:'s|'t|'re|'ve|'m|'" \
    "ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}{1,3}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[" \
    "\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"},\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\","   \
    "\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":false}]}"
#define GPT2_BYTE_LEVEL "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":true}"

TEST(hf_byte_level_by_hand) {
    tfc_tokenizer *t = load("b1", byte_level(LLAMA3_SPLIT), 0);
    /* chunks "Hi", " there", " ", "123", "456": Hi merges, " t" merges, the rest are bytes */
    IDS(t, "Hi there 123456", TFC_SPECIAL_ALLOWED, 256, 257, 'h', 'e', 'r', 'e', ' ', '1', '2', '3', '4', '5', '6');
    /* a digit run is cut every 3 digits: "1234" is "123" + "4", so a merge across them cannot apply */
    IDS(t, "<s>Hi</s>", TFC_SPECIAL_ALLOWED, 258, 256, 259);
    IDS(t, "<s>Hi", TFC_SPECIAL_AS_TEXT, '<', 's', '>', 256);
    CHECK_ERR(tfc_tokenizer_encode(t, "x<s>", 4, TFC_SPECIAL_DISALLOWED, &(int32_t *){NULL}, &(size_t){0}),
              TFC_ERR_INVALID_ARG, "special token '<s>' (id 258)");
    DECODES(t, 0, "Hi there", 256, 257, 'h', 'e', 'r', 'e');
    DECODES(t, 1, "<s>Hi</s>", 258, 256, 259);
    DECODES(t, 1,
            "\xEF\xBF\xBD"
            "A",
            0xC3, 'A'); /* an ill-formed byte becomes U+FFFD */
    const char *bytes;
    size_t len;
    int32_t special;
    CHECK_OK(tfc_tokenizer_token_bytes(t, 257, &bytes, &len, &special));
    CHECK(len == 2 && memcmp(bytes, " t", 2) == 0 && special == 0);
    CHECK_OK(tfc_tokenizer_token_bytes(t, 258, &bytes, &len, &special));
    CHECK(len == 3 && memcmp(bytes, "<s>", 3) == 0 && special == 1);
    int32_t v;
    CHECK_OK(tfc_tokenizer_vocab_size(t, &v));
    CHECK(v == 260);
    /* ill-formed input: each maximal ill-formed subpart is read as U+FFFD (EF BF BD, three byte tokens) */
    IDS(t, "a\xFF", TFC_SPECIAL_ALLOWED, 'a', 0xEF, 0xBF, 0xBD);
    /* the file holds the tokenizer: no saving, no new special tokens */
    CHECK_ERR(tfc_tokenizer_save(t, tmp_path("saved")), TFC_ERR_UNSUPPORTED, "tokenizer.json");
    CHECK_ERR(tfc_tokenizer_add_special(t, "<x>", 300), TFC_ERR_UNSUPPORTED, "added_tokens");
    tfc_tokenizer_release(t);

    /* with TFC_TOKENIZER_ADD_SPECIAL the template's tokens go around every text, the empty one too */
    t = load("b2", byte_level(LLAMA3_SPLIT), TFC_TOKENIZER_ADD_SPECIAL);
    IDS(t, "Hi", TFC_SPECIAL_ALLOWED, 258, 256, 259);
    IDS(t, "", TFC_SPECIAL_ALLOWED, 258, 259);
    tfc_tokenizer_release(t);

    /* GPT-2's ByteLevel regex: " 123456" is one chunk there */
    t = load("b3", byte_level(GPT2_BYTE_LEVEL), 0);
    IDS(t, "Hi there", TFC_SPECIAL_ALLOWED, 256, 257, 'h', 'e', 'r', 'e');
    tfc_tokenizer_release(t);
    /* no pre-tokenizer split at all (ByteLevel without its regex): " t" merges across "i t" */
    t = load("b4", byte_level("{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":false}"), 0);
    IDS(t, "Hi t", TFC_SPECIAL_ALLOWED, 256, 257);
    tfc_tokenizer_release(t);
}

/* ---- SentencePiece-style: normalizer, Metaspace, byte fallback, Strip ------------------------------ */

/*
 * <unk> 0, <s> 1, </s> 2, <0x00>..<0xFF> 3..258, "▁" 259, "a" 260, "b" 261, "▁a" 262, "ab" 263, "▁ab" 264;
 * merges "▁ a", "a b", "▁a b". normalizer and pre_tokenizer are JSON values.
 */
static const char *sentencepiece(const char *normalizer, const char *pre_tokenizer, const char *byte_fallback) {
    static char buf[1 << 15];
    size_t k = 0;
    k += (size_t)snprintf(
        buf + k, sizeof buf - k,
        "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,\"added_tokens\":["
        "{\"id\":0,\"content\":\"<unk>\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,\"normalized\":false,"
        "\"special\":true},{\"id\":1,\"content\":\"<s>\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,"
        "\"normalized\":false,\"special\":true},{\"id\":2,\"content\":\"</s>\",\"single_word\":false,\"lstrip\":false,"
        "\"rstrip\":false,\"normalized\":false,\"special\":true}],\"normalizer\":%s,\"pre_tokenizer\":%s,"
        "\"post_processor\":null,\"decoder\":{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Replace\",\"pattern\":"
        "{\"String\":\"\xE2\x96\x81\"},\"content\":\" \"},{\"type\":\"ByteFallback\"},{\"type\":\"Fuse\"},{\"type\":"
        "\"Strip\",\"content\":\" \",\"start\":1,\"stop\":0}]},\"model\":{\"type\":\"BPE\",\"dropout\":null,"
        "\"unk_token\":\"<unk>\",\"continuing_subword_prefix\":null,\"end_of_word_suffix\":null,\"fuse_unk\":true,"
        "\"byte_fallback\":%s,\"vocab\":{\"<unk>\":0,\"<s>\":1,\"</s>\":2,",
        normalizer, pre_tokenizer, byte_fallback);
    for (int b = 0; b < 256; b++) k += (size_t)snprintf(buf + k, sizeof buf - k, "\"<0x%02X>\":%d,", b, 3 + b);
    k += (size_t)snprintf(buf + k, sizeof buf - k,
                          "\"\xE2\x96\x81\":259,\"a\":260,\"b\":261,\"\xE2\x96\x81"
                          "a\":262,\"ab\":263,"
                          "\"\xE2\x96\x81"
                          "ab\":264},\"merges\":[\"\xE2\x96\x81 a\",\"a b\",\"\xE2\x96\x81"
                          "a b\"]}}");
    return buf;
}

#define PREPEND_REPLACE                                                                                      \
    "{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Prepend\",\"prepend\":\"\xE2\x96\x81\"},{\"type\":" \
    "\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"\xE2\x96\x81\"}]}"
#define B(x) (3 + (x)) /* the <0xNN> token of byte x */

TEST(hf_sentencepiece_by_hand) {
    tfc_tokenizer *t = load("s1", sentencepiece(PREPEND_REPLACE, "null", "true"), 0);
    /* "▁ab": (▁,a) rank 0 -> ▁a; (▁a,b) rank 2 -> ▁ab */
    IDS(t, "ab", TFC_SPECIAL_ALLOWED, 264);
    /* "▁ba": no rule for (▁,b) or (b,a) */
    IDS(t, "ba", TFC_SPECIAL_ALLOWED, 259, 261, 260);
    /* " ab": "▁▁ab": (▁,▁) has no rule; then ▁ab */
    IDS(t, " ab", TFC_SPECIAL_ALLOWED, 259, 264);
    /* é is not in the vocabulary: its bytes C3 A9 */
    IDS(t, "\xC3\xA9", TFC_SPECIAL_ALLOWED, 259, B(0xC3), B(0xA9));
    /* every piece between added tokens is normalized on its own: "▁" before "ab" again */
    IDS(t, "<s>ab", TFC_SPECIAL_ALLOWED, 1, 264);
    IDS(t, "ab</s>ab", TFC_SPECIAL_ALLOWED, 264, 2, 264);
    /* as text "<s>" is characters, each outside the vocabulary */
    IDS(t, "<s>ab", TFC_SPECIAL_AS_TEXT, 259, B('<'), B('s'), B('>'), 263);
    /* decoding: "▁" is a space, one leading space stripped, byte tokens their bytes */
    DECODES(t, 1, "ab ab", 264, 264);
    DECODES(t, 1, "\xC3\xA9", 259, B(0xC3), B(0xA9));
    DECODES(t, 1, "<s> ab", 1, 264);
    DECODES(t, 0, "a", B(' '), 260); /* the stripped space came from a byte token: gone all the same */
    /* a run of byte tokens that is ill-formed as a whole: U+FFFD for each (tokenizers' ByteFallback) */
    DECODES(t, 1, "\xEF\xBF\xBD\xEF\xBF\xBD", B(0xFF), B('A'));
    DECODES(t, 0,
            "\xFF"
            "A",
            B(0xFF), B('A'));
    DECODES(t, 1,
            "\xEF\xBF\xBD"
            "ab",
            B(0xE2), 263);
    tfc_tokenizer_release(t);

    /* Metaspace, "first": the first piece only, and not when it already starts with a space */
    t = load("s2",
             sentencepiece("null",
                           "{\"type\":\"Metaspace\",\"replacement\":\"\xE2\x96\x81\","
                           "\"prepend_scheme\":\"first\",\"split\":false}",
                           "true"),
             0);
    IDS(t, "ab", TFC_SPECIAL_ALLOWED, 264);
    IDS(t, " ab", TFC_SPECIAL_ALLOWED, 264);
    IDS(t, "<s>ab", TFC_SPECIAL_ALLOWED, 1, 263);
    IDS(t, "ab ab", TFC_SPECIAL_ALLOWED, 264, 264);
    tfc_tokenizer_release(t);
    /* "always", split: every piece, and words cut before each "▁" */
    t = load("s3",
             sentencepiece("null",
                           "{\"type\":\"Metaspace\",\"replacement\":\"\xE2\x96\x81\","
                           "\"prepend_scheme\":\"always\",\"split\":true}",
                           "true"),
             0);
    IDS(t, "<s>ab", TFC_SPECIAL_ALLOWED, 1, 264);
    IDS(t, "ab  ab", TFC_SPECIAL_ALLOWED, 264, 259, 264);
    tfc_tokenizer_release(t);
    /* without byte fallback unknown characters are <unk>, a run of them one */
    t = load("s4", sentencepiece(PREPEND_REPLACE, "null", "false"), 0);
    IDS(t,
        "a\xC3\xA9\xC3\xA9"
        "b",
        TFC_SPECIAL_ALLOWED, 262, 0, 261);
    tfc_tokenizer_release(t);
}

/* ---- NFC ----------------------------------------------------------------------------------------------- */

static void check_nfc(const char *in, const char *want) {
    uint8_t *out = NULL;
    size_t n = 0;
    int r = tok_nfc((const uint8_t *)in, strlen(in), &out, &n);
    tfc_test_checks++;
    if (r < 0) {
        TFC_FAIL_AT("tok_nfc: out of memory");
        return;
    }
    const char *got = r ? (const char *)out : in;
    size_t gl = r ? n : strlen(in);
    if (gl != strlen(want) || memcmp(got, want, gl) != 0)
        TFC_FAIL_AT("NFC of '%s' is '%.*s', wanted '%s'", in, (int)gl, got, want);
    free(out);
}

TEST(hf_nfc_by_the_unicode_tables) {
    check_nfc("e\xCC\x81", "\xC3\xA9");                                /* e + U+0301 -> é */
    check_nfc("\xE2\x84\xAB", "\xC3\x85");                             /* U+212B ANGSTROM SIGN: a singleton -> Å */
    check_nfc("A\xCC\x8A", "\xC3\x85");                                /* A + ring above */
    check_nfc("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8", "\xEA\xB0\x81"); /* Hangul L V T -> U+AC01 */
    check_nfc("\xEA\xB0\x80\xE1\x86\xA8", "\xEA\xB0\x81");             /* LV + T */
    check_nfc("a\xCC\x87\xCC\xA3", "\xE1\xBA\xA1\xCC\x87"); /* reordered: dot below (220) first, then composed */
    check_nfc("x\xCC\xA3\xCC\x87", "\xE1\xBA\x8B\xCC\xA3"); /* x + dot above composes past the dot below */
    check_nfc("o\xCC\x88\xCC\x84", "\xC8\xAB");             /* two steps: ö, then ȫ */
    check_nfc("\xE0\xA5\x98", "\xE0\xA4\x95\xE0\xA4\xBC");  /* U+0958: a composition exclusion stays apart */
    check_nfc("\xCD\x84", "\xCC\x88\xCC\x81");              /* U+0344: a non-starter decomposition */
    check_nfc("already NFC: caf\xC3\xA9", "already NFC: caf\xC3\xA9");
    uint8_t *out = (uint8_t *)1;
    size_t n;
    CHECK(tok_nfc((const uint8_t *)"plain ascii", 11, &out, &n) == 0); /* nothing allocated */
}

/* ---- Llama 3's and Qwen2's patterns --------------------------------------------------------------------- */

static size_t chunks(int32_t pattern, const char *text, size_t *ends, int pcre2_only) {
    tfc_splitter sp;
    if (splitter_init("test", &sp, pattern) != TFC_OK) return 0;
    split_iter it;
    size_t n = strlen(text), a, b, k = 0;
    if (split_iter_init("test", &it, &sp, (const uint8_t *)text, n) == TFC_OK) {
        it.pcre2_only = pcre2_only;
        while (split_next("test", &it, &a, &b) > 0) ends[k++] = b;
        split_iter_free(&it);
    }
    splitter_free(&sp);
    return k;
}

static void check_chunks(int32_t pattern, const char *text, const size_t *want, size_t n_want) {
    for (int pcre2_only = 0; pcre2_only < 2; pcre2_only++) {
        size_t ends[64];
        size_t k = chunks(pattern, text, ends, pcre2_only);
        tfc_test_checks++;
        if (k != n_want || memcmp(ends, want, k * sizeof *ends) != 0)
            TFC_FAIL_AT("pattern %d (%s) splits '%s' into %zu chunks, wanted %zu", (int)pattern,
                        pcre2_only ? "PCRE2" : "fast path", text, k, n_want);
    }
}
#define CHUNKS(p, text, ...)                                 \
    do {                                                     \
        static const size_t w_[] = {__VA_ARGS__};            \
        check_chunks(p, text, w_, sizeof w_ / sizeof w_[0]); \
    } while (0)

TEST(hf_split_patterns_by_hand) {
    /* cl100k takes a whitespace run that ends the text whole (\s++$); Llama 3 cuts it after its last newline */
    CHUNKS(TFC_SPLIT_CL100K, "a \n  ", 1, 5);
    CHUNKS(TFC_SPLIT_LLAMA3, "a \n  ", 1, 3, 5);
    CHUNKS(TFC_SPLIT_LLAMA3, "a  b", 1, 2, 4);
    CHUNKS(TFC_SPLIT_LLAMA3, "x\r\n\r\ny", 1, 5, 6);
    CHUNKS(TFC_SPLIT_LLAMA3, "1234567", 3, 6, 7);
    CHUNKS(TFC_SPLIT_LLAMA3, "it's IT'S", 2, 4, 7, 9);
    /* Qwen2: one digit per chunk */
    CHUNKS(TFC_SPLIT_QWEN2, "1234 x", 1, 2, 3, 4, 6);
    CHUNKS(TFC_SPLIT_QWEN2, "a \n  ", 1, 3, 5);
    /* the new patterns train, and the native format saves and loads them */
    static const char text[] = "It's 12345 tokens, isn't it?\n\n  Yes: 678 more  \n";
    for (int32_t p = TFC_SPLIT_LLAMA3; p <= TFC_SPLIT_QWEN2; p++) {
        tfc_tokenizer *t, *back;
        CHECK_OK(tfc_tokenizer_new(p, &t));
        CHECK_OK(tfc_tokenizer_train(t, text, sizeof text - 1, 280));
        const char *path = tmp_path(p == TFC_SPLIT_LLAMA3 ? "native_llama3" : "native_qwen2");
        CHECK_OK(tfc_tokenizer_save(t, path));
        CHECK_OK(tfc_tokenizer_load(path, &back));
        int32_t *a, *b;
        size_t na, nb;
        CHECK_OK(tfc_tokenizer_encode(t, text, sizeof text - 1, TFC_SPECIAL_AS_TEXT, &a, &na));
        CHECK_OK(tfc_tokenizer_encode(back, text, sizeof text - 1, TFC_SPECIAL_AS_TEXT, &b, &nb));
        CHECK(na == nb && na < sizeof text - 1 && memcmp(a, b, na * sizeof *a) == 0);
        tfc_free(a);
        tfc_free(b);
        remove(path);
        tfc_tokenizer_release(t);
        tfc_tokenizer_release(back);
    }
    tfc_tokenizer *t;
    CHECK_ERR(tfc_tokenizer_new(5, &t), TFC_ERR_INVALID_ARG, "TFC_SPLIT_QWEN2 (4)");
}

/* ---- what is refused ------------------------------------------------------------------------------------ */

static void refused(const char *json, uint32_t flags, tfc_status want, const char *fragment) {
    const char *path = write_json("refused", json);
    tfc_tokenizer *t = NULL;
    CHECK_ERR(tfc_tokenizer_load_hf_json(path, flags, &t), want, fragment);
    CHECK(t == NULL);
    if (want == TFC_ERR_FORMAT) CHECK(strstr(tfc_last_error(), path) != NULL); /* the file is named */
    tfc_tokenizer_release(t);
    remove(path);
}

TEST(hf_refusals_name_the_field) {
    const char *sp = sentencepiece(PREPEND_REPLACE, "null", "true");
    static char base[1 << 15];
    snprintf(base, sizeof base, "%s", sp);
    const char *bl = byte_level(LLAMA3_SPLIT);
    static char bbase[1 << 15];
    snprintf(bbase, sizeof bbase, "%s", bl);
    tfc_tokenizer *t = NULL;
    CHECK_ERR(tfc_tokenizer_load_hf_json(NULL, 0, &t), TFC_ERR_INVALID_ARG, "path is NULL");
    CHECK_ERR(tfc_tokenizer_load_hf_json("x", 0, NULL), TFC_ERR_INVALID_ARG, "out is NULL");
    CHECK_ERR(tfc_tokenizer_load_hf_json(write_json("ok", base), 2, &t), TFC_ERR_INVALID_ARG, "flags is 0x2");
    remove(tmp_path("ok"));
    CHECK_ERR(tfc_tokenizer_load_hf_json(tmp_path("missing"), 0, &t), TFC_ERR_IO, "cannot open");
    /* not JSON, not an object */
    refused("{\"model\": ", 0, TFC_ERR_FORMAT, "byte 10");
    refused("[1, 2]", 0, TFC_ERR_FORMAT, "is not a JSON object");
    refused("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"a\":1},\"merges\":[]}}", 0, TFC_ERR_FORMAT,
            "key 'a' appears twice");
    /* the model */
    refused(edit(base, "\"type\":\"BPE\"", "\"type\":\"WordPiece\""), 0, TFC_ERR_FORMAT,
            "model.type: 'WordPiece' is not supported");
    refused(edit(base, "\"type\":\"BPE\"", "\"type\":\"Unigram\""), 0, TFC_ERR_FORMAT, "model.type: 'Unigram'");
    refused(edit(base, "\"dropout\":null", "\"dropout\":0.1"), 0, TFC_ERR_FORMAT, "model.dropout");
    refused(edit(base, "\"continuing_subword_prefix\":null", "\"continuing_subword_prefix\":\"##\""), 0, TFC_ERR_FORMAT,
            "continuing_subword_prefix");
    refused(edit(base, "\"fuse_unk\":true", "\"fuse_unk\":true,\"extra\":1"), 0, TFC_ERR_FORMAT,
            "model: key \"extra\" is not one");
    refused(edit(base, "\"<unk>\":0,", "\"<unk>\":0,\"dup\":5,"), 0, TFC_ERR_FORMAT, "both have id 5");
    refused(edit(base, "\"<unk>\":0,", "\"<unk>\":0,\"far\":999999,"), 0, TFC_ERR_FORMAT,
            "model.vocab: 'far': expected an id");
    refused(edit(base, "\"<unk>\":0,", "\"<unk>\":0,\"\":300,"), 0, TFC_ERR_FORMAT, "the empty string is not a token");
    refused(edit(base, "\"unk_token\":\"<unk>\"", "\"unk_token\":\"<nope>\""), 0, TFC_ERR_FORMAT,
            "model.unk_token: '<nope>' is not in model.vocab");
    refused(edit(base, "\"<0x80>\":131,", ""), 0, TFC_ERR_FORMAT,
            "model.byte_fallback: true, but model.vocab has no '<0x80>'");
    /* merges */
    refused(edit(base, "\"a b\"", "\"a zz\""), 0, TFC_ERR_FORMAT, "model.merges[1]: 'zz' is not in model.vocab");
    refused(edit(base, "\"a b\"", "\"b a\""), 0, TFC_ERR_FORMAT, "model.merges[1]: the merged token 'ba' is not in");
    refused(edit(base, "\"a b\"", "\"a b c\""), 0, TFC_ERR_FORMAT, "model.merges[1]: 'a b c' is not two tokens");
    refused(edit(base, "\"a b\"", "[\"a\",\"b\"]"), 0, TFC_ERR_FORMAT, "model.merges[1]: expected a string");
    /* the pipeline */
    refused(edit(base, "\"truncation\":null", "\"truncation\":{\"max_length\":5}"), 0, TFC_ERR_FORMAT,
            "truncation: is set");
    refused(edit(base, "\"version\":\"1.0\"", "\"version\":\"1.0\",\"extra\":0"), 0, TFC_ERR_FORMAT,
            "the top level: key \"extra\"");
    refused(edit(base, "\"type\":\"Prepend\"", "\"type\":\"NFKC\""), 0, TFC_ERR_FORMAT,
            "normalizer.normalizers[0]: normalizer type 'NFKC' is not supported");
    refused(edit(base, "\"pattern\":{\"String\":\" \"}", "\"pattern\":{\"Regex\":\" \"}"), 0, TFC_ERR_FORMAT,
            "normalizer.normalizers[1].pattern: a Regex pattern is not supported");
    refused(edit(base, "\"pre_tokenizer\":null", "\"pre_tokenizer\":{\"type\":\"Whitespace\"}"), 0, TFC_ERR_FORMAT,
            "pre_tokenizer: pre-tokenizer type 'Whitespace' is not supported");
    refused(edit(bbase, "\\\\p{N}{1,3}", "\\\\p{N}{1,4}"), 0, TFC_ERR_FORMAT,
            "pre_tokenizer.pretokenizers[0].pattern: regex");
    refused(edit(bbase, "\"behavior\":\"Isolated\"", "\"behavior\":\"Removed\""), 0, TFC_ERR_FORMAT,
            "behavior 'Removed' is not supported");
    refused(edit(bbase, "\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":false",
                 "\"add_prefix_space\":true,\"trim_offsets\":true,\"use_regex\":false"),
            0, TFC_ERR_FORMAT, "pre_tokenizer.pretokenizers[1]: add_prefix_space true");
    refused(edit(base, "\"decoder\":{", "\"decoder\":null,\"x\":{"), 0, TFC_ERR_FORMAT, "the top level: key \"x\"");
    refused(edit(base, "{\"type\":\"Fuse\"},", ""), 0, TFC_ERR_FORMAT,
            "decoder.decoders[2]: Strip is supported only right after Fuse");
    refused(edit(base, "{\"type\":\"ByteFallback\"},", "{\"type\":\"Fuse\"},{\"type\":\"ByteFallback\"},"), 0,
            TFC_ERR_FORMAT, "decoder.decoders[2]: 'ByteFallback' is out of order");
    refused(edit(bbase, "\"decoder\":{\"type\":\"ByteLevel\"", "\"decoder\":{\"type\":\"Metaspace\""), 0,
            TFC_ERR_FORMAT, "decoder: decoder type 'Metaspace' is not supported");
    refused(edit(bbase,
                 "\"decoder\":{\"type\":\"ByteLevel\",\"add_prefix_space\":true,\"trim_offsets\":true,"
                 "\"use_regex\":true}",
                 "\"decoder\":null"),
            0, TFC_ERR_FORMAT, "decoder: null is not supported");
    refused(edit(base, "\"decoder\":{\"type\":\"Sequence\"",
                 "\"decoder\":{\"type\":\"ByteLevel\"},\"y\":{\"type\":\"Sequence\""),
            0, TFC_ERR_FORMAT, "the top level: key \"y\"");
    refused(edit(base, "\"post_processor\":null", "\"post_processor\":{\"type\":\"RobertaProcessing\"}"), 0,
            TFC_ERR_FORMAT, "post-processor type 'RobertaProcessing' is not supported");
    refused(edit(bbase, "\"ids\":[259]", "\"ids\":[4000]"), TFC_TOKENIZER_ADD_SPECIAL, TFC_ERR_FORMAT,
            "special_tokens['</s>']: ids[0] is not a token id");
    refused(edit(bbase, "{\"SpecialToken\":{\"id\":\"</s>\"", "{\"SpecialToken\":{\"id\":\"<eos>\""), 0, TFC_ERR_FORMAT,
            "special token '<eos>' is not in the template's special_tokens");
    /* byte-level: every byte needs its token, keys are in the alphabet */
    refused(edit(bbase, "\"Hi\":256", "\"H i\":256"), 0, TFC_ERR_FORMAT,
            "'H i' (id 256) has a character outside the byte-level alphabet");
    refused(edit(bbase, "\"A\":65,", "\"AA\":65,"), 0, TFC_ERR_FORMAT, "model.vocab: no token for byte 0x41");
    /* added tokens */
    refused(edit(bbase, "\"id\":259", "\"id\":300"), 0, TFC_ERR_FORMAT,
            "added_tokens[1]: '</s>' has id 300, but Hugging Face's tokenizers gives it id 259");
    refused(edit(base, "\"id\":1,\"content\":\"<s>\"", "\"id\":7,\"content\":\"<s>\""), 0, TFC_ERR_FORMAT,
            "'<s>' has id 7, but Hugging Face's tokenizers gives it id 1 (its id in model.vocab)");
    refused(edit(bbase, "\"content\":\"</s>\",\"single_word\":false,\"lstrip\":false",
                 "\"content\":\"</s>\",\"single_word\":false,\"lstrip\":true"),
            0, TFC_ERR_FORMAT, "added_tokens[1]: '</s>': lstrip true is not supported");
    refused(edit(bbase, "\"content\":\"</s>\"", "\"content\":\"<s>\""), 0, TFC_ERR_FORMAT,
            "added_tokens[1]: '<s>' is listed twice");
    refused(edit(base,
                 "\"content\":\"<s>\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,\"normalized\":false",
                 "\"content\":\"<s>\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,\"normalized\":true"),
            0, TFC_ERR_FORMAT, "normalized true is supported only when the normalizer is null or NFC");
    refused(edit(bbase, "\"content\":\"</s>\"", "\"content\":\"\""), 0, TFC_ERR_FORMAT,
            "added_tokens[1]: \"content\" must be a string of 1 to");
}

TFC_TEST_MAIN
