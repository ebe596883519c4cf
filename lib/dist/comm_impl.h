/*
 * The communicator, private to lib/dist and the layers above it (the
 * sharded optimizer of lib/optim): its fields and the raw collectives on
 * host buffers that the tensor collectives, tfc_ddp and ZeRO share.
 *
 * A one-rank communicator has no module: its collectives are local copies.
 * A multi-rank one carries the MPI module's table (dist_module.h) and a
 * watchdog thread that ends the job when a collective waits longer than
 * the timeout (comm.c).
 */
#ifndef TFC_DIST_COMM_IMPL_H
#define TFC_DIST_COMM_IMPL_H

#include <pthread.h>
#include <stdatomic.h>

#include "backend/backend.h"
#include "dist/dist_module.h"
#include "tensor/tensor_impl.h"
#include "tfcore/dist.h"

struct tfc_comm {
    atomic_int refcount;
    int32_t rank, size;
    const tfc_dist_module *m; /* NULL: one rank, no MPI */
    void *mc;                 /* the module's communicator */
    /* the watchdog: which collective is waiting since when (monotonic s; 0 idle) */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t wd;
    int wd_started, wd_stop;
    double timeout_s, busy_since;
    const char *busy_what;
    /* NCCL, for CUDA tensors: made on the first CUDA collective (nccl.c), for one device */
    const tfc_backend *cuda;
    void *nccl;
    int32_t nccl_device;
};

/* The kinds of collective, for the agreement check (tfc_comm_check). */
enum {
    TFC_COLL_BARRIER = 1,
    TFC_COLL_ALL_REDUCE,
    TFC_COLL_BROADCAST,
    TFC_COLL_ALL_GATHER,
    TFC_COLL_REDUCE_SCATTER,
    TFC_COLL_DDP,
    TFC_COLL_SHARD,
    TFC_COLL_GATHER
};

/*
 * The check every collective starts with, so that no rank is left waiting
 * in a collective the others will not run. local is this rank's own verdict
 * on its arguments (TFC_OK, or the status of the error it just reported);
 * vals are n values every rank must pass equal (names[i] says what value i
 * is, codes[i] is the status a disagreement gets). Every rank returns an
 * error when any rank refused its arguments (that rank keeps its own error;
 * the others get TFC_ERR_INVALID_ARG naming it) or the values differ (codes[i],
 * with the range seen across ranks and this rank's value). One rank:
 * returns local. Collective; n <= 8.
 */
tfc_status tfc_comm_check(const char *fn, tfc_comm *c, tfc_status local, const int64_t *vals, const tfc_status *codes,
                          const char *const *names, int32_t n);

/* Raw collectives on contiguous host buffers of dt (f32, f64, i32, i64); no agreement check. */
tfc_status tfc_comm_sum_raw(const char *fn, tfc_comm *c, void *buf, int64_t count, tfc_dtype dt);
tfc_status tfc_comm_bcast_raw(const char *fn, tfc_comm *c, void *buf, int64_t count, tfc_dtype dt, int32_t root);
/* counts[size]: rank r's share; recv holds them end to end. send NULL: this rank's share is in recv already. */
tfc_status tfc_comm_allgatherv_raw(const char *fn, tfc_comm *c, const void *send, void *recv, const int64_t *counts,
                                   tfc_dtype dt);
tfc_status tfc_comm_reduce_scatterv_raw(const char *fn, tfc_comm *c, const void *send, void *recv,
                                        const int64_t *counts, tfc_dtype dt);
tfc_status tfc_comm_gatherv_raw(const char *fn, tfc_comm *c, const void *send, void *recv, const int64_t *counts,
                                tfc_dtype dt, int32_t root);
tfc_status tfc_comm_barrier_raw(const char *fn, tfc_comm *c);

/* Rank r's share [lo, hi) of n elements split as evenly as possible (the first n % size ranks get one more). */
void tfc_comm_share(int64_t n, int32_t size, int32_t r, int64_t *lo, int64_t *hi);

tfc_comm *tfc_comm_retain(tfc_comm *c);

/* The watchdog's view: a collective named what is waiting from now on / is done. */
void tfc_comm_busy(tfc_comm *c, const char *what);
void tfc_comm_idle(tfc_comm *c);

/*
 * The NCCL communicator of c for CUDA device `device` (the CUDA module's
 * coll_* entries): made on the first call, from an id rank 0 creates and
 * broadcasts over MPI. Collective. Errors: the CUDA module unavailable or
 * without NCCL (TFC_ERR_UNSUPPORTED / TFC_ERR_DEVICE, on every rank when
 * rank 0 cannot create the id), another device than the first call's
 * (TFC_ERR_UNSUPPORTED: one device per process).
 */
tfc_status tfc_comm_nccl(const char *fn, tfc_comm *c, int32_t device, const tfc_backend **be, void **nccl);
/* Free c's NCCL communicator (comm.c's release). */
void tfc_comm_nccl_release(tfc_comm *c);

/* Seconds on the monotonic clock. */
double tfc_comm_now(void);

#endif
