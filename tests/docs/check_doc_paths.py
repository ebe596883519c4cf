#!/usr/bin/python3
"""Every repository path named in README.md and docs/*.md exists.

    check_doc_paths.py [SOURCE_ROOT]   (default: two folders above this file)

A path is a word that starts with one of the repository's top-level folders
(lib/, include/, cuda/, tests/, tools/, bindings/, bench/, docs/, scripts/, debian/,
examples/, abi/, .ci/) or is one of its top-level files (README.md,
meson.build, ...), in backticks, a table or plain text, code blocks
included. It is looked up relative to SOURCE_ROOT; one ending in "/" must be
a folder. Not paths, so not checked: build outputs (build/..., and
libraries or objects such as the ninja target cuda/libtfcore-cuda.so),
paths outside the repository (../shared/...), URLs, words with wildcards or
placeholders (tests/c/test_*.c, lib/<layer>/, lib/ops/...). Accepted forms:
a line suffix (lib/ops/reduce.c:42, :42-60, #L42), a possessive ('s), and
"lib/core/error.c/.h" for the .c and the .h.

Prints one line per missing path (file:line: path), one line per document,
then "N passed, N failed" (one check per document). Exit status 1 when any
document names a missing path.
"""
import os
import re
import sys

TOP_DIRS = ("lib", "include", "cuda", "tests", "tools", "bindings", "bench", "docs", "scripts", "examples", "abi", "data", "debian",
            ".ci")
TOP_FILES = ("README.md", "meson.build", "meson_options.txt", ".gitignore")

# Words are split at white space, quotes, brackets, table bars and list punctuation.
SPLIT = re.compile(r"[\s`'\"()\[\]|,;=→—]+")
# Characters that make a word a pattern or a placeholder rather than a path.
PLACEHOLDER = re.compile(r"[<>*?{}$…]|\.\.\.")
# Build products: a ninja target such as cuda/libtfcore-cuda.so is relative to a build folder.
BUILT = re.compile(r"\.(?:so(?:\.\d+)*|a|o)$")
LINE_SUFFIX = re.compile(r"(?::\d+(?:[-–]\d+)?|#L\d+(?:-L?\d+)?)$")
TRAILING = ".,;:!?"


def candidates(word):
    """The repository paths a word names (possibly none)."""
    if "://" in word or PLACEHOLDER.search(word):
        return []
    for s in ("'s", "’s"):
        if word.endswith(s):
            word = word[: -len(s)]
    word = word.rstrip(TRAILING)
    word = LINE_SUFFIX.sub("", word).rstrip(TRAILING)
    if word.startswith("./"):
        word = word[2:]
    if not word:
        return []
    if word in TOP_FILES:
        return [word]
    top = word.split("/", 1)[0]
    if top not in TOP_DIRS or "/" not in word or BUILT.search(word):
        return []
    pair = re.match(r"^(.*)\.(\w+)/\.(\w+)$", word)  # error.c/.h
    if pair:
        return ["%s.%s" % (pair.group(1), pair.group(2)), "%s.%s" % (pair.group(1), pair.group(3))]
    return [word]


def exists(root, path):
    full = os.path.join(root, path)
    return os.path.isdir(full) if path.endswith("/") else os.path.exists(full)


def check_doc(root, rel):
    """(paths checked, [(line, path)] missing) for one document."""
    checked, missing = 0, []
    with open(os.path.join(root, rel), encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            # A path never spans lines: each line is split on its own.
            for word in SPLIT.split(line):
                # Markdown emphasis around a path: **lib/x.c** or _lib/x.c_.
                word = word.strip("*_")
                for path in candidates(word):
                    checked += 1
                    if not exists(root, path):
                        missing.append((lineno, path))
    return checked, missing


def documents(root):
    docs = ["README.md"] if os.path.exists(os.path.join(root, "README.md")) else []
    ddir = os.path.join(root, "docs")
    if os.path.isdir(ddir):
        docs += sorted("docs/" + n for n in os.listdir(ddir) if n.endswith(".md"))
    return docs


def main(argv):
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    root = os.path.abspath(root)
    docs = documents(root)
    passed = failed = 0
    if not docs:
        print("FAIL: no README.md or docs/*.md under %s" % root)
        failed += 1
    for rel in docs:
        checked, missing = check_doc(root, rel)
        for lineno, path in missing:
            print("FAIL: %s:%d: %s does not exist" % (rel, lineno, path))
        if missing:
            failed += 1
            print("FAIL %s: %d of %d paths missing" % (rel, len(missing), checked))
        else:
            passed += 1
            print("ok   %s: %d paths exist" % (rel, checked))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
