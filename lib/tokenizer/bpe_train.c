/*
 * BPE training (minbpe's algorithm, with incremental pair counts).
 *
 * The textbook procedure: split the text into chunks; each chunk starts as
 * its bytes; repeat vocab_size - 256 times: count every adjacent pair in
 * every chunk, take the most frequent pair (a, b), give it the next id,
 * and replace each occurrence of a b, left to right without overlap, by it.
 *
 * Here the counting is not redone each step:
 *   - equal chunks are stored once with their count (the weight of each of
 *     their symbols), so tinyshakespeare's 300k chunks become ~25k words;
 *   - every pair keeps its total count and the positions where it may
 *     occur; merging (a, b) visits only its own positions and adjusts the
 *     counts of the neighbouring pairs it destroys (x a, b y) and creates
 *     (x n, n y);
 *   - the next pair comes from a max-heap of (count, pair); a pair whose
 *     count changed gets a fresh entry, and popped entries whose count is
 *     no longer current are dropped.
 * Tie-break (documented in docs/TOKENIZER.md): among pairs with the same
 * count the one with the smallest left id wins, then the smallest right
 * id. (minbpe takes the pair seen first in the text; counts are the same.)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_impl.h"

typedef struct pair_stat {
    int64_t count;
    int32_t *occ; /* positions where the pair may start (checked when used) */
    int32_t n_occ, cap_occ;
    int64_t stamp; /* last merge step that touched the count */
    uint64_t key;  /* the pair, as pair_key(left, right) */
} pair_stat;

typedef struct heap_entry {
    int64_t count;
    uint64_t key;
} heap_entry;

typedef struct trainer {
    int32_t *sym, *next, *prev; /* symbols of all words; sym -1 = merged away */
    int64_t *weight;            /* count of the word each symbol belongs to */
    size_t n_sym;
    pair_map index; /* pair -> position in stats (in the rank field) */
    pair_stat *stats;
    int32_t n_stats, cap_stats;
    heap_entry *heap;
    size_t n_heap, cap_heap;
    int32_t *touched;
    size_t n_touched, cap_touched;
    int64_t step;
} trainer;

static int better(heap_entry x, heap_entry y) { return x.count > y.count || (x.count == y.count && x.key < y.key); }

static int heap_push(trainer *tr, int64_t count, uint64_t key) {
    if (tr->n_heap == tr->cap_heap) {
        size_t cap = tr->cap_heap ? tr->cap_heap * 2 : 4096;
        heap_entry *h = realloc(tr->heap, cap * sizeof *h);
        if (!h) return -1;
        tr->heap = h;
        tr->cap_heap = cap;
    }
    heap_entry x = {count, key};
    size_t i = tr->n_heap++;
    while (i > 0 && better(x, tr->heap[(i - 1) / 2])) {
        tr->heap[i] = tr->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    tr->heap[i] = x;
    return 0;
}

static heap_entry heap_pop(trainer *tr) {
    heap_entry top = tr->heap[0], x = tr->heap[--tr->n_heap];
    size_t i = 0, n = tr->n_heap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && better(tr->heap[c + 1], tr->heap[c])) c++;
        if (!better(tr->heap[c], x)) break;
        tr->heap[i] = tr->heap[c];
        i = c;
    }
    if (n) tr->heap[i] = x;
    return top;
}

/* Add delta to the count of (a, b), noting pos as a place it occurs (pos >= 0). */
static int add_pair(trainer *tr, int32_t a, int32_t b, int64_t delta, int32_t pos) {
    uint64_t key = pair_key(a, b);
    pair_slot *slot = pair_map_find(&tr->index, key);
    int32_t k;
    if (slot->key != PAIR_EMPTY) {
        k = slot->rank;
    } else {
        if (tr->n_stats == tr->cap_stats) {
            int32_t cap = tr->cap_stats ? tr->cap_stats * 2 : 4096;
            pair_stat *s = realloc(tr->stats, (size_t)cap * sizeof *s);
            if (!s) return -1;
            tr->stats = s;
            tr->cap_stats = cap;
        }
        k = tr->n_stats++;
        memset(&tr->stats[k], 0, sizeof tr->stats[k]);
        tr->stats[k].stamp = -1;
        tr->stats[k].key = key;
        if (pair_map_put(&tr->index, a, b, k, 0) < 0) return -1;
    }
    pair_stat *st = &tr->stats[k];
    st->count += delta;
    if (st->stamp != tr->step) {
        st->stamp = tr->step;
        if (tr->n_touched == tr->cap_touched) {
            size_t cap = tr->cap_touched ? tr->cap_touched * 2 : 1024;
            int32_t *t = realloc(tr->touched, cap * sizeof *t);
            if (!t) return -1;
            tr->touched = t;
            tr->cap_touched = cap;
        }
        tr->touched[tr->n_touched++] = k;
    }
    if (pos >= 0) {
        if (st->n_occ == st->cap_occ) {
            int32_t cap = st->cap_occ ? st->cap_occ * 2 : 4;
            int32_t *o = realloc(st->occ, (size_t)cap * sizeof *o);
            if (!o) return -1;
            st->occ = o;
            st->cap_occ = cap;
        }
        st->occ[st->n_occ++] = pos;
    }
    return 0;
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Lay the distinct chunks out as symbol lists and count their pairs. */
static int trainer_init(trainer *tr, const byte_map *chunks) {
    size_t total = 0;
    for (size_t i = 0; i <= chunks->mask; i++)
        if (chunks->slots[i].hash && chunks->slots[i].len > 1) total += chunks->slots[i].len;
    if (total >= INT32_MAX) return -2;
    tr->sym = malloc((total + 1) * sizeof *tr->sym);
    tr->next = malloc((total + 1) * sizeof *tr->next);
    tr->prev = malloc((total + 1) * sizeof *tr->prev);
    tr->weight = malloc((total + 1) * sizeof *tr->weight);
    /*
     * The text holds at most total - 1 distinct pairs at first (at most 2^16
     * byte pairs); merges add more and the map grows then. Sizing it by
     * the text keeps a short text from paying for a 2 MiB table.
     */
    size_t first_pairs = total < (1u << 16) ? total : (1u << 16);
    if (!tr->sym || !tr->next || !tr->prev || !tr->weight || pair_map_init(&tr->index, first_pairs)) return -1;
    size_t n = 0;
    for (size_t i = 0; i <= chunks->mask; i++) {
        const byte_slot *s = &chunks->slots[i];
        if (!s->hash || s->len < 2) continue;
        const uint8_t *p = chunks->arena + s->off;
        for (size_t k = 0; k < s->len; k++) {
            tr->sym[n + k] = p[k];
            tr->weight[n + k] = s->value;
            tr->prev[n + k] = k ? (int32_t)(n + k - 1) : -1;
            tr->next[n + k] = k + 1 < s->len ? (int32_t)(n + k + 1) : -1;
            if (k && add_pair(tr, p[k - 1], p[k], s->value, (int32_t)(n + k - 1))) return -1;
        }
        n += s->len;
    }
    tr->n_sym = n;
    for (int32_t k = 0; k < tr->n_stats; k++)
        if (heap_push(tr, tr->stats[k].count, tr->stats[k].key)) return -1;
    return 0;
}

static void trainer_free(trainer *tr) {
    free(tr->sym);
    free(tr->next);
    free(tr->prev);
    free(tr->weight);
    for (int32_t k = 0; k < tr->n_stats; k++) free(tr->stats[k].occ);
    free(tr->stats);
    pair_map_free(&tr->index);
    free(tr->heap);
    free(tr->touched);
}

/* Replace every (a, b) by id, left to right; -1 when out of memory. */
static int apply_merge(trainer *tr, int32_t k, int32_t a, int32_t b, int32_t id) {
    int32_t *occ = tr->stats[k].occ, n_occ = tr->stats[k].n_occ;
    tr->stats[k].occ = NULL;
    tr->stats[k].n_occ = tr->stats[k].cap_occ = 0;
    if (n_occ > 1) qsort(occ, (size_t)n_occ, sizeof *occ, cmp_i32); /* left to right within each word */
    tr->step++;
    tr->n_touched = 0;
    int rc = 0;
    for (int32_t q = 0; q < n_occ && rc == 0; q++) {
        int32_t i = occ[q], j = tr->next[i];
        if (tr->sym[i] != a || j < 0 || tr->sym[j] != b) continue; /* stale or overlapped */
        int32_t x = tr->prev[i], y = tr->next[j];
        int64_t w = tr->weight[i];
        rc |= add_pair(tr, a, b, -w, -1);
        if (x >= 0) rc |= add_pair(tr, tr->sym[x], a, -w, -1);
        if (y >= 0) rc |= add_pair(tr, b, tr->sym[y], -w, -1);
        tr->sym[i] = id;
        tr->sym[j] = -1;
        tr->next[i] = y;
        if (y >= 0) tr->prev[y] = i;
        if (x >= 0) rc |= add_pair(tr, tr->sym[x], id, w, x);
        if (y >= 0) rc |= add_pair(tr, id, tr->sym[y], w, i);
    }
    free(occ);
    for (size_t q = 0; q < tr->n_touched && rc == 0; q++) {
        int32_t t = tr->touched[q];
        if (t != k && tr->stats[t].count > 0) rc |= heap_push(tr, tr->stats[t].count, tr->stats[t].key);
    }
    return rc ? -1 : 0;
}

/*
 * Learn up to n_merges merges over the counted chunks; merges[m] = (a, b)
 * gets id 256 + m. *n_done says how many were found.
 */
static tfc_status learn(const char *fn, const byte_map *chunks, int32_t n_merges, tfc_merge *merges, int32_t *n_done) {
    trainer tr = {0};
    int rc = trainer_init(&tr, chunks);
    int32_t m = 0;
    while (rc == 0 && m < n_merges && tr.n_heap > 0) {
        heap_entry top = heap_pop(&tr);
        int32_t a = (int32_t)(top.key >> 32), b = (int32_t)(uint32_t)top.key;
        pair_slot *s = pair_map_find(&tr.index, top.key);
        if (s->key != top.key) continue;
        int32_t k = s->rank;
        if (tr.stats[k].count != top.count || top.count <= 0) continue; /* stale entry */
        int32_t id = 256 + m;
        merges[m] = (tfc_merge){a, b, id, id};
        m++;
        rc = apply_merge(&tr, k, a, b, id);
    }
    trainer_free(&tr);
    if (rc == -2) return tfc_err(TFC_ERR_OOM, "%s: the distinct chunks hold 2^31 or more bytes", fn);
    if (rc) return tfc_err(TFC_ERR_OOM, "%s: out of memory while training", fn);
    *n_done = m;
    return TFC_OK;
}

/* Add the chunks of text (split with t's pattern) to the counts. */
static tfc_status count_chunks(const char *fn, const tfc_tokenizer *t, const uint8_t *text, size_t len,
                               byte_map *chunks) {
    split_iter it;
    TFC_TRY(split_iter_init(fn, &it, &t->split, text, len));
    size_t a, b;
    int rc, added;
    tfc_status s = TFC_OK;
    while ((rc = split_next(fn, &it, &a, &b)) > 0) {
        byte_slot *slot = byte_map_upsert(chunks, text + a, b - a, 0, &added);
        if (!slot) {
            s = tfc_err(TFC_ERR_OOM, "%s: out of memory counting chunks", fn);
            break;
        }
        slot->value++;
    }
    if (rc < 0) s = (tfc_status)rc;
    split_iter_free(&it);
    return s;
}

static tfc_status check_trainable(const char *fn, const tfc_tokenizer *t, int32_t vocab_size) {
    if (vocab_size < 256 || vocab_size > TFC_TOKENIZER_MAX_ID)
        return tfc_err(TFC_ERR_INVALID_ARG, "%s: vocab_size is %d, expected 256 to 2^30", fn, (int)vocab_size);
    int fresh = t->n_merges == 0;
    for (int32_t id = 0; id < t->n_ids && fresh; id++)
        if (t->tok_kind[id] == TOK_ORDINARY && (id >= 256 || t->span[id].len != 1 || tok_bytes(t, id)[0] != id))
            fresh = 0;
    if (!fresh)
        return tfc_err(TFC_ERR_INVALID_ARG,
                       "%s: tokenizer already has merges; only a fresh one from "
                       "tfc_tokenizer_new can be trained",
                       fn);
    for (int32_t k = 0; k < t->n_special; k++)
        if (t->special_ids[k] < vocab_size)
            return tfc_err(TFC_ERR_INVALID_ARG,
                           "%s: special token %d is below vocab_size %d; give special tokens "
                           "ids >= vocab_size",
                           fn, (int)t->special_ids[k], (int)vocab_size);
    return TFC_OK;
}

/* Learn from the counted chunks and, only when everything succeeded, swap the result into t. */
static tfc_status train_from_chunks(const char *fn, tfc_tokenizer *t, const byte_map *chunks, int32_t vocab_size) {
    int32_t n_merges = vocab_size - 256, done = 0;
    /*
     * Each merge shortens some distinct chunk by one token, so the text
     * allows at most sum(len - 1) of them: size the table by that, not by
     * vocab_size alone (2^30 asked 16 GiB for a few bytes of text).
     */
    int64_t possible = 0;
    for (size_t i = 0; i <= chunks->mask && possible < n_merges; i++)
        if (chunks->slots[i].hash) possible += chunks->slots[i].len - 1;
    if (possible < n_merges) n_merges = (int32_t)possible;
    tfc_merge *merges = malloc(((size_t)n_merges + 1) * sizeof *merges);
    if (!merges) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    tfc_status s = learn(fn, chunks, n_merges, merges, &done);
    tfc_tokenizer *u = NULL;
    if (s == TFC_OK) s = tok_create(fn, t->split.pattern, &u);
    uint8_t *buf = NULL;
    if (s == TFC_OK && !(buf = malloc(1 << 16))) s = tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    for (int b = 0; b < 256 && s == TFC_OK; b++) {
        uint8_t c = (uint8_t)b;
        s = tok_set_token(fn, u, b, &c, 1, TOK_ORDINARY);
    }
    size_t cap = 1 << 16;
    for (int32_t m = 0; m < done && s == TFC_OK; m++) {
        size_t la = u->span[merges[m].left].len, lb = u->span[merges[m].right].len;
        if (la + lb > cap) {
            uint8_t *g = realloc(buf, la + lb);
            if (!g) {
                s = tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
                break;
            }
            buf = g;
            cap = la + lb;
        }
        memcpy(buf, tok_bytes(u, merges[m].left), la);
        memcpy(buf + la, tok_bytes(u, merges[m].right), lb);
        s = tok_set_token(fn, u, merges[m].id, buf, la + lb, TOK_ORDINARY);
        if (s == TFC_OK) s = tok_add_merge(fn, u, merges[m].left, merges[m].right, merges[m].id, merges[m].rank);
    }
    free(buf);
    free(merges);
    for (int32_t k = 0; k < t->n_special && s == TFC_OK; k++) {
        int32_t id = t->special_ids[k];
        char text[TFC_SPECIAL_MAX_LEN + 1];
        memcpy(text, tok_bytes(t, id), t->span[id].len);
        text[t->span[id].len] = 0;
        s = tfc_tokenizer_add_special(u, text, id);
    }
    if (s == TFC_OK) s = tok_finalize(fn, u);
    if (s != TFC_OK) {
        tfc_tokenizer_release(u);
        return s;
    }
    tfc_tokenizer old = *t; /* swap contents so the caller's handle stays valid */
    *t = *u;
    *u = old;
    tfc_tokenizer_release(u);
    return TFC_OK;
}

TFC_API tfc_status tfc_tokenizer_train(tfc_tokenizer *t, const char *text, size_t len, int32_t vocab_size) {
    static const char fn[] = "tfc_tokenizer_train";
    TFC_CHECK_NOT_NULL_AS(fn, t, "tok");
    if (!text && len > 0) return tfc_err(TFC_ERR_INVALID_ARG, "%s: text is NULL and len is %zu", fn, len);
    TFC_TRY(check_trainable(fn, t, vocab_size));
    byte_map chunks; /* a text of len bytes has at most len distinct chunks */
    if (byte_map_init(&chunks, len < (1u << 12) ? len : (1u << 12)))
        return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    tfc_status s = count_chunks(fn, t, (const uint8_t *)text, len, &chunks);
    if (s == TFC_OK) s = train_from_chunks(fn, t, &chunks, vocab_size);
    byte_map_free(&chunks);
    return s;
}

#define BLOCK (1 << 20)

/* Count one file's chunks, block by block, cutting only at split_safe_cut points. */
static tfc_status count_file(const char *fn, const tfc_tokenizer *t, const char *path, byte_map *chunks) {
    if (t->split.pattern == TFC_SPLIT_NONE) {
        uint8_t *data;
        size_t len;
        TFC_TRY(tok_read_file(fn, path, &data, &len));
        tfc_status s = count_chunks(fn, t, data, len, chunks);
        free(data);
        return s;
    }
    FILE *f = fopen(path, "rb");
    if (!f) return tfc_err(TFC_ERR_IO, "%s: cannot open '%s'", fn, path);
    size_t cap = 2 * BLOCK, len = 0;
    uint8_t *buf = malloc(cap);
    tfc_status s = buf ? TFC_OK : tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    while (s == TFC_OK) {
        if (cap - len < BLOCK) { /* no safe cut yet: keep the whole carry and read more */
            uint8_t *g = realloc(buf, cap * 2);
            if (!g) {
                s = tfc_err(TFC_ERR_OOM, "%s: out of memory reading '%s'", fn, path);
                break;
            }
            buf = g;
            cap *= 2;
        }
        size_t got = fread(buf + len, 1, BLOCK, f);
        len += got;
        if (got < BLOCK) {
            if (ferror(f))
                s = tfc_err(TFC_ERR_IO, "%s: error reading '%s'", fn, path);
            else
                s = count_chunks(fn, t, buf, len, chunks);
            break;
        }
        size_t cut = split_safe_cut(buf, len);
        if (cut == 0) continue;
        s = count_chunks(fn, t, buf, cut, chunks);
        memmove(buf, buf + cut, len - cut);
        len -= cut;
    }
    free(buf);
    fclose(f);
    return s;
}

TFC_API tfc_status tfc_tokenizer_train_files(tfc_tokenizer *t, const char *const *paths, int32_t n_paths,
                                             int32_t vocab_size) {
    static const char fn[] = "tfc_tokenizer_train_files";
    TFC_CHECK_NOT_NULL_AS(fn, t, "tok");
    TFC_CHECK_NOT_NULL(fn, paths);
    if (n_paths < 1) return tfc_err(TFC_ERR_INVALID_ARG, "%s: n_paths is %d, expected >= 1", fn, (int)n_paths);
    for (int32_t i = 0; i < n_paths; i++)
        if (!paths[i]) return tfc_err(TFC_ERR_INVALID_ARG, "%s: paths[%d] is NULL", fn, (int)i);
    TFC_TRY(check_trainable(fn, t, vocab_size));
    byte_map chunks;
    if (byte_map_init(&chunks, 1 << 12)) return tfc_err(TFC_ERR_OOM, "%s: out of memory", fn);
    tfc_status s = TFC_OK;
    for (int32_t i = 0; i < n_paths && s == TFC_OK; i++) s = count_file(fn, t, paths[i], &chunks);
    if (s == TFC_OK) s = train_from_chunks(fn, t, &chunks, vocab_size);
    byte_map_free(&chunks);
    return s;
}
