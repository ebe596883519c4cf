/*
 * Communicators: one rank alone, or mpirun's ranks through the MPI module
 * libtfcore-mpi.so (dlopen'ed on first use, as lib/device does the CUDA
 * module), the agreement check every collective starts with, and the
 * watchdog that turns a collective stuck on a lost peer into the end of
 * the job instead of a silent hang.
 */
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/dtype.h"
#include "core/error.h"
#include "dist/comm_impl.h"
#include "tfc_config.h"

#define DEFAULT_TIMEOUT_S 600.0

double tfc_comm_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ---- the MPI module ------------------------------------------------------ */

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static const tfc_dist_module *g_mpi;
static char g_why[600];

static void load_module(void) {
#if !TFC_HAVE_MPI_MODULE
    snprintf(g_why, sizeof g_why,
             "this libtfcore was built without the MPI module %s (no MPI C library at configure time, or "
             "-Dmpi=disabled): install OpenMPI (Debian: apt-get install openmpi-bin libopenmpi-dev) and rebuild",
             "libtfcore-mpi.so");
#else
    char path[4096] = TFC_MPI_MODULE_NAME;
    Dl_info info;
    if (dladdr((void *)&load_module, &info) && info.dli_fname) {
        const char *slash = strrchr(info.dli_fname, '/');
        if (slash && (size_t)(slash - info.dli_fname) + 1 + sizeof TFC_MPI_MODULE_NAME < sizeof path)
            snprintf(path, sizeof path, "%.*s/%s", (int)(slash - info.dli_fname), info.dli_fname, TFC_MPI_MODULE_NAME);
    }
    /* RTLD_GLOBAL: Open MPI loads its own plugins, which need libmpi's symbols. */
    void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (!h) h = dlopen(TFC_MPI_MODULE_NAME, RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
        snprintf(g_why, sizeof g_why,
                 "cannot load the MPI module %s: %s (install OpenMPI: apt-get install openmpi-bin libopenmpi-dev)",
                 TFC_MPI_MODULE_NAME, dlerror());
        return;
    }
    tfc_dist_module_get_fn get = (tfc_dist_module_get_fn)dlsym(h, "tfc_dist_module_get");
    const tfc_dist_module *m = get ? get(TFC_DIST_MODULE_ABI) : NULL;
    if (!m || m->abi_version != TFC_DIST_MODULE_ABI || m->struct_size < sizeof(tfc_dist_module)) {
        snprintf(g_why, sizeof g_why, "the MPI module %s does not offer module ABI version %d", path,
                 TFC_DIST_MODULE_ABI);
        return;
    }
    g_mpi = m;
#endif
}

/* The environment variable by which an MPI launcher announces this process, or NULL when launched plainly. */
static const char *launcher_var(const char **value) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) {
            *value = v;
            return vars[i];
        }
    }
    return NULL;
}

/* ---- the watchdog -------------------------------------------------------- */

static void *watchdog(void *arg) {
    tfc_comm *c = arg;
    pthread_mutex_lock(&c->mu);
    while (!c->wd_stop) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 250 * 1000 * 1000;
        if (until.tv_nsec >= 1000000000) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&c->cv, &c->mu, &until);
        if (c->wd_stop || c->busy_since == 0) continue;
        double waited = tfc_comm_now() - c->busy_since;
        if (waited > c->timeout_s) {
            fprintf(stderr,
                    "tfcore: rank %d of %d: %s has waited %.1f s for the other ranks (timeout %g s, "
                    "TFCORE_DIST_TIMEOUT): a rank has died or stopped calling collectives; ending the job\n",
                    c->rank, c->size, c->busy_what ? c->busy_what : "a collective", waited, c->timeout_s);
            fflush(stderr);
            c->m->abort(c->mc, 1);
        }
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

void tfc_comm_busy(tfc_comm *c, const char *what) {
    pthread_mutex_lock(&c->mu);
    c->busy_what = what;
    c->busy_since = tfc_comm_now();
    pthread_mutex_unlock(&c->mu);
}

void tfc_comm_idle(tfc_comm *c) {
    pthread_mutex_lock(&c->mu);
    c->busy_since = 0;
    pthread_mutex_unlock(&c->mu);
}

/* ---- life cycle ---------------------------------------------------------- */

static tfc_status timeout_from_env(const char *fn, double *out) {
    const char *v = getenv("TFCORE_DIST_TIMEOUT");
    *out = DEFAULT_TIMEOUT_S;
    if (!v || !*v) return TFC_OK;
    char *end = NULL;
    errno = 0;
    double t = strtod(v, &end);
    if (errno || end == v || *end || !isfinite(t) || t <= 0)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: TFCORE_DIST_TIMEOUT='%s' is not a number of seconds > 0", fn, v);
    *out = t;
    return TFC_OK;
}

static tfc_status comm_alloc(const char *fn, tfc_comm **out) {
    tfc_comm *c = calloc(1, sizeof *c);
    if (!c) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    atomic_init(&c->refcount, 1);
    c->rank = 0;
    c->size = 1;
    c->timeout_s = DEFAULT_TIMEOUT_S;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    *out = c;
    return TFC_OK;
}

TFC_API tfc_status tfc_comm_init_single(tfc_comm **out) {
    const char *fn = "tfc_comm_init_single";
    TFC_CHECK_NOT_NULL(fn, out);
    return comm_alloc(fn, out);
}

TFC_API tfc_status tfc_comm_init(tfc_comm **out) {
    const char *fn = "tfc_comm_init";
    TFC_CHECK_NOT_NULL(fn, out);
    double timeout;
    TFC_TRY(timeout_from_env(fn, &timeout));
    const char *value = NULL, *var = launcher_var(&value);
    if (!var) {
        TFC_TRY(comm_alloc(fn, out));
        (*out)->timeout_s = timeout;
        return TFC_OK;
    }
    pthread_once(&g_once, load_module);
    if (!g_mpi)
        return tfc_err(TFC_ERR_UNSUPPORTED, "%s: launched by an MPI launcher (%s=%s) but %s", fn, var, value, g_why);
    tfc_comm *c;
    TFC_TRY(comm_alloc(fn, &c));
    char err[512] = "";
    if (g_mpi->init(&c->mc, &c->rank, &c->size, err, sizeof err) != 0) {
        tfc_comm_release(c);
        return tfc_err(TFC_ERR_UNSUPPORTED, "%s: %s", fn, err);
    }
    c->m = g_mpi;
    c->timeout_s = timeout;
    if (c->size > 1) {
        if (pthread_create(&c->wd, NULL, watchdog, c) != 0) {
            tfc_comm_release(c);
            return tfc_err(TFC_ERR_OOM, "%s: cannot start the watchdog thread", fn);
        }
        c->wd_started = 1;
    }
    *out = c;
    return TFC_OK;
}

tfc_comm *tfc_comm_retain(tfc_comm *c) {
    if (c) atomic_fetch_add(&c->refcount, 1);
    return c;
}

TFC_API void tfc_comm_release(tfc_comm *c) {
    if (!c || atomic_fetch_sub(&c->refcount, 1) != 1) return;
    if (c->wd_started) {
        pthread_mutex_lock(&c->mu);
        c->wd_stop = 1;
        pthread_cond_signal(&c->cv);
        pthread_mutex_unlock(&c->mu);
        pthread_join(c->wd, NULL);
    }
    tfc_comm_nccl_release(c);
    if (c->m && c->mc) c->m->release(c->mc);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

TFC_API int32_t tfc_comm_rank(const tfc_comm *c) { return c ? c->rank : 0; }
TFC_API int32_t tfc_comm_size(const tfc_comm *c) { return c ? c->size : 0; }
TFC_API const char *tfc_comm_backend(const tfc_comm *c) {
    if (!c) return "";
    return c->m ? c->m->version() : "single";
}

TFC_API tfc_status tfc_comm_set_timeout(tfc_comm *c, double seconds) {
    const char *fn = "tfc_comm_set_timeout";
    TFC_CHECK_NOT_NULL(fn, c);
    if (!isfinite(seconds) || seconds <= 0)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: seconds is %g; it must be finite and > 0", fn, seconds);
    pthread_mutex_lock(&c->mu);
    c->timeout_s = seconds;
    pthread_mutex_unlock(&c->mu);
    return TFC_OK;
}

TFC_API void tfc_comm_abort(tfc_comm *c, int32_t code) {
    fflush(stdout);
    fflush(stderr);
    if (c && c->m) c->m->abort(c->mc, code);
    _Exit(code);
}

void tfc_comm_share(int64_t n, int32_t size, int32_t r, int64_t *lo, int64_t *hi) {
    int64_t base = n / size, extra = n % size;
    *lo = (int64_t)r * base + (r < extra ? r : extra);
    *hi = *lo + base + (r < extra ? 1 : 0);
}

/* ---- raw collectives ----------------------------------------------------- */

static tfc_status mpi_failed(const char *fn, const tfc_comm *c, const char *err) {
    return tfc_err(TFC_ERR_DEVICE, "%s: rank %d of %d: %s", fn, c->rank, c->size, err);
}

/* Run a module call with the watchdog armed; fn names the public caller. */
#define RUN_COLLECTIVE(what, call)                    \
    do {                                              \
        char err_[512] = "";                          \
        tfc_comm_busy(c, what);                       \
        int rc_ = (call);                             \
        tfc_comm_idle(c);                             \
        if (rc_ != 0) return mpi_failed(fn, c, err_); \
    } while (0)
#define ERR err_, sizeof err_

tfc_status tfc_comm_check(const char *fn, tfc_comm *c, tfc_status local, const int64_t *vals, const tfc_status *codes,
                          const char *const *names, int32_t n) {
    if (!c->m || c->size == 1) return local;
    enum { MAX_VALS = 8 };
    if (n > MAX_VALS) return tfc_err(TFC_ERR_INTERNAL, "%s: agreement check of %d values", fn, n);
    /* max over ranks of (v, -v, the refusing rank): -max(-v) is min(v) */
    int64_t mm[2 * MAX_VALS + 1];
    for (int32_t i = 0; i < n; i++) {
        int64_t v = local == TFC_OK ? vals[i] : 0; /* a refusing rank's values may be unset */
        mm[i] = v;
        mm[n + i] = v == INT64_MIN ? INT64_MAX : -v;
    }
    mm[2 * n] = local == TFC_OK ? -1 : c->rank;
    char saved[1024] = "";
    if (local != TFC_OK) snprintf(saved, sizeof saved, "%s", tfc_last_error());
    RUN_COLLECTIVE(fn, c->m->allreduce_max_i64(c->mc, mm, 2 * n + 1, ERR));
    if (local != TFC_OK) return tfc_err(local, "%s", saved);
    if (mm[2 * n] >= 0)
        return tfc_err(TFC_ERR_INVALID_ARG,
                       "%s: rank %lld refused its arguments (its own error says why), so no rank ran the collective",
                       fn, (long long)mm[2 * n]);
    for (int32_t i = 0; i < n; i++)
        if (mm[i] != -mm[n + i])
            return tfc_err(codes[i],
                           "%s: the ranks disagree on %s: it ranges from %lld to %lld across the %d ranks (rank %d has "
                           "%lld)",
                           fn, names[i], (long long)-mm[n + i], (long long)mm[i], c->size, c->rank, (long long)vals[i]);
    return TFC_OK;
}

tfc_status tfc_comm_sum_raw(const char *fn, tfc_comm *c, void *buf, int64_t count, tfc_dtype dt) {
    if (!c->m || count == 0) return TFC_OK;
    RUN_COLLECTIVE("all-reduce", c->m->allreduce_sum(c->mc, buf, count, dt, ERR));
    return TFC_OK;
}

tfc_status tfc_comm_bcast_raw(const char *fn, tfc_comm *c, void *buf, int64_t count, tfc_dtype dt, int32_t root) {
    if (!c->m || count == 0) return TFC_OK;
    RUN_COLLECTIVE("broadcast", c->m->bcast(c->mc, buf, count, dt, root, ERR));
    return TFC_OK;
}

tfc_status tfc_comm_allgatherv_raw(const char *fn, tfc_comm *c, const void *send, void *recv, const int64_t *counts,
                                   tfc_dtype dt) {
    if (!c->m) {
        if (send && counts[0]) memmove(recv, send, (size_t)counts[0] * tfc_dtype_size(dt));
        return TFC_OK;
    }
    RUN_COLLECTIVE("all-gather", c->m->allgatherv(c->mc, send, recv, counts, dt, ERR));
    return TFC_OK;
}

tfc_status tfc_comm_reduce_scatterv_raw(const char *fn, tfc_comm *c, const void *send, void *recv,
                                        const int64_t *counts, tfc_dtype dt) {
    if (!c->m) {
        if (counts[0]) memmove(recv, send, (size_t)counts[0] * tfc_dtype_size(dt));
        return TFC_OK;
    }
    RUN_COLLECTIVE("reduce-scatter", c->m->reduce_scatterv_sum(c->mc, send, recv, counts, dt, ERR));
    return TFC_OK;
}

tfc_status tfc_comm_gatherv_raw(const char *fn, tfc_comm *c, const void *send, void *recv, const int64_t *counts,
                                tfc_dtype dt, int32_t root) {
    if (!c->m) {
        if (counts[0]) memmove(recv, send, (size_t)counts[0] * tfc_dtype_size(dt));
        return TFC_OK;
    }
    RUN_COLLECTIVE("gather", c->m->gatherv(c->mc, send, recv, counts, dt, root, ERR));
    return TFC_OK;
}

tfc_status tfc_comm_barrier_raw(const char *fn, tfc_comm *c) {
    if (!c->m) return TFC_OK;
    RUN_COLLECTIVE("barrier", c->m->barrier(c->mc, ERR));
    return TFC_OK;
}
