/*
 * The loader contract (tensor_contract.h): a reader's wanted tensors
 * against what its file holds, every rule checked before anything is
 * written, then the values copied. The rules run in the header's order and
 * the first fault is reported; each rule is one function below.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "io/safetensors_impl.h"
#include "io/tensor_contract.h"
#include "tensor/tensor_impl.h"

/* ---- building ------------------------------------------------------------------------- */

static char *dup_or_null(const char *s, int *oom) {
    if (!s) return NULL;
    char *d = strdup(s);
    if (!d) *oom = 1;
    return d;
}

tfc_status tfc_contract_new(const char *fn, const char *file, const char *model, tfc_contract **out) {
    tfc_contract *c = calloc(1, sizeof *c);
    int oom = !c;
    if (c) {
        c->fn = fn;
        c->file = dup_or_null(file ? file : "", &oom);
        c->model = dup_or_null(model ? model : "the reader", &oom);
    }
    if (oom) {
        tfc_contract_free(c);
        return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    }
    *out = c;
    return TFC_OK;
}

void tfc_contract_free(tfc_contract *c) {
    if (!c) return;
    for (int32_t i = 0; i < c->n_want; i++) {
        free((char *)c->want[i].name);
        free((char *)c->want[i].alias);
        free((char *)c->want[i].hint);
    }
    for (int32_t i = 0; i < c->n_held; i++) {
        free((char *)c->held[i].name);
        free((char *)c->held[i].file);
        tfc_tensor_release(c->held[i].values);
    }
    for (int32_t k = 0; k < c->n_sym; k++) free(c->sym[k].name);
    for (int32_t k = 0; k < c->n_claim; k++) free(c->claim[k].who);
    free(c->want);
    free(c->held);
    free(c->match);
    free(c->file);
    free(c->model);
    free(c);
}

/* Room for one more element of size sz in *arr (cap *cap). */
static int grow(void **arr, int32_t n, int32_t *cap, size_t sz) {
    if (n < *cap) return 1;
    int32_t nc = *cap ? 2 * *cap : 16;
    void *p = realloc(*arr, (size_t)nc * sz);
    if (!p) return 0;
    *arr = p;
    *cap = nc;
    return 1;
}

tfc_status tfc_contract_want(tfc_contract *c, const tfc_want *w) {
    /* a want the reader built wrong is a bug of the reader, not of the file */
    if (!w->name || w->ndim < -1 || w->ndim > TFC_MAX_DIMS || w->same_as >= c->n_want ||
        w->presence < TFC_WANT_REQUIRED || w->presence > TFC_WANT_IGNORED)
        return tfc_err(TFC_ERR_INTERNAL, "%s: a wanted tensor of '%s' is malformed (%s)", c->fn, c->file,
                       w->name ? w->name : "no name");
    for (int32_t d = 0; d < w->ndim; d++)
        if (w->dims[d] < 0 && -1 - w->dims[d] >= c->n_sym)
            return tfc_err(TFC_ERR_INTERNAL, "%s: wanted tensor '%s' uses an undeclared symbol", c->fn, w->name);
    if (!grow((void **)&c->want, c->n_want, &c->cap_want, sizeof *c->want))
        return tfc_err(TFC_ERR_OOM, "%s: out of memory", c->fn);
    int oom = 0;
    tfc_want copy = *w;
    copy.name = dup_or_null(w->name, &oom);
    copy.alias = dup_or_null(w->alias, &oom);
    copy.hint = dup_or_null(w->hint, &oom);
    if (oom) {
        free((char *)copy.name);
        free((char *)copy.alias);
        free((char *)copy.hint);
        return tfc_err(TFC_ERR_OOM, "%s: out of memory", c->fn);
    }
    c->want[c->n_want++] = copy;
    c->checked = 0;
    return TFC_OK;
}

tfc_status tfc_contract_hold(tfc_contract *c, const tfc_held *h) {
    int oom = 0;
    char *name = dup_or_null(h->name ? h->name : "", &oom), *file = dup_or_null(h->file, &oom);
    if (oom || !grow((void **)&c->held, c->n_held, &c->cap_held, sizeof *c->held)) {
        free(name);
        free(file);
        tfc_tensor_release(h->values);
        return tfc_err(TFC_ERR_OOM, "%s: out of memory", c->fn);
    }
    tfc_held copy = *h;
    copy.name = name;
    copy.file = file;
    c->held[c->n_held++] = copy;
    c->checked = 0;
    return TFC_OK;
}

tfc_status tfc_contract_hold_safetensors_in(tfc_contract *c, const tfc_safetensors *f, const char *file) {
    for (int32_t i = 0; i < tfc_safetensors_count(f); i++) {
        tfc_held h = {0};
        TFC_TRY_IN(c->fn, tfc_safetensors_get(f, i, &h.name, &h.values));
        h.dtype = h.values->dtype;
        h.ndim = h.values->ndim;
        memcpy(h.dims, h.values->shape, sizeof h.dims);
        h.file = file;
        h.done = tfc_safetensors_done;
        TFC_TRY(tfc_contract_hold(c, &h));
    }
    return TFC_OK;
}

tfc_status tfc_contract_hold_safetensors(tfc_contract *c, const tfc_safetensors *f) {
    return tfc_contract_hold_safetensors_in(c, f, NULL);
}

tfc_status tfc_contract_add_symbol(tfc_contract *c, const char *name, int64_t lo, int64_t hi, int32_t *k) {
    if (c->n_sym == (int32_t)(sizeof c->sym / sizeof c->sym[0]))
        return tfc_err(TFC_ERR_INTERNAL, "%s: too many symbols in the contract for '%s'", c->fn, c->file);
    int oom = 0;
    char *n = dup_or_null(name, &oom);
    if (oom) return tfc_err(TFC_ERR_OOM, "%s: out of memory", c->fn);
    c->sym[c->n_sym] = (tfc_contract_sym){.name = n, .lo = lo, .hi = hi};
    *k = c->n_sym++;
    return TFC_OK;
}

tfc_status tfc_contract_add_claim(tfc_contract *c, int32_t k, int64_t value, const char *who) {
    if (k < 0 || k >= c->n_sym || c->n_claim == (int32_t)(sizeof c->claim / sizeof c->claim[0]))
        return tfc_err(TFC_ERR_INTERNAL, "%s: a bad claim in the contract for '%s'", c->fn, c->file);
    int oom = 0;
    char *w = dup_or_null(who, &oom);
    if (oom) return tfc_err(TFC_ERR_OOM, "%s: out of memory", c->fn);
    c->claim[c->n_claim++] = (tfc_contract_claim){.sym = k, .value = value, .who = w};
    return TFC_OK;
}

void tfc_contract_set_span(tfc_contract *c, uint64_t begin, uint64_t end) {
    c->spans = 1;
    c->data_begin = begin;
    c->data_end = end;
}

void tfc_contract_set_explain(tfc_contract *c, tfc_contract_explain explain, void *ctx) {
    c->explain = explain;
    c->explain_ctx = ctx;
}

/* ---- words ---------------------------------------------------------------------------- */

const char *tfc_contract_fmt_want(const tfc_contract *c, const tfc_want *w) {
    static _Thread_local char ring[4][160];
    static _Thread_local int next;
    char *b = ring[next++ % 4];
    size_t n = 0, cap = sizeof ring[0];
    if (w->ndim < 0) {
        snprintf(b, cap, "any shape");
        return b;
    }
    n += (size_t)snprintf(b + n, cap - n, "[");
    for (int32_t d = 0; d < w->ndim && n < cap; d++) {
        const int64_t v = w->dims[d];
        if (v >= 0)
            n += (size_t)snprintf(b + n, cap - n, "%s%lld", d ? "," : "", (long long)v);
        else
            n += (size_t)snprintf(b + n, cap - n, "%s%s", d ? "," : "", c->sym[-1 - v].name);
    }
    if (n < cap) snprintf(b + n, cap - n, "]");
    return b;
}

/* "a float dtype", or the accepted dtypes listed ("u8", "f32 or f64"). */
static const char *dtypes_text(uint32_t set, char *buf, size_t cap) {
    if (set == TFC_DTYPES_FLOAT) return "a float dtype";
    size_t n = 0;
    int first = 1;
    buf[0] = 0;
    for (int d = 0; d < 32 && n < cap; d++)
        if (set & TFC_DTYPE_BIT(d)) {
            const int last = (set >> (d + 1)) == 0;
            n += (size_t)snprintf(buf + n, cap - n, "%s%s",
                                  first      ? ""
                                      : last ? " or "
                                             : ", ",
                                  tfc_dtype_name((tfc_dtype)d));
            first = 0;
        }
    return buf;
}

static const char *hint_of(const tfc_want *w) { return w->hint ? w->hint : ""; }

/* The file a held tensor is in: its own (a shard's) when the reader named one, else the contract's. */
static const char *file_of(const tfc_contract *c, const tfc_held *h) { return h && h->file ? h->file : c->file; }

/* Report fault f: in the reader's words when it has them for f, else the contract's. */
static tfc_status fault(const tfc_contract *c, tfc_fault f) {
    if (c->explain) {
        tfc_status s = c->explain(c->explain_ctx, c, &f);
        if (s != TFC_OK) return s;
    }
    const tfc_want *w = f.want >= 0 ? &c->want[f.want] : NULL;
    const tfc_held *h = f.held >= 0 ? &c->held[f.held] : NULL;
    /* a fault about one held tensor names the file that holds it; one about the whole load, the contract's */
    const char *fn = c->fn, *file = file_of(c, h);
    char dt[96];
    switch (f.kind) {
    case TFC_FAULT_STRANGER:
        return tfc_err(TFC_ERR_FORMAT, "%s: '%s' holds a tensor '%s' that %s does not have", fn, file, h->name,
                       c->model);
    case TFC_FAULT_TWICE: {
        const char *other = file_of(c, &c->held[f.other]);
        if (strcmp(file, other) != 0)
            return tfc_err(TFC_ERR_FORMAT, "%s: '%s' holds tensor %s twice, as '%s' in '%s' and as '%s' in '%s'", fn,
                           c->file, w->name, h->name, file, c->held[f.other].name, other);
        return tfc_err(TFC_ERR_FORMAT, "%s: '%s' holds tensor %s twice, as '%s' and as '%s'", fn, file, w->name,
                       h->name, c->held[f.other].name);
    }
    case TFC_FAULT_MISSING:
        return tfc_err(TFC_ERR_FORMAT, "%s: '%s' has no tensor '%s'%s", fn, c->file, w->name, hint_of(w));
    case TFC_FAULT_GROUP:
        return tfc_err(TFC_ERR_FORMAT, "%s: '%s' has %s but not %s", fn, c->file, w->name, c->want[f.other].name);
    case TFC_FAULT_DTYPE:
        return tfc_err(TFC_ERR_FORMAT, "%s: '%s': tensor '%s' is %s, need %s%s", fn, file, h->name,
                       tfc_dtype_name(h->dtype), dtypes_text(w->dtypes, dt, sizeof dt), hint_of(w));
    case TFC_FAULT_SHAPE:
        return tfc_err(TFC_ERR_FORMAT, "%s: '%s' holds %s as %s, %s needs %s%s", fn, file, w->name,
                       tfc_fmt_dims(h->dims, h->ndim), c->model, tfc_contract_fmt_want(c, w), hint_of(w));
    case TFC_FAULT_SYM_RANGE:
        return tfc_err(TFC_ERR_FORMAT, "%s: '%s' holds %s as %s, %s needs %s with %lld <= %s <= %lld", fn, file,
                       w->name, tfc_fmt_dims(h->dims, h->ndim), c->model, tfc_contract_fmt_want(c, w),
                       (long long)c->sym[f.other].lo, c->sym[f.other].name, (long long)c->sym[f.other].hi);
    case TFC_FAULT_SYM_DIFFER:
        return tfc_err(TFC_ERR_FORMAT, "%s: '%s' holds %s as %s (%s = %lld) where earlier tensors have %s = %lld", fn,
                       file, w->name, tfc_fmt_dims(h->dims, h->ndim), c->sym[f.other].name, (long long)f.value,
                       c->sym[f.other].name, (long long)f.expected);
    case TFC_FAULT_NOT_SAME:
        return tfc_err(TFC_ERR_FORMAT, "%s: '%s' holds a tensor '%s' that is not a copy of '%s'%s", fn, file, w->name,
                       c->want[w->same_as].name, hint_of(w));
    case TFC_FAULT_CLAIM: {
        const tfc_contract_claim *cl = &c->claim[f.other];
        return tfc_err(TFC_ERR_FORMAT, "%s: '%s': %s says %s = %lld but the tensors have %s = %lld", fn, c->file,
                       cl->who, c->sym[cl->sym].name, (long long)f.expected, c->sym[cl->sym].name, (long long)f.value);
    }
    case TFC_FAULT_SPAN:
        if (h && h->end < h->begin)
            return tfc_err(TFC_ERR_FORMAT, "%s: '%s': tensor '%s' ends at byte %llu, before it starts at %llu", fn,
                           file, h->name, (unsigned long long)h->end, (unsigned long long)h->begin);
        if (h)
            return tfc_err(
                TFC_ERR_FORMAT, "%s: '%s': tensor '%s' starts at byte %lld where the bytes before end at %lld (%s)", fn,
                file, h->name, (long long)f.value, (long long)f.expected, f.value < f.expected ? "overlap" : "gap");
        return tfc_err(TFC_ERR_FORMAT, "%s: '%s' is %lld bytes but %s needs %lld (%s)", fn, c->file,
                       (long long)f.expected, c->model, (long long)f.value,
                       f.value > f.expected ? "truncated parameters" : "trailing bytes");
    }
    return tfc_err(TFC_ERR_INTERNAL, "%s: '%s': unknown contract fault %d", fn, c->file, (int)f.kind);
}

/* ---- the rules ------------------------------------------------------------------------ */

static tfc_fault at(tfc_fault_kind kind, int32_t want, int32_t held, int32_t other) {
    return (tfc_fault){.kind = kind, .want = want, .held = held, .other = other};
}

/* Rule 1: every held tensor matched to a want, under one name only. */
static tfc_status match_names(tfc_contract *c) {
    for (int32_t i = 0; i < c->n_want; i++) c->match[i] = -1;
    for (int32_t j = 0; j < c->n_held; j++) {
        const char *hn = c->held[j].name;
        int32_t i = 0;
        while (i < c->n_want && strcmp(c->want[i].name, hn) != 0 &&
               !(c->want[i].alias && strcmp(c->want[i].alias, hn) == 0))
            i++;
        if (i == c->n_want) return fault(c, at(TFC_FAULT_STRANGER, -1, j, -1));
        /* a name the file repeats is refused by its reader; here only the two names of one tensor can meet */
        if (c->match[i] >= 0) return fault(c, at(TFC_FAULT_TWICE, i, c->match[i], j));
        c->match[i] = j;
    }
    return TFC_OK;
}

/* Rule 2: required ones present; a group all or nothing. */
static tfc_status check_presence(const tfc_contract *c) {
    for (int32_t i = 0; i < c->n_want; i++)
        if (c->want[i].presence == TFC_WANT_REQUIRED && c->match[i] < 0)
            return fault(c, at(TFC_FAULT_MISSING, i, -1, -1));
    for (int32_t i = 0; i < c->n_want; i++) {
        if (c->want[i].group <= 0 || c->match[i] < 0) continue;
        for (int32_t k = 0; k < c->n_want; k++)
            if (c->want[k].group == c->want[i].group && c->match[k] < 0)
                return fault(c, at(TFC_FAULT_GROUP, i, c->match[i], k));
    }
    return TFC_OK;
}

/* Rule 3: dtypes, before anything converts them. */
static tfc_status check_dtypes(const tfc_contract *c) {
    for (int32_t i = 0; i < c->n_want; i++) {
        const int32_t j = c->match[i];
        if (j < 0 || c->want[i].presence == TFC_WANT_IGNORED || !c->want[i].dtypes) continue;
        if (!((c->want[i].dtypes >> (unsigned)c->held[j].dtype) & 1u)) return fault(c, at(TFC_FAULT_DTYPE, i, j, -1));
    }
    return TFC_OK;
}

/* Rule 4: shapes, each symbol bound once within its bounds. */
static tfc_status check_shapes(tfc_contract *c) {
    for (int32_t k = 0; k < c->n_sym; k++) c->sym[k].bound = 0;
    for (int32_t i = 0; i < c->n_want; i++) {
        const tfc_want *w = &c->want[i];
        const int32_t j = c->match[i];
        if (j < 0 || w->presence == TFC_WANT_IGNORED || w->ndim < 0) continue;
        const tfc_held *h = &c->held[j];
        if (h->ndim != w->ndim) return fault(c, at(TFC_FAULT_SHAPE, i, j, -1));
        for (int32_t d = 0; d < w->ndim; d++)
            if (w->dims[d] >= 0 && h->dims[d] != w->dims[d]) return fault(c, at(TFC_FAULT_SHAPE, i, j, -1));
        for (int32_t d = 0; d < w->ndim; d++) {
            if (w->dims[d] >= 0) continue;
            const int32_t k = (int32_t)(-1 - w->dims[d]);
            tfc_contract_sym *s = &c->sym[k];
            if (s->bound && h->dims[d] != s->value) {
                tfc_fault f = at(TFC_FAULT_SYM_DIFFER, i, j, k);
                f.value = h->dims[d];
                f.expected = s->value;
                return fault(c, f);
            }
            if (h->dims[d] < s->lo || h->dims[d] > s->hi) {
                tfc_fault f = at(TFC_FAULT_SYM_RANGE, i, j, k);
                f.value = h->dims[d];
                return fault(c, f);
            }
            s->bound = 1;
            s->value = h->dims[d];
        }
    }
    return TFC_OK;
}

/* The bytes of t (contiguous, on the CPU) when it has any: NULL otherwise. */
static const void *host_bytes(const tfc_tensor *t) {
    if (!t || t->storage->device != TFC_DEVICE_CPU || !tfc_tensor_is_contiguous(t)) return NULL;
    return (const char *)t->storage->data + (size_t)t->offset * tfc_dtype_size(t->dtype);
}

/* Bytes of a held tensor read or copied between two calls of its done hook. */
#define CONTRACT_STEP ((size_t)8 << 20)

static void done_with(const tfc_held *h, uint64_t from, uint64_t to) {
    if (h->done) h->done(h->done_ctx, h->values, from, to);
}

/* Whether n bytes at pa and pb are equal, compared a step at a time, each step given back to a's and b's readers. */
static int same_bytes(const tfc_held *a, const void *pa, const tfc_held *b, const void *pb, size_t n) {
    for (size_t at_byte = 0; at_byte < n; at_byte += CONTRACT_STEP) {
        const size_t len = n - at_byte < CONTRACT_STEP ? n - at_byte : CONTRACT_STEP;
        const int eq = memcmp((const char *)pa + at_byte, (const char *)pb + at_byte, len) == 0;
        done_with(a, at_byte, at_byte + len);
        done_with(b, at_byte, at_byte + len);
        if (!eq) return 0;
    }
    return 1;
}

/* Rule 5: a tensor that repeats another holds its bytes (same dtype, same shape, same values). */
static tfc_status check_twins(const tfc_contract *c) {
    for (int32_t i = 0; i < c->n_want; i++) {
        const tfc_want *w = &c->want[i];
        const int32_t j = c->match[i];
        if (j < 0 || w->same_as < 0) continue;
        const int32_t k = c->match[w->same_as];
        const tfc_held *a = &c->held[j], *b = k >= 0 ? &c->held[k] : NULL;
        int same = b && a->dtype == b->dtype && a->ndim == b->ndim &&
            memcmp(a->dims, b->dims, (size_t)a->ndim * sizeof a->dims[0]) == 0;
        const void *pa = same ? host_bytes(a->values) : NULL, *pb = same ? host_bytes(b->values) : NULL;
        if (same && pa && pb)
            same = same_bytes(a, pa, b, pb, (size_t)tfc_tensor_numel(a->values) * tfc_dtype_size(a->dtype));
        else
            same = 0; /* nothing to compare is no proof of a copy */
        if (!same) return fault(c, at(TFC_FAULT_NOT_SAME, i, j, -1));
    }
    return TFC_OK;
}

/* Rule 6: metadata that says what a symbol is agrees with the tensors that bound it. */
static tfc_status check_claims(const tfc_contract *c) {
    for (int32_t q = 0; q < c->n_claim; q++) {
        const tfc_contract_claim *cl = &c->claim[q];
        const tfc_contract_sym *s = &c->sym[cl->sym];
        if (!s->bound || s->value == cl->value) continue; /* unbound: no tensor to hold it against */
        tfc_fault f = at(TFC_FAULT_CLAIM, -1, -1, q);
        f.value = s->value;
        f.expected = cl->value;
        return fault(c, f);
    }
    return TFC_OK;
}

/* Rule 7: the spans, in file order, tile [data_begin, data_end). */
static tfc_status check_spans(const tfc_contract *c) {
    if (!c->spans) return TFC_OK;
    uint64_t at_byte = c->data_begin;
    for (int32_t j = 0; j < c->n_held; j++) {
        const tfc_held *h = &c->held[j];
        if (h->begin != at_byte || h->end < h->begin) {
            tfc_fault f = at(TFC_FAULT_SPAN, -1, j, -1);
            f.value = (int64_t)h->begin;
            f.expected = (int64_t)at_byte;
            return fault(c, f);
        }
        at_byte = h->end;
    }
    if (at_byte != c->data_end) {
        tfc_fault f = at(TFC_FAULT_SPAN, -1, -1, -1);
        f.value = (int64_t)at_byte;
        f.expected = (int64_t)c->data_end;
        return fault(c, f);
    }
    return TFC_OK;
}

tfc_status tfc_contract_check(tfc_contract *c) {
    c->checked = 0;
    free(c->match);
    c->match = malloc(((size_t)c->n_want + 1) * sizeof *c->match);
    if (!c->match) return tfc_err(TFC_ERR_OOM, "%s: out of memory", c->fn);
    TFC_TRY_IN(c->fn, match_names(c));
    TFC_TRY_IN(c->fn, check_presence(c));
    TFC_TRY_IN(c->fn, check_dtypes(c));
    TFC_TRY_IN(c->fn, check_shapes(c));
    TFC_TRY_IN(c->fn, check_twins(c));
    TFC_TRY_IN(c->fn, check_claims(c));
    TFC_TRY_IN(c->fn, check_spans(c));
    c->checked = 1;
    return TFC_OK;
}

/* Rows [r0, r0 + n) of t (dim 0) as a view. */
static tfc_status rows_of(const tfc_tensor *t, int64_t r0, int64_t n, tfc_tensor **out) {
    int64_t shape[TFC_MAX_DIMS];
    memcpy(shape, t->shape, sizeof shape);
    shape[0] = n;
    return tfc_tensor_alias(t, shape, t->strides, t->ndim, t->offset + r0 * t->strides[0], out);
}

/*
 * h's values into dest (same shape). Values a done hook is waiting on, on
 * the host and contiguous, go over in steps of whole rows of about
 * CONTRACT_STEP bytes, each step's source bytes handed to the hook as soon
 * as they are copied: the source of a large tensor (an embedding of
 * 150 MB) never sits in memory whole beside its destination.
 */
static tfc_status copy_held(const char *fn, tfc_tensor *dest, const tfc_held *h) {
    const tfc_tensor *v = h->values;
    const uint64_t bytes = (uint64_t)tfc_numel(v) * tfc_dtype_size(v->dtype);
    const int64_t rows = v->ndim > 0 ? v->shape[0] : 1;
    if (!h->done || !host_bytes(v) || rows < 2 || bytes <= CONTRACT_STEP) {
        TFC_TRY_IN(fn, tfc_tensor_copy_from(dest, v));
        done_with(h, 0, bytes);
        return TFC_OK;
    }
    const uint64_t row_bytes = bytes / (uint64_t)rows;
    const int64_t step = row_bytes >= CONTRACT_STEP ? 1 : (int64_t)(CONTRACT_STEP / row_bytes);
    for (int64_t r = 0; r < rows; r += step) {
        const int64_t n = rows - r < step ? rows - r : step;
        tfc_tensor *sv = NULL, *dv = NULL;
        tfc_status s = rows_of(v, r, n, &sv);
        if (s == TFC_OK) s = rows_of(dest, r, n, &dv);
        if (s == TFC_OK) s = tfc_tensor_copy_from(dv, sv);
        tfc_tensor_release(sv);
        tfc_tensor_release(dv);
        TFC_TRY_IN(fn, s);
        done_with(h, (uint64_t)r * row_bytes, (uint64_t)(r + n) * row_bytes);
    }
    return TFC_OK;
}

tfc_status tfc_contract_copy(tfc_contract *c) {
    if (!c->checked)
        return tfc_err(TFC_ERR_INTERNAL, "%s: '%s' copied before its contract was checked", c->fn, c->file);
    for (int32_t i = 0; i < c->n_want; i++) {
        const tfc_want *w = &c->want[i];
        const int32_t j = c->match[i];
        if (j < 0 || !w->dest || w->presence == TFC_WANT_IGNORED) continue;
        const tfc_tensor *v = c->held[j].values;
        if (!v || v->ndim != w->dest->ndim || memcmp(v->shape, w->dest->shape, (size_t)v->ndim * sizeof v->shape[0]))
            return tfc_err(TFC_ERR_INTERNAL, "%s: '%s': the values of %s (%s) do not fit their destination %s", c->fn,
                           file_of(c, &c->held[j]), w->name, v ? tfc_fmt_dims(v->shape, v->ndim) : "none",
                           tfc_fmt_dims(w->dest->shape, w->dest->ndim));
        TFC_TRY(copy_held(c->fn, w->dest, &c->held[j]));
    }
    return TFC_OK;
}

tfc_status tfc_contract_load(tfc_contract *c) {
    TFC_TRY(tfc_contract_check(c));
    return tfc_contract_copy(c);
}

const tfc_held *tfc_contract_found(const tfc_contract *c, int32_t i) {
    if (!c->checked || i < 0 || i >= c->n_want || c->match[i] < 0) return NULL;
    return &c->held[c->match[i]];
}

int64_t tfc_contract_sym_value(const tfc_contract *c, int32_t k) {
    return c->checked && k >= 0 && k < c->n_sym && c->sym[k].bound ? c->sym[k].value : -1;
}
