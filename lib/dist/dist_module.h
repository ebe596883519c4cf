/*
 * The table the MPI module libtfcore-mpi.so (mpi/module.c) hands to
 * lib/dist: MPI's collectives on raw host buffers. The module exports one
 * symbol, tfc_dist_module_get(abi); a module of another TFC_DIST_MODULE_ABI
 * is refused. lib/dist does every check, staging and averaging; the module
 * only moves bytes and turns MPI errors into messages.
 *
 * Buffers are host memory of dtype dt (TFC_DTYPE_F32, F64, I32, I64; bf16
 * is widened to f32 by lib/dist). Counts are elements; any count above
 * INT32_MAX is split by the module where MPI allows (all-reduce,
 * broadcast) and refused elsewhere. Every function returns 0 or -1 with a
 * message in err (cap bytes).
 */
#ifndef TFC_DIST_MODULE_H
#define TFC_DIST_MODULE_H

#include <stddef.h>
#include <stdint.h>

#define TFC_DIST_MODULE_ABI 1

typedef struct tfc_dist_module {
    int32_t abi_version;
    size_t struct_size;
    /* "Open MPI v4.1.4, ..." (MPI_Get_library_version, first line) */
    const char *(*version)(void);
    /*
     * Start MPI if the program has not (MPI_THREAD_MULTIPLE) and return a
     * duplicate of MPI_COMM_WORLD with MPI_ERRORS_RETURN as *comm.
     */
    int (*init)(void **comm, int32_t *rank, int32_t *size, char *err, size_t cap);
    /* Free comm; the last one finalizes MPI when init started it. */
    void (*release)(void *comm);
    /* buf = sum over ranks of buf, in place. */
    int (*allreduce_sum)(void *comm, void *buf, int64_t count, int32_t dt, char *err, size_t cap);
    int (*bcast)(void *comm, void *buf, int64_t count, int32_t dt, int32_t root, char *err, size_t cap);
    /* recv = every rank's send (counts[r] elements from rank r) end to end; send NULL: this rank's share is in recv already. */
    int (*allgatherv)(void *comm, const void *send, void *recv, const int64_t *counts, int32_t dt, char *err,
                      size_t cap);
    /* Sum send (sum of counts elements) over ranks; rank r gets its counts[r] elements in recv. */
    int (*reduce_scatterv_sum)(void *comm, const void *send, void *recv, const int64_t *counts, int32_t dt, char *err,
                               size_t cap);
    /* root gets every rank's send end to end in recv (ignored elsewhere). */
    int (*gatherv)(void *comm, const void *send, void *recv, const int64_t *counts, int32_t dt, int32_t root, char *err,
                   size_t cap);
    /* max over ranks of n int64 values, in place (the agreement checks). */
    int (*allreduce_max_i64)(void *comm, int64_t *vals, int32_t n, char *err, size_t cap);
    int (*barrier)(void *comm, char *err, size_t cap);
    /* MPI_Abort(comm, code): ends every rank. */
    void (*abort)(void *comm, int32_t code);
} tfc_dist_module;

typedef const tfc_dist_module *(*tfc_dist_module_get_fn)(int32_t abi);

#endif
