/*
 * Dropout in the GPT forward pass (cfg.dropout, nanoGPT's four places):
 * where each site's mask comes from, and the unfused attention that the
 * dropout on attention probabilities needs (the fused kernel keeps no
 * probabilities to drop).
 *
 * Masks are never stored: each site's tfc_dropout node regenerates its mask
 * from (key, 0) in backward, and the key is a pure function of (seed,
 * counter, site), so a recomputed block draws the masks its first forward
 * drew.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/error.h"
#include "model/gpt_impl.h"

/* Vigna's splitmix64 finaliser: neighbouring inputs give unrelated outputs, so site keys are independent streams. */
static uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

uint64_t tfc_gpt_dropout_key(uint64_t seed, uint64_t counter, int64_t site) {
    return splitmix64(splitmix64(seed ^ splitmix64(counter)) + (uint64_t)site);
}

TFC_API tfc_status tfc_gpt_set_dropout_stream(tfc_gpt *m, uint64_t seed, uint64_t counter) {
    TFC_CHECK_NOT_NULL("tfc_gpt_set_dropout_stream", m);
    m->drop_seed = seed;
    m->drop_counter = counter;
    return TFC_OK;
}

tfc_status tfc_gpt_dropout_site(const tfc_gpt *m, tfc_graph *g, int train, uint64_t counter, int64_t site,
                                const tfc_tensor *x, tfc_tensor **y) {
    /* p = 0 is the identity, bitwise: no op recorded, no copy */
    if (!train || m->cfg.dropout == 0.0) {
        *y = tfc_tensor_retain((tfc_tensor *)x);
        return TFC_OK;
    }
    return tfc_dropout(g, x, m->cfg.dropout, tfc_gpt_dropout_key(m->drop_seed, counter, site), 0, y);
}

/* u8 [T, T]: 1 where key j is in query i's future (j > i), on q's device. */
static tfc_status causal_mask(const tfc_tensor *q, int64_t T, tfc_tensor **out) {
    uint8_t *h = malloc((size_t)(T * T));
    if (!h) return tfc_err(TFC_ERR_OOM, "tfc_gpt_forward: out of memory");
    for (int64_t i = 0; i < T; i++)
        for (int64_t j = 0; j < T; j++) h[i * T + j] = j > i;
    const int64_t dims[2] = {T, T};
    tfc_tensor *m = NULL;
    tfc_status s = tfc_tensor_from_data(h, dims, 2, TFC_DTYPE_U8, &m);
    free(h);
    if (s == TFC_OK && tfc_tensor_device_type(q) != TFC_DEVICE_CPU) {
        tfc_tensor *d = NULL;
        s = tfc_tensor_to_device(m, tfc_tensor_device_type(q), tfc_tensor_device_index(q), &d);
        tfc_tensor_release(m);
        m = d;
    }
    if (s == TFC_OK) *out = m;
    return s;
}

tfc_status tfc_gpt_attention_dropout(tfc_graph *g, const tfc_tensor *q, const tfc_tensor *k, const tfc_tensor *v,
                                     double scale, double p, uint64_t key, tfc_tensor **att) {
    const int64_t T = tfc_tensor_dim(q, 2);
    tfc_tensor *kt = NULL, *sc = NULL, *scs = NULL, *mask = NULL, *masked = NULL, *pr = NULL, *dp = NULL;
    tfc_status s = tfc_transpose(g, k, 2, 3, &kt); /* [B,H,D,T] */
    if (s == TFC_OK) s = tfc_matmul(g, q, kt, &sc);
    if (s == TFC_OK) s = tfc_mul_scalar(g, sc, scale, &scs);
    if (s == TFC_OK) s = causal_mask(q, T, &mask);
    if (s == TFC_OK) s = tfc_masked_fill(g, scs, mask, -INFINITY, &masked);
    if (s == TFC_OK) s = tfc_softmax(g, masked, 3, &pr);
    if (s == TFC_OK) s = tfc_dropout(g, pr, p, key, 0, &dp);
    if (s == TFC_OK) s = tfc_matmul(g, dp, v, att);
    tfc_tensor_release(kt);
    tfc_tensor_release(sc);
    tfc_tensor_release(scs);
    tfc_tensor_release(mask);
    tfc_tensor_release(masked);
    tfc_tensor_release(pr);
    tfc_tensor_release(dp);
    return s;
}
