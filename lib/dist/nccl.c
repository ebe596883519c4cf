/*
 * The NCCL communicator of a tfc_comm, for collectives on CUDA tensors: the
 * CUDA module's coll_* entries (cuda/nccl.cu) do the work; this file makes
 * the communicator the way NCCL wants it made — rank 0 creates a unique id,
 * MPI broadcasts it, every rank joins with it — and frees it.
 */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "device/device.h"
#include "dist/comm_impl.h"

tfc_status tfc_comm_nccl(const char *fn, tfc_comm *c, int32_t device, const tfc_backend **be, void **nccl) {
    if (c->nccl) {
        if (device != c->nccl_device)
            return tfc_err(TFC_ERR_UNSUPPORTED,
                           "%s: this communicator's NCCL side is on cuda:%d; a process drives one GPU, so a tensor on "
                           "cuda:%d cannot join it",
                           fn, c->nccl_device, device);
        *be = c->cuda;
        *nccl = c->nccl;
        return TFC_OK;
    }
    const tfc_backend *b = NULL;
    TFC_TRY(tfc_backend_of(TFC_DEVICE_CUDA, device, &b));
    if (!b->coll_unique_id || !b->coll_init) return tfc_backend_missing(fn, b, device, "coll_init", -1);
    /* rank 0's id, and whether it could make one, reach every rank together */
    int32_t msg[1 + TFC_COLL_ID_BYTES / 4];
    memset(msg, 0, sizeof msg);
    char why[512] = "";
    if (c->rank == 0) {
        tfc_status s = tfc_backend_done(fn, b, device, "coll_unique_id", b->coll_unique_id(msg + 1));
        msg[0] = (int32_t)s;
        if (s != TFC_OK) snprintf(why, sizeof why, "%s", tfc_last_error());
    }
    TFC_TRY(tfc_comm_bcast_raw(fn, c, msg, 1 + TFC_COLL_ID_BYTES / 4, TFC_DTYPE_I32, 0));
    if (msg[0] != TFC_OK)
        return c->rank == 0 ? tfc_err((tfc_status)msg[0], "%s", why)
                            : tfc_err((tfc_status)msg[0], "%s: rank 0 could not start NCCL (its error says why)", fn);
    void *nc = NULL;
    tfc_comm_busy(c, "NCCL communicator creation");
    tfc_status s = tfc_backend_done(fn, b, device, "coll_init", b->coll_init(msg + 1, c->rank, c->size, device, &nc));
    tfc_comm_idle(c);
    TFC_TRY(s);
    c->cuda = b;
    c->nccl = nc;
    c->nccl_device = device;
    *be = b;
    *nccl = nc;
    return TFC_OK;
}

void tfc_comm_nccl_release(tfc_comm *c) {
    if (c->nccl && c->cuda && c->cuda->coll_release) c->cuda->coll_release(c->nccl);
    c->nccl = NULL;
}
