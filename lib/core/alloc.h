/*
 * CPU caching allocator: 64-byte aligned blocks kept in size-bucketed free
 * lists, so a training loop that frees and re-requests the same sizes every
 * step stops reaching malloc (and the kernel's page faults) after step one.
 */
#ifndef TFC_CORE_ALLOC_H
#define TFC_CORE_ALLOC_H

#include <stddef.h>
#include <stdint.h>

#define TFC_ALIGN 64

/* A block of at least nbytes, 64-byte aligned; NULL when out of memory. */
void *tfc_host_alloc(size_t nbytes);
/* Same as tfc_host_alloc but zero-filled. */
void *tfc_host_calloc(size_t nbytes);
/* Return a block; nbytes must be the size it was requested with. */
void tfc_host_free(void *p, size_t nbytes);

#endif
