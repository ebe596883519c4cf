/*
 * Device dispatch through the backend table, the parts that run without a
 * GPU:
 *   - the table alone decides where an op runs: with a stand-in table
 *     serving device type CUDA (the CPU's entries, standin_backend.h), a
 *     GPT trains on "cuda:0" exactly as on the CPU, bit for bit;
 *   - a NULL entry is TFC_ERR_UNSUPPORTED naming op, device and dtype,
 *     before anything is written;
 *   - mixing devices in one call is TFC_ERR_DEVICE naming the function,
 *     both arguments and both devices, decided before any device work;
 *   - without a usable CUDA device every CUDA path fails cleanly with the
 *     loader's reason (skipped where a GPU is present: there the device
 *     check exercises the real paths);
 *   - tfc_gpt_to_device: argument errors, a failed move leaves the model
 *     untouched, and a CPU -> CPU move keeps every value and the loss.
 * "CUDA tensors" in the mixed-device tests are CPU tensors whose storage is
 * labelled CUDA for the duration of one call that must fail before touching
 * memory (the label is restored before release).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tfc_test.h"

#include "standin_backend.h"
#include "tensor/tensor_impl.h"

TFC_TEST_MAIN

static void label_cuda(tfc_tensor *t, int on) {
    t->storage->device = on ? TFC_DEVICE_CUDA : TFC_DEVICE_CPU;
    t->storage->device_index = 0;
}

static tfc_tensor *filled(const int64_t *d, int nd, tfc_dtype dt, double v) {
    tfc_tensor *t = NULL;
    CHECK_OK(tfc_tensor_full(d, nd, dt, v, &t));
    return t;
}

TEST(mixed_devices_name_function_arguments_and_devices) {
    const int64_t d23[2] = {2, 3}, d32[2] = {3, 2}, d3[1] = {3}, d2[1] = {2}, dq[4] = {1, 1, 2, 4};
    tfc_tensor *a = filled(d23, 2, TFC_DTYPE_F32, 1), *b = filled(d23, 2, TFC_DTYPE_F32, 2);
    tfc_tensor *w = filled(d32, 2, TFC_DTYPE_F32, 1), *r = NULL, *sentinel = (tfc_tensor *)&r;
    standin_install();
    label_cuda(a, 1);
    r = sentinel;
    CHECK_ERR(tfc_add(NULL, a, b, &r), TFC_ERR_DEVICE, "tfc_add: a lives on cuda:0 but b lives on cpu");
    CHECK(r == sentinel); /* out-param untouched */
    CHECK_ERR(tfc_mul(NULL, b, a, &r), TFC_ERR_DEVICE, "tfc_mul: a lives on cpu but b lives on cuda:0");
    CHECK_ERR(tfc_matmul(NULL, w, a, &r), TFC_ERR_DEVICE, "tfc_matmul: a lives on cpu but b lives on cuda:0");
    CHECK_ERR(tfc_linear(NULL, a, w, NULL, &r), TFC_ERR_DEVICE, "tfc_linear: x lives on cuda:0 but w lives on cpu");
    CHECK(r == sentinel);
    label_cuda(a, 0);

    /* kernel entries: inputs against the first input, outputs against their reference */
    tfc_tensor *gamma = filled(d3, 1, TFC_DTYPE_F32, 1), *y = filled(d23, 2, TFC_DTYPE_F32, 0);
    label_cuda(gamma, 1);
    CHECK_ERR(tfc_layernorm_forward(a, gamma, NULL, 1e-5, y, NULL, NULL), TFC_ERR_DEVICE,
              "tfc_layernorm_forward: x lives on cpu but weight lives on cuda:0");
    label_cuda(gamma, 0);
    label_cuda(y, 1);
    CHECK_ERR(tfc_gelu_forward(a, 1, y), TFC_ERR_DEVICE, "tfc_gelu_forward: x lives on cpu but y lives on cuda:0");
    CHECK_ERR(tfc_softmax_forward(a, -1, 0, y), TFC_ERR_DEVICE, "y lives on cuda:0");
    label_cuda(y, 0);

    tfc_tensor *ids = NULL, *loss = NULL;
    int32_t idv[2] = {0, 1};
    CHECK_OK(tfc_tensor_from_data(idv, d2, 1, TFC_DTYPE_I32, &ids));
    CHECK_OK(tfc_tensor_zeros(NULL, 0, TFC_DTYPE_F32, &loss));
    tfc_tensor *emb = filled(d23, 2, TFC_DTYPE_F32, 0);
    label_cuda(ids, 1);
    CHECK_ERR(tfc_embedding_forward(w, ids, emb), TFC_ERR_DEVICE,
              "tfc_embedding_forward: table lives on cpu but ids lives on cuda:0");
    CHECK_ERR(tfc_cross_entropy_forward(a, ids, -1, loss, NULL), TFC_ERR_DEVICE,
              "tfc_cross_entropy_forward: logits lives on cpu but targets lives on cuda:0");
    CHECK_ERR(tfc_embedding(NULL, w, ids, &r), TFC_ERR_DEVICE, "table lives on cpu but ids lives on cuda:0");
    CHECK_ERR(tfc_linear_cross_entropy(NULL, b, b, ids, -1, &r), TFC_ERR_DEVICE,
              "tfc_linear_cross_entropy: h lives on cpu but targets lives on cuda:0");
    label_cuda(ids, 0);

    tfc_tensor *q = filled(dq, 4, TFC_DTYPE_F32, 0.5), *k = filled(dq, 4, TFC_DTYPE_F32, 0.5);
    tfc_tensor *o = filled(dq, 4, TFC_DTYPE_F32, 0);
    label_cuda(k, 1);
    CHECK_ERR(tfc_attention_forward(q, k, q, 1, 0.5, o, NULL), TFC_ERR_DEVICE,
              "tfc_attention_forward: q lives on cpu but k lives on cuda:0");
    CHECK_ERR(tfc_attention(NULL, q, k, q, 1, 0.5, &r), TFC_ERR_DEVICE, "q lives on cpu but k lives on cuda:0");
    label_cuda(k, 0);

    /* matmul's explicit backward: a gradient buffer on another device */
    tfc_tensor *dout = filled(d32, 2, TFC_DTYPE_F32, 1), *dm = filled(d32, 2, TFC_DTYPE_F32, 0);
    tfc_tensor *sq = filled((int64_t[]){3, 3}, 2, TFC_DTYPE_F32, 1);
    label_cuda(dm, 1);
    CHECK_ERR(tfc_matmul_backward(dout, sq, w, NULL, dm, 0), TFC_ERR_DEVICE,
              "tfc_matmul_backward: a lives on cpu but db lives on cuda:0");
    label_cuda(dm, 0);

    tfc_tensor *all[] = {a, b, w, gamma, y, ids, loss, emb, q, k, o, dout, dm, sq};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tfc_tensor_release(all[i]);
    standin_remove();
}

/* A leaf with a gradient of `v` everywhere. */
static tfc_tensor *param_with_grad(const int64_t *d, int nd, double v) {
    tfc_tensor *p = filled(d, nd, TFC_DTYPE_F32, 1), *g = filled(d, nd, TFC_DTYPE_F32, v);
    CHECK_OK(tfc_tensor_set_requires_grad(p, 1));
    CHECK_OK(tfc_tensor_set_grad(p, g));
    tfc_tensor_release(g);
    return p;
}

TEST(optimizer_and_clipping_refuse_mixed_devices) {
    const int64_t d[1] = {4};
    tfc_tensor *p0 = param_with_grad(d, 1, 0.5), *p1 = param_with_grad(d, 1, 0.25);
    tfc_tensor *ps[2] = {p0, p1};
    double norm = -1;
    standin_install();
    label_cuda(p1->grad, 1);
    CHECK_ERR(tfc_clip_grad_norm(ps, 2, 1.0, &norm), TFC_ERR_DEVICE,
              "tfc_clip_grad_norm: the first gradient lives on cpu but a later gradient lives on cuda:0");
    CHECK(norm == -1);
    tfc_optim_options oo = TFC_ADAMW_OPTIONS_INIT;
    tfc_optim *opt = NULL;
    CHECK_OK(tfc_optim_adamw(&oo, &opt));
    CHECK_OK(tfc_optim_add_params(opt, ps, 2, NULL));
    CHECK_ERR(tfc_optim_step(opt), TFC_ERR_DEVICE,
              "tfc_optim_step: the first parameter with a gradient lives on cpu but the grad of parameter 1 lives on "
              "cuda:0");
    int64_t steps = -1;
    CHECK_OK(tfc_optim_step_count(opt, &steps));
    CHECK(steps == 0);
    label_cuda(p1->grad, 0);
    tfc_optim_release(opt);

    tfc_tensor_release(p0);
    tfc_tensor_release(p1);
    standin_remove();
}

/* Bytes of t (host memory: CPU or stand-in "cuda"). */
static void host_bytes(const tfc_tensor *t, void *out, size_t n) { CHECK_OK(tfc_tensor_copy_to_host(t, out, n)); }

TEST(a_missing_entry_is_unsupported_naming_op_device_and_dtype) {
    tfc_backend *sb = standin_install();
    sb->reduce = NULL;
    sb->layernorm_forward = NULL;
    sb->optim_step = NULL;
    sb->gemm = NULL;
    const int64_t d[2] = {2, 3}, d3[1] = {3};
    tfc_tensor *x = NULL, *y = NULL, *r = NULL, *sentinel = (tfc_tensor *)&r;
    CHECK_OK(tfc_tensor_full(d, 2, TFC_DTYPE_F32, 1.5, &x));
    CHECK_OK(tfc_tensor_to_device(x, TFC_DEVICE_CUDA, 0, &y)); /* through the stand-in's memcpy */
    CHECK(tfc_tensor_device_type(y) == TFC_DEVICE_CUDA);
    int32_t dim1 = 1;
    r = sentinel;
    CHECK_ERR(tfc_sum(NULL, y, &dim1, 1, 0, &r), TFC_ERR_UNSUPPORTED,
              "tfc_sum: reduce is not implemented on cuda:0 for f32");
    CHECK_ERR(tfc_argmax(y, 1, 0, &r), TFC_ERR_UNSUPPORTED, "tfc_argmax: reduce is not implemented on cuda:0 for f32");
    tfc_tensor *yt = NULL;
    CHECK_OK(tfc_transpose(NULL, y, 0, 1, &yt));
    CHECK_ERR(tfc_matmul(NULL, y, yt, &r), TFC_ERR_UNSUPPORTED,
              "tfc_matmul: gemm is not implemented on cuda:0 for f32");
    CHECK(r == sentinel);
    /* An explicit door writes nothing when the entry is missing. */
    tfc_tensor *out = NULL;
    CHECK_OK(tfc_tensor_new_like(y, y->dtype, &out));
    CHECK_OK(tfc_tensor_fill(out, 7.0));
    CHECK_ERR(tfc_layernorm_forward(y, NULL, NULL, 1e-5, out, NULL, NULL), TFC_ERR_UNSUPPORTED,
              "tfc_layernorm_forward: layernorm_forward is not implemented on cuda:0 for f32");
    float v[6];
    host_bytes(out, v, sizeof v);
    for (int i = 0; i < 6; i++) CHECK(v[i] == 7.0f);
    /* The optimizer: the step is refused before any state changes. */
    tfc_tensor *p = NULL, *g = NULL;
    CHECK_OK(tfc_tensor_full(d3, 1, TFC_DTYPE_F32, 1.0, &p));
    tfc_tensor *pc = NULL, *gc = NULL;
    CHECK_OK(tfc_tensor_full(d3, 1, TFC_DTYPE_F32, 0.5, &g));
    CHECK_OK(tfc_tensor_to_device(p, TFC_DEVICE_CUDA, 0, &pc));
    CHECK_OK(tfc_tensor_to_device(g, TFC_DEVICE_CUDA, 0, &gc));
    CHECK_OK(tfc_tensor_set_requires_grad(pc, 1));
    CHECK_OK(tfc_tensor_set_grad(pc, gc));
    tfc_optim_options so = TFC_SGD_OPTIONS_INIT;
    so.lr = 0.1;
    tfc_optim *opt = NULL;
    CHECK_OK(tfc_optim_sgd(&so, &opt));
    CHECK_OK(tfc_optim_add_params(opt, &pc, 1, NULL));
    CHECK_ERR(tfc_optim_step(opt), TFC_ERR_UNSUPPORTED,
              "tfc_optim_step: optim_step is not implemented on cuda:0 for f32");
    int64_t steps = -1;
    CHECK_OK(tfc_optim_step_count(opt, &steps));
    CHECK(steps == 0);
    float pv[3];
    host_bytes(pc, pv, sizeof pv);
    CHECK(pv[0] == 1.0f && pv[2] == 1.0f);
    tfc_optim_release(opt);
    tfc_tensor *all[] = {x, y, yt, out, p, g, pc, gc};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tfc_tensor_release(all[i]);
    standin_remove();
}

TEST(without_a_device_cuda_paths_fail_with_the_loaders_reason) {
    if (tfc_cuda_available()) {
        printf("  (a CUDA device is present: the device check covers these paths)\n");
        return;
    }
    const int64_t d[2] = {2, 3};
    tfc_tensor *a = filled(d, 2, TFC_DTYPE_F32, 1), *b = filled(d, 2, TFC_DTYPE_F32, 2), *r = NULL;
    tfc_tensor *t = NULL;
    CHECK_ERR(tfc_tensor_to_device(a, TFC_DEVICE_CUDA, 0, &t), TFC_ERR_DEVICE, "CUDA unavailable");
    CHECK(t == NULL);
    label_cuda(a, 1);
    label_cuda(b, 1);
    CHECK_ERR(tfc_add(NULL, a, b, &r), TFC_ERR_DEVICE, "tfc_add: CUDA unavailable");
    CHECK_ERR(tfc_neg(NULL, a, &r), TFC_ERR_DEVICE, "tfc_neg: CUDA unavailable");
    int32_t dim1 = 1;
    CHECK_ERR(tfc_sum(NULL, a, &dim1, 1, 0, &r), TFC_ERR_DEVICE, "tfc_sum: CUDA unavailable");
    CHECK_ERR(tfc_gelu_forward(a, 1, b), TFC_ERR_DEVICE, "tfc_gelu_forward: CUDA unavailable");
    CHECK_ERR(tfc_tensor_fill(a, 2.0), TFC_ERR_DEVICE, "tfc_tensor_fill: CUDA unavailable");
    CHECK_ERR(tfc_tensor_fill_normal(a, 0, 1, 1, 0), TFC_ERR_DEVICE, "tfc_tensor_fill_normal: CUDA unavailable");
    CHECK(r == NULL);
    label_cuda(a, 0);
    label_cuda(b, 0);
    tfc_tensor_release(a);
    tfc_tensor_release(b);
}

/* Fake modules for the loader's version check: one built for the previous ABI, one for this ABI with another table size. */
static tfc_backend old_table = {.struct_size = 600, .abi_version = TFC_BACKEND_ABI - 1, .name = "cuda"};
static const tfc_backend *old_module(uint32_t v) { return v == TFC_BACKEND_ABI - 1 ? &old_table : NULL; }
static tfc_backend odd_table = {.struct_size = sizeof(tfc_backend) + 8, .abi_version = TFC_BACKEND_ABI, .name = "cuda"};
static const tfc_backend *odd_module(uint32_t v) { return v == TFC_BACKEND_ABI ? &odd_table : NULL; }
static const tfc_backend *mute_module(uint32_t v) { return (void)v, NULL; }
static const tfc_backend *this_module(uint32_t v) { return v == TFC_BACKEND_ABI ? &tfc_cpu_backend : NULL; }

TEST(the_loader_refuses_a_module_of_another_abi_naming_both_versions) {
    CHECK(TFC_BACKEND_ABI == 14);
    char why[512], want[128];
    const tfc_backend *b = NULL;
    CHECK(tfc_backend_check_module(old_module, "libtfcore-cuda.so", &b, why, sizeof why) == TFC_ERR_DEVICE);
    snprintf(want, sizeof want, "speaks backend ABI %d (a table of 600 bytes), this libtfcore ABI %d",
             TFC_BACKEND_ABI - 1, TFC_BACKEND_ABI);
    CHECK(strstr(why, "the CUDA module libtfcore-cuda.so") != NULL);
    CHECK(strstr(why, want) != NULL);
    CHECK(b == NULL);
    CHECK(tfc_backend_check_module(odd_module, "m.so", &b, why, sizeof why) == TFC_ERR_DEVICE);
    snprintf(want, sizeof want, "speaks backend ABI %d (a table of %zu bytes)", TFC_BACKEND_ABI,
             sizeof(tfc_backend) + 8);
    CHECK(strstr(why, want) != NULL);
    CHECK(tfc_backend_check_module(mute_module, "m.so", &b, why, sizeof why) == TFC_ERR_DEVICE);
    snprintf(want, sizeof want, "speaks no backend ABI from 1 to %d; this libtfcore speaks %d", TFC_BACKEND_ABI + 16,
             TFC_BACKEND_ABI);
    CHECK(strstr(why, want) != NULL);
    CHECK(tfc_backend_check_module(NULL, "m.so", &b, why, sizeof why) == TFC_ERR_DEVICE);
    CHECK(strstr(why, "exports no tfc_backend_module_get") != NULL);
    CHECK(b == NULL);
    CHECK(tfc_backend_check_module(this_module, "m.so", &b, why, sizeof why) == TFC_OK);
    CHECK(b == &tfc_cpu_backend);
}

static tfc_gpt *tiny_gpt(void) {
    tfc_gpt_config c = TFC_GPT_CONFIG_INIT;
    c.n_layer = 1;
    c.n_head = 2;
    c.n_embd = 8;
    c.vocab_size = 11;
    c.block_size = 6;
    tfc_gpt *m = NULL;
    CHECK_OK(tfc_gpt_new(&c, 7, &m));
    return m;
}

static double gpt_loss(tfc_gpt *m, const tfc_tensor *idx, const tfc_tensor *tg) {
    tfc_tensor *loss = NULL;
    double l = NAN;
    CHECK_OK(tfc_gpt_forward(m, NULL, idx, tg, NULL, &loss));
    if (loss) CHECK_OK(tfc_tensor_item(loss, &l));
    tfc_tensor_release(loss);
    return l;
}

TEST(gpt_to_device) {
    tfc_gpt *m = tiny_gpt();
    const int64_t d[2] = {2, 3};
    int32_t iv[6] = {1, 2, 3, 4, 5, 6}, tv[6] = {2, 3, 4, 5, 6, 7};
    tfc_tensor *idx = NULL, *tg = NULL;
    CHECK_OK(tfc_tensor_from_data(iv, d, 2, TFC_DTYPE_I32, &idx));
    CHECK_OK(tfc_tensor_from_data(tv, d, 2, TFC_DTYPE_I32, &tg));
    double before = gpt_loss(m, idx, tg);
    int32_t n;
    const char *const *names;
    tfc_tensor *const *ps;
    CHECK_OK(tfc_gpt_params(m, &n, &names, &ps));
    tfc_tensor *wte0 = ps[0];
    float w0[11 * 8];
    CHECK_OK(tfc_tensor_copy_to_host(wte0, w0, sizeof w0));

    CHECK_ERR(tfc_gpt_to_device(NULL, TFC_DEVICE_CPU, 0), TFC_ERR_INVALID_ARG, "tfc_gpt_to_device: m is NULL");
    CHECK_ERR(tfc_gpt_to_device(m, (tfc_device_type)7, 0), TFC_ERR_DEVICE, "tfc_gpt_to_device: device is 7");
    CHECK_ERR(tfc_gpt_to_device(m, TFC_DEVICE_CUDA, -1), TFC_ERR_DEVICE, "device_index is -1");
    if (!tfc_cuda_available()) {
        CHECK_ERR(tfc_gpt_to_device(m, TFC_DEVICE_CUDA, 0), TFC_ERR_DEVICE,
                  "tfc_gpt_to_device: parameter transformer.wte.weight: tfc_tensor_to_device");
        CHECK_ERR(tfc_gpt_to_device(m, TFC_DEVICE_CUDA, 0), TFC_ERR_DEVICE, "CUDA unavailable");
        CHECK_OK(tfc_gpt_params(m, &n, &names, &ps));
        CHECK(ps[0] == wte0); /* unchanged on error */
    }

    /* A CPU -> CPU move gives fresh leaves with the same values. */
    CHECK_OK(tfc_gpt_to_device(m, TFC_DEVICE_CPU, 0));
    CHECK_OK(tfc_gpt_params(m, &n, &names, &ps));
    CHECK(ps[0] != wte0);
    float w1[11 * 8];
    CHECK_OK(tfc_tensor_copy_to_host(ps[0], w1, sizeof w1));
    CHECK(memcmp(w0, w1, sizeof w0) == 0);
    for (int32_t i = 0; i < n; i++) CHECK(tfc_tensor_requires_grad(ps[i]));
    CHECK(gpt_loss(m, idx, tg) == before);

    /* ids on another device than the model are refused by name */
    label_cuda(idx, 1);
    tfc_tensor *loss = NULL;
    CHECK_ERR(tfc_gpt_forward(m, NULL, idx, tg, NULL, &loss), TFC_ERR_DEVICE,
              "tfc_gpt_forward: idx lives on cuda:0 but the model on cpu:0");
    label_cuda(idx, 0);
    tfc_tensor_release(idx);
    tfc_tensor_release(tg);
    tfc_gpt_release(m);
}

/* n AdamW steps (forward, backward, clip 1.0, step) of m; losses[i] per step. */
static void train_steps(tfc_gpt *m, const tfc_tensor *idx, const tfc_tensor *tg, int n, double *losses) {
    int32_t np;
    const char *const *names;
    tfc_tensor *const *ps;
    CHECK_OK(tfc_gpt_params(m, &np, &names, &ps));
    tfc_optim_options oo = TFC_ADAMW_OPTIONS_INIT;
    oo.lr = 1e-2;
    tfc_optim *opt = NULL;
    CHECK_OK(tfc_optim_adamw(&oo, &opt));
    CHECK_OK(tfc_optim_add_params(opt, ps, np, NULL));
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    for (int i = 0; i < n; i++) {
        tfc_tensor *loss = NULL;
        CHECK_OK(tfc_gpt_forward(m, g, idx, tg, NULL, &loss));
        CHECK_OK(tfc_tensor_item(loss, &losses[i]));
        CHECK_OK(tfc_graph_backward(g, loss, NULL));
        double norm;
        CHECK_OK(tfc_optim_clip_grad_norm(opt, 1.0, &norm));
        CHECK_OK(tfc_optim_step(opt));
        CHECK_OK(tfc_optim_zero_grad(opt, 1));
        CHECK_OK(tfc_graph_clear(g));
        tfc_tensor_release(loss);
    }
    tfc_graph_release(g);
    tfc_optim_release(opt);
}

TEST(the_table_alone_decides_where_a_model_trains) {
    const int64_t d[2] = {2, 6};
    int32_t iv[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0, 1}, tv[12] = {2, 3, 4, 5, 6, 7, 8, 9, 10, 0, 1, 2};
    tfc_tensor *idx = NULL, *tg = NULL;
    CHECK_OK(tfc_tensor_from_data(iv, d, 2, TFC_DTYPE_I32, &idx));
    CHECK_OK(tfc_tensor_from_data(tv, d, 2, TFC_DTYPE_I32, &tg));
    double on_cpu[4], on_standin[4];
    tfc_gpt *a = tiny_gpt();
    train_steps(a, idx, tg, 4, on_cpu);

    standin_install();
    tfc_gpt *b = tiny_gpt();
    CHECK_OK(tfc_gpt_to_device(b, TFC_DEVICE_CUDA, 0));
    int32_t np;
    const char *const *names;
    tfc_tensor *const *pb, *const *pa;
    CHECK_OK(tfc_gpt_params(b, &np, &names, &pb));
    CHECK(tfc_tensor_device_type(pb[0]) == TFC_DEVICE_CUDA);
    train_steps(b, idx, tg, 4, on_standin);
    for (int i = 0; i < 4; i++) CHECK(on_cpu[i] == on_standin[i]);
    CHECK(on_cpu[3] < on_cpu[0]);
    /* Every parameter equal bit for bit after training. */
    CHECK_OK(tfc_gpt_params(a, &np, &names, &pa));
    CHECK_OK(tfc_gpt_params(b, &np, &names, &pb));
    for (int32_t i = 0; i < np; i++) {
        size_t bytes = (size_t)tfc_tensor_numel(pa[i]) * sizeof(float);
        float *x = malloc(bytes), *y = malloc(bytes);
        host_bytes(pa[i], x, bytes);
        host_bytes(pb[i], y, bytes);
        CHECK(memcmp(x, y, bytes) == 0);
        free(x);
        free(y);
    }
    tfc_gpt_release(b);
    standin_remove();
    tfc_gpt_release(a);
    tfc_tensor_release(idx);
    tfc_tensor_release(tg);
}

TEST(index_ops_dispatch_through_the_table) {
    tfc_backend *sb = standin_install();
    const int64_t d[2] = {2, 3}, di[1] = {2};
    const int64_t iv[2] = {2, 0};
    tfc_tensor *x = NULL, *xc = NULL, *i = NULL, *ic = NULL, *r = NULL, *sentinel = (tfc_tensor *)&r;
    CHECK_OK(tfc_tensor_arange(0, 6, 1, TFC_DTYPE_F32, &x));
    CHECK_OK(tfc_view(NULL, x, d, 2, &r));
    tfc_tensor_release(x);
    x = r;
    CHECK_OK(tfc_tensor_from_data(iv, di, 1, TFC_DTYPE_I64, &i));
    CHECK_OK(tfc_tensor_to_device(x, TFC_DEVICE_CUDA, 0, &xc));
    CHECK_OK(tfc_tensor_to_device(i, TFC_DEVICE_CUDA, 0, &ic));
    /* the stand-in's gather entry runs on "cuda:0" */
    CHECK_OK(tfc_index_select(NULL, xc, 1, ic, &r));
    CHECK(tfc_tensor_device_type(r) == TFC_DEVICE_CUDA);
    float v[4];
    host_bytes(r, v, sizeof v);
    CHECK(v[0] == 2 && v[1] == 0 && v[2] == 5 && v[3] == 3);
    tfc_tensor_release(r);
    /* nonzero reads a device mask on the host and answers on the device */
    CHECK_OK(tfc_nonzero(xc, &r));
    CHECK(tfc_tensor_device_type(r) == TFC_DEVICE_CUDA && tfc_tensor_dim(r, 0) == 5);
    tfc_tensor_release(r);
    r = sentinel;
    CHECK_ERR(tfc_index_select(NULL, xc, 1, i, &r), TFC_ERR_DEVICE,
              "tfc_index_select: x lives on cuda:0 but index lives on cpu");
    sb->gather = NULL;
    sb->scatter = NULL;
    CHECK_ERR(tfc_index_select(NULL, xc, 1, ic, &r), TFC_ERR_UNSUPPORTED,
              "tfc_index_select: gather is not implemented on cuda:0 for f32");
    CHECK(r == sentinel);
    tfc_tensor *all[] = {x, xc, i, ic};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) tfc_tensor_release(all[k]);
}

/* The issue #16 ops run through the table on "cuda:0" as on the CPU; their NULL entries and mixed devices fail. */
static double *host_vals(const tfc_tensor *t) {
    tfc_tensor *c = NULL, *h = NULL;
    int64_t n = tfc_tensor_numel(t);
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    CHECK_OK(tfc_tensor_to_device(t, TFC_DEVICE_CPU, 0, &h));
    CHECK_OK(tfc_cast(NULL, h, TFC_DTYPE_F64, &c));
    CHECK_OK(tfc_tensor_copy_to_host(c, v, sizeof(double) * (size_t)n));
    tfc_tensor_release(c);
    tfc_tensor_release(h);
    return v;
}

TEST(new_ops_follow_the_table_and_refuse_missing_entries_and_mixed_devices) {
    const int64_t d[2] = {3, 4};
    double v[12] = {0.5, -1.5, 2.5, 0.0, 3.0, -0.25, 1.0, 1.0, -2.0, 0.75, 4.0, 0.125};
    tfc_tensor *x = NULL, *y = NULL;
    CHECK_OK(tfc_tensor_from_data(v, d, 2, TFC_DTYPE_F64, &x));
    tfc_backend *sb = standin_install();
    CHECK_OK(tfc_tensor_to_device(x, TFC_DEVICE_CUDA, 0, &y));
    for (int k = 0; k < 7; k++) {
        tfc_tensor *rc = NULL, *rs = NULL, *ic = NULL, *is = NULL;
        switch (k) {
        case 0:
            CHECK_OK(tfc_cumsum(NULL, x, 1, &rc));
            CHECK_OK(tfc_cumsum(NULL, y, 1, &rs));
            break;
        case 1:
            CHECK_OK(tfc_clamp(NULL, x, -1, 1, &rc));
            CHECK_OK(tfc_clamp(NULL, y, -1, 1, &rs));
            break;
        case 2:
            CHECK_OK(tfc_lt_scalar(x, 0.5, &rc));
            CHECK_OK(tfc_lt_scalar(y, 0.5, &rs));
            break;
        case 3:
            CHECK_OK(tfc_triu(NULL, x, 0, &rc));
            CHECK_OK(tfc_triu(NULL, y, 0, &rs));
            break;
        case 4:
            CHECK_OK(tfc_any(x, NULL, 0, 0, &rc));
            CHECK_OK(tfc_any(y, NULL, 0, 0, &rs));
            break;
        case 5:
            CHECK_OK(tfc_sort(NULL, x, 1, 1, &rc, &ic));
            CHECK_OK(tfc_sort(NULL, y, 1, 1, &rs, &is));
            break;
        default: {
            tfc_tensor *px = NULL, *py = NULL;
            CHECK_OK(tfc_abs(NULL, x, &px));
            CHECK_OK(tfc_abs(NULL, y, &py));
            CHECK(tfc_tensor_device_type(py) == TFC_DEVICE_CUDA);
            CHECK_OK(tfc_multinomial(px, 5, 1, 42, 0, &rc));
            CHECK_OK(tfc_multinomial(py, 5, 1, 42, 0, &rs));
            tfc_tensor_release(px), tfc_tensor_release(py);
        }
        }
        CHECK(tfc_tensor_device_type(rs) == TFC_DEVICE_CUDA);
        int64_t n = tfc_tensor_numel(rc);
        double *a = host_vals(rc), *b = host_vals(rs);
        for (int64_t i = 0; i < n; i++) CHECK(a[i] == b[i]);
        free(a), free(b);
        if (ic) {
            a = host_vals(ic), b = host_vals(is);
            for (int64_t i = 0; i < n; i++) CHECK(a[i] == b[i]);
            free(a), free(b);
        }
        tfc_tensor_release(rc), tfc_tensor_release(rs), tfc_tensor_release(ic), tfc_tensor_release(is);
    }
    /* what the CUDA module leaves NULL (cumsum, multinomial, topk) */
    sb->cumsum = NULL;
    sb->multinomial = NULL;
    sb->topk = NULL;
    tfc_tensor *r = NULL, *r2 = NULL, *sentinel = (tfc_tensor *)&r;
    r = sentinel;
    CHECK_ERR(tfc_cumsum(NULL, y, 0, &r), TFC_ERR_UNSUPPORTED,
              "tfc_cumsum: cumsum is not implemented on cuda:0 for f64");
    CHECK_ERR(tfc_multinomial(y, 1, 1, 0, 0, &r), TFC_ERR_UNSUPPORTED,
              "tfc_multinomial: multinomial is not implemented on cuda:0");
    CHECK_ERR(tfc_sort(NULL, y, 0, 0, &r, &r2), TFC_ERR_UNSUPPORTED, "tfc_sort: tfc_topk: topk is not implemented");
    CHECK(r == sentinel);
    /* mixed devices */
    CHECK_ERR(tfc_lt(x, y, &r), TFC_ERR_DEVICE, "tfc_lt: a lives on cpu but b lives on cuda:0");
    CHECK_ERR(tfc_maximum(NULL, y, x, &r), TFC_ERR_DEVICE, "tfc_maximum: a lives on cuda:0 but b lives on cpu");
    CHECK(r == sentinel);
    tfc_tensor_release(y);
    tfc_tensor_release(x);
    standin_remove();
}

/* SiLU (a map) and SwiGLU (its own entries) follow the table; a missing swiglu entry writes nothing. */
TEST(silu_and_swiglu_follow_the_table) {
    const int64_t d[2] = {3, 4}, dh[2] = {3, 2};
    double v[12] = {0.5, -1.5, 2.5, 0.0, 3.0, -0.25, 1.0, 1.0, -2.0, 0.75, 4.0, 0.125};
    tfc_tensor *x = NULL, *y = NULL, *rc[3] = {NULL}, *rs[3] = {NULL};
    CHECK_OK(tfc_tensor_from_data(v, d, 2, TFC_DTYPE_F64, &x));
    tfc_backend *sb = standin_install();
    CHECK_OK(tfc_tensor_to_device(x, TFC_DEVICE_CUDA, 0, &y));
    CHECK_OK(tfc_silu(NULL, x, &rc[0]));
    CHECK_OK(tfc_silu(NULL, y, &rs[0]));
    CHECK_OK(tfc_swiglu_fused(NULL, x, &rc[1]));
    CHECK_OK(tfc_swiglu_fused(NULL, y, &rs[1]));
    CHECK_OK(tfc_swiglu(NULL, x, x, &rc[2]));
    CHECK_OK(tfc_swiglu(NULL, y, y, &rs[2]));
    for (int k = 0; k < 3; k++) {
        CHECK(tfc_tensor_device_type(rs[k]) == TFC_DEVICE_CUDA);
        double a[12], b[12];
        size_t nb = sizeof(double) * (size_t)tfc_tensor_numel(rc[k]);
        host_bytes(rc[k], a, nb);
        host_bytes(rs[k], b, nb);
        CHECK(memcmp(a, b, nb) == 0);
    }
    tfc_tensor *out = NULL, *r = NULL, *sentinel = (tfc_tensor *)&r;
    CHECK_OK(tfc_tensor_full(dh, 2, TFC_DTYPE_F64, 7.0, &out));
    tfc_tensor *outc = NULL;
    CHECK_OK(tfc_tensor_to_device(out, TFC_DEVICE_CUDA, 0, &outc));
    sb->swiglu_forward = NULL;
    tfc_tensor *g = NULL, *u = NULL;
    CHECK_OK(tfc_narrow(NULL, y, 1, 0, 2, &g));
    CHECK_OK(tfc_narrow(NULL, y, 1, 2, 2, &u));
    CHECK_ERR(tfc_swiglu_forward(g, u, outc), TFC_ERR_UNSUPPORTED,
              "tfc_swiglu_forward: swiglu_forward is not implemented on cuda:0 for f64");
    double o[6];
    host_bytes(outc, o, sizeof o);
    for (int i = 0; i < 6; i++) CHECK(o[i] == 7.0);
    r = sentinel;
    CHECK_ERR(tfc_swiglu_fused(NULL, y, &r), TFC_ERR_UNSUPPORTED, "swiglu_forward is not implemented on cuda:0");
    CHECK_ERR(tfc_swiglu(NULL, x, y, &r), TFC_ERR_DEVICE, "gate lives on cpu but up lives on cuda:0");
    CHECK(r == sentinel);
    tfc_tensor *all[] = {x, y, rc[0], rc[1], rc[2], rs[0], rs[1], rs[2], out, outc, g, u};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tfc_tensor_release(all[i]);
    standin_remove();
}
