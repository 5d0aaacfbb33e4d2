use super::*;

/// A minimal wheel-named file (the mirror only hashes and lists it).
fn dist_file(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    p
}

#[test]
fn add_index_verify_round_trip() {
    let tmp = tempfile::tempdir().unwrap();
    let m = tmp.path().join("m");
    let a = dist_file(tmp.path(), "foo-1.0-py3-none-any.whl", "one");
    let b = dist_file(tmp.path(), "foo-2.0-py3-none-any.whl", "two");
    let c = dist_file(tmp.path(), "Bar_Baz-0.1.tar.gz", "three");
    let t = |s: &str| crate::determinism::date::parse_date(s).unwrap();
    assert_eq!(add(&m, &[a.clone(), c], Some(t("2020-01-01"))).unwrap(), 2);
    assert_eq!(add(&m, &[b], Some(t("2022-01-01"))).unwrap(), 1);
    assert!(verify(&m).unwrap().is_empty());
    let lock = read_lock(&m).unwrap();
    let names: Vec<_> = lock.files.iter().map(|r| r.filename.as_str()).collect();
    assert_eq!(
        names,
        [
            "Bar_Baz-0.1.tar.gz",
            "foo-1.0-py3-none-any.whl",
            "foo-2.0-py3-none-any.whl"
        ]
    );
    assert_eq!(lock.files[0].name, "bar-baz");
    assert!(m.join("pypi/simple/foo/index.html").is_file());
    assert!(m.join("pypi/simple/bar-baz/index.json").is_file());

    // Cut at a date: the later file goes, from the lock, the index and the disk.
    assert_eq!(index(&m, Some(t("2021-01-01"))).unwrap(), 1);
    assert!(!m.join("pypi/files/foo-2.0-py3-none-any.whl").exists());
    let html = std::fs::read_to_string(m.join("pypi/simple/foo/index.html")).unwrap();
    assert!(html.contains("foo-1.0") && !html.contains("foo-2.0"));
    assert_eq!(
        read_lock(&m).unwrap().date.as_deref(),
        Some("2021-01-01T00:00:00Z")
    );
    assert!(verify(&m).unwrap().is_empty());

    // Adding the same name with other content is refused; the same content is fine.
    let other = tmp.path().join("other");
    std::fs::create_dir(&other).unwrap();
    let a2 = dist_file(&other, "foo-1.0-py3-none-any.whl", "changed");
    assert!(matches!(
        add(&m, &[a2], None),
        Err(MirrorError::Conflict { .. })
    ));
    assert_eq!(add(&m, &[a], None).unwrap(), 1);
}

#[test]
fn verify_finds_tampering() {
    let tmp = tempfile::tempdir().unwrap();
    let m = tmp.path().join("m");
    let a = dist_file(tmp.path(), "foo-1.0-py3-none-any.whl", "one");
    add(&m, &[a], Some(0)).unwrap();
    std::fs::write(m.join("pypi/files/foo-1.0-py3-none-any.whl"), "evil").unwrap();
    std::fs::write(m.join("pypi/files/extra-1.0.tar.gz"), "x").unwrap();
    std::fs::write(m.join("pypi/simple/foo/index.html"), "<a href=x>").unwrap();
    let problems = verify(&m).unwrap();
    assert!(
        problems
            .iter()
            .any(|p| p.contains("foo-1.0-py3-none-any.whl: sha256")),
        "{problems:?}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p.contains("extra-1.0.tar.gz: not in the lock")),
        "{problems:?}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p.contains("foo/index.html: differs")),
        "{problems:?}"
    );
}

#[test]
fn bad_input_is_refused_before_anything_changes() {
    let tmp = tempfile::tempdir().unwrap();
    let m = tmp.path().join("m");
    let bad = dist_file(tmp.path(), "notadist.txt", "x");
    let good = dist_file(tmp.path(), "ok-1.0-py3-none-any.whl", "x");
    assert!(matches!(
        add(&m, &[good, bad], None),
        Err(MirrorError::BadFileName { .. })
    ));
    assert!(!m.join("pypi/files/ok-1.0-py3-none-any.whl").exists());
    assert!(matches!(read_lock(&m), Err(MirrorError::NotAMirror { .. })));
    assert!(matches!(verify(&m), Err(MirrorError::NotAMirror { .. })));
    std::fs::create_dir_all(&m).unwrap();
    std::fs::write(m.join(LOCK_FILE), "{not json").unwrap();
    assert!(matches!(read_lock(&m), Err(MirrorError::BadLock { .. })));
    assert!(parse_date("--date", "yesterday").is_err());
}

#[test]
fn client_env_points_everything_at_the_mount() {
    let lock = Lock {
        lock_version: 1,
        date: Some("2023-05-01T00:00:00Z".into()),
        index: None,
        files: vec![],
        go: vec![],
        npm: vec![],
    };
    let env: std::collections::BTreeMap<_, _> = client_env(&lock).into_iter().collect();
    assert_eq!(env["PIP_INDEX_URL"], "file:///mirror/pypi/simple");
    assert_eq!(env["UV_INDEX_URL"], "file:///mirror/pypi/simple");
    assert_eq!(env["GOPROXY"], "file:///mirror/go");
    assert_eq!(env["GOTOOLCHAIN"], "local");
    assert_eq!(env["REPRORUN_MIRROR_DATE"], "2023-05-01T00:00:00Z");
    assert!(!env.contains_key("UV_EXCLUDE_NEWER"));
    assert_eq!(env["PIP_CONFIG_FILE"], "/dev/null");
}
