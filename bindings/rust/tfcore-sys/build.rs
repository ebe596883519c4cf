//! Link flags for libtfcore.so. Order of preference:
//!  1. TFCORE_LIB_DIR: a directory holding libtfcore.so (e.g. a meson build's lib/);
//!  2. `pkg-config --libs-only-L tfcore` (the command, so no crates are needed);
//!  3. the linker's default search path.
use std::env;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=TFCORE_LIB_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-changed=build.rs");
    let mut dirs: Vec<String> = Vec::new();
    if let Ok(dir) = env::var("TFCORE_LIB_DIR") {
        if !dir.is_empty() {
            dirs.push(dir);
        }
    }
    if dirs.is_empty() {
        match Command::new("pkg-config").args(["--libs-only-L", "tfcore"]).output() {
            Ok(out) if out.status.success() => {
                let text = String::from_utf8_lossy(&out.stdout).into_owned();
                dirs.extend(text.split_whitespace().filter_map(|f| f.strip_prefix("-L")).map(str::to_owned));
            }
            _ => println!(
                "cargo:warning=tfcore-sys: neither TFCORE_LIB_DIR nor `pkg-config tfcore` found libtfcore; \
                 relying on the default library path"
            ),
        }
    }
    for dir in &dirs {
        println!("cargo:rustc-link-search=native={dir}");
    }
    if let Some(dir) = dirs.first() {
        println!("cargo:lib_dir={dir}"); // DEP_TFCORE_LIB_DIR for dependents' build scripts
    }
    println!("cargo:rustc-link-lib=dylib=tfcore");
}
