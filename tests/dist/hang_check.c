/*
 * A job whose rank 1 fails, for tests/dist/test_failure.sh: the job must
 * end, non-zero, within a bound, never hang. Run under `mpirun -np 2`.
 *
 *   hang_check ok       both ranks run LOOPS all-reduces and exit 0 (the control)
 *   hang_check hang     rank 1 sleeps instead of joining rank 0's all-reduce:
 *                       rank 0's watchdog (TFCORE_DIST_TIMEOUT) must end the job
 *   hang_check kill     rank 1 sends itself SIGKILL in the middle of the loop:
 *                       mpirun must notice and end the job, naming rank 1
 *   hang_check abort    rank 1 gets bad input outside any collective (a tensor
 *                       of dims {-1}: an error the other ranks cannot learn of)
 *                       and calls tfc_comm_abort(c, 3): the job ends at once,
 *                       though rank 0 waits in a collective
 *
 * Before failing, rank 1 prints "hang_check: EVENT <what> at <unix time>"
 * (stdout, flushed); the script measures from there to mpirun's exit.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tfcore/tfcore.h"

#define LOOPS 200
#define FAIL_AT 100

static double wall(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void event(int rank, const char *what) {
    printf("hang_check: EVENT %s on rank %d at %.3f\n", what, rank, wall());
    fflush(stdout);
}

static void check(tfc_status s, const char *what) {
    if (s != TFC_OK) {
        fprintf(stderr, "hang_check: %s: %s\n", what, tfc_last_error());
        exit(2);
    }
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "ok") && strcmp(mode, "hang") && strcmp(mode, "kill") && strcmp(mode, "abort")) {
        fprintf(stderr, "usage: hang_check ok|hang|kill|abort (under mpirun -np 2)\n");
        return 2;
    }
    tfc_comm *c;
    check(tfc_comm_init(&c), "tfc_comm_init");
    const int rank = tfc_comm_rank(c);
    if (tfc_comm_size(c) < 2) {
        fprintf(stderr, "hang_check: needs 2 ranks or more (it has %d)\n", tfc_comm_size(c));
        return 2;
    }
    const int64_t dims[1] = {1 << 18}; /* 1 MiB of f32: a call takes long enough to be caught inside */
    tfc_tensor *t;
    check(tfc_tensor_ones(dims, 1, TFC_DTYPE_F32, &t), "tfc_tensor_ones");
    for (int i = 0; i < LOOPS; i++) {
        if (rank == 1 && i == FAIL_AT) {
            if (!strcmp(mode, "hang")) {
                event(rank, "sleeping instead of the all-reduce");
                sleep(120);
            } else if (!strcmp(mode, "kill")) {
                event(rank, "SIGKILL");
                raise(SIGKILL);
            } else if (!strcmp(mode, "abort")) {
                const int64_t bad_dims[1] = {-1};
                tfc_tensor *bad = NULL;
                tfc_status s = tfc_tensor_zeros(bad_dims, 1, TFC_DTYPE_F32, &bad);
                if (s == TFC_OK) {
                    fprintf(stderr, "hang_check: a tensor of dims {-1} was accepted\n");
                    return 2;
                }
                fprintf(stderr, "hang_check: rank %d: %s; aborting the job\n", rank, tfc_last_error());
                event(rank, "tfc_comm_abort");
                tfc_comm_abort(c, 3);
            }
        }
        check(tfc_all_reduce(c, t, TFC_COMM_AVG), "tfc_all_reduce");
    }
    float v = ((float *)tfc_tensor_data(t))[0];
    tfc_tensor_release(t);
    tfc_comm_release(c);
    if (v != 1.0f) {
        fprintf(stderr, "hang_check: rank %d: the average of ones is %g\n", rank, (double)v);
        return 1;
    }
    printf("hang_check: rank %d finished %d all-reduces\n", rank, LOOPS);
    return 0;
}
