//! Dependency mirrors: pulled from an index on loopback as it stood at a date, verified, and
//! installed from inside the sandbox with no network.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::common::*;

/// Writes a minimal wheel of `name` `version` (a module printing its version) requiring `deps`.
fn wheel(dir: &Path, name: &str, version: &str, deps: &[&str]) -> String {
    let filename = format!("{name}-{version}-py3-none-any.whl");
    let script = r#"
import sys, zipfile, hashlib, base64
path, name, version = sys.argv[1:4]
deps = sys.argv[4:]
di = f"{name}-{version}.dist-info"
files = {
    f"{name}/__init__.py": f"__version__ = {version!r}\n",
    f"{di}/METADATA": "Metadata-Version: 2.1\nName: %s\nVersion: %s\n%s" % (
        name, version, "".join(f"Requires-Dist: {d}\n" for d in deps)),
    f"{di}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = []
with zipfile.ZipFile(path, "w") as z:
    for n, body in files.items():
        data = body.encode()
        z.writestr(zipfile.ZipInfo(n, (2020, 1, 1, 0, 0, 0)), data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{n},sha256={digest},{len(data)}")
    record.append(f"{di}/RECORD,,")
    z.writestr(zipfile.ZipInfo(f"{di}/RECORD", (2020, 1, 1, 0, 0, 0)), "\n".join(record) + "\n")
"#;
    let o = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(dir.join(&filename))
        .args([name, version])
        .args(deps)
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    filename
}

/// The loopback index: alpha 1.0 (2020) and 2.0 (2022), beta 1.0 (2020, needs alpha), newonly
/// 1.0 (2023).
struct Index {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
    files: PathBuf,
}

impl Index {
    fn start() -> Index {
        let dir = tempfile::tempdir().unwrap();
        let files = dir.path().join("files");
        std::fs::create_dir(&files).unwrap();
        let entries = [
            (wheel(&files, "alpha", "1.0", &[]), "2020-01-01T00:00:00Z"),
            (wheel(&files, "alpha", "2.0", &[]), "2022-01-01T00:00:00Z"),
            (
                wheel(&files, "beta", "1.0", &["alpha"]),
                "2020-06-01T00:00:00Z",
            ),
            (wheel(&files, "newonly", "1.0", &[]), "2023-01-01T00:00:00Z"),
        ];
        let spec = serde_json::json!({
            "files_dir": files,
            "files": entries.iter().map(|(f, t)| serde_json::json!({"filename": f, "upload_time": t})).collect::<Vec<_>>(),
        });
        let spec_path = dir.path().join("spec.json");
        std::fs::write(&spec_path, spec.to_string()).unwrap();
        let server =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("runtime-tests/probes/index_server.py");
        let mut child = Command::new("python3")
            .arg(server)
            .arg(&spec_path)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        use std::io::BufRead;
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = format!("http://127.0.0.1:{}/simple", line.trim());
        Index {
            child,
            url,
            _dir: dir,
            files,
        }
    }
}

impl Drop for Index {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `reprorun mirror pull --date DATE --index INDEX --out OUT PKG`.
fn pull(w: &Work, date: &str, index: &str, out: &str, pkg: &str) -> std::process::Output {
    w.run(&[
        "mirror", "pull", "--date", date, "--index", index, "--out", out, pkg,
    ])
}

#[test]
fn pull_keeps_only_what_existed_at_the_date_and_pip_installs_it_offline() {
    require!(Need::Root, Need::Tool("uv"));
    let idx = Index::start();
    let w = Work::new();
    let out = w.path().join("m");
    let o = pull(&w, "2021-01-01", &idx.url, out.to_str().unwrap(), "beta");
    expect_code(&o, 0);
    // The default --python (3.11) came out after the date: one warning says so, and which
    // Python was the newest then.
    let warnings: Vec<String> = stderr(&o)
        .lines()
        .filter(|l| l.contains("warning"))
        .map(String::from)
        .collect();
    assert_eq!(warnings.len(), 1, "{}", stderr(&o));
    assert!(
        warnings[0].starts_with("reprorun: warning: --python 3.11: Python 3.11 was released on 2022-10-24, after the mirror's date 2021-01-01")
            && warnings[0].contains("pass --python 3.9 (the newest then)"),
        "{}",
        warnings[0]
    );
    let lock = read_json(&out.join("lock.json"));
    let mut have: Vec<String> = lock["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            format!(
                "{}=={}",
                f["name"].as_str().unwrap(),
                f["version"].as_str().unwrap()
            )
        })
        .collect();
    have.sort();
    assert_eq!(have, ["alpha==1.0", "beta==1.0"]);
    assert_eq!(lock["date"], "2021-01-01T00:00:00Z");
    assert_eq!(lock["files"][0]["upload_time"], "2020-01-01T00:00:00Z");
    let json = read_json(&out.join("pypi/simple/alpha/index.json"));
    assert_eq!(json["meta"]["api-version"], "1.1");
    assert_eq!(
        expect_code(&w.run(&["mirror", "verify", out.to_str().unwrap()]), 0)
            .lines()
            .count(),
        1
    );

    // Offline (the sandbox has no network): pip installs exactly the mirrored versions.
    let install = "python3 -m pip install -q --target /tmp/t beta && PYTHONPATH=/tmp/t python3 -c 'import alpha, beta; print(alpha.__version__, beta.__version__)'";
    let o = w.run(&[
        "exec",
        "--mirror",
        out.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        install,
    ]);
    assert_eq!(expect_code(&o, 0), "1.0 1.0\n");
    // uv, given to the sandbox (it is not in the host root the sandbox sees here), installs
    // from the mirror too.
    let uv = Command::new("sh")
        .args([
            "-c",
            // The real binary, not a pyenv shim (a script that needs pyenv).
            "python3 -c 'import uv; print(uv.find_uv_bin())' 2>/dev/null || readlink -f \"$(command -v uv)\"",
        ])
        .output()
        .unwrap();
    let uv = String::from_utf8_lossy(&uv.stdout).trim().to_string();
    let uv_dir = tempfile::tempdir().unwrap();
    std::fs::copy(&uv, uv_dir.path().join("uv")).unwrap();
    let bind = format!("{}:/tmp/uvbin:ro", uv_dir.path().display());
    let o = w.run(&[
        "exec", "--mirror", out.to_str().unwrap(), "--bind", &bind, "--", "sh", "-c",
        "/tmp/uvbin/uv pip install -q --python /usr/bin/python3 --target /tmp/u beta && PYTHONPATH=/tmp/u python3 -c 'import alpha; print(alpha.__version__)'",
    ]);
    assert_eq!(expect_code(&o, 0), "1.0\n");
    // The mirror is read-only inside.
    let o = w.run(&[
        "exec",
        "--mirror",
        out.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "touch /mirror/x",
    ]);
    assert_ne!(o.status.code(), Some(0));

    // A later date takes the newer alpha.
    let out2 = w.path().join("m2");
    let o = pull(&w, "2022-06-01", &idx.url, out2.to_str().unwrap(), "alpha");
    expect_code(&o, 0);
    assert_eq!(
        read_json(&out2.join("lock.json"))["files"][0]["version"],
        "2.0"
    );

    // Tampering: verify fails, and so does installing.
    std::fs::write(out.join("pypi/files/alpha-1.0-py3-none-any.whl"), b"evil").unwrap();
    let o = w.run(&["mirror", "verify", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert!(
        stderr(&o).contains("alpha-1.0-py3-none-any.whl: sha256"),
        "{o:?}"
    );
    let o = w.run(&[
        "exec",
        "--mirror",
        out.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        install,
    ]);
    assert_ne!(o.status.code(), Some(0), "{o:?}");
    assert!(stderr(&o).to_lowercase().contains("hash"), "{o:?}");
    drop(idx.files.clone());
}

#[test]
fn pull_fails_clearly_and_leaves_nothing() {
    require!(Need::Root, Need::Tool("uv"));
    let idx = Index::start();
    let w = Work::new();
    let out = w.path().join("m");
    let out_s = out.to_str().unwrap();
    let nothing_left = || {
        let left: Vec<_> = std::fs::read_dir(w.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert!(left.is_empty(), "{left:?}");
    };
    // Only newer versions than the date.
    let o = pull(&w, "2021-01-01", &idx.url, out_s, "newonly");
    expect_error(&o, "newonly");
    assert!(stderr(&o).contains("2021-01-01"), "{o:?}");
    nothing_left();
    // Bad date, unreadable requirements, unreachable index, nothing asked.
    expect_error(
        &w.run(&["mirror", "pull", "--date", "someday", "--out", out_s, "x"]),
        "--date",
    );
    expect_error(
        &w.run(&[
            "mirror",
            "pull",
            "--date",
            "2021-01-01",
            "-r",
            "/nonexistent/req.txt",
            "--out",
            out_s,
        ]),
        "/nonexistent/req.txt",
    );
    expect_error(
        &w.run(&[
            "mirror",
            "pull",
            "--date",
            "2021-01-01",
            "--index",
            "http://127.0.0.1:9/simple",
            "--out",
            out_s,
            "alpha",
        ]),
        "127.0.0.1:9",
    );
    expect_error(
        &w.run(&["mirror", "pull", "--date", "2021-01-01", "--out", out_s]),
        "nothing to mirror",
    );
    nothing_left();
    expect_error(
        &w.run(&["exec", "--mirror", "/nonexistent", "--", "true"]),
        "--mirror: /nonexistent: no such directory",
    );
}

#[test]
fn add_and_index_build_a_mirror_offline() {
    require!(Need::Root);
    let w = Work::new();
    let src = tempfile::tempdir().unwrap();
    let a1 = wheel(src.path(), "alpha", "1.0", &[]);
    let a2 = wheel(src.path(), "alpha", "2.0", &[]);
    let m = w.path().join("m");
    let ms = m.to_str().unwrap();
    let p = |f: &str| src.path().join(f).to_str().unwrap().to_string();
    expect_code(
        &w.run(&[
            "mirror",
            "add",
            ms,
            "--upload-time",
            "2020-01-01T00:00:00Z",
            &p(&a1),
        ]),
        0,
    );
    expect_code(
        &w.run(&[
            "mirror",
            "add",
            ms,
            "--upload-time",
            "2022-01-01T00:00:00Z",
            &p(&a2),
        ]),
        0,
    );
    let run = |w: &Work| {
        let o = w.run(&["exec", "--mirror", ms, "--", "sh", "-c",
            "python3 -m pip install -q --target /tmp/t alpha && PYTHONPATH=/tmp/t python3 -c 'import alpha; print(alpha.__version__)'"]);
        expect_code(&o, 0)
    };
    assert_eq!(run(&w), "2.0\n");
    expect_code(&w.run(&["mirror", "index", ms, "--date", "2021-01-01"]), 0);
    assert_eq!(run(&w), "1.0\n");
    expect_code(&w.run(&["mirror", "verify", ms]), 0);
    expect_error(
        &w.run(&["mirror", "add", ms, "/etc/hostname"]),
        "not a wheel or sdist",
    );
    expect_error(
        &w.run(&["mirror", "index", ms, "--date", "tomorrowish"]),
        "--date",
    );
}

/// `--mirror-serve http`: the PyPI part over HTTP on the sandbox's loopback, HTML for pip,
/// PEP 691 JSON with upload times for clients that ask for it (uv's --exclude-newer).
#[test]
fn the_pypi_part_is_served_over_http_with_upload_times() {
    require!(Need::Root);
    let w = Work::new();
    let src = tempfile::tempdir().unwrap();
    let m = w.path().join("m");
    let ms = m.to_str().unwrap();
    for (v, t) in [
        ("1.0", "2020-01-01T00:00:00Z"),
        ("2.0", "2022-01-01T00:00:00Z"),
    ] {
        let f = src.path().join(wheel(src.path(), "alpha", v, &[]));
        let o = w.run(&["mirror", "add", ms, "--upload-time", t, f.to_str().unwrap()]);
        expect_code(&o, 0);
    }
    let exec = |script: &str| {
        w.run(&[
            "exec",
            "--mirror",
            ms,
            "--mirror-serve",
            "http",
            "--",
            "sh",
            "-c",
            script,
        ])
    };
    let o = exec("echo $PIP_INDEX_URL; python3 -m pip install -q --target /tmp/t alpha && PYTHONPATH=/tmp/t python3 -c 'import alpha; print(alpha.__version__)'");
    assert_eq!(
        expect_code(&o, 0),
        "http://127.0.0.1:4873/pypi/simple/\n2.0\n"
    );
    let o = exec("curl -sf -H 'Accept: application/vnd.pypi.simple.v1+json' http://127.0.0.1:4873/pypi/simple/alpha/; curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:4873/pypi/files/../lock.json");
    let out = expect_code(&o, 0);
    let (json, status) = out.rsplit_once('\n').unwrap();
    let page: serde_json::Value = serde_json::from_str(json).unwrap();
    assert_eq!(
        page["files"][0]["upload-time"], "2020-01-01T00:00:00Z",
        "{page}"
    );
    assert_eq!(status, "404");
    // uv itself, not a version manager's shim that needs the rest of the manager.
    let uv = Command::new("python3")
        .args(["-c", "import uv; print(uv.find_uv_bin())"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| stdout(&o).trim().to_string());
    if let Some(uv) = uv {
        let bind = format!("{uv}:/tmp/uv:ro");
        let o = w.run(&[
            "exec", "--mirror", ms, "--mirror-serve", "http", "--bind", &bind, "--", "sh", "-c",
            "/tmp/uv pip install -q --system --target /tmp/u --exclude-newer 2021-01-01T00:00:00Z alpha && PYTHONPATH=/tmp/u python3 -c 'import alpha; print(alpha.__version__)'",
        ]);
        assert_eq!(expect_code(&o, 0), "1.0\n");
    }
    expect_usage_error(
        &w.run(&["exec", "--mirror-serve", "http", "--", "true"]),
        "--mirror",
        "reprorun exec",
    );
}

/// A GOPROXY fixture: example.com/dep v1.0.0 (2020) and v1.1.0 (2030).
fn go_fixture(dir: &Path) {
    let script = r#"
import sys, os, zipfile, json
root = sys.argv[1]
mod = "example.com/dep"
d = os.path.join(root, mod, "@v")
os.makedirs(d)
for v, t in [("v1.0.0", "2020-01-01T00:00:00Z"), ("v1.1.0", "2030-01-01T00:00:00Z")]:
    open(os.path.join(d, v + ".info"), "w").write(json.dumps({"Version": v, "Time": t}))
    gomod = "module example.com/dep\n\ngo 1.19\n"
    open(os.path.join(d, v + ".mod"), "w").write(gomod)
    with zipfile.ZipFile(os.path.join(d, v + ".zip"), "w") as z:
        z.writestr(f"{mod}@{v}/go.mod", gomod)
        z.writestr(f"{mod}@{v}/dep.go", 'package dep\n\nfunc Hello() string { return "hello from dep %s" }\n' % v)
open(os.path.join(d, "list"), "w").write("v1.0.0\nv1.1.0\n")
"#;
    let o = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
}

#[test]
fn go_modules_mirror_and_build_offline() {
    require!(Need::Root, Need::Tool("go"));
    let fixture = tempfile::tempdir().unwrap();
    go_fixture(fixture.path());
    let proxy = format!("file://{}", fixture.path().display());
    let w = Work::new();
    let module = |version: &str| {
        let dir = w.path().join(format!("app-{version}"));
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(
            dir.join("go.mod"),
            format!("module example.com/app\n\ngo 1.19\n\nrequire example.com/dep {version}\n"),
        )
        .unwrap();
        std::fs::write(
            dir.join("main.go"),
            "package main\n\nimport (\n\t\"fmt\"\n\t\"example.com/dep\"\n)\n\nfunc main() { fmt.Println(dep.Hello()) }\n",
        )
        .unwrap();
        dir
    };
    let app = module("v1.0.0");
    let out = w.path().join("gm");
    let o = w.run(&[
        "mirror",
        "pull",
        "--date",
        "2021-01-01",
        "--go",
        app.join("go.mod").to_str().unwrap(),
        "--go-proxy",
        &proxy,
        "--out",
        out.to_str().unwrap(),
    ]);
    expect_code(&o, 0);
    assert_eq!(
        std::fs::read_to_string(out.join("go/example.com/dep/@v/list")).unwrap(),
        "v1.0.0\n"
    );
    expect_code(&w.run(&["mirror", "verify", out.to_str().unwrap()]), 0);
    let o = w.run(&[
        "exec",
        "--mirror",
        out.to_str().unwrap(),
        "--workdir",
        app.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "go build -o /tmp/app . && /tmp/app",
    ]);
    assert_eq!(expect_code(&o, 0), "hello from dep v1.0.0\n");
    // A go.mod that needs a version published after the date.
    let late = module("v1.1.0");
    let out2 = w.path().join("gm2");
    let o = w.run(&[
        "mirror",
        "pull",
        "--date",
        "2021-01-01",
        "--go",
        late.join("go.mod").to_str().unwrap(),
        "--go-proxy",
        &proxy,
        "--out",
        out2.to_str().unwrap(),
    ]);
    expect_error(&o, "example.com/dep@v1.1.0 was published 2030-01-01");
    assert!(!out2.exists());
}

/// `--project DIR` reads what to mirror from pyproject.toml (build requirements, extras,
/// PEP 735 groups); `--into` adds to an existing mirror at its own date and refuses another.
#[test]
fn pull_reads_a_project_and_adds_into_an_existing_mirror() {
    require!(Need::Root, Need::Tool("uv"));
    let idx = Index::start();
    let w = Work::new();
    let proj = w.path().join("proj");
    std::fs::create_dir(&proj).unwrap();
    std::fs::write(
        proj.join("pyproject.toml"),
        "[build-system]\nrequires = [\"alpha\"]\n\n[project]\nname = \"proj\"\ndependencies = []\n\n\
         [project.optional-dependencies]\nextra = [\"newonly\"]\n\n\
         [dependency-groups]\ntest = [\"beta\"]\nall = [{include-group = \"test\"}]\n",
    )
    .unwrap();
    let names = |m: &Path| {
        let lock = read_json(&m.join("lock.json"));
        let mut v: Vec<String> = lock["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["name"].as_str().unwrap().to_string())
            .collect();
        v.sort();
        v
    };
    let m = w.path().join("m");
    let (ms, ps) = (m.to_str().unwrap(), proj.to_str().unwrap());
    let pull = |args: &[&str]| {
        let mut all = vec![
            "mirror",
            "pull",
            "--date",
            "2024-01-01",
            "--index",
            &idx.url,
        ];
        all.extend_from_slice(args);
        w.run(&all)
    };
    expect_code(&pull(&["--out", ms, "--project", ps]), 0);
    assert_eq!(names(&m), ["alpha"]);
    // A forgotten group is added into the same mirror, not a new pull.
    let o = pull(&[
        "--into",
        ms,
        "--project",
        ps,
        "--groups",
        "all",
        "--extras",
        "extra",
    ]);
    assert!(
        expect_code(&o, 0).contains("2 files added"),
        "{}",
        stdout(&o)
    );
    assert_eq!(names(&m), ["alpha", "beta", "newonly"]);
    expect_code(&w.run(&["mirror", "verify", ms]), 0);
    // Another date, an unknown group: refused, the mirror unchanged.
    let o = w.run(&[
        "mirror",
        "pull",
        "--date",
        "2025-01-01",
        "--index",
        &idx.url,
        "--into",
        ms,
        "alpha",
    ]);
    expect_error(
        &o,
        "the mirror is cut at 2024-01-01T00:00:00Z, not 2025-01-01T00:00:00Z",
    );
    expect_error(
        &pull(&["--into", ms, "--project", ps, "--groups", "docs"]),
        "no dependency group \"docs\"",
    );
    assert_eq!(names(&m), ["alpha", "beta", "newonly"]);
}
