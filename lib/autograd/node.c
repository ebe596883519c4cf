/* Recording nodes on the tape. */
#include <stdlib.h>
#include <string.h>

#include "autograd/node.h"
#include "autograd/profile.h"
#include "core/error.h"

int tfc_should_record(const tfc_graph *g, const tfc_tensor *const *ts, int32_t k) {
    if (!g || !g->enabled) return 0;
    for (int32_t i = 0; i < k; i++)
        if (ts[i] && ts[i]->requires_grad) return 1;
    return 0;
}

static tfc_status graph_push(tfc_graph *g, tfc_node *n) {
    /*
     * Before growing, drop the nodes no tensor can reach any more (a
     * forward whose results were thrown away without backward), so a loop
     * that never clears stays flat; grow only when that frees too little.
     */
    if (g->n_nodes == g->cap_nodes && g->n_nodes && !g->in_backward) {
        tfc_graph_compact(g);
        if (g->n_nodes * 2 <= g->cap_nodes) {
            g->nodes[g->n_nodes++] = n;
            return TFC_OK;
        }
    }
    if (g->n_nodes == g->cap_nodes) {
        int64_t cap = g->cap_nodes ? g->cap_nodes * 2 : 64;
        tfc_node **p = realloc(g->nodes, sizeof *p * (size_t)cap);
        if (!p) return tfc_err(TFC_ERR_OOM, "out of memory growing the graph");
        g->nodes = p;
        g->cap_nodes = cap;
    }
    g->nodes[g->n_nodes++] = n;
    return TFC_OK;
}

tfc_status tfc_node_new(tfc_graph *g, const char *name, tfc_backward_fn backward, int32_t n_in, int32_t n_out,
                        size_t ctx_size, tfc_node **out) {
    tfc_node *n = calloc(1, sizeof *n);
    tfc_edge *in = calloc((size_t)(n_in ? n_in : 1), sizeof *in);
    tfc_tensor **acc = calloc((size_t)n_out, sizeof *acc);
    tfc_tensor **ret = calloc((size_t)n_out, sizeof *ret);
    void *ctx = ctx_size ? calloc(1, ctx_size) : NULL;
    if (!n || !in || !acc || !ret || (ctx_size && !ctx)) {
        free(n);
        free(in);
        free(acc);
        free(ret);
        free(ctx);
        return tfc_err(TFC_ERR_OOM, "%s: out of memory recording a graph node", name);
    }
    atomic_init(&n->refcount, 1); /* the graph's reference */
    n->name = name;
    n->graph = g;
    n->backward = backward;
    n->n_in = n_in;
    n->n_out = n_out;
    n->in = in;
    n->grad_acc = acc;
    n->retained = ret;
    n->ctx = ctx;
    n->ctx_size = ctx_size;
    if (tfc_profile_enabled()) tfc_profile_forward(name);
    tfc_status s = graph_push(g, n);
    if (s != TFC_OK) {
        atomic_store(&n->refcount, 1);
        tfc_node_unref(n);
        return s;
    }
    *out = n;
    return TFC_OK;
}

tfc_status tfc_node_set_input(tfc_node *n, int32_t i, const tfc_tensor *t) {
    tfc_edge *e = &n->in[i];
    e->ndim = t->ndim;
    e->dtype = t->dtype;
    memcpy(e->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    if (!t->requires_grad) return TFC_OK;
    if (t->node) {
        e->node = t->node;
        e->index = t->out_index;
        atomic_fetch_add(&t->node->refcount, 1);
    } else {
        e->leaf = tfc_tensor_retain((tfc_tensor *)t);
    }
    return TFC_OK;
}

tfc_status tfc_node_keep(tfc_node *n, tfc_saved *slot, const tfc_tensor *t) {
    if (!t) return TFC_OK;
    /* The slot must be an empty field of this node's context: it is freed and checked through n. */
    uintptr_t at = (uintptr_t)slot, ctx = (uintptr_t)n->ctx;
    if (at < ctx || at + sizeof *slot > ctx + n->ctx_size || slot->t)
        return tfc_err(TFC_ERR_INTERNAL, "%s: saved slot is not an empty slot of its node's context", n->name);
    if (n->n_kept == TFC_NODE_MAX_SAVED) return tfc_err(TFC_ERR_INTERNAL, "%s: too many saved tensors", n->name);
    TFC_TRY(tfc_tensor_alias(t, t->shape, t->strides, t->ndim, t->offset, &slot->t));
    slot->version = atomic_load(&t->storage->version);
    slot->orig = t;
    /* Where it came from, for a create_graph backward (an own output is found by attach_output). */
    if (t->requires_grad && t->node) {
        slot->src_node = t->node;
        slot->src_index = t->out_index;
        atomic_fetch_add(&t->node->refcount, 1);
    } else if (t->requires_grad) {
        slot->src_leaf = tfc_tensor_retain((tfc_tensor *)t);
    }
    n->kept[n->n_kept++] = slot;
    return TFC_OK;
}

tfc_status tfc_node_attach_output(tfc_node *n, int32_t i, tfc_tensor *out) {
    atomic_fetch_add(&n->refcount, 1);
    out->node = n;
    out->out_index = i;
    out->requires_grad = 1;
    for (int32_t k = 0; k < n->n_kept; k++)
        if (n->kept[k]->orig == out && !n->kept[k]->src_node && !n->kept[k]->src_leaf) n->kept[k]->self = i + 1;
    if (n->graph && n->graph->detect_anomaly) {
        int bad = 0;
        TFC_TRY(tfc_tensor_nonfinite(out, &bad));
        if (bad)
            return tfc_err(TFC_ERR_INVALID_ARG,
                           "anomaly detected: %s produced output %d %s %s holding NaN or Inf in the forward "
                           "(its inputs: %d; first input %s)",
                           n->name, (int)i, tfc_dtype_name(out->dtype), SHAPE(out), (int)n->n_in,
                           n->n_in ? tfc_fmt_dims(n->in[0].shape, n->in[0].ndim) : "none");
    }
    return TFC_OK;
}

void tfc_node_set_double_backward(tfc_node *n) { n->double_backward = 1; }

tfc_graph *tfc_node_grad_graph(const tfc_node *n) { return n->graph && n->graph->create_graph ? n->graph : NULL; }

tfc_status tfc_node_saved(const tfc_node *n, const tfc_saved *slot, tfc_tensor **out) {
    tfc_tensor *t = slot->t;
    *out = NULL;
    if (!t) return TFC_OK;
    if (!tfc_node_grad_graph(n) || (!slot->src_leaf && !slot->src_node && !slot->self)) {
        *out = tfc_tensor_retain(t);
        return TFC_OK;
    }
    if (slot->src_leaf) {
        *out = tfc_tensor_retain(slot->src_leaf);
        return TFC_OK;
    }
    tfc_node *src = slot->self ? (tfc_node *)n : slot->src_node;
    tfc_tensor *a;
    TFC_TRY(tfc_tensor_alias(t, t->shape, t->strides, t->ndim, t->offset, &a));
    atomic_fetch_add(&src->refcount, 1);
    a->node = src;
    a->out_index = slot->self ? slot->self - 1 : slot->src_index;
    a->requires_grad = 1;
    *out = a;
    return TFC_OK;
}

int tfc_node_needs_grad(const tfc_node *n, int32_t i) { return n->in[i].node || n->in[i].leaf; }

static tfc_status modified_error(const tfc_node *n, const char *fn, const tfc_tensor *t, uint64_t now, uint64_t then) {
    return tfc_err(TFC_ERR_INVALID_ARG,
                   "%s: a tensor %s saved by %s for backward was modified in place "
                   "(version %llu, saved at version %llu)",
                   fn, SHAPE(t), n->name, (unsigned long long)now, (unsigned long long)then);
}

tfc_status tfc_node_check_saved(const tfc_node *n, const char *fn) {
    for (int32_t k = 0; k < n->n_kept; k++) {
        const tfc_saved *s = n->kept[k];
        uint64_t now = atomic_load(&s->t->storage->version);
        if (now != s->version) return modified_error(n, fn, s->t, now, s->version);
    }
    return TFC_OK;
}

/* Empty the saved slots; the source nodes whose references go are handed to drop (NULL: unref now). */
static void drop_saved(tfc_node *n, void (*drop)(void *, tfc_node *), void *user) {
    for (int32_t k = 0; k < n->n_kept; k++) {
        tfc_saved *sv = n->kept[k];
        tfc_tensor_release(sv->t);
        tfc_tensor_release(sv->src_leaf);
        sv->t = NULL;
        sv->src_leaf = NULL;
        tfc_node *src = sv->src_node;
        sv->src_node = NULL;
        if (src) {
            if (drop)
                drop(user, src);
            else
                tfc_node_unref(src);
        }
    }
}

void tfc_node_drop_saved(tfc_node *n) { drop_saved(n, NULL, NULL); }

typedef struct unref_stack {
    tfc_node **stack;
    tfc_node *small[64];
    int64_t top, cap;
} unref_stack;

static void unref_push(void *user, tfc_node *n) {
    unref_stack *st = user;
    if (st->top == st->cap) {
        tfc_node **bigger = malloc(sizeof *bigger * (size_t)st->cap * 2);
        if (!bigger) return; /* leaks rather than crashes under OOM */
        memcpy(bigger, st->stack, sizeof *bigger * (size_t)st->top);
        if (st->stack != st->small) free(st->stack);
        st->stack = bigger;
        st->cap *= 2;
    }
    st->stack[st->top++] = n;
}

/* Free what backward needs: saved tensors and in-flight gradients. */
static void node_release_saved(tfc_node *n, unref_stack *st) {
    drop_saved(n, unref_push, st);
    for (int32_t i = 0; i < n->n_out; i++) {
        tfc_tensor_release(n->grad_acc[i]);
        n->grad_acc[i] = NULL;
    }
}

void tfc_node_unref(tfc_node *n) {
    /* Iterative: dropping a long chain of nodes must not recurse. */
    unref_stack st;
    st.stack = st.small;
    st.top = 0;
    st.cap = 64;
    st.stack[st.top++] = n;
    while (st.top > 0) {
        tfc_node *cur = st.stack[--st.top];
        if (!cur || atomic_fetch_sub(&cur->refcount, 1) != 1) continue;
        node_release_saved(cur, &st);
        for (int32_t i = 0; i < cur->n_in; i++) {
            tfc_tensor_release(cur->in[i].leaf);
            if (cur->in[i].node) unref_push(&st, cur->in[i].node);
        }
        free(cur->in);
        if (cur->ctx_free) cur->ctx_free(cur->ctx);
        free(cur->ctx);
        free(cur->grad_acc);
        free(cur->retained);
        free(cur);
    }
    if (st.stack != st.small) free(st.stack);
}

/* A tensor going away: forget it as a retained output and drop its node. */
static void tensor_autograd_release(tfc_tensor *t) {
    if (!t->node) return;
    if (t->retains_grad && t->node->retained[t->out_index] == t) t->node->retained[t->out_index] = NULL;
    tfc_node_unref(t->node);
    t->node = NULL;
}

__attribute__((constructor)) static void install_release_hook(void) {
    tfc_tensor_autograd_release_hook = tensor_autograd_release;
}
