use super::*;

fn exchange(target: &str, body: &str, answer: &str) -> Exchange {
    Exchange {
        method: "GET".into(),
        scheme: "https".into(),
        host: "api.test".into(),
        port: 443,
        target: target.into(),
        request_headers: vec![
            ("accept-encoding".into(), "identity".into()),
            ("user-agent".into(), "curl/8".into()),
        ],
        request_body: body.as_bytes().to_vec(),
        status: 200,
        reason: "OK".into(),
        response_headers: vec![("content-type".into(), "text/plain".into())],
        response_body: answer.as_bytes().to_vec(),
    }
}

fn key(target: &str, headers: &[(&str, &str)], body: &str) -> Key {
    let headers: Vec<(String, String)> = headers
        .iter()
        .map(|(n, v)| ((*n).to_string(), (*v).to_string()))
        .collect();
    Key::new(
        "GET",
        ("https", "API.test", 443),
        target,
        &headers,
        &sha256_hex(body.as_bytes()),
    )
}

#[test]
fn keys_match_on_method_url_chosen_headers_and_body_only() {
    let a = key(
        "/x?q=1",
        &[("Accept-Encoding", "identity"), ("User-Agent", "a")],
        "",
    );
    let b = key(
        "/x?q=1",
        &[("accept-encoding", "identity"), ("User-Agent", "b")],
        "",
    );
    assert_eq!(a, b, "the host's case and unchosen headers do not matter");
    assert_ne!(a, key("/x?q=2", &[("accept-encoding", "identity")], ""));
    assert_ne!(a, key("/x?q=1", &[("accept-encoding", "gzip")], ""));
    assert_ne!(a, key("/x?q=1", &[("accept-encoding", "identity")], "body"));
    assert_eq!(
        key("/x", &[("Range", "bytes=0-1")], "b").describe(),
        format!(
            "GET https://api.test/x [range: bytes=0-1] [body sha256 {}]",
            &sha256_hex(b"b")[..12]
        )
    );
}

#[test]
fn credentials_and_hop_by_hop_fields_are_not_written() {
    let kept = kept_headers(
        [
            ("Authorization", "Bearer sk-secret"),
            ("Connection", "keep-alive"),
            ("Cookie", "s=1"),
            ("Accept", "*/*"),
        ],
        true,
    );
    assert_eq!(
        kept,
        [
            (
                "authorization".to_string(),
                "(redacted by reprorun)".to_string()
            ),
            ("cookie".to_string(), "(redacted by reprorun)".to_string()),
            ("accept".to_string(), "*/*".to_string()),
        ]
    );
}

#[test]
fn a_written_cassette_loads_and_answers_repeats_in_recorded_order() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("cassette");
    let w = Writer::create(&dir).unwrap();
    w.add(exchange("/n", "", "first"), None);
    w.add(exchange("/n", "", "second"), None);
    w.add(exchange("/other", "", "first"), None);
    w.add(
        exchange("/big", "", "x"),
        Some("a body over 16777216 bytes".into()),
    );
    assert_eq!(w.finish().unwrap(), 3);
    // "first" is written once.
    assert_eq!(std::fs::read_dir(dir.join(BODIES)).unwrap().count(), 3);
    let index: Index =
        serde_json::from_str(&std::fs::read_to_string(dir.join(INDEX)).unwrap()).unwrap();
    assert_eq!(index.format, FORMAT);
    assert_eq!(
        index.not_recorded,
        ["GET https://api.test:443/big: a body over 16777216 bytes"]
    );
    assert_eq!(index.entries[1].order, 1);
    assert_eq!(index.entries[1].response_body, Body::of(b"second"));

    let c = Cassette::load(&dir).unwrap();
    assert_eq!(c.len(), 3);
    assert!(c.serves("API.TEST", 443) && !c.serves("api.test", 80));
    let k = key("/n", &[("accept-encoding", "identity")], "");
    let bodies: Vec<Vec<u8>> = (0..3)
        .map(|_| c.answer(&k).unwrap().body.to_vec())
        .collect();
    assert_eq!(
        bodies,
        [b"first".to_vec(), b"second".to_vec(), b"second".to_vec()]
    );
    assert!(
        c.answer(&key("/n", &[], "")).is_none(),
        "accept-encoding differs"
    );
    assert!(
        Writer::create(&dir).is_err(),
        "a cassette is not written over"
    );
}

#[test]
fn a_corrupted_cassette_is_refused_with_one_line() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("c");
    let w = Writer::create(&dir).unwrap();
    w.add(exchange("/", "", "answer"), None);
    w.finish().unwrap();
    let body = dir.join(BODIES).join(sha256_hex(b"answer"));
    std::fs::write(&body, "changed").unwrap();
    let e = Cassette::load(&dir).err().unwrap().to_string();
    assert!(e.contains("its SHA-256 is not its name"), "{e}");
    assert!(!e.contains('\n'));
    std::fs::remove_file(&body).unwrap();
    let e = Cassette::load(&dir).err().unwrap().to_string();
    assert!(
        e.starts_with(&format!("--net-replay {}: bodies/", dir.display())),
        "{e}"
    );
    std::fs::write(
        dir.join(INDEX),
        "{\"format\": \"reprorun-cassette/1\", \"entries\": [",
    )
    .unwrap();
    let e = Cassette::load(&dir).err().unwrap().to_string();
    assert!(e.contains("index.json: not a cassette index"), "{e}");
    assert!(!e.contains('\n'));
    std::fs::write(
        dir.join(INDEX),
        "{\"format\": \"other/2\", \"entries\": []}",
    )
    .unwrap();
    let e = Cassette::load(&dir).err().unwrap().to_string();
    assert!(e.contains("format \"other/2\""), "{e}");
}

#[test]
fn index_entries_are_checked() {
    let entry = |sha: &str, status: u16, header: &str| {
        format!(
            r#"{{"format":"{FORMAT}","entries":[{{"order":0,"method":"GET","scheme":"https","host":"h","port":443,"target":"/","request_headers":[],"request_body":{{"sha256":"{e}","size":0}},"status":{status},"reason":"OK","response_headers":[["{header}","v"]],"response_body":{{"sha256":"{sha}","size":0}}}}]}}"#,
            e = sha256_hex(b"")
        )
    };
    let empty = sha256_hex(b"");
    assert!(replay::parse_index(&entry(&empty, 200, "x-a")).is_ok());
    let bad = [
        (entry("../../etc/passwd", 200, "x-a"), "is not a SHA-256"),
        (entry(&empty, 42, "x-a"), "malformed response head"),
        (
            entry(&empty, 200, "x-a\\r\\nx-b"),
            "malformed response head",
        ),
    ];
    for (text, why) in bad {
        let e = replay::parse_index(&text).unwrap_err();
        assert!(e.contains(why), "{e}");
    }
}

#[test]
fn links_are_not_followed_at_the_cassette() {
    let d = tempfile::tempdir().unwrap();
    let real = d.path().join("real");
    std::fs::create_dir(&real).unwrap();
    let link = d.path().join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    assert!(Writer::create(&link).is_err());
    assert!(Writer::create(&link.join("sub")).is_err());
    assert!(!real.join("sub").exists());
    assert!(Cassette::load(&link).is_err());
}

#[test]
fn what_the_helper_sends_is_read_within_bounds() {
    use std::io::Write;
    let ex = exchange("/w", "req", "resp");
    let meta = serde_json::to_vec(&ex).unwrap();
    let mut f = tempfile::tempfile().unwrap();
    f.write_all(&meta).unwrap();
    f.write_all(b"reqresp").unwrap();
    let fd = |f: &std::fs::File| std::os::fd::OwnedFd::from(f.try_clone().unwrap());
    let (got, why) = store::read_wire(fd(&f), [meta.len() as u64, 3, 4]).unwrap();
    assert_eq!((got, why), (ex.clone(), None));
    // Lengths past the bounds are refused before anything is read; short files too.
    assert!(store::read_wire(fd(&f), [meta.len() as u64, BODY_MAX + 1, 0]).is_none());
    assert!(store::read_wire(fd(&f), [store::META_MAX + 1, 0, 0]).is_none());
    assert!(store::read_wire(fd(&f), [meta.len() as u64, 3, 40]).is_none());
    // A description out of the index's bounds is refused.
    let mut bad = ex;
    bad.scheme = "gopher".into();
    let meta = serde_json::to_vec(&bad).unwrap();
    let mut f = tempfile::tempfile().unwrap();
    f.write_all(&meta).unwrap();
    assert!(store::read_wire(fd(&f), [meta.len() as u64, 0, 0]).is_none());
}
