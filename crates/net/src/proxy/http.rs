//! HTTP/1.x proxy request heads: `CONNECT host:port` and absolute-form `http://` requests.
//!
//! Hand-written rather than a crate: the proxy needs only the request line and the header
//! names (to drop the hop-by-hop ones), and must bound the head by size and time itself.

use std::io::{self, Read};
use std::net::TcpStream;
use std::time::Instant;

use super::body::{connection_has, values, Framer};
use crate::allow::Target;

/// Why a request head could not be read or understood.
#[derive(Debug)]
pub(super) enum HeadError {
    /// Not complete within the head timeout (408).
    Timeout,
    /// Longer than the head cap (431).
    TooLarge,
    /// The client closed or reset the connection.
    Closed(String),
}

/// Reads from `stream` into `buf` (appending at most `max` bytes) before `deadline`.
pub(super) fn read_some(
    stream: &TcpStream,
    buf: &mut Vec<u8>,
    max: usize,
    deadline: Instant,
) -> Result<usize, HeadError> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(HeadError::Timeout);
    }
    stream
        .set_read_timeout(Some(left))
        .map_err(|e| HeadError::Closed(e.to_string()))?;
    let old = buf.len();
    buf.resize(old + max, 0);
    let got = (&*stream).read(&mut buf[old..]);
    buf.truncate(old + *got.as_ref().unwrap_or(&0));
    match got {
        Ok(0) => Err(HeadError::Closed("client closed the connection".into())),
        Ok(n) => Ok(n),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ) =>
        {
            Err(HeadError::Timeout)
        }
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(0),
        Err(e) => Err(HeadError::Closed(e.to_string())),
    }
}

/// Where the head ends in `buf` (just past the blank line), if it does.
pub(super) fn head_end(buf: &[u8]) -> Option<usize> {
    buf.iter().enumerate().find_map(|(i, b)| {
        if *b != b'\n' {
            return None;
        }
        match &buf[i + 1..] {
            [b'\n', ..] => Some(i + 2),
            [b'\r', b'\n', ..] => Some(i + 3),
            _ => None,
        }
    })
}

/// Reads until `buf` holds a whole head (at most `cap` bytes); returns its length. Bytes
/// after the head stay in `buf`.
pub(super) fn read_head(
    stream: &TcpStream,
    buf: &mut Vec<u8>,
    cap: usize,
    deadline: Instant,
) -> Result<usize, HeadError> {
    loop {
        if let Some(end) = head_end(buf) {
            return if end > cap {
                Err(HeadError::TooLarge)
            } else {
                Ok(end)
            };
        }
        if buf.len() >= cap {
            return Err(HeadError::TooLarge);
        }
        read_some(stream, buf, (cap + 4 - buf.len()).min(16 * 1024), deadline)?;
    }
}

/// What a proxy request asks for.
#[derive(Debug)]
pub(super) struct Request {
    pub(super) target: Target,
    pub(super) port: u16,
    /// For absolute-form requests, the head to send upstream and where its body ends;
    /// `None` for CONNECT.
    pub(super) upstream_head: Option<(Vec<u8>, Framer)>,
}

/// Parses a request head (`head` holds it whole, blank line included).
pub(super) fn parse(head: &[u8]) -> Result<Request, String> {
    let text = std::str::from_utf8(head).map_err(|_| "request head is not text".to_string())?;
    let mut lines = text.lines();
    let first = lines.next().unwrap_or_default();
    let parts: Vec<&str> = first.split(' ').collect();
    let [method, uri, version] = parts[..] else {
        return Err("malformed request line".into());
    };
    // No control characters in the target: what is sent upstream must be one line.
    if !token(method) || uri.bytes().any(|b| b.is_ascii_control()) {
        return Err("malformed request line".into());
    }
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Err(format!("unsupported protocol version {version:?}"));
    }
    let headers = header_lines(lines)?;
    if method == "CONNECT" {
        let (host, port) = split_authority(uri, None)?;
        return Ok(Request {
            target: target(host)?,
            port,
            upstream_head: None,
        });
    }
    let framer = Framer::of_fields(&headers)?;
    let lower = uri.to_ascii_lowercase();
    if lower.starts_with("https://") {
        return Err("https:// URLs go through CONNECT, not a plain proxy request".into());
    }
    if !lower.starts_with("http://") {
        return Err("not a proxy request: use CONNECT or an absolute http:// URL".into());
    }
    let rest = &uri["http://".len()..];
    let cut = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(cut);
    if authority.contains('@') {
        return Err("credentials in the URL are not supported".into());
    }
    let (host, port) = split_authority(authority, Some(80))?;
    let path = path.split('#').next().unwrap_or_default();
    let path = match path.as_bytes().first() {
        None => "/".to_string(),
        Some(b'?') => format!("/{path}"),
        Some(_) => path.to_string(),
    };
    Ok(Request {
        target: target(host)?,
        port,
        upstream_head: Some((rewrite(method, &path, version, authority, &headers), framer)),
    })
}

/// The framing of an origin-form request head inside a terminated connection, and whether
/// it asks for a protocol upgrade (websocket).
pub(super) fn origin_framing(head: &[u8]) -> Result<(Framer, bool), String> {
    let text = std::str::from_utf8(head).map_err(|_| "request head is not text".to_string())?;
    let mut lines = text.lines();
    let first = lines.next().unwrap_or_default();
    let parts: Vec<&str> = first.split(' ').collect();
    let [method, uri, version] = parts[..] else {
        return Err("malformed request line".into());
    };
    if !token(method) || uri.bytes().any(|b| b.is_ascii_control()) {
        return Err("malformed request line".into());
    }
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Err(format!(
            "unsupported protocol version {version:?} (HTTP/1.1 only)"
        ));
    }
    let headers = header_lines(lines)?;
    let framer = Framer::of_fields(&headers)?;
    let upgrade = !values(&headers, "upgrade").is_empty() && connection_has(&headers, "upgrade");
    Ok((framer, upgrade))
}

fn target(host: &str) -> Result<Target, String> {
    Target::parse(host).map_err(|why| format!("invalid host {host:?}: {why}"))
}

/// RFC 9110 `token` characters.
fn token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// The header fields as (name, value), refusing malformed lines and obsolete folding.
fn header_lines<'a>(
    lines: impl Iterator<Item = &'a str>,
) -> Result<Vec<(&'a str, &'a str)>, String> {
    let mut out = Vec::new();
    for line in lines.take_while(|l| !l.is_empty()) {
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| "malformed header line".to_string())?;
        if !token(name) {
            return Err("malformed header line".into());
        }
        // RFC 9110 5.5: NUL, CR and LF are never part of a value (an upstream that takes a
        // CR or NUL for a line end would read another header there), nor other controls.
        if value.bytes().any(|b| b.is_ascii_control() && b != b'\t') {
            return Err(format!("control character in header field {name:?}"));
        }
        out.push((name, value.trim()));
    }
    Ok(out)
}

/// Splits `host:port` or `[v6]:port`; without a port, `default` (CONNECT has none).
fn split_authority(text: &str, default: Option<u16>) -> Result<(&str, u16), String> {
    let (host, port) = if text.starts_with('[') {
        match text.find(']') {
            Some(i) => match &text[i + 1..] {
                "" => (&text[..=i], None),
                after => match after.strip_prefix(':') {
                    Some(p) => (&text[..=i], Some(p)),
                    None => return Err(format!("malformed host {text:?}")),
                },
            },
            None => return Err(format!("malformed host {text:?}")),
        }
    } else {
        match text.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (text, None),
        }
    };
    if host.is_empty() {
        return Err("no host in the request".into());
    }
    let port = match (port, default) {
        (Some(p), _) => p
            .parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| format!("invalid port {p:?}"))?,
        (None, Some(d)) => d,
        (None, None) => return Err(format!("CONNECT {text:?} names no port")),
    };
    Ok((host, port))
}

/// The head sent upstream: origin-form, `Host` from the URL, no hop-by-hop or proxy
/// fields, and `Connection: close` (one request per client connection).
fn rewrite(
    method: &str,
    path: &str,
    version: &str,
    authority: &str,
    headers: &[(&str, &str)],
) -> Vec<u8> {
    let listed: Vec<String> = headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("connection"))
        .flat_map(|(_, v)| v.split(','))
        .map(|t| t.trim().to_ascii_lowercase())
        .collect();
    const DROPPED: [&str; 5] = [
        "host",
        "connection",
        "proxy-connection",
        "proxy-authorization",
        "keep-alive",
    ];
    let mut out = format!("{method} {path} {version}\r\nHost: {authority}\r\n");
    for (name, value) in headers {
        let lower = name.to_ascii_lowercase();
        if DROPPED.contains(&lower.as_str()) || listed.contains(&lower) {
            continue;
        }
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    out.push_str("Connection: close\r\n\r\n");
    out.into_bytes()
}

/// A complete response with a one-line plain-text body (and the refusal header for 403).
pub(super) fn response(status: &str, line: &str) -> Vec<u8> {
    let refusal = if status.starts_with("403") {
        format!("X-Reprorun-Refusal: {line}\r\n")
    } else {
        String::new()
    };
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n\
         Connection: close\r\n{refusal}\r\n{line}\n",
        line.len() + 1
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(head: &str) -> Request {
        match parse(head.as_bytes()) {
            Ok(r) => r,
            Err(e) => panic!("{head:?}: {e}"),
        }
    }

    #[test]
    fn connect_and_absolute_form() {
        let r = ok("CONNECT PyPI.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\n\r\n");
        assert_eq!(r.port, 443);
        assert_eq!(r.target, Target::Name("pypi.org".into()));
        assert!(r.upstream_head.is_none());
        let r = ok("CONNECT [::1]:8443 HTTP/1.1\r\n\r\n");
        assert_eq!(r.target, Target::Ip("::1".parse().unwrap()));
        let r = ok(
            "GET http://Example.com:8080/a?b=1 HTTP/1.1\r\nHost: evil\r\n\
                    Proxy-Connection: keep-alive\r\nProxy-Authorization: x\r\n\
                    Connection: keep-alive, X-Hop\r\nX-Hop: 1\r\nAccept: */*\r\n\r\n",
        );
        assert_eq!(r.port, 8080);
        let (head, framer) = r.upstream_head.unwrap();
        assert_eq!(framer, Framer::Done);
        let head = String::from_utf8(head).unwrap();
        assert_eq!(
            head,
            "GET /a?b=1 HTTP/1.1\r\nHost: Example.com:8080\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
        let r = ok("POST http://example.com?q HTTP/1.0\n\n");
        assert_eq!(r.port, 80);
        assert!(String::from_utf8(r.upstream_head.unwrap().0)
            .unwrap()
            .starts_with("POST /?q HTTP/1.0\r\n"));
    }

    #[test]
    fn bad_requests() {
        for (head, why) in [
            ("GET / HTTP/1.1\r\n\r\n", "not a proxy request"),
            ("GET https://a.b/ HTTP/1.1\r\n\r\n", "CONNECT"),
            ("CONNECT a.b HTTP/1.1\r\n\r\n", "no port"),
            ("CONNECT a.b:0 HTTP/1.1\r\n\r\n", "invalid port"),
            ("CONNECT a.b:x HTTP/1.1\r\n\r\n", "invalid port"),
            ("CONNECT a..b:1 HTTP/1.1\r\n\r\n", "invalid host"),
            ("CONNECT a.b:1 HTTP/2\r\n\r\n", "version"),
            ("hello\r\n\r\n", "request line"),
            ("CONNECT a.b:1 HTTP/1.1\r\nno colon\r\n\r\n", "header"),
            ("GET http://u@a.b/ HTTP/1.1\r\n\r\n", "credentials"),
            ("\u{1}\u{2} x HTTP/1.1\r\n\r\n", "request line"),
            // Found by the fuzz pass: control characters were sent upstream as they came.
            (
                "POST http://example.com/form HTTP/1.1\r\nContent-Type: a\0plication/x\r\n\r\n",
                "control character in header field \"Content-Type\"",
            ),
            (
                "GET http://a.b/ HTTP/1.1\r\nX-A: 1\rHost: evil.example\r\n\r\n",
                "control character",
            ),
            ("GET http://a.b/\rx HTTP/1.1\r\n\r\n", "request line"),
            ("GET http://a.b/\u{7f} HTTP/1.1\r\n\r\n", "request line"),
            (
                "POST http://a.b/ HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
                "smuggling",
            ),
        ] {
            let e = parse(head.as_bytes()).unwrap_err();
            assert!(e.contains(why), "{head:?}: {e}");
        }
        assert!(parse(b"\xff\xfe\r\n\r\n").is_err());
    }

    #[test]
    fn head_end_forms() {
        assert_eq!(head_end(b"a\r\n\r\nrest"), Some(5));
        assert_eq!(head_end(b"a\n\nrest"), Some(3));
        assert_eq!(head_end(b"a\r\nb\r\n"), None);
    }
}
