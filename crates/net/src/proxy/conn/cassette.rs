//! The cassette's hooks in a connection (`--net-record`, `--net-replay`): a plain-HTTP
//! request recorded while it is relayed, and every request answered from the cassette
//! when replaying (no upstream is asked for, resolved or connected).

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::Arc;

use super::super::body::{connection_has, Framer};
use super::super::http;
use super::super::socks;
use super::super::tap::{self, Tap};
use super::{Conn, Kind};
use crate::allow::Target;
use crate::cassette::{sha256_hex, Cassette, Entry, Key, BODY_MAX};
use crate::intercept::Intercept;
use crate::log::Decision;

/// Bytes read from the client at once.
const CHUNK: usize = 64 * 1024;

/// What the requests of one replayed connection came to.
#[derive(Default)]
struct Served {
    hits: u64,
    misses: Vec<String>,
    up: u64,
    down: u64,
    failed: Option<String>,
}

impl Conn<'_> {
    /// Relays one plain-HTTP request (its head and first body bytes are `first`) and its
    /// response, recording the exchange.
    pub(super) fn record_http(
        &mut self,
        (upstream, port): (&TcpStream, u16),
        first: &[u8],
        mut framer: Framer,
    ) {
        let shared = self.shared;
        let sink = move |ex, why| shared.cassette_add(ex, why);
        let host = self.record.host.clone();
        let mut tap = Tap::new("http", (&host, port), &sink);
        let idle = shared.config.idle_timeout;
        let _ = upstream.set_write_timeout(Some(idle));
        let _ = self.client.set_read_timeout(Some(idle));
        tap.client(first);
        if (&*upstream).write_all(first).is_err() {
            return;
        }
        self.record.bytes_up += first.len() as u64;
        let mut buf = vec![0u8; CHUNK];
        while !matches!(framer, Framer::Done | Framer::Bad(_)) {
            let n = match (&*self.client).read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let mine = framer.take(&buf[..n]);
            tap.client(&buf[..mine]);
            if (&*upstream).write_all(&buf[..mine]).is_err() {
                return;
            }
            self.record.bytes_up += mine as u64;
        }
        let _ = upstream.set_read_timeout(Some(idle));
        loop {
            let n = match (&*upstream).read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            tap.upstream(&buf[..n]);
            if (&*self.client).write_all(&buf[..n]).is_err() {
                break;
            }
            self.record.bytes_down += n as u64;
            // The answer is whole: an upstream that keeps the connection open is not waited on.
            if tap.stopped.is_none() && tap.idle() {
                break;
            }
        }
        tap.upstream_ended();
        let _ = self.client.shutdown(Shutdown::Write);
        self.note_tap(tap.stopped.take());
    }

    /// Notes why the tap stopped recording this connection.
    pub(super) fn note_tap(&mut self, stopped: Option<String>) {
        if let Some(why) = stopped {
            let line = format!("--net-record: the rest of this connection is not recorded: {why}");
            self.record.note = Some(match self.record.note.take() {
                Some(n) => format!("{n}; {line}"),
                None => line,
            });
        }
    }

    /// Answers a request from the cassette (`--net-replay`): nothing leaves the machine.
    pub(super) fn replay(
        &mut self,
        cassette: &Arc<Cassette>,
        kind: Kind,
        (target, port): (&Target, u16),
        rest: Vec<u8>,
    ) {
        let host = self.record.host.clone();
        let served = match kind {
            Kind::Http(head, framer) => {
                let _ = framer;
                let mut first = head;
                first.extend_from_slice(&rest);
                let mut client = self.client;
                let s = serve(cassette, &mut client, ("http", &host, port), first, false);
                let _ = self.client.shutdown(Shutdown::Write);
                s
            }
            Kind::Connect | Kind::Socks => {
                if !cassette.serves(&host, port) {
                    let why = format!(
                        "--net-replay: no recorded exchange with {host}:{port} in the cassette {}",
                        cassette.dir().display()
                    );
                    let code = socks::NOT_ALLOWED;
                    return self.answer(&kind, Decision::Refused, "403 Forbidden", code, why);
                }
                let proto = if matches!(kind, Kind::Socks) {
                    self.say(&socks::reply(0x00, None));
                    "SOCKS5"
                } else {
                    self.say(b"HTTP/1.1 200 Connection established\r\n\r\n");
                    "CONNECT"
                };
                let Some(first) = self.check_sni(target, self.client, rest, proto) else {
                    return;
                };
                match (first.first(), &self.shared.config.intercept) {
                    (Some(0x16), Some(icpt)) => {
                        self.replay_tls(icpt, cassette, (&host, port), &first)
                    }
                    _ => {
                        let mut client = self.client;
                        serve(cassette, &mut client, ("http", &host, port), first, true)
                    }
                }
            }
        };
        self.record.decision = Decision::Allowed;
        self.record.rule = format!("--net-replay {}", cassette.dir().display());
        self.record.bytes_up += served.up;
        self.record.bytes_down += served.down;
        self.record.note = Some(format!(
            "--net-replay: {} request(s) answered from the cassette, {} refused",
            served.hits,
            served.misses.len()
        ));
        if let Some(miss) = served.misses.first() {
            self.record.decision = Decision::Refused;
            self.record.rule.clone_from(miss);
        } else if let Some(why) = served.failed {
            self.record.decision = Decision::Failed;
            self.record.rule = why;
        }
    }

    /// TLS with the client under a certificate of the run's CA, then the requests inside.
    fn replay_tls(
        &mut self,
        icpt: &Intercept,
        cassette: &Cassette,
        (host, port): (&str, u16),
        hello: &[u8],
    ) -> Served {
        let mut served = Served::default();
        let mut server = match super::super::mitm::handshake_client(
            icpt,
            host,
            self.client,
            hello,
            self.shared.config.head_timeout,
        ) {
            Ok(s) => s,
            Err(why) => {
                served.failed = Some(why);
                return served;
            }
        };
        let _ = self
            .client
            .set_read_timeout(Some(self.shared.config.idle_timeout));
        let mut sock = self.client;
        let mut tls = rustls::Stream::new(&mut server, &mut sock);
        let s = serve(cassette, &mut tls, ("https", host, port), Vec::new(), true);
        server.send_close_notify();
        let _ = server.complete_io(&mut sock);
        s
    }
}

/// Reads requests from `stream` (after the bytes `buf` already read) and answers each from
/// the cassette, until the client ends, asks to close, or a request is not in it.
fn serve(
    cassette: &Cassette,
    stream: &mut dyn ReadWrite,
    (scheme, host, port): (&str, &str, u16),
    mut buf: Vec<u8>,
    keep_alive: bool,
) -> Served {
    let mut served = Served::default();
    let mut chunk = vec![0u8; CHUNK];
    let mut more = |stream: &mut dyn ReadWrite, buf: &mut Vec<u8>| -> bool {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => false,
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                true
            }
        }
    };
    loop {
        let end = loop {
            if let Some(end) = http::head_end(&buf) {
                break end;
            }
            if buf.len() > 64 * 1024 {
                served.failed = Some("request head over 64 KiB".into());
                return served;
            }
            if !more(stream, &mut buf) {
                return served;
            }
        };
        served.up += buf.len() as u64;
        let rest = buf.split_off(end);
        let request = match parse_request(&buf) {
            Ok(r) => r,
            Err(why) => {
                let _ = stream.write_all(&http::response(
                    "400 Bad Request",
                    &format!("reprorun: {why}"),
                ));
                served.failed = Some(why);
                return served;
            }
        };
        let (method, target, fields, mut framer, close) = request;
        let expects = fields
            .iter()
            .any(|(n, v)| n == "expect" && v.eq_ignore_ascii_case("100-continue"));
        if expects && framer != Framer::Done && rest.is_empty() {
            // The client waits for this before sending its body.
            let _ = stream.write_all(b"HTTP/1.1 100 Continue\r\n\r\n");
            let _ = stream.flush();
        }
        let mut body = Vec::new();
        let mut pending = rest;
        loop {
            let n = tap::decode(&mut framer, &pending, &mut body);
            pending.drain(..n);
            if body.len() as u64 > BODY_MAX {
                served.failed = Some(format!("request body over {BODY_MAX} bytes"));
                return served;
            }
            match framer {
                Framer::Done => break,
                Framer::Bad(why) => {
                    served.failed = Some(format!("request body framing broke ({why})"));
                    return served;
                }
                _ if !pending.is_empty() => {}
                _ => {
                    if !more(stream, &mut pending) {
                        return served;
                    }
                }
            }
        }
        buf = pending;
        let key = Key::new(
            &method,
            (scheme, host, port),
            &target,
            &fields,
            &sha256_hex(&body),
        );
        let Some(answer) = cassette.answer(&key) else {
            let line = format!(
                "reprorun: --net-replay: {} is not in the cassette {}",
                key.describe(),
                cassette.dir().display()
            );
            let bytes = http::response("403 Forbidden", &line);
            served.down += bytes.len() as u64;
            let _ = stream.write_all(&bytes);
            let _ = stream.flush();
            served
                .misses
                .push(line.trim_start_matches("reprorun: ").to_string());
            return served;
        };
        let close = close || !keep_alive;
        let bytes = replayed(
            answer.entry,
            &answer.body,
            method.eq_ignore_ascii_case("HEAD"),
            close,
        );
        served.down += bytes.len() as u64;
        served.hits += 1;
        if stream.write_all(&bytes).is_err() || stream.flush().is_err() || close {
            return served;
        }
    }
}

/// Read and write, as one object (a socket, or TLS over it).
trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

/// A parsed request: method, target, header fields, body framing, and whether the client
/// asked to close after it.
type Request = (String, String, Vec<(String, String)>, Framer, bool);

fn parse_request(head: &[u8]) -> Result<Request, String> {
    let (line, fields) = tap::parse_head(head)?;
    let parts: Vec<&str> = line.split(' ').collect();
    let [method, target, version] = parts[..] else {
        return Err("malformed request line".into());
    };
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Err(format!(
            "unsupported protocol version {version:?} (HTTP/1.1 only)"
        ));
    }
    let framer = Framer::of_fields(&fields)?;
    let close = version == "HTTP/1.0" || connection_has(&fields, "close");
    let owned = fields
        .iter()
        .map(|(n, v)| (n.to_ascii_lowercase(), v.to_string()))
        .collect();
    Ok((method.to_string(), target.to_string(), owned, framer, close))
}

/// The recorded response, framed again: `Content-Length` for its body (none for HEAD, 1xx,
/// 204 and 304, where the recorded one is kept), no transfer coding.
pub(super) fn replayed(entry: &Entry, body: &[u8], head_req: bool, close: bool) -> Vec<u8> {
    const DROPPED: [&str; 4] = [
        "transfer-encoding",
        "content-length",
        "connection",
        "keep-alive",
    ];
    let no_body = head_req || entry.status < 200 || entry.status == 204 || entry.status == 304;
    let mut out = format!("HTTP/1.1 {} {}\r\n", entry.status, entry.reason);
    for (n, v) in &entry.response_headers {
        let keep_length = no_body && n.eq_ignore_ascii_case("content-length");
        if DROPPED.iter().any(|d| n.eq_ignore_ascii_case(d)) && !keep_length {
            continue;
        }
        out.push_str(&format!("{n}: {v}\r\n"));
    }
    if !no_body {
        out.push_str(&format!("content-length: {}\r\n", body.len()));
    }
    if close {
        out.push_str("connection: close\r\n");
    }
    out.push_str("\r\n");
    let mut out = out.into_bytes();
    if !no_body {
        out.extend_from_slice(body);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cassette::Body;

    fn entry(status: u16, headers: &[(&str, &str)]) -> Entry {
        Entry {
            order: 0,
            method: "GET".into(),
            scheme: "https".into(),
            host: "h".into(),
            port: 443,
            target: "/".into(),
            request_headers: Vec::new(),
            request_body: Body::of(b""),
            status,
            reason: "OK".into(),
            response_headers: headers
                .iter()
                .map(|(n, v)| ((*n).to_string(), (*v).to_string()))
                .collect(),
            response_body: Body::of(b"hello"),
        }
    }

    #[test]
    fn answers_are_framed_again_by_length() {
        let e = entry(
            200,
            &[
                ("transfer-encoding", "chunked"),
                ("x-a", "1"),
                ("connection", "keep-alive"),
            ],
        );
        let got = String::from_utf8(replayed(&e, b"hello", false, false)).unwrap();
        assert_eq!(
            got,
            "HTTP/1.1 200 OK\r\nx-a: 1\r\ncontent-length: 5\r\n\r\nhello"
        );
        let e = entry(200, &[("content-length", "99")]);
        let got = String::from_utf8(replayed(&e, b"", true, true)).unwrap();
        assert_eq!(
            got, "HTTP/1.1 200 OK\r\ncontent-length: 99\r\nconnection: close\r\n\r\n",
            "HEAD: the recorded length, no body"
        );
        let got = String::from_utf8(replayed(&entry(304, &[]), b"", false, false)).unwrap();
        assert_eq!(got, "HTTP/1.1 304 OK\r\n\r\n");
    }

    #[test]
    fn requests_are_parsed_for_matching() {
        let (method, target, fields, framer, close) = parse_request(
            b"POST /a?b=1 HTTP/1.1\r\nContent-Type: text/plain\r\nContent-Length: 3\r\nConnection: close\r\n\r\n",
        )
        .unwrap();
        assert_eq!((method.as_str(), target.as_str()), ("POST", "/a?b=1"));
        assert!(fields.contains(&("content-type".into(), "text/plain".into())));
        assert_eq!(framer, Framer::Length(3));
        assert!(close);
        assert!(parse_request(b"PRI * HTTP/2.0\r\n\r\n").is_err());
        assert!(parse_request(b"GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n").is_err());
    }
}
