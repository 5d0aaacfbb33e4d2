//! The fake clock in roots that are not the host's: an old glibc (Debian 11's 2.31, as in
//! Ubuntu 20.04, RHEL 8 and `python:3.x-bullseye` images), whose loader refuses a preload
//! library that needs newer symbol versions and so would start no dynamic program at all; and
//! musl, whose loader reads no `/etc/ld.so.preload`.

use std::path::Path;
use std::process::Command;

use crate::common::cache::bullseye_root;
use crate::common::*;

/// The date the tests set, and what `date +%F` shows for it.
const DATE: &str = "2001-02-03";

fn run_in(root: &Path, script: &str) -> std::process::Output {
    let w = Work::new();
    let root = root.to_str().unwrap();
    w.run(&[
        "exec", "--rootfs", root, "--date", DATE, "--", "/bin/sh", "-c", script,
    ])
}

/// Every dynamic program of an old-glibc root starts under the fake clock and sees its date,
/// file times included (which only the preload library shifts).
#[test]
fn programs_in_an_old_glibc_root_start_and_see_the_fake_date() {
    require!(Need::Root, Need::Tool("debootstrap"));
    let root = match bullseye_root() {
        Ok(root) => root,
        Err(why) => skip!("no Debian 11 root: {why}"),
    };
    let o = run_in(
        &root,
        "ldd --version | head -1; date +%F; touch /tmp/f; date -r /tmp/f +'file %F'; \
         python3 -c 'import time; print(\"python\", time.strftime(\"%F\", time.gmtime()))'; \
         grep -q libreprotime.so /proc/self/maps && echo preloaded",
    );
    let out = expect_code(&o, 0);
    assert!(out.contains("GLIBC 2.31"), "{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[1..5],
        [
            DATE,
            &format!("file {DATE}"),
            &format!("python {DATE}"),
            "preloaded"
        ],
        "{out}"
    );
    assert!(!stderr(&o).contains("not found"), "{}", stderr(&o));
}

/// musl's loader reads no `/etc/ld.so.preload`: a dynamic musl program gets the clock the way
/// a static one does (at its exec), whether it is the command itself or started by a shell.
#[test]
fn dynamic_programs_in_a_musl_root_see_the_fake_date() {
    let loader = "/lib/ld-musl-x86_64.so.1";
    require!(
        Need::Root,
        Need::Tool("musl-gcc"),
        Need::Path(loader, "musl's loader (musl)")
    );
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    for d in ["lib", "bin", "etc", "tmp"] {
        std::fs::create_dir_all(r.join(d)).unwrap();
    }
    std::fs::copy(loader, r.join("lib/ld-musl-x86_64.so.1")).unwrap();
    std::fs::copy("/bin/busybox", r.join("bin/busybox")).unwrap();
    std::os::unix::fs::symlink("busybox", r.join("bin/sh")).unwrap();
    let src = r.join("tmp/clock.c");
    std::fs::write(
        &src,
        "#include <stdio.h>\n#include <time.h>\n#include <sys/time.h>\n\
         int main(void) { struct timespec t; struct timeval v; char d[16];\n\
         clock_gettime(CLOCK_REALTIME, &t); gettimeofday(&v, 0); time_t n = time(0);\n\
         strftime(d, sizeof d, \"%Y-%m-%d\", gmtime(&n));\n\
         printf(\"%s %lld %lld\\n\", d, (long long)t.tv_sec, (long long)v.tv_sec); return 0; }\n",
    )
    .unwrap();
    let prog = r.join("bin/clock");
    let o = Command::new("musl-gcc")
        .args(["-O2", "-o", prog.to_str().unwrap(), src.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let interp = Command::new("file").arg(&prog).output().unwrap();
    assert!(
        String::from_utf8_lossy(&interp.stdout).contains("ld-musl"),
        "a dynamic musl program"
    );
    let w = Work::new();
    let rs = r.to_str().unwrap();
    for cmd in [&["/bin/clock"][..], &["/bin/sh", "-c", "/bin/clock"]] {
        let mut args = vec!["exec", "--rootfs", rs, "--date", DATE, "--"];
        args.extend_from_slice(cmd);
        let out = expect_code(&w.run(&args), 0);
        // 2001-02-03T00:00:00Z is 981158400; a run takes seconds, not days.
        let fields: Vec<&str> = out.split_whitespace().collect();
        assert_eq!(fields[0], DATE, "{cmd:?}: {out}");
        for secs in &fields[1..] {
            let secs: i64 = secs.parse().unwrap();
            assert!(
                (981_158_400..981_158_400 + 86_400).contains(&secs),
                "{cmd:?}: {out}"
            );
        }
    }
}
