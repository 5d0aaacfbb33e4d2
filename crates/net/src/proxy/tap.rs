//! `--net-record`: the HTTP/1.1 exchanges of one connection, cut out of the two byte
//! streams the proxy relays (the client's as it sent it, before any `--inject-env`
//! rewriting, and the upstream's). Request and response bodies are kept without their
//! transfer coding, at most `BODY_MAX` each (a larger one is counted, not kept). A protocol
//! upgrade, bytes that are not HTTP/1.x or more than [`PENDING_MAX`] requests ahead of their
//! answers stop the recording of the connection (what was relayed is not changed: the tap
//! only watches).

use std::collections::VecDeque;

use super::body::{values, Chunk, Framer};
use super::http;
use crate::cassette::{kept_headers, Exchange, BODY_MAX};

/// Requests waiting for their answer (pipelining) before the tap gives up.
const PENDING_MAX: usize = 4;
/// The longest head kept (the proxy's own cap for requests).
const HEAD_MAX: usize = 64 * 1024;

/// A message being read: its head, then its body.
enum Side {
    Head(Vec<u8>),
    Body(Framer),
    /// A response without a length: its body ends with the connection.
    UntilClose,
}

/// A request seen, waiting for its answer.
struct Pending {
    ex: Exchange,
    /// The request's body ended.
    complete: bool,
    too_large: bool,
}

/// A response being read.
struct Answer {
    status: u16,
    reason: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    too_large: bool,
}

/// A head's first line and its header fields.
pub(crate) type Head<'a> = (&'a str, Vec<(&'a str, &'a str)>);

/// The tap of one connection; every finished exchange goes to `sink`.
pub(crate) struct Tap<'a> {
    scheme: &'static str,
    host: String,
    port: u16,
    req: Side,
    resp: Side,
    pending: VecDeque<Pending>,
    /// The response being read.
    answer: Option<Answer>,
    /// Why the tap stopped, once it did.
    pub(crate) stopped: Option<String>,
    sink: &'a dyn Fn(Exchange, Option<String>),
}

impl<'a> Tap<'a> {
    pub(crate) fn new(
        scheme: &'static str,
        (host, port): (&str, u16),
        sink: &'a dyn Fn(Exchange, Option<String>),
    ) -> Tap<'a> {
        Tap {
            scheme,
            host: host.to_ascii_lowercase(),
            port,
            req: Side::Head(Vec::new()),
            resp: Side::Head(Vec::new()),
            pending: VecDeque::new(),
            answer: None,
            stopped: None,
            sink,
        }
    }

    fn stop(&mut self, why: String) {
        if self.stopped.is_none() {
            self.stopped = Some(why);
        }
    }

    /// The client's next bytes.
    pub(crate) fn client(&mut self, mut input: &[u8]) {
        while !input.is_empty() && self.stopped.is_none() {
            match &mut self.req {
                Side::Head(buf) => {
                    let before = buf.len();
                    buf.extend_from_slice(input);
                    let Some(end) = http::head_end(buf).filter(|e| *e <= HEAD_MAX) else {
                        if buf.len() > HEAD_MAX {
                            self.stop("a request head over 64 KiB".into());
                        }
                        return;
                    };
                    let head = std::mem::take(buf);
                    input = &input[end - before..];
                    if let Err(why) = self.request_head(&head[..end]) {
                        return self.stop(why);
                    }
                }
                Side::Body(framer) => {
                    let Some(p) = self.pending.back_mut() else {
                        return self.stop("a request body without its request".into());
                    };
                    let n = decode(framer, input, &mut p.ex.request_body);
                    if p.ex.request_body.len() as u64 > BODY_MAX {
                        p.too_large = true;
                        p.ex.request_body.clear();
                    }
                    input = &input[n..];
                    match framer {
                        Framer::Done => {
                            p.complete = true;
                            self.req = Side::Head(Vec::new());
                        }
                        Framer::Bad(why) => {
                            let why = format!("request body: {why}");
                            return self.stop(why);
                        }
                        _ => {}
                    }
                }
                Side::UntilClose => return,
            }
        }
    }

    fn request_head(&mut self, head: &[u8]) -> Result<(), String> {
        let (line, fields) = parse_head(head)?;
        let parts: Vec<&str> = line.split(' ').collect();
        let [method, target, version] = parts[..] else {
            return Err("a malformed request line".into());
        };
        if !version.starts_with("HTTP/1.") {
            return Err(format!("not HTTP/1.x ({version})"));
        }
        if self.pending.len() >= PENDING_MAX {
            return Err(format!(
                "more than {PENDING_MAX} requests ahead of their answers"
            ));
        }
        let framer = Framer::of_fields(&fields)?;
        let ex = Exchange {
            method: method.to_string(),
            scheme: self.scheme.to_string(),
            host: self.host.clone(),
            port: self.port,
            target: target.to_string(),
            request_headers: kept_headers(fields.iter().copied(), true),
            ..Exchange::default()
        };
        let complete = framer == Framer::Done;
        self.pending.push_back(Pending {
            ex,
            complete,
            too_large: false,
        });
        if !complete {
            self.req = Side::Body(framer);
        }
        Ok(())
    }

    /// The upstream's next bytes.
    pub(crate) fn upstream(&mut self, mut input: &[u8]) {
        while !input.is_empty() && self.stopped.is_none() {
            match &mut self.resp {
                Side::Head(buf) => {
                    let before = buf.len();
                    buf.extend_from_slice(input);
                    let Some(end) = http::head_end(buf).filter(|e| *e <= HEAD_MAX) else {
                        if buf.len() > HEAD_MAX {
                            self.stop("a response head over 64 KiB".into());
                        }
                        return;
                    };
                    let head = std::mem::take(buf);
                    input = &input[end - before..];
                    if let Err(why) = self.response_head(&head[..end]) {
                        return self.stop(why);
                    }
                }
                Side::Body(framer) => {
                    let Some(a) = self.answer.as_mut() else {
                        return;
                    };
                    let n = decode(framer, input, &mut a.body);
                    a.cap();
                    input = &input[n..];
                    match framer {
                        Framer::Done => self.answered(),
                        Framer::Bad(why) => {
                            let why = format!("response body: {why}");
                            return self.stop(why);
                        }
                        _ => {}
                    }
                }
                Side::UntilClose => {
                    if let Some(a) = self.answer.as_mut() {
                        a.body.extend_from_slice(input);
                        a.cap();
                    }
                    return;
                }
            }
        }
    }

    /// Every request seen was answered, and no response is under way.
    pub(crate) fn idle(&self) -> bool {
        self.pending.is_empty() && matches!(&self.resp, Side::Head(b) if b.is_empty())
    }

    /// The upstream's stream ended: a response read to the connection's end is complete.
    pub(crate) fn upstream_ended(&mut self) {
        if matches!(self.resp, Side::UntilClose) && self.stopped.is_none() {
            self.answered();
        }
    }

    fn response_head(&mut self, head: &[u8]) -> Result<(), String> {
        let (line, fields) = parse_head(head)?;
        let mut parts = line.splitn(3, ' ');
        let version = parts.next().unwrap_or_default();
        let status: u16 = parts
            .next()
            .and_then(|s| s.parse().ok())
            .filter(|s| (100..=999).contains(s))
            .ok_or_else(|| "a malformed status line".to_string())?;
        if !version.starts_with("HTTP/1.") {
            return Err(format!("not HTTP/1.x ({version})"));
        }
        let reason = parts.next().unwrap_or_default().to_string();
        if status == 101 {
            return Err("a protocol upgrade (101): not recorded past it".into());
        }
        if (100..200).contains(&status) {
            // An interim answer (100 Continue): the real one follows.
            return Ok(());
        }
        let head_req = self
            .pending
            .front()
            .ok_or_else(|| "a response to no request".to_string())?
            .ex
            .method
            .eq_ignore_ascii_case("HEAD");
        let headers = kept_headers(fields.iter().copied(), false);
        self.answer = Some(Answer {
            status,
            reason,
            headers,
            body: Vec::new(),
            too_large: false,
        });
        let te = values(&fields, "transfer-encoding");
        let cl = values(&fields, "content-length");
        if head_req || status == 204 || status == 304 {
            self.answered();
        } else if te.is_empty() && cl.is_empty() {
            self.resp = Side::UntilClose;
        } else {
            match Framer::of(&te, &cl)? {
                Framer::Done => self.answered(),
                f => self.resp = Side::Body(f),
            }
        }
        Ok(())
    }

    /// The response in `answer` is complete: the exchange goes to the sink.
    fn answered(&mut self) {
        self.resp = Side::Head(Vec::new());
        let Some(Answer {
            status,
            reason,
            headers,
            body,
            too_large,
        }) = self.answer.take()
        else {
            return;
        };
        let Some(p) = self.pending.pop_front() else {
            return;
        };
        let mut ex = p.ex;
        ex.status = status;
        ex.reason = reason;
        ex.response_headers = headers;
        ex.response_body = body;
        let why = if p.too_large || too_large {
            ex.request_body.clear();
            ex.response_body.clear();
            Some(format!("a body over {BODY_MAX} bytes"))
        } else if !p.complete {
            Some("answered before its request's body ended".into())
        } else {
            None
        };
        (self.sink)(ex, why);
    }
}

impl Answer {
    /// A body over `BODY_MAX` is counted, not kept.
    fn cap(&mut self) {
        if self.body.len() as u64 > BODY_MAX {
            self.too_large = true;
            self.body.clear();
        }
    }
}

/// Moves the body bytes of `input` (its transfer coding taken off) to `out`; returns how
/// many bytes of `input` belong to the body.
pub(super) fn decode(framer: &mut Framer, input: &[u8], out: &mut Vec<u8>) -> usize {
    let mut used = 0;
    while used < input.len() {
        let rest = &input[used..];
        let data = match framer {
            Framer::Done | Framer::Bad(_) => break,
            Framer::Length(n) | Framer::Chunked(Chunk::Data(n)) => {
                usize::try_from(*n).unwrap_or(usize::MAX).min(rest.len())
            }
            Framer::Chunked(_) => {
                used += framer.take(&rest[..1]);
                continue;
            }
        };
        if (out.len() as u64) <= BODY_MAX {
            out.extend_from_slice(&rest[..data]);
        }
        used += framer.take(&rest[..data]);
    }
    used
}

/// The first line and the header fields of a head.
pub(crate) fn parse_head(head: &[u8]) -> Result<Head<'_>, String> {
    let text = std::str::from_utf8(head).map_err(|_| "a head that is not text".to_string())?;
    let mut lines = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    let first = lines.next().unwrap_or_default();
    let mut fields = Vec::new();
    for line in lines.take_while(|l| !l.is_empty()) {
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| "a malformed header line".to_string())?;
        fields.push((name.trim(), value.trim()));
    }
    Ok((first, fields))
}

#[cfg(test)]
mod tests;
