/*
 * Philox 4x32-10 (Salmon et al., "Parallel random numbers: as easy as
 * 1, 2, 3", SC'11): a counter-based generator. Output block b of stream
 * (seed, offset) is philox(key = seed, counter = offset + b), four 32-bit
 * words per block, so element i of a generated tensor depends only on
 * (seed, offset, i) — the same numbers on any thread count and on CUDA.
 */
#ifndef TFC_CORE_RNG_H
#define TFC_CORE_RNG_H

#include <math.h>
#include <stdint.h>

static inline void tfc_philox4x32_10(uint64_t seed, uint64_t counter, uint32_t out[4]) {
    uint32_t c0 = (uint32_t)counter, c1 = (uint32_t)(counter >> 32), c2 = 0, c3 = 0;
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n1 = (uint32_t)p1;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1, n3 = (uint32_t)p0;
        c0 = n0;
        c1 = n1;
        c2 = n2;
        c3 = n3;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

/* Uniform in [0, 1) with 24 random bits (f32) or 53 (from two words, f64). */
static inline float tfc_u32_to_unit_f32(uint32_t x) { return (float)(x >> 8) * (1.0f / 16777216.0f); }
static inline double tfc_u64_to_unit_f64(uint32_t hi, uint32_t lo) {
    return (double)((((uint64_t)hi << 32) | lo) >> 11) * (1.0 / 9007199254740992.0);
}

/*
 * Element i of the uniform stream (seed, offset): word i%4 of block i/4.
 * Element i of the normal stream: Box-Muller on the pair of words
 * (2*(i/2), 2*(i/2)+1) of block i/4, cosine branch for even i, sine for odd.
 */
static inline double tfc_rng_uniform(uint64_t seed, uint64_t offset, uint64_t i) {
    uint32_t w[4];
    tfc_philox4x32_10(seed, offset + i / 4, w);
    return tfc_u32_to_unit_f32(w[i % 4]);
}

static inline double tfc_rng_normal(uint64_t seed, uint64_t offset, uint64_t i) {
    uint32_t w[4];
    tfc_philox4x32_10(seed, offset + i / 4, w);
    unsigned j = (unsigned)(i % 4) & ~1u;
    /* u1 in (0,1] so log never sees 0. */
    double u1 = 1.0 - (double)tfc_u32_to_unit_f32(w[j]);
    double u2 = (double)tfc_u32_to_unit_f32(w[j + 1]);
    double r = sqrt(-2.0 * log(u1)), th = 6.283185307179586 * u2;
    return (i % 2) ? r * sin(th) : r * cos(th);
}

/* Number of counter values a draw of n elements consumes: ceil(n / 4). */
static inline uint64_t tfc_rng_blocks(uint64_t n) { return (n + 3) / 4; }

#endif
