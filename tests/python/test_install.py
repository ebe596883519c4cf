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


def copy_package(tmp_path):
    """The package alone, away from the checkout (so its build/lib is not a candidate)."""
    src = tmp_path / "src"
    subprocess.run(["cp", "-r", PKG, str(src)], check=True)
    return src


def system_has_libtfcore():
    r = subprocess.run(["/sbin/ldconfig", "-p"], capture_output=True, text=True)
    return "libtfcore.so.1 " in r.stdout


def test_no_library_anywhere_names_both_ways(tmp_path):
    import pytest
    if system_has_libtfcore():
        pytest.skip("libtfcore.so.1 is installed on this machine: the dynamic loader finds it")
    src = copy_package(tmp_path)
    empty = tmp_path / "no-pc"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("TFCORE_LIBRARY", "LD_LIBRARY_PATH")}
    env.update(PYTHONPATH=str(src), PKG_CONFIG_PATH=str(empty), PKG_CONFIG_LIBDIR=str(empty))
    r = subprocess.run([sys.executable, "-c", "import tfcore"], capture_output=True, text=True, env=env,
                       cwd=tmp_path)
    assert r.returncode != 0 and "ImportError" in r.stderr, r.stderr
    msg = r.stderr.strip().splitlines()[-1]
    assert "TFCORE_LIBRARY" in msg and "pkg-config" in msg, msg


def test_found_through_pkg_config(tmp_path):
    libdir = os.path.dirname(os.path.abspath(os.environ["TFCORE_LIBRARY"]))
    src = copy_package(tmp_path)
    pcdir = tmp_path / "pc"
    pcdir.mkdir()
    (pcdir / "tfcore.pc").write_text("libdir=%s\n\nName: tfcore\nDescription: test\nVersion: 1.0.0\n"
                                     "Libs: -L${libdir} -ltfcore\n" % libdir)
    env = {k: v for k, v in os.environ.items() if k not in ("TFCORE_LIBRARY", "LD_LIBRARY_PATH")}
    env.update(PYTHONPATH=str(src), PKG_CONFIG_PATH=str(pcdir), PKG_CONFIG_LIBDIR=str(pcdir))
    r = subprocess.run([sys.executable, "-c", "import tfcore; print(tfcore._lib.library_path)"],
                       capture_output=True, text=True, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert os.path.normpath(r.stdout.strip()) == os.path.join(libdir, "libtfcore.so.1")


def test_pip_install_into_venv_and_pip_wheel(tmp_path):
    """`pip install ./bindings/python` offline with its dependencies (cffi,
    numpy) from Debian, and a wheel from `pip wheel` that installs too."""
    src = copy_package(tmp_path)
    venv = tmp_path / "venv"
    # No pip inside the venv (ensurepip is the slow part): Debian's pip installs into it (--python).
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--python", str(venv / "bin" / "python")]
    r = subprocess.run(pip + ["install", "--no-build-isolation", "--no-index", str(src)], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run([str(venv / "bin" / "python"), "-c",
                        "import tfcore; print(tfcore.__file__); print(float(tfcore.tensor([1.0, 2.0]).sum()))"],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[0].startswith(str(venv)) and r.stdout.split()[1] == "3.0", r.stdout

    wheels = tmp_path / "wheels"
    r = subprocess.run(pip + ["wheel", "--no-build-isolation", "--no-index", "--no-deps", "-w", str(wheels), str(src)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    whl = sorted(wheels.glob("tfcore-1.0.0-py3-none-any.whl"))
    assert whl, list(wheels.iterdir())
    target = tmp_path / "from-wheel"
    r = subprocess.run(pip + ["install", "--no-index", "--no-deps", "--target", str(target), str(whl[0])],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (target / "tfcore" / "_cdef.h").is_file()  # package data travels in the wheel
