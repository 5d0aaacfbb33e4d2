//! SOCKS5 (RFC 1928): the no-authentication method and CONNECT only; domain names are
//! resolved by the proxy (`socks5h://`).

use std::io::Write;
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::time::Instant;

use super::http::{read_some, HeadError};
use crate::allow::Target;

/// Reply codes.
pub(super) const GENERAL_FAILURE: u8 = 0x01;
pub(super) const NOT_ALLOWED: u8 = 0x02;
pub(super) const HOST_UNREACHABLE: u8 = 0x04;
pub(super) const CONNECTION_REFUSED: u8 = 0x05;
pub(super) const COMMAND_NOT_SUPPORTED: u8 = 0x07;
pub(super) const ADDRESS_TYPE_NOT_SUPPORTED: u8 = 0x08;

/// A SOCKS5 CONNECT request.
#[derive(Debug)]
pub(super) struct Request {
    pub(super) target: Target,
    pub(super) port: u16,
}

/// Why the handshake failed: the reason, and the reply code already sent (if any).
#[derive(Debug)]
pub(super) enum SocksError {
    Head(HeadError),
    /// The client broke the protocol; the reason and a reply to send, if one fits.
    Bad(String, Option<u8>),
}

impl From<HeadError> for SocksError {
    fn from(e: HeadError) -> SocksError {
        SocksError::Head(e)
    }
}

/// Makes sure `buf` holds at least `n` bytes.
fn fill(
    stream: &TcpStream,
    buf: &mut Vec<u8>,
    n: usize,
    deadline: Instant,
) -> Result<(), HeadError> {
    while buf.len() < n {
        read_some(stream, buf, n - buf.len(), deadline)?;
    }
    Ok(())
}

/// Runs the method negotiation and reads the request; `buf` holds what was read so far
/// (at least the version byte) and keeps the bytes after the request.
pub(super) fn handshake(
    stream: &TcpStream,
    buf: &mut Vec<u8>,
    deadline: Instant,
) -> Result<Request, SocksError> {
    let offers_none = loop {
        match greeting(buf) {
            Step::Need(n) => fill(stream, buf, n, deadline)?,
            Step::Done(offers, used) => {
                buf.drain(..used);
                break offers;
            }
        }
    };
    let method = if offers_none { 0x00 } else { 0xff };
    (&*stream)
        .write_all(&[0x05, method])
        .map_err(|e| HeadError::Closed(e.to_string()))?;
    if !offers_none {
        return Err(SocksError::Bad(
            "SOCKS5 client offers no no-authentication method".into(),
            None,
        ));
    }
    loop {
        match request(buf)? {
            Step::Need(n) => fill(stream, buf, n, deadline)?,
            Step::Done(r, used) => {
                buf.drain(..used);
                return Ok(r);
            }
        }
    }
}

/// How far the client's bytes so far go: `n` bytes are needed in all, or a step is done
/// with its result and the bytes it used.
#[derive(Debug)]
pub(super) enum Step<T> {
    Need(usize),
    Done(T, usize),
}

/// The method negotiation (`buf` starts with the version byte): whether the client offers
/// the no-authentication method.
pub(super) fn greeting(buf: &[u8]) -> Step<bool> {
    let Some(n) = buf.get(1).map(|n| usize::from(*n)) else {
        return Step::Need(2);
    };
    match buf.get(2..2 + n) {
        Some(methods) => Step::Done(methods.contains(&0x00), 2 + n),
        None => Step::Need(2 + n),
    }
}

/// The CONNECT request that follows the method negotiation.
pub(super) fn request(buf: &[u8]) -> Result<Step<Request>, SocksError> {
    let [version, cmd, _, atyp, len, ..] = *buf else {
        return Ok(Step::Need(5));
    };
    if version != 0x05 {
        return Err(SocksError::Bad(
            format!("SOCKS5 request with version {version}"),
            Some(GENERAL_FAILURE),
        ));
    }
    let at = match atyp {
        0x01 => 4 + 4,
        0x04 => 4 + 16,
        0x03 => 5 + usize::from(len),
        other => {
            return Err(SocksError::Bad(
                format!("SOCKS5 address type {other} not supported"),
                Some(ADDRESS_TYPE_NOT_SUPPORTED),
            ))
        }
    };
    let Some(port) = buf.get(at..at + 2) else {
        return Ok(Step::Need(at + 2));
    };
    let port = u16::from_be_bytes([port[0], port[1]]);
    let host = match atyp {
        0x01 => IpAddr::from(<[u8; 4]>::try_from(&buf[4..at]).unwrap_or_default()).to_string(),
        0x04 => format!(
            "[{}]",
            IpAddr::from(<[u8; 16]>::try_from(&buf[4..at]).unwrap_or_default())
        ),
        _ => String::from_utf8_lossy(&buf[5..at]).into_owned(),
    };
    if cmd != 0x01 {
        return Err(SocksError::Bad(
            format!("SOCKS5 command {cmd} not supported (CONNECT only)"),
            Some(COMMAND_NOT_SUPPORTED),
        ));
    }
    let target = Target::parse(&host).map_err(|why| {
        SocksError::Bad(
            format!("invalid host {host:?}: {why}"),
            Some(GENERAL_FAILURE),
        )
    })?;
    Ok(Step::Done(Request { target, port }, at + 2))
}

/// A reply with `code` and the bound address (zeros when there is none).
pub(super) fn reply(code: u8, bound: Option<SocketAddr>) -> Vec<u8> {
    let mut out = vec![0x05, code, 0x00];
    match bound {
        Some(SocketAddr::V6(a)) => {
            out.push(0x04);
            out.extend_from_slice(&a.ip().octets());
            out.extend_from_slice(&a.port().to_be_bytes());
        }
        Some(SocketAddr::V4(a)) => {
            out.push(0x01);
            out.extend_from_slice(&a.ip().octets());
            out.extend_from_slice(&a.port().to_be_bytes());
        }
        None => out.extend_from_slice(&[0x01, 0, 0, 0, 0, 0, 0]),
    }
    out
}
