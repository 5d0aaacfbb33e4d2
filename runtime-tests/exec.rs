//! What a workload sees inside `reprorun exec`.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::Stdio;

use crate::common::*;

#[test]
fn workload_is_pid_2_under_reprorun_init_and_host_processes_are_hidden() {
    let w = Work::new();
    let o = w.run(&[
        "exec",
        "--",
        "sh",
        "-c",
        "echo $$; tr '\\0' ' ' < /proc/1/cmdline; echo; ls /proc | grep -c '^[0-9]'",
    ]);
    let out = expect_code(&o, 0);
    let lines: Vec<_> = out.lines().collect();
    assert_eq!(lines[0], "2", "the workload is the first child of init");
    // pid 1 is reprorun's init, which shows none of the caller's command line.
    assert_eq!(lines[1].trim_end(), "reprorun-init", "pid 1: {}", lines[1]);
    // init, sh, and the ls/grep pipeline: nothing of the host's.
    let count: usize = lines[2].parse().unwrap();
    assert!(
        count <= 4,
        "only sandbox processes are visible, saw {count}"
    );
    let test_pid = std::process::id().to_string();
    let o = w.run(&["exec", "--", "test", "-e", &format!("/proc/{test_pid}")]);
    expect_code(&o, 1);
}

#[test]
fn hostname_is_fixed_and_settable() {
    let w = Work::new();
    assert_eq!(
        expect_code(&w.run(&["exec", "--", "hostname"]), 0),
        "reprorun\n"
    );
    let o = w.run(&["exec", "--hostname", "box-1", "--", "uname", "-n"]);
    assert_eq!(expect_code(&o, 0), "box-1\n");
}

#[test]
fn environment_is_exactly_the_documented_set() {
    let w = Work::new();
    let o = w
        .cmd(&["exec", "--", "env"])
        .env("LEAK_ME", "secret")
        .env("SOURCE_DATE_EPOCH", "1600000000")
        .output()
        .unwrap();
    let mut env: Vec<_> = expect_code(&o, 0).lines().map(String::from).collect();
    env.sort();
    assert_eq!(
        env,
        [
            // Offline (--net none, no mirror): package clients do not retry.
            "GOPROXY=off",
            "GOTOOLCHAIN=local",
            "HOME=/home/reprorun",
            "LANG=C.UTF-8",
            "LC_ALL=C.UTF-8",
            "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "PERL_HASH_SEED=0",
            "PERL_PERTURB_KEYS=NO",
            "PIP_RETRIES=0",
            "PYTHONHASHSEED=0",
            "SOURCE_DATE_EPOCH=1600000000",
            "SWIFT_DETERMINISTIC_HASHING=1",
            "TZ=UTC",
            "UV_HTTP_RETRIES=0",
            "npm_config_fetch_retries=0",
        ]
    );
}

#[test]
fn env_and_env_file_add_variables_in_order() {
    let w = Work::new();
    std::fs::write(
        w.path().join("vars.env"),
        "# comment\nA=from-file\nB='quoted value'\n",
    )
    .unwrap();
    let o = w.run(&[
        "exec",
        "--env-file",
        "vars.env",
        "--env",
        "A=from-flag",
        "--env",
        "TZ=Asia/Tokyo",
        "--",
        "sh",
        "-c",
        "echo \"$A|$B|$TZ\"",
    ]);
    assert_eq!(expect_code(&o, 0), "from-flag|quoted value|Asia/Tokyo\n");
}

#[test]
fn umask_home_and_working_directory() {
    let w = Work::new();
    let o = w.run(&[
        "exec",
        "--",
        "sh",
        "-c",
        "umask; pwd; cd && pwd && touch x && ls -A",
    ]);
    assert_eq!(expect_code(&o, 0), "0022\n/work\n/home/reprorun\nx\n");
}

#[test]
fn host_root_is_read_only() {
    let w = Work::new();
    let name = format!("/usr/reprorun-ro-{}", std::process::id());
    let o = w.run(&["exec", "--", "touch", &name]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("Read-only file system"),
        "{}",
        stderr(&o)
    );
    assert!(!std::path::Path::new(&name).exists());
    // Every submount of the root is read-only too, and the host admin's home is hidden.
    let o = w.run(&[
        "exec",
        "--",
        "sh",
        "-c",
        "ls -A /root | wc -l; touch /etc/x 2>&1 | grep -c Read-only",
    ]);
    assert_eq!(expect_code(&o, 0), "0\n1\n");
}

#[test]
fn masks_generated_files_and_runtime_files_are_read_only_binds() {
    let w = Work::new();
    // The mount options of each path (the last mount there wins), then what writes do.
    let script = r#"
        for p in /proc/cpuinfo /sys/devices/system/cpu/online /proc/acpi /sys/firmware \
                 /proc/keys /run/reprorun /dev /dev/shm; do
            o=$(awk -v p="$p" '$5 == p { o = $6 } END { print o }' /proc/self/mountinfo)
            echo "$p ${o:-none}"
        done
        for p in /proc/acpi/x /sys/firmware/x /run/reprorun/x; do
            touch "$p" 2>/dev/null && echo "wrote $p"
        done
        ls -A /proc/acpi /sys/firmware | grep -v : | grep -c . 
        cat /proc/keys 2>/dev/null | wc -c
        stat -c %a /dev/shm; touch /dev/shm/x && echo shm-ok
    "#;
    let o = w.run(&["exec", "--", "sh", "-c", script]);
    let out = expect_code(&o, 0);
    let lines: Vec<&str> = out.lines().collect();
    for line in &lines[..6] {
        let opts = line.split_once(' ').map(|(_, o)| o).unwrap_or_default();
        assert!(opts.starts_with("ro,nosuid,nodev"), "{out}");
    }
    // /dev is a writable tmpfs and /dev/shm a sticky directory of it, not a mount of its own.
    assert!(lines[6].starts_with("/dev rw,nosuid,nodev"), "{out}");
    assert_eq!(lines[7], "/dev/shm none", "{out}");
    assert_eq!(lines[8..], ["0", "0", "1777", "shm-ok"], "{out}");
}

#[test]
fn work_is_writable_and_results_land_on_the_host() {
    let w = Work::new();
    std::fs::write(w.path().join("input.txt"), "in").unwrap();
    let o = w.run(&[
        "exec",
        "--",
        "sh",
        "-c",
        "cat input.txt > /work/output.txt; echo out >> output.txt",
    ]);
    expect_code(&o, 0);
    assert_eq!(
        std::fs::read_to_string(w.path().join("output.txt")).unwrap(),
        "inout\n"
    );

    let other = Work::new();
    let o = w.run(&[
        "exec",
        "--workdir",
        other.path().to_str().unwrap(),
        "--",
        "touch",
        "made-here",
    ]);
    expect_code(&o, 0);
    assert!(other.path().join("made-here").exists());
    assert!(!w.path().join("made-here").exists());
}

#[test]
fn tmp_is_private() {
    let w = Work::new();
    let host_file = tempfile::NamedTempFile::new_in("/tmp").unwrap();
    let name = host_file
        .path()
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    let inside = format!("reprorun-private-{}", std::process::id());
    let o = w.run(&[
        "exec",
        "--",
        "sh",
        "-c",
        &format!("test -e /tmp/{name} && echo leaked; touch /tmp/{inside}; ls -A /tmp | wc -l"),
    ]);
    assert_eq!(expect_code(&o, 0), "1\n");
    assert!(!std::path::Path::new("/tmp").join(&inside).exists());
}

#[test]
fn dev_is_minimal_and_works() {
    let w = Work::new();
    let o = w.run(&[
        "exec", "--", "sh", "-c",
        "ls -A /dev | tr '\\n' ' '; echo; echo x > /dev/null && head -c 4 /dev/zero | od -An -tx1; \
         readlink /dev/stdout /dev/fd; test -c /dev/pts/ptmx && echo pts",
    ]);
    let out = expect_code(&o, 0);
    let lines: Vec<_> = out.lines().collect();
    assert_eq!(
        lines[0].trim(),
        "fd full null ptmx pts random shm stderr stdin stdout tty urandom zero"
    );
    assert_eq!(lines[1].trim(), "00 00 00 00");
    assert_eq!(&lines[2..], ["/proc/self/fd/1", "/proc/self/fd", "pts"]);
}

#[test]
fn network_is_loopback_only() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let w = Work::new();
    let probe = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected || echo refused");
    let o = w.run(&["exec", "--", "bash", "-c", &probe]);
    assert_eq!(
        expect_code(&o, 0),
        "refused\n",
        "the host's loopback must not be reachable"
    );
    let o = w.run(&["exec", "--", "sh", "-c", "ls /sys/class/net"]);
    assert_eq!(expect_code(&o, 0), "lo\n");
    // Loopback inside is up and usable.
    let o = w.run(&[
        "exec",
        "--",
        "python3",
        "-c",
        "import socket; s=socket.socket(); s.bind(('127.0.0.1',0)); s.listen(); \
         c=socket.create_connection(s.getsockname()); print('loopback ok')",
    ]);
    assert_eq!(expect_code(&o, 0), "loopback ok\n");
    // --net host opts out.
    let o = w.run(&["exec", "--net", "host", "--", "bash", "-c", &probe]);
    assert_eq!(expect_code(&o, 0), "connected\n");
}

#[test]
fn binds_and_tmpfs_mounts() {
    let w = Work::new();
    let data = tempfile::tempdir().unwrap();
    std::fs::write(data.path().join("f"), "data").unwrap();
    let src = data.path().to_str().unwrap();
    let o = w.run(&[
        "exec",
        "--bind",
        &format!("{src}:/data:ro"),
        "--bind",
        &format!("{src}:/data-rw"),
        "--tmpfs",
        "/scratch",
        "--",
        "sh",
        "-c",
        "cat /data/f; echo; touch /data/g 2>/dev/null || echo ro; echo new > /data-rw/g; \
         touch /scratch/s && echo scratch",
    ]);
    assert_eq!(expect_code(&o, 0), "data\nro\nscratch\n");
    assert_eq!(
        std::fs::read_to_string(data.path().join("g")).unwrap(),
        "new\n"
    );
    // A later tmpfs covers an earlier bind: order on the command line is kept.
    let o = w.run(&[
        "exec",
        "--bind",
        &format!("{src}:/data"),
        "--tmpfs",
        "/data",
        "--",
        "ls",
        "-A",
        "/data",
    ]);
    assert_eq!(expect_code(&o, 0), "");
    let o = w.run(&[
        "exec",
        "--tmpfs",
        "/data",
        "--bind",
        &format!("{src}:/data"),
        "--",
        "ls",
        "/data",
    ]);
    assert_eq!(expect_code(&o, 0), "f\ng\n");
}

#[test]
fn zombies_are_reaped_by_init() {
    let w = Work::new();
    // The inner shell exits at once, orphaning `sleep 0.2`; init inherits and must reap it.
    let o = w.run(&[
        "exec", "--", "sh", "-c",
        "sh -c 'sleep 0.2 &'; sleep 0.8; cat /proc/[0-9]*/stat 2>/dev/null | awk '{print $3}' | grep -c Z",
    ]);
    assert_eq!(expect_code(&o, 1), "0\n");
}

#[test]
fn stdio_passes_through() {
    let w = Work::new();
    let o = with_stdin(
        w.cmd(&["exec", "--", "sh", "-c", "tr a-z A-Z; echo err >&2"]),
        b"hello\n",
    );
    assert_eq!(expect_code(&o, 0), "HELLO\n");
    assert_eq!(stderr(&o), "err\n");
}

#[test]
fn uptime_comes_from_the_time_namespace() {
    let w = Work::new();
    let o = w.run(&["exec", "--", "cat", "/proc/uptime"]);
    let up: f64 = expect_code(&o, 0)
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        (10.0..12.0).contains(&up),
        "uptime inside starts at 10 s, saw {up}"
    );
}

#[test]
fn signals_are_forwarded_to_the_workload() {
    for (sig, name) in [
        (nix::sys::signal::Signal::SIGTERM, "TERM"),
        (nix::sys::signal::Signal::SIGUSR1, "USR1"),
        (nix::sys::signal::Signal::SIGINT, "INT"),
        (nix::sys::signal::Signal::SIGHUP, "HUP"),
    ] {
        let w = Work::new();
        let script = format!(
            "trap 'echo got {name}; exit 3' {name}; echo ready; while :; do sleep 0.05; done"
        );
        let mut child = w
            .cmd(&["exec", "--", "sh", "-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        assert_eq!(line, "ready\n");
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), sig).unwrap();
        line.clear();
        out.read_line(&mut line).unwrap();
        assert_eq!(line, format!("got {name}\n"));
        assert_eq!(child.wait().unwrap().code(), Some(3));
    }
}

#[test]
fn user_flag_sets_the_inside_identity() {
    let w = Work::new();
    let o = w.run(&[
        "exec",
        "--user",
        "1000:1000",
        "--",
        "sh",
        "-c",
        "id -u; id -g; touch /work/f",
    ]);
    assert_eq!(expect_code(&o, 0), "1000\n1000\n");
    // Outside, the file belongs to the caller.
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(w.path().join("f")).unwrap();
    assert_eq!(meta.uid(), nix::unistd::geteuid().as_raw());
}

#[test]
fn no_capabilities_and_no_new_privileges() {
    let w = Work::new();
    let o = w.run(&[
        "exec",
        "--",
        "sh",
        "-c",
        "grep -E '^(CapEff|CapBnd|CapAmb|NoNewPrivs)' /proc/self/status",
    ]);
    let out = expect_code(&o, 0);
    for line in out.lines() {
        let value = line.split_whitespace().nth(1).unwrap();
        if line.starts_with("NoNewPrivs") {
            assert_eq!(value, "1");
        } else {
            assert_eq!(value, "0000000000000000", "{line}");
        }
    }
    // Root inside cannot undo the read-only root.
    let o = w.run(&["exec", "--", "mount", "-o", "remount,rw", "/usr"]);
    assert_ne!(o.status.code(), Some(0));
}

#[test]
fn rootfs_runs_a_busybox_tree() {
    let busybox = std::path::Path::new("/bin/busybox");
    assert!(busybox.exists(), "install busybox-static (.ci/run does)");
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("bin")).unwrap();
    std::fs::copy(busybox, root.path().join("bin/busybox")).unwrap();
    for app in ["sh", "ls", "cat", "echo"] {
        std::os::unix::fs::symlink("busybox", root.path().join("bin").join(app)).unwrap();
    }
    std::fs::create_dir_all(root.path().join("etc")).unwrap();
    std::fs::write(root.path().join("etc/os-release"), "NAME=tiny\n").unwrap();
    let w = Work::new();
    let o = w.run(&[
        "exec",
        "--rootfs",
        root.path().to_str().unwrap(),
        "--env",
        "PATH=/bin",
        "--",
        "sh",
        "-c",
        "ls / | tr '\\n' ' '; cat /etc/os-release",
    ]);
    assert_eq!(
        expect_code(&o, 0),
        "bin dev etc home proc run sys tmp work NAME=tiny\n"
    );
}

#[test]
fn dry_run_prints_the_plan_and_runs_nothing() {
    let w = Work::new();
    let o = w.run(&[
        "exec",
        "--dry-run",
        "--timeout",
        "90s",
        "--",
        "touch",
        "/work/should-not-exist",
    ]);
    let plan: serde_json::Value = serde_json::from_str(&expect_code(&o, 0)).unwrap();
    assert!(!w.path().join("should-not-exist").exists());
    assert_eq!(
        plan["argv"],
        serde_json::json!(["touch", "/work/should-not-exist"])
    );
    assert_eq!(plan["timeout_ms"], 90_000);
    assert_eq!(plan["cwd"], "/work");
    assert_eq!(plan["mounts"][0]["op"], "tmpfs");
    assert_eq!(plan["namespaces"].as_array().unwrap().len(), 8);
}

#[test]
fn a_record_to_the_callers_own_stderr_follows_what_is_there() {
    // `--record /dev/stderr 2>log`: the record goes after what the caller's stderr already
    // holds, through the caller's own descriptor. (Opening the path again truncated the log,
    // and even without truncation would have written from offset 0 over it.)
    let w = Work::new();
    let log_path = w.path().join("log");
    let mut log = std::fs::File::create(&log_path).unwrap();
    std::io::Write::write_all(&mut log, b"earlier line\n").unwrap();
    let status = w
        .cmd(&["exec", "--record", "/dev/stderr", "--", "true"])
        .stdout(Stdio::null())
        .stderr(log)
        .status()
        .unwrap();
    assert!(status.success());
    let text = std::fs::read_to_string(&log_path).unwrap();
    let rest = text
        .strip_prefix("earlier line\n")
        .unwrap_or_else(|| panic!("the log lost its first line: {text:?}"));
    let rec: serde_json::Value = serde_json::from_str(rest.trim()).unwrap();
    assert_eq!(rec["exit_code"], 0);
}

#[test]
fn record_describes_the_run() {
    let w = Work::new();
    let o = w.run(&[
        "exec",
        "--record",
        "run.json",
        "--",
        "sh",
        "-c",
        "head -c 20000000 /dev/zero | wc -c; exit 7",
    ]);
    expect_code(&o, 7);
    let rec: serde_json::Value = read_json(&w.path().join("run.json"));
    assert_eq!(rec["exit_code"], 7);
    assert_eq!(rec["timed_out"], false);
    assert_eq!(rec["isolation_used"], "full");
    assert_eq!(rec["reprorun_version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(rec["plan"]["argv"][0], "sh");
    assert!(rec["argv"]
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a == "--record"));
    assert!(rec["started_at"].as_str().unwrap().ends_with('Z'));
    assert!(rec["duration_s"].as_f64().unwrap() > 0.0);
    assert!(rec["rusage"]["max_rss_kib"].as_u64().unwrap() > 0);
    assert!(rec["error"].is_null());

    // The CPU of every process the sandbox ran reaches the record, grandchildren included: a
    // shell counting in a loop (a child of the workload) spends about 0.3 s of CPU here,
    // which the record shows (without the grandchild it would read a few milliseconds).
    let o = w.run(&[
        "exec",
        "--record",
        "busy.json",
        "--",
        "sh",
        "-c",
        "sh -c 'i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done'",
    ]);
    expect_code(&o, 0);
    let rec: serde_json::Value = read_json(&w.path().join("busy.json"));
    let usage = &rec["rusage"];
    let cpu = usage["user_s"].as_f64().unwrap() + usage["sys_s"].as_f64().unwrap();
    assert!(cpu >= 0.05, "rusage of a counting loop: {usage}");

    let o = w.run(&[
        "exec",
        "--record",
        "t.json",
        "--timeout",
        "200ms",
        "--",
        "sleep",
        "5",
    ]);
    expect_code(&o, 124);
    let rec: serde_json::Value = read_json(&w.path().join("t.json"));
    assert_eq!(rec["timed_out"], true);
    assert_eq!(rec["exit_code"], 124);

    let o = w.run(&["exec", "--record", "n.json", "--", "no-such-command"]);
    expect_code(&o, 127);
    let rec: serde_json::Value = read_json(&w.path().join("n.json"));
    assert_eq!(rec["exit_code"], 127);
    assert!(rec["error"].as_str().unwrap().contains("command not found"));
}

#[test]
fn trace_steps_time_every_process_and_stay_out_of_the_workload() {
    let w = Work::new();
    let o = w
        .cmd(&[
            "exec",
            "--",
            "sh",
            "-c",
            "env | grep -c REPRORUN_TRACE; true",
        ])
        .env("REPRORUN_TRACE_STEPS", "1")
        .output()
        .unwrap();
    assert_eq!(
        expect_code(&o, 0),
        "0\n",
        "the variable is not in the workload's environment"
    );
    let err = stderr(&o);
    let mut last = std::collections::HashMap::new();
    for line in err.lines() {
        let f: Vec<&str> = line.splitn(4, ' ').collect();
        assert_eq!(f[0], "reprorun-trace", "only trace lines: {err}");
        let at: u64 = f[2].parse().unwrap();
        // Each process's steps come in order on one clock.
        assert!(at >= *last.get(f[1]).unwrap_or(&0), "{err}");
        last.insert(f[1], at);
    }
    for who in ["supervisor", "init", "workload"] {
        assert!(last.contains_key(who), "no steps of {who}: {err}");
    }
    assert!(err.contains(" init ") && err.contains(" Root\n"), "{err}");
    // The server is told of every exec but the workload's own of a dynamic program (let
    // through): none for /bin/true, sh's two and not sh's own, busybox's (static) own.
    let execs = |flags: &[&str], cmd: &[&str]| {
        let args = [&["exec"][..], flags, &["--"], cmd].concat();
        let o = w
            .cmd(&args)
            .env("REPRORUN_TRACE_STEPS", "1")
            .output()
            .unwrap();
        expect_code(&o, 0);
        stderr(&o).matches(" server ").count()
    };
    assert_eq!(execs(&[], &["/bin/true"]), 0);
    assert_eq!(execs(&[], &["sh", "-c", "/bin/true; /bin/true"]), 2);
    let busybox = Need::Path("/bin/busybox", "busybox-static (.ci/setup installs it)");
    if skip::part_runs("busybox cases", &[busybox]) {
        assert_eq!(execs(&[], &["busybox", "true"]), 1);
        // With neither a fake clock nor seeded entropy the server changes no exec: the
        // workload's own passes whatever its program.
        let real = ["--date", "now", "--random", "real"];
        assert_eq!(execs(&real, &["busybox", "true"]), 0);
        assert_eq!(execs(&real, &["sh", "-c", "busybox true"]), 1);
    }
    // Off (unset, or 0): nothing on stderr.
    for value in [None, Some("0")] {
        let mut cmd = w.cmd(&["exec", "--", "true"]);
        match value {
            Some(v) => cmd.env("REPRORUN_TRACE_STEPS", v),
            None => cmd.env_remove("REPRORUN_TRACE_STEPS"),
        };
        let o = cmd.output().unwrap();
        expect_code(&o, 0);
        assert_eq!(stderr(&o), "", "tracing off: {value:?}");
    }
}
