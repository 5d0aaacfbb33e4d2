//! The report's line chart: a rate against k (1..K) per series, built with maud like the
//! pipeline's charts (text escaped through `Text`, one-decimal coordinates, deterministic).

use maud::{html, Markup};

use reprorun_pipeline::doc::Text;
use reprorun_pipeline::svg::c;

/// One line: its name, colour, whether dashed, and a rate per k (`None`: no point).
pub(crate) struct Series {
    pub(crate) name: String,
    pub(crate) color: &'static str,
    pub(crate) dashed: bool,
    pub(crate) values: Vec<Option<f64>>,
}

/// Colours of the configurations, in order (then again).
pub(crate) const PALETTE: [&str; 6] = [
    "#1565c0", "#c62828", "#2e7d32", "#6a1b9a", "#ef6c00", "#00838f",
];

/// Rates (0..1, shown as %) against k = 1..=len, one `<polyline class="series">` per series,
/// a legend on the right.
pub(crate) fn lines(aria: &str, y_label: &str, series: &[Series]) -> Markup {
    let (width, height) = (760.0, 320.0);
    let (left, right, top, bottom) = (56.0, 240.0, 16.0, 46.0);
    let (pw, ph) = (width - left - right, height - top - bottom);
    let n = series
        .iter()
        .map(|s| s.values.len())
        .max()
        .unwrap_or(0)
        .max(1);
    let px = |k: usize| {
        left + pw
            * if n > 1 {
                (k - 1) as f64 / (n - 1) as f64
            } else {
                0.5
            }
    };
    let py = |v: f64| top + ph * (1.0 - v.clamp(0.0, 1.0));
    let (w, h) = (c(width), c(height));
    let mid_y = c(top + ph / 2.0);
    html! {
        svg class="curves" width=(w) height=(h) viewBox={ "0 0 " (w) " " (h) }
            role="img" aria-label=(Text(aria)) {
            rect x=(c(left)) y=(c(top)) width=(c(pw)) height=(c(ph)) fill="none" stroke="#999" {}
            @for i in 0..=4 {
                @let v = f64::from(i) / 4.0;
                line x1=(c(left)) y1=(c(py(v))) x2=(c(left + pw)) y2=(c(py(v))) stroke="#eee" {}
                text x=(c(left - 6.0)) y=(c(py(v) + 4.0)) text-anchor="end" { (format!("{:.0}%", v * 100.0)) }
            }
            @for k in 1..=n {
                text x=(c(px(k))) y=(c(top + ph + 16.0)) text-anchor="middle" { (k) }
            }
            text x=(c(left + pw / 2.0)) y=(c(height - 8.0)) text-anchor="middle" { "k (findings considered)" }
            text x="14" y=(mid_y) text-anchor="middle" transform={ "rotate(-90 14 " (mid_y) ")" } { (Text(y_label)) }
            @for s in series {
                @let pts: Vec<String> = s.values.iter().enumerate()
                    .filter_map(|(i, v)| v.map(|v| format!("{},{}", c(px(i + 1)), c(py(v)))))
                    .collect();
                polyline class="series" points=(pts.join(" ")) fill="none" stroke=(s.color)
                    stroke-width="2" stroke-dasharray=[s.dashed.then_some("6 4")] {
                    title { (Text(&s.name)) }
                }
                @for (i, v) in s.values.iter().enumerate() {
                    @if let Some(v) = v {
                        circle cx=(c(px(i + 1))) cy=(c(py(*v))) r="2.5" fill=(s.color) {
                            title { (Text(&s.name)) " @" (i + 1) ": " (format!("{:.1}%", v * 100.0)) }
                        }
                    }
                }
            }
            @for (i, s) in series.iter().enumerate() {
                @let y = top + 10.0 + 18.0 * i as f64;
                line x1=(c(left + pw + 14.0)) y1=(c(y)) x2=(c(left + pw + 36.0)) y2=(c(y))
                    stroke=(s.color) stroke-width="2" stroke-dasharray=[s.dashed.then_some("6 4")] {}
                text x=(c(left + pw + 42.0)) y=(c(y + 4.0)) { (Text(&s.name)) }
            }
        }
    }
}

/// One series of a bar chart: its name, colour and a share (0..1) per group.
pub(crate) struct Bars {
    pub(crate) name: String,
    pub(crate) color: &'static str,
    pub(crate) values: Vec<f64>,
}

/// Grouped vertical bars: per group (x axis, `groups` names), one `<rect class="bar">` per
/// series, a legend on the right.
pub(crate) fn bars(aria: &str, y_label: &str, groups: &[&str], series: &[Bars]) -> Markup {
    // Wide enough for a class name (`silent_wrong_number`, 12 px) under each group.
    let (width, height) = (880.0, 300.0);
    let (left, right, top, bottom) = (56.0, 240.0, 16.0, 46.0);
    let (pw, ph) = (width - left - right, height - top - bottom);
    let slot = pw / groups.len().max(1) as f64;
    let bar = (slot * 0.8) / series.len().max(1) as f64;
    let py = |v: f64| top + ph * (1.0 - v.clamp(0.0, 1.0));
    let (w, h) = (c(width), c(height));
    let mid_y = c(top + ph / 2.0);
    html! {
        svg class="bars" width=(w) height=(h) viewBox={ "0 0 " (w) " " (h) }
            role="img" aria-label=(Text(aria)) {
            rect x=(c(left)) y=(c(top)) width=(c(pw)) height=(c(ph)) fill="none" stroke="#999" {}
            @for i in 0..=4 {
                @let v = f64::from(i) / 4.0;
                line x1=(c(left)) y1=(c(py(v))) x2=(c(left + pw)) y2=(c(py(v))) stroke="#eee" {}
                text x=(c(left - 6.0)) y=(c(py(v) + 4.0)) text-anchor="end" { (format!("{:.0}%", v * 100.0)) }
            }
            @for (g, name) in groups.iter().enumerate() {
                text x=(c(left + slot * (g as f64 + 0.5))) y=(c(top + ph + 16.0)) text-anchor="middle" font-size="12" { (Text(name)) }
                @for (i, s) in series.iter().enumerate() {
                    @let v = s.values.get(g).copied().unwrap_or(0.0).clamp(0.0, 1.0);
                    rect class="bar" x=(c(left + slot * g as f64 + slot * 0.1 + bar * i as f64)) y=(c(py(v)))
                        width=(c(bar)) height=(c(ph * v)) fill=(s.color) {
                        title { (Text(&s.name)) ", " (Text(name)) ": " (format!("{:.1}%", v * 100.0)) }
                    }
                }
            }
            text x="14" y=(mid_y) text-anchor="middle" transform={ "rotate(-90 14 " (mid_y) ")" } { (Text(y_label)) }
            @for (i, s) in series.iter().enumerate() {
                @let y = top + 10.0 + 18.0 * i as f64;
                rect x=(c(left + pw + 14.0)) y=(c(y - 6.0)) width="12" height="12" fill=(s.color) {}
                text x=(c(left + pw + 32.0)) y=(c(y + 4.0)) { (Text(&s.name)) }
            }
        }
    }
}
