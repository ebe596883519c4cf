/* Growth and insertion for pair_map (lookups are inline in pair_map.h). */
#include "tokenizer/pair_map.h"

#include <stdlib.h>
#include <string.h>

static int pair_map_alloc(pair_map *m, size_t cap) {
    pair_slot *slots = malloc(cap * sizeof *slots);
    if (!slots) return -1;
    for (size_t i = 0; i < cap; i++) slots[i].key = PAIR_EMPTY;
    m->slots = slots;
    m->mask = cap - 1;
    m->count = 0;
    return 0;
}

int pair_map_init(pair_map *m, size_t expected) {
    size_t cap = 16;
    while (cap < expected * 2) cap *= 2; /* load factor <= 1/2 keeps probes short */
    return pair_map_alloc(m, cap);
}

static int pair_map_grow(pair_map *m) {
    pair_map bigger;
    if (pair_map_alloc(&bigger, (m->mask + 1) * 2)) return -1;
    for (size_t i = 0; i <= m->mask; i++) {
        if (m->slots[i].key == PAIR_EMPTY) continue;
        *pair_map_find(&bigger, m->slots[i].key) = m->slots[i];
        bigger.count++;
    }
    free(m->slots);
    *m = bigger;
    return 0;
}

int pair_map_put(pair_map *m, int32_t left, int32_t right, int32_t rank, int32_t id) {
    if (!m->slots && pair_map_init(m, 8)) return -1;
    if ((m->count + 1) * 2 > m->mask + 1 && pair_map_grow(m)) return -1;
    pair_slot *s = pair_map_find(m, pair_key(left, right));
    if (s->key != PAIR_EMPTY) return 1;
    s->key = pair_key(left, right);
    s->rank = rank;
    s->id = id;
    m->count++;
    return 0;
}

void pair_map_free(pair_map *m) {
    free(m->slots);
    memset(m, 0, sizeof *m);
}
