"""Test setup: import tfcore from bindings/python of this checkout (unless
TFCORE_TEST_INSTALLED=1 asks for the installed one) and load the library
from $TFCORE_LIBRARY, defaulting to build/lib of the checkout."""
import os
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
if os.environ.get("TFCORE_TEST_INSTALLED") != "1":
    sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
if not os.environ.get("TFCORE_LIBRARY"):
    candidate = os.path.join(ROOT, "build", "lib", "libtfcore.so.1")
    if os.path.exists(candidate):
        os.environ["TFCORE_LIBRARY"] = candidate
