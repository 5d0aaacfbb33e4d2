//! `reprorun reproduce ledger --db F [--json] [--export FILE]`: reads the study, builds the
//! ledger, prints it (a headline and the tests not to trust, or one JSON object) and
//! writes the graders' manifest.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::{build, export, Ledger};
use crate::store::{RunRow, Store};
use crate::summary::Summary;
use crate::ReproduceError;

/// `reproduce ledger` options.
#[derive(Debug, clap::Args)]
pub struct LedgerArgs {
    /// The study's database.
    #[arg(long, value_name = "FILE")]
    pub db: PathBuf,
    /// Print one JSON object ({"headline", "instances": [{"instance_id", "tests": [...]}]}).
    #[arg(long)]
    pub json: bool,
    /// Also write the graders' manifest (reprorun-known-flaky/1): per instance, the tests
    /// not to trust and why.
    #[arg(long, value_name = "FILE")]
    pub export: Option<PathBuf>,
}

/// Runs `reproduce ledger`.
pub(crate) fn run(a: &LedgerArgs) -> Result<(), ReproduceError> {
    let store = Store::open(&a.db, false)?;
    let ledger = from_store(&store, &store.rows()?)?;
    if let Some(path) = &a.export {
        write_export(path, &ledger, &a.db)?;
    }
    let text = if a.json {
        let v = serde_json::json!({"headline": ledger.headline(), "instances": ledger.instances});
        format!("{v}\n")
    } else {
        text(&ledger)
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(ReproduceError::Print)
}

/// The ledger of the study in `store`, whose runs are `rows`.
fn from_store(store: &Store, rows: &[RunRow]) -> Result<Ledger, ReproduceError> {
    Ok(build(
        rows,
        &store.graded_lists()?,
        &store.run_hosts()?,
        &store.bench_dates()?,
    ))
}

/// The summary with its per-test part (`summary.json`'s `ledger`).
pub(crate) fn with_ledger(store: &Store, mut s: Summary) -> Result<Summary, ReproduceError> {
    let rows = store.rows()?;
    s.ledger = super::part(&from_store(store, &rows)?, &rows);
    Ok(s)
}

fn write_export(path: &Path, ledger: &Ledger, db: &Path) -> Result<(), ReproduceError> {
    let mut bytes = serde_json::to_vec_pretty(&export(ledger, &db.display().to_string()))
        .map_err(|e| ReproduceError::Print(e.into()))?;
    bytes.push(b'\n');
    reprorun_runtime::sys::write_atomic(path, &bytes, 0o644)
        .map_err(|e| ReproduceError::Usage(format!("--export {}: {e}", path.display())))
}

/// The headline, then one line per test not to trust.
pub(crate) fn text(ledger: &Ledger) -> String {
    let h = ledger.headline();
    let mut t = format!(
        "{} tests in {} instances: {} stable pass, {} stable fail, {} flaky, {} environment, {} time bombs\n",
        h.tests, h.instances, h.stable_pass, h.stable_fail, h.flaky, h.environment, h.time_bombs
    );
    for i in &ledger.instances {
        for test in i
            .tests
            .iter()
            .filter(|t| t.class.untrusted() || t.fails_after.is_some())
        {
            let counts: Vec<String> = test
                .arms
                .iter()
                .filter(|(arm, _)| *arm == "shim" || *arm == "no_shim")
                .map(|(arm, c)| {
                    format!(
                        "{arm} {}/{} passed",
                        c.passed,
                        c.passed + c.failed + c.error + c.skipped + c.missing
                    )
                })
                .collect();
            let bomb = match (&test.fails_after, test.fails_after_exact) {
                (Some(d), Some(true)) => format!("  time bomb: fails from {d}"),
                (Some(d), _) => format!("  time bomb: fails by {d} (not bisected to the day)"),
                _ => String::new(),
            };
            t.push_str(&format!(
                "{:<11} {} {}  [{}]{}{bomb}\n",
                test.class.name(),
                i.instance_id,
                test.id,
                counts.join(", "),
                if test.causes.is_empty() {
                    String::new()
                } else {
                    format!("  causes: {}", test.causes.join(", "))
                }
            ));
        }
    }
    if h.flaky + h.environment + h.time_bombs == 0 {
        t.push_str("no flaky or environment-dependent test, no time bomb\n");
    }
    t
}
