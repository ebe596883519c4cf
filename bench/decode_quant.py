#!/usr/bin/python3
"""Decode speed of the quantized GPT (issue #15, stage 2): greedy generation of
100 tokens with tfc_gpt_generate (KV cache, one token a step) from a model of
the given preset with random weights, f32 against tfc_gpt_quantize's int8 and
int4 (groups 32 and 64). Reports tokens per CPU-second (process time, best of
3), which a shared machine distorts less than wall time; run with
OMP_NUM_THREADS=1 for one thread.

    OMP_NUM_THREADS=1 TFCORE_LIBRARY=build-cpu/lib/libtfcore.so PYTHONPATH=bindings/python \
        /usr/bin/python3 bench/decode_quant.py char-small
"""
import sys
import time

import tfcore


def main():
    preset = sys.argv[1] if len(sys.argv) > 1 else "char-small"
    for fmt, g in [(None, 0), ("int8", 0), ("int4", 32), ("int4", 64)]:
        m = tfcore.GPT(preset, vocab_size=65, seed=1) if preset.startswith("char") else tfcore.GPT(preset, seed=1)
        if fmt:
            m.quantize(fmt, group_size=g)
        m.generate([1, 2, 3], 8, temperature=0)  # warm up
        best = None
        for _ in range(3):
            c0 = time.process_time()
            m.generate([1, 2, 3], 100, temperature=0)
            c = time.process_time() - c0
            best = c if best is None or c < best else best
        name = (fmt + (" g%d" % g if fmt == "int4" else "")) if fmt else "f32"
        print("%s %-8s %7.1f tokens per CPU-second (100 greedy tokens, best of 3)" % (preset, name, 100 / best),
              flush=True)


main()
