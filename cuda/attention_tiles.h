/*
 * The tile bookkeeping of the tensor-core attention (attention_flash.cu):
 * which key blocks a query block visits, which query blocks a key block
 * visits, and which tiles need the element mask. Plain C so that the
 * CPU-side emulation test (tests/c/test_attention_tiles.c) runs exactly
 * these functions here, where no GPU is; the CUDA kernels include the same
 * header.
 *
 * Causal attention is bottom-right aligned: with off = S - T, query i sees
 * key j iff j <= i + off (and always j < S, i < T).
 */
#ifndef TFCU_ATTENTION_TILES_H
#define TFCU_ATTENTION_TILES_H

#ifdef __CUDACC__
#define TFCU_TILE_FN __host__ __device__ __forceinline__
#else
#define TFCU_TILE_FN static inline
#endif

/* Whether query i sees key j. */
TFCU_TILE_FN int fa_visible(int i, int j, int T, int S, int causal) {
    return i < T && j < S && (!causal || j <= i + (S - T));
}

/*
 * One past the last key any query of [q0, q0 + bm) sees (0: none). Key
 * blocks from 0 up to this bound are visited; blocks wholly above the
 * diagonal are skipped.
 */
TFCU_TILE_FN int fa_key_end(int q0, int bm, int T, int S, int causal) {
    if (!causal) return S;
    int last_q = (q0 + bm < T ? q0 + bm : T) - 1;
    int e = last_q + (S - T) + 1;
    return e < 0 ? 0 : (e > S ? S : e);
}

/* The first query that sees any key of [k0, k0 + bn): query blocks start here. */
TFCU_TILE_FN int fa_query_start(int k0, int T, int S, int causal) {
    if (!causal) return 0;
    int s = k0 - (S - T);
    return s < 0 ? 0 : s;
}

/*
 * Whether the tile of queries [q0, q0 + bm) and keys [j0, j0 + bn) holds
 * any pair that is not visible (past T or S, or above the causal
 * diagonal); tiles without one skip the per-element mask.
 */
TFCU_TILE_FN int fa_tile_needs_mask(int q0, int bm, int j0, int bn, int T, int S, int causal) {
    return q0 + bm > T || j0 + bn > S || (causal && j0 + bn - 1 > q0 + (S - T));
}

#endif
