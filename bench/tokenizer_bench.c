/*
 * libtfcore's side of bench/tokenizer_bench.sh: encode (one thread, all
 * threads), decode and training speed. Prints "RESULT <key> <value>" lines
 * the script pairs with tiktoken's (tokenizer_bench.mjs).
 *
 * usage: tokenizer_bench <cache dir> <train.txt> <name>=<text file> ...
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tfcore/tfcore.h"

#define OK(expr)                                                                             \
    do {                                                                                     \
        tfc_status s_ = (expr);                                                              \
        if (s_ != TFC_OK) {                                                                  \
            fprintf(stderr, "%s -> %s: %s\n", #expr, tfc_status_name(s_), tfc_last_error()); \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        exit(1);
    }
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *p = malloc((size_t)len + 1);
    if (fread(p, 1, (size_t)len, f) != (size_t)len) exit(1);
    fclose(f);
    *n = (size_t)len;
    return p;
}

/* Best of `reps` runs of encoding the whole text on one thread: MB/s; also hands back the ids. */
static double bench_encode(const tfc_tokenizer *t, const char *text, size_t n, int reps, int32_t **ids_out,
                           size_t *n_ids_out) {
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        int32_t *ids;
        size_t n_ids;
        double t0 = now();
        OK(tfc_tokenizer_encode(t, text, n, TFC_SPECIAL_AS_TEXT, &ids, &n_ids));
        double dt = now() - t0;
        if (dt < best) best = dt;
        if (r + 1 == reps) {
            *ids_out = ids;
            *n_ids_out = n_ids;
        } else {
            tfc_free(ids);
        }
    }
    return (double)n / best / 1e6;
}

/* The text cut into ~64 KiB pieces at newlines, encoded with encode_batch on all cores. */
static double bench_batch(const tfc_tokenizer *t, const char *text, size_t n, int reps, int threads) {
    size_t cap = n / 32768 + 2, m = 0;
    const char **ptrs = malloc(cap * sizeof *ptrs);
    size_t *lens = malloc(cap * sizeof *lens);
    for (size_t i = 0; i < n && m < cap;) {
        size_t j = i + 65536 < n ? i + 65536 : n;
        while (j < n && text[j - 1] != '\n') j++;
        ptrs[m] = text + i;
        lens[m++] = j - i;
        i = j;
    }
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        int32_t *ids;
        size_t *offs;
        double t0 = now();
        OK(tfc_tokenizer_encode_batch(t, ptrs, lens, m, TFC_SPECIAL_AS_TEXT, threads, &ids, &offs));
        double dt = now() - t0;
        if (dt < best) best = dt;
        tfc_free(ids);
        tfc_free(offs);
    }
    free(ptrs);
    free(lens);
    return (double)n / best / 1e6;
}

static double bench_decode(const tfc_tokenizer *t, const int32_t *ids, size_t n_ids, int reps) {
    double best = 1e30;
    size_t len = 0;
    for (int r = 0; r < reps; r++) {
        char *bytes;
        double t0 = now();
        OK(tfc_tokenizer_decode(t, ids, n_ids, &bytes, &len));
        double dt = now() - t0;
        if (dt < best) best = dt;
        tfc_free(bytes);
    }
    return (double)len / best / 1e6;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s <cache dir> <train.txt> <name>=<text file> ...\n", argv[0]);
        return 2;
    }
    char path[4096];
    const char *names[] = {"gpt2", "cl100k_base"};
    int32_t patterns[] = {TFC_SPLIT_GPT2, TFC_SPLIT_CL100K};
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    printf("RESULT cores %ld\n", cores);
    for (int e = 0; e < 2; e++) {
        tfc_tokenizer *t;
        snprintf(path, sizeof path, "%s/tokenizer/%s.tiktoken", argv[1], names[e]);
        double t0 = now();
        OK(tfc_tokenizer_load_tiktoken(path, patterns[e], &t));
        printf("RESULT %s.load_s %.3f\n", names[e], now() - t0);
        for (int a = 3; a < argc; a++) {
            const char *eq = strchr(argv[a], '=');
            if (!eq) continue;
            size_t n;
            char *text = slurp(eq + 1, &n);
            int32_t *ids;
            size_t n_ids;
            int name_len = (int)(eq - argv[a]);
            double enc = bench_encode(t, text, n, 10, &ids, &n_ids);
            printf("RESULT %s.%.*s.tokens %zu\n", names[e], name_len, argv[a], n_ids);
            printf("RESULT %s.%.*s.encode_1t %.2f\n", names[e], name_len, argv[a], enc);
            printf("RESULT %s.%.*s.encode_all %.2f\n", names[e], name_len, argv[a], bench_batch(t, text, n, 10, 0));
            printf("RESULT %s.%.*s.encode_batch_1t %.2f\n", names[e], name_len, argv[a],
                   bench_batch(t, text, n, 10, 1));
            printf("RESULT %s.%.*s.decode %.2f\n", names[e], name_len, argv[a], bench_decode(t, ids, n_ids, 5));
            tfc_free(ids);
            free(text);
        }
        tfc_tokenizer_release(t);
    }
    /* training: vocab 4096 on the training text, as minbpe's RegexTokenizer (GPT-4 pattern) and BasicTokenizer */
    size_t n;
    char *train = slurp(argv[2], &n);
    int32_t train_patterns[] = {TFC_SPLIT_CL100K, TFC_SPLIT_GPT2, TFC_SPLIT_NONE};
    const char *train_names[] = {"cl100k", "gpt2", "none"};
    for (int p = 0; p < 3; p++) {
        tfc_tokenizer *t;
        OK(tfc_tokenizer_new(train_patterns[p], &t));
        double t0 = now();
        OK(tfc_tokenizer_train(t, train, n, 4096));
        printf("RESULT train4096.%s_s %.3f\n", train_names[p], now() - t0);
        tfc_tokenizer_release(t);
    }
    free(train);
    return 0;
}
