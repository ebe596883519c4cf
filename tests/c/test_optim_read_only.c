/*
 * Read-only memory in the optimizer paths (issue 41): a parameter or a
 * .grad wrapping memory its owner marked read-only (tfc_tensor_wrap_ex with
 * TFC_WRAP_READ_ONLY) is refused, with a status naming the function and the
 * tensor, by every in-place writer that can reach it — each optimizer's
 * step, zero_grad, clipping in one process and with the norm on the device,
 * and ZeRO-1 sharding — before anything is written: the wrapped bytes, the
 * other parameters and gradients, and the optimizer's step count are as they
 * were. (DDP's gradient buckets replace such a .grad rather than write it:
 * tests/dist/test_ddp.c, which runs on several ranks.)
 */
#include <math.h>

#include "tfc_test.h"

static const int64_t D[2] = {2, 3};

/* A tensor over mem (6 floats), read-only when ro. */
static tfc_tensor *wrap(float *mem, int ro) {
    tfc_tensor *t = NULL;
    CHECK_OK(tfc_tensor_wrap_ex(mem, D, NULL, 2, TFC_DTYPE_F32, ro ? TFC_WRAP_READ_ONLY : 0, NULL, NULL, &t));
    return t;
}

static void fill_seq(float *mem, float base) {
    for (int i = 0; i < 6; i++) mem[i] = base + (float)i;
}

static int is_seq(const float *mem, float base) {
    for (int i = 0; i < 6; i++)
        if (mem[i] != base + (float)i) return 0;
    return 1;
}

/* A leaf parameter over pmem (read-only when ro) whose .grad is a tensor over gmem (read-only when gro). */
static tfc_tensor *param(float *pmem, int ro, float *gmem, int gro) {
    tfc_tensor *p = wrap(pmem, ro), *g = wrap(gmem, gro);
    CHECK_OK(tfc_tensor_set_requires_grad(p, 1));
    CHECK_OK(tfc_tensor_set_grad(p, g));
    tfc_tensor_release(g);
    return p;
}

static tfc_optim *make(int kind, tfc_tensor **ps, int32_t n) {
    tfc_optim_options o;
    const tfc_optim_kind k[4] = {TFC_OPTIM_SGD, TFC_OPTIM_SGD, TFC_OPTIM_ADAM, TFC_OPTIM_ADAMW};
    CHECK_OK(tfc_optim_options_default(k[kind], &o));
    if (kind == 1) o.momentum = 0.9; /* SGD with a momentum buffer */
    tfc_optim *opt = NULL;
    CHECK_OK(tfc_optim_new(k[kind], &o, &opt));
    CHECK_OK(tfc_optim_add_params(opt, ps, n, NULL));
    return opt;
}

TEST(every_optimizer_refuses_to_step_a_read_only_parameter) {
    const char *names[4] = {"SGD", "SGD momentum", "Adam", "AdamW"};
    for (int kind = 0; kind < 4; kind++) {
        float w[6], wg[6], r[6], rg[6];
        fill_seq(w, 1), fill_seq(wg, 0.5f), fill_seq(r, 10), fill_seq(rg, 0.25f);
        /* a writable parameter first: it must not move when the second is refused */
        tfc_tensor *ps[2] = {param(w, 0, wg, 0), param(r, 1, rg, 0)};
        tfc_optim *opt = make(kind, ps, 2);
        CHECK_ERR(tfc_optim_step(opt), TFC_ERR_INVALID_ARG, "tfc_optim_step: parameter 1 f32 [2,3] is read-only");
        int64_t steps = -1, state = -1;
        CHECK_OK(tfc_optim_step_count(opt, &steps));
        CHECK_OK(tfc_optim_state_count(opt, &state));
        if (!is_seq(w, 1) || !is_seq(r, 10) || steps != 0)
            TFC_FAIL_AT("%s: a refused step moved something (step count %lld)", names[kind], (long long)steps);
        CHECK(state == 3); /* step, lr, weight decay: no parameter gained state */
        /* the same optimizer steps once the read-only parameter has no gradient to apply */
        CHECK_OK(tfc_tensor_zero_grad(ps[1], 1));
        CHECK_OK(tfc_optim_step(opt));
        CHECK(!is_seq(w, 1) && is_seq(r, 10));
        tfc_optim_release(opt);
        tfc_tensor_release(ps[0]);
        tfc_tensor_release(ps[1]);
    }
}

TEST(zero_grad_refuses_a_read_only_grad_and_zeroes_none) {
    float p0[6], g0[6], p1[6], g1[6];
    fill_seq(p0, 0), fill_seq(g0, 1), fill_seq(p1, 0), fill_seq(g1, 2);
    tfc_tensor *ps[2] = {param(p0, 0, g0, 0), param(p1, 0, g1, 1)};
    tfc_optim *opt = make(0, ps, 2);
    CHECK_ERR(tfc_optim_zero_grad(opt, 0), TFC_ERR_INVALID_ARG,
              "tfc_optim_zero_grad: the grad of parameter 1 f32 [2,3] is read-only");
    CHECK(is_seq(g0, 1) && is_seq(g1, 2)); /* parameter 0's grad was not zeroed either */
    CHECK_ERR(tfc_tensor_zero_grad(ps[1], 0), TFC_ERR_INVALID_ARG,
              "tfc_tensor_zero_grad: t's grad f32 [2,3] is read-only");
    CHECK(is_seq(g1, 2));
    /* set_to_none drops the reference and writes nothing */
    CHECK_OK(tfc_optim_zero_grad(opt, 1));
    tfc_tensor *g = (tfc_tensor *)ps;
    CHECK_OK(tfc_tensor_grad(ps[1], &g));
    CHECK(g == NULL);
    CHECK(is_seq(g0, 1) && is_seq(g1, 2));
    tfc_optim_release(opt);
    tfc_tensor_release(ps[0]);
    tfc_tensor_release(ps[1]);
}

TEST(clipping_refuses_to_scale_a_read_only_grad) {
    float p0[6], g0[6], p1[6], g1[6];
    fill_seq(p0, 0), fill_seq(g0, 1), fill_seq(p1, 0), fill_seq(g1, 2);
    tfc_tensor *ps[2] = {param(p0, 0, g0, 0), param(p1, 0, g1, 1)};
    double norm = -1;
    /* the norm is above 0.1: the gradients would be scaled in place */
    CHECK_ERR(tfc_clip_grad_norm(ps, 2, 0.1, &norm), TFC_ERR_INVALID_ARG, "tfc_clip_grad_norm: a parameter's grad");
    CHECK(is_seq(g0, 1) && is_seq(g1, 2) && norm == -1);
    tfc_optim *opt = make(3, ps, 2);
    CHECK_ERR(tfc_optim_clip_grad_norm(opt, 0.1, &norm), TFC_ERR_INVALID_ARG, "is read-only");
    tfc_tensor *dn = NULL;
    CHECK_ERR(tfc_optim_clip_grad_norm_async(opt, 0.1, &dn), TFC_ERR_INVALID_ARG,
              "the grad of parameter 1 f32 [2,3] is read-only");
    CHECK(dn == NULL && is_seq(g0, 1) && is_seq(g1, 2));
    /* a clip that scales nothing writes nothing, so it is allowed: the norm of 1..6 and 2..7 */
    double want = 0;
    for (int i = 0; i < 6; i++) want += (1.0 + i) * (1.0 + i) + (2.0 + i) * (2.0 + i);
    CHECK_OK(tfc_clip_grad_norm(ps, 2, 1e9, &norm));
    CHECK_CLOSE(norm, sqrt(want), 1e-5);
    CHECK(is_seq(g0, 1) && is_seq(g1, 2));
    tfc_optim_release(opt);
    tfc_tensor_release(ps[0]);
    tfc_tensor_release(ps[1]);
}

TEST(zero1_sharding_refuses_a_read_only_parameter) {
    float p0[6], g0[6], p1[6], g1[6];
    fill_seq(p0, 0), fill_seq(g0, 1), fill_seq(p1, 0), fill_seq(g1, 2);
    tfc_tensor *ps[2] = {param(p0, 0, g0, 0), param(p1, 1, g1, 0)};
    tfc_optim *opt = make(3, ps, 2);
    tfc_comm *c = NULL;
    CHECK_OK(tfc_comm_init_single(&c));
    CHECK_ERR(tfc_optim_shard(opt, c), TFC_ERR_INVALID_ARG, "tfc_optim_shard: parameter 1 f32 [2,3] is read-only");
    CHECK(tfc_optim_is_sharded(opt) == 0);
    /* the optimizer is left unsharded, and still refuses to step the read-only one */
    CHECK_ERR(tfc_optim_step(opt), TFC_ERR_INVALID_ARG, "is read-only");
    CHECK(is_seq(p0, 0) && is_seq(p1, 0));
    tfc_comm_release(c);
    tfc_optim_release(opt);
    tfc_tensor_release(ps[0]);
    tfc_tensor_release(ps[1]);
}

TFC_TEST_MAIN
