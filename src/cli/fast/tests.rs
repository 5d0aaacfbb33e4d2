use super::*;
use clap::{CommandFactory, FromArgMatches};

fn argv(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

/// What clap's full tree makes of `args`: the options and the mounts in order, or its error.
fn by_clap(args: &[String]) -> Result<(String, String), String> {
    let full = crate::help::exec_grouped(super::super::Cli::command())
        .try_get_matches_from(args)
        .map_err(|e| e.to_string())?;
    let sub = full.subcommand_matches("exec").ok_or("not exec")?;
    let parsed = ExecArgs::from_arg_matches(sub).map_err(|e| e.to_string())?;
    let mounts = super::super::extra_mounts(&parsed, sub);
    Ok((format!("{parsed:?}"), format!("{mounts:?}")))
}

fn fast(args: &[String]) -> Option<(String, String)> {
    parse_exec(args, |_| false).map(|(a, m)| (format!("{a:?}"), format!("{m:?}")))
}

/// Every option of exec, in both spellings, reads the same as clap reads it.
#[test]
fn agrees_with_clap_on_every_option() {
    for line in [
        "reprorun exec -- /bin/true",
        "reprorun exec",
        "reprorun exec --",
        "reprorun exec ls -l --net host",
        "reprorun exec --net host --date now --random real -- sh -c x",
        "reprorun exec --net=allow --allow-host pypi.org --allow-host=*.example.com:8443 -- t",
        "reprorun exec --allow-file /a --add-host api.x:10.0.0.1 --net-log /tmp/n -- t",
        "reprorun exec --cpus 1 --seed 7 --bind /a:/b:ro --tmpfs /t --bind /c:/d -- ls -l",
        "reprorun exec --tmpfs=/x --bind=/e:/f:rw --tmpfs /y -- t -- u",
        "reprorun exec --workdir-mode overlay --keep-changes /k --timeout 10m -- true",
        "reprorun exec --workdir /w --workdir-mode=ro --record r.json --dry-run -- t",
        "reprorun exec --isolation none --share-tty --follow-symlinks -- env",
        "reprorun exec --isolation=auto --clock tick=5ms --date 2020-01-02 -- t",
        "reprorun exec --clock frozen --date @86400 --seed=18446744073709551615 -- t",
        "reprorun exec --rootfs /r --hostname box --user 1000:1000 -- id",
        "reprorun exec --image alpine:3 --store /s -- t",
        "reprorun exec --mirror /m --mirror-serve http -- pip",
        "reprorun exec --import-tool uv --import-tool git --env A=1 --env B= --env-file /f -- t",
        "reprorun exec --seccomp unconfined --cap-add NET_RAW --cap-add=SYS_PTRACE -- t",
        "reprorun exec --preserve-fds 2 --rlimit nofile=64 --rlimit core=unlimited -- t",
        "reprorun exec --memory 512m --pids 64 --cpus-quota 0.5 --tmpfs-size 8m -- t",
        "reprorun exec --random seeded --cpus=2 -- python3 -c 1",
    ] {
        let args = argv(line);
        let ours = fast(&args).unwrap_or_else(|| panic!("the fast parser fell back on {line}"));
        assert_eq!(Ok(ours), by_clap(&args), "{line}");
    }
}

/// Whatever the fast parser does not read in full goes to clap: help, version, errors (with
/// clap's messages), the OCI globals, values from the environment.
#[test]
fn leaves_the_rest_to_clap() {
    for line in [
        "reprorun exec --help",
        "reprorun exec -h",
        "reprorun exec --version",
        "reprorun exec -V",
        "reprorun exec --net bridge -- true",
        "reprorun exec --nett host -- true",
        "reprorun exec --cpus x -- true",
        "reprorun exec --cpus +2 -- true",
        "reprorun exec --seed -1 -- true",
        "reprorun exec --rootfs /a --rootfs /b -- true",
        "reprorun exec --dry-run --dry-run -- true",
        "reprorun exec --dry-run=true -- true",
        "reprorun exec --image x --rootfs /r -- true",
        "reprorun exec --mirror-serve http -- true",
        "reprorun exec --bind relative -- true",
        "reprorun exec --rootfs= -- true",
        "reprorun exec --rootfs",
        "reprorun exec --root /run/x -- true",
        "reprorun exec --dry_run -- true",
        "reprorun exec --mirror /m --mirror_serve http -- true",
        "reprorun --root /x exec -- true",
        "reprorun image ls",
        "reprorun",
    ] {
        assert!(fast(&argv(line)).is_none(), "{line}");
    }
    let args = argv("reprorun exec -- true");
    for var in ENV_BACKED {
        assert!(parse_exec(&args, |v| v == *var).is_none(), "{var}");
    }
}

/// Random command lines from valid and invalid pieces: wherever the fast parser accepts one,
/// clap accepts it too and reads the same options and mounts.
#[test]
fn agrees_with_clap_on_random_command_lines() {
    const PIECES: &[&str] = &[
        "--net",
        "host",
        "none",
        "allow",
        "--net=host",
        "--bind",
        "/a:/b",
        "/c:/d:ro",
        "--tmpfs",
        "/t",
        "--tmpfs=/u",
        "--cpus",
        "2",
        "0",
        "--seed",
        "5",
        "--date",
        "now",
        "2024-05-01",
        "--clock",
        "frozen",
        "--random",
        "real",
        "--dry-run",
        "--share-tty",
        "--env",
        "A=B",
        "--cap-add",
        "NET_RAW",
        "--rlimit",
        "nofile=9",
        "--timeout",
        "3s",
        "--image",
        "img",
        "--rootfs",
        "/r",
        "--mirror",
        "/m",
        "--mirror-serve",
        "http",
        "--workdir-mode",
        "ro",
        "--hostname",
        "h",
        "--user",
        "1:2",
        "--memory",
        "1g",
        "--isolation",
        "auto",
        "--",
        "sh",
        "-c",
        "-x",
        "--bogus",
        "-h",
        "=",
        "",
    ];
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n as u64) as usize
    };
    let mut accepted = 0;
    for _ in 0..3000 {
        let mut args = vec!["reprorun".to_string(), "exec".to_string()];
        for _ in 0..next(8) {
            args.push(PIECES[next(PIECES.len())].to_string());
        }
        if let Some(ours) = fast(&args) {
            accepted += 1;
            assert_eq!(Ok(ours), by_clap(&args), "{args:?}");
        }
    }
    assert!(
        accepted > 300,
        "only {accepted} of 3000 lines exercised the fast parser"
    );
}
