//! What each fuzz target checks of one input: that the parser does not panic, and what it
//! promises. Shared by the cargo-fuzz targets (this file is the `reprorun_fuzz` library of
//! `runtime-tests/fuzz/Cargo.toml`) and the stable pass of the test command
//! (`runtime-tests/fuzz_pass.rs`), so both check the same things. A broken promise panics.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Component, Path};
use std::time::Duration;

use reprorun_runtime::determinism::{clock, date, parse_date, DateChoice};
use reprorun_runtime::fuzzing::proxy::{self, Hello, Socks};
use reprorun_runtime::fuzzing::{elf, mirror};
use reprorun_runtime::security::seccomp::{compile, parse_oci, SeccompProfile, MAX_INSTRUCTIONS};

/// What a target checks of one input (it panics when a promise is broken).
pub type Check = fn(&[u8]);

/// Every target, by name (the directory of its seeds in `runtime-tests/fuzz/seeds/`).
pub const TARGETS: &[(&str, Check)] = &[
    ("proxy_http", proxy_http),
    ("proxy_socks", proxy_socks),
    ("proxy_sni", proxy_sni),
    ("mirror_request", mirror_request),
    ("elf", elf),
    ("duration", duration),
    ("bind", bind),
    ("env", env),
    ("date", date),
    ("user_hostname", user_hostname),
    ("seccomp", seccomp),
];

/// A one-line reason (it goes into the connection log and the run record as it is).
fn check_reason(why: &str) {
    assert!(
        !why.is_empty() && !why.contains(['\n', '\r']),
        "reason {why:?} is not one line"
    );
}

/// A host as the proxy hands it to the allowlist: an IPv4 address, a bracketed IPv6
/// address, or a normalized DNS name (lower-case letters, digits and hyphens, labels of 1 to
/// 63 characters, 253 at most).
fn check_host(host: &str) {
    if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        assert!(v6.parse::<Ipv6Addr>().is_ok(), "host {host:?}");
        return;
    }
    if host.parse::<Ipv4Addr>().is_ok() {
        return;
    }
    assert!((1..=253).contains(&host.len()), "host {host:?} length");
    for label in host.split('.') {
        assert!(
            (1..=63).contains(&label.len())
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'),
            "host {host:?} is not a normalized name"
        );
    }
}

/// The proxy's HTTP path: where a head ends, what it asks for, the head sent upstream and
/// where the request's body ends.
pub fn proxy_http(data: &[u8]) {
    let end = proxy::head_end(data);
    if let Some(end) = end {
        assert!(end <= data.len(), "head end {end}");
        let head = &data[..end];
        assert!(
            head.ends_with(b"\n\n") || head.ends_with(b"\n\r\n"),
            "head {head:?} does not end with a blank line"
        );
        assert_eq!(proxy::head_end(head), Some(end), "input");
        assert_eq!(proxy::head_end(&head[..end - 1]), None, "not the first");
    }
    let (head, rest) = data.split_at(end.unwrap_or(data.len()));
    let request = match proxy::http_request(head) {
        Ok(r) => r,
        Err(why) => return check_reason(&why),
    };
    check_host(&request.host);
    assert_ne!(request.port, 0, "input");
    let Some((upstream, body)) = request.upstream else {
        assert!(head.starts_with(b"CONNECT "), "no upstream head");
        return;
    };
    check_upstream_head(head, &upstream);
    check_body(data.len(), &body, rest);
}

/// The head the proxy sends upstream is one well-formed origin-form head: CRLF line ends
/// and no other CR or LF, no control characters, `Host` first and once, no proxy or
/// hop-by-hop fields, `Connection: close` last, and not much longer than the client's.
fn check_upstream_head(head: &[u8], upstream: &[u8]) {
    let text = std::str::from_utf8(upstream).expect("the upstream head is text");
    assert_eq!(proxy::head_end(upstream), Some(upstream.len()), "{text:?}");
    assert!(upstream.len() <= 2 * head.len() + 64, "{text:?}");
    let body = text
        .strip_suffix("\r\n\r\n")
        .expect("ends with a blank line");
    let lines: Vec<&str> = body.split("\r\n").collect();
    for line in &lines {
        assert!(
            !line.is_empty() && !line.bytes().any(|b| (b < 0x20 && b != b'\t') || b == 0x7f),
            "upstream line {line:?} in {text:?}"
        );
    }
    let first: Vec<&str> = lines[0].split(' ').collect();
    assert_eq!(first.len(), 3, "request line {:?}", lines[0]);
    assert!(head.starts_with(first[0].as_bytes()), "method changed");
    assert!(first[1].starts_with('/'), "not origin-form: {text:?}");
    assert!(lines[1].starts_with("Host: "), "{text:?}");
    assert_eq!(lines.last(), Some(&"Connection: close"), "{text:?}");
    for (i, line) in lines.iter().enumerate().skip(1) {
        let (name, _) = line.split_once(':').expect("a header line has a colon");
        let lower = name.to_ascii_lowercase();
        assert!(
            !["proxy-connection", "proxy-authorization", "keep-alive"].contains(&lower.as_str()),
            "{name} forwarded"
        );
        assert!(i == 1 || lower != "host", "a second Host: {text:?}");
        assert!(i == lines.len() - 1 || lower != "connection", "{text:?}");
    }
    // Sent upstream, it is not a proxy request (an origin server must not relay it on).
    assert!(proxy::http_request(upstream).is_err(), "{text:?}");
}

/// The body framer takes the same bytes however the stream is cut into reads, never more
/// than it was given, and stops only at the end of the request.
fn check_body(data_len: usize, body: &proxy::Body, rest: &[u8]) {
    let mut whole = body.clone();
    let used = whole.take(rest);
    assert!(used <= rest.len(), "input");
    assert!(used == rest.len() || whole.ended(), "stopped early");
    let cut = 1 + data_len % 7;
    for size in [1, cut] {
        let mut pieces = body.clone();
        let taken: usize = rest.chunks(size).map(|c| pieces.take(c)).sum();
        assert_eq!(taken, used, "reads of {size} bytes");
        assert_eq!(pieces.state(), whole.state(), "reads of {size} bytes");
    }
}

/// The proxy's first byte decides: SOCKS5 (0x05), else HTTP (which must refuse SOCKS4).
pub fn proxy_socks(data: &[u8]) {
    if data.first() != Some(&0x05) {
        return proxy_http(data);
    }
    let result = proxy::socks5(data);
    match &result {
        // The handshake reads until it has this many bytes: always more than it has (else
        // it would wait for nothing), and a bounded number (greeting and request, 519).
        Socks::Need(n) => assert!(
            *n > data.len() && *n <= 519,
            "the handshake waits for {n} bytes, holding {}",
            data.len()
        ),
        Socks::NoMethod => {}
        Socks::Refused(why, _) => check_reason(why),
        Socks::Connect { host, port, used } => {
            check_host(host);
            assert!(*used <= data.len(), "{result:?}");
            let _ = port;
            assert_eq!(proxy::socks5(&data[..*used]), result, "own bytes");
        }
    }
    // What follows the request is not part of it; a prefix decides nothing else.
    if !matches!(result, Socks::Need(_)) {
        let mut more = data.to_vec();
        more.extend_from_slice(b"\x05\x01\x00\x03\x01a\x00\x50");
        assert_eq!(proxy::socks5(&more), result, "extended");
    }
    let prefix = proxy::socks5(&data[..data.len() - 1]);
    assert!(
        matches!(prefix, Socks::Need(_)) || prefix == result,
        "prefix {prefix:?}, whole {result:?}"
    );
}

/// The handshake message of the consecutive handshake records at the start of `buf`.
fn handshake_bytes(buf: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut rest = buf;
    while let [0x16, _, _, a, b, tail @ ..] = rest {
        let len = usize::from(u16::from_be_bytes([*a, *b]));
        out.extend_from_slice(&tail[..len.min(tail.len())]);
        rest = tail.get(len..).unwrap_or_default();
    }
    out
}

/// The tunnel's first bytes: a server name returned lies in the ClientHello; a decision
/// taken stays taken whatever follows; more bytes are needed only if every prefix needed
/// more too.
pub fn proxy_sni(data: &[u8]) {
    let hello = proxy::client_hello(data);
    match &hello {
        Hello::Sni(name) => {
            assert!(
                !name.is_empty() && !name.chars().any(|c| c.is_control() || c.is_whitespace()),
                "SNI {name:?} is not a host name"
            );
            let message = handshake_bytes(data);
            assert!(
                message.windows(name.len()).any(|w| w == name.as_bytes()),
                "SNI {name:?} not in the ClientHello"
            );
        }
        Hello::Malformed(why) => check_reason(why),
        Hello::Incomplete => {
            for cut in [data.len().saturating_sub(1), data.len() / 2] {
                let prefix = proxy::client_hello(&data[..cut]);
                assert_eq!(prefix, Hello::Incomplete, "prefix of {cut}");
            }
            return;
        }
        Hello::NotTls | Hello::NoSni => {}
    }
    // A ClientHello followed by more records (a client's early data, a change_cipher_spec)
    // reads the same: the proxy decides on the ClientHello alone (a malformed one may be
    // malformed for another reason once more bytes show more of it).
    let mut more = data.to_vec();
    more.extend_from_slice(&[
        0x14, 0x03, 0x03, 0x00, 0x01, 0x01, 0x17, 0x03, 0x03, 0x00, 0x01,
    ]);
    let again = proxy::client_hello(&more);
    assert!(
        again == hello || matches!((&again, &hello), (Hello::Malformed(_), Hello::Malformed(_))),
        "decided differently with more bytes after it: {again:?}, alone {hello:?}"
    );
}

/// A relative path in the mirror tree naming nothing outside it.
fn check_rel(rel: &str) {
    assert!(
        ["pypi/files/", "pypi/simple/", "npm/"]
            .iter()
            .any(|p| rel.starts_with(p)),
        "{rel:?} outside the served trees"
    );
    for c in Path::new(rel).components() {
        let Component::Normal(part) = c else {
            panic!("{rel:?} has a component {c:?}");
        };
        let part = part.to_str().expect("text");
        assert!(
            !part.starts_with('.') && !part.contains(['\0', '\\']),
            "{rel:?} names {part:?}"
        );
    }
}

/// The mirror server: a request's method, path and `Accept`, and the file they name.
pub fn mirror_request(data: &[u8]) {
    let complete = mirror::head_complete(data);
    let blank = |w: &[u8]| w == b"\r\n\r\n";
    assert_eq!(
        complete,
        data.windows(4).any(blank) || data.windows(2).any(|w| w == b"\n\n"),
        "input"
    );
    let accepts = ["", "application/vnd.pypi.simple.v1+json"];
    let raw = String::from_utf8_lossy(data);
    for accept in accepts {
        if let Some((rel, _)) = mirror::route(&raw, accept) {
            check_rel(&rel);
        }
    }
    let Some((method, path, accept)) = mirror::request(data) else {
        return;
    };
    assert!(["GET", "HEAD"].contains(&method), "{method}");
    assert!(!accept.contains('\n'), "Accept {accept:?}");
    if let Some((rel, ctype)) = mirror::route(&path, &accept) {
        check_rel(&rel);
        assert!(!ctype.is_empty());
    }
}

/// The ELF reader of the exec-time path: only what lies in the file is believed, a file
/// too short for its own headers is nothing, and a smaller budget only takes away.
pub fn elf(data: &[u8]) {
    const MIN_SIZE: usize = 13;
    let full = elf::facts(data, MIN_SIZE, 48 << 20).expect("a memfd");
    let field = |at: usize, n: usize| -> usize {
        data[at..at + n]
            .iter()
            .rev()
            .fold(0, |acc, b| acc << 8 | usize::from(*b))
    };
    if full.kind.is_some() {
        assert!(
            data.len() >= 64 && data.starts_with(b"\x7fELF\x02\x01"),
            "input"
        );
        let (phoff, phnum) = (field(32, 8), field(56, 2));
        assert_eq!(field(54, 2), 56, "input");
        assert!(
            phnum == 0 || phoff.saturating_add(56 * phnum) <= data.len(),
            "program headers past the end"
        );
    }
    if let Some((vaddr, pie)) = full.ticks {
        assert!(vaddr != 0, "input");
        assert!(
            data.windows(21).any(|w| w == b"runtime.cputicks.abi0"),
            "ticks found without the name in the file"
        );
        let entry = (field(16, 2) == 3).then(|| field(24, 8) as u64);
        assert_eq!(pie, entry, "position-independent entry");
    }
    let small = elf::facts(data, MIN_SIZE, 4096).expect("a memfd");
    assert!(
        small.examined.0 <= 4096 && small.examined.1 <= 4096,
        "{small:?}"
    );
    if let Some((is_static, is_go)) = small.kind {
        let (s, g) = full.kind.expect("found with less budget, not with more");
        assert!(is_static == s && (!is_go || g), "{small:?} vs {full:?}");
    }
    assert!(
        small.ticks.is_none() || small.ticks == full.ticks,
        "{small:?} vs {full:?}"
    );
}

/// `reprorun_runtime::parse::duration` (`--timeout`, `--clock tick=STEP`, ...).
pub fn duration(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(d) = reprorun_runtime::parse::duration(text) {
        // The parser refuses anything above 1e9 seconds.
        assert!(d <= Duration::from_secs(1_000_000_000), "{text:?} -> {d:?}");
    }
}

/// What `target` documents for an accepted mount target.
fn check_target(input: &str, p: &Path) {
    assert!(p.is_absolute(), "{input:?} -> {p:?} is not absolute");
    assert!(
        !p.components().any(|c| matches!(c, Component::ParentDir)),
        "{input:?} -> {p:?} has a '..' component"
    );
    assert!(p.components().count() >= 2, "{input:?} -> {p:?} is /");
}

/// `reprorun_runtime::parse::bind` (`--bind SRC:DST[:ro|rw]`) and `reprorun_runtime::parse::target`.
pub fn bind(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(p) = reprorun_runtime::parse::target(text) {
        check_target(text, &p);
        // A normalized target is accepted again, unchanged.
        let again = p.to_str().expect("built from a &str");
        assert_eq!(
            reprorun_runtime::parse::target(again).as_ref(),
            Ok(&p),
            "{text:?}"
        );
    }
    if let Ok(spec) = reprorun_runtime::parse::bind(text) {
        check_target(text, &spec.dest);
        assert!(!spec.src.as_os_str().is_empty(), "{text:?}: empty SRC");
    }
}

/// `reprorun_runtime::parse::env_entry` (`--env KEY=VALUE`) and `reprorun_runtime::parse::env_file`.
pub fn env(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok((k, v)) = reprorun_runtime::parse::env_entry(text) {
        assert!(!k.is_empty() && !k.contains('='), "{text:?}: key {k:?}");
        assert!(!text.contains('\0'), "{text:?} accepted with a NUL");
        // KEY=VALUE splits at the first '=': joining them gives the entry back.
        assert_eq!(format!("{k}={v}"), text);
    }
    if let Ok(entries) = reprorun_runtime::parse::env_file("f", text) {
        assert!(entries.len() <= text.lines().count());
        for (k, v) in &entries {
            assert!(!k.is_empty(), "{text:?}: empty key");
            assert!(!k.contains('='), "{text:?}: key {k:?} contains '='");
            assert!(!k.contains(char::is_whitespace), "{text:?}: key {k:?}");
            assert!(!k.contains('\0') && !v.contains('\0'), "{text:?}: NUL");
        }
    }
}

/// 9999-12-31T23:59:59Z, the last instant `parse_date` accepts (date.rs: MAX_EPOCH).
const MAX_EPOCH: i64 = 253_402_300_799;

/// `reprorun_runtime::determinism::parse_date` (`--date`), `clock::parse_date_choice` and
/// `clock::parse_clock_mode` (`--clock`).
pub fn date(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let parsed = parse_date(text);
    if let Ok(secs) = parsed {
        assert!((0..=MAX_EPOCH).contains(&secs), "{text:?} -> {secs}");
        // Round trip: the RFC 3339 form of an accepted date names the same second
        // (parse_date drops fractions; format_rfc3339 with 0 ns writes ".000").
        let formatted = date::format_rfc3339(secs, 0);
        assert_eq!(
            parse_date(&formatted),
            Ok(secs),
            "{text:?} -> {secs} -> {formatted:?}"
        );
    }
    let choice = clock::parse_date_choice(text);
    if text.trim() == "now" {
        assert_eq!(choice, Ok(DateChoice::Now));
    } else {
        assert_eq!(choice, parsed.map(DateChoice::Pinned), "{text:?}");
    }
    let _ = clock::parse_clock_mode(text);
}

/// `reprorun_runtime::parse::user` (`--user UID:GID`) and `reprorun_runtime::parse::hostname`.
pub fn user_hostname(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok((uid, gid)) = reprorun_runtime::parse::user(text) {
        // The canonical spelling parses to the same pair.
        assert_eq!(
            reprorun_runtime::parse::user(&format!("{uid}:{gid}")),
            Ok((uid, gid))
        );
    }
    if let Ok(name) = reprorun_runtime::parse::hostname(text) {
        assert_eq!(name, text);
        assert!((1..=64).contains(&name.len()), "{text:?}");
    }
}

/// `reprorun_runtime::security::seccomp::parse_oci` (an OCI `linux.seccomp` profile for `--seccomp
/// FILE`) and the compilation of whatever it accepts into BPF.
pub fn seccomp(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(spec) = parse_oci(text) {
        let profile = SeccompProfile::Oci {
            path: "fuzz.json".into(),
            spec,
        };
        // Unsupported actions and operators are errors, never panics; a compiled profile
        // always ends with the x32 blocker, so it is never empty.
        if let Ok(programs) = compile(&profile) {
            assert!(!programs.is_empty());
            assert!(programs
                .iter()
                .all(|p| !p.is_empty() && p.len() <= MAX_INSTRUCTIONS));
        }
    }
}
