/*
 * Every kernel of the CUDA module, reached through its backend table
 * (lib/backend/backend.h, filled in cuda/module.cu), against
 * straightforward CPU loops written here, on random inputs, in f32 and
 * bf16. Inputs are rounded to the storage type before both sides see
 * them, so the tolerances below only cover accumulation order (f32) and
 * output rounding (bf16: 8 mantissa bits, relative step 2^-8 = 0.0039).
 * The reference loops never call the library's CPU kernels.
 *
 * Without a CUDA device (or without the module) the program prints
 * "no CUDA device: <reason>" and exits 77, which meson counts as skipped.
 */
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "core/rng.h"
#include "cuda_check.h"

#define main tfc_test_main_
TFC_TEST_MAIN
#undef main

const tfc_backend *A;

static const int DTYPES[2] = {TFC_DTYPE_F32, TFC_DTYPE_BF16};
static const char *dt_name(int dt) { return dt == TFC_DTYPE_BF16 ? "bf16" : "f32"; }
/* Elementwise results: f32 within float rounding, bf16 within one output rounding. */
static double tol_elem(int dt) { return dt == TFC_DTYPE_BF16 ? 8e-3 : 2e-6; }
/* Results of sums over up to a few thousand terms. */
static double tol_sum(int dt) { return dt == TFC_DTYPE_BF16 ? 1e-2 : 2e-5; }

/* Byte address of element i of a device buffer of dt. */
static void *elem(void *d, int64_t i, int dt) { return (char *)d + i * (int64_t)dt_size(dt); }

TEST(memory_roundtrip) {
    size_t n = 1000;
    float *h = rand_host(n, -1, 1, TFC_DTYPE_F32, 1);
    void *d = up(h, n, TFC_DTYPE_F32), *d2 = dev(n, TFC_DTYPE_F32), *p = NULL;
    CHECK_CU(A->memcpy(0, d2, d, n * 4, TFC_MEMCPY_D2D));
    float *g = down(d2, n, TFC_DTYPE_F32);
    CHECK(memcmp(g, h, n * 4) == 0);
    CHECK_CU(A->memset0(0, d2, n * 4));
    free(g);
    g = down(d2, n, TFC_DTYPE_F32);
    int zeros = 1;
    for (size_t i = 0; i < n; i++) zeros &= g[i] == 0.0f;
    CHECK(zeros);
    CHECK_CU(A->synchronize(0));
    CHECK_CU_ERR(A->memcpy(0, d2, d, 4, (tfc_memcpy_kind)7), TFC_ERR_INVALID_ARG, "kind 7");
    CHECK_CU_ERR(A->alloc(999, 16, &p), TFC_ERR_DEVICE, "device 999");
    free(g), free(h), dfree(d), dfree(d2);
}

TEST(fill_and_cast) {
    size_t n = 777;
    float *h = rand_host(n, -3, 3, TFC_DTYPE_F32, 2), *want = malloc(n * 4);
    void *f = up(h, n, TFC_DTYPE_F32), *b = dev(n, TFC_DTYPE_BF16), *f2 = dev(n, TFC_DTYPE_F32);
    /* A cast is a copy between views of different dtypes. */
    tfc_copy_problem c = {.dst = view_flat(b, TFC_DTYPE_BF16, n), .src = view_flat(f, TFC_DTYPE_F32, n)};
    CHECK_CU(A->copy(&c));
    c = (tfc_copy_problem){.dst = view_flat(f2, TFC_DTYPE_F32, n), .src = view_flat(b, TFC_DTYPE_BF16, n)};
    CHECK_CU(A->copy(&c));
    float *g = down(f2, n, TFC_DTYPE_F32);
    for (size_t i = 0; i < n; i++) want[i] = round_dt(h[i], TFC_DTYPE_BF16);
    CHECK_ALL(g, want, n, 0.0, "cast f32->bf16->f32 (round to nearest even)");
    free(g);
    tfc_fill_problem fp = {.dst = view_flat(b, TFC_DTYPE_BF16, n), .value = 1.5};
    CHECK_CU(A->fill(&fp));
    g = down(b, n, TFC_DTYPE_BF16);
    for (size_t i = 0; i < n; i++) want[i] = 1.5f;
    CHECK_ALL(g, want, n, 0.0, "fill");
    /* CUDA converts between f32 and bf16 only. */
    c = (tfc_copy_problem){.dst = view_flat(f2, TFC_DTYPE_F32, n), .src = view_flat(f, TFC_DTYPE_I32, n)};
    CHECK_CU_ERR(A->copy(&c), TFC_ERR_UNSUPPORTED, "i32");
    free(g), free(h), free(want), dfree(f), dfree(b), dfree(f2);
}

TEST(copy_strided_transpose_expand_and_strided_dst) {
    /* f32 [4,5] read transposed as [5,4] into a contiguous dst. */
    float *x = rand_host(20, -1, 1, TFC_DTYPE_F32, 11), want[40], *g;
    void *dx = up(x, 20, TFC_DTYPE_F32), *dy = dev(20, TFC_DTYPE_F32);
    tfc_copy_problem c = {.dst = view_c(dy, TFC_DTYPE_F32, 2, (int64_t[]){5, 4}),
                          .src = view_nd(dx, TFC_DTYPE_F32, 2, (int64_t[]){5, 4}, (int64_t[]){1, 5})};
    CHECK_CU(A->copy(&c));
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 4; j++) want[i * 4 + j] = x[j * 5 + i];
    g = down(dy, 20, TFC_DTYPE_F32);
    CHECK_ALL(g, want, 20, 0.0, "transpose copy");
    free(g), dfree(dy);
    /* i64 [3] expanded to [2,3] (stride 0), 8-byte elements moved intact. */
    int64_t ids[3] = {-1, (int64_t)1 << 40, 7}, got[6];
    void *di = dev(3, TFC_DTYPE_I64), *de = dev(6, TFC_DTYPE_I64);
    CHECK_CU(A->memcpy(0, di, ids, sizeof ids, TFC_MEMCPY_H2D));
    c = (tfc_copy_problem){.dst = view_c(de, TFC_DTYPE_I64, 2, (int64_t[]){2, 3}),
                           .src = view_nd(di, TFC_DTYPE_I64, 2, (int64_t[]){2, 3}, (int64_t[]){0, 1})};
    CHECK_CU(A->copy(&c));
    CHECK_CU(A->memcpy(0, got, de, sizeof got, TFC_MEMCPY_D2H));
    for (int i = 0; i < 6; i++) CHECK(got[i] == ids[i % 3]);
    dfree(di), dfree(de);
    /* Strided destinations, same dtype (f32) and converting (f32 -> bf16). */
    for (int di2 = 0; di2 < 2; di2++) {
        int dt = DTYPES[di2];
        char what[96];
        /* The contiguous [4,5] source written transposed: dst [4,5] with strides (1, 4) over a [5,4] buffer. */
        void *dt_buf = dev(20, dt);
        c = (tfc_copy_problem){.dst = view_nd(dt_buf, dt, 2, (int64_t[]){4, 5}, (int64_t[]){1, 4}),
                               .src = view_c(dx, TFC_DTYPE_F32, 2, (int64_t[]){4, 5})};
        CHECK_CU(A->copy(&c));
        for (int i = 0; i < 5; i++)
            for (int j = 0; j < 4; j++) want[i * 4 + j] = round_dt(x[j * 5 + i], dt);
        g = down(dt_buf, 20, dt);
        snprintf(what, sizeof what, "copy into a transposed dst (%s)", dt_name(dt));
        CHECK_ALL(g, want, 20, 0.0, what);
        free(g), dfree(dt_buf);
        /* Every other column of a [4,10] buffer (strides (10, 2)): the columns in between keep their fill. */
        void *wide = dev(40, dt);
        tfc_fill_problem fp = {.dst = view_flat(wide, dt, 40), .value = -7.0};
        CHECK_CU(A->fill(&fp));
        c = (tfc_copy_problem){.dst = view_nd(wide, dt, 2, (int64_t[]){4, 5}, (int64_t[]){10, 2}),
                               .src = view_c(dx, TFC_DTYPE_F32, 2, (int64_t[]){4, 5})};
        CHECK_CU(A->copy(&c));
        for (int r = 0; r < 4; r++)
            for (int k = 0; k < 10; k++) want[r * 10 + k] = k % 2 ? -7.0f : round_dt(x[r * 5 + k / 2], dt);
        g = down(wide, 40, dt);
        snprintf(what, sizeof what, "copy into a column slice (%s)", dt_name(dt));
        CHECK_ALL(g, want, 40, 0.0, what);
        free(g), dfree(wide);
    }
    free(x), dfree(dx);
}

/* The maps of lib/backend/map_ops.h written out again in double (not generated from that table). */
/* a rounded to the nearest bf16, ties to even, by the bit recipe of the
 * format (not the library's converter); the inputs here are finite. */
static double round_bf16_ref(double a) {
    float f = (float)a;
    uint32_t u;
    memcpy(&u, &f, 4);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&f, &u, 4);
    return f;
}

static double ref_map(int op, double a, double b, double c, double p) {
    switch (op) {
    case TFC_MAP_ADD: return a + b;
    case TFC_MAP_SUB: return a - b;
    case TFC_MAP_MUL: return a * b;
    case TFC_MAP_DIV: return a / b;
    case TFC_MAP_NEG: return -a;
    case TFC_MAP_EXP: return exp(a);
    case TFC_MAP_LOG: return log(a);
    case TFC_MAP_SQRT: return sqrt(a);
    case TFC_MAP_RSQRT: return 1.0 / sqrt(a);
    case TFC_MAP_TANH: return tanh(a);
    case TFC_MAP_SIGMOID: return 1.0 / (1.0 + exp(-a));
    case TFC_MAP_RELU: return a > 0 ? a : 0.0;
    case TFC_MAP_ADD_S: return a + p;
    case TFC_MAP_MUL_S: return a * p;
    case TFC_MAP_RSUB_S: return p - a;
    case TFC_MAP_RDIV_S: return p / a;
    case TFC_MAP_POW_S: return pow(a, p);
    case TFC_MAP_COPY: return a;
    case TFC_MAP_EXP_BWD: return a * c;
    case TFC_MAP_SQRT_BWD: return a * 0.5 / c;
    case TFC_MAP_RSQRT_BWD: return a * -0.5 * c * c * c;
    case TFC_MAP_TANH_BWD: return a * (1.0 - c * c);
    case TFC_MAP_SIGMOID_BWD: return a * c * (1.0 - c);
    case TFC_MAP_RELU_BWD: return b > 0 ? a : 0.0;
    case TFC_MAP_POW_S_BWD: return a * p * pow(b, p - 1.0);
    case TFC_MAP_DIV_BWD_B: return -a * c / b;
    case TFC_MAP_RDIV_S_BWD: return -a * c / b;
    case TFC_MAP_ABS: return fabs(a);
    case TFC_MAP_SIGN: return a > 0 ? 1.0 : a < 0 ? -1.0 : 0.0;
    case TFC_MAP_SIN: return sin(a);
    case TFC_MAP_COS: return cos(a);
    case TFC_MAP_FLOOR: return floor(a);
    case TFC_MAP_CEIL: return ceil(a);
    case TFC_MAP_ROUND: return nearbyint(a);
    case TFC_MAP_MAX_S: return a < p ? p : a;
    case TFC_MAP_MIN_S: return a > p ? p : a;
    case TFC_MAP_MAXIMUM: return a > b ? a : b;
    case TFC_MAP_MINIMUM: return a < b ? a : b;
    case TFC_MAP_LT: return a < b;
    case TFC_MAP_LE: return a <= b;
    case TFC_MAP_GT: return a > b;
    case TFC_MAP_GE: return a >= b;
    case TFC_MAP_EQ: return a == b;
    case TFC_MAP_NE: return a != b;
    case TFC_MAP_ABS_BWD: return b > 0 ? a : b < 0 ? -a : 0.0;
    case TFC_MAP_SIN_BWD: return a * cos(b);
    case TFC_MAP_COS_BWD: return -a * sin(b);
    case TFC_MAP_MAX_S_BWD: return b >= p ? a : 0.0;
    case TFC_MAP_MIN_S_BWD: return b <= p ? a : 0.0;
    case TFC_MAP_MAXIMUM_BWD: return b > c ? a : b == c ? a * 0.5 : 0.0;
    case TFC_MAP_MINIMUM_BWD: return b < c ? a : b == c ? a * 0.5 : 0.0;
    case TFC_MAP_ROUND_BF16: return round_bf16_ref(a);
    case TFC_MAP_SILU: return a / (1.0 + exp(-a));
    case TFC_MAP_SILU_BWD: return a * (1.0 / (1.0 + exp(-b))) * (1.0 + b - b / (1.0 + exp(-b)));
    default: return NAN; /* MASK_SELECT is checked apart */
    }
}

/* Maps through libm-style functions: the unary tolerance (2x) of the original test. */
static int map_is_transcendental(int op) {
    return op == TFC_MAP_EXP || op == TFC_MAP_LOG || op == TFC_MAP_SQRT || op == TFC_MAP_RSQRT || op == TFC_MAP_TANH ||
        op == TFC_MAP_SIGMOID || op == TFC_MAP_POW_S || op == TFC_MAP_POW_S_BWD || op == TFC_MAP_SIN ||
        op == TFC_MAP_COS || op == TFC_MAP_SIN_BWD || op == TFC_MAP_COS_BWD || op == TFC_MAP_SILU ||
        op == TFC_MAP_SILU_BWD;
}

/* n values with |v| in [0.5, 2), every other one negative (negation is exact in bf16). */
static float *signed_host(size_t n, int dt, uint64_t seed) {
    float *v = rand_host(n, 0.5f, 2, dt, seed);
    for (size_t i = 0; i < n; i += 2) v[i] = -v[i];
    return v;
}

TEST(every_map_same_shape_broadcast_mask_and_strided_out) {
    for (int di = 0; di < 2; di++) {
        int dt = DTYPES[di];
        size_t n = 1025;
        char what[96];
        /* Signed inputs bounded away from 0 (divisions); positive ones where the op needs them. */
        float *as = signed_host(n, dt, 3), *ap = rand_host(n, 0.5f, 2, dt, 4), *bs = signed_host(n, dt, 5);
        float *bp = rand_host(n, 0.5f, 2, dt, 6), *cs = signed_host(n, dt, 7), *want = malloc(n * 4);
        void *das = up(as, n, dt), *dap = up(ap, n, dt), *dbs = up(bs, n, dt), *dbp = up(bp, n, dt);
        void *dcs = up(cs, n, dt), *dout = dev(n, dt);
        tfc_sview vo = view_flat(dout, dt, n), vc = view_flat(dcs, dt, n);
        for (int op = 0; op < TFC_MAP_COUNT_; op++) {
            if (op == TFC_MAP_MASK_SELECT) continue;
            int apos = op == TFC_MAP_LOG || op == TFC_MAP_SQRT || op == TFC_MAP_RSQRT || op == TFC_MAP_POW_S;
            int bpos = op == TFC_MAP_POW_S_BWD;
            const float *a = apos ? ap : as, *b = bpos ? bp : bs;
            tfc_sview va = view_flat(apos ? dap : das, dt, n), vb = view_flat(bpos ? dbp : dbs, dt, n);
            tfc_map_problem m = {.op = (tfc_map_op)op, .out = &vo, .a = &va, .b = &vb, .c = &vc, .p = 1.25};
            CHECK_CU(A->map(&m));
            float *g = down(dout, n, dt);
            for (size_t i = 0; i < n; i++) want[i] = (float)ref_map(op, a[i], b[i], cs[i], 1.25);
            snprintf(what, sizeof what, "map %d (%s)", op, dt_name(dt));
            CHECK_ALL(g, want, n, tol_elem(dt) * (map_is_transcendental(op) ? 2 : 1), what);
            free(g);
        }
        /* [3,1,5] (a's first 15 values) - [1,4,5] (b's first 20) -> [3,4,5]: broadcast by stride 0. */
        tfc_sview va = view_nd(das, dt, 3, (int64_t[]){3, 4, 5}, (int64_t[]){5, 0, 1});
        tfc_sview vb = view_nd(dbs, dt, 3, (int64_t[]){3, 4, 5}, (int64_t[]){0, 5, 1});
        tfc_sview v3 = view_c(dout, dt, 3, (int64_t[]){3, 4, 5});
        tfc_map_problem m = {.op = TFC_MAP_SUB, .out = &v3, .a = &va, .b = &vb};
        CHECK_CU(A->map(&m));
        float *g = down(dout, 60, dt);
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++)
                for (int k = 0; k < 5; k++) want[(i * 4 + j) * 5 + k] = as[i * 5 + k] - bs[j * 5 + k];
        CHECK_ALL(g, want, 60, tol_elem(dt), "map broadcast");
        free(g);
        /* where(mask, a, b): a [3,4,5], b broadcast from [1,4,5], a u8 mask broadcast from [3,1,5]. */
        uint8_t mask[15];
        for (int i = 0; i < 15; i++) mask[i] = (uint8_t)((i * 7) % 3 == 0);
        void *dmask = dev(15, TFC_DTYPE_U8);
        CHECK_CU(A->memcpy(0, dmask, mask, sizeof mask, TFC_MEMCPY_H2D));
        va = view_c(das, dt, 3, (int64_t[]){3, 4, 5});
        tfc_sview vm = view_nd(dmask, TFC_DTYPE_U8, 3, (int64_t[]){3, 4, 5}, (int64_t[]){5, 0, 1});
        m = (tfc_map_problem){.op = TFC_MAP_MASK_SELECT, .out = &v3, .a = &va, .b = &vb, .c = &vm};
        CHECK_CU(A->map(&m));
        g = down(dout, 60, dt);
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++)
                for (int k = 0; k < 5; k++)
                    want[(i * 4 + j) * 5 + k] = mask[i * 5 + k] ? as[(i * 4 + j) * 5 + k] : bs[j * 5 + k];
        CHECK_ALL(g, want, 60, 0.0, "map MASK_SELECT");
        free(g), dfree(dmask);
        /* A strided out: a · b over [3,20] written transposed into a [20,3] buffer. */
        va = view_c(das, dt, 2, (int64_t[]){3, 20});
        vb = view_c(dbs, dt, 2, (int64_t[]){3, 20});
        tfc_sview vt = view_nd(dout, dt, 2, (int64_t[]){3, 20}, (int64_t[]){1, 3});
        m = (tfc_map_problem){.op = TFC_MAP_MUL, .out = &vt, .a = &va, .b = &vb};
        CHECK_CU(A->map(&m));
        g = down(dout, 60, dt);
        for (int r = 0; r < 3; r++)
            for (int k = 0; k < 20; k++) want[k * 3 + r] = as[r * 20 + k] * bs[r * 20 + k];
        CHECK_ALL(g, want, 60, tol_elem(dt), "map into a transposed out");
        free(g);
        /* One past the table (42 was, before the table grew past it: the first GPU run caught that). */
        m = (tfc_map_problem){.op = (tfc_map_op)TFC_MAP_COUNT_, .out = &vo, .a = &vo, .b = &vo};
        CHECK_CU_ERR(A->map(&m), TFC_ERR_INVALID_ARG, "unknown map");
        free(as), free(ap), free(bs), free(bp), free(cs), free(want);
        dfree(das), dfree(dap), dfree(dbs), dfree(dbp), dfree(dcs), dfree(dout);
    }
}

/* The unary ops of the old table; each now runs as the ops layer runs it (lib/ops/unary.c). */
enum { U_NEG, U_EXP, U_LOG, U_TANH, U_SIGMOID, U_RELU, U_GELU, U_SQRT, U_SQUARE, U_RSQRT, U_SILU, U_COUNT };
static const char *const U_NAMES[U_COUNT] = {"neg",  "exp",  "log",    "tanh",  "sigmoid", "relu",
                                             "gelu", "sqrt", "square", "rsqrt", "silu"};
/* Forward map, backward map over (a = dy, b = x, c = y), and p; GELU has entries of its own. */
static const struct {
    int fwd, bwd;
    double p;
} U_MAPS[U_COUNT] = {
    [U_NEG] = {TFC_MAP_NEG, TFC_MAP_NEG, 0},
    [U_EXP] = {TFC_MAP_EXP, TFC_MAP_EXP_BWD, 0},
    [U_LOG] = {TFC_MAP_LOG, TFC_MAP_DIV, 0},
    [U_TANH] = {TFC_MAP_TANH, TFC_MAP_TANH_BWD, 0},
    [U_SIGMOID] = {TFC_MAP_SIGMOID, TFC_MAP_SIGMOID_BWD, 0},
    [U_RELU] = {TFC_MAP_RELU, TFC_MAP_RELU_BWD, 0},
    [U_GELU] = {-1, -1, 0},
    [U_SQRT] = {TFC_MAP_SQRT, TFC_MAP_SQRT_BWD, 0},
    [U_SQUARE] = {TFC_MAP_POW_S, TFC_MAP_POW_S_BWD, 2.0},
    [U_RSQRT] = {TFC_MAP_RSQRT, TFC_MAP_RSQRT_BWD, 0},
    [U_SILU] = {TFC_MAP_SILU, TFC_MAP_SILU_BWD, 0},
};

static double ref_unary(int op, double x, double *grad) {
    double k = sqrt(2.0 / M_PI), u = k * (x + 0.044715 * x * x * x), t = tanh(u), s = 1.0 / (1.0 + exp(-x));
    switch (op) {
    case U_NEG: *grad = -1; return -x;
    case U_EXP: *grad = exp(x); return exp(x);
    case U_LOG: *grad = 1 / x; return log(x);
    case U_TANH: *grad = 1 - tanh(x) * tanh(x); return tanh(x);
    case U_SIGMOID: *grad = s * (1 - s); return s;
    case U_RELU: *grad = x > 0; return x > 0 ? x : 0;
    case U_GELU:
        *grad = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x);
        return 0.5 * x * (1 + t);
    case U_SQRT: *grad = 0.5 / sqrt(x); return sqrt(x);
    case U_RSQRT: *grad = -0.5 / (x * sqrt(x)); return 1 / sqrt(x);
    case U_SILU: *grad = s + x * s * (1 - s); return x * s;
    default: *grad = 2 * x; return x * x;
    }
}

static tfc_status unary_forward(int op, int dt, void *x, void *y, size_t n) {
    if (op == U_GELU) {
        tfc_gelu_problem g = {.dtype = (tfc_dtype)dt, .n = (int64_t)n, .approximate = 1, .x = x, .y = y};
        return A->gelu_forward(&g);
    }
    tfc_sview vx = view_flat(x, dt, n), vy = view_flat(y, dt, n);
    tfc_map_problem m = {.op = (tfc_map_op)U_MAPS[op].fwd, .out = &vy, .a = &vx, .p = U_MAPS[op].p};
    return A->map(&m);
}

/* dx (+)= dy · f'(x), reading the forward's output y where the derivative does. */
static tfc_status unary_backward(int op, int dt, void *dy, void *x, void *y, void *dx, size_t n, int accumulate) {
    if (op == U_GELU) {
        tfc_gelu_problem g = {.dtype = (tfc_dtype)dt,
                              .n = (int64_t)n,
                              .approximate = 1,
                              .x = x,
                              .dy = dy,
                              .dx = dx,
                              .accumulate = accumulate};
        return A->gelu_backward(&g);
    }
    tfc_sview vdy = view_flat(dy, dt, n), vx = view_flat(x, dt, n), vy = view_flat(y, dt, n);
    tfc_sview vdx = view_flat(dx, dt, n);
    tfc_map_problem m = {.op = (tfc_map_op)U_MAPS[op].bwd,
                         .out = &vdx,
                         .a = &vdy,
                         .b = &vx,
                         .c = &vy,
                         .p = U_MAPS[op].p,
                         .accumulate = accumulate};
    return A->map(&m);
}

TEST(unary_ops_and_backward) {
    for (int di = 0; di < 2; di++) {
        int dt = DTYPES[di];
        size_t n = 1025;
        char what[96];
        float *x = rand_host(n, 0.1f, 3, dt, 5), *dy = rand_host(n, -1, 1, dt, 6), *want = malloc(n * 4);
        for (size_t i = 0; i < n; i += 2) x[i] = -x[i] * 0.5f; /* negatives too, except for log/sqrt/rsqrt */
        float *xp = rand_host(n, 0.1f, 3, dt, 7);
        void *dx = up(x, n, dt), *dxp = up(xp, n, dt), *ddy = up(dy, n, dt), *dout = dev(n, dt), *dgrad = dev(n, dt);
        for (int op = 0; op < U_COUNT; op++) {
            int positive = op == U_LOG || op == U_SQRT || op == U_RSQRT;
            const float *in = positive ? xp : x;
            void *din = positive ? dxp : dx;
            double gr;
            CHECK_CU(unary_forward(op, dt, din, dout, n));
            float *g = down(dout, n, dt);
            for (size_t i = 0; i < n; i++) want[i] = (float)ref_unary(op, in[i], &gr);
            snprintf(what, sizeof what, "unary %s (%s)", U_NAMES[op], dt_name(dt));
            CHECK_ALL(g, want, n, tol_elem(dt) * 2, what);
            free(g);
            /* The backward reads the forward's output as stored on the device (dout). */
            CHECK_CU(unary_backward(op, dt, ddy, din, dout, dgrad, n, 0));
            g = down(dgrad, n, dt);
            for (size_t i = 0; i < n; i++) {
                ref_unary(op, in[i], &gr);
                want[i] = (float)(dy[i] * gr);
            }
            snprintf(what, sizeof what, "unary %s backward (%s)", U_NAMES[op], dt_name(dt));
            CHECK_ALL(g, want, n, tol_elem(dt) * 2, what);
            /* Accumulate: dx += dy f'(x) doubles it. */
            CHECK_CU(unary_backward(op, dt, ddy, din, dout, dgrad, n, 1));
            free(g);
            g = down(dgrad, n, dt);
            for (size_t i = 0; i < n; i++) want[i] *= 2;
            snprintf(what, sizeof what, "unary %s backward accumulate (%s)", U_NAMES[op], dt_name(dt));
            CHECK_ALL(g, want, n, tol_elem(dt) * 3, what);
            free(g);
        }
        free(x), free(xp), free(dy), free(want), dfree(dx), dfree(dxp), dfree(ddy), dfree(dout), dfree(dgrad);
    }
}

/*
 * SwiGLU with row strides: gate and up as the column halves of one [N, 2F]
 * buffer (ld 2F) and the gradients written into the halves of another, then
 * separate contiguous operands writing into a column half (the other half
 * keeps its fill), with accumulate and a NULL gradient. References from the
 * definitions: silu(g) = g / (1 + e^-g), silu'(g) = σ + g σ (1 − σ).
 */
TEST(swiglu_row_strides_fused_halves_accumulate) {
    const int64_t N = 37, F = 45, W = 2 * F, n = N * F;
    for (int di = 0; di < 2; di++) {
        int dt = DTYPES[di];
        char what[96];
        float *gu = rand_host((size_t)(N * W), -6, 6, dt, 300 + di), *dy = rand_host((size_t)n, -1, 1, dt, 310 + di);
        for (int64_t r = 0; r < N; r++) /* up in [-2, 2); a few gates far out (no overflow, limits 0 and g) */
            for (int64_t j = F; j < W; j++) gu[r * W + j] = round_dt(gu[r * W + j] / 3, dt);
        gu[0] = 100, gu[1] = -100, gu[2] = 30, gu[3] = -30, gu[4] = 0;
        float *wy = malloc((size_t)n * 4), *wd = malloc((size_t)(N * W) * 4);
        for (int64_t r = 0; r < N; r++)
            for (int64_t j = 0; j < F; j++) {
                double g = gu[r * W + j], u = gu[r * W + F + j], d = dy[r * F + j], sg = 1.0 / (1.0 + exp(-g));
                wy[r * F + j] = (float)(g / (1.0 + exp(-g)) * u);
                wd[r * W + j] = (float)(d * u * (sg + g * sg * (1 - sg)));
                wd[r * W + F + j] = (float)(d * g * sg);
            }
        void *dgu = up(gu, (size_t)(N * W), dt), *ddy = up(dy, (size_t)n, dt), *dout = dev((size_t)n, dt);
        void *dgrad = dev((size_t)(N * W), dt);
        size_t es = dt_size(dt);
        tfc_swiglu_problem p = {.dtype = (tfc_dtype)dt,
                                .rows = N,
                                .cols = F,
                                .gate = dgu,
                                .up = (char *)dgu + F * es,
                                .ld_gate = W,
                                .ld_up = W,
                                .out = dout,
                                .ld_out = F};
        CHECK_CU(A->swiglu_forward(&p));
        snprintf(what, sizeof what, "swiglu of the halves of [N, 2F] (%s)", dt_name(dt));
        CHECK_DEVICE(dout, (size_t)n, dt, wy, 2 * tol_elem(dt), what);
        p = (tfc_swiglu_problem){.dtype = (tfc_dtype)dt,
                                 .rows = N,
                                 .cols = F,
                                 .gate = dgu,
                                 .up = (char *)dgu + F * es,
                                 .ld_gate = W,
                                 .ld_up = W,
                                 .dy = ddy,
                                 .ld_dy = F,
                                 .dgate = dgrad,
                                 .dup = (char *)dgrad + F * es,
                                 .ld_dgate = W,
                                 .ld_dup = W};
        CHECK_CU(A->swiglu_backward(&p));
        snprintf(what, sizeof what, "swiglu backward into the halves of d[N, 2F] (%s)", dt_name(dt));
        CHECK_DEVICE(dgrad, (size_t)(N * W), dt, wd, 2 * tol_elem(dt), what);
        p.accumulate = 1;
        CHECK_CU(A->swiglu_backward(&p));
        float *w2 = malloc((size_t)(N * W) * 4);
        for (int64_t i = 0; i < N * W; i++) w2[i] = 2 * wd[i];
        snprintf(what, sizeof what, "swiglu backward accumulated (%s)", dt_name(dt));
        CHECK_DEVICE(dgrad, (size_t)(N * W), dt, w2, 3 * tol_elem(dt), what);
        /* separate contiguous gate and up; out and dgate into the first half of a filled [N, 2F] buffer */
        float *gh = malloc((size_t)n * 4), *uh = malloc((size_t)n * 4);
        for (int64_t r = 0; r < N; r++)
            for (int64_t j = 0; j < F; j++) gh[r * F + j] = gu[r * W + j], uh[r * F + j] = gu[r * W + F + j];
        void *dg = up(gh, (size_t)n, dt), *du = up(uh, (size_t)n, dt);
        tfc_fill_problem fp = {.dst = view_flat(dgrad, dt, N * W), .value = -7.0};
        CHECK_CU(A->fill(&fp));
        p = (tfc_swiglu_problem){.dtype = (tfc_dtype)dt,
                                 .rows = N,
                                 .cols = F,
                                 .gate = dg,
                                 .up = du,
                                 .ld_gate = F,
                                 .ld_up = F,
                                 .out = dgrad,
                                 .ld_out = W};
        CHECK_CU(A->swiglu_forward(&p));
        for (int64_t r = 0; r < N; r++)
            for (int64_t j = 0; j < F; j++) w2[r * W + j] = wy[r * F + j], w2[r * W + F + j] = -7.0f;
        snprintf(what, sizeof what, "swiglu into a column half, the other kept (%s)", dt_name(dt));
        CHECK_DEVICE(dgrad, (size_t)(N * W), dt, w2, 2 * tol_elem(dt), what);
        p = (tfc_swiglu_problem){.dtype = (tfc_dtype)dt,
                                 .rows = N,
                                 .cols = F,
                                 .gate = dg,
                                 .up = du,
                                 .ld_gate = F,
                                 .ld_up = F,
                                 .dy = ddy,
                                 .ld_dy = F,
                                 .dgate = dgrad,
                                 .ld_dgate = W};
        CHECK_CU(A->swiglu_backward(&p));
        for (int64_t r = 0; r < N; r++)
            for (int64_t j = 0; j < F; j++) w2[r * W + j] = wd[r * W + j];
        snprintf(what, sizeof what, "swiglu dgate alone (dup NULL) into a column half (%s)", dt_name(dt));
        CHECK_DEVICE(dgrad, (size_t)(N * W), dt, w2, 2 * tol_elem(dt), what);
        free(gu), free(dy), free(wy), free(wd), free(w2), free(gh), free(uh);
        dfree(dgu), dfree(ddy), dfree(dout), dfree(dgrad), dfree(dg), dfree(du);
    }
}

TEST(sums_and_means_over_a_middle_dim_and_max_refused) {
    /* [outer, n, inner]; the last two: many outputs (one thread per output) and n = 0 (sum 0). */
    const size_t shapes[5][3] = {{7, 1000, 1}, {3, 50, 17}, {1, 4099, 1}, {2, 40, 6000}, {3, 0, 4}};
    for (int di = 0; di < 2; di++)
        for (int si = 0; si < 5; si++) {
            int dt = DTYPES[di];
            size_t O = shapes[si][0], N = shapes[si][1], I = shapes[si][2];
            char what[96];
            float *x = rand_host(O * N * I, -1, 1, dt, 8 + si), *want = malloc(O * I * 4);
            void *dx = up(x, O * N * I, dt), *dout = dev(O * I, dt);
            /* The reduced dim moved last: in = [O, I, N] with strides (N·I, 1, I), out [O, I]. */
            tfc_reduce_problem r = {.op = TFC_REDUCE_SUM,
                                    .nkeep = 2,
                                    .out = dout,
                                    .in = view_nd(dx, dt, 3, (int64_t[]){(int64_t)O, (int64_t)I, (int64_t)N},
                                                  (int64_t[]){(int64_t)(N * I), 1, (int64_t)I})};
            for (int mean = 0; mean < 2; mean++) {
                if (mean && !N) continue;
                tfc_fill_problem f = {.dst = view_flat(dout, dt, O * I), .value = 7.0}; /* overwritten */
                CHECK_CU(A->fill(&f));
                r.scale = mean ? 1.0 / (double)N : 1.0;
                CHECK_CU(A->reduce(&r));
                for (size_t o = 0; o < O; o++)
                    for (size_t j = 0; j < I; j++) {
                        double s = 0;
                        for (size_t k = 0; k < N; k++) s += x[(o * N + k) * I + j];
                        want[o * I + j] = (float)(mean ? s / N : s);
                    }
                float *g = down(dout, O * I, dt);
                snprintf(what, sizeof what, "reduce %s [%zu,%zu,%zu] (%s)", mean ? "mean" : "sum", O, N, I,
                         dt_name(dt));
                CHECK_ALL(g, want, O * I, tol_sum(dt), what);
                free(g);
            }
            /* Max (and min, arg, var) are the CPU's only. */
            r.op = TFC_REDUCE_MAX, r.scale = 0;
            CHECK_CU_ERR(A->reduce(&r), TFC_ERR_UNSUPPORTED, "CPU-only");
            free(x), free(want), dfree(dx), dfree(dout);
        }
}

TEST(softmax_and_log_softmax_forward_backward) {
    const size_t shapes[2][3] = {{9, 1000, 1}, {2, 33, 7}};
    for (int di = 0; di < 2; di++)
        for (int si = 0; si < 2; si++)
            for (int lg = 0; lg < 2; lg++) {
                int dt = DTYPES[di];
                size_t O = shapes[si][0], N = shapes[si][1], I = shapes[si][2], n = O * N * I;
                float *x = rand_host(n, -4, 4, dt, 20), *dy = rand_host(n, -1, 1, dt, 21);
                float *y = malloc(n * 4), *dx = malloc(n * 4);
                for (size_t o = 0; o < O; o++)
                    for (size_t j = 0; j < I; j++) {
                        double m = -INFINITY, s = 0;
                        for (size_t k = 0; k < N; k++) m = fmax(m, x[(o * N + k) * I + j]);
                        for (size_t k = 0; k < N; k++) s += exp(x[(o * N + k) * I + j] - m);
                        for (size_t k = 0; k < N; k++) {
                            size_t p = (o * N + k) * I + j;
                            double p_ = exp(x[p] - m) / s;
                            y[p] = (float)(lg ? x[p] - m - log(s) : p_);
                        }
                    }
                void *d_x = up(x, n, dt), *d_y = dev(n, dt), *d_dy = up(dy, n, dt), *d_dx = dev(n, dt);
                tfc_softmax_problem sp = {.dtype = (tfc_dtype)dt,
                                          .outer = (int64_t)O,
                                          .d = (int64_t)N,
                                          .inner = (int64_t)I,
                                          .log = lg,
                                          .x = d_x,
                                          .y = d_y};
                CHECK_CU(A->softmax_forward(&sp));
                float *g = down(d_y, n, dt);
                CHECK_ALL(g, y, n, tol_sum(dt), "softmax forward");
                /* The backward takes the forward output as stored on the device. */
                free(g);
                g = down(d_y, n, dt);
                for (size_t o = 0; o < O; o++)
                    for (size_t j = 0; j < I; j++) {
                        double dot = 0;
                        for (size_t k = 0; k < N; k++) {
                            size_t p = (o * N + k) * I + j;
                            dot += lg ? dy[p] : (double)dy[p] * g[p];
                        }
                        for (size_t k = 0; k < N; k++) {
                            size_t p = (o * N + k) * I + j;
                            dx[p] = (float)(lg ? dy[p] - exp(g[p]) * dot : g[p] * (dy[p] - dot));
                        }
                    }
                sp = (tfc_softmax_problem){.dtype = (tfc_dtype)dt,
                                           .outer = (int64_t)O,
                                           .d = (int64_t)N,
                                           .inner = (int64_t)I,
                                           .log = lg,
                                           .y_in = d_y,
                                           .dy = d_dy,
                                           .dx = d_dx};
                CHECK_CU(A->softmax_backward(&sp));
                free(g);
                g = down(d_dx, n, dt);
                CHECK_ALL(g, dx, n, tol_sum(dt), "softmax backward");
                free(g), free(x), free(dy), free(y), free(dx);
                dfree(d_x), dfree(d_y), dfree(d_dy), dfree(d_dx);
            }
}

TEST(layernorm_forward_backward) {
    for (int di = 0; di < 2; di++) {
        int dt = DTYPES[di];
        size_t R = 37, C = 200, n = R * C;
        float *x = rand_host(n, -2, 3, dt, 30), *w = rand_host(C, 0.5f, 1.5f, dt, 31), *b = rand_host(C, -1, 1, dt, 32);
        float *dy = rand_host(n, -1, 1, dt, 33);
        float *y = malloc(n * 4), *mean = malloc(R * 4), *rstd = malloc(R * 4), *dx = malloc(n * 4);
        float *y1 = malloc(n * 4), *dx1 = malloc(n * 4); /* weight 1, no bias */
        double *dw = calloc(C, 8), *db = calloc(C, 8);
        for (size_t r = 0; r < R; r++) {
            double m = 0, v = 0, sg = 0, sgx = 0, s1 = 0, s1x = 0;
            for (size_t c = 0; c < C; c++) m += x[r * C + c];
            m /= C;
            for (size_t c = 0; c < C; c++) v += (x[r * C + c] - m) * (x[r * C + c] - m);
            double rs = 1.0 / sqrt(v / C + 1e-5);
            mean[r] = (float)m, rstd[r] = (float)rs;
            for (size_t c = 0; c < C; c++) {
                double xh = (x[r * C + c] - m) * rs, g = (double)dy[r * C + c] * w[c];
                y[r * C + c] = (float)(xh * w[c] + b[c]);
                y1[r * C + c] = (float)xh;
                sg += g, sgx += g * xh;
                s1 += dy[r * C + c], s1x += dy[r * C + c] * xh;
                dw[c] += dy[r * C + c] * xh, db[c] += dy[r * C + c];
            }
            for (size_t c = 0; c < C; c++) {
                double xh = (x[r * C + c] - m) * rs, g = (double)dy[r * C + c] * w[c];
                dx[r * C + c] = (float)(rs * (g - sg / C - xh * sgx / C));
                dx1[r * C + c] = (float)(rs * (dy[r * C + c] - s1 / C - xh * s1x / C));
            }
        }
        void *d_x = up(x, n, dt), *d_w = up(w, C, dt), *d_b = up(b, C, dt), *d_y = dev(n, dt), *d_dy = up(dy, n, dt);
        void *d_dx = dev(n, dt), *d_dw = dev(C, dt), *d_db = dev(C, dt);
        float *d_mean = dev(R, TFC_DTYPE_F32), *d_rstd = dev(R, TFC_DTYPE_F32);
        tfc_layernorm_problem lp = {.dtype = (tfc_dtype)dt,
                                    .rows = (int64_t)R,
                                    .cols = (int64_t)C,
                                    .eps = 1e-5,
                                    .x = d_x,
                                    .weight = d_w,
                                    .bias = d_b,
                                    .y = d_y,
                                    .mean = d_mean,
                                    .rstd = d_rstd};
        CHECK_CU(A->layernorm_forward(&lp));
        float *g = down(d_y, n, dt);
        CHECK_ALL(g, y, n, tol_sum(dt), "layernorm y");
        free(g);
        CHECK_DEVICE(d_mean, R, TFC_DTYPE_F32, mean, 1e-5, "layernorm mean");
        CHECK_DEVICE(d_rstd, R, TFC_DTYPE_F32, rstd, 1e-5, "layernorm rstd");
        lp = (tfc_layernorm_problem){.dtype = (tfc_dtype)dt,
                                     .rows = (int64_t)R,
                                     .cols = (int64_t)C,
                                     .eps = 1e-5,
                                     .x = d_x,
                                     .weight = d_w,
                                     .mean = d_mean,
                                     .rstd = d_rstd,
                                     .dy = d_dy,
                                     .dx = d_dx,
                                     .dweight = d_dw,
                                     .dbias = d_db};
        CHECK_CU(A->layernorm_backward(&lp));
        float *fw = malloc(C * 4), *fb = malloc(C * 4);
        for (size_t c = 0; c < C; c++) fw[c] = (float)dw[c], fb[c] = (float)db[c];
        CHECK_DEVICE(d_dx, n, dt, dx, tol_sum(dt) * 2, "layernorm dx");
        CHECK_DEVICE(d_dw, C, dt, fw, tol_sum(dt), "layernorm dw");
        CHECK_DEVICE(d_db, C, dt, fb, tol_sum(dt), "layernorm db");
        /* Accumulating db a second time doubles it; dx and dw may be NULL. */
        lp.dx = NULL, lp.dweight = NULL, lp.accumulate = 1;
        CHECK_CU(A->layernorm_backward(&lp));
        for (size_t c = 0; c < C; c++) fb[c] *= 2;
        CHECK_DEVICE(d_db, C, dt, fb, tol_sum(dt) * 2, "layernorm db accumulated");
        /* No weight, bias or saved stats: the module stands in ones and scratch stats. */
        lp = (tfc_layernorm_problem){
            .dtype = (tfc_dtype)dt, .rows = (int64_t)R, .cols = (int64_t)C, .eps = 1e-5, .x = d_x, .y = d_y};
        CHECK_CU(A->layernorm_forward(&lp));
        CHECK_DEVICE(d_y, n, dt, y1, tol_sum(dt), "layernorm y without weight and bias");
        lp = (tfc_layernorm_problem){.dtype = (tfc_dtype)dt,
                                     .rows = (int64_t)R,
                                     .cols = (int64_t)C,
                                     .eps = 1e-5,
                                     .x = d_x,
                                     .mean = d_mean,
                                     .rstd = d_rstd,
                                     .dy = d_dy,
                                     .dx = d_dx};
        CHECK_CU(A->layernorm_backward(&lp));
        g = down(d_dx, n, dt);
        CHECK_ALL(g, dx1, n, tol_sum(dt) * 2, "layernorm dx without weight");
        free(g), free(fw), free(fb);
        free(x), free(w), free(b), free(dy), free(y), free(mean), free(rstd), free(dx), free(dw), free(db);
        free(y1), free(dx1);
        dfree(d_x), dfree(d_w), dfree(d_b), dfree(d_y), dfree(d_dy), dfree(d_dx), dfree(d_dw), dfree(d_db);
        dfree(d_mean), dfree(d_rstd);
    }
}

/*
 * RMSNorm: rstd = 1/sqrt(mean(x²) + eps), y = x · rstd · w; backward with
 * x̂ = x · rstd, g = dy · w: dx = rstd · (g − x̂ · mean(g · x̂)), dw = Σ_rows dy · x̂.
 * bf16 is computed in f32 and y rounded once, so y is within one output
 * rounding of the f64 reference (tol_elem).
 */
TEST(rmsnorm_forward_backward) {
    for (int di = 0; di < 2; di++) {
        int dt = DTYPES[di];
        size_t R = 37, C = 200, n = R * C;
        float *x = rand_host(n, -2, 3, dt, 130), *w = rand_host(C, -1.5f, 1.5f, dt, 131);
        float *dy = rand_host(n, -1, 1, dt, 133);
        float *y = malloc(n * 4), *rstd = malloc(R * 4), *dx = malloc(n * 4);
        float *y1 = malloc(n * 4), *dx1 = malloc(n * 4); /* no weight */
        double *dw = calloc(C, 8);
        for (size_t r = 0; r < R; r++) {
            double ms = 0, sgx = 0, s1x = 0;
            for (size_t c = 0; c < C; c++) ms += (double)x[r * C + c] * x[r * C + c];
            double rs = 1.0 / sqrt(ms / C + 1e-6);
            rstd[r] = (float)rs;
            for (size_t c = 0; c < C; c++) {
                double xh = x[r * C + c] * rs, g = (double)dy[r * C + c] * w[c];
                y[r * C + c] = (float)(xh * w[c]);
                y1[r * C + c] = (float)xh;
                sgx += g * xh, s1x += dy[r * C + c] * xh;
                dw[c] += dy[r * C + c] * xh;
            }
            for (size_t c = 0; c < C; c++) {
                double xh = x[r * C + c] * rs, g = (double)dy[r * C + c] * w[c];
                dx[r * C + c] = (float)(rs * (g - xh * sgx / C));
                dx1[r * C + c] = (float)(rs * (dy[r * C + c] - xh * s1x / C));
            }
        }
        void *d_x = up(x, n, dt), *d_w = up(w, C, dt), *d_y = dev(n, dt), *d_dy = up(dy, n, dt);
        void *d_dx = dev(n, dt), *d_dw = dev(C, dt);
        float *d_rstd = dev(R, TFC_DTYPE_F32);
        tfc_rmsnorm_problem rp = {.dtype = (tfc_dtype)dt,
                                  .rows = (int64_t)R,
                                  .cols = (int64_t)C,
                                  .eps = 1e-6,
                                  .x = d_x,
                                  .weight = d_w,
                                  .y = d_y,
                                  .rstd = d_rstd};
        CHECK_CU(A->rmsnorm_forward(&rp));
        CHECK_DEVICE(d_y, n, dt, y, tol_elem(dt), "rmsnorm y");
        CHECK_DEVICE(d_rstd, R, TFC_DTYPE_F32, rstd, 1e-5, "rmsnorm rstd");
        rp = (tfc_rmsnorm_problem){.dtype = (tfc_dtype)dt,
                                   .rows = (int64_t)R,
                                   .cols = (int64_t)C,
                                   .eps = 1e-6,
                                   .x = d_x,
                                   .weight = d_w,
                                   .rstd = d_rstd,
                                   .dy = d_dy,
                                   .dx = d_dx,
                                   .dweight = d_dw};
        CHECK_CU(A->rmsnorm_backward(&rp));
        float *fw = malloc(C * 4);
        for (size_t c = 0; c < C; c++) fw[c] = (float)dw[c];
        CHECK_DEVICE(d_dx, n, dt, dx, tol_sum(dt) * 2, "rmsnorm dx");
        CHECK_DEVICE(d_dw, C, dt, fw, tol_sum(dt), "rmsnorm dw");
        /* Accumulating dw a second time doubles it; dx may be NULL. */
        rp.dx = NULL, rp.accumulate = 1;
        CHECK_CU(A->rmsnorm_backward(&rp));
        for (size_t c = 0; c < C; c++) fw[c] *= 2;
        CHECK_DEVICE(d_dw, C, dt, fw, tol_sum(dt) * 2, "rmsnorm dw accumulated");
        /* No weight and no rstd kept: the module stands in ones and a scratch rstd. */
        rp = (tfc_rmsnorm_problem){
            .dtype = (tfc_dtype)dt, .rows = (int64_t)R, .cols = (int64_t)C, .eps = 1e-6, .x = d_x, .y = d_y};
        CHECK_CU(A->rmsnorm_forward(&rp));
        CHECK_DEVICE(d_y, n, dt, y1, tol_elem(dt), "rmsnorm y without weight");
        rp = (tfc_rmsnorm_problem){.dtype = (tfc_dtype)dt,
                                   .rows = (int64_t)R,
                                   .cols = (int64_t)C,
                                   .eps = 1e-6,
                                   .x = d_x,
                                   .rstd = d_rstd,
                                   .dy = d_dy,
                                   .dx = d_dx};
        CHECK_CU(A->rmsnorm_backward(&rp));
        CHECK_DEVICE(d_dx, n, dt, dx1, tol_sum(dt) * 2, "rmsnorm dx without weight");
        free(fw), free(x), free(w), free(dy), free(y), free(rstd), free(dx), free(dw), free(y1), free(dx1);
        dfree(d_x), dfree(d_w), dfree(d_y), dfree(d_dy), dfree(d_dx), dfree(d_dw), dfree(d_rstd);
    }
}

TEST(cross_entropy_forward_backward_with_ignore_index) {
    for (int di = 0; di < 2; di++)
        for (int it = 0; it < 2; it++) {
            int dt = DTYPES[di], tdt = it ? TFC_DTYPE_I64 : TFC_DTYPE_I32;
            size_t N = 13, C = 3001;
            float *x = rand_host(N * C, -5, 5, dt, 40);
            int64_t t64[13];
            int32_t t32[13];
            uint64_t s = 99;
            for (size_t r = 0; r < N; r++) t64[r] = (int64_t)(rng_next(&s) % C), t32[r] = (int32_t)t64[r];
            t64[3] = t32[3] = -100, t64[8] = t32[8] = -100; /* ignored rows */
            double loss = 0, nvalid = 0;
            float *lse = malloc(N * 4), *dx = malloc(N * C * 4);
            for (size_t r = 0; r < N; r++) {
                double m = -INFINITY, sum = 0;
                for (size_t c = 0; c < C; c++) m = fmax(m, x[r * C + c]);
                for (size_t c = 0; c < C; c++) sum += exp(x[r * C + c] - m);
                lse[r] = (float)(m + log(sum));
                if (t64[r] != -100) loss += lse[r] - x[r * C + t64[r]], nvalid++;
            }
            loss /= nvalid;
            float dloss = 0.5f;
            for (size_t r = 0; r < N; r++)
                for (size_t c = 0; c < C; c++)
                    dx[r * C + c] = t64[r] == -100
                        ? 0.0f
                        : (float)(dloss / nvalid * (exp(x[r * C + c] - (double)lse[r]) - (c == (size_t)t64[r])));
            void *d_x = up(x, N * C, dt), *d_t = dev(N, TFC_DTYPE_I64), *d_dx = dev(N * C, dt);
            float *d_loss = dev(1, TFC_DTYPE_F32), *d_lse = dev(N, TFC_DTYPE_F32),
                  *d_dloss = up(&dloss, 1, TFC_DTYPE_F32);
            CHECK_CU(A->memcpy(0, d_t, it ? (void *)t64 : (void *)t32, N * (it ? 8 : 4), TFC_MEMCPY_H2D));
            tfc_cross_entropy_problem cp = {.dtype = (tfc_dtype)dt,
                                            .index_dtype = (tfc_dtype)tdt,
                                            .n = (int64_t)N,
                                            .c = (int64_t)C,
                                            .ignore_index = -100,
                                            .logits = d_x,
                                            .targets = d_t,
                                            .loss = d_loss,
                                            .lse = d_lse};
            CHECK_CU(A->cross_entropy_forward(&cp));
            float *g = down(d_loss, 1, TFC_DTYPE_F32), fl = (float)loss;
            CHECK_ALL(g, &fl, 1, 1e-5, "cross-entropy loss");
            free(g);
            CHECK_DEVICE(d_lse, N, TFC_DTYPE_F32, lse, 1e-5, "cross-entropy lse");
            tfc_cross_entropy_problem bp = {.dtype = (tfc_dtype)dt,
                                            .index_dtype = (tfc_dtype)tdt,
                                            .n = (int64_t)N,
                                            .c = (int64_t)C,
                                            .ignore_index = -100,
                                            .logits = d_x,
                                            .targets = d_t,
                                            .dloss = d_dloss,
                                            .lse_in = d_lse,
                                            .dlogits = d_dx};
            CHECK_CU(A->cross_entropy_backward(&bp));
            CHECK_DEVICE(d_dx, N * C, dt, dx, dt == TFC_DTYPE_BF16 ? 1e-3 : 1e-6, "cross-entropy dlogits");
            bp.accumulate = 1;
            CHECK_CU(A->cross_entropy_backward(&bp));
            for (size_t i = 0; i < N * C; i++) dx[i] *= 2;
            CHECK_DEVICE(d_dx, N * C, dt, dx, dt == TFC_DTYPE_BF16 ? 2e-3 : 2e-6, "cross-entropy dlogits accumulated");
            /* The CUDA backward needs the forward's lse. */
            bp.lse_in = NULL;
            CHECK_CU_ERR(A->cross_entropy_backward(&bp), TFC_ERR_UNSUPPORTED, "lse");
            /* A target outside [0, C) is an error naming the row. */
            t64[5] = t32[5] = (int32_t)C;
            CHECK_CU(A->memcpy(0, d_t, it ? (void *)t64 : (void *)t32, N * (it ? 8 : 4), TFC_MEMCPY_H2D));
            CHECK_CU_ERR(A->cross_entropy_forward(&cp), TFC_ERR_INVALID_ARG, "targets[5] is 3001");
            cp.index_dtype = TFC_DTYPE_F32;
            CHECK_CU_ERR(A->cross_entropy_forward(&cp), TFC_ERR_DTYPE, "index dtype f32");
            free(x), free(lse), free(dx);
            dfree(d_x), dfree(d_t), dfree(d_dx), dfree(d_loss), dfree(d_lse), dfree(d_dloss);
        }
}

TEST(embedding_forward_backward_deterministic) {
    for (int di = 0; di < 2; di++) {
        int dt = DTYPES[di];
        size_t V = 50, C = 70, N = 300;
        float *w = rand_host(V * C, -1, 1, dt, 50), *dout = rand_host(N * C, -1, 1, dt, 51);
        int64_t ids[300], ids_shape[1] = {300};
        uint64_t s = 5;
        for (size_t r = 0; r < N; r++) ids[r] = (int64_t)(rng_next(&s) % 7) * 3; /* many repeats, unused rows */
        float *out = malloc(N * C * 4), *dw = calloc(V * C, 4);
        for (size_t r = 0; r < N; r++)
            for (size_t c = 0; c < C; c++) out[r * C + c] = w[ids[r] * C + c];
        /* Sequential f32 sums in increasing r: exactly what the kernel does. */
        for (size_t r = 0; r < N; r++)
            for (size_t c = 0; c < C; c++) dw[ids[r] * C + c] += dout[r * C + c];
        void *d_w = up(w, V * C, dt), *d_ids = dev(N, TFC_DTYPE_I64), *d_out = dev(N * C, dt),
             *d_do = up(dout, N * C, dt);
        void *d_dw = dev(V * C, dt);
        CHECK_CU(A->memcpy(0, d_ids, ids, N * 8, TFC_MEMCPY_H2D));
        tfc_embedding_problem ep = {.dtype = (tfc_dtype)dt,
                                    .index_dtype = TFC_DTYPE_I64,
                                    .n = (int64_t)N,
                                    .v = (int64_t)V,
                                    .c = (int64_t)C,
                                    .ids_shape = ids_shape,
                                    .ids_ndim = 1,
                                    .table = d_w,
                                    .ids = d_ids,
                                    .out = d_out};
        CHECK_CU(A->embedding_forward(&ep));
        float *g = down(d_out, N * C, dt);
        CHECK_ALL(g, out, N * C, 0.0, "embedding forward");
        free(g);
        tfc_fill_problem f = {.dst = view_flat(d_dw, dt, V * C), .value = 7.0}; /* overwritten, including unused rows */
        CHECK_CU(A->fill(&f));
        tfc_embedding_problem bp = {.dtype = (tfc_dtype)dt,
                                    .index_dtype = TFC_DTYPE_I64,
                                    .n = (int64_t)N,
                                    .v = (int64_t)V,
                                    .c = (int64_t)C,
                                    .ids_shape = ids_shape,
                                    .ids_ndim = 1,
                                    .ids = d_ids,
                                    .dout = d_do,
                                    .dtable = d_dw};
        CHECK_CU(A->embedding_backward(&bp));
        g = down(d_dw, V * C, dt);
        float *g2;
        /* Same f32 additions in the same order, then (bf16) one rounding: bitwise equal. */
        for (size_t i = 0; i < V * C; i++) dw[i] = round_dt(dw[i], dt);
        CHECK_ALL(g, dw, V * C, 0.0, "embedding backward (same order as a CPU loop)");
        CHECK_CU(A->embedding_backward(&bp));
        g2 = down(d_dw, V * C, dt);
        CHECK(memcmp(g, g2, V * C * 4) == 0); /* deterministic run to run */
        free(g), free(g2);
        ids[17] = -1;
        CHECK_CU(A->memcpy(0, d_ids, ids, N * 8, TFC_MEMCPY_H2D));
        CHECK_CU_ERR(A->embedding_forward(&ep), TFC_ERR_INVALID_ARG, "ids[17] is -1");
        CHECK_CU_ERR(A->embedding_backward(&bp), TFC_ERR_INVALID_ARG, "ids[17] is -1");
        free(w), free(dout), free(out), free(dw);
        dfree(d_w), dfree(d_ids), dfree(d_out), dfree(d_do), dfree(d_dw);
    }
}

/*
 * RoPE on x [B,H,T,D] read as the k slot of a fused [B,T,3,H,D] projection (row strides, no copy), positions per
 * sequence ([B,T], a KV cache's offsets) or shared ([T]). The reference rotates in double from the kernel's own
 * f32 angle (the f32 product p · inv_freq, transformers' angle): what remains is sincosf (2 ulp) and rounding.
 */
TEST(rope_forward_backward_strided_positions) {
    const struct {
        int64_t B, H, T, D, pos0;
        int per_seq;
    } cases[2] = {{2, 3, 5, 8, 7, 1}, {1, 2, 33, 256, 1000, 0}};
    for (int ci = 0; ci < 2; ci++)
        for (int di = 0; di < 2; di++) {
            const int dt = DTYPES[di];
            const int64_t B = cases[ci].B, H = cases[ci].H, T = cases[ci].T, D = cases[ci].D, h = D / 2;
            const size_t nqkv = (size_t)(B * T * 3 * H * D), n = (size_t)(B * H * T * D);
            const int64_t npos = cases[ci].per_seq ? B * T : T;
            float *qkv = rand_host(nqkv, -1, 1, dt, 60 + ci), *dy = rand_host(n, -1, 1, dt, 62 + ci);
            float *acc0 = rand_host(n, -1, 1, dt, 64 + ci), *inv = malloc((size_t)h * 4);
            float *want = malloc(n * 4), *want_dx = malloc(n * 4);
            int64_t *pos = malloc((size_t)npos * 8);
            for (int64_t i = 0; i < h; i++) inv[i] = (float)(1.0 / pow(10000.0, (double)(2 * i) / (double)D));
            for (int64_t i = 0; i < npos; i++) pos[i] = cases[ci].pos0 + (i % T) + (i / T) * 3;
            const int64_t sb = T * 3 * H * D, sh = D, sr = 3 * H * D, k_off = H * D;
            for (int64_t b = 0; b < B; b++)
                for (int64_t hd = 0; hd < H; hd++)
                    for (int64_t t = 0; t < T; t++) {
                        const float a32 = (float)pos[cases[ci].per_seq ? b * T + t : t]; /* the f32 position */
                        for (int64_t i = 0; i < h; i++) {
                            const float ang = a32 * inv[i]; /* the f32 product */
                            const double c = cos((double)ang), sn = sin((double)ang);
                            const float *xr = qkv + k_off + b * sb + hd * sh + t * sr;
                            const size_t o = (size_t)(((b * H + hd) * T + t) * D);
                            want[o + i] = round_dt((float)(xr[i] * c - xr[i + h] * sn), dt);
                            want[o + i + h] = round_dt((float)(xr[i + h] * c + xr[i] * sn), dt);
                            want_dx[o + i] = round_dt((float)(acc0[o + i] + (dy[o + i] * c + dy[o + i + h] * sn)), dt);
                            want_dx[o + i + h] =
                                round_dt((float)(acc0[o + i + h] + (dy[o + i + h] * c - dy[o + i] * sn)), dt);
                        }
                    }
            void *d_qkv = up(qkv, nqkv, dt), *d_dy = up(dy, n, dt), *d_dx = up(acc0, n, dt), *d_y = dev(n, dt);
            void *d_inv = up(inv, (size_t)h, TFC_DTYPE_F32), *d_pos = dev((size_t)npos, TFC_DTYPE_I64);
            CHECK_CU(A->memcpy(0, d_pos, pos, (size_t)npos * 8, TFC_MEMCPY_H2D));
            tfc_rope_problem p = {.dtype = (tfc_dtype)dt,
                                  .B = B,
                                  .H = H,
                                  .Tn = T,
                                  .D = D,
                                  .pos_sb = cases[ci].per_seq ? T : 0,
                                  .pos = d_pos,
                                  .inv_freq = d_inv,
                                  .x = {elem(d_qkv, k_off, dt), sb, sh, sr},
                                  .y = d_y,
                                  .dy = {d_dy, H * T * D, T * D, D},
                                  .dx = d_dx,
                                  .accumulate = 1};
            char what[96];
            for (int checked = 0; checked < 2; checked++) {
                p.pos_checked = checked;
                CHECK_CU(A->rope_forward(&p));
                snprintf(what, sizeof what, "rope forward D %lld (%s, checked %d)", (long long)D, dt_name(dt), checked);
                CHECK_DEVICE(d_y, n, dt, want, tol_elem(dt), what);
            }
            CHECK_CU(A->rope_backward(&p)); /* accumulates onto acc0 */
            snprintf(what, sizeof what, "rope backward, accumulated, D %lld (%s)", (long long)D, dt_name(dt));
            CHECK_DEVICE(d_dx, n, dt, want_dx, tol_elem(dt), what);
            /* a negative position, found before anything is written */
            pos[npos - 1] = -2;
            CHECK_CU(A->memcpy(0, d_pos, pos, (size_t)npos * 8, TFC_MEMCPY_H2D));
            p.pos_checked = 0;
            tfc_fill_problem f = {.dst = view_flat(d_y, dt, (int64_t)n), .value = 5.0};
            CHECK_CU(A->fill(&f));
            snprintf(what, sizeof what, "at flat index %lld", (long long)(npos - 1));
            CHECK_CU_ERR(A->rope_forward(&p), TFC_ERR_INVALID_ARG, what);
            CHECK_CU_ERR(A->rope_backward(&p), TFC_ERR_INVALID_ARG, "holds -2");
            for (size_t i = 0; i < n; i++) want[i] = 5.0f;
            CHECK_DEVICE(d_y, n, dt, want, 0.0, "rope forward wrote nothing on a bad position");
            free(qkv), free(dy), free(acc0), free(inv), free(want), free(want_dx), free(pos);
            dfree(d_qkv), dfree(d_dy), dfree(d_dx), dfree(d_y), dfree(d_inv), dfree(d_pos);
        }
}

TEST(bias_rows_and_bias_grad) {
    for (int di = 0; di < 2; di++) {
        int dt = DTYPES[di];
        char what[96];
        /* bias_rows: every row of y [rows, n] (row stride n) becomes b. */
        size_t R = 37, Nb = 70;
        float *b = rand_host(Nb, -1, 1, dt, 120), *y0 = rand_host(R * Nb, -1, 1, dt, 121), *want = malloc(R * Nb * 4);
        void *d_b = up(b, Nb, dt), *d_y = up(y0, R * Nb, dt);
        tfc_bias_problem bp = {
            .dtype = (tfc_dtype)dt, .rows = (int64_t)R, .n = (int64_t)Nb, .ld = (int64_t)Nb, .b = d_b, .y = d_y};
        CHECK_CU(A->bias_rows(&bp));
        for (size_t r = 0; r < R; r++)
            for (size_t j = 0; j < Nb; j++) want[r * Nb + j] = b[j];
        float *g = down(d_y, R * Nb, dt);
        snprintf(what, sizeof what, "bias_rows (%s)", dt_name(dt));
        CHECK_ALL(g, want, R * Nb, 0.0, what);
        free(g), free(b), free(y0), free(want), dfree(d_b), dfree(d_y);
        /*
         * bias_grad: db = column sums of dy [rows, n] read with a row stride ld > n
         * (a column slice); few columns (a block per column), more columns than the
         * module's one-block-per-output limit (a thread per column), and no rows.
         */
        const size_t cases[3][3] = {{300, 70, 80}, {16, 20000, 20008}, {0, 70, 70}};
        for (int ci = 0; ci < 3; ci++) {
            size_t rows = cases[ci][0], n = cases[ci][1], ld = cases[ci][2];
            float *dy = rand_host(rows * ld, -1, 1, dt, 130 + ci), *wdb = malloc(n * 4);
            for (size_t j = 0; j < n; j++) {
                double s = 0;
                for (size_t r = 0; r < rows; r++) s += dy[r * ld + j];
                wdb[j] = (float)s;
            }
            void *d_dy = up(dy, rows * ld, dt), *d_db = dev(n, dt);
            tfc_fill_problem f = {.dst = view_flat(d_db, dt, n), .value = 7.0}; /* overwritten */
            CHECK_CU(A->fill(&f));
            tfc_bias_problem gp = {.dtype = (tfc_dtype)dt,
                                   .rows = (int64_t)rows,
                                   .n = (int64_t)n,
                                   .ld = (int64_t)ld,
                                   .dy = d_dy,
                                   .db = d_db};
            CHECK_CU(A->bias_grad(&gp));
            g = down(d_db, n, dt);
            snprintf(what, sizeof what, "bias_grad rows %zu n %zu ld %zu (%s)", rows, n, ld, dt_name(dt));
            CHECK_ALL(g, wdb, n, tol_sum(dt), what);
            free(g);
            gp.accumulate = 1;
            CHECK_CU(A->bias_grad(&gp));
            for (size_t j = 0; j < n; j++) wdb[j] *= 2;
            g = down(d_db, n, dt);
            snprintf(what, sizeof what, "bias_grad accumulated rows %zu n %zu (%s)", rows, n, dt_name(dt));
            CHECK_ALL(g, wdb, n, tol_sum(dt) * 2, what);
            free(g), free(dy), free(wdb), dfree(d_dy), dfree(d_db);
        }
    }
}

static double gelu_ref(double x) { return 0.5 * x * (1 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }

/*
 * The composed epilogues: bias_rows writes b into C, the GEMM adds with
 * beta = 1, gelu_forward follows (what tfc_linear does on a backend
 * without the fused bias; CUDA's fused one is tested below, in
 * gemm_fused_bias_c_f32_tf32_and_the_plan_cache).
 */
TEST(gemm_transposes_batches_and_the_linear_epilogues) {
    for (int di = 0; di < 2; di++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int epi = 0; epi < 4; epi++) {
                    int dt = DTYPES[di];
                    int64_t M = 33, N = 40, K = 72, batch = 3;
                    float *a = rand_host(batch * M * K, -1, 1, dt, 60), *b = rand_host(K * N, -1, 1, dt, 61);
                    float *c0 = rand_host(batch * M * N, -1, 1, dt, 62), *bias = rand_host(N, -1, 1, dt, 63);
                    float *want = malloc(batch * M * N * 4);
                    float alpha = 0.75f, beta = epi == 0 ? 0.5f : 0.0f;
                    for (int64_t p = 0; p < batch; p++)
                        for (int64_t i = 0; i < M; i++)
                            for (int64_t j = 0; j < N; j++) {
                                double s = 0;
                                for (int64_t k = 0; k < K; k++) {
                                    double av = ta ? a[p * M * K + k * M + i] : a[p * M * K + i * K + k];
                                    double bv = tb ? b[j * K + k] : b[k * N + j];
                                    s += av * bv;
                                }
                                s = alpha * s + beta * c0[(p * M + i) * N + j];
                                if (epi & 1) s += bias[j];
                                if (epi & 2) s = gelu_ref(s);
                                want[(p * M + i) * N + j] = (float)s;
                            }
                    void *d_a = up(a, batch * M * K, dt), *d_b = up(b, K * N, dt), *d_c = up(c0, batch * M * N, dt);
                    void *d_bias = up(bias, N, dt), *d_g = dev(batch * M * N, dt);
                    if (epi & 1) {
                        tfc_bias_problem bp = {
                            .dtype = (tfc_dtype)dt, .rows = batch * M, .n = N, .ld = N, .b = d_bias, .y = d_c};
                        CHECK_CU(A->bias_rows(&bp));
                    }
                    tfc_gemm_problem gp = {.dtype = (tfc_dtype)dt,
                                           .trans_a = ta,
                                           .trans_b = tb,
                                           .M = M,
                                           .N = N,
                                           .K = K,
                                           .batch = batch,
                                           .alpha = alpha,
                                           .beta = (epi & 1) ? 1.0 : beta,
                                           .a = d_a,
                                           .b = d_b,
                                           .c = d_c,
                                           .lda = ta ? M : K,
                                           .ldb = tb ? K : N,
                                           .ldc = N,
                                           .stride_a = M * K,
                                           .stride_b = 0 /* b shared */,
                                           .stride_c = M * N};
                    CHECK_CU(A->gemm(&gp));
                    if (epi & 2) {
                        tfc_gelu_problem gl = {
                            .dtype = (tfc_dtype)dt, .n = batch * M * N, .approximate = 1, .x = d_c, .y = d_g};
                        CHECK_CU(A->gelu_forward(&gl));
                    }
                    float *g = down(epi & 2 ? d_g : d_c, batch * M * N, dt);
                    char what[96];
                    snprintf(what, sizeof what, "gemm ta %d tb %d epilogue %d (%s)", ta, tb, epi, dt_name(dt));
                    /* The original's tolerances (it allowed for cuBLASLt's own GELU in f32). */
                    CHECK_ALL(g, want, batch * M * N, dt == TFC_DTYPE_BF16 ? 1.5e-2 : (epi & 2) ? 1e-4 : 1e-5, what);
                    free(g), free(a), free(b), free(c0), free(bias), free(want);
                    dfree(d_a), dfree(d_b), dfree(d_c), dfree(d_bias), dfree(d_g);
                }
    tfc_gemm_problem bad = {.dtype = TFC_DTYPE_I32, .M = 1, .N = 1, .K = 1, .batch = 1, .alpha = 1};
    CHECK_CU_ERR(A->gemm(&bad), TFC_ERR_DTYPE, "i32");
    /* an f32 C is for bf16 A and B only (c_f32 itself: gemm_fused_bias_c_f32_tf32_and_the_plan_cache) */
    tfc_gemm_problem mixed = {.dtype = TFC_DTYPE_F32, .M = 1, .N = 1, .K = 1, .batch = 1, .alpha = 1, .c_f32 = 1};
    CHECK_CU_ERR(A->gemm(&mixed), TFC_ERR_UNSUPPORTED, "c_f32");
}

/*
 * Row strides larger than the rows: op(A), B and C are column slices of
 * wider buffers (lda, ldb, ldc explicit, offsets of whole 16-byte groups),
 * every batch item its own; C's other columns must stay as they were. Then
 * K = 0: C = beta·C, and beta = 0 never reads C (NaN there gives 0).
 */
TEST(gemm_column_slices_and_empty_inner_dim) {
    for (int di = 0; di < 2; di++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                int dt = DTYPES[di];
                const int64_t M = 33, N = 24, K = 40, batch = 2, lda = 64, ldb = 64, ldc = 48;
                const int64_t oa = 8, ob = 16, oc = 8;          /* column offsets of the slices */
                const int64_t ra = ta ? K : M, rb = tb ? N : K; /* stored rows of A and B */
                const int64_t sa = ra * lda, sb = rb * ldb, sc = M * ldc;
                float *a = rand_host(batch * sa, -1, 1, dt, 64), *b = rand_host(batch * sb, -1, 1, dt, 65);
                float *c0 = rand_host(batch * sc, -1, 1, dt, 66), *want = malloc(batch * sc * 4);
                const double alpha = 0.75, beta = 0.5;
                memcpy(want, c0, batch * sc * 4);
                for (int64_t p = 0; p < batch; p++)
                    for (int64_t i = 0; i < M; i++)
                        for (int64_t j = 0; j < N; j++) {
                            double s = 0;
                            for (int64_t k = 0; k < K; k++) {
                                double av = ta ? a[p * sa + k * lda + oa + i] : a[p * sa + i * lda + oa + k];
                                double bv = tb ? b[p * sb + j * ldb + ob + k] : b[p * sb + k * ldb + ob + j];
                                s += av * bv;
                            }
                            int64_t e = p * sc + i * ldc + oc + j;
                            want[e] = (float)(alpha * s + beta * c0[e]);
                        }
                void *d_a = up(a, batch * sa, dt), *d_b = up(b, batch * sb, dt), *d_c = up(c0, batch * sc, dt);
                tfc_gemm_problem gp = {.dtype = (tfc_dtype)dt,
                                       .trans_a = ta,
                                       .trans_b = tb,
                                       .M = M,
                                       .N = N,
                                       .K = K,
                                       .batch = batch,
                                       .alpha = alpha,
                                       .beta = beta,
                                       .a = elem(d_a, oa, dt),
                                       .b = elem(d_b, ob, dt),
                                       .c = elem(d_c, oc, dt),
                                       .lda = lda,
                                       .ldb = ldb,
                                       .ldc = ldc,
                                       .stride_a = sa,
                                       .stride_b = sb,
                                       .stride_c = sc};
                CHECK_CU(A->gemm(&gp));
                float *g = down(d_c, batch * sc, dt);
                /* Inside the slice within the GEMM tolerance, outside it untouched. */
                size_t nin = 0, nout = 0;
                float *gin = malloc(batch * sc * 4), *win = malloc(batch * sc * 4);
                float *gout = malloc(batch * sc * 4), *wout = malloc(batch * sc * 4);
                for (int64_t e = 0; e < batch * sc; e++) {
                    int64_t col = e % ldc;
                    if (col >= oc && col < oc + N)
                        gin[nin] = g[e], win[nin++] = want[e];
                    else
                        gout[nout] = g[e], wout[nout++] = want[e];
                }
                char what[96];
                snprintf(what, sizeof what, "gemm on column slices ta %d tb %d (%s)", ta, tb, dt_name(dt));
                CHECK_ALL(gin, win, nin, dt == TFC_DTYPE_BF16 ? 1.5e-2 : 1e-5, what);
                snprintf(what, sizeof what, "gemm on column slices ta %d tb %d: C outside the slice (%s)", ta, tb,
                         dt_name(dt));
                CHECK_ALL(gout, wout, nout, 0.0, what);
                free(g), free(gin), free(win), free(gout), free(wout);
                free(a), free(b), free(c0), free(want), dfree(d_a), dfree(d_b), dfree(d_c);
            }
    for (int di = 0; di < 2; di++) {
        int dt = DTYPES[di];
        const int64_t M = 5, N = 7;
        float *c0 = rand_host(M * N, -1, 1, dt, 67), *want = malloc(M * N * 4);
        void *d_c = up(c0, M * N, dt), *d_ab = dev(M * N, dt);
        tfc_gemm_problem gp = {.dtype = (tfc_dtype)dt,
                               .M = M,
                               .N = N,
                               .K = 0,
                               .batch = 1,
                               .alpha = 1,
                               .beta = 0.5,
                               .a = d_ab,
                               .b = d_ab,
                               .c = d_c,
                               .lda = 1,
                               .ldb = N,
                               .ldc = N};
        CHECK_CU(A->gemm(&gp));
        for (int64_t i = 0; i < M * N; i++) want[i] = round_dt(0.5f * c0[i], dt);
        float *g = down(d_c, M * N, dt);
        CHECK_ALL(g, want, M * N, tol_elem(dt), "gemm K = 0: beta·C");
        free(g);
        tfc_fill_problem f = {.dst = view_flat(d_c, dt, M * N), .value = NAN};
        CHECK_CU(A->fill(&f));
        gp.beta = 0;
        CHECK_CU(A->gemm(&gp));
        for (int64_t i = 0; i < M * N; i++) want[i] = 0.0f;
        g = down(d_c, M * N, dt);
        CHECK_ALL(g, want, M * N, 0.0, "gemm K = 0, beta = 0 over a NaN C");
        free(g), free(c0), free(want), dfree(d_c), dfree(d_ab);
    }
}

/*
 * Naive attention in double: out, lse and (with dout) dq, dk, dv. BH query
 * heads, BH / G kv heads (query head bh reads kv head bh / G, Hugging
 * Face's repeat_kv order; dk, dv [BH / G, S, ·] sum over the G heads);
 * causal keeps j <= i + S - T, a window W > 0 also j > i + S - T - W.
 */
static void attention_ref_gw(const float *q, const float *k, const float *v, const float *dout, size_t BH, size_t G,
                             size_t T, size_t S, size_t D, size_t Dv, double scale, int causal, long W, float *out,
                             float *lse, float *dq, float *dk, float *dv) {
    double *p = malloc(S * 8), *dp = malloc(S * 8);
    memset(dq, 0, BH * T * D * 4), memset(dk, 0, BH / G * S * D * 4), memset(dv, 0, BH / G * S * Dv * 4);
    for (size_t bq = 0; bq < BH; bq++)
        for (size_t i = 0; i < T; i++) {
            const size_t bh = bq / G; /* the kv head: k, v, dk, dv below */
            const float *qi = q + (bq * T + i) * D;
            double m = -INFINITY, sum = 0;
            for (size_t j = 0; j < S; j++) {
                const long pos = (long)i + (long)S - (long)T;
                int vis = !causal || ((long)j <= pos && (W <= 0 || (long)j > pos - W));
                double s = 0;
                for (size_t d = 0; d < D; d++) s += (double)qi[d] * k[(bh * S + j) * D + d];
                p[j] = vis ? s * scale : -INFINITY;
                m = fmax(m, p[j]);
            }
            for (size_t j = 0; j < S; j++) sum += m == -INFINITY ? 0 : exp(p[j] - m);
            lse[bq * T + i] = sum > 0 ? (float)(m + log(sum)) : -INFINITY;
            for (size_t j = 0; j < S; j++) p[j] = sum > 0 ? exp(p[j] - m) / sum : 0;
            double delta = 0;
            for (size_t d = 0; d < Dv; d++) {
                double o = 0;
                for (size_t j = 0; j < S; j++) o += p[j] * v[(bh * S + j) * Dv + d];
                out[(bq * T + i) * Dv + d] = (float)o;
                delta += o * dout[(bq * T + i) * Dv + d];
            }
            for (size_t j = 0; j < S; j++) {
                double g = 0;
                for (size_t d = 0; d < Dv; d++) g += (double)dout[(bq * T + i) * Dv + d] * v[(bh * S + j) * Dv + d];
                dp[j] = p[j] * (g - delta);
            }
            for (size_t j = 0; j < S; j++) {
                for (size_t d = 0; d < D; d++) {
                    dq[(bq * T + i) * D + d] += (float)(scale * dp[j] * k[(bh * S + j) * D + d]);
                    dk[(bh * S + j) * D + d] += (float)(scale * dp[j] * qi[d]);
                }
                for (size_t d = 0; d < Dv; d++)
                    dv[(bh * S + j) * Dv + d] += (float)(p[j] * dout[(bq * T + i) * Dv + d]);
            }
        }
    free(p), free(dp);
}

static void attention_ref(const float *q, const float *k, const float *v, const float *dout, size_t BH, size_t T,
                          size_t S, size_t D, size_t Dv, double scale, int causal, float *out, float *lse, float *dq,
                          float *dk, float *dv) {
    attention_ref_gw(q, k, v, dout, BH, 1, T, S, D, Dv, scale, causal, 0, out, lse, dq, dk, dv);
}

/* A contiguous [B, H, rows, cols] attention operand. */
static tfc_attn_operand attn_c(const void *data, int64_t H, int64_t rows, int64_t cols) {
    return (tfc_attn_operand){.data = data, .sb = H * rows * cols, .sh = rows * cols, .sr = cols};
}

TEST(attention_forward_backward) {
    /* (T, S, D, Dv, causal): square, T < S and T > S (bottom-right mask), D over 64, odd sizes. */
    const size_t cfg[6][5] = {{70, 70, 64, 64, 1},  {70, 70, 64, 64, 0}, {33, 100, 32, 48, 1},
                              {100, 40, 16, 16, 1}, {65, 65, 80, 96, 1}, {1, 129, 128, 128, 0}};
    for (int di = 0; di < 2; di++)
        for (int ci = 0; ci < 6; ci++) {
            int dt = DTYPES[di];
            size_t BH = 3, T = cfg[ci][0], S = cfg[ci][1], D = cfg[ci][2], Dv = cfg[ci][3];
            int causal = (int)cfg[ci][4];
            double scale = 1.0 / sqrt((double)D);
            float *q = rand_host(BH * T * D, -1, 1, dt, 70), *k = rand_host(BH * S * D, -1, 1, dt, 71);
            float *v = rand_host(BH * S * Dv, -1, 1, dt, 72), *dout = rand_host(BH * T * Dv, -1, 1, dt, 73);
            float *out = malloc(BH * T * Dv * 4), *lse = malloc(BH * T * 4), *dq = malloc(BH * T * D * 4);
            float *dk = malloc(BH * S * D * 4), *dv = malloc(BH * S * Dv * 4);
            attention_ref(q, k, v, dout, BH, T, S, D, Dv, scale, causal, out, lse, dq, dk, dv);
            void *d_q = up(q, BH * T * D, dt), *d_k = up(k, BH * S * D, dt), *d_v = up(v, BH * S * Dv, dt);
            void *d_out = dev(BH * T * Dv, dt), *d_do = up(dout, BH * T * Dv, dt);
            void *d_dq = dev(BH * T * D, dt), *d_dk = dev(BH * S * D, dt), *d_dv = dev(BH * S * Dv, dt);
            float *d_lse = dev(BH * T, TFC_DTYPE_F32);
            /* B = 1, H = BH: contiguous operands. */
            tfc_attn_problem ap = {.dtype = (tfc_dtype)dt,
                                   .B = 1,
                                   .H = (int64_t)BH,
                                   .Hkv = (int64_t)BH,
                                   .Tq = (int64_t)T,
                                   .S = (int64_t)S,
                                   .D = (int64_t)D,
                                   .Dv = (int64_t)Dv,
                                   .causal = causal,
                                   .scale = scale,
                                   .q = attn_c(d_q, BH, T, D),
                                   .k = attn_c(d_k, BH, S, D),
                                   .v = attn_c(d_v, BH, S, Dv),
                                   .out_w = d_out,
                                   .lse_w = d_lse};
            CHECK_CU(A->attention_forward(&ap));
            double tol = dt == TFC_DTYPE_BF16 ? 1.5e-2 : 2e-5;
            float *g = down(d_out, BH * T * Dv, dt);
            CHECK_ALL(g, out, BH * T * Dv, tol, "attention out");
            free(g);
            CHECK_DEVICE(d_lse, BH * T, TFC_DTYPE_F32, lse, 2e-5, "attention lse");
            tfc_attn_problem bp = {.dtype = (tfc_dtype)dt,
                                   .B = 1,
                                   .H = (int64_t)BH,
                                   .Hkv = (int64_t)BH,
                                   .Tq = (int64_t)T,
                                   .S = (int64_t)S,
                                   .D = (int64_t)D,
                                   .Dv = (int64_t)Dv,
                                   .causal = causal,
                                   .scale = scale,
                                   .q = attn_c(d_q, BH, T, D),
                                   .k = attn_c(d_k, BH, S, D),
                                   .v = attn_c(d_v, BH, S, Dv),
                                   .out = attn_c(d_out, BH, T, Dv),
                                   .dout = attn_c(d_do, BH, T, Dv),
                                   .lse = d_lse,
                                   .dq = d_dq,
                                   .dk = d_dk,
                                   .dv = d_dv};
            CHECK_CU(A->attention_backward(&bp));
            /* bf16 gradients: the saved out is rounded, so Delta carries bf16 error into dS. */
            double gtol = dt == TFC_DTYPE_BF16 ? 3e-2 : 5e-5;
            CHECK_DEVICE(d_dq, BH * T * D, dt, dq, gtol, "attention dq");
            CHECK_DEVICE(d_dk, BH * S * D, dt, dk, gtol, "attention dk");
            CHECK_DEVICE(d_dv, BH * S * Dv, dt, dv, gtol, "attention dv");
            /* Accumulating (dk only asked for) doubles dk. */
            bp.dq = NULL, bp.dv = NULL, bp.accumulate = 1;
            CHECK_CU(A->attention_backward(&bp));
            for (size_t i = 0; i < BH * S * D; i++) dk[i] *= 2;
            CHECK_DEVICE(d_dk, BH * S * D, dt, dk, 2 * gtol, "attention dk accumulated");
            free(q), free(k), free(v), free(dout), free(out), free(lse), free(dq), free(dk), free(dv);
            dfree(d_q), dfree(d_k), dfree(d_v), dfree(d_out), dfree(d_do), dfree(d_dq), dfree(d_dk), dfree(d_dv);
            dfree(d_lse);
        }
    /* Operands laid out contiguously but never read: the head-dim check comes first. */
    tfc_attn_problem big = {.dtype = TFC_DTYPE_F32,
                            .B = 1,
                            .H = 1,
                            .Hkv = 1,
                            .Tq = 4,
                            .S = 4,
                            .D = 256,
                            .Dv = 64,
                            .causal = 1,
                            .scale = 1.0,
                            .q = attn_c(NULL, 1, 4, 256),
                            .k = attn_c(NULL, 1, 4, 256),
                            .v = attn_c(NULL, 1, 4, 64)};
    CHECK_CU_ERR(A->attention_forward(&big), TFC_ERR_UNSUPPORTED, "D 256");
}

/*
 * Strided operands, as a GPT's attention gets them: q, k and v are
 * slices of one projection output [B, T, 3, H, D] and dout is [B, T, H, D]
 * (the layout of the gradient coming back through the head merge). The
 * module compacts them; the results are contiguous [B, H, T, D].
 */
TEST(attention_strided_operands) {
    for (int di = 0; di < 2; di++)
        for (int causal = 0; causal < 2; causal++) {
            int dt = DTYPES[di];
            const size_t B = 2, H = 3, T = 40, D = 32, BH = B * H;
            double scale = 1.0 / sqrt((double)D);
            float *qkv = rand_host(B * T * 3 * H * D, -1, 1, dt, 74), *dperm = rand_host(B * T * H * D, -1, 1, dt, 75);
            float *q = malloc(BH * T * D * 4), *k = malloc(BH * T * D * 4), *v = malloc(BH * T * D * 4);
            float *dout = malloc(BH * T * D * 4);
            for (size_t b = 0; b < B; b++)
                for (size_t h = 0; h < H; h++)
                    for (size_t t = 0; t < T; t++)
                        for (size_t d = 0; d < D; d++) {
                            size_t o = ((b * H + h) * T + t) * D + d, in = ((b * T + t) * 3 * H + h) * D + d;
                            q[o] = qkv[in], k[o] = qkv[in + H * D], v[o] = qkv[in + 2 * H * D];
                            dout[o] = dperm[((b * T + t) * H + h) * D + d];
                        }
            float *out = malloc(BH * T * D * 4), *lse = malloc(BH * T * 4), *dq = malloc(BH * T * D * 4);
            float *dk = malloc(BH * T * D * 4), *dv = malloc(BH * T * D * 4);
            attention_ref(q, k, v, dout, BH, T, T, D, D, scale, causal, out, lse, dq, dk, dv);
            void *d_qkv = up(qkv, B * T * 3 * H * D, dt), *d_dperm = up(dperm, B * T * H * D, dt);
            void *d_out = dev(BH * T * D, dt), *d_dq = dev(BH * T * D, dt), *d_dk = dev(BH * T * D, dt);
            void *d_dv = dev(BH * T * D, dt);
            float *d_lse = dev(BH * T, TFC_DTYPE_F32);
            const int64_t sb = (int64_t)(T * 3 * H * D), sh = (int64_t)D, sr = (int64_t)(3 * H * D);
            tfc_attn_operand oq = {.data = d_qkv, .sb = sb, .sh = sh, .sr = sr};
            tfc_attn_operand ok = {.data = elem(d_qkv, (int64_t)(H * D), dt), .sb = sb, .sh = sh, .sr = sr};
            tfc_attn_operand ov = {.data = elem(d_qkv, (int64_t)(2 * H * D), dt), .sb = sb, .sh = sh, .sr = sr};
            tfc_attn_operand odo = {
                .data = d_dperm, .sb = (int64_t)(T * H * D), .sh = (int64_t)D, .sr = (int64_t)(H * D)};
            tfc_attn_problem ap = {.dtype = (tfc_dtype)dt,
                                   .B = (int64_t)B,
                                   .H = (int64_t)H,
                                   .Hkv = (int64_t)H,
                                   .Tq = (int64_t)T,
                                   .S = (int64_t)T,
                                   .D = (int64_t)D,
                                   .Dv = (int64_t)D,
                                   .causal = causal,
                                   .scale = scale,
                                   .q = oq,
                                   .k = ok,
                                   .v = ov,
                                   .out_w = d_out,
                                   .lse_w = d_lse};
            CHECK_CU(A->attention_forward(&ap));
            char what[96];
            float *g = down(d_out, BH * T * D, dt);
            snprintf(what, sizeof what, "strided attention out (%s, causal %d)", dt_name(dt), causal);
            CHECK_ALL(g, out, BH * T * D, dt == TFC_DTYPE_BF16 ? 1.5e-2 : 2e-5, what);
            free(g);
            g = down(d_lse, BH * T, TFC_DTYPE_F32);
            snprintf(what, sizeof what, "strided attention lse (%s, causal %d)", dt_name(dt), causal);
            CHECK_ALL(g, lse, BH * T, 2e-5, what);
            free(g);
            tfc_attn_problem bp = {.dtype = (tfc_dtype)dt,
                                   .B = (int64_t)B,
                                   .H = (int64_t)H,
                                   .Hkv = (int64_t)H,
                                   .Tq = (int64_t)T,
                                   .S = (int64_t)T,
                                   .D = (int64_t)D,
                                   .Dv = (int64_t)D,
                                   .causal = causal,
                                   .scale = scale,
                                   .q = oq,
                                   .k = ok,
                                   .v = ov,
                                   .out = attn_c(d_out, H, T, D),
                                   .dout = odo,
                                   .lse = d_lse,
                                   .dq = d_dq,
                                   .dk = d_dk,
                                   .dv = d_dv};
            CHECK_CU(A->attention_backward(&bp));
            double gtol = dt == TFC_DTYPE_BF16 ? 3e-2 : 5e-5;
            g = down(d_dq, BH * T * D, dt);
            snprintf(what, sizeof what, "strided attention dq (%s, causal %d)", dt_name(dt), causal);
            CHECK_ALL(g, dq, BH * T * D, gtol, what);
            free(g);
            g = down(d_dk, BH * T * D, dt);
            snprintf(what, sizeof what, "strided attention dk (%s, causal %d)", dt_name(dt), causal);
            CHECK_ALL(g, dk, BH * T * D, gtol, what);
            free(g);
            g = down(d_dv, BH * T * D, dt);
            snprintf(what, sizeof what, "strided attention dv (%s, causal %d)", dt_name(dt), causal);
            CHECK_ALL(g, dv, BH * T * D, gtol, what);
            free(g);
            free(qkv), free(dperm), free(q), free(k), free(v), free(dout);
            free(out), free(lse), free(dq), free(dk), free(dv);
            dfree(d_qkv), dfree(d_dperm), dfree(d_out), dfree(d_dq), dfree(d_dk), dfree(d_dv), dfree(d_lse);
        }
}

/*
 * The two attention paths of the module (TFC_CUDA_ATTENTION=simple: the
 * FMA kernels of cuda/attention.cu; =flash, the default: the tensor-core
 * kernels of cuda/attention_flash.cu where they apply - bf16 with
 * D = Dv = 64 or 128 - and attention.cu's otherwise, f32 included) against
 * attention_ref: ragged T around the 64-row tiles (1, 17, 100, 1000), T
 * below and above S (bottom-right causal), causal and not, D 64 and 128,
 * several B and H, and T = 2048. The flash kernels round P and dS to bf16
 * before the products they feed (as FlashAttention does); with bf16
 * outputs the tolerances are those of the simple path.
 */
static void attn_raw(void *h, const void *d, size_t bytes) {
    CHECK(A->memcpy(0, h, d, bytes, TFC_MEMCPY_D2H) == TFC_OK);
}

static void attn_path_case(const char *path, int dt, size_t B, size_t H, size_t T, size_t S, size_t D, int causal) {
    setenv("TFC_CUDA_ATTENTION", path, 1);
    size_t BH = B * H, es = dt_size(dt);
    double scale = 1.0 / sqrt((double)D);
    uint64_t seed = 100 + T * 7 + S * 3 + D + (uint64_t)causal;
    float *q = rand_host(BH * T * D, -1, 1, dt, seed), *k = rand_host(BH * S * D, -1, 1, dt, seed + 1);
    float *v = rand_host(BH * S * D, -1, 1, dt, seed + 2), *dout = rand_host(BH * T * D, -1, 1, dt, seed + 3);
    float *out = malloc(BH * T * D * 4), *lse = malloc(BH * T * 4), *dq = malloc(BH * T * D * 4);
    float *dk = malloc(BH * S * D * 4), *dv = malloc(BH * S * D * 4);
    attention_ref(q, k, v, dout, BH, T, S, D, D, scale, causal, out, lse, dq, dk, dv);
    void *d_q = up(q, BH * T * D, dt), *d_k = up(k, BH * S * D, dt), *d_v = up(v, BH * S * D, dt);
    void *d_do = up(dout, BH * T * D, dt);
    /* Twice, into fresh buffers: the second run must repeat the first bit for bit. */
    void *first[4] = {0};
    for (int rep = 0; rep < 2; rep++) {
        void *d_out = dev(BH * T * D, dt), *d_dq = dev(BH * T * D, dt), *d_dk = dev(BH * S * D, dt);
        void *d_dv = dev(BH * S * D, dt);
        float *d_lse = dev(BH * T, TFC_DTYPE_F32);
        tfc_attn_problem p = {.dtype = (tfc_dtype)dt,
                              .B = (int64_t)B,
                              .H = (int64_t)H,
                              .Hkv = (int64_t)H,
                              .Tq = (int64_t)T,
                              .S = (int64_t)S,
                              .D = (int64_t)D,
                              .Dv = (int64_t)D,
                              .causal = causal,
                              .scale = scale,
                              .q = attn_c(d_q, H, T, D),
                              .k = attn_c(d_k, H, S, D),
                              .v = attn_c(d_v, H, S, D),
                              .out = attn_c(d_out, H, T, D),
                              .dout = attn_c(d_do, H, T, D),
                              .out_w = d_out,
                              .lse_w = d_lse,
                              .lse = d_lse,
                              .dq = d_dq,
                              .dk = d_dk,
                              .dv = d_dv};
        CHECK_CU(A->attention_forward(&p));
        CHECK_CU(A->attention_backward(&p));
        char what[160];
        const char *dn = dt_name(dt);
        double tol = dt == TFC_DTYPE_BF16 ? 1.5e-2 : 2e-5, gtol = dt == TFC_DTYPE_BF16 ? 3e-2 : 5e-5;
        double ltol = dt == TFC_DTYPE_BF16 ? 1e-4 : 2e-5;
        if (rep == 0) {
#define ATTN_CHECK(d, n, want, t, name)                                                                                \
    snprintf(what, sizeof what, "%s attention %s (%s, B %zu H %zu T %zu S %zu D %zu causal %d)", path, name, dn, B, H, \
             T, S, D, causal);                                                                                         \
    CHECK_DEVICE(d, n, (d) == (void *)d_lse ? TFC_DTYPE_F32 : dt, want, t, what)
            ATTN_CHECK(d_out, BH * T * D, out, tol, "out");
            ATTN_CHECK(d_lse, BH * T, lse, ltol, "lse");
            ATTN_CHECK(d_dq, BH * T * D, dq, gtol, "dq");
            ATTN_CHECK(d_dk, BH * S * D, dk, gtol, "dk");
            ATTN_CHECK(d_dv, BH * S * D, dv, gtol, "dv");
#undef ATTN_CHECK
            /* dk alone, accumulated onto itself: twice dk (dq and dv not asked for). */
            void *d_dk2 = dev(BH * S * D, dt);
            CHECK(A->memcpy(0, d_dk2, d_dk, BH * S * D * es, TFC_MEMCPY_D2D) == TFC_OK);
            tfc_attn_problem a = p;
            a.dq = NULL, a.dv = NULL, a.dk = d_dk2, a.accumulate = 1;
            CHECK_CU(A->attention_backward(&a));
            float *dk2 = malloc(BH * S * D * 4);
            for (size_t i = 0; i < BH * S * D; i++) dk2[i] = 2 * dk[i];
            snprintf(what, sizeof what, "%s attention dk accumulated (%s, T %zu S %zu D %zu causal %d)", path, dn, T, S,
                     D, causal);
            CHECK_DEVICE(d_dk2, BH * S * D, dt, dk2, 2 * gtol, what);
            free(dk2), dfree(d_dk2);
        }
        void *bufs[4] = {d_out, d_dq, d_dk, d_dv};
        size_t n[4] = {BH * T * D, BH * T * D, BH * S * D, BH * S * D};
        for (int b = 0; b < 4; b++) {
            void *h = malloc(n[b] * es);
            attn_raw(h, bufs[b], n[b] * es);
            if (rep == 0) {
                first[b] = h;
            } else {
                tfc_test_checks++;
                if (memcmp(h, first[b], n[b] * es) != 0)
                    TFC_FAIL_AT("%s attention (%s, T %zu D %zu causal %d): output %d differs between two runs", path,
                                dt_name(dt), T, D, causal, b);
                free(h), free(first[b]);
            }
        }
        dfree(d_out), dfree(d_dq), dfree(d_dk), dfree(d_dv), dfree(d_lse);
    }
    free(q), free(k), free(v), free(dout), free(out), free(lse), free(dq), free(dk), free(dv);
    dfree(d_q), dfree(d_k), dfree(d_v), dfree(d_do);
    unsetenv("TFC_CUDA_ATTENTION");
}

TEST(attention_simple_and_flash_paths_vs_cpu) {
    /* (B, H, T, S, D, causal) */
    static const size_t cfg[][6] = {{2, 3, 1, 1, 64, 1},        {1, 4, 17, 17, 64, 1},    {2, 2, 100, 100, 128, 1},
                                    {1, 2, 1000, 1000, 64, 1},  {1, 3, 100, 100, 64, 0},  {2, 1, 17, 17, 128, 0},
                                    {1, 2, 33, 100, 64, 1},     {1, 2, 100, 40, 128, 1},  {3, 1, 64, 64, 64, 1},
                                    {1, 1, 1000, 1000, 128, 1}, {1, 1, 2048, 2048, 64, 1}};
    const char *paths[2] = {"simple", "flash"};
    for (int pi = 0; pi < 2; pi++)
        for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++)
            attn_path_case(paths[pi], TFC_DTYPE_BF16, cfg[c][0], cfg[c][1], cfg[c][2], cfg[c][3], cfg[c][4],
                           (int)cfg[c][5]);
    /* The flash forward's 64-row variant (TFC_CUDA_FLASH_FWD_ROWS=64, D 64 only; the default is 128 rows). */
    setenv("TFC_CUDA_FLASH_FWD_ROWS", "64", 1);
    attn_path_case("flash", TFC_DTYPE_BF16, 1, 4, 17, 17, 64, 1);
    attn_path_case("flash", TFC_DTYPE_BF16, 1, 2, 1000, 1000, 64, 1);
    attn_path_case("flash", TFC_DTYPE_BF16, 1, 2, 33, 100, 64, 1);
    unsetenv("TFC_CUDA_FLASH_FWD_ROWS");
    /* f32 under "flash" takes the simple kernels (flash is bf16-only): still exact to f32. */
    attn_path_case("flash", TFC_DTYPE_F32, 1, 2, 100, 100, 64, 1);
    attn_path_case("flash", TFC_DTYPE_F32, 1, 1, 17, 33, 128, 0);
}

/*
 * Grouped-query heads (k, v with Hkv heads, query head h reading kv head
 * h / (H / Hkv)) and a sliding window (query i sees keys i + S - T - W <
 * j <= i + S - T) on both paths against attention_ref_gw: Hkv 1, 2 and H,
 * windows inside one key block and across several, T < S (a KV cache) and
 * T > S; dk, dv are the group's sums (each written once, no atomics, so
 * two runs give the same bits); accumulation doubles them.
 */
static void attn_gqa_case(const char *path, int dt, size_t B, size_t H, size_t Hkv, size_t T, size_t S, size_t D,
                          size_t Dv, int causal, long W) {
    setenv("TFC_CUDA_ATTENTION", path, 1);
    const size_t BH = B * H, BK = B * Hkv, G = H / Hkv, es = dt_size(dt);
    const double scale = 1.0 / sqrt((double)D);
    const uint64_t seed = 300 + T * 7 + S * 3 + D + Hkv + (uint64_t)W;
    float *q = rand_host(BH * T * D, -1, 1, dt, seed), *k = rand_host(BK * S * D, -1, 1, dt, seed + 1);
    float *v = rand_host(BK * S * Dv, -1, 1, dt, seed + 2), *dout = rand_host(BH * T * Dv, -1, 1, dt, seed + 3);
    float *out = malloc(BH * T * Dv * 4), *lse = malloc(BH * T * 4), *dq = malloc(BH * T * D * 4);
    float *dk = malloc(BK * S * D * 4), *dv = malloc(BK * S * Dv * 4);
    attention_ref_gw(q, k, v, dout, BH, G, T, S, D, Dv, scale, causal, W, out, lse, dq, dk, dv);
    void *d_q = up(q, BH * T * D, dt), *d_k = up(k, BK * S * D, dt), *d_v = up(v, BK * S * Dv, dt);
    void *d_do = up(dout, BH * T * Dv, dt);
    void *first[3] = {0};
    for (int rep = 0; rep < 2; rep++) {
        void *d_out = dev(BH * T * Dv, dt), *d_dq = dev(BH * T * D, dt), *d_dk = dev(BK * S * D, dt);
        void *d_dv = dev(BK * S * Dv, dt);
        float *d_lse = dev(BH * T, TFC_DTYPE_F32);
        tfc_attn_problem p = {.dtype = (tfc_dtype)dt,
                              .B = (int64_t)B,
                              .H = (int64_t)H,
                              .Tq = (int64_t)T,
                              .S = (int64_t)S,
                              .D = (int64_t)D,
                              .Dv = (int64_t)Dv,
                              .Hkv = (int64_t)Hkv,
                              .window = W,
                              .causal = causal,
                              .scale = scale,
                              .q = attn_c(d_q, H, T, D),
                              .k = attn_c(d_k, Hkv, S, D),
                              .v = attn_c(d_v, Hkv, S, Dv),
                              .out = attn_c(d_out, H, T, Dv),
                              .dout = attn_c(d_do, H, T, Dv),
                              .out_w = d_out,
                              .lse_w = d_lse,
                              .lse = d_lse,
                              .dq = d_dq,
                              .dk = d_dk,
                              .dv = d_dv};
        CHECK_CU(A->attention_forward(&p));
        CHECK_CU(A->attention_backward(&p));
        char what[200];
        const double tol = dt == TFC_DTYPE_BF16 ? 1.5e-2 : 2e-5, gtol = dt == TFC_DTYPE_BF16 ? 3e-2 : 5e-5;
        const double ltol = dt == TFC_DTYPE_BF16 ? 1e-4 : 2e-5;
        if (rep == 0) {
#define GQA_CHECK(d, n, ddt, want, t, name)                                                                           \
    snprintf(what, sizeof what, "%s attention %s (%s, B %zu H %zu Hkv %zu T %zu S %zu D %zu Dv %zu causal %d W %ld)", \
             path, name, dt_name(dt), B, H, Hkv, T, S, D, Dv, causal, W);                                             \
    CHECK_DEVICE(d, n, ddt, want, t, what)
            GQA_CHECK(d_out, BH * T * Dv, dt, out, tol, "out");
            GQA_CHECK(d_lse, BH * T, TFC_DTYPE_F32, lse, ltol, "lse");
            GQA_CHECK(d_dq, BH * T * D, dt, dq, gtol, "dq");
            GQA_CHECK(d_dk, BK * S * D, dt, dk, gtol, "dk");
            GQA_CHECK(d_dv, BK * S * Dv, dt, dv, gtol, "dv");
            /* dv alone, accumulated onto itself: twice the group's sum. */
            tfc_attn_problem a = p;
            a.dq = NULL, a.dk = NULL, a.accumulate = 1;
            CHECK_CU(A->attention_backward(&a));
            float *dv2 = malloc(BK * S * Dv * 4);
            for (size_t i = 0; i < BK * S * Dv; i++) dv2[i] = 2 * dv[i];
            GQA_CHECK(d_dv, BK * S * Dv, dt, dv2, 2 * gtol, "dv accumulated");
#undef GQA_CHECK
            free(dv2);
        }
        void *bufs[3] = {d_out, d_dq, d_dk};
        const size_t n[3] = {BH * T * Dv, BH * T * D, BK * S * D};
        for (int b = 0; b < 3; b++) {
            void *h = malloc(n[b] * es);
            attn_raw(h, bufs[b], n[b] * es);
            if (rep == 0) {
                first[b] = h;
            } else {
                tfc_test_checks++;
                if (memcmp(h, first[b], n[b] * es) != 0)
                    TFC_FAIL_AT("%s GQA attention (H %zu Hkv %zu W %ld): output %d differs between two runs", path, H,
                                Hkv, W, b);
                free(h), free(first[b]);
            }
        }
        dfree(d_out), dfree(d_dq), dfree(d_dk), dfree(d_dv), dfree(d_lse);
    }
    free(q), free(k), free(v), free(dout), free(out), free(lse), free(dq), free(dk), free(dv);
    dfree(d_q), dfree(d_k), dfree(d_v), dfree(d_do);
    unsetenv("TFC_CUDA_ATTENTION");
}

TEST(attention_gqa_and_window_paths_vs_cpu) {
    /* (B, H, Hkv, T, S, D, causal, W) */
    static const long cfg[][8] = {
        {2, 4, 1, 100, 100, 64, 1, 0},  {1, 8, 2, 130, 130, 128, 1, 0}, {2, 4, 4, 70, 70, 64, 1, 20},
        {1, 6, 2, 200, 200, 64, 1, 64}, {1, 4, 1, 33, 300, 64, 1, 100}, {1, 4, 2, 1, 257, 128, 1, 70},
        {1, 4, 2, 100, 40, 64, 1, 7},   {1, 4, 2, 90, 120, 64, 0, 0},   {1, 2, 1, 1000, 1000, 64, 1, 256}};
    const char *paths[2] = {"simple", "flash"};
    for (int pi = 0; pi < 2; pi++)
        for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++)
            attn_gqa_case(paths[pi], TFC_DTYPE_BF16, (size_t)cfg[c][0], (size_t)cfg[c][1], (size_t)cfg[c][2],
                          (size_t)cfg[c][3], (size_t)cfg[c][4], (size_t)cfg[c][5], (size_t)cfg[c][5], (int)cfg[c][6],
                          cfg[c][7]);
    /* f32 (the simple kernels) and head dims other than 64/128 (simple under "flash" too). */
    attn_gqa_case("flash", TFC_DTYPE_F32, 1, 6, 2, 70, 100, 32, 48, 1, 30);
    attn_gqa_case("simple", TFC_DTYPE_F32, 2, 4, 1, 65, 65, 80, 96, 1, 64);
    attn_gqa_case("flash", TFC_DTYPE_BF16, 1, 4, 2, 50, 60, 16, 16, 1, 5);
}

/*
 * The switch really selects different kernels: flash rounds P to bf16
 * before P.V, the simple kernels do not, so their bf16 outputs differ in
 * some element; an unknown value is refused.
 */
TEST(attention_path_switch) {
    size_t BH = 2, T = 100, D = 64;
    float *q = rand_host(BH * T * D, -1, 1, TFC_DTYPE_BF16, 5);
    void *d_q = up(q, BH * T * D, TFC_DTYPE_BF16);
    void *o[2];
    float *d_lse = dev(BH * T, TFC_DTYPE_F32);
    const char *paths[2] = {"simple", "flash"};
    for (int pi = 0; pi < 2; pi++) {
        setenv("TFC_CUDA_ATTENTION", paths[pi], 1);
        void *d_out = dev(BH * T * D, TFC_DTYPE_BF16);
        tfc_attn_problem p = {.dtype = TFC_DTYPE_BF16,
                              .B = 1,
                              .H = (int64_t)BH,
                              .Hkv = (int64_t)BH,
                              .Tq = (int64_t)T,
                              .S = (int64_t)T,
                              .D = (int64_t)D,
                              .Dv = (int64_t)D,
                              .causal = 1,
                              .scale = 0.125,
                              .q = attn_c(d_q, BH, T, D),
                              .k = attn_c(d_q, BH, T, D),
                              .v = attn_c(d_q, BH, T, D),
                              .out_w = d_out,
                              .lse_w = d_lse};
        CHECK_CU(A->attention_forward(&p));
        o[pi] = malloc(BH * T * D * 2);
        attn_raw(o[pi], d_out, BH * T * D * 2);
        dfree(d_out);
        if (pi == 1) {
            setenv("TFC_CUDA_ATTENTION", "fast", 1);
            p.out_w = d_lse; /* never written: the switch is read first */
            CHECK_CU_ERR(A->attention_forward(&p), TFC_ERR_INVALID_ARG, "TFC_CUDA_ATTENTION");
        }
    }
    CHECK(memcmp(o[0], o[1], BH * T * D * 2) != 0);
    /* An operand not 16-byte aligned (q one element in) falls back to the simple kernels, still right. */
    setenv("TFC_CUDA_ATTENTION", "flash", 1);
    void *d_q1 = dev(BH * T * D + 1, TFC_DTYPE_BF16);
    CHECK(A->memcpy(0, (char *)d_q1 + 2, d_q, BH * T * D * 2, TFC_MEMCPY_D2D) == TFC_OK);
    void *d_out = dev(BH * T * D, TFC_DTYPE_BF16);
    tfc_attn_problem p = {.dtype = TFC_DTYPE_BF16,
                          .B = 1,
                          .H = (int64_t)BH,
                          .Hkv = (int64_t)BH,
                          .Tq = (int64_t)T,
                          .S = (int64_t)T,
                          .D = (int64_t)D,
                          .Dv = (int64_t)D,
                          .causal = 1,
                          .scale = 0.125,
                          .q = attn_c((char *)d_q1 + 2, BH, T, D),
                          .k = attn_c(d_q, BH, T, D),
                          .v = attn_c(d_q, BH, T, D),
                          .out_w = d_out,
                          .lse_w = d_lse};
    CHECK_CU(A->attention_forward(&p));
    void *h = malloc(BH * T * D * 2);
    attn_raw(h, d_out, BH * T * D * 2);
    CHECK(memcmp(h, o[0], BH * T * D * 2) == 0); /* the simple kernels' result, bit for bit */
    unsetenv("TFC_CUDA_ATTENTION");
    free(h), free(o[0]), free(o[1]), free(q);
    dfree(d_q), dfree(d_q1), dfree(d_out), dfree(d_lse);
}

/*
 * Clipping is grad_norm (the norm comes back to the host) then grad_scale
 * by c = max_norm / (norm + 1e-6), as lib/optim/clip.c does; AdamW is
 * optim_step over segments, which the module runs as one fused launch per
 * (lr, step) — here three launches, one of them over two non-adjacent
 * parameters. A segment has one dtype for the parameter, its gradient and
 * its state, and the CUDA step takes f32 only: with bf16 the norm and the
 * scaling run and the step is refused.
 */
TEST(grad_norm_clipping_and_adamw) {
    enum { NT = 5 };
    const size_t numel[NT] = {5000, 1, 0, 12345, 777};
    const double wd[NT] = {0.1, 0.0, 0.1, 0.01, 0.05};
    const double lr[NT] = {1e-3, 2e-3, 1e-3, 1e-3, 1e-3};
    const int64_t step[NT] = {3, 3, 3, 1, 3};
    for (int di = 0; di < 2; di++) {
        int gdt = DTYPES[di];
        float *hp[NT], *hg[NT], *hm[NT], *hv[NT], *hgs[NT];
        void *dp[NT], *dg[NT], *dm[NT], *dvv[NT];
        tfc_optim_seg segs[NT];
        int64_t nseg = 0, start = 0;
        int seg_of[NT];
        double sumsq = 0;
        for (int t = 0; t < NT; t++) {
            hp[t] = rand_host(numel[t], -1, 1, TFC_DTYPE_F32, 80 + t);
            hg[t] = rand_host(numel[t], -1, 1, gdt, 90 + t);
            hm[t] = rand_host(numel[t], -0.1f, 0.1f, TFC_DTYPE_F32, 100 + t);
            hv[t] = rand_host(numel[t], 0, 0.01f, TFC_DTYPE_F32, 110 + t);
            hgs[t] = NULL;
            dp[t] = up(hp[t], numel[t], TFC_DTYPE_F32), dg[t] = up(hg[t], numel[t], gdt);
            dm[t] = up(hm[t], numel[t], TFC_DTYPE_F32), dvv[t] = up(hv[t], numel[t], TFC_DTYPE_F32);
            for (size_t i = 0; i < numel[t]; i++) sumsq += (double)hg[t][i] * hg[t][i];
            seg_of[t] = -1;
            if (!numel[t]) continue; /* empty parameters get no segment (n > 0), as in lib/optim */
            seg_of[t] = (int)nseg;
            segs[nseg++] = (tfc_optim_seg){.param = dp[t],
                                           .grad = dg[t],
                                           .buf = {dm[t], dvv[t], NULL},
                                           .n = (int64_t)numel[t],
                                           .start = start,
                                           .dtype = (tfc_dtype)gdt,
                                           .step = step[t],
                                           .lr = lr[t],
                                           .weight_decay = wd[t],
                                           .step_size = lr[t] / (1.0 - pow(0.9, (double)step[t])),
                                           .bc2_sqrt = sqrt(1.0 - pow(0.95, (double)step[t]))};
            start += (int64_t)numel[t];
        }
        double norm = -1;
        int32_t overflow = -1;
        tfc_grad_norm_problem gn = {.segs = segs, .nseg = nseg, .norm = &norm, .overflow = &overflow};
        CHECK_CU(A->grad_norm(&gn));
        float gnf = (float)norm, wn = (float)sqrt(sumsq);
        CHECK_ALL(&gnf, &wn, 1, 1e-5, "grad norm");
        CHECK(overflow == 0);
        double c = 10.0 / (norm + 1e-6), wc = fmin(1.0, 10.0 / (sqrt(sumsq) + 1e-6));
        float cf = (float)c, wcf = (float)wc;
        CHECK_ALL(&cf, &wcf, 1, 1e-5, "clip scale");
        CHECK(c < 1); /* the inputs are made to be clipped */
        gn.c = c;
        CHECK_CU(A->grad_scale(&gn));
        for (int t = 0; t < NT; t++) {
            size_t n = numel[t];
            float *w = malloc((n + 1) * 4);
            for (size_t i = 0; i < n; i++) w[i] = (float)(hg[t][i] * wc);
            hgs[t] = down(dg[t], n, gdt); /* the clipped gradients as the step reads them */
            CHECK_ALL(hgs[t], w, n, gdt == TFC_DTYPE_BF16 ? 8e-3 : 1e-5, "clipped gradients");
            free(w);
        }
        tfc_optim_problem op = {.rule = TFC_OPTIM_RULE_ADAM,
                                .beta1 = 0.9,
                                .beta2 = 0.95,
                                .eps = 1e-8,
                                .decoupled = 1,
                                .segs = segs,
                                .nseg = nseg};
        if (gdt == TFC_DTYPE_BF16) {
            CHECK_CU_ERR(A->optim_step(&op), TFC_ERR_DTYPE, "f32 master weights");
            /* The norm takes gradients of one dtype. */
            tfc_optim_seg two[2] = {segs[0], segs[1]};
            two[1].dtype = TFC_DTYPE_F32;
            tfc_grad_norm_problem mixed = {.segs = two, .nseg = 2, .norm = &norm, .overflow = &overflow};
            CHECK_CU_ERR(A->grad_norm(&mixed), TFC_ERR_UNSUPPORTED, "one dtype");
        } else {
            CHECK_CU(A->optim_step(&op));
        }
        for (int t = 0; t < NT && gdt == TFC_DTYPE_F32; t++) {
            size_t n = numel[t];
            double bc1 = 1 - pow(0.9, (double)step[t]), bc2 = 1 - pow(0.95, (double)step[t]);
            float *wp = malloc((n + 1) * 4), *wm = malloc((n + 1) * 4), *wv = malloc((n + 1) * 4);
            for (size_t i = 0; i < n; i++) {
                double g = hgs[t][i], p = hp[t][i] * (1 - lr[t] * wd[t]);
                double m = 0.9 * hm[t][i] + 0.1 * g, v = 0.95 * hv[t][i] + 0.05 * g * g;
                p -= lr[t] * (m / bc1) / (sqrt(v / bc2) + 1e-8);
                wp[i] = (float)p, wm[i] = (float)m, wv[i] = (float)v;
            }
            char what[96];
            float *g = down(dp[t], n, TFC_DTYPE_F32);
            snprintf(what, sizeof what, "adamw params of parameter %d (lr %g, step %lld)", t, lr[t],
                     (long long)step[t]);
            CHECK_ALL(g, wp, n, 1e-6, what);
            free(g);
            CHECK_DEVICE(dm[t], n, TFC_DTYPE_F32, wm, 1e-6, "adamw m");
            g = down(dvv[t], n, TFC_DTYPE_F32);
            CHECK_ALL(g, wv, n, 1e-6, "adamw v");
            free(g), free(wp), free(wm), free(wv);
        }
        if (gdt == TFC_DTYPE_F32) {
            segs[seg_of[0]].step = 0;
            CHECK_CU_ERR(A->optim_step(&op), TFC_ERR_INVALID_ARG, "step is 0");
        }
        for (int t = 0; t < NT; t++) {
            free(hp[t]), free(hg[t]), free(hm[t]), free(hv[t]), free(hgs[t]);
            dfree(dp[t]), dfree(dg[t]), dfree(dm[t]), dfree(dvv[t]);
        }
    }
}

TEST(random_streams_match_cpu) {
    size_t n = 10003;
    uint64_t seed = 0x1234567890abcdefull, offset = 77;
    float *wu = malloc(n * 4), *wn = malloc(n * 4), *wd = malloc(n * 4), *x = rand_host(n, -1, 1, TFC_DTYPE_F32, 9);
    for (size_t i = 0; i < n; i++) {
        wu[i] = (float)(-2.0 + 5.0 * tfc_rng_uniform(seed, offset, i));
        wn[i] = (float)(0.5 + 0.02 * tfc_rng_normal(seed, offset, i));
        wd[i] = tfc_rng_uniform(seed, offset, i) >= 0.25 ? x[i] * (1.0f / 0.75f) : 0.0f;
    }
    void *d = dev(n, TFC_DTYPE_F32), *dx = up(x, n, TFC_DTYPE_F32);
    /* dst = a + b · r: uniform in [-2, 3), normal of mean 0.5 and std 0.02. */
    tfc_random_problem rp = {.kind = TFC_RANDOM_UNIFORM,
                             .dst = view_flat(d, TFC_DTYPE_F32, n),
                             .a = -2.0,
                             .b = 5.0,
                             .seed = seed,
                             .offset = offset};
    CHECK_CU(A->random(&rp));
    float *g = down(d, n, TFC_DTYPE_F32);
    CHECK_ALL(g, wu, n, 1e-7, "uniform stream");
    free(g);
    rp.kind = TFC_RANDOM_NORMAL, rp.a = 0.5, rp.b = 0.02;
    CHECK_CU(A->random(&rp));
    CHECK_DEVICE(d, n, TFC_DTYPE_F32, wn, 1e-6, "normal stream");
    tfc_dropout_problem dp = {
        .dtype = TFC_DTYPE_F32, .n = (int64_t)n, .p = 0.25, .seed = seed, .offset = offset, .x = dx, .out = d};
    CHECK_CU(A->dropout(&dp));
    CHECK_DEVICE(d, n, TFC_DTYPE_F32, wd, 1e-7, "dropout mask and scale");
    dp.p = 1.5;
    CHECK_CU_ERR(A->dropout(&dp), TFC_ERR_INVALID_ARG, "p is 1.5");
    free(wu), free(wn), free(wd), free(x), dfree(d), dfree(dx);
}

/* ---- GEMM epilogue, c_f32, TF32, plan cache; the row-chunked bias gradient (issue #19 part B) ---- */

/* want[p, i, j] = alpha · Σ_k op(a)·op(b) + beta · c0 (+ bias[j]) in double, for contiguous batch items. */
static void gemm_ref(const float *a, const float *b, const float *c0, const float *bias, int ta, int tb, int64_t M,
                     int64_t N, int64_t K, int64_t batch, int64_t sb, double alpha, double beta, float *want) {
    for (int64_t p = 0; p < batch; p++)
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double s = 0;
                for (int64_t k = 0; k < K; k++) {
                    double av = ta ? a[p * M * K + k * M + i] : a[p * M * K + i * K + k];
                    double bv = tb ? b[p * sb + j * K + k] : b[p * sb + k * N + j];
                    s += av * bv;
                }
                s = alpha * s + (beta != 0 ? beta * c0[(p * M + i) * N + j] : 0.0);
                if (bias) s += bias[j];
                want[(p * M + i) * N + j] = (float)s;
            }
}

/*
 * The gemm entry's ABI 9 fields, each against loops: the fused bias
 * epilogue (f32, bf16, and bf16 A/B with an f32 C and bias), c_f32 alone,
 * K = 0 with a bias, TF32 within TF32's error. Then the plan cache: the
 * same shape twice gives the same bits, and a second call of a cached
 * shape with another bias buffer uses that buffer.
 */
TEST(gemm_fused_bias_c_f32_tf32_and_the_plan_cache) {
    CHECK(A->caps.gemm_epilogues == (1u << TFC_GEMM_EPI_BIAS));
    CHECK(A->native_stream(0) != NULL); /* what bench/cuda_bench.c records its CUDA events on */
    /* modes: 0 f32, 1 bf16, 2 bf16 A/B -> f32 C */
    for (int mode = 0; mode < 3; mode++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int bi = 0; bi < 2; bi++) {
                    const int dt = mode == 0 ? TFC_DTYPE_F32 : TFC_DTYPE_BF16, ct = mode == 1 ? dt : TFC_DTYPE_F32;
                    const int64_t M = 37, N = 41, K = 72, batch = 3; /* ragged: no multiple of 8 but K */
                    const double alpha = 0.75, beta = bi ? 0.5 : 0.0;
                    float *a = rand_host(batch * M * K, -1, 1, dt, 200), *b = rand_host(K * N, -1, 1, dt, 201);
                    float *c0 = rand_host(batch * M * N, -1, 1, ct, 202), *bias = rand_host(N, -1, 1, ct, 203);
                    float *want = malloc(batch * M * N * 4);
                    gemm_ref(a, b, c0, bias, ta, tb, M, N, K, batch, 0, alpha, beta, want);
                    void *d_a = up(a, batch * M * K, dt), *d_b = up(b, K * N, dt), *d_c = up(c0, batch * M * N, ct);
                    void *d_bias = up(bias, N, ct);
                    tfc_gemm_problem gp = {.dtype = (tfc_dtype)dt,
                                           .trans_a = ta,
                                           .trans_b = tb,
                                           .M = M,
                                           .N = N,
                                           .K = K,
                                           .batch = batch,
                                           .alpha = alpha,
                                           .beta = beta,
                                           .a = d_a,
                                           .b = d_b,
                                           .c = d_c,
                                           .lda = ta ? M : K,
                                           .ldb = tb ? K : N,
                                           .ldc = N,
                                           .stride_a = M * K,
                                           .stride_b = 0,
                                           .stride_c = M * N,
                                           .c_f32 = mode == 2,
                                           .bias = d_bias,
                                           .epilogue = TFC_GEMM_EPI_BIAS};
                    CHECK_CU(A->gemm(&gp));
                    char what[128];
                    snprintf(what, sizeof what, "fused bias gemm mode %d ta %d tb %d beta %g", mode, ta, tb, beta);
                    /* bf16 C: one output rounding; f32 C (also from bf16 A/B, whose products are exact): f32 sums */
                    CHECK_DEVICE(d_c, batch * M * N, ct, want, ct == TFC_DTYPE_BF16 ? 1.5e-2 : 1e-5, what);
                    if (mode == 2 && !bi) { /* c_f32 without the epilogue */
                        gemm_ref(a, b, c0, NULL, ta, tb, M, N, K, batch, 0, alpha, 0.0, want);
                        gp.epilogue = TFC_GEMM_EPI_NONE, gp.bias = NULL;
                        CHECK_CU(A->gemm(&gp));
                        snprintf(what, sizeof what, "c_f32 gemm ta %d tb %d", ta, tb);
                        CHECK_DEVICE(d_c, batch * M * N, ct, want, 1e-5, what);
                    }
                    free(a), free(b), free(c0), free(bias), free(want);
                    dfree(d_a), dfree(d_b), dfree(d_c), dfree(d_bias);
                }
    /* K = 0 with a bias: C = beta·C + bias, on f32, bf16 and an f32 C of bf16 operands */
    for (int mode = 0; mode < 3; mode++) {
        const int dt = mode == 0 ? TFC_DTYPE_F32 : TFC_DTYPE_BF16, ct = mode == 1 ? dt : TFC_DTYPE_F32;
        const int64_t M = 5, N = 7;
        float *c0 = rand_host(M * N, -1, 1, ct, 210), *bias = rand_host(N, -1, 1, ct, 211), *want = malloc(M * N * 4);
        void *d_c = up(c0, M * N, ct), *d_bias = up(bias, N, ct), *d_ab = dev(1, dt);
        tfc_gemm_problem gp = {.dtype = (tfc_dtype)dt,
                               .M = M,
                               .N = N,
                               .K = 0,
                               .batch = 1,
                               .alpha = 1,
                               .beta = 0.5,
                               .a = d_ab,
                               .b = d_ab,
                               .c = d_c,
                               .lda = 1,
                               .ldb = N,
                               .ldc = N,
                               .c_f32 = mode == 2,
                               .bias = d_bias,
                               .epilogue = TFC_GEMM_EPI_BIAS};
        CHECK_CU(A->gemm(&gp));
        for (int64_t i = 0; i < M * N; i++) want[i] = 0.5f * c0[i] + bias[i % N];
        CHECK_DEVICE(d_c, M * N, ct, want, ct == TFC_DTYPE_BF16 ? 1.5e-2 : 1e-6, "gemm K = 0 with the bias epilogue");
        free(c0), free(bias), free(want), dfree(d_c), dfree(d_bias), dfree(d_ab);
    }
    /*
     * TF32. First on values TF32 holds exactly (multiples of 2^-8 in [-1, 1): at most 9 significant bits), whose
     * products are exact in f32: the TF32 path must then agree with the f64 loops as closely as full f32 does,
     * which checks its layouts and sums whatever TF32's rounding (nearest or truncation). Then on general f32
     * values: within TF32's error (inputs off by up to 2^-10 relative, over K = 512 terms), and the difference to
     * the full-f32 product is printed (0 would mean TF32 was not used).
     */
    for (int exact = 1; exact >= 0; exact--) {
        const int64_t M = 256, N = 192, K = 512;
        float *a = rand_host(M * K, -1, 1, TFC_DTYPE_F32, 220), *b = rand_host(K * N, -1, 1, TFC_DTYPE_F32, 221);
        for (int64_t i = 0; exact && i < M * K; i++) a[i] = floorf(a[i] * 256.0f) / 256.0f;
        for (int64_t i = 0; exact && i < K * N; i++) b[i] = floorf(b[i] * 256.0f) / 256.0f;
        float *want = malloc(M * N * 4);
        gemm_ref(a, b, NULL, NULL, 0, 0, M, N, K, 1, 0, 1.0, 0.0, want);
        void *d_a = up(a, M * K, TFC_DTYPE_F32), *d_b = up(b, K * N, TFC_DTYPE_F32), *d_c = dev(M * N, TFC_DTYPE_F32);
        tfc_gemm_problem gp = {.dtype = TFC_DTYPE_F32,
                               .M = M,
                               .N = N,
                               .K = K,
                               .batch = 1,
                               .alpha = 1,
                               .a = d_a,
                               .b = d_b,
                               .c = d_c,
                               .lda = K,
                               .ldb = N,
                               .ldc = N,
                               .allow_tf32 = 1};
        CHECK_CU(A->gemm(&gp));
        float *g32 = down(d_c, M * N, TFC_DTYPE_F32);
        /* f32 sums of 512 terms: OpenBLAS misses the f64 loops by 1.0e-5 here; 5e-5 leaves room for the order */
        CHECK_ALL(g32, want, M * N, exact ? 5e-5 : 5e-2,
                  exact ? "f32 gemm with TF32 allowed, TF32-exact inputs" : "f32 gemm with TF32 allowed");
        gp.allow_tf32 = 0;
        CHECK_CU(A->gemm(&gp));
        float *gf = down(d_c, M * N, TFC_DTYPE_F32);
        CHECK_ALL(gf, want, M * N, 5e-5, "f32 gemm without TF32 (full f32)");
        double diff = 0;
        for (int64_t i = 0; i < M * N; i++) diff = fmax(diff, fabs((double)g32[i] - gf[i]));
        if (!exact) printf("  TF32 vs f32: max |difference| %.3g (0 would mean TF32 was not used)\n", diff);
        free(a), free(b), free(want), free(g32), free(gf), dfree(d_a), dfree(d_b), dfree(d_c);
    }
    /* the plan cache: a shape run again is a cache hit and must give the same bits and honour a new bias pointer */
    for (int di = 0; di < 2; di++) {
        const int dt = DTYPES[di];
        const int64_t M = 129, N = 96, K = 64;
        float *a = rand_host(M * K, -1, 1, dt, 230), *b = rand_host(N * K, -1, 1, dt, 231);
        float *b1 = rand_host(N, -1, 1, dt, 232), *b2 = rand_host(N, 2, 3, dt, 233), *want = malloc(M * N * 4);
        void *d_a = up(a, M * K, dt), *d_b = up(b, N * K, dt), *d_b1 = up(b1, N, dt), *d_b2 = up(b2, N, dt);
        void *d_c1 = dev(M * N, dt), *d_c2 = dev(M * N, dt);
        tfc_gemm_problem gp = {.dtype = (tfc_dtype)dt,
                               .trans_b = 1,
                               .M = M,
                               .N = N,
                               .K = K,
                               .batch = 1,
                               .alpha = 1,
                               .a = d_a,
                               .b = d_b,
                               .c = d_c1,
                               .lda = K,
                               .ldb = K,
                               .ldc = N,
                               .bias = d_b1,
                               .epilogue = TFC_GEMM_EPI_BIAS};
        CHECK_CU(A->gemm(&gp));
        gp.c = d_c2;
        CHECK_CU(A->gemm(&gp));
        float *g1 = down(d_c1, M * N, dt), *g2 = down(d_c2, M * N, dt);
        CHECK(memcmp(g1, g2, (size_t)(M * N) * 4) == 0);
        gp.bias = d_b2; /* same plan, another bias */
        CHECK_CU(A->gemm(&gp));
        gemm_ref(a, b, NULL, b2, 0, 1, M, N, K, 1, 0, 1.0, 0.0, want);
        CHECK_DEVICE(d_c2, M * N, dt, want, dt == TFC_DTYPE_BF16 ? 1.5e-2 : 1e-5, "cached plan with a new bias");
        free(a), free(b), free(b1), free(b2), free(want), free(g1), free(g2);
        dfree(d_a), dfree(d_b), dfree(d_b1), dfree(d_b2), dfree(d_c1), dfree(d_c2);
    }
    /* a bias that is not 16-byte aligned (one element into a buffer) goes through the epilogue kernel instead */
    for (int di = 0; di < 2; di++) {
        const int dt = DTYPES[di];
        const int64_t M = 33, N = 40, K = 72;
        float *a = rand_host(M * K, -1, 1, dt, 234), *b = rand_host(K * N, -1, 1, dt, 235);
        float *bias = rand_host(N + 1, -1, 1, dt, 236), *want = malloc(M * N * 4);
        gemm_ref(a, b, NULL, bias + 1, 0, 0, M, N, K, 1, 0, 1.0, 0.0, want);
        void *d_a = up(a, M * K, dt), *d_b = up(b, K * N, dt), *d_bias = up(bias, N + 1, dt), *d_c = dev(M * N, dt);
        tfc_gemm_problem gp = {.dtype = (tfc_dtype)dt,
                               .M = M,
                               .N = N,
                               .K = K,
                               .batch = 1,
                               .alpha = 1,
                               .a = d_a,
                               .b = d_b,
                               .c = d_c,
                               .lda = K,
                               .ldb = N,
                               .ldc = N,
                               .bias = elem(d_bias, 1, dt),
                               .epilogue = TFC_GEMM_EPI_BIAS};
        CHECK_CU(A->gemm(&gp));
        CHECK_DEVICE(d_c, M * N, dt, want, dt == TFC_DTYPE_BF16 ? 1.5e-2 : 1e-5, "gemm with a misaligned bias");
        free(a), free(b), free(bias), free(want), dfree(d_a), dfree(d_b), dfree(d_bias), dfree(d_c);
    }
    tfc_gemm_problem nob = {
        .dtype = TFC_DTYPE_F32, .M = 1, .N = 1, .K = 1, .batch = 1, .alpha = 1, .epilogue = TFC_GEMM_EPI_BIAS};
    CHECK_CU_ERR(A->gemm(&nob), TFC_ERR_INVALID_ARG, "without a bias");
    nob.epilogue = 5;
    CHECK_CU_ERR(A->gemm(&nob), TFC_ERR_UNSUPPORTED, "epilogue 5");
}

/*
 * bias_grad's row-chunked column sums and the reduce entry's use of them:
 * GPT-2's B·T = 16384 rows (plus a ragged 37) of C = 768 (plus 5) columns
 * read with a row stride, one case over 2^20 rows (several chunks per
 * chunk limit), bitwise repeatable; then a sum over the leading dim of a
 * [B, T, C] view (kept dims contiguous, the reduced dim strided).
 */
TEST(bias_grad_row_chunks_large_ragged_and_repeatable) {
    const size_t cases[3][3] = {{16384 + 37, 768 + 5, 768 + 8}, {((size_t)1 << 20) + 7, 33, 33}, {255, 1, 1}};
    for (int di = 0; di < 2; di++)
        for (int ci = 0; ci < 3; ci++) {
            const int dt = DTYPES[di];
            size_t rows = cases[ci][0], n = cases[ci][1], ld = cases[ci][2];
            float *dy = rand_host(rows * ld, -1, 1, dt, 240 + ci), *wdb = malloc(n * 4);
            double *acc = calloc(n, sizeof(double));
            for (size_t r = 0; r < rows; r++)
                for (size_t j = 0; j < n; j++) acc[j] += dy[r * ld + j];
            for (size_t j = 0; j < n; j++) wdb[j] = (float)acc[j];
            void *d_dy = up(dy, rows * ld, dt), *d_db = dev(n, dt);
            tfc_bias_problem gp = {.dtype = (tfc_dtype)dt,
                                   .rows = (int64_t)rows,
                                   .n = (int64_t)n,
                                   .ld = (int64_t)ld,
                                   .dy = d_dy,
                                   .db = d_db};
            CHECK_CU(A->bias_grad(&gp));
            float *g1 = down(d_db, n, dt);
            char what[96];
            snprintf(what, sizeof what, "bias_grad rows %zu n %zu ld %zu (%s)", rows, n, ld, dt_name(dt));
            /*
             * f32 partial sums of ≤ 256-row chunks, then of the chunks: each
             * chunk's rounding is ~ε·√256·|partial| (|partial| ~ 9), and 65
             * chunks add √65 of those, ~2e-5 absolute, which the H200's first
             * run showed (1.5e-5 relative to 1 + |sum| on a column summing to
             * -0.36; 1e-5 was too tight). 1e-4 leaves 5x; a lost row or chunk
             * is off by O(0.1-1).
             */
            CHECK_ALL(g1, wdb, n, dt == TFC_DTYPE_BF16 ? 1e-2 : 1e-4, what);
            CHECK_CU(A->bias_grad(&gp));
            float *g2 = down(d_db, n, dt);
            CHECK(memcmp(g1, g2, n * 4) == 0); /* no atomics: the same bits again */
            free(g1), free(g2), free(dy), free(wdb), free(acc), dfree(d_dy), dfree(d_db);
        }
    /* reduce: sum over B of x [B, T, C] as the view [T, C, B] (strides C, 1, T·C), mean scale */
    for (int di = 0; di < 2; di++) {
        const int dt = DTYPES[di];
        const int64_t B = 300, T = 17, C = 70;
        float *x = rand_host((size_t)(B * T * C), -1, 1, dt, 250), *want = malloc((size_t)(T * C) * 4);
        for (int64_t o = 0; o < T * C; o++) {
            double s = 0;
            for (int64_t b = 0; b < B; b++) s += x[b * T * C + o];
            want[o] = (float)(s / (double)B);
        }
        void *d_x = up(x, (size_t)(B * T * C), dt), *d_o = dev((size_t)(T * C), dt);
        tfc_reduce_problem rp = {.op = TFC_REDUCE_SUM,
                                 .in = view_nd(d_x, dt, 3, (int64_t[]){T, C, B}, (int64_t[]){C, 1, T * C}),
                                 .nkeep = 2,
                                 .out = d_o,
                                 .scale = 1.0 / (double)B};
        CHECK_CU(A->reduce(&rp));
        CHECK_DEVICE(d_o, (size_t)(T * C), dt, want, tol_sum(dt), "mean over the leading dim (column sums)");
        free(x), free(want), dfree(d_x), dfree(d_o);
    }
}

/*
 * Few outputs over long reductions take the split kernels (reduce.cu): a
 * sum of all 3·2^20 + 17 elements (one run: no per-dim index math), and 3
 * row sums of a [3, 700, 900] view whose reduced dims do not merge into
 * one run (strides 2700 and 1 over a [700, 3, 900] buffer), mean-scaled;
 * each against a double sum, and bitwise repeatable. The first H200 run
 * timed the old one-block-per-output sum at ~0.25 s for the clip norm's
 * Σg² over GPT-2's gradients; a lost or doubled split is off by ~50 here.
 */
TEST(reduce_few_outputs_split_across_blocks) {
    for (int di = 0; di < 2; di++) {
        const int dt = DTYPES[di];
        const size_t n = (size_t)3 * 1048576 + 17;
        float *x = rand_host(n, -1, 1, dt, 260);
        double acc = 0;
        for (size_t i = 0; i < n; i++) acc += x[i];
        float want1 = (float)acc, *g1, *g2;
        void *d_x = up(x, n, dt), *d_o = dev(3, dt);
        tfc_reduce_problem rp = {
            .op = TFC_REDUCE_SUM, .in = view_flat(d_x, dt, (int64_t)n), .nkeep = 0, .out = d_o, .scale = 1.0};
        CHECK_CU(A->reduce(&rp));
        g1 = down(d_o, 1, dt);
        /* |sum| ~ √n·0.58 ≈ 1000; f32 partials of 8192 elements then 384 of them in order */
        CHECK_ALL(g1, &want1, 1, dt == TFC_DTYPE_BF16 ? 1e-2 : 1e-5, "sum of 3*2^20+17 elements");
        CHECK_CU(A->reduce(&rp));
        g2 = down(d_o, 1, dt);
        CHECK(memcmp(g1, g2, 4) == 0);
        free(g1), free(g2);
        /* [3, 700, 900] as a view of a [700, 3, 900] buffer (the first 1,890,000 elements of x) */
        const int64_t R = 3, K1 = 700, K2 = 900;
        float want3[3];
        for (int64_t o = 0; o < R; o++) {
            double s = 0;
            for (int64_t a = 0; a < K1; a++)
                for (int64_t b = 0; b < K2; b++) s += x[(a * R + o) * K2 + b];
            want3[o] = (float)(s / (double)(K1 * K2));
        }
        rp.in = view_nd(d_x, dt, 3, (int64_t[]){R, K1, K2}, (int64_t[]){K2, R * K2, 1});
        rp.nkeep = 1;
        rp.scale = 1.0 / (double)(K1 * K2);
        CHECK_CU(A->reduce(&rp));
        g1 = down(d_o, 3, dt);
        CHECK_ALL(g1, want3, 3, dt == TFC_DTYPE_BF16 ? 1e-2 : 1e-6, "mean of 3 rows of a [3,700,900] strided view");
        CHECK_CU(A->reduce(&rp));
        g2 = down(d_o, 3, dt);
        CHECK(memcmp(g1, g2, 12) == 0);
        free(g1), free(g2), free(x), dfree(d_x), dfree(d_o);
    }
}

/*
 * ---- sizes past the grid (issue #19): every elementwise kernel caps its grid
 * at 32 blocks of 256 per SM (tfcu_blocks: 1,081,344 threads on 132 SMs) and
 * the row kernels at 65535·16 blocks, so only inputs beyond 2^20 elements
 * (rows) take a second trip round their grid-stride loops. Sizes are ragged
 * (not multiples of the block or the grid), contents a few MB to ~150 MB.
 */

/* 3·2^20 + 17 elements: three and a bit trips round the capped elementwise grid. */
#define BIG_N ((size_t)3 * 1048576 + 17)

TEST(grid_stride_elementwise_over_2p20) {
    size_t n = BIG_N;
    float *want = malloc(n * 4);
    for (int di = 0; di < 2; di++) {
        int dt = DTYPES[di];
        char what[96];
        float *a = rand_host(n, -2, 2, dt, 200 + di), *b = rand_host(n, -2, 2, dt, 210 + di);
        void *da = up(a, n, dt), *db = up(b, n, dt), *dout = dev(n, dt);
        /* fill: a non-zero value takes the kernel, not cudaMemsetAsync. */
        tfc_fill_problem fp = {.dst = view_flat(dout, dt, n), .value = 0.75};
        CHECK_CU(A->fill(&fp));
        for (size_t i = 0; i < n; i++) want[i] = 0.75f;
        snprintf(what, sizeof what, "fill of %zu elements (%s)", n, dt_name(dt));
        CHECK_DEVICE(dout, n, dt, want, 0.0, what);
        /* map: out = a + b, then out += a * 1.5 (accumulate) */
        tfc_sview vo = view_flat(dout, dt, n), va = view_flat(da, dt, n), vb = view_flat(db, dt, n);
        tfc_map_problem m = {.op = TFC_MAP_ADD, .out = &vo, .a = &va, .b = &vb};
        CHECK_CU(A->map(&m));
        for (size_t i = 0; i < n; i++) want[i] = round_dt((float)((double)a[i] + b[i]), dt);
        snprintf(what, sizeof what, "map add of %zu elements (%s)", n, dt_name(dt));
        CHECK_DEVICE(dout, n, dt, want, tol_elem(dt), what);
        m = (tfc_map_problem){.op = TFC_MAP_MUL_S, .out = &vo, .a = &va, .p = 1.5, .accumulate = 1};
        CHECK_CU(A->map(&m));
        for (size_t i = 0; i < n; i++) want[i] = (float)((double)want[i] + 1.5 * a[i]);
        snprintf(what, sizeof what, "map mul_s accumulated, %zu elements (%s)", n, dt_name(dt));
        CHECK_DEVICE(dout, n, dt, want, 2 * tol_elem(dt), what);
        /* GELU forward and backward */
        tfc_gelu_problem gp = {.dtype = (tfc_dtype)dt, .n = (int64_t)n, .approximate = 1, .x = da, .y = dout};
        CHECK_CU(A->gelu_forward(&gp));
        for (size_t i = 0; i < n; i++) want[i] = (float)gelu_ref(a[i]);
        snprintf(what, sizeof what, "gelu of %zu elements (%s)", n, dt_name(dt));
        CHECK_DEVICE(dout, n, dt, want, 2 * tol_elem(dt), what);
        gp = (tfc_gelu_problem){
            .dtype = (tfc_dtype)dt, .n = (int64_t)n, .approximate = 1, .x = da, .dy = db, .dx = dout};
        CHECK_CU(A->gelu_backward(&gp));
        for (size_t i = 0; i < n; i++) {
            double x = a[i], k = sqrt(2.0 / M_PI), u = k * (x + 0.044715 * x * x * x), t = tanh(u);
            want[i] = (float)(b[i] * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x)));
        }
        snprintf(what, sizeof what, "gelu backward of %zu elements (%s)", n, dt_name(dt));
        CHECK_DEVICE(dout, n, dt, want, 2 * tol_elem(dt), what);
        /* strided copy: [3071, 1024] read transposed from a [1024, 3071] buffer (3,144,704 elements <= n) */
        const int64_t R = 3071, C = 1024, shape[2] = {R, C}, tstr[2] = {1, R};
        tfc_copy_problem cp = {.dst = view_c(dout, dt, 2, shape), .src = view_nd(da, dt, 2, shape, tstr)};
        CHECK_CU(A->copy(&cp));
        for (int64_t r = 0; r < R; r++)
            for (int64_t c = 0; c < C; c++) want[r * C + c] = a[c * R + r];
        snprintf(what, sizeof what, "transposed copy of %lld elements (%s)", (long long)(R * C), dt_name(dt));
        CHECK_DEVICE(dout, (size_t)(R * C), dt, want, 0.0, what);
        free(a), free(b), dfree(da), dfree(db), dfree(dout);
    }
    /* f32 -> bf16 cast and the Philox stream over the same size */
    float *a = rand_host(n, -3, 3, TFC_DTYPE_F32, 220);
    void *da = up(a, n, TFC_DTYPE_F32), *dbf = dev(n, TFC_DTYPE_BF16);
    tfc_copy_problem cp = {.dst = view_flat(dbf, TFC_DTYPE_BF16, n), .src = view_flat(da, TFC_DTYPE_F32, n)};
    CHECK_CU(A->copy(&cp));
    for (size_t i = 0; i < n; i++) want[i] = round_dt(a[i], TFC_DTYPE_BF16);
    CHECK_DEVICE(dbf, n, TFC_DTYPE_BF16, want, 0.0, "cast f32 -> bf16 of 3·2^20 + 17 elements");
    tfc_random_problem rp = {.kind = TFC_RANDOM_UNIFORM,
                             .dst = view_flat(da, TFC_DTYPE_F32, n),
                             .a = -1.0,
                             .b = 2.0,
                             .seed = 7,
                             .offset = 3};
    CHECK_CU(A->random(&rp));
    for (size_t i = 0; i < n; i++) want[i] = (float)(-1.0 + 2.0 * tfc_rng_uniform(7, 3, i));
    CHECK_DEVICE(da, n, TFC_DTYPE_F32, want, 1e-7, "uniform stream of 3·2^20 + 17 elements");
    free(a), free(want), dfree(da), dfree(dbf);
}

/* 2^20 + 2^17 + 3 rows: past the 65535·16 row blocks of softmax and cross-entropy, and bias_grad's rows. */
#define BIG_ROWS ((size_t)1048576 + 131072 + 3)

TEST(row_kernels_over_2p20_rows) {
    for (int di = 0; di < 2; di++) {
        int dt = DTYPES[di];
        char what[128];
        /* softmax over rows of 5 (inner 1: a block per row) */
        size_t R = BIG_ROWS, D = 5, n = R * D;
        float *x = rand_host(n, -4, 4, dt, 230 + di), *y = malloc(n * 4);
        for (size_t r = 0; r < R; r++) {
            double m = -INFINITY, sum = 0;
            for (size_t k = 0; k < D; k++) m = fmax(m, x[r * D + k]);
            for (size_t k = 0; k < D; k++) sum += exp(x[r * D + k] - m);
            for (size_t k = 0; k < D; k++) y[r * D + k] = (float)(exp(x[r * D + k] - m) / sum);
        }
        void *d_x = up(x, n, dt), *d_y = dev(n, dt);
        tfc_softmax_problem sp = {
            .dtype = (tfc_dtype)dt, .outer = (int64_t)R, .d = (int64_t)D, .inner = 1, .x = d_x, .y = d_y};
        CHECK_CU(A->softmax_forward(&sp));
        snprintf(what, sizeof what, "softmax over %zu rows of %zu (%s)", R, D, dt_name(dt));
        CHECK_DEVICE(d_y, n, dt, y, tol_sum(dt), what);
        dfree(d_y), free(y);
        /*
         * cross-entropy over the same logits as [R, 5], i64 targets, every 7th row
         * ignored. The mean runs over ~1.01M rows in f32: 1e-4 (f32) relative.
         */
        int64_t *t = malloc(R * 8);
        uint64_t st = 17;
        double loss = 0, nvalid = 0;
        float *lse = malloc(R * 4);
        for (size_t r = 0; r < R; r++) {
            t[r] = r % 7 == 3 ? -100 : (int64_t)(rng_next(&st) % D);
            double m = -INFINITY, sum = 0;
            for (size_t k = 0; k < D; k++) m = fmax(m, x[r * D + k]);
            for (size_t k = 0; k < D; k++) sum += exp(x[r * D + k] - m);
            lse[r] = (float)(m + log(sum));
            if (t[r] != -100) loss += (m + log(sum)) - x[r * D + t[r]], nvalid++;
        }
        float fl = (float)(loss / nvalid), dloss = 1.0f;
        void *d_t = dev(R, TFC_DTYPE_I64), *d_dx = dev(n, dt);
        float *d_loss = dev(1, TFC_DTYPE_F32), *d_lse = dev(R, TFC_DTYPE_F32), *d_dloss = up(&dloss, 1, TFC_DTYPE_F32);
        CHECK_CU(A->memcpy(0, d_t, t, R * 8, TFC_MEMCPY_H2D));
        tfc_cross_entropy_problem cp = {.dtype = (tfc_dtype)dt,
                                        .index_dtype = TFC_DTYPE_I64,
                                        .n = (int64_t)R,
                                        .c = (int64_t)D,
                                        .ignore_index = -100,
                                        .logits = d_x,
                                        .targets = d_t,
                                        .loss = d_loss,
                                        .lse = d_lse};
        CHECK_CU(A->cross_entropy_forward(&cp));
        snprintf(what, sizeof what, "cross-entropy loss over %zu rows (%s)", R, dt_name(dt));
        CHECK_DEVICE(d_loss, 1, TFC_DTYPE_F32, &fl, 1e-4, what);
        snprintf(what, sizeof what, "cross-entropy lse over %zu rows (%s)", R, dt_name(dt));
        CHECK_DEVICE(d_lse, R, TFC_DTYPE_F32, lse, 1e-5, what);
        tfc_cross_entropy_problem bp = {.dtype = (tfc_dtype)dt,
                                        .index_dtype = TFC_DTYPE_I64,
                                        .n = (int64_t)R,
                                        .c = (int64_t)D,
                                        .ignore_index = -100,
                                        .logits = d_x,
                                        .targets = d_t,
                                        .dloss = d_dloss,
                                        .lse_in = d_lse,
                                        .dlogits = d_dx};
        CHECK_CU(A->cross_entropy_backward(&bp));
        /* dlogits = (softmax - onehot) / n_valid: ~1e-6 in size, so compared relative to that scale. */
        float *want = malloc(n * 4), *g = down(d_dx, n, dt);
        for (size_t r = 0; r < R; r++)
            for (size_t k = 0; k < D; k++)
                want[r * D + k] =
                    t[r] == -100 ? 0.0f : (float)(exp(x[r * D + k] - (double)lse[r]) - (k == (size_t)t[r]));
        for (size_t i = 0; i < n; i++) g[i] = (float)((double)g[i] * nvalid);
        snprintf(what, sizeof what, "cross-entropy dlogits over %zu rows, times n_valid (%s)", R, dt_name(dt));
        CHECK_ALL(g, want, n, dt == TFC_DTYPE_BF16 ? 1e-2 : 1e-5, what);
        free(g), free(want), free(t), free(lse), free(x);
        dfree(d_x), dfree(d_t), dfree(d_dx), dfree(d_loss), dfree(d_lse), dfree(d_dloss);

        /* bias_grad: column sums of dy [R, 7] with row stride 9; ~1.18M-term sums in f32: 1e-4 relative. */
        size_t Nb = 7, ld = 9;
        float *dy = rand_host(R * ld, -1, 1, dt, 240 + di), *wdb = malloc(Nb * 4);
        for (size_t j = 0; j < Nb; j++) {
            double sum = 0;
            for (size_t r = 0; r < R; r++) sum += dy[r * ld + j];
            wdb[j] = (float)sum;
        }
        void *d_dy = up(dy, R * ld, dt), *d_db = dev(Nb, dt);
        tfc_bias_problem gp = {
            .dtype = (tfc_dtype)dt, .rows = (int64_t)R, .n = (int64_t)Nb, .ld = (int64_t)ld, .dy = d_dy, .db = d_db};
        CHECK_CU(A->bias_grad(&gp));
        snprintf(what, sizeof what, "bias_grad over %zu rows, n 7, ld 9 (%s)", R, dt_name(dt));
        CHECK_DEVICE(d_db, Nb, dt, wdb, dt == TFC_DTYPE_BF16 ? 1e-2 : 1e-4, what);
        free(dy), free(wdb), dfree(d_dy), dfree(d_db);
    }
}

/* More rows than layernorm's 65535·16 blocks of 8 warps (8,388,480 rows) cover: ragged C = 3. */
TEST(layernorm_over_2p23_rows) {
    size_t R = (size_t)8388480 + 65536 + 5, C = 3, n = R * C;
    for (int di = 0; di < 2; di++) {
        int dt = DTYPES[di];
        char what[128];
        float *x = rand_host(n, -2, 2, dt, 250 + di), *dy = rand_host(n, -1, 1, dt, 260 + di);
        float *y = malloc(n * 4), *dx = malloc(n * 4);
        /* Rows spread by at least 2 (x0 - 1 - a, x0, x0 + 1 + b): no row is near-constant, so f32 is well conditioned. */
        for (size_t r = 0; r < R; r++) {
            float *xr = x + r * C;
            xr[1] = round_dt(xr[0] + 1.0f + fabsf(xr[1]) / 2, dt);
            xr[2] = round_dt(xr[0] - 1.0f - fabsf(xr[2]) / 2, dt);
        }
        double dw[3] = {0, 0, 0}, db[3] = {0, 0, 0};
        for (size_t r = 0; r < R; r++) {
            const float *xr = x + r * C, *gr = dy + r * C;
            double m = ((double)xr[0] + xr[1] + xr[2]) / 3, v = 0, sg = 0, sgx = 0;
            for (size_t c = 0; c < C; c++) v += (xr[c] - m) * (xr[c] - m);
            double rs = 1.0 / sqrt(v / 3 + 1e-5);
            for (size_t c = 0; c < C; c++) {
                double xh = (xr[c] - m) * rs;
                y[r * C + c] = (float)xh;
                sg += gr[c], sgx += gr[c] * xh;
                dw[c] += gr[c] * xh, db[c] += gr[c];
            }
            for (size_t c = 0; c < C; c++) dx[r * C + c] = (float)(rs * (gr[c] - sg / 3 - (xr[c] - m) * rs * sgx / 3));
        }
        float ones[3] = {1, 1, 1}, fw[3], fb[3];
        for (int c = 0; c < 3; c++) fw[c] = (float)dw[c], fb[c] = (float)db[c];
        void *d_x = up(x, n, dt), *d_w = up(ones, C, dt), *d_y = dev(n, dt), *d_dy = up(dy, n, dt), *d_dx = dev(n, dt);
        void *d_dw = dev(C, dt), *d_db = dev(C, dt);
        float *d_mean = dev(R, TFC_DTYPE_F32), *d_rstd = dev(R, TFC_DTYPE_F32);
        tfc_layernorm_problem lp = {.dtype = (tfc_dtype)dt,
                                    .rows = (int64_t)R,
                                    .cols = (int64_t)C,
                                    .eps = 1e-5,
                                    .x = d_x,
                                    .weight = d_w,
                                    .y = d_y,
                                    .mean = d_mean,
                                    .rstd = d_rstd};
        CHECK_CU(A->layernorm_forward(&lp));
        snprintf(what, sizeof what, "layernorm y over %zu rows of 3 (%s)", R, dt_name(dt));
        CHECK_DEVICE(d_y, n, dt, y, tol_sum(dt), what);
        lp = (tfc_layernorm_problem){.dtype = (tfc_dtype)dt,
                                     .rows = (int64_t)R,
                                     .cols = (int64_t)C,
                                     .eps = 1e-5,
                                     .x = d_x,
                                     .weight = d_w,
                                     .mean = d_mean,
                                     .rstd = d_rstd,
                                     .dy = d_dy,
                                     .dx = d_dx,
                                     .dweight = d_dw,
                                     .dbias = d_db};
        CHECK_CU(A->layernorm_backward(&lp));
        snprintf(what, sizeof what, "layernorm dx over %zu rows (%s)", R, dt_name(dt));
        CHECK_DEVICE(d_dx, n, dt, dx, tol_sum(dt) * 2, what);
        /* dw, db: ~8.45M-term sums, f32 partial sums per chunk: 1e-4 relative (f32). */
        snprintf(what, sizeof what, "layernorm dw over %zu rows (%s)", R, dt_name(dt));
        CHECK_DEVICE(d_dw, C, dt, fw, dt == TFC_DTYPE_BF16 ? 1e-2 : 1e-4, what);
        snprintf(what, sizeof what, "layernorm db over %zu rows (%s)", R, dt_name(dt));
        CHECK_DEVICE(d_db, C, dt, fb, dt == TFC_DTYPE_BF16 ? 1e-2 : 1e-4, what);
        free(x), free(dy), free(y), free(dx);
        dfree(d_x), dfree(d_w), dfree(d_y), dfree(d_dy), dfree(d_dx), dfree(d_dw), dfree(d_db);
        dfree(d_mean), dfree(d_rstd);
    }
}

/*
 * ---- allocation failures are told apart (cuda/memory.cu) ----
 * An impossible size is TFC_ERR_OOM; after a kernel has faulted, an
 * allocation is TFC_ERR_DEVICE naming the CUDA error and saying the context
 * is dead, never "out of memory". The fault kills the process's context, so
 * it happens in a child process: this program run again with --sticky-child.
 */
static int sticky_child(void) {
    /* A fill through a pointer to nowhere: the kernel faults (illegal address). */
    tfc_fill_problem fp = {.dst = view_flat((void *)(uintptr_t)0x100000, TFC_DTYPE_F32, 1 << 20), .value = 1.0};
    tfc_status s = A->fill(&fp);
    if (s == TFC_OK) s = A->synchronize(0);
    printf("after the fault: %s: %s\n", tfc_status_name(s), A->last_error());
    void *p = NULL;
    s = A->alloc(0, 4096, &p);
    printf("alloc: %s: %s\n", tfc_status_name(s), A->last_error());
    return 0;
}

TEST(alloc_failures_oom_vs_dead_context) {
    void *p = NULL;
    /* 2^50 bytes (1 PiB) is more than any device has. */
    CHECK_CU_ERR(A->alloc(0, (size_t)1 << 50, &p), TFC_ERR_OOM, "cudaErrorMemoryAllocation");
    CHECK(p == NULL);
    char cmd[4200];
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) {
        TFC_FAIL_AT("readlink /proc/self/exe failed");
        return;
    }
    self[len] = 0;
    snprintf(cmd, sizeof cmd, "'%s' --sticky-child 2>&1", self);
    FILE *f = popen(cmd, "r");
    char out[8192] = "";
    size_t got = f ? fread(out, 1, sizeof out - 1, f) : 0;
    out[got] = 0;
    if (f) pclose(f);
    printf("%s", out);
    const char *alloc = strstr(out, "alloc: ");
    CHECK(alloc != NULL);
    if (!alloc) return;
    CHECK(strncmp(alloc, "alloc: TFC_ERR_DEVICE", 21) == 0);
    CHECK(strstr(alloc, "cudaErrorIllegalAddress") != NULL);
    CHECK(strstr(alloc, "context is dead") != NULL);
    CHECK(strstr(alloc, "out of memory") == NULL);
}

int main(int argc, char **argv) {
    /* The names need no device: the device check lists them to run each test in its own process. */
    if (tfc_test_listing(argc, argv)) return tfc_test_main_(argc, argv);
    A = tfc_cuda_module();
    if (!A) {
        const char *why = tfc_last_error();
        const char *tail = strstr(why, "no CUDA device");
        if (tail) {
            printf("%s\n", tail);
            return 77;
        }
        /* The module was built but does not load: that is a failure, not a skip. */
        printf("FAIL: %s\n", why);
        return 1;
    }
    if (argc > 1 && !strcmp(argv[1], "--sticky-child")) return sticky_child();
    printf("CUDA: %s\n", A->describe());
    return tfc_test_main_(argc, argv);
}
