/* Growth and insertion for byte_map (lookups are inline in byte_map.h). */
#include "tokenizer/byte_map.h"

#include <stdlib.h>

int byte_map_init(byte_map *m, size_t expected) {
    memset(m, 0, sizeof *m);
    size_t cap = 16;
    while (cap < expected * 2) cap *= 2;
    m->slots = calloc(cap, sizeof *m->slots);
    if (!m->slots) return -1;
    m->mask = cap - 1;
    return 0;
}

static int byte_map_grow(byte_map *m) {
    size_t cap = (m->mask + 1) * 2;
    byte_slot *slots = calloc(cap, sizeof *slots);
    if (!slots) return -1;
    size_t mask = cap - 1;
    for (size_t i = 0; i <= m->mask; i++) {
        const byte_slot *s = &m->slots[i];
        if (s->hash == 0) continue;
        size_t j = (size_t)s->hash & mask; /* keys are distinct: just find an empty slot */
        while (slots[j].hash) j = (j + 1) & mask;
        slots[j] = *s;
    }
    free(m->slots);
    m->slots = slots;
    m->mask = cap - 1;
    return 0;
}

byte_slot *byte_map_upsert(byte_map *m, const uint8_t *key, size_t len, int64_t init, int *added) {
    if (!m->slots && byte_map_init(m, 8)) return NULL;
    uint64_t h = byte_hash(key, len);
    byte_slot *s = byte_map_find(m, key, len, h);
    *added = 0;
    if (s->hash) return s;
    if ((m->count + 1) * 2 > m->mask + 1) {
        if (byte_map_grow(m)) return NULL;
        s = byte_map_find(m, key, len, h);
    }
    if (len > UINT32_MAX || m->arena_len + len > UINT32_MAX) return NULL;
    if (m->arena_len + len > m->arena_cap) {
        size_t cap = m->arena_cap ? m->arena_cap * 2 : 4096;
        while (cap < m->arena_len + len) cap *= 2;
        uint8_t *a = realloc(m->arena, cap);
        if (!a) return NULL;
        m->arena = a;
        m->arena_cap = cap;
    }
    if (len) memcpy(m->arena + m->arena_len, key, len);
    s->hash = h;
    s->prefix = byte_prefix(key, len);
    s->value = init;
    s->off = (uint32_t)m->arena_len;
    s->len = (uint32_t)len;
    m->arena_len += len;
    m->count++;
    *added = 1;
    return s;
}

void byte_map_clear(byte_map *m) {
    if (m->slots) memset(m->slots, 0, (m->mask + 1) * sizeof *m->slots);
    m->count = 0;
    m->arena_len = 0;
}

void byte_map_free(byte_map *m) {
    free(m->slots);
    free(m->arena);
    memset(m, 0, sizeof *m);
}
