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
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/json.h"
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

TFC_API tfc_status tfc_safetensors_save(const char *path, const char *const *names, tfc_tensor *const *tensors,
                                        int32_t n, const char *const *meta_keys, const char *const *meta_values,
                                        int32_t n_meta) {
    const char *fn = "tfc_safetensors_save";
    TFC_CHECK_NOT_NULL(fn, path);
    if (n < 0 || n_meta < 0) return tfc_err(TFC_ERR_INVALID_ARG, "%s: n is %d, n_meta is %d", fn, n, n_meta);
    if (n > 0 && (!names || !tensors)) return tfc_err(TFC_ERR_INVALID_ARG, "%s: names or tensors is NULL", fn);
    if (n_meta > 0 && (!meta_keys || !meta_values))
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: meta_keys or meta_values is NULL", fn);
    for (int32_t i = 0; i < n_meta; i++)
        if (!meta_keys[i] || !meta_values[i])
            return tfc_err(TFC_ERR_INVALID_ARG, "%s: metadata pair %d has a NULL key or value", fn, i);
    st_entry *e = calloc((size_t)n + 1, sizeof *e);
    if (!e) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    tfc_status s = TFC_OK;
    for (int32_t i = 0; i < n && s == TFC_OK; i++) {
        if (!names[i] || !names[i][0])
            s = tfc_err(TFC_ERR_INVALID_ARG, "%s: names[%d] is NULL or empty", fn, i);
        else if (strcmp(names[i], "__metadata__") == 0)
            s = tfc_err(TFC_ERR_INVALID_ARG, "%s: names[%d] is the reserved name __metadata__", fn, i);
        else if (!tensors[i])
            s = tfc_err(TFC_ERR_INVALID_ARG, "%s: tensors[%d] ('%s') is NULL", fn, i, names[i]);
        else if (!st_name_of(tfc_tensor_dtype(tensors[i])))
            s = tfc_err(TFC_ERR_DTYPE, "%s: tensors[%d] ('%s') has dtype %s, not storable", fn, i, names[i],
                        tfc_dtype_name(tfc_tensor_dtype(tensors[i])));
        if (s != TFC_OK) break;
        e[i].name = names[i];
        e[i].t = tensors[i];
        e[i].align = tfc_dtype_size(tfc_tensor_dtype(tensors[i]));
        e[i].nbytes = (size_t)tfc_tensor_numel(tensors[i]) * e[i].align;
    }
    if (s == TFC_OK && n > 1) {
        qsort(e, (size_t)n, sizeof *e, by_name);
        for (int32_t i = 1; i < n && s == TFC_OK; i++)
            if (strcmp(e[i - 1].name, e[i].name) == 0)
                s = tfc_err(TFC_ERR_INVALID_ARG, "%s: the name '%s' appears twice", fn, e[i].name);
        qsort(e, (size_t)n, sizeof *e, by_align_then_name);
    }
    tfc_strbuf h = {0};
    size_t off = 0;
    if (s == TFC_OK) {
        tfc_sb_str(&h, "{");
        if (n_meta > 0) {
            tfc_sb_str(&h, "\"__metadata__\":{");
            for (int32_t i = 0; i < n_meta; i++) {
                if (i) tfc_sb_str(&h, ",");
                tfc_sb_json_string(&h, meta_keys[i]);
                tfc_sb_str(&h, ":");
                tfc_sb_json_string(&h, meta_values[i]);
            }
            tfc_sb_str(&h, "}");
        }
        for (int32_t i = 0; i < n; i++) {
            char num[64];
            if (i || n_meta > 0) tfc_sb_str(&h, ",");
            tfc_sb_json_string(&h, e[i].name);
            tfc_sb_str(&h, ":{\"dtype\":\"");
            tfc_sb_str(&h, st_name_of(tfc_tensor_dtype(e[i].t)));
            tfc_sb_str(&h, "\",\"shape\":[");
            int32_t nd = tfc_tensor_ndim(e[i].t);
            for (int32_t d = 0; d < nd; d++) {
                snprintf(num, sizeof num, "%s%lld", d ? "," : "", (long long)tfc_tensor_dim(e[i].t, d));
                tfc_sb_str(&h, num);
            }
            snprintf(num, sizeof num, "],\"data_offsets\":[%zu,%zu]}", off, off + e[i].nbytes);
            tfc_sb_str(&h, num);
            off += e[i].nbytes;
        }
        tfc_sb_str(&h, "}");
        while (!h.oom && h.n % 8) tfc_sb_str(&h, " ");
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
            if (s == TFC_OK) s = tfc_tensor_copy_to_host(e[i].t, buf, e[i].nbytes);
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

struct tfc_safetensors {
    st_tensor *tensors;
    int32_t n, cap;
    char **meta; /* 2 * n_meta strings: key, value, ... */
    int32_t n_meta, meta_cap;
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
    free(f);
}

static tfc_status parse_file(const char *fn, const unsigned char *buf, size_t len, tfc_safetensors *f) {
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
    for (int32_t i = 0; i < f->n; i++) {
        st_tensor *t = &f->tensors[i];
        TFC_TRY(tfc_tensor_from_data(data + t->begin, t->dims, t->ndim, t->dtype, &t->t));
    }
    return TFC_OK;
}

TFC_API tfc_status tfc_safetensors_load_buffer(const void *data, size_t len, tfc_safetensors **out) {
    const char *fn = "tfc_safetensors_load_buffer";
    TFC_CHECK_NOT_NULL(fn, out);
    if (!data && len) return tfc_err(TFC_ERR_INVALID_ARG, "%s: data is NULL", fn);
    tfc_safetensors *f = calloc(1, sizeof *f);
    if (!f) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    tfc_status s = parse_file(fn, data, len, f);
    if (s != TFC_OK) {
        tfc_safetensors_release(f);
        return s;
    }
    *out = f;
    return TFC_OK;
}

TFC_API tfc_status tfc_safetensors_load(const char *path, tfc_safetensors **out) {
    const char *fn = "tfc_safetensors_load";
    TFC_CHECK_NOT_NULL(fn, path);
    TFC_CHECK_NOT_NULL(fn, out);
    FILE *fp = fopen(path, "rb");
    if (!fp) return tfc_err(TFC_ERR_IO, "%s: cannot open '%s': %s", fn, path, strerror(errno));
    unsigned char *buf = NULL;
    long size = -1;
    if (fseek(fp, 0, SEEK_END) == 0) size = ftell(fp);
    if (size < 0 || fseek(fp, 0, SEEK_SET) != 0) {
        fclose(fp);
        return tfc_err(TFC_ERR_IO, "%s: cannot read '%s'", fn, path);
    }
    buf = malloc((size_t)size + 1);
    if (!buf) {
        fclose(fp);
        return tfc_err(TFC_ERR_OOM, "%s: out of memory for '%s' (%ld bytes)", fn, path, size);
    }
    size_t got = fread(buf, 1, (size_t)size, fp);
    fclose(fp);
    if (got != (size_t)size) {
        free(buf);
        return tfc_err(TFC_ERR_IO, "%s: short read of '%s'", fn, path);
    }
    tfc_safetensors *f = calloc(1, sizeof *f);
    tfc_status s = f ? parse_file(fn, buf, (size_t)size, f) : tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    free(buf);
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
