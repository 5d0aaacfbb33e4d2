//! The server name (SNI) of a TLS ClientHello, read from the first bytes a tunnel's client
//! sends. Hand-written: the proxy only reads one extension of one message and needs no TLS
//! stack; the handshake message may span several records and is reassembled.

/// How many bytes the proxy reads at most looking for a whole ClientHello.
pub(super) const CAP: usize = 16 * 1024 + 5;

/// The fatal TLS alert `access_denied`, sent when the SNI does not match.
pub(super) const ACCESS_DENIED: [u8; 7] = [0x15, 0x03, 0x01, 0x00, 0x02, 0x02, 0x31];

const HANDSHAKE: u8 = 0x16;
const CLIENT_HELLO: u8 = 0x01;
const EXT_SERVER_NAME: u16 = 0;

/// What the first bytes of a tunnel are.
#[derive(Debug, PartialEq, Eq)]
pub enum Hello {
    /// Not a TLS handshake: nothing to check.
    NotTls,
    /// More bytes are needed.
    Incomplete,
    /// A ClientHello without a server name.
    NoSni,
    /// A ClientHello naming this server (as sent, not normalized).
    Sni(String),
    /// A TLS handshake that is not a well-formed ClientHello.
    Malformed(&'static str),
}

/// Reads `buf` (the first bytes of the client's stream).
pub(super) fn parse(buf: &[u8]) -> Hello {
    match buf {
        [] => return Hello::Incomplete,
        [first, ..] if *first != HANDSHAKE => return Hello::NotTls,
        [_, major, ..] if *major != 0x03 => return Hello::NotTls,
        _ => {}
    }
    // Reassemble the handshake layer from consecutive handshake records, up to the end of
    // the first message: what follows it (a change_cipher_spec, early data) is not read.
    let mut message = Vec::new();
    let mut rest = buf;
    while rest.len() >= 5 && !whole(&message) {
        if rest[0] != HANDSHAKE {
            return Hello::Malformed("ClientHello interrupted by another record type");
        }
        let len = usize::from(u16::from_be_bytes([rest[3], rest[4]]));
        if len == 0 {
            return Hello::Malformed("empty handshake record");
        }
        let Some(fragment) = rest.get(5..5 + len) else {
            message.extend_from_slice(&rest[5..]);
            break;
        };
        message.extend_from_slice(fragment);
        rest = &rest[5 + len..];
    }
    let [kind, a, b, c, body @ ..] = &message[..] else {
        return Hello::Incomplete;
    };
    if *kind != CLIENT_HELLO {
        return Hello::Malformed("first handshake message is not a ClientHello");
    }
    let len = usize::from(*a) << 16 | usize::from(*b) << 8 | usize::from(*c);
    match body.get(..len) {
        Some(hello) => client_hello(hello).unwrap_or(Hello::Malformed("malformed ClientHello")),
        None => Hello::Incomplete,
    }
}

/// Whether `message` holds a whole handshake message (its 4-byte header and its body).
fn whole(message: &[u8]) -> bool {
    match message {
        [_, a, b, c, body @ ..] => {
            body.len() >= usize::from(*a) << 16 | usize::from(*b) << 8 | usize::from(*c)
        }
        _ => false,
    }
}

/// A cursor over a ClientHello body.
struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, tail) = (self.0.get(..n)?, self.0.get(n..)?);
        self.0 = tail;
        Some(head)
    }

    fn u8(&mut self) -> Option<usize> {
        self.take(1).map(|b| usize::from(b[0]))
    }

    fn u16(&mut self) -> Option<usize> {
        self.take(2)
            .map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])))
    }

    /// A vector with a one- or two-byte length prefix.
    fn vec8(&mut self) -> Option<&'a [u8]> {
        let n = self.u8()?;
        self.take(n)
    }

    fn vec16(&mut self) -> Option<&'a [u8]> {
        let n = self.u16()?;
        self.take(n)
    }
}

fn client_hello(body: &[u8]) -> Option<Hello> {
    let mut c = Cursor(body);
    c.take(2 + 32)?; // legacy_version, random
    c.vec8()?; // legacy_session_id
    c.vec16()?; // cipher_suites
    c.vec8()?; // legacy_compression_methods
    if c.0.is_empty() {
        return Some(Hello::NoSni);
    }
    let mut exts = Cursor(c.vec16()?);
    while !exts.0.is_empty() {
        let kind = exts.u16()?;
        let data = exts.vec16()?;
        if kind != usize::from(EXT_SERVER_NAME) {
            continue;
        }
        let mut list = Cursor(Cursor(data).vec16()?);
        while !list.0.is_empty() {
            let name_type = list.u8()?;
            let name = list.vec16()?;
            if name_type == 0 {
                // A host name (RFC 6066 3): never empty, no control character or space.
                let name = std::str::from_utf8(name).ok()?;
                if name.is_empty() || name.chars().any(|c| c.is_control() || c.is_whitespace()) {
                    return None;
                }
                return Some(Hello::Sni(name.to_string()));
            }
        }
        return Some(Hello::NoSni);
    }
    Some(Hello::NoSni)
}

/// Test helper: a minimal ClientHello (one record, or split in records of `split` bytes)
/// with an SNI extension for `name` when given.
#[cfg(test)]
pub(super) fn client_hello_bytes(name: Option<&str>, split: usize) -> Vec<u8> {
    let mut exts = Vec::new();
    // A GREASE-like unknown extension before the server name.
    exts.extend_from_slice(&[0x0a, 0x0a, 0x00, 0x01, 0x00]);
    if let Some(name) = name {
        let n = name.len() as u16;
        exts.extend_from_slice(&[0x00, 0x00]);
        exts.extend_from_slice(&(n + 5).to_be_bytes());
        exts.extend_from_slice(&(n + 3).to_be_bytes());
        exts.push(0x00);
        exts.extend_from_slice(&n.to_be_bytes());
        exts.extend_from_slice(name.as_bytes());
    }
    let mut body = vec![0x03, 0x03];
    body.extend_from_slice(&[0x11; 32]);
    body.extend_from_slice(&[0x00, 0x00, 0x02, 0x13, 0x01, 0x01, 0x00]);
    body.extend_from_slice(&(exts.len() as u16).to_be_bytes());
    body.extend_from_slice(&exts);
    let mut message = vec![CLIENT_HELLO, 0x00];
    message.extend_from_slice(&(body.len() as u16).to_be_bytes());
    message.extend_from_slice(&body);
    let mut out = Vec::new();
    for chunk in message.chunks(split.max(1)) {
        out.extend_from_slice(&[HANDSHAKE, 0x03, 0x01]);
        out.extend_from_slice(&(chunk.len() as u16).to_be_bytes());
        out.extend_from_slice(chunk);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_names() {
        let hello = client_hello_bytes(Some("Example.com"), 1 << 14);
        assert_eq!(parse(&hello), Hello::Sni("Example.com".into()));
        for cut in 0..hello.len() {
            assert_eq!(parse(&hello[..cut]), Hello::Incomplete, "cut at {cut}");
        }
        let split = client_hello_bytes(Some("a.example"), 7);
        assert_eq!(parse(&split), Hello::Sni("a.example".into()));
        assert_eq!(parse(&client_hello_bytes(None, 1 << 14)), Hello::NoSni);
    }

    /// Found by the fuzz pass: a ClientHello followed in the same read by a
    /// change_cipher_spec and an application-data record (a TLS 1.3 client sending early
    /// data) was refused as "interrupted by another record type".
    #[test]
    fn records_after_the_client_hello_are_not_read() {
        let mut hello = client_hello_bytes(Some("example.com"), 1 << 14);
        hello.extend_from_slice(&[
            0x14, 0x03, 0x03, 0x00, 0x01, 0x01, 0x17, 0x03, 0x03, 0x00, 0x01,
        ]);
        assert_eq!(parse(&hello), Hello::Sni("example.com".into()));
        let mut split = client_hello_bytes(Some("a.example"), 7);
        split.extend_from_slice(&[0x17, 0x03, 0x03, 0x00, 0x05, 1, 2, 3, 4, 5]);
        assert_eq!(parse(&split), Hello::Sni("a.example".into()));
    }

    /// Found by the fuzz pass: an empty server name was returned as one.
    #[test]
    fn a_server_name_is_a_name() {
        for bad in ["", "a\nb.example", "a b", "\u{0}"] {
            let hello = client_hello_bytes(Some(bad), 1 << 14);
            assert_eq!(
                parse(&hello),
                Hello::Malformed("malformed ClientHello"),
                "{bad:?}"
            );
        }
        let idn = client_hello_bytes(Some("bücher.example"), 1 << 14);
        assert_eq!(parse(&idn), Hello::Sni("bücher.example".into()));
    }

    #[test]
    fn other_bytes() {
        assert_eq!(parse(b"GET / HTTP/1.1\r\n"), Hello::NotTls);
        assert_eq!(parse(b"SSH-2.0-x\r\n"), Hello::NotTls);
        assert_eq!(parse(&[0x16, 0x01]), Hello::NotTls);
        assert!(matches!(
            parse(&[0x16, 0x03, 0x01, 0x00, 0x04, 0x02, 0x00, 0x00, 0x00]),
            Hello::Malformed(_)
        ));
        let mut bad = client_hello_bytes(Some("x.example"), 1 << 14);
        // Claim a longer session id than the message holds.
        bad[5 + 4 + 34] = 0xff;
        assert!(matches!(parse(&bad), Hello::Malformed(_)));
        let mut interrupted = client_hello_bytes(Some("x.example"), 10);
        interrupted[15] = 0x17;
        assert!(matches!(parse(&interrupted), Hello::Malformed(_)));
    }
}
