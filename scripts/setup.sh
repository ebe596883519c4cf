#!/usr/bin/env bash
# Install the Debian 12 packages a command needs, and no more.
# Idempotent: asks dpkg what is installed and runs apt-get only when
# something is missing. Works as root (CI, no sudo) or through sudo.
#
#   bash scripts/setup.sh --for build   # the library and the CLI: the main job (scripts/train.sh)
#   bash scripts/setup.sh --for test    # build + what the test command runs (scripts/run-tests.sh)
#   bash scripts/setup.sh --for bench   # build + Python, numpy and PyTorch for bench/
#   bash scripts/setup.sh --for package # build + the Debian packaging tools, pip/luarocks/cargo
#                                       # packaging (scripts/package-test.sh, docs/PACKAGING.md)
#   bash scripts/setup.sh               # everything (test + bench)
#   bash scripts/setup.sh --check [--for WHAT]   # only report; exit 1 if anything is missing
set -euo pipefail

build=(gcc meson ninja-build pkg-config libopenblas-dev libpcre2-dev libjansson-dev binutils)
test=(
  # ABI baseline check (abidw / abidiff); the style check (scripts/format.sh)
  abigail-tools clang-format
  # ASan/UBSan runtimes (libasan8, libubsan1) come with gcc itself.
  # Python bindings and reference tests (Debian's /usr/bin/python3); Jinja2 renders
  # the models' chat templates as the reference of tests/python/test_chat_template.py
  python3 python3-cffi python3-numpy python3-pytest python3-torch python3-jinja2
  # Lua bindings, and their rockspec (meson test package-lua: luarocks make)
  lua5.4 liblua5.4-dev luarocks
  # clang 14 for the libFuzzer targets (scripts/fuzz.sh; libclang-rt-14-dev holds
  # libclang_rt.fuzzer) and the ThreadSanitizer build (scripts/tsan.sh: LLVM's
  # libomp and its Archer tool come with libomp-dev)
  clang libclang-rt-14-dev libomp-dev
  # multi-process training: Open MPI 4.1 (mpirun, and mpi.h + libmpi for the
  # MPI module libtfcore-mpi.so; tests/dist)
  openmpi-bin libopenmpi-dev
)
bench=(python3 python3-numpy python3-torch)
package=(
  # dpkg-buildpackage -b of debian/ (debhelper compat 13, meson), the Python
  # package's dependencies (dh-python), the check of the .debs (lintian)
  dpkg-dev debhelper dh-python lintian fakeroot chrpath
  # what debian/control's Build-Depends names beyond the build set
  python3 python3-cffi python3-numpy python3-setuptools python3-pip python3-wheel lua5.4 liblua5.4-dev
  # the Lua rockspec (luarocks make), man pages (man -l, groff's warnings)
  luarocks man-db groff-base
)

check_only=0 want=all
while (($#)); do
  case "$1" in
    --check) check_only=1 ;;
    --for)
      want="${2:-}"
      shift
      ;;
    *) echo "setup: unknown argument $1 (use --for build|test|bench|package, --check)" >&2; exit 2 ;;
  esac
  shift
done
case "$want" in
  build) packages=("${build[@]}") ;;
  test) packages=("${build[@]}" "${test[@]}") ;;
  bench) packages=("${build[@]}" "${bench[@]}") ;;
  package) packages=("${build[@]}" "${package[@]}") ;;
  all) packages=("${build[@]}" "${test[@]}" "${bench[@]}" "${package[@]}") ;;
  *) echo "setup: --for takes build, test, bench or package, not '$want'" >&2; exit 2 ;;
esac

is_installed() {
  [[ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null || true)" == "installed" ]]
}

missing=()
for p in "${packages[@]}"; do
  is_installed "$p" || missing+=("$p")
done

# Node/npm (the tiktoken comparison of the test suite): a node from elsewhere
# (e.g. NodeSource, which bundles npm) counts; Debian's packages are added
# only when the commands are absent.
if [[ "$want" == test || "$want" == all ]] && ! command -v node >/dev/null 2>&1; then
  missing+=(nodejs)
  command -v npm >/dev/null 2>&1 || missing+=(npm)
elif [[ "$want" == test || "$want" == all ]] && ! command -v npm >/dev/null 2>&1; then
  echo "setup: note: node is installed but npm is not; not touching a non-Debian node install" >&2
fi

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} packages for '$want' are installed"
  exit 0
fi

echo "setup: missing packages: ${missing[*]}"
if ((check_only)); then
  exit 1
fi

if [[ "$(id -u)" -eq 0 ]]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1; then
  as_root=(sudo)
else
  echo "setup: not root and sudo is not available; install as root:" >&2
  echo "  apt-get install -y --no-install-recommends ${missing[*]}" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
apt_opts=(-y -q --no-install-recommends -o DPkg::Lock::Timeout=600)
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q </dev/null
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install "${apt_opts[@]}" "${missing[@]}" </dev/null

still=()
for p in "${missing[@]}"; do
  case "$p" in
    nodejs) command -v node >/dev/null 2>&1 || still+=("$p") ;;
    npm) command -v npm >/dev/null 2>&1 || still+=("$p") ;;
    *) is_installed "$p" || still+=("$p") ;;
  esac
done
if ((${#still[@]})); then
  echo "setup: still missing after apt-get: ${still[*]}" >&2
  exit 1
fi
echo "setup: installed ${missing[*]}"
