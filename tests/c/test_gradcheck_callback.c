/*
 * tfc_gradcheck with a callback that fails or returns no output: a clear
 * error, never a crash (a binding's callback that caught an exception may
 * return TFC_OK without an output, or an error without a message).
 */
#include "tfc_test_util.h"

TFC_TEST_MAIN

typedef struct gcctx {
    int mode; /* 0 ok, 1 OK without output on the first call, 2 on a perturbed call, 3 error without message */
    int calls;
} gcctx;

static tfc_status f(tfc_graph *g, tfc_tensor *const *in, int32_t n, tfc_tensor **out, void *ctx) {
    (void)n;
    gcctx *c = ctx;
    c->calls++;
    if ((c->mode == 1 && c->calls == 1) || (c->mode == 2 && c->calls == 3)) return TFC_OK;
    if (c->mode == 3) return TFC_ERR_CANCELLED;
    tfc_tensor *t = NULL;
    tfc_status s = tfc_mul(g, in[0], in[0], &t);
    if (s == TFC_OK) s = tfc_sum(g, t, NULL, 0, 0, out);
    tfc_tensor_release(t);
    return s;
}

TEST(callback_failures_are_errors) {
    const double v[3] = {1.0, -2.0, 0.5};
    const int64_t d[1] = {3};
    tfc_tensor *x = t_from(v, d, 1);
    CHECK_OK(tfc_tensor_set_requires_grad(x, 1));
    double err = -1.0;
    gcctx ok = {0};
    CHECK_OK(tfc_gradcheck(f, &x, 1, &ok, 1e-6, &err, NULL, NULL));
    CHECK(err >= 0.0 && err < 1e-8);
    const char *want[] = {NULL, "tfc_gradcheck: f returned TFC_OK but no output",
                          "tfc_gradcheck: f returned TFC_OK but no output",
                          "tfc_gradcheck: f returned TFC_ERR_CANCELLED without a message"};
    tfc_status st[] = {TFC_OK, TFC_ERR_INVALID_ARG, TFC_ERR_INVALID_ARG, TFC_ERR_CANCELLED};
    for (int m = 1; m <= 3; m++) {
        gcctx c = {.mode = m};
        err = -1.0;
        CHECK_ERR(tfc_gradcheck(f, &x, 1, &c, 1e-6, &err, NULL, NULL), st[m], want[m]);
        CHECK(err == -1.0);
        double *xv = t_vals(x); /* the perturbed input is restored */
        for (int i = 0; i < 3; i++) CHECK(xv[i] == v[i]);
        free(xv);
    }
    tfc_tensor_release(x);
}
