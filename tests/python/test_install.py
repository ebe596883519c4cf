"""Finding the library, and installing the package offline with pip."""
import os
import subprocess
import sys

from conftest import ROOT

PKG = os.path.join(ROOT, "bindings", "python")


def run_py(code, env_extra, cwd):
    env = dict(os.environ, **env_extra)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=cwd)


def test_missing_library_is_a_clear_import_error(tmp_path):
    r = run_py("import tfcore", {"TFCORE_LIBRARY": str(tmp_path / "nope.so"), "PYTHONPATH": PKG}, tmp_path)
    assert r.returncode != 0 and "ImportError" in r.stderr and "TFCORE_LIBRARY" in r.stderr


def test_pip_install_offline_and_import(tmp_path):
    target = tmp_path / "site"
    src = tmp_path / "src"
    subprocess.run(["cp", "-r", PKG, str(src)], check=True)  # keep build/ litter out of the checkout
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-deps",
                        "--no-index", "--target", str(target), str(src)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    r = run_py("import tfcore; print(tfcore.__file__); print(float(tfcore.tensor([1.0, 2.0]).sum()))",
               {"PYTHONPATH": str(target)}, tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(target / "tfcore" / "__init__.py"), "3.0"]
