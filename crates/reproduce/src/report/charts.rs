//! The reproduce report's charts, drawn by the pipeline's SVG helpers: (a) outcomes per
//! arm as stacked bars, (b) the share of patches not yet drifted against patch age.

use maud::Markup;

use super::arms;
use crate::stats::Class;
use crate::summary::{Drift, Summary};
use reprorun_pipeline::svg::{self, Bar, Survival};

const COLORS: [(Class, &str); 4] = [
    (Class::Reproducible, "#2e7d32"),
    (Class::Flaky, "#f9a825"),
    (Class::Broken, "#c62828"),
    (Class::Error, "#616161"),
];

/// Chart (a): one stacked horizontal bar per arm with classified instances (shim, no shim,
/// baseline shim, baseline no shim), segments for reproducible/flaky/broken/error as shares of the
/// arm's instances. Each bar is a `<g class="bar">`.
pub(super) fn outcomes(s: &Summary) -> Markup {
    let segments: Vec<(&str, &str)> = COLORS.iter().map(|(k, c)| (k.name(), *c)).collect();
    let bars: Vec<Bar> = arms(s)
        .into_iter()
        .map(|(label, counts)| Bar {
            label: label.into(),
            counts: COLORS.iter().map(|(k, _)| counts.get(*k)).collect(),
        })
        .collect();
    svg::stacked_bars(
        "outcomes",
        "Patch outcomes per arm",
        "No classified instances.",
        &segments,
        &bars,
    )
}

/// Chart (b): the share of patches not yet drifted against patch age, with the fit
/// exp(−λt) and its 95% band when the half-life is estimable.
pub(super) fn survival(s: &Summary, drift: &Drift) -> Markup {
    let ln2 = std::f64::consts::LN_2;
    let fit = match (s.half_life_days, s.half_life_ci) {
        (Some(h), Some([lo, hi])) if [h, lo, hi].iter().all(|v| v.is_finite() && *v > 0.0) => {
            Some((ln2 / h, ln2 / hi, ln2 / lo))
        }
        _ => None,
    };
    svg::survival(&Survival {
        points: &drift.points,
        fit,
        aria: "Share of patches not yet drifted by age",
        x_label: "patch age (days)",
        y_label: "share not yet drifted",
        unit: "days",
        kept: "not drifted",
        event: "drifted",
        empty: "No drift observations.",
    })
}

/// Chart (a) as SVG text.
#[cfg(test)]
pub(super) fn outcome_svg(s: &Summary) -> String {
    outcomes(s).into_string()
}

/// Chart (b) as SVG text.
#[cfg(test)]
pub(super) fn survival_svg(s: &Summary, drift: &Drift) -> String {
    survival(s, drift).into_string()
}
