//! The ledger's part of the study's summary (`summary.json`'s `ledger`, `reproduce run
//! --json`) and of the report: every listed test with its class, causes and evidence, and
//! what finding the causes cost — the runs made beyond phase 1 (leave-one-out, variation,
//! clock sweep and its bisection), per instance. An instance whose tests are all stable
//! pays nothing for the leave-one-out and variation runs: they are only made for an
//! instance whose tests disagree.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Headline, Ledger, TestEntry};
use crate::store::RunRow;
use crate::Arm;

/// The runs an instance got beyond phase 1, by the experiment that asked for them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ExtraRuns {
    /// `shim_without_PIN` runs (phase 2).
    pub leave_one_out: u64,
    /// `shim_vary_VARIATION` runs.
    pub variation: u64,
    /// `shim_at_DAY` runs: the days of `--clock-sweep` and the bisection's.
    pub clock: u64,
}

impl ExtraRuns {
    pub(crate) fn total(&self) -> u64 {
        self.leave_one_out + self.variation + self.clock
    }

    fn add(&mut self, o: &ExtraRuns) {
        self.leave_one_out += o.leave_one_out;
        self.variation += o.variation;
        self.clock += o.clock;
    }

    /// Counts the extra runs among `rows`, infrastructure failures included (they cost).
    pub(crate) fn of<'a>(rows: impl Iterator<Item = &'a RunRow>) -> ExtraRuns {
        let mut e = ExtraRuns::default();
        for r in rows {
            match r.arm {
                Arm::ShimWithout(_) => e.leave_one_out += 1,
                Arm::ShimVary(_) => e.variation += 1,
                Arm::ShimAt(_) => e.clock += 1,
                _ => {}
            }
        }
        e
    }
}

/// One instance's tests and the extra runs it got.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct InstanceTests {
    pub instance_id: String,
    pub extra_runs: ExtraRuns,
    pub tests: Vec<TestEntry>,
}

/// `summary.json`'s `ledger` (`spec/reproduce.md`, *Ledger*).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct LedgerPart {
    pub headline: Headline,
    /// Extra runs of the instances with a test not to trust or a time bomb.
    pub extra_runs_untrusted: ExtraRuns,
    /// Extra runs of the instances whose tests are all stable (0 without `--clock-sweep`).
    pub extra_runs_stable: ExtraRuns,
    pub instances: Vec<InstanceTests>,
}

impl LedgerPart {
    /// The untrusted tests (flaky, environment, time bombs) with their instance.
    pub(crate) fn untrusted(&self) -> impl Iterator<Item = (&InstanceTests, &TestEntry)> {
        self.instances.iter().flat_map(|i| {
            i.tests
                .iter()
                .filter(|t| t.class.untrusted() || t.fails_after.is_some())
                .map(move |t| (i, t))
        })
    }
}

/// The part of `ledger` over `rows`; `None` when no instance has stored test lists (a
/// study made before they were kept), so such a summary keeps its old shape.
pub(crate) fn part(ledger: &Ledger, rows: &[RunRow]) -> Option<LedgerPart> {
    if ledger.instances.is_empty() {
        return None;
    }
    let mut by_instance: BTreeMap<&str, Vec<&RunRow>> = BTreeMap::new();
    for r in rows {
        by_instance.entry(&r.instance_id).or_default().push(r);
    }
    let mut p = LedgerPart {
        headline: ledger.headline(),
        extra_runs_untrusted: ExtraRuns::default(),
        extra_runs_stable: ExtraRuns::default(),
        instances: Vec::new(),
    };
    for i in &ledger.instances {
        let extra = ExtraRuns::of(
            by_instance
                .get(i.instance_id.as_str())
                .into_iter()
                .flatten()
                .copied(),
        );
        let untrusted = i
            .tests
            .iter()
            .any(|t| t.class.untrusted() || t.fails_after.is_some());
        if untrusted {
            p.extra_runs_untrusted.add(&extra);
        } else {
            p.extra_runs_stable.add(&extra);
        }
        p.instances.push(InstanceTests {
            instance_id: i.instance_id.clone(),
            extra_runs: extra,
            tests: i.tests.clone(),
        });
    }
    Some(p)
}
