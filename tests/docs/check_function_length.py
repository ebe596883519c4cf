#!/usr/bin/python3
"""No function in lib/ is longer than 100 lines (issue 34: a function that
long multiplexes modes the design wants as data or strategies).

    check_function_length.py [SOURCE_ROOT] [LIMIT]   (defaults: two folders above this file, 100)

A function is a definition clang-format lays out the project's way
(scripts/format.sh): its signature starts in column 0, its body opens with
"{" at the end of the signature's last line and closes with "}" alone in
column 0; its length counts from the signature's first line to that "}".
Declarations (a signature ending in ";"), initialisers and type definitions
are not functions. Tracked .c files only (git ls-files). Prints every
function over the limit with its length and the five longest, then
"N passed, N failed" (one check per file). Exit status 1 when any is over.
"""
import os
import re
import subprocess
import sys

NOT_A_FUNCTION = re.compile(r"^(?:typedef|struct\s+\w+\s*\{|enum|union|static\s+const|const|extern\s+\"C\")\b")


def functions(lines):
    """(first line, length, signature) of each top-level function definition."""
    i, n = 0, len(lines)
    while i < n:
        line = lines[i]
        if not line or line[0].isspace() or line[0] in "#/*}{" or "(" not in line or NOT_A_FUNCTION.match(line):
            i += 1
            continue
        if "=" in line.split("(")[0]:
            i += 1
            continue
        # the signature may wrap: read to the line ending in "{" (a definition) or ";" (a declaration)
        j = i
        while j < n and not lines[j].rstrip().endswith(("{", ";")):
            j += 1
        if j == n or lines[j].rstrip().endswith(";"):
            i = j + 1
            continue
        end = j + 1
        while end < n and lines[end] != "}":
            end += 1
        yield i + 1, end - i + 1, line.strip()
        i = end + 1


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    limit = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    files = subprocess.run(["git", "ls-files", "lib"], cwd=root, capture_output=True, text=True, check=True).stdout.split()
    passed = failed = 0
    every = []
    for path in sorted(f for f in files if f.endswith(".c")):
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as fh:
            lines = fh.read().split("\n")
        over = []
        for first, length, sig in functions(lines):
            every.append((length, path, first, sig))
            if length > limit:
                over.append((length, first, sig))
        for length, first, sig in over:
            print(f"{path}:{first}: {length} lines (limit {limit}): {sig[:70]}")
        failed += bool(over)
        passed += not over
    every.sort(reverse=True)
    print("longest:")
    for length, path, first, sig in every[:5]:
        print(f"  {length:4d}  {path}:{first}  {sig[:60]}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
