#!/usr/bin/python3
"""debian/libtfcore1.symbols lists exactly the tfc_* symbols libtfcore.so
exports: dpkg-gensymbols would otherwise fail the package build (a new
symbol missing) or the library would silently lose one (a listed symbol
gone). Run by meson test `debian_symbols` against the built library.

    check_debian_symbols.py LIBTFCORE_SO SYMBOLS_FILE

Prints each symbol exported but not listed and each listed but not
exported, then "N passed, N failed" (one check per direction).
"""
import re
import subprocess
import sys


def main():
    lib, symbols = sys.argv[1], sys.argv[2]
    out = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True, check=True).stdout
    exported = {m.group(1) for m in re.finditer(r"^\S+ [TDRB] (tfc_\w+)@", out, re.M)}
    with open(symbols, encoding="utf-8") as f:
        listed = {m.group(1) for m in re.finditer(r"^ (tfc_\w+)@", f.read(), re.M)}
    results = []
    for what, names in (("exported by %s but not in %s" % (lib, symbols), exported - listed),
                        ("in %s but not exported" % symbols, listed - exported)):
        for n in sorted(names):
            print("%s: %s" % (what, n))
        results.append(not names)
    print("%d passed, %d failed" % (sum(results), len(results) - sum(results)))
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
