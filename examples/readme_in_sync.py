#!/usr/bin/env python3
"""Fail when the README's C example and examples/hello.c differ.

usage: readme_in_sync.py README.md examples/hello.c
"""
import re
import sys

readme, example = (open(p, encoding="utf-8").read() for p in sys.argv[1:3])
blocks = re.findall(r"```c\n(.*?)```", readme, flags=re.S)
if example in blocks:
    print("README's C example matches examples/hello.c")
    sys.exit(0)
print("README.md has no ```c block identical to examples/hello.c; copy the file into the README", file=sys.stderr)
sys.exit(1)
