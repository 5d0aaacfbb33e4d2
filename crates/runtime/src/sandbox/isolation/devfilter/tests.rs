//! The device program's decisions, by running it in a small interpreter of the instructions
//! it uses.

use super::*;

/// Runs `p` on the context (access << 16 | type, major, minor); returns r0 at exit.
fn run(p: &[Insn], kind: u32, access: u32, major: u32, minor: u32) -> u64 {
    let ctx = [(access << 16) | kind, major, minor];
    let mut r = [0u64; 11];
    let mut pc = 0usize;
    loop {
        let i = p[pc];
        let (d, s) = (i.dst as usize, i.src as usize);
        pc += 1;
        match i.code {
            LDX_W => {
                assert_eq!(s, 1, "loads only from the context");
                r[d] = ctx[i.off as usize / 4] as u64;
            }
            AND_K => r[d] &= i.imm as u64,
            RSH_K => r[d] >>= i.imm,
            MOV_K => r[d] = i.imm as u64,
            MOV_X => r[d] = r[s],
            JNE_K if r[d] != i.imm as u64 => pc += i.off as usize,
            JNE_X if r[d] != r[s] => pc += i.off as usize,
            JNE_K | JNE_X => {}
            EXIT => return r[0],
            other => panic!("opcode {other:#x}"),
        }
    }
}

fn rule(allow: bool, text: &str) -> Rule {
    parse(&DeviceRule {
        allow,
        rule: text.into(),
    })
    .unwrap()
}

#[test]
fn rules_parse_from_their_v1_text() {
    assert_eq!(
        rule(true, "c 1:3 rwm"),
        Rule {
            allow: true,
            kind: Some(DEV_CHAR),
            major: Some(1),
            minor: Some(3),
            access: ACC_READ | ACC_WRITE | ACC_MKNOD
        }
    );
    let any = rule(false, "a");
    assert_eq!(
        (any.kind, any.major, any.minor, any.access),
        (None, None, None, 7)
    );
    let b = rule(true, "b *:* m");
    assert_eq!(
        (b.kind, b.major, b.access),
        (Some(DEV_BLOCK), None, ACC_MKNOD)
    );
    for bad in ["x 1:3 r", "c 1-3 r", "c 1:3 rx", "c a:3 r"] {
        assert!(
            parse(&DeviceRule {
                allow: true,
                rule: bad.into()
            })
            .is_none(),
            "{bad}"
        );
    }
}

#[test]
fn the_last_matching_rule_decides_and_no_match_denies() {
    // runc's defaults in part, then a config that allows a disk read-only and denies
    // /dev/zero again.
    let rules = [
        rule(true, "c 1:3 rwm"),
        rule(true, "c 1:5 rwm"),
        rule(true, "b *:* m"),
        rule(true, "b 8:0 r"),
        rule(false, "c 1:5 rwm"),
    ];
    let p = program(&rules);
    let (r, w, m) = (ACC_READ, ACC_WRITE, ACC_MKNOD);
    let cases = [
        (DEV_CHAR, r | w, 1, 3, 1),  // /dev/null
        (DEV_CHAR, r, 1, 5, 0),      // /dev/zero: denied by the last rule
        (DEV_BLOCK, m, 254, 0, 1),   // mknod of any block device
        (DEV_BLOCK, r, 254, 0, 0),   // but no use of it
        (DEV_BLOCK, r, 8, 0, 1),     // the disk allowed read-only
        (DEV_BLOCK, r | w, 8, 0, 0), // not for writing
        (DEV_BLOCK, w, 8, 0, 0),
        (DEV_CHAR, r, 1, 7, 0), // /dev/full: no rule
        (DEV_CHAR, m, 8, 0, 0), // a char device with the disk's numbers
    ];
    for (kind, access, major, minor, want) in cases {
        assert_eq!(
            run(&p, kind, access, major, minor),
            want,
            "type {kind} access {access} {major}:{minor}"
        );
    }
}

#[test]
fn a_rule_for_every_device_ends_the_program() {
    let p = program(&[rule(false, "c 1:3 rwm"), rule(true, "a *:* rwm")]);
    assert_eq!(
        run(&p, DEV_CHAR, ACC_READ, 1, 3),
        1,
        "the later allow-all decides"
    );
    assert_eq!(p.last().unwrap().code, EXIT);
    // Nothing after the block of the rule for every device (which is the first block).
    assert_eq!(p.len(), 6 + 2);
    let p = program(&[rule(true, "a *:* rwm"), rule(false, "c 1:3 rwm")]);
    assert_eq!(run(&p, DEV_CHAR, ACC_READ, 1, 3), 0);
    assert_eq!(run(&p, DEV_CHAR, ACC_READ, 1, 5), 1);
    assert_eq!(
        run(&program(&[]), DEV_CHAR, ACC_READ, 1, 3),
        0,
        "no rules deny"
    );
}

#[test]
fn every_jump_lands_inside_the_program() {
    let rules = [
        rule(true, "c 1:3 rw"),
        rule(false, "b 8:* r"),
        rule(true, "c *:5 m"),
    ];
    let p = program(&rules);
    for (at, i) in p.iter().enumerate() {
        if matches!(i.code, JNE_K | JNE_X) {
            let to = at + 1 + i.off as usize;
            assert!(to < p.len(), "jump at {at} to {to}");
            assert!(i.off > 0);
        }
    }
    assert_eq!(encode(&p).len(), p.len());
}
