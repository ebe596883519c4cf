/* The tape's lifetime and the backward engine. */
#include <stdlib.h>
#include <string.h>

#include "autograd/node.h"
#include "autograd/profile.h"
#include "core/error.h"
#include "tensor/dispatch.h"

TFC_API tfc_status tfc_graph_new(tfc_graph **out) {
    TFC_CHECK_NOT_NULL("tfc_graph_new", out);
    tfc_graph *g = calloc(1, sizeof *g);
    if (!g) return tfc_err(TFC_ERR_OOM, "tfc_graph_new: out of memory");
    atomic_init(&g->refcount, 1);
    g->enabled = 1;
    *out = g;
    return TFC_OK;
}

static void graph_forget_nodes(tfc_graph *g) {
    for (int64_t i = 0; i < g->n_nodes; i++) {
        tfc_node *n = g->nodes[i];
        n->graph = NULL;
        tfc_node_drop_saved(n);
    }
    /* Unref after every node is marked, so chains freed here see consistent state. */
    for (int64_t i = 0; i < g->n_nodes; i++) tfc_node_unref(g->nodes[i]);
    g->n_nodes = 0;
}

TFC_API void tfc_graph_release(tfc_graph *g) {
    if (!g) return;
    if (g->in_backward) { /* from a grad hook: backward finishes first */
        g->release_pending = 1;
        return;
    }
    graph_forget_nodes(g);
    free(g->nodes);
    free(g);
}

TFC_API tfc_status tfc_graph_clear(tfc_graph *g) {
    TFC_CHECK_NOT_NULL("tfc_graph_clear", g);
    if (g->in_backward)
        return tfc_err(TFC_ERR_INVALID_ARG,
                       "tfc_graph_clear: g is running tfc_graph_backward (called from its grad hook?); "
                       "clear it after backward returns");
    graph_forget_nodes(g);
    return TFC_OK;
}

TFC_API tfc_status tfc_graph_set_grad_enabled(tfc_graph *g, int32_t on) {
    TFC_CHECK_NOT_NULL("tfc_graph_set_grad_enabled", g);
    g->enabled = on != 0;
    return TFC_OK;
}

TFC_API tfc_status tfc_graph_set_grad_hook(tfc_graph *g, tfc_grad_hook_fn fn, void *user) {
    TFC_CHECK_NOT_NULL("tfc_graph_set_grad_hook", g);
    g->grad_hook = fn;
    g->grad_hook_user = fn ? user : NULL;
    return TFC_OK;
}

TFC_API int32_t tfc_graph_is_grad_enabled(const tfc_graph *g) { return g && g->enabled; }
TFC_API int64_t tfc_graph_num_nodes(const tfc_graph *g) { return g ? g->n_nodes : 0; }

/* May t be written in place without another handle or view seeing it? */
static int owns_storage(const tfc_tensor *t) { return atomic_load(&t->storage->refcount) == 1 && tfc_is_contiguous(t); }

/* Both on one device (then the in-place add runs there). */
static int same_place(const tfc_tensor *a, const tfc_tensor *b) {
    return a->storage->device == b->storage->device && a->storage->device_index == b->storage->device_index;
}

static const char *const accumulate_fn = "tfc_graph_backward (gradient accumulation)";

/* acc += g in place (acc contiguous, owned), on acc's device. */
static tfc_status add_in_place(tfc_tensor *a, const tfc_tensor *g) {
    return tfc_tensor_map(accumulate_fn, TFC_MAP_ADD, a, a, g, NULL, 0.0, 0);
}

/* dst = a + b as a new contiguous tensor. */
static tfc_status add_new(const tfc_tensor *a, const tfc_tensor *b, tfc_tensor **out) {
    if (!same_place(a, b))
        return tfc_err(TFC_ERR_DEVICE, "tfc_graph_backward: two gradients of one tensor live on different devices");
    tfc_tensor *r;
    TFC_TRY(tfc_tensor_new_like(a, a->dtype, &r));
    tfc_status s = tfc_tensor_map(accumulate_fn, TFC_MAP_ADD, r, a, b, NULL, 0.0, 0);
    if (s != TFC_OK) {
        tfc_tensor_release(r);
        return s;
    }
    *out = r;
    return TFC_OK;
}

/*
 * acc += g. Gradients flow through shared handles (add passes dout to both
 * inputs), so an accumulator is only updated in place when nothing else
 * can see its memory; otherwise the sum goes to a fresh tensor.
 */
static tfc_status grad_accumulate(tfc_tensor **acc, tfc_tensor *g) {
    if (!*acc) {
        *acc = g;
        return TFC_OK;
    }
    tfc_tensor *a = *acc;
    tfc_status s = TFC_OK;
    if (atomic_load(&a->refcount) == 1 && owns_storage(a) && same_place(a, g)) {
        s = add_in_place(a, g);
    } else {
        tfc_tensor *sum;
        s = add_new(a, g, &sum);
        if (s == TFC_OK) {
            tfc_tensor_release(a);
            *acc = sum;
        }
    }
    tfc_tensor_release(g);
    return s;
}

static int same_shape(const tfc_tensor *t, const int64_t *shape, int32_t ndim) {
    if (t->ndim != ndim) return 0;
    for (int32_t i = 0; i < ndim; i++)
        if (t->shape[i] != shape[i]) return 0;
    return 1;
}

/*
 * Leaf .grad: the leaf owns a private contiguous tensor; later backward
 * calls add into it in place (callers holding a reference see the sum, as
 * with PyTorch's .grad), unless its memory is shared with a view.
 */
static tfc_status accumulate_leaf(tfc_tensor *leaf, tfc_tensor *g) {
    tfc_status s = TFC_OK;
    if (!leaf->grad) {
        if (atomic_load(&g->refcount) == 1 && owns_storage(g)) {
            leaf->grad = g;
            return TFC_OK;
        }
        s = tfc_tensor_clone(g, &leaf->grad);
        tfc_tensor_release(g);
        return s;
    }
    tfc_tensor *a = leaf->grad;
    if (owns_storage(a) && same_place(a, g)) {
        s = add_in_place(a, g);
        if (s == TFC_OK) tfc_bump_version(a);
    } else {
        tfc_tensor *sum;
        s = add_new(a, g, &sum);
        if (s == TFC_OK) {
            tfc_tensor_release(a);
            leaf->grad = sum;
        }
    }
    tfc_tensor_release(g);
    return s;
}

/* ---- backward: check, collect and validate, then run ---------------------- */

static tfc_status check_backward_args(const char *fn, const tfc_graph *g, const tfc_tensor *loss,
                                      const tfc_tensor *seed) {
    TFC_CHECK_NOT_NULL(fn, g);
    TFC_CHECK_NOT_NULL(fn, loss);
    if (!loss->node)
        return tfc_err(TFC_ERR_INVALID_ARG,
                       "%s: loss %s was not produced by an op recorded on a graph "
                       "(is it a leaf, or computed with recording off?)",
                       fn, SHAPE(loss));
    if (loss->node->graph != g)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: loss was produced by %s on %s graph", fn, loss->node->name,
                       loss->node->graph ? "another" : "a cleared");
    if (seed) {
        if (!same_shape(seed, loss->shape, loss->ndim))
            return tfc_err(TFC_ERR_SHAPE, "%s: seed is %s, loss is %s", fn, SHAPE(seed), SHAPE(loss));
        if (seed->dtype != loss->dtype)
            return tfc_err(TFC_ERR_DTYPE, "%s: seed is %s, loss is %s", fn, tfc_dtype_name(seed->dtype),
                           tfc_dtype_name(loss->dtype));
    } else if (tfc_numel(loss) != 1) {
        return tfc_err(TFC_ERR_SHAPE, "%s: loss is %s, not a single element: pass a seed gradient of that shape", fn,
                       SHAPE(loss));
    }
    return TFC_OK;
}

/* Append n to the array *a of *len nodes, growing its capacity *cap. */
static tfc_status push_node(const char *fn, tfc_node ***a, int64_t *len, int64_t *cap, tfc_node *n) {
    if (*len == *cap) {
        tfc_node **p = realloc(*a, sizeof *p * (size_t)(*cap * 2));
        if (!p) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
        *a = p;
        *cap *= 2;
    }
    (*a)[(*len)++] = n;
    return TFC_OK;
}

/* Backward may run through n: its graph still holds it and what it saved is unmodified. */
static tfc_status validate_node(const char *fn, const tfc_node *n) {
    if (!n->graph)
        return tfc_err(TFC_ERR_INVALID_ARG,
                       "%s: the graph holding %s was cleared or released; its saved tensors "
                       "are gone (record the forward again)",
                       fn, n->name);
    return tfc_node_check_saved(n, fn);
}

static int64_t g_epoch;

/*
 * The nodes reachable from the roots (explicit-stack DFS) into *all, each
 * validated before any gradient is touched, and each node's pending set to
 * the number of edges that will deliver a gradient to it; with count_leaves
 * (a grad hook is set), each leaf's hook_pending likewise.
 */
static tfc_status collect(const char *fn, tfc_node *const *roots, int32_t n_roots, int count_leaves,
                          tfc_node ***all_out, int64_t *n_all) {
    int64_t epoch = __atomic_add_fetch(&g_epoch, 1, __ATOMIC_RELAXED);
    int64_t cap = 256 + n_roots, top = 0, nall = 0, allcap = 256;
    tfc_node **stack = malloc(sizeof *stack * (size_t)cap), **all = malloc(sizeof *all * (size_t)allcap);
    tfc_status st = TFC_OK;
    if (!stack || !all) {
        st = tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    } else {
        for (int32_t r = 0; r < n_roots; r++) {
            if (roots[r]->visit_epoch == epoch) continue; /* two roots on one node */
            roots[r]->visit_epoch = epoch;
            roots[r]->pending = 0;
            stack[top++] = roots[r];
        }
    }
    while (top > 0 && st == TFC_OK) {
        tfc_node *n = stack[--top];
        st = push_node(fn, &all, &nall, &allcap, n);
        if (st == TFC_OK) st = validate_node(fn, n);
        for (int32_t i = 0; i < n->n_in && st == TFC_OK; i++) {
            tfc_node *p = n->in[i].node;
            tfc_tensor *leaf = n->in[i].leaf;
            if (count_leaves && leaf) {
                if (leaf->hook_epoch != epoch) {
                    leaf->hook_epoch = epoch;
                    leaf->hook_pending = 0;
                }
                leaf->hook_pending++;
            }
            if (!p) continue;
            if (p->visit_epoch != epoch) {
                p->visit_epoch = epoch;
                p->pending = 0;
                st = push_node(fn, &stack, &top, &cap, p);
            }
            p->pending++;
        }
    }
    free(stack);
    if (st != TFC_OK) {
        free(all);
        return st;
    }
    *all_out = all;
    *n_all = nall;
    return TFC_OK;
}

/*
 * Each root's output gradient: a copy of its seed, or ones; two roots that
 * are one output add up. Called after every root's grad_acc was emptied.
 */
static tfc_status seed_roots(const tfc_tensor *const *roots, const tfc_tensor *const *seeds, int32_t n) {
    for (int32_t r = 0; r < n; r++) {
        const tfc_tensor *loss = roots[r], *seed = seeds ? seeds[r] : NULL;
        tfc_tensor *seed_t;
        if (seed) {
            TFC_TRY(tfc_tensor_clone(seed, &seed_t));
        } else {
            TFC_TRY(tfc_tensor_new_like(loss, loss->dtype, &seed_t));
            tfc_status st = tfc_tensor_fill(seed_t, 1.0);
            if (st != TFC_OK) {
                tfc_tensor_release(seed_t);
                return st;
            }
        }
        TFC_TRY(grad_accumulate(&loss->node->grad_acc[loss->out_index], seed_t));
    }
    return TFC_OK;
}

/* The grad hook a backward pass calls (fn NULL: none), fixed when the pass starts. */
typedef struct grad_hook {
    tfc_grad_hook_fn fn;
    void *user;
} grad_hook;

/* One edge into leaf has been processed: call the hook if it was the last. */
static tfc_status leaf_edge_done(const grad_hook *h, tfc_tensor *leaf) {
    if (!h->fn || --leaf->hook_pending != 0) return TFC_OK;
    /* A stale message must not pass for the hook's own. */
    tfc_clear_error();
    tfc_status s = h->fn(leaf, h->user);
    if (s != TFC_OK && !tfc_last_error()[0])
        return tfc_err(s, "the grad hook returned %s for leaf %s %s without a message", tfc_status_name(s),
                       tfc_dtype_name(leaf->dtype), SHAPE(leaf));
    return s;
}

/*
 * Run n, whose consumers have all delivered: retained outputs take their
 * gradient, backward runs, each input's gradient goes to its leaf or
 * producer, and a producer that has now heard from every consumer is
 * pushed on ready; a leaf that has now heard from every consumer goes to
 * the grad hook.
 */
static tfc_status run_node(const char *fn, const grad_hook *h, tfc_node *n, tfc_node **ready, int64_t *top) {
    tfc_tensor *grad_in_small[16];
    tfc_tensor **grad_in = n->n_in <= 16 ? grad_in_small : calloc((size_t)n->n_in, sizeof *grad_in);
    if (!grad_in) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    tfc_status st = TFC_OK;
    for (int32_t i = 0; i < n->n_in; i++) grad_in[i] = NULL;
    for (int32_t o = 0; o < n->n_out; o++) {
        tfc_tensor *r = n->retained[o];
        if (r && n->grad_acc[o]) {
            st = accumulate_leaf(r, tfc_tensor_retain(n->grad_acc[o]));
        }
    }
    if (st == TFC_OK) st = n->backward(n, n->grad_acc, grad_in);
    for (int32_t o = 0; o < n->n_out; o++) {
        tfc_tensor_release(n->grad_acc[o]);
        n->grad_acc[o] = NULL;
    }
    for (int32_t i = 0; i < n->n_in; i++) {
        tfc_edge *e = &n->in[i];
        tfc_tensor *gi = grad_in[i];
        if (st != TFC_OK || (!e->node && !e->leaf)) {
            tfc_tensor_release(gi);
        } else if (gi && !same_shape(gi, e->shape, e->ndim)) {
            st = tfc_err(TFC_ERR_INTERNAL, "%s: %s produced a gradient %s for an input of shape %s", fn, n->name,
                         SHAPE(gi), tfc_fmt_dims(e->shape, e->ndim));
            tfc_tensor_release(gi);
        } else if (e->leaf) {
            if (gi) st = accumulate_leaf(e->leaf, gi);
            if (st == TFC_OK) st = leaf_edge_done(h, e->leaf);
        } else {
            if (gi) st = grad_accumulate(&e->node->grad_acc[e->index], gi);
            if (--e->node->pending == 0) ready[(*top)++] = e->node;
        }
    }
    if (grad_in != grad_in_small) free(grad_in);
    return st;
}

/*
 * Kahn's order from the roots over the n_all collected nodes. Each is pushed
 * once, but many can be ready at once, so ready has room for all of them.
 */
static tfc_status run(const char *fn, const grad_hook *h, tfc_node *const *roots, int32_t n_roots, int64_t n_all) {
    tfc_node **ready = malloc(sizeof *ready * (size_t)n_all);
    if (!ready) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    int64_t top = 0;
    /* a checkpoint's replay (a backward inside a node's backward) is part of the outer pass */
    static _Thread_local int depth;
    /* a root that another root reaches waits for it like any node */
    for (int32_t r = 0; r < n_roots; r++) {
        int dup = 0;
        for (int32_t q = 0; q < r; q++) dup |= roots[q] == roots[r];
        if (!dup && roots[r]->pending == 0) ready[top++] = roots[r];
    }
    tfc_status st = TFC_OK;
    int prof = tfc_profile_enabled();
    const int outer = depth++ == 0;
    if (prof && outer) tfc_profile_backward_pass(1);
    while (top > 0 && st == TFC_OK) {
        tfc_node *n = ready[--top];
        double t_node = prof ? tfc_profile_now() : 0;
        st = run_node(fn, h, n, ready, &top);
        if (prof) tfc_profile_backward(n->name, tfc_profile_now() - t_node);
    }
    depth--;
    if (prof && outer) tfc_profile_backward_pass(0);
    free(ready);
    return st;
}

/*
 * Backward from n roots at once (each checked like a loss, seeds[r] its
 * seed or NULL), with messages naming fn: tfc_graph_backward is n = 1, the
 * checkpoint's replay (checkpoint.c) one root per output of its function.
 */
tfc_status tfc_graph_backward_roots(const char *fn, tfc_graph *g, const tfc_tensor *const *roots,
                                    const tfc_tensor *const *seeds, int32_t n) {
    for (int32_t r = 0; r < n; r++) TFC_TRY(check_backward_args(fn, g, roots[r], seeds ? seeds[r] : NULL));
    if (g->in_backward)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: g is already running backward (called from its grad hook?)", fn);
    tfc_node *root_small[8], **root_nodes = n <= 8 ? root_small : malloc(sizeof *root_nodes * (size_t)n);
    if (!root_nodes) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    for (int32_t r = 0; r < n; r++) root_nodes[r] = roots[r]->node;
    grad_hook h = {g->grad_hook, g->grad_hook_user};
    tfc_node **all;
    int64_t n_all;
    tfc_status st = collect(fn, root_nodes, n, h.fn != NULL, &all, &n_all);
    if (st != TFC_OK) {
        if (root_nodes != root_small) free(root_nodes);
        return st;
    }
    for (int32_t r = 0; r < n; r++)
        for (int32_t i = 0; i < root_nodes[r]->n_out; i++) {
            tfc_tensor_release(root_nodes[r]->grad_acc[i]);
            root_nodes[r]->grad_acc[i] = NULL;
        }
    st = seed_roots(roots, seeds, n);
    g->in_backward = 1;
    if (st == TFC_OK) st = run(fn, &h, root_nodes, n, n_all);
    g->in_backward = 0;
    if (root_nodes != root_small) free(root_nodes);
    /* On failure, drop in-flight gradients so nothing lingers. */
    for (int64_t i = 0; i < n_all; i++)
        for (int32_t o = 0; o < all[i]->n_out; o++) {
            tfc_tensor_release(all[i]->grad_acc[o]);
            all[i]->grad_acc[o] = NULL;
        }
    free(all);
    if (g->release_pending) tfc_graph_release(g);
    return tfc_err_in(fn, st);
}

TFC_API tfc_status tfc_graph_backward(tfc_graph *g, const tfc_tensor *loss, const tfc_tensor *seed) {
    return tfc_graph_backward_roots("tfc_graph_backward", g, &loss, &seed, 1);
}

/* ---- per-tensor autograd state ------------------------------------------- */

TFC_API tfc_status tfc_tensor_set_requires_grad(tfc_tensor *t, int32_t on) {
    TFC_CHECK_NOT_NULL("tfc_tensor_set_requires_grad", t);
    if (t->node)
        return tfc_err(TFC_ERR_INVALID_ARG,
                       "tfc_tensor_set_requires_grad: t %s is not a leaf (produced by %s); "
                       "detach it first",
                       SHAPE(t), t->node->name);
    if (on &&
        !(t->dtype == TFC_DTYPE_F32 || t->dtype == TFC_DTYPE_F64 || t->dtype == TFC_DTYPE_BF16 ||
          t->dtype == TFC_DTYPE_F16))
        return tfc_err(TFC_ERR_DTYPE, "tfc_tensor_set_requires_grad: t is %s; only float tensors can require grad",
                       tfc_dtype_name(t->dtype));
    t->requires_grad = on != 0;
    return TFC_OK;
}

TFC_API int32_t tfc_tensor_requires_grad(const tfc_tensor *t) { return t && t->requires_grad; }
TFC_API int32_t tfc_tensor_is_leaf(const tfc_tensor *t) { return t && !t->node; }

TFC_API tfc_status tfc_tensor_grad(const tfc_tensor *t, tfc_tensor **out) {
    TFC_CHECK_NOT_NULL("tfc_tensor_grad", t);
    TFC_CHECK_NOT_NULL("tfc_tensor_grad", out);
    *out = tfc_tensor_retain(t->grad);
    return TFC_OK;
}

TFC_API tfc_status tfc_tensor_set_grad(tfc_tensor *t, tfc_tensor *grad) {
    TFC_CHECK_NOT_NULL("tfc_tensor_set_grad", t);
    if (grad && (!same_shape(grad, t->shape, t->ndim) || grad->dtype != t->dtype))
        return tfc_err(TFC_ERR_SHAPE, "tfc_tensor_set_grad: grad is %s %s, t is %s %s", tfc_dtype_name(grad->dtype),
                       SHAPE(grad), tfc_dtype_name(t->dtype), SHAPE(t));
    tfc_tensor_retain(grad);
    tfc_tensor_release(t->grad);
    t->grad = grad;
    return TFC_OK;
}

TFC_API tfc_status tfc_tensor_zero_grad(tfc_tensor *t, int32_t set_to_none) {
    TFC_CHECK_NOT_NULL("tfc_tensor_zero_grad", t);
    if (!t->grad) return TFC_OK;
    if (set_to_none) {
        tfc_tensor_release(t->grad);
        t->grad = NULL;
        return TFC_OK;
    }
    return tfc_tensor_fill(t->grad, 0.0);
}

TFC_API tfc_status tfc_tensor_retain_grad(tfc_tensor *t) {
    TFC_CHECK_NOT_NULL("tfc_tensor_retain_grad", t);
    if (!t->requires_grad)
        return tfc_err(TFC_ERR_INVALID_ARG, "tfc_tensor_retain_grad: t %s does not require grad", SHAPE(t));
    if (!t->node) return TFC_OK; /* leaves keep their grad anyway */
    t->retains_grad = 1;
    t->node->retained[t->out_index] = t;
    return TFC_OK;
}

TFC_API tfc_status tfc_tensor_detach(const tfc_tensor *t, tfc_tensor **out) {
    TFC_CHECK_NOT_NULL("tfc_tensor_detach", t);
    TFC_CHECK_NOT_NULL("tfc_tensor_detach", out);
    return tfc_err_in("tfc_tensor_detach", tfc_tensor_alias(t, t->shape, t->strides, t->ndim, t->offset, out));
}
