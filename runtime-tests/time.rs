//! The fake wall clock: every kind of program (dynamic C, static C, Go, Python, coreutils,
//! busybox) in every mode, children and threads, file timestamps, bad input.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::OnceLock;

use crate::common::*;

const DATE: i64 = 1_700_000_000; // 2023-11-14T22:13:20Z

/// Probe programs built once per test run: dynamic C, static C, and Go.
struct Probes {
    dir: tempfile::TempDir,
}

fn probes() -> &'static Probes {
    static PROBES: OnceLock<Probes> = OnceLock::new();
    PROBES.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("runtime-tests/probes");
        let c = src.join("clock.c");
        let scratch = dir.path();
        build_probe(
            &c,
            &dir.path().join("clock-dynamic"),
            &["-pthread"],
            scratch,
        );
        build_probe(
            &c,
            &dir.path().join("clock-static"),
            &["-static", "-pthread"],
            scratch,
        );
        build_probe(
            &src.join("exec_signals.c"),
            &dir.path().join("exec-signals"),
            &[],
            scratch,
        );
        build_probe(
            &src.join("clock.go"),
            &dir.path().join("clock-go"),
            &[],
            scratch,
        );
        // A library whose constructor reads the clock, and a program that links it.
        let lib = dir.path().join("libctor.so");
        build_probe(
            &src.join("ctor.c"),
            &lib,
            &["-DLIB", "-shared", "-fPIC", "-Wl,-soname,libctor.so"],
            scratch,
        );
        let lib = lib.to_str().unwrap().to_string();
        build_probe(
            &src.join("ctor.c"),
            &dir.path().join("ctor"),
            &["-Wl,--no-as-needed", &lib, "-Wl,-rpath,/probes"],
            scratch,
        );
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        Probes { dir }
    })
}

/// Runs `sh -c SCRIPT` with the probes bound at /probes; returns stdout.
fn run_clock(flags: &[&str], script: &str) -> String {
    let p = probes();
    let w = Work::new();
    let bind = format!("{}:/probes:ro", p.dir.path().display());
    let mut args = vec!["exec", "--bind", &bind];
    args.extend_from_slice(flags);
    args.extend_from_slice(&["--", "sh", "-c", script]);
    expect_code(&w.run(&args), 0)
}

/// "name value" lines, grouped by name.
fn values(out: &str) -> BTreeMap<String, Vec<i64>> {
    let mut map: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for line in out.lines() {
        let mut parts = line.split_whitespace();
        if let (Some(k), Some(v)) = (parts.next(), parts.next()) {
            if let Ok(v) = v.parse() {
                map.entry(k.to_string()).or_default().push(v);
            }
        }
    }
    map
}

const EVERY_KIND: &str = "/probes/clock-dynamic; /probes/clock-static | sed 's/^/static-/'; \
    /probes/clock-go; busybox date +'busybox %s'; date +'coreutils %s'; \
    printf '#!/bin/busybox sh\\nbusybox date +\"script %%s\"\\n' > /tmp/s; chmod +x /tmp/s; /tmp/s; \
    env -i /probes/clock-dynamic | sed 's/^/scrubbed-/'; \
    python3 -c 'import time, datetime, os; print(\"python\", int(time.time())); \
print(\"datetime\", int(datetime.datetime.now().timestamp())); \
import sys; sys.stdout.flush(); pid = os.fork(); print(\"pychild\", int(time.time())) if pid == 0 else os.waitpid(pid, 0)'";

#[test]
fn frozen_clock_is_exact_for_every_kind_of_program() {
    let out = run_clock(&["--date", "@1700000000", "--clock", "frozen"], EVERY_KIND);
    let v = values(&out);
    let names = [
        "realtime",
        "coarse",
        "tai",
        "gettimeofday",
        "time",
        "timespec_get",
        "ftime",
        "thread",
        "child",
        "static-realtime",
        "static-coarse",
        "static-tai",
        "static-gettimeofday",
        "static-time",
        "static-timespec_get",
        "static-ftime",
        "static-thread",
        "static-child",
        "go",
        "goroutine",
        "busybox",
        "coreutils",
        "scrubbed-realtime",
        "python",
        "datetime",
        "pychild",
    ];
    for name in names {
        assert_eq!(v.get(name), Some(&vec![DATE]), "{name} in:\n{out}");
    }
}

#[test]
fn cpu_time_clocks_leak_no_host_speed_under_a_frozen_or_tick_clock() {
    // However a program names its CPU clock (its own, its thread's, or by number from
    // clock_getcpuclockid and pthread_getcpuclockid), dynamic or static.
    const NAMES: [&str; 5] = [
        "cpu-process",
        "cpu-thread",
        "cpu-getcpuclockid",
        "cpu-pthread_getcpuclockid",
        "cpu-clock",
    ];
    let script = "/probes/clock-dynamic cpu; /probes/clock-static cpu | sed 's/^/static-/'";
    let read = |clock: &str| {
        let out = run_clock(&["--date", "@1700000000", "--clock", clock], script);
        let v = values(&out);
        let names = NAMES
            .iter()
            .flat_map(|n| [n.to_string(), format!("static-{n}")]);
        let got: Vec<(String, i64)> = names
            .map(|n| {
                let r = v.get(&n).and_then(|r| r.first()).copied();
                (n.clone(), r.unwrap_or_else(|| panic!("no {n} in:\n{out}")))
            })
            .collect();
        got
    };
    // The probe spins for about 20 ms first: real readings are well above zero.
    for (name, ns) in read("start-at") {
        assert!(ns > 1_000, "{name} read {ns}: the real CPU clock");
    }
    for (name, ns) in read("frozen") {
        assert_eq!(ns, 0, "{name}");
    }
    // Tick: each read of a CPU clock is one step of the shared counter (whole seconds here).
    for (name, ns) in read("tick=1s") {
        let unit = if name.ends_with("cpu-clock") {
            1_000_000
        } else {
            1_000_000_000
        };
        assert_eq!(ns % unit, 0, "{name} read {ns}");
    }
}

#[test]
fn start_at_clock_starts_at_the_date_for_every_kind_of_program() {
    let out = run_clock(&["--date", "2023-11-14T22:13:20Z"], EVERY_KIND);
    let v = values(&out);
    assert!(v.len() >= 26, "{out}");
    for (name, readings) in &v {
        // The coarse clock lags the fine one by up to a scheduler tick.
        let lag = if name.ends_with("coarse") { 1 } else { 0 };
        for r in readings {
            assert!(
                (DATE - lag..DATE + 30).contains(r),
                "{name} read {r}, expected just after {DATE}:\n{out}"
            );
        }
    }
}

#[test]
fn tick_clock_advances_by_the_step_on_every_read() {
    let out = run_clock(
        &["--date", "@1700000000", "--clock", "tick=1s"],
        "/probes/clock-static 3; /probes/clock-dynamic 3",
    );
    let reads: Vec<i64> = values(&out)["read"].clone();
    assert_eq!(reads.len(), 6, "{out}");
    // Within a program, consecutive reads are exactly one step apart.
    for program in reads.chunks(3) {
        for pair in program.windows(2) {
            assert_eq!(
                pair[1] - pair[0],
                1_000_000_000,
                "each read advances by exactly 1s:\n{out}"
            );
        }
    }
    // The counter is shared by both paths and every process: time never goes back.
    assert!(reads[3] > reads[2], "{out}");
    assert!(reads[0] >= DATE * 1_000_000_000);
    // A second run reads the same sequence.
    let again = run_clock(
        &["--date", "@1700000000", "--clock", "tick=1s"],
        "/probes/clock-static 3; /probes/clock-dynamic 3",
    );
    assert_eq!(values(&again)["read"], reads);
}

#[test]
fn dynamic_and_static_paths_read_one_clock() {
    let out = run_clock(&[], "/probes/clock-dynamic 1 | grep offset | tail -1; /probes/clock-static 1 | grep offset | tail -1");
    let offsets = &values(&out)["offset"];
    assert_eq!(offsets.len(), 2, "{out}");
    let diff = (offsets[0] - offsets[1]).abs();
    assert!(
        diff < 1_000_000,
        "realtime - monotonic differs by {diff} ns between the paths:\n{out}"
    );
}

#[test]
fn time_passes_and_waits_work_in_every_mode() {
    // start-at: sleep 1 advances both paths by about a second.
    let out = run_clock(
        &[],
        "/probes/clock-dynamic 1 | grep '^read'; /probes/clock-static 1 | grep '^read'; sleep 1; \
        /probes/clock-dynamic 1 | grep '^read'; /probes/clock-static 1 | grep '^read'",
    );
    let r = &values(&out)["read"];
    for (before, after) in [(r[0], r[2]), (r[1], r[3])] {
        let d = after - before;
        assert!(
            (950_000_000..3_000_000_000).contains(&d),
            "advanced {d} ns:\n{out}"
        );
    }
    // frozen: relative sleeps, timeouts and poll waits still return.
    let started = std::time::Instant::now();
    let out = run_clock(
        &["--clock", "frozen", "--timeout", "20s"],
        "sleep 0.3; timeout 0.3 sleep 5; echo timeout=$?; \
         python3 -c 'import time, select; time.sleep(0.2); select.select([], [], [], 0.2); print(\"waited\")'",
    );
    assert_eq!(out, "timeout=124\nwaited\n");
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
}

#[test]
fn file_timestamps_agree_with_the_clock() {
    let out = run_clock(
        &["--date", "@1700000000"],
        "cd /tmp; touch f; echo \"stat $(stat -c %Y f)\"; echo \"now $(date +%s)\"; \
         python3 -c 'import os; print(\"pystat\", int(os.stat(\"f\").st_mtime))'; \
         touch -d @1600000000 g; echo \"explicit $(stat -c %Y g)\"; \
         touch -r g h; echo \"reference $(stat -c %Y h)\"; \
         sleep 1.1; touch n; [ n -nt f ] && echo newer 1",
    );
    let v = values(&out);
    let (stat, now) = (v["stat"][0], v["now"][0]);
    assert!(
        (now - stat).abs() <= 2,
        "touched file {stat} vs clock {now}:\n{out}"
    );
    assert!((DATE..DATE + 30).contains(&stat), "{out}");
    assert_eq!(v["pystat"][0], stat);
    assert_eq!(
        v["explicit"],
        vec![1_600_000_000],
        "an explicit timestamp reads back unchanged"
    );
    assert_eq!(v["reference"], vec![1_600_000_000]);
    assert_eq!(v["newer"], vec![1], "make-style comparisons keep working");
}

#[test]
fn files_from_before_the_run_keep_their_times_so_caches_stay_valid() {
    let w = Work::new();
    let old = w.path().join("old");
    std::fs::write(&old, "x").unwrap();
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_650_000_000);
    std::fs::File::options()
        .write(true)
        .open(&old)
        .unwrap()
        .set_modified(t)
        .unwrap();
    for clock in ["start-at", "frozen", "tick"] {
        let o = w.run(&[
            "exec",
            "--clock",
            clock,
            "--",
            "sh",
            "-c",
            "stat -c %Y old; python3 -v -c 'import email.parser, json' 2>&1 \
             | grep -cE \"bytecode is stale for '(encodings|email|json)\"",
        ]);
        assert_eq!(
            expect_code(&o, 1),
            "1650000000\n0\n",
            "{clock}: an old file reads its own time, and no standard-library .pyc reads as stale"
        );
    }
}

#[test]
fn frozen_clock_files_read_the_frozen_now_however_long_the_run() {
    let out = run_clock(
        &["--date", "@1700000000", "--clock", "frozen"],
        "cd /tmp; touch f; sleep 1.2; echo x > g; \
         echo \"f $(stat -c %Y f)\"; echo \"g $(stat -c %Y g)\"; \
         python3 -c 'import os; print(\"ns\", os.stat(\"g\").st_mtime_ns)'; \
         touch -d @1600000000 old; echo \"old $(stat -c %Y old)\"",
    );
    let v = values(&out);
    assert_eq!(v["f"], vec![DATE], "{out}");
    assert_eq!(
        v["g"],
        vec![DATE],
        "written 1.2 s later, still the frozen now:\n{out}"
    );
    assert_eq!(v["ns"], vec![DATE * 1_000_000_000]);
    assert_eq!(
        v["old"],
        vec![1_600_000_000],
        "earlier times read back as set"
    );
}

#[test]
fn source_date_epoch_matches_the_date_and_now_turns_faking_off() {
    let out = run_clock(
        &["--date", "2023-11-14T22:13:20Z"],
        "echo sde $SOURCE_DATE_EPOCH; test -e /etc/ld.so.preload && echo preload 1",
    );
    assert_eq!(values(&out)["sde"], vec![DATE]);
    let real = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let out = run_clock(
        &["--date", "now", "--random", "real"],
        "echo sde $SOURCE_DATE_EPOCH; /probes/clock-static | grep ^realtime; \
        /probes/clock-go; test -e /etc/ld.so.preload || echo nopreload 1",
    );
    let v = values(&out);
    for key in ["sde", "realtime", "go"] {
        assert!(
            (v[key][0] - real).abs() < 30,
            "{key} is the real time with --date now:\n{out}"
        );
    }
    assert_eq!(v["nopreload"], vec![1]);
}

#[test]
fn bad_date_and_clock_input_is_refused() {
    let w = Work::new();
    for (args, needle) in [
        (
            &["exec", "--date", "yesterday", "--", "true"][..],
            "invalid date",
        ),
        (
            &["exec", "--date", "1969-12-31", "--", "true"],
            "out of range",
        ),
        (
            &["exec", "--date", "10000-01-01", "--", "true"],
            "invalid date",
        ),
        (
            &["exec", "--date", "2024-02-30", "--", "true"],
            "invalid date \"2024-02-30\": day 30 is out of range for 2024-02 (01-29)",
        ),
        (
            &["exec", "--clock", "warp", "--", "true"],
            "invalid --clock",
        ),
        (
            &["exec", "--clock", "tick=0s", "--", "true"],
            "invalid --clock",
        ),
    ] {
        expect_bad_input(&w.run(args), needle);
    }
}

#[test]
fn every_kind_of_program_gets_the_clock_as_the_sandbox_s_first_exec() {
    // The workload's own exec of a dynamic program skips the server (see spec/time.md); a
    // static or Go one, found directly or through a PATH search past missing directories,
    // still gets its clock at that exec (its AT_RANDOM: lineage.rs).
    let p = probes();
    let w = Work::new();
    let bind = format!("{}:/probes:ro", p.dir.path().display());
    let chmod = |name: &str, mode: u32| {
        use std::os::unix::fs::PermissionsExt;
        let perm = std::fs::Permissions::from_mode(mode);
        std::fs::set_permissions(w.dir.path().join(name), perm).unwrap();
    };
    let bb = "#!/bin/busybox sh\nbusybox date +'script %s'\n";
    std::fs::write(w.dir.path().join("bb.sh"), bb).unwrap();
    std::fs::write(w.dir.path().join("sh.sh"), "#!/bin/sh\ndate +'script %s'\n").unwrap();
    chmod("bb.sh", 0o755);
    chmod("sh.sh", 0o755);
    let search = "PATH=/nonexistent:/etc/passwd:/probes:/bin";
    // A dynamic program first on PATH that cannot be exec'd (not executable): its exec is
    // the one let through, fails, and the static one after it is still patched.
    std::fs::create_dir(w.dir.path().join("bin")).unwrap();
    std::fs::copy("/bin/true", w.dir.path().join("bin/busybox")).unwrap();
    chmod("bin/busybox", 0o644);
    let shadowed = "PATH=/work/bin:/bin";
    let cases: [(&[&str], &[&str], &str); 9] = [
        (
            &["--env", shadowed],
            &["busybox", "date", "+busybox %s"],
            "busybox",
        ),
        (&[], &["/probes/clock-dynamic"], "realtime"),
        (&[], &["/probes/clock-static"], "realtime"),
        (&[], &["/probes/clock-go"], "go"),
        (&["--env", search], &["clock-static"], "realtime"),
        (&["--env", search], &["clock-go"], "go"),
        (
            &["--env", search],
            &["busybox", "date", "+busybox %s"],
            "busybox",
        ),
        (&[], &["./bb.sh"], "script"),
        (&[], &["./sh.sh"], "script"),
    ];
    for (flags, cmd, name) in cases {
        let mut args = vec![
            "exec",
            "--bind",
            &bind,
            "--date",
            "@1700000000",
            "--clock",
            "frozen",
        ];
        args.extend_from_slice(flags);
        args.push("--");
        args.extend_from_slice(cmd);
        let out = expect_code(&w.run(&args), 0);
        assert_eq!(values(&out).get(name), Some(&vec![DATE]), "{cmd:?}:\n{out}");
    }
}

#[test]
fn a_clock_read_before_the_preload_library_s_constructor_is_shifted_once() {
    // glibc runs a program's own libraries' constructors before LD_PRELOAD ones': the
    // library's first clock read comes before the time library has set itself up. While it
    // does, a signal arrives on the same thread whose handler reads the clock too: it waits
    // until the set-up is done (it used to wait for the set-up, which waited for it).
    for (flags, exact) in [
        (&["--date", "@1700000000", "--clock", "frozen"][..], true),
        (&["--date", "2023-11-14T22:13:20Z"][..], false),
    ] {
        let out = run_clock(flags, "timeout -s KILL 20 /probes/ctor; echo exit $?");
        assert!(out.contains("exit 0"), "the probe hung or failed:\n{out}");
        let v = values(&out);
        for name in ["ctor-realtime", "ctor-time", "signal-realtime", "main-time"] {
            let got = v.get(name).and_then(|r| r.first()).copied();
            match exact {
                true => assert_eq!(got, Some(DATE), "{name}:\n{out}"),
                false => assert!(
                    got.is_some_and(|t| (DATE..DATE + 30).contains(&t)),
                    "{name} read {got:?}, expected just after {DATE}:\n{out}"
                ),
            }
        }
    }
}

#[test]
fn static_programs_started_from_threads_and_posix_spawn_get_the_clock() {
    // An exec from a non-leader thread (its exec stop arrives under the leader's pid), and
    // posix_spawn (vfork-style clone).
    let out = run_clock(
        &["--date", "@1700000000", "--clock", "frozen"],
        "python3 -c 'import os; os.posix_spawn(\"/bin/busybox\", [\"busybox\", \"date\", \"+spawn %s\"], {}); os.wait()'; \
         python3 -c 'import os, threading; t = threading.Thread(target=lambda: os.execv(\"/bin/busybox\", [\"busybox\", \"date\", \"+thread %s\"])); t.start(); t.join()'",
    );
    let v = values(&out);
    assert_eq!(v.get("spawn"), Some(&vec![DATE]), "{out}");
    assert_eq!(v.get("thread"), Some(&vec![DATE]), "{out}");
}

#[test]
fn tick_clock_reaches_every_kind_of_program() {
    // 1 ms per read: every program's readings stay within a few seconds of the date, however
    // long the run takes in real time.
    let out = run_clock(
        &["--date", "@1700000000", "--clock", "tick=1ms"],
        EVERY_KIND,
    );
    let v = values(&out);
    assert!(v.len() >= 26, "{out}");
    for (name, readings) in &v {
        for r in readings {
            assert!(
                (DATE..DATE + 5).contains(r),
                "{name} read {r} in tick mode:\n{out}"
            );
        }
    }
}

#[test]
fn the_workload_cannot_turn_the_clock_server_against_the_host() {
    let p = probes();
    let w = Work::new();
    std::fs::write(w.path().join("victim"), "unchanged").unwrap();
    let bind = format!("{}:/probes:ro", p.dir.path().display());
    // In tick mode the page is writable from inside: swap it for a link to a host file,
    // truncate it, and exec a FIFO; the server must neither write the host file, nor die,
    // nor hang.
    let script = ": > /run/reprorun/clock; /probes/clock-static > /tmp/o && echo ok; \
         rm -f /run/reprorun/clock && ln -s /work/victim /run/reprorun/clock; \
         /probes/clock-static > /tmp/o && echo ok; \
         mkfifo /tmp/f; chmod +x /tmp/f; /tmp/f 2>/dev/null; /probes/clock-static > /tmp/o && echo ok";
    // busybox sh: a static shell, so the workload's own (truncated) mapping cannot fault it.
    let o = w.run(&[
        "exec",
        "--clock",
        "tick",
        "--timeout",
        "30s",
        "--bind",
        &bind,
        "--",
        "busybox",
        "sh",
        "-c",
        script,
    ]);
    assert_eq!(expect_code(&o, 0), "ok\nok\nok\n");
    assert_eq!(
        std::fs::read_to_string(w.path().join("victim")).unwrap(),
        "unchanged"
    );
}

#[test]
fn execs_interrupted_by_signals_never_leave_a_process_traced() {
    // 400 children each exec busybox while their parent sends them SIGURG (handled, with
    // SA_RESTART) every few microseconds: some signals land while the supervisor handles the
    // exec notification, which invalidates it after the supervisor has attached. The
    // supervisor must detach cleanly then (it used to leave the child traced, and the child
    // froze in a tracing stop at its next signal: the run hung until its timeout).
    let p = probes();
    let w = Work::new();
    let bind = format!("{}:/probes:ro", p.dir.path().display());
    let started = std::time::Instant::now();
    let o = w.run(&[
        "exec",
        "--date",
        "@1700000000",
        "--clock",
        "frozen",
        "--timeout",
        "30s",
        "--bind",
        &bind,
        "--",
        "/probes/exec-signals",
        "400",
        "/bin/busybox",
        "true",
    ]);
    assert_eq!(expect_code(&o, 0), "done 400\n");
    let took = started.elapsed();
    assert!(took < std::time::Duration::from_secs(25), "took {took:?}");
}
