/* tfc_embedding_forward / tfc_embedding_backward: checks, then lib/cpu/embedding.c. */
#include "cpu/kernels.h"
#include "ops/kernel_args.h"

/* The lookup's shape: ids.shape + [c]. */
static tfc_status lookup_shape(const char *fn, const tfc_tensor *ids, int64_t c, int64_t *dims, int32_t *ndim) {
    if (ids->ndim + 1 > TFC_MAX_DIMS)
        return tfc_err(TFC_ERR_SHAPE, "%s: ids is %s; with the embedding dim it would exceed %d dims", fn,
                       SHAPE(ids), TFC_MAX_DIMS);
    for (int32_t i = 0; i < ids->ndim; i++) dims[i] = ids->shape[i];
    dims[ids->ndim] = c;
    *ndim = ids->ndim + 1;
    return TFC_OK;
}

static tfc_status check_ids(const char *fn, const tfc_tensor *ids, const void *data, int64_t v) {
    int64_t bad = tfc_cpu_first_bad_index(data, ids->dtype, tfc_numel(ids), v, 0, 0);
    if (bad >= 0)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: ids %s at flat position %lld is %lld, outside [0, %lld)", fn,
                       SHAPE(ids), (long long)bad, (long long)tfc_index_at(data, ids->dtype, bad), (long long)v);
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
    tfc_tensor *tt, *ti = NULL;
    const tfc_tensor *ut, *ui;
    tfc_status s = tfc_karg_contiguous(table, &tt, &ut);
    if (s == TFC_OK) s = tfc_karg_contiguous(ids, &ti, &ui);
    if (s == TFC_OK && tfc_is_cuda(table)) {
        /* The entry checks the ids on the device (one stream sync). */
        const tfc_cuda_api *api;
        int32_t dev;
        s = tfc_cuda_for(fn, table, &api, &dev);
        if (s == TFC_OK && tfc_numel(ids) > 0)
            s = tfc_cuda_done(fn, "embedding_forward", api,
                              api->embedding_forward(dev, table->dtype, tfc_data(ut), ids->dtype, tfc_data(ui),
                                                     tfc_data(out), (size_t)tfc_numel(ids), (size_t)table->shape[0],
                                                     (size_t)table->shape[1]));
        if (s == TFC_OK) tfc_bump_version(out);
        tfc_tensor_release(tt);
        tfc_tensor_release(ti);
        return s;
    }
    if (s == TFC_OK) s = check_ids(fn, ids, tfc_data(ui), table->shape[0]);
    if (s == TFC_OK) {
        tfc_cpu_embedding_forward(table->dtype, ids->dtype, tfc_numel(ids), table->shape[1], tfc_data(ut),
                                  tfc_data(ui), tfc_data(out));
        tfc_bump_version(out);
    }
    tfc_tensor_release(tt);
    tfc_tensor_release(ti);
    return s;
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
    tfc_tensor *td, *ti = NULL;
    const tfc_tensor *ud, *ui;
    tfc_status s = tfc_karg_contiguous(dout, &td, &ud);
    if (s == TFC_OK) s = tfc_karg_contiguous(ids, &ti, &ui);
    if (s == TFC_OK && tfc_is_cuda(dtable)) {
        const tfc_cuda_api *api;
        int32_t dev;
        s = tfc_cuda_for(fn, dtable, &api, &dev);
        if (s == TFC_OK)
            s = tfc_cuda_done(fn, "embedding_backward", api,
                              api->embedding_backward(dev, dtable->dtype, tfc_data(ud), ids->dtype, tfc_data(ui),
                                                      tfc_data(dtable), (size_t)tfc_numel(ids),
                                                      (size_t)dtable->shape[0], (size_t)dtable->shape[1], flags));
        if (s == TFC_OK) tfc_bump_version(dtable);
        tfc_tensor_release(td);
        tfc_tensor_release(ti);
        return s;
    }
    if (s == TFC_OK) s = check_ids(fn, ids, tfc_data(ui), dtable->shape[0]);
    if (s == TFC_OK) {
        tfc_cpu_embedding_backward(dtable->dtype, ids->dtype, tfc_numel(ids), dtable->shape[0], dtable->shape[1],
                                   tfc_data(ud), tfc_data(ui), tfc_data(dtable), (flags & TFC_GRAD_ACCUMULATE) != 0);
        tfc_bump_version(dtable);
    }
    tfc_tensor_release(td);
    tfc_tensor_release(ti);
    return s;
}
