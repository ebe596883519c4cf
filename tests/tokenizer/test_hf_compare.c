/*
 * libtfcore's tokenizer.json loader against Hugging Face's own
 * implementation: for each tokenizer.json hf_reference.mjs wrote (Llama 3,
 * the form tokenizers itself saves, a Qwen2-style file, GPT-2, Llama 2,
 * Mistral's Metaspace form, SentencePiece-style without byte fallback),
 * the ids `tokenizers` gave for every text of the corpus must be exactly
 * ours: without the template (flags 0), with it (TFC_TOKENIZER_ADD_SPECIAL,
 * "with BOS"), and with special tokens as text (TFC_SPECIAL_AS_TEXT); our
 * decode_utf8 must give tokenizers' decode of those ids and of random id
 * sequences; the batch encoder must give the one-by-one ids; and for the
 * byte-level files without a normalizer decode(encode(x)) must be x for
 * well-formed x.
 *
 * usage: test_hf_compare <dir> <name>...   (<dir>/<name>.json, <dir>/<name>.expected)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tfcore/tfcore.h"

static int failures;

#define OK(expr)                                                                                     \
    do {                                                                                             \
        tfc_status s_ = (expr);                                                                      \
        if (s_ != TFC_OK) {                                                                          \
            fprintf(stderr, "%s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #expr, tfc_status_name(s_), \
                    tfc_last_error());                                                               \
            exit(1);                                                                                 \
        }                                                                                            \
    } while (0)

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *p = malloc((size_t)len + 1);
    if (p && fread(p, 1, (size_t)len, f) != (size_t)len) {
        free(p);
        p = NULL;
    }
    fclose(f);
    *n = (size_t)len;
    return p;
}

typedef struct idlist {
    int32_t *v;
    size_t n;
} idlist;

typedef struct bytes {
    const char *p;
    size_t n;
} bytes;

typedef struct text {
    bytes in;
    idlist ids[3]; /* flags 0; TFC_TOKENIZER_ADD_SPECIAL; special tokens as text */
    bytes decoded[2];
} text;

typedef struct seq {
    idlist ids;
    bytes decoded;
} seq;

typedef struct reader {
    const unsigned char *p, *end;
} reader;

static unsigned rd32(reader *r) {
    if (r->end - r->p < 4) {
        fprintf(stderr, "expected file truncated\n");
        exit(1);
    }
    unsigned v = (unsigned)r->p[0] | (unsigned)r->p[1] << 8 | (unsigned)r->p[2] << 16 | (unsigned)r->p[3] << 24;
    r->p += 4;
    return v;
}

static bytes rd_bytes(reader *r) {
    bytes b;
    b.n = rd32(r);
    if ((size_t)(r->end - r->p) < b.n) {
        fprintf(stderr, "expected file truncated\n");
        exit(1);
    }
    b.p = (const char *)r->p;
    r->p += b.n;
    return b;
}

static idlist rd_ids(reader *r) {
    idlist l;
    l.n = rd32(r);
    l.v = malloc(4 * l.n + 4);
    for (size_t i = 0; i < l.n; i++) l.v[i] = (int32_t)rd32(r);
    return l;
}

static int same_ids(const int32_t *a, size_t na, const idlist *b) {
    return na == b->n && (na == 0 || memcmp(a, b->v, na * 4) == 0);
}

static void report_ids(const char *name, const char *what, size_t i, const text *x, const int32_t *ids, size_t n,
                       const idlist *want) {
    size_t k = 0;
    while (k < n && k < want->n && ids[k] == want->v[k]) k++;
    fprintf(stderr,
            "%s: %s: text %zu (%zu bytes, '%.40s'): ids differ at %zu: ours %d, tokenizers %d (%zu vs %zu ids)\n", name,
            what, i, x->in.n, x->in.p, k, k < n ? ids[k] : -1, k < want->n ? want->v[k] : -1, n, want->n);
}

static int valid_utf8(const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        unsigned c = p[i];
        size_t k = c < 0x80 ? 1 : c >= 0xC2 && c < 0xE0 ? 2 : c >= 0xE0 && c < 0xF0 ? 3 : c >= 0xF0 && c < 0xF5 ? 4 : 0;
        if (!k || i + k > n) return 0;
        for (size_t j = 1; j < k; j++)
            if ((p[i + j] & 0xC0) != 0x80) return 0;
        if ((c == 0xE0 && p[i + 1] < 0xA0) || (c == 0xED && p[i + 1] > 0x9F) || (c == 0xF0 && p[i + 1] < 0x90) ||
            (c == 0xF4 && p[i + 1] > 0x8F))
            return 0;
        i += k;
    }
    return 1;
}

static void check_decode(const char *name, const char *what, size_t i, const tfc_tokenizer *t, const int32_t *ids,
                         size_t n, const bytes *want, size_t *bad) {
    char *s;
    size_t len;
    OK(tfc_tokenizer_decode_utf8(t, ids, n, &s, &len));
    if (len != want->n || memcmp(s, want->p, len) != 0) {
        if ((*bad)++ < 5)
            fprintf(stderr, "%s: %s %zu: decode gives '%.60s' (%zu bytes), tokenizers '%.60s' (%zu bytes)\n", name,
                    what, i, s, len, want->p, want->n);
    }
    tfc_free(s);
}

static void compare(const char *dir, const char *name) {
    char path[4096];
    size_t size;
    snprintf(path, sizeof path, "%s/%s.expected", dir, name);
    unsigned char *data = slurp(path, &size);
    if (!data || size < 12 || memcmp(data, "HFREF1\0\0", 8) != 0) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(1);
    }
    reader r = {data + 8, data + size};
    size_t n_texts = rd32(&r);
    text *texts = calloc(n_texts, sizeof *texts);
    for (size_t i = 0; i < n_texts; i++) {
        texts[i].in = rd_bytes(&r);
        for (int k = 0; k < 3; k++) texts[i].ids[k] = rd_ids(&r);
        for (int k = 0; k < 2; k++) texts[i].decoded[k] = rd_bytes(&r);
    }
    size_t n_seqs = rd32(&r);
    seq *seqs = calloc(n_seqs, sizeof *seqs);
    for (size_t i = 0; i < n_seqs; i++) {
        seqs[i].ids = rd_ids(&r);
        seqs[i].decoded = rd_bytes(&r);
    }

    snprintf(path, sizeof path, "%s/%s.json", dir, name);
    tfc_tokenizer *t, *tb;
    double t0 = now();
    OK(tfc_tokenizer_load_hf_json(path, 0, &t));
    double load = now() - t0;
    OK(tfc_tokenizer_load_hf_json(path, TFC_TOKENIZER_ADD_SPECIAL, &tb));
    const int round_trip = strncmp(name, "llama3", 6) == 0 || strcmp(name, "gpt2") == 0;

    size_t bad_ids[3] = {0, 0, 0}, bad_dec = 0, bad_rt = 0, bytes_in = 0, n_rt = 0;
    double secs = 0;
    for (size_t i = 0; i < n_texts; i++) {
        const text *x = &texts[i];
        static const int32_t modes[3] = {TFC_SPECIAL_ALLOWED, TFC_SPECIAL_ALLOWED, TFC_SPECIAL_AS_TEXT};
        static const char *const what[3] = {"without BOS", "with BOS", "special tokens as text"};
        for (int k = 0; k < 3; k++) {
            int32_t *ids;
            size_t n;
            double a = now();
            OK(tfc_tokenizer_encode(k == 1 ? tb : t, x->in.p, x->in.n, modes[k], &ids, &n));
            if (k == 0) {
                secs += now() - a;
                bytes_in += x->in.n;
            }
            if (!same_ids(ids, n, &x->ids[k]) && bad_ids[k]++ < 5) report_ids(name, what[k], i, x, ids, n, &x->ids[k]);
            if (k < 2)
                check_decode(name, "text", i, k == 1 ? tb : t, x->ids[k].v, x->ids[k].n, &x->decoded[k], &bad_dec);
            if (k == 2 && round_trip && valid_utf8(x->in.p, x->in.n)) {
                char *back;
                size_t blen;
                OK(tfc_tokenizer_decode(t, ids, n, &back, &blen));
                n_rt++;
                if ((blen != x->in.n || memcmp(back, x->in.p, blen) != 0) && bad_rt++ < 5)
                    fprintf(stderr, "%s: text %zu: decode(encode(x)) != x\n", name, i);
                tfc_free(back);
            }
            tfc_free(ids);
        }
    }
    for (size_t i = 0; i < n_seqs; i++)
        check_decode(name, "id sequence", i, t, seqs[i].ids.v, seqs[i].ids.n, &seqs[i].decoded, &bad_dec);

    /* the batch encoder on the first 300 texts */
    size_t m = n_texts < 300 ? n_texts : 300, bad_batch = 0;
    const char **ptrs = malloc(m * sizeof *ptrs);
    size_t *lens = malloc(m * sizeof *lens), *offs;
    for (size_t i = 0; i < m; i++) {
        ptrs[i] = texts[i].in.p;
        lens[i] = texts[i].in.n;
    }
    int32_t *all;
    OK(tfc_tokenizer_encode_batch(tb, ptrs, lens, m, TFC_SPECIAL_ALLOWED, 4, &all, &offs));
    for (size_t i = 0; i < m; i++) bad_batch += !same_ids(all + offs[i], offs[i + 1] - offs[i], &texts[i].ids[1]);
    tfc_free(all);
    tfc_free(offs);
    free(ptrs);
    free(lens);

    printf("%-10s loaded in %.3f s; %zu texts (%.1f MB at %.1f MB/s): ids differ without BOS %zu, with BOS %zu, "
           "special as text %zu; decode differs %zu (of %zu); batch differs %zu; round trips failed %zu (of %zu)\n",
           name, load, n_texts, bytes_in / 1e6, bytes_in / 1e6 / secs, bad_ids[0], bad_ids[1], bad_ids[2], bad_dec,
           2 * n_texts + n_seqs, bad_batch, bad_rt, n_rt);
    failures += bad_ids[0] || bad_ids[1] || bad_ids[2] || bad_dec || bad_batch || bad_rt;
    if (n_texts < 500 || n_seqs < 100 || (round_trip && n_rt < 400)) {
        fprintf(stderr, "%s: too few cases (%zu texts, %zu sequences, %zu round trips)\n", name, n_texts, n_seqs, n_rt);
        failures++;
    }
    tfc_tokenizer_release(t);
    tfc_tokenizer_release(tb);
    for (size_t i = 0; i < n_texts; i++)
        for (int k = 0; k < 3; k++) free(texts[i].ids[k].v);
    for (size_t i = 0; i < n_seqs; i++) free(seqs[i].ids.v);
    free(texts);
    free(seqs);
    free(data);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s <dir> <name>...\n", argv[0]);
        return 2;
    }
    for (int i = 2; i < argc; i++) compare(argv[1], argv[i]);
    if (failures) {
        fprintf(stderr, "FAIL: %d tokenizer.json files differ from Hugging Face's tokenizers\n", failures);
        return 1;
    }
    printf("all %d tokenizer.json files give Hugging Face's ids\n", argc - 2);
    return 0;
}
