/*
 * The per-op profile's public switch and report (tfc_profile_* in
 * tfcore/graph.h): what a profiled step records, that a disabled profile
 * records nothing, the between-steps row, per-pass averaging, bad input.
 */
#include <time.h>

#include "tfc_test_util.h"

TFC_TEST_MAIN

/* One "training step": loss = Σ a·b, backward, then `sleep_ms` of pretend optimizer work. */
static void step(tfc_tensor *a, tfc_tensor *b, int sleep_ms) {
    tfc_graph *g = NULL;
    tfc_tensor *p = NULL, *loss = NULL;
    CHECK_OK(tfc_graph_new(&g));
    CHECK_OK(tfc_matmul(g, a, b, &p));
    CHECK_OK(tfc_sum(g, p, NULL, 0, 0, &loss));
    CHECK_OK(tfc_graph_backward(g, loss, NULL));
    tfc_tensor_release(p);
    tfc_tensor_release(loss);
    tfc_graph_release(g);
    if (sleep_ms > 0) {
        struct timespec ts = {0, (long)sleep_ms * 1000000L};
        nanosleep(&ts, NULL);
    }
}

static void make_inputs(tfc_tensor **a, tfc_tensor **b) {
    int64_t da[2] = {64, 96}, db[2] = {96, 32};
    *a = t_rand(da, 2, -1, 1, 1);
    *b = t_rand(db, 2, -1, 1, 2);
    CHECK_OK(tfc_tensor_set_requires_grad(*a, 1));
    CHECK_OK(tfc_tensor_set_requires_grad(*b, 1));
}

static char *report(void) {
    char *s = NULL;
    CHECK_OK(tfc_profile_report(&s));
    CHECK(s != NULL);
    return s;
}

/* The row of op `name`: calls, fwd, bwd, total ms and %; 0 when absent. Names are padded to 42 columns. */
static int row_of(const char *table, const char *name, double v[5]) {
    for (const char *line = table; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        size_t n = strlen(name);
        if (strncmp(line, name, n) == 0 && line[n] == ' ')
            return sscanf(line + 42, "%lf %lf %lf %lf %lf", &v[0], &v[1], &v[2], &v[3], &v[4]) == 5;
    }
    return 0;
}

TEST(disabled_records_nothing) {
    tfc_tensor *a, *b;
    make_inputs(&a, &b);
    CHECK_OK(tfc_profile_enable(0));
    CHECK_OK(tfc_profile_reset());
    CHECK(tfc_profile_is_enabled() == 0);
    step(a, b, 0);
    char *s = report();
    CHECK(s && strcmp(s, "") == 0);
    tfc_free(s);
    tfc_tensor_release(a);
    tfc_tensor_release(b);
}

TEST(one_step_is_recorded) {
    tfc_tensor *a, *b;
    make_inputs(&a, &b);
    CHECK_OK(tfc_profile_reset());
    CHECK_OK(tfc_profile_enable(1));
    CHECK(tfc_profile_is_enabled() == 1);
    step(a, b, 30);
    CHECK_OK(tfc_profile_enable(0)); /* closes the between-steps row: the 30 ms "optimizer" */
    char *s = report();
    CHECK(strstr(s, "backward passes: 1;") != NULL);
    CHECK(strstr(s, "fwd ms") && strstr(s, "bwd ms"));
    double mm[5] = {0}, sum[5] = {0}, between[5] = {0}, pct = 0;
    CHECK(row_of(s, "tfc_matmul", mm));
    CHECK(row_of(s, "tfc_sum", sum));
    CHECK(row_of(s, "(between steps: clip, optimizer, data)", between));
    CHECK_CLOSE(mm[0], 1.0, 0);
    CHECK_CLOSE(sum[0], 1.0, 0);
    for (int i = 1; i < 4; i++) CHECK(mm[i] >= 0 && sum[i] >= 0 && between[i] >= 0);
    CHECK_CLOSE(mm[3], mm[1] + mm[2], 2e-3);          /* total = fwd + bwd, as printed to 3 decimals */
    CHECK(between[1] >= 29.0 && between[1] < 2000.0); /* the sleep, give or take the scheduler */
    CHECK(between[2] == 0);
    /* rows sorted by total time: the sleep is the first row */
    CHECK(strncmp(strchr(strchr(s, '\n') + 1, '\n') + 1, "(between steps", 14) == 0);
    pct = mm[4] + sum[4] + between[4];
    CHECK(pct <= 100.2);
    /* off: further ops change nothing */
    step(a, b, 0);
    char *again = report();
    CHECK(strcmp(s, again) == 0);
    tfc_free(again);
    tfc_free(s);
    tfc_tensor_release(a);
    tfc_tensor_release(b);
}

TEST(figures_are_per_pass) {
    tfc_tensor *a, *b;
    make_inputs(&a, &b);
    CHECK_OK(tfc_profile_reset());
    CHECK_OK(tfc_profile_enable(1));
    for (int i = 0; i < 3; i++) step(a, b, 0);
    CHECK_OK(tfc_profile_enable(0));
    char *s = report();
    double mm[5] = {0};
    CHECK(strstr(s, "backward passes: 3;") != NULL);
    CHECK(row_of(s, "tfc_matmul", mm));
    CHECK_CLOSE(mm[0], 1.0, 0); /* 3 calls over 3 passes */
    tfc_free(s);
    /* reset empties the table */
    CHECK_OK(tfc_profile_reset());
    s = report();
    CHECK(strcmp(s, "") == 0);
    tfc_free(s);
    tfc_tensor_release(a);
    tfc_tensor_release(b);
}

TEST(bad_input) {
    CHECK_OK(tfc_profile_enable(0));
    CHECK_ERR(tfc_profile_enable(2), TFC_ERR_INVALID_ARG, "tfc_profile_enable: on must be 0 or 1, got 2");
    CHECK_ERR(tfc_profile_enable(-1), TFC_ERR_INVALID_ARG, "got -1");
    CHECK_ERR(tfc_profile_report(NULL), TFC_ERR_INVALID_ARG, "tfc_profile_report");
    CHECK(tfc_profile_is_enabled() == 0); /* a refused call changed nothing */
}
