use std::collections::BTreeMap;

use super::*;
use crate::{Mode, Pin};

/// A graded run of instance `id` where each `(test, status)` was seen.
fn run(id: &str, arm: Arm, idx: u32, tests: &[(&str, &str)], evidence: Vec<Mode>) -> RunRow {
    let map: BTreeMap<&str, &str> = tests.iter().copied().collect();
    RunRow {
        instance_id: id.into(),
        arm,
        idx,
        resolved: false,
        infra: None,
        exit_code: 0,
        wall_ms: 1,
        started_at: 0,
        signature: String::new(),
        evidence,
        apply: String::new(),
        tests: serde_json::to_string(&map).unwrap(),
        stdout_sha256: String::new(),
        stderr_sha256: String::new(),
        junit_sha256: None,
        error: None,
        env: None,
    }
}

fn lists(id: &str, tests: &[&str]) -> BTreeMap<String, GradedList> {
    let mut m = BTreeMap::new();
    m.insert(
        id.to_string(),
        (true, Some(tests.iter().map(|t| t.to_string()).collect())),
    );
    m
}

fn test<'a>(l: &'a Ledger, id: &str) -> &'a TestEntry {
    l.instances[0].tests.iter().find(|t| t.id == id).unwrap()
}

#[test]
fn each_test_gets_its_class_counts_and_evidence() {
    let ids = ["t_ok", "t_bad", "t_flaky", "t_env", "t_gone"];
    let row = |arm, idx, flaky: &str, env: &str| {
        run(
            "i",
            arm,
            idx,
            &[
                ("t_ok", "passed"),
                ("t_bad", "failed"),
                ("t_flaky", flaky),
                ("t_env", env),
            ],
            if env == "failed" {
                vec![Mode::Time]
            } else {
                vec![]
            },
        )
    };
    let rows = vec![
        row(Arm::Shim, 0, "passed", "passed"),
        row(Arm::Shim, 1, "failed", "passed"),
        row(Arm::Shim, 2, "passed", "passed"),
        row(Arm::NoShim, 0, "passed", "failed"),
        row(Arm::NoShim, 1, "passed", "failed"),
        // The unpatched code fails everything: a baseline never decides a class.
        run("i", Arm::BaselineShim, 0, &[], vec![]),
    ];
    let l = build(&rows, &lists("i", &ids), &BTreeMap::new(), &BTreeMap::new());
    assert_eq!(test(&l, "t_ok").class, Class::StablePass);
    assert_eq!(test(&l, "t_bad").class, Class::StableFail);
    assert_eq!(test(&l, "t_gone").class, Class::StableFail);
    assert_eq!(test(&l, "t_gone").arms["shim"].missing, 3);
    let f = test(&l, "t_flaky");
    assert_eq!(f.class, Class::Flaky);
    assert_eq!((f.arms["shim"].passed, f.arms["shim"].failed), (2, 1));
    assert_eq!(f.runs, 6);
    let pair: Vec<(&str, u32, Seen)> = f
        .evidence
        .iter()
        .map(|w| (w.arm.as_str(), w.idx, w.status))
        .collect();
    assert_eq!(pair, [("shim", 0, Seen::Passed), ("shim", 1, Seen::Failed)]);
    let e = test(&l, "t_env");
    assert_eq!(e.class, Class::Environment);
    // No leave-one-out runs: the failing no-shim runs' own failure modes.
    assert_eq!(e.causes, ["time"]);
    // The minimal pair: a shim run where it passed, a no-shim run where it did not.
    let pair: Vec<(&str, Seen)> = e
        .evidence
        .iter()
        .map(|w| (w.arm.as_str(), w.status))
        .collect();
    assert_eq!(pair, [("shim", Seen::Passed), ("no_shim", Seen::Failed)]);
    let h = l.headline();
    assert_eq!(
        (
            h.tests,
            h.stable_pass,
            h.stable_fail,
            h.flaky,
            h.environment
        ),
        (5, 1, 2, 1, 1)
    );
}

#[test]
fn a_leave_one_out_arm_names_the_pin_that_flips_a_test() {
    let rows = vec![
        run(
            "i",
            Arm::Shim,
            0,
            &[("t", "passed"), ("u", "passed")],
            vec![],
        ),
        run(
            "i",
            Arm::Shim,
            1,
            &[("t", "passed"), ("u", "passed")],
            vec![],
        ),
        run(
            "i",
            Arm::NoShim,
            0,
            &[("t", "failed"), ("u", "passed")],
            vec![Mode::Network],
        ),
        run(
            "i",
            Arm::ShimWithout(Pin::DirOrder),
            0,
            &[("t", "failed"), ("u", "passed")],
            vec![],
        ),
        run(
            "i",
            Arm::ShimWithout(Pin::Clock),
            0,
            &[("t", "passed"), ("u", "passed")],
            vec![],
        ),
    ];
    let l = build(
        &rows,
        &lists("i", &["t", "u"]),
        &BTreeMap::new(),
        &BTreeMap::new(),
    );
    let t = test(&l, "t");
    assert_eq!(t.class, Class::Environment);
    assert_eq!(t.causes, ["dir_order", "hash_ordering"]);
    assert_eq!(test(&l, "u").class, Class::StablePass);
    assert!(test(&l, "u").causes.is_empty());
}

#[test]
fn hosts_that_disagree_make_an_environment_test() {
    let rows = vec![
        run("i", Arm::Shim, 0, &[("t", "passed")], vec![]),
        run("i", Arm::Shim, 1, &[("t", "failed")], vec![]),
        run("i", Arm::Shim, 2, &[("t", "passed")], vec![]),
        run("i", Arm::Shim, 3, &[("t", "failed")], vec![]),
    ];
    let mut hosts = BTreeMap::new();
    for (idx, h) in [(0, "a"), (1, "b"), (2, "a"), (3, "b")] {
        hosts.insert(("i".to_string(), "shim".to_string(), idx), h.to_string());
    }
    // Mixed within the shim arm is flaky, and the hosts tell it apart.
    let l = build(&rows, &lists("i", &["t"]), &hosts, &BTreeMap::new());
    let t = test(&l, "t");
    assert_eq!(t.class, Class::Flaky);
    assert!(t.causes.contains(&"host".to_string()), "{:?}", t.causes);
    assert_eq!(t.hosts["a"].passed, 2);
    assert_eq!(t.hosts["b"].failed, 2);
    assert_eq!(t.evidence[1].host.as_deref(), Some("b"));
}

#[test]
fn infra_failures_and_unlisted_instances_are_left_out() {
    let mut broken = run("i", Arm::Shim, 1, &[], vec![]);
    broken.infra = Some(crate::Infra::Timeout);
    let rows = vec![run("i", Arm::Shim, 0, &[("t", "passed")], vec![]), broken];
    let mut l = lists("i", &["t"]);
    l.insert("old".into(), (false, None));
    let ledger = build(&rows, &l, &BTreeMap::new(), &BTreeMap::new());
    assert_eq!(ledger.instances.len(), 1);
    assert_eq!(test(&ledger, "t").runs, 1);
    assert_eq!(test(&ledger, "t").class, Class::StablePass);
}

#[test]
fn the_export_lists_what_not_to_trust_in_a_documented_shape() {
    let rows = vec![
        run(
            "i",
            Arm::Shim,
            0,
            &[("t", "passed"), ("u", "passed")],
            vec![],
        ),
        run(
            "i",
            Arm::Shim,
            1,
            &[("t", "failed"), ("u", "passed")],
            vec![],
        ),
    ];
    let l = build(
        &rows,
        &lists("i", &["t", "u"]),
        &BTreeMap::new(),
        &BTreeMap::new(),
    );
    let v = export(&l, "study.db");
    assert_eq!(v["format"], EXPORT_FORMAT);
    assert_eq!(v["headline"]["flaky"], 1);
    let ex = v["instances"]["i"]["exclude"].as_array().unwrap();
    assert_eq!(ex.len(), 1);
    assert_eq!(ex[0]["test"], "t");
    assert_eq!(ex[0]["class"], "flaky");
    assert!(ex[0]["fails_after"].is_null());
    // The ledger's JSON is the interface scripts rely on.
    let j = serde_json::to_value(&l).unwrap();
    let t = &j["instances"][0]["tests"][0];
    for k in ["id", "class", "causes", "fails_after", "runs"] {
        assert!(t.get(k).is_some(), "{k}: {t}");
    }
    assert_eq!(j["instances"][0]["instance_id"], "i");
}

/// A variation run that ran `alone` by itself (its record, `select`).
fn alone_run(id: &str, arm: Arm, tests: &[(&str, &str)], alone: &[&str]) -> RunRow {
    let mut r = run(id, arm, 0, tests, vec![]);
    let env = crate::provenance::Provenance {
        selection: Some(crate::select::Selection {
            runner: Some("pytest".into()),
            tests: alone.iter().map(|t| t.to_string()).collect(),
            command: "pytest t.py::t".into(),
        }),
        ..Default::default()
    };
    r.env = Some(serde_json::to_string(&env).unwrap());
    r
}

#[test]
fn a_variation_run_of_one_test_alone_says_nothing_of_the_others() {
    use crate::Variation;
    fn both(t: &'static str, u: &'static str) -> [(&'static str, &'static str); 2] {
        [("t", t), ("u", u)]
    }
    let rows = vec![
        run("i", Arm::Shim, 0, &both("passed", "passed"), vec![]),
        run("i", Arm::NoShim, 0, &both("failed", "passed"), vec![]),
        // t alone under UTC+14: it fails, and u, not run (pytest leaves it out; node's
        // runner reports it skipped), is not blamed on the time zone.
        alone_run(
            "i",
            Arm::ShimVary(Variation::Timezone),
            &[("t", "failed")],
            &["t"],
        ),
        alone_run(
            "i",
            Arm::ShimVary(Variation::Locale),
            &[("t", "passed"), ("u", "skipped")],
            &["t"],
        ),
    ];
    let l = build(
        &rows,
        &lists("i", &["t", "u"]),
        &BTreeMap::new(),
        &BTreeMap::new(),
    );
    let t = test(&l, "t");
    assert_eq!(t.class, Class::Environment);
    assert_eq!(t.causes, ["environment", "timezone"]);
    let u = test(&l, "u");
    assert_eq!(u.class, Class::StablePass);
    assert!(!u.arms.contains_key("shim_vary_timezone"), "{:?}", u.arms);
    // The summary's part: what finding the cause cost, per instance; a stable instance
    // with no extra run pays nothing.
    let mut rows = rows;
    rows.push(run("ok", Arm::Shim, 0, &[("v", "passed")], vec![]));
    rows.push(run(
        "i",
        Arm::ShimWithout(Pin::Clock),
        0,
        &both("passed", "passed"),
        vec![],
    ));
    let mut lists = lists("i", &["t", "u"]);
    lists.insert("ok".into(), (true, Some(vec!["v".into()])));
    let l = build(&rows, &lists, &BTreeMap::new(), &BTreeMap::new());
    let p = part::part(&l, &rows).unwrap();
    assert_eq!(
        p.instances[0].extra_runs,
        ExtraRuns {
            leave_one_out: 1,
            variation: 2,
            clock: 0
        }
    );
    assert_eq!(p.extra_runs_untrusted.total(), 3);
    assert_eq!(p.extra_runs_stable, ExtraRuns::default());
    assert_eq!(p.untrusted().count(), 1);
    // It round-trips through summary.json.
    let back: LedgerPart = serde_json::from_str(&serde_json::to_string(&p).unwrap()).unwrap();
    assert_eq!(back, p);
    // A study without stored lists has no part: the summary keeps its old shape.
    assert!(part::part(&Ledger::default(), &rows).is_none());
}
