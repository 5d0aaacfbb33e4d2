//! Where the body of an absolute-form request ends, so that the proxy forwards one request
//! per connection and nothing after it (RFC 9112 §6: `Transfer-Encoding: chunked`, else
//! `Content-Length`, else no body). A client that pipelines a second request behind the
//! first would otherwise have it relayed to the first request's upstream with a `Host` of
//! its choosing, decided and recorded by nobody.
//!
//! The framer sees every byte of the body once, in order, and takes bytes one by one, so a
//! chunk-size line split across reads needs no look-ahead.

/// Longest chunk-size line (size, extensions, trailer field) accepted.
const LINE_CAP: usize = 4096;

/// The body framing of a request, and how far into it the relay is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Framer {
    /// This many body bytes still to come.
    Length(u64),
    /// A chunked body, in this state.
    Chunked(Chunk),
    /// The message is complete: nothing more of the client's is the request's.
    Done,
    /// The chunked framing broke (the rest is not forwarded).
    Bad(&'static str),
}

/// Where a chunked body is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Chunk {
    /// In a chunk-size line: the size so far, whether a digit was seen, whether extensions
    /// began, the line's length.
    Size {
        size: u64,
        digits: bool,
        ext: bool,
        len: usize,
    },
    /// The LF after the size line's CR.
    SizeLf {
        size: u64,
    },
    /// This many data bytes of the chunk still to come.
    Data(u64),
    /// The CR, then the LF, after a chunk's data.
    DataCr,
    DataLf,
    /// In a trailer field line (or the final empty line): its length so far.
    Trailer {
        len: usize,
    },
    /// The LF after a trailer line's CR (`empty`: the line was empty: the body ends).
    TrailerLf {
        empty: bool,
    },
}

/// The values of the header fields named `name` (any case), in order.
pub(super) fn values<'a>(fields: &[(&str, &'a str)], name: &str) -> Vec<&'a str> {
    fields
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| *v)
        .collect()
}

/// Whether a `Connection` field among `fields` names `option` (`close`, `upgrade`).
pub(super) fn connection_has(fields: &[(&str, &str)], option: &str) -> bool {
    values(fields, "connection")
        .iter()
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case(option))
}

impl Framer {
    /// The framing a head's fields declare (see [`Framer::of`]).
    pub(super) fn of_fields(fields: &[(&str, &str)]) -> Result<Framer, String> {
        Framer::of(
            &values(fields, "transfer-encoding"),
            &values(fields, "content-length"),
        )
    }

    /// The framing the request head declares: `Transfer-Encoding` (chunked only) wins and
    /// must come alone; `Content-Length` must be one number (repeated identically at most).
    pub(super) fn of(te: &[&str], cl: &[&str]) -> Result<Framer, String> {
        if !te.is_empty() {
            if !cl.is_empty() {
                return Err("both Transfer-Encoding and Content-Length (request smuggling)".into());
            }
            let codings: Vec<String> = te
                .iter()
                .flat_map(|v| v.split(','))
                .map(|c| c.trim().to_ascii_lowercase())
                .filter(|c| !c.is_empty())
                .collect();
            return match codings.as_slice() {
                [only] if only == "chunked" => Ok(Framer::Chunked(Chunk::start())),
                _ => Err(format!(
                    "unsupported Transfer-Encoding {:?} (only chunked)",
                    te.join(", ")
                )),
            };
        }
        let mut length: Option<u64> = None;
        for value in cl.iter().flat_map(|v| v.split(',')) {
            let v = value.trim();
            let n = (!v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                .then(|| v.parse::<u64>().ok())
                .flatten()
                .ok_or_else(|| format!("invalid Content-Length {v:?}"))?;
            if length.is_some_and(|l| l != n) {
                return Err("conflicting Content-Length values".into());
            }
            length = Some(n);
        }
        Ok(match length {
            Some(0) | None => Framer::Done,
            Some(n) => Framer::Length(n),
        })
    }

    /// Whether the request is complete (or its framing broke): nothing more is forwarded.
    pub(super) fn ended(&self) -> bool {
        matches!(self, Framer::Done | Framer::Bad(_))
    }

    /// How many of the next `room` bytes may be taken without looking at them (a length
    /// body), or `None` when they must be looked at ([`Framer::take`]).
    pub(super) fn blind(&self, room: usize) -> Option<usize> {
        match self {
            Framer::Length(n) => Some(usize::try_from(*n).unwrap_or(usize::MAX).min(room)),
            Framer::Done | Framer::Bad(_) => Some(0),
            Framer::Chunked(_) => None,
        }
    }

    /// Takes `k` bytes [`Framer::blind`] allowed without looking at them.
    pub(super) fn advance(&mut self, k: usize) {
        if let Framer::Length(n) = self {
            *n = n.saturating_sub(k as u64);
            if *n == 0 {
                *self = Framer::Done;
            }
        }
    }

    /// Takes the next bytes of the client's stream; returns how many belong to the request
    /// (all of them until it ends).
    pub(super) fn take(&mut self, bytes: &[u8]) -> usize {
        let mut used = 0;
        while used < bytes.len() {
            match self {
                Framer::Done | Framer::Bad(_) => break,
                Framer::Length(n) => {
                    let k = usize::try_from(*n)
                        .unwrap_or(usize::MAX)
                        .min(bytes.len() - used);
                    used += k;
                    *n -= k as u64;
                    if *n == 0 {
                        *self = Framer::Done;
                    }
                }
                Framer::Chunked(c) => {
                    // A chunk's data goes in one step; everything else byte by byte.
                    if let Chunk::Data(left) = c {
                        let k = usize::try_from(*left)
                            .unwrap_or(usize::MAX)
                            .min(bytes.len() - used);
                        used += k;
                        *left -= k as u64;
                        if *left == 0 {
                            *c = Chunk::DataCr;
                        }
                        continue;
                    }
                    let next = c.step(bytes[used]);
                    used += 1;
                    *self = next;
                }
            }
        }
        used
    }
}

impl Chunk {
    fn start() -> Chunk {
        Chunk::Size {
            size: 0,
            digits: false,
            ext: false,
            len: 0,
        }
    }

    /// The framer after byte `b` (never called in `Data`).
    fn step(self, b: u8) -> Framer {
        let go = |c: Chunk| Framer::Chunked(c);
        match self {
            Chunk::Size { len, .. } if len >= LINE_CAP => Framer::Bad("chunk-size line too long"),
            Chunk::Size {
                size,
                digits,
                ext,
                len,
            } => match b {
                b'\r' if digits => go(Chunk::SizeLf { size }),
                b'\n' if digits => go(Chunk::after_size(size)),
                _ if ext => go(Chunk::Size {
                    size,
                    digits,
                    ext,
                    len: len + 1,
                }),
                b';' | b' ' | b'\t' if digits => go(Chunk::Size {
                    size,
                    digits,
                    ext: true,
                    len: len + 1,
                }),
                _ => match (b as char).to_digit(16) {
                    Some(d) => match size
                        .checked_mul(16)
                        .and_then(|s| s.checked_add(u64::from(d)))
                    {
                        Some(size) => go(Chunk::Size {
                            size,
                            digits: true,
                            ext,
                            len: len + 1,
                        }),
                        None => Framer::Bad("chunk size overflows"),
                    },
                    None => Framer::Bad("malformed chunk size"),
                },
            },
            Chunk::SizeLf { size } if b == b'\n' => go(Chunk::after_size(size)),
            Chunk::SizeLf { .. } => Framer::Bad("malformed chunk-size line"),
            Chunk::Data(_) => Framer::Bad("internal: data taken byte by byte"),
            Chunk::DataCr if b == b'\r' => go(Chunk::DataLf),
            Chunk::DataCr | Chunk::DataLf if b == b'\n' => go(Chunk::start()),
            Chunk::DataCr | Chunk::DataLf => Framer::Bad("chunk data not followed by CRLF"),
            Chunk::Trailer { len } if len >= LINE_CAP => Framer::Bad("trailer line too long"),
            Chunk::Trailer { len } => match b {
                b'\r' => go(Chunk::TrailerLf { empty: len == 0 }),
                b'\n' if len == 0 => Framer::Done,
                b'\n' => go(Chunk::Trailer { len: 0 }),
                _ => go(Chunk::Trailer { len: len + 1 }),
            },
            Chunk::TrailerLf { empty: true } if b == b'\n' => Framer::Done,
            Chunk::TrailerLf { empty: false } if b == b'\n' => go(Chunk::Trailer { len: 0 }),
            Chunk::TrailerLf { .. } => Framer::Bad("malformed trailer line"),
        }
    }

    /// After a complete size line: the data, or (size 0) the trailer section.
    fn after_size(size: u64) -> Chunk {
        if size == 0 {
            Chunk::Trailer { len: 0 }
        } else {
            Chunk::Data(size)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framer(te: &[&str], cl: &[&str]) -> Framer {
        Framer::of(te, cl).unwrap()
    }

    #[test]
    fn the_head_declares_the_framing() {
        assert_eq!(framer(&[], &[]), Framer::Done);
        assert_eq!(framer(&[], &["0"]), Framer::Done);
        assert_eq!(framer(&[], &["12"]), Framer::Length(12));
        assert_eq!(framer(&[], &["12, 12", "12"]), Framer::Length(12));
        assert!(matches!(framer(&["Chunked"], &[]), Framer::Chunked(_)));
        for (te, cl, why) in [
            (&["chunked"][..], &["5"][..], "smuggling"),
            (&["gzip, chunked"], &[], "unsupported"),
            (&["identity"], &[], "unsupported"),
            (&[], &["12", "13"], "conflicting"),
            (&[], &["-1"], "invalid"),
            (&[], &["+5"], "invalid"),
            (&[], &["99999999999999999999999"], "invalid"),
        ] {
            let e = Framer::of(te, cl).unwrap_err();
            assert!(e.contains(why), "{te:?} {cl:?}: {e}");
        }
    }

    #[test]
    fn a_length_body_ends_at_its_length() {
        let mut f = framer(&[], &["5"]);
        assert_eq!(f.blind(100), Some(5));
        assert_eq!(f.take(b"abc"), 3);
        assert_eq!(f.take(b"deGET http://evil/ HTTP/1.1\r\n\r\n"), 2);
        assert!(f.ended());
        assert_eq!(f.take(b"more"), 0);
    }

    #[test]
    fn a_chunked_body_ends_after_its_trailer_whatever_the_reads() {
        let body =
            b"4;ext=1\r\nWiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nX-T: 1\r\n\r\n";
        let after = b"GET http://evil.test/ HTTP/1.1\r\nHost: evil.test\r\n\r\n";
        let mut all = body.to_vec();
        all.extend_from_slice(after);
        // Whole, and one byte at a time: the same end.
        let mut f = framer(&["chunked"], &[]);
        assert_eq!(f.take(&all), body.len());
        assert_eq!(f, Framer::Done);
        let mut f = framer(&["chunked"], &[]);
        let mut taken = 0;
        for b in &all {
            taken += f.take(std::slice::from_ref(b));
        }
        assert_eq!(taken, body.len());
        let mut f = framer(&["chunked"], &[]);
        assert_eq!(f.take(b"0\r\n\r\nrest"), 5);
        assert!(f.ended());
    }

    #[test]
    fn broken_chunked_framing_ends_the_request() {
        for bad in [
            &b"zz\r\n"[..],
            b"\r\n",
            b"3\r\nabcX",
            b"1\rX",
            b"fffffffffffffffffff\r\n",
        ] {
            let mut f = framer(&["chunked"], &[]);
            let used = f.take(bad);
            assert!(matches!(f, Framer::Bad(_)), "{bad:?}: {f:?} after {used}");
        }
        let mut f = framer(&["chunked"], &[]);
        f.take(&vec![b'a'; LINE_CAP + 10]);
        assert!(matches!(f, Framer::Bad(_)));
    }
}
