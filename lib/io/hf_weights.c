/*
 * Hugging Face weights directories (hf_weights.h): model.safetensors, or
 * model.safetensors.index.json and its shards.
 *
 * Reading: the index is parsed by jansson (json.h) with repeated keys
 * refused; its weight_map gives each tensor a shard. Every distinct shard
 * is loaded (mapped: safetensors_impl.h), then the two stories are held
 * against each other with both lists sorted by name, so every tensor is
 * found with a binary search and the first disagreement, in name order, is
 * the one reported:
 *   1. no tensor is in two shards;
 *   2. every tensor a shard holds is in the index, mapped to that shard;
 *   3. every tensor in the index is held by the shard it is mapped to.
 * Together: the index and the shards describe the same set of tensors, each
 * exactly once, so a contract sees every stored tensor and none twice.
 *
 * Writing follows transformers' save_pretrained (huggingface_hub's
 * split_torch_state_dict_into_shards): shards filled in the given order,
 * names model-%05d-of-%05d.safetensors, the index written last as
 * json.dumps(index, indent=2, sort_keys=True) writes it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/dtype.h"
#include "core/error.h"
#include "io/atomic_file.h"
#include "io/hf_weights.h"
#include "io/json.h"
#include "io/safetensors_impl.h"

#define SUFFIX ".safetensors"
#define MAX_SHARDS 99999 /* what %05d numbers */

struct tfc_hf_weights {
    char *path; /* the index, or model.safetensors */
    int32_t sharded;
    int32_t n_files;
    char **files; /* dir/shard, in name order */
    tfc_safetensors **st;
};

/* dir/name (malloc'd), without doubling a trailing slash of dir; NULL when out of memory. */
static char *join(const char *dir, const char *name) {
    const size_t n = strlen(dir);
    const int slash = n > 0 && dir[n - 1] == '/';
    char *p = malloc(n + strlen(name) + 2);
    if (p) sprintf(p, "%s%s%s", dir, slash ? "" : "/", name);
    return p;
}

void tfc_hf_weights_free(tfc_hf_weights *w) {
    if (!w) return;
    for (int32_t k = 0; k < w->n_files; k++) {
        free(w->files[k]);
        tfc_safetensors_release(w->st[k]);
    }
    free(w->files);
    free(w->st);
    free(w->path);
    free(w);
}

/* A new handle of n_files empty slots, path copied. */
static tfc_hf_weights *new_weights(const char *path, int32_t n_files, int32_t sharded) {
    tfc_hf_weights *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->sharded = sharded;
    w->path = strdup(path);
    w->files = calloc((size_t)n_files + 1, sizeof *w->files);
    w->st = calloc((size_t)n_files + 1, sizeof *w->st);
    if (!w->path || !w->files || !w->st) {
        tfc_hf_weights_free(w);
        return NULL;
    }
    w->n_files = n_files;
    return w;
}

/* ---- the index ---------------------------------------------------------------------------- */

/* One tensor: its name and the name of its shard (borrowed from the index's JSON or a loaded shard). */
typedef struct hf_entry {
    const char *name;
    const char *shard; /* the shard's file name, no directory */
    int32_t file;      /* for held tensors: the file index */
} hf_entry;

static int by_name(const void *a, const void *b) {
    return strcmp(((const hf_entry *)a)->name, ((const hf_entry *)b)->name);
}

static int by_string(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static const hf_entry *find(const hf_entry *e, size_t n, const char *name) {
    const hf_entry key = {name, NULL, 0};
    return bsearch(&key, e, n, sizeof *e, by_name);
}

/* Why a shard name of the index cannot be a file of the directory: NULL when it can. */
static const char *bad_shard_name(const char *s, size_t len) {
    const size_t n = strlen(s), k = strlen(SUFFIX);
    if (n != len) return "has a NUL byte";
    if (strchr(s, '/')) return "has a '/' (shards are files of the model's directory)";
    if (strstr(s, "..")) return "has '..' (shards are files of the model's directory)";
    if (n <= k || strcmp(s + n - k, SUFFIX) != 0) return "does not end in " SUFFIX;
    return NULL;
}

/*
 * The weight_map of index root (path for messages) as entries sorted by
 * tensor name (*e, *n; pointing into root) and the distinct shard names in
 * name order (*shards, *n_shards; pointing into root).
 */
static tfc_status read_map(const char *fn, const char *path, json_t *root, hf_entry **e, size_t *n,
                           const char ***shards, size_t *n_shards) {
    if (!json_is_object(root))
        return tfc_err(TFC_ERR_FORMAT,
                       "%s: '%s' is not a JSON object (a Hugging Face index is {\"metadata\": {...}, "
                       "\"weight_map\": {...}})",
                       fn, path);
    const json_t *meta = json_object_get(root, "metadata"), *map = json_object_get(root, "weight_map");
    if (meta && !json_is_object(meta))
        return tfc_err(TFC_ERR_FORMAT, "%s: '%s': \"metadata\" is not an object", fn, path);
    if (!map) return tfc_err(TFC_ERR_FORMAT, "%s: '%s' has no \"weight_map\"", fn, path);
    if (!json_is_object(map))
        return tfc_err(TFC_ERR_FORMAT, "%s: '%s': \"weight_map\" is not an object of tensor names to shard files", fn,
                       path);
    *n = json_object_size(map);
    *e = calloc(*n + 1, sizeof **e);
    *shards = calloc(*n + 1, sizeof **shards);
    if (!*e || !*shards) return tfc_err(TFC_ERR_OOM, "%s: out of memory reading '%s'", fn, path);
    size_t i = 0;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)map, k, v) {
        if (!json_is_string(v))
            return tfc_err(TFC_ERR_FORMAT, "%s: '%s': weight_map maps tensor '%s' to %s, not a shard file name", fn,
                           path, k, json_is_null(v) ? "null" : "a non-string");
        const char *why = bad_shard_name(json_string_value(v), json_string_length(v));
        if (why)
            return tfc_err(TFC_ERR_FORMAT, "%s: '%s': weight_map maps tensor '%s' to '%s', which %s", fn, path, k,
                           json_string_value(v), why);
        (*e)[i] = (hf_entry){k, json_string_value(v), -1};
        (*shards)[i++] = json_string_value(v);
    }
    qsort(*e, *n, sizeof **e, by_name);
    qsort(*shards, *n, sizeof **shards, by_string);
    size_t u = 0;
    for (size_t j = 0; j < *n; j++)
        if (u == 0 || strcmp((*shards)[u - 1], (*shards)[j]) != 0) (*shards)[u++] = (*shards)[j];
    *n_shards = u;
    return TFC_OK;
}

/* The first tensor (in name order) the index maps to shard name: for messages. */
static const char *a_tensor_of(const hf_entry *e, size_t n, const char *shard) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(e[i].shard, shard) == 0) return e[i].name;
    return "?";
}

/* Rules 1-3 of the header: the index's entries idx[n_idx] against what the shards of w hold. */
static tfc_status check_agree(const char *fn, const tfc_hf_weights *w, const hf_entry *idx, size_t n_idx) {
    size_t n_held = 0;
    for (int32_t k = 0; k < w->n_files; k++) n_held += (size_t)tfc_safetensors_count(w->st[k]);
    hf_entry *held = calloc(n_held + 1, sizeof *held);
    if (!held) return tfc_err(TFC_ERR_OOM, "%s: out of memory checking '%s'", fn, w->path);
    size_t j = 0;
    for (int32_t k = 0; k < w->n_files; k++)
        for (int32_t i = 0; i < tfc_safetensors_count(w->st[k]); i++) {
            const char *name = NULL;
            if (tfc_safetensors_get(w->st[k], i, &name, NULL) != TFC_OK) name = "";
            held[j++] = (hf_entry){name, strrchr(w->files[k], '/') + 1, k};
        }
    qsort(held, n_held, sizeof *held, by_name);
    tfc_status s = TFC_OK;
    for (size_t i = 1; i < n_held && s == TFC_OK; i++)
        if (strcmp(held[i - 1].name, held[i].name) == 0)
            s = tfc_err(TFC_ERR_FORMAT, "%s: tensor '%s' is in two shards, '%s' and '%s' (of '%s')", fn, held[i].name,
                        w->files[held[i - 1].file], w->files[held[i].file], w->path);
    for (size_t i = 0; i < n_held && s == TFC_OK; i++) {
        const hf_entry *x = find(idx, n_idx, held[i].name);
        if (!x)
            s = tfc_err(TFC_ERR_FORMAT, "%s: '%s' holds tensor '%s', which '%s' does not list", fn,
                        w->files[held[i].file], held[i].name, w->path);
        else if (strcmp(x->shard, held[i].shard) != 0)
            s = tfc_err(TFC_ERR_FORMAT, "%s: '%s' holds tensor '%s', which '%s' maps to '%s'", fn,
                        w->files[held[i].file], held[i].name, w->path, x->shard);
    }
    for (size_t i = 0; i < n_idx && s == TFC_OK; i++)
        if (!find(held, n_held, idx[i].name))
            s = tfc_err(TFC_ERR_FORMAT, "%s: '%s' maps tensor '%s' to '%s', which does not hold it", fn, w->path,
                        idx[i].name, idx[i].shard);
    free(held);
    return s;
}

/* The index at path of directory dir, its shards loaded and checked against it. */
static tfc_status open_sharded(const char *fn, const char *dir, const char *path, tfc_hf_weights **out) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return tfc_err(TFC_ERR_IO, "%s: cannot open '%s': %s", fn, path, strerror(errno));
    json_t *root = NULL;
    tfc_status s = tfc_json_read(fn, TFC_HF_INDEX_NAME, fp, TFC_HF_INDEX_MAX, TFC_JSON_REFUSE_DUPLICATES, &root);
    fclose(fp);
    if (s != TFC_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", tfc_last_error());
        return tfc_err(s, "%s ('%s')", why, path);
    }
    hf_entry *idx = NULL;
    const char **shards = NULL;
    size_t n_idx = 0, n_shards = 0;
    s = read_map(fn, path, root, &idx, &n_idx, &shards, &n_shards);
    tfc_hf_weights *w = NULL;
    if (s == TFC_OK && !(w = new_weights(path, (int32_t)n_shards, 1)))
        s = tfc_err(TFC_ERR_OOM, "%s: out of memory reading '%s'", fn, path);
    for (size_t k = 0; s == TFC_OK && k < n_shards; k++) {
        if (!(w->files[k] = join(dir, shards[k]))) {
            s = tfc_err(TFC_ERR_OOM, "%s: out of memory reading '%s'", fn, path);
            break;
        }
        struct stat st;
        if (stat(w->files[k], &st) != 0) {
            s = tfc_err(TFC_ERR_IO, "%s: cannot open '%s', the shard '%s' maps tensor '%s' to: %s", fn, w->files[k],
                        path, a_tensor_of(idx, n_idx, shards[k]), strerror(errno));
            break;
        }
        s = tfc_safetensors_load(w->files[k], &w->st[k]);
        if (s != TFC_OK) {
            char why[768];
            snprintf(why, sizeof why, "%s", tfc_last_error());
            s = tfc_err(s, "%s: %s (a shard of '%s')", fn, why, path);
        }
    }
    if (s == TFC_OK) s = check_agree(fn, w, idx, n_idx);
    free(idx);
    free(shards);
    json_decref(root);
    if (s != TFC_OK) {
        tfc_hf_weights_free(w);
        return s;
    }
    *out = w;
    return TFC_OK;
}

tfc_status tfc_hf_weights_open(const char *fn, const char *dir, tfc_hf_weights **out) {
    TFC_CHECK_NOT_NULL(fn, dir);
    TFC_CHECK_NOT_NULL(fn, out);
    char *single = join(dir, TFC_HF_SINGLE_NAME), *index = join(dir, TFC_HF_INDEX_NAME);
    tfc_status s = single && index ? TFC_OK : tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    struct stat st;
    tfc_hf_weights *w = NULL;
    if (s == TFC_OK && stat(single, &st) == 0) {
        /* transformers looks for the single file first: an index beside it is not read */
        if (!(w = new_weights(single, 1, 0))) s = tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
        if (s == TFC_OK && !(w->files[0] = strdup(single))) s = tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
        if (s == TFC_OK) s = tfc_err_in(fn, tfc_safetensors_load(single, &w->st[0]));
        if (s != TFC_OK) {
            tfc_hf_weights_free(w);
            w = NULL;
        }
    } else if (s == TFC_OK && stat(index, &st) == 0) {
        s = open_sharded(fn, dir, index, &w);
    } else if (s == TFC_OK) {
        s = tfc_err(TFC_ERR_IO, "%s: '%s' has neither %s nor %s: %s", fn, dir, TFC_HF_SINGLE_NAME, TFC_HF_INDEX_NAME,
                    strerror(errno));
    }
    free(single);
    free(index);
    if (s == TFC_OK) *out = w;
    return s;
}

int32_t tfc_hf_weights_sharded(const tfc_hf_weights *w) { return w ? w->sharded : 0; }
const char *tfc_hf_weights_path(const tfc_hf_weights *w) { return w ? w->path : NULL; }
int32_t tfc_hf_weights_file_count(const tfc_hf_weights *w) { return w ? w->n_files : 0; }

const char *tfc_hf_weights_file(const tfc_hf_weights *w, int32_t k) {
    return w && k >= 0 && k < w->n_files ? w->files[k] : NULL;
}

const tfc_safetensors *tfc_hf_weights_shard(const tfc_hf_weights *w, int32_t k) {
    return w && k >= 0 && k < w->n_files ? w->st[k] : NULL;
}

int32_t tfc_hf_weights_count(const tfc_hf_weights *w) {
    int64_t n = 0;
    for (int32_t k = 0; w && k < w->n_files; k++) n += tfc_safetensors_count(w->st[k]);
    return (int32_t)n;
}

int64_t tfc_hf_weights_numel(const tfc_hf_weights *w) {
    int64_t n = 0;
    for (int32_t k = 0; w && k < w->n_files; k++)
        for (int32_t i = 0; i < tfc_safetensors_count(w->st[k]); i++) {
            tfc_tensor *t = NULL;
            if (tfc_safetensors_get(w->st[k], i, NULL, &t) == TFC_OK) n += tfc_tensor_numel(t);
            tfc_tensor_release(t);
        }
    return n;
}

const char *tfc_hf_weights_metadata(const tfc_hf_weights *w, const char *key) {
    for (int32_t k = 0; w && key && k < w->n_files; k++) {
        const char *v = NULL;
        if (tfc_safetensors_metadata(w->st[k], key, &v) == TFC_OK && v) return v;
    }
    return NULL;
}

tfc_status tfc_contract_hold_hf_weights(tfc_contract *c, const tfc_hf_weights *w) {
    for (int32_t k = 0; k < w->n_files; k++)
        TFC_TRY(tfc_contract_hold_safetensors_in(c, w->st[k], w->sharded ? w->files[k] : NULL));
    return TFC_OK;
}

/* ---- writing ------------------------------------------------------------------------------- */

/* Remove dir/name if it is there. Errors: TFC_ERR_IO naming it. */
static tfc_status remove_if_there(const char *fn, const char *dir, const char *name) {
    char *p = join(dir, name);
    if (!p) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    tfc_status s = TFC_OK;
    if (unlink(p) != 0 && errno != ENOENT)
        s = tfc_err(TFC_ERR_IO, "%s: cannot remove the older '%s': %s", fn, p, strerror(errno));
    free(p);
    return s;
}

/* Make removals in dir durable before what depends on them is written. */
static void sync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

/* The index JSON, as json.dumps(index, indent=2, sort_keys=True) + "\n" writes it. */
static void index_json(tfc_strbuf *b, uint64_t total, hf_entry *e, size_t n) {
    char num[64];
    snprintf(num, sizeof num, "{\n  \"metadata\": {\n    \"total_size\": %llu\n  },\n", (unsigned long long)total);
    tfc_sb_str(b, num);
    tfc_sb_str(b, "  \"weight_map\": {\n");
    qsort(e, n, sizeof *e, by_name); /* UTF-8 byte order is code point order: Python's sort_keys */
    for (size_t i = 0; i < n; i++) {
        tfc_sb_str(b, "    ");
        tfc_sb_json_string(b, e[i].name);
        tfc_sb_str(b, ": ");
        tfc_sb_json_string(b, e[i].shard);
        tfc_sb_str(b, i + 1 < n ? ",\n" : "\n");
    }
    tfc_sb_str(b, "  }\n}\n");
}

/* The n + 1 metadata pairs of every file: the caller's, and "format": "pt" unless the caller gave a format. */
static int32_t file_meta(const char *const *keys, const char *const *values, int32_t n, const char **k,
                         const char **v) {
    int has_format = 0;
    for (int32_t i = 0; i < n; i++) {
        k[i] = keys[i];
        v[i] = values[i];
        has_format |= strcmp(keys[i], "format") == 0;
    }
    if (has_format) return n;
    k[n] = "format";
    v[n] = "pt";
    return n + 1;
}

/* Arguments the files' writer would meet one shard at a time, checked for the whole set first. */
static tfc_status check_save_args(const char *fn, const char *dir, const char *const *names, tfc_tensor *const *tensors,
                                  int32_t n, tfc_dtype dtype, const char *const *mk, const char *const *mv,
                                  int32_t n_meta) {
    TFC_CHECK_NOT_NULL(fn, dir);
    TFC_CHECK_NOT_NULL(fn, names);
    TFC_CHECK_NOT_NULL(fn, tensors);
    if (n < 1 || n_meta < 0) return tfc_err(TFC_ERR_INVALID_ARG, "%s: n is %d, n_meta is %d", fn, n, n_meta);
    if (n_meta > 0 && (!mk || !mv)) return tfc_err(TFC_ERR_INVALID_ARG, "%s: meta_keys or meta_values is NULL", fn);
    for (int32_t i = 0; i < n_meta; i++)
        if (!mk[i] || !mv[i])
            return tfc_err(TFC_ERR_INVALID_ARG, "%s: metadata pair %d has a NULL key or value", fn, i);
    if (dtype != TFC_DTYPE_F32 && dtype != TFC_DTYPE_BF16 && dtype != TFC_DTYPE_F16)
        return tfc_err(TFC_ERR_DTYPE, "%s: cannot store weights as %s (f32, bf16 or f16)", fn, tfc_dtype_name(dtype));
    for (int32_t i = 0; i < n; i++) {
        if (!names[i] || !names[i][0]) return tfc_err(TFC_ERR_INVALID_ARG, "%s: names[%d] is NULL or empty", fn, i);
        if (strcmp(names[i], "__metadata__") == 0)
            return tfc_err(TFC_ERR_INVALID_ARG, "%s: names[%d] is the reserved name __metadata__", fn, i);
        if (!tensors[i]) return tfc_err(TFC_ERR_INVALID_ARG, "%s: tensors[%d] ('%s') is NULL", fn, i, names[i]);
        if (!tfc_dtype_is_float(tfc_tensor_dtype(tensors[i])))
            return tfc_err(TFC_ERR_DTYPE, "%s: tensors[%d] ('%s') is %s, not a float tensor", fn, i, names[i],
                           tfc_dtype_name(tfc_tensor_dtype(tensors[i])));
    }
    /* a name twice in two shards would pass each shard's writer */
    const char **sorted = malloc((size_t)n * sizeof *sorted);
    if (!sorted) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    memcpy(sorted, names, (size_t)n * sizeof *sorted);
    qsort(sorted, (size_t)n, sizeof *sorted, by_string);
    tfc_status s = TFC_OK;
    for (int32_t i = 1; i < n && s == TFC_OK; i++)
        if (strcmp(sorted[i - 1], sorted[i]) == 0)
            s = tfc_err(TFC_ERR_INVALID_ARG, "%s: the name '%s' appears twice", fn, sorted[i]);
    free(sorted);
    return s;
}

/* Save's arguments and plan, shared by its steps. */
typedef struct hf_save {
    const char *fn, *dir;
    const char *const *names;
    tfc_tensor *const *tensors;
    int32_t n;
    tfc_dtype dtype;
    const char **mk, **mv; /* the files' metadata (file_meta) */
    int32_t n_mk;
    int32_t *shard_of; /* tensor i's shard, from 0 */
    int32_t n_shards;
    uint64_t total; /* stored bytes of all tensors */
} hf_save;

/* huggingface_hub's rule: a new shard when the next tensor would take this one past the limit. */
static void plan_shards(hf_save *p, uint64_t max_shard_bytes) {
    uint64_t in_shard = 0;
    p->n_shards = 0;
    p->total = 0;
    for (int32_t i = 0; i < p->n; i++) {
        const uint64_t bytes = (uint64_t)tfc_tensor_numel(p->tensors[i]) * tfc_dtype_size(p->dtype);
        if (max_shard_bytes && in_shard > 0 && in_shard + bytes > max_shard_bytes) {
            p->n_shards++;
            in_shard = 0;
        }
        p->shard_of[i] = p->n_shards;
        in_shard += bytes;
        p->total += bytes;
    }
    p->n_shards++;
}

static tfc_status save_single(const hf_save *p) {
    char *path = join(p->dir, TFC_HF_SINGLE_NAME);
    if (!path) return tfc_err(TFC_ERR_OOM, "%s: out of memory", p->fn);
    tfc_status s = tfc_safetensors_save_as(p->fn, path, p->names, p->tensors, p->n, p->dtype, p->mk, p->mv, p->n_mk);
    free(path);
    /* model.safetensors wins over an index, so a stale one cannot mislead a reader: removed to avoid doubt */
    if (s == TFC_OK) s = remove_if_there(p->fn, p->dir, TFC_HF_INDEX_NAME);
    return s;
}

/* The index of the shards named shard_names, written atomically. */
static tfc_status save_index(const hf_save *p, char (*shard_names)[48]) {
    hf_entry *e = calloc((size_t)p->n, sizeof *e);
    char *path = join(p->dir, TFC_HF_INDEX_NAME);
    tfc_strbuf b = {0};
    tfc_status s = e && path ? TFC_OK : tfc_err(TFC_ERR_OOM, "%s: out of memory", p->fn);
    if (s == TFC_OK) {
        for (int32_t i = 0; i < p->n; i++) e[i] = (hf_entry){p->names[i], shard_names[p->shard_of[i]], p->shard_of[i]};
        index_json(&b, p->total, e, (size_t)p->n);
        if (b.oom) s = tfc_err(TFC_ERR_OOM, "%s: out of memory for the index", p->fn);
    }
    tfc_atomic_file af = {0};
    if (s == TFC_OK) s = tfc_atomic_open(p->fn, path, &af);
    if (s == TFC_OK) {
        s = tfc_atomic_write(p->fn, &af, b.p, b.n);
        if (s == TFC_OK)
            s = tfc_atomic_commit(p->fn, &af);
        else
            tfc_atomic_abort(&af);
    }
    free(b.p);
    free(path);
    free(e);
    return s;
}

static tfc_status save_sharded(const hf_save *p) {
    /* no entry point while the shards are rewritten: an old index over new shards would look complete */
    TFC_TRY(remove_if_there(p->fn, p->dir, TFC_HF_INDEX_NAME));
    TFC_TRY(remove_if_there(p->fn, p->dir, TFC_HF_SINGLE_NAME));
    sync_dir(p->dir);
    char(*shard_names)[48] = calloc((size_t)p->n_shards, sizeof *shard_names);
    const char **sn = malloc((size_t)p->n * sizeof *sn);
    tfc_tensor **st = malloc((size_t)p->n * sizeof *st);
    tfc_status s = shard_names && sn && st ? TFC_OK : tfc_err(TFC_ERR_OOM, "%s: out of memory", p->fn);
    for (int32_t k = 0; s == TFC_OK && k < p->n_shards; k++) {
        snprintf(shard_names[k], sizeof shard_names[k], "model-%05d-of-%05d" SUFFIX, k + 1, p->n_shards);
        int32_t m = 0;
        for (int32_t i = 0; i < p->n; i++)
            if (p->shard_of[i] == k) {
                sn[m] = p->names[i];
                st[m++] = p->tensors[i];
            }
        char *path = join(p->dir, shard_names[k]);
        s = path ? tfc_safetensors_save_as(p->fn, path, sn, st, m, p->dtype, p->mk, p->mv, p->n_mk)
                 : tfc_err(TFC_ERR_OOM, "%s: out of memory", p->fn);
        free(path);
    }
    if (s == TFC_OK) s = save_index(p, shard_names); /* last: the index makes the shards a checkpoint */
    free(shard_names);
    free(sn);
    free(st);
    return s;
}

tfc_status tfc_hf_weights_save(const char *fn, const char *dir, const char *const *names, tfc_tensor *const *tensors,
                               int32_t n, tfc_dtype dtype, uint64_t max_shard_bytes, const char *const *meta_keys,
                               const char *const *meta_values, int32_t n_meta) {
    TFC_TRY(check_save_args(fn, dir, names, tensors, n, dtype, meta_keys, meta_values, n_meta));
    hf_save p = {.fn = fn, .dir = dir, .names = names, .tensors = tensors, .n = n, .dtype = dtype};
    p.mk = malloc(((size_t)n_meta + 1) * sizeof *p.mk);
    p.mv = malloc(((size_t)n_meta + 1) * sizeof *p.mv);
    p.shard_of = malloc((size_t)n * sizeof *p.shard_of);
    tfc_status s = p.mk && p.mv && p.shard_of ? TFC_OK : tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    if (s == TFC_OK) {
        p.n_mk = file_meta(meta_keys, meta_values, n_meta, p.mk, p.mv);
        plan_shards(&p, max_shard_bytes);
        if (p.n_shards > MAX_SHARDS)
            s = tfc_err(TFC_ERR_INVALID_ARG, "%s: %d shards of at most %llu bytes, more than the %d HF's names number",
                        fn, p.n_shards, (unsigned long long)max_shard_bytes, MAX_SHARDS);
        else
            s = p.n_shards == 1 ? save_single(&p) : save_sharded(&p);
    }
    free(p.mk);
    free(p.mv);
    free(p.shard_of);
    return s;
}
