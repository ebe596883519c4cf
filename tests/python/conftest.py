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


def _live_bytes():
    import gc

    import tfcore
    gc.collect()
    tfcore.autograd.clear_graph()
    out = tfcore.ffi.new("uint64_t *")
    tfcore.lib.tfc_memory_stats(tfcore.ffi.NULL, out, tfcore.ffi.NULL, tfcore.ffi.NULL)
    return out[0]


import pytest  # noqa: E402


@pytest.fixture(autouse=True, scope="module")
def no_leaked_tensors():
    """Every tensor a test module made is gone once its objects are: the
    binding's references (ffi.gc handles, registries, graphs) do not leak."""
    before = _live_bytes()
    yield
    after = _live_bytes()
    assert after == before, "tensor memory in use grew by %d bytes over the module" % (after - before)
