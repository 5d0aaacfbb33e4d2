//! The terminating proxy (`--inject-env`) end to end on loopback: a TLS upstream signed by
//! a test CA, a TLS client trusting the run's CA through CONNECT, and what reaches each.

use std::path::PathBuf;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use rustls::{ClientConfig, ClientConnection, RootCertStore, ServerConfig, ServerConnection};
use rustls::{StreamOwned, DEFAULT_VERSIONS};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};

use super::*;
use crate::intercept::{parse_spec, placeholder, Inject, Intercept};

const KEY: &str = "sk-test-0123456789abcdefXYZ";

#[allow(deprecated)]
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A test CA (written to a file, as `--upstream-ca` reads it) and a server configuration
/// for `up.test` signed by it.
fn upstream_tls() -> (tempfile::TempDir, PathBuf, Arc<ServerConfig>) {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ca.pem");
    std::fs::write(&path, ca.pem()).unwrap();
    let key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["up.test".to_string()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    let chain = vec![leaf.der().clone(), ca.der().clone()];
    let config = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(DEFAULT_VERSIONS)
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, PrivateKeyDer::from(key))
        .unwrap();
    (dir, path, Arc::new(config))
}

/// Serves one TLS connection: reads a request head, answers `body` after a head with its
/// length, then closes with close_notify or (`abrupt`) without it.
fn serve_tls(listener: TcpListener, config: Arc<ServerConfig>, body: Vec<u8>, abrupt: bool) {
    let (tcp, _) = listener.accept().unwrap();
    let mut tls = StreamOwned::new(ServerConnection::new(config).unwrap(), tcp);
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match tls.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    // The head as the upstream got it, for the test to check.
    let answer = format!(
        "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nx-request-head: {}\r\n\r\n",
        body.len(),
        String::from_utf8_lossy(&head).replace("\r\n", "|")
    );
    tls.write_all(answer.as_bytes()).unwrap();
    tls.write_all(&body).unwrap();
    if !abrupt {
        tls.conn.send_close_notify();
    }
    tls.flush().unwrap();
    let _ = tls.sock.shutdown(Shutdown::Write);
}

/// A body no run of repeated bytes hides a lost or doubled record in.
fn pattern(len: usize) -> Vec<u8> {
    let mut x = 0x2545_f491_u32;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

/// The upstream of a test.
#[derive(Clone, Copy, PartialEq)]
enum Upstream {
    /// Answers and ends with close_notify.
    Closes,
    /// Answers and closes the socket without close_notify.
    Abrupt,
    /// Its certificate is signed by a CA the proxy does not trust.
    Untrusted,
}

/// Fetches through the terminating proxy a body of `len` bytes: what the client inside got
/// (head and body), the connection's record, and the body the upstream sent.
fn fetch(len: usize, kind: Upstream) -> (Vec<u8>, ConnRecord, Vec<u8>, bool) {
    let (_dir, mut ca, server) = upstream_tls();
    let (_other, other_ca, _) = upstream_tls();
    if kind == Upstream::Untrusted {
        ca = other_ca;
    }
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let body = pattern(len);
    let sent = body.clone();
    let abrupt = kind == Upstream::Abrupt;
    let upstream = std::thread::spawn(move || serve_tls(listener, server, sent, abrupt));
    let (name, host) = parse_spec(&format!("KEY:up.test:{port}")).unwrap();
    let fake = placeholder(&name, KEY).unwrap();
    let inject = Inject {
        name,
        host,
        placeholder: fake.clone(),
    };
    let icpt = Intercept::new(&[inject], Some(&ca), &|_| Some(KEY.into())).unwrap();
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(icpt.ca_pem().as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let cfg = Config::with_intercept(Some(Arc::new(icpt)));
    let (proxy, addr) = proxy_with(up_egress(port), cfg, None);
    let mut c = client(
        addr,
        format!("CONNECT up.test:{port} HTTP/1.1\r\n\r\n").as_bytes(),
    );
    assert_eq!(read_head(&mut c), ESTABLISHED);
    let client_config = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(DEFAULT_VERSIONS)
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = ServerName::try_from("up.test").unwrap();
    let conn = ClientConnection::new(Arc::new(client_config), name).unwrap();
    let mut tls = StreamOwned::new(conn, c);
    let request =
        format!("GET /big HTTP/1.1\r\nHost: up.test\r\nAuthorization: Bearer {fake}\r\n\r\n");
    tls.write_all(request.as_bytes()).unwrap();
    let mut got = Vec::new();
    // Whether the stream ended with close_notify.
    let clean = match tls.read_to_end(&mut got) {
        Ok(_) => true,
        // An upstream's end without close_notify: the client's stream ends the same way.
        Err(e) if abrupt && e.kind() == std::io::ErrorKind::UnexpectedEof => false,
        Err(e) => panic!("after {} bytes: {e}", got.len()),
    };
    upstream.join().unwrap();
    (got, only(proxy.stop().records), body, clean)
}

/// The head and the body of an answer.
fn split(mut got: Vec<u8>) -> (String, Vec<u8>) {
    let end = got.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let head = String::from_utf8(got[..end].to_vec()).unwrap();
    (head, got.split_off(end))
}

#[test]
fn a_large_streamed_answer_arrives_whole_and_the_key_only_upstream() {
    let _l = shared_lock();
    // Larger than every buffer of the relay, and not a multiple of a TLS record.
    let (got, r, body, clean) = fetch(3 * 1024 * 1024 + 7, Upstream::Closes);
    assert!(clean, "the upstream's close_notify reaches the client");
    assert_eq!(r.decision, Decision::Allowed, "{r:#?}");
    assert_eq!(r.injected, vec!["KEY".to_string()]);
    let (head, got) = split(got);
    assert!(head.contains(&format!("Bearer {KEY}")), "{head}");
    assert_eq!(got.len(), body.len());
    assert!(got == body, "the body differs");
}

#[test]
fn an_upstream_closing_without_close_notify_ends_the_answer_as_cut_short() {
    let _l = shared_lock();
    let (got, r, body, clean) = fetch(200 * 1024 + 3, Upstream::Abrupt);
    // No close_notify from the proxy either: a client that checks for truncation (an answer
    // delimited by the connection's end) sees it as it would without the proxy.
    assert!(
        !clean,
        "the proxy must not vouch for an end the upstream did not send"
    );
    assert_eq!(r.decision, Decision::Allowed, "{r:#?}");
    let (head, got) = split(got);
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert!(got == body, "{} bytes of {}", got.len(), body.len());
}

#[test]
fn an_upstream_the_proxy_cannot_verify_gets_nothing_and_the_client_a_502() {
    let _l = shared_lock();
    let (got, r, _, _) = fetch(10, Upstream::Untrusted);
    let text = String::from_utf8(got).unwrap();
    assert!(text.starts_with("HTTP/1.1 502 Bad Gateway\r\n"), "{text}");
    let why = "TLS with the upstream up.test failed: invalid peer certificate";
    assert!(text.contains(why), "{text}");
    assert_eq!(r.decision, Decision::Failed);
    assert!(r.rule.contains(why), "{r:#?}");
    assert!(r.injected.is_empty(), "{r:#?}");
}
