use super::*;

/// A mirror setup as podman users write it (containers-registries.conf(5), version 2), with
/// its search registries and the keys reprorun does not use (short-name mode, aliases).
const CONF: &str = r#"
unqualified-search-registries = ["registry.fedoraproject.org", "docker.io"]
short-name-mode = "enforcing"

[[registry]]
prefix = "docker.io"
location = "docker.io"

[[registry.mirror]]
location = "mirror.example.com:5000"
insecure = true

[[registry.mirror]]
location = "digests.example.com/hub"
pull-from-mirror = "digest-only"

[[registry]]
prefix = "ghcr.io/epoch-research"
location = "registry.internal:443/epoch"

[[registry]]
prefix = "quay.io"
blocked = true

[[registry]]
location = "localhost:5000"
insecure = true

[[registry]]
prefix = "*.corp.example"

[[registry.mirror]]
location = "cache.corp.example"

[aliases]
"python" = "docker.io/library/python"
"#;

/// The same registry-a rule containers/image's tests use (a prefix with a path rewritten
/// to another path, two mirrors, one insecure).
const REWRITE: &str = r#"
[[registry]]
prefix = "registry-a.com/foo"
location = "registry-a.com/bar"

[[registry.mirror]]
location = "mirror-1.registry-a.com"

[[registry.mirror]]
location = "mirror-2.registry-a.com"
insecure = true

[[registry]]
prefix = "registry-d.com/foo"
location = "registry-d.com/bar"
mirror-by-digest-only = true

[[registry.mirror]]
location = "mirror-1.registry-d.com"

[[registry.mirror]]
pull-from-mirror = "tag-only"
location = "mirror-2.registry-d.com"
"#;

/// Docker's daemon.json as `dockerd` reads it.
const DAEMON: &str = r#"{
  "registry-mirrors": ["https://mirror.gcr.io", "http://127.0.0.1:5001"],
  "insecure-registries": ["10.0.0.5:5000"],
  "log-driver": "json-file",
  "runtimes": {"reprorun": {"path": "/usr/local/bin/reprorun"}}
}"#;

const HEX: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn load(files: &[(&str, &str)]) -> (tempfile::TempDir, Result<Registries, RegistriesError>) {
    let dir = tempfile::tempdir().unwrap();
    let paths: Vec<PathBuf> = files
        .iter()
        .map(|(name, text)| {
            let p = dir.path().join(name);
            std::fs::write(&p, text).unwrap();
            p
        })
        .collect();
    let r = Registries::load(&paths);
    (dir, r)
}

fn places(r: &Registries, reference: &str) -> Vec<(String, String, bool, bool)> {
    r.endpoints(&Reference::parse(reference).unwrap())
        .unwrap()
        .into_iter()
        .map(|e| (e.registry, e.repository, e.insecure, e.mirror))
        .collect()
}

fn e(reg: &str, repo: &str, insecure: bool, mirror: bool) -> (String, String, bool, bool) {
    (reg.into(), repo.into(), insecure, mirror)
}

#[test]
fn docker_hub_references_go_to_their_mirrors_first() {
    let (_d, r) = load(&[("registries.conf", CONF)]);
    let r = r.unwrap();
    // A SWE-bench instance image, named as the harness names it.
    assert_eq!(
        places(&r, "swebench/sweb.eval.x86_64.psf__requests-2317:latest"),
        vec![
            e(
                "mirror.example.com:5000",
                "swebench/sweb.eval.x86_64.psf__requests-2317",
                true,
                true
            ),
            e(
                "docker.io",
                "swebench/sweb.eval.x86_64.psf__requests-2317",
                false,
                false
            ),
        ]
    );
    // By digest the digest-only mirror serves it too, with its path.
    assert_eq!(
        places(&r, &format!("busybox@sha256:{HEX}")),
        vec![
            e("mirror.example.com:5000", "library/busybox", true, true),
            e("digests.example.com", "hub/library/busybox", false, true),
            e("docker.io", "library/busybox", false, false),
        ]
    );
    let hub = Endpoint {
        registry: "docker.io".into(),
        repository: "library/busybox".into(),
        insecure: false,
        mirror: false,
    };
    assert_eq!(hub.api_host(), "registry-1.docker.io");
}

#[test]
fn prefixes_rewrite_locations_and_block() {
    let (_d, r) = load(&[("registries.conf", CONF)]);
    let r = r.unwrap();
    assert_eq!(
        places(
            &r,
            "ghcr.io/epoch-research/swe-bench.eval.x86_64.astropy__astropy-12907:latest"
        ),
        vec![e(
            "registry.internal:443",
            "epoch/swe-bench.eval.x86_64.astropy__astropy-12907",
            false,
            false
        )]
    );
    // A prefix matches whole components only.
    assert_eq!(
        places(&r, "ghcr.io/epoch-researcher/x:1"),
        vec![e("ghcr.io", "epoch-researcher/x", false, false)]
    );
    // A location without prefix is its own prefix; insecure applies to it.
    assert_eq!(
        places(&r, "localhost:5000/team/app:1"),
        vec![e("localhost:5000", "team/app", true, false)]
    );
    // A wildcard matches subdomains only, and rewrites nothing.
    assert_eq!(
        places(&r, "a.corp.example/x:1"),
        vec![
            e("cache.corp.example", "x", false, true),
            e("a.corp.example", "x", false, false)
        ]
    );
    assert_eq!(places(&r, "corp.example/x:1").len(), 1);
    let err = r
        .endpoints(&Reference::parse("quay.io/org/img:1").unwrap())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("blocked by") && err.contains("registries.conf"),
        "{err}"
    );
}

#[test]
fn containers_image_rewrite_rules_hold() {
    let (_d, r) = load(&[("rewrite.conf", REWRITE)]);
    let r = r.unwrap();
    assert_eq!(
        places(&r, "registry-a.com/foo/image:latest"),
        vec![
            e("mirror-1.registry-a.com", "image", false, true),
            e("mirror-2.registry-a.com", "image", true, true),
            e("registry-a.com", "bar/image", false, false),
        ]
    );
    // mirror-by-digest-only: no mirror serves a tag.
    assert_eq!(
        places(&r, "registry-d.com/foo/image:latest"),
        vec![e("registry-d.com", "bar/image", false, false)]
    );
    assert_eq!(
        places(&r, &format!("registry-d.com/foo/image@sha256:{HEX}")).len(),
        3
    );
}

#[test]
fn docker_daemon_json_mirrors_docker_hub_only() {
    let (_d, r) = load(&[("daemon.json", DAEMON)]);
    let r = r.unwrap();
    assert_eq!(
        places(&r, "python:3.11-slim"),
        vec![
            e("mirror.gcr.io", "library/python", false, true),
            e("127.0.0.1:5001", "library/python", true, true),
            e("docker.io", "library/python", false, false),
        ]
    );
    assert_eq!(
        places(&r, "ghcr.io/o/n:1"),
        vec![e("ghcr.io", "o/n", false, false)]
    );
    assert_eq!(
        places(&r, "10.0.0.5:5000/n:1"),
        vec![e("10.0.0.5:5000", "n", true, false)]
    );
}

#[test]
fn later_files_replace_a_prefix_and_bad_files_are_one_line() {
    let dropin = "[[registry]]\nprefix = \"docker.io\"\nlocation = \"hub.internal\"\n";
    let (_d, r) = load(&[("registries.conf", CONF), ("50-hub.conf", dropin)]);
    assert_eq!(
        places(&r.unwrap(), "busybox"),
        vec![e("hub.internal", "library/busybox", false, false)]
    );
    // No configuration: the reference's own registry.
    assert_eq!(
        places(&Registries::default(), "busybox:1"),
        vec![e("docker.io", "library/busybox", false, false)]
    );
    for (name, text) in [
        ("bad.conf", "[[registry]\nprefix="),
        ("empty.conf", "[[registry]]\ninsecure = true\n"),
        ("bad.json", "{\"registry-mirrors\": 3}"),
    ] {
        let (_d, r) = load(&[(name, text)]);
        let err = r.unwrap_err().to_string();
        assert!(err.contains(name) && !err.contains('\n'), "{err}");
    }
}

#[test]
fn default_files_follow_podman_then_docker() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("mine.conf");
    std::fs::write(&conf, CONF).unwrap();
    let c = conf.display().to_string();
    let files = default_files(|k| (k == "CONTAINERS_REGISTRIES_CONF").then(|| c.clone()));
    assert_eq!(files.first(), Some(&conf));
    let home = dir.path().display().to_string();
    let user = dir.path().join(".config/containers");
    std::fs::create_dir_all(user.join("registries.conf.d")).unwrap();
    std::fs::write(user.join("registries.conf"), CONF).unwrap();
    std::fs::write(user.join("registries.conf.d/10-a.conf"), "").unwrap();
    std::fs::write(user.join("registries.conf.d/notes.txt"), "").unwrap();
    let files = default_files(|k| (k == "HOME").then(|| home.clone()));
    assert_eq!(files.first(), Some(&user.join("registries.conf")));
    assert!(files.contains(&user.join("registries.conf.d/10-a.conf")));
    assert!(!files.iter().any(|f| f.ends_with("notes.txt")));
}

/// A short name is tried on each search registry in order, a one-component name on Docker
/// Hub in `library/`; a qualified one is itself; with no search list, Docker's rule.
#[test]
fn short_names_are_qualified_through_the_search_registries() {
    let (_d, r) = load(&[("registries.conf", CONF)]);
    let r = r.unwrap();
    assert_eq!(
        r.qualify("python:3.11"),
        [
            "registry.fedoraproject.org/python:3.11",
            "docker.io/library/python:3.11"
        ]
    );
    assert_eq!(
        r.qualify("swebench/sweb.eval.x86_64.a:latest"),
        [
            "registry.fedoraproject.org/swebench/sweb.eval.x86_64.a:latest",
            "docker.io/swebench/sweb.eval.x86_64.a:latest"
        ]
    );
    for q in [
        "ghcr.io/epoch-research/x:1",
        "localhost/app",
        "127.0.0.1:5000/app@sha256:00",
    ] {
        assert_eq!(r.qualify(q), [q], "{q}");
    }
    // Each candidate is a reference the pull can parse.
    for c in r.qualify("busybox") {
        assert!(Reference::parse(&c).is_ok(), "{c}");
    }
    // No search list: Docker Hub, as Docker has it.
    let none = Registries::default();
    assert_eq!(
        none.qualify("python:3.11"),
        ["docker.io/library/python:3.11"]
    );
    assert_eq!(
        none.qualify("busybox@sha256:ab"),
        ["docker.io/library/busybox@sha256:ab"]
    );
    assert_eq!(none.qualify("team/app"), ["docker.io/team/app"]);
    // A drop-in that sets the list replaces it; one that does not keeps it.
    let (_d, r) = load(&[
        ("registries.conf", CONF),
        ("10-keep.conf", "[[registry]]\nprefix = \"x.io\"\n"),
        (
            "20-set.conf",
            "unqualified-search-registries = [\"quay.io/\"]\n",
        ),
    ]);
    assert_eq!(r.unwrap().qualify("app:1"), ["quay.io/app:1"]);
    let (_d, r) = load(&[("registries.conf", CONF), ("10-keep.conf", "")]);
    assert_eq!(r.unwrap().qualify("app").len(), 2);
}
