//! A new user's first hour (issue 21): whole usage errors with the subcommand's help, small
//! messages that name the mistake, hints for a command that is on the caller's PATH, the
//! root filesystem named in the run record, and the overlay's changes kept on request.

use std::os::unix::fs::PermissionsExt;

use crate::common::*;

#[test]
fn usage_errors_print_the_whole_message_and_the_subcommands_help() {
    let w = Work::new();
    // A missing required option is named (it used to be cut to the first line).
    let o = w.run(&["mirror", "pull", "--date", "2024-01-01", "attrs"]);
    expect_usage_error(&o, "--out <DIR>", "reprorun mirror pull");
    assert!(stderr(&o).starts_with("reprorun: the following required arguments"));
    // An invalid value lists the valid ones.
    let o = w.run(&["exec", "--net", "bridge", "--", "true"]);
    expect_usage_error(&o, "[possible values: none, host, allow]", "reprorun exec");
    let o = w.run(&["image", "ls", "--no-such-flag"]);
    expect_code(&o, 125);
    assert!(stderr(&o).contains("--no-such-flag"), "{}", stderr(&o));
}

#[test]
fn small_messages_name_the_mistake() {
    let w = Work::new();
    let o = w.run(&["exec", "--mirror", "/nonexistent-mirror", "--", "true"]);
    expect_error(&o, "--mirror: /nonexistent-mirror: no such directory");
    let o = w.run(&["exec", "--date", "2024-02-30", "--", "true"]);
    expect_bad_input(&o, "day 30 is out of range for 2024-02 (01-29)");
    // `--timeout 10 minutes -- true` runs `minutes`: the hint says the value was split.
    let o = w.run(&["exec", "--timeout", "10", "minutes", "--", "true"]);
    expect_code(&o, 127);
    let err = stderr(&o);
    assert!(
        err.contains("reprorun: minutes: command not found"),
        "{err}"
    );
    assert!(
        err.contains("`--timeout` took only `10`") && err.contains("`--timeout '10 minutes'`"),
        "{err}"
    );
    // With `--`, the command is what the user meant: no such hint.
    let o = w.run(&["exec", "--timeout", "10", "--", "no-such-command-xyz"]);
    expect_code(&o, 127);
    assert!(!stderr(&o).contains("took only"), "{}", stderr(&o));
}

#[test]
fn a_command_on_the_callers_path_is_named_and_can_be_imported() {
    let w = Work::new();
    let bin = tempfile::tempdir().unwrap();
    let tool = bin.path().join("reprorun-test-tool");
    std::fs::write(&tool, "#!/bin/sh\necho imported tool \"$@\"\n").unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(bin.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:/usr/bin:/bin", bin.path().display());
    let o = w
        .cmd(&["exec", "--", "reprorun-test-tool", "x"])
        .env("PATH", &path)
        .output()
        .unwrap();
    expect_code(&o, 127);
    let err = stderr(&o);
    assert!(
        err.contains(&format!("`reprorun-test-tool` is at {}", tool.display())),
        "{err}"
    );
    assert!(err.contains("--import-tool reprorun-test-tool"), "{err}");
    // --import-tool brings it in, read-only.
    let o = w
        .cmd(&["exec", "--import-tool", "reprorun-test-tool", "--", "sh", "-c",
            "reprorun-test-tool x && command -v reprorun-test-tool && ! echo 2>/dev/null >> /run/tools/reprorun-test-tool"])
        .env("PATH", &path)
        .output()
        .unwrap();
    assert_eq!(
        expect_code(&o, 0),
        "imported tool x\n/run/tools/reprorun-test-tool\n"
    );
    let o = w
        .cmd(&["exec", "--import-tool", "no-such-tool-xyz", "--", "true"])
        .env("PATH", &path)
        .output()
        .unwrap();
    expect_error(
        &o,
        "--import-tool no-such-tool-xyz: no program of that name on your PATH",
    );
}

#[test]
fn the_run_record_names_the_root_filesystem() {
    let w = Work::new();
    let o = w.run(&["exec", "--record", "run.json", "--", "true"]);
    expect_code(&o, 0);
    let rec = read_json(&w.path().join("run.json"));
    let rootfs = &rec["rootfs"];
    assert_eq!(rootfs["kind"], "host", "{rec}");
    assert_eq!(rootfs["path"], "/");
    // On a Debian-like host (dpkg) the package list is counted and hashed.
    let dpkg = Need::Path("/var/lib/dpkg/status", "a Debian-like host (dpkg)");
    if skip::part_runs("package-list case", &[dpkg]) {
        let p = &rootfs["packages"];
        assert_eq!(p["manager"], "dpkg", "{rec}");
        assert!(p["count"].as_u64().unwrap() > 10, "{rec}");
        assert!(
            p["digest"].as_str().unwrap().starts_with("sha256:"),
            "{rec}"
        );
    }
    // A --rootfs directory is described by its own files: a package more changes the digest.
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    std::fs::create_dir_all(r.join("etc")).unwrap();
    std::fs::create_dir_all(r.join("var/lib/dpkg")).unwrap();
    std::fs::write(r.join("etc/os-release"), "PRETTY_NAME=\"Tiny 1\"\n").unwrap();
    let status = "Package: a\nStatus: install ok installed\nVersion: 1\n";
    std::fs::write(r.join("var/lib/dpkg/status"), status).unwrap();
    let dir_record = |name: &str| {
        let rs = r.to_str().unwrap();
        // The root has no programs: the run fails (127), and the record still says what
        // the root was.
        let o = w.run(&["exec", "--rootfs", rs, "--record", name, "--", "/x"]);
        assert_ne!(o.status.code(), Some(0));
        read_json(&w.path().join(name))["rootfs"].clone()
    };
    let before = dir_record("a.json");
    assert_eq!(before["kind"], "dir");
    assert_eq!(before["distribution"], "Tiny 1");
    assert_eq!(before["packages"]["count"], 1);
    let more =
        format!("{status}\nPackage: locales-all\nStatus: install ok installed\nVersion: 2\n");
    std::fs::write(r.join("var/lib/dpkg/status"), more).unwrap();
    let after = dir_record("b.json");
    assert_eq!(after["packages"]["count"], 2);
    assert_ne!(after["packages"]["digest"], before["packages"]["digest"]);
}

#[test]
fn keep_changes_saves_the_overlays_upper_layer() {
    let w = Work::new();
    std::fs::write(w.path().join("kept.txt"), "original\n").unwrap();
    std::fs::write(w.path().join("gone.txt"), "x\n").unwrap();
    let keep = tempfile::tempdir().unwrap();
    let dir = keep.path().join("changes");
    let dir_s = dir.to_str().unwrap();
    let script =
        "echo changed > kept.txt && mkdir -p .hypothesis && echo db > .hypothesis/x && rm gone.txt";
    let o = w.run(&[
        "exec",
        "--workdir-mode",
        "overlay",
        "--keep-changes",
        dir_s,
        "--",
        "sh",
        "-c",
        script,
    ]);
    expect_code(&o, 0);
    // The host tree is untouched; the changes are in DIR/upper.
    assert_eq!(
        std::fs::read_to_string(w.path().join("kept.txt")).unwrap(),
        "original\n"
    );
    assert!(w.path().join("gone.txt").exists());
    assert!(!w.path().join(".hypothesis").exists());
    let upper = dir.join("upper");
    assert_eq!(
        std::fs::read_to_string(upper.join("kept.txt")).unwrap(),
        "changed\n"
    );
    assert_eq!(
        std::fs::read_to_string(upper.join(".hypothesis/x")).unwrap(),
        "db\n"
    );
    // A deleted file is an overlayfs whiteout (a 0:0 character device).
    use std::os::unix::fs::FileTypeExt;
    let gone = std::fs::symlink_metadata(upper.join("gone.txt")).unwrap();
    assert!(gone.file_type().is_char_device());
    // A second run into the same (now non-empty) DIR, or without overlay, is refused.
    let o = w.run(&[
        "exec",
        "--workdir-mode",
        "overlay",
        "--keep-changes",
        dir_s,
        "--",
        "true",
    ]);
    expect_error(&o, "not empty");
    let o = w.run(&[
        "exec",
        "--keep-changes",
        "/tmp/x-reprorun-keep",
        "--",
        "true",
    ]);
    expect_error(&o, "--keep-changes needs --workdir-mode overlay");
}

#[test]
fn the_readme_installs_reprorun_before_its_first_use() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let config = std::fs::read_to_string(root.join(".cargo/config.toml")).unwrap();
    let target = config
        .lines()
        .find_map(|l| l.trim().strip_prefix("target = "))
        .map(|t| t.trim_matches('"'))
        .expect("build target in .cargo/config.toml");
    // The commands shown before reprorun's first use: the build target's standard library,
    // then the install; the copied binary is where cargo puts it.
    let commands: Vec<&str> = readme.lines().filter(|l| l.starts_with("$ ")).collect();
    let uses_reprorun = |l: &&str| l.split('#').next().unwrap_or("").contains("reprorun");
    let first_use = commands
        .iter()
        .position(uses_reprorun)
        .expect("a command that runs reprorun");
    let install = commands
        .iter()
        .position(|l| l.starts_with("$ cargo install --locked --path ."))
        .expect("the install command");
    assert!(install < first_use, "{:?}", &commands[..=first_use]);
    let add_target = format!("$ rustup target add {target}");
    assert!(
        commands[..install]
            .iter()
            .any(|l| l.starts_with(&add_target)),
        "README lacks {add_target} before the install"
    );
    let binary = format!("target/{target}/release/reprorun");
    assert!(readme.contains(&binary), "README lacks {binary}");
    assert!(!readme.contains("target/release/reprorun"));
}

/// README's test command is the one CI runs (after its set-up), and CI runs it with skips
/// made failures.
#[test]
fn the_readme_test_command_is_what_ci_runs() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let run = std::fs::read_to_string(root.join(".ci/run")).unwrap();
    let lines: Vec<&str> = run
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .collect();
    let command = *lines.last().expect("a command in .ci/run");
    assert!(command.starts_with(".ci/setup && "), "{command}");
    assert!(
        readme.lines().any(|l| l == command),
        "README.md lacks .ci/run's command line {command:?}"
    );
    let strict = lines
        .iter()
        .position(|l| *l == "export REPRORUN_STRICT_SKIPS=1");
    assert!(
        strict.is_some_and(|i| i + 1 < lines.len()),
        ".ci/run does not export REPRORUN_STRICT_SKIPS=1 before its command"
    );
}

#[test]
fn offline_runs_make_clients_fail_fast_and_say_the_network_is_off() {
    let w = Work::new();
    let env = "echo $PIP_RETRIES $UV_HTTP_RETRIES $npm_config_fetch_retries $GOPROXY";
    let o = w.run(&["exec", "--", "sh", "-c", env]);
    assert_eq!(expect_code(&o, 0), "0 0 0 off\n");
    // --env still wins; with the host's network nothing is set.
    let o = w.run(&["exec", "--env", "PIP_RETRIES=3", "--", "sh", "-c", env]);
    assert_eq!(expect_code(&o, 0), "3 0 0 off\n");
    let o = w.run(&["exec", "--net", "host", "--", "sh", "-c", env]);
    assert_eq!(expect_code(&o, 0), "\n");
    // A failed run of a package client is told the network is off.
    let o = w.run(&[
        "exec",
        "--",
        "sh",
        "-c",
        "python3 -m pip download -q --no-deps -d /tmp/d requests",
    ]);
    assert_ne!(o.status.code(), Some(0));
    let err = stderr(&o);
    assert!(
        err.contains("reprorun: hint: the network is off (--net none) and no --mirror is given, so `pip` can download nothing"),
        "{err}"
    );
    assert!(err.contains("reprorun mirror pull"), "{err}");
    assert!(
        err.contains("(the output says: \"ERROR: "),
        "the hint quotes its evidence: {err}"
    );
    // A failed run of no client gets no such hint.
    let o = w.run(&["exec", "--", "sh", "-c", "exit 3"]);
    expect_code(&o, 3);
    assert!(!stderr(&o).contains("network is off"), "{}", stderr(&o));
}

/// Issue 45: the offline hint needs evidence in the output. A `go test` of a module without
/// dependencies whose test fails, and a `pip` that is not installed, needed no network.
#[test]
fn offline_hint_is_not_given_when_nothing_needed_the_network() {
    let w = Work::new();
    std::fs::write(
        w.path().join("go.mod"),
        "module example.com/nodeps\n\ngo 1.16\n",
    )
    .unwrap();
    std::fs::write(
        w.path().join("a_test.go"),
        "package nodeps\n\nimport \"testing\"\n\nfunc TestFails(t *testing.T) { t.Fatal(\"no\") }\n",
    )
    .unwrap();
    let o = w.run(&["exec", "--", "sh", "-c", "go test ./..."]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stdout(&o).contains("--- FAIL: TestFails"), "{}", stdout(&o));
    assert!(!stderr(&o).contains("network is off"), "{}", stderr(&o));
    // pip absent from the sandbox's PATH: the shell's "not found", no hint.
    let o = w.run(&[
        "exec",
        "--",
        "sh",
        "-c",
        "PATH=/nonexistent; pip install requests",
    ]);
    expect_code(&o, 127);
    let err = stderr(&o);
    assert!(err.contains("pip: not found"), "{err}");
    assert!(!err.contains("network is off"), "{err}");
    // The same module needing a dependency: go's own words are the evidence.
    std::fs::write(
        w.path().join("go.mod"),
        "module example.com/nodeps\n\ngo 1.16\n\nrequire github.com/google/btree v1.1.2\n",
    )
    .unwrap();
    std::fs::write(
        w.path().join("a_test.go"),
        "package nodeps\n\nimport (\n\t\"testing\"\n\n\t\"github.com/google/btree\"\n)\n\n\
         func TestUses(t *testing.T) { _ = btree.New(2) }\n",
    )
    .unwrap();
    let o = w.run(&["exec", "--", "sh", "-c", "go test ./..."]);
    assert_ne!(o.status.code(), Some(0));
    let err = stderr(&o);
    assert!(
        err.contains("so `go` can download nothing (the output says: "),
        "{err}"
    );
}

/// An unpacked tarball: a tree that belongs to uid 1001, mode 0755, in a directory every
/// user can traverse.
fn tree_of_uid_1001(w: &Work) -> std::path::PathBuf {
    std::fs::set_permissions(w.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let tree = w.path().join("project");
    std::fs::create_dir(&tree).unwrap();
    std::os::unix::fs::chown(&tree, Some(1001), Some(1001)).unwrap();
    std::fs::set_permissions(&tree, std::fs::Permissions::from_mode(0o755)).unwrap();
    tree
}

#[test]
fn a_root_caller_writes_a_work_tree_of_another_uid() {
    use std::os::unix::fs::MetadataExt;
    require!(Need::Root);
    let w = Work::new();
    let tree = tree_of_uid_1001(&w);
    let o = w
        .cmd(&[
            "exec",
            "--",
            "sh",
            "-c",
            "python3 -m venv /work/.venv && id -u && stat -c '%u:%g' /work /work/.venv \
             && stat -c %u /usr",
        ])
        .current_dir(&tree)
        .output()
        .unwrap();
    // The workload keeps its pinned uid 0; the tree is its own; the host's root shows as
    // nobody, as for an unprivileged caller.
    assert_eq!(expect_code(&o, 0), "0\n0:0\n0:0\n65534\n");
    assert!(!stderr(&o).contains("belongs to uid"), "{}", stderr(&o));
    // Outside, what it wrote belongs to the tree's owner.
    let meta = std::fs::metadata(tree.join(".venv")).unwrap();
    assert_eq!((meta.uid(), meta.gid()), (1001, 1001));
    // --user keeps its id inside; its files are the owner's too.
    let o = w
        .cmd(&[
            "exec",
            "--user",
            "1000:1000",
            "--",
            "sh",
            "-c",
            "id -u; touch /work/mine",
        ])
        .current_dir(&tree)
        .output()
        .unwrap();
    assert_eq!(expect_code(&o, 0), "1000\n");
    assert_eq!(std::fs::metadata(tree.join("mine")).unwrap().uid(), 1001);
    // A tree of the root caller itself: the workload still uid 0, but its ids are the
    // unprivileged host range (never the host's root, spec/security.md); the tree's other
    // ids show as themselves through its idmapped mount.
    let o = w.run(&[
        "exec",
        "--",
        "sh",
        "-c",
        "id -u; cat /proc/self/uid_map | tr -s ' '; stat -c %u /work/project",
    ]);
    assert_eq!(expect_code(&o, 0), "0\n 0 2147352576 65536\n1001\n");
}

#[test]
fn an_unprivileged_caller_is_told_whose_tree_it_cannot_write() {
    let Some(user) = rootless_user() else {
        return;
    };
    let (_bin_dir, bin) = world_readable_binary();
    let w = Work::new();
    let tree = tree_of_uid_1001(&w);
    let o = as_user(
        user,
        &bin,
        &["exec", "--", "python3", "-m", "venv", "/work/.venv"],
        &tree,
    );
    assert_ne!(o.status.code(), Some(0));
    let err = stderr(&o);
    assert!(
        err.contains(&format!(
            "reprorun: hint: the work tree {} belongs to uid 1001, which the sandbox does not map",
            tree.display()
        )),
        "{err}"
    );
    // A tree the sandbox maps gets no such hint.
    let own = w.path().join("own");
    std::fs::create_dir(&own).unwrap();
    std::os::unix::fs::chown(&own, Some(user.0), Some(user.1)).unwrap();
    let o = as_user(
        user,
        &bin,
        &["exec", "--", "sh", "-c", "touch /work/x && exit 3"],
        &own,
    );
    expect_code(&o, 3);
    assert!(!stderr(&o).contains("belongs to uid"), "{}", stderr(&o));
}

#[test]
fn exec_help_is_grouped_and_shows_only_exec_options() {
    let w = Work::new();
    let help = expect_code(&w.run(&["exec", "--help"]), 0);
    // The OCI lifecycle's globals are not exec's (still accepted, as runc accepts them).
    for global in [
        "--root <DIR>",
        "--log <FILE>",
        "--systemd-cgroup",
        "--log-format",
    ] {
        assert!(!help.contains(global), "{global} in exec --help:\n{help}");
    }
    let headings = [
        "Isolation and hardening:",
        "Filesystem:",
        "Determinism:",
        "Environment and identity:",
        "Limits:",
        "Network:",
        "Output:",
    ];
    let at: Vec<usize> = headings
        .iter()
        .map(|h| {
            help.find(&format!("\n{h}\n"))
                .unwrap_or_else(|| panic!("{h} missing:\n{help}"))
        })
        .collect();
    assert!(
        at.windows(2).all(|p| p[0] < p[1]),
        "headings out of order:\n{help}"
    );
    // Each option under its heading (up to the next heading).
    let section = |h: &str| {
        let i = headings.iter().position(|x| *x == h).unwrap();
        let end = at.get(i + 1).copied().unwrap_or(help.len());
        help[at[i]..end].to_string()
    };
    assert!(section("Filesystem:").contains("--bind <SRC:DST[:ro|rw]>"));
    assert!(section("Network:").contains("--allow-host"));
    assert!(section("Determinism:").contains("--seed <N>"));
    assert!(section("Limits:").contains("--timeout <DURATION>"));
    assert!(section("Output:").contains("--record <FILE>"));
    // Hidden is not refused.
    let o = w.run(&["exec", "--root", "/tmp/x", "--", "true"]);
    expect_code(&o, 0);
}

#[test]
fn connects_never_fail_while_signals_arrive() {
    let probes = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let src =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("runtime-tests/probes/connector.c");
    build_probe(&src, &probes.path().join("connector"), &[], scratch.path());
    let w = Work::new();
    let bind = format!("{}:/probes:ro", probes.path().display());
    let o = w.run(&["exec", "--bind", &bind, "--", "/probes/connector"]);
    assert_eq!(expect_code(&o, 0), "bad 0\n");
}

/// Directories of the lower layer and new ones can be renamed and removed in every overlay
/// reprorun makes (here `--workdir-mode overlay`; `image.rs` the image's root): mounted in
/// the sandbox's user namespace without `userxattr`, a rename gave EXDEV and `rm -rf` of a
/// lower directory EIO (pytest's cache rename failed; pip could not reinstall over a
/// package).
#[test]
fn overlay_directories_can_be_renamed_and_removed() {
    let w = Work::new();
    std::fs::create_dir_all(w.path().join("lower/sub")).unwrap();
    std::fs::write(w.path().join("lower/sub/f"), "x\n").unwrap();
    let script = "mv lower moved && test -f moved/sub/f && rm -rf moved && test ! -e moved \
                  && mkdir -p new/a && mv new renamed && rm -rf renamed && echo ok";
    let o = w.run(&[
        "exec",
        "--workdir-mode",
        "overlay",
        "--",
        "sh",
        "-c",
        script,
    ]);
    assert_eq!(expect_code(&o, 0), "ok\n");
    assert!(
        w.path().join("lower/sub/f").exists(),
        "the tree is untouched"
    );
}
