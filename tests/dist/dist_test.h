/*
 * What every multi-process C test shares: the harness (tests/c/tfc_test.h)
 * and one communicator C over the job (mpirun's ranks, or this process
 * alone), made before the tests run and released at exit — after the last
 * test, before the process ends, so MPI is finalized as mpirun requires.
 * R and N are this rank and the number of ranks.
 */
#ifndef TFC_DIST_TEST_H
#define TFC_DIST_TEST_H

#include "../c/tfc_test.h"

static tfc_comm *C;
static int R, N;

static void dist_test_finish(void) { tfc_comm_release(C); }

__attribute__((constructor(200))) static void dist_test_start(void) {
    if (tfc_comm_init(&C) != TFC_OK) {
        fprintf(stderr, "tfc_comm_init: %s\n", tfc_last_error());
        exit(2);
    }
    R = tfc_comm_rank(C);
    N = tfc_comm_size(C);
    atexit(dist_test_finish);
}

#endif
