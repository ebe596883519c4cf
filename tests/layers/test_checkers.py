#!/usr/bin/python3
"""The structure checks can fail: each is run on a small tree made to break it.

  - check_layers.py on two archives where the lower layer calls a function
    only the upper one defines: FAIL naming both, exit 1; the same archives
    in the right order pass.
  - check_doc_paths.py on a folder whose docs name a missing file: FAIL
    naming document, line and path, exit 1; an existing path passes.
  - check_function_length.py on a git tree with a 101-line function (its
    signature wrapped over two lines): FAIL naming file, line and length;
    the same function at 100 lines passes.

Prints "N passed, N failed".
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
results = []


def check(name, ok, detail=""):
    results.append(ok)
    print("%s %s%s" % ("ok  " if ok else "FAIL", name, (": " + detail) if detail and not ok else ""))


def archive(tmp, layer, source):
    c, o, a = (os.path.join(tmp, layer + ext) for ext in (".c", ".o", ""))
    with open(c, "w") as f:
        f.write(source)
    subprocess.run(["cc", "-c", "-o", o, c], check=True)
    lib = os.path.join(tmp, "libtfc_%s.a" % layer)
    subprocess.run(["ar", "rcs", lib, o], check=True)
    return lib


def layers_case(tmp):
    low = archive(tmp, "tensor", "int tfc_sum(int);\nint tfc_probe(int x) { return tfc_sum(x); }\n")
    high = archive(tmp, "ops", "int tfc_sum(int x) { return x + 1; }\n")
    tool = os.path.join(HERE, "check_layers.py")
    bad = subprocess.run([sys.executable, tool, low, high], capture_output=True, text=True)
    check("check_layers: an upward call fails", bad.returncode == 1 and
          "lib/tensor calls tfc_sum of lib/ops, a layer above it" in bad.stdout, bad.stdout)
    good = subprocess.run([sys.executable, tool, high, low], capture_output=True, text=True)
    check("check_layers: the same call downward passes", good.returncode == 0, good.stdout)


def docs_case(tmp):
    os.makedirs(os.path.join(tmp, "docs"))
    os.makedirs(os.path.join(tmp, "lib", "ops"))
    open(os.path.join(tmp, "lib", "ops", "real.c"), "w").close()
    with open(os.path.join(tmp, "README.md"), "w") as f:
        f.write("See `lib/ops/real.c`.\n")
    with open(os.path.join(tmp, "docs", "X.md"), "w") as f:
        f.write("# X\n\nThe kernel is in `lib/ops/gone_kernels.c:12`.\n")
    tool = os.path.join(ROOT, "tests", "docs", "check_doc_paths.py")
    r = subprocess.run([sys.executable, tool, tmp], capture_output=True, text=True)
    check("check_doc_paths: a missing path fails", r.returncode == 1 and "lib/ops/gone_kernels.c" in r.stdout and
          "X.md:3" in r.stdout, r.stdout)
    os.remove(os.path.join(tmp, "docs", "X.md"))
    r = subprocess.run([sys.executable, tool, tmp], capture_output=True, text=True)
    check("check_doc_paths: existing paths pass", r.returncode == 0, r.stdout)


def function_length_case(tmp):
    os.makedirs(os.path.join(tmp, "lib", "ops"))
    path = os.path.join(tmp, "lib", "ops", "long.c")
    tool = os.path.join(ROOT, "tests", "docs", "check_function_length.py")
    subprocess.run(["git", "init", "-q", tmp], check=True)

    def run(body_lines):
        with open(path, "w") as f:
            f.write("int tfc_short(int x);\n\nstatic int tfc_long(int a,\n                    int b) {\n")
            f.write("    a += b;\n" * body_lines)
            f.write("}\n")
        subprocess.run(["git", "-C", tmp, "add", "lib"], check=True)
        return subprocess.run([sys.executable, tool, tmp], capture_output=True, text=True)

    r = run(98)  # 2 signature lines + 98 + the closing brace = 101
    check("check_function_length: a 101-line function fails", r.returncode == 1 and
          "lib/ops/long.c:3: 101 lines" in r.stdout, r.stdout)
    r = run(97)
    check("check_function_length: 100 lines pass", r.returncode == 0, r.stdout)


with tempfile.TemporaryDirectory() as t1, tempfile.TemporaryDirectory() as t2, tempfile.TemporaryDirectory() as t3:
    layers_case(t1)
    docs_case(t2)
    function_length_case(t3)
print("%d passed, %d failed" % (sum(results), len(results) - sum(results)))
sys.exit(0 if all(results) else 1)
