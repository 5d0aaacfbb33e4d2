//! [`resolve`]: a request and the host's facts into a [`Plan`], in steps: the command, the
//! roots (image, rootfs, working directory), identity and clock, the mounts (root, system,
//! pinned files, runtime files, the caller's own), the environment, namespaces and security.

use std::path::{Path, PathBuf};

use super::idmaps::{SANDBOX_BASE, SANDBOX_IDS};
use super::mounts::MountIdmap;
use super::system::{runtime_mounts, sysfs_last, system_mounts};
use super::{
    base, image, sockets, ExecRequest, ExtraMount, HostFacts, IdMap, Isolation, MountOp, Namespace,
    NetMode, Plan, PlanError, MASKED, PROVIDED, READONLY, UPTIME_START_SECS, WORKDIR,
};
use crate::determinism::identity::DEFAULT_CPUS;
use crate::determinism::{ClockPlan, DateChoice, EnvProfile, Identity, RandomMode, DEFAULT_EPOCH};
use crate::security::{default_rlimits, Security};

/// Where the sandbox's files come from.
struct Roots {
    isolation: Isolation,
    /// The root filesystem (the host's `/` when neither an image nor a rootfs is given).
    rootfs: PathBuf,
    host_root: bool,
    /// The host directory mounted at [`WORKDIR`], resolved.
    workdir: PathBuf,
}

/// Resolves a request into a plan.
pub fn resolve(req: &ExecRequest, host: &HostFacts) -> Result<Plan, PlanError> {
    let argv = command(req)?;
    let roots = roots(req, host)?;
    let identity = identity(req, host)?;
    let clock = clock(req, host);
    let seeded = req.random == RandomMode::Seeded;
    let (in_uid, in_gid) = req
        .user
        .or(req.image.as_ref().and_then(|i| i.user))
        .unwrap_or((0, 0));
    let namespaces = namespaces(req.net);
    // A root caller's sandbox runs as unprivileged host ids (`idmaps`); what the caller
    // hands it is bound through idmapped mounts made on the host.
    let mapped =
        (host.uid == 0 && namespaces.contains(&Namespace::User)).then_some((in_uid, in_gid));
    if let Some(pinned) = mapped.filter(|p| p.0 >= SANDBOX_IDS || p.1 >= SANDBOX_IDS) {
        return Err(PlanError::UserRange(pinned.0, pinned.1));
    }

    if req.cap_add.iter().any(|c| c == "CAP_SETFCAP") {
        return Err(PlanError::SetFcap);
    }

    let mut mounts = root_mounts(req, &roots, mapped.is_some())?;
    let mut system = system_mounts(seeded, req.tmpfs_size);
    let boot = boot_epoch(req, host);
    system.extend(pinned_files(&identity, boot, req.seed, seeded));
    if clock.is_some() || seeded {
        system.extend(runtime_mounts(clock, seeded.then_some(req.seed)));
    }
    mounts.extend(sysfs_last(system));
    if req.net == NetMode::Allow && req.egress.terminates_tls() {
        // `--inject-env`, `--net-record`, `--net-replay`: the bundle of the host's CAs and the run's, in the sandbox's /run
        // tmpfs. Its text is the executor's to write (the run's CA is made as the run starts:
        // `sandbox::run_with`); the plan shows it empty.
        mounts.push(MountOp::File {
            dest: crate::net::intercept::CA_BUNDLE.into(),
            contents: String::new(),
        });
    }
    mounts.extend(caller_mounts(req, host, &roots, mapped)?);
    if req.image.is_some() {
        image::writable_etc(&mut mounts);
    } else {
        mounts.push(MountOp::ReadonlyRoot);
    }
    let env = environment(req, host, clock)?;
    let isolation = match (req.net, roots.isolation) {
        (NetMode::Allow, Isolation::None) => return Err(PlanError::EgressIsolation),
        // The one way out is the proxy: never fall back to the host's network.
        (NetMode::Allow, _) => Isolation::Full,
        (_, i) => i,
    };
    let egress = match req.net {
        NetMode::Allow => Some(req.egress.clone()),
        _ if req.egress != crate::net::Egress::default() || req.net_log.is_some() => {
            return Err(PlanError::EgressNet(match req.net {
                NetMode::Host => "host",
                _ => "none",
            }))
        }
        _ => None,
    };
    if let Some(dir) = &req.registry {
        if req.net == NetMode::Host || isolation == Isolation::None {
            return Err(PlanError::RegistryNet(dir.clone()));
        }
    }

    // The supervisor writes a root caller's maps; an unprivileged caller's init maps its
    // own id.
    let parent_maps = mapped.map(|_| super::idmaps::root_caller());
    let (out_uid, out_gid) = match mapped {
        Some(_) => (SANDBOX_BASE + in_uid, SANDBOX_BASE + in_gid),
        None => (host.uid, host.gid),
    };
    Ok(Plan {
        isolation,
        namespaces,
        uid_map: IdMap {
            inside: in_uid,
            outside: out_uid,
            count: 1,
        },
        gid_map: IdMap {
            inside: in_gid,
            outside: out_gid,
            count: 1,
        },
        parent_maps,
        mounts,
        hostname: req.hostname.clone(),
        host_workdir: roots.workdir,
        env,
        timeout_ms: req
            .timeout
            .map(|d| d.as_millis().min(u64::MAX as u128) as u64),
        clock,
        seed: req.seed,
        random: req.random,
        identity,
        security: security(req),
        resources: req.resources.clone(),
        share_tty: req.share_tty,
        intercept: req.intercept,
        sorted_dirs: req.sorted_dirs,
        net_log: match (&egress, &req.net_log) {
            (Some(_), Some(p)) if crate::sys::hostpath::callers_own(p) => Some(p.clone()),
            (Some(_), Some(p)) => Some(host_output(
                absolute(host, p),
                req.follow_symlinks,
                "--net-log",
            )?),
            _ => None,
        },
        registry: req.registry.clone(),
        egress,
        ..Plan::base(roots.rootfs, argv)
    })
}

/// The idmapped mount of a tree the caller hands a root caller's sandbox (`pinned`: the
/// workload's ids), mapping the tree's owner to them; none for an unprivileged caller. A
/// device node, FIFO or socket (the null device bound over a file, say) is bound as it is:
/// its filesystem (devtmpfs) has no idmapped mounts, and it holds no files to own. One
/// `stat` of the source (already resolved), none for an unprivileged caller.
fn caller_idmap(src: &Path, pinned: Option<(u32, u32)>) -> Option<MountIdmap> {
    use std::os::unix::fs::MetadataExt;
    let pinned = pinned?;
    let meta = std::fs::metadata(src).ok()?;
    (meta.is_dir() || meta.is_file())
        .then(|| super::idmaps::caller_tree((meta.uid(), meta.gid()), pinned))
}

/// The command: the request's, or with an image and none, the image's Entrypoint and Cmd.
fn command(req: &ExecRequest) -> Result<Vec<String>, PlanError> {
    let argv = match &req.image {
        Some(img) if req.argv.is_empty() => &img.argv,
        _ => &req.argv,
    };
    if argv.is_empty() || argv[0].is_empty() {
        return Err(PlanError::EmptyCommand);
    }
    Ok(argv.clone())
}

/// `p` made absolute against the caller's directory.
fn absolute(host: &HostFacts, p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        host.cwd.join(p)
    }
}

/// The isolation, root filesystem and working directory; an image cannot be combined with
/// a rootfs or `--isolation=none`.
fn roots(req: &ExecRequest, host: &HostFacts) -> Result<Roots, PlanError> {
    let host_root = req.rootfs.is_none() && req.image.is_none();
    let isolation = match &req.image {
        Some(_) if req.rootfs.is_some() => return Err(PlanError::ImageAndRootfs),
        Some(_) => image::isolation(req.isolation)?,
        None => req.isolation,
    };
    let rootfs = match &req.rootfs {
        None if !host_root => req
            .image
            .as_ref()
            .map(|i| i.rootfs.clone())
            .unwrap_or_default(),
        None => PathBuf::from("/"),
        Some(dir) => {
            let dir = absolute(host, dir);
            if !dir.is_dir() {
                return Err(PlanError::Rootfs(dir));
            }
            host_source(dir, req.follow_symlinks, "--rootfs")?
        }
    };
    let workdir = match &req.workdir {
        None => host.cwd.clone(),
        Some(dir) => absolute(host, dir),
    };
    if !workdir.is_dir() {
        return Err(PlanError::Workdir(workdir));
    }
    let workdir = host_source(workdir, req.follow_symlinks, "--workdir")?;
    Ok(Roots {
        isolation,
        rootfs,
        host_root,
        workdir,
    })
}

/// The identity the workload sees; `--cpus` is bounded by the CPUs the caller may use.
fn identity(req: &ExecRequest, host: &HostFacts) -> Result<Identity, PlanError> {
    let cpus = req.cpus.unwrap_or(DEFAULT_CPUS);
    if cpus == 0 || cpus > host.cpus_available {
        return Err(PlanError::Cpus {
            asked: cpus,
            available: host.cpus_available,
        });
    }
    Ok(base::pinned_identity(
        cpus,
        &req.hostname,
        base::DEFAULT_DOMAINNAME,
    ))
}

/// The fake wall clock: `--date`, else the caller's SOURCE_DATE_EPOCH, else
/// [`DEFAULT_EPOCH`]; none with `--date now`.
fn clock(req: &ExecRequest, host: &HostFacts) -> Option<ClockPlan> {
    let epoch = match req.date {
        Some(DateChoice::Now) => return None,
        Some(DateChoice::Pinned(epoch)) => epoch,
        None => host.source_date_epoch.unwrap_or(DEFAULT_EPOCH),
    };
    Some(ClockPlan {
        epoch,
        mode: req.clock,
    })
}

/// When the workload's machine booted (its uptime starts at [`UPTIME_START_SECS`]).
fn boot_epoch(req: &ExecRequest, host: &HostFacts) -> i64 {
    let epoch = match req.date {
        Some(DateChoice::Pinned(epoch)) => epoch,
        Some(DateChoice::Now) => host.now,
        None => host.source_date_epoch.unwrap_or(DEFAULT_EPOCH),
    };
    epoch - UPTIME_START_SECS
}

/// The root: the image's fresh overlay, or a skeleton tmpfs with the rootfs's entries bound
/// read-only.
fn root_mounts(req: &ExecRequest, roots: &Roots, mapped: bool) -> Result<Vec<MountOp>, PlanError> {
    // An image's or a rootfs's files keep their ids; the host's own root is not mapped.
    let unpacked = mapped.then(super::idmaps::unpacked_tree);
    if let Some(img) = &req.image {
        return Ok(image::root_mounts(img, unpacked));
    }
    let mut mounts = vec![MountOp::Tmpfs {
        dest: "/".into(),
        mode: 0o755,
        size: None,
    }];
    let unpacked = unpacked.filter(|_| !roots.host_root);
    mounts.extend(rootfs_binds(&roots.rootfs, roots.host_root, unpacked)?);
    Ok(mounts)
}

/// The read-only kernel paths, then the identity's files (/proc/cpuinfo, uptime and
/// friends) and the masked paths. The read-only paths come first: each is a recursive bind
/// of itself, which would copy every file already bound under it (eight under /proc/sys),
/// doubling those mounts (and their teardown); bound after, each file is one mount, on the
/// read-only view, and the sandbox sees the same tree (issue 42).
fn pinned_files(identity: &Identity, boot_epoch: i64, seed: u64, seeded: bool) -> Vec<MountOp> {
    let mut mounts: Vec<MountOp> = READONLY
        .iter()
        .map(|p| MountOp::ReadonlyPath { dest: p.into() })
        .collect();
    mounts.extend(
        identity
            .files(boot_epoch, seed, seeded)
            .into_iter()
            .map(|(dest, contents)| MountOp::File {
                dest: dest.into(),
                contents,
            }),
    );
    mounts.extend(MASKED.iter().map(|p| MountOp::Mask { dest: p.into() }));
    mounts
}

/// `--keep-changes DIR`: absolute, and nothing there yet (or an empty directory), so a run
/// never mixes its changes into an earlier run's.
fn keep_changes(req: &ExecRequest, host: &HostFacts) -> Result<Option<PathBuf>, PlanError> {
    let Some(dir) = &req.keep_changes else {
        return Ok(None);
    };
    if req.workdir_mode != super::WorkdirMode::Overlay {
        return Err(PlanError::KeepChangesMode);
    }
    let dir = host_output(absolute(host, dir), req.follow_symlinks, "--keep-changes")?;
    let bad = |why: &str| PlanError::KeepChanges(dir.clone(), why.to_string());
    if dir.to_string_lossy().contains([',', ':', '\\']) {
        return Err(bad("',', ':' or '\\' cannot be named in overlay options"));
    }
    match std::fs::read_dir(&dir).map(|mut entries| entries.next().is_none()) {
        Ok(false) => Err(bad("not empty")),
        Ok(true) => Ok(Some(dir)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Some(dir)),
        Err(e) => Err(bad(&e.to_string())),
    }
}

/// What the caller gives the sandbox: the working directory at [`WORKDIR`], the extra
/// mounts in command-line order, and on the host root, the host's unix sockets covered
/// (except under paths given on purpose).
fn caller_mounts(
    req: &ExecRequest,
    host: &HostFacts,
    roots: &Roots,
    pinned: Option<(u32, u32)>,
) -> Result<Vec<MountOp>, PlanError> {
    let workdir = &roots.workdir;
    let keep = keep_changes(req, host)?;
    let mut mounts = vec![match req.workdir_mode {
        super::WorkdirMode::Overlay => MountOp::Overlay {
            lower: workdir.clone(),
            dest: WORKDIR.into(),
            keep,
            idmap: caller_idmap(workdir, pinned),
        },
        mode => MountOp::Bind {
            src: workdir.clone(),
            dest: WORKDIR.into(),
            readonly: mode == super::WorkdirMode::Ro,
            idmap: caller_idmap(workdir, pinned),
        },
    }];
    // Host paths the caller gives the sandbox on purpose (bind sources).
    let mut given = Vec::new();
    for extra in &req.extra_mounts {
        mounts.push(match extra {
            ExtraMount::Bind(b) => {
                let src = absolute(host, &b.src);
                if std::fs::symlink_metadata(&src).is_err() {
                    return Err(PlanError::BindSource(src));
                }
                let src = host_source(src, req.follow_symlinks, "--bind source")?;
                given.push(src.clone());
                MountOp::Bind {
                    idmap: caller_idmap(&src, pinned),
                    src,
                    dest: b.dest.clone(),
                    readonly: b.readonly,
                }
            }
            ExtraMount::Tmpfs(dest) => MountOp::Tmpfs {
                dest: dest.clone(),
                mode: 0o755,
                size: None,
            },
        });
    }
    if roots.host_root {
        let given: Vec<&Path> = std::iter::once(workdir.as_path())
            .chain(given.iter().map(PathBuf::as_path))
            .collect();
        mounts.extend(sockets::masks(&host.unix_sockets, PROVIDED, &given));
    }
    Ok(mounts)
}

/// The pinned environment (or only HOME), the image's over it, the caller's last.
fn environment(
    req: &ExecRequest,
    host: &HostFacts,
    clock: Option<ClockPlan>,
) -> Result<Vec<String>, PlanError> {
    let mut env = if req.pinned_env {
        EnvProfile::pinned(clock.map_or(host.now, |c| c.epoch), req.seed)
    } else {
        let mut env = EnvProfile::empty();
        env.set("HOME", crate::determinism::env::HOME_DIR)?;
        env
    };
    if let Some(img) = &req.image {
        image::apply_env(&mut env, img)?;
    }
    if req.net == NetMode::Allow {
        for (k, v) in proxy_env() {
            env.set(k, &v)?;
        }
    }
    for (k, v) in &req.env {
        env.set(k, v)?;
    }
    if req.net == NetMode::Allow && req.egress.terminates_tls() {
        // Last: no --env or --env-file brings the real value back in.
        for i in &req.egress.inject {
            env.set(&i.name, &i.placeholder)?;
        }
        for (k, v) in crate::net::intercept::ca_env() {
            env.set(k, v)?;
        }
    }
    Ok(env.to_vec())
}

/// What points clients at the egress proxy (`spec/network.md`): the HTTP proxy variables in
/// both cases, `ALL_PROXY` for SOCKS5 clients (names resolved by the proxy), loopback kept
/// direct, and Node's switch to read them.
pub fn proxy_env() -> Vec<(&'static str, String)> {
    let http = format!("http://127.0.0.1:{}", crate::net::PROXY_PORT);
    let socks = format!("socks5h://127.0.0.1:{}", crate::net::PROXY_PORT);
    let direct = "localhost,127.0.0.1,::1".to_string();
    vec![
        ("HTTP_PROXY", http.clone()),
        ("HTTPS_PROXY", http.clone()),
        ("ALL_PROXY", socks.clone()),
        ("NO_PROXY", direct.clone()),
        ("http_proxy", http.clone()),
        ("https_proxy", http),
        ("all_proxy", socks),
        ("no_proxy", direct),
        ("NODE_USE_ENV_PROXY", "1".into()),
    ]
}

/// Every namespace, but the host's network with `--net=host`.
fn namespaces(net: NetMode) -> Vec<Namespace> {
    let mut namespaces = base::ALL_NAMESPACES.to_vec();
    if net == NetMode::Host {
        namespaces.retain(|ns| *ns != Namespace::Net);
    }
    namespaces
}

/// The seccomp profile, capabilities kept (sorted, once each), descriptors passed and
/// rlimits (the request's over the defaults, by name).
fn security(req: &ExecRequest) -> Security {
    let mut rlimits = default_rlimits();
    for r in &req.rlimits {
        rlimits.retain(|d| d.name != r.name);
        rlimits.push(r.clone());
    }
    rlimits.sort_by(|a, b| a.name.cmp(&b.name));
    let mut cap_add = req.cap_add.clone();
    cap_add.sort();
    cap_add.dedup();
    Security {
        seccomp: req.seccomp.clone(),
        cap_add,
        preserve_fds: req.preserve_fds,
        rlimits,
        caps: None,
        refuse_setid: true,
    }
}

/// A host path the caller named as a mount source, resolved (the plan, and so the run
/// record, holds the path actually mounted). Unless `follow`, a path that crosses a symbolic
/// link is refused, naming the link: a run that may write the directory (an earlier
/// sandbox's `/work`) could have planted it to turn a later mount into one of a host path.
fn host_source(path: PathBuf, follow: bool, what: &'static str) -> Result<PathBuf, PlanError> {
    if let Some(link) = crate::sys::first_link(&path).filter(|_| !follow) {
        return Err(PlanError::SymlinkSource { what, path, link });
    }
    Ok(std::fs::canonicalize(&path).unwrap_or(path))
}

/// Refuses a host path that crosses a symbolic link unless `follow` (`--mirror`, resolved
/// elsewhere): as [`host_source`], without resolving it.
pub fn refuse_link(path: &Path, follow: bool, what: &'static str) -> Result<(), PlanError> {
    match crate::sys::first_link(path).filter(|_| !follow) {
        Some(link) => Err(PlanError::SymlinkSource {
            what,
            path: path.to_path_buf(),
            link,
        }),
        None => Ok(()),
    }
}

/// A host path reprorun (often as root) writes or creates for the caller (`--net-log`,
/// `--keep-changes`): as [`host_source`], but it need not exist yet; with `follow`, its
/// parent is resolved.
fn host_output(path: PathBuf, follow: bool, what: &'static str) -> Result<PathBuf, PlanError> {
    if let Some(link) = crate::sys::first_link(&path).filter(|_| !follow) {
        return Err(PlanError::SymlinkSource { what, path, link });
    }
    let resolved = match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => std::fs::canonicalize(parent).map(|p| p.join(name)),
        _ => Ok(path.clone()),
    };
    Ok(resolved.unwrap_or(path))
}

/// Read-only binds of the rootfs's top-level entries into the skeleton root, in name order.
/// On the host root, `/root` is replaced by an empty directory (the host admin's files stay
/// out of the sandbox).
fn rootfs_binds(
    rootfs: &Path,
    host_root: bool,
    idmap: Option<MountIdmap>,
) -> Result<Vec<MountOp>, PlanError> {
    let list_err = |source| PlanError::ListRootfs {
        path: rootfs.to_path_buf(),
        source,
    };
    let mut names: Vec<_> = std::fs::read_dir(rootfs)
        .map_err(list_err)?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name())
        .collect();
    names.sort();
    let mut ops = Vec::new();
    for name in names {
        let Some(text) = name.to_str() else { continue };
        if PROVIDED.contains(&text) {
            continue;
        }
        let src = rootfs.join(&name);
        let dest = Path::new("/").join(&name);
        if host_root && text == "root" {
            ops.push(MountOp::Dir { dest, mode: 0o700 });
            continue;
        }
        let Ok(meta) = std::fs::symlink_metadata(&src) else {
            continue;
        };
        let ft = meta.file_type();
        if ft.is_symlink() {
            let target = std::fs::read_link(&src).map_err(list_err)?;
            ops.push(MountOp::Symlink { target, dest });
        } else if ft.is_dir() || ft.is_file() {
            ops.push(MountOp::Bind {
                src,
                dest,
                readonly: true,
                idmap: idmap.clone(),
            });
        }
    }
    Ok(ops)
}
