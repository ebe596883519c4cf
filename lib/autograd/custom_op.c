/*
 * Custom ops: a caller's forward and backward (C function pointers with a
 * context and a destructor) recorded as one node, torch.autograd.Function
 * in C. The node's context copies what backward needs from the caller's
 * definition, so the definition may be a temporary.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/node.h"
#include "core/error.h"
#include "tensor/dispatch.h"

#define NAME_MAX_BYTES 63

typedef struct custom_ctx {
    tfc_custom_backward_fn backward;
    tfc_custom_destroy_fn destroy;
    void *user;
    tfc_saved saved[TFC_CUSTOM_MAX_SAVED];
} custom_ctx;

/*
 * Node names outlive nodes (the profile keys its rows by the name pointer),
 * so each distinct custom name is copied once into a process-wide list that
 * is never freed; programs define few ops.
 */
typedef struct interned {
    struct interned *next;
    char name[];
} interned;

static pthread_mutex_t g_names_lock = PTHREAD_MUTEX_INITIALIZER;
static interned *g_names;

static const char *intern(const char *name) {
    size_t len = strlen(name);
    pthread_mutex_lock(&g_names_lock);
    interned *e = g_names;
    while (e && strcmp(e->name, name) != 0) e = e->next;
    if (!e) {
        e = malloc(sizeof *e + len + 1);
        if (e) {
            memcpy(e->name, name, len + 1);
            e->next = g_names;
            g_names = e;
        }
    }
    pthread_mutex_unlock(&g_names_lock);
    return e ? e->name : NULL;
}

static void custom_ctx_free(void *p) {
    custom_ctx *c = p;
    if (c->destroy) c->destroy(c->user);
}

/* A callback failed: keep its message (or make one up) after "prefix: ". */
static tfc_status callback_failed(tfc_status s, const char *prefix) {
    if (!tfc_last_error()[0]) return tfc_err(s, "%s: returned %s without a message", prefix, tfc_status_name(s));
    return tfc_err(s, "%s: %s", prefix, tfc_last_error());
}

static int same_dims(const tfc_tensor *t, const int64_t *shape, int32_t ndim) {
    if (t->ndim != ndim) return 0;
    for (int32_t i = 0; i < ndim; i++)
        if (t->shape[i] != shape[i]) return 0;
    return 1;
}

/* Gradient i as the engine needs it: its input's shape and dtype, like's device. */
static tfc_status check_grad(const tfc_node *n, int32_t i, const tfc_tensor *gi, const tfc_tensor *like) {
    const tfc_edge *e = &n->in[i];
    if (!same_dims(gi, e->shape, e->ndim) || gi->dtype != e->dtype)
        return tfc_err(TFC_ERR_INVALID_ARG,
                       "%s (custom op) backward: grad_inputs[%d] is %s %s but inputs[%d] is %s %s (a gradient has "
                       "its input's shape and dtype)",
                       n->name, (int)i, tfc_dtype_name(gi->dtype), SHAPE(gi), (int)i, tfc_dtype_name(e->dtype),
                       tfc_fmt_dims(e->shape, e->ndim));
    if (like &&
        (gi->storage->device != like->storage->device || gi->storage->device_index != like->storage->device_index))
        return tfc_err(TFC_ERR_INVALID_ARG,
                       "%s (custom op) backward: grad_inputs[%d] lives on another device than inputs[%d]", n->name,
                       (int)i, (int)i);
    return TFC_OK;
}

static tfc_status custom_backward(tfc_node *n, tfc_tensor *const *gout, tfc_tensor **gin) {
    const custom_ctx *c = n->ctx;
    int any = 0;
    for (int32_t o = 0; o < n->n_out; o++) any |= gout[o] != NULL;
    if (!any) return TFC_OK;
    int32_t needs_small[16];
    int32_t *needs = n->n_in <= 16 ? needs_small : malloc(sizeof *needs * (size_t)n->n_in);
    tfc_tensor *grads_small[16];
    tfc_tensor **grads = n->n_in <= 16 ? grads_small : calloc((size_t)n->n_in, sizeof *grads);
    if (!needs || !grads) {
        if (needs != needs_small) free(needs);
        if (grads != grads_small) free(grads);
        return tfc_err(TFC_ERR_OOM, "%s (custom op) backward: out of memory", n->name);
    }
    const tfc_tensor *saved[TFC_CUSTOM_MAX_SAVED];
    for (int32_t k = 0; k < TFC_CUSTOM_MAX_SAVED; k++) saved[k] = c->saved[k].t;
    for (int32_t i = 0; i < n->n_in; i++) {
        needs[i] = tfc_node_needs_grad(n, i);
        grads[i] = NULL;
    }
    tfc_clear_error(); /* a stale message must not pass for the callback's own */
    char prefix[NAME_MAX_BYTES + 40];
    snprintf(prefix, sizeof prefix, "%s (custom op) backward", n->name);
    tfc_status s = c->backward(c->user, saved, (const tfc_tensor *const *)gout, n->n_out, needs, grads, n->n_in);
    if (s != TFC_OK) s = callback_failed(s, prefix);
    /* the op ran on the device its output gradients live on: its input gradients must too */
    for (int32_t i = 0; i < n->n_in && s == TFC_OK; i++) {
        if (!grads[i]) continue;
        if (!needs[i]) {
            tfc_tensor_release(grads[i]);
            grads[i] = NULL;
            continue;
        }
        const tfc_tensor *like = NULL;
        for (int32_t o = 0; o < n->n_out && !like; o++) like = gout[o];
        s = check_grad(n, i, grads[i], like);
    }
    for (int32_t i = 0; i < n->n_in; i++) {
        if (s == TFC_OK)
            gin[i] = grads[i];
        else
            tfc_tensor_release(grads[i]);
    }
    if (needs != needs_small) free(needs);
    if (grads != grads_small) free(grads);
    return s;
}

static tfc_status check_def(const char *fn, const tfc_custom_op_def *def) {
    TFC_CHECK_NOT_NULL(fn, def);
    if (def->struct_size < sizeof *def)
        return tfc_err(TFC_ERR_VERSION, "%s: def->struct_size is %u, must be at least %zu (sizeof(tfc_custom_op_def))",
                       fn, (unsigned)def->struct_size, sizeof *def);
    return TFC_OK;
}

/* Checks after def is known good: on failure the caller still owns running destroy. */
static tfc_status check_rest(const char *fn, const tfc_custom_op_def *def, const tfc_tensor *const *inputs,
                             int32_t n_in, tfc_tensor **outputs, int32_t n_out) {
    if (!def->name) return tfc_err(TFC_ERR_INVALID_ARG, "%s: def->name is NULL", fn);
    size_t len = strlen(def->name);
    if (len == 0 || len > NAME_MAX_BYTES)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: def->name has %zu bytes, must have 1 to %d", fn, len, NAME_MAX_BYTES);
    if (!def->forward) return tfc_err(TFC_ERR_INVALID_ARG, "%s: def->forward is NULL (op %s)", fn, def->name);
    if (!def->backward) return tfc_err(TFC_ERR_INVALID_ARG, "%s: def->backward is NULL (op %s)", fn, def->name);
    TFC_CHECK_NOT_NULL(fn, inputs);
    TFC_CHECK_NOT_NULL(fn, outputs);
    if (n_in < 1) return tfc_err(TFC_ERR_INVALID_ARG, "%s: n_in is %d, must be at least 1", fn, (int)n_in);
    if (n_out < 1) return tfc_err(TFC_ERR_INVALID_ARG, "%s: n_out is %d, must be at least 1", fn, (int)n_out);
    for (int32_t i = 0; i < n_in; i++)
        if (!inputs[i]) return tfc_err(TFC_ERR_INVALID_ARG, "%s: inputs[%d] is NULL", fn, (int)i);
    return TFC_OK;
}

static void release_all(tfc_tensor **ts, int32_t n) {
    for (int32_t i = 0; i < n; i++) {
        tfc_tensor_release(ts[i]);
        ts[i] = NULL;
    }
}

/* Run forward; on success outs hold fresh aliases of what it made and saved what it kept. */
static tfc_status run_forward(const char *fn, const tfc_custom_op_def *def, void *ctx, const tfc_tensor *const *inputs,
                              int32_t n_in, tfc_tensor **outs, int32_t n_out, tfc_tensor **saved) {
    char prefix[NAME_MAX_BYTES + 40];
    snprintf(prefix, sizeof prefix, "%s: %s forward", fn, def->name);
    tfc_clear_error();
    tfc_status s = def->forward(ctx, inputs, n_in, outs, n_out, saved);
    if (s != TFC_OK) s = callback_failed(s, prefix);
    for (int32_t o = 0; o < n_out && s == TFC_OK; o++)
        if (!outs[o]) s = tfc_err(TFC_ERR_INVALID_ARG, "%s: returned TFC_OK but left outputs[%d] NULL", prefix, (int)o);
    for (int32_t o = 0; o < n_out && s == TFC_OK; o++) {
        tfc_tensor *a = NULL, *t = outs[o];
        s = tfc_tensor_alias(t, t->shape, t->strides, t->ndim, t->offset, &a);
        if (s == TFC_OK) {
            tfc_tensor_release(t);
            outs[o] = a;
        }
    }
    if (s != TFC_OK) {
        release_all(outs, n_out);
        release_all(saved, TFC_CUSTOM_MAX_SAVED);
    }
    return s;
}

/* One node holding backward, destroy and the saved tensors; the node takes over running destroy. */
static tfc_status record(tfc_graph *g, const tfc_custom_op_def *def, void *ctx, const tfc_tensor *const *inputs,
                         int32_t n_in, tfc_tensor **outs, int32_t n_out, tfc_tensor **saved, int *destroy_owned) {
    const char *fn = "tfc_custom_op";
    const char *name = intern(def->name);
    if (!name) return tfc_err(TFC_ERR_OOM, "%s: out of memory naming op %s", fn, def->name);
    tfc_node *n = NULL;
    TFC_TRY(tfc_node_new(g, name, custom_backward, n_in, n_out, sizeof(custom_ctx), &n));
    custom_ctx *c = n->ctx;
    c->backward = def->backward;
    c->destroy = def->destroy;
    c->user = ctx;
    n->ctx_free = custom_ctx_free;
    *destroy_owned = 0;
    tfc_status s = TFC_OK;
    for (int32_t i = 0; i < n_in; i++) tfc_node_set_input(n, i, inputs[i]);
    for (int32_t k = 0; k < TFC_CUSTOM_MAX_SAVED && s == TFC_OK; k++) s = tfc_node_keep(n, &c->saved[k], saved[k]);
    /* (out of memory keeping one: the node stays on the tape unreached; the graph frees it, destroy included) */
    if (s != TFC_OK) {
        tfc_node_drop_saved(n);
        return s;
    }
    for (int32_t o = 0; o < n_out; o++) tfc_node_attach_output(n, o, outs[o]);
    return TFC_OK;
}

TFC_API tfc_status tfc_custom_op(tfc_graph *g, const tfc_custom_op_def *def, void *ctx, const tfc_tensor *const *inputs,
                                 int32_t n_in, tfc_tensor **outputs, int32_t n_out) {
    const char *fn = "tfc_custom_op";
    TFC_TRY(check_def(fn, def));
    /* from here on destroy(ctx) runs exactly once: below, or when the recorded node is freed */
    int destroy_owned = 1;
    tfc_tensor *saved[TFC_CUSTOM_MAX_SAVED] = {0};
    tfc_tensor **outs = NULL;
    tfc_status s = check_rest(fn, def, inputs, n_in, outputs, n_out);
    if (s == TFC_OK) {
        outs = calloc((size_t)n_out, sizeof *outs);
        if (!outs) s = tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    }
    if (s == TFC_OK) s = run_forward(fn, def, ctx, inputs, n_in, outs, n_out, saved);
    if (s == TFC_OK && tfc_should_record(g, inputs, n_in))
        s = record(g, def, ctx, inputs, n_in, outs, n_out, saved, &destroy_owned);
    release_all(saved, TFC_CUSTOM_MAX_SAVED); /* the node keeps its own aliases */
    if (s == TFC_OK)
        memcpy(outputs, outs, sizeof *outs * (size_t)n_out);
    else if (outs)
        release_all(outs, n_out);
    free(outs);
    if (destroy_owned && def->destroy) def->destroy(ctx);
    return tfc_err_in(fn, s);
}
