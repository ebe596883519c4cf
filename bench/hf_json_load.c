/*
 * Load time of a Hugging Face tokenizer.json (bench/hf_json_load.sh): the
 * whole tfc_tokenizer_load_hf_json, and jansson's parse of the same bytes
 * alone (json_loadb with duplicate keys refused, as the loader parses), so
 * the table shows how much of the load is the JSON parser. Best and median
 * of `reps` runs, wall and CPU time (CPU time is what a busy machine
 * distorts least).
 *
 * usage: hf_json_load <tokenizer.json> [reps (default 7)]
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tfcore/tfcore.h"

static double wall(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double cpu(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void report(const char *what, double *w, double *c, int n) {
    qsort(w, (size_t)n, sizeof *w, cmp);
    qsort(c, (size_t)n, sizeof *c, cmp);
    printf("%-34s wall best %.3f s, median %.3f s; cpu best %.3f s, median %.3f s\n", what, w[0], w[n / 2], c[0],
           c[n / 2]);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s <tokenizer.json> [reps]\n", argv[0]);
        return 2;
    }
    int reps = argc > 2 ? atoi(argv[2]) : 7;
    if (reps < 1 || reps > 100) reps = 7;
    FILE *f = fopen(argv[1], "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", argv[1]);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)len + 1);
    if (!buf || fread(buf, 1, (size_t)len, f) != (size_t)len) return 1;
    fclose(f);
    double w[100], c[100], pw[100], pc[100];
    int32_t vocab = 0, merges = 0;
    for (int r = 0; r < reps; r++) {
        tfc_tokenizer *t;
        double w0 = wall(), c0 = cpu();
        if (tfc_tokenizer_load_hf_json(argv[1], 0, &t) != TFC_OK) {
            fprintf(stderr, "%s\n", tfc_last_error());
            return 1;
        }
        w[r] = wall() - w0;
        c[r] = cpu() - c0;
        if (tfc_tokenizer_vocab_size(t, &vocab) != TFC_OK || tfc_tokenizer_n_merges(t, &merges) != TFC_OK) return 1;
        tfc_tokenizer_release(t);
        json_error_t e;
        w0 = wall();
        c0 = cpu();
        json_t *j = json_loadb(buf, (size_t)len, JSON_REJECT_DUPLICATES, &e);
        pw[r] = wall() - w0;
        pc[r] = cpu() - c0;
        if (!j) return 1;
        json_decref(j);
    }
    printf("%s: %.2f MB, vocabulary %d ids, %d merges, jansson %s, %d runs\n", argv[1], (double)len / 1e6, (int)vocab,
           (int)merges, JANSSON_VERSION, reps);
    report("tfc_tokenizer_load_hf_json", w, c, reps);
    report("  of which jansson's parse alone", pw, pc, reps);
    free(buf);
    return 0;
}
