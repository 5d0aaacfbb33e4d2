use super::*;

fn rule(text: &str) -> Rule {
    Rule::parse(text).unwrap()
}

#[test]
fn each_agent_sends_its_key_to_its_api_or_the_base_urls_host() {
    let k = model_key(Provider::OpenAi, None).unwrap();
    assert_eq!(
        (k.name, k.host.clone()),
        ("OPENAI_API_KEY", rule("api.openai.com:443"))
    );
    assert_eq!(k.spec(), "OPENAI_API_KEY:api.openai.com:443");
    let k = model_key(Provider::Anthropic, None).unwrap();
    assert_eq!(
        (k.name, k.host),
        ("ANTHROPIC_API_KEY", rule("api.anthropic.com:443"))
    );
    let k = model_key(Provider::OpenAi, Some("https://Models.Example:8443/v1?x=1")).unwrap();
    assert_eq!(k.host, rule("models.example:8443"));
    let k = model_key(Provider::Anthropic, Some("HTTPS://gw.example")).unwrap();
    assert_eq!(k.host, rule("gw.example:443"));
}

#[test]
fn a_base_url_the_proxy_cannot_put_the_key_into_is_refused_with_the_way_out() {
    for (url, why) in [
        ("http://api.test:8080/v1", "a http:// model API gets none"),
        ("https://127.0.0.1:8443/v1", "name the host"),
        ("https://user:pw@api.test/v1", "a user or password"),
        ("https:///v1", "no host"),
        ("api.test/v1", "not a URL"),
        ("https://*.test/v1", "a pattern is not a host"),
    ] {
        let e = model_key(Provider::OpenAi, Some(url))
            .unwrap_err()
            .to_string();
        assert!(e.contains(why), "{url}: {e}");
        assert!(e.contains("--key-in-sandbox"), "{url}: {e}");
        assert!(e.starts_with(&format!("--model-base-url {url}: ")), "{e}");
    }
}

#[test]
fn the_key_widens_the_network_to_its_host_and_each_run_gets_its_own_placeholder() {
    // A name no other test sets: the value is read from this process's environment.
    let key = ModelKey {
        name: "REPRORUN_KEYS_TEST_KEY",
        host: rule("api.test:8443"),
        agent: "codex",
    };
    std::env::set_var(key.name, "sk-proj-Abc123def456GHI");
    let mut net = NetChoice::NONE;
    resolve(Some(&key), &KeyArgs::default(), &[], &mut net).unwrap();
    assert_eq!(net.mode, NetMode::Allow);
    assert_eq!(net.egress.rules, vec![rule("api.test:8443")]);
    // Twice: the rule is not repeated.
    resolve(Some(&key), &KeyArgs::default(), &[], &mut net).unwrap();
    assert_eq!(net.egress.rules.len(), 1);
    let mut a = ExecRequest::new(vec!["codex".into()]);
    let mut b = ExecRequest::new(vec!["codex".into()]);
    inject(&mut a, &key).unwrap();
    inject(&mut b, &key).unwrap();
    let (pa, pb) = (&a.egress.inject[0], &b.egress.inject[0]);
    assert_eq!(pa.name, key.name);
    assert_eq!(pa.host, key.host);
    assert_ne!(pa.placeholder, pb.placeholder, "one placeholder per run");
    assert_eq!(pa.placeholder.len(), "sk-proj-Abc123def456GHI".len());
    assert_ne!(pa.placeholder, "sk-proj-Abc123def456GHI");
    // Passed by --pass-env as well: refused, the opt-out named.
    let passed = [(key.name.to_string(), "x".to_string())];
    let e = resolve(Some(&key), &KeyArgs::default(), &passed, &mut net).unwrap_err();
    assert!(e.to_string().contains("--key-in-sandbox"), "{e}");
    // A value too short for a placeholder of its shape.
    std::env::set_var(key.name, "short");
    let e = resolve(Some(&key), &KeyArgs::default(), &[], &mut net).unwrap_err();
    assert!(e.to_string().contains("letters and digits"), "{e}");
    std::env::remove_var(key.name);
    let e = resolve(Some(&key), &KeyArgs::default(), &[], &mut net).unwrap_err();
    assert!(e.to_string().contains("is not set"), "{e}");
    assert!(inject(&mut a, &key).is_err());
}

#[test]
fn without_a_key_nothing_changes_and_upstream_ca_is_refused() {
    let mut net = NetChoice::NONE;
    resolve(None, &KeyArgs::default(), &[], &mut net).unwrap();
    assert_eq!(net, NetChoice::NONE);
    let args = KeyArgs {
        key_in_sandbox: true,
        upstream_ca: Some("/ca.pem".into()),
    };
    assert!(matches!(
        resolve(None, &args, &[], &mut net),
        Err(KeyError::UselessCa)
    ));
    assert_eq!(
        args.argv(),
        ["--key-in-sandbox", "--upstream-ca", "/ca.pem"]
    );
}
