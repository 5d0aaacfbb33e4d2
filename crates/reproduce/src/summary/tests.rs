use super::*;

const T0: i64 = 1_600_000_000;

fn run(arm: Arm, idx: u32, resolved: bool) -> RunResult {
    RunResult {
        arm,
        idx,
        resolved,
        infra: None,
        wall_ms: 1000,
        started_at: T0,
        signature: if resolved { "pass" } else { "fail" }.into(),
        evidence: Vec::new(),
        failed_tests: Vec::new(),
    }
}

/// Runs 0, 1, ... of `arm` with these outcomes.
fn runs(arm: Arm, outcomes: &[bool]) -> Vec<RunResult> {
    outcomes
        .iter()
        .enumerate()
        .map(|(i, &t)| run(arm, i as u32, t))
        .collect()
}

fn inst(id: &str, recorded: bool, runs: Vec<RunResult>) -> InstanceRuns {
    InstanceRuns {
        instance_id: id.into(),
        recorded_resolved: recorded,
        bench_date: T0,
        runs,
    }
}

fn row<'a>(s: &'a Summary, id: &str) -> &'a InstanceSummary {
    match s.instances.iter().find(|r| r.instance_id == id) {
        Some(r) => r,
        None => panic!("no instance {id}"),
    }
}

fn close(a: Option<f64>, b: f64) -> bool {
    a.is_some_and(|a| (a - b).abs() < 1e-12)
}

fn json(s: &Summary) -> serde_json::Value {
    match serde_json::to_value(s) {
        Ok(v) => v,
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn an_infra_failure_reproduces_no_outcome() {
    let timeout = |idx| RunResult {
        infra: Some(crate::Infra::Timeout),
        ..run(Arm::Shim, idx, false)
    };
    // Recorded unresolved: two genuine failures reproduce it, the timeout does not.
    let data = vec![inst(
        "u",
        false,
        vec![
            run(Arm::Shim, 0, false),
            run(Arm::Shim, 1, false),
            timeout(2),
        ],
    )];
    let s = summarize(&data, 3);
    assert!(close(row(&s, "u").r_shim, 2.0 / 3.0));
    assert_eq!(row(&s, "u").class_shim, Some(Class::Flaky));
    // Recorded resolved: the timeout is a mismatch too.
    let data = vec![inst("v", true, vec![timeout(0)])];
    assert_eq!(
        row(&summarize(&data, 1), "v").class_shim,
        Some(Class::Broken)
    );
}

#[test]
fn classes_counts_and_rates() {
    let data = vec![
        inst("c", true, runs(Arm::Shim, &[false, false, false])),
        inst("a", true, runs(Arm::Shim, &[true, true, true])),
        inst("b", true, runs(Arm::Shim, &[true, false, true])),
        // T_0 = false: failing runs reproduce it.
        inst("d", false, runs(Arm::Shim, &[false, false, false])),
    ];
    let s = summarize(&data, 3);
    assert_eq!((s.k, s.instances_total, s.runs_total), (3, 4, 12));
    let ids: Vec<&str> = s.instances.iter().map(|r| r.instance_id.as_str()).collect();
    assert_eq!(ids, ["a", "b", "c", "d"]);
    // 2 reproducible (a, d), 1 flaky (b), 1 broken (c) of 4.
    assert_eq!(
        (s.shim.reproducible, s.shim.flaky, s.shim.broken),
        (2, 1, 1)
    );
    assert_eq!(s.shim.rate_reproducible, Some(0.5));
    assert_eq!(s.shim.rate_flaky, Some(0.25));
    assert_eq!(s.shim.rate_broken, Some(0.25));
    // b: 2 of 3 runs equal T_0.
    assert!(close(row(&s, "b").r_shim, 2.0 / 3.0));
    assert_eq!(row(&s, "b").class_shim, Some(Class::Flaky));
    assert_eq!(row(&s, "c").r_shim, Some(0.0));
    assert_eq!(row(&s, "d").class_shim, Some(Class::Reproducible));
    assert_eq!(row(&s, "a").r_no_shim, None);
    assert_eq!(row(&s, "a").class_no_shim, None);
    assert_eq!(row(&s, "a").runs.get("shim"), Some(&3));
    // Without the other arms those objects are omitted and the scalars are null.
    let v = json(&s);
    for absent in [
        "no_shim",
        "baseline",
        "baseline_no_shim",
        "baseline_explained",
        "mcnemar",
        "drift",
    ] {
        assert!(v.get(absent).is_none(), "{absent} present");
    }
    for null in [
        "mcnemar_p",
        "overhead_median",
        "half_life_days",
        "half_life_ci",
    ] {
        assert!(v.get(null).is_some_and(|x| x.is_null()), "{null}");
    }
    // Without timed pairs: no spread, over no instances.
    assert!(v.get("overhead_iqr").is_none());
    assert_eq!(v["overhead_instances"], 0);
    assert!(v["failure_modes"].get("no_shim").is_none());
    assert_eq!(v["instances"][1]["class_shim"], "flaky");
    assert!(v["instances"][1]["r_no_shim"].is_null());
}

#[test]
fn k_cap_and_partial_studies() {
    let mut extra = runs(Arm::Shim, &[true, true, false, false]);
    extra.push(run(Arm::NoShim, 7, false));
    let data = vec![
        // Rows with idx >= k = 2 are ignored: r = 2/2.
        inst("capped", true, extra),
        // A partial study: 1 run of k = 2 so far, r over that one run.
        inst("partial", true, runs(Arm::Shim, &[false])),
    ];
    let s = summarize(&data, 2);
    assert_eq!(s.runs_total, 3);
    assert_eq!(row(&s, "capped").class_shim, Some(Class::Reproducible));
    assert_eq!(row(&s, "capped").runs.len(), 1);
    // The no-shim row had idx 7: no no-shim arm at all.
    assert_eq!(s.no_shim, None);
    assert_eq!(row(&s, "partial").r_shim, Some(0.0));
    assert_eq!(row(&s, "partial").runs.get("shim"), Some(&1));
    // k = 0 counts nothing.
    let s0 = summarize(&data, 0);
    assert_eq!(s0.runs_total, 0);
    assert_eq!(s0.shim.total(), 0);
    assert_eq!(s0.shim.rate_reproducible, None);
}

#[test]
fn mcnemar_pairs() {
    let both = |id: &str, shim: bool, no_shim: bool| {
        let mut r = runs(Arm::Shim, &[shim, shim]);
        r.extend(runs(Arm::NoShim, &[no_shim, true]));
        inst(id, true, r)
    };
    let data = vec![
        // b: reproducible with the shim, not without (no-shim r = 1/2).
        both("b1", true, false),
        both("b2", true, false),
        both("b3", true, false),
        both("b4", true, false),
        both("b5", true, false),
        // Concordant pairs.
        both("same1", true, true),
        both("same2", false, false),
        // Not a pair: shim only.
        inst("shim_only", true, runs(Arm::Shim, &[false, false])),
    ];
    let s = summarize(&data, 2);
    // b = 5, c = 0: p = 2 · C(5,0)/2^5 = 2/32 = 0.0625.
    assert_eq!(s.mcnemar.map(|m| (m.b, m.c)), Some((5, 0)));
    assert!(close(s.mcnemar.map(|m| m.p), 0.0625));
    assert_eq!(s.mcnemar_p, s.mcnemar.map(|m| m.p));
    let no_shim = s.no_shim.unwrap_or_default();
    // no_shim: same1 reproducible; b1..b5 and same2 flaky (1 of 2).
    assert_eq!(
        (no_shim.reproducible, no_shim.flaky, no_shim.broken),
        (1, 6, 0)
    );
    // One reversed pair: b = 5, c = 1 → p = 2·(1 + 6)/64 = 0.21875.
    let mut data = data;
    data.push(both("c1", false, true));
    let s = summarize(&data, 2);
    assert_eq!(s.mcnemar.map(|m| (m.b, m.c)), Some((5, 1)));
    assert!(close(s.mcnemar_p, 0.21875));
}

#[test]
fn overhead_median() {
    let timed = |arm: Arm, walls: &[u64]| -> Vec<RunResult> {
        walls
            .iter()
            .enumerate()
            .map(|(i, &w)| RunResult {
                wall_ms: w,
                ..run(arm, i as u32, true)
            })
            .collect()
    };
    let mut one = timed(Arm::Shim, &[1100, 1000, 1200]); // median 1100
    one.extend(timed(Arm::NoShim, &[1000, 900, 1000])); // median 1000 → +0.1
    let mut infra_shim = RunResult {
        infra: Some(Infra::Timeout),
        wall_ms: 900_000,
        ..run(Arm::Shim, 3, false)
    };
    infra_shim.resolved = false;
    one.push(infra_shim); // ignored for timing
    let mut two = timed(Arm::Shim, &[2000, 2100]); // median 2050
    two.extend(timed(Arm::NoShim, &[2000, 2000])); // median 2000 → +0.025
    let mut three = timed(Arm::Shim, &[500]);
    three.push(RunResult {
        infra: Some(Infra::PatchApply),
        ..run(Arm::NoShim, 0, false)
    }); // no no-shim timing: left out
    let mut four = timed(Arm::Shim, &[500]);
    four.extend(timed(Arm::NoShim, &[0])); // median 0: left out
    let data = vec![
        inst("one", true, one),
        inst("two", true, two),
        inst("three", true, three),
        inst("four", true, four),
    ];
    let s = summarize(&data, 5);
    // Median of {0.1, 0.025} = 0.0625.
    let Some(o) = s.overhead_median else {
        panic!("no overhead");
    };
    assert!((o - 0.0625).abs() < 1e-12, "{o}");
}

#[test]
fn baselines_and_explained_share() {
    let signed = |arm: Arm, sigs: &[&str]| -> Vec<RunResult> {
        sigs.iter()
            .enumerate()
            .map(|(i, s)| RunResult {
                signature: (*s).into(),
                ..run(arm, i as u32, false)
            })
            .collect()
    };
    // p1: flaky patch (shim), flaky baseline (a, a, b: r = 2/3).
    let mut p1 = runs(Arm::Shim, &[true, false, true]);
    p1.extend(signed(Arm::BaselineShim, &["a", "a", "b"]));
    p1.extend(signed(Arm::BaselineNoShim, &["x", "x", "x"]));
    // p2: flaky patch, reproducible baseline.
    let mut p2 = runs(Arm::Shim, &[true, false, false]);
    p2.extend(signed(Arm::BaselineShim, &["z", "z", "z"]));
    // p3: flaky patch without a baseline: not in the share.
    let p3 = runs(Arm::Shim, &[false, true, true]);
    // p4: tie b/a: modal "a" by byte order, r = 1/2 (not 1: a tie is no mode of all).
    let mut p4 = runs(Arm::Shim, &[true, true]);
    p4.extend(signed(Arm::BaselineShim, &["b", "a"]));
    // p5: every baseline run an infra failure: broken, though the signatures agree.
    let mut p5 = runs(Arm::Shim, &[true]);
    p5.extend(
        signed(Arm::BaselineShim, &["infra:timeout", "infra:timeout"])
            .into_iter()
            .map(|r| RunResult {
                infra: Some(Infra::Timeout),
                ..r
            }),
    );
    let data = vec![
        inst("p1", true, p1),
        inst("p2", true, p2),
        inst("p3", true, p3),
        inst("p4", true, p4),
        inst("p5", true, p5),
    ];
    let s = summarize(&data, 3);
    assert!(close(row(&s, "p1").r_baseline_shim, 2.0 / 3.0));
    assert_eq!(row(&s, "p1").class_baseline_shim, Some(Class::Flaky));
    assert_eq!(row(&s, "p1").r_baseline_no_shim, Some(1.0));
    assert_eq!(
        row(&s, "p1").class_baseline_no_shim,
        Some(Class::Reproducible)
    );
    assert_eq!(row(&s, "p4").r_baseline_shim, Some(0.5));
    assert_eq!(row(&s, "p4").class_baseline_shim, Some(Class::Flaky));
    assert_eq!(row(&s, "p5").r_baseline_shim, Some(1.0));
    assert_eq!(row(&s, "p5").class_baseline_shim, Some(Class::Broken));
    assert_eq!(row(&s, "p3").r_baseline_shim, None);
    let Some(baseline) = s.baseline else {
        panic!("no baseline");
    };
    // Baseline shim: p1 flaky, p2 reproducible, p4 flaky, p5 broken.
    assert_eq!(
        (baseline.reproducible, baseline.flaky, baseline.broken),
        (1, 2, 1)
    );
    assert_eq!(s.baseline_no_shim.map(|c| c.reproducible), Some(1));
    // Flaky patches with a shim baseline: p1 (flaky baseline), p2 (not) → 1/2; p3 has no
    // baseline. No no-shim runs: no flaky patch there → null.
    assert_eq!(
        s.baseline_explained,
        Some(BaselineExplained {
            shim: Some(0.5),
            no_shim: None
        })
    );
    let v = json(&s);
    assert!(v["baseline_explained"]["no_shim"].is_null());
    assert_eq!(v["baseline_no_shim"]["reproducible"], 1);
    assert_eq!(v["baseline"]["flaky"], 2);
    // Baselines do not change the patch counts.
    assert_eq!(s.shim.flaky, 3);
}

#[test]
fn taxonomy_pins_and_evidence() {
    let failing = |arm: Arm, n: usize, evidence: &[Mode]| -> Vec<RunResult> {
        (0..n)
            .map(|i| RunResult {
                evidence: evidence.to_vec(),
                failed_tests: vec![],
                ..run(arm, i as u32, false)
            })
            .collect()
    };
    // pinned: reproducible with the shim, not without; without the clock pin it fails,
    // without the mirror it still passes. The pin beats the log's network evidence.
    let mut pinned = runs(Arm::Shim, &[true, true]);
    pinned.extend(failing(Arm::NoShim, 2, &[Mode::Network]));
    pinned.extend(failing(Arm::ShimWithout(Pin::Clock), 1, &[]));
    pinned.extend(runs(Arm::ShimWithout(Pin::Mirror), &[true, true]));
    pinned.extend(runs(Arm::ShimWithout(Pin::HashSeed), &[true, false]));
    // logs: no leave-one-out runs; the union of the differing runs' evidence. A no-shim
    // run that passes (matches T_0) contributes nothing.
    let mut logs = runs(Arm::Shim, &[true, true]);
    logs.extend(failing(Arm::NoShim, 1, &[Mode::DependencyDrift]));
    logs.push(RunResult {
        evidence: vec![Mode::Network, Mode::DependencyDrift],
        failed_tests: vec![],
        ..run(Arm::NoShim, 1, false)
    });
    logs.push(RunResult {
        evidence: vec![Mode::Environment],
        failed_tests: vec![],
        ..run(Arm::NoShim, 2, true)
    });
    // timeout: an infra timeout without evidence.
    let mut timeout = runs(Arm::Shim, &[true]);
    timeout.push(RunResult {
        infra: Some(Infra::Timeout),
        ..run(Arm::NoShim, 0, false)
    });
    // nothing: no evidence at all → other.
    let mut nothing = runs(Arm::Shim, &[true]);
    nothing.extend(failing(Arm::NoShim, 1, &[]));
    // shim_fails: not reproducible with the shim: log evidence only, and no pins even
    // though a leave-one-out arm fails.
    let mut shim_fails = failing(Arm::Shim, 2, &[Mode::Randomness]);
    shim_fails.extend(failing(Arm::ShimWithout(Pin::Random), 1, &[]));
    shim_fails.extend(failing(Arm::NoShim, 1, &[Mode::Randomness]));
    let data = vec![
        inst("pinned", true, pinned),
        inst("logs", true, logs),
        inst("timeout", true, timeout),
        inst("nothing", true, nothing),
        inst("shim_fails", true, shim_fails),
    ];
    let s = summarize(&data, 3);
    let pinned = row(&s, "pinned");
    assert_eq!(pinned.pins, vec![Pin::Clock, Pin::HashSeed]);
    assert_eq!(pinned.modes_no_shim, vec![Mode::Time, Mode::HashOrdering]);
    assert_eq!(pinned.modes_shim, vec![]);
    assert_eq!(
        pinned.runs.get("shim_without_clock").copied(),
        Some(1),
        "{:?}",
        pinned.runs
    );
    assert_eq!(
        row(&s, "logs").modes_no_shim,
        vec![Mode::DependencyDrift, Mode::Network]
    );
    assert_eq!(row(&s, "logs").pins, vec![]);
    assert_eq!(
        row(&s, "timeout").modes_no_shim,
        vec![Mode::TimeoutResource]
    );
    assert_eq!(row(&s, "timeout").infra, vec![Infra::Timeout]);
    assert_eq!(row(&s, "nothing").modes_no_shim, vec![Mode::Other]);
    let sf = row(&s, "shim_fails");
    assert_eq!(sf.pins, vec![]);
    assert_eq!(sf.modes_shim, vec![Mode::Randomness]);
    assert_eq!(sf.modes_no_shim, vec![Mode::Randomness]);
    let no_shim = s.failure_modes.no_shim.clone().unwrap_or_default();
    assert_eq!(no_shim.get(&Mode::Time), Some(&1));
    assert_eq!(no_shim.get(&Mode::Network), Some(&1));
    assert_eq!(no_shim.get(&Mode::DependencyDrift), Some(&1));
    assert_eq!(no_shim.get(&Mode::Randomness), Some(&1));
    assert_eq!(no_shim.get(&Mode::Other), Some(&1));
    assert_eq!(no_shim.get(&Mode::Environment), Some(&0));
    assert_eq!(no_shim.len(), Mode::ALL.len());
    assert_eq!(s.failure_modes.shim.get(&Mode::Randomness), Some(&1));
    assert_eq!(s.failure_modes.shim.values().sum::<u64>(), 1);
    let v = json(&s);
    assert_eq!(v["failure_modes"]["no_shim"]["time"], 1);
    assert_eq!(v["instances"][2]["pins"][0], "clock");
    assert_eq!(v["instances"][2]["modes_no_shim"][1], "hash_ordering");
}

#[test]
fn drift_observations_and_half_life() {
    // Ten instances aged 100 days at their first no-shim run, three drifted: the fit of
    // stats::hazard_equal_ages_by_hand, half-life 100·ln2/−ln(0.7) = 194.33582098747314.
    let mut data = Vec::new();
    for i in 0..10 {
        let mut r = runs(Arm::Shim, &[true]);
        for idx in 0..2_u32 {
            r.push(RunResult {
                // The earliest start counts: 100 days, then a day later.
                started_at: T0 + (100 + i64::from(idx)) * 86_400,
                evidence: if i < 3 {
                    vec![Mode::DependencyDrift]
                } else {
                    vec![]
                },
                ..run(Arm::NoShim, idx, i >= 3)
            });
        }
        data.push(inst(&format!("i{i}"), true, r));
    }
    // Not an observation: a start before the benchmark date.
    let mut early = runs(Arm::NoShim, &[false]);
    early[0].started_at = T0 - 86_400;
    early[0].evidence = vec![Mode::DependencyDrift];
    data.push(inst("early", true, early));
    // No no-shim runs: no age.
    data.push(inst("shim_only", true, runs(Arm::Shim, &[true])));
    let s = summarize(&data, 2);
    let Some(drift) = &s.drift else {
        panic!("no drift");
    };
    assert_eq!((drift.observations, drift.events), (10, 3));
    assert_eq!(drift.points[0], (100.0, true));
    assert_eq!(drift.points[9], (100.0, false));
    assert_eq!(row(&s, "early").age_days, Some(-1.0));
    assert_eq!(row(&s, "shim_only").age_days, None);
    assert_eq!(row(&s, "i0").age_days, Some(100.0));
    let Some(h) = s.half_life_days else {
        panic!("no half-life");
    };
    assert!((h - 194.335_820_987_473_14).abs() < 1e-6, "{h}");
    let Some([lo, hi]) = s.half_life_ci else {
        panic!("no CI");
    };
    assert!((lo - 62.302_042_624_800_26).abs() < 1e-5, "{lo}");
    assert!((hi - 606.182_554_018_569_9).abs() < 1e-5, "{hi}");
    let v = json(&s);
    assert_eq!(v["drift"]["points"][0][0], 100.0);
    assert_eq!(v["drift"]["points"][0][1], true);
}

#[test]
fn infra_counts_all_arms() {
    let with = |arm: Arm, idx: u32, infra: Infra| RunResult {
        infra: Some(infra),
        ..run(arm, idx, false)
    };
    let data = vec![inst(
        "x",
        true,
        vec![
            with(Arm::Shim, 0, Infra::PatchApply),
            with(Arm::NoShim, 0, Infra::Timeout),
            with(Arm::BaselineShim, 0, Infra::Oom),
            with(Arm::ShimWithout(Pin::Env), 0, Infra::Runtime),
            with(Arm::BaselineNoShim, 0, Infra::Timeout),
            with(Arm::Shim, 9, Infra::Runtime), // idx >= k: ignored
        ],
    )];
    let s = summarize(&data, 1);
    assert_eq!(
        s.infra,
        InfraCounts {
            patch_apply: 1,
            timeout: 2,
            oom: 1,
            runtime: 1,
            no_tests: 0
        }
    );
    assert_eq!(
        row(&s, "x").infra,
        vec![
            Infra::PatchApply,
            Infra::Timeout,
            Infra::Oom,
            Infra::Runtime
        ]
    );
    // A timed-out no-shim run is a failure mode, a patch-apply failure is not.
    assert_eq!(row(&s, "x").modes_no_shim, vec![Mode::TimeoutResource]);
    assert_eq!(row(&s, "x").modes_shim, vec![Mode::Other]);
    assert_eq!(json(&s)["instances"][0]["infra"][0], "patch_apply");
}

#[test]
fn empty_input() {
    let s = summarize(&[], 5);
    assert_eq!((s.instances_total, s.runs_total), (0, 0));
    assert_eq!(s.shim, ClassCounts::default());
    assert_eq!(s.overhead_median, None);
    assert_eq!(s.failure_modes.shim.len(), Mode::ALL.len());
    let v = json(&s);
    assert!(v["shim"]["rate_reproducible"].is_null());
    assert_eq!(v["instances"], serde_json::json!([]));
}

#[test]
fn json_field_names_and_round_trip() {
    let mut r = runs(Arm::Shim, &[true, false]);
    r.extend(runs(Arm::NoShim, &[true, true]));
    r.extend(runs(Arm::BaselineShim, &[false, false]));
    r.extend(runs(Arm::BaselineNoShim, &[false, true]));
    let s = summarize(&[inst("x", true, r)], 2);
    let v = json(&s);
    let Some(top) = v.as_object() else {
        panic!("not an object");
    };
    let keys: BTreeSet<&str> = top.keys().map(String::as_str).collect();
    let expected: BTreeSet<&str> = [
        "k",
        "instances_total",
        "runs_total",
        "shim",
        "no_shim",
        "baseline",
        "baseline_no_shim",
        "baseline_explained",
        "mcnemar",
        "mcnemar_p",
        "overhead_median",
        "overhead_iqr",
        "overhead_instances",
        "overhead_runs",
        "resolved",
        "half_life_days",
        "half_life_ci",
        "drift",
        "failure_modes",
        "infra",
        "instances",
    ]
    .into_iter()
    .collect();
    assert_eq!(keys, expected);
    let counts: BTreeSet<&str> = match v["shim"].as_object() {
        Some(o) => o.keys().map(String::as_str).collect(),
        None => panic!("shim"),
    };
    let expected: BTreeSet<&str> = [
        "reproducible",
        "flaky",
        "broken",
        "error",
        "rate_reproducible",
        "rate_flaky",
        "rate_broken",
        "rate_error",
    ]
    .into_iter()
    .collect();
    assert_eq!(counts, expected);
    let instance: BTreeSet<&str> = match v["instances"][0].as_object() {
        Some(o) => o.keys().map(String::as_str).collect(),
        None => panic!("instance"),
    };
    let expected: BTreeSet<&str> = [
        "instance_id",
        "r_shim",
        "class_shim",
        "r_no_shim",
        "class_no_shim",
        "r_baseline_shim",
        "class_baseline_shim",
        "r_baseline_no_shim",
        "class_baseline_no_shim",
        "modes_shim",
        "modes_no_shim",
        "pins",
        "runs",
        "infra",
        "age_days",
        "resolved_runs",
    ]
    .into_iter()
    .collect();
    assert_eq!(instance, expected);
    assert_eq!(v["mcnemar"]["b"], 0);
    assert_eq!(v["mcnemar"]["c"], 1);
    assert_eq!(v["runs_total"], 8);
    assert_eq!(v["instances"][0]["runs"]["baseline_no_shim"], 2);
    let text = match serde_json::to_string(&s) {
        Ok(t) => t,
        Err(e) => panic!("{e}"),
    };
    let back: Summary = match serde_json::from_str(&text) {
        Ok(b) => b,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(back, s);
    // Omitted objects read back as absent.
    let bare = summarize(&[inst("y", true, runs(Arm::Shim, &[true]))], 1);
    let text = serde_json::to_string(&bare).unwrap_or_default();
    let back: Option<Summary> = serde_json::from_str(&text).ok();
    assert_eq!(back, Some(bare));
}

/// A run in the `error` class: its output named none of the listed tests.
fn errored(arm: Arm, idx: u32, wall_ms: u64) -> RunResult {
    RunResult {
        infra: Some(Infra::NoTests),
        wall_ms,
        signature: "no_tests".into(),
        ..run(arm, idx, false)
    }
}

#[test]
fn a_baseline_or_patch_that_never_ran_a_test_is_an_error() {
    // The baseline crashed at import each time: the same all-missing outcome every run,
    // which is no outcome, not "reproducible".
    let base: Vec<RunResult> = (0..3).map(|i| errored(Arm::BaselineShim, i, 50)).collect();
    // A recorded failure "reproduced" by runs that ran nothing is no reproduction either.
    let mut both = runs(Arm::Shim, &[true, true]);
    both.extend(base);
    let no_test_patch: Vec<RunResult> = (0..2).map(|i| errored(Arm::Shim, i, 50)).collect();
    let s = summarize(&[inst("a", true, both), inst("b", false, no_test_patch)], 3);
    assert_eq!(row(&s, "a").class_baseline_shim, Some(Class::Error));
    assert_eq!(row(&s, "a").class_shim, Some(Class::Reproducible));
    assert_eq!(row(&s, "b").class_shim, Some(Class::Error));
    assert_eq!(s.shim.error, 1);
    assert_eq!(s.shim.reproducible, 1);
    assert!(close(s.shim.rate_error, 0.5));
    let b = s.baseline.unwrap_or_default();
    assert_eq!((b.reproducible, b.error), (0, 1));
    assert_eq!(s.infra.no_tests, 5);
    assert_eq!(json(&s)["shim"]["error"], 1);
    // Some runs ran the tests: an outcome, with the error runs not reproducing.
    let mut mixed = runs(Arm::Shim, &[true, true]);
    mixed.push(errored(Arm::Shim, 2, 50));
    let s = summarize(&[inst("c", true, mixed)], 3);
    assert_eq!(row(&s, "c").class_shim, Some(Class::Flaky));
}

#[test]
fn resolved_rate_per_arm_and_failed_tests_per_run() {
    let mut shim = runs(Arm::Shim, &[true, false, true]);
    shim[1].failed_tests = vec!["t.py::f2p".into()];
    let mut no_shim = runs(Arm::NoShim, &[false]);
    no_shim[0].failed_tests = vec!["t.py::f2p".into(), "t.py::p2p".into()];
    no_shim.push(errored(Arm::NoShim, 1, 5));
    let mut all = shim;
    all.extend(no_shim);
    let s = summarize(
        &[
            inst("a", true, all),
            inst("b", true, runs(Arm::Shim, &[true; 3])),
        ],
        3,
    );
    let r = &s.resolved["shim"];
    assert_eq!((r.runs, r.resolved, r.errors), (6, 5, 0));
    assert!(close(r.rate, 5.0 / 6.0));
    assert_eq!((r.instances, r.instances_resolved_every_run), (2, 1));
    let n = &s.resolved["no_shim"];
    assert_eq!((n.runs, n.resolved, n.errors), (2, 0, 1));
    assert!(close(n.rate, 0.0));
    let a = row(&s, "a");
    assert_eq!(a.resolved_runs["shim"], 2);
    assert_eq!(a.failed_tests["t.py::f2p"], ["shim#1", "no_shim#0"]);
    assert_eq!(a.failed_tests["t.py::p2p"], ["no_shim#0"]);
    assert!(row(&s, "b").failed_tests.is_empty());
}

#[test]
fn overhead_compares_only_runs_that_ran_the_tests() {
    // The no-shim runs exited at once (exit 127: nothing ran); on main they were timed
    // against the shim's, and the "overhead" was +55233 %.
    let shim = runs(Arm::Shim, &[true, true]);
    let mut all = shim;
    all.extend((0..2).map(|i| errored(Arm::NoShim, i, 3)));
    // One instance whose both arms ran the tests, at 1000 ms each.
    let mut fine = runs(Arm::Shim, &[true, true]);
    fine.extend(runs(Arm::NoShim, &[true, true]));
    let s = summarize(&[inst("a", true, all), inst("b", true, fine)], 2);
    assert!(close(s.overhead_median, 0.0), "{:?}", s.overhead_median);
    assert_eq!(s.overhead_instances, 1);
    assert_eq!(
        s.overhead_runs,
        OverheadRuns {
            shim: 2,
            no_shim: 2,
            instances_left_out: 1
        }
    );
    // A pair in which one arm never ran a test is no McNemar pair.
    assert!(s.mcnemar.is_some_and(|m| m.b == 0 && m.c == 0));
    let pairs = s
        .instances
        .iter()
        .filter(|r| r.class_no_shim == Some(Class::Error))
        .count();
    assert_eq!(pairs, 1);
}
