/*
 * Open-addressing hash map from a byte string to an int64 value. The map
 * keeps its own copy of every key in an arena. Used for token bytes -> id,
 * for counting distinct chunks in training, and as the encoder's chunk
 * cache. Lookups (byte_map_get) only read, so a filled map can be shared
 * by threads.
 */
#ifndef TFC_TOKENIZER_BYTE_MAP_H
#define TFC_TOKENIZER_BYTE_MAP_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct byte_slot {
    uint64_t hash;   /* 0 marks an empty slot (real hashes are forced non-zero) */
    uint64_t prefix; /* the key's first 8 bytes, zero-padded: most keys compare without the arena */
    int64_t value;
    uint32_t off; /* key bytes at arena + off */
    uint32_t len;
} byte_slot;

typedef struct byte_map {
    byte_slot *slots;
    size_t mask;
    size_t count;
    uint8_t *arena;
    size_t arena_len, arena_cap;
} byte_map;

/* 64-bit hash of n bytes: 8-byte words folded with multiply-xorshift. */
static inline uint64_t byte_hash(const uint8_t *p, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xff51afd7ed558ccdull);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 31;
        p += 8;
        n -= 8;
    }
    if (n) {
        uint64_t w = 0;
        memcpy(&w, p, n);
        h = (h ^ w) * 0x94d049bb133111ebull;
        h ^= h >> 29;
    }
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 32;
    return h | 1;
}

static inline uint64_t byte_prefix(const uint8_t *p, size_t n) {
    uint64_t w = 0;
    memcpy(&w, p, n < 8 ? n : 8);
    return w;
}

static inline byte_slot *byte_map_find(const byte_map *m, const uint8_t *key, size_t len, uint64_t h) {
    size_t i = (size_t)h & m->mask;
    uint64_t prefix = byte_prefix(key, len);
    for (;;) {
        byte_slot *s = &m->slots[i];
        if (s->hash == 0) return s;
        if (s->hash == h && s->len == len && s->prefix == prefix &&
            (len <= 8 || memcmp(m->arena + s->off + 8, key + 8, len - 8) == 0))
            return s;
        i = (i + 1) & m->mask;
    }
}

/* 1 and *value when key is present, else 0. */
static inline int byte_map_get(const byte_map *m, const uint8_t *key, size_t len, int64_t *value) {
    if (!m->slots) return 0;
    const byte_slot *s = byte_map_find(m, key, len, byte_hash(key, len));
    if (s->hash == 0) return 0;
    *value = s->value;
    return 1;
}

int byte_map_init(byte_map *m, size_t expected);
/*
 * The slot for key, inserting it with value `init` when absent (*added
 * then 1). NULL when out of memory. The pointer is valid until the next
 * insertion.
 */
byte_slot *byte_map_upsert(byte_map *m, const uint8_t *key, size_t len, int64_t init, int *added);
/* Keys and the arena are limited to 4 GiB (offsets are 32-bit); upsert fails beyond. */
/* Remove every key, keeping the allocations. */
void byte_map_clear(byte_map *m);
void byte_map_free(byte_map *m);

#endif
