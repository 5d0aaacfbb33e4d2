//! Names `libdl.so.2` as needed by the library: before glibc 2.34, `dlsym` and friends (bound
//! to their first version, `src/abi.rs`) live there, and a program that does not link it
//! itself (`date`) would not have it loaded. Newer glibc ships it as a stub; musl's loader
//! takes the name as itself.

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,--no-as-needed,-l:libdl.so.2");
    println!("cargo:rerun-if-changed=build.rs");
}
