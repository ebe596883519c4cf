/*
 * tfc_ddp and the sharded optimizer (ZeRO-1) against one plain process,
 * run plainly and under mpirun -np 2 and 3 (tests/dist/meson.build).
 *
 * The model: loss = mean over rows of tanh(x·W1 + b1)·W2, i.e. a mean
 * over the global batch of 6·N rows; rank r computes the same loss on its
 * rows [6r, 6r+6) only. Since every rank has the same number of rows, the
 * gradient of the global mean is the average over ranks of the local
 * ones — so DDP's averaged gradients, and the parameters after steps of a
 * sharded AdamW with clipping, must equal what one process computes on the
 * whole batch (the reference, computed here on every rank in f64).
 */
#include "dist_test.h"

enum { ROWS = 6, IN = 5, HID = 7, OUT = 3, NP = 4 };

static double xval(int64_t row, int64_t j) { return ((row * 7 + j * 3) % 11) / 5.0 - 1.0; }

/* Rows [first, first + n) of the global batch. */
static tfc_tensor *batch(int64_t first, int64_t n) {
    double *h = malloc(sizeof *h * (size_t)(n * IN));
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < IN; j++) h[i * IN + j] = xval(first + i, j);
    int64_t d[2] = {n, IN};
    tfc_tensor *x = NULL;
    if (tfc_tensor_from_data(h, d, 2, TFC_DTYPE_F64, &x) != TFC_OK) fprintf(stderr, "%s\n", tfc_last_error());
    free(h);
    return x;
}

/* W1 [IN, HID], b1 [HID], W2 [HID, OUT], b2 [OUT]; seed changes the values (ranks differ until broadcast). */
static void make_params(tfc_tensor **p, int seed) {
    const int64_t shapes[NP][2] = {{IN, HID}, {HID, 0}, {HID, OUT}, {OUT, 0}};
    for (int k = 0; k < NP; k++) {
        int nd = shapes[k][1] ? 2 : 1;
        int64_t n = shapes[k][0] * (nd == 2 ? shapes[k][1] : 1);
        double *h = malloc(sizeof *h * (size_t)n);
        for (int64_t i = 0; i < n; i++) h[i] = ((i * 13 + k * 5 + seed * 17) % 19) / 19.0 - 0.5;
        if (tfc_tensor_from_data(h, shapes[k], nd, TFC_DTYPE_F64, &p[k]) != TFC_OK ||
            tfc_tensor_set_requires_grad(p[k], 1) != TFC_OK)
            fprintf(stderr, "%s\n", tfc_last_error());
        free(h);
    }
}

static tfc_status forward(tfc_graph *g, tfc_tensor *const *p, const tfc_tensor *x, tfc_tensor **loss) {
    tfc_tensor *a = NULL, *h = NULL, *t = NULL, *o = NULL, *y = NULL;
    tfc_status s = tfc_matmul(g, x, p[0], &a);
    if (s == TFC_OK) s = tfc_add(g, a, p[1], &h);
    if (s == TFC_OK) s = tfc_tanh(g, h, &t);
    if (s == TFC_OK) s = tfc_matmul(g, t, p[2], &o);
    if (s == TFC_OK) s = tfc_add(g, o, p[3], &y);
    if (s == TFC_OK) s = tfc_mean(g, y, NULL, 0, 0, loss);
    tfc_tensor_release(a);
    tfc_tensor_release(h);
    tfc_tensor_release(t);
    tfc_tensor_release(o);
    tfc_tensor_release(y);
    return s;
}

static void backward_on(tfc_graph *g, tfc_tensor *const *p, int64_t first, int64_t n, const tfc_tensor *seed) {
    tfc_tensor *x = batch(first, n), *loss = NULL;
    CHECK_OK(forward(g, p, x, &loss));
    CHECK_OK(tfc_graph_backward(g, loss, seed));
    CHECK_OK(tfc_graph_clear(g));
    tfc_tensor_release(loss);
    tfc_tensor_release(x);
}

static double max_rel_diff(const tfc_tensor *a, const tfc_tensor *b) {
    int64_t n = tfc_tensor_numel(a);
    double *x = malloc(sizeof *x * (size_t)n), *y = malloc(sizeof *y * (size_t)n), worst = 0;
    if (tfc_tensor_copy_to_host(a, x, sizeof *x * (size_t)n) != TFC_OK ||
        tfc_tensor_copy_to_host(b, y, sizeof *y * (size_t)n) != TFC_OK)
        worst = INFINITY;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs(x[i] - y[i]) / (fabs(y[i]) > 1e-3 ? fabs(y[i]) : 1e-3);
        if (d > worst || isnan(d)) worst = d;
    }
    free(x);
    free(y);
    return worst;
}

static double grad_diff(tfc_tensor *const *p, tfc_tensor *const *q) {
    double worst = 0;
    for (int k = 0; k < NP; k++) {
        tfc_tensor *a = NULL, *b = NULL;
        if (tfc_tensor_grad(p[k], &a) != TFC_OK || tfc_tensor_grad(q[k], &b) != TFC_OK || !a || !b) return INFINITY;
        double d = max_rel_diff(a, b);
        if (d > worst) worst = d;
        tfc_tensor_release(a);
        tfc_tensor_release(b);
    }
    return worst;
}

static void release_all(tfc_tensor **p) {
    for (int k = 0; k < NP; k++) tfc_tensor_release(p[k]);
}

/* DDP gradients (hooked during backward, several buckets) == one process's on the whole batch. */
TEST(ddp_gradients_equal_one_process) {
    for (int attach = 0; attach < 2; attach++) {
        tfc_tensor *p[NP], *ref[NP];
        make_params(p, R);   /* every rank different: the broadcast must fix that */
        make_params(ref, 0); /* rank 0's values */
        tfc_graph *g = NULL, *gr = NULL;
        CHECK_OK(tfc_graph_new(&g));
        CHECK_OK(tfc_graph_new(&gr));
        tfc_ddp *d = NULL;
        CHECK_OK(tfc_ddp_new(C, p, NP, 64 /* bytes: one bucket per parameter or so */, &d));
        if (attach) CHECK_OK(tfc_ddp_attach(d, g));
        backward_on(g, p, (int64_t)R * ROWS, ROWS, NULL);
        CHECK_OK(tfc_ddp_finish(d));
        backward_on(gr, ref, 0, (int64_t)N * ROWS, NULL);
        double diff = grad_diff(p, ref);
        if (!(diff < 1e-12))
            TFC_FAIL_AT("attach %d: DDP grads differ from one process's by %g (rank %d)", attach, diff, R);
        tfc_ddp_stats st = {.struct_size = sizeof st};
        CHECK_OK(tfc_ddp_get_stats(d, &st));
        CHECK(st.syncs == 1);
        if (N > 1) CHECK(st.buckets >= 3 && st.bytes == (int64_t)(IN * HID + HID + HID * OUT + OUT) * 8);
        tfc_ddp_release(d);
        tfc_graph_release(g);
        tfc_graph_release(gr);
        release_all(p);
        release_all(ref);
    }
}

/* Accumulation: two micro-batches, no sync on the first, seed 1/2, == one process on both at once. */
TEST(ddp_gradient_accumulation) {
    tfc_tensor *p[NP], *ref[NP];
    make_params(p, 0);
    make_params(ref, 0);
    tfc_graph *g = NULL, *gr = NULL;
    CHECK_OK(tfc_graph_new(&g));
    CHECK_OK(tfc_graph_new(&gr));
    tfc_ddp *d = NULL;
    CHECK_OK(tfc_ddp_new(C, p, NP, 0, &d));
    CHECK_OK(tfc_ddp_attach(d, g));
    tfc_tensor *half = NULL;
    CHECK_OK(tfc_tensor_full(NULL, 0, TFC_DTYPE_F64, 0.5, &half));
    /* global batch of 2·N·3 rows: micro-step j, rank r takes rows [(j·N + r)·3, +3) */
    CHECK_OK(tfc_ddp_set_sync(d, 0));
    backward_on(g, p, (int64_t)(0 * N + R) * 3, 3, half);
    CHECK_OK(tfc_ddp_finish(d)); /* no-op without sync */
    CHECK_OK(tfc_ddp_set_sync(d, 1));
    backward_on(g, p, (int64_t)(1 * N + R) * 3, 3, half);
    CHECK_OK(tfc_ddp_finish(d));
    backward_on(gr, ref, 0, (int64_t)2 * N * 3, NULL);
    double diff = grad_diff(p, ref);
    if (!(diff < 1e-12)) TFC_FAIL_AT("accumulated DDP grads differ by %g (rank %d)", diff, R);
    tfc_tensor_release(half);
    tfc_ddp_release(d);
    tfc_graph_release(g);
    tfc_graph_release(gr);
    release_all(p);
    release_all(ref);
}

static tfc_optim *adamw(tfc_tensor *const *p) {
    tfc_optim_options o = TFC_ADAMW_OPTIONS_INIT;
    o.lr = 0.05;
    tfc_optim *opt = NULL;
    if (tfc_optim_adamw(&o, &opt) != TFC_OK || tfc_optim_add_group(opt, (tfc_tensor **)p, 2, 0.05, 0.1, NULL) ||
        tfc_optim_add_group(opt, (tfc_tensor **)p + 2, 2, 0.05, 0.0, NULL))
        fprintf(stderr, "%s\n", tfc_last_error());
    return opt;
}

/* ZeRO-1: local gradients, sharded clip + AdamW, 4 steps == one process; gathered state == its state. */
TEST(zero1_equals_one_process) {
    tfc_tensor *p[NP], *ref[NP];
    make_params(p, 0);
    make_params(ref, 0);
    tfc_optim *opt = adamw(p), *ropt = adamw(ref);
    CHECK_OK(tfc_optim_shard(opt, C));
    CHECK(tfc_optim_is_sharded(opt) && !tfc_optim_is_sharded(ropt));
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    for (int step = 0; step < 4; step++) {
        backward_on(g, p, (int64_t)R * ROWS, ROWS, NULL);
        backward_on(g, ref, 0, (int64_t)N * ROWS, NULL);
        double n1 = 0, n2 = 0;
        CHECK_OK(tfc_optim_clip_grad_norm(opt, 0.05, &n1)); /* small: clipping really scales */
        CHECK_OK(tfc_optim_clip_grad_norm(ropt, 0.05, &n2));
        CHECK_CLOSE(n1, n2, 1e-12);
        CHECK(n2 > 0.05);
        CHECK_OK(tfc_optim_step(opt));
        CHECK_OK(tfc_optim_step(ropt));
        CHECK_OK(tfc_optim_zero_grad(opt, 1));
        CHECK_OK(tfc_optim_zero_grad(ropt, 1));
    }
    for (int k = 0; k < NP; k++) {
        double d = max_rel_diff(p[k], ref[k]);
        if (!(d < 1e-12)) TFC_FAIL_AT("parameter %d differs from one process's by %g (rank %d)", k, d, R);
    }
    /* each rank holds its share of the state: the shares add up to one process's, the largest is ~1/N */
    int64_t mine = -1, whole = -1;
    CHECK_OK(tfc_optim_state_bytes(opt, &mine));
    CHECK_OK(tfc_optim_state_bytes(ropt, &whole));
    const int64_t total = IN * HID + HID + HID * OUT + OUT;
    CHECK(whole == 2 * 8 * total);
    tfc_tensor *bytes = NULL;
    double bm = (double)mine;
    CHECK_OK(tfc_tensor_from_data(&bm, NULL, 0, TFC_DTYPE_F64, &bytes));
    CHECK_OK(tfc_all_reduce(C, bytes, TFC_COMM_SUM));
    double sum = 0;
    CHECK_OK(tfc_tensor_item(bytes, &sum));
    CHECK(sum == (double)whole);
    CHECK(mine <= 2 * 8 * (total / N + 1));
    tfc_tensor_release(bytes);
    /* the state as one process has it, on root; nothing elsewhere */
    int root = N - 1;
    tfc_optim *full = NULL;
    CHECK_OK(tfc_optim_gather(opt, root, &full));
    CHECK((full != NULL) == (R == root));
    if (full) {
        int64_t n1 = 0, n2 = 0;
        CHECK_OK(tfc_optim_state_count(full, &n1));
        CHECK_OK(tfc_optim_state_count(ropt, &n2));
        CHECK(n1 == n2 && n1 == 1 + 2 * 2 + NP * 3);
        for (int64_t i = 0; i < n1 && i < n2; i++) {
            char *na = NULL, *nb = NULL;
            tfc_tensor *a = NULL, *b = NULL;
            CHECK_OK(tfc_optim_state_get(full, i, &na, &a));
            CHECK_OK(tfc_optim_state_get(ropt, i, &nb, &b));
            CHECK(na && nb && strcmp(na, nb) == 0);
            if (a && b && !(max_rel_diff(a, b) < 1e-12)) TFC_FAIL_AT("state %s differs (%g)", na, max_rel_diff(a, b));
            tfc_free(na);
            tfc_free(nb);
            tfc_tensor_release(a);
            tfc_tensor_release(b);
        }
    }
    /* what needs the whole state refuses a sharded optimizer */
    int64_t cnt;
    CHECK_ERR(tfc_optim_state_count(opt, &cnt), TFC_ERR_UNSUPPORTED, "tfc_optim_gather");
    CHECK_ERR(tfc_optim_shard(opt, C), TFC_ERR_UNSUPPORTED, "sharded already");
    CHECK_ERR(tfc_optim_gather(ropt, 0, &full), TFC_ERR_INVALID_ARG, "not sharded");
    CHECK_ERR(tfc_optim_add_params(opt, p, 1, NULL), TFC_ERR_UNSUPPORTED, "sharded");
    tfc_optim_release(full);
    tfc_optim_release(opt);
    tfc_optim_release(ropt);
    tfc_graph_release(g);
    release_all(p);
    release_all(ref);
}

/* A resumed run: state loaded into the full optimizer, then sharded, continues like the unsharded one. */
TEST(zero1_keeps_loaded_state) {
    tfc_tensor *p[NP], *ref[NP];
    make_params(p, 0);
    make_params(ref, 0);
    tfc_optim *opt = adamw(p), *ropt = adamw(ref);
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    /* two unsharded steps on both, then shard one */
    for (int step = 0; step < 2; step++) {
        backward_on(g, p, 0, (int64_t)N * ROWS, NULL);
        backward_on(g, ref, 0, (int64_t)N * ROWS, NULL);
        CHECK_OK(tfc_optim_step(opt));
        CHECK_OK(tfc_optim_step(ropt));
        CHECK_OK(tfc_optim_zero_grad(opt, 1));
        CHECK_OK(tfc_optim_zero_grad(ropt, 1));
    }
    CHECK_OK(tfc_optim_shard(opt, C));
    for (int step = 0; step < 2; step++) {
        backward_on(g, p, (int64_t)R * ROWS, ROWS, NULL);
        backward_on(g, ref, 0, (int64_t)N * ROWS, NULL);
        CHECK_OK(tfc_optim_step(opt));
        CHECK_OK(tfc_optim_step(ropt));
        CHECK_OK(tfc_optim_zero_grad(opt, 1));
        CHECK_OK(tfc_optim_zero_grad(ropt, 1));
    }
    for (int k = 0; k < NP; k++) {
        double d = max_rel_diff(p[k], ref[k]);
        if (!(d < 1e-12)) TFC_FAIL_AT("parameter %d differs after resume-style sharding by %g", k, d);
    }
    tfc_optim_release(opt);
    tfc_optim_release(ropt);
    tfc_graph_release(g);
    release_all(p);
    release_all(ref);
}

TEST(mismatched_parameters_fail_on_every_rank) {
    tfc_tensor *p[NP];
    make_params(p, 0);
    tfc_ddp *d = NULL;
    if (N > 1) {
        /* rank 0 brings one parameter fewer */
        CHECK_ERR(tfc_ddp_new(C, p, R == 0 ? NP - 1 : NP, 0, &d), TFC_ERR_SHAPE, "the number of parameters");
        tfc_tensor *q[NP] = {p[0], p[1], p[2], p[3]};
        if (R == 1) q[1] = p[3]; /* rank 1: parameter 1 has another size */
        CHECK_ERR(tfc_ddp_new(C, q, NP, 0, &d), TFC_ERR_SHAPE, "the element count of params[1]");
        /* rank 1 passes a parameter that does not require grad: it refuses, the others hear of it at once */
        tfc_tensor *nograd = NULL;
        CHECK_OK(tfc_tensor_zeros((int64_t[]){3}, 1, TFC_DTYPE_F64, &nograd));
        tfc_tensor *r1[1] = {R == 1 ? nograd : p[3]};
        if (R == 1)
            CHECK_ERR(tfc_ddp_new(C, r1, 1, 0, &d), TFC_ERR_INVALID_ARG, "not a leaf that requires grad");
        else
            CHECK_ERR(tfc_ddp_new(C, r1, 1, 0, &d), TFC_ERR_INVALID_ARG, "rank 1 refused its arguments");
        tfc_tensor_release(nograd);
    }
    CHECK(d == NULL);
    tfc_tensor *nog = NULL;
    CHECK_OK(tfc_tensor_zeros((int64_t[]){3}, 1, TFC_DTYPE_F64, &nog));
    CHECK_ERR(tfc_ddp_new(C, &nog, 1, 0, &d), TFC_ERR_INVALID_ARG, "not a leaf that requires grad");
    tfc_tensor *i32 = NULL;
    CHECK_OK(tfc_tensor_zeros((int64_t[]){3}, 1, TFC_DTYPE_I32, &i32));
    CHECK_ERR(tfc_ddp_new(C, &i32, 1, 0, &d), TFC_ERR_DTYPE, "f32 or f64");
    CHECK_ERR(tfc_ddp_new(C, p, NP, -1, &d), TFC_ERR_INVALID_ARG, "bucket_bytes is -1");
    CHECK_ERR(tfc_ddp_new(C, p, -1, 0, &d), TFC_ERR_INVALID_ARG, "n is -1");
    tfc_ddp_stats st = {.struct_size = 4};
    CHECK_OK(tfc_ddp_new(C, p, NP, 0, &d));
    CHECK_ERR(tfc_ddp_get_stats(d, &st), TFC_ERR_VERSION, "struct_size");
    tfc_ddp_release(d);
    tfc_tensor_release(nog);
    tfc_tensor_release(i32);
    release_all(p);
}

/*
 * Read-only memory (issue 41): a parameter wrapping read-only memory is
 * refused on every rank (the start broadcasts into it); a .grad wrapping
 * read-only memory — kept by a parameter this backward did not reach — is
 * replaced by the averaged gradient, never written.
 */
TEST(ddp_never_writes_read_only_memory) {
    tfc_tensor *p[NP];
    make_params(p, 0);
    /* each rank's .grad differs, so an average written into it would change it (on more than one rank) */
    double mem[OUT] = {1, 2, 3}, gmem[OUT] = {0.5 + R, -1 + R, 4 + R};
    const int64_t d1[1] = {OUT};
    tfc_tensor *ro = NULL, *q = NULL, *qg = NULL;
    CHECK_OK(tfc_tensor_wrap_ex(mem, d1, NULL, 1, TFC_DTYPE_F64, TFC_WRAP_READ_ONLY, NULL, NULL, &ro));
    CHECK_OK(tfc_tensor_set_requires_grad(ro, 1));
    tfc_tensor *with_ro[NP + 1] = {p[0], p[1], p[2], p[3], ro};
    tfc_ddp *d = NULL;
    CHECK_ERR(tfc_ddp_new(C, with_ro, NP + 1, 0, &d), TFC_ERR_INVALID_ARG, "params[4] f64 [3] is read-only");
    CHECK(d == NULL && mem[0] == 1 && mem[1] == 2 && mem[2] == 3);
    /* q is a DDP parameter the loss does not use, its .grad read-only memory */
    CHECK_OK(tfc_tensor_zeros(d1, 1, TFC_DTYPE_F64, &q));
    CHECK_OK(tfc_tensor_set_requires_grad(q, 1));
    CHECK_OK(tfc_tensor_wrap_ex(gmem, d1, NULL, 1, TFC_DTYPE_F64, TFC_WRAP_READ_ONLY, NULL, NULL, &qg));
    CHECK_OK(tfc_tensor_set_grad(q, qg));
    tfc_tensor *with_q[NP + 1] = {p[0], p[1], p[2], p[3], q};
    CHECK_OK(tfc_ddp_new(C, with_q, NP + 1, 64, &d));
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    CHECK_OK(tfc_ddp_attach(d, g));
    backward_on(g, p, (int64_t)R * ROWS, ROWS, NULL);
    CHECK_OK(tfc_ddp_finish(d));
    CHECK(gmem[0] == 0.5 + R && gmem[1] == -1 + R && gmem[2] == 4 + R); /* never written */
    tfc_tensor *got = NULL;
    CHECK_OK(tfc_tensor_grad(q, &got));
    double v[OUT] = {0};
    CHECK(got != NULL);
    if (got) CHECK_OK(tfc_tensor_copy_to_host(got, v, sizeof v));
    /* one rank: nothing to average, the .grad is as it was; more: the average over ranks, in a new tensor */
    const double mean_r = (N - 1) / 2.0;
    CHECK(v[0] == 0.5 + mean_r && v[1] == -1 + mean_r && v[2] == 4 + mean_r);
    if (N > 1) CHECK(!tfc_tensor_is_read_only(got));
    tfc_tensor_release(got);
    tfc_ddp_release(d);
    tfc_graph_release(g);
    tfc_tensor_release(qg);
    tfc_tensor_release(q);
    tfc_tensor_release(ro);
    release_all(p);
}

TFC_TEST_MAIN
