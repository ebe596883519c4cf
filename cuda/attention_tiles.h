/*
 * The tile bookkeeping of the tensor-core attention (attention_flash.cu):
 * which key blocks a query block visits, which query blocks a key block
 * visits, and which tiles need the element mask. Plain C so that the
 * CPU-side emulation test (tests/c/test_attention_tiles.c) runs exactly
 * these functions here, where no GPU is; the CUDA kernels include the same
 * header.
 *
 * Causal attention is bottom-right aligned: with off = S - T, query i sees
 * key j iff j <= i + off (and always j < S, i < T). A sliding window W > 0
 * (causal only; 0 = none) also keeps only j > i + off - W: Hugging Face's
 * kv_idx > q_idx - sliding_window with q_idx = i + off, the query's
 * position, so each query sees at most W keys, itself included. Both
 * edges move right by one key per query, so the keys of a query block and
 * the queries of a key block are each one range.
 */
#ifndef TFCU_ATTENTION_TILES_H
#define TFCU_ATTENTION_TILES_H

#ifdef __CUDACC__
#define TFCU_TILE_FN __host__ __device__ __forceinline__
#else
#define TFCU_TILE_FN static inline
#endif

/* Whether query i sees key j. */
TFCU_TILE_FN int fa_visible(int i, int j, int T, int S, int causal, int window) {
    return i < T && j < S && (!causal || (j <= i + (S - T) && (window <= 0 || j > i + (S - T) - window)));
}

/*
 * One past the last key any query of [q0, q0 + bm) sees (0: none). Key
 * blocks from fa_key_start's block up to this bound are visited; blocks
 * wholly above the diagonal are skipped.
 */
TFCU_TILE_FN int fa_key_end(int q0, int bm, int T, int S, int causal) {
    if (!causal) return S;
    int last_q = (q0 + bm < T ? q0 + bm : T) - 1;
    int e = last_q + (S - T) + 1;
    return e < 0 ? 0 : (e > S ? S : e);
}

/* The first key any query of [q0, ...) sees: the window's left edge for query q0 (0 without a window). */
TFCU_TILE_FN int fa_key_start(int q0, int T, int S, int causal, int window) {
    if (!causal || window <= 0) return 0;
    int s = q0 + (S - T) - window + 1;
    return s < 0 ? 0 : (s > S ? S : s);
}

/* The first query that sees any key of [k0, k0 + bn): query blocks start here. */
TFCU_TILE_FN int fa_query_start(int k0, int T, int S, int causal) {
    if (!causal) return 0;
    int s = k0 - (S - T);
    return s < 0 ? 0 : s;
}

/*
 * One past the last query that sees any key of [k0, k0 + bn) (T without a
 * window): query blocks stop here. The last key is min(k0 + bn, S) - 1,
 * seen while its window has not passed it: i + off - W + 1 <= that key.
 */
TFCU_TILE_FN int fa_query_end(int k0, int bn, int T, int S, int causal, int window) {
    if (!causal || window <= 0) return T;
    int last_k = (k0 + bn < S ? k0 + bn : S) - 1;
    int e = last_k - (S - T) + window;
    return e < 0 ? 0 : (e > T ? T : e);
}

/*
 * Whether the tile of queries [q0, q0 + bm) and keys [j0, j0 + bn) holds
 * any pair that is not visible (past T or S, above the causal diagonal,
 * or left of the window); tiles without one skip the per-element mask.
 */
TFCU_TILE_FN int fa_tile_needs_mask(int q0, int bm, int j0, int bn, int T, int S, int causal, int window) {
    return q0 + bm > T || j0 + bn > S ||
        (causal && (j0 + bn - 1 > q0 + (S - T) || (window > 0 && j0 <= q0 + bm - 1 + (S - T) - window)));
}

#endif
