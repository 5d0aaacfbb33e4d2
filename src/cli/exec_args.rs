//! exec's options, written once: each row of [`exec_options!`] gives an option's help text
//! and clap attributes, its field, how the fast parser (`fast.rs`) reads its value, and its
//! default and environment variable. From the table come clap's [`ExecArgs`] and the fast
//! parser's defaults ([`fast_defaults`]), flags ([`fast_flag`]) and setter ([`fast_set`]), so
//! that the two read every option alike and adding an option is one row.
//!
//! A row: `field: Type => KIND[(READ)][, value_parser P][, mount VARIANT][, default "LITERAL"]
//! [, default_t EXPR][, env "VAR"];` where KIND is `opt` (an `Option` given once), `val` (a
//! value with a default, given once), `many` (repeatable, a `Vec`), `flag` (a `bool`) or `rest`
//! (the command, not an option). The fast parser reads a value with `P` where the row names
//! one (clap's `value_parser` too), else with READ: [`path`], [`string`], [`choice`] (a
//! `ValueEnum`) or [`digits`], what clap infers for the field's type. `mount` also records a
//! `many` value as an [`ExtraMount`] in command-line order; `default` is parsed by the same
//! reader, as clap parses its `default_value`.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

use reprorun_runtime::determinism::clock::{self, ClockMode, DateChoice};
use reprorun_runtime::determinism::RandomMode;
use reprorun_runtime::parse::{self, BindSpec};
use reprorun_runtime::plan::{ExtraMount, Isolation, NetMode};
use reprorun_runtime::security::{self, Rlimit, SeccompProfile};
use reprorun_runtime::{mirror, net};

macro_rules! exec_options {
    (
        $(#[$sattr:meta])*
        pub(crate) struct $name:ident {
            $(
                $(#[$attr:meta])*
                $field:ident: $ty:ty => $kind:ident $(($read:expr))?
                    $(, value_parser $vp:expr)? $(, mount $variant:ident)?
                    $(, default $def:literal)? $(, default_t $deft:expr)? $(, env $env:literal)?;
            )*
        }
    ) => {
        $(#[$sattr])*
        pub(crate) struct $name {
            $(
                $(#[$attr])*
                $(#[arg(value_parser = $vp)])?
                $(#[arg(env = $env)])?
                $(#[arg(default_value = $def)])?
                $(#[arg(default_value_t = $deft)])?
                pub(crate) $field: $ty,
            )*
        }

        /// The environment variables clap reads exec's options from: where one is set, clap
        /// parses.
        pub(super) const ENV_BACKED: &[&str] = &[$($($env,)?)*];

        /// exec's options as clap leaves them when none is given (its default values parsed
        /// by the same readers).
        pub(super) fn fast_defaults() -> Option<$name> {
            Some($name {
                $($field: exec_options!(@default [$($read)?] [$($vp)?] [$($def)?] [$($deft)?]),)*
            })
        }

        /// The field of a flag (an option without a value) named `name`.
        pub(super) fn fast_flag<'a>(a: &'a mut $name, name: &str) -> Option<&'a mut bool> {
            $(exec_options!(@flag a, name, $field, $kind);)*
            None
        }

        /// Sets option `name` to `v`: `Some(true)` for a repeatable option, `Some(false)` for
        /// one that may be given once, `None` for an unknown option or a value that does not
        /// parse.
        pub(super) fn fast_set(
            a: &mut $name,
            mounts: &mut Vec<ExtraMount>,
            name: &str,
            v: &str,
        ) -> Option<bool> {
            $(exec_options!(
                @set a, mounts, name, v, $field, $kind,
                [$($read)?] [$($vp)?] [$($variant)?]
            );)*
            None
        }
    };
    (@read [$read:expr] []) => { $read };
    (@read [] [$vp:expr]) => { ok($vp) };
    (@default [$($read:expr)?] [$($vp:expr)?] [$def:literal] []) => {
        (exec_options!(@read [$($read)?] [$($vp)?]))($def)?
    };
    (@default [$($read:expr)?] [$($vp:expr)?] [] [$deft:expr]) => { $deft };
    (@default [$($read:expr)?] [$($vp:expr)?] [] []) => { Default::default() };
    (@flag $a:ident, $name:ident, $field:ident, flag) => {
        if same($name, stringify!($field)) {
            return Some(&mut $a.$field);
        }
    };
    (@flag $a:ident, $name:ident, $field:ident, $kind:ident) => {};
    (@set $a:ident, $m:ident, $name:ident, $v:ident, $field:ident, opt, $r:tt $p:tt []) => {
        if same($name, stringify!($field)) {
            $a.$field = Some((exec_options!(@read $r $p))($v)?);
            return Some(false);
        }
    };
    (@set $a:ident, $m:ident, $name:ident, $v:ident, $field:ident, val, $r:tt $p:tt []) => {
        if same($name, stringify!($field)) {
            $a.$field = (exec_options!(@read $r $p))($v)?;
            return Some(false);
        }
    };
    (@set $a:ident, $m:ident, $name:ident, $v:ident, $field:ident, many, $r:tt $p:tt
        [$($variant:ident)?]) => {
        if same($name, stringify!($field)) {
            let value = (exec_options!(@read $r $p))($v)?;
            $($m.push(ExtraMount::$variant(value.clone()));)?
            $a.$field.push(value);
            return Some(true);
        }
    };
    (@set $a:ident, $m:ident, $name:ident, $v:ident, $field:ident, flag, $($rest:tt)*) => {};
    (@set $a:ident, $m:ident, $name:ident, $v:ident, $field:ident, rest, $($rest:tt)*) => {};
}

exec_options! {
/// Options of `reprorun exec`. Defaults give a sandbox with the host's root read-only, the
/// current directory at /work, no network, and the pinned environment.
#[derive(Debug, Args)]
#[command(
    after_help = "Exit status: the command's own; 124 timeout; 125 reprorun error; \
126 command not executable; 127 command not found; 128+N killed by signal N."
)]
pub(crate) struct ExecArgs {
    /// Root filesystem to run in (default: the host's /, read-only).
    #[arg(long, value_name = "DIR")]
    rootfs: Option<PathBuf> => opt(path);
    /// Run on an imported image (NAME[:TAG] or sha256:DIGEST) with a fresh writable overlay
    /// per run; with no COMMAND, the image's Entrypoint and Cmd (`spec/image.md`).
    #[arg(long, value_name = "IMAGE", conflicts_with = "rootfs")]
    image: Option<String> => opt(string);
    /// Image store for --image (env REPRORUN_STORE; default as for `reprorun image`).
    #[arg(long, value_name = "DIR")]
    store: Option<PathBuf> => opt(path), env "REPRORUN_STORE";
    /// A dependency mirror (`reprorun mirror`), mounted read-only at /mirror; pip, uv and go
    /// are pointed at it, npm at its npm part served on 127.0.0.1:4873 (`spec/mirror.md`).
    #[arg(long, value_name = "DIR")]
    mirror: Option<PathBuf> => opt(path);
    /// How pip and uv reach the mirror's PyPI part: `file` (file:///mirror/pypi/simple) or
    /// `http` (http://127.0.0.1:4873/pypi/simple/, with PEP 691 JSON and upload times).
    #[arg(long, value_name = "HOW", requires = "mirror")]
    mirror_serve: mirror::Serve => val(choice), default "file";
    /// Host directory mounted read-write at /work, the working directory (default: current directory).
    #[arg(long, value_name = "HOST_DIR")]
    workdir: Option<PathBuf> => opt(path);
    /// How /work is mounted: `rw` (what the run writes stays in HOST_DIR), `ro`, or
    /// `overlay` (writes go to a throwaway layer that ends with the run: HOST_DIR is not
    /// changed, and caches a tool keeps there cannot leak into the next run).
    #[arg(long, value_enum, value_name = "MODE")]
    workdir_mode: reprorun_runtime::plan::WorkdirMode => val(choice), default "rw";
    /// With --workdir-mode overlay: save the overlay's layers in DIR (a new or empty
    /// directory): DIR/upper holds what the run changed in /work (`spec/sandbox.md`).
    #[arg(long, value_name = "DIR")]
    keep_changes: Option<PathBuf> => opt(path);
    /// Bind a host path into the sandbox (default rw); repeatable, applied in order.
    #[arg(long, value_name = "SRC:DST[:ro|rw]")]
    bind: Vec<BindSpec> => many, value_parser parse::bind, mount Bind;
    /// Mount an empty tmpfs at DST; repeatable, applied in order with --bind.
    #[arg(long, value_name = "DST")]
    tmpfs: Vec<PathBuf> => many, value_parser parse::target, mount Tmpfs;
    /// Bring a program from your PATH (such as uv in ~/.local/bin) in read-only at
    /// /run/tools/NAME, first on PATH; repeatable (`spec/sandbox.md`).
    #[arg(long, value_name = "NAME")]
    import_tool: Vec<String> => many(string);
    /// Network: `none` (a new namespace, loopback only; the default), `host` (the host's
    /// network), or `allow` (a new namespace whose one way out is reprorun's egress proxy,
    /// which lets through the --allow-host list and nothing else; `spec/network.md`).
    #[arg(long, value_enum, value_name = "MODE")]
    net: Option<NetMode> => opt(choice);
    /// Let the sandbox reach this host through the egress proxy: a DNS name, `*.suffix` (one
    /// or more labels), or an IP literal (`[v6]` for IPv6); PORT is 443 unless given (name
    /// every port: `:*` is refused). Repeatable; implies --net allow.
    #[arg(long, value_name = "PATTERN[:PORT]")]
    allow_host: Vec<net::Rule> => many, value_parser |v: &str| net::Rule::parse(v);
    /// Read --allow-host patterns from FILE, one a line (blank lines and `#` comments
    /// skipped). Repeatable; implies --net allow.
    #[arg(long, value_name = "FILE")]
    allow_file: Vec<PathBuf> => many(path);
    /// The egress proxy resolves NAME to ADDRESS instead of asking the host's resolver (as
    /// Docker's --add-host); the address rules still apply. Repeatable; implies --net allow.
    #[arg(long, value_name = "NAME:ADDRESS")]
    add_host: Vec<(String, std::net::IpAddr)> => many, value_parser |v: &str| net::allow::parse_add_host(v);
    /// Keep the value of the caller's variable NAME out of the sandbox: the sandbox sees NAME
    /// set to a placeholder of the same shape (unique per run), and the egress proxy
    /// terminates TLS for HOST (a name or `*.suffix`, port 443 unless given; HTTP/1.1 only)
    /// with a certificate of a CA made for this run, putting the real value back where the
    /// placeholder appears in request headers to HOST, nowhere else. The sandbox trusts the
    /// CA through SSL_CERT_FILE, REQUESTS_CA_BUNDLE, NODE_EXTRA_CA_CERTS, CURL_CA_BUNDLE and
    /// GIT_SSL_CAINFO. Repeatable; allows HOST; implies --net allow (`spec/network.md`).
    #[arg(long, value_name = "NAME:HOST[:PORT]")]
    inject_env: Vec<(String, net::Rule)> => many, value_parser |v: &str| net::intercept::parse_spec(v);
    /// Verify the upstreams of --inject-env against the CA certificates in FILE (PEM)
    /// instead of the host's system bundle (a private or test upstream).
    #[arg(long, value_name = "FILE")]
    upstream_ca: Option<PathBuf> => opt(path);
    /// Append one JSON line to FILE per connection attempt through the egress proxy, as it
    /// ends (the run record's `network` list holds the same); implies --net allow.
    #[arg(long, value_name = "FILE")]
    net_log: Option<PathBuf> => opt(path);
    /// Record the HTTP/1.1 exchanges of the run through the egress proxy into DIR, a
    /// content-addressed cassette (DIR/index.json, DIR/bodies/SHA256): plain HTTP, and
    /// inside TLS for every allowlisted name (the proxy terminates all of them with the
    /// run's CA, as for --inject-env). DIR is made (no link followed) and must not hold a
    /// cassette; implies --net allow (`spec/network.md`).
    #[arg(long, value_name = "DIR")]
    net_record: Option<PathBuf> => opt(path);
    /// Answer the run's requests from the cassette in DIR (made by --net-record): no
    /// connection leaves the machine, https works with the run's CA, and a request the
    /// cassette lacks gets 403 naming it (and is recorded). Matched on method, URL, body
    /// and a few header fields; implies --net allow (`spec/network.md`).
    #[arg(long, value_name = "DIR")]
    net_replay: Option<PathBuf> => opt(path);
    /// Set an environment variable (after the pins and --env-file); repeatable.
    #[arg(long, value_name = "KEY=VALUE")]
    env: Vec<(String, String)> => many, value_parser parse::env_entry;
    /// Read KEY=VALUE lines from a file; repeatable.
    #[arg(long, value_name = "FILE")]
    env_file: Vec<PathBuf> => many(path);
    /// Hostname inside the sandbox.
    #[arg(long)]
    hostname: String => val, value_parser parse::hostname, default "reprorun";
    /// Identity inside the sandbox (default 0:0; a root caller's: at most 65535, never a
    /// host user's id); the caller's ids (a root caller: the work tree's owner's) map to it.
    #[arg(long, value_name = "UID:GID")]
    user: Option<(u32, u32)> => opt, value_parser parse::user;
    /// Kill everything in the sandbox after DURATION (e.g. 90s, 10m) and exit 124.
    #[arg(long, value_name = "DURATION")]
    timeout: Option<Duration> => opt, value_parser parse::duration;
    /// `full` fails when the host refuses any isolation step; `auto` falls back to pins only
    /// with a warning; `none` asks for pins only (a refused pin is skipped with a warning).
    #[arg(long, value_enum)]
    isolation: Isolation => val(choice), default_t Isolation::Full, env "REPRORUN_ISOLATION";
    /// The sandbox's wall-clock date: RFC 3339, YYYY-MM-DD, @EPOCH, or `now` (no faking).
    /// Default: the caller's SOURCE_DATE_EPOCH, else 2024-01-01T00:00:00Z.
    #[arg(long, value_name = "DATE")]
    date: Option<DateChoice> => opt, value_parser clock::parse_date_choice;
    /// How the clock moves: `start-at` (from DATE in real time), `frozen`, or `tick[=STEP]`
    /// (each read advances by STEP, default 1ms).
    #[arg(long, value_name = "MODE")]
    clock: ClockMode => val, value_parser clock::parse_clock_mode, default "start-at";
    /// Seed of every seeded source: hash seeds (PYTHONHASHSEED, PERL_HASH_SEED), getrandom,
    /// /dev/urandom, /dev/random and AT_RANDOM. Different seeds give different streams.
    #[arg(long, value_name = "N")]
    seed: u64 => val(digits), default_t 0;
    /// Where random bytes come from: `seeded` (a deterministic stream from --seed; for tests,
    /// never for keys) or `real` (the kernel's entropy, nothing intercepted).
    #[arg(long, value_enum, value_name = "SOURCE")]
    random: RandomMode => val(choice), default_t RandomMode::Seeded;
    /// CPUs the command runs on and sees (affinity, nproc, /proc/cpuinfo, /sys agree); at
    /// most the CPUs reprorun itself may use. Default: 1.
    #[arg(long, value_name = "N")]
    cpus: Option<u32> => opt(digits);
    /// Security seccomp profile: `default` (refuses what Docker's default profile refuses and
    /// more), `unconfined`, or the path of an OCI `linux.seccomp` JSON profile.
    #[arg(long, value_name = "PROFILE")]
    seccomp: SeccompProfile => val, value_parser security::seccomp::parse_option, default "default";
    /// Keep one capability (e.g. NET_RAW); every other one is dropped. Repeatable.
    #[arg(long, value_name = "CAP")]
    cap_add: Vec<String> => many, value_parser security::capability;
    /// Pass descriptors 3 .. 3+N-1 on to the command (all others are closed).
    #[arg(long, value_name = "N")]
    preserve_fds: u32 => val(digits), default_t 0;
    /// A resource limit, NAME=SOFT[:HARD] (e.g. nofile=4096, core=unlimited); repeatable.
    /// Defaults: core=0, nofile=1024:524288.
    #[arg(long, value_name = "NAME=SOFT[:HARD]")]
    rlimit: Vec<Rlimit> => many, value_parser security::rlimit;
    /// Memory limit for the whole sandbox (e.g. 512m, 2g); an OOM kill exits 137.
    #[arg(long, value_name = "BYTES")]
    memory: Option<u64> => opt, value_parser |v: &str| security::size("--memory", v);
    /// Limit on processes and threads in the sandbox.
    #[arg(long, value_name = "N")]
    pids: Option<u64> => opt, value_parser security::pids;
    /// CPU time limit, in CPUs (e.g. 0.5).
    #[arg(long, value_name = "CPUS")]
    cpus_quota: Option<u64> => opt, value_parser security::cpu_quota;
    /// Size limit of the sandbox's /tmp (e.g. 256m).
    #[arg(long, value_name = "BYTES")]
    tmpfs_size: Option<u64> => opt, value_parser |v: &str| security::size("--tmpfs-size", v);
    /// Hand the caller's terminal to the command as it is (still not its controlling
    /// terminal). By default the command runs without the caller's controlling terminal and,
    /// where standard input, output or error is a terminal, on a pseudo-terminal of the
    /// sandbox's own that reprorun relays (so nothing inside can change or read back the
    /// caller's terminal).
    #[arg(long)]
    share_tty: bool => flag;
    /// Follow symbolic links in the host paths this run names (--workdir, --bind, --rootfs,
    /// --mirror, --keep-changes, --record, --net-log, --env-file); by default a path that
    /// crosses one is refused: a link planted by an earlier run must not choose a host path.
    #[arg(long)]
    follow_symlinks: bool => flag;
    /// Write a JSON record of the run (plan, times, status, rusage) to FILE.
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf> => opt(path);
    /// Print the resolved plan as JSON and run nothing.
    #[arg(long)]
    dry_run: bool => flag;
    /// The command and its arguments, after `--`.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    command: Vec<String> => rest;
}
}

/// Whether command-line option `name` is field `field` (clap's long name: `_` read as `-`;
/// an `_` in `name` matches nothing, as in clap).
fn same(name: &str, field: &str) -> bool {
    name.len() == field.len()
        && name
            .bytes()
            .zip(field.bytes())
            .all(|(n, f)| if f == b'_' { n == b'-' } else { n == f })
}

/// A value read by a clap value parser, as an `Option`.
fn ok<T, E>(parse: impl Fn(&str) -> Result<T, E>) -> impl Fn(&str) -> Option<T> {
    move |v| parse(v).ok()
}

/// A path, as clap reads a `PathBuf`.
fn path(v: &str) -> Option<PathBuf> {
    Some(PathBuf::from(v))
}

/// A string, as clap reads a `String`.
fn string(v: &str) -> Option<String> {
    Some(v.to_string())
}

/// One of a `ValueEnum`'s values, as clap reads it.
fn choice<T: ValueEnum>(v: &str) -> Option<T> {
    T::from_str(v, false).ok()
}

/// A number written in plain decimal digits (clap also takes a `+` sign: left to it).
fn digits<T: std::str::FromStr>(v: &str) -> Option<T> {
    v.bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| v.parse().ok())?
}
