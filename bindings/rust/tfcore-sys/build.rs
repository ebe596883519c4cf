//! Link flags for libtfcore.so. Order of preference:
//!  1. TFCORE_LIB_DIR: a directory holding libtfcore.so (e.g. a meson build's lib/);
//!  2. `pkg-config --libs-only-L tfcore` (the command, so no crates are needed;
//!     the Debian package libtfcore-dev installs tfcore.pc);
//!  3. nothing found: a build error that names both, rather than a link error
//!     about `-ltfcore` later.
//! DOCS_RS (docs.rs) or TFCORE_NO_LINK_CHECK skips the search: `cargo doc` needs
//! no library.
use std::env;
use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=TFCORE_LIB_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_LIBDIR");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-link-lib=dylib=tfcore");
    if env::var_os("DOCS_RS").is_some() || env::var_os("TFCORE_NO_LINK_CHECK").is_some() {
        return;
    }

    if let Some(dir) = env::var_os("TFCORE_LIB_DIR").filter(|d| !d.is_empty()) {
        let dir = Path::new(&dir);
        if !dir.join("libtfcore.so").exists() {
            fail(&format!(
                "TFCORE_LIB_DIR={} holds no libtfcore.so; point it at the folder with libtfcore.so \
                 (a meson build's lib/, or the libdir of an install)",
                dir.display()
            ));
        }
        link_dir(&dir.to_string_lossy());
        return;
    }

    let probe = Command::new("pkg-config").args(["--libs-only-L", "tfcore"]).output();
    match probe {
        Ok(out) if out.status.success() => {
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            // A system libdir is left out by pkg-config: the linker searches it anyway.
            let dirs: Vec<&str> = text.split_whitespace().filter_map(|f| f.strip_prefix("-L")).collect();
            for dir in &dirs {
                println!("cargo:rustc-link-search=native={dir}");
            }
            if let Some(dir) = dirs.first() {
                println!("cargo:lib_dir={dir}");
            }
        }
        Ok(out) => fail(&format!(
            "`pkg-config --libs-only-L tfcore` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(e) => fail(&format!("the `pkg-config` command could not be run ({e})")),
    }
}

fn link_dir(dir: &str) {
    println!("cargo:rustc-link-search=native={dir}");
    println!("cargo:lib_dir={dir}"); // DEP_TFCORE_LIB_DIR for dependents' build scripts
}

fn fail(why: &str) -> ! {
    eprintln!(
        "error: tfcore-sys cannot find libtfcore: {why}.\n\
         Either install libtfcore with its pkg-config file (Debian: apt install libtfcore-dev; \
         or meson install, with PKG_CONFIG_PATH naming the folder of tfcore.pc), \
         or set TFCORE_LIB_DIR to the folder holding libtfcore.so (e.g. build/lib of a meson build)."
    );
    std::process::exit(1);
}
