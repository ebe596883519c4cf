/*
 * Data-parallel gradient averaging (PyTorch DDP's reducer, in C).
 *
 * Parameters are grouped into buckets of about bucket_bytes, last
 * parameter first, since backward finishes the last layers' gradients
 * first. Attached to a graph, the grad hook (tfc_graph_set_grad_hook)
 * counts the final gradients of each bucket; a full bucket is packed into
 * its flat buffer and handed to the reducer thread, which all-reduces the
 * buckets strictly in bucket order — the same order on every rank whatever
 * order the hooks fired in, so no two ranks ever wait in different
 * collectives — while backward goes on. tfc_ddp_finish hands over what is
 * left, waits, and writes grad = (sum over ranks) / N back into every .grad.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/node.h"
#include "core/dtype.h"
#include "core/error.h"
#include "dist/comm_impl.h"

#define DEFAULT_BUCKET_BYTES (25LL << 20)

typedef struct bucket {
    int32_t first, count; /* d->order[first .. first+count) are its parameters */
    tfc_dtype dtype;
    int64_t numel;
    void *flat;
    int32_t ready; /* parameters whose gradient is final this pass */
    int launched;  /* packed and handed to the reducer */
} bucket;

struct tfc_ddp {
    tfc_comm *c;
    int32_t n;
    tfc_tensor **params; /* strong references */
    int32_t *order;      /* parameter indices bucket by bucket: n-1 first */
    int32_t *bucket_of;  /* parameter -> bucket */
    int64_t *offset;     /* parameter -> element offset in its bucket */
    uint8_t *final;      /* parameter -> its gradient is final this pass */
    bucket *b;
    int32_t nb;
    int sync;
    /* the reducer thread and what it shares with the caller, under mu */
    pthread_t th;
    int th_started, stop;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int32_t launched_upto; /* buckets [0, launched_upto) may be reduced ... */
    int32_t done_upto;     /* ... and [0, done_upto) are */
    tfc_status err;
    char errmsg[512];
    tfc_ddp_stats st;
};

static const char *const hook_fn = "tfc_graph_backward (tfc_ddp grad hook)";

/* ---- the reducer thread ---------------------------------------------------- */

static void *reducer(void *arg) {
    tfc_ddp *d = arg;
    pthread_mutex_lock(&d->mu);
    for (;;) {
        while (!d->stop && d->done_upto >= d->launched_upto) pthread_cond_wait(&d->cv, &d->mu);
        if (d->stop) break;
        bucket *b = &d->b[d->done_upto];
        pthread_mutex_unlock(&d->mu);
        double t0 = tfc_comm_now();
        tfc_status s = tfc_comm_sum_raw("tfc_ddp_finish", d->c, b->flat, b->numel, b->dtype);
        double dt = tfc_comm_now() - t0;
        pthread_mutex_lock(&d->mu);
        if (s != TFC_OK && d->err == TFC_OK) {
            d->err = s;
            snprintf(d->errmsg, sizeof d->errmsg, "%s", tfc_last_error());
        }
        d->st.comm_s += dt;
        d->st.buckets++;
        d->st.bytes += b->numel * (int64_t)tfc_dtype_size(b->dtype);
        d->done_upto++;
        pthread_cond_broadcast(&d->cv);
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

/* Bucket k's gradients into its flat buffer (a parameter with none contributes zeros). */
static void pack(tfc_ddp *d, bucket *b) {
    const size_t es = tfc_dtype_size(b->dtype);
    for (int32_t j = 0; j < b->count; j++) {
        int32_t i = d->order[b->first + j];
        const tfc_tensor *p = d->params[i], *g = p->grad;
        char *dst = (char *)b->flat + (size_t)d->offset[i] * es;
        size_t nbytes = (size_t)tfc_numel(p) * es;
        if (g && g->dtype == b->dtype && tfc_is_contiguous(g))
            memcpy(dst, tfc_data(g), nbytes);
        else if (g) {
            for (int64_t e = 0; e < tfc_numel(p); e++) { /* a strided or other-dtype grad: element by element */
                int64_t off = 0, rem = e;
                for (int32_t ax = g->ndim - 1; ax >= 0; ax--) {
                    off += (rem % g->shape[ax]) * g->strides[ax];
                    rem /= g->shape[ax];
                }
                tfc_scalar_store(dst, b->dtype, 0, tfc_scalar_load(tfc_data(g), g->dtype, off));
                dst += es;
            }
        } else
            memset(dst, 0, nbytes);
    }
}

/* Pack bucket k and let the reducer have every bucket up to the first not yet launched. */
static void launch(tfc_ddp *d, int32_t k) {
    pack(d, &d->b[k]);
    pthread_mutex_lock(&d->mu);
    d->b[k].launched = 1;
    int32_t upto = d->launched_upto;
    while (upto < d->nb && d->b[upto].launched) upto++;
    if (upto != d->launched_upto) {
        d->launched_upto = upto;
        pthread_cond_broadcast(&d->cv);
    }
    pthread_mutex_unlock(&d->mu);
}

static tfc_status grad_hook(tfc_tensor *leaf, void *user) {
    tfc_ddp *d = user;
    if (!d->sync) return TFC_OK;
    for (int32_t i = 0; i < d->n; i++) {
        if (d->params[i] != leaf) continue;
        if (d->final[i]) return TFC_OK; /* a second backward before finish: its bucket is already reducing */
        d->final[i] = 1;
        bucket *b = &d->b[d->bucket_of[i]];
        if (++b->ready == b->count && !b->launched) launch(d, d->bucket_of[i]);
        return TFC_OK;
    }
    (void)hook_fn;
    return TFC_OK; /* not one of ours */
}

/* ---- construction ----------------------------------------------------------- */

static tfc_status check_param(const char *fn, const tfc_tensor *p, int32_t i) {
    if (!p) return tfc_err(TFC_ERR_INVALID_ARG, "%s: params[%d] is NULL", fn, i);
    if (p->storage->device != TFC_DEVICE_CPU)
        return tfc_err(TFC_ERR_UNSUPPORTED,
                       "%s: params[%d] %s is on a CUDA device; averaging CUDA gradients needs NCCL, which this build "
                       "does not provide",
                       fn, i, SHAPE(p));
    if (p->dtype != TFC_DTYPE_F32 && p->dtype != TFC_DTYPE_F64)
        return tfc_err(TFC_ERR_DTYPE, "%s: params[%d] %s is %s; tfc_ddp takes f32 or f64 parameters", fn, i, SHAPE(p),
                       tfc_dtype_name(p->dtype));
    if (p->node || !p->requires_grad)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: params[%d] %s is not a leaf that requires grad", fn, i, SHAPE(p));
    if (!tfc_is_contiguous(p))
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: params[%d] %s is not contiguous", fn, i, SHAPE(p));
    /* the start broadcasts rank 0's values into every parameter, and the training steps write them */
    char name[32];
    snprintf(name, sizeof name, "params[%d]", i);
    return tfc_tensor_check_writable(fn, name, p);
}

/*
 * Every rank's arguments accepted (local: this rank's verdict), and the same
 * parameter list on every rank: count, then each one's element count and dtype.
 */
static tfc_status agree_params(const char *fn, tfc_comm *c, tfc_status local, tfc_tensor *const *params, int32_t n,
                               int64_t bucket_bytes) {
    const int64_t head[3] = {TFC_COLL_DDP, n, bucket_bytes};
    const tfc_status hcodes[3] = {TFC_ERR_INVALID_ARG, TFC_ERR_SHAPE, TFC_ERR_INVALID_ARG};
    const char *hnames[3] = {"the collective called (tfc_ddp_new vs another)", "the number of parameters",
                             "bucket_bytes"};
    TFC_TRY(tfc_comm_check(fn, c, local, head, hcodes, hnames, 3));
    for (int32_t i = 0; i < n; i++) {
        char what[2][64];
        snprintf(what[0], sizeof what[0], "the element count of params[%d]", i);
        snprintf(what[1], sizeof what[1], "the dtype of params[%d]", i);
        const int64_t v[2] = {tfc_numel(params[i]), params[i]->dtype};
        const tfc_status codes[2] = {TFC_ERR_SHAPE, TFC_ERR_DTYPE};
        const char *names[2] = {what[0], what[1]};
        TFC_TRY(tfc_comm_check(fn, c, TFC_OK, v, codes, names, 2));
    }
    return TFC_OK;
}

/* Buckets of about cap bytes, last parameter first; a bucket holds one dtype. */
static tfc_status make_buckets(const char *fn, tfc_ddp *d, int64_t cap) {
    d->b = calloc((size_t)(d->n ? d->n : 1), sizeof *d->b);
    if (!d->b) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    bucket *cur = NULL;
    int64_t bytes = 0;
    for (int32_t j = 0; j < d->n; j++) {
        int32_t i = d->n - 1 - j;
        const tfc_tensor *p = d->params[i];
        int64_t pb = tfc_numel(p) * (int64_t)tfc_dtype_size(p->dtype);
        if (!cur || cur->dtype != p->dtype || (bytes > 0 && bytes + pb > cap)) {
            cur = &d->b[d->nb++];
            cur->first = j;
            cur->dtype = p->dtype;
            bytes = 0;
        }
        d->order[j] = i;
        d->bucket_of[i] = (int32_t)(cur - d->b);
        d->offset[i] = cur->numel;
        cur->count++;
        cur->numel += tfc_numel(p);
        bytes += pb;
    }
    for (int32_t k = 0; k < d->nb; k++) {
        d->b[k].flat = malloc((size_t)(d->b[k].numel ? d->b[k].numel : 1) * tfc_dtype_size(d->b[k].dtype));
        if (!d->b[k].flat) return tfc_err(TFC_ERR_OOM, "%s: out of memory for bucket %d", fn, k);
    }
    return TFC_OK;
}

static void reset_pass(tfc_ddp *d) {
    memset(d->final, 0, (size_t)(d->n ? d->n : 1));
    for (int32_t k = 0; k < d->nb; k++) d->b[k].ready = d->b[k].launched = 0;
    d->launched_upto = d->done_upto = 0;
}

TFC_API tfc_status tfc_ddp_new(tfc_comm *c, tfc_tensor *const *params, int32_t n, int64_t bucket_bytes, tfc_ddp **out) {
    const char *fn = "tfc_ddp_new";
    TFC_CHECK_NOT_NULL(fn, c);
    TFC_CHECK_NOT_NULL(fn, out);
    tfc_status local = TFC_OK;
    if (n < 0)
        local = tfc_err(TFC_ERR_INVALID_ARG, "%s: n is %d; it must be >= 0", fn, n);
    else if (n > 0 && !params)
        local = tfc_err(TFC_ERR_INVALID_ARG, "%s: params is NULL with n = %d", fn, n);
    else if (bucket_bytes < 0)
        local = tfc_err(TFC_ERR_INVALID_ARG, "%s: bucket_bytes is %lld; it must be >= 0 (0: 25 MiB)", fn,
                        (long long)bucket_bytes);
    for (int32_t i = 0; local == TFC_OK && i < n; i++) local = check_param(fn, params[i], i);
    TFC_TRY(agree_params(fn, c, local, params, n, bucket_bytes));
    tfc_ddp *d = calloc(1, sizeof *d);
    if (!d) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->cv, NULL);
    d->c = tfc_comm_retain(c);
    d->n = n;
    d->sync = 1;
    d->st.struct_size = sizeof d->st;
    size_t m = (size_t)(n ? n : 1);
    d->params = calloc(m, sizeof *d->params);
    d->order = calloc(m, sizeof *d->order);
    d->bucket_of = calloc(m, sizeof *d->bucket_of);
    d->offset = calloc(m, sizeof *d->offset);
    d->final = calloc(m, 1);
    tfc_status s = TFC_OK;
    if (!d->params || !d->order || !d->bucket_of || !d->offset || !d->final)
        s = tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    for (int32_t i = 0; s == TFC_OK && i < n; i++) d->params[i] = tfc_tensor_retain(params[i]);
    if (s == TFC_OK) s = make_buckets(fn, d, bucket_bytes ? bucket_bytes : DEFAULT_BUCKET_BYTES);
    /* Every rank starts from rank 0's parameters. */
    for (int32_t i = 0; s == TFC_OK && i < n; i++) {
        s = tfc_comm_bcast_raw(fn, c, tfc_data(d->params[i]), tfc_numel(d->params[i]), d->params[i]->dtype, 0);
        if (s == TFC_OK) tfc_bump_version(d->params[i]);
    }
    if (s == TFC_OK && c->size > 1) {
        if (pthread_create(&d->th, NULL, reducer, d) != 0)
            s = tfc_err(TFC_ERR_OOM, "%s: cannot start the reducer thread", fn);
        else
            d->th_started = 1;
    }
    if (s != TFC_OK) {
        tfc_ddp_release(d);
        return s;
    }
    *out = d;
    return TFC_OK;
}

TFC_API void tfc_ddp_release(tfc_ddp *d) {
    if (!d) return;
    if (d->th_started) {
        pthread_mutex_lock(&d->mu);
        /* a launched bucket is reduced before the thread stops: the other ranks are in that collective too */
        while (d->done_upto < d->launched_upto) pthread_cond_wait(&d->cv, &d->mu);
        d->stop = 1;
        pthread_cond_broadcast(&d->cv);
        pthread_mutex_unlock(&d->mu);
        pthread_join(d->th, NULL);
    }
    for (int32_t k = 0; d->b && k < d->nb; k++) free(d->b[k].flat);
    for (int32_t i = 0; d->params && i < d->n; i++) tfc_tensor_release(d->params[i]);
    free(d->b);
    free(d->params);
    free(d->order);
    free(d->bucket_of);
    free(d->offset);
    free(d->final);
    tfc_comm_release(d->c);
    pthread_cond_destroy(&d->cv);
    pthread_mutex_destroy(&d->mu);
    free(d);
}

TFC_API tfc_status tfc_ddp_attach(tfc_ddp *d, tfc_graph *g) {
    const char *fn = "tfc_ddp_attach";
    TFC_CHECK_NOT_NULL(fn, d);
    TFC_CHECK_NOT_NULL(fn, g);
    return tfc_err_in(fn, tfc_graph_set_grad_hook(g, grad_hook, d));
}

TFC_API tfc_status tfc_ddp_set_sync(tfc_ddp *d, int32_t on) {
    TFC_CHECK_NOT_NULL("tfc_ddp_set_sync", d);
    d->sync = on != 0;
    return TFC_OK;
}

/*
 * grad = flat / N, into the parameter's own .grad when it is a contiguous
 * tensor of its dtype that nothing else holds, else a new one: never into
 * memory another owner keeps, nor into a read-only one (a .grad the caller
 * set to wrapped memory, kept by a parameter this backward did not reach).
 */
static tfc_status unpack(const char *fn, tfc_ddp *d, int32_t i) {
    tfc_tensor *p = d->params[i], *g = p->grad;
    const bucket *b = &d->b[d->bucket_of[i]];
    const int64_t n = tfc_numel(p);
    if (!g || g->dtype != p->dtype || !tfc_is_contiguous(g) || atomic_load(&g->storage->refcount) != 1 ||
        g->storage->read_only) {
        tfc_tensor *fresh;
        TFC_TRY(tfc_tensor_new(p->shape, p->ndim, p->dtype, TFC_DEVICE_CPU, 0, &fresh));
        tfc_tensor_release(p->grad);
        p->grad = g = fresh;
    }
    const double N = (double)d->c->size;
    if (p->dtype == TFC_DTYPE_F64) {
        const double *src = (const double *)b->flat + d->offset[i];
        double *dst = tfc_data(g);
        for (int64_t e = 0; e < n; e++) dst[e] = src[e] / N;
    } else {
        const float *src = (const float *)b->flat + d->offset[i];
        float *dst = tfc_data(g);
        for (int64_t e = 0; e < n; e++) dst[e] = src[e] / (float)N;
    }
    tfc_bump_version(g);
    return TFC_OK;
}

TFC_API tfc_status tfc_ddp_finish(tfc_ddp *d) {
    const char *fn = "tfc_ddp_finish";
    TFC_CHECK_NOT_NULL(fn, d);
    if (!d->sync) return TFC_OK;
    if (d->c->size == 1) { /* one rank: the gradients are the average already */
        reset_pass(d);
        d->st.syncs++;
        return TFC_OK;
    }
    for (int32_t k = 0; k < d->nb; k++)
        if (!d->b[k].launched) launch(d, k);
    double t0 = tfc_comm_now();
    pthread_mutex_lock(&d->mu);
    while (d->done_upto < d->nb) pthread_cond_wait(&d->cv, &d->mu);
    tfc_status s = d->err;
    if (s != TFC_OK) s = tfc_err(s, "%s: %s", fn, d->errmsg);
    d->err = TFC_OK;
    d->st.exposed_s += tfc_comm_now() - t0;
    d->st.syncs++;
    pthread_mutex_unlock(&d->mu);
    for (int32_t i = 0; s == TFC_OK && i < d->n; i++) s = unpack(fn, d, i);
    reset_pass(d);
    return s;
}

TFC_API tfc_status tfc_ddp_get_stats(const tfc_ddp *d, tfc_ddp_stats *st) {
    const char *fn = "tfc_ddp_get_stats";
    TFC_CHECK_NOT_NULL(fn, d);
    TFC_CHECK_NOT_NULL(fn, st);
    if (st->struct_size < (int32_t)sizeof *st)
        return tfc_err(TFC_ERR_VERSION, "%s: st->struct_size is %d; this library's tfc_ddp_stats is %d bytes", fn,
                       st->struct_size, (int)sizeof *st);
    tfc_ddp *m = (tfc_ddp *)d;
    pthread_mutex_lock(&m->mu);
    *st = d->st;
    pthread_mutex_unlock(&m->mu);
    return TFC_OK;
}
