//! Import end to end on layouts built here: verification, store layout, names, removal, and
//! "a failed import leaves the store unchanged".

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::*;
use store::ImageRecord;

/// A raw (uncompressed) layer from (path, contents) pairs; a trailing `/` makes a directory.
fn layer(entries: &[(&str, &str)]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (path, data) in entries {
        let mut h = tar::Header::new_ustar();
        if path.ends_with('/') {
            h.set_entry_type(tar::EntryType::Directory);
            h.set_mode(0o755);
            h.set_size(0);
        } else {
            h.set_entry_type(tar::EntryType::Regular);
            h.set_mode(0o644);
            h.set_size(data.len() as u64);
        }
        let bytes = h.as_mut_bytes();
        bytes[..path.len()].copy_from_slice(path.as_bytes());
        h.set_cksum();
        b.append(&h, data.as_bytes()).unwrap();
    }
    b.into_inner().unwrap()
}

fn gzip(raw: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(raw).unwrap();
    e.finish().unwrap()
}

fn sha(bytes: &[u8]) -> String {
    Digest::of(bytes).to_string()
}

/// An OCI layout under construction: layers (raw, stored gzipped or not), config, name.
struct Layout {
    layers: Vec<(Vec<u8>, bool)>,
    config: serde_json::Value,
    name: Option<String>,
}

impl Layout {
    fn new(layers: Vec<Vec<u8>>) -> Self {
        let n = layers.len();
        Layout {
            layers: layers
                .into_iter()
                .enumerate()
                .map(|(i, l)| (l, i % 2 == 0 || n == 1))
                .collect(),
            config: serde_json::json!({
                "architecture": oci::host_arch(), "os": "linux", "created": "2024-01-01T00:00:00Z",
                "config": {"Env": ["PATH=/img/bin:/bin", "TZ=Europe/Paris", "IMAGE_VAR=1"],
                           "Entrypoint": ["/bin/entry"], "Cmd": ["--flag"], "User": "0:0"},
            }),
            name: Some("test/image:1".into()),
        }
    }

    /// Writes blobs, index.json and oci-layout into `dir`; returns the manifest digest and
    /// the blob digests of the layers (as stored).
    fn write(&self, dir: &Path) -> (String, Vec<String>) {
        let blobs = dir.join("blobs/sha256");
        std::fs::create_dir_all(&blobs).unwrap();
        let put = |bytes: &[u8]| {
            let d = Digest::of(bytes);
            std::fs::write(blobs.join(d.hex()), bytes).unwrap();
            d.to_string()
        };
        let mut config = self.config.clone();
        let diff_ids: Vec<String> = self.layers.iter().map(|(raw, _)| sha(raw)).collect();
        config["rootfs"] = serde_json::json!({"type": "layers", "diff_ids": diff_ids});
        let config = serde_json::to_vec(&config).unwrap();
        let mut descs = Vec::new();
        let mut digests = Vec::new();
        for (raw, gz) in &self.layers {
            let stored = if *gz { gzip(raw) } else { raw.clone() };
            let d = put(&stored);
            digests.push(d.clone());
            let mt = if *gz {
                oci::MEDIA_LAYER_GZIP
            } else {
                oci::MEDIA_LAYER_TAR
            };
            descs.push(serde_json::json!({"mediaType": mt, "digest": d, "size": stored.len()}));
        }
        let manifest = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2, "mediaType": oci::MEDIA_MANIFEST,
            "config": {"mediaType": oci::MEDIA_CONFIG, "digest": put(&config), "size": config.len()},
            "layers": descs,
        }))
        .unwrap();
        let md = put(&manifest);
        let mut entry = serde_json::json!({"mediaType": oci::MEDIA_MANIFEST, "digest": md, "size": manifest.len()});
        if let Some(name) = &self.name {
            entry["annotations"] = serde_json::json!({ (oci::ANNOTATION_REF): name });
        }
        let index = serde_json::json!({"schemaVersion": 2, "manifests": [entry]});
        std::fs::write(dir.join("index.json"), serde_json::to_vec(&index).unwrap()).unwrap();
        std::fs::write(dir.join("oci-layout"), r#"{"imageLayoutVersion":"1.0.0"}"#).unwrap();
        (md, digests)
    }
}

struct Env {
    tmp: tempfile::TempDir,
    store: Store,
}

impl Env {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::new(Some(tmp.path().join("store"))).unwrap();
        Env { tmp, store }
    }

    fn dir(&self, name: &str) -> PathBuf {
        let d = self.tmp.path().join(name);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn import(&self, input: &Path, name: Option<&str>) -> Result<Vec<ImageRecord>, ImageError> {
        import(
            &self.store,
            &ImportRequest {
                input: input.to_path_buf(),
                name: name.map(str::to_string),
                ..Default::default()
            },
        )
    }

    /// Every path in the store with its size (files) — what "unchanged" compares.
    fn listing(&self) -> Vec<String> {
        fn walk(dir: &Path, base: &Path, out: &mut Vec<String>) {
            let Ok(rd) = std::fs::read_dir(dir) else {
                return;
            };
            let mut entries: Vec<_> = rd.flatten().collect();
            entries.sort_by_key(|e| e.file_name());
            for e in entries {
                let meta = std::fs::symlink_metadata(e.path()).unwrap();
                let rel = e.path().strip_prefix(base).unwrap().display().to_string();
                out.push(format!(
                    "{rel} {}",
                    if meta.is_file() { meta.len() } else { 0 }
                ));
                if meta.is_dir() {
                    walk(&e.path(), base, out);
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.store.root, &self.store.root, &mut out);
        out
    }
}

fn base_layers() -> Vec<Vec<u8>> {
    vec![
        layer(&[
            ("bin/", ""),
            ("bin/entry", "#!"),
            ("etc/", ""),
            ("etc/gone", "x"),
            ("etc/keep", "1"),
        ]),
        layer(&[("etc/.wh.gone", ""), ("etc/keep", "2"), ("new", "n")]),
    ]
}

#[test]
fn import_verifies_unpacks_and_records() {
    let env = Env::new();
    let layout = env.dir("layout");
    let (md, layers) = Layout::new(base_layers()).write(&layout);
    let recs = env.import(&layout, None).unwrap();
    assert_eq!(recs.len(), 1);
    let rec = &recs[0];
    assert_eq!(rec.digest.to_string(), md);
    assert_eq!(rec.names, vec!["test/image:1"]);
    assert_eq!(
        rec.layers
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        layers
    );
    assert_eq!(rec.config.entrypoint, Some(vec!["/bin/entry".to_string()]));
    let rootfs = env.store.image_dir(&rec.digest).join("rootfs");
    assert_eq!(
        std::fs::read_to_string(rootfs.join("etc/keep")).unwrap(),
        "2"
    );
    assert!(!rootfs.join("etc/gone").exists());
    assert!(!rootfs.join("etc/.wh.gone").exists());
    for d in rec.blobs() {
        assert!(env.store.blob(d).is_file(), "blob {d}");
    }
    assert_eq!(env.store.record(&rec.digest).unwrap(), *rec);
    assert_eq!(env.store.resolve("test/image:1").unwrap(), rec.digest);
    assert_eq!(env.store.resolve(&md).unwrap(), rec.digest);
    assert_eq!(env.store.resolve(&md[..7 + 12]).unwrap(), rec.digest);
    assert!(matches!(
        env.store.resolve("test/image:2"),
        Err(ImageError::NotFound { .. })
    ));
    assert!(matches!(
        env.store.resolve("sha256:abc"),
        Err(ImageError::Reference(_))
    ));
    // tmp/ holds nothing once an import is done.
    assert_eq!(std::fs::read_dir(env.store.tmp()).unwrap().count(), 0);

    // Importing again changes nothing but the name.
    let before = env.listing();
    let again = env.import(&layout, None).unwrap();
    assert_eq!(again[0].digest, rec.digest);
    assert_eq!(env.listing(), before);
}

#[test]
fn run_root_maps_config_to_the_sandbox() {
    let env = Env::new();
    let layout = env.dir("layout");
    Layout::new(base_layers()).write(&layout);
    env.import(&layout, Some("app")).unwrap();
    let root = run_root(&env.store, "app:latest").unwrap();
    assert_eq!(root.argv, vec!["/bin/entry", "--flag"]);
    assert_eq!(root.user, Some((0, 0)));
    assert!(root.env.contains(&("IMAGE_VAR".into(), "1".into())));
    assert!(root.rootfs.ends_with("rootfs"));
}

#[test]
fn a_tampered_blob_fails_and_leaves_the_store_unchanged() {
    let env = Env::new();
    let good = env.dir("good");
    Layout::new(base_layers()).write(&good);
    env.import(&good, None).unwrap();
    let before = env.listing();
    let refs_before = env.store.refs().unwrap();

    // A layer whose bytes changed after its digest was written.
    let bad = env.dir("bad-layer");
    let mut l = Layout::new(vec![layer(&[("a", "1")]), layer(&[("b", "2")])]);
    l.name = Some("evil:1".into());
    let (_, layers) = l.write(&bad);
    let victim = bad.join("blobs/sha256").join(&layers[1][7..]);
    let mut bytes = std::fs::read(&victim).unwrap();
    bytes[600] ^= 1;
    std::fs::write(&victim, &bytes).unwrap();
    let err = env.import(&bad, None).unwrap_err();
    assert!(matches!(err, ImageError::Digest { .. }), "{err}");
    assert!(err.to_string().contains("nothing was imported"), "{err}");
    assert_eq!(env.listing(), before);

    // A size that does not match.
    let bad = env.dir("bad-size");
    let (_, layers) = l.write(&bad);
    let victim = bad.join("blobs/sha256").join(&layers[0][7..]);
    let mut bytes = std::fs::read(&victim).unwrap();
    bytes.extend_from_slice(b"trailing");
    std::fs::write(&victim, &bytes).unwrap();
    let err = env.import(&bad, None).unwrap_err();
    assert!(matches!(err, ImageError::Size { .. }), "{err}");
    assert_eq!(env.listing(), before);

    // A config whose diff id does not match the uncompressed layer.
    let bad = env.dir("bad-diff");
    let mut wrong = Layout::new(vec![layer(&[("a", "1")])]);
    wrong.config["rootfs"] = serde_json::json!({});
    let blobs_before = wrong.write(&bad);
    let _ = blobs_before;
    // Rewrite the config with a wrong diff id (and the manifest and index after it).
    let cfg =
        serde_json::json!({"rootfs": {"type": "layers", "diff_ids": [sha(b"not the layer")]}});
    rewrite_config(&bad, &cfg);
    let err = env.import(&bad, None).unwrap_err();
    assert!(err.to_string().contains("uncompressed"), "{err}");
    assert_eq!(env.listing(), before);

    // A malicious layer.
    let bad = env.dir("bad-tar");
    Layout::new(vec![layer(&[("../escape", "x")])]).write(&bad);
    let err = env.import(&bad, None).unwrap_err();
    assert!(err.to_string().contains("path traversal"), "{err}");
    assert!(!env.tmp.path().join("escape").exists());
    assert_eq!(env.listing(), before);
    assert_eq!(env.store.refs().unwrap(), refs_before);

    // A missing blob.
    let bad = env.dir("missing");
    let (_, layers) = Layout::new(vec![layer(&[("a", "1")])]).write(&bad);
    std::fs::remove_file(bad.join("blobs/sha256").join(&layers[0][7..])).unwrap();
    let err = env.import(&bad, None).unwrap_err();
    assert!(err.to_string().contains("is missing"), "{err}");
    assert_eq!(env.listing(), before);
}

/// Replaces the config of the layout in `dir` (one manifest) and re-links manifest and index.
fn rewrite_config(dir: &Path, config: &serde_json::Value) {
    let blobs = dir.join("blobs/sha256");
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("index.json")).unwrap()).unwrap();
    let md = index["manifests"][0]["digest"].as_str().unwrap()[7..].to_string();
    let mut manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(blobs.join(&md)).unwrap()).unwrap();
    let config = serde_json::to_vec(config).unwrap();
    std::fs::write(blobs.join(Digest::of(&config).hex()), &config).unwrap();
    manifest["config"]["digest"] = sha(&config).into();
    manifest["config"]["size"] = config.len().into();
    let manifest = serde_json::to_vec(&manifest).unwrap();
    std::fs::write(blobs.join(Digest::of(&manifest).hex()), &manifest).unwrap();
    let mut index = index;
    index["manifests"][0]["digest"] = sha(&manifest).into();
    index["manifests"][0]["size"] = manifest.len().into();
    std::fs::write(dir.join("index.json"), serde_json::to_vec(&index).unwrap()).unwrap();
}

#[test]
fn a_tampered_manifest_or_index_entry_fails() {
    let env = Env::new();
    let bad = env.dir("bad");
    Layout::new(base_layers()).write(&bad);
    let mut index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(bad.join("index.json")).unwrap()).unwrap();
    index["manifests"][0]["digest"] = sha(b"other").into();
    std::fs::write(bad.join("index.json"), serde_json::to_vec(&index).unwrap()).unwrap();
    let err = env.import(&bad, None).unwrap_err();
    assert!(err.to_string().contains("is missing"), "{err}");

    // Same digest as a real blob, wrong size.
    let bad = env.dir("bad2");
    Layout::new(base_layers()).write(&bad);
    let mut index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(bad.join("index.json")).unwrap()).unwrap();
    index["manifests"][0]["size"] = 3.into();
    std::fs::write(bad.join("index.json"), serde_json::to_vec(&index).unwrap()).unwrap();
    assert!(matches!(
        env.import(&bad, None).unwrap_err(),
        ImageError::Size { .. }
    ));
    assert!(env.store.images().unwrap().is_empty());
}

/// Packs a directory into a tar archive (regular files and directories).
fn tar_dir(dir: &Path, out: &Path) {
    let mut b = tar::Builder::new(std::fs::File::create(out).unwrap());
    b.append_dir_all(".", dir).unwrap();
    b.finish().unwrap();
}

#[test]
fn oci_archives_and_docker_save_archives_import() {
    let env = Env::new();
    let layout = env.dir("layout");
    let (md, _) = Layout::new(base_layers()).write(&layout);
    let archive = env.tmp.path().join("image.tar");
    tar_dir(&layout, &archive);
    let recs = env.import(&archive, Some("from-tar")).unwrap();
    assert_eq!(recs[0].digest.to_string(), md);
    assert_eq!(
        recs[0].names,
        vec!["from-tar:latest", "test/image:1"]
            .into_iter()
            .filter(|n| n.starts_with("from"))
            .collect::<Vec<_>>()
    );

    // docker save: manifest.json, HEX.json config, ID/layer.tar, a repeated layer as a link.
    let raws = base_layers();
    let config = serde_json::to_vec(&serde_json::json!({
        "architecture": oci::host_arch(), "os": "linux",
        "config": {"Cmd": ["/bin/sh"]},
        "rootfs": {"type": "layers", "diff_ids": [sha(&raws[0]), sha(&raws[1]), sha(&raws[0])]},
    }))
    .unwrap();
    let config_name = format!("{}.json", Digest::of(&config).hex());
    let manifest = serde_json::to_vec(&serde_json::json!([{
        "Config": config_name, "RepoTags": ["docker/saved:v1"],
        "Layers": ["l0/layer.tar", "l1/layer.tar", "l2/layer.tar"],
    }]))
    .unwrap();
    let archive = env.tmp.path().join("saved.tar");
    let mut b = tar::Builder::new(std::fs::File::create(&archive).unwrap());
    let mut add = |path: &str, data: &[u8]| {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        b.append_data(&mut h, path, data).unwrap();
    };
    add("manifest.json", &manifest);
    add(&config_name, &config);
    add("l0/layer.tar", &raws[0]);
    add("l1/layer.tar", &raws[1]);
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::Symlink);
    h.set_size(0);
    b.append_link(&mut h, "l2/layer.tar", "../l0/layer.tar")
        .unwrap();
    b.finish().unwrap();
    drop(b);
    let recs = env.import(&archive, None).unwrap();
    assert_eq!(recs[0].names, vec!["docker/saved:v1"]);
    assert_eq!(recs[0].config.cmd, Some(vec!["/bin/sh".to_string()]));
    let rootfs = env.store.image_dir(&recs[0].digest).join("rootfs");
    // The third layer (the first again) brings etc/gone back.
    assert_eq!(
        std::fs::read_to_string(rootfs.join("etc/keep")).unwrap(),
        "1"
    );
    assert!(rootfs.join("etc/gone").exists());

    // A docker-save layer that does not match its diff id.
    let before = env.listing();
    let bad = env.tmp.path().join("bad-saved.tar");
    let mut b = tar::Builder::new(std::fs::File::create(&bad).unwrap());
    let mut add = |path: &str, data: &[u8]| {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        b.append_data(&mut h, path, data).unwrap();
    };
    add("manifest.json", &manifest);
    add(&config_name, &config);
    add("l0/layer.tar", &raws[0]);
    add("l1/layer.tar", &layer(&[("tampered", "1")]));
    add("l2/layer.tar", &raws[0]);
    b.finish().unwrap();
    drop(b);
    let err = env.import(&bad, None).unwrap_err();
    assert!(matches!(err, ImageError::Digest { .. }), "{err}");
    assert_eq!(env.listing(), before);
}

#[test]
fn zstd_layers_are_imported_and_checked_against_their_diff_ids() {
    let env = Env::new();
    let layout = env.dir("layout");
    let raw = layer(&[("a", "1"), ("dir/", ""), ("dir/b", "zstd")]);
    let mut l = Layout::new(vec![raw.clone()]);
    l.layers[0].1 = false;
    let (_, layers) = l.write(&layout);
    // Replace the layer with a zstd stream of it (two frames), and fix the descriptors.
    let half = raw.len() / 2;
    let mut zstd = super::zstd::frame(&raw[..half]);
    zstd.extend(super::zstd::frame(&raw[half..]));
    let blobs = layout.join("blobs/sha256");
    std::fs::remove_file(blobs.join(&layers[0][7..])).unwrap();
    std::fs::write(blobs.join(Digest::of(&zstd).hex()), &zstd).unwrap();
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(layout.join("index.json")).unwrap()).unwrap();
    let md = index["manifests"][0]["digest"].as_str().unwrap()[7..].to_string();
    let mut manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(blobs.join(&md)).unwrap()).unwrap();
    manifest["layers"][0] = serde_json::json!({"mediaType": "application/vnd.oci.image.layer.v1.tar+zstd", "digest": sha(&zstd), "size": zstd.len()});
    let manifest = serde_json::to_vec(&manifest).unwrap();
    std::fs::write(blobs.join(Digest::of(&manifest).hex()), &manifest).unwrap();
    let mut index = index;
    index["manifests"][0]["digest"] = sha(&manifest).into();
    index["manifests"][0]["size"] = manifest.len().into();
    std::fs::write(
        layout.join("index.json"),
        serde_json::to_vec(&index).unwrap(),
    )
    .unwrap();
    let recs = env.import(&layout, None).unwrap();
    let root = env.store.image_dir(&recs[0].digest).join("rootfs");
    assert_eq!(std::fs::read_to_string(root.join("dir/b")).unwrap(), "zstd");
    assert_eq!(std::fs::read_to_string(root.join("a")).unwrap(), "1");
}

#[test]
fn names_from_tags_only_refs_and_removal() {
    let env = Env::new();
    // A tag-only ref.name takes the input's file name.
    let layout = env.dir("busybox-oci");
    let mut l = Layout::new(base_layers());
    l.name = Some("1.36".into());
    l.write(&layout);
    let recs = env.import(&layout, None).unwrap();
    assert_eq!(recs[0].names, vec!["busybox-oci:1.36"]);
    let first = recs[0].digest.clone();

    // An unnamed image stays until removed by digest.
    let other = env.dir("other");
    let mut l = Layout::new(vec![layer(&[("only", "1")])]);
    l.name = None;
    l.write(&other);
    let unnamed = env.import(&other, None).unwrap()[0].digest.clone();
    assert!(env.store.record(&unnamed).unwrap().names.is_empty());

    // Moving a name to another image deletes the image left unnamed.
    let recs = env.import(&other, Some("busybox-oci:1.36")).unwrap();
    assert_eq!(recs[0].names, vec!["busybox-oci:1.36"]);
    assert!(env.store.record(&first).is_err());
    assert!(!env.store.image_dir(&first).exists());

    let (untagged, removed) = remove(&env.store, &["busybox-oci:1.36".into()]).unwrap();
    assert_eq!(untagged, vec!["busybox-oci:1.36"]);
    assert_eq!(removed, vec![unnamed.clone()]);
    assert!(env.store.images().unwrap().is_empty());
    assert_eq!(
        std::fs::read_dir(env.store.root.join("blobs/sha256"))
            .unwrap()
            .count(),
        0
    );
    assert_eq!(env.store.refs().unwrap(), BTreeMap::new());

    // rm by digest removes every name of it.
    let recs = env.import(&layout, Some("a")).unwrap();
    env.import(&layout, Some("b:2")).unwrap();
    let (untagged, removed) = remove(&env.store, &[recs[0].digest.to_string()]).unwrap();
    assert_eq!(untagged, vec!["a:latest", "b:2"]);
    assert_eq!(removed, vec![recs[0].digest.clone()]);
    assert!(matches!(
        remove(&env.store, &["a".into()]),
        Err(ImageError::NotFound { .. })
    ));
}

#[test]
fn bad_inputs_are_named() {
    let env = Env::new();
    let empty = env.dir("empty");
    assert!(matches!(
        env.import(&empty, None),
        Err(ImageError::NotAnImage(_))
    ));
    assert!(matches!(
        env.import(&env.tmp.path().join("nope"), None),
        Err(ImageError::Input { .. })
    ));
    let junk = env.tmp.path().join("junk.tar");
    std::fs::write(&junk, b"this is not a tar archive at all, just some text").unwrap();
    assert!(env.import(&junk, None).is_err());
    let layout = env.dir("layout");
    Layout::new(base_layers()).write(&layout);
    assert!(matches!(
        env.import(&layout, Some("Bad Name")),
        Err(ImageError::Name { .. })
    ));
    // An archive member outside the archive.
    let evil = env.tmp.path().join("evil.tar");
    let mut b = tar::Builder::new(std::fs::File::create(&evil).unwrap());
    let mut h = tar::Header::new_ustar();
    h.set_size(1);
    h.set_mode(0o644);
    h.as_mut_bytes()[..12].copy_from_slice(b"../index.js\0");
    h.set_cksum();
    b.append(&h, &b"x"[..]).unwrap();
    b.finish().unwrap();
    drop(b);
    let err = env.import(&evil, None).unwrap_err();
    assert!(err.to_string().contains("path traversal"), "{err}");
}

#[test]
fn image_user_resolves_names_in_the_image() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    std::fs::create_dir(root.join("etc")).unwrap();
    std::fs::write(
        root.join("etc/passwd"),
        "root:x:0:0::/root:/bin/sh\napp:x:1000:1001::/app:/bin/sh\n",
    )
    .unwrap();
    std::fs::write(root.join("etc/group"), "root:x:0:\nstaff:x:50:\n").unwrap();
    assert_eq!(image_user(root, "app"), Ok((1000, 1001)));
    assert_eq!(image_user(root, "app:staff"), Ok((1000, 50)));
    assert_eq!(image_user(root, "123"), Ok((123, 0)));
    assert_eq!(image_user(root, "123:456"), Ok((123, 456)));
    assert!(image_user(root, "ghost").is_err());
    // Never read through a link (it could name a host file).
    std::fs::remove_file(root.join("etc/passwd")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", root.join("etc/passwd")).unwrap();
    assert!(image_user(root, "root")
        .unwrap_err()
        .contains("symbolic link"));
}
