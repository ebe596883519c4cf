/*
 * tfc_split as one graph node with n outputs: gradients with some outputs
 * unused (their part of dx is zero), uneven and empty sizes, split of a
 * permuted input (dx comes back in the input's memory order), many parts,
 * and the gradients checked against f64 finite differences.
 */
#include "tfc_test_util.h"

#include "autograd/node.h"
#include "tensor/tensor_impl.h"

TFC_TEST_MAIN

/* x [3, 6] split along dim 1 into {1, 3, 2}; loss = Σ parts[used] ⊙ R_i. */
TEST(unused_outputs_get_zero_gradient) {
    int64_t dx[2] = {3, 6};
    double xv[18];
    for (int i = 0; i < 18; i++) xv[i] = i;
    for (int mask = 0; mask < 8; mask++) {
        tfc_tensor *x = t_from(xv, dx, 2), *parts[3] = {NULL, NULL, NULL}, *loss = NULL, *gx = NULL;
        tfc_graph *g = NULL;
        CHECK_OK(tfc_graph_new(&g));
        CHECK_OK(tfc_tensor_set_requires_grad(x, 1));
        CHECK_OK(tfc_split(g, x, (int64_t[]){1, 3, 2}, 3, 1, parts));
        CHECK(tfc_graph_num_nodes(g) == 1); /* one node, three outputs */
        /* loss = Σ_i used_i · (i + 1) · Σ parts[i]²  →  dx = 2 (i + 1) x on used parts, 0 elsewhere */
        tfc_tensor *acc = NULL;
        for (int i = 0; i < 3; i++) {
            if (!(mask >> i & 1)) continue;
            tfc_tensor *sq = NULL, *sc = NULL, *sm = NULL, *nacc = NULL;
            CHECK_OK(tfc_mul(g, parts[i], parts[i], &sq));
            CHECK_OK(tfc_mul_scalar(g, sq, i + 1, &sc));
            CHECK_OK(tfc_sum(g, sc, NULL, 0, 0, &sm));
            if (acc) {
                CHECK_OK(tfc_add(g, acc, sm, &nacc));
                tfc_tensor_release(acc);
                tfc_tensor_release(sm);
                acc = nacc;
            } else {
                acc = sm;
            }
            tfc_tensor_release(sq);
            tfc_tensor_release(sc);
        }
        if (acc) {
            loss = acc;
            CHECK_OK(tfc_graph_backward(g, loss, NULL));
            CHECK_OK(tfc_tensor_grad(x, &gx));
            double *v = t_vals(gx);
            for (int r = 0; r < 3; r++)
                for (int c = 0; c < 6; c++) {
                    int part = c < 1 ? 0 : c < 4 ? 1 : 2;
                    double want = (mask >> part & 1) ? 2.0 * (part + 1) * xv[r * 6 + c] : 0.0;
                    CHECK_CLOSE(v[r * 6 + c], want, 0);
                }
            free(v);
        }
        for (int i = 0; i < 3; i++) tfc_tensor_release(parts[i]);
        tfc_tensor_release(loss);
        tfc_tensor_release(gx);
        tfc_tensor_release(x);
        tfc_graph_release(g);
    }
}

/* loss = Σ_i Σ parts[i] ⊙ R_i over the parts in ctx's mask (R_i fixed random). */
typedef struct split_case {
    const int64_t *sizes;
    int32_t n, dim, permute, mask;
} split_case;

static tfc_status run_split(tfc_graph *g, tfc_tensor *const *in, int32_t nin, tfc_tensor **loss, void *ctx) {
    (void)nin;
    const split_case *c = ctx;
    tfc_tensor *x = NULL, *parts[8] = {NULL}, *acc = NULL;
    tfc_status s =
        c->permute ? tfc_permute(g, in[0], (int32_t[]){2, 0, 1}, 3, &x) : (x = tfc_tensor_retain(in[0]), TFC_OK);
    if (s == TFC_OK) s = tfc_split(g, x, c->sizes, c->n, c->dim, parts);
    for (int32_t i = 0; i < c->n && s == TFC_OK; i++) {
        if (!(c->mask >> i & 1)) continue;
        int64_t dims[8];
        int32_t nd = tfc_tensor_ndim(parts[i]);
        tfc_tensor *r = NULL, *p = NULL, *sm = NULL, *nacc = NULL;
        s = tfc_tensor_shape(parts[i], dims, 8);
        if (s == TFC_OK) s = tfc_tensor_uniform(dims, nd, TFC_DTYPE_F64, -1, 1, 100 + (uint64_t)i, 0, &r);
        if (s == TFC_OK) s = tfc_mul(g, parts[i], r, &p);
        if (s == TFC_OK) s = tfc_sum(g, p, NULL, 0, 0, &sm);
        if (s == TFC_OK && acc) {
            s = tfc_add(g, acc, sm, &nacc);
            tfc_tensor_release(acc);
            tfc_tensor_release(sm);
            acc = nacc;
        } else if (s == TFC_OK) {
            acc = sm;
        }
        tfc_tensor_release(r);
        tfc_tensor_release(p);
    }
    for (int32_t i = 0; i < c->n; i++) tfc_tensor_release(parts[i]);
    tfc_tensor_release(x);
    if (s != TFC_OK) {
        tfc_tensor_release(acc);
        return s;
    }
    *loss = acc;
    return TFC_OK;
}

static void gradcheck_split(const char *name, split_case c, tfc_tensor *x) {
    CHECK_OK(tfc_tensor_set_requires_grad(x, 1));
    double err = 1;
    tfc_status s = tfc_gradcheck(run_split, &x, 1, &c, 1e-6, &err, NULL, NULL);
    tfc_test_checks++;
    if (s != TFC_OK)
        TFC_FAIL_AT("%s: gradcheck failed to run: %s", name, tfc_last_error());
    else if (!(err < 1e-6))
        TFC_FAIL_AT("%s: max relative error %g", name, err);
    tfc_tensor_release(x);
}

TEST(gradcheck_uneven_empty_and_permuted) {
    int64_t d[3] = {2, 3, 7};
    const int64_t uneven[4] = {3, 0, 1, 3};
    gradcheck_split("uneven sizes with an empty part, all used", (split_case){uneven, 4, 2, 0, 0xf},
                    t_rand(d, 3, -1, 1, 1));
    gradcheck_split("uneven sizes, parts 0 and 3 unused", (split_case){uneven, 4, -1, 0, 0x6}, t_rand(d, 3, -1, 1, 2));
    /* x [2,3,7] permuted to [7,2,3]: the split dim 0 is the innermost in memory */
    const int64_t p7[3] = {2, 4, 1};
    gradcheck_split("permuted input, split along dim 0", (split_case){p7, 3, 0, 1, 0x5}, t_rand(d, 3, -1, 1, 3));
    const int64_t p2[2] = {1, 1};
    gradcheck_split("permuted input, split along dim 1", (split_case){p2, 2, 1, 1, 0x2}, t_rand(d, 3, -1, 1, 4));
}

/*
 * The GPT's q/k/v path: qkv [B·T, 3C] viewed [B,T,3,H,D], permuted to
 * [3,B,H,T,D], split on dim 0. The split's dx must have the permuted
 * input's strides, so permute⁻¹ gives a contiguous [B,T,3,H,D] and the
 * view node's backward is a reshape without a copy.
 */
TEST(dx_keeps_the_memory_order_of_a_permuted_input) {
    const int64_t B = 2, T = 3, H = 2, D = 4, C = H * D;
    tfc_tensor *qkv = t_rand((int64_t[]){B * T, 3 * C}, 2, -1, 1, 9), *v5 = NULL, *p = NULL, *parts[3] = {NULL};
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    CHECK_OK(tfc_tensor_set_requires_grad(qkv, 1));
    CHECK_OK(tfc_view(g, qkv, (int64_t[]){B, T, 3, H, D}, 5, &v5));
    CHECK_OK(tfc_permute(g, v5, (int32_t[]){2, 0, 3, 1, 4}, 5, &p));
    CHECK_OK(tfc_split(g, p, (int64_t[]){1, 1, 1}, 3, 0, parts));
    tfc_node *n = parts[0]->node;
    CHECK(n && n->n_out == 3 && parts[2]->node == n && parts[2]->out_index == 2);
    /* Gradient only for output 1 (k): dx must be p-shaped with p's strides, zero outside part 1. */
    tfc_tensor *dk = t_rand((int64_t[]){1, B, H, T, D}, 5, -1, 1, 10);
    tfc_tensor *gout[3] = {NULL, dk, NULL}, *gin[1] = {NULL};
    CHECK_OK(n->backward(n, gout, gin));
    CHECK(gin[0] != NULL);
    if (gin[0]) {
        for (int i = 0; i < 5; i++) {
            CHECK(gin[0]->shape[i] == p->shape[i]);
            CHECK(gin[0]->strides[i] == p->strides[i]);
        }
        double *gv = t_vals(gin[0]), *kv = t_vals(dk);
        int64_t per = B * H * T * D;
        for (int64_t i = 0; i < 3 * per; i++) CHECK_CLOSE(gv[i], (i >= per && i < 2 * per) ? kv[i - per] : 0.0, 0);
        free(gv);
        free(kv);
    }
    tfc_tensor_release(gin[0]);
    /* Through the whole chain: qkv.grad equals the gradients placed at q/k/v's columns. */
    tfc_tensor *l = NULL, *sq = NULL, *gq = NULL;
    CHECK_OK(tfc_mul(g, parts[2], parts[2], &sq));
    CHECK_OK(tfc_sum(g, sq, NULL, 0, 0, &l));
    CHECK_OK(tfc_graph_backward(g, l, NULL));
    CHECK_OK(tfc_tensor_grad(qkv, &gq));
    double *xv = t_vals(qkv), *gv = t_vals(gq);
    for (int64_t r = 0; r < B * T; r++)
        for (int64_t c = 0; c < 3 * C; c++) CHECK_CLOSE(gv[r * 3 * C + c], c >= 2 * C ? 2 * xv[r * 3 * C + c] : 0.0, 0);
    free(xv);
    free(gv);
    tfc_tensor *objs[] = {qkv, v5, p, parts[0], parts[1], parts[2], dk, l, sq, gq};
    for (int i = 0; i < 10; i++) tfc_tensor_release(objs[i]);
    tfc_graph_release(g);
}

TEST(many_parts_and_no_graph) {
    /* 20 parts of one column: more than any fixed parameter slot array would hold. */
    int64_t sizes[20];
    for (int i = 0; i < 20; i++) sizes[i] = 1;
    tfc_tensor *x = t_rand((int64_t[]){2, 20}, 2, -1, 1, 20), *parts[20] = {NULL}, *l = NULL, *gx = NULL;
    tfc_graph *g = NULL;
    CHECK_OK(tfc_graph_new(&g));
    CHECK_OK(tfc_tensor_set_requires_grad(x, 1));
    CHECK_OK(tfc_split(g, x, sizes, 20, 1, parts));
    CHECK_OK(tfc_sum(g, parts[17], NULL, 0, 0, &l));
    CHECK_OK(tfc_graph_backward(g, l, NULL));
    CHECK_OK(tfc_tensor_grad(x, &gx));
    double *v = t_vals(gx);
    for (int r = 0; r < 2; r++)
        for (int c = 0; c < 20; c++) CHECK_CLOSE(v[r * 20 + c], c == 17 ? 1.0 : 0.0, 0);
    free(v);
    for (int i = 0; i < 20; i++) tfc_tensor_release(parts[i]);
    /* Without a graph the parts are plain views sharing x's storage. */
    CHECK_OK(tfc_split(NULL, x, (int64_t[]){5, 15}, 2, 1, parts));
    CHECK(!tfc_tensor_requires_grad(parts[0]) && parts[1]->storage == x->storage && parts[1]->offset == 5);
    CHECK_ERR(tfc_split(NULL, x, (int64_t[]){5, 14}, 2, 1, parts), TFC_ERR_SHAPE, "sizes sum to 19");
    CHECK_ERR(tfc_split(NULL, x, (int64_t[]){5, 15}, 2, 2, parts), TFC_ERR_INVALID_ARG, "dim 2 is out of range");
    tfc_tensor *objs[] = {x, l, gx, parts[0], parts[1]};
    for (int i = 0; i < 5; i++) tfc_tensor_release(objs[i]);
    tfc_graph_release(g);
}
