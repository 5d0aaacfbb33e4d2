//! `reproduce` instances whose `image` is a registry reference (SWE-bench's and Epoch AI's
//! instance-image names, sent to a `docker-registry` on loopback by a registries.conf as
//! podman users write it) or a `dockerfile` built by podman: pulled or built once, recorded
//! by digest in every run's record, and found offline by the next study.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::common::cache::{ecosystem_base, node_modules, Ecosystem};
use crate::common::*;
use crate::image::busybox_layout;
use crate::image_pull::{layout_manifest, Registry, NEEDS};
use crate::reproduce::{instance, Fixture, FIX, PLAIN_TEST};
use reprorun_reproduce::store::Store;

const SWEBENCH: &str = "swebench/sweb.eval.x86_64.demo__calc-1:latest";
const EPOCH: &str = "ghcr.io/epoch-research/swe-bench.eval.x86_64.demo__calc-2:latest";
/// busybox has no python: the image's own grep and test prove where the run was.
const ON_BUSYBOX: &str =
    "grep -q 'a + b' calc.py && test -f tests/test_new.py && ! test -e /usr/bin/python3";

/// Docker Hub mirrored by the loopback registry, Epoch AI's namespace on ghcr.io moved to it.
fn registries_conf(dir: &Path, reg: &Registry) -> PathBuf {
    let conf = dir.join("registries.conf");
    std::fs::write(
        &conf,
        format!(
            "unqualified-search-registries = [\"docker.io\"]\n\n\
             [[registry]]\nprefix = \"docker.io\"\nlocation = \"docker.io\"\n\n\
             [[registry.mirror]]\nlocation = \"{h}\"\ninsecure = true\n\n\
             [[registry]]\nprefix = \"ghcr.io/epoch-research\"\nlocation = \"{h}/epoch-research\"\ninsecure = true\n",
            h = reg.host()
        ),
    )
    .unwrap();
    conf
}

fn on_image(f: &mut Fixture, id: &str, fields: serde_json::Value) {
    let mut extra =
        serde_json::json!({"FAIL_TO_PASS": [], "PASS_TO_PASS": [], "test_cmd": ON_BUSYBOX});
    for (k, v) in fields.as_object().unwrap() {
        extra[k] = v.clone();
    }
    f.add(id, FIX, PLAIN_TEST, extra);
}

/// Removes the study's database and files, so the next study starts anew.
fn forget_study(f: &Fixture) {
    for e in std::fs::read_dir(f.work.path()).unwrap().flatten() {
        if e.file_name().to_string_lossy().starts_with("study.db") {
            let p = e.path();
            if p.is_dir() {
                std::fs::remove_dir_all(&p).unwrap();
            } else {
                std::fs::remove_file(&p).unwrap();
            }
        }
    }
}

/// Every run's recorded image digest.
fn recorded_digests(f: &Fixture) -> Vec<String> {
    f.rows()
        .iter()
        .map(|r| {
            let env: serde_json::Value = serde_json::from_str(r.env.as_deref().unwrap()).unwrap();
            env["image_digest"].as_str().unwrap_or("none").to_string()
        })
        .collect()
}

fn summary(out: &Output) -> serde_json::Value {
    let text = expect_code(out, 0);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[test]
fn registry_images_are_pulled_once_per_study_recorded_by_digest_then_used_offline() {
    require!(NEEDS[0], NEEDS[1], NEEDS[2], NEEDS[3]);
    let Some(Setup {
        reg,
        mut f,
        store,
        conf,
        ..
    }) = Setup::busybox(&[
        "swebench/sweb.eval.x86_64.demo__calc-1:latest",
        "epoch-research/swe-bench.eval.x86_64.demo__calc-2:latest",
    ])
    else {
        skip!("docker-registry did not start on loopback");
    };
    let conf = conf.display().to_string();
    let (digest, _) = layout_manifest(busybox_layout());
    on_image(&mut f, "a", serde_json::json!({"image": SWEBENCH}));
    on_image(&mut f, "b", serde_json::json!({"image": SWEBENCH}));
    on_image(&mut f, "c", serde_json::json!({"image": EPOCH}));
    let args = ["--json", "--k", "1", "--store", &store];
    let mut with_conf = args.to_vec();
    with_conf.extend(["--registries-conf", &conf]);
    let out = f.cmd(&with_conf).output().unwrap();
    let s = summary(&out);
    let err = stderr(&out);
    // Each image once, however many instances name it, before the runs.
    assert_eq!(err.matches("reprorun: pulling ").count(), 2, "{err}");
    assert!(
        err.contains(&format!(
            "reprorun: pulling {SWEBENCH} (and 1 more instance(s))"
        )),
        "{err}"
    );
    // A short name, qualified by the search registry the registries.conf names.
    assert!(
        err.contains(&format!(
            "reprorun: pulled {SWEBENCH} as docker.io/{SWEBENCH}: {digest}"
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!("reprorun: pulled {EPOCH}: {digest}")),
        "{err}"
    );
    for id in ["a", "b", "c"] {
        assert_eq!(instance(&s, id)["class_shim"], "reproducible", "{s}");
    }
    assert_eq!(recorded_digests(&f), vec![digest.clone(); 3]);

    // The registry is gone: the next study runs from the store, pulling nothing.
    let host = reg.host();
    drop(reg);
    forget_study(&f);
    let out = f.cmd(&with_conf).output().unwrap();
    let s = summary(&out);
    assert!(!stderr(&out).contains("pulling"), "{}", stderr(&out));
    assert_eq!(instance(&s, "c")["class_shim"], "reproducible", "{s}");
    assert_eq!(recorded_digests(&f), vec![digest; 3]);

    // An image the store lacks: with --pull never, and when the pull fails, one line and
    // no study.
    forget_study(&f);
    on_image(
        &mut f,
        "d",
        serde_json::json!({"image": "swebench/sweb.eval.x86_64.demo__calc-9:latest"}),
    );
    let mut never = with_conf.clone();
    never.extend(["--pull", "never"]);
    let out = f.cmd(&never).output().unwrap();
    expect_error(
        &out,
        "instance d: image \"swebench/sweb.eval.x86_64.demo__calc-9:latest\": image swebench/sweb.eval.x86_64.demo__calc-9:latest: not in the store",
    );
    f.instances[3]["image"] = serde_json::json!(format!("{host}/gone:1"));
    let out = f.cmd(&with_conf).output().unwrap();
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    let err = stderr(&out);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "the progress line, then one line: {err}");
    assert_eq!(lines[0], format!("reprorun: pulling {host}/gone:1"));
    assert!(
        lines[1].starts_with(&format!("reprorun: reproduce: instance d: image \"{host}/gone:1\": not in the store {store}, and the pull failed: pull https://{host}/v2/gone/manifests/1")),
        "{err}"
    );
    assert!(!f.path("study.db").exists());
}

/// podman with a private storage and the test's registries.conf (docker.io mirrored on
/// loopback, where the base image is), so nothing reaches the network or the host's store.
fn podman_env(dir: &Path, conf: &Path) -> Vec<(String, PathBuf)> {
    std::fs::create_dir_all(dir).unwrap();
    let storage = dir.join("storage.conf");
    std::fs::write(
        &storage,
        format!(
            "[storage]\ndriver = \"vfs\"\ngraphroot = \"{d}/root\"\nrunroot = \"{d}/run\"\n",
            d = dir.display()
        ),
    )
    .unwrap();
    let containers = dir.join("containers.conf");
    std::fs::write(
        &containers,
        "[engine]\ncgroup_manager = \"cgroupfs\"\nevents_logger = \"file\"\n",
    )
    .unwrap();
    vec![
        ("CONTAINERS_STORAGE_CONF".into(), storage),
        ("CONTAINERS_CONF".into(), containers),
        ("CONTAINERS_REGISTRIES_CONF".into(), conf.to_path_buf()),
    ]
}

/// What the registry tests share: a `docker-registry` on loopback holding the OCI layout
/// `src` (`oci:DIR:TAG`) as each of `names`, a study fixture, its store, a registries.conf
/// sending Docker Hub and Epoch AI's ghcr.io namespace to the registry, and podman's
/// environment (a private storage, that registries.conf). `None`: the registry did not start.
pub(crate) struct Setup {
    pub(crate) reg: Registry,
    pub(crate) f: Fixture,
    pub(crate) store: String,
    pub(crate) conf: PathBuf,
    pub(crate) podman: Vec<(String, PathBuf)>,
}

impl Setup {
    pub(crate) fn new(src: &str, names: &[&str]) -> Option<Setup> {
        let reg = Registry::start(false, None)?;
        for name in names {
            reg.push(src, name, &[]);
        }
        let f = Fixture::new();
        let store = f.path("store").display().to_string();
        let conf = registries_conf(f.work.path(), &reg);
        let podman = podman_env(&f.path("engine"), &conf);
        Some(Setup {
            reg,
            f,
            store,
            conf,
            podman,
        })
    }

    /// The layout `busybox_layout()` as `oci:DIR:busybox:latest`.
    fn busybox(names: &[&str]) -> Option<Setup> {
        Setup::new(
            &format!("oci:{}:busybox:latest", busybox_layout().display()),
            names,
        )
    }

    /// The Python recipe's layout, as Docker Hub's `python:3.11`.
    fn python() -> Option<Setup> {
        let src = format!(
            "oci:{}:python:3.11",
            crate::image::python_layout().display()
        );
        Setup::new(&src, &["library/python:3.11"])
    }

    /// `reprorun reproduce run` of the fixture's study with `args` and podman's environment.
    fn study(&self, args: &[&str]) -> Output {
        let mut c = self.f.cmd(args);
        for (k, v) in &self.podman {
            c.env(k, v);
        }
        c.output().unwrap()
    }
}

#[test]
fn dockerfile_instances_are_built_by_podman_once_per_dockerfile_and_context() {
    require!(NEEDS[0], NEEDS[1], NEEDS[2], NEEDS[3], Need::Tool("podman"));
    let Some(Setup {
        reg,
        mut f,
        store,
        podman: env,
        ..
    }) = Setup::busybox(&["library/busybox:1.36"])
    else {
        skip!("docker-registry did not start on loopback");
    };
    let engine = f.path("engine");
    let ctx = f.path("env");
    std::fs::create_dir_all(&ctx).unwrap();
    // A RUN step and an ENV the runs must see. reprorun runs the RUN step (podman's
    // --runtime): its OCI containers' pinned clock says 2024, the host's would not.
    std::fs::write(
        ctx.join("Dockerfile"),
        "FROM busybox:1.36\nCOPY setup.sh /opt/setup.sh\nRUN sh /opt/setup.sh && date +%Y > /opt/env/year\nENV CALC_ENV=made-by-dockerfile\n",
    )
    .unwrap();
    // As SWE-bench's Dockerfiles copy their setup_repo.sh.
    std::fs::write(
        ctx.join("setup.sh"),
        "mkdir -p /opt/env && echo built > /opt/env/marker\n",
    )
    .unwrap();
    on_image(
        &mut f,
        "built",
        serde_json::json!({
            "dockerfile": "env/Dockerfile",
            "test_cmd": format!("test \"$(cat /opt/env/marker)\" = built && test \"$(cat /opt/env/year)\" = 2024 && test \"$CALC_ENV\" = made-by-dockerfile && {ON_BUSYBOX}"),
        }),
    );
    let study = |f: &Fixture| {
        let mut c = f.cmd(&["--json", "--k", "1", "--store", &store]);
        for (k, v) in &env {
            c.env(k, v);
        }
        let out = c.output().unwrap();
        let s = summary(&out);
        assert_eq!(instance(&s, "built")["class_shim"], "reproducible", "{s}");
        let digests = recorded_digests(f);
        forget_study(f);
        (stderr(&out), digests)
    };
    let (err, first) = study(&f);
    assert!(
        err.contains(&format!(
            "reprorun: building {} with podman",
            ctx.join("Dockerfile").display()
        )),
        "{err}"
    );
    assert!(first[0].starts_with("sha256:"), "{first:?}");
    // The same Dockerfile and context: nothing is built again.
    let (err, again) = study(&f);
    assert!(!err.contains("building"), "{err}");
    assert_eq!(again, first);
    // Another context is another image.
    std::fs::write(
        ctx.join("setup.sh"),
        "mkdir -p /opt/env && echo built > /opt/env/marker && echo 2 > /opt/env/version\n",
    )
    .unwrap();
    let (err, other) = study(&f);
    assert!(err.contains("reprorun: building"), "{err}");
    assert_ne!(other, first);
    // Offline, and without the engine's own store: the image is reprorun's.
    drop(reg);
    std::fs::remove_dir_all(engine.join("root")).ok();
    let (err, offline) = study(&f);
    assert!(!err.contains("building"), "{err}");
    assert_eq!(offline, other);
}

/// `image pull --registries-conf`: a registries.conf whose mirror is down passes the pull on
/// to the location; Docker's daemon.json mirrors Docker Hub; a blocked prefix is refused.
#[test]
fn image_pull_follows_registries_conf_and_daemon_json() {
    require!(NEEDS[0], NEEDS[1], NEEDS[2], NEEDS[3]);
    let Some(reg) = Registry::start(false, None) else {
        skip!("docker-registry did not start on loopback");
    };
    let src = format!("oci:{}:busybox:latest", busybox_layout().display());
    reg.push(&src, "library/busybox:1.36", &[]);
    let (digest, _) = layout_manifest(busybox_layout());
    let work = Work::new();
    let dead = format!("127.0.0.1:{}", {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    });
    let files = [
        (
            "registries.conf",
            format!(
                "[[registry]]\nprefix = \"docker.io\"\nlocation = \"{h}\"\ninsecure = true\n\n[[registry.mirror]]\nlocation = \"{dead}\"\ninsecure = true\n",
                h = reg.host()
            ),
        ),
        (
            "daemon.json",
            format!("{{\"registry-mirrors\": [\"http://{}\"]}}", reg.host()),
        ),
        (
            "blocked.conf",
            "[[registry]]\nprefix = \"docker.io/library\"\nblocked = true\n".to_string(),
        ),
    ];
    for (name, text) in &files {
        std::fs::write(work.path().join(name), text).unwrap();
    }
    let pull = |conf: &str, store: &str| {
        work.cmd(&["image", "pull", "busybox:1.36", "--registries-conf", conf])
            .env("REPRORUN_STORE", work.path().join(store))
            .env("HOME", work.path())
            .env_remove("DOCKER_CONFIG")
            .env_remove("REGISTRY_AUTH_FILE")
            .env_remove("XDG_RUNTIME_DIR")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    let out = pull("registries.conf", "s1");
    // A short name: named in the store by the full reference it was pulled as, too.
    assert_eq!(
        expect_code(&out, 0),
        format!("{digest} busybox:1.36 docker.io/library/busybox:1.36\n")
    );
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "reprorun: warning: mirror {dead}/library/busybox: "
        )),
        "{err}"
    );
    let out = pull("daemon.json", "s2");
    // A short name: named in the store by the full reference it was pulled as, too.
    assert_eq!(
        expect_code(&out, 0),
        format!("{digest} busybox:1.36 docker.io/library/busybox:1.36\n")
    );
    assert_eq!(stderr(&out), "");
    let out = pull("blocked.conf", "s3");
    expect_error(
        &out,
        "pull docker.io/library/busybox: the registry docker.io/library is blocked by",
    );
}

/// `--build-engine docker`: Docker's (legacy) builder runs the RUN step with the daemon's
/// default runtime, here reprorun (`spec/oci.md`); its pinned clock says 2024. The base
/// image is loaded into the test's own daemon (no registry).
#[test]
fn dockerfile_instances_are_built_by_docker_through_its_default_runtime() {
    require!(
        Need::Root,
        Need::Tool("dockerd"),
        Need::Tool("docker"),
        Need::Tool("unshare"),
        Need::Tool("ip")
    );
    let Some(d) = crate::oci_engines::Dockerd::start("build", &[]) else {
        return;
    };
    let archive = crate::oci_engines::busybox_archive(d.dir.path());
    let o = d.docker(&["load", "-i", &archive.display().to_string()]);
    expect_code(&o, 0);
    let mut f = Fixture::new();
    let ctx = f.path("env");
    std::fs::create_dir_all(&ctx).unwrap();
    std::fs::write(
        ctx.join("Dockerfile"),
        format!(
            "FROM {}\nRUN date +%Y > /year\nENV CALC_ENV=docker\n",
            crate::oci_engines::IMAGE
        ),
    )
    .unwrap();
    on_image(
        &mut f,
        "built",
        serde_json::json!({
            "dockerfile": "env/Dockerfile",
            "test_cmd": "test \"$(cat /year)\" = 2024 && test \"$CALC_ENV\" = docker && test -f calc.py",
        }),
    );
    let store = f.path("store").display().to_string();
    let out = f
        .cmd(&[
            "--json",
            "--k",
            "1",
            "--store",
            &store,
            "--build-engine",
            "docker",
        ])
        .env("DOCKER_HOST", d.socket())
        // Debian's docker.io has no buildx: the classic builder, which runs RUN steps
        // with the daemon's default runtime.
        .env("DOCKER_BUILDKIT", "0")
        .output()
        .unwrap();
    let s = summary(&out);
    assert!(stderr(&out).contains("with docker"), "{}", stderr(&out));
    assert_eq!(instance(&s, "built")["class_shim"], "reproducible", "{s}");
}

/// A Python instance's environment as SWE-bench makes one: a Dockerfile over a Python base
/// image (the images/python recipe, pushed as Docker Hub's `python:3.11` to the loopback
/// mirror) that makes a virtual environment in a RUN step (run by reprorun), and a test
/// command run by that environment's interpreter.
#[test]
fn a_python_instance_runs_in_the_venv_its_dockerfile_made() {
    require!(NEEDS[0], NEEDS[1], NEEDS[2], NEEDS[3], Need::Tool("podman"));
    let Some(mut s) = Setup::python() else {
        skip!("docker-registry did not start on loopback");
    };
    let ctx = s.f.path("env");
    std::fs::create_dir_all(&ctx).unwrap();
    std::fs::write(
        ctx.join("Dockerfile"),
        "FROM python:3.11\nRUN python3 -m venv /opt/venv && /opt/venv/bin/python -m pip --version > /opt/venv/pip-version\nENV PATH=/opt/venv/bin:/usr/bin:/bin\n",
    )
    .unwrap();
    s.f.add(
        "py-venv",
        FIX,
        PLAIN_TEST,
        serde_json::json!({
            "dockerfile": "env/Dockerfile",
            "FAIL_TO_PASS": [],
            "PASS_TO_PASS": [],
            "test_cmd": "grep -q '^pip ' /opt/venv/pip-version && python -c \"import sys, calc; assert sys.prefix == '/opt/venv', sys.prefix; assert calc.add(2, 3) == 5\"",
        }),
    );
    let out = s.study(&["--json", "--k", "1", "--store", &s.store]);
    let sum = summary(&out);
    assert_eq!(
        instance(&sum, "py-venv")["class_shim"],
        "reproducible",
        "{sum}"
    );
}

/// A task in Harbor's layout runs in the image its `environment/Dockerfile` builds (context
/// `environment/`, as Harbor builds it), and on the host's root with `--task-environment
/// host`, where the Dockerfile's file is not.
#[test]
fn a_harbor_task_runs_in_the_image_of_its_environment_dockerfile() {
    require!(NEEDS[0], NEEDS[1], NEEDS[2], NEEDS[3], Need::Tool("podman"));
    let Some(Setup {
        reg: _reg,
        mut f,
        store,
        podman: env,
        ..
    }) = Setup::busybox(&["library/busybox:1.36"])
    else {
        skip!("docker-registry did not start on loopback");
    };
    let in_env = "test \"$(cat /opt/harbor)\" = from-environment && test -d /logs";
    let repo = f.path("repo").display().to_string();
    on_image(
        &mut f,
        "calc-1",
        serde_json::json!({
            "repo_path": repo,
            "test_cmd": format!("if test -e /opt/harbor; then {in_env} && {ON_BUSYBOX}; else test -f calc.py; fi"),
        }),
    );
    f.write();
    let task = f.path("tasks/calc-1");
    std::fs::create_dir_all(task.join("tests")).unwrap();
    std::fs::create_dir_all(task.join("environment")).unwrap();
    std::fs::write(task.join("tests/config.json"), f.instances[0].to_string()).unwrap();
    // Harbor's adapters' shape: FROM the instance image, a WORKDIR, /logs; a file of the
    // context copied in.
    std::fs::write(
        task.join("environment/Dockerfile"),
        "FROM busybox:1.36\nWORKDIR /testbed\nCOPY marker /opt/harbor\nRUN mkdir -p /logs\n",
    )
    .unwrap();
    std::fs::write(task.join("environment/marker"), "from-environment\n").unwrap();
    let study = |extra: &[&str]| {
        let mut args = vec![
            "reproduce",
            "run",
            "--instances",
            "tasks",
            "--predictions",
            "predictions.jsonl",
            "--db",
            "study.db",
            "--json",
            "--k",
            "1",
            "--store",
            &store,
        ];
        args.extend(extra);
        let mut c = f.work.cmd(&args);
        c.stdin(std::process::Stdio::null());
        for (k, v) in &env {
            c.env(k, v);
        }
        let out = c.output().unwrap();
        let s = summary(&out);
        assert_eq!(instance(&s, "calc-1")["class_shim"], "reproducible", "{s}");
        let digests = recorded_digests(&f);
        forget_study(&f);
        (stderr(&out), digests)
    };
    let (err, built) = study(&[]);
    assert!(
        err.contains(&format!(
            "reprorun: building {} with podman",
            task.join("environment/Dockerfile").display()
        )),
        "{err}"
    );
    assert!(built[0].starts_with("sha256:"), "{built:?}");
    let (err, host) = study(&["--task-environment", "host"]);
    assert!(!err.contains("building"), "{err}");
    assert_eq!(host, vec!["none".to_string()]);
}

/// A Python instance on a pulled image named by a short name (`python:3.11`, the
/// images/python recipe pushed as Docker Hub's to the loopback mirror): qualified through
/// the registries.conf's `unqualified-search-registries`, pulled as
/// `docker.io/library/python:3.11`, and run again with the registry stopped and `--pull
/// never` (nothing reaches a registry), by either name.
#[test]
fn a_python_instance_runs_on_a_short_name_image_offline_after_the_pull() {
    require!(
        NEEDS[0],
        NEEDS[1],
        NEEDS[2],
        NEEDS[3],
        Need::Path("/usr/bin/python3.11", "Debian's python3.11")
    );
    let Some(Setup {
        reg,
        mut f,
        store,
        conf,
        ..
    }) = Setup::python()
    else {
        skip!("docker-registry did not start on loopback");
    };
    let conf = conf.display().to_string();
    let test_cmd = "python3 -c \"import sys, calc; assert sys.version_info[:2] == (3, 11); assert calc.add(2, 3) == 5\" && ! test -e /usr/bin/go";
    let add = |f: &mut Fixture, id: &str, image: &str| {
        f.add(
            id,
            FIX,
            PLAIN_TEST,
            serde_json::json!({"image": image, "FAIL_TO_PASS": [], "PASS_TO_PASS": [], "test_cmd": test_cmd}),
        );
    };
    let study = |f: &Fixture, extra: &[&str]| {
        let mut args = vec![
            "--json",
            "--k",
            "1",
            "--store",
            &store,
            "--registries-conf",
            &conf,
        ];
        args.extend(extra);
        let out = f.cmd(&args).output().unwrap();
        let s = summary(&out);
        for inst in &f.instances {
            let id = inst["instance_id"].as_str().unwrap();
            assert_eq!(instance(&s, id)["class_shim"], "reproducible", "{s}");
        }
        let digests = recorded_digests(f);
        forget_study(f);
        (stderr(&out), digests)
    };
    add(&mut f, "short", "python:3.11");
    let (err, pulled) = study(&f, &[]);
    assert!(
        err.contains("reprorun: pulled python:3.11 as docker.io/library/python:3.11: sha256:"),
        "{err}"
    );
    // The registry is stopped before the runs: nothing is pulled, and the image is found
    // by its short name and by its full reference.
    drop(reg);
    add(&mut f, "full", "docker.io/library/python:3.11");
    let (err, offline) = study(&f, &["--pull", "never"]);
    assert!(!err.contains("pulling"), "{err}");
    assert_eq!(offline, vec![pulled[0].clone(); 2]);
}

/// The real instances, one per ecosystem, and the base each environment starts `FROM`.
const REAL: [(&str, Ecosystem); 3] = [
    ("hashicorp__go-version-73", Ecosystem::Go),
    ("jshttp__cookie-042073f", Ecosystem::Node),
    ("pytoolz__toolz-603", Ecosystem::Python),
];

/// An instance's own steps over its base. Go: a writable build cache. JavaScript: the
/// project's own pin of its runner (mocha 9.2.2, which Node.js 12 runs), a `node_modules`
/// prepared outside and copied in, as an offline build must. Python: the base's pytest.
fn real_dockerfile(eco: Ecosystem) -> String {
    let from = eco.package_and_name().1;
    let steps = match eco {
        Ecosystem::Go => "ENV GOCACHE=/tmp/go-build GOPATH=/tmp/go GOFLAGS=-mod=mod\nRUN go version\n",
        Ecosystem::Node => "COPY node_modules /opt/mocha/node_modules\nENV PATH=/opt/mocha/node_modules/.bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\nRUN mocha --version\n",
        Ecosystem::Python => "RUN python3 -m pytest --version\n",
    };
    format!("FROM {from}\n{steps}")
}

/// The instances (SWE-bench's records, with `fields(id)` added), the gold predictions and
/// the specs of `fixtures/swebench-multi` and `fixtures/swebench-toolz`, written to `dir`.
/// toolz's spec names Python 3.9 and runs the test patch's file, as SWE-bench's harness does.
fn write_real_study(dir: &Path, fields: impl Fn(&str) -> serde_json::Value) {
    use crate::reproduce_runners::fixture;
    let read = |d: &str, name: &str| std::fs::read_to_string(fixture(d, name)).unwrap();
    let keep = |text: String, add: &dyn Fn(&str) -> serde_json::Value| -> String {
        let mut out = String::new();
        for l in text.lines() {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            let id = v["instance_id"].as_str().unwrap().to_string();
            if REAL.iter().any(|(r, _)| *r == id) {
                for (k, x) in add(&id).as_object().unwrap() {
                    v[k] = x.clone();
                }
                out.push_str(&format!("{v}\n"));
            }
        }
        out
    };
    let none = |_: &str| serde_json::json!({});
    let mut instances = String::new();
    let mut preds = String::new();
    for d in ["swebench-multi", "swebench-toolz"] {
        let recorded = |id: &str| {
            let mut v = fields(id);
            v["recorded_resolved"] = serde_json::json!(true);
            v
        };
        instances.push_str(&keep(read(d, "instances.jsonl"), &recorded));
        preds.push_str(&keep(read(d, "predictions.jsonl"), &none));
    }
    std::fs::write(dir.join("instances.jsonl"), instances).unwrap();
    std::fs::write(dir.join("gold.jsonl"), preds).unwrap();
    let mut specs: serde_json::Value =
        serde_json::from_str(&read("swebench-multi", "specs.json")).unwrap();
    specs["pytoolz/toolz"] = serde_json::json!({"1.0": {
        "python": "3.9",
        "packages": "pytest",
        "test_cmd": "python3 -m pytest -p no:cacheprovider -rA toolz/tests/test_itertoolz.py",
    }});
    std::fs::write(dir.join("specs.json"), specs.to_string()).unwrap();
}

/// `reproduce run` of the real study into `db`; asserts the gold patch resolves every instance
/// (SWE-bench's `resolved_ids` of the export) and that toolz ran on the image's Python 3.9
/// (pytest's header in its `test_output.txt`). Returns stderr and each instance's image digest.
fn real_study(
    w: &Work,
    store: &str,
    podman: &[(String, PathBuf)],
    db: &str,
    extra: &[&str],
) -> (String, Vec<(String, String)>) {
    let file = format!("{db}.db");
    let mut args = vec![
        "reproduce",
        "run",
        "--instances",
        "instances.jsonl",
        "--predictions",
        "gold.jsonl",
        "--specs",
        "specs.json",
        "--repos",
        "repos",
        "--db",
        &file,
        "--k",
        "1",
        "--json",
        "--store",
        store,
    ];
    args.extend(extra);
    let mut c = w.cmd(&args);
    c.stdin(std::process::Stdio::null());
    for (k, v) in podman {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    let sum = summary(&out);
    let run = crate::reproduce_runners::export(w, &file, db, "shim");
    let dir = w.path().join(db);
    let report: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join(format!("gold.{run}.json"))).unwrap(),
    )
    .unwrap();
    let ids: Vec<&str> = REAL.iter().map(|(id, _)| *id).collect();
    assert_eq!(
        report["resolved_ids"],
        serde_json::json!(ids),
        "{report}\n{sum}"
    );
    let log = |id: &str| {
        let p = dir.join(format!(
            "logs/run_evaluation/{run}/gold/{id}/test_output.txt"
        ));
        std::fs::read_to_string(p).unwrap()
    };
    let py = log("pytoolz__toolz-603");
    assert!(
        py.contains("platform linux -- Python 3.9.2, pytest-6.0.2"),
        "{py}"
    );
    let go = log("hashicorp__go-version-73");
    assert!(go.contains("--- PASS: TestVersionEqual_nil"), "{go}");
    let digests = Store::open(&w.path().join(&file), false)
        .unwrap()
        .rows()
        .unwrap()
        .into_iter()
        .map(|r| {
            let env: serde_json::Value = serde_json::from_str(r.env.as_deref().unwrap()).unwrap();
            (
                r.instance_id,
                env["image_digest"].as_str().unwrap_or("none").to_string(),
            )
        })
        .collect();
    (stderr(&out), digests)
}

/// The store's `localhost/reprorun-build:KEY` name of the image `digest`.
fn build_name(store: &str, digest: &str) -> String {
    let w = Work::new();
    let out = w.run(&["image", "ls", "--json", "--store", store]);
    let list: serde_json::Value = serde_json::from_str(&expect_code(&out, 0)).unwrap();
    let text = list.to_string();
    for rec in list.as_array().unwrap() {
        if rec["digest"] == digest {
            for n in rec["names"].as_array().unwrap() {
                if n.as_str().unwrap().contains("reprorun-build:") {
                    return n.as_str().unwrap().to_string();
                }
            }
        }
    }
    panic!("{digest} not in {text}");
}

/// Issue 44's done criterion: real instances of Go (hashicorp/go-version, `go test`),
/// JavaScript (jshttp/cookie, mocha) and a Python that is older than the host's (pytoolz/toolz
/// on Debian 11's Python 3.9, the host having 3.11), each in its own environment (a Debian 11
/// base per ecosystem, `common/cache.rs`, pushed to the loopback registry as the Docker Hub
/// image it stands in for): (a) from a Dockerfile `FROM` that base plus the instance's own
/// steps, built by podman with reprorun running its `RUN` steps, and (b) from the built image
/// pushed to the registry under SWE-bench's instance-image name and pulled. The registry is
/// stopped before the runs that count; the gold patch resolves each instance in both.
#[test]
fn real_go_javascript_and_python39_instances_run_from_dockerfiles_and_pulled_images_offline() {
    require!(
        NEEDS[0],
        NEEDS[1],
        NEEDS[2],
        NEEDS[3],
        Need::Tool("podman"),
        Need::Tool("debootstrap"),
        Need::Tool("chroot"),
        Need::Tool("npm")
    );
    // The first time on a machine, the bases are made side by side (each under its lock).
    let (made, mocha) = std::thread::scope(|t| {
        let jobs: Vec<_> = REAL
            .map(|(_, eco)| t.spawn(move || (eco, ecosystem_base(eco))))
            .into_iter()
            .collect();
        let mocha = node_modules("mocha", "9.2.2");
        let made: Vec<_> = jobs.into_iter().map(|j| j.join().unwrap()).collect();
        (made, mocha)
    });
    let mut bases = Vec::new();
    for (eco, base) in made {
        match base {
            Ok(layout) => bases.push((eco, layout)),
            Err(why) => skip!("no {eco:?} base: {why}"),
        }
    }
    let mocha = match mocha {
        Ok(dir) => dir,
        Err(why) => skip!("no mocha: {why}"),
    };
    let (eco, layout) = &bases[0];
    let name = eco.package_and_name().1;
    let Some(Setup {
        reg,
        f,
        store,
        conf,
        podman,
    }) = Setup::new(
        &format!("oci:{}:{name}", layout.display()),
        &[&format!("library/{name}")],
    )
    else {
        skip!("docker-registry did not start on loopback");
    };
    for (eco, layout) in &bases[1..] {
        let name = eco.package_and_name().1;
        let src = format!("oci:{}:{name}", layout.display());
        reg.push(&src, &format!("library/{name}"), &[]);
    }
    let w = f.work.path();
    crate::reproduce_runners::repos(&f.work);
    for (id, eco) in REAL {
        let ctx = w.join("env").join(id);
        std::fs::create_dir_all(&ctx).unwrap();
        std::fs::write(ctx.join("Dockerfile"), real_dockerfile(eco)).unwrap();
        if let Ecosystem::Node = eco {
            let o = std::process::Command::new("cp")
                .arg("-a")
                .arg(&mocha)
                .arg(ctx.join("node_modules"))
                .output()
                .unwrap();
            expect_code(&o, 0);
        }
    }
    // (a) From the Dockerfiles: built once (the registry up for their FROM).
    write_real_study(
        w,
        |id| serde_json::json!({"dockerfile": format!("env/{id}/Dockerfile")}),
    );
    let (err, built) = real_study(&f.work, &store, &podman, "built", &[]);
    assert_eq!(err.matches("reprorun: building ").count(), 3, "{err}");
    // (b) The built images, pushed as SWE-bench's instance images, pulled into another store.
    let pulled_store = w.join("pulled").display().to_string();
    let conf = conf.display().to_string();
    let mut pulls = Vec::new();
    for (id, digest) in &built {
        let name = build_name(&store, digest);
        let key = name.rsplit_once(':').unwrap().1;
        let tag = format!("localhost/reprorun-build:{}", &key[..16]);
        let dest = format!(
            "docker://{}/swebench/sweb.eval.x86_64.{id}:latest",
            reg.host()
        );
        let mut c = std::process::Command::new("podman");
        c.args(["push", "--tls-verify=false", &tag, &dest]);
        for (k, v) in &podman {
            c.env(k, v);
        }
        expect_code(&c.output().unwrap(), 0);
        let image = format!("swebench/sweb.eval.x86_64.{id}:latest");
        let out = f.work.run(&[
            "image",
            "pull",
            &image,
            "--store",
            &pulled_store,
            "--registries-conf",
            &conf,
        ]);
        let printed = expect_code(&out, 0);
        let digest = printed.split_whitespace().next().unwrap().to_string();
        pulls.push((id.clone(), digest));
    }
    // The registry stopped, the engine's store gone: both studies run offline.
    drop(reg);
    std::fs::remove_dir_all(w.join("engine/root")).ok();
    let (err, again) = real_study(&f.work, &store, &podman, "offline", &[]);
    assert!(!err.contains("building"), "{err}");
    assert_eq!(again, built);
    write_real_study(
        w,
        |id| serde_json::json!({"image": format!("swebench/sweb.eval.x86_64.{id}:latest")}),
    );
    let never = ["--pull", "never"];
    let (err, pulled) = real_study(&f.work, &pulled_store, &[], "pulled", &never);
    assert!(!err.contains("pulling"), "{err}");
    // Each run was on the image pulled (podman's push compresses the layers anew, so its
    // digest is not the built one's).
    assert_eq!(pulled, pulls);
}
