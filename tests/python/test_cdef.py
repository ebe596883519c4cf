"""The committed cdef must be what gen_cdef.py makes of the current headers."""
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT

GEN = os.path.join(ROOT, "bindings", "python", "gen_cdef.py")


@pytest.mark.skipif(shutil.which(os.environ.get("CC", "cc")) is None, reason="no C compiler to preprocess with")
def test_cdef_matches_headers():
    r = subprocess.run([sys.executable, GEN, "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_cdef_has_constants_and_every_declared_function():
    text = open(os.path.join(ROOT, "bindings", "python", "tfcore", "_cdef.h")).read()
    for name in ("#define TFC_MAX_DIMS 8", "#define TFC_GRAD_ACCUMULATE 1", "#define TFC_GELU_TANH 1"):
        assert name in text
    assert "__attribute__" not in text and "TFC_API" not in text and "TFC_NODISCARD" not in text
    import tfcore
    assert tfcore.lib.TFC_MAX_DIMS == 8
    assert tfcore.lib.TFC_ERR_SHAPE == -2


def test_check_mode_detects_drift(tmp_path):
    """--check fails on a stale file (the drift test above is not vacuous)."""
    src = os.path.join(ROOT, "bindings", "python")
    dst = tmp_path / "bindings" / "python"
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(os.path.join(ROOT, "include"), tmp_path / "include")
    stale = dst / "tfcore" / "_cdef.h"
    stale.write_text(stale.read_text().replace("int32_t tfc_version(void);\n", ""))
    r = subprocess.run([sys.executable, str(dst / "gen_cdef.py"), "--check"], capture_output=True, text=True)
    assert r.returncode == 1 and "out of date" in r.stderr
