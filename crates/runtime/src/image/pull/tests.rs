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
