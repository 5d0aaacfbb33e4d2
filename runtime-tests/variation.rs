//! The variation suite: Debian reprotest's 14 ways hosts differ, each applied to the caller
//! of `reprorun exec` the way reprotest applies it, with a probe set (shell, Python, Perl, a
//! static C program, a static Go program) that prints everything a host could leak. Under
//! reprorun the two runs of each variation must print byte-identical output; without it, the
//! same variation must change what the probes print (so each pin is shown to be real).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use crate::common::*;

/// The probes, built once: scripts copied, C and Go compiled statically.
struct Kit {
    dir: tempfile::TempDir,
    /// A world-readable reprorun (the user_group variation runs it as another user).
    bin: PathBuf,
    _bin_dir: tempfile::TempDir,
}

fn kit() -> &'static Kit {
    static KIT: OnceLock<Kit> = OnceLock::new();
    KIT.get_or_init(|| {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("runtime-tests/probes/variation");
        for f in ["run-all.sh", "probe.sh", "probe.py", "probe.pl"] {
            std::fs::copy(src.join(f), dir.path().join(f)).unwrap();
        }
        std::fs::create_dir(dir.path().join("gotest")).unwrap();
        for f in ["gotest/go.mod", "gotest/probe_test.go"] {
            std::fs::copy(src.join(f), dir.path().join(f)).unwrap();
        }
        let scratch = tempfile::tempdir().unwrap();
        let out = |name: &str| dir.path().join(name);
        build_probe(
            &src.join("probe.c"),
            &out("probe-static"),
            &["-static"],
            scratch.path(),
        );
        build_probe(&src.join("probe.go"), &out("probe-go"), &[], scratch.path());
        for dir in [dir.path().to_path_buf(), dir.path().join("gotest")] {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
            }
        }
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let (_bin_dir, bin) = world_readable_binary();
        Kit { dir, bin, _bin_dir }
    })
}

/// A build directory holding `input/`, readable by everyone.
fn input_dir(parent: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir = parent.join("build");
    let input = dir.join("input");
    std::fs::create_dir_all(&input).unwrap();
    for i in 0..24 {
        std::fs::write(input.join(format!("entry-{i:02}")), format!("{i}\n")).unwrap();
    }
    for d in [parent, &dir, &input] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    dir
}

/// One side of a variation: how the caller differs.
#[derive(Default, Clone)]
struct Side {
    /// Wrapper command (setarch, taskset, unshare, a umask shell) in front of the run.
    wrap: Vec<String>,
    env: Vec<(String, String)>,
    env_remove: Vec<String>,
    /// The caller's working directory (the build path); default: the shared input dir.
    cwd: Option<PathBuf>,
    /// Run as the unprivileged test user.
    as_user: bool,
}

fn side() -> Side {
    Side::default()
}

fn words(ws: &[&str]) -> Vec<String> {
    ws.iter().map(|w| w.to_string()).collect()
}

fn kv(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn umask_wrap(mask: &str) -> Vec<String> {
    words(&["sh", "-c", &format!("umask {mask}; exec \"$@\""), "sh"])
}

struct Variation {
    name: &'static str,
    /// The probe lines this variation changes when nothing neutralizes it.
    key: &'static str,
    a: Side,
    b: Side,
    /// Real time between the two runs.
    delay: Duration,
}

/// The 14 variations of reprotest, as reprotest applies them. `other_path` is a copy of the
/// input at another build path; `shuffled` the input seen through disorderfs.
fn variations(other_path: &Path, shuffled: &Path) -> Vec<Variation> {
    let arch = std::env::consts::ARCH;
    let path = std::env::var("PATH").unwrap_or_default();
    let v = |name, key, a: Side, b: Side| Variation {
        name,
        key,
        a,
        b,
        delay: Duration::ZERO,
    };
    vec![
        v(
            "environment",
            "sh.env",
            Side {
                env: kv(&[("REPROTEST_CAPTURE_ENVIRONMENT", "1"), ("EXTRA", "a")]),
                ..side()
            },
            Side {
                env: kv(&[("OTHER_VARIABLE", "b")]),
                ..side()
            },
        ),
        v(
            "build_path",
            "sh.pwd",
            side(),
            Side {
                cwd: Some(other_path.to_path_buf()),
                ..side()
            },
        ),
        v(
            "kernel",
            "sh.uname",
            side(),
            Side {
                wrap: words(&["setarch", arch, "--uname-2.6"]),
                ..side()
            },
        ),
        v(
            "aslr",
            "c.stack",
            side(),
            Side {
                wrap: words(&["setarch", arch, "-R"]),
                ..side()
            },
        ),
        v(
            "num_cpus",
            "sh.nproc",
            Side {
                wrap: words(&["taskset", "-c", "0"]),
                ..side()
            },
            side(),
        ),
        Variation {
            delay: Duration::from_millis(1100),
            ..v("time", "sh.epoch", side(), side())
        },
        v(
            "user_group",
            "sh.id",
            side(),
            Side {
                as_user: true,
                ..side()
            },
        ),
        v(
            "fileordering",
            "sh.listing",
            side(),
            Side {
                cwd: Some(shuffled.to_path_buf()),
                ..side()
            },
        ),
        v(
            "domain_host",
            "sh.hostname",
            side(),
            Side {
                wrap: words(&[
                    "unshare",
                    "--uts",
                    "sh",
                    "-c",
                    "hostname reprotest-host && echo reprotest-domain > /proc/sys/kernel/domainname && exec \"$@\"",
                    "sh",
                ]),
                ..side()
            },
        ),
        v(
            "home",
            "sh.home",
            Side {
                env: kv(&[("HOME", "/root")]),
                ..side()
            },
            Side {
                env: kv(&[("HOME", "/tmp/reprotest-home")]),
                ..side()
            },
        ),
        v(
            "locales",
            "sh.locale",
            Side {
                env: kv(&[("LANG", "C.UTF-8")]),
                env_remove: words(&["LC_ALL", "LANGUAGE"]),
                ..side()
            },
            Side {
                env: kv(&[
                    ("LANG", "fr_CH.UTF-8"),
                    ("LC_ALL", "fr_CH.UTF-8"),
                    ("LANGUAGE", "fr_CH:fr"),
                ]),
                ..side()
            },
        ),
        v(
            "exec_path",
            "sh.path",
            side(),
            Side {
                env: vec![("PATH".into(), format!("/opt/reprotest/bin:{path}"))],
                ..side()
            },
        ),
        v(
            "timezone",
            "sh.tz",
            Side {
                env: kv(&[("TZ", "GMT+12")]),
                ..side()
            },
            Side {
                env: kv(&[("TZ", "GMT-14")]),
                ..side()
            },
        ),
        v(
            "umask",
            "sh.umask",
            Side {
                wrap: umask_wrap("0022"),
                ..side()
            },
            Side {
                wrap: umask_wrap("0002"),
                ..side()
            },
        ),
    ]
}

/// Runs the probe set once, under reprorun (`sandboxed`) or directly, as `s` says.
fn launch(s: &Side, sandboxed: bool, build: &Path, user: Option<(u32, u32)>) -> Output {
    launch_probe(Probe::All, s, sandboxed, build, user)
}

/// Which probes a run runs.
#[derive(Clone, Copy)]
enum Probe {
    /// `run-all.sh`: every probe program.
    All,
    /// `go test` of the module in `gotest/` (from a cold build cache of its own), printing
    /// only the probe's lines.
    GoTest,
}

impl Probe {
    /// The command, with the kit at `probes`.
    fn argv(self, probes: &str) -> Vec<String> {
        match self {
            Probe::All => words(&["sh", &format!("{probes}/run-all.sh"), probes]),
            Probe::GoTest => words(&[
                "sh",
                "-c",
                &format!(
                    "export GOCACHE=$(mktemp -d) && trap 'rm -rf \"$GOCACHE\"' EXIT && \
                     cd {probes}/gotest && go test -count=1 -v . > \"$GOCACHE.out\" 2>&1; \
                     s=$?; grep '^gotest\\.' \"$GOCACHE.out\" || cat \"$GOCACHE.out\" >&2; \
                     rm -f \"$GOCACHE.out\"; exit $s"
                ),
            ]),
        }
    }
}

/// Runs `probe` once, under reprorun (`sandboxed`) or directly, as `s` says.
fn launch_probe(
    probe: Probe,
    s: &Side,
    sandboxed: bool,
    build: &Path,
    user: Option<(u32, u32)>,
) -> Output {
    let k = kit();
    let probes = k.dir.path().display().to_string();
    let mut argv: Vec<String> = Vec::new();
    if s.as_user {
        let (uid, gid) = user.expect("the test user exists");
        argv.extend(words(&[
            "setpriv",
            &format!("--reuid={uid}"),
            &format!("--regid={gid}"),
            "--clear-groups",
            "--",
        ]));
    }
    argv.extend(s.wrap.iter().cloned());
    if sandboxed {
        argv.push(k.bin.display().to_string());
        argv.extend(words(&[
            "exec",
            "--date",
            "2024-01-01",
            "--clock",
            "frozen",
            "--bind",
            &format!("{probes}:/probes:ro"),
            "--",
        ]));
        argv.extend(probe.argv("/probes"));
    } else {
        argv.extend(probe.argv(&probes));
    }
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .current_dir(s.cwd.as_deref().unwrap_or(build))
        .env_remove("REPRORUN_ISOLATION")
        .env_remove("SOURCE_DATE_EPOCH")
        .stdin(Stdio::null());
    for k in &s.env_remove {
        cmd.env_remove(k);
    }
    cmd.envs(s.env.iter().cloned());
    cmd.output().expect("spawn the probe run")
}

/// Mounts `src` through disorderfs (shuffled directory entries) at a new directory.
struct Disorder {
    mnt: tempfile::TempDir,
}

impl Disorder {
    fn mount(src: &Path) -> Disorder {
        use std::os::unix::fs::PermissionsExt;
        let mnt = tempfile::tempdir().unwrap();
        std::fs::set_permissions(mnt.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let o = Command::new("disorderfs")
            .args(["--shuffle-dirents=yes", "--multi-user=yes", "-q"])
            .arg(src)
            .arg(mnt.path())
            .output()
            .expect("disorderfs (run .ci/setup)");
        assert!(o.status.success(), "disorderfs: {}", stderr(&o));
        Disorder { mnt }
    }
}

impl Drop for Disorder {
    fn drop(&mut self) {
        let _ = Command::new("fusermount3")
            .arg("-u")
            .arg(self.mnt.path())
            .status()
            .or_else(|_| Command::new("umount").arg(self.mnt.path()).status());
    }
}

/// The value of `KEY: VALUE` lines for `key` in a probe output.
fn line<'a>(out: &'a str, key: &str) -> Option<&'a str> {
    let prefix = format!("{key}: ");
    out.lines().find_map(|l| l.strip_prefix(prefix.as_str()))
}

/// Copies the build directory to a second, longer path (reprotest's build_path).
fn copy_build(build: &Path, parent: &Path) -> PathBuf {
    let other = parent.join("a/much/longer/build-path");
    std::fs::create_dir_all(other.parent().unwrap()).unwrap();
    let o = Command::new("cp")
        .arg("-a")
        .arg(build)
        .arg(&other)
        .output()
        .unwrap();
    assert!(o.status.success(), "cp: {}", stderr(&o));
    let mut p = other.as_path();
    while let Some(up) = p.parent().filter(|u| u.starts_with(parent)) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(up, std::fs::Permissions::from_mode(0o755)).unwrap();
        p = up;
    }
    other
}

fn host_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[test]
fn every_reprotest_variation_is_neutralized() {
    let root = tempfile::tempdir().unwrap();
    let build = input_dir(root.path());
    let other = copy_build(&build, root.path());
    let shuffled = Disorder::mount(&build);
    let user = rootless_user();
    let mut neutralized = Vec::new();
    let mut failed = Vec::new();
    let mut skipped = Vec::new();
    for v in variations(&other, shuffled.mnt.path()) {
        if (v.a.as_user || v.b.as_user) && user.is_none() {
            skipped.push(v.name);
            continue;
        }
        let a = launch(&v.a, true, &build, user);
        std::thread::sleep(v.delay);
        let b = launch(&v.b, true, &build, user);
        let (out_a, out_b) = (stdout(&a), stdout(&b));
        let ok = a.status.success() && b.status.success() && out_a == out_b;
        if ok && line(&out_a, "go.map").is_some() && line(&out_a, "c.stack").is_some() {
            neutralized.push(v.name);
        } else {
            let diff: Vec<String> = out_a
                .lines()
                .zip(out_b.lines())
                .filter(|(x, y)| x != y)
                .map(|(x, y)| format!("  - {x}\n  + {y}"))
                .collect();
            failed.push(format!(
                "{}: status {:?}/{:?}, stderr {:?} {:?}\n{}",
                v.name,
                a.status.code(),
                b.status.code(),
                stderr(&a),
                stderr(&b),
                diff.join("\n")
            ));
        }
    }
    let summary = format!(
        "{}/14 variations neutralized{}",
        neutralized.len(),
        if skipped.is_empty() {
            String::new()
        } else {
            format!(" ({} skipped without root: {skipped:?})", skipped.len())
        }
    );
    eprintln!("{summary}");
    assert!(failed.is_empty(), "{summary}\n{}", failed.join("\n"));
    assert_eq!(neutralized.len() + skipped.len(), 14, "{summary}");
}

#[test]
fn without_reprorun_each_variation_changes_the_output() {
    let root = tempfile::tempdir().unwrap();
    let build = input_dir(root.path());
    let other = copy_build(&build, root.path());
    let shuffled = Disorder::mount(&build);
    let user = rootless_user();
    let mut unchanged = Vec::new();
    for v in variations(&other, shuffled.mnt.path()) {
        if (v.a.as_user || v.b.as_user) && user.is_none() {
            continue;
        }
        // On one CPU taskset changes nothing.
        if v.name == "num_cpus" && !skip::part_runs("num_cpus variation", &[Need::Cpus(2)]) {
            continue;
        }
        let a = launch(&v.a, false, &build, user);
        std::thread::sleep(v.delay);
        let b = launch(&v.b, false, &build, user);
        let (out_a, out_b) = (stdout(&a), stdout(&b));
        let (la, lb) = (line(&out_a, v.key), line(&out_b, v.key));
        assert!(
            la.is_some() && lb.is_some(),
            "{}: no {} line\n{out_a}\n{}",
            v.name,
            v.key,
            stderr(&a)
        );
        if la == lb {
            unchanged.push(format!("{} ({}: {:?})", v.name, v.key, la));
        }
    }
    assert!(
        unchanged.is_empty(),
        "variations that did not change the output without reprorun: {unchanged:?}"
    );
}

/// Issue 45: `go test` links the test binary it runs without a symbol table, where the Go
/// runtime's `cputicks` was looked for, so its map order followed the CPU's timestamp counter.
/// Now it repeats: over plain runs and over the host-like variations (the user's is left out:
/// the kit's build cache is root's).
#[test]
fn go_test_map_order_repeats_across_runs_and_variations() {
    let root = tempfile::tempdir().unwrap();
    let build = input_dir(root.path());
    let other = copy_build(&build, root.path());
    let shuffled = Disorder::mount(&build);
    let chosen = [
        "environment",
        "build_path",
        "aslr",
        "num_cpus",
        "time",
        "home",
        "timezone",
    ];
    let first = stdout(&expect_ok(launch_probe(
        Probe::GoTest,
        &side(),
        true,
        &build,
        None,
    )));
    assert!(line(&first, "gotest.map").is_some(), "{first}");
    assert!(line(&first, "gotest.subtests").is_some(), "{first}");
    let mut differ = Vec::new();
    let mut sides = vec![("plain".to_string(), side()), ("plain".to_string(), side())];
    for v in variations(&other, shuffled.mnt.path()) {
        if chosen.contains(&v.name) {
            sides.push((format!("{} (a)", v.name), v.a));
            sides.push((format!("{} (b)", v.name), v.b));
        }
    }
    for (name, s) in &sides {
        let out = stdout(&expect_ok(launch_probe(
            Probe::GoTest,
            s,
            true,
            &build,
            None,
        )));
        if out != first {
            differ.push(format!("{name}:\n{out}"));
        }
    }
    assert!(
        differ.is_empty(),
        "first run:\n{first}\ndiffering runs:\n{}",
        differ.join("\n")
    );
    // The probe can tell: without reprorun, three runs do not all print one order.
    let direct: Vec<String> = (0..3)
        .map(|_| {
            stdout(&expect_ok(launch_probe(
                Probe::GoTest,
                &side(),
                false,
                &build,
                None,
            )))
        })
        .collect();
    assert!(
        direct
            .iter()
            .any(|o| line(o, "gotest.map") != line(&direct[0], "gotest.map")),
        "go test's map order repeated without reprorun: {direct:?}"
    );
}

/// `o` when its status is 0 (else the test fails, showing its stderr).
fn expect_ok(o: Output) -> Output {
    assert!(
        o.status.success(),
        "status {:?}: {}",
        o.status.code(),
        stderr(&o)
    );
    o
}

#[test]
fn seeds_change_every_seeded_source_and_real_entropy_opts_out() {
    let k = kit();
    let root = tempfile::tempdir().unwrap();
    let build = input_dir(root.path());
    let run = |extra: &[&str]| {
        let probes = format!("{}:/probes:ro", k.dir.path().display());
        let mut args = vec!["exec", "--clock", "frozen", "--bind", &probes];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--", "sh", "/probes/run-all.sh", "/probes"]);
        let o = Command::new(BIN)
            .args(&args)
            .current_dir(&build)
            .env_remove("REPRORUN_ISOLATION")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        expect_code(&o, 0)
    };
    let seed0 = run(&[]);
    let seed0_again = run(&["--seed", "0"]);
    let seed1 = run(&["--seed", "1"]);
    let real = run(&["--random", "real"]);
    let real_again = run(&["--random", "real"]);
    assert_eq!(seed0, seed0_again, "--seed 0 is the default");
    let seeded = [
        "sh.urandom",
        "py.urandom",
        "py.random",
        "py.set",
        "py.uuid4",
        "sh.uuid",
        "c.at_random",
        "c.getrandom",
        "c.urandom",
        "go.map",
        "go.crypto",
    ];
    for key in seeded {
        let (a, b) = (line(&seed0, key), line(&seed1, key));
        assert!(a.is_some(), "{key} missing:\n{seed0}");
        assert_ne!(a, b, "{key} is the same under seeds 0 and 1");
        // Hash seeds are environment pins, which --random real leaves in place.
        if key != "py.set" {
            assert_ne!(
                line(&real, key),
                line(&real_again, key),
                "{key} repeats with --random real"
            );
        }
    }
    // The boot id is the seed's in every entropy mode; the kernel's uuid source reads one
    // value per seeded run (twice the same), a fresh one at every read with real entropy.
    let boot_id = |out: &str| line(out, "sh.boot_id").map(str::to_string);
    assert_ne!(boot_id(&seed0), boot_id(&seed1));
    assert_eq!(
        boot_id(&real),
        boot_id(&seed0),
        "the boot id follows the seed only"
    );
    let uuids = |out: &str| {
        let l = line(out, "sh.uuid").unwrap_or_default().to_string();
        let v: Vec<String> = l.split_whitespace().map(str::to_string).collect();
        v
    };
    assert_eq!(uuids(&seed0).len(), 2);
    assert_eq!(
        uuids(&seed0)[0],
        uuids(&seed0)[1],
        "seeded: one uuid per run"
    );
    assert_ne!(
        uuids(&real)[0],
        uuids(&real)[1],
        "real: the kernel's, fresh per read"
    );
    // The hash-seed knobs follow the seed.
    assert!(line(&seed1, "sh.env")
        .unwrap()
        .contains("PYTHONHASHSEED=1 "));
    assert!(line(&seed1, "sh.env")
        .unwrap()
        .contains("PERL_HASH_SEED=1 "));
}

#[test]
fn cpus_option_is_what_every_interface_reports() {
    require!(Need::Cpus(2));
    let w = Work::new();
    let o = w.run(&[
        "exec",
        "--cpus",
        "2",
        "--",
        "sh",
        "-c",
        "nproc; getconf _NPROCESSORS_ONLN; cat /sys/devices/system/cpu/online; \
         grep -c ^processor /proc/cpuinfo; \
         python3 -c 'import os; print(os.cpu_count(), sorted(os.sched_getaffinity(0)))'; \
         taskset -p $$ | sed 's/.*: //'",
    ]);
    assert_eq!(expect_code(&o, 0), "2\n2\n0-1\n2\n2 [0, 1]\n3\n");
}

#[test]
fn bad_determinism_options_are_refused() {
    let w = Work::new();
    let too_many = (host_cpus() + 1).to_string();
    for (args, needle) in [
        (&["exec", "--seed", "x", "--", "true"][..], "--seed"),
        (&["exec", "--seed", "-1", "--", "true"], "--seed"),
        (&["exec", "--seed", "1.5", "--", "true"], "--seed"),
        (
            &["exec", "--cpus", "0", "--", "true"],
            "--cpus 0: must be between 1",
        ),
        (
            &["exec", "--cpus", &too_many, "--", "true"],
            "must be between 1",
        ),
        (&["exec", "--cpus", "two", "--", "true"], "--cpus"),
        (&["exec", "--random", "pseudo", "--", "true"], "--random"),
    ] {
        let o = w.run(args);
        expect_bad_input(&o, needle);
    }
}

#[test]
fn pins_only_runs_keep_the_pins_that_need_no_namespace() {
    let root = tempfile::tempdir().unwrap();
    let build = input_dir(root.path());
    let o = Command::new(BIN)
        .args([
            "exec",
            "--isolation",
            "none",
            "--",
            "sh",
            "-c",
            "uname -r; nproc; ls -f input | head -3 | tr '\\n' ' '; echo; \
             python3 -c 'import ctypes; print(hex(ctypes.CDLL(None).personality(0xffffffff)))'",
        ])
        .current_dir(&build)
        .env_remove("REPRORUN_ISOLATION")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        expect_code(&o, 0),
        "6.1.0-reprorun\n1\n. .. entry-00 \n0x40000\n",
        "uname, CPUs, sorted listing and ASLR off (ADDR_NO_RANDOMIZE) without namespaces"
    );
}

#[test]
fn short_lived_callers_do_not_pile_up_in_the_supervisor() {
    use std::io::BufRead;
    let w = Work::new();
    let mut child = w
        .cmd(&[
            "exec",
            "--timeout",
            "60s",
            "--",
            "sh",
            "-c",
            // Each `uname` process makes routed calls: getrandom (glibc's malloc) and uname.
            "for i in $(seq 600); do uname -r >/dev/null; done; echo done; sleep 30",
        ])
        .stdout(Stdio::piped())
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "done\n");
    // 600 processes made routed calls; the supervisor keeps descriptors for live ones only.
    let fds = std::fs::read_dir(format!("/proc/{}/fd", child.id()))
        .unwrap()
        .count();
    let _ = child.kill();
    let _ = child.wait();
    assert!(fds < 150, "the supervisor holds {fds} descriptors");
}
