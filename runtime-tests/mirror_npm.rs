//! The npm part of a mirror: pulled from a registry the test serves on loopback as it stood
//! at a date, verified, and installed with `npm ci` inside the sandbox with no network.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::common::*;

/// The loopback registry: `dep` 1.0.0 (2020) 1.1.0 (mid-2021) 2.0.0 (2023); `mid` 1.0.0
/// (2020, needs dep ^1); `@scope/util` 1.0.0 (2020) 1.2.0 (mid-2022); `top` 1.0.0 (2020)
/// 2.0.0 (2024, the registry's `latest` today), with a `top-version` command; `bad` 1.0.0
/// served with an integrity that is not its tarball's.
struct Registry {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Registry {
    fn start() -> Registry {
        let dir = tempfile::tempdir().unwrap();
        let p = |name: &str, version: &str, time: &str| serde_json::json!({"name": name, "version": version, "time": format!("{time}T00:00:00.000Z")});
        let mut packages = vec![
            p("dep", "1.0.0", "2020-01-01"),
            p("dep", "1.1.0", "2021-06-01"),
            p("dep", "2.0.0", "2023-01-01"),
            p("mid", "1.0.0", "2020-02-01"),
            p("@scope/util", "1.0.0", "2020-03-01"),
            p("@scope/util", "1.2.0", "2022-06-01"),
            p("top", "1.0.0", "2020-01-01"),
            p("top", "2.0.0", "2024-01-01"),
            p("bad", "1.0.0", "2020-01-01"),
        ];
        packages[3]["deps"] = serde_json::json!({"dep": "^1.0.0"});
        packages[6]["bin"] = true.into();
        packages[7]["bin"] = true.into();
        packages[8]["bad_integrity"] = true.into();
        let spec = dir.path().join("spec.json");
        std::fs::write(
            &spec,
            serde_json::json!({ "packages": packages }).to_string(),
        )
        .unwrap();
        let server =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("runtime-tests/probes/npm_registry.py");
        let mut child = Command::new("python3")
            .arg(server)
            .arg(&spec)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        use std::io::BufRead;
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        Registry {
            child,
            url: format!("http://127.0.0.1:{}", line.trim()),
            _dir: dir,
        }
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const APP: &str = r#"{"name": "app", "version": "1.0.0", "private": true,
  "dependencies": {"mid": "^1.0.0", "@scope/util": "^1.0.0", "top": "*"}}"#;

/// `mirror pull --npm PACKAGE_JSON [--npm-lock LOCK] --npm-registry URL --date DATE --out OUT`.
fn pull(
    w: &Work,
    reg: &str,
    date: &str,
    pj: &Path,
    lock: Option<&Path>,
    out: &Path,
) -> std::process::Output {
    let mut args = vec![
        "mirror".to_string(),
        "pull".into(),
        "--npm".into(),
        pj.display().to_string(),
        "--npm-registry".into(),
        reg.into(),
        "--date".into(),
        date.into(),
        "--out".into(),
        out.display().to_string(),
    ];
    if let Some(l) = lock {
        args.extend(["--npm-lock".into(), l.display().to_string()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    w.run(&args)
}

/// name@version of every npm record in a mirror's lock.
fn locked(mirror: &Path) -> Vec<String> {
    let lock = read_json(&mirror.join("lock.json"));
    lock["npm"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            format!(
                "{}@{}",
                r["name"].as_str().unwrap(),
                r["version"].as_str().unwrap()
            )
        })
        .collect()
}

/// Every file below `dir` with its bytes, sorted by path.
fn files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                let rel = e.path().strip_prefix(dir).unwrap().to_path_buf();
                out.push((rel, std::fs::read(e.path()).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// The loopback registry, a work directory and the app's package.json in it.
fn registry_and_app() -> (Registry, Work, PathBuf) {
    let reg = Registry::start();
    let w = Work::new();
    let pj = w.path().join("package.json");
    std::fs::write(&pj, APP).unwrap();
    (reg, w, pj)
}

/// An app directory holding package.json (and the lockfile given).
fn app(w: &Work, name: &str, lock: Option<&Path>) -> PathBuf {
    let dir = w.path().join(name);
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("package.json"), APP).unwrap();
    if let Some(l) = lock {
        std::fs::copy(l, dir.join("package-lock.json")).unwrap();
    }
    dir
}

/// `npm ci` (after `npm install` writes a lockfile when there is none) offline in the
/// sandbox, then what got installed and what `npx --no-install top-version` says.
fn install_offline(mirror: &Path, dir: &Path) -> std::process::Output {
    let script = "set -e; [ -f package-lock.json ] || npm install --loglevel=error >/dev/null; rm -rf node_modules; \
        npm ci --loglevel=error >/dev/null; for p in dep mid @scope/util top; do \
        node -p \"require('$p/package.json').name + '@' + require('$p/package.json').version\"; done; \
        npx --no-install top-version";
    offline(mirror, dir, script)
}

/// `sh -c script` in the sandbox with no network, `mirror` attached and `dir` at /work.
fn offline(mirror: &Path, dir: &Path, script: &str) -> std::process::Output {
    Command::new(BIN)
        .args(["exec", "--net", "none", "--mirror"])
        .arg(mirror)
        .arg("--workdir")
        .arg(dir)
        .args(["--", "sh", "-c", script])
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn npm_pull_takes_the_versions_of_the_date_and_npm_ci_installs_them_offline() {
    require!(Need::Root, Need::Tool("npm"));
    let (reg, w, pj) = registry_and_app();
    let (early, late) = (w.path().join("m2021"), w.path().join("m2022"));
    expect_code(&pull(&w, &reg.url, "2021-01-01", &pj, None, &early), 0);
    expect_code(&pull(&w, &reg.url, "2022-12-31", &pj, None, &late), 0);
    // top is 2.0.0 on the registry today (its `latest`), 1.0.0 at both dates.
    assert_eq!(
        locked(&early),
        ["@scope/util@1.0.0", "dep@1.0.0", "mid@1.0.0", "top@1.0.0"]
    );
    assert_eq!(
        locked(&late),
        ["@scope/util@1.2.0", "dep@1.1.0", "mid@1.0.0", "top@1.0.0"]
    );
    // The packument holds the mirrored versions, served from the sandbox's loopback.
    let util = read_json(&late.join("npm/@scope/util/index.json"));
    assert_eq!(util["dist-tags"]["latest"], "1.2.0");
    assert_eq!(
        util["versions"]["1.2.0"]["dist"]["tarball"],
        "http://127.0.0.1:4873/@scope/util/-/util-1.2.0.tgz"
    );
    // Same registry, same date: the same bytes.
    let again = w.path().join("again");
    expect_code(&pull(&w, &reg.url, "2021-01-01", &pj, None, &again), 0);
    assert_eq!(files(&early), files(&again));
    let o = w.run(&["mirror", "verify", early.to_str().unwrap()]);
    assert!(
        expect_code(&o, 0).contains("4 npm package versions"),
        "{o:?}"
    );
    // Installed offline, exactly the versions of each date.
    for (mirror, want) in [
        (&early, "@scope/util@1.0.0\n"),
        (&late, "@scope/util@1.2.0\n"),
    ] {
        let dir = app(
            &w,
            &format!("app-{}", mirror.file_name().unwrap().to_string_lossy()),
            None,
        );
        let o = install_offline(mirror, &dir);
        let out = expect_code(&o, 0);
        assert!(out.starts_with("dep@"), "{out}");
        assert!(out.contains(want), "{out}");
        assert!(out.contains("top@1.0.0\n1.0.0\n"), "{out}");
        let dep = if mirror == &early {
            "dep@1.0.0"
        } else {
            "dep@1.1.0"
        };
        assert!(out.contains(dep), "{out}");
    }
}

#[test]
fn npm_lockfile_pull_refuses_later_versions_and_tampering_fails_verify_and_npm_ci() {
    require!(Need::Root, Need::Tool("npm"));
    let reg = Registry::start();
    let w = Work::new();
    // A lockfile made today against the registry (its newest matching versions).
    let made = app(&w, "made", None);
    let o = Command::new("npm")
        .args([
            "install",
            "--package-lock-only",
            "--ignore-scripts",
            "--no-audit",
            "--no-fund",
        ])
        .arg(format!("--registry={}/", reg.url))
        .env("npm_config_cache", w.path().join("npm-cache"))
        .current_dir(&made)
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let lock = made.join("package-lock.json");
    let pj = made.join("package.json");
    let m = w.path().join("m");
    // At 2021 the lockfile's @scope/util 1.2.0 did not exist yet: named, nothing written.
    let o = pull(&w, &reg.url, "2021-01-01", &pj, Some(&lock), &m);
    expect_error(
        &o,
        "@scope/util@1.2.0 was published 2022-06-01T00:00:00.000Z, after 2021-01-01T00:00:00Z",
    );
    assert!(!m.exists());
    // At 2025: exactly the lockfile's versions (top 2.0.0 of 2024 included).
    expect_code(&pull(&w, &reg.url, "2025-01-01", &pj, Some(&lock), &m), 0);
    assert_eq!(
        locked(&m),
        ["@scope/util@1.2.0", "dep@1.1.0", "mid@1.0.0", "top@2.0.0"]
    );
    // npm ci from the lockfile (its tarball URLs name the loopback registry: the sandbox's
    // npm fetches them from the mirror).
    let dir = app(&w, "ci", Some(&lock));
    let out = expect_code(&install_offline(&m, &dir), 0);
    assert!(out.contains("top@2.0.0\n2.0.0\n"), "{out}");
    // A tarball changed in the mirror: verify names it, npm ci refuses it.
    let tgz = m.join("npm/dep/-/dep-1.1.0.tgz");
    let mut bytes = std::fs::read(&tgz).unwrap();
    bytes.push(0);
    std::fs::write(&tgz, bytes).unwrap();
    let o = w.run(&["mirror", "verify", m.to_str().unwrap()]);
    expect_code(&o, 1);
    assert!(
        stderr(&o).contains("npm/dep/-/dep-1.1.0.tgz: sha512-"),
        "{o:?}"
    );
    let dir = app(&w, "ci-tampered", Some(&lock));
    let o = install_offline(&m, &dir);
    assert_ne!(o.status.code(), Some(0), "{o:?}");
    assert!(
        stderr(&o).contains("EINTEGRITY") || stderr(&o).contains("integrity"),
        "{o:?}"
    );
    // A packument edited by hand: not what the lock generates.
    std::fs::write(m.join("npm/mid/index.json"), "{}").unwrap();
    let o = w.run(&["mirror", "verify", m.to_str().unwrap()]);
    assert!(
        stderr(&o).contains("npm/mid/index.json: differs from what the lock generates"),
        "{o:?}"
    );
}

#[test]
fn npm_pull_bad_input_is_one_line_and_leaves_nothing() {
    require!(Need::Root, Need::Tool("npm"));
    let reg = Registry::start();
    let w = Work::new();
    let out = w.path().join("m");
    let write = |name: &str, text: &str| {
        let p = w.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let good = write("package.json", APP);
    let cases: Vec<(PathBuf, Option<PathBuf>, &str, String)> = vec![
        (
            write("broken.json", "{\"dependencies\":"),
            None,
            "2025-01-01",
            "broken.json: not JSON".into(),
        ),
        (
            good.clone(),
            Some(write("broken-lock.json", "{")),
            "2025-01-01",
            "broken-lock.json: not JSON".into(),
        ),
        (
            good.clone(),
            Some(write(
                "v1.json",
                r#"{"lockfileVersion": 1, "dependencies": {}}"#,
            )),
            "2025-01-01",
            "lockfileVersion 1".into(),
        ),
        (
            write("unknown.json", r#"{"dependencies": {"nosuch": "^1"}}"#),
            None,
            "2025-01-01",
            "nosuch: no such package in the registry".into(),
        ),
        (
            write("bad.json", r#"{"dependencies": {"bad": "^1"}}"#),
            None,
            "2025-01-01",
            "bad@1.0.0: tarball".into(),
        ),
        (
            write("late.json", r#"{"dependencies": {"dep": "^2"}}"#),
            None,
            "2021-01-01",
            "No matching version found for dep@^2".into(),
        ),
    ];
    for (pj, lock, date, needle) in &cases {
        let o = pull(&w, &reg.url, date, pj, lock.as_deref(), &out);
        expect_error(&o, needle);
    }
    let o = pull(&w, "http://127.0.0.1:9", "2025-01-01", &good, None, &out);
    expect_error(&o, "127.0.0.1:9");
    let left: Vec<_> = std::fs::read_dir(w.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.ends_with(".json"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    // A mirror with an npm part needs the sandbox's own loopback.
    expect_code(&pull(&w, &reg.url, "2021-01-01", &good, None, &out), 0);
    let o = w.run(&[
        "exec",
        "--net",
        "host",
        "--mirror",
        out.to_str().unwrap(),
        "--",
        "true",
    ]);
    expect_error(&o, "needs a network namespace of its own");
}

#[test]
fn yarn_classic_and_pnpm_install_the_dates_versions_from_the_served_mirror() {
    require!(
        Need::Root,
        Need::Tool("npm"),
        Need::Tool("yarn"),
        Need::Tool("pnpm")
    );
    let (reg, w, pj) = registry_and_app();
    let m = w.path().join("m");
    expect_code(&pull(&w, &reg.url, "2021-01-01", &pj, None, &m), 0);
    // Each client with no lockfile of its own resolves against the served packuments: the
    // registry's `latest` today (top 2.0.0, dep 2.0.0) is not there to be chosen.
    for (tool, install, lockfile) in [
        (
            "yarn",
            "yarn install --non-interactive --silent",
            "yarn.lock",
        ),
        ("pnpm", "pnpm install --reporter=silent", "pnpm-lock.yaml"),
    ] {
        let dir = app(&w, &format!("app-{tool}"), None);
        let script = format!(
            "set -e; {install} >/dev/null; \
             for p in mid @scope/util top; do \
             node -p \"require('$p/package.json').name + '@' + require('$p/package.json').version\"; done; \
             node -p \"require(require.resolve('dep/package.json', {{paths: [require.resolve('mid')]}})).version\""
        );
        let o = offline(&m, &dir, &script);
        let out = expect_code(&o, 0);
        assert_eq!(
            out, "mid@1.0.0\n@scope/util@1.0.0\ntop@1.0.0\n1.0.0\n",
            "{tool}: {o:?}"
        );
        // The client's own lockfile names the sandbox's registry, never the public one.
        let lock = std::fs::read_to_string(dir.join(lockfile)).unwrap();
        assert!(!lock.contains("registry.npmjs.org"), "{tool}: {lock}");
        assert!(!lock.contains("registry.yarnpkg.com"), "{tool}: {lock}");
        if tool == "yarn" {
            assert!(lock.contains("resolved \"http://127.0.0.1:4873/"), "{lock}");
        }
    }
}
