/*
 * tfcore.h — the whole public API of libtfcore. Include this one header
 * and link with `pkg-config --cflags --libs tfcore`.
 */
#ifndef TFCORE_TFCORE_H
#define TFCORE_TFCORE_H

#include "tfcore/core.h"
#include "tfcore/tensor.h"
#include "tfcore/graph.h"
#include "tfcore/ops.h"
#include "tfcore/kernels.h"
#include "tfcore/dlpack.h"
#include "tfcore/gpt.h"
#include "tfcore/io.h"
#include "tfcore/optim.h"
#include "tfcore/tokenizer.h"
#include "tfcore/quant.h"
#include "tfcore/lora.h"
#include "tfcore/dist.h"

#endif
