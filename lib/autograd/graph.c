/* The tape's lifetime and the backward engine. */
#include <stdio.h>
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
/* A read-only .grad (wrapped read-only memory set as the grad) is never added into: the sum replaces it. */
static int owns_storage(const tfc_tensor *t) {
    return atomic_load(&t->storage->refcount) == 1 && tfc_is_contiguous(t) && !t->storage->read_only;
}

/* Both on one device (then the in-place add runs there). */
static int same_place(const tfc_tensor *a, const tfc_tensor *b) {
    return a->storage->device == b->storage->device && a->storage->device_index == b->storage->device_index;
}

static const char *const accumulate_fn = "tfc_graph_backward (gradient accumulation)";

/* acc += g in place (acc contiguous, owned), on acc's device. */
static tfc_status add_in_place(tfc_tensor *a, const tfc_tensor *g) {
    return tfc_tensor_map(accumulate_fn, TFC_MAP_ADD, a, a, g, NULL, 0.0, 0);
}

/* The recorded sum of two gradients: both inputs receive the output's gradient. */
static tfc_status accumulate_backward(tfc_node *n, tfc_tensor *const *gout, tfc_tensor **gin) {
    for (int32_t i = 0; i < 2 && gout[0]; i++)
        if (tfc_node_needs_grad(n, i)) gin[i] = tfc_tensor_retain(gout[0]);
    return TFC_OK;
}

/*
 * dst = a + b as a new contiguous tensor; with rec (a create_graph pass)
 * the sum is recorded on rec, so a gradient summed from two paths keeps
 * the history of both.
 */
static tfc_status add_new_on(tfc_graph *rec, const tfc_tensor *a, const tfc_tensor *b, tfc_tensor **out) {
    if (!same_place(a, b))
        return tfc_err(TFC_ERR_DEVICE, "tfc_graph_backward: two gradients of one tensor live on different devices");
    tfc_tensor *r;
    TFC_TRY(tfc_tensor_new_like(a, a->dtype, &r));
    tfc_status s = tfc_tensor_map(accumulate_fn, TFC_MAP_ADD, r, a, b, NULL, 0.0, 0);
    const tfc_tensor *ins[2] = {a, b};
    if (s == TFC_OK && tfc_should_record(rec, ins, 2)) {
        tfc_node *n;
        s = tfc_node_new(rec, accumulate_fn, accumulate_backward, 2, 1, 0, &n);
        if (s == TFC_OK) {
            tfc_node_set_double_backward(n);
            tfc_node_set_input(n, 0, a);
            tfc_node_set_input(n, 1, b);
            s = tfc_node_attach_output(n, 0, r);
        }
    }
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
 * can see its memory; otherwise the sum goes to a fresh tensor. With rec
 * (create_graph) always a fresh, recorded sum: in place would lose history.
 */
static tfc_status grad_accumulate_on(tfc_graph *rec, tfc_tensor **acc, tfc_tensor *g) {
    if (!*acc) {
        *acc = g;
        return TFC_OK;
    }
    tfc_tensor *a = *acc;
    tfc_status s = TFC_OK;
    if (!rec && atomic_load(&a->refcount) == 1 && owns_storage(a) && same_place(a, g)) {
        s = add_in_place(a, g);
    } else {
        tfc_tensor *sum;
        s = add_new_on(rec, a, g, &sum);
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
 * with PyTorch's .grad), unless its memory is shared with a view. With rec
 * (create_graph) .grad is the gradient itself, history included, and a
 * later contribution makes a new recorded sum (PyTorch's behaviour).
 */
static tfc_status accumulate_leaf_on(tfc_graph *rec, tfc_tensor *leaf, tfc_tensor *g) {
    tfc_status s = TFC_OK;
    if (!leaf->grad) {
        if (atomic_load(&g->refcount) == 1 && owns_storage(g)) {
            leaf->grad = g;
            return TFC_OK;
        }
        if (rec && g->requires_grad) {
            /*
             * Shared with another gradient (add hands dy to both inputs): a
             * handle of its own, history kept, so a later in-place
             * accumulation into one .grad cannot show in the other.
             */
            tfc_tensor *a;
            s = tfc_tensor_alias(g, g->shape, g->strides, g->ndim, g->offset, &a);
            if (s == TFC_OK && g->node) {
                atomic_fetch_add(&g->node->refcount, 1);
                a->node = g->node;
                a->out_index = g->out_index;
            }
            if (s == TFC_OK) {
                a->requires_grad = 1;
                leaf->grad = a;
            }
            tfc_tensor_release(g);
            return s;
        }
        s = tfc_tensor_clone(g, &leaf->grad);
        tfc_tensor_release(g);
        return s;
    }
    tfc_tensor *a = leaf->grad;
    if (!rec && owns_storage(a) && same_place(a, g)) {
        s = add_in_place(a, g);
        if (s == TFC_OK) tfc_bump_version(a);
    } else {
        tfc_tensor *sum;
        s = add_new_on(rec, a, g, &sum);
        if (s == TFC_OK) {
            tfc_tensor_release(a);
            leaf->grad = sum;
        }
    }
    tfc_tensor_release(g);
    return s;
}

/* ---- dropping nodes no backward can reach any more ----------------------- */

/*
 * Drop from g's list the nodes a backward without retain_graph freed and
 * the nodes nothing but the graph refers to (no tensor, no later node: no
 * backward can reach them). Newest first, so a dead consumer's release
 * leaves its producers with only the graph's reference before they are
 * looked at. Keeps the list's order.
 */
void tfc_graph_compact(tfc_graph *g) {
    int64_t n = g->n_nodes;
    for (int64_t i = n - 1; i >= 0; i--) {
        tfc_node *x = g->nodes[i];
        if (x->freed || atomic_load(&x->refcount) == 1) {
            x->graph = NULL;
            tfc_node_drop_saved(x);
            tfc_node_unref(x);
            g->nodes[i] = NULL;
        }
    }
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++)
        if (g->nodes[i]) g->nodes[k++] = g->nodes[i];
    g->n_nodes = k;
}

/* ---- backward: check, collect and validate, then run ---------------------- */

static const char *const freed_msg = "its saved tensors were freed by a backward without retain_graph=True "
                                     "(pass retain_graph=1 to the earlier backward to go through it again)";

static tfc_status check_backward_args(const char *fn, const tfc_graph *g, const tfc_tensor *loss,
                                      const tfc_tensor *seed, const char *loss_arg, const char *seed_arg) {
    TFC_CHECK_NOT_NULL(fn, g);
    if (!loss) return tfc_err(TFC_ERR_INVALID_ARG, "%s: %s is NULL", fn, loss_arg);
    if (!loss->node)
        return tfc_err(TFC_ERR_INVALID_ARG,
                       "%s: %s %s was not produced by an op recorded on a graph "
                       "(is it a leaf, or computed with recording off?)",
                       fn, loss_arg, SHAPE(loss));
    if (loss->node->freed)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: %s was produced by %s; %s", fn, loss_arg, loss->node->name, freed_msg);
    if (loss->node->graph != g)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: %s was produced by %s on %s graph", fn, loss_arg, loss->node->name,
                       loss->node->graph ? "another" : "a cleared");
    if (seed) {
        if (!same_shape(seed, loss->shape, loss->ndim))
            return tfc_err(TFC_ERR_SHAPE, "%s: %s is %s, %s is %s", fn, seed_arg, SHAPE(seed), loss_arg, SHAPE(loss));
        if (seed->dtype != loss->dtype)
            return tfc_err(TFC_ERR_DTYPE, "%s: %s is %s, %s is %s", fn, seed_arg, tfc_dtype_name(seed->dtype), loss_arg,
                           tfc_dtype_name(loss->dtype));
        if (!same_place(seed, loss))
            return tfc_err(TFC_ERR_DEVICE, "%s: %s and %s are on different devices", fn, seed_arg, loss_arg);
    } else if (tfc_numel(loss) != 1) {
        return tfc_err(TFC_ERR_SHAPE, "%s: %s is %s, not a single element: pass a seed gradient of that shape", fn,
                       loss_arg, SHAPE(loss));
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

/*
 * Backward may run through n: its graph still holds it, what it saved is
 * unmodified and, in a create_graph pass, its backward is differentiable.
 */
static tfc_status validate_node(const char *fn, const tfc_node *n, int create_graph) {
    if (n->freed) return tfc_err(TFC_ERR_INVALID_ARG, "%s: backward through %s: %s", fn, n->name, freed_msg);
    if (!n->graph)
        return tfc_err(TFC_ERR_INVALID_ARG,
                       "%s: the graph holding %s was cleared or released; its saved tensors "
                       "are gone (record the forward again)",
                       fn, n->name);
    if (create_graph && !n->double_backward)
        return tfc_err(TFC_ERR_UNSUPPORTED,
                       "%s: create_graph: %s has no differentiable backward (a fused kernel), so gradients "
                       "of its gradient are not supported; differentiate through it once only "
                       "(create_graph=0)",
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
static tfc_status collect(const char *fn, tfc_node *const *roots, int32_t n_roots, int count_leaves, int create_graph,
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
        if (st == TFC_OK) st = validate_node(fn, n, create_graph);
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

/* The grad hook a backward pass calls (fn NULL: none), fixed when the pass starts. */
typedef struct grad_hook {
    tfc_grad_hook_fn fn;
    void *user;
} grad_hook;

/*
 * One backward pass's settings: rec is the graph its backwards record on
 * (create_graph) or NULL; with capture (tfc_autograd_grad) no .grad is
 * written and the gradients of inputs[0..n_inputs) are summed into got[].
 */
typedef struct pass {
    const char *fn;
    grad_hook h;
    tfc_graph *rec;
    int anomaly;
    int capture;
    const tfc_tensor *const *inputs;
    int32_t n_inputs;
    tfc_tensor **got;
} pass;

/*
 * Each root's output gradient: a copy of its seed (with create_graph the
 * seed itself, so its history is kept), or ones; two roots that are one
 * output add up. Called after every root's grad_acc was emptied.
 */
static tfc_status seed_roots(const pass *ps, const tfc_tensor *const *roots, const tfc_tensor *const *seeds,
                             int32_t n) {
    for (int32_t r = 0; r < n; r++) {
        const tfc_tensor *loss = roots[r], *seed = seeds ? seeds[r] : NULL;
        tfc_tensor *seed_t;
        if (seed && ps->rec) {
            seed_t = tfc_tensor_retain((tfc_tensor *)seed);
        } else if (seed) {
            TFC_TRY(tfc_tensor_clone(seed, &seed_t));
        } else {
            TFC_TRY(tfc_tensor_new_like(loss, loss->dtype, &seed_t));
            tfc_status st = tfc_tensor_fill(seed_t, 1.0);
            if (st != TFC_OK) {
                tfc_tensor_release(seed_t);
                return st;
            }
        }
        TFC_TRY(grad_accumulate_on(ps->rec, &loss->node->grad_acc[loss->out_index], seed_t));
    }
    return TFC_OK;
}

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

/* tfc_autograd_grad: gradient g (consumed) reached inputs that are this leaf or this node output. */
static tfc_status capture(const pass *ps, const tfc_tensor *leaf, const tfc_node *node, int32_t index, tfc_tensor *g) {
    tfc_status s = TFC_OK;
    for (int32_t k = 0; k < ps->n_inputs && s == TFC_OK; k++) {
        const tfc_tensor *in = ps->inputs[k];
        if (leaf ? in == leaf : (in->node == node && in->out_index == index))
            s = grad_accumulate_on(ps->rec, &ps->got[k], tfc_tensor_retain(g));
    }
    tfc_tensor_release(g);
    return s;
}

/* Anomaly mode: an error naming the node's op when gradient gi of its input i is not finite. */
static tfc_status check_grad_finite(const char *fn, const tfc_node *n, int32_t i, const tfc_tensor *gi) {
    int bad = 0;
    TFC_TRY(tfc_tensor_nonfinite(gi, &bad));
    if (!bad) return TFC_OK;
    const tfc_edge *e = &n->in[i];
    return tfc_err(TFC_ERR_INVALID_ARG,
                   "%s: anomaly detected: the backward of %s (the node the forward op %s recorded) produced a "
                   "gradient %s holding NaN or Inf for its input %d %s",
                   fn, n->name, n->name, SHAPE(gi), (int)i, tfc_fmt_dims(e->shape, e->ndim));
}

/*
 * tfc_autograd_grad runs only what leads to its inputs, as PyTorch does: a
 * node is needed when one of its edges reaches a requested leaf or a node a
 * gradient must reach (one that produced a requested input, or is needed
 * itself). Marked producers first, over a topological order of the
 * collected nodes (Kahn's, on a copy of the consumer counts). With
 * create_graph only needed nodes must have a differentiable backward.
 */
static tfc_status prune(const pass *ps, tfc_node *const *roots, int32_t n_roots, tfc_node **all, int64_t n_all,
                        int create_graph) {
    tfc_node **order = malloc(sizeof *order * (size_t)(n_all ? n_all : 1));
    if (!order) return tfc_err(TFC_ERR_OOM, "%s: out of memory", ps->fn);
    for (int64_t i = 0; i < n_all; i++) all[i]->order_pending = all[i]->pending;
    int64_t top = 0, k = 0;
    /* order doubles as the stack: entries below k are placed, k..top are waiting */
    for (int32_t r = 0; r < n_roots; r++) {
        int dup = 0;
        for (int32_t q = 0; q < r; q++) dup |= roots[q] == roots[r];
        if (!dup && roots[r]->order_pending == 0) order[top++] = roots[r];
    }
    while (k < top) {
        tfc_node *n = order[k++];
        for (int32_t i = 0; i < n->n_in; i++) {
            tfc_node *p = n->in[i].node;
            if (p && --p->order_pending == 0) order[top++] = p;
        }
    }
    tfc_status st = TFC_OK;
    for (int64_t i = k - 1; i >= 0 && st == TFC_OK; i--) {
        tfc_node *n = order[i];
        int need = 0, here = 0;
        for (int32_t j = 0; j < ps->n_inputs; j++) here |= ps->inputs[j]->node == n;
        for (int32_t e = 0; e < n->n_in && !need; e++) {
            const tfc_edge *ed = &n->in[e];
            if (ed->node) need = ed->node->reach;
            for (int32_t j = 0; j < ps->n_inputs && ed->leaf && !need; j++) need = ps->inputs[j] == ed->leaf;
        }
        n->needed = (uint8_t)need;
        n->reach = (uint8_t)(need || here);
        if (need && create_graph && !n->double_backward) st = validate_node(ps->fn, n, 1);
    }
    free(order);
    return st;
}

/*
 * Run n, whose consumers have all delivered: retained outputs take their
 * gradient, backward runs, each input's gradient goes to its leaf or
 * producer, and a producer that has now heard from every consumer is
 * pushed on ready; a leaf that has now heard from every consumer goes to
 * the grad hook.
 */
static tfc_status run_node(const pass *ps, tfc_node *n, tfc_node **ready, int64_t *top) {
    const char *fn = ps->fn;
    if (ps->capture && !n->needed) {
        /* no requested input lies behind n: only capture, and let its producers (unneeded too) go by */
        tfc_status st = TFC_OK;
        for (int32_t o = 0; o < n->n_out; o++) {
            if (n->grad_acc[o] && st == TFC_OK) st = capture(ps, NULL, n, o, tfc_tensor_retain(n->grad_acc[o]));
            tfc_tensor_release(n->grad_acc[o]);
            n->grad_acc[o] = NULL;
        }
        for (int32_t i = 0; i < n->n_in; i++)
            if (n->in[i].node && --n->in[i].node->pending == 0) ready[(*top)++] = n->in[i].node;
        return st;
    }
    tfc_tensor *grad_in_small[16];
    tfc_tensor **grad_in = n->n_in <= 16 ? grad_in_small : calloc((size_t)n->n_in, sizeof *grad_in);
    if (!grad_in) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    tfc_status st = TFC_OK;
    for (int32_t i = 0; i < n->n_in; i++) grad_in[i] = NULL;
    for (int32_t o = 0; o < n->n_out && st == TFC_OK; o++) {
        tfc_tensor *r = n->retained[o];
        if (!n->grad_acc[o]) continue;
        if (ps->capture)
            st = capture(ps, NULL, n, o, tfc_tensor_retain(n->grad_acc[o]));
        else if (r)
            st = accumulate_leaf_on(ps->rec, r, tfc_tensor_retain(n->grad_acc[o]));
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
            continue;
        }
        if (gi && !same_shape(gi, e->shape, e->ndim)) {
            st = tfc_err(TFC_ERR_INTERNAL, "%s: %s produced a gradient %s for an input of shape %s", fn, n->name,
                         SHAPE(gi), tfc_fmt_dims(e->shape, e->ndim));
            tfc_tensor_release(gi);
            continue;
        }
        if (gi && ps->anomaly) {
            st = check_grad_finite(fn, n, i, gi);
            if (st != TFC_OK) {
                tfc_tensor_release(gi);
                continue;
            }
        }
        if (e->leaf) {
            if (ps->capture) {
                if (gi) st = capture(ps, e->leaf, NULL, 0, gi);
            } else {
                if (gi) st = accumulate_leaf_on(ps->rec, e->leaf, gi);
                if (st == TFC_OK) st = leaf_edge_done(&ps->h, e->leaf);
            }
        } else {
            if (gi) st = grad_accumulate_on(ps->rec, &e->node->grad_acc[e->index], gi);
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
static tfc_status run(const pass *ps, tfc_node *const *roots, int32_t n_roots, int64_t n_all) {
    const char *fn = ps->fn;
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
        st = run_node(ps, n, ready, &top);
        if (prof) tfc_profile_backward(n->name, tfc_profile_now() - t_node);
    }
    depth--;
    if (prof && outer) tfc_profile_backward_pass(0);
    free(ready);
    return st;
}

/*
 * One backward pass from n roots (each checked like a loss, seeds[r] its
 * seed or NULL), with messages naming fn. retain 0 frees, after a pass
 * that succeeded, the saved tensors of every node it went through that
 * saved any, and drops them from g's list. create_graph records the
 * backward on g. ps carries the capture of tfc_autograd_grad.
 */
static tfc_status backward_pass(pass *ps, tfc_graph *g, const tfc_tensor *const *roots, const tfc_tensor *const *seeds,
                                int32_t n, int32_t retain, int32_t create_graph, const char *roots_arg,
                                const char *seeds_arg) {
    const char *fn = ps->fn;
    char la[48], sa[48];
    for (int32_t r = 0; r < n; r++) {
        snprintf(la, sizeof la, n > 1 || roots_arg[0] == 'o' ? "%s[%d]" : "%s", roots_arg, (int)r);
        snprintf(sa, sizeof sa, n > 1 || roots_arg[0] == 'o' ? "%s[%d]" : "%s", seeds_arg, (int)r);
        TFC_TRY(check_backward_args(fn, g, roots[r], seeds ? seeds[r] : NULL, la, sa));
    }
    if (g->in_backward)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: g is already running backward (called from its grad hook?)", fn);
    tfc_node *root_small[8], **root_nodes = n <= 8 ? root_small : malloc(sizeof *root_nodes * (size_t)n);
    if (!root_nodes) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    for (int32_t r = 0; r < n; r++) root_nodes[r] = roots[r]->node;
    if (ps->capture)
        ps->h.fn = NULL, ps->h.user = NULL;
    else
        ps->h = (grad_hook){g->grad_hook, g->grad_hook_user};
    ps->rec = create_graph ? g : NULL;
    ps->anomaly = g->detect_anomaly;
    tfc_node **all;
    int64_t n_all;
    tfc_status st = collect(fn, root_nodes, n, ps->h.fn != NULL, create_graph && !ps->capture, &all, &n_all);
    if (st == TFC_OK && ps->capture) {
        st = prune(ps, root_nodes, n, all, n_all, create_graph);
        if (st != TFC_OK) free(all);
    }
    if (st != TFC_OK) {
        if (root_nodes != root_small) free(root_nodes);
        return st;
    }
    for (int32_t r = 0; r < n; r++)
        for (int32_t i = 0; i < root_nodes[r]->n_out; i++) {
            tfc_tensor_release(root_nodes[r]->grad_acc[i]);
            root_nodes[r]->grad_acc[i] = NULL;
        }
    g->in_backward = 1;
    /* A create_graph pass records even under no_grad, as PyTorch's does. */
    const int32_t was_enabled = g->enabled;
    if (create_graph) g->enabled = 1, g->create_graph = 1;
    st = seed_roots(ps, roots, seeds, n);
    if (st == TFC_OK) st = run(ps, root_nodes, n, n_all);
    g->enabled = was_enabled;
    g->create_graph = 0;
    g->in_backward = 0;
    if (root_nodes != root_small) free(root_nodes);
    /* On failure, drop in-flight gradients so nothing lingers. */
    for (int64_t i = 0; i < n_all; i++)
        for (int32_t o = 0; o < all[i]->n_out; o++) {
            tfc_tensor_release(all[i]->grad_acc[o]);
            all[i]->grad_acc[o] = NULL;
        }
    if (st == TFC_OK && !retain) {
        /* Free only this pass's nodes: other losses recorded on g keep theirs. */
        for (int64_t i = 0; i < n_all; i++)
            if (all[i]->n_kept > 0 && (!ps->capture || all[i]->needed)) { /* what it ran */
                tfc_node_drop_saved(all[i]);
                all[i]->freed = 1;
            }
    }
    free(all);
    if (!retain && !g->release_pending) tfc_graph_compact(g);
    if (g->release_pending) tfc_graph_release(g);
    return tfc_err_in(fn, st);
}

/* Backward from n roots at once for checkpoint.c's replay: keeps the graph, records nothing. */
tfc_status tfc_graph_backward_roots(const char *fn, tfc_graph *g, const tfc_tensor *const *roots,
                                    const tfc_tensor *const *seeds, int32_t n) {
    pass ps = {.fn = fn};
    return backward_pass(&ps, g, roots, seeds, n, 1, 0, "loss", "seed");
}

TFC_API tfc_status tfc_graph_backward(tfc_graph *g, const tfc_tensor *loss, const tfc_tensor *seed) {
    pass ps = {.fn = "tfc_graph_backward"};
    return backward_pass(&ps, g, &loss, &seed, 1, 1, 0, "loss", "seed");
}

TFC_API tfc_status tfc_graph_backward_ex(tfc_graph *g, const tfc_tensor *loss, const tfc_tensor *seed,
                                         int32_t retain_graph, int32_t create_graph) {
    const char *fn = "tfc_graph_backward_ex";
    if (retain_graph != 0 && retain_graph != 1)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: retain_graph is %d, must be 0 or 1", fn, (int)retain_graph);
    if (create_graph != 0 && create_graph != 1)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: create_graph is %d, must be 0 or 1", fn, (int)create_graph);
    pass ps = {.fn = fn};
    return backward_pass(&ps, g, &loss, &seed, 1, retain_graph, create_graph, "loss", "seed");
}

TFC_API tfc_status tfc_autograd_grad(tfc_graph *g, const tfc_tensor *const *outputs, int32_t n_outputs,
                                     const tfc_tensor *const *inputs, int32_t n_inputs,
                                     const tfc_tensor *const *grad_outputs, int32_t retain_graph, int32_t create_graph,
                                     int32_t allow_unused, tfc_tensor **grads_out) {
    const char *fn = "tfc_autograd_grad";
    TFC_CHECK_NOT_NULL(fn, g);
    TFC_CHECK_NOT_NULL(fn, outputs);
    TFC_CHECK_NOT_NULL(fn, inputs);
    TFC_CHECK_NOT_NULL(fn, grads_out);
    if (n_outputs < 1) return tfc_err(TFC_ERR_INVALID_ARG, "%s: n_outputs is %d, must be >= 1", fn, (int)n_outputs);
    if (n_inputs < 1) return tfc_err(TFC_ERR_INVALID_ARG, "%s: n_inputs is %d, must be >= 1", fn, (int)n_inputs);
    if (retain_graph != 0 && retain_graph != 1)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: retain_graph is %d, must be 0 or 1", fn, (int)retain_graph);
    if (create_graph != 0 && create_graph != 1)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: create_graph is %d, must be 0 or 1", fn, (int)create_graph);
    if (allow_unused != 0 && allow_unused != 1)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: allow_unused is %d, must be 0 or 1", fn, (int)allow_unused);
    for (int32_t k = 0; k < n_inputs; k++) {
        if (!inputs[k]) return tfc_err(TFC_ERR_INVALID_ARG, "%s: inputs[%d] is NULL", fn, (int)k);
        if (!inputs[k]->requires_grad)
            return tfc_err(TFC_ERR_INVALID_ARG, "%s: inputs[%d] %s does not require grad", fn, (int)k,
                           SHAPE(inputs[k]));
    }
    tfc_tensor **got = calloc((size_t)n_inputs, sizeof *got);
    if (!got) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    pass ps = {.fn = fn, .capture = 1, .inputs = inputs, .n_inputs = n_inputs, .got = got};
    tfc_status st =
        backward_pass(&ps, g, outputs, grad_outputs, n_outputs, retain_graph, create_graph, "outputs", "grad_outputs");
    for (int32_t k = 0; k < n_inputs && st == TFC_OK; k++)
        if (!got[k] && !allow_unused)
            st = tfc_err(TFC_ERR_INVALID_ARG,
                         "%s: inputs[%d] %s was not used to compute outputs (no gradient reaches it); "
                         "pass allow_unused=1 to get NULL for it",
                         fn, (int)k, SHAPE(inputs[k]));
    if (st != TFC_OK) {
        for (int32_t k = 0; k < n_inputs; k++) tfc_tensor_release(got[k]);
        free(got);
        return st;
    }
    for (int32_t k = 0; k < n_inputs; k++) grads_out[k] = got[k];
    free(got);
    return TFC_OK;
}

TFC_API tfc_status tfc_graph_set_detect_anomaly(tfc_graph *g, int32_t on) {
    TFC_CHECK_NOT_NULL("tfc_graph_set_detect_anomaly", g);
    if (on != 0 && on != 1)
        return tfc_err(TFC_ERR_INVALID_ARG, "tfc_graph_set_detect_anomaly: on is %d, must be 0 or 1", (int)on);
    g->detect_anomaly = on;
    return TFC_OK;
}

TFC_API int32_t tfc_graph_is_detect_anomaly(const tfc_graph *g) { return g && g->detect_anomaly; }

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
    const char *fn = "tfc_tensor_zero_grad";
    TFC_CHECK_NOT_NULL(fn, t);
    if (!t->grad) return TFC_OK;
    if (set_to_none) {
        tfc_tensor_release(t->grad);
        t->grad = NULL;
        return TFC_OK;
    }
    TFC_TRY(tfc_tensor_check_writable(fn, "t's grad", t->grad));
    return tfc_err_in(fn, tfc_tensor_fill(t->grad, 0.0));
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
