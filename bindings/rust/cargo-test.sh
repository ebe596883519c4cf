#!/usr/bin/env bash
# Run the Rust crates' tests against a meson build of libtfcore:
#   cargo-test.sh BUILD_LIB_DIR TARGET_DIR
# TFCORE_TEST_PRELOAD (optional): a library the TEST BINARIES must preload
# (the ASan runtime for a sanitizer build); cargo and rustc themselves run
# without it, through cargo's per-target runner.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
libdir="${1:?usage: cargo-test.sh BUILD_LIB_DIR TARGET_DIR}"
export TFCORE_LIB_DIR="$libdir"
export CARGO_TARGET_DIR="${2:?usage: cargo-test.sh BUILD_LIB_DIR TARGET_DIR}"
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$PATH:${CARGO_HOME:-$HOME/.cargo}/bin"
if [[ -n "${TFCORE_TEST_PRELOAD:-}" ]]; then
  host="$(rustc -vV | sed -n 's/^host: //p')"
  var="CARGO_TARGET_$(tr 'a-z-' 'A-Z_' <<<"$host")_RUNNER"
  export "$var=env LD_PRELOAD=$TFCORE_TEST_PRELOAD"
fi
exec cargo test --offline --locked --manifest-path "$here/Cargo.toml" --workspace -- --test-threads=2
