//! `reproduce` instances whose `image` is a registry reference (SWE-bench's and Epoch AI's
//! instance-image names, sent to a `docker-registry` on loopback by a registries.conf as
//! podman users write it) or a `dockerfile` built by podman: pulled or built once, recorded
//! by digest in every run's record, and found offline by the next study.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::common::*;
use crate::image::busybox_layout;
use crate::image_pull::{layout_manifest, Registry, NEEDS};
use crate::reproduce::{instance, Fixture, FIX, PLAIN_TEST};

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
    let Some(reg) = Registry::start(false, None) else {
        skip!("docker-registry did not start on loopback");
    };
    let src = format!("oci:{}:busybox:latest", busybox_layout().display());
    reg.push(&src, "swebench/sweb.eval.x86_64.demo__calc-1:latest", &[]);
    reg.push(
        &src,
        "epoch-research/swe-bench.eval.x86_64.demo__calc-2:latest",
        &[],
    );
    let (digest, _) = layout_manifest(busybox_layout());
    let mut f = Fixture::new();
    let store = f.path("store").display().to_string();
    let conf = registries_conf(f.work.path(), &reg).display().to_string();
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

#[test]
fn dockerfile_instances_are_built_by_podman_once_per_dockerfile_and_context() {
    require!(NEEDS[0], NEEDS[1], NEEDS[2], NEEDS[3], Need::Tool("podman"));
    let Some(reg) = Registry::start(false, None) else {
        skip!("docker-registry did not start on loopback");
    };
    let src = format!("oci:{}:busybox:latest", busybox_layout().display());
    reg.push(&src, "library/busybox:1.36", &[]);
    let mut f = Fixture::new();
    let store = f.path("store").display().to_string();
    let conf = registries_conf(f.work.path(), &reg);
    let engine = f.path("engine");
    let env = podman_env(&engine, &conf);
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
    let Some(reg) = Registry::start(false, None) else {
        skip!("docker-registry did not start on loopback");
    };
    let src = format!(
        "oci:{}:python:3.11",
        crate::image::python_layout().display()
    );
    reg.push(&src, "library/python:3.11", &[]);
    let mut f = Fixture::new();
    let store = f.path("store").display().to_string();
    let conf = registries_conf(f.work.path(), &reg);
    let env = podman_env(&f.path("engine"), &conf);
    let ctx = f.path("env");
    std::fs::create_dir_all(&ctx).unwrap();
    std::fs::write(
        ctx.join("Dockerfile"),
        "FROM python:3.11\nRUN python3 -m venv /opt/venv && /opt/venv/bin/python -m pip --version > /opt/venv/pip-version\nENV PATH=/opt/venv/bin:/usr/bin:/bin\n",
    )
    .unwrap();
    f.add(
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
    let mut c = f.cmd(&["--json", "--k", "1", "--store", &store]);
    for (k, v) in &env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    let s = summary(&out);
    assert_eq!(instance(&s, "py-venv")["class_shim"], "reproducible", "{s}");
}

/// A task in Harbor's layout runs in the image its `environment/Dockerfile` builds (context
/// `environment/`, as Harbor builds it), and on the host's root with `--task-environment
/// host`, where the Dockerfile's file is not.
#[test]
fn a_harbor_task_runs_in_the_image_of_its_environment_dockerfile() {
    require!(NEEDS[0], NEEDS[1], NEEDS[2], NEEDS[3], Need::Tool("podman"));
    let Some(reg) = Registry::start(false, None) else {
        skip!("docker-registry did not start on loopback");
    };
    let src = format!("oci:{}:busybox:latest", busybox_layout().display());
    reg.push(&src, "library/busybox:1.36", &[]);
    let mut f = Fixture::new();
    let store = f.path("store").display().to_string();
    let conf = registries_conf(f.work.path(), &reg);
    let env = podman_env(&f.path("engine"), &conf);
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
    let Some(reg) = Registry::start(false, None) else {
        skip!("docker-registry did not start on loopback");
    };
    let src = format!(
        "oci:{}:python:3.11",
        crate::image::python_layout().display()
    );
    reg.push(&src, "library/python:3.11", &[]);
    let mut f = Fixture::new();
    let store = f.path("store").display().to_string();
    let conf = registries_conf(f.work.path(), &reg).display().to_string();
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
