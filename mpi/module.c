/*
 * The MPI module libtfcore-mpi.so: MPI's collectives behind the table of
 * lib/dist/dist_module.h. It is the only code of the project that links
 * libmpi, so libtfcore.so and one-process programs never need MPI.
 *
 * Every communicator is a duplicate of MPI_COMM_WORLD with
 * MPI_ERRORS_RETURN, so an MPI failure comes back as a message instead of
 * MPI's default of aborting the job inside the call.
 */
#include <limits.h>
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/dist_module.h"
#include "tfcore/core.h"

#define EXPORT __attribute__((visibility("default")))

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_live;          /* communicators handed out and not released */
static int g_we_started;    /* this module called MPI_Init_thread */
static char g_version[256]; /* first line of MPI_Get_library_version */

static MPI_Datatype mpi_type(int32_t dt) {
    switch (dt) {
    case TFC_DTYPE_F32: return MPI_FLOAT;
    case TFC_DTYPE_F64: return MPI_DOUBLE;
    case TFC_DTYPE_I32: return MPI_INT32_T;
    case TFC_DTYPE_I64: return MPI_INT64_T;
    default: return MPI_DATATYPE_NULL;
    }
}

static size_t type_size(int32_t dt) { return dt == TFC_DTYPE_F64 || dt == TFC_DTYPE_I64 ? 8 : 4; }

/* MPI's message for rc into err, prefixed by what failed. */
static int fail(int rc, const char *what, char *err, size_t cap) {
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "MPI error %d", rc);
    snprintf(err, cap, "%s failed: %s", what, msg);
    return -1;
}

static int check_type(int32_t dt, char *err, size_t cap) {
    if (mpi_type(dt) != MPI_DATATYPE_NULL) return 0;
    snprintf(err, cap, "the MPI module has no type for dtype %d", (int)dt);
    return -1;
}

static const char *version(void) {
    if (!g_version[0]) {
        char v[MPI_MAX_LIBRARY_VERSION_STRING] = "";
        int len = 0;
        if (MPI_Get_library_version(v, &len) == MPI_SUCCESS) {
            v[strcspn(v, "\n,")] = 0;
            snprintf(g_version, sizeof g_version, "%s", v);
        } else {
            snprintf(g_version, sizeof g_version, "MPI");
        }
    }
    return g_version;
}

static int init(void **comm, int32_t *rank, int32_t *size, char *err, size_t cap) {
    pthread_mutex_lock(&g_lock);
    int inited = 0, finalized = 0, rc = MPI_SUCCESS;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (finalized) {
        pthread_mutex_unlock(&g_lock);
        snprintf(err, cap, "MPI was already finalized in this process and cannot start again");
        return -1;
    }
    if (!inited) {
        int provided = 0;
        rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);
        if (rc != MPI_SUCCESS) {
            pthread_mutex_unlock(&g_lock);
            snprintf(err, cap, "MPI_Init_thread failed (error %d)", rc);
            return -1;
        }
        g_we_started = 1;
        /* Errors on the world communicator also return, e.g. in MPI_Comm_dup itself. */
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    }
    MPI_Comm *c = malloc(sizeof *c);
    if (!c) {
        pthread_mutex_unlock(&g_lock);
        snprintf(err, cap, "out of memory");
        return -1;
    }
    rc = MPI_Comm_dup(MPI_COMM_WORLD, c);
    if (rc != MPI_SUCCESS) {
        free(c);
        pthread_mutex_unlock(&g_lock);
        return fail(rc, "MPI_Comm_dup", err, cap);
    }
    MPI_Comm_set_errhandler(*c, MPI_ERRORS_RETURN);
    int r = 0, n = 1;
    MPI_Comm_rank(*c, &r);
    MPI_Comm_size(*c, &n);
    *rank = r;
    *size = n;
    *comm = c;
    g_live++;
    version();
    pthread_mutex_unlock(&g_lock);
    return 0;
}

static void release(void *comm) {
    if (!comm) return;
    pthread_mutex_lock(&g_lock);
    MPI_Comm *c = comm;
    MPI_Comm_free(c);
    free(c);
    if (--g_live == 0 && g_we_started) {
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (!finalized) MPI_Finalize();
        g_we_started = 0;
    }
    pthread_mutex_unlock(&g_lock);
}

static int allreduce_sum(void *comm, void *buf, int64_t count, int32_t dt, char *err, size_t cap) {
    if (check_type(dt, err, cap)) return -1;
    char *p = buf;
    for (int64_t done = 0; done < count;) {
        int n = count - done > INT_MAX ? INT_MAX : (int)(count - done);
        int rc = MPI_Allreduce(MPI_IN_PLACE, p + (size_t)done * type_size(dt), n, mpi_type(dt), MPI_SUM,
                               *(MPI_Comm *)comm);
        if (rc != MPI_SUCCESS) return fail(rc, "MPI_Allreduce", err, cap);
        done += n;
    }
    return 0;
}

static int bcast(void *comm, void *buf, int64_t count, int32_t dt, int32_t root, char *err, size_t cap) {
    if (check_type(dt, err, cap)) return -1;
    char *p = buf;
    for (int64_t done = 0; done < count;) {
        int n = count - done > INT_MAX ? INT_MAX : (int)(count - done);
        int rc = MPI_Bcast(p + (size_t)done * type_size(dt), n, mpi_type(dt), root, *(MPI_Comm *)comm);
        if (rc != MPI_SUCCESS) return fail(rc, "MPI_Bcast", err, cap);
        done += n;
    }
    return 0;
}

/* counts[] as MPI's int counts and displacements; -1 when a count or the total passes INT_MAX. */
static int int_layout(MPI_Comm c, const int64_t *counts, int **cnt, int **dsp, int *equal, char *err, size_t cap) {
    int n = 1;
    MPI_Comm_size(c, &n);
    *cnt = malloc(sizeof **cnt * (size_t)n);
    *dsp = malloc(sizeof **dsp * (size_t)n);
    if (!*cnt || !*dsp) {
        free(*cnt);
        free(*dsp);
        snprintf(err, cap, "out of memory");
        return -1;
    }
    int64_t off = 0;
    *equal = 1;
    for (int r = 0; r < n; r++) {
        if (counts[r] > INT_MAX || off > INT_MAX) {
            free(*cnt);
            free(*dsp);
            snprintf(err, cap, "%lld elements in all: MPI's counts and displacements are int, so at most %d",
                     (long long)(off + counts[r]), INT_MAX);
            return -1;
        }
        (*cnt)[r] = (int)counts[r];
        (*dsp)[r] = (int)off;
        off += counts[r];
        if (counts[r] != counts[0]) *equal = 0;
    }
    return 0;
}

static int allgatherv(void *comm, const void *send, void *recv, const int64_t *counts, int32_t dt, char *err,
                      size_t cap) {
    if (check_type(dt, err, cap)) return -1;
    MPI_Comm c = *(MPI_Comm *)comm;
    int *cnt, *dsp, equal, rank = 0;
    if (int_layout(c, counts, &cnt, &dsp, &equal, err, cap)) return -1;
    MPI_Comm_rank(c, &rank);
    /* Equal shares take MPI_Allgather, whose algorithms are tuned for that case. */
    const void *s = send ? send : MPI_IN_PLACE;
    int rc = equal ? MPI_Allgather(s, cnt[rank], mpi_type(dt), recv, cnt[0], mpi_type(dt), c)
                   : MPI_Allgatherv(s, cnt[rank], mpi_type(dt), recv, cnt, dsp, mpi_type(dt), c);
    free(cnt);
    free(dsp);
    return rc == MPI_SUCCESS ? 0 : fail(rc, equal ? "MPI_Allgather" : "MPI_Allgatherv", err, cap);
}

static int reduce_scatterv_sum(void *comm, const void *send, void *recv, const int64_t *counts, int32_t dt,
                               char *err, size_t cap) {
    if (check_type(dt, err, cap)) return -1;
    MPI_Comm c = *(MPI_Comm *)comm;
    int *cnt, *dsp, equal;
    if (int_layout(c, counts, &cnt, &dsp, &equal, err, cap)) return -1;
    int rc = equal ? MPI_Reduce_scatter_block(send, recv, cnt[0], mpi_type(dt), MPI_SUM, c)
                   : MPI_Reduce_scatter(send, recv, cnt, mpi_type(dt), MPI_SUM, c);
    free(cnt);
    free(dsp);
    return rc == MPI_SUCCESS ? 0 : fail(rc, equal ? "MPI_Reduce_scatter_block" : "MPI_Reduce_scatter", err, cap);
}

static int gatherv(void *comm, const void *send, void *recv, const int64_t *counts, int32_t dt, int32_t root,
                   char *err, size_t cap) {
    if (check_type(dt, err, cap)) return -1;
    MPI_Comm c = *(MPI_Comm *)comm;
    int *cnt, *dsp, equal, rank = 0;
    if (int_layout(c, counts, &cnt, &dsp, &equal, err, cap)) return -1;
    MPI_Comm_rank(c, &rank);
    int rc = MPI_Gatherv(send, cnt[rank], mpi_type(dt), recv, cnt, dsp, mpi_type(dt), root, c);
    free(cnt);
    free(dsp);
    return rc == MPI_SUCCESS ? 0 : fail(rc, "MPI_Gatherv", err, cap);
}

static int allreduce_max_i64(void *comm, int64_t *vals, int32_t n, char *err, size_t cap) {
    int rc = MPI_Allreduce(MPI_IN_PLACE, vals, n, MPI_INT64_T, MPI_MAX, *(MPI_Comm *)comm);
    return rc == MPI_SUCCESS ? 0 : fail(rc, "MPI_Allreduce (agreement check)", err, cap);
}

static int barrier(void *comm, char *err, size_t cap) {
    int rc = MPI_Barrier(*(MPI_Comm *)comm);
    return rc == MPI_SUCCESS ? 0 : fail(rc, "MPI_Barrier", err, cap);
}

static void abort_job(void *comm, int32_t code) {
    MPI_Abort(comm ? *(MPI_Comm *)comm : MPI_COMM_WORLD, code);
    /* MPI_Abort should not return; if it does, the job must still end. */
    _Exit(code ? code : 1);
}

static const tfc_dist_module g_module = {
    .abi_version = TFC_DIST_MODULE_ABI,
    .struct_size = sizeof(tfc_dist_module),
    .version = version,
    .init = init,
    .release = release,
    .allreduce_sum = allreduce_sum,
    .bcast = bcast,
    .allgatherv = allgatherv,
    .reduce_scatterv_sum = reduce_scatterv_sum,
    .gatherv = gatherv,
    .allreduce_max_i64 = allreduce_max_i64,
    .barrier = barrier,
    .abort = abort_job,
};

EXPORT const tfc_dist_module *tfc_dist_module_get(int32_t abi) {
    return abi == TFC_DIST_MODULE_ABI ? &g_module : NULL;
}
