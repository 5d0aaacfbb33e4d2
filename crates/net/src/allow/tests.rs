use super::*;

fn rule(text: &str) -> Rule {
    match Rule::parse(text) {
        Ok(r) => r,
        Err(e) => panic!("{text}: {e}"),
    }
}

fn refused(text: &str) -> String {
    match Rule::parse(text) {
        Ok(r) => panic!("{text} accepted as {r}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn canonical_forms() {
    for (text, shown) in [
        ("pypi.org", "pypi.org:443"),
        ("PyPI.org.", "pypi.org:443"),
        ("pypi.org:443", "pypi.org:443"),
        ("*.pythonhosted.org", "*.pythonhosted.org:443"),
        ("*.PythonHosted.org:8443", "*.pythonhosted.org:8443"),
        ("127.0.0.1:8080", "127.0.0.1:8080"),
        ("[::1]:8080", "[::1]:8080"),
        ("[::1]", "[::1]:443"),
        ("::1", "[::1]:443"),
        ("bücher.example", "xn--bcher-kva.example:443"),
        ("  api.openai.com  ", "api.openai.com:443"),
    ] {
        assert_eq!(rule(text).to_string(), shown, "{text}");
    }
    assert_eq!(
        rule("*.a.b:80").host,
        HostPattern::Suffix("a.b".to_string())
    );
    assert_eq!(
        rule("10.0.0.1").host,
        HostPattern::Ip("10.0.0.1".parse().unwrap())
    );
}

#[test]
fn refused_patterns() {
    let long_label = format!("{}.com", "a".repeat(64));
    let long_name = format!("{}.com", vec!["a".repeat(60); 5].join("."));
    for (text, why) in [
        ("", "empty pattern"),
        ("pypi.org:*", "name the ports"),
        ("pypi.org:0", "out of range"),
        ("pypi.org:65536", "out of range"),
        ("pypi.org:https", "not a number"),
        ("pypi.org:", "not a number"),
        ("*", "bare `*`"),
        ("*:443", "bare `*`"),
        ("a.*.org", "leading label"),
        ("*example.org", "leading label"),
        ("*.*.org", "leading label"),
        ("a..org", "empty label"),
        (".org", "empty label"),
        (long_label.as_str(), "label longer than 63"),
        (long_name.as_str(), "longer than 253"),
        ("under_score.org", "not a letter, digit or hyphen"),
        ("sp ace.org", "IDNA"),
        ("[::1", "closing"),
        ("[1.2.3.4]:80", "not an IPv6"),
        ("[::1]80", "`:PORT`"),
        ("1::2::3", "brackets"),
        (":443", "no host"),
    ] {
        let e = refused(text);
        assert!(e.contains(why), "{text:?}: {e}");
        assert!(e.starts_with("allow pattern "), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }
}

#[test]
fn read_file_skips_comments() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("allow");
    std::fs::write(
        &path,
        "# mirrors\n\npypi.org\n  *.pythonhosted.org:443 \n#x\n",
    )
    .unwrap();
    let rules = read_file(&path).unwrap();
    let shown: Vec<String> = rules.iter().map(Rule::to_string).collect();
    assert_eq!(shown, ["pypi.org:443", "*.pythonhosted.org:443"]);
    std::fs::write(&path, "pypi.org\nbad:port\n").unwrap();
    assert!(matches!(read_file(&path), Err(AllowError::Pattern { .. })));
    assert!(matches!(
        read_file(&dir.path().join("missing")),
        Err(AllowError::File { .. })
    ));
}

#[test]
fn add_host_forms() {
    let v4: IpAddr = "1.2.3.4".parse().unwrap();
    let v6: IpAddr = "::1".parse().unwrap();
    for (text, name, ip) in [
        ("Name.Example:1.2.3.4", "name.example", v4),
        ("name.example=1.2.3.4", "name.example", v4),
        ("name.example:[::1]", "name.example", v6),
        ("name.example:::1", "name.example", v6),
        ("name.example=::1", "name.example", v6),
    ] {
        assert_eq!(
            parse_add_host(text).unwrap(),
            (name.to_string(), ip),
            "{text}"
        );
    }
    for text in [
        "name.example",
        "name.example:nope",
        ":1.2.3.4",
        "a..b:1.2.3.4",
    ] {
        let e = parse_add_host(text).unwrap_err().to_string();
        assert!(e.starts_with("--add-host"), "{e}");
    }
}

fn egress(rules: &[&str]) -> Egress {
    Egress {
        rules: rules.iter().map(|r| rule(r)).collect(),
        ..Egress::default()
    }
}

fn name(n: &str) -> Target {
    Target::parse(n).unwrap()
}

#[test]
fn matching() {
    let e = egress(&[
        "pypi.org",
        "*.pythonhosted.org",
        "pypi.org:8443",
        "127.0.0.1:8080",
    ]);
    assert_eq!(
        e.decide(&name("PYPI.org."), 443).unwrap().to_string(),
        "pypi.org:443"
    );
    assert_eq!(
        e.decide(&name("pypi.org"), 8443).unwrap().to_string(),
        "pypi.org:8443"
    );
    assert_eq!(
        e.decide(&name("files.pythonhosted.org"), 443)
            .unwrap()
            .to_string(),
        "*.pythonhosted.org:443"
    );
    assert!(e.decide(&name("a.b.pythonhosted.org"), 443).is_ok());
    assert_eq!(
        e.decide(&name("127.0.0.1"), 8080).unwrap().to_string(),
        "127.0.0.1:8080"
    );
    let refusals = [
        (name("pythonhosted.org"), 443, "egress to pythonhosted.org:443 not in the allowlist"),
        (name("xpythonhosted.org"), 443, "egress to xpythonhosted.org:443 not in the allowlist"),
        (name("evil.example"), 443, "egress to evil.example:443 not in the allowlist"),
        (
            name("pypi.org"),
            80,
            "egress to pypi.org:80: port 80 not allowed for pypi.org (allowed: 443, 8443)",
        ),
        (
            name("files.pythonhosted.org"),
            80,
            "egress to files.pythonhosted.org:80: port 80 not allowed for files.pythonhosted.org (allowed: 443)",
        ),
        (name("10.1.2.3"), 443, "egress to 10.1.2.3:443: IP literal not in the allowlist"),
        (name("[::1]"), 8080, "egress to [::1]:8080: IP literal not in the allowlist"),
        (
            name("127.0.0.1"),
            80,
            "egress to 127.0.0.1:80: port 80 not allowed for 127.0.0.1 (allowed: 8080)",
        ),
    ];
    for (target, port, why) in refusals {
        assert_eq!(e.decide(&target, port).unwrap_err().to_string(), why);
    }
    assert!(egress(&[]).decide(&name("pypi.org"), 443).is_err());
}

#[test]
fn targets() {
    assert_eq!(name("[::1]"), Target::Ip("::1".parse().unwrap()));
    assert_eq!(name("::1"), Target::Ip("::1".parse().unwrap()));
    assert_eq!(
        name("Bücher.Example."),
        Target::Name("xn--bcher-kva.example".into())
    );
    assert!(Target::parse("").is_err());
    assert!(Target::parse("a b").is_err());
    assert!(Target::parse("*.x").is_err());
    let e = egress(&["1.2.3.4:80", "[::1]:80"]);
    assert!(e.allows_ip("1.2.3.4".parse().unwrap(), 80));
    assert!(!e.allows_ip("1.2.3.4".parse().unwrap(), 443));
    assert!(e.allows_ip("::1".parse().unwrap(), 80));
}
