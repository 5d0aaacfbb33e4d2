//! The device rules of a container (OCI `linux.resources.devices`, runc's default list and
//! `linux.devices`, as [`crate::security::DeviceRule`]s) on cgroup v2, where there is no
//! `devices` controller: a `BPF_PROG_TYPE_CGROUP_DEVICE` program attached to the
//! container's cgroup decides each access.
//!
//! The program is data first ([`program`]: a list of [`Insn`]s, interpreted by the unit
//! tests to check the decision for given devices), then loaded and attached by [`attach`].
//! Semantics, as runc's device filter and the v1 controller after `devices.deny a`: the last
//! rule that matches decides; a rule matches when its type (or `a`), major and minor (or
//! `*`) match and its access letters include every one asked for; no match denies.
//!
//! Hand-written rather than through a BPF crate (aya, libbpf-rs): the program is a dozen
//! instruction kinds, and those crates bring an ELF loader, maps and (libbpf) a C library
//! for one `bpf(2)` load and one attach.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

use nix::errno::Errno;

use crate::security::DeviceRule;

/// One eBPF instruction (`struct bpf_insn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Insn {
    pub(crate) code: u8,
    pub(crate) dst: u8,
    pub(crate) src: u8,
    pub(crate) off: i16,
    pub(crate) imm: i32,
}

// Opcodes used (linux/bpf.h, linux/bpf_common.h).
pub(crate) const LDX_W: u8 = 0x61; // BPF_LDX | BPF_MEM | BPF_W
pub(crate) const AND_K: u8 = 0x57; // BPF_ALU64 | BPF_AND | BPF_K
pub(crate) const RSH_K: u8 = 0x77; // BPF_ALU64 | BPF_RSH | BPF_K
pub(crate) const MOV_K: u8 = 0xb7; // BPF_ALU64 | BPF_MOV | BPF_K
pub(crate) const MOV_X: u8 = 0xbf; // BPF_ALU64 | BPF_MOV | BPF_X
pub(crate) const JNE_K: u8 = 0x55; // BPF_JMP | BPF_JNE | BPF_K
pub(crate) const JNE_X: u8 = 0x5d; // BPF_JMP | BPF_JNE | BPF_X
pub(crate) const EXIT: u8 = 0x95; // BPF_JMP | BPF_EXIT

/// `BPF_DEVCG_DEV_BLOCK`, `BPF_DEVCG_DEV_CHAR`.
pub(crate) const DEV_BLOCK: u32 = 1;
pub(crate) const DEV_CHAR: u32 = 2;
/// `BPF_DEVCG_ACC_MKNOD`, `_READ`, `_WRITE`.
pub(crate) const ACC_MKNOD: u32 = 1;
pub(crate) const ACC_READ: u32 = 2;
pub(crate) const ACC_WRITE: u32 = 4;

// Registers: r1 the context (`struct bpf_cgroup_dev_ctx { u32 access_type; u32 major; u32
// minor; }`, access_type = access << 16 | type), then what the prologue loads.
const R0: u8 = 0;
const CTX: u8 = 1;
const TYPE: u8 = 2;
const ACCESS: u8 = 3;
const MAJOR: u8 = 4;
const MINOR: u8 = 5;
const TMP: u8 = 6;

fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        dst,
        src,
        off,
        imm,
    }
}

/// One rule parsed from its v1 text (`c 1:3 rwm`, `a *:* rwm`, `a`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rule {
    pub(crate) allow: bool,
    /// `None` for `a` (any type).
    pub(crate) kind: Option<u32>,
    pub(crate) major: Option<u32>,
    pub(crate) minor: Option<u32>,
    pub(crate) access: u32,
}

/// Parses a rule's text; `None` for text the converter never makes.
pub(crate) fn parse(rule: &DeviceRule) -> Option<Rule> {
    let mut words = rule.rule.split_whitespace();
    let kind = match words.next()? {
        "a" => None,
        "b" => Some(DEV_BLOCK),
        "c" => Some(DEV_CHAR),
        _ => return None,
    };
    let number = |w: &str| match w {
        "*" => Some(None),
        n => n.parse().ok().map(Some),
    };
    let (major, minor) = match words.next() {
        None => (None, None),
        Some(mm) => {
            let (a, b) = mm.split_once(':')?;
            (number(a)?, number(b)?)
        }
    };
    let mut access = 0;
    for c in words.next().unwrap_or("rwm").chars() {
        access |= match c {
            'r' => ACC_READ,
            'w' => ACC_WRITE,
            'm' => ACC_MKNOD,
            _ => return None,
        };
    }
    Some(Rule {
        allow: rule.allow,
        kind,
        major,
        minor,
        access,
    })
}

/// The program for `rules`: a prologue splitting the context into registers, one block per
/// rule from the last to the first (the first that matches returns its decision), and a
/// final deny.
pub(crate) fn program(rules: &[Rule]) -> Vec<Insn> {
    let mut p = vec![
        insn(LDX_W, TYPE, CTX, 0, 0),
        insn(AND_K, TYPE, 0, 0, 0xffff),
        insn(LDX_W, ACCESS, CTX, 0, 0),
        insn(RSH_K, ACCESS, 0, 0, 16),
        insn(LDX_W, MAJOR, CTX, 4, 0),
        insn(LDX_W, MINOR, CTX, 8, 0),
    ];
    for r in rules.iter().rev() {
        // Each check jumps past the rest of the block when it does not match.
        let mut checks: Vec<Vec<Insn>> = Vec::new();
        for (reg, value) in [(TYPE, r.kind), (MAJOR, r.major), (MINOR, r.minor)] {
            if let Some(v) = value {
                checks.push(vec![insn(JNE_K, reg, 0, 0, v as i32)]);
            }
        }
        if r.access != ACC_READ | ACC_WRITE | ACC_MKNOD {
            // (asked & rule's) != asked: something asked for is not granted by the rule.
            checks.push(vec![
                insn(MOV_X, TMP, ACCESS, 0, 0),
                insn(AND_K, TMP, 0, 0, r.access as i32),
                insn(JNE_X, TMP, ACCESS, 0, 0),
            ]);
        }
        let len: usize = checks.iter().map(Vec::len).sum::<usize>() + 2;
        let mut at = 0;
        for check in checks {
            for mut i in check {
                at += 1;
                if matches!(i.code, JNE_K | JNE_X) {
                    i.off = (len - at) as i16;
                }
                p.push(i);
            }
        }
        p.push(insn(MOV_K, R0, 0, 0, r.allow as i32));
        p.push(insn(EXIT, 0, 0, 0, 0));
        if len == 2 {
            // A rule for every device: what follows would be unreachable (the verifier
            // refuses unreachable instructions).
            return p;
        }
    }
    p.push(insn(MOV_K, R0, 0, 0, 0));
    p.push(insn(EXIT, 0, 0, 0, 0));
    p
}

/// The instructions as the kernel reads them (`struct bpf_insn`, 8 bytes each).
fn encode(p: &[Insn]) -> Vec<u64> {
    p.iter()
        .map(|i| {
            let mut b = [0u8; 8];
            b[0] = i.code;
            b[1] = (i.src << 4) | (i.dst & 0x0f);
            b[2..4].copy_from_slice(&i.off.to_ne_bytes());
            b[4..8].copy_from_slice(&i.imm.to_ne_bytes());
            u64::from_ne_bytes(b)
        })
        .collect()
}

const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_PROG_ATTACH: libc::c_long = 8;
const BPF_PROG_TYPE_CGROUP_DEVICE: u32 = 15;
const BPF_CGROUP_DEVICE: u32 = 6;
const BPF_F_ALLOW_MULTI: u32 = 2;

/// The leading fields of `union bpf_attr` for `BPF_PROG_LOAD` (the kernel zero-fills the
/// rest of a shorter attribute).
#[repr(C)]
#[derive(Default)]
struct ProgLoad {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
}

/// `union bpf_attr` for `BPF_PROG_ATTACH`.
#[repr(C)]
#[derive(Default)]
struct ProgAttach {
    target_fd: u32,
    attach_bpf_fd: u32,
    attach_type: u32,
    attach_flags: u32,
}

/// Loads the program for `rules` and attaches it to the cgroup v2 directory `cgroup` (with
/// `BPF_F_ALLOW_MULTI`, as runc: the programs of parent cgroups still apply). The program
/// stays attached while the cgroup exists.
pub(crate) fn attach(cgroup: &Path, rules: &[DeviceRule]) -> Result<(), Errno> {
    let rules: Vec<Rule> = rules.iter().filter_map(parse).collect();
    let code = encode(&program(&rules));
    let license = c"Apache-2.0";
    let load = ProgLoad {
        prog_type: BPF_PROG_TYPE_CGROUP_DEVICE,
        insn_cnt: code.len() as u32,
        insns: code.as_ptr() as u64,
        license: license.as_ptr() as u64,
        ..ProgLoad::default()
    };
    // SAFETY: `load` is a valid prefix of bpf_attr whose size is passed; the pointers in it
    // (instructions, license) stay alive for the call, which only reads them.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_PROG_LOAD,
            &load as *const ProgLoad,
            std::mem::size_of::<ProgLoad>(),
        )
    };
    if fd < 0 {
        return Err(Errno::last());
    }
    // SAFETY: bpf(2) returned a fresh descriptor (close-on-exec) that nothing else owns.
    let prog = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    let dir = std::fs::File::open(cgroup)
        .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))?;
    let attach = ProgAttach {
        target_fd: dir.as_raw_fd() as u32,
        attach_bpf_fd: prog.as_raw_fd() as u32,
        attach_type: BPF_CGROUP_DEVICE,
        attach_flags: BPF_F_ALLOW_MULTI,
    };
    // SAFETY: `attach` is a valid bpf_attr prefix whose size is passed; both descriptors
    // are open for the call.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_PROG_ATTACH,
            &attach as *const ProgAttach,
            std::mem::size_of::<ProgAttach>(),
        )
    };
    match ret {
        0 => Ok(()),
        _ => Err(Errno::last()),
    }
}

#[cfg(test)]
mod tests;
