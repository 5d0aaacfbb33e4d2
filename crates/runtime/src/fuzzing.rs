//! Entry points for the fuzz harnesses (`runtime-tests/fuzz/`: the cargo-fuzz targets and
//! the stable pass of the test command) into the parsers of bytes a sandbox controls. Not an
//! API: hidden from the documentation, and nothing but the harnesses calls it.

/// The egress proxy: request heads, request bodies, SOCKS5, the TLS ClientHello.
pub use crate::net::proxy::fuzzing as proxy;

/// The ELF reader of the exec-time path.
pub mod elf {
    pub use crate::sandbox::intercept::elf::{facts, Facts};
}

/// The mirror server's reading of a request.
pub mod mirror {
    /// Whether `buf` holds a whole request head.
    pub fn head_complete(buf: &[u8]) -> bool {
        crate::mirror::serve::head_complete(buf)
    }

    /// The method, path and `Accept` value of a head; `None` for a method not served.
    pub fn request(head: &[u8]) -> Option<(&'static str, String, String)> {
        crate::mirror::serve::parse_head(head).map(|r| (r.method, r.path, r.accept))
    }

    /// The file a request path names, relative to the mirror root, and its content type.
    pub fn route(path: &str, accept: &str) -> Option<(String, &'static str)> {
        crate::mirror::serve::route(path, accept)
    }
}
