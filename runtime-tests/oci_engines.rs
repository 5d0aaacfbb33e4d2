//! The engines users run, driving reprorun as their OCI runtime with their own networks:
//! podman with its default network (CNI and netavark), and Docker (`dockerd` with reprorun
//! added as a runtime and as the default runtime; the `docker` CLI and docker-py). Each runs
//! in a network namespace the test creates (`unshare --net`), so the engines' bridges,
//! iptables rules and forwarding sysctls never touch the host's network.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use crate::common::*;
use crate::oci::run_to_files;

/// `sh -c 'ip link set lo up; exec "$@"'` in a new network namespace.
fn in_new_netns(program: &str) -> Command {
    let mut c = Command::new("unshare");
    c.args([
        "--net",
        "--",
        "sh",
        "-c",
        "ip link set lo up && exec \"$@\"",
        "sh",
        program,
    ]);
    c.stdin(Stdio::null());
    c
}

/// podman's default network, as a rootful user gets it: the engine makes the network
/// namespace, names it by path and sets `net.ipv4.ping_group_range` in it. Refused before
/// the fix ("not a sysctl of a namespace the container has of its own"). Both of podman's
/// network backends, chosen by a containers.conf of the test's.
#[test]
fn podman_runs_with_its_default_bridge_network() {
    require!(
        Need::Root,
        Need::Tool("podman"),
        Need::Tool("unshare"),
        Need::Tool("ip"),
        Need::Path(
            "/usr/lib/cni/bridge",
            "the CNI plugins (containernetworking-plugins)"
        )
    );
    if crate::oci::podman::image().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut backends = vec!["cni"];
    if Path::new("/usr/lib/podman/netavark").exists() {
        backends.push("netavark");
    } else {
        skip!("netavark's case needs /usr/lib/podman/netavark (.ci/setup installs netavark)");
    }
    for backend in backends {
        let conf = dir.path().join(format!("{backend}.conf"));
        std::fs::write(
            &conf,
            format!(
                "[containers]\ndefault_sysctls = [\"net.ipv4.ping_group_range=0 0\"]\n[network]\nnetwork_backend = \"{backend}\"\n"
            ),
        )
        .unwrap();
        let mut c = in_new_netns("podman");
        c.env("CONTAINERS_CONF", &conf).args([
            "--runtime",
            BIN,
            "--cgroup-manager=cgroupfs",
            "--events-backend=file",
            "run",
            "--rm",
            "--ulimit",
            "nofile=1024:1024",
            "--ulimit",
            "nproc=1024:1024",
            crate::oci::podman::IMAGE,
            "sh",
            "-c",
            "ip -4 -o addr show eth0; cat /proc/sys/net/ipv4/ping_group_range; date +%Y",
        ]);
        let o = run_to_files(c);
        let out = expect_code(&o, 0);
        assert!(out.contains("inet 10.88."), "{backend}: {out}");
        assert!(out.contains("\n0\t0\n"), "{backend}: {out}");
        assert!(out.ends_with("2024\n"), "{backend}: {out}");
    }
}

/// The docker CLI Debian's docker.io installs (another on PATH may be newer than the daemon).
fn docker_cli() -> &'static str {
    if Path::new("/usr/bin/docker").exists() {
        "/usr/bin/docker"
    } else {
        "docker"
    }
}

/// A `dockerd` of the test's own, in a network namespace of its own, stopped on drop.
pub(crate) struct Dockerd {
    child: Child,
    /// Data root, socket, log and the volumes' sources.
    pub(crate) dir: tempfile::TempDir,
    exec_root: PathBuf,
}

impl Dockerd {
    /// Starts the daemon with reprorun as a runtime and its default one. Its `--exec-root`
    /// is deep enough that the runtime's state directory (EXEC_ROOT/runtime-reprorun/moby/ID)
    /// puts `exec.sock` past the 107 bytes a unix socket's path may have.
    /// `tag` tells this test's daemon from another's; `extra`: more daemon options.
    pub(crate) fn start(tag: &str, extra: &[&str]) -> Option<Dockerd> {
        let dir = tempfile::tempdir().unwrap();
        let exec_root = PathBuf::from(format!(
            "/run/reprorun-test-dockerd-exec-root-{tag}-{}",
            std::process::id()
        ));
        let log = std::fs::File::create(dir.path().join("dockerd.log")).unwrap();
        let child = in_new_netns("dockerd")
            .arg("--data-root")
            .arg(dir.path().join("data"))
            .arg("--exec-root")
            .arg(&exec_root)
            .arg("-H")
            .arg(format!("unix://{}", dir.path().join("d.sock").display()))
            .arg("--pidfile")
            .arg(dir.path().join("d.pid"))
            .args(["--add-runtime", &format!("reprorun={BIN}")])
            .args(["--default-runtime", "reprorun"])
            .args(extra)
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let d = Dockerd {
            child,
            dir,
            exec_root,
        };
        let up = wait_until(Duration::from_secs(90), || {
            d.docker(&["version", "--format", "{{.Server.Version}}"])
                .status
                .success()
        });
        if !up {
            let log = std::fs::read_to_string(d.dir.path().join("dockerd.log")).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(5).collect();
            skip!("dockerd did not answer within 90 s; its log ends {tail:?}");
        }
        Some(d)
    }

    pub(crate) fn socket(&self) -> String {
        format!("unix://{}", self.dir.path().join("d.sock").display())
    }

    /// `docker ARGS` against this daemon, bounded by `timeout`.
    pub(crate) fn docker(&self, args: &[&str]) -> Output {
        let mut c = Command::new("timeout");
        c.args(["120", docker_cli(), "-H", &self.socket()])
            .args(args);
        run_to_files(c)
    }

    /// The daemon's network namespace (its pid's).
    fn netns(&self) -> String {
        format!("/proc/{}/ns/net", self.child.id())
    }
}

impl Drop for Dockerd {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let stopped = wait_until(Duration::from_secs(60), || {
            matches!(self.child.try_wait(), Ok(Some(_)))
        });
        if !stopped {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.exec_root);
    }
}

/// A docker-archive (`docker load`'s format) of busybox-static as `reprorun-test/busybox`.
pub(crate) fn busybox_archive(dir: &Path) -> PathBuf {
    let append = |t: &mut tar::Builder<Vec<u8>>, path: &str, data: &[u8], mode: u32| {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(mode);
        h.set_cksum();
        t.append_data(&mut h, path, data).unwrap();
    };
    let mut layer = tar::Builder::new(Vec::new());
    let busybox = std::fs::read("/bin/busybox").unwrap();
    append(&mut layer, "bin/busybox", &busybox, 0o755);
    for applet in [
        "sh", "echo", "cat", "id", "date", "sleep", "ls", "ip", "httpd", "env", "true",
    ] {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Symlink);
        h.set_size(0);
        h.set_mode(0o777);
        layer
            .append_link(&mut h, format!("bin/{applet}"), "busybox")
            .unwrap();
    }
    let layer = layer.into_inner().unwrap();
    let diff_id = sha256_hex(&layer);
    let config = serde_json::to_vec(&serde_json::json!({
        "architecture": "amd64",
        "os": "linux",
        "config": {"Env": ["PATH=/bin"], "Cmd": ["sh"]},
        "rootfs": {"type": "layers", "diff_ids": [format!("sha256:{diff_id}")]},
    }))
    .unwrap();
    let config_name = format!("{}.json", sha256_hex(&config));
    let manifest = serde_json::to_vec(&serde_json::json!([{
        "Config": config_name,
        "RepoTags": ["reprorun-test/busybox:latest"],
        "Layers": [format!("{diff_id}/layer.tar")],
    }]))
    .unwrap();
    let mut archive = tar::Builder::new(Vec::new());
    append(&mut archive, &config_name, &config, 0o644);
    append(&mut archive, &format!("{diff_id}/layer.tar"), &layer, 0o644);
    append(&mut archive, "manifest.json", &manifest, 0o644);
    let path = dir.join("busybox.tar");
    std::fs::write(&path, archive.into_inner().unwrap()).unwrap();
    path
}

pub(crate) const IMAGE: &str = "reprorun-test/busybox:latest";

/// Docker with reprorun added as a runtime and as the daemon's default: `docker run` (the
/// bridge network, `-p`, `--user`, a volume, pins from `-e`), `docker exec`, `stop`, `logs`,
/// and a docker-py script that names no runtime. Failed before the fix with "OCI runtime
/// create failed: exec socket: ENAMETOOLONG".
#[test]
fn docker_runs_containers_through_reprorun() {
    require!(
        Need::Root,
        Need::Tool("dockerd"),
        Need::Tool("docker"),
        Need::Tool("unshare"),
        Need::Tool("nsenter"),
        Need::Tool("timeout"),
        Need::Path("/bin/busybox", "busybox-static")
    );
    let Some(d) = Dockerd::start("main", &[]) else {
        return;
    };
    let archive = busybox_archive(d.dir.path());
    let o = d.docker(&["load", "-i", archive.to_str().unwrap()]);
    assert!(expect_code(&o, 0).contains("Loaded image"), "{o:?}");
    let info = d.docker(&["info", "--format", "{{.DefaultRuntime}}"]);
    assert_eq!(expect_code(&info, 0), "reprorun\n");

    // The explicit runtime, the pinned date, exit codes; the host's year is not 2024.
    let o = d.docker(&[
        "run",
        "--rm",
        "--runtime",
        "reprorun",
        IMAGE,
        "sh",
        "-c",
        "echo hi; date +%F",
    ]);
    assert_eq!(expect_code(&o, 0), "hi\n2024-01-01\n");
    let o = d.docker(&["run", "--rm", IMAGE, "sh", "-c", "exit 7"]);
    assert_eq!(o.status.code(), Some(7), "{o:?}");
    // Pins per container from the environment (Docker 20.10 passes no annotations).
    let o = d.docker(&[
        "run",
        "--rm",
        "-e",
        "REPRORUN_DATE=2020-02-03",
        IMAGE,
        "date",
        "+%F",
    ]);
    assert_eq!(expect_code(&o, 0), "2020-02-03\n");

    user_and_volume(&d);
    detached_exec_stop_logs(&d);
    published_port_on_the_bridge(&d);
    docker_py_through_the_default_runtime(&d);
}

/// `--user` and a volume: the process runs as the user and writes the host's directory.
fn user_and_volume(d: &Dockerd) {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let vol = d.dir.path().join("vol");
    std::fs::create_dir(&vol).unwrap();
    std::fs::set_permissions(&vol, std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::write(vol.join("in"), "from the host\n").unwrap();
    let v = format!("{}:/v", vol.display());
    let o = d.docker(&[
        "run",
        "--rm",
        "--user",
        "1000:1000",
        "-v",
        &v,
        IMAGE,
        "sh",
        "-c",
        "id -u; id -g; cat /v/in; echo out > /v/out",
    ]);
    assert_eq!(expect_code(&o, 0), "1000\n1000\nfrom the host\n");
    let out = vol.join("out");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "out\n");
    assert_eq!(std::fs::metadata(&out).unwrap().uid(), 1000);
}

/// `run -d`, `exec` (its exit code and output), `stop` (the container's TERM handler runs),
/// `logs`.
fn detached_exec_stop_logs(d: &Dockerd) {
    let o = d.docker(&[
        "run",
        "-d",
        IMAGE,
        "sh",
        "-c",
        "trap 'echo bye; exit 3' TERM; echo started; while :; do sleep 1; done",
    ]);
    let id = expect_code(&o, 0).trim().to_string();
    let started = wait_until(Duration::from_secs(60), || {
        stdout(&d.docker(&["logs", &id])).contains("started")
    });
    assert!(started, "{:?}", d.docker(&["logs", &id]));
    let o = d.docker(&["exec", &id, "sh", "-c", "echo in-exec; date +%Y; exit 5"]);
    assert_eq!(o.status.code(), Some(5), "{o:?}");
    assert_eq!(stdout(&o), "in-exec\n2024\n");
    let o = d.docker(&["inspect", "--format", "{{.HostConfig.Runtime}}", &id]);
    assert_eq!(expect_code(&o, 0), "reprorun\n");
    expect_code(&d.docker(&["stop", "-t", "30", &id]), 0);
    let o = d.docker(&["inspect", "--format", "{{.State.ExitCode}}", &id]);
    assert_eq!(expect_code(&o, 0), "3\n");
    assert_eq!(expect_code(&d.docker(&["logs", &id]), 0), "started\nbye\n");
    expect_code(&d.docker(&["rm", &id]), 0);
}

/// Docker's default bridge network and `-p`, in the daemon's network namespace (the test's):
/// the published port answers there, and the host's namespace has no docker0.
fn published_port_on_the_bridge(d: &Dockerd) {
    let www = d.dir.path().join("www");
    std::fs::create_dir(&www).unwrap();
    std::fs::write(www.join("index.html"), "served by httpd\n").unwrap();
    let v = format!("{}:/www:ro", www.display());
    let o = d.docker(&[
        "run", "-d", "-p", "18080:80", "-v", &v, IMAGE, "httpd", "-f", "-p", "80", "-h", "/www",
    ]);
    let id = expect_code(&o, 0).trim().to_string();
    let netns = format!("--net={}", d.netns());
    let fetch = || {
        Command::new("timeout")
            .args(["20", "nsenter", &netns, "busybox", "wget", "-q", "-O-"])
            .arg("http://127.0.0.1:18080/")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let served = wait_until(Duration::from_secs(60), || fetch().status.success());
    let o = fetch();
    assert!(served, "{o:?}");
    assert_eq!(stdout(&o), "served by httpd\n");
    let o = d.docker(&["exec", &id, "ip", "-4", "-o", "addr", "show", "eth0"]);
    assert!(expect_code(&o, 0).contains("inet 172.17."), "{o:?}");
    let host = Command::new("ip")
        .args(["link", "show", "docker0"])
        .output()
        .unwrap();
    assert!(
        !host.status.success(),
        "docker0 reached the host's namespace"
    );
    expect_code(&d.docker(&["rm", "-f", &id]), 0);
}

/// A harness driving Docker from Python (SWE-bench's does, through docker-py) gets reprorun
/// without naming it: the daemon's default runtime.
fn docker_py_through_the_default_runtime(d: &Dockerd) {
    let import = Command::new("python3")
        .args(["-c", "import docker"])
        .output();
    if !import.is_ok_and(|o| o.status.success()) {
        skip!(
            "the docker-py part needs python3's docker module (.ci/setup installs python3-docker)"
        );
    }
    let o = docker_py(d, &[IMAGE, "sh", "-c", "echo from docker-py; date +%F"]);
    assert_eq!(
        expect_code(&o, 0),
        "runtime reprorun\nfrom docker-py\n2024-01-01\nexit 0\n"
    );
}

/// `--systemd-cgroup` without systemd (as on this machine): systemd's `slice:prefix:name`
/// becomes the cgroupfs path systemd gives that unit, the limits land there, and the
/// container's processes are in it; `delete` removes it. A cgroupfs path under the flag is
/// refused naming the field, as runc refuses it.
#[test]
fn systemd_cgroup_paths_become_the_units_cgroupfs_path() {
    require!(Need::Root);
    let id = format!("t{}", std::process::id());
    // A slice of this test process's own (runs of the suite may overlap on a machine).
    let slice = format!("reprorun_test{}.slice", std::process::id());
    let b = crate::oci::Bundle::new(&["sleep", "1000"], |c| {
        c["linux"]["cgroupsPath"] = format!("{slice}:reprorun:{id}").into();
        c["linux"]["resources"]["pids"] = serde_json::json!({"limit": 77});
    });
    let o = b.run(&["--systemd-cgroup", "create", "s1"]);
    expect_code(&o, 0);
    let rel = format!("{slice}/reprorun-{id}.scope");
    let pid = b.state_of("s1")["pid"].as_i64().unwrap();
    let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    assert!(cgroups.contains(&format!(":/{rel}\n")), "{cgroups}");
    let limits: Vec<PathBuf> = ["pids", ""]
        .iter()
        .map(|h| {
            PathBuf::from("/sys/fs/cgroup")
                .join(h)
                .join(&rel)
                .join("pids.max")
        })
        .filter(|f| f.exists())
        .collect();
    assert!(!limits.is_empty(), "no pids.max for {rel}");
    assert_eq!(std::fs::read_to_string(&limits[0]).unwrap().trim(), "77");
    expect_code(&b.run(&["delete", "--force", "s1"]), 0);
    assert!(limits.iter().all(|f| !f.exists()), "{limits:?}");
    // The slice reprorun made for the test (empty now) goes too.
    let hierarchies = std::fs::read_dir("/sys/fs/cgroup").unwrap();
    for h in hierarchies
        .flatten()
        .map(|e| e.path())
        .chain([PathBuf::from("/sys/fs/cgroup")])
    {
        let _ = std::fs::remove_dir(h.join(&slice));
    }

    let b = crate::oci::Bundle::new(&["true"], |c| {
        c["linux"]["cgroupsPath"] = "/reprorun-test/plain".into();
    });
    let o = b.run(&["--systemd-cgroup", "create", "s3"]);
    assert_ne!(o.status.code(), Some(0), "{o:?}");
    assert!(
        stderr(&o).contains("linux.cgroupsPath: \"/reprorun-test/plain\": with --systemd-cgroup, expected systemd's slice:prefix:name"),
        "{o:?}"
    );
    assert!(stdout(&b.run(&["list", "-q"])).is_empty());
}

/// Docker with its systemd cgroup driver (`native.cgroupdriver=systemd`; no systemd runs
/// here): Docker passes `--systemd-cgroup` and `system.slice:docker:ID`, and the container's
/// processes and limits are in `/system.slice/docker-ID.scope`. Refused before
/// ("--systemd-cgroup: not supported").
#[test]
fn docker_with_the_systemd_cgroup_driver() {
    require!(
        Need::Root,
        Need::Tool("dockerd"),
        Need::Tool("docker"),
        Need::Tool("unshare"),
        Need::Tool("timeout"),
        Need::Path("/bin/busybox", "busybox-static")
    );
    let cgroup = Path::new("/sys/fs/cgroup");
    let slices = |root: &Path| -> Vec<PathBuf> {
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(root)
            .map(|r| r.flatten().map(|e| e.path().join("system.slice")).collect())
            .unwrap_or_default();
        dirs.push(root.join("system.slice"));
        dirs.into_iter().filter(|d| d.is_dir()).collect()
    };
    let before = slices(cgroup);
    let Some(d) = Dockerd::start(
        "systemd",
        &[
            "--exec-opt",
            "native.cgroupdriver=systemd",
            "--bridge=none",
            "--iptables=false",
        ],
    ) else {
        return;
    };
    let o = d.docker(&["info", "--format", "{{.CgroupDriver}}"]);
    assert_eq!(expect_code(&o, 0), "systemd\n");
    let archive = busybox_archive(d.dir.path());
    expect_code(&d.docker(&["load", "-i", archive.to_str().unwrap()]), 0);
    let o = d.docker(&["run", "-d", "--pids-limit", "55", IMAGE, "sleep", "1000"]);
    let id = expect_code(&o, 0).trim().to_string();
    let o = d.docker(&["inspect", "--format", "{{.State.Pid}}", &id]);
    let pid = expect_code(&o, 0).trim().to_string();
    let scope = format!("/system.slice/docker-{id}.scope");
    let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    assert!(cgroups.contains(&format!(":{scope}\n")), "{cgroups}");
    let max: Vec<String> = ["pids", ""]
        .iter()
        .filter_map(|h| {
            let f = cgroup.join(h).join(&scope[1..]).join("pids.max");
            std::fs::read_to_string(f).ok()
        })
        .collect();
    assert_eq!(max.first().map(|m| m.trim()), Some("55"), "{max:?}");
    expect_code(&d.docker(&["rm", "-f", &id]), 0);
    drop(d);
    // The slices this test made (empty now) go; those that were there stay.
    for dir in slices(cgroup) {
        if !before.contains(&dir) {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// `runtime-tests/probes/docker_py_run.py ARGS` against `d`, bounded.
fn docker_py(d: &Dockerd, args: &[&str]) -> Output {
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("runtime-tests/probes/docker_py_run.py");
    let mut c = Command::new("timeout");
    c.args(["180", "python3"])
        .arg(&script)
        .args(args)
        .env("DOCKER_HOST", d.socket());
    run_to_files(c)
}

/// A real project's test suite (schedule 1.2.2, `runtime-tests/probes/schedule`) run as a
/// SWE-bench harness runs one: docker-py, the daemon's default runtime (reprorun), the
/// Python image of `images/python` loaded into Docker, the checkout mounted in.
#[test]
fn docker_py_runs_a_real_projects_tests_through_reprorun() {
    require!(
        Need::Root,
        Need::Tool("dockerd"),
        Need::Tool("docker"),
        Need::Tool("unshare"),
        Need::Tool("timeout"),
        Need::Tool("skopeo"),
        Need::Path(
            "/usr/bin/python3.11",
            "Debian's python3 (3.11), the image's interpreter"
        )
    );
    let import = Command::new("python3")
        .args(["-c", "import docker"])
        .output();
    if !import.is_ok_and(|o| o.status.success()) {
        skip!("needs python3's docker module (.ci/setup installs python3-docker)");
    }
    let Some(d) = Dockerd::start("py", &["--bridge=none", "--iptables=false"]) else {
        return;
    };
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let layout = d.dir.path().join("python-layout");
    let o = Command::new(here.join("images/python/build.sh"))
        .arg(&layout)
        .output()
        .unwrap();
    assert!(o.status.success(), "images/python/build.sh: {o:?}");
    let archive = d.dir.path().join("python.tar");
    let o = Command::new("skopeo")
        .args(["copy", "-q"])
        .arg(format!("oci:{}:python:3.11", layout.display()))
        .arg(format!(
            "docker-archive:{}:reprorun-test/python:3.11",
            archive.display()
        ))
        .output()
        .unwrap();
    assert!(o.status.success(), "skopeo copy: {o:?}");
    expect_code(&d.docker(&["load", "-i", archive.to_str().unwrap()]), 0);
    // A dynamic program (the preload library's clock) under a pin from the environment.
    let o = d.docker(&[
        "run",
        "--rm",
        "-e",
        "REPRORUN_DATE=2020-02-03",
        "reprorun-test/python:3.11",
        "python3",
        "-c",
        "import datetime; print(datetime.date.today())",
    ]);
    assert_eq!(expect_code(&o, 0), "2020-02-03\n");
    // A copy: the run writes __pycache__ into its checkout.
    let src = d.dir.path().join("schedule");
    let o = Command::new("cp")
        .arg("-r")
        .arg(here.join("runtime-tests/probes/schedule"))
        .arg(&src)
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let o = docker_py(
        &d,
        &[
            "reprorun-test/python:3.11",
            "--src",
            src.to_str().unwrap(),
            "python3",
            "-m",
            "unittest",
            "test_schedule",
        ],
    );
    let out = expect_code(&o, 0);
    assert!(out.starts_with("runtime reprorun\n"), "{out}");
    assert!(out.contains("\nRan 81 tests in "), "{out}");
    assert!(out.ends_with("\nOK (skipped=41)\nexit 0\n"), "{out}");
}
