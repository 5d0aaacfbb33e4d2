//! Entry points for the fuzz harnesses (`runtime-tests/fuzz/`, re-exported as
//! `reprorun::fuzzing::proxy`): the proxy's parsers of what a sandboxed client sends, with
//! their results as plain data. Not an API: nothing else calls them.

use super::body::Framer;
use super::socks::{self, SocksError, Step};
use super::{http, sni};

pub use super::sni::Hello;

/// How many bytes the proxy reads at most looking for a ClientHello (`sni::CAP`).
pub const SNI_CAP: usize = sni::CAP;

/// Where an HTTP request head ends in `buf` (just past its blank line), if it does.
pub fn head_end(buf: &[u8]) -> Option<usize> {
    http::head_end(buf)
}

/// A request head the proxy accepted.
#[derive(Debug)]
pub struct HttpRequest {
    /// The host asked for, as the allowlist sees it (a normalized name, an IPv4 address or
    /// a bracketed IPv6 address).
    pub host: String,
    pub port: u16,
    /// For an absolute-form request, the head sent upstream and its body's framing.
    pub upstream: Option<(Vec<u8>, Body)>,
}

/// The body framing of an absolute-form request.
#[derive(Debug, Clone)]
pub struct Body(Framer);

impl Body {
    /// Takes the next bytes of the client's stream: how many belong to the request.
    pub fn take(&mut self, bytes: &[u8]) -> usize {
        self.0.take(bytes)
    }

    /// Whether the request is complete or its framing broke.
    pub fn ended(&self) -> bool {
        self.0.ended()
    }

    /// The framer's state, for comparisons.
    pub fn state(&self) -> String {
        format!("{:?}", self.0)
    }
}

/// `http::parse` of a whole head (blank line included).
pub fn http_request(head: &[u8]) -> Result<HttpRequest, String> {
    let r = http::parse(head)?;
    Ok(HttpRequest {
        host: r.target.to_string(),
        port: r.port,
        upstream: r.upstream_head.map(|(h, f)| (h, Body(f))),
    })
}

/// What [`sni::parse`] makes of a tunnel's first bytes.
pub fn client_hello(buf: &[u8]) -> Hello {
    sni::parse(buf)
}

/// What the SOCKS5 handshake makes of a client's bytes (`buf` starts with the version byte).
#[derive(Debug, PartialEq, Eq)]
pub enum Socks {
    /// More bytes needed: this many in all, counted from the start of `buf`.
    Need(usize),
    /// The client offers no method the proxy takes.
    NoMethod,
    /// The request is refused: why, and the reply code sent (if any).
    Refused(String, Option<u8>),
    /// A CONNECT to this host (as [`HttpRequest::host`]) and port, and the bytes it used.
    Connect {
        host: String,
        port: u16,
        used: usize,
    },
}

/// Runs the method negotiation and the request over `buf`, as `socks::handshake` does over
/// the client's stream.
pub fn socks5(buf: &[u8]) -> Socks {
    let (offers, used) = match socks::greeting(buf) {
        Step::Need(n) => return Socks::Need(n),
        Step::Done(offers, used) => (offers, used),
    };
    if !offers {
        return Socks::NoMethod;
    }
    match socks::request(&buf[used..]) {
        Ok(Step::Need(n)) => Socks::Need(used + n),
        Ok(Step::Done(r, n)) => Socks::Connect {
            host: r.target.to_string(),
            port: r.port,
            used: used + n,
        },
        Err(SocksError::Bad(why, code)) => Socks::Refused(why, code),
        Err(SocksError::Head(e)) => Socks::Refused(format!("{e:?}"), None),
    }
}
