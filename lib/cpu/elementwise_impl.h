/*
 * Body of the elementwise map for one element type. Included by
 * elementwise.c with T, SFX and the math functions defined.
 */
#define TFC_CAT_(a, b) a##_##b
#define TFC_CAT(a, b) TFC_CAT_(a, b)
#define FN(name) TFC_CAT(name, SFX)

/* Loads of b and c: c may be a bool/u8 mask. */
static inline T FN(load_c)(const tfc_sview *v, int64_t off) {
    if (v->dtype == TFC_DTYPE_BOOL || v->dtype == TFC_DTYPE_U8) return (T)((const unsigned char *)v->data)[off];
    return ((const T *)v->data)[off];
}

static void FN(tfc_cpu_map)(tfc_map_op op, const tfc_sview *out, const tfc_sview *av, const tfc_sview *bv,
                            const tfc_sview *cv, double p, int accumulate) {
    const tfc_sview *views[4] = {out, av ? av : out, bv ? bv : out, cv ? cv : out};
    tfc_iter it;
    tfc_iter_init(&it, views, 4);
    int32_t last = it.ndim - 1;
    int64_t inner = it.shape[last];
    int64_t rows = it.numel / (inner ? inner : 1);
    int64_t so = it.strides[0][last], sa = it.strides[1][last], sb = it.strides[2][last], sc = it.strides[3][last];
    T *o = (T *)out->data;
    const T *A = (const T *)views[1]->data, *B = (const T *)views[2]->data;
    const tfc_sview *C = views[3];
    int c_is_mask = C->dtype == TFC_DTYPE_BOOL || C->dtype == TFC_DTYPE_U8;
    const T *Cf = (const T *)C->data;
    if (it.numel == 0) return;
    TFC_PARALLEL_RANGE(rows, (1 << 15) / (inner ? inner : 1) + 1, lo, hi) {
        int64_t idx[TFC_MAX_DIMS], off[4];
        /* Walk rows of the innermost dimension; the outer dims use the iterator. */
        tfc_iter row_it = it;
        row_it.shape[last] = 1;
        tfc_iter_seek(&row_it, lo, idx, off);
        for (int64_t r = lo; r < hi; r++) {
            T *po = o + off[0];
            const T *pa = A + off[1], *pb = B + off[2];
            switch (op) {
#define TFC_MAP_CASE(name, expr)                                                            \
    case TFC_MAP_##name:                                                                    \
        for (int64_t i = 0; i < inner; i++) {                                               \
            T a = pa[i * sa], b = pb[i * sb];                                               \
            T c = c_is_mask ? FN(load_c)(C, off[3] + i * sc) : Cf[off[3] + i * sc];          \
            (void)a; (void)b; (void)c;                                                      \
            T r_ = (expr);                                                                  \
            if (accumulate) po[i * so] += r_;                                               \
            else po[i * so] = r_;                                                           \
        }                                                                                   \
        break;
                TFC_MAP_OPS(TFC_MAP_CASE)
#undef TFC_MAP_CASE
            default: break;
            }
            tfc_iter_next(&row_it, idx, off);
        }
    }
}

#undef FN
#undef TFC_CAT
#undef TFC_CAT_
#undef T
#undef SFX
#undef EXP
#undef LOG
#undef SQRT
#undef TANH
#undef POW
