use super::*;

#[test]
fn platforms_parse_and_match_index_entries() {
    let p = Platform::parse(Some("linux/arm64/v8")).unwrap();
    assert!(
        p.matches(&serde_json::json!({"os": "linux", "architecture": "arm64", "variant": "v8"}))
    );
    assert!(
        !p.matches(&serde_json::json!({"os": "linux", "architecture": "arm64", "variant": "v7"}))
    );
    let p = Platform::parse(Some("linux/amd64")).unwrap();
    assert!(p.matches(&serde_json::json!({"os": "linux", "architecture": "amd64"})));
    assert!(!p.matches(&serde_json::json!({"os": "unknown", "architecture": "unknown"})));
    assert_eq!(Platform::parse(None).unwrap().os, "linux");
    for bad in ["linux", "linux/", "/amd64", "a/b/c/d", ""] {
        assert!(
            matches!(Platform::parse(Some(bad)), Err(PullError::Platform(_))),
            "{bad}"
        );
    }
}

#[test]
fn the_layout_names_the_manifest_for_import() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("blobs/sha256")).unwrap();
    let m = br#"{"schemaVersion":2}"#;
    let d = Digest::of(m);
    write_layout(dir.path(), m, &d, "", Some("localhost:5000/a:1")).unwrap();
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("index.json")).unwrap()).unwrap();
    assert_eq!(index["manifests"][0]["digest"], d.to_string());
    assert_eq!(index["manifests"][0]["mediaType"], oci::MEDIA_MANIFEST);
    assert_eq!(
        index["manifests"][0]["annotations"][oci::ANNOTATION_NAME],
        "localhost:5000/a:1"
    );
    assert_eq!(
        std::fs::read(dir.path().join("blobs/sha256").join(d.hex())).unwrap(),
        m
    );
}

/// containers/image's OCI index fixture (internal/manifest/testdata/ociv1.image.index.json,
/// Apache-2.0), kept as data: the index skopeo and podman are tested against.
const REAL_INDEX: &str = include_str!("fixtures/ociv1.image.index.json");

#[test]
fn the_platform_is_chosen_from_a_real_index() {
    let index: serde_json::Value = serde_json::from_str(REAL_INDEX).unwrap();
    let amd64 = Platform::parse(Some("linux/amd64")).unwrap();
    let d = choose(&index, &amd64).unwrap();
    assert_eq!(
        d.digest.hex(),
        "5b0bcabd1ed22e9fb1310cf6c2dec7cdef19f0ad69efa1f392e94a4333501270"
    );
    assert_eq!(d.size, 7682);
    let ppc = Platform::parse(Some("linux/ppc64le")).unwrap();
    assert_eq!(choose(&index, &ppc).unwrap().size, 7143);
    let arm = Platform::parse(Some("linux/arm64")).unwrap();
    assert_eq!(
        choose(&index, &arm).unwrap_err(),
        Some(vec!["linux/ppc64le".to_string(), "linux/amd64".to_string()])
    );
    // Docker Hub's indexes carry attestation manifests for unknown/unknown: never chosen.
    let hub = serde_json::json!({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": [
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": format!("sha256:{}", "a".repeat(64)), "size": 1, "platform": {"architecture": "unknown", "os": "unknown"}},
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": format!("sha256:{}", "b".repeat(64)), "size": 2, "platform": {"architecture": "arm64", "os": "linux", "variant": "v8"}},
    ]});
    assert_eq!(
        choose(&hub, &arm).unwrap().size,
        2,
        "no variant asked: any variant"
    );
    assert_eq!(
        choose(&hub, &amd64).unwrap_err(),
        Some(vec![
            "unknown/unknown".to_string(),
            "linux/arm64".to_string()
        ])
    );
    assert_eq!(
        choose(&serde_json::json!({"manifests": "x"}), &amd64).unwrap_err(),
        None
    );
}
