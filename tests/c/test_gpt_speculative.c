/*
 * Speculative decoding (tfc_gpt_generate_speculative): greedy output equals
 * the target's own tfc_gpt_generate for every k; a draft equal to the
 * target has every proposal accepted; sampled output follows the target's
 * distribution — a chi-square test of 2-token continuations against the
 * probabilities of the target's full forward (softmax, top-k and
 * renormalisation written here), which a rule that favoured the draft
 * fails; context refills, the callback, and bad arguments.
 */
#include <math.h>
#include <string.h>

#include "tfc_test.h"

TFC_TEST_MAIN

/* A model whose weights are drawn at `scale` (GPT-2's 0.02 init makes a tiny model's distributions near uniform). */
static tfc_gpt *model(tfc_dtype dt, int32_t V, int32_t C, int32_t block, double scale, uint64_t seed) {
    tfc_gpt_config c = TFC_GPT_CONFIG_INIT;
    c.n_layer = 2;
    c.n_head = 2;
    c.n_embd = C;
    c.vocab_size = V;
    c.block_size = block;
    c.dtype = dt;
    tfc_gpt *m = NULL;
    CHECK_OK(tfc_gpt_new(&c, seed, &m));
    int32_t n;
    const char *const *names;
    tfc_tensor *const *ps;
    CHECK_OK(tfc_gpt_params(m, &n, &names, &ps));
    for (int32_t i = 0; i < n; i++)
        if (!strstr(names[i], "ln_")) CHECK_OK(tfc_tensor_fill_normal(ps[i], 0.0, scale, seed, 1000u * (uint64_t)i));
    return m;
}

static const int32_t PROMPT[5] = {3, 1, 4, 1, 5};

TEST(greedy_equals_the_targets_generate) {
    tfc_gpt *t = model(TFC_DTYPE_F64, 29, 16, 64, 0.3, 1), *d = model(TFC_DTYPE_F64, 29, 16, 64, 0.3, 2);
    int32_t want[40], got[40];
    CHECK_OK(tfc_gpt_generate(t, PROMPT, 5, 40, 0.0, 0, 1.0, 0, want, 40, NULL, NULL));
    for (int32_t k = 1; k <= 6; k++) {
        tfc_spec_stats st = {sizeof st, 0, 0, 0};
        CHECK_OK(tfc_gpt_generate_speculative(t, d, PROMPT, 5, 40, k, 0.0, 0, 1.0, 0, got, 40, &st, NULL, NULL));
        if (memcmp(want, got, sizeof want) != 0) TFC_FAIL_AT("k = %d: greedy output differs from the target's", k);
        CHECK(st.accepted <= st.drafted && st.drafted > 0 && st.target_passes >= 1 + 40 / (k + 1));
    }
    /* a draft of a 16-position block refills its own context several times; the target's is never cut */
    tfc_gpt *short_draft = model(TFC_DTYPE_F64, 29, 16, 16, 0.3, 2);
    CHECK_OK(tfc_gpt_generate_speculative(t, short_draft, PROMPT, 5, 40, 4, 0.0, 0, 1.0, 0, got, 40, NULL, NULL, NULL));
    CHECK(memcmp(want, got, sizeof want) == 0);
    tfc_gpt_release(short_draft);
    /* the draft is the target: every proposal accepted, 1 + 40/(k+1) passes */
    tfc_spec_stats st = {sizeof st, 0, 0, 0};
    CHECK_OK(tfc_gpt_generate_speculative(t, t, PROMPT, 5, 40, 4, 0.0, 0, 1.0, 0, got, 40, &st, NULL, NULL));
    CHECK(memcmp(want, got, sizeof want) == 0);
    if (st.accepted != st.drafted || st.target_passes != 1 + 8)
        TFC_FAIL_AT("self-draft: %lld of %lld accepted in %lld target passes", (long long)st.accepted,
                    (long long)st.drafted, (long long)st.target_passes);
    tfc_gpt_release(t);
    tfc_gpt_release(d);
}

/* The reference distribution: softmax(logits / T) over the top_k largest (0: all), renormalised, in f64. */
static void reference_probs(const double *logits, int32_t V, double T, int32_t top_k, double *p) {
    double mx = logits[0], z = 0;
    for (int32_t v = 1; v < V; v++) mx = logits[v] > mx ? logits[v] : mx;
    for (int32_t v = 0; v < V; v++) {
        int32_t rank = 0; /* tokens strictly more probable, then equal ones with a lower id */
        for (int32_t u = 0; u < V; u++) rank += logits[u] > logits[v] || (logits[u] == logits[v] && u < v);
        p[v] = top_k && rank >= top_k ? 0 : exp((logits[v] - mx) / T);
        z += p[v];
    }
    for (int32_t v = 0; v < V; v++) p[v] /= z;
}

/* The target's logits for the token after ctx[0..n), by a full forward (no cache). */
static void full_logits(tfc_gpt *m, const int32_t *ctx, int32_t n, int32_t V, double *out) {
    const int64_t dims[2] = {1, n};
    tfc_tensor *idx, *lg, *f;
    CHECK_OK(tfc_tensor_from_data(ctx, dims, 2, TFC_DTYPE_I32, &idx));
    CHECK_OK(tfc_gpt_forward(m, NULL, idx, NULL, &lg, NULL));
    CHECK_OK(tfc_cast(NULL, lg, TFC_DTYPE_F64, &f));
    double *all = malloc((size_t)n * (size_t)V * sizeof *all);
    CHECK_OK(tfc_tensor_copy_to_host(f, all, (size_t)n * (size_t)V * sizeof *all));
    memcpy(out, all + (size_t)(n - 1) * (size_t)V, (size_t)V * sizeof *out);
    free(all);
    tfc_tensor_release(idx);
    tfc_tensor_release(lg);
    tfc_tensor_release(f);
}

enum { V5 = 5, RUNS = 6000 };

/*
 * Chi-square of the first two of k + 1 sampled tokens (one full round: k
 * proposals, the target's pass, the bonus or correction) over RUNS seeds,
 * against the target's joint p(a)·p(b | a).
 */
static double chi_square(tfc_gpt *t, tfc_gpt *d, int32_t k, double T, int32_t top_k) {
    double lg[V5], pa[V5], pb[V5][V5];
    full_logits(t, PROMPT, 2, V5, lg);
    reference_probs(lg, V5, T, top_k, pa);
    for (int32_t a = 0; a < V5; a++) {
        int32_t ctx[3] = {PROMPT[0], PROMPT[1], a};
        full_logits(t, ctx, 3, V5, lg);
        reference_probs(lg, V5, T, top_k, pb[a]);
    }
    static int32_t counts[V5][V5];
    memset(counts, 0, sizeof counts);
    for (uint64_t seed = 0; seed < RUNS; seed++) {
        int32_t out[8];
        CHECK_OK(
            tfc_gpt_generate_speculative(t, d, PROMPT, 2, k + 1, k, T, top_k, 1.0, seed, out, 8, NULL, NULL, NULL));
        counts[out[0]][out[1]]++;
    }
    double chi = 0;
    for (int32_t a = 0; a < V5; a++)
        for (int32_t b = 0; b < V5; b++) {
            const double e = RUNS * pa[a] * pb[a][b];
            if (e > 0)
                chi += (counts[a][b] - e) * (counts[a][b] - e) / e;
            else if (counts[a][b] > 0)
                chi += 1e9; /* a token the target never draws */
        }
    return chi;
}

TEST(sampled_output_follows_the_target_distribution) {
    tfc_gpt *t = model(TFC_DTYPE_F64, V5, 8, 16, 0.6, 11), *d = model(TFC_DTYPE_F64, V5, 8, 16, 0.6, 12);
    /* 24 degrees of freedom: P(chi2 > 51.2) = 0.001 */
    const struct {
        int32_t k, top_k;
        double T;
    } cases[] = {{1, 0, 1.0}, {3, 0, 1.0}, {1, 3, 0.7}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const double chi = chi_square(t, d, cases[i].k, cases[i].T, cases[i].top_k);
        printf("  k %d, T %.1f, top_k %d: chi2 = %.1f (24 dof)\n", cases[i].k, cases[i].T, cases[i].top_k, chi);
        if (!(chi < 51.2)) TFC_FAIL_AT("chi2 %.1f: the output does not follow the target's distribution", chi);
    }
    /* the draft's distribution is far from the target's, so the test can tell them apart */
    double lt[V5], ld[V5], pt[V5], pd[V5], tv = 0;
    full_logits(t, PROMPT, 2, V5, lt);
    full_logits(d, PROMPT, 2, V5, ld);
    reference_probs(lt, V5, 1.0, 0, pt);
    reference_probs(ld, V5, 1.0, 0, pd);
    for (int32_t v = 0; v < V5; v++) tv += fabs(pt[v] - pd[v]) / 2;
    printf("  total variation between target and draft at the first token: %.3f\n", tv);
    CHECK(tv > 0.1);
    tfc_gpt_release(t);
    tfc_gpt_release(d);
}

static int32_t stop_at_5(int32_t tok, void *ctx) {
    (void)tok;
    return ++*(int *)ctx == 5;
}

TEST(refills_callback_and_bad_arguments) {
    /* block 12, 30 new tokens: the context refills several times */
    tfc_gpt *t = model(TFC_DTYPE_F32, 29, 16, 12, 0.3, 3), *d = model(TFC_DTYPE_F32, 29, 16, 12, 0.3, 4);
    int32_t out[30];
    tfc_spec_stats st = {sizeof st, 0, 0, 0};
    CHECK_OK(tfc_gpt_generate_speculative(t, d, PROMPT, 5, 30, 3, 0.8, 0, 0.9, 7, out, 30, &st, NULL, NULL));
    for (int i = 0; i < 30; i++) CHECK(out[i] >= 0 && out[i] < 29);
    int32_t again[30];
    CHECK_OK(tfc_gpt_generate_speculative(t, d, PROMPT, 5, 30, 3, 0.8, 0, 0.9, 7, again, 30, NULL, NULL, NULL));
    CHECK(memcmp(out, again, sizeof out) == 0);
    int seen = 0;
    CHECK_ERR(tfc_gpt_generate_speculative(t, d, PROMPT, 5, 30, 3, 0.8, 0, 0.9, 7, again, 30, NULL, stop_at_5, &seen),
              TFC_ERR_CANCELLED, "after 5 tokens");
    CHECK(seen == 5 && memcmp(out, again, 5 * sizeof *out) == 0);

    tfc_gpt *other = model(TFC_DTYPE_F32, 31, 16, 12, 0.3, 5);
    CHECK_ERR(tfc_gpt_generate_speculative(t, other, PROMPT, 5, 4, 2, 0.0, 0, 1.0, 0, out, 30, NULL, NULL, NULL),
              TFC_ERR_INVALID_ARG, "the target's vocabulary has 29 tokens, the draft's 31");
    CHECK_ERR(tfc_gpt_generate_speculative(t, d, PROMPT, 5, 4, 7, 0.0, 0, 1.0, 0, out, 30, NULL, NULL, NULL),
              TFC_ERR_INVALID_ARG, "k is 7, need 1 .. min(64, smaller block_size / 2 = 6)");
    CHECK_ERR(tfc_gpt_generate_speculative(t, d, PROMPT, 5, 4, 0, 0.0, 0, 1.0, 0, out, 30, NULL, NULL, NULL),
              TFC_ERR_INVALID_ARG, "k is 0");
    const int32_t bad[2] = {1, 29};
    CHECK_ERR(tfc_gpt_generate_speculative(t, d, bad, 2, 4, 2, 0.0, 0, 1.0, 0, out, 30, NULL, NULL, NULL),
              TFC_ERR_INVALID_ARG, "prompt[1] is 29, outside [0, 29)");
    CHECK_ERR(tfc_gpt_generate_speculative(t, d, PROMPT, 5, 31, 2, 0.0, 0, 1.0, 0, out, 30, NULL, NULL, NULL),
              TFC_ERR_BUFFER_TOO_SMALL, "cap 30 < max_new 31");
    tfc_spec_stats small = {4, 0, 0, 0};
    CHECK_ERR(tfc_gpt_generate_speculative(t, d, PROMPT, 5, 4, 2, 0.0, 0, 1.0, 0, out, 30, &small, NULL, NULL),
              TFC_ERR_INVALID_ARG, "struct_size is 4");
    CHECK_ERR(tfc_gpt_generate_speculative(t, d, PROMPT, 5, 4, 2, 0.5, 0, 1.5, 0, out, 30, NULL, NULL, NULL),
              TFC_ERR_INVALID_ARG, "top_p");
    tfc_gpt_release(other);
    tfc_gpt_release(t);
    tfc_gpt_release(d);
}
