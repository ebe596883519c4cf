#!/bin/sh
# libtfcore-cuda.so must export exactly one symbol, tfc_backend_module_get:
# everything else (our kernels, the static CUDA runtime) stays hidden.
set -eu
so="$1"
syms=$(nm -D --defined-only "$so" | awk '{print $3}' | sort)
if [ "$syms" != "tfc_backend_module_get" ]; then
    echo "FAIL: $so exports:"
    echo "$syms"
    exit 1
fi
echo "ok: $so exports only tfc_backend_module_get"
