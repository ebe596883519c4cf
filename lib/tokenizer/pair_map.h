/*
 * Open-addressing hash map from a token pair (left id, right id) to the
 * merge it triggers: (rank, merged id). Read-only lookups are safe from any
 * number of threads; the encoder's inner loop calls pair_map_get.
 */
#ifndef TFC_TOKENIZER_PAIR_MAP_H
#define TFC_TOKENIZER_PAIR_MAP_H

#include <stddef.h>
#include <stdint.h>

#define PAIR_EMPTY UINT64_MAX /* ids are < 2^31, so no real key is all ones */

typedef struct pair_slot {
    uint64_t key; /* left << 32 | right */
    int32_t rank;
    int32_t id;
} pair_slot;

typedef struct pair_map {
    pair_slot *slots;
    size_t mask; /* capacity - 1, capacity a power of two */
    size_t count;
} pair_map;

static inline uint64_t pair_key(int32_t left, int32_t right) {
    return (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
}

/* A Murmur3 finaliser: keys differing in one id spread over all slots. */
static inline size_t pair_hash(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ull;
    k ^= k >> 33;
    return (size_t)k;
}

/* The slot holding key, or the empty slot where it would go. */
static inline pair_slot *pair_map_find(const pair_map *m, uint64_t key) {
    size_t i = pair_hash(key) & m->mask;
    for (;;) {
        pair_slot *s = &m->slots[i];
        if (s->key == key || s->key == PAIR_EMPTY) return s;
        i = (i + 1) & m->mask;
    }
}

/* 1 and (rank, id) when the pair merges, else 0. */
static inline int pair_map_get(const pair_map *m, int32_t left, int32_t right, int32_t *rank, int32_t *id) {
    if (!m->slots) return 0;
    const pair_slot *s = pair_map_find(m, pair_key(left, right));
    if (s->key == PAIR_EMPTY) return 0;
    *rank = s->rank;
    *id = s->id;
    return 1;
}

/* Empty map with room for about `expected` keys; 0 on success, -1 out of memory. */
int pair_map_init(pair_map *m, size_t expected);
/* Insert; 1 when the key was already present (nothing changed), 0 added, -1 out of memory. */
int pair_map_put(pair_map *m, int32_t left, int32_t right, int32_t rank, int32_t id);
void pair_map_free(pair_map *m);

#endif
