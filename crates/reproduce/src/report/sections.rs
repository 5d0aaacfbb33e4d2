//! The sections of the reproduce report, as a document: the numbers formatted, the
//! sentences written, the tables laid out. Rendering is the document's business.

use super::{arms, charts};
use crate::stats::Class;
use crate::summary::Summary;
use crate::{Infra, Mode};
use reprorun_pipeline::doc::{Align, Block, Cell, Doc, Header, Table};

/// A header of fixed text.
fn h(text: &'static str) -> Header {
    Header::Borrowed(text)
}

/// CSS of the report's own classes.
const CSS: &str =
    ".reproducible{color:#2e7d32}.flaky{color:#b26a00}.broken{color:#c62828}.error{color:#616161}";

const NA: &str = "n/a";

/// A fraction as a percentage with one decimal (`0.068` → `6.8%`).
pub(super) fn pct(x: Option<f64>) -> String {
    match x {
        Some(v) if v.is_finite() => format!("{:.1}%", v * 100.0),
        _ => NA.into(),
    }
}

/// A signed percentage (`+6.8%`, `-1.2%`).
pub(super) fn signed_pct(x: Option<f64>) -> String {
    match x {
        Some(v) if v.is_finite() => format!("{:+.1}%", v * 100.0),
        _ => NA.into(),
    }
}

fn rate(x: Option<f64>) -> String {
    match x {
        Some(v) if v.is_finite() => format!("{v:.2}"),
        _ => NA.into(),
    }
}

fn days(x: Option<f64>) -> String {
    match x {
        Some(v) if v.is_finite() => format!("{v:.0}"),
        _ => NA.into(),
    }
}

/// A p-value: four decimals, scientific below 0.001, and a bound when it underflowed.
pub(super) fn p_value(p: f64) -> String {
    if !p.is_finite() {
        NA.into()
    } else if p == 0.0 {
        "< 1e-300".into()
    } else if p < 0.001 {
        format!("{p:.2e}")
    } else {
        format!("{p:.4}")
    }
}

fn count_pct(n: u64, total: u64) -> String {
    if total == 0 {
        format!("{n}")
    } else {
        format!("{n} ({})", pct(Some(n as f64 / total as f64)))
    }
}

fn class_name(c: Option<Class>) -> &'static str {
    c.map_or(NA, Class::name)
}

fn join_names<T: Copy>(items: &[T], name: impl Fn(T) -> &'static str) -> String {
    items
        .iter()
        .map(|&i| name(i))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Instances that have a class in both patched arms (McNemar's pairs).
fn pairs(s: &Summary) -> usize {
    s.instances
        .iter()
        .filter(|r| r.class_shim.is_some() && r.class_no_shim.is_some())
        .count()
}

/// The sentences of the McNemar, overhead, baseline and drift sections (plain text, to be
/// escaped by the format).
fn mcnemar_text(s: &Summary) -> String {
    match s.mcnemar {
        Some(m) => format!(
            "Exact McNemar test over {} paired instances: b = {} reproducible only with the \
             shim, c = {} only without it; two-sided p = {}.",
            pairs(s),
            m.b,
            m.c,
            p_value(m.p)
        ),
        None => "No instance has runs both with and without the shim.".into(),
    }
}

fn overhead_text(s: &Summary) -> String {
    match s.overhead_median {
        Some(_) => format!(
            "Median wall-clock overhead of the shim: {} (interquartile range {} to {}, over {} \
             instances timed in both arms: {} shim and {} no-shim runs that ran the tests; \
             runs that errored or failed to run are not timed, and {} instances are left out \
             for lack of such runs in one arm).",
            signed_pct(s.overhead_median),
            signed_pct(s.overhead_iqr.map(|q| q[0])),
            signed_pct(s.overhead_iqr.map(|q| q[1])),
            s.overhead_instances,
            s.overhead_runs.shim,
            s.overhead_runs.no_shim,
            s.overhead_runs.instances_left_out
        ),
        None => {
            "Median wall-clock overhead of the shim: n/a (no instance timed in both arms).".into()
        }
    }
}

fn baseline_text(s: &Summary) -> String {
    match s.baseline_explained {
        Some(e) => format!(
            "Share of the flaky patches whose unpatched baseline is flaky too: shim {}, no \
             shim {}.",
            pct(e.shim),
            pct(e.no_shim)
        ),
        None => "No baseline runs.".into(),
    }
}

/// Fewer drift events than this, and the half-life is flagged as resting on too little.
const FEW_DRIFT_EVENTS: u64 = 5;

fn drift_text(s: &Summary) -> String {
    let Some(d) = &s.drift else {
        return "No no-shim runs, so no dependency-drift observations.".into();
    };
    let mut text = half_life_text(s, d);
    if s.half_life_days.is_some() && d.events < FEW_DRIFT_EVENTS {
        text.push_str(&format!(
            " Caution: this rests on {} drift event{} (fewer than {FEW_DRIFT_EVENTS}); the \
             estimate and its interval are not to be relied on.",
            d.events,
            if d.events == 1 { "" } else { "s" }
        ));
    }
    if let Some([from, to]) = &d.measured_at {
        let when = match from == to {
            true => format!("on {from}"),
            false => format!("between {from} and {to}"),
        };
        text.push_str(&format!(
            " A patch's age is measured from its benchmark date to its first no-shim run, \
             and these runs started {when} (UTC): the same study run later sees older \
             patches and other figures."
        ));
    }
    text
}

fn half_life_text(s: &Summary, d: &crate::summary::Drift) -> String {
    match (s.half_life_days, s.half_life_ci) {
        (Some(h), Some([lo, hi])) => format!(
            "Dependency-drift half-life: {} days (95% CI {}–{}), from {} observations with {} \
             drift events (exponential hazard, complementary log-log fit).",
            days(Some(h)),
            days(Some(lo)),
            days(Some(hi)),
            d.observations,
            d.events
        ),
        _ => format!(
            "Dependency-drift half-life: not estimable from {} observations with {} drift \
             events (it needs at least one drifted and one undrifted patch).",
            d.observations, d.events
        ),
    }
}

/// The report document.
pub(super) fn document(s: &Summary, links: &super::Links) -> Doc {
    let mut b = vec![Block::Para(format!(
        "Runs per arm (k): {}. Instances: {}. Runs: {}.",
        s.k, s.instances_total, s.runs_total
    ))];
    b.push(Block::Heading("Outcomes".into()));
    b.push(outcomes(s));
    b.push(Block::Chart(charts::outcomes(s)));
    b.push(Block::Heading("With and without the shim".into()));
    b.push(Block::Para(mcnemar_text(s)));
    b.push(Block::Para(overhead_text(s)));
    b.push(Block::Heading("Baseline flakiness".into()));
    b.push(Block::Para(baseline_text(s)));
    b.push(Block::Heading("Failure modes".into()));
    b.push(Block::Para(
        "Non-reproducing patches per mode (a patch can show several).".into(),
    ));
    b.push(Block::Table(failure_modes(s)));
    b.push(Block::Heading("Dependency drift".into()));
    b.push(Block::Para(drift_text(s)));
    if let Some(d) = &s.drift {
        b.push(Block::Chart(charts::survival(s, d)));
    }
    b.push(Block::Heading("Infrastructure failures".into()));
    b.push(Block::Table(Table {
        head: vec![(h("Cause"), Align::Left), (h("Runs"), Align::Right)],
        rows: Infra::ALL
            .iter()
            .map(|&i| vec![Cell::new(i.name()), Cell::new(s.infra.get(i).to_string())])
            .collect(),
        wide: false,
    }));
    b.push(Block::Heading("Tests that did not pass".into()));
    b.push(failed_tests(s));
    b.push(Block::Heading("Per-test ledger".into()));
    b.extend(super::ledger::blocks(s));
    b.push(Block::Heading("Instances".into()));
    b.push(if s.instances.is_empty() {
        Block::Para("No instances.".into())
    } else {
        Block::Table(instances(s, links))
    });
    Doc {
        title: "reprorun reproduce report".into(),
        css: CSS,
        blocks: b,
    }
}

/// The outcome counts per arm, or a sentence when no instance is classified.
fn outcomes(s: &Summary) -> Block {
    let arms = arms(s);
    if arms.is_empty() {
        return Block::Para("No classified instances.".into());
    }
    let head = [
        "Arm",
        "Instances",
        "Reproducible",
        "Flaky",
        "Broken",
        "Error",
        "Resolved",
    ];
    Block::Table(Table {
        head: head
            .iter()
            .map(|&name| {
                (
                    h(name),
                    if name == "Arm" {
                        Align::Left
                    } else {
                        Align::Right
                    },
                )
            })
            .collect(),
        rows: arms
            .iter()
            .map(|(label, c)| {
                let t = c.total();
                vec![
                    Cell::new(*label),
                    Cell::new(t.to_string()),
                    Cell::new(count_pct(c.reproducible, t)),
                    Cell::new(count_pct(c.flaky, t)),
                    Cell::new(count_pct(c.broken, t)),
                    Cell::new(count_pct(c.error, t)),
                    Cell::new(resolved_rate(s, label)),
                ]
            })
            .collect(),
        wide: false,
    })
}

/// An arm's resolved rate (`60.0% of 5 runs`), by its report label.
fn resolved_rate(s: &Summary, label: &str) -> String {
    match s.resolved.get(&label.replace(' ', "_")) {
        Some(r) => format!("{} of {} runs", pct(r.rate), r.runs),
        None => NA.into(),
    }
}

/// The per-test view: which listed test did not pass in which run.
fn failed_tests(s: &Summary) -> Block {
    let rows: Vec<Vec<Cell>> = s
        .instances
        .iter()
        .flat_map(|i| {
            i.failed_tests.iter().map(|(test, runs)| {
                vec![
                    Cell::new(i.instance_id.as_str()),
                    Cell::new(test.as_str()),
                    Cell::new(runs.join(", ")),
                ]
            })
        })
        .collect();
    if rows.is_empty() {
        return Block::Para("Every listed test passed in every run that ran the tests.".into());
    }
    Block::Table(Table {
        head: reprorun_pipeline::doc::head(&[
            ("Instance", Align::Left),
            ("Test", Align::Left),
            ("Runs where it failed or was missing", Align::Left),
        ]),
        rows,
        wide: true,
    })
}

fn failure_modes(s: &Summary) -> Table {
    let no_shim = s.failure_modes.no_shim.as_ref();
    let mut head = vec![(h("Mode"), Align::Left), (h("Shim"), Align::Right)];
    if no_shim.is_some() {
        head.push((h("No shim"), Align::Right));
    }
    let count = |m: &std::collections::BTreeMap<Mode, u64>, mode| {
        Cell::new(m.get(&mode).copied().unwrap_or(0).to_string())
    };
    let rows = Mode::ALL
        .iter()
        .map(|&mode| {
            let mut row = vec![Cell::new(mode.name()), count(&s.failure_modes.shim, mode)];
            if let Some(n) = no_shim {
                row.push(count(n, mode));
            }
            row
        })
        .collect();
    Table {
        head,
        rows,
        wide: false,
    }
}

fn instances(s: &Summary, links: &super::Links) -> Table {
    use Align::{Left, Right};
    // A study merged from a cluster says on how many hosts each patch's runs landed.
    let hosts = s.instances.iter().any(|i| i.distinct_hosts.is_some());
    let mut head = reprorun_pipeline::doc::head(&[
        ("Instance", Left),
        ("r shim", Right),
        ("Class shim", Left),
        ("r no shim", Right),
        ("Class no shim", Left),
        ("r baseline shim", Right),
        ("r baseline no shim", Right),
        ("Modes shim", Left),
        ("Modes no shim", Left),
        ("Pins", Left),
        ("Infra", Left),
        ("Age (days)", Right),
    ]);
    if hosts {
        head.push((h("Hosts"), Right));
    }
    let class = |c: Option<Class>| match c {
        Some(k) => Cell::classed(class_name(c), k.name()),
        None => Cell::new(class_name(c)),
    };
    let rows = s
        .instances
        .iter()
        .map(|r| {
            let mut row = vec![
                match links.get(&r.instance_id) {
                    Some(path) => Cell::linked(r.instance_id.as_str(), path),
                    None => Cell::new(r.instance_id.as_str()),
                },
                Cell::new(rate(r.r_shim)),
                class(r.class_shim),
                Cell::new(rate(r.r_no_shim)),
                class(r.class_no_shim),
                Cell::new(rate(r.r_baseline_shim)),
                Cell::new(rate(r.r_baseline_no_shim)),
                Cell::new(join_names(&r.modes_shim, Mode::name)),
                Cell::new(join_names(&r.modes_no_shim, Mode::name)),
                Cell::new(join_names(&r.pins, |p| p.name())),
                Cell::new(join_names(&r.infra, Infra::name)),
                Cell::new(days(r.age_days)),
            ];
            if hosts {
                row.push(Cell::new(
                    r.distinct_hosts.map_or("n/a".into(), |n| n.to_string()),
                ));
            }
            row
        })
        .collect();
    Table {
        head,
        rows,
        wide: true,
    }
}
