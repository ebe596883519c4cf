/*
 * The test harness itself (tfc_test.h): what the device check relies on to
 * run each CUDA test in its own process. `--list` names every test,
 * `--exact NAME` runs that one alone (exit 2 for an unknown name), a plain
 * argument still filters by substring, and tfc_test_bail() fails the
 * running test and goes on with the next instead of ending the process.
 */
#include "tfc_test.h"

#define main tfc_test_main_
TFC_TEST_MAIN
#undef main

static int ran_bails, ran_after, got_past_bail;

TEST(harness_bails) {
    ran_bails++;
    tfc_test_bail();
    got_past_bail = 1;
}

TEST(harness_after_bail) { ran_after++; }

static int failures;
#define EXPECT(cond)                                                                                \
    do {                                                                                            \
        if (!(cond)) failures++, fprintf(stderr, "EXPECT failed: %s (line %d)\n", #cond, __LINE__); \
    } while (0)

static int run(const char *a1, const char *a2) {
    char *argv[] = {"test_harness", (char *)a1, (char *)a2, NULL};
    int argc = a2 ? 3 : a1 ? 2 : 1;
    ran_bails = ran_after = got_past_bail = 0;
    tfc_test_failures = tfc_test_checks = 0;
    return tfc_test_main_(argc, argv);
}

int main(void) {
    /* Everything: the bailing test fails, the other still runs, the process goes on. */
    EXPECT(run(NULL, NULL) == 1);
    EXPECT(ran_bails == 1 && ran_after == 1 && !got_past_bail);
    EXPECT(tfc_test_failures == 1);
    /* One test by its exact name. */
    EXPECT(run("--exact", "harness_after_bail") == 0);
    EXPECT(ran_bails == 0 && ran_after == 1);
    EXPECT(run("--exact", "harness_bails") == 1);
    EXPECT(ran_bails == 1 && ran_after == 0);
    /* A prefix is not an exact name; an unknown name is an error, not "0 tests, all passed". */
    EXPECT(run("--exact", "harness_after") == 2);
    EXPECT(ran_after == 0);
    EXPECT(run("--exact", NULL) == 2);
    /* The substring filter still works. */
    EXPECT(run("after", NULL) == 0);
    EXPECT(ran_bails == 0 && ran_after == 1);
    /* --list runs nothing. */
    EXPECT(run("--list", NULL) == 0);
    EXPECT(ran_bails == 0 && ran_after == 0);
    printf("test_harness: %s\n", failures ? "FAIL" : "ok");
    return failures ? 1 : 0;
}
