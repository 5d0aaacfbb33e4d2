use std::cell::RefCell;

use super::*;

/// Feeds the client's and the upstream's bytes in pieces of `step`; the exchanges seen.
fn tap(
    client: &str,
    upstream: &str,
    step: usize,
) -> (Vec<(Exchange, Option<String>)>, Option<String>) {
    let seen = RefCell::new(Vec::new());
    let sink = |ex, why| seen.borrow_mut().push((ex, why));
    let mut t = Tap::new("https", ("API.test", 443), &sink);
    for piece in client.as_bytes().chunks(step) {
        t.client(piece);
    }
    for piece in upstream.as_bytes().chunks(step) {
        t.upstream(piece);
    }
    t.upstream_ended();
    let stopped = t.stopped.take();
    drop(t);
    (seen.into_inner(), stopped)
}

/// Method, target, request body, status, response body.
type Row<'a> = (&'a str, &'a str, &'a [u8], u16, &'a [u8]);

#[test]
fn keep_alive_exchanges_are_cut_with_their_codings_taken_off() {
    let client = "POST /v1?a=1 HTTP/1.1\r\nHost: api.test\r\nAuthorization: Bearer ph\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=1\r\nde\r\n0\r\n\r\n\
                  HEAD /h HTTP/1.1\r\nHost: api.test\r\n\r\n\
                  GET /last HTTP/1.1\r\n\r\n";
    let upstream = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello\
                    HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n\
                    HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nnope\r\n0\r\nX-T: 1\r\n\r\n";
    for step in [1, 3, 4096] {
        let (seen, stopped) = tap(client, upstream, step);
        assert_eq!(stopped, None);
        let got: Vec<Row<'_>> = seen
            .iter()
            .map(|(e, _)| {
                (
                    e.method.as_str(),
                    e.target.as_str(),
                    &e.request_body[..],
                    e.status,
                    &e.response_body[..],
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("POST", "/v1?a=1", &b"abcde"[..], 200, &b"hello"[..]),
                ("HEAD", "/h", &b""[..], 200, &b""[..]),
                ("GET", "/last", &b""[..], 404, &b"nope"[..]),
            ],
            "step {step}"
        );
        let first = &seen[0].0;
        assert_eq!(first.host, "api.test");
        assert!(first
            .request_headers
            .contains(&("authorization".into(), "(redacted by reprorun)".into())));
        assert!(!first
            .request_headers
            .iter()
            .any(|(n, _)| n == "transfer-encoding"));
        assert!(seen.iter().all(|(_, why)| why.is_none()));
    }
}

#[test]
fn a_response_without_length_ends_with_the_connection() {
    let (seen, _) = tap(
        "GET / HTTP/1.1\r\n\r\n",
        "HTTP/1.0 200 OK\r\n\r\nall of it",
        2,
    );
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].0.response_body, b"all of it");
}

#[test]
fn upgrades_and_garbage_stop_the_recording() {
    let (seen, stopped) = tap(
        "GET /ws HTTP/1.1\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n",
        "HTTP/1.1 101 Switching Protocols\r\n\r\n\x01\x05hello",
        7,
    );
    assert!(seen.is_empty());
    assert!(stopped.unwrap().contains("upgrade"));
    let (seen, stopped) = tap("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "", 100);
    assert!(seen.is_empty());
    assert!(stopped.unwrap().contains("not HTTP/1.x"));
    let (_, stopped) = tap(
        "POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
        "",
        100,
    );
    assert!(stopped.unwrap().contains("smuggling"));
}

#[test]
fn bodies_over_the_cap_are_counted_not_kept() {
    let big = BODY_MAX as usize + 10;
    let upstream = format!("HTTP/1.1 200 OK\r\nContent-Length: {big}\r\n\r\n");
    let seen = RefCell::new(Vec::new());
    let sink = |ex, why| seen.borrow_mut().push((ex, why));
    let mut t = Tap::new("http", ("h", 80), &sink);
    t.client(b"GET / HTTP/1.1\r\n\r\n");
    t.upstream(upstream.as_bytes());
    let chunk = vec![b'x'; 1 << 20];
    let mut left = big;
    while left > 0 {
        let n = left.min(chunk.len());
        t.upstream(&chunk[..n]);
        left -= n;
    }
    drop(t);
    let seen = seen.into_inner();
    assert_eq!(seen.len(), 1);
    assert!(seen[0].0.response_body.is_empty());
    assert!(seen[0].1.as_ref().unwrap().contains("a body over"));
}
