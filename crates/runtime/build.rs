//! Builds the time preload library (crates/reprotime, a `cdylib`) and hands it to the reprorun
//! build for embedding. It is a separate cargo build because reprorun itself links statically
//! (see .cargo/config.toml) and a static target cannot produce a shared library.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    // The library is loaded into the workload's programs, which link glibc: a musl build of
    // reprorun still builds it for the matching glibc target (bound to the oldest symbol
    // versions, so that it loads on any glibc: crates/reprotime/src/abi.rs).
    let target = std::env::var("TARGET").unwrap().replace("-musl", "-gnu");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    for path in [
        "../reprotime/src",
        "../reprotime/Cargo.toml",
        "../reprotime/Cargo.lock",
        "../base/src/determinism/mix.rs",
        "../base/src/determinism/page.rs",
    ] {
        println!("cargo:rerun-if-changed={path}");
    }
    let target_dir = out.join("reprotime-target");
    let status = Command::new(cargo)
        .current_dir(root.join("../reprotime"))
        .args([
            "build",
            "--release",
            "--locked",
            "--target",
            &target,
            "--target-dir",
        ])
        .arg(&target_dir)
        // Not the outer build's flags (crt-static), nor its lint or fix wrappers.
        .env("RUSTFLAGS", "")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_BUILD_RUSTFLAGS")
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .env_remove("CLIPPY_ARGS")
        .env_remove("CARGO_TARGET_DIR")
        .status()
        .expect("run cargo to build crates/reprotime");
    assert!(
        status.success(),
        "building the preload library (crates/reprotime) failed"
    );
    let lib = target_dir.join(&target).join("release/libreprotime.so");
    std::fs::copy(&lib, out.join("libreprotime.so")).expect("copy libreprotime.so");
}
