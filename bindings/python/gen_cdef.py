#!/usr/bin/python3
"""Generate bindings/python/tfcore/_cdef.h, the macro-free declarations cffi reads.

The public headers are the only statement of the ABI; this script derives the
cffi cdef from them so there is no hand-kept second copy:

  1. run the C preprocessor on include/tfcore/tfcore.h with the attribute
     macros (TFC_API, TFC_NODISCARD, __attribute__) defined away;
  2. keep only the lines that come from include/tfcore/ (the preprocessor's
     line markers say where each line came from), which drops everything
     <stddef.h>/<stdint.h> pulled in (cffi knows int64_t, size_t, ...);
  3. put back the integer #define constants (TFC_MAX_DIMS, TFC_GRAD_ACCUMULATE,
     TFC_GELU_*, ...) that the preprocessor consumed, as `#define NAME VALUE`
     lines with a plain decimal VALUE, which is the form cffi understands.

Usage:  gen_cdef.py            rewrite tfcore/_cdef.h
        gen_cdef.py --check    exit 1 when _cdef.h differs from the headers
        gen_cdef.py --stdout   print the generated text
Environment: CC (default cc).
"""
import ast
import operator
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
INCLUDE = os.path.join(ROOT, "include")
HEADER_DIR = os.path.join(INCLUDE, "tfcore")
UMBRELLA = os.path.join(HEADER_DIR, "tfcore.h")
OUTPUT = os.path.join(HERE, "tfcore", "_cdef.h")

# Macros that are part of the header machinery, not the API.
SKIP_DEFINES = {"TFC_API", "TFC_NODISCARD"}


def preprocess():
    cc = os.environ.get("CC", "cc")
    cmd = [cc, "-E", "-w", "-std=c11", "-I", INCLUDE,
           "-DTFC_API=", "-DTFC_NODISCARD=", "-D__attribute__(x)=", UMBRELLA]
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def tfcore_lines(cpp_output):
    """Lines of the preprocessed text that come from include/tfcore/*.h."""
    keep, out = False, []
    marker = re.compile(r'^# \d+ "([^"]+)"')
    for line in cpp_output.splitlines():
        m = marker.match(line)
        if m:
            path = os.path.normpath(os.path.join(ROOT, m.group(1)))
            keep = os.path.dirname(path) == HEADER_DIR
            continue
        if keep and line.strip():
            out.append(line.rstrip())
    return out


def join_declarations(lines):
    """One declaration per line; struct and enum bodies one member per line.
    (cpp keeps the headers' own line breaks inside prototypes.)"""
    text = re.sub(r"\s+", " ", " ".join(lines)).strip()
    text = re.sub(r" ([,)])", r"\1", text)  # where a comment stood before a comma (/* nullable */)
    out, cur, depth = [], "", 0
    for ch in text:
        if ch == "}":
            if cur.strip():
                out.append(cur.strip())
            cur, depth = "}", depth - 1
            continue
        cur += ch
        if ch == "{":
            depth += 1
            out.append(cur.strip())
            cur = ""
        elif ch == ";" or (ch == "," and depth > 0 and "(" not in cur):
            out.append(cur.strip())
            cur = ""
    if cur.strip():
        out.append(cur.strip())
    return out


_BINOPS = {ast.LShift: operator.lshift, ast.RShift: operator.rshift, ast.BitOr: operator.or_,
           ast.BitAnd: operator.and_, ast.Add: operator.add, ast.Sub: operator.sub,
           ast.Mult: operator.mul}


def _eval_int(node):
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval_int(node.operand)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        return _BINOPS[type(node.op)](_eval_int(node.left), _eval_int(node.right))
    raise ValueError("not an integer expression")


def integer_value(text):
    """The value of a C integer constant expression like `1u`, `(1u << 2)`,
    `0x7f`, or None when the macro is not one."""
    text = text.split("/*")[0].split("//")[0].strip()
    if not text:
        return None
    py = re.sub(r"\b(0[xX][0-9a-fA-F]+|\d+)[uUlL]+\b", r"\1", text)
    try:
        return _eval_int(ast.parse(py, mode="eval").body)
    except (SyntaxError, ValueError):
        return None


def integer_defines():
    """(name, value) of every object-like #define with an integer value in
    the public headers, in header order (tfcore.h's include order)."""
    order = []
    for line in open(UMBRELLA, encoding="utf-8"):
        m = re.match(r'\s*#\s*include\s+"tfcore/([^"]+)"', line)
        if m:
            order.append(m.group(1))
    rest = sorted(f for f in os.listdir(HEADER_DIR) if f.endswith(".h") and f not in order)
    defines = []
    for name in order + rest:
        for line in open(os.path.join(HEADER_DIR, name), encoding="utf-8"):
            m = re.match(r"\s*#\s*define\s+([A-Za-z_]\w*)\s+(.+)$", line)
            if not m or m.group(1) in SKIP_DEFINES:
                continue
            value = integer_value(m.group(2))
            if value is not None and all(m.group(1) != d for d, _ in defines):
                defines.append((m.group(1), value))
    return defines


def generate():
    decls = join_declarations(tfcore_lines(preprocess()))
    header = [
        "/* Generated by bindings/python/gen_cdef.py from include/tfcore/*.h. Do not edit:",
        " * change the headers and rerun /usr/bin/python3 bindings/python/gen_cdef.py. */",
    ]
    defines = ["#define %s %d" % (n, v) for n, v in integer_defines()]
    return "\n".join(header + defines + decls) + "\n"


def main(argv):
    text = generate()
    if "--stdout" in argv:
        sys.stdout.write(text)
        return 0
    if "--check" in argv:
        try:
            with open(OUTPUT, encoding="utf-8") as f:
                current = f.read()
        except FileNotFoundError:
            current = None
        if current != text:
            sys.stderr.write("%s is out of date with include/tfcore/: rerun "
                             "/usr/bin/python3 bindings/python/gen_cdef.py\n" % OUTPUT)
            return 1
        return 0
    with open(OUTPUT, "w", encoding="utf-8") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
