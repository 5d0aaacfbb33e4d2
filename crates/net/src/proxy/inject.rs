//! The client's side of a terminated connection, in clear (`--inject-env`): request heads
//! are read whole, the placeholders of the secrets bound to this host are replaced in their
//! header lines, and every other placeholder seen (in a request line, a body, a head for
//! another host, the bytes after an upgrade) is passed unchanged and named.

use std::collections::BTreeSet;

use super::body::Framer;
use super::http;
use crate::allow::Target;
use crate::intercept::Secret;

/// Where the client's stream is.
enum State {
    /// Reading a request head (the bytes so far).
    Head(Vec<u8>),
    /// A request body, as its head framed it.
    Body(Framer),
    /// After a request asking for a protocol upgrade (websocket): bytes pass as they are.
    Raw,
}

/// Rewrites the client's stream of one terminated connection to `target:port`.
pub(super) struct Rewriter<'a> {
    secrets: &'a [Secret],
    target: &'a Target,
    port: u16,
    head_cap: usize,
    state: State,
    /// The last bytes of body seen, so that a placeholder cut across two reads is found.
    tail: Vec<u8>,
    /// Names of the secrets put into a request head.
    pub(super) injected: BTreeSet<String>,
    /// Placeholders passed unchanged: (name, where).
    pub(super) seen: BTreeSet<(String, &'static str)>,
}

impl<'a> Rewriter<'a> {
    pub(super) fn new(
        secrets: &'a [Secret],
        target: &'a Target,
        port: u16,
        head_cap: usize,
    ) -> Rewriter<'a> {
        Rewriter {
            secrets,
            target,
            port,
            head_cap,
            state: State::Head(Vec::new()),
            tail: Vec::new(),
            injected: BTreeSet::new(),
            seen: BTreeSet::new(),
        }
    }

    /// Takes the client's next bytes and appends what goes upstream to `out`; an error ends
    /// the connection (a head too large or malformed).
    pub(super) fn feed(&mut self, mut input: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        while !input.is_empty() {
            match &mut self.state {
                State::Raw => {
                    self.scan(input, "the bytes after a protocol upgrade");
                    out.extend_from_slice(input);
                    return Ok(());
                }
                State::Body(framer) => {
                    let n = framer.take(input);
                    let done = framer.ended();
                    if let Framer::Bad(why) = framer {
                        return Err(format!("request body framing broke ({why})"));
                    }
                    self.scan(&input[..n], "a request body");
                    out.extend_from_slice(&input[..n]);
                    input = &input[n..];
                    if done {
                        self.tail.clear();
                        self.state = State::Head(Vec::new());
                    }
                }
                State::Head(buf) => {
                    let before = buf.len();
                    buf.extend_from_slice(input);
                    let Some(end) = http::head_end(buf) else {
                        if buf.len() > self.head_cap {
                            return Err(format!("request head over {} bytes", self.head_cap));
                        }
                        return Ok(());
                    };
                    if end > self.head_cap {
                        return Err(format!("request head over {} bytes", self.head_cap));
                    }
                    let head = std::mem::take(buf);
                    input = &input[end - before..];
                    let (framer, upgrade) = http::origin_framing(&head[..end])?;
                    out.extend(self.head(&head[..end]));
                    self.state = match (upgrade, framer) {
                        (true, Framer::Done) => State::Raw,
                        (true, _) => return Err("an upgrade request with a body".into()),
                        (false, Framer::Done) => State::Head(Vec::new()),
                        (false, f) => State::Body(f),
                    };
                }
            }
        }
        Ok(())
    }

    /// The head with this host's placeholders replaced in its header lines.
    fn head(&mut self, head: &[u8]) -> Vec<u8> {
        let line_end = head.iter().position(|b| *b == b'\n').map_or(0, |i| i + 1);
        let (line, fields) = head.split_at(line_end);
        let mut fields = fields.to_vec();
        for s in self.secrets {
            if find(line, &s.placeholder).is_some() {
                self.seen.insert((s.name.clone(), "a request line"));
            }
            if find(&fields, &s.placeholder).is_none() {
                continue;
            }
            if s.host.port == self.port && s.host.host_matches(self.target) {
                fields = replace(&fields, &s.placeholder, &s.value);
                self.injected.insert(s.name.clone());
            } else {
                self.seen
                    .insert((s.name.clone(), "the headers of a request to another host"));
            }
        }
        let mut out = line.to_vec();
        out.extend(fields);
        out
    }

    /// Notes every placeholder in `bytes` (and the tail kept from before).
    fn scan(&mut self, bytes: &[u8], place: &'static str) {
        let longest = self.secrets.iter().map(|s| s.placeholder.len()).max();
        let Some(longest) = longest else { return };
        let mut window = std::mem::take(&mut self.tail);
        window.extend_from_slice(bytes);
        for s in self.secrets {
            if find(&window, &s.placeholder).is_some() {
                self.seen.insert((s.name.clone(), place));
            }
        }
        let keep = longest.saturating_sub(1).min(window.len());
        self.tail = window.split_off(window.len() - keep);
    }
}

/// The names of the secrets whose placeholder is in `bytes` (a plain-HTTP head to any host).
pub(super) fn placeholders_in(secrets: &[Secret], bytes: &[u8]) -> Vec<String> {
    secrets
        .iter()
        .filter(|s| find(bytes, &s.placeholder).is_some())
        .map(|s| s.name.clone())
        .collect()
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || hay.len() < needle.len() {
        return None;
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

fn replace(hay: &[u8], needle: &[u8], with: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(hay.len());
    let mut rest = hay;
    while let Some(i) = find(rest, needle) {
        out.extend_from_slice(&rest[..i]);
        out.extend_from_slice(with);
        rest = &rest[i + needle.len()..];
    }
    out.extend_from_slice(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::allow::Rule;

    const PH: &str = "xq-abcd-ZyXwVu9876543210abc";
    const REAL: &str = "sk-proj-AbCdEf0123456789xyz";

    fn secrets() -> Vec<Secret> {
        vec![Secret {
            name: "KEY".into(),
            host: Rule::parse("api.test").unwrap(),
            placeholder: PH.into(),
            value: REAL.into(),
        }]
    }

    /// What went upstream (or the error), the secrets injected and the placeholders seen.
    type Fed = (
        Result<String, String>,
        Vec<String>,
        Vec<(String, &'static str)>,
    );

    /// Feeds `input` in pieces of `step` bytes; what went upstream, or the error.
    fn run(target: &str, input: &str, step: usize) -> Fed {
        let secrets = secrets();
        let target = Target::Name(target.into());
        let mut r = Rewriter::new(&secrets, &target, 443, 4096);
        let mut out = Vec::new();
        let mut result = Ok(());
        for piece in input.as_bytes().chunks(step) {
            result = r.feed(piece, &mut out);
            if result.is_err() {
                break;
            }
        }
        let injected = r.injected.iter().cloned().collect();
        let seen = r.seen.iter().cloned().collect();
        (
            result.map(|()| String::from_utf8(out).unwrap()),
            injected,
            seen,
        )
    }

    #[test]
    fn headers_to_the_host_get_the_value_and_nothing_else_does() {
        let req = format!(
            "POST /v1?k={PH} HTTP/1.1\r\nHost: api.test\r\nAuthorization: Bearer {PH}\r\nContent-Length: 31\r\n\r\nkey={PH}GET / HTTP/1.1\r\nX-Key: {PH}\r\n\r\n"
        );
        for step in [1, 7, 4096] {
            let (out, injected, seen) = run("api.test", &req, step);
            let out = out.unwrap();
            assert!(
                out.contains(&format!("Authorization: Bearer {REAL}\r\n")),
                "{out}"
            );
            assert!(
                out.contains(&format!("X-Key: {REAL}\r\n")),
                "second request: {out}"
            );
            assert!(
                out.contains(&format!("?k={PH} ")),
                "the request line is kept: {out}"
            );
            assert!(
                out.contains(&format!("key={PH}")),
                "the body is kept: {out}"
            );
            assert_eq!(out.len(), req.len(), "same shape, same length");
            assert_eq!(injected, ["KEY"]);
            let places: Vec<&str> = seen.iter().map(|(_, p)| *p).collect();
            assert_eq!(places, ["a request body", "a request line"], "step {step}");
        }
    }

    #[test]
    fn another_host_gets_the_placeholder_and_it_is_named() {
        let req = format!("GET / HTTP/1.1\r\nAuthorization: Bearer {PH}\r\n\r\n");
        let (out, injected, seen) = run("other.test", &req, 5);
        assert_eq!(out.unwrap(), req);
        assert!(injected.is_empty());
        assert_eq!(
            seen,
            [(
                "KEY".to_string(),
                "the headers of a request to another host"
            )]
        );
    }

    #[test]
    fn a_chunked_body_and_an_upgrade_pass_as_they_are() {
        let req = format!(
            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n0\r\n\r\nGET /ws HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nAuthorization: {PH}\r\n\r\n\x01\x05GET / HTTP/1.1 {PH}"
        );
        let (out, _, seen) = run("api.test", &req, 3);
        let out = out.unwrap();
        assert!(
            out.contains(&format!("Authorization: {REAL}\r\n\r\n\u{1}")),
            "{out:?}"
        );
        assert!(
            out.ends_with(&format!("GET / HTTP/1.1 {PH}")),
            "raw after the upgrade: {out:?}"
        );
        assert_eq!(
            seen,
            [("KEY".to_string(), "the bytes after a protocol upgrade")]
        );
    }

    #[test]
    fn bad_heads_end_the_connection() {
        let (out, ..) = run(
            "api.test",
            &format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(5000)),
            100,
        );
        assert!(out.unwrap_err().contains("over 4096 bytes"));
        let (out, ..) = run(
            "api.test",
            "GET / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
            100,
        );
        assert!(out.unwrap_err().contains("smuggling"));
        let (out, ..) = run("api.test", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 100);
        assert!(out.unwrap_err().contains("HTTP/1.1 only"));
        let (out, ..) = run(
            "api.test",
            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            100,
        );
        assert!(out.unwrap_err().contains("framing broke"));
    }
}
