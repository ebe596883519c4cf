/*
 * Collectives of tfc_comm against a plain reference, run under
 * `mpirun -np N` (tests/dist/run_mpi.sh; N = 1, 2, 3) and plainly (one
 * rank). Rank r's element i is value(r, i), small integers, so every sum
 * is exact in every dtype and the reference is the sum written out:
 *   all_reduce:     sum_r value(r, i)
 *   broadcast:      value(root, i)
 *   all_gather:     out[r*n + i] = value(r, i)
 *   reduce_scatter: out[i] = sum_q value(q, rank*n + i)
 * Sizes 0, 1, primes and one above the DDP bucket; contiguous tensors and
 * views (a transpose, a strided slice); f32, f64, bf16, i32, i64. Then
 * calls that disagree across ranks, which must fail on every rank with
 * the same status, never hang.
 */
#include "dist_test.h"

/* Small integers (|v| <= 200), exact in bf16 too, different on every rank. */
static double value(int r, int64_t i) { return (double)((i * 7 + r * 13) % 23) - 11.0 + (double)r; }

static tfc_tensor *filled(const int64_t *dims, int32_t nd, tfc_dtype dt, double (*f)(int64_t i)) {
    tfc_tensor *t = NULL;
    if (tfc_tensor_zeros(dims, nd, dt, &t) != TFC_OK) return NULL;
    int64_t n = tfc_tensor_numel(t);
    double *h = malloc(sizeof *h * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) h[i] = f(i);
    tfc_tensor *src = NULL;
    if (tfc_tensor_from_data(h, dims, nd, TFC_DTYPE_F64, &src) == TFC_OK) {
        if (tfc_tensor_copy_from(t, src) != TFC_OK) fprintf(stderr, "copy: %s\n", tfc_last_error());
    }
    tfc_tensor_release(src);
    free(h);
    return t;
}

static int g_rank_for_fill;
static double fill_mine(int64_t i) { return value(g_rank_for_fill, i); }

/* t's elements as doubles, row-major (any strides, any dtype). */
static double *host(const tfc_tensor *t) {
    int64_t n = tfc_tensor_numel(t);
    tfc_tensor *d = NULL;
    double *h = malloc(sizeof *h * (size_t)(n ? n : 1));
    if (tfc_cast(NULL, t, TFC_DTYPE_F64, &d) != TFC_OK ||
        tfc_tensor_copy_to_host(d, h, sizeof *h * (size_t)n) != TFC_OK)
        fprintf(stderr, "host: %s\n", tfc_last_error());
    tfc_tensor_release(d);
    return h;
}

static const int64_t SIZES[] = {0, 1, 2, 7, 13, 1031, 6553601 /* > a 25 MiB f32 bucket */};
static const tfc_dtype DTYPES[] = {TFC_DTYPE_F32, TFC_DTYPE_F64, TFC_DTYPE_BF16, TFC_DTYPE_I32, TFC_DTYPE_I64};

static int check_elems(const char *what, const double *got, int64_t n, double (*want)(int64_t)) {
    for (int64_t i = 0; i < n; i++)
        if (got[i] != want(i)) {
            TFC_FAIL_AT("%s: element %lld is %g, want %g (rank %d of %d)", what, (long long)i, got[i], want(i), R, N);
            return 0;
        }
    tfc_test_checks++;
    return 1;
}

static double want_sum(int64_t i) {
    double s = 0;
    for (int r = 0; r < N; r++) s += value(r, i);
    return s;
}
static int g_root;
static double want_root(int64_t i) { return value(g_root, i); }

TEST(all_reduce_sum_avg_sizes_dtypes) {
    g_rank_for_fill = R;
    for (size_t d = 0; d < sizeof DTYPES / sizeof DTYPES[0]; d++)
        for (size_t k = 0; k < sizeof SIZES / sizeof SIZES[0]; k++) {
            int64_t n = SIZES[k];
            if (n > 100000 && DTYPES[d] != TFC_DTYPE_F32) continue; /* the big size once is enough */
            tfc_tensor *t = filled(&n, 1, DTYPES[d], fill_mine);
            CHECK_OK(tfc_all_reduce(C, t, TFC_COMM_SUM));
            double *h = host(t);
            char what[64];
            snprintf(what, sizeof what, "all_reduce %s n=%lld", tfc_dtype_name(DTYPES[d]), (long long)n);
            check_elems(what, h, n, want_sum);
            free(h);
            if (DTYPES[d] == TFC_DTYPE_F64 || DTYPES[d] == TFC_DTYPE_F32) {
                CHECK_OK(tfc_all_reduce(C, t, TFC_COMM_AVG)); /* the sum, averaged: sum again / N */
                h = host(t);
                for (int64_t i = 0; i < n; i++)
                    if (h[i] !=
                        (DTYPES[d] == TFC_DTYPE_F32 ? (double)(float)(want_sum(i) * N / (double)N) : want_sum(i))) {
                        TFC_FAIL_AT("avg %s element %lld: %g vs %g", tfc_dtype_name(DTYPES[d]), (long long)i, h[i],
                                    want_sum(i));
                        break;
                    }
                free(h);
            }
            tfc_tensor_release(t);
        }
}

TEST(broadcast_from_each_root) {
    for (g_root = 0; g_root < N; g_root++) {
        int64_t n = 1031;
        g_rank_for_fill = R;
        tfc_tensor *t = filled(&n, 1, TFC_DTYPE_F64, fill_mine);
        CHECK_OK(tfc_broadcast(C, t, g_root));
        double *h = host(t);
        check_elems("broadcast", h, n, want_root);
        free(h);
        tfc_tensor_release(t);
    }
}

static int64_t g_n;
static double want_gather(int64_t j) { return value((int)(j / g_n), j % g_n); }
static double want_scatter(int64_t i) {
    double s = 0;
    for (int q = 0; q < N; q++) s += value(q, (int64_t)R * g_n + i);
    return s;
}

TEST(all_gather_and_reduce_scatter) {
    g_rank_for_fill = R;
    for (size_t k = 0; k + 1 < sizeof SIZES / sizeof SIZES[0]; k++)
        for (size_t d = 0; d < sizeof DTYPES / sizeof DTYPES[0]; d++) {
            g_n = SIZES[k];
            int64_t big = g_n * N;
            tfc_tensor *in = filled(&g_n, 1, DTYPES[d], fill_mine), *out = filled(&big, 1, DTYPES[d], fill_mine);
            CHECK_OK(tfc_all_gather(C, in, out));
            double *h = host(out);
            check_elems("all_gather", h, big, want_gather);
            free(h);
            tfc_tensor *rin = filled(&big, 1, DTYPES[d], fill_mine), *rout = filled(&g_n, 1, DTYPES[d], fill_mine);
            CHECK_OK(tfc_reduce_scatter(C, rin, rout, TFC_COMM_SUM));
            h = host(rout);
            check_elems("reduce_scatter", h, g_n, want_scatter);
            free(h);
            tfc_tensor_release(in);
            tfc_tensor_release(out);
            tfc_tensor_release(rin);
            tfc_tensor_release(rout);
        }
}

/* Views: a transpose (all_reduce writes through it) and every other row of a matrix (all_gather's out). */
TEST(non_contiguous_views) {
    g_rank_for_fill = R;
    int64_t dims[2] = {5, 7};
    tfc_tensor *m = filled(dims, 2, TFC_DTYPE_F32, fill_mine), *mt = NULL;
    CHECK_OK(tfc_transpose(NULL, m, 0, 1, &mt));
    CHECK(!tfc_tensor_is_contiguous(mt));
    CHECK_OK(tfc_all_reduce(C, mt, TFC_COMM_SUM));
    double *h = host(m); /* the transpose wrote through to m, whose row-major order is value's */
    check_elems("all_reduce through a transpose", h, 35, want_sum);
    free(h);
    /* all_gather into rows 0, 2, 4, ... of a [2N, 3] matrix */
    int64_t one[2] = {1, 3}, bigd[2] = {2 * N, 3};
    tfc_tensor *in = filled(one, 2, TFC_DTYPE_F64, fill_mine), *big = NULL, *rows = NULL;
    CHECK_OK(tfc_tensor_zeros(bigd, 2, TFC_DTYPE_F64, &big));
    CHECK_OK(tfc_slice(NULL, big, 0, 0, 2 * N, 2, &rows));
    CHECK_OK(tfc_all_gather(C, in, rows));
    h = host(big);
    for (int r = 0; r < N; r++)
        for (int j = 0; j < 3; j++) {
            CHECK(h[(2 * r) * 3 + j] == value(r, j));
            CHECK(h[(2 * r + 1) * 3 + j] == 0);
        }
    free(h);
    tfc_tensor_release(rows);
    tfc_tensor_release(big);
    tfc_tensor_release(in);
    tfc_tensor_release(mt);
    tfc_tensor_release(m);
}

/* A call that differs across ranks fails on EVERY rank (no hang), and the next collective still works. */
TEST(disagreement_is_an_error_on_every_rank) {
    g_rank_for_fill = R;
    int64_t n = N > 1 ? 10 + R : 10; /* one rank: nothing to disagree with */
    tfc_tensor *t = filled(&n, 1, TFC_DTYPE_F32, fill_mine);
    if (N > 1) {
        CHECK_ERR(tfc_all_reduce(C, t, TFC_COMM_SUM), TFC_ERR_SHAPE, "the ranks disagree on the element count");
        CHECK_ERR(tfc_all_reduce(C, t, TFC_COMM_SUM), TFC_ERR_SHAPE, "ranges from 10 to");
    }
    tfc_tensor_release(t);
    n = 4;
    t = filled(&n, 1, R == 0 ? TFC_DTYPE_F32 : TFC_DTYPE_F64, fill_mine);
    if (N > 1) CHECK_ERR(tfc_all_reduce(C, t, TFC_COMM_SUM), TFC_ERR_DTYPE, "the dtype");
    tfc_tensor_release(t);
    /* rank 0 broadcasts, the others all-reduce */
    t = filled(&n, 1, TFC_DTYPE_F32, fill_mine);
    if (N > 1)
        CHECK_ERR(R == 0 ? tfc_broadcast(C, t, 0) : tfc_all_reduce(C, t, TFC_COMM_SUM), TFC_ERR_INVALID_ARG,
                  "the collective called");
    /* one rank's own arguments are bad: it keeps its error, the others learn which rank refused */
    if (N > 1) {
        int64_t two = 2;
        tfc_tensor *small = filled(&two, 1, TFC_DTYPE_F32, fill_mine), *big = NULL;
        int64_t nbig = (int64_t)2 * N + (R == N - 1 ? 1 : 0);
        big = filled(&nbig, 1, TFC_DTYPE_F32, fill_mine);
        char want[64];
        snprintf(want, sizeof want, "rank %d refused its arguments", N - 1);
        if (R == N - 1)
            CHECK_ERR(tfc_all_gather(C, small, big), TFC_ERR_SHAPE, "times in along dim 0");
        else
            CHECK_ERR(tfc_all_gather(C, small, big), TFC_ERR_INVALID_ARG, want);
        if (R == 0)
            CHECK_ERR(tfc_broadcast(C, small, N), TFC_ERR_INVALID_ARG, "root is");
        else
            CHECK_ERR(tfc_broadcast(C, small, 0), TFC_ERR_INVALID_ARG, "rank 0 refused its arguments");
        tfc_tensor_release(small);
        tfc_tensor_release(big);
    }
    CHECK_OK(tfc_all_reduce(C, t, TFC_COMM_SUM));
    double *h = host(t);
    check_elems("all_reduce after the errors", h, 4, want_sum);
    free(h);
    tfc_tensor_release(t);
    CHECK_OK(tfc_barrier(C));
}

TEST(bad_arguments) {
    int64_t n = 4, two = 2 * N + 1;
    g_rank_for_fill = R;
    tfc_tensor *t = filled(&n, 1, TFC_DTYPE_F32, fill_mine), *i = filled(&n, 1, TFC_DTYPE_I32, fill_mine);
    tfc_tensor *odd = filled(&two, 1, TFC_DTYPE_F32, fill_mine), *u8 = filled(&n, 1, TFC_DTYPE_U8, fill_mine);
    CHECK_ERR(tfc_all_reduce(NULL, t, TFC_COMM_SUM), TFC_ERR_INVALID_ARG, "c is NULL");
    CHECK_ERR(tfc_all_reduce(C, NULL, TFC_COMM_SUM), TFC_ERR_INVALID_ARG, "t is NULL");
    CHECK_ERR(tfc_all_reduce(C, t, (tfc_comm_op)7), TFC_ERR_INVALID_ARG, "op is 7");
    CHECK_ERR(tfc_all_reduce(C, i, TFC_COMM_AVG), TFC_ERR_DTYPE, "TFC_COMM_AVG of a i32");
    CHECK_ERR(tfc_all_reduce(C, u8, TFC_COMM_SUM), TFC_ERR_DTYPE, "u8");
    CHECK_ERR(tfc_broadcast(C, t, N), TFC_ERR_INVALID_ARG, "root is");
    CHECK_ERR(tfc_broadcast(C, t, -1), TFC_ERR_INVALID_ARG, "root is -1");
    CHECK_ERR(tfc_all_gather(C, t, odd), TFC_ERR_SHAPE, "times in along dim 0");
    CHECK_ERR(tfc_reduce_scatter(C, odd, t, TFC_COMM_SUM), TFC_ERR_SHAPE, "times out along dim 0");
    CHECK_ERR(tfc_all_gather(C, t, i), TFC_ERR_DTYPE, "must match");
    CHECK_ERR(tfc_comm_set_timeout(C, 0), TFC_ERR_INVALID_ARG, "seconds is 0");
    CHECK_ERR(tfc_comm_set_timeout(C, NAN), TFC_ERR_INVALID_ARG, "finite");
    CHECK(tfc_comm_rank(NULL) == 0 && tfc_comm_size(NULL) == 0);
    /* under mpirun the MPI module carries the collectives, plainly nothing does */
    CHECK(getenv("OMPI_COMM_WORLD_SIZE") ? strstr(tfc_comm_backend(C), "MPI") != NULL
                                         : strcmp(tfc_comm_backend(C), "single") == 0);
    CHECK(strcmp(tfc_comm_backend(NULL), "") == 0);
    tfc_tensor_release(t);
    tfc_tensor_release(i);
    tfc_tensor_release(odd);
    tfc_tensor_release(u8);
}

TFC_TEST_MAIN
