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
    fill(stream, buf, 2, deadline)?;
    let n = usize::from(buf[1]);
    fill(stream, buf, 2 + n, deadline)?;
    let offers_none = buf[2..2 + n].contains(&0x00);
    buf.drain(..2 + n);
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
    fill(stream, buf, 5, deadline)?;
    if buf[0] != 0x05 {
        return Err(SocksError::Bad(
            format!("SOCKS5 request with version {}", buf[0]),
            Some(GENERAL_FAILURE),
        ));
    }
    let (cmd, atyp) = (buf[1], buf[3]);
    let (host, at) = match atyp {
        0x01 => {
            fill(stream, buf, 4 + 4 + 2, deadline)?;
            let ip: [u8; 4] = buf[4..8].try_into().unwrap_or_default();
            (IpAddr::from(ip).to_string(), 8)
        }
        0x04 => {
            fill(stream, buf, 4 + 16 + 2, deadline)?;
            let ip: [u8; 16] = buf[4..20].try_into().unwrap_or_default();
            (format!("[{}]", IpAddr::from(ip)), 20)
        }
        0x03 => {
            let len = usize::from(buf[4]);
            fill(stream, buf, 5 + len + 2, deadline)?;
            let name = String::from_utf8_lossy(&buf[5..5 + len]).into_owned();
            (name, 5 + len)
        }
        other => {
            return Err(SocksError::Bad(
                format!("SOCKS5 address type {other} not supported"),
                Some(ADDRESS_TYPE_NOT_SUPPORTED),
            ))
        }
    };
    let port = u16::from_be_bytes([buf[at], buf[at + 1]]);
    buf.drain(..at + 2);
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
    Ok(Request { target, port })
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
