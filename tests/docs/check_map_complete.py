#!/usr/bin/python3
"""docs/ARCHITECTURE.md names every source file of the library, the CUDA
module and the CLI: the map is complete, so a file cannot exist that no
reader of the map can find.

    check_map_complete.py [SOURCE_ROOT]   (default: two folders above this file)

A file counts as named when ARCHITECTURE.md has its path (lib/ops/linear.c),
its file name in backticks or a table (`linear.c`), or the .c/.h pair form
(`linear_bias.c/.h`); a header whose .c of the same stem in the same folder is
named counts as named with it (one concept, two files). Tracked files only (git ls-files), so build outputs
never count. Prints one line per file not named, then "N passed, N failed"
(one check per folder). Exit status 1 when any is missing.
"""
import os
import re
import subprocess
import sys

FOLDERS = ("lib", "cuda", "tools")
SOURCE = re.compile(r"\.(?:c|h|cu|cuh)$")


def named(doc, path):
    base = os.path.basename(path)
    stem, ext = os.path.splitext(base)
    if path in doc or re.search(r"(?<![\w/.-])" + re.escape(base) + r"(?![\w.])", doc):
        return True
    # the pair forms: x.c/.h, x.h/.c
    other = ".h" if ext == ".c" else ".c" if ext == ".h" else None
    return bool(other) and (stem + ext + "/" + other in doc or stem + other + "/" + ext in doc)


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    with open(os.path.join(root, "docs", "ARCHITECTURE.md"), encoding="utf-8") as f:
        doc = f.read()
    files = subprocess.run(["git", "-C", root, "ls-files", *FOLDERS], check=True, capture_output=True,
                           text=True).stdout.split()
    passed = failed = 0
    for folder in sorted({p.split("/")[0] + "/" + p.split("/")[1] if p.count("/") > 1 else p.split("/")[0]
                          for p in files if SOURCE.search(p)}):
        missing = [p for p in files if SOURCE.search(p) and os.path.dirname(p) == folder and not named(doc, p)
                   and not (p.endswith(".h") and p[:-2] + ".c" in files and named(doc, p[:-2] + ".c"))]
        for p in missing:
            print("docs/ARCHITECTURE.md does not name %s" % p)
        if missing:
            failed += 1
        else:
            passed += 1
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
