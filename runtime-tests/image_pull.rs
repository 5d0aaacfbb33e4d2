//! `reprorun image pull` against Debian's `docker-registry` (the distribution project's
//! reference registry) on loopback: images pushed with `skopeo copy` (gzip and zstd layers, a
//! multi-platform index), plain HTTP, TLS with a test CA and htpasswd basic auth, a tampered
//! blob, a resumed download and two pulls of one image at once; each pulled image then runs
//! with `exec --image` after the registry is gone (offline).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use crate::common::skip::Need;
use crate::common::*;
use crate::image::busybox_layout;

/// A `docker-registry` on 127.0.0.1, killed on drop.
pub(crate) struct Registry {
    dir: tempfile::TempDir,
    port: u16,
    child: Child,
    tls: bool,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

impl Registry {
    /// Starts a registry; `tls`: a test CA and a server certificate (`certs/ca.crt` is
    /// what a client's --cert-dir needs); `user`: htpasswd basic auth for that user.
    pub(crate) fn start(tls: bool, user: Option<(&str, &str)>) -> Option<Registry> {
        Registry::start_with(tls, user, "")
    }

    /// As [`Registry::start`], with `extra` appended to the configuration.
    fn start_with(tls: bool, user: Option<(&str, &str)>, extra: &str) -> Option<Registry> {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let port = free_port();
        let mut config = format!(
            "version: 0.1\nlog:\n  level: info\n  accesslog:\n    disabled: false\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n",
            d.join("data").display()
        );
        if tls {
            make_certs(&d.join("certs"));
            config += &format!(
                "  tls:\n    certificate: {}\n    key: {}\n",
                d.join("certs/server.pem").display(),
                d.join("certs/server.key").display()
            );
        }
        if let Some((u, p)) = user {
            let o = Command::new("htpasswd")
                .args(["-Bbn", u, p])
                .output()
                .unwrap();
            assert!(o.status.success(), "htpasswd: {}", stderr(&o));
            std::fs::write(d.join("htpasswd"), &o.stdout).unwrap();
            config += &format!(
                "auth:\n  htpasswd:\n    realm: test\n    path: {}\n",
                d.join("htpasswd").display()
            );
        }
        config += extra;
        std::fs::write(d.join("config.yml"), config).unwrap();
        let log = std::fs::File::create(d.join("log")).unwrap();
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(d.join("config.yml"))
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("docker-registry (run .ci/setup)");
        let reg = Registry {
            dir,
            port,
            child,
            tls,
        };
        let up = wait_until(Duration::from_secs(30), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        up.then_some(reg)
    }

    pub(crate) fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn cert_dir(&self) -> PathBuf {
        self.dir.path().join("client-certs")
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default()
    }

    /// `skopeo copy SRC docker://HOST/DEST`, keeping digests (and so the compression).
    pub(crate) fn push(&self, src: &str, dest: &str, extra: &[&str]) {
        let mut cmd = Command::new("skopeo");
        cmd.args(["copy", "--quiet", "--preserve-digests"])
            .args(extra);
        if self.tls {
            cmd.arg(format!("--dest-cert-dir={}", self.cert_dir().display()));
        } else {
            cmd.arg("--dest-tls-verify=false");
        }
        let o = cmd
            .arg(src)
            .arg(format!("docker://{}/{dest}", self.host()))
            .output()
            .unwrap();
        assert!(o.status.success(), "skopeo copy {src}: {}", stderr(&o));
    }

    /// The registry's copy of a blob (to tamper with).
    fn blob_data(&self, hex: &str) -> PathBuf {
        self.dir.path().join(format!(
            "data/docker/registry/v2/blobs/sha256/{}/{hex}/data",
            &hex[..2]
        ))
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A test CA, a server certificate for 127.0.0.1 signed by it, and a client cert dir holding
/// the CA as `ca.crt`.
fn make_certs(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let ssl = |args: &[&str]| {
        let o = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(o.status.success(), "openssl {args:?}: {}", stderr(&o));
    };
    ssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=reprorun test CA",
    ]);
    ssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=127.0.0.1",
    ]);
    std::fs::write(
        dir.join("ext"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n",
    )
    .unwrap();
    ssl(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "2",
        "-extfile",
        "ext",
    ]);
    let client = dir.parent().unwrap().join("client-certs");
    std::fs::create_dir_all(&client).unwrap();
    std::fs::copy(dir.join("ca.pem"), client.join("ca.crt")).unwrap();
}

/// A store and a caller whose environment names no auth file unless a test gives one.
struct Puller {
    work: Work,
    store: tempfile::TempDir,
}

impl Puller {
    fn new() -> Self {
        Puller {
            work: Work::new(),
            store: tempfile::tempdir().unwrap(),
        }
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = self.work.cmd(args);
        c.env("REPRORUN_STORE", self.store.path())
            .env("HOME", self.work.path())
            .env_remove("DOCKER_CONFIG")
            .env_remove("REGISTRY_AUTH_FILE")
            .env_remove("XDG_RUNTIME_DIR")
            .stdin(Stdio::null());
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }

    fn pull(&self, reference: &str, extra: &[&str]) -> Output {
        let mut args = vec!["image", "pull", reference];
        args.extend_from_slice(extra);
        self.run(&args)
    }

    /// Pulls and returns the printed digest.
    fn pulled(&self, reference: &str, extra: &[&str]) -> String {
        let out = expect_code(&self.pull(reference, extra), 0);
        out.split_whitespace().next().unwrap().to_string()
    }

    fn sh(&self, image: &str, script: &str) -> String {
        expect_code(
            &self.run(&["exec", "--image", image, "--", "sh", "-c", script]),
            0,
        )
    }

    /// Names of the files under `rel` in the store.
    fn files(&self, rel: &str) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(self.store.path().join(rel))
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }
}

pub(crate) const NEEDS: [Need<'static>; 4] = [
    Need::Root,
    Need::Tool("docker-registry"),
    Need::Tool("skopeo"),
    Need::Tool("curl"),
];

/// The busybox layout recompressed with zstd (an OCI layout), made by skopeo.
fn zstd_layout(scratch: &Path) -> PathBuf {
    let plain = scratch.join("plain");
    let out = scratch.join("zstd");
    let src = format!("oci:{}:busybox:latest", busybox_layout().display());
    for (from, to, extra) in [
        (
            src,
            format!("dir:{}", plain.display()),
            vec!["--dest-decompress"],
        ),
        (
            format!("dir:{}", plain.display()),
            format!("oci:{}:latest", out.display()),
            vec!["--dest-compress", "--dest-compress-format", "zstd"],
        ),
    ] {
        let o = Command::new("skopeo")
            .args(["copy", "--quiet"])
            .args(&extra)
            .arg(&from)
            .arg(&to)
            .output()
            .unwrap();
        assert!(o.status.success(), "skopeo copy {from}: {}", stderr(&o));
    }
    out
}

/// The one manifest of a single-image layout: (digest, its JSON).
pub(crate) fn layout_manifest(layout: &Path) -> (String, serde_json::Value) {
    let index = read_json(&layout.join("index.json"));
    let digest = index["manifests"][0]["digest"]
        .as_str()
        .unwrap()
        .to_string();
    let m = read_json(&layout.join("blobs/sha256").join(&digest[7..]));
    (digest, m)
}

#[test]
fn pull_gzip_and_zstd_images_by_tag_and_digest_then_run_them_offline() {
    require!(NEEDS[0], NEEDS[1], NEEDS[2], NEEDS[3]);
    let Some(reg) = Registry::start(false, None) else {
        skip!("docker-registry did not start on loopback");
    };
    let p = Puller::new();
    let src = format!("oci:{}:busybox:latest", busybox_layout().display());
    reg.push(&src, "test/busybox:1", &[]);
    let zstd = zstd_layout(p.work.path());
    let (zstd_digest, m) = layout_manifest(&zstd);
    assert_eq!(
        m["layers"][0]["mediaType"],
        "application/vnd.oci.image.layer.v1.tar+zstd"
    );
    reg.push(
        &format!("oci:{}:latest", zstd.display()),
        "test/busybox:zstd",
        &[],
    );
    let (gzip_digest, _) = layout_manifest(busybox_layout());

    let by_tag = format!("{}/test/busybox:1", reg.host());
    let digest = p.pulled(&by_tag, &["--tls-verify=false"]);
    assert_eq!(
        digest, gzip_digest,
        "the manifest digest is the image's identity"
    );
    let z = format!("{}/test/busybox:zstd", reg.host());
    assert_eq!(p.pulled(&z, &["--tls-verify=false"]), zstd_digest);
    let by_digest = format!("{}/test/busybox@{zstd_digest}", reg.host());
    let out = expect_code(&p.pull(&by_digest, &["--tls-verify=false"]), 0);
    assert_eq!(
        out.trim(),
        format!("{zstd_digest} {z}"),
        "a digest pull adds no name"
    );
    // Without --tls-verify=false, plain HTTP is not used.
    let o = p.pull(&by_tag, &[]);
    assert_eq!(o.status.code(), Some(125), "{}", stderr(&o));
    // Nothing is left of the downloads but the per-blob lock files.
    assert!(
        p.files("pulls/blobs/sha256")
            .iter()
            .all(|f| f.ends_with(".lock")),
        "{:?}",
        p.files("pulls/blobs/sha256")
    );
    drop(reg);
    // Offline: the registry is gone; the images run from the store.
    assert_eq!(
        p.sh(&by_tag, "echo gzip; cat /etc/hostname >/dev/null; echo ok"),
        "gzip\nok\n"
    );
    assert_eq!(p.sh(&z, "echo zstd"), "zstd\n");
    assert_eq!(
        p.sh(&by_digest, "busybox | head -1 | cut -c1-7"),
        "BusyBox\n"
    );
}

#[test]
fn pull_picks_the_platform_of_a_multi_platform_index() {
    require!(NEEDS[0], NEEDS[1], NEEDS[2], NEEDS[3]);
    let Some(reg) = Registry::start(false, None) else {
        skip!("docker-registry did not start on loopback");
    };
    let p = Puller::new();
    // An index: this machine's manifest, and one for linux/riscv64 (another config).
    let layout = p.work.path().join("multi");
    let o = Command::new("cp")
        .arg("-a")
        .arg(busybox_layout())
        .arg(&layout)
        .output()
        .unwrap();
    assert!(o.status.success());
    let blobs = layout.join("blobs/sha256");
    let (host_digest, host_manifest) = layout_manifest(&layout);
    let put = |v: &serde_json::Value| {
        let bytes = serde_json::to_vec(v).unwrap();
        let hex = sha256_hex(&bytes);
        std::fs::write(blobs.join(&hex), &bytes).unwrap();
        (format!("sha256:{hex}"), bytes.len())
    };
    let mut config =
        read_json(&blobs.join(&host_manifest["config"]["digest"].as_str().unwrap()[7..]));
    config["architecture"] = "riscv64".into();
    let (cd, cs) = put(&config);
    let mut other = host_manifest.clone();
    other["config"]["digest"] = cd.into();
    other["config"]["size"] = cs.into();
    let (other_digest, os) = put(&other);
    let host_size = std::fs::metadata(blobs.join(&host_digest[7..]))
        .unwrap()
        .len();
    let arch = match std::env::consts::ARCH {
        "aarch64" => "arm64",
        _ => "amd64",
    };
    let index = serde_json::json!({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": [
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": other_digest, "size": os, "platform": {"os": "linux", "architecture": "riscv64"}},
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": host_digest, "size": host_size, "platform": {"os": "linux", "architecture": arch}},
    ]});
    let (index_digest, is) = put(&index);
    let top = serde_json::json!({"schemaVersion": 2, "manifests": [{"mediaType": "application/vnd.oci.image.index.v1+json", "digest": index_digest, "size": is, "annotations": {"org.opencontainers.image.ref.name": "latest"}}]});
    std::fs::write(layout.join("index.json"), serde_json::to_vec(&top).unwrap()).unwrap();
    reg.push(
        &format!("oci:{}:latest", layout.display()),
        "test/multi:1",
        &["--all"],
    );

    let host = reg.host();
    let r = format!("{host}/test/multi:1");
    assert_eq!(
        p.pulled(&r, &["--tls-verify=false", "--platform", "linux/riscv64"]),
        other_digest
    );
    assert_eq!(p.pulled(&r, &["--tls-verify=false"]), host_digest);
    let o = p.pull(&r, &["--tls-verify=false", "--platform", "linux/s390x"]);
    expect_error(&o, "no image for linux/s390x");
    let o = p.pull(&r, &["--tls-verify=false", "--platform", "s390x"]);
    assert_eq!(o.status.code(), Some(125), "{}", stderr(&o));
    drop(reg);
    assert_eq!(
        p.sh(&format!("{host}/test/multi@{host_digest}"), "echo index"),
        "index\n"
    );
}

#[test]
fn pull_over_tls_with_basic_auth_from_the_podman_and_docker_auth_files() {
    require!(
        NEEDS[0],
        NEEDS[1],
        NEEDS[2],
        NEEDS[3],
        Need::Tool("openssl"),
        Need::Tool("htpasswd")
    );
    let Some(reg) = Registry::start(true, Some(("alice", "s3cret"))) else {
        skip!("docker-registry did not start on loopback");
    };
    let p = Puller::new();
    let src = format!("oci:{}:busybox:latest", busybox_layout().display());
    reg.push(&src, "private/busybox:1", &["--dest-creds", "alice:s3cret"]);
    let r = format!("{}/private/busybox:1", reg.host());
    let certs = format!("--cert-dir={}", reg.cert_dir().display());
    // No credentials: refused, naming the remedy.
    expect_error(&p.pull(&r, &[&certs]), "not authorized");
    // The CA unknown: curl refuses the certificate.
    let auth = p.work.path().join("auth.json");
    let b64 = |s: &str| {
        let o = with_stdin(
            {
                let mut c = Command::new("base64");
                c.arg("-w0");
                c
            },
            s.as_bytes(),
        );
        stdout(&o)
    };
    let entry = |user: &str| {
        format!(
            r#"{{"auths":{{"{}":{{"auth":"{}"}}}}}}"#,
            reg.host(),
            b64(user)
        )
    };
    std::fs::write(&auth, entry("alice:s3cret")).unwrap();
    let o = p
        .cmd(&["image", "pull", &r])
        .env("REGISTRY_AUTH_FILE", &auth)
        .output()
        .unwrap();
    expect_error(&o, "curl failed");
    // podman's auth file and --cert-dir: pulled.
    let o = p
        .cmd(&["image", "pull", &r, &certs])
        .env("REGISTRY_AUTH_FILE", &auth)
        .output()
        .unwrap();
    let digest = expect_code(&o, 0);
    // A wrong password in the file is refused.
    std::fs::write(&auth, entry("alice:wrong")).unwrap();
    let o = p
        .cmd(&["image", "pull", &r, &certs])
        .env("REGISTRY_AUTH_FILE", &auth)
        .output()
        .unwrap();
    expect_error(&o, "not authorized");
    // Docker's config.json under $DOCKER_CONFIG, into a fresh store.
    let docker = p.work.path().join("docker");
    std::fs::create_dir_all(&docker).unwrap();
    std::fs::write(
        docker.join("config.json"),
        format!(
            r#"{{"auths":{{"https://{}":{{"auth":"{}"}}}}}}"#,
            reg.host(),
            b64("alice:s3cret")
        ),
    )
    .unwrap();
    let fresh = tempfile::tempdir().unwrap();
    let o = p
        .cmd(&["image", "pull", &r, &certs])
        .env("DOCKER_CONFIG", &docker)
        .env("REPRORUN_STORE", fresh.path())
        .output()
        .unwrap();
    assert_eq!(expect_code(&o, 0), digest);
    // --tls-verify=false skips the certificate check.
    std::fs::write(&auth, entry("alice:s3cret")).unwrap();
    let o = p
        .cmd(&["image", "pull", &r, "--tls-verify=false"])
        .env("REGISTRY_AUTH_FILE", &auth)
        .output()
        .unwrap();
    assert_eq!(expect_code(&o, 0), digest);
    drop(reg);
    assert_eq!(p.sh(&r, "echo private"), "private\n");
}

#[test]
fn a_tampered_blob_is_refused_and_a_partial_download_resumes() {
    require!(NEEDS[0], NEEDS[1], NEEDS[2], NEEDS[3]);
    let Some(reg) = Registry::start(false, None) else {
        skip!("docker-registry did not start on loopback");
    };
    let p = Puller::new();
    let src = format!("oci:{}:busybox:latest", busybox_layout().display());
    reg.push(&src, "test/busybox:1", &[]);
    let r = format!("{}/test/busybox:1", reg.host());
    let (digest, m) = layout_manifest(busybox_layout());
    let layer = m["layers"][0]["digest"].as_str().unwrap()[7..].to_string();
    let good = std::fs::read(reg.blob_data(&layer)).unwrap();

    // The registry serves other bytes of the same size: refused, nothing imported.
    let mut bad = good.clone();
    let mid = bad.len() / 2;
    bad[mid] ^= 0xff;
    std::fs::write(reg.blob_data(&layer), &bad).unwrap();
    expect_error(&p.pull(&r, &["--tls-verify=false"]), "sha256 is sha256:");
    assert!(p.files("images").is_empty(), "{:?}", p.files("images"));
    // The bad bytes are gone; verified blobs (the config) stay for the next pull.
    let kept = p.files("pulls/blobs/sha256");
    assert!(
        kept.iter()
            .all(|f| !f.starts_with(&layer) || f.ends_with(".lock")),
        "{kept:?}"
    );
    // A manifest asked for by a digest it does not have: refused.
    let wrong = format!("{}/test/busybox@sha256:{}", reg.host(), "0".repeat(64));
    assert_eq!(
        p.pull(&wrong, &["--tls-verify=false"]).status.code(),
        Some(125)
    );

    // A pull killed midway leaves HEX.partial: the next pull asks for the rest only (a
    // Range request, 206 in the registry's log) and verifies the whole.
    std::fs::write(reg.blob_data(&layer), &good).unwrap();
    let partial = p
        .store
        .path()
        .join(format!("pulls/blobs/sha256/{layer}.partial"));
    std::fs::write(&partial, &good[..mid]).unwrap();
    assert_eq!(p.pulled(&r, &["--tls-verify=false"]), digest);
    assert!(!partial.exists());
    assert!(
        reg.log().contains(&format!(
            "/blobs/sha256:{layer} HTTP/1.1\" 206 {}",
            good.len() - mid
        )),
        "{}",
        reg.log()
    );
    // A stale partial (other bytes) is discarded and the blob fetched again.
    p.run(&["image", "rm", &r]);
    std::fs::write(&partial, &bad[..mid + 10]).unwrap();
    assert_eq!(p.pulled(&r, &["--tls-verify=false"]), digest);
    drop(reg);
    assert_eq!(p.sh(&r, "echo resumed"), "resumed\n");
}

#[test]
fn a_killed_pull_leaves_the_store_usable_and_the_next_pull_completes() {
    require!(NEEDS[0], NEEDS[1], NEEDS[2], NEEDS[3]);
    let Some(reg) = Registry::start(false, None) else {
        skip!("docker-registry did not start on loopback");
    };
    let p = Puller::new();
    let src = format!("oci:{}:busybox:latest", busybox_layout().display());
    reg.push(&src, "test/busybox:1", &[]);
    let r = format!("{}/test/busybox:1", reg.host());
    // Killed at some point of its work (wherever it is: no timing is asserted).
    let mut child = p
        .cmd(&["image", "pull", &r, "--tls-verify=false"])
        .spawn()
        .unwrap();
    let _ = wait_until(Duration::from_secs(10), || {
        p.store.path().join("pulls").exists()
    });
    let _ = child.kill();
    let _ = child.wait();
    let (digest, _) = layout_manifest(busybox_layout());
    assert_eq!(p.pulled(&r, &["--tls-verify=false"]), digest);
    drop(reg);
    assert_eq!(p.sh(&r, "echo again"), "again\n");
}

#[test]
fn two_concurrent_pulls_of_one_image_share_the_store() {
    require!(NEEDS[0], NEEDS[1], NEEDS[2], NEEDS[3]);
    let Some(reg) = Registry::start(false, None) else {
        skip!("docker-registry did not start on loopback");
    };
    let p = Puller::new();
    let src = format!("oci:{}:busybox:latest", busybox_layout().display());
    reg.push(&src, "test/busybox:1", &[]);
    let r = format!("{}/test/busybox:1", reg.host());
    let children: Vec<Child> = (0..2)
        .map(|_| {
            p.cmd(&["image", "pull", &r, "--tls-verify=false"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outs: Vec<Output> = children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    let (digest, m) = layout_manifest(busybox_layout());
    for o in &outs {
        assert_eq!(
            expect_code(o, 0).split_whitespace().next(),
            Some(digest.as_str())
        );
    }
    // One image, each blob once (manifest, config, layer), no download left behind.
    assert_eq!(p.files("images"), vec![digest[7..].to_string()]);
    let mut blobs = vec![
        digest[7..].to_string(),
        m["config"]["digest"].as_str().unwrap()[7..].to_string(),
        m["layers"][0]["digest"].as_str().unwrap()[7..].to_string(),
    ];
    blobs.sort();
    assert_eq!(p.files("blobs/sha256"), blobs);
    assert!(p
        .files("pulls/blobs/sha256")
        .iter()
        .all(|f| f.ends_with(".lock")));
    // The layer crossed the wire once or twice (never more), and the second pull
    // downloaded nothing the store had.
    let count = |log: &str| {
        log.matches(&format!(
            "/blobs/{} HTTP/1.1\" 200",
            m["layers"][0]["digest"].as_str().unwrap()
        ))
        .count()
    };
    let before = count(&reg.log());
    assert!((1..=2).contains(&before), "{before}");
    assert_eq!(p.pulled(&r, &["--tls-verify=false"]), digest);
    assert_eq!(
        count(&reg.log()),
        before,
        "a pull of a stored image downloads no layer"
    );
    drop(reg);
    assert_eq!(p.sh(&r, "echo shared"), "shared\n");
}

/// A token service as Docker Hub's `auth.docker.io`: grants every scope asked for, in a JWT
/// signed with `key.pem` whose certificate (`cert.pem`) the registry trusts; logs each
/// request's query.
const TOKEN_SERVER: &str = r#"
import base64, http.server, json, subprocess, sys, time, urllib.parse
port, key, cert, log = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()
der = subprocess.run(["openssl", "x509", "-in", cert, "-outform", "DER"], capture_output=True, check=True).stdout
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        q = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)
        open(log, "a").write(json.dumps({"query": q, "auth": self.headers.get("Authorization")}) + "\n")
        access = []
        for s in q.get("scope", []):
            kind, name, actions = s.split(":")
            access.append({"type": kind, "name": name, "actions": actions.split(",")})
        now = int(time.time())
        head = b64(json.dumps({"typ": "JWT", "alg": "RS256", "x5c": [base64.b64encode(der).decode()]}).encode())
        claims = b64(json.dumps({"iss": "test-issuer", "sub": "", "aud": q.get("service", [""])[0], "exp": now + 600, "nbf": now - 60, "iat": now, "jti": str(now), "access": access}).encode())
        sig = subprocess.run(["openssl", "dgst", "-sha256", "-sign", key], input=f"{head}.{claims}".encode(), capture_output=True, check=True).stdout
        body = json.dumps({"token": f"{head}.{claims}.{b64(sig)}"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
"#;

#[test]
fn pull_with_an_anonymous_bearer_token_as_docker_hub_asks() {
    require!(
        NEEDS[0],
        NEEDS[1],
        NEEDS[2],
        NEEDS[3],
        Need::Tool("openssl"),
        Need::Tool("python3")
    );
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let o = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "key.pem",
            "-out",
            "cert.pem",
            "-days",
            "2",
            "-subj",
            "/CN=token",
        ])
        .current_dir(d)
        .output()
        .unwrap();
    assert!(o.status.success(), "openssl: {}", stderr(&o));
    let token_port = free_port();
    std::fs::write(d.join("server.py"), TOKEN_SERVER).unwrap();
    let mut server = Command::new("python3")
        .arg(d.join("server.py"))
        .arg(token_port.to_string())
        .arg(d.join("key.pem"))
        .arg(d.join("cert.pem"))
        .arg(d.join("requests.log"))
        .spawn()
        .unwrap();
    struct Kill<'a>(&'a mut Child);
    impl Drop for Kill<'_> {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _server = Kill(&mut server);
    let auth = format!(
        "auth:\n  token:\n    realm: http://127.0.0.1:{token_port}/token\n    service: test-registry\n    issuer: test-issuer\n    rootcertbundle: {}\n",
        d.join("cert.pem").display()
    );
    let Some(reg) = Registry::start_with(false, None, &auth) else {
        skip!("docker-registry did not start on loopback");
    };
    let up = wait_until(Duration::from_secs(30), || {
        std::net::TcpStream::connect(("127.0.0.1", token_port)).is_ok()
    });
    assert!(up, "the token server did not start");
    let p = Puller::new();
    let src = format!("oci:{}:busybox:latest", busybox_layout().display());
    reg.push(&src, "test/busybox:1", &[]);
    std::fs::write(d.join("requests.log"), "").unwrap();
    let r = format!("{}/test/busybox:1", reg.host());
    let (digest, _) = layout_manifest(busybox_layout());
    assert_eq!(p.pulled(&r, &["--tls-verify=false"]), digest);
    let log = std::fs::read_to_string(d.join("requests.log")).unwrap();
    let first: serde_json::Value = serde_json::from_str(log.lines().next().unwrap()).unwrap();
    assert_eq!(
        first["query"]["scope"][0], "repository:test/busybox:pull",
        "{log}"
    );
    assert_eq!(first["query"]["service"][0], "test-registry");
    assert!(
        first["auth"].is_null(),
        "anonymous: no credentials sent: {log}"
    );
    drop(reg);
    assert_eq!(p.sh(&r, "echo token"), "token\n");
}
