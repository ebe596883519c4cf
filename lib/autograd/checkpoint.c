/*
 * Activation checkpointing: a node that keeps its function's inputs instead
 * of the function's activations and replays the function in backward.
 */
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/node.h"
#include "core/error.h"
#include "tensor/dispatch.h"

static const char *const replay_fn = "tfc_graph_checkpoint (replay)";

/*
 * What the node keeps: the function, the caller's ctx or (snapshot_size >
 * 0) the bytes of ctx as they were before the forward call, which every
 * replay gets a fresh copy of, and the inputs.
 */
typedef struct checkpoint_ctx {
    tfc_checkpoint_fn fn;
    void *user;
    size_t snapshot_size;
    int32_t n_in, n_out;
    tfc_saved in[TFC_CHECKPOINT_MAX_INPUTS];
    alignas(max_align_t) unsigned char snapshot[]; /* snapshot_size bytes */
} checkpoint_ctx;

/* fn failed: make sure the message says so even when fn set none. */
static tfc_status fn_failed(tfc_status s, const char *when) {
    if (!tfc_last_error()[0]) return tfc_err(s, "fn returned %s %s without a message", tfc_status_name(s), when);
    return s;
}

/* Run fn with outputs zeroed first; on failure release what it set. */
static tfc_status call_fn(tfc_checkpoint_fn f, tfc_graph *g, const tfc_tensor *const *inputs, int32_t n_in,
                          tfc_tensor **outs, int32_t n_out, void *user, const char *when) {
    for (int32_t o = 0; o < n_out; o++) outs[o] = NULL;
    tfc_clear_error(); /* a stale message must not pass for fn's own */
    tfc_status s = f(g, inputs, n_in, outs, n_out, user);
    if (s != TFC_OK) s = fn_failed(s, when);
    for (int32_t o = 0; o < n_out && s == TFC_OK; o++)
        if (!outs[o]) s = tfc_err(TFC_ERR_INVALID_ARG, "fn returned TFC_OK %s but left outputs[%d] NULL", when, (int)o);
    if (s != TFC_OK)
        for (int32_t o = 0; o < n_out; o++) {
            tfc_tensor_release(outs[o]);
            outs[o] = NULL;
        }
    return s;
}

static int same_dims(const tfc_tensor *a, const tfc_tensor *b) {
    if (a->ndim != b->ndim) return 0;
    for (int32_t i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return 0;
    return 1;
}

/* leaf.grad += g (a new reference consumed), for an output fn returned as the input handle itself. */
static tfc_status add_to_leaf_grad(tfc_tensor *leaf, const tfc_tensor *g) {
    tfc_tensor *sum = NULL;
    if (!leaf->grad) TFC_TRY(tfc_tensor_clone(g, &sum));
    if (leaf->grad) {
        TFC_TRY(tfc_tensor_new_like(leaf->grad, leaf->grad->dtype, &sum));
        tfc_status s = tfc_tensor_map(replay_fn, TFC_MAP_ADD, sum, leaf->grad, g, NULL, 0.0, 0);
        if (s != TFC_OK) {
            tfc_tensor_release(sum);
            return s;
        }
    }
    tfc_tensor_release(leaf->grad);
    leaf->grad = sum;
    return TFC_OK;
}

/*
 * The replay: fn on a private recording graph from leaves aliasing the
 * saved inputs, backward from its outputs seeded with gout, the leaves'
 * gradients passed on as gin.
 */
static tfc_status checkpoint_backward(tfc_node *n, tfc_tensor *const *gout, tfc_tensor **gin) {
    const char *fn = replay_fn;
    const checkpoint_ctx *c = n->ctx;
    const int32_t n_in = c->n_in, n_out = c->n_out;
    int any = 0;
    for (int32_t o = 0; o < n_out; o++) any |= gout[o] != NULL;
    if (!any) return TFC_OK;
    tfc_tensor *leaves[TFC_CHECKPOINT_MAX_INPUTS] = {0};
    tfc_tensor **outs = calloc((size_t)n_out, sizeof *outs);
    const tfc_tensor **roots = calloc((size_t)n_out, sizeof *roots), **seeds = calloc((size_t)n_out, sizeof *seeds);
    void *user = c->user;
    if (c->snapshot_size) {
        user = malloc(c->snapshot_size);
        if (user) memcpy(user, c->snapshot, c->snapshot_size);
    }
    tfc_graph *g2 = NULL;
    tfc_status s = TFC_OK;
    if (!outs || !roots || !seeds || (c->snapshot_size && !user)) s = tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    if (s == TFC_OK) s = tfc_graph_new(&g2);
    /* the outer graph's hook sees the leaves fn reaches (a weak pointer, valid while its backward runs) */
    if (s == TFC_OK && n->graph) {
        g2->grad_hook = n->graph->grad_hook;
        g2->grad_hook_user = n->graph->grad_hook_user;
    }
    for (int32_t i = 0; i < n_in && s == TFC_OK; i++) {
        const tfc_tensor *t = c->in[i].t;
        s = tfc_tensor_alias(t, t->shape, t->strides, t->ndim, t->offset, &leaves[i]);
        if (s == TFC_OK && tfc_node_needs_grad(n, i)) leaves[i]->requires_grad = 1;
    }
    if (s == TFC_OK)
        s = call_fn(c->fn, g2, (const tfc_tensor *const *)leaves, n_in, outs, n_out, user, "in the replay");
    int32_t n_roots = 0;
    for (int32_t o = 0; o < n_out && s == TFC_OK; o++) {
        if (!gout[o]) continue;
        if (!same_dims(outs[o], gout[o]))
            s = tfc_err(TFC_ERR_INVALID_ARG,
                        "fn made outputs[%d] %s in the replay but %s in forward (fn must be deterministic)", (int)o,
                        SHAPE(outs[o]), SHAPE(gout[o]));
        else if (outs[o]->node && outs[o]->node->graph == g2) {
            roots[n_roots] = outs[o];
            seeds[n_roots++] = gout[o];
        }
    }
    if (s == TFC_OK && n_roots) s = tfc_graph_backward_roots(fn, g2, roots, seeds, n_roots);
    /* an output that is an input's own handle passes its gradient straight through */
    for (int32_t o = 0; o < n_out && s == TFC_OK; o++)
        for (int32_t i = 0; i < n_in && s == TFC_OK; i++)
            if (gout[o] && outs[o] == leaves[i] && leaves[i]->requires_grad) s = add_to_leaf_grad(leaves[i], gout[o]);
    for (int32_t i = 0; i < n_in && s == TFC_OK; i++)
        if (tfc_node_needs_grad(n, i) && leaves[i]->grad) gin[i] = tfc_tensor_retain(leaves[i]->grad);
    if (outs)
        for (int32_t o = 0; o < n_out; o++) tfc_tensor_release(outs[o]);
    for (int32_t i = 0; i < n_in; i++) tfc_tensor_release(leaves[i]);
    tfc_graph_release(g2);
    if (user && user != c->user) free(user);
    free(outs);
    free(roots);
    free(seeds);
    return tfc_err_in(fn, s);
}

static tfc_status check_args(const char *fn, tfc_checkpoint_fn f, const void *ctx, size_t ctx_size,
                             const tfc_tensor *const *inputs, int32_t n_in, tfc_tensor **outputs, int32_t n_out) {
    TFC_CHECK_NOT_NULL_AS(fn, f, "fn");
    TFC_CHECK_NOT_NULL(fn, inputs);
    TFC_CHECK_NOT_NULL(fn, outputs);
    if (n_in < 1 || n_in > TFC_CHECKPOINT_MAX_INPUTS)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: n_in is %d, must be 1 to %d (TFC_CHECKPOINT_MAX_INPUTS)", fn,
                       (int)n_in, TFC_CHECKPOINT_MAX_INPUTS);
    if (n_out < 1) return tfc_err(TFC_ERR_INVALID_ARG, "%s: n_out is %d, must be at least 1", fn, (int)n_out);
    if (ctx_size && !ctx)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: ctx is NULL but ctx_size is %zu (copy what?)", fn, ctx_size);
    for (int32_t i = 0; i < n_in; i++)
        if (!inputs[i]) return tfc_err(TFC_ERR_INVALID_ARG, "%s: inputs[%d] is NULL", fn, (int)i);
    return TFC_OK;
}

TFC_API tfc_status tfc_graph_checkpoint(tfc_graph *g, tfc_checkpoint_fn f, void *ctx, size_t ctx_size,
                                        const tfc_tensor *const *inputs, int32_t n_in, tfc_tensor **outputs,
                                        int32_t n_out) {
    const char *fn = "tfc_graph_checkpoint";
    TFC_TRY(check_args(fn, f, ctx, ctx_size, inputs, n_in, outputs, n_out));
    tfc_tensor **outs = calloc((size_t)n_out, sizeof *outs);
    if (!outs) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    if (!g || !g->enabled) {
        tfc_status s = call_fn(f, g, inputs, n_in, outs, n_out, ctx, "");
        if (s == TFC_OK) memcpy(outputs, outs, sizeof *outs * (size_t)n_out);
        free(outs);
        return tfc_err_in(fn, s);
    }
    /* the bytes of ctx before fn may change them: what every replay starts from */
    void *snap = ctx_size ? malloc(ctx_size) : NULL;
    if (ctx_size && !snap) {
        free(outs);
        return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    }
    if (ctx_size) memcpy(snap, ctx, ctx_size);
    /* computed first, recorded afterwards: a failing fn leaves nothing on the tape */
    tfc_status s = call_fn(f, NULL, inputs, n_in, outs, n_out, ctx, "");
    /* fresh handles, so an output fn returned as an input's handle is not rewired */
    for (int32_t o = 0; o < n_out && s == TFC_OK; o++) {
        tfc_tensor *a = NULL, *t = outs[o];
        s = tfc_tensor_alias(t, t->shape, t->strides, t->ndim, t->offset, &a);
        if (s == TFC_OK) {
            tfc_tensor_release(t);
            outs[o] = a;
        }
    }
    tfc_node *n = NULL;
    if (s == TFC_OK) s = tfc_node_new(g, fn, checkpoint_backward, n_in, n_out, sizeof(checkpoint_ctx) + ctx_size, &n);
    if (s == TFC_OK) {
        checkpoint_ctx *c = n->ctx;
        c->fn = f;
        c->user = ctx;
        c->snapshot_size = ctx_size;
        c->n_in = n_in;
        c->n_out = n_out;
        if (ctx_size) memcpy(c->snapshot, snap, ctx_size);
        for (int32_t i = 0; i < n_in && s == TFC_OK; i++) {
            tfc_node_set_input(n, i, inputs[i]);
            s = tfc_node_keep(n, &c->in[i], inputs[i]);
        }
        /* (out of memory keeping an input: the node stays on the tape unreached; the graph frees it) */
        if (s != TFC_OK) tfc_node_drop_saved(n);
    }
    free(snap);
    if (s == TFC_OK) {
        for (int32_t o = 0; o < n_out; o++) {
            tfc_node_attach_output(n, o, outs[o]);
            outputs[o] = outs[o];
        }
    } else {
        for (int32_t o = 0; o < n_out; o++) tfc_tensor_release(outs[o]);
    }
    free(outs);
    return tfc_err_in(fn, s);
}
