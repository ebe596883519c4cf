/*
 * tfc_embedding, the graph door of the row lookup; backward scatter-adds
 * into a fresh table gradient (tfc_embedding_backward).
 */
#include "ops/op_util.h"
#include "tfcore/kernels.h"

typedef struct embedding_ctx {
    tfc_saved ids;
} embedding_ctx;

static tfc_status embedding_node_backward(tfc_node *n, tfc_tensor *const *gout, tfc_tensor **gin) {
    const embedding_ctx *c = n->ctx;
    tfc_tensor *dy = gout[0], *ids = c->ids.t, *dt;
    if (!dy || !tfc_node_needs_grad(n, 0)) return TFC_OK;
    const tfc_edge *e = &n->in[0];
    TFC_TRY(tfc_tensor_new_on(dy, e->shape, e->ndim, dy->dtype, &dt));
    tfc_status s = tfc_embedding_backward(dy, ids, dt, 0);
    if (s != TFC_OK) {
        tfc_tensor_release(dt);
        return s;
    }
    gin[0] = dt;
    return TFC_OK;
}

TFC_API tfc_status tfc_embedding(tfc_graph *g, const tfc_tensor *table, const tfc_tensor *ids, tfc_tensor **out) {
    const char *fn = "tfc_embedding";
    TFC_CHECK_NOT_NULL(fn, out);
    TFC_TRY(tfc_check_float(fn, "table", table));
    TFC_CHECK_NOT_NULL(fn, ids);
    if (table->ndim != 2) return tfc_err(TFC_ERR_SHAPE, "%s: table is %s; it must be [V, C]", fn, SHAPE(table));
    if (ids->ndim >= TFC_MAX_DIMS) return tfc_err(TFC_ERR_SHAPE, "%s: ids %s has too many dims", fn, SHAPE(ids));
    int64_t shape[TFC_MAX_DIMS];
    for (int32_t i = 0; i < ids->ndim; i++) shape[i] = ids->shape[i];
    shape[ids->ndim] = table->shape[1];
    tfc_tensor *y;
    TFC_TRY(tfc_tensor_new_on(table, shape, ids->ndim + 1, table->dtype, &y));
    tfc_status s = tfc_embedding_forward(table, ids, y);
    if (s == TFC_OK && tfc_should_record(g, &table, 1)) {
        tfc_node *n;
        s = tfc_node_new(g, fn, embedding_node_backward, 1, 1, sizeof(embedding_ctx), &n);
        if (s == TFC_OK) {
            embedding_ctx *c = n->ctx;
            tfc_node_set_input(n, 0, table);
            s = tfc_node_keep(n, &c->ids, ids);
            if (s == TFC_OK) tfc_node_attach_output(n, 0, y);
        }
    }
    if (s != TFC_OK) {
        tfc_tensor_release(y);
        return s;
    }
    *out = y;
    return TFC_OK;
}
