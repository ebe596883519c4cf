/* The optimizer's CUDA paths (lib/optim/cuda_step.c). */
#ifndef TFC_OPTIM_CUDA_STEP_H
#define TFC_OPTIM_CUDA_STEP_H

#include "optim/optim_impl.h"

/* Is any of ts[0..n) (NULLs skipped) a CUDA tensor? */
int tfc_optim_any_cuda(const tfc_tensor *const *ts, int64_t n);
/* tfc_optim_step when the parameters live on CUDA (fused AdamW entry). */
tfc_status tfc_optim_step_cuda(const char *fn, tfc_optim *opt);
/* Clipping when the gradients live on CUDA: grad_norm entry, one sync for the norm, in-place scale. */
tfc_status tfc_clip_cuda(const char *fn, tfc_tensor *const *params, int64_t n, double max_norm, double *total_norm);

#endif
