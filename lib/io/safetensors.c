/*
 * safetensors (https://github.com/huggingface/safetensors), the format
 * Hugging Face checkpoints use:
 *
 *   u64 LE  N                  header length
 *   N bytes JSON               {"name": {"dtype": "F32", "shape": [2,3],
 *                                        "data_offsets": [begin, end]}, ...,
 *                               "__metadata__": {"key": "value", ...}}
 *   data                       tensors, row-major little-endian, at
 *                               data + begin .. data + end
 *
 * The reader trusts nothing: header length within the file (and at most
 * 100 MB, the reference limit), strict JSON (jansson, io/json.h; only the
 * shapes above, a name at most once), known
 * dtypes, end - begin == numel · dtype size, and the offsets must tile the
 * data section exactly (sorted, contiguous, no overlap, no gap, no tail).
 *
 * A file is mapped, not read (safetensors_impl.h): its tensors are
 * read-only views of one shared MAP_PRIVATE mapping, which the last of
 * them unmaps, so loading costs no memory until the values are touched,
 * and the pages a loader is done with can be given back
 * (tfc_safetensors_done). A tensor whose offset is not a multiple of its
 * element size (a writer that does not sort by alignment, or a header
 * length that is not a multiple of 8) is copied instead: kernels load whole
 * elements. The whole file is checked against its size (fstat) before any
 * tensor is made, so nothing past the end of the mapping is ever touched;
 * what the mapping cannot defend against is the file shrinking afterwards
 * (truncated and rewritten in place by another process): touching a page
 * past the new end raises SIGBUS. Our writers and Hugging Face's replace a
 * file by rename or write a new one, which leaves an existing mapping
 * intact; io.h states the assumption.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/dtype.h"
#include "core/error.h"
#include "io/atomic_file.h"
#include "io/json.h"
#include "io/safetensors_impl.h"
#include "tensor/tensor_impl.h"
#include "tfcore/io.h"
#include "tfcore/ops.h"

#define ST_MAX_HEADER 100000000ull

/* ---- dtype names ----------------------------------------------------------------- */

static const struct {
    const char *name;
    tfc_dtype dtype;
} st_dtypes[] = {
    {"F64", TFC_DTYPE_F64},   {"I64", TFC_DTYPE_I64}, {"F32", TFC_DTYPE_F32}, {"I32", TFC_DTYPE_I32},
    {"BF16", TFC_DTYPE_BF16}, {"F16", TFC_DTYPE_F16}, {"U8", TFC_DTYPE_U8},   {"BOOL", TFC_DTYPE_BOOL},
};

static const char *st_name_of(tfc_dtype d) {
    for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
        if (st_dtypes[i].dtype == d) return st_dtypes[i].name;
    return NULL;
}

static int st_dtype_of(const char *name, tfc_dtype *d) {
    for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
        if (strcmp(st_dtypes[i].name, name) == 0) {
            *d = st_dtypes[i].dtype;
            return 1;
        }
    return 0;
}

/* ---- writing ----------------------------------------------------------------------- */

typedef struct st_entry {
    const char *name;
    tfc_tensor *t;
    tfc_dtype dtype; /* as stored */
    size_t align, nbytes;
} st_entry;

/* Largest alignment first, then by name: every tensor starts aligned to its element size. */
static int by_align_then_name(const void *a, const void *b) {
    const st_entry *x = a, *y = b;
    if (x->align != y->align) return x->align < y->align ? 1 : -1;
    return strcmp(x->name, y->name);
}

static int by_name(const void *a, const void *b) {
    return strcmp(((const st_entry *)a)->name, ((const st_entry *)b)->name);
}

/*
 * e's values, converted to its stored dtype, into buf (e->nbytes): a
 * CUDA tensor comes to the host in its own dtype first (copies across
 * devices do not convert), then the CPU copy kernel converts.
 */
static tfc_status host_values(const st_entry *e, void *buf) {
    const tfc_tensor *t = e->t;
    if (t->dtype == e->dtype) return tfc_tensor_copy_to_host(t, buf, e->nbytes);
    tfc_tensor *host = NULL, *conv = NULL;
    tfc_status s = TFC_OK;
    if (t->storage->device != TFC_DEVICE_CPU) {
        s = tfc_tensor_new(t->shape, t->ndim, t->dtype, TFC_DEVICE_CPU, 0, &host);
        if (s == TFC_OK) s = tfc_tensor_copy_from(host, t);
    }
    if (s == TFC_OK) s = tfc_tensor_new(t->shape, t->ndim, e->dtype, TFC_DEVICE_CPU, 0, &conv);
    if (s == TFC_OK) s = tfc_tensor_copy_from(conv, host ? host : t);
    if (s == TFC_OK) s = tfc_tensor_copy_to_host(conv, buf, e->nbytes);
    tfc_tensor_release(host);
    tfc_tensor_release(conv);
    return s;
}

TFC_API tfc_status tfc_safetensors_save(const char *path, const char *const *names, tfc_tensor *const *tensors,
                                        int32_t n, const char *const *meta_keys, const char *const *meta_values,
                                        int32_t n_meta) {
    return tfc_safetensors_save_as("tfc_safetensors_save", path, names, tensors, n, -1, meta_keys, meta_values, n_meta);
}

/* e[i] for tensor i, checked (names, dtypes, no name twice), then sorted into file order. */
static tfc_status fill_entries(const char *fn, const char *const *names, tfc_tensor *const *tensors, int32_t n,
                               int32_t store, st_entry *e) {
    for (int32_t i = 0; i < n; i++) {
        if (!names[i] || !names[i][0]) return tfc_err(TFC_ERR_INVALID_ARG, "%s: names[%d] is NULL or empty", fn, i);
        if (strcmp(names[i], "__metadata__") == 0)
            return tfc_err(TFC_ERR_INVALID_ARG, "%s: names[%d] is the reserved name __metadata__", fn, i);
        if (!tensors[i]) return tfc_err(TFC_ERR_INVALID_ARG, "%s: tensors[%d] ('%s') is NULL", fn, i, names[i]);
        const tfc_dtype dt = tfc_tensor_dtype(tensors[i]);
        if (!st_name_of(dt))
            return tfc_err(TFC_ERR_DTYPE, "%s: tensors[%d] ('%s') has dtype %s, not storable", fn, i, names[i],
                           tfc_dtype_name(dt));
        if (store >= 0 && !tfc_dtype_is_float(dt))
            return tfc_err(TFC_ERR_DTYPE, "%s: tensors[%d] ('%s') is %s, not a float tensor to store as %s", fn, i,
                           names[i], tfc_dtype_name(dt), tfc_dtype_name((tfc_dtype)store));
        e[i].name = names[i];
        e[i].t = tensors[i];
        e[i].dtype = store >= 0 ? (tfc_dtype)store : dt;
        e[i].align = tfc_dtype_size(e[i].dtype);
        e[i].nbytes = (size_t)tfc_tensor_numel(tensors[i]) * e[i].align;
    }
    if (n < 2) return TFC_OK;
    qsort(e, (size_t)n, sizeof *e, by_name);
    for (int32_t i = 1; i < n; i++)
        if (strcmp(e[i - 1].name, e[i].name) == 0)
            return tfc_err(TFC_ERR_INVALID_ARG, "%s: the name '%s' appears twice", fn, e[i].name);
    qsort(e, (size_t)n, sizeof *e, by_align_then_name);
    return TFC_OK;
}

/* The header of entries e[n] (in file order) and n_meta pairs, padded with spaces to a multiple of 8 bytes. */
static void header_json(tfc_strbuf *h, const st_entry *e, int32_t n, const char *const *mk, const char *const *mv,
                        int32_t n_meta) {
    tfc_sb_str(h, "{");
    if (n_meta > 0) {
        tfc_sb_str(h, "\"__metadata__\":{");
        for (int32_t i = 0; i < n_meta; i++) {
            if (i) tfc_sb_str(h, ",");
            tfc_sb_json_string(h, mk[i]);
            tfc_sb_str(h, ":");
            tfc_sb_json_string(h, mv[i]);
        }
        tfc_sb_str(h, "}");
    }
    size_t off = 0;
    for (int32_t i = 0; i < n; i++) {
        char num[64];
        if (i || n_meta > 0) tfc_sb_str(h, ",");
        tfc_sb_json_string(h, e[i].name);
        tfc_sb_str(h, ":{\"dtype\":\"");
        tfc_sb_str(h, st_name_of(e[i].dtype));
        tfc_sb_str(h, "\",\"shape\":[");
        int32_t nd = tfc_tensor_ndim(e[i].t);
        for (int32_t d = 0; d < nd; d++) {
            snprintf(num, sizeof num, "%s%lld", d ? "," : "", (long long)tfc_tensor_dim(e[i].t, d));
            tfc_sb_str(h, num);
        }
        snprintf(num, sizeof num, "],\"data_offsets\":[%zu,%zu]}", off, off + e[i].nbytes);
        tfc_sb_str(h, num);
        off += e[i].nbytes;
    }
    tfc_sb_str(h, "}");
    while (!h->oom && h->n % 8) tfc_sb_str(h, " ");
}

tfc_status tfc_safetensors_save_as(const char *fn, const char *path, const char *const *names,
                                   tfc_tensor *const *tensors, int32_t n, int32_t store, const char *const *meta_keys,
                                   const char *const *meta_values, int32_t n_meta) {
    TFC_CHECK_NOT_NULL(fn, path);
    if (store >= 0 && !tfc_dtype_is_float((tfc_dtype)store))
        return tfc_err(TFC_ERR_DTYPE, "%s: cannot store tensors as %s, a float dtype is needed", fn,
                       tfc_dtype_name((tfc_dtype)store));
    if (n < 0 || n_meta < 0) return tfc_err(TFC_ERR_INVALID_ARG, "%s: n is %d, n_meta is %d", fn, n, n_meta);
    if (n > 0 && (!names || !tensors)) return tfc_err(TFC_ERR_INVALID_ARG, "%s: names or tensors is NULL", fn);
    if (n_meta > 0 && (!meta_keys || !meta_values))
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: meta_keys or meta_values is NULL", fn);
    for (int32_t i = 0; i < n_meta; i++)
        if (!meta_keys[i] || !meta_values[i])
            return tfc_err(TFC_ERR_INVALID_ARG, "%s: metadata pair %d has a NULL key or value", fn, i);
    st_entry *e = calloc((size_t)n + 1, sizeof *e);
    if (!e) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    tfc_status s = fill_entries(fn, names, tensors, n, store, e);
    tfc_strbuf h = {0};
    if (s == TFC_OK) {
        header_json(&h, e, n, meta_keys, meta_values, n_meta);
        if (h.oom) s = tfc_err(TFC_ERR_OOM, "%s: out of memory for the header", fn);
    }
    tfc_atomic_file af = {0};
    if (s == TFC_OK) s = tfc_atomic_open(fn, path, &af);
    if (s == TFC_OK) {
        unsigned char len8[8];
        for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)h.n >> (8 * i));
        s = tfc_atomic_write(fn, &af, len8, 8);
        if (s == TFC_OK) s = tfc_atomic_write(fn, &af, h.p, h.n);
        for (int32_t i = 0; i < n && s == TFC_OK; i++) {
            if (!e[i].nbytes) continue;
            void *buf = malloc(e[i].nbytes);
            if (!buf) s = tfc_err(TFC_ERR_OOM, "%s: out of memory copying '%s'", fn, e[i].name);
            if (s == TFC_OK) s = tfc_err_in(fn, host_values(&e[i], buf));
            if (s == TFC_OK) s = tfc_atomic_write(fn, &af, buf, e[i].nbytes);
            free(buf);
        }
        if (s == TFC_OK)
            s = tfc_atomic_commit(fn, &af);
        else
            tfc_atomic_abort(&af);
    }
    free(h.p);
    free(e);
    return s;
}

/* ---- reading: the header's JSON, parsed by jansson (io/json.h) ----------------------- */

typedef struct st_tensor {
    char *name;
    tfc_dtype dtype;
    int32_t ndim;
    int64_t dims[TFC_MAX_DIMS];
    uint64_t begin, end;
    tfc_tensor *t;
} st_tensor;

/*
 * A file's read-only mapping, shared by the handle and every tensor over it
 * (each holds a reference; the last one unmaps it).
 */
typedef struct st_map {
    atomic_int refs;
    void *base;
    size_t len;
} st_map;

/* The deleter of every tensor over a mapping (and the mark tfc_safetensors_done knows them by). */
static void st_map_unref(void *data, void *ctx) {
    (void)data;
    st_map *m = ctx;
    if (atomic_fetch_sub(&m->refs, 1) == 1) {
        munmap(m->base, m->len);
        free(m);
    }
}

struct tfc_safetensors {
    st_tensor *tensors;
    int32_t n, cap;
    char **meta; /* 2 * n_meta strings: key, value, ... */
    int32_t n_meta, meta_cap;
    st_map *map; /* the file's mapping (one reference); NULL for tfc_safetensors_load_buffer */
};

/* An array of at most cap non-negative integers into v[0, *n). */
static tfc_status uint_array(const char *fn, const char *tname, const json_t *a, uint64_t *v, int32_t cap, int32_t *n,
                             const char *what) {
    if (!json_is_array(a)) return tfc_err(TFC_ERR_FORMAT, "%s: tensor '%s': %s", fn, tname, what);
    if (json_array_size(a) > (size_t)cap)
        return tfc_err(TFC_ERR_FORMAT, "%s: tensor '%s': array too long (%zu entries, at most %d)", fn, tname,
                       json_array_size(a), (int)cap);
    *n = (int32_t)json_array_size(a);
    for (int32_t i = 0; i < *n; i++) {
        const json_t *x = json_array_get(a, (size_t)i);
        if (!json_is_integer(x))
            return tfc_err(TFC_ERR_FORMAT, "%s: tensor '%s': %s (entry %d: expected an integer)", fn, tname, what,
                           (int)i);
        if (json_integer_value(x) < 0)
            return tfc_err(TFC_ERR_FORMAT, "%s: tensor '%s': %s (entry %d: expected a non-negative integer)", fn, tname,
                           what, (int)i);
        v[i] = (uint64_t)json_integer_value(x);
    }
    return TFC_OK;
}

static tfc_status parse_metadata(const char *fn, const json_t *obj, tfc_safetensors *f) {
    if (!json_is_object(obj)) return tfc_err(TFC_ERR_FORMAT, "%s: __metadata__ must be an object of strings", fn);
    const size_t n = json_object_size(obj);
    f->meta = n ? calloc(2 * n, sizeof *f->meta) : NULL;
    if (n && !f->meta) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    f->meta_cap = (int32_t)n;
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)obj, k, v) {
        if (!json_is_string(v))
            return tfc_err(TFC_ERR_FORMAT, "%s: __metadata__ values must be strings ('%s' is not)", fn, k);
        f->meta[2 * f->n_meta] = strdup(k);
        f->meta[2 * f->n_meta + 1] = strdup(json_string_value(v));
        f->n_meta++;
        if (!f->meta[2 * f->n_meta - 2] || !f->meta[2 * f->n_meta - 1])
            return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    }
    return TFC_OK;
}

static tfc_status parse_tensor_info(const char *fn, const json_t *obj, st_tensor *t) {
    if (!json_is_object(obj))
        return tfc_err(TFC_ERR_FORMAT, "%s: tensor '%s': a tensor entry must be an object", fn, t->name);
    const json_t *dt = json_object_get(obj, "dtype"), *shape = json_object_get(obj, "shape"),
                 *off = json_object_get(obj, "data_offsets");
    const char *k;
    const json_t *v;
    json_object_foreach(
        (json_t *)obj, k,
        v) if (strcmp(k, "dtype") && strcmp(k, "shape") &&
               strcmp(k, "data_offsets")) return tfc_err(TFC_ERR_FORMAT,
                                                         "%s: tensor '%s' has an unknown or repeated key '%s'", fn,
                                                         t->name, k);
    if (!dt || !shape || !off)
        return tfc_err(TFC_ERR_FORMAT, "%s: tensor '%s' lacks %s", fn, t->name,
                       !dt          ? "dtype"
                           : !shape ? "shape"
                                    : "data_offsets");
    if (!json_is_string(dt) || !st_dtype_of(json_string_value(dt), &t->dtype))
        return tfc_err(TFC_ERR_FORMAT, "%s: tensor '%s' has unknown or unsupported dtype '%s'", fn, t->name,
                       json_is_string(dt) ? json_string_value(dt) : "(not a string)");
    uint64_t d[TFC_MAX_DIMS], o[2];
    int32_t no = 0;
    TFC_TRY(uint_array(fn, t->name, shape, d, TFC_MAX_DIMS, &t->ndim, "shape must be an array of integers"));
    for (int32_t i = 0; i < t->ndim; i++) t->dims[i] = (int64_t)d[i];
    TFC_TRY(uint_array(fn, t->name, off, o, 2, &no, "data_offsets must be [begin, end]"));
    if (no != 2) return tfc_err(TFC_ERR_FORMAT, "%s: tensor '%s': data_offsets must have two entries", fn, t->name);
    t->begin = o[0];
    t->end = o[1];
    return TFC_OK;
}

/* The header's tensors and metadata into f (a tensor name twice is refused by the parse). */
static tfc_status parse_header(const char *fn, const char *hdr, size_t hlen, tfc_safetensors *f) {
    json_t *root = NULL;
    TFC_TRY(tfc_json_parse(fn, "safetensors header", hdr, hlen, TFC_JSON_REFUSE_DUPLICATES, &root));
    tfc_status s = json_is_object(root)
        ? TFC_OK
        : tfc_err(TFC_ERR_FORMAT, "%s: malformed safetensors header: the header must be a JSON object", fn);
    const size_t n = json_is_object(root) ? json_object_size(root) : 0;
    if (s == TFC_OK && n) {
        f->tensors = calloc(n, sizeof *f->tensors);
        f->cap = (int32_t)n;
        if (!f->tensors) s = tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    }
    const char *k;
    json_t *v;
    json_object_foreach(root, k, v) {
        if (s != TFC_OK) break;
        if (strcmp(k, "__metadata__") == 0) {
            s = parse_metadata(fn, v, f);
            continue;
        }
        st_tensor *t = &f->tensors[f->n++];
        if (!(t->name = strdup(k))) s = tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
        if (s == TFC_OK) s = parse_tensor_info(fn, v, t);
    }
    json_decref(root);
    return s;
}

static int by_begin(const void *a, const void *b) {
    const st_tensor *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

TFC_API void tfc_safetensors_release(tfc_safetensors *f) {
    if (!f) return;
    for (int32_t i = 0; i < f->n; i++) {
        free(f->tensors[i].name);
        tfc_tensor_release(f->tensors[i].t);
    }
    for (int32_t i = 0; i < 2 * f->n_meta; i++) free(f->meta[i]);
    free(f->tensors);
    free(f->meta);
    if (f->map) st_map_unref(NULL, f->map);
    free(f);
}

/*
 * Tensor t of the file as a view of the mapping when its data is aligned
 * for its dtype, else (or with no mapping: a buffer) as a copy. A copy of
 * a mapped file's tensor is read-only as the views are, so every tensor
 * of tfc_safetensors_load behaves alike.
 */
static tfc_status make_tensor(const char *fn, st_map *map, const unsigned char *data, st_tensor *t) {
    const unsigned char *p = data + t->begin;
    const size_t esize = tfc_dtype_size(t->dtype);
    if (map && t->end > t->begin && (uintptr_t)p % esize == 0) {
        atomic_fetch_add(&map->refs, 1);
        tfc_status s = tfc_tensor_wrap_ex((void *)p, t->dims, NULL, t->ndim, t->dtype, TFC_WRAP_READ_ONLY, st_map_unref,
                                          map, &t->t);
        if (s != TFC_OK) st_map_unref(NULL, map); /* wrap calls no deleter on error */
        return tfc_err_in(fn, s);
    }
    TFC_TRY(tfc_err_in(fn, tfc_tensor_from_data(p, t->dims, t->ndim, t->dtype, &t->t)));
    if (map) t->t->storage->read_only = 1;
    return TFC_OK;
}

void tfc_safetensors_done(void *ctx, const tfc_tensor *t, uint64_t from, uint64_t to) {
    (void)ctx;
    if (!t || t->storage->deleter != st_map_unref || to <= from) return;
    const st_map *m = t->storage->deleter_ctx;
    const long page = sysconf(_SC_PAGESIZE);
    if (page <= 0) return;
    const uintptr_t base = (uintptr_t)m->base, end = base + m->len, at = (uintptr_t)tfc_data(t);
    uintptr_t lo = at + from, hi = at + to;
    if (lo < base || hi > end || hi < lo) return; /* not bytes of the mapping: nothing of ours to give back */
    /* only whole pages inside the span: the pages at its ends may hold a neighbour's bytes still wanted */
    lo = (lo + (uintptr_t)page - 1) / (uintptr_t)page * (uintptr_t)page;
    hi = hi / (uintptr_t)page * (uintptr_t)page;
    /* MAP_PRIVATE and never written: dropped pages read back from the file if touched again */
    if (lo < hi) (void)madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

/* The file image buf[0, len) into f: its tensors view map (when given, buf is its base) or copy buf. */
static tfc_status parse_file(const char *fn, const unsigned char *buf, size_t len, st_map *map, tfc_safetensors *f) {
    if (len < 8)
        return tfc_err(TFC_ERR_FORMAT, "%s: %zu bytes is too short for a safetensors file (8-byte header length)", fn,
                       len);
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)buf[i] << (8 * i);
    if (hlen > ST_MAX_HEADER)
        return tfc_err(TFC_ERR_FORMAT, "%s: header length %llu exceeds the limit of %llu bytes", fn,
                       (unsigned long long)hlen, (unsigned long long)ST_MAX_HEADER);
    if (hlen > len - 8)
        return tfc_err(TFC_ERR_FORMAT, "%s: header length %llu runs past the end of the %zu-byte file", fn,
                       (unsigned long long)hlen, len);
    TFC_TRY(parse_header(fn, (const char *)buf + 8, (size_t)hlen, f));
    if (f->n > 1) qsort(f->tensors, (size_t)f->n, sizeof *f->tensors, by_begin);
    const uint64_t data_len = len - 8 - hlen;
    const unsigned char *data = buf + 8 + hlen;
    uint64_t expect = 0;
    for (int32_t i = 0; i < f->n; i++) {
        st_tensor *t = &f->tensors[i];
        uint64_t numel = 1, esize = tfc_dtype_size(t->dtype);
        for (int32_t d = 0; d < t->ndim; d++) {
            uint64_t dim = (uint64_t)t->dims[d];
            if (dim && numel > (UINT64_MAX / esize) / dim)
                return tfc_err(TFC_ERR_FORMAT, "%s: tensor '%s' shape %s overflows", fn, t->name,
                               tfc_fmt_dims(t->dims, t->ndim));
            numel *= dim;
        }
        if (t->end < t->begin)
            return tfc_err(TFC_ERR_FORMAT, "%s: tensor '%s' data_offsets [%llu, %llu] end before they begin", fn,
                           t->name, (unsigned long long)t->begin, (unsigned long long)t->end);
        if (t->end - t->begin != numel * esize)
            return tfc_err(
                TFC_ERR_FORMAT, "%s: tensor '%s' is %s %s (%llu bytes) but data_offsets [%llu, %llu] hold %llu", fn,
                t->name, st_name_of(t->dtype), tfc_fmt_dims(t->dims, t->ndim), (unsigned long long)(numel * esize),
                (unsigned long long)t->begin, (unsigned long long)t->end, (unsigned long long)(t->end - t->begin));
        if (t->begin != expect)
            return tfc_err(TFC_ERR_FORMAT, "%s: tensor '%s' data_offsets begin at %llu, expected %llu (%s)", fn,
                           t->name, (unsigned long long)t->begin, (unsigned long long)expect,
                           t->begin < expect ? "overlaps the previous tensor" : "gap before it");
        if (t->end > data_len)
            return tfc_err(TFC_ERR_FORMAT, "%s: tensor '%s' data_offsets end at %llu, past the %llu data bytes", fn,
                           t->name, (unsigned long long)t->end, (unsigned long long)data_len);
        expect = t->end;
    }
    if (expect != data_len)
        return tfc_err(TFC_ERR_FORMAT, "%s: %llu data bytes but the tensors cover %llu", fn,
                       (unsigned long long)data_len, (unsigned long long)expect);
    for (int32_t i = 0; i < f->n; i++) TFC_TRY(make_tensor(fn, map, data, &f->tensors[i]));
    return TFC_OK;
}

TFC_API tfc_status tfc_safetensors_load_buffer(const void *data, size_t len, tfc_safetensors **out) {
    const char *fn = "tfc_safetensors_load_buffer";
    TFC_CHECK_NOT_NULL(fn, out);
    if (!data && len) return tfc_err(TFC_ERR_INVALID_ARG, "%s: data is NULL", fn);
    tfc_safetensors *f = calloc(1, sizeof *f);
    if (!f) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    tfc_status s = parse_file(fn, data, len, NULL, f);
    if (s != TFC_OK) {
        tfc_safetensors_release(f);
        return s;
    }
    *out = f;
    return TFC_OK;
}

/* path mapped read-only into *out (a new mapping with one reference), or its first bytes when under 8. */
static tfc_status map_file(const char *fn, const char *path, st_map **out, unsigned char small[8], size_t *small_len) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return tfc_err(TFC_ERR_IO, "%s: cannot open '%s': %s", fn, path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        const int e = errno;
        close(fd);
        return tfc_err(TFC_ERR_IO, "%s: cannot stat '%s': %s", fn, path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) { /* a pipe or a device has no size to check the header against */
        close(fd);
        return tfc_err(TFC_ERR_IO, "%s: cannot read '%s': %s", fn, path,
                       S_ISDIR(st.st_mode) ? "it is a directory" : "not a regular file");
    }
    *out = NULL;
    *small_len = 0;
    if (st.st_size < 8) { /* mmap cannot map 0 bytes; the parser words "too short" */
        const ssize_t got = pread(fd, small, (size_t)st.st_size, 0);
        close(fd);
        if (got != st.st_size) return tfc_err(TFC_ERR_IO, "%s: short read of '%s'", fn, path);
        *small_len = (size_t)got;
        return TFC_OK;
    }
    st_map *m = calloc(1, sizeof *m);
    void *base = m ? mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
    const int e = errno;
    close(fd); /* the mapping keeps the file */
    if (!m) return tfc_err(TFC_ERR_OOM, "%s: out of memory for '%s'", fn, path);
    if (base == MAP_FAILED) {
        free(m);
        return tfc_err(e == ENOMEM ? TFC_ERR_OOM : TFC_ERR_IO, "%s: cannot map '%s' (%lld bytes): %s", fn, path,
                       (long long)st.st_size, strerror(e));
    }
    atomic_init(&m->refs, 1);
    m->base = base;
    m->len = (size_t)st.st_size;
    *out = m;
    return TFC_OK;
}

TFC_API tfc_status tfc_safetensors_load(const char *path, tfc_safetensors **out) {
    const char *fn = "tfc_safetensors_load";
    TFC_CHECK_NOT_NULL(fn, path);
    TFC_CHECK_NOT_NULL(fn, out);
    st_map *map = NULL;
    unsigned char small[8];
    size_t small_len = 0;
    TFC_TRY(map_file(fn, path, &map, small, &small_len));
    tfc_safetensors *f = calloc(1, sizeof *f);
    tfc_status s = TFC_OK;
    if (!f) {
        s = tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
        if (map) st_map_unref(NULL, map);
    } else {
        f->map = map; /* the handle's reference: released with it */
        s = map ? parse_file(fn, map->base, map->len, map, f) : parse_file(fn, small, small_len, NULL, f);
    }
    if (s != TFC_OK) {
        tfc_safetensors_release(f);
        /* name the file in the message (copied: tfc_err rewrites the buffer) */
        char msg[512];
        snprintf(msg, sizeof msg, "%s", tfc_last_error());
        return tfc_err(s, "%s ('%s')", msg, path);
    }
    *out = f;
    return TFC_OK;
}

TFC_API int32_t tfc_safetensors_count(const tfc_safetensors *f) { return f ? f->n : 0; }

TFC_API tfc_status tfc_safetensors_get(const tfc_safetensors *f, int32_t i, const char **name, tfc_tensor **tensor) {
    const char *fn = "tfc_safetensors_get";
    TFC_CHECK_NOT_NULL(fn, f);
    if (i < 0 || i >= f->n) return tfc_err(TFC_ERR_INVALID_ARG, "%s: i is %d, the file has %d tensors", fn, i, f->n);
    if (name) *name = f->tensors[i].name;
    if (tensor) *tensor = tfc_tensor_retain(f->tensors[i].t);
    return TFC_OK;
}

TFC_API tfc_status tfc_safetensors_find(const tfc_safetensors *f, const char *name, tfc_tensor **tensor) {
    const char *fn = "tfc_safetensors_find";
    TFC_CHECK_NOT_NULL(fn, f);
    TFC_CHECK_NOT_NULL(fn, name);
    TFC_CHECK_NOT_NULL(fn, tensor);
    for (int32_t i = 0; i < f->n; i++)
        if (strcmp(f->tensors[i].name, name) == 0) {
            *tensor = tfc_tensor_retain(f->tensors[i].t);
            return TFC_OK;
        }
    return tfc_err(TFC_ERR_INVALID_ARG, "%s: no tensor named '%s'", fn, name);
}

TFC_API int32_t tfc_safetensors_metadata_count(const tfc_safetensors *f) { return f ? f->n_meta : 0; }

TFC_API tfc_status tfc_safetensors_metadata_at(const tfc_safetensors *f, int32_t i, const char **key,
                                               const char **value) {
    const char *fn = "tfc_safetensors_metadata_at";
    TFC_CHECK_NOT_NULL(fn, f);
    TFC_CHECK_NOT_NULL(fn, key);
    TFC_CHECK_NOT_NULL(fn, value);
    if (i < 0 || i >= f->n_meta)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: i is %d, the file has %d metadata pairs", fn, i, f->n_meta);
    *key = f->meta[2 * i];
    *value = f->meta[2 * i + 1];
    return TFC_OK;
}

TFC_API tfc_status tfc_safetensors_metadata(const tfc_safetensors *f, const char *key, const char **value) {
    const char *fn = "tfc_safetensors_metadata";
    TFC_CHECK_NOT_NULL(fn, f);
    TFC_CHECK_NOT_NULL(fn, key);
    TFC_CHECK_NOT_NULL(fn, value);
    *value = NULL;
    for (int32_t i = 0; i < f->n_meta; i++)
        if (strcmp(f->meta[2 * i], key) == 0) *value = f->meta[2 * i + 1];
    return TFC_OK;
}
