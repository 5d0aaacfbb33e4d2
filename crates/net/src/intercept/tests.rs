use super::*;

const VALUE: &str = "sk-proj-AbCdEf0123456789xyz";

#[test]
fn specs_name_a_variable_and_a_host() {
    let (name, rule) = parse_spec("OPENAI_API_KEY:api.openai.com").unwrap();
    assert_eq!(name, "OPENAI_API_KEY");
    assert_eq!(rule.to_string(), "api.openai.com:443");
    let (_, rule) = parse_spec("K:*.example.com:8443").unwrap();
    assert_eq!(rule.to_string(), "*.example.com:8443");
    for (bad, why) in [
        ("OPENAI_API_KEY", "no `:`"),
        (":api.test", "not a variable name"),
        ("1KEY:api.test", "not a variable name"),
        ("K-EY:api.test", "not a variable name"),
        ("K:127.0.0.1", "name the host"),
        ("K:[::1]:443", "name the host"),
        ("K:*", "bare `*`"),
        ("K:api.test:0", "out of range"),
    ] {
        let e = parse_spec(bad).unwrap_err().to_string();
        assert!(e.contains(why), "{bad}: {e}");
        assert!(e.contains("NAME:HOST[:PORT]"), "{bad}: {e}");
    }
}

#[test]
fn placeholders_keep_the_shape_and_differ_per_run() {
    let a = placeholder("K", VALUE).unwrap();
    let b = placeholder("K", VALUE).unwrap();
    assert_ne!(a, b, "unique per run");
    for p in [&a, &b] {
        assert_eq!(p.len(), VALUE.len());
        assert_ne!(p, VALUE);
        for (x, y) in p.bytes().zip(VALUE.bytes()) {
            assert_eq!(x.is_ascii_lowercase(), y.is_ascii_lowercase(), "{p}");
            assert_eq!(x.is_ascii_uppercase(), y.is_ascii_uppercase(), "{p}");
            assert_eq!(x.is_ascii_digit(), y.is_ascii_digit(), "{p}");
            if !y.is_ascii_alphanumeric() {
                assert_eq!(x, y, "{p}");
            }
        }
    }
}

#[test]
fn short_or_non_ascii_values_are_refused() {
    assert!(matches!(
        placeholder("K", "abc-12345"),
        Err(InjectError::TooShort { found: 8, .. })
    ));
    assert!(matches!(
        placeholder("K", "ключ-0123456789abcdef"),
        Err(InjectError::NotAscii { .. })
    ));
}

fn inject(name: &str, host: &str) -> Inject {
    let (name, host) = parse_spec(&format!("{name}:{host}")).unwrap();
    let placeholder = placeholder(&name, VALUE).unwrap();
    Inject {
        name,
        host,
        placeholder,
    }
}

fn test_ca() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ca.pem");
    let ca = ca::Authority::new().unwrap();
    std::fs::write(&path, ca.pem()).unwrap();
    (dir, path)
}

#[test]
fn an_unset_variable_or_a_value_with_a_line_break_is_refused() {
    let (_d, ca) = test_ca();
    let e = Intercept::new(&[inject("K", "api.test")], Some(&ca), &|_| None).unwrap_err();
    assert!(e.to_string().contains("K is not set"), "{e}");
    let e = Intercept::new(&[inject("K", "api.test")], Some(&ca), &|_| {
        Some("abc\r\nX-Evil: 1".into())
    })
    .unwrap_err();
    assert!(matches!(e, InjectError::NotAscii { .. }), "{e}");
}

#[test]
fn an_upstream_ca_file_without_certificates_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty.pem");
    std::fs::write(&path, "not a certificate\n").unwrap();
    let e = Intercept::new(&[inject("K", "api.test")], Some(&path), &|_| {
        Some(VALUE.into())
    })
    .unwrap_err();
    assert!(e.to_string().contains("no certificate"), "{e}");
    let e = Intercept::new(
        &[inject("K", "api.test")],
        Some(&dir.path().join("missing.pem")),
        &|_| Some(VALUE.into()),
    )
    .unwrap_err();
    assert!(e.to_string().starts_with("--upstream-ca"), "{e}");
}

#[test]
fn the_run_ca_signs_leaves_valid_at_a_date_years_back() {
    use rustls::client::danger::ServerCertVerifier;
    use rustls_pki_types::{ServerName, UnixTime};
    let (_d, ca) = test_ca();
    let icpt =
        Intercept::new(&[inject("K", "*.test")], Some(&ca), &|_| Some(VALUE.into())).unwrap();
    assert!(icpt.terminates(&Target::Name("api.test".into()), 443));
    assert!(!icpt.terminates(&Target::Name("api.test".into()), 8443));
    assert!(!icpt.terminates(&Target::Name("test".into()), 443));
    // The leaf for a name, verified as a client inside would (trusting the run's CA only),
    // at the fake clock's dates: 1980 and 2024.
    let (chain, _key) = icpt.authority.leaf("api.test").unwrap();
    let roots = roots(&icpt.ca_pem()).unwrap();
    let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
        Arc::new(roots),
        Arc::new(provider()),
    )
    .build()
    .unwrap();
    let name = ServerName::try_from("api.test").unwrap();
    for secs in [315_532_800u64, 1_704_067_200] {
        verifier
            .verify_server_cert(
                &chain[0],
                &chain[1..],
                &name,
                &[],
                UnixTime::since_unix_epoch(std::time::Duration::from_secs(secs)),
            )
            .unwrap_or_else(|e| panic!("at {secs}: {e}"));
    }
    let other = ServerName::try_from("other.test").unwrap();
    assert!(verifier
        .verify_server_cert(&chain[0], &chain[1..], &other, &[], UnixTime::now())
        .is_err());
    // The sandbox's bundle holds the run's CA certificate, never a private key.
    let bundle = icpt.bundle();
    assert!(bundle.contains(icpt.ca_pem().trim()));
    assert!(!bundle.contains("PRIVATE KEY"));
    assert!(!format!("{icpt:?}").contains(VALUE));
}

#[test]
fn key_exchange_offers_x25519_first() {
    // A P-384 key share first made the upstream do its slowest exchange on every handshake.
    let names: Vec<_> = provider().kx_groups.iter().map(|g| g.name()).collect();
    use rustls::NamedGroup::{secp256r1, secp384r1, X25519};
    assert_eq!(names, vec![X25519, secp256r1, secp384r1]);
}

#[test]
fn an_upstream_ca_that_is_a_fifo_or_a_device_is_refused_without_waiting() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("ca.pem");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    for path in [fifo.as_path(), Path::new("/dev/zero")] {
        let e = Intercept::new(&[inject("K", "api.test")], Some(path), &|_| {
            Some(VALUE.into())
        })
        .unwrap_err();
        assert!(
            e.to_string().starts_with("--upstream-ca") && e.to_string().contains("regular"),
            "{}: {e}",
            path.display()
        );
    }
}
