#!/usr/bin/python3
"""Each layer of libtfcore calls only itself and the layers below it.

    check_layers.py LIB_0 LIB_1 ... (the layers' static libraries, bottom up)

For every layer, the tfc_* symbols it leaves undefined must be defined by
the same layer or one below. The include path already stops an upward
#include; this catches an upward call through a public header (which every
layer may include): e.g. lib/tensor calling tfc_sum of lib/ops. Prints one
line per violation, then "N passed, N failed" (one check per layer).
"""
import os
import subprocess
import sys


def symbols(lib, defined):
    flag = "--defined-only" if defined else "--undefined-only"
    out = subprocess.run(["nm", "-P", flag, lib], capture_output=True, text=True, check=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2 and not line.endswith(":"):
            names.add(parts[0])
    return {n for n in names if n.startswith("tfc_")}


def layer_name(lib):
    base = os.path.basename(lib)  # libtfc_<layer>.a
    return base[len("libtfc_"):-len(".a")]


def main(libs):
    layers = [layer_name(l) for l in libs]
    defined = [symbols(l, True) for l in libs]
    owner = {}
    for i, names in enumerate(defined):
        for n in names:
            owner.setdefault(n, i)
    passed = failed = 0
    for i, lib in enumerate(libs):
        bad = []
        for n in sorted(symbols(lib, False) - defined[i]):
            j = owner.get(n)
            if j is None:
                bad.append("lib/%s calls %s, which no layer defines" % (layers[i], n))
            elif j > i:
                bad.append("lib/%s calls %s of lib/%s, a layer above it" % (layers[i], n, layers[j]))
        for b in bad:
            print("FAIL: " + b)
        if bad:
            failed += 1
        else:
            passed += 1
            print("ok   lib/%s calls only %s" % (layers[i], ", ".join("lib/" + l for l in layers[: i + 1])))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
