/*
 * Batched generation (tfc_gpt_generate_batch): n prompts of different
 * lengths decoded together must give, sequence by sequence, the tokens of
 * tfc_gpt_generate on that prompt alone (greedy and seeded sampling, with
 * refills of a full context at different steps per sequence, f64, f32 and
 * a quantized model); a sequence stopped by the callback ends alone; bad
 * arguments get a clear status and leave out untouched.
 */
#include <string.h>

#include "tfc_test.h"

TFC_TEST_MAIN

static tfc_gpt *model(tfc_dtype dt, int32_t block, int32_t C, uint64_t seed) {
    tfc_gpt_config c = TFC_GPT_CONFIG_INIT;
    c.n_layer = 2;
    c.n_head = 2;
    c.n_embd = C;
    c.vocab_size = 29;
    c.block_size = block;
    c.dtype = dt;
    tfc_gpt *m = NULL;
    CHECK_OK(tfc_gpt_new(&c, seed, &m));
    return m;
}

enum { NSEQ = 5, MAXP = 9 };
static const int32_t P0[] = {3}, P1[] = {1, 4, 1, 5, 9}, P2[] = {2, 6, 5}, P3[] = {3, 5, 8, 9, 7, 9, 3, 2, 3},
                     P4[] = {8, 4};
static const int32_t *const PROMPTS[NSEQ] = {P0, P1, P2, P3, P4};
static const int32_t NPROMPTS[NSEQ] = {1, 5, 3, 9, 2};

/* Sequence i of a batch against tfc_gpt_generate on its prompt alone with seed + i; returns mismatches. */
static int compare_with_single(tfc_gpt *m, int32_t max_new, double temperature, int32_t top_k, uint64_t seed,
                               const int32_t *batch_out) {
    int bad = 0;
    int32_t one[64];
    for (int i = 0; i < NSEQ; i++) {
        CHECK_OK(tfc_gpt_generate(m, PROMPTS[i], NPROMPTS[i], max_new, temperature, top_k, 1.0, seed + (uint64_t)i, one,
                                  64, NULL, NULL));
        for (int j = 0; j < max_new; j++)
            if (one[j] != batch_out[i * max_new + j]) {
                fprintf(stderr, "  sequence %d token %d: batch %d, alone %d\n", i, j, batch_out[i * max_new + j],
                        one[j]);
                bad++;
                break;
            }
    }
    return bad;
}

static void check_equal_to_single(tfc_gpt *m, int32_t max_new) {
    int32_t out[NSEQ * 64], lengths[NSEQ];
    /* greedy */
    CHECK_OK(tfc_gpt_generate_batch(m, NSEQ, PROMPTS, NPROMPTS, max_new, 0.0, 0, 1.0, 0, out, NSEQ * 64, lengths, NULL,
                                    NULL));
    for (int i = 0; i < NSEQ; i++) CHECK(lengths[i] == max_new);
    CHECK(compare_with_single(m, max_new, 0.0, 0, 0, out) == 0);
    /* seeded sampling: sequence i draws with seed + i */
    CHECK_OK(
        tfc_gpt_generate_batch(m, NSEQ, PROMPTS, NPROMPTS, max_new, 1.0, 7, 1.0, 40, out, NSEQ * 64, NULL, NULL, NULL));
    CHECK(compare_with_single(m, max_new, 1.0, 7, 40, out) == 0);
}

TEST(batch_equals_each_prompt_alone_f64) {
    /* block 8 < 9 + 20: every sequence refills its context, each at its own step */
    tfc_gpt *m = model(TFC_DTYPE_F64, 8, 16, 3);
    check_equal_to_single(m, 20);
    tfc_gpt_release(m);
}

TEST(batch_equals_each_prompt_alone_f32_without_refill) {
    /* block 64 holds 9 + 20 positions: the caches are sized to 29, not 64 */
    tfc_gpt *m = model(TFC_DTYPE_F32, 64, 32, 5);
    check_equal_to_single(m, 20);
    tfc_gpt_release(m);
}

TEST(batch_equals_each_prompt_alone_quantized) {
    tfc_gpt *m = model(TFC_DTYPE_F32, 12, 64, 8);
    CHECK_OK(tfc_gpt_quantize(m, TFC_QFORMAT_INT4, 32));
    CHECK_OK(tfc_gpt_quantize_head(m, TFC_QFORMAT_INT8, 0)); /* the batched step's head is the quantized one too */
    check_equal_to_single(m, 16);
    tfc_gpt_release(m);
}

TEST(one_prompt_is_generate) {
    tfc_gpt *m = model(TFC_DTYPE_F32, 16, 16, 11);
    int32_t a[24], b[24];
    const int32_t *p[1] = {P1};
    CHECK_OK(tfc_gpt_generate_batch(m, 1, p, &NPROMPTS[1], 24, 0.8, 0, 0.9, 123, a, 24, NULL, NULL, NULL));
    CHECK_OK(tfc_gpt_generate(m, P1, NPROMPTS[1], 24, 0.8, 0, 0.9, 123, b, 24, NULL, NULL));
    CHECK(memcmp(a, b, sizeof a) == 0);
    tfc_gpt_release(m);
}

typedef struct stopper {
    int32_t seq, after, seen[NSEQ];
} stopper;

static int32_t stop_one(int32_t seq, int32_t token, void *ctx) {
    (void)token;
    stopper *st = ctx;
    st->seen[seq]++;
    return seq == st->seq && st->seen[seq] == st->after;
}

TEST(callback_stops_one_sequence) {
    tfc_gpt *m = model(TFC_DTYPE_F64, 32, 16, 4);
    int32_t full[NSEQ * 10], out[NSEQ * 10], lengths[NSEQ];
    CHECK_OK(tfc_gpt_generate_batch(m, NSEQ, PROMPTS, NPROMPTS, 10, 0.0, 0, 1.0, 0, full, NSEQ * 10, NULL, NULL, NULL));
    stopper st = {.seq = 2, .after = 3};
    CHECK_OK(
        tfc_gpt_generate_batch(m, NSEQ, PROMPTS, NPROMPTS, 10, 0.0, 0, 1.0, 0, out, NSEQ * 10, lengths, stop_one, &st));
    for (int i = 0; i < NSEQ; i++) {
        int32_t want = i == 2 ? 3 : 10;
        if (lengths[i] != want || st.seen[i] != want)
            TFC_FAIL_AT("sequence %d: %d tokens, want %d", i, lengths[i], want);
        for (int j = 0; j < 10; j++) {
            int32_t expect = j < want ? full[i * 10 + j] : -1;
            if (out[i * 10 + j] != expect)
                TFC_FAIL_AT("sequence %d token %d is %d, want %d", i, j, out[i * 10 + j], expect);
        }
    }
    tfc_gpt_release(m);
}

TEST(bad_arguments_leave_out_untouched) {
    tfc_gpt *m = model(TFC_DTYPE_F32, 16, 16, 2);
    int32_t out[NSEQ * 4];
    for (int i = 0; i < NSEQ * 4; i++) out[i] = 77;
    const int32_t bad_id[] = {1, 29}, zero_len[NSEQ] = {1, 5, 0, 9, 2};
    const int32_t *with_bad[NSEQ] = {P0, P1, bad_id, P3, P4}, *with_null[NSEQ] = {P0, NULL, P2, P3, P4};
    const int32_t n_bad[NSEQ] = {1, 5, 2, 9, 2};
    CHECK_ERR(tfc_gpt_generate_batch(m, NSEQ, with_bad, n_bad, 4, 0.0, 0, 1.0, 0, out, NSEQ * 4, NULL, NULL, NULL),
              TFC_ERR_INVALID_ARG, "prompts[2][1] is 29, outside [0, 29)");
    CHECK_ERR(tfc_gpt_generate_batch(m, NSEQ, with_null, NPROMPTS, 4, 0.0, 0, 1.0, 0, out, NSEQ * 4, NULL, NULL, NULL),
              TFC_ERR_INVALID_ARG, "prompts[1] is NULL");
    CHECK_ERR(tfc_gpt_generate_batch(m, NSEQ, PROMPTS, zero_len, 4, 0.0, 0, 1.0, 0, out, NSEQ * 4, NULL, NULL, NULL),
              TFC_ERR_INVALID_ARG, "n_prompts[2] is 0");
    CHECK_ERR(tfc_gpt_generate_batch(m, 0, PROMPTS, NPROMPTS, 4, 0.0, 0, 1.0, 0, out, NSEQ * 4, NULL, NULL, NULL),
              TFC_ERR_INVALID_ARG, "n_seq is 0");
    CHECK_ERR(
        tfc_gpt_generate_batch(m, NSEQ, PROMPTS, NPROMPTS, 4, 0.0, 0, 1.0, 0, out, NSEQ * 4 - 1, NULL, NULL, NULL),
        TFC_ERR_BUFFER_TOO_SMALL, "cap 19 < n_seq 5 x max_new 4");
    CHECK_ERR(tfc_gpt_generate_batch(m, NSEQ, PROMPTS, NPROMPTS, 4, -1.0, 0, 1.0, 0, out, NSEQ * 4, NULL, NULL, NULL),
              TFC_ERR_INVALID_ARG, "temperature");
    CHECK_ERR(tfc_gpt_generate_batch(m, NSEQ, PROMPTS, NPROMPTS, -1, 0.0, 0, 1.0, 0, out, NSEQ * 4, NULL, NULL, NULL),
              TFC_ERR_INVALID_ARG, "max_new is -1");
    CHECK_ERR(tfc_gpt_generate_batch(m, NSEQ, PROMPTS, NPROMPTS, 4, 0.0, 0, 1.0, 0, NULL, NSEQ * 4, NULL, NULL, NULL),
              TFC_ERR_INVALID_ARG, "out is NULL");
    for (int i = 0; i < NSEQ * 4; i++)
        if (out[i] != 77) TFC_FAIL_AT("out[%d] written by a refused call", i);
    /* max_new 0: nothing to do, lengths all 0 */
    int32_t lengths[NSEQ] = {9, 9, 9, 9, 9};
    CHECK_OK(tfc_gpt_generate_batch(m, NSEQ, PROMPTS, NPROMPTS, 0, 0.0, 0, 1.0, 0, NULL, 0, lengths, NULL, NULL));
    for (int i = 0; i < NSEQ; i++) CHECK(lengths[i] == 0);
    tfc_gpt_release(m);
}
