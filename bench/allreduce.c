/*
 * All-reduce bus bandwidth: tfc_all_reduce (f32 CPU tensor, TFC_COMM_SUM)
 * against a bare MPI_Allreduce(MPI_IN_PLACE, ...) on the very same buffer,
 * 4 KB to 256 MB, in one run under `mpirun -np N` (bench/allreduce.sh).
 *
 *   bench/allreduce.sh [NP] [MAX_MB] [MIN_MB]  or  mpirun -np N build/bench/allreduce [MAX_MB] [MIN_MB]
 *
 * The two sides are interleaved: for every size, ROUNDS rounds each time
 * both sides (which one goes first alternates), and the table reports the
 * median of the rounds, so a load spike from another process hits both
 * sides instead of one. The ratio column is the median over rounds of the
 * ratio within a round (the two samples of a round ran back to back, so a
 * slow drift in the machine's load cancels), not the ratio of the medians.
 * A sample is the slowest rank's mean time over
 * `iters` back-to-back calls (enough calls that a sample moves >= 64 MB, at
 * least 3 and at most 2000), started after a barrier.
 *
 * busbw = 2(N-1)/N * bytes / time, the bytes each rank's link carries in a
 * ring all-reduce (NCCL's convention), so the numbers are comparable across N.
 *
 * MPI is started by tfc_comm_init (MPI_THREAD_MULTIPLE) and finalized by
 * the last tfc_comm_release, so the bare side uses MPI_COMM_WORLD in
 * between; tfc's own calls run on its duplicate of MPI_COMM_WORLD.
 *
 * The buffer holds zeros: a sum of zeros stays zero however many calls run,
 * so no value ever overflows to inf or turns denormal and changes the speed.
 */
#include <mpi.h>
#include <stdint.h>
#include <string.h>

#include "bench_util.h"
#include "tfcore/dist.h"

#define ROUNDS 9

/* Seconds per call of side (0: tfc, 1: MPI), the slowest rank's, over iters calls. */
static double sample(int side, tfc_comm *c, tfc_tensor *t, float *p, int count, int iters) {
    if (MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS) {
        fprintf(stderr, "allreduce: MPI_Barrier failed\n");
        exit(1);
    }
    double t0 = now();
    for (int i = 0; i < iters; i++) {
        if (side == 0) {
            OK(tfc_all_reduce(c, t, TFC_COMM_SUM));
        } else if (MPI_Allreduce(MPI_IN_PLACE, p, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS) {
            fprintf(stderr, "allreduce: MPI_Allreduce failed\n");
            exit(1);
        }
    }
    double dt = (now() - t0) / iters;
    MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return dt;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char **argv) {
    int64_t max_bytes = (int64_t)256 << 20;
    int64_t min_bytes = 4096;
    if (argc > 1) max_bytes = (int64_t)(atof(argv[1]) * (1 << 20));
    if (argc > 2) min_bytes = (int64_t)(atof(argv[2]) * (1 << 20));
    if (min_bytes < 4) min_bytes = 4;
    tfc_comm *c;
    OK(tfc_comm_init(&c));
    const int rank = tfc_comm_rank(c), n = tfc_comm_size(c);
    int mpi_up = 0;
    MPI_Initialized(&mpi_up);
    if (!mpi_up) {
        fprintf(stderr, "allreduce: run it under mpirun (bench/allreduce.sh); tfc_comm is %s\n", tfc_comm_backend(c));
        tfc_comm_release(c);
        return 1;
    }
    const double factor = n > 1 ? 2.0 * (n - 1) / n : 1.0;
    if (rank == 0) {
        printf("# all-reduce, f32 SUM, %d ranks, %s; busbw = 2(N-1)/N * bytes / time; median of %d interleaved "
               "rounds; ratio: median of the per-round ratios\n",
               n, tfc_comm_backend(c), ROUNDS);
        printf("%10s %8s %10s %10s %7s %10s %10s\n", "bytes", "iters", "tfc GB/s", "MPI GB/s", "ratio", "tfc us",
               "MPI us");
    }
    for (int64_t bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
        const int64_t dims[1] = {bytes / 4};
        tfc_tensor *t;
        OK(tfc_tensor_zeros(dims, 1, TFC_DTYPE_F32, &t));
        float *p = tfc_tensor_data(t);
        int iters = (int)((64 << 20) / bytes);
        if (iters < 3) iters = 3; /* one call of a large size is too noisy a sample on a shared machine */
        if (iters > 2000) iters = 2000;
        double s[2][ROUNDS];
        /* warm-up: page faults, MPI's connection set-up and buffer registration */
        sample(0, c, t, p, (int)dims[0], 3);
        sample(1, c, t, p, (int)dims[0], 3);
        for (int r = 0; r < ROUNDS; r++) {
            int first = r % 2;
            s[first][r] = sample(first, c, t, p, (int)dims[0], iters);
            s[!first][r] = sample(!first, c, t, p, (int)dims[0], iters);
        }
        double ratio[ROUNDS];
        for (int r = 0; r < ROUNDS; r++) ratio[r] = s[1][r] / s[0][r];
        double q = median(ratio, ROUNDS);
        double tt = median(s[0], ROUNDS), tm = median(s[1], ROUNDS);
        if (rank == 0) {
            double bt = factor * (double)bytes / tt * 1e-9, bm = factor * (double)bytes / tm * 1e-9;
            printf("%10lld %8d %10.3f %10.3f %7.3f %10.1f %10.1f\n", (long long)bytes, iters, bt, bm, q, tt * 1e6,
                   tm * 1e6);
            fflush(stdout);
        }
        tfc_tensor_release(t);
    }
    tfc_comm_release(c);
    return 0;
}
