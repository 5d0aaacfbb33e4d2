//! A parser of `reprorun exec`'s own options, without clap. Building even exec's part of
//! clap's tree and matching against it took about 0.2 ms of every start (issue 20), longer
//! than the whole of bubblewrap's argument handling. This one reads the options of
//! [`ExecArgs`] with the same value parsers and defaults; anything it does not take in full —
//! help, version, short options, an unknown or repeated option, a value that does not parse,
//! a conflict, a value clap would take from the environment, the OCI globals — goes to the
//! full clap tree, so what users see in those cases (and every message) is exactly clap's.
//! The unit tests hold the two to the same result on every option and on random command
//! lines.

use std::path::PathBuf;

use clap::ValueEnum;

use super::ExecArgs;
use reprorun_runtime::determinism::clock;
use reprorun_runtime::parse;
use reprorun_runtime::plan::ExtraMount;
use reprorun_runtime::security;

/// The environment variables clap reads exec's options from: where one is set, clap parses.
const ENV_BACKED: [&str; 2] = ["REPRORUN_STORE", "REPRORUN_ISOLATION"];

/// `Some` when `args` is a one-shot `exec` this parser takes in full: the options and the
/// `--bind`/`--tmpfs` mounts in command-line order.
pub(super) fn exec(args: &[String]) -> Option<(ExecArgs, Vec<ExtraMount>)> {
    parse_exec(args, |name| std::env::var_os(name).is_some())
}

fn parse_exec(
    args: &[String],
    env_set: impl Fn(&str) -> bool,
) -> Option<(ExecArgs, Vec<ExtraMount>)> {
    // Only the plain form: `reprorun exec ...` with nothing before the subcommand's name (the
    // OCI `exec ID` form has been renamed `oci-exec` by then).
    if args.get(1).map(String::as_str) != Some("exec") || ENV_BACKED.iter().any(|v| env_set(v)) {
        return None;
    }
    let mut a = defaults()?;
    let mut mounts = Vec::new();
    let mut given: Vec<&str> = Vec::new();
    let mut rest = args[2..].iter();
    while let Some(arg) = rest.next() {
        if arg == "--" {
            a.command = rest.cloned().collect();
            break;
        }
        let Some(long) = arg.strip_prefix("--") else {
            if arg.starts_with('-') {
                return None; // a short option (`-h`): clap's
            }
            // The command's first word: it and everything after it are the command.
            a.command = std::iter::once(arg).chain(rest).cloned().collect();
            break;
        };
        let (name, inline) = match long.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (long, None),
        };
        if given.contains(&name) {
            return None; // a once-only option given twice: clap refuses it
        }
        if let Some(flag) = flag(&mut a, name) {
            if inline.is_some() {
                return None;
            }
            *flag = true;
            given.push(name);
            continue;
        }
        let value = match inline {
            Some(v) => v,
            None => rest.next()?,
        };
        if value.is_empty() || value.starts_with('-') {
            return None; // clap's reading of these differs by option: leave them to it
        }
        if !set(&mut a, &mut mounts, name, value)? {
            given.push(name);
        }
    }
    // clap's conflicts_with and requires.
    if (a.image.is_some() && a.rootfs.is_some())
        || (given.contains(&"mirror-serve") && a.mirror.is_none())
    {
        return None;
    }
    Some((a, mounts))
}

/// exec's options as clap leaves them when none is given (its `default_value`s parsed by the
/// same value parsers).
fn defaults() -> Option<ExecArgs> {
    Some(ExecArgs {
        rootfs: None,
        image: None,
        store: None,
        mirror: None,
        mirror_serve: ValueEnum::from_str("file", false).ok()?,
        workdir: None,
        workdir_mode: ValueEnum::from_str("rw", false).ok()?,
        keep_changes: None,
        bind: Vec::new(),
        tmpfs: Vec::new(),
        import_tool: Vec::new(),
        net: None,
        allow_host: Vec::new(),
        allow_file: Vec::new(),
        add_host: Vec::new(),
        net_log: None,
        env: Vec::new(),
        env_file: Vec::new(),
        hostname: parse::hostname("reprorun").ok()?,
        user: None,
        timeout: None,
        isolation: reprorun_runtime::plan::Isolation::Full,
        date: None,
        clock: clock::parse_clock_mode("start-at").ok()?,
        seed: 0,
        random: reprorun_runtime::determinism::RandomMode::Seeded,
        cpus: None,
        seccomp: security::seccomp::parse_option("default").ok()?,
        cap_add: Vec::new(),
        preserve_fds: 0,
        rlimit: Vec::new(),
        memory: None,
        pids: None,
        cpus_quota: None,
        tmpfs_size: None,
        share_tty: false,
        follow_symlinks: false,
        record: None,
        dry_run: false,
        command: Vec::new(),
    })
}

/// The field of a flag (an option without a value).
fn flag<'a>(a: &'a mut ExecArgs, name: &str) -> Option<&'a mut bool> {
    match name {
        "share-tty" => Some(&mut a.share_tty),
        "follow-symlinks" => Some(&mut a.follow_symlinks),
        "dry-run" => Some(&mut a.dry_run),
        _ => None,
    }
}

/// Sets option `name` to `v`: `Some(true)` for a repeatable option, `Some(false)` for one
/// that may be given once, `None` for an unknown option or a value that does not parse.
fn set(a: &mut ExecArgs, mounts: &mut Vec<ExtraMount>, name: &str, v: &str) -> Option<bool> {
    let path = || Some(PathBuf::from(v));
    // An option given once: its field set, `false` returned.
    macro_rules! once {
        ($set:expr) => {{
            $set;
            false
        }};
    }
    Some(match name {
        "rootfs" => once!(a.rootfs = path()),
        "image" => once!(a.image = Some(v.to_string())),
        "store" => once!(a.store = path()),
        "mirror" => once!(a.mirror = path()),
        "mirror-serve" => once!(a.mirror_serve = ValueEnum::from_str(v, false).ok()?),
        "workdir" => once!(a.workdir = path()),
        "workdir-mode" => once!(a.workdir_mode = ValueEnum::from_str(v, false).ok()?),
        "keep-changes" => once!(a.keep_changes = path()),
        "bind" => {
            let b = parse::bind(v).ok()?;
            mounts.push(ExtraMount::Bind(b.clone()));
            repeat(&mut a.bind, b)
        }
        "tmpfs" => {
            let t = parse::target(v).ok()?;
            mounts.push(ExtraMount::Tmpfs(t.clone()));
            repeat(&mut a.tmpfs, t)
        }
        "import-tool" => repeat(&mut a.import_tool, v.to_string()),
        "net" => once!(a.net = Some(ValueEnum::from_str(v, false).ok()?)),
        "allow-host" => repeat(
            &mut a.allow_host,
            reprorun_runtime::net::Rule::parse(v).ok()?,
        ),
        "allow-file" => repeat(&mut a.allow_file, PathBuf::from(v)),
        "add-host" => repeat(
            &mut a.add_host,
            reprorun_runtime::net::allow::parse_add_host(v).ok()?,
        ),
        "net-log" => once!(a.net_log = path()),
        "env" => repeat(&mut a.env, parse::env_entry(v).ok()?),
        "env-file" => repeat(&mut a.env_file, PathBuf::from(v)),
        "hostname" => once!(a.hostname = parse::hostname(v).ok()?),
        "user" => once!(a.user = Some(parse::user(v).ok()?)),
        "timeout" => once!(a.timeout = Some(parse::duration(v).ok()?)),
        "isolation" => once!(a.isolation = ValueEnum::from_str(v, false).ok()?),
        "date" => once!(a.date = Some(clock::parse_date_choice(v).ok()?)),
        "clock" => once!(a.clock = clock::parse_clock_mode(v).ok()?),
        "seed" => once!(a.seed = digits(v)?),
        "random" => once!(a.random = ValueEnum::from_str(v, false).ok()?),
        "cpus" => once!(a.cpus = Some(digits(v)?)),
        "seccomp" => once!(a.seccomp = security::seccomp::parse_option(v).ok()?),
        "cap-add" => repeat(&mut a.cap_add, security::capability(v).ok()?),
        "preserve-fds" => once!(a.preserve_fds = digits(v)?),
        "rlimit" => repeat(&mut a.rlimit, security::rlimit(v).ok()?),
        "memory" => once!(a.memory = Some(security::size("--memory", v).ok()?)),
        "pids" => once!(a.pids = Some(security::pids(v).ok()?)),
        "cpus-quota" => once!(a.cpus_quota = Some(security::cpu_quota(v).ok()?)),
        "tmpfs-size" => once!(a.tmpfs_size = Some(security::size("--tmpfs-size", v).ok()?)),
        "record" => once!(a.record = path()),
        _ => return None,
    })
}

/// Appends a value of a repeatable option (`true`: it may be given again).
fn repeat<T>(to: &mut Vec<T>, value: T) -> bool {
    to.push(value);
    true
}

/// A number written in plain decimal digits (clap also takes a `+` sign: left to it).
fn digits<T: std::str::FromStr>(v: &str) -> Option<T> {
    v.bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| v.parse().ok())?
}

#[cfg(test)]
mod tests;
