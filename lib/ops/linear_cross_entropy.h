/* Internals of tfc_linear_cross_entropy that tests reach. */
#ifndef TFC_OPS_LINEAR_CROSS_ENTROPY_H
#define TFC_OPS_LINEAR_CROSS_ENTROPY_H

#include <stdint.h>

/*
 * Force the rows per chunk (rows >= 1), or go back to the size chosen from
 * the vocabulary (rows == 0). Returns the previous setting. For tests, so
 * small shapes cross chunk boundaries; process-wide and not synchronised:
 * call it while no tfc_linear_cross_entropy runs.
 */
int64_t tfc_linear_cross_entropy_set_chunk_rows(int64_t rows);

#endif
