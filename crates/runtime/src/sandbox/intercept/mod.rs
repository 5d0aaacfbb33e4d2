//! Interception for determinism: what makes a run come out the same. The seccomp-notification
//! server ([`notify`]) with the paths it looks up ([`procpath`]), sorted directories
//! ([`dirs`]), its traced callers ([`tracees`]) and its CPU time charged to the sandbox
//! ([`throttle`]); and the exec-time path for programs that bypass libc: the program found and
//! classified ([`program`], [`elf`], Go's function table: [`gopclntab`]), the vDSO patched ([`vdso`]) to the fake clock's page
//! ([`fakeclock`]).
pub(in crate::sandbox) mod dirs;
pub(crate) mod elf;
pub(in crate::sandbox) mod fakeclock;
pub(in crate::sandbox) mod gopclntab;
pub(in crate::sandbox) mod notify;
pub(in crate::sandbox) mod procpath;
pub(in crate::sandbox) mod program;
pub(in crate::sandbox) mod throttle;
pub(in crate::sandbox) mod tracees;
pub(in crate::sandbox) mod vdso;
