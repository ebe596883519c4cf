/*
 * tfc_embedding, the graph door of the row lookup; backward scatter-adds
 * into a fresh table gradient (tfc_embedding_backward).
 *
 * The explicit doors tfc_embedding_forward / tfc_embedding_backward: checks, then the backend's embedding entries.
 */
#include "device/sync_count.h"
#include "ops/op_util.h"
#include "ops/operands.h"
#include "tfcore/kernels.h"

/* ---- the explicit doors (include/tfcore/kernels.h) ---- */

/* The lookup's shape: ids.shape + [c]. */
static tfc_status lookup_shape(const char *fn, const tfc_tensor *ids, int64_t c, int64_t *dims, int32_t *ndim) {
    if (ids->ndim + 1 > TFC_MAX_DIMS)
        return tfc_err(TFC_ERR_SHAPE, "%s: ids is %s; with the embedding dim it would exceed %d dims", fn, SHAPE(ids),
                       TFC_MAX_DIMS);
    for (int32_t i = 0; i < ids->ndim; i++) dims[i] = ids->shape[i];
    dims[ids->ndim] = c;
    *ndim = ids->ndim + 1;
    return TFC_OK;
}

TFC_API tfc_status tfc_embedding_forward(const tfc_tensor *table, const tfc_tensor *ids, tfc_tensor *out) {
    const char *fn = "tfc_embedding_forward";
    TFC_TRY(tfc_karg_float(fn, "table", table));
    if (table->ndim != 2) return tfc_err(TFC_ERR_SHAPE, "%s: table is %s, must be [V, C]", fn, SHAPE(table));
    TFC_TRY(tfc_karg_index(fn, "ids", ids));
    {
        const tfc_tensor *ts[2] = {table, ids};
        const char *nm[2] = {"table", "ids"};
        TFC_TRY(tfc_same_device(fn, ts, nm, 2));
    }
    int64_t dims[TFC_MAX_DIMS];
    int32_t nd;
    TFC_TRY(lookup_shape(fn, ids, table->shape[1], dims, &nd));
    TFC_CHECK_NOT_NULL(fn, out);
    TFC_TRY(tfc_karg_output(fn, "out", out, table->dtype, dims, nd, "table", table));
    const tfc_tensor *all[] = {out, table, ids};
    const char *names[] = {"out", "table", "ids"};
    TFC_TRY(tfc_karg_disjoint(fn, all, names, 1, 3));
    const tfc_backend *b;
    TFC_TRY(tfc_tensor_backend(fn, table, &b));
    tfc_embedding_problem p = {.device = tfc_device_index(table),
                               .dtype = table->dtype,
                               .index_dtype = ids->dtype,
                               .n = tfc_numel(ids),
                               .v = table->shape[0],
                               .c = table->shape[1],
                               .ids_shape = ids->shape,
                               .ids_ndim = ids->ndim,
                               .out = tfc_data(out)};
    /* ids copied from the host were range-checked there: the device need not check them and wait */
    const int checked = tfc_storage_range_within(ids, p.v, 0);
    if (checked) p.accumulate = TFC_IDS_CHECKED;
    tfc_operands o = {0};
    tfc_status s = tfc_operand(&o, table, &p.table);
    if (s == TFC_OK) s = tfc_operand(&o, ids, &p.ids);
    if (s == TFC_OK) s = TFC_BACKEND_RUN(fn, b, embedding_forward, &p);
    /* otherwise off the CPU the kernel checks them and its verdict is read back before it returns */
    if (!checked)
        tfc_device_note_sync(table->storage->device, p.device, "tfc_embedding: the ids' range check on the device");
    if (s == TFC_OK) tfc_written(out, NULL, NULL);
    tfc_operands_release(&o);
    return tfc_err_in(fn, s);
}

TFC_API tfc_status tfc_embedding_backward(const tfc_tensor *dout, const tfc_tensor *ids, tfc_tensor *dtable,
                                          uint32_t flags) {
    const char *fn = "tfc_embedding_backward";
    TFC_TRY(tfc_karg_flags(fn, flags));
    TFC_TRY(tfc_karg_float(fn, "dout", dout));
    TFC_TRY(tfc_karg_index(fn, "ids", ids));
    TFC_CHECK_NOT_NULL(fn, dtable);
    {
        const tfc_tensor *ts[3] = {dout, ids, dtable};
        const char *nm[3] = {"dout", "ids", "dtable"};
        TFC_TRY(tfc_same_device(fn, ts, nm, 3));
    }
    TFC_TRY(tfc_karg_float(fn, "dtable", dtable));
    if (dtable->ndim != 2) return tfc_err(TFC_ERR_SHAPE, "%s: dtable is %s, must be [V, C]", fn, SHAPE(dtable));
    int64_t dims[TFC_MAX_DIMS];
    int32_t nd;
    TFC_TRY(lookup_shape(fn, ids, dtable->shape[1], dims, &nd));
    TFC_TRY(tfc_karg_dtype_like(fn, "dout", dout, "dtable", dtable));
    TFC_TRY(tfc_karg_shape(fn, "dout", dout, dims, nd, "ids", ids));
    TFC_TRY(tfc_karg_output(fn, "dtable", dtable, dtable->dtype, dtable->shape, 2, "dout", dout));
    const tfc_tensor *all[] = {dtable, dout, ids};
    const char *names[] = {"dtable", "dout", "ids"};
    TFC_TRY(tfc_karg_disjoint(fn, all, names, 1, 3));
    const tfc_backend *b;
    TFC_TRY(tfc_tensor_backend(fn, dtable, &b));
    tfc_embedding_problem p = {.device = tfc_device_index(dtable),
                               .dtype = dtable->dtype,
                               .index_dtype = ids->dtype,
                               .n = tfc_numel(ids),
                               .v = dtable->shape[0],
                               .c = dtable->shape[1],
                               .ids_shape = ids->shape,
                               .ids_ndim = ids->ndim,
                               .dtable = tfc_data(dtable),
                               .accumulate = (flags & TFC_GRAD_ACCUMULATE) != 0};
    const int checked = tfc_storage_range_within(ids, p.v, 0);
    if (checked) p.accumulate |= TFC_IDS_CHECKED;
    tfc_operands o = {0};
    tfc_status s = tfc_operand(&o, dout, &p.dout);
    if (s == TFC_OK) s = tfc_operand(&o, ids, &p.ids);
    if (s == TFC_OK) s = TFC_BACKEND_RUN(fn, b, embedding_backward, &p);
    if (!checked)
        tfc_device_note_sync(dtable->storage->device, p.device,
                             "tfc_embedding_backward: the ids' range check on the device");
    if (s == TFC_OK) tfc_written(dtable, NULL, NULL);
    tfc_operands_release(&o);
    return tfc_err_in(fn, s);
}

/* ---- the graph door (include/tfcore/ops.h) ---- */

typedef struct embedding_ctx {
    tfc_saved ids;
} embedding_ctx;

/* Of dtable = scatter_add(dy, ids): d/ddy is the lookup of its gradient's rows (a recorded embedding). */
static tfc_status embedding_scatter_backward(tfc_node *n, tfc_tensor *const *gout, tfc_tensor **gin) {
    const embedding_ctx *c = n->ctx;
    if (!gout[0] || !tfc_node_needs_grad(n, 0)) return TFC_OK;
    return tfc_embedding(tfc_node_grad_graph(n), gout[0], c->ids.t, &gin[0]);
}

static tfc_status embedding_node_backward(tfc_node *n, tfc_tensor *const *gout, tfc_tensor **gin) {
    const embedding_ctx *c = n->ctx;
    tfc_tensor *dy = gout[0], *ids = c->ids.t, *dt;
    if (!dy || !tfc_node_needs_grad(n, 0)) return TFC_OK;
    const tfc_edge *e = &n->in[0];
    TFC_TRY(tfc_tensor_new_on(dy, e->shape, e->ndim, dy->dtype, &dt));
    tfc_status s = tfc_embedding_backward(dy, ids, dt, 0);
    /* create_graph: the scatter is recorded, so the table's gradient stays differentiable in dy */
    tfc_graph *gg = tfc_node_grad_graph(n);
    const tfc_tensor *ins[1] = {dy};
    if (s == TFC_OK && tfc_should_record(gg, ins, 1)) {
        tfc_node *m;
        s = tfc_node_new(gg, "tfc_embedding (backward)", embedding_scatter_backward, 1, 1, sizeof(embedding_ctx), &m);
        if (s == TFC_OK) {
            tfc_node_set_double_backward(m);
            tfc_node_set_input(m, 0, dy);
            s = tfc_node_keep(m, &((embedding_ctx *)m->ctx)->ids, ids);
            if (s == TFC_OK) s = tfc_node_attach_output(m, 0, dt);
        }
    }
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
            tfc_node_set_double_backward(n);
            tfc_node_set_input(n, 0, table);
            s = tfc_node_keep(n, &c->ids, ids);
            if (s == TFC_OK) s = tfc_node_attach_output(n, 0, y);
        }
    }
    if (s != TFC_OK) {
        tfc_tensor_release(y);
        return tfc_err_in(fn, s);
    }
    *out = y;
    return TFC_OK;
}
