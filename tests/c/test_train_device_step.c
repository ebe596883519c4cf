/*
 * A training step on a device other than the CPU, checked without a GPU:
 * the stand-in "cuda" (the CPU's own table under CUDA's device type,
 * tests/c/standin_backend.h) runs the dispatch a CUDA model takes.
 * - bf16 autocast is accepted for a model on the device, stays on across
 *   tfc_gpt_to_device both ways, and gives bitwise the CPU autocast's loss
 *   and gradients (the same kernels run, so any difference is the dispatch).
 * - The host-wait counter (lib/device/sync_count.h): a step of forward,
 *   backward, tfc_optim_clip_grad_norm_async, AdamW and zero_grad with ids
 *   and targets from the host waits 0 times (their range was recorded as
 *   they were copied, so the device's range checks are not read back);
 *   reading the loss or the synchronous clip each add one; ids written on
 *   the device since, or whose range the host saw out of bounds, are checked
 *   there again (five waits: token and position embeddings forward and
 *   backward, the cross-entropy's targets). On the CPU nothing counts.
 * - tfc_optim_clip_grad_norm_async against a norm computed here in double
 *   from host copies, and against the synchronous clip.
 * tests/cuda/test_cuda_ops.c runs the same step on the real module.
 */
#include <math.h>

#include "device/sync_count.h"
#include "standin_backend.h"
#include "tfc_test_util.h"

TFC_TEST_MAIN

/* The stand-in as CUDA's table looks to the ops: no row-chunked LM head (linear_cross_entropy composes). */
static void install(void) { standin_install()->cross_entropy_rows = NULL; }

enum { B = 2, T = 16, V = 65 };

static tfc_gpt *tiny(void) {
    tfc_gpt_config c = TFC_GPT_CONFIG_INIT;
    CHECK_OK(tfc_gpt_config_preset("char-tiny", &c));
    c.vocab_size = V;
    c.n_layer = 2;
    c.block_size = T;
    tfc_gpt *m = NULL;
    CHECK_OK(tfc_gpt_new(&c, 1337, &m));
    return m;
}

static void batch(int k, tfc_tensor **x, tfc_tensor **y) {
    int32_t xs[B * T], ys[B * T];
    for (int i = 0; i < B * T; i++) {
        xs[i] = (i * 7 + 3 + k) % V;
        ys[i] = (i * 11 + 5 + 3 * k) % V;
    }
    const int64_t d[2] = {B, T};
    CHECK_OK(tfc_tensor_from_data(xs, d, 2, TFC_DTYPE_I32, x));
    CHECK_OK(tfc_tensor_from_data(ys, d, 2, TFC_DTYPE_I32, y));
}

static float *host_f32(const tfc_tensor *t, int64_t *n) {
    *n = tfc_tensor_numel(t);
    float *h = malloc((size_t)*n * sizeof *h + 1);
    CHECK(tfc_tensor_dtype(t) == TFC_DTYPE_F32);
    CHECK_OK(tfc_tensor_copy_to_host(t, h, (size_t)*n * sizeof *h));
    return h;
}

static int same_values(const tfc_tensor *a, const tfc_tensor *b) {
    if (!a || !b) return 0;
    int64_t na, nb;
    float *x = host_f32(a, &na), *y = host_f32(b, &nb);
    int eq = na == nb && memcmp(x, y, (size_t)na * sizeof *x) == 0;
    free(x);
    free(y);
    return eq;
}

/* Forward + backward of batch k on m; the loss (host) and the graph, kept for the gradients. */
static double loss_and_grads(tfc_gpt *m, int k, tfc_graph **g) {
    tfc_tensor *x, *y, *loss = NULL;
    batch(k, &x, &y);
    CHECK_OK(tfc_graph_new(g));
    CHECK_OK(tfc_gpt_forward(m, *g, x, y, NULL, &loss));
    CHECK_OK(tfc_graph_backward(*g, loss, NULL));
    double l = NAN;
    CHECK_OK(tfc_tensor_item(loss, &l));
    tfc_tensor_release(loss), tfc_tensor_release(x), tfc_tensor_release(y);
    return l;
}

static void check_same_grads(const tfc_gpt *a, const tfc_gpt *b) {
    int32_t na, nb;
    const char *const *names;
    tfc_tensor *const *pa, *const *pb;
    CHECK_OK(tfc_gpt_params(a, &na, &names, &pa));
    CHECK_OK(tfc_gpt_params(b, &nb, &names, &pb));
    CHECK(na == nb);
    for (int32_t i = 0; i < na && i < nb; i++) {
        tfc_tensor *ga = NULL, *gb = NULL;
        CHECK_OK(tfc_tensor_grad(pa[i], &ga));
        CHECK_OK(tfc_tensor_grad(pb[i], &gb));
        if (!same_values(ga, gb)) TFC_FAIL_AT("gradient of %s differs between the CPU and the stand-in", names[i]);
        /* master weights and their gradients stay f32 under autocast */
        CHECK(tfc_tensor_dtype(pb[i]) == TFC_DTYPE_F32);
        tfc_tensor_release(ga), tfc_tensor_release(gb);
    }
}

TEST(autocast_on_a_device_model_matches_the_cpu_bitwise) {
    install();
    tfc_gpt *cpu = tiny(), *dev = tiny();
    CHECK_OK(tfc_gpt_set_autocast(cpu, TFC_DTYPE_BF16));
    CHECK_OK(tfc_gpt_to_device(dev, TFC_DEVICE_CUDA, 0));
    /* set on a model already on the device (refused before bf16 training on CUDA existed) */
    CHECK_OK(tfc_gpt_set_autocast(dev, TFC_DTYPE_BF16));
    CHECK(tfc_gpt_get_autocast(dev) == TFC_DTYPE_BF16);
    tfc_graph *g1, *g2;
    double l1 = loss_and_grads(cpu, 0, &g1), l2 = loss_and_grads(dev, 0, &g2);
    CHECK(l1 == l2);
    CHECK(isfinite(l1) && fabs(l1 - log((double)V)) < 0.5);
    check_same_grads(cpu, dev);
    CHECK(tfc_gpt_autocast_refreshes(dev) == tfc_gpt_autocast_refreshes(cpu));
    tfc_graph_release(g1), tfc_graph_release(g2);
    tfc_gpt_release(cpu), tfc_gpt_release(dev);
    standin_remove();
}

/* max |a − b| over max(1, max |a|) of two f32 tensors (any devices). */
static double rel_diff(const tfc_tensor *a, const tfc_tensor *b) {
    int64_t na, nb;
    float *x = host_f32(a, &na), *y = host_f32(b, &nb);
    double d = na == nb ? 0 : INFINITY, m = 1;
    for (int64_t i = 0; na == nb && i < na; i++) d = fmax(d, fabs((double)x[i] - y[i])), m = fmax(m, fabs(x[i]));
    free(x), free(y);
    return d / m;
}

/*
 * A device whose GEMMs want padded columns (gemm_pad_cols: CUDA pads V = 50257 to 50304; here V = 65 → 128):
 * the autocast loss runs the LM head 128 wide with the padding's logits at -1e30, which leaves the loss and
 * every gradient those of the unpadded CPU run up to f32 summation order; logits asked for are the [B,T,V]
 * view; targets whose range the host did not see below V take the unpadded cross-entropy, so a target in
 * [V, 128) is refused, not scored against a padding column.
 */
TEST(autocast_head_padded_to_the_devices_gemm_width) {
    install();
    tfc_standin.caps.gemm_pad_cols = 64;
    tfc_gpt *cpu = tiny(), *dev = tiny();
    CHECK_OK(tfc_gpt_set_autocast(cpu, TFC_DTYPE_BF16));
    CHECK_OK(tfc_gpt_to_device(dev, TFC_DEVICE_CUDA, 0));
    CHECK_OK(tfc_gpt_set_autocast(dev, TFC_DTYPE_BF16));
    tfc_graph *g1, *g2;
    double l1 = loss_and_grads(cpu, 0, &g1), l2 = loss_and_grads(dev, 0, &g2);
    CHECK(isfinite(l2) && fabs(l1 - l2) <= 1e-6 * fabs(l1));
    int32_t n;
    const char *const *names;
    tfc_tensor *const *pa, *const *pb;
    CHECK_OK(tfc_gpt_params(cpu, &n, &names, &pa));
    CHECK_OK(tfc_gpt_params(dev, &n, &names, &pb));
    for (int32_t i = 0; i < n; i++) {
        tfc_tensor *ga = NULL, *gb = NULL;
        CHECK_OK(tfc_tensor_grad(pa[i], &ga));
        CHECK_OK(tfc_tensor_grad(pb[i], &gb));
        const double d = ga && gb ? rel_diff(ga, gb) : INFINITY;
        if (!(d <= 1e-5)) TFC_FAIL_AT("gradient of %s: padded head differs by %.3g", names[i], d);
        tfc_tensor_release(ga), tfc_tensor_release(gb);
    }
    tfc_graph_release(g1), tfc_graph_release(g2);
    /* logits: the first V columns */
    tfc_tensor *x, *y, *lc = NULL, *ld = NULL, *loss = NULL;
    batch(1, &x, &y);
    CHECK_OK(tfc_gpt_forward(cpu, NULL, x, NULL, &lc, NULL));
    CHECK_OK(tfc_gpt_forward(dev, NULL, x, NULL, &ld, NULL));
    CHECK(tfc_tensor_ndim(ld) == 3 && tfc_tensor_dim(ld, 2) == V);
    tfc_tensor *ldc = NULL;
    CHECK_OK(tfc_contiguous(NULL, ld, &ldc));
    CHECK(rel_diff(lc, ldc) <= 1e-6);
    /* a target of V + 5: inside the padded width, outside the vocabulary */
    int32_t ts[B * T];
    CHECK_OK(tfc_tensor_copy_to_host(y, ts, sizeof ts));
    ts[3] = V + 5;
    tfc_tensor *bad = NULL;
    const int64_t d[2] = {B, T};
    CHECK_OK(tfc_tensor_from_data(ts, d, 2, TFC_DTYPE_I32, &bad));
    CHECK(tfc_gpt_forward(dev, NULL, x, bad, NULL, &loss) != TFC_OK);
    CHECK(loss == NULL && strstr(tfc_last_error(), "70") != NULL);
    tfc_tensor_release(x), tfc_tensor_release(y), tfc_tensor_release(lc), tfc_tensor_release(ld);
    tfc_tensor_release(ldc), tfc_tensor_release(bad);
    tfc_gpt_release(cpu), tfc_gpt_release(dev);
    standin_remove();
}

TEST(autocast_stays_on_across_to_device_both_ways) {
    install();
    tfc_gpt *ref = tiny(), *m = tiny();
    CHECK_OK(tfc_gpt_set_autocast(ref, TFC_DTYPE_BF16));
    CHECK_OK(tfc_gpt_set_autocast(m, TFC_DTYPE_BF16));
    tfc_graph *g;
    const double want = loss_and_grads(ref, 1, &g);
    tfc_graph_release(g);
    CHECK(loss_and_grads(m, 1, &g) == want);
    tfc_graph_release(g);
    const int64_t n_copies = tfc_gpt_autocast_refreshes(m); /* one per Linear weight */
    CHECK(n_copies > 0);
    /* the move drops the copies (and their hold on the old weights): the bytes in use stay one model's */
    uint64_t before = 0, after = 0;
    const uint64_t model_bytes = (uint64_t)tfc_gpt_num_elements(m) * 4;
    tfc_memory_stats(NULL, &before, NULL, NULL);
    CHECK_OK(tfc_gpt_to_device(m, TFC_DEVICE_CUDA, 0));
    tfc_memory_stats(NULL, &after, NULL, NULL); /* the stand-in's "device" memory is the CPU allocator's */
    if (!(after <= before + model_bytes / 8))
        TFC_FAIL_AT("moving an autocast model kept %llu bytes more (the model is %llu)",
                    (unsigned long long)(after - before), (unsigned long long)model_bytes);
    CHECK(tfc_gpt_get_autocast(m) == TFC_DTYPE_BF16);
    CHECK(loss_and_grads(m, 1, &g) == want); /* the copies remade from the moved weights */
    tfc_graph_release(g);
    CHECK(tfc_gpt_autocast_refreshes(m) == 2 * n_copies);
    CHECK_OK(tfc_gpt_to_device(m, TFC_DEVICE_CPU, 0));
    CHECK(tfc_gpt_get_autocast(m) == TFC_DTYPE_BF16);
    CHECK(loss_and_grads(m, 1, &g) == want);
    tfc_graph_release(g);
    CHECK(tfc_gpt_autocast_refreshes(m) == 3 * n_copies);
    tfc_gpt_release(ref), tfc_gpt_release(m);
    standin_remove();
}

static tfc_optim *adamw_of(tfc_gpt *m) {
    int32_t n;
    const char *const *names;
    tfc_tensor *const *ps;
    CHECK_OK(tfc_gpt_params(m, &n, &names, &ps));
    tfc_optim *opt = NULL;
    CHECK_OK(tfc_optim_adamw(NULL, &opt));
    CHECK_OK(tfc_optim_add_params(opt, ps, n, NULL));
    return opt;
}

/*
 * One training step as tfcore train's non-logging step runs it: host ids in, loss left on the device, clipping
 * on the device. Returns the host waits it counted; `read_loss` and `sync_clip` make it a logging step.
 */
static int64_t step_syncs(tfc_gpt *m, tfc_optim *opt, int k, int read_loss, int sync_clip) {
    tfc_tensor *x, *y, *loss = NULL;
    batch(k, &x, &y);
    tfc_graph *g;
    CHECK_OK(tfc_graph_new(&g));
    const int64_t before = tfc_device_sync_count();
    CHECK_OK(tfc_gpt_forward(m, g, x, y, NULL, &loss));
    CHECK_OK(tfc_graph_backward(g, loss, NULL));
    double l = 0, norm = 0;
    if (read_loss) CHECK_OK(tfc_tensor_item(loss, &l));
    if (sync_clip)
        CHECK_OK(tfc_optim_clip_grad_norm(opt, 1.0, &norm));
    else
        CHECK_OK(tfc_optim_clip_grad_norm_async(opt, 1.0, NULL));
    CHECK_OK(tfc_optim_step(opt));
    CHECK_OK(tfc_optim_zero_grad(opt, 1));
    const int64_t n = tfc_device_sync_count() - before;
    tfc_graph_release(g);
    tfc_tensor_release(loss), tfc_tensor_release(x), tfc_tensor_release(y);
    return n;
}

TEST(a_non_logging_step_never_waits) {
    install();
    tfc_gpt *m = tiny();
    CHECK_OK(tfc_gpt_to_device(m, TFC_DEVICE_CUDA, 0));
    CHECK_OK(tfc_gpt_set_autocast(m, TFC_DTYPE_BF16));
    tfc_optim *opt = adamw_of(m);
    CHECK(step_syncs(m, opt, 0, 0, 0) == 0);
    CHECK(step_syncs(m, opt, 1, 0, 0) == 0);
    CHECK(step_syncs(m, opt, 2, 1, 0) == 1); /* + reading the loss */
    CHECK(step_syncs(m, opt, 3, 1, 1) == 2); /* + the synchronous clip's norm */
    /* a copy to the host is one wait */
    int32_t n;
    const char *const *names;
    tfc_tensor *const *ps;
    CHECK_OK(tfc_gpt_params(m, &n, &names, &ps));
    int64_t before = tfc_device_sync_count(), numel;
    free(host_f32(ps[0], &numel));
    CHECK(tfc_device_sync_count() - before == 1);
    tfc_optim_release(opt);
    tfc_gpt_release(m);
    /* on the CPU nothing waits, whatever the step reads */
    m = tiny();
    opt = adamw_of(m);
    CHECK(step_syncs(m, opt, 0, 1, 1) == 0);
    tfc_optim_release(opt);
    tfc_gpt_release(m);
    standin_remove();
}

/* Gradients of a known pattern on params of the given sizes (f32, CPU). */
static tfc_tensor **grads_pattern(const int64_t *sizes, int n, double scale) {
    tfc_tensor **ps = calloc((size_t)n, sizeof *ps);
    for (int i = 0; i < n; i++) {
        float *v = malloc((size_t)sizes[i] * sizeof *v);
        for (int64_t j = 0; j < sizes[i]; j++) v[j] = (float)(scale * sin(0.37 * (double)(j + 1) + i));
        tfc_tensor *g = NULL;
        CHECK_OK(tfc_tensor_from_data(v, &sizes[i], 1, TFC_DTYPE_F32, &g));
        CHECK_OK(tfc_tensor_zeros(&sizes[i], 1, TFC_DTYPE_F32, &ps[i]));
        CHECK_OK(tfc_tensor_set_requires_grad(ps[i], 1));
        CHECK_OK(tfc_tensor_set_grad(ps[i], g));
        tfc_tensor_release(g);
        free(v);
    }
    return ps;
}

TEST(clip_async_matches_a_double_reference_and_the_sync_clip) {
    const int64_t sizes[3] = {5, 300, 77};
    for (int c = 0; c < 2; c++) {
        const double scale = c ? 0.5 : 0.01; /* norm ≈ 9.3: clipped; ≈ 0.19: left alone */
        tfc_tensor **pa = grads_pattern(sizes, 3, scale), **pb = grads_pattern(sizes, 3, scale);
        double want = 0; /* the norm in double from the gradients' f32 values */
        for (int i = 0; i < 3; i++)
            for (int64_t j = 0; j < sizes[i]; j++) {
                double v = (double)(float)(scale * sin(0.37 * (double)(j + 1) + i));
                want += v * v;
            }
        want = sqrt(want);
        tfc_optim *oa = NULL, *ob = NULL;
        CHECK_OK(tfc_optim_adamw(NULL, &oa));
        CHECK_OK(tfc_optim_adamw(NULL, &ob));
        CHECK_OK(tfc_optim_add_params(oa, pa, 3, NULL));
        CHECK_OK(tfc_optim_add_params(ob, pb, 3, NULL));
        tfc_tensor *norm = NULL;
        double got = 0, sync_norm = 0;
        CHECK_OK(tfc_optim_clip_grad_norm_async(oa, 1.0, &norm));
        CHECK(norm && tfc_tensor_ndim(norm) == 0);
        CHECK_OK(tfc_tensor_item(norm, &got));
        CHECK_CLOSE(got, want, 1e-6 * want);
        CHECK_OK(tfc_optim_clip_grad_norm(ob, 1.0, &sync_norm));
        CHECK_CLOSE(got, sync_norm, 1e-6 * want);
        const double factor = fmin(1.0, 1.0 / (want + 1e-6));
        for (int i = 0; i < 3; i++) {
            tfc_tensor *ga = NULL, *gb = NULL;
            CHECK_OK(tfc_tensor_grad(pa[i], &ga));
            CHECK_OK(tfc_tensor_grad(pb[i], &gb));
            int64_t n;
            float *a = host_f32(ga, &n), *b = host_f32(gb, &n);
            for (int64_t j = 0; j < n; j++) {
                const double orig = (double)(float)(scale * sin(0.37 * (double)(j + 1) + i));
                CHECK_CLOSE((double)a[j], orig * factor, 1e-6 * fabs(orig) + 1e-12);
                CHECK_CLOSE((double)a[j], (double)b[j], 1e-6 * fabs(orig) + 1e-12);
                if (factor == 1.0 && (double)a[j] != orig) TFC_FAIL_AT("an unclipped gradient changed: %g", a[j]);
            }
            free(a), free(b);
            tfc_tensor_release(ga), tfc_tensor_release(gb);
        }
        tfc_tensor_release(norm);
        tfc_optim_release(oa), tfc_optim_release(ob);
        for (int i = 0; i < 3; i++) tfc_tensor_release(pa[i]), tfc_tensor_release(pb[i]);
        free(pa), free(pb);
    }
}

TEST(clip_async_lets_a_nan_through_and_refuses_bad_calls) {
    const int64_t sizes[2] = {4, 6};
    tfc_tensor **ps = grads_pattern(sizes, 2, 1.0);
    tfc_tensor *g0 = NULL;
    CHECK_OK(tfc_tensor_grad(ps[0], &g0));
    float v[4];
    CHECK_OK(tfc_tensor_copy_to_host(g0, v, sizeof v));
    v[2] = NAN;
    CHECK_OK(tfc_tensor_copy_from_host(g0, v, sizeof v));
    tfc_optim *o = NULL;
    CHECK_OK(tfc_optim_adamw(NULL, &o));
    CHECK_OK(tfc_optim_add_params(o, ps, 2, NULL));
    tfc_tensor *norm = NULL, *sentinel = (tfc_tensor *)&norm;
    CHECK_ERR(tfc_optim_clip_grad_norm_async(NULL, 1.0, &norm), TFC_ERR_INVALID_ARG,
              "tfc_optim_clip_grad_norm_async: opt is NULL");
    norm = sentinel;
    CHECK_ERR(tfc_optim_clip_grad_norm_async(o, 0.0, &norm), TFC_ERR_INVALID_ARG,
              "tfc_optim_clip_grad_norm_async: max_norm is 0: must be > 0");
    CHECK(norm == NULL);
    CHECK_OK(tfc_optim_clip_grad_norm_async(o, 1.0, &norm));
    double n = 0;
    CHECK_OK(tfc_tensor_item(norm, &n));
    CHECK(isnan(n));
    tfc_tensor *g1 = NULL;
    CHECK_OK(tfc_tensor_grad(ps[1], &g1));
    float w[6];
    CHECK_OK(tfc_tensor_copy_to_host(g1, w, sizeof w));
    for (int j = 0; j < 6; j++) CHECK(isnan(w[j])); /* not hidden: every gradient shows it */
    tfc_tensor_release(g0), tfc_tensor_release(g1), tfc_tensor_release(norm);
    tfc_optim_release(o);
    for (int i = 0; i < 2; i++) tfc_tensor_release(ps[i]);
    free(ps);
}

/* One forward + backward of m on ids x and targets y (on any device); the host waits it counted. */
static int64_t waits_of(tfc_gpt *m, const tfc_tensor *x, const tfc_tensor *y, tfc_status want) {
    tfc_graph *g;
    tfc_tensor *loss = NULL;
    CHECK_OK(tfc_graph_new(&g));
    const int64_t before = tfc_device_sync_count();
    tfc_status s = tfc_gpt_forward(m, g, x, y, NULL, &loss);
    if (s != want) TFC_FAIL_AT("status %d, want %d: %s", (int)s, (int)want, tfc_last_error());
    if (s == TFC_OK) CHECK_OK(tfc_graph_backward(g, loss, NULL));
    const int64_t n = tfc_device_sync_count() - before;
    tfc_tensor_release(loss);
    tfc_graph_release(g);
    return n;
}

TEST(ids_are_checked_on_the_device_unless_their_host_range_is_current) {
    install();
    tfc_gpt *m = tiny();
    CHECK_OK(tfc_gpt_to_device(m, TFC_DEVICE_CUDA, 0));
    tfc_tensor *x, *y, *xd = NULL, *yd = NULL;
    batch(0, &x, &y);
    CHECK_OK(tfc_tensor_to_device(x, TFC_DEVICE_CUDA, 0, &xd));
    CHECK_OK(tfc_tensor_to_device(y, TFC_DEVICE_CUDA, 0, &yd));
    /* copied from the host: their range is known; the positions (from the host too) as well */
    CHECK(waits_of(m, xd, yd, TFC_OK) == 0);
    /* written on the device since (a new version): the ids are checked there again, and the targets */
    int32_t ids[B * T];
    CHECK_OK(tfc_tensor_copy_to_host(x, ids, sizeof ids));
    CHECK_OK(tfc_tensor_copy_from_host(xd, ids, sizeof ids));
    CHECK(waits_of(m, xd, yd, TFC_OK) == 2); /* wte forward and backward */
    /* a raw pointer handed out: writes through it are unseen, so the range is forgotten */
    CHECK(tfc_tensor_data(yd) != NULL);
    CHECK(waits_of(m, x, yd, TFC_OK) == 1); /* the cross-entropy's targets */
    /* out of range on the host: nothing skips the check, which refuses it (the stand-in's CPU kernel here) */
    ids[5] = V;
    tfc_tensor *bad = NULL;
    const int64_t d[2] = {B, T};
    CHECK_OK(tfc_tensor_from_data(ids, d, 2, TFC_DTYPE_I32, &bad));
    CHECK(waits_of(m, bad, y, TFC_ERR_INVALID_ARG) == 1);
    CHECK(strstr(tfc_last_error(), "65") != NULL);
    /* targets: the ignore index is in range for the cross-entropy; another negative value is not */
    int32_t ts[B * T];
    CHECK_OK(tfc_tensor_copy_to_host(y, ts, sizeof ts));
    ts[0] = ts[7] = -100; /* the GPT's ignore index (torch's default) */
    tfc_tensor *yi = NULL, *yb = NULL;
    CHECK_OK(tfc_tensor_from_data(ts, d, 2, TFC_DTYPE_I32, &yi));
    CHECK(waits_of(m, x, yi, TFC_OK) == 0);
    ts[3] = -1;
    CHECK_OK(tfc_tensor_from_data(ts, d, 2, TFC_DTYPE_I32, &yb));
    CHECK(waits_of(m, x, yb, TFC_ERR_INVALID_ARG) == 1);
    CHECK(strstr(tfc_last_error(), "targets[3] is -1") != NULL);
    tfc_tensor_release(bad), tfc_tensor_release(yi), tfc_tensor_release(yb);
    tfc_tensor_release(x), tfc_tensor_release(y), tfc_tensor_release(xd), tfc_tensor_release(yd);
    tfc_gpt_release(m);
    standin_remove();
}
