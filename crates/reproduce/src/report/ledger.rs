//! The report's ledger section: the headline, what finding the causes cost, and per
//! instance the tests not to trust — class, causes, first failing day, evidence runs and
//! the extra runs their instance got (`summary.json`'s `ledger`).

use reprorun_pipeline::doc::{Align, Block, Cell, Table};

use crate::ledger::{ExtraRuns, LedgerPart};
use crate::summary::Summary;

/// The section's blocks (after its heading).
pub(super) fn blocks(s: &Summary) -> Vec<Block> {
    let Some(l) = &s.ledger else {
        return vec![Block::Para(
            "No per-test ledger: the study has no stored FAIL_TO_PASS/PASS_TO_PASS lists.".into(),
        )];
    };
    let h = &l.headline;
    let mut b = vec![Block::Para(format!(
        "{} tests in {} instances: {} stable pass, {} stable fail, {} flaky, {} environment, {} time bombs.",
        h.tests, h.instances, h.stable_pass, h.stable_fail, h.flaky, h.environment, h.time_bombs
    ))];
    b.push(Block::Para(cost_text(l)));
    let rows: Vec<Vec<Cell>> = l
        .untrusted()
        .map(|(i, t)| {
            let fails_after = match (&t.fails_after, t.fails_after_exact) {
                (Some(d), Some(true)) => d.clone(),
                (Some(d), _) => format!("by {d}"),
                (None, _) => "—".into(),
            };
            let evidence: Vec<String> = t
                .evidence
                .iter()
                .map(|w| {
                    let status = w.status.name();
                    match &w.host {
                        Some(h) => format!("{}#{} {status} on {h}", w.arm, w.idx),
                        None => format!("{}#{} {status}", w.arm, w.idx),
                    }
                })
                .collect();
            vec![
                Cell::new(i.instance_id.as_str()),
                Cell::new(t.id.as_str()),
                Cell::new(t.class.name()),
                Cell::new(if t.causes.is_empty() {
                    "—".into()
                } else {
                    t.causes.join(", ")
                }),
                Cell::new(fails_after),
                Cell::new(evidence.join("; ")),
                Cell::new(extra_text(&i.extra_runs)),
            ]
        })
        .collect();
    if rows.is_empty() {
        b.push(Block::Para(
            "Every listed test is stable: none to drop from FAIL_TO_PASS/PASS_TO_PASS.".into(),
        ));
    } else {
        b.push(Block::Table(Table {
            head: reprorun_pipeline::doc::head(&[
                ("Instance", Align::Left),
                ("Test", Align::Left),
                ("Class", Align::Left),
                ("Causes", Align::Left),
                ("Fails from", Align::Left),
                ("Evidence runs", Align::Left),
                ("Extra runs (instance)", Align::Right),
            ]),
            rows,
            wide: true,
        }));
    }
    b
}

/// `7 (leave-one-out 5, variation 0, clock 2)`, or `0`.
fn extra_text(e: &ExtraRuns) -> String {
    if e.total() == 0 {
        return "0".into();
    }
    format!(
        "{} (leave-one-out {}, variation {}, clock {})",
        e.total(),
        e.leave_one_out,
        e.variation,
        e.clock
    )
}

/// What finding the causes cost, and what the stable instances paid.
fn cost_text(l: &LedgerPart) -> String {
    let untrusted = l.untrusted().count();
    let u = &l.extra_runs_untrusted;
    let st = &l.extra_runs_stable;
    let mut t = format!(
        "Finding the causes took {} extra runs beyond the k runs per arm for {untrusted} untrusted test(s): {} leave-one-out, {} variation, {} on other days (clock sweep and bisection).",
        u.total(),
        u.leave_one_out,
        u.variation,
        u.clock
    );
    if st.leave_one_out + st.variation == 0 {
        t.push_str(" Instances whose tests are all stable got no leave-one-out or variation run");
    } else {
        t.push_str(&format!(
            " Instances whose tests are all stable got {} leave-one-out and {} variation runs",
            st.leave_one_out, st.variation
        ));
    }
    if st.clock > 0 {
        t.push_str(&format!(" and {} runs of the clock sweep's days", st.clock));
    }
    t.push('.');
    t
}
