/*
 * tfcore train's non-finite watch (tools/train_forensics.c) on a model off
 * the CPU, through the stand-in "cuda" (tests/c/standin_backend.h): the
 * per-parameter gradient and weight norms of a logging step are read back
 * in one host wait (not two per parameter), and equal the norms computed
 * here from host copies in double (the device sums in f32: 1e-5).
 */
#include <math.h>

#include "../../tools/train_forensics.h"
#include "device/sync_count.h"
#include "standin_backend.h"
#include "tfc_test_util.h"

TFC_TEST_MAIN

static double host_norm(const tfc_tensor *t) {
    const int64_t n = tfc_tensor_numel(t);
    float *v = malloc((size_t)n * sizeof *v);
    CHECK_OK(tfc_tensor_copy_to_host(t, v, (size_t)n * sizeof *v));
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += (double)v[i] * (double)v[i];
    free(v);
    return sqrt(s);
}

TEST(logging_step_norms_in_one_wait) {
    standin_install()->cross_entropy_rows = NULL; /* as CUDA's table: no row-chunked LM head */
    tfc_gpt_config c = TFC_GPT_CONFIG_INIT;
    CHECK_OK(tfc_gpt_config_preset("char-tiny", &c));
    c.vocab_size = 65, c.n_layer = 2, c.block_size = 16;
    tfc_gpt *m = NULL;
    CHECK_OK(tfc_gpt_new(&c, 7, &m));
    CHECK_OK(tfc_gpt_to_device(m, TFC_DEVICE_CUDA, 0));
    forensics f;
    forensics_opts o = {0};
    CHECK(fx_setup(&f, &o, "train", "/nonexistent", m) == 0);
    int32_t x[2 * 16], y[2 * 16];
    for (int i = 0; i < 32; i++) x[i] = (i * 5 + 1) % 65, y[i] = (i * 3 + 2) % 65;
    const int64_t d[2] = {2, 16};
    tfc_tensor *xt, *yt, *loss = NULL;
    CHECK_OK(tfc_tensor_from_data(x, d, 2, TFC_DTYPE_I32, &xt));
    CHECK_OK(tfc_tensor_from_data(y, d, 2, TFC_DTYPE_I32, &yt));
    tfc_graph *g;
    CHECK_OK(tfc_graph_new(&g));
    CHECK_OK(tfc_gpt_forward(m, g, xt, yt, NULL, &loss));
    CHECK_OK(tfc_graph_backward(g, loss, NULL));
    const int64_t before = tfc_device_sync_count();
    CHECK(fx_after_backward(&f, "train", 0, 1e-3, 4.0, xt, yt, NULL, 0) == 0);
    const int64_t waits = tfc_device_sync_count() - before;
    if (waits != 2) TFC_FAIL_AT("the watch waited %lld times, wanted 2 (gradients, weights)", (long long)waits);
    const fx_ring_entry *e = &f.ring[f.head];
    for (int32_t i = 0; i < f.n; i++) {
        tfc_tensor *gi = NULL;
        CHECK_OK(tfc_tensor_grad(f.params[i], &gi));
        const double wg = host_norm(gi), ww = host_norm(f.params[i]);
        CHECK_CLOSE(e->grad[i], wg, 1e-5 * wg + 1e-12);
        CHECK_CLOSE(e->weight[i], ww, 1e-5 * ww + 1e-12);
        tfc_tensor_release(gi);
    }
    fx_free(&f);
    tfc_tensor_release(loss), tfc_tensor_release(xt), tfc_tensor_release(yt);
    tfc_graph_release(g);
    tfc_gpt_release(m);
    standin_remove();
}
