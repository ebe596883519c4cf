/*
 * tfcore/dist.h — processes working together: a communicator, collectives
 * on tensors, data-parallel gradient averaging (DDP) and a sharded
 * optimizer (ZeRO stage 1).
 *
 * A program written for N ranks runs unchanged on 1:
 *
 *   tfc_comm *c;
 *   tfc_comm_init(&c);                      // mpirun's ranks, or just this process
 *   tfc_ddp *d;
 *   tfc_ddp_new(c, params, n, 0, &d);       // params broadcast from rank 0
 *   tfc_ddp_attach(d, graph);               // buckets reduce during backward
 *   for (...) {
 *       forward on this rank's rows; tfc_graph_backward(graph, loss, NULL);
 *       tfc_ddp_finish(d);                  // every .grad is now the average over ranks
 *       tfc_optim_clip_grad_norm(opt, 1.0, &norm); tfc_optim_step(opt); ...
 *   }
 *   tfc_ddp_release(d);
 *   tfc_comm_release(c);                    // the last one finalizes MPI if libtfcore started it
 *
 * Launched by `mpirun -np N prog`, tfc_comm_init joins MPI_COMM_WORLD
 * through the MPI module libtfcore-mpi.so, loaded with dlopen on first use
 * (libtfcore.so itself never links MPI). Launched plainly, it returns a
 * one-rank communicator and every collective is a local copy.
 *
 * Collectives are blocking and collective: every rank of the communicator
 * calls them in the same order with tensors of the same dtype and shape.
 * Each first checks its own arguments, then checks with the other ranks
 * that the calls agree (collective, dtype, element count, root) and that no
 * rank refused its arguments: a disagreement is TFC_ERR_INVALID_ARG (another
 * collective), TFC_ERR_DTYPE or TFC_ERR_SHAPE on EVERY rank, naming the
 * range seen across ranks; a rank that refused its arguments keeps its own
 * error and the others get TFC_ERR_INVALID_ARG naming that rank — never a
 * hang or a wrong result. CPU tensors of f32, f64, bf16
 * (summed in f32), f16, i32 and i64 travel through MPI, contiguous or not
 * (views are staged through a contiguous copy). CUDA tensors of the same
 * dtypes travel through NCCL (the CUDA module opens libnccl.so.2 on first
 * use; a communicator per process and GPU, made from an id rank 0 creates
 * and broadcasts over MPI); without NCCL they get TFC_ERR_UNSUPPORTED.
 * Every rank passes a tensor on the same kind of device (TFC_ERR_DEVICE).
 *
 * Failure: MPI errors come back as statuses (MPI_ERRORS_RETURN). A rank
 * that dies makes mpirun end the job and name it ("mpirun noticed that
 * process rank R ... exited on signal 9"). Independently, a collective that
 * has waited for its peers longer than the communicator's timeout
 * (TFCORE_DIST_TIMEOUT seconds, default 600, or tfc_comm_set_timeout) ends
 * the job: the waiting rank prints which collective on which rank timed
 * out and calls MPI_Abort, so no rank hangs forever. docs/DISTRIBUTED.md.
 *
 * Thread-safety: a communicator is used by one thread at a time (a tfc_ddp
 * attached to it runs its reductions on a thread of its own: do not call
 * collectives on the same communicator between tfc_ddp_attach'ed backward
 * and tfc_ddp_finish).
 */
#ifndef TFCORE_DIST_H
#define TFCORE_DIST_H

#include "tfcore/core.h"
#include "tfcore/graph.h"
#include "tfcore/optim.h"
#include "tfcore/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tfc_comm tfc_comm;

typedef enum tfc_comm_op {
    TFC_COMM_SUM = 0,
    TFC_COMM_AVG = 1 /* the sum times 1/N */
} tfc_comm_op;

/*
 * A communicator over every process of the job: under an MPI launcher
 * (OMPI_COMM_WORLD_SIZE, PMIX_RANK or PMI_RANK set) all of mpirun's ranks
 * (MPI is initialised with MPI_THREAD_MULTIPLE unless the program already
 * did); otherwise this process alone (rank 0 of 1). Collective under MPI:
 * every rank calls it. Release with tfc_comm_release.
 * Errors: under a launcher without the MPI module (TFC_ERR_UNSUPPORTED
 * naming the module and the packages to install), MPI failing to start
 * (TFC_ERR_DEVICE with MPI's message), MPI already finalized
 * (TFC_ERR_UNSUPPORTED), TFC_ERR_OOM.
 */
TFC_API TFC_NODISCARD tfc_status tfc_comm_init(tfc_comm **out);
/*
 * A one-rank communicator whatever the environment (a process of an MPI
 * job that wants to work alone, tests). Errors: TFC_ERR_OOM.
 */
TFC_API TFC_NODISCARD tfc_status tfc_comm_init_single(tfc_comm **out);
/*
 * Drop the caller's reference. When the last communicator of the MPI
 * module goes and libtfcore initialised MPI, MPI is finalized; a later
 * tfc_comm_init in this process then fails (MPI cannot start twice). NULL ok.
 */
TFC_API void tfc_comm_release(tfc_comm *c /* nullable */);
/* This process's rank in c, 0-based; 0 for NULL. */
TFC_API int32_t tfc_comm_rank(const tfc_comm *c /* nullable: 0 */);
/* Number of ranks in c; 0 for NULL. */
TFC_API int32_t tfc_comm_size(const tfc_comm *c /* nullable: 0 */);
/*
 * What carries c's collectives: "single" (one rank, no MPI), or the MPI
 * library's name and version, e.g. "Open MPI v4.1.4". Static string; ""
 * for NULL.
 */
TFC_API const char *tfc_comm_backend(const tfc_comm *c /* nullable: "" */);
/*
 * A collective that waits longer than seconds (> 0) for its peers ends the
 * job (see above). Local to this rank; set it on every rank. Default:
 * $TFCORE_DIST_TIMEOUT, else 600. Errors: seconds not finite and > 0
 * (TFC_ERR_INVALID_ARG).
 */
TFC_API TFC_NODISCARD tfc_status tfc_comm_set_timeout(tfc_comm *c, double seconds);
/*
 * End the whole job now with exit status code (MPI_Abort): what a rank does
 * on an error the others cannot learn of, so they do not wait for it until
 * the timeout. On a one-rank communicator the process exits with code.
 * Does not return.
 */
TFC_API void tfc_comm_abort(tfc_comm *c /* nullable */, int32_t code);

/* Wait until every rank has called it. */
TFC_API TFC_NODISCARD tfc_status tfc_barrier(tfc_comm *c);
/* t (in place) becomes the sum, or average, of t over all ranks. */
TFC_API TFC_NODISCARD tfc_status tfc_all_reduce(tfc_comm *c, tfc_tensor *t, tfc_comm_op op);
/* t (in place) becomes root's t on every rank. Errors: root out of [0, size) (TFC_ERR_INVALID_ARG). */
TFC_API TFC_NODISCARD tfc_status tfc_broadcast(tfc_comm *c, tfc_tensor *t, int32_t root);
/*
 * out = the ranks' in laid end to end along dim 0, rank 0 first:
 * in [d0, d1, ...] gives out [N*d0, d1, ...] (a 0-d in gives out [N]).
 * in and out must not overlap. Errors: shapes (TFC_ERR_SHAPE naming both),
 * dtypes differing (TFC_ERR_DTYPE).
 */
TFC_API TFC_NODISCARD tfc_status tfc_all_gather(tfc_comm *c, const tfc_tensor *in, tfc_tensor *out);
/*
 * The reverse: in [N*d0, d1, ...] is summed (or averaged) over ranks and
 * rank r keeps rows [r*d0, (r+1)*d0) in out [d0, d1, ...]. in and out must
 * not overlap. Errors as tfc_all_gather.
 */
TFC_API TFC_NODISCARD tfc_status tfc_reduce_scatter(tfc_comm *c, const tfc_tensor *in, tfc_tensor *out, tfc_comm_op op);

/* ---- data parallelism: gradients averaged in buckets during backward ---- */

typedef struct tfc_ddp tfc_ddp;

/* What a tfc_ddp measured since it was made (or last reset). */
typedef struct tfc_ddp_stats {
    int32_t struct_size; /* set to sizeof(tfc_ddp_stats) before the call */
    int64_t syncs;       /* tfc_ddp_finish calls that averaged gradients */
    int64_t buckets;     /* bucket reductions run */
    int64_t bytes;       /* bytes all-reduced (per rank) */
    double comm_s;       /* seconds the reductions took */
    double exposed_s;    /* seconds tfc_ddp_finish waited for them: comm_s - exposed_s was hidden behind backward */
} tfc_ddp_stats;

/*
 * Average the gradients of n parameters (leaf tensors that require grad,
 * CPU, f32 or f64; CUDA parameters are not supported yet) over c's ranks. Parameters are grouped into buckets of
 * about bucket_bytes (0: 25 MiB), last parameter first (roughly the order
 * backward finishes them). Collective: every rank passes the same shapes in
 * the same order; then rank 0's values are broadcast into every rank's
 * parameters, so all start equal. c is retained.
 * Errors: mismatched parameter lists across ranks (TFC_ERR_SHAPE naming the
 * parameter), a parameter that does not require grad, is not contiguous,
 * is over read-only memory (the broadcast writes it), on CUDA, or not
 * f32/f64 (TFC_ERR_INVALID_ARG / TFC_ERR_UNSUPPORTED / TFC_ERR_DTYPE),
 * bucket_bytes < 0, TFC_ERR_OOM.
 */
TFC_API TFC_NODISCARD tfc_status tfc_ddp_new(tfc_comm *c, tfc_tensor *const *params /* nullable when n == 0 */,
                                             int32_t n, int64_t bucket_bytes, tfc_ddp **out);
/*
 * Start each bucket's reduction during tfc_graph_backward on g as soon as
 * every gradient in it is final (tfc_graph_set_grad_hook), on a thread of
 * the tfc_ddp, so communication overlaps the rest of backward. Replaces g's
 * grad hook; detach by setting g's hook to NULL. Without attach,
 * tfc_ddp_finish reduces everything after backward (no overlap). With sync
 * on, run one backward between finishes: a bucket is packed when its
 * gradients are final, so what a second backward adds to them is not
 * averaged (accumulate with tfc_ddp_set_sync(d, 0) instead).
 */
TFC_API TFC_NODISCARD tfc_status tfc_ddp_attach(tfc_ddp *d, tfc_graph *g);
/*
 * on = 0: backward passes only accumulate (gradient accumulation,
 * PyTorch's no_sync()) and tfc_ddp_finish does nothing; on = 1 (default):
 * the next backward and finish average. Set it before the micro-step's
 * backward.
 */
TFC_API TFC_NODISCARD tfc_status tfc_ddp_set_sync(tfc_ddp *d, int32_t on);
/*
 * After backward: reduce the buckets not yet started (a parameter that got
 * no gradient contributes zeros), wait for all, and replace every
 * parameter's .grad with the average over ranks: written into the .grad
 * when nothing else holds its memory and it is writable, else into a new
 * tensor (a .grad over read-only memory is never written). Collective. Errors: a
 * reduction's MPI error (TFC_ERR_DEVICE), TFC_ERR_OOM; the gradients are
 * then unspecified.
 */
TFC_API TFC_NODISCARD tfc_status tfc_ddp_finish(tfc_ddp *d);
/* Copy d's counters into *st (st->struct_size set by the caller). */
TFC_API TFC_NODISCARD tfc_status tfc_ddp_get_stats(const tfc_ddp *d, tfc_ddp_stats *st);
/* Release d (waits for its thread) and its reference to the communicator. NULL ok. */
TFC_API void tfc_ddp_release(tfc_ddp *d /* nullable */);

/* ---- ZeRO stage 1: the optimizer's state sharded across ranks ---- */

/*
 * Shard opt over c's ranks (ZeRO stage 1). The parameters, in opt's order
 * (tfc_optim_param), are laid end to end as one vector of T elements; rank
 * r keeps the optimizer state of elements [r*T/N, (r+1)*T/N) only and
 * frees the rest, so the state memory per rank is about 1/N. From then on:
 * - tfc_optim_clip_grad_norm reduce-scatters the gradients (average over
 *   ranks) and clips with the true global norm;
 * - tfc_optim_step reduce-scatters them (unless clipping just did), updates
 *   this rank's slice, and all-gathers the parameters, so every rank ends
 *   the step with the same full parameters.
 * Pass each rank's own, un-averaged gradients (no tfc_ddp). Both calls are
 * collective. State already in opt (a resumed run's) is kept for this
 * rank's slice. Collective. c is retained.
 * Errors: already sharded, parameters of mixed dtypes or not all on the
 * CPU (TFC_ERR_UNSUPPORTED), a parameter over read-only memory (every step
 * writes every parameter: TFC_ERR_INVALID_ARG naming it, on every rank),
 * differing parameter lists across ranks (TFC_ERR_SHAPE), TFC_ERR_OOM.
 */
TFC_API TFC_NODISCARD tfc_status tfc_optim_shard(tfc_optim *opt, tfc_comm *c);
/* 1 when opt is sharded (tfc_optim_shard), else 0. */
TFC_API int32_t tfc_optim_is_sharded(const tfc_optim *opt /* nullable: 0 */);
/*
 * The whole state of a sharded optimizer gathered on root: *out is a new,
 * unsharded optimizer over the same parameters and groups holding every
 * parameter's state, as one process would have it (save it like any
 * optimizer); NULL on the other ranks. Collective. Errors: opt not sharded
 * (TFC_ERR_INVALID_ARG), root out of range, TFC_ERR_OOM.
 */
TFC_API TFC_NODISCARD tfc_status tfc_optim_gather(const tfc_optim *opt, int32_t root, tfc_optim **out);

#ifdef __cplusplus
}
#endif

#endif
