//! SVG charts for report documents, built with maud (text escaped by construction through
//! [`Text`]): stacked bars and a survival curve with its fit. Coordinates have one decimal;
//! the same data gives the same bytes.

use maud::{html, Markup};

use super::doc::Text;

/// An SVG coordinate with one decimal; 0 for anything not finite.
pub fn c(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.1}")
    } else {
        "0".into()
    }
}

/// A round axis step (1, 2 or 5 × 10^n) giving at most about `ticks` intervals over `span`.
pub fn nice_step(span: f64, ticks: f64) -> f64 {
    if !(span.is_finite() && span > 0.0) {
        return 1.0;
    }
    let raw = span / ticks;
    let mag = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag)
}

/// One bar: the arm (the condition compared) it stands for, and a count per segment.
pub struct Bar {
    pub label: String,
    pub counts: Vec<u64>,
}

/// Stacked horizontal bars: one `<g class="bar" data-arm="LABEL_WITH_UNDERSCORES">` per
/// bar, segments as shares of the bar's total (`segments`: name and colour, in order),
/// counts in the segments wide enough and after each bar, and a legend.
pub fn stacked_bars(
    class: &str,
    aria: &str,
    empty: &str,
    segments: &[(&str, &str)],
    bars: &[Bar],
) -> Markup {
    let (width, label_w, bar_w, row_h, bar_h, top) = (720.0, 130.0, 400.0, 34.0, 22.0, 40.0);
    let height = top + row_h * bars.len().max(1) as f64 + 10.0;
    let (w, h) = (c(width), c(height));
    html! {
        svg class=(Text(class)) width=(w) height=(h) viewBox={ "0 0 " (w) " " (h) }
            role="img" aria-label=(Text(aria)) {
            @if bars.is_empty() {
                text x="10" y="30" { (Text(empty)) }
            } @else {
                @for (i, (name, color)) in segments.iter().enumerate() {
                    @let x = label_w + 110.0 * i as f64;
                    rect x=(c(x)) y="10" width="12" height="12" fill=(Text(color)) {}
                    text x=(c(x + 16.0)) y="20" { (Text(name)) }
                }
                @for (i, bar) in bars.iter().enumerate() {
                    (one_bar(bar, top + row_h * i as f64, (label_w, bar_w, bar_h), segments))
                }
            }
        }
    }
}

fn one_bar(
    bar: &Bar,
    y: f64,
    (label_w, bar_w, bar_h): (f64, f64, f64),
    segments: &[(&str, &str)],
) -> Markup {
    let total: u64 = bar.counts.iter().sum();
    let mut x = label_w;
    let mut parts = Vec::new();
    for (&n, (name, color)) in bar.counts.iter().zip(segments) {
        if n == 0 || total == 0 {
            continue;
        }
        let w = bar_w * n as f64 / total as f64;
        parts.push((x, w, n, *name, *color));
        x += w;
    }
    let counts: Vec<String> = bar.counts.iter().map(u64::to_string).collect();
    let text_y = c(y + bar_h * 0.7);
    html! {
        g class="bar" data-arm=(Text(&bar.label.replace(' ', "_"))) {
            text x=(c(label_w - 8.0)) y=(text_y) text-anchor="end" { (Text(&bar.label)) }
            @for (x, w, n, name, color) in parts {
                rect x=(c(x)) y=(c(y)) width=(c(w)) height=(c(bar_h)) fill=(Text(color)) {
                    title { (Text(&bar.label)) ": " (n) " " (Text(name)) }
                }
                @if w >= 26.0 {
                    text x=(c(x + w / 2.0)) y=(text_y) text-anchor="middle" fill="#fff" { (n) }
                }
            }
            text x=(c(label_w + bar_w + 8.0)) y=(text_y) {
                (counts.join(" / ")) " (n = " (total) ")"
            }
        }
    }
}

/// A survival chart's data and words.
pub struct Survival<'a> {
    /// `(age, event)` observations; ages that are not finite and > 0 are left out.
    pub points: &'a [(f64, bool)],
    /// A fitted exponential hazard: (λ, λ at the low end, λ at the high end of its 95% CI).
    pub fit: Option<(f64, f64, f64)>,
    pub aria: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    /// The unit of ages (`days`), and what a point without and with the event is called.
    pub unit: &'a str,
    pub kept: &'a str,
    pub event: &'a str,
    pub empty: &'a str,
}

/// Plot geometry: the plot area's left, top, width and height and the age axis' end.
struct Frame {
    left: f64,
    top: f64,
    pw: f64,
    ph: f64,
    x_max: f64,
}

impl Frame {
    fn px(&self, age: f64) -> f64 {
        self.left + self.pw * (age / self.x_max).clamp(0.0, 1.0)
    }
    fn py(&self, share: f64) -> f64 {
        self.top + self.ph * (1.0 - share.clamp(0.0, 1.0))
    }
}

/// The share without the event against age: with a fit, the curve exp(−λt) and its band;
/// always each observation as a point (hollow circle at 1 without the event, cross at 0
/// with it, with a small deterministic vertical spread) and the observed share without the
/// event in up to ten age bins (squares), and a legend.
pub fn survival(s: &Survival) -> Markup {
    let (width, height) = (680.0, 340.0);
    let (left, right, top, bottom) = (60.0, 150.0, 20.0, 50.0);
    let (w, h) = (c(width), c(height));
    let points: Vec<(f64, bool)> = s
        .points
        .iter()
        .copied()
        .filter(|(a, _)| a.is_finite() && *a > 0.0)
        .collect();
    let max_age = points.iter().map(|(a, _)| *a).fold(0.0_f64, f64::max);
    let step = nice_step(max_age, 6.0);
    let f = Frame {
        left,
        top,
        pw: width - left - right,
        ph: height - top - bottom,
        x_max: ((max_age / step).ceil() * step).max(step),
    };
    html! {
        svg class="survival" width=(w) height=(h) viewBox={ "0 0 " (w) " " (h) }
            role="img" aria-label=(Text(s.aria)) {
            @if points.is_empty() {
                text x="10" y="30" { (Text(s.empty)) }
            } @else {
                (axes(&f, step, height, s))
                @if let Some(fit) = s.fit { (fit_curve(&f, fit)) }
                (observations(&f, &points))
                (bins(&f, &points, s))
                (legend(left + f.pw + 12.0, top + 10.0, s))
            }
        }
    }
}

fn axes(f: &Frame, step: f64, height: f64, s: &Survival) -> Markup {
    let ticks = (f.x_max / step).round() as u64;
    let (bottom, mid_y) = (f.top + f.ph, c(f.top + f.ph / 2.0));
    html! {
        rect x=(c(f.left)) y=(c(f.top)) width=(c(f.pw)) height=(c(f.ph)) fill="none" stroke="#999" {}
        @for i in 0..=4 {
            @let share = f64::from(i) / 4.0;
            @let y = c(f.py(share));
            line x1=(c(f.left)) y1=(y) x2=(c(f.left + f.pw)) y2=(y) stroke="#eee" {}
            text x=(c(f.left - 6.0)) y=(c(f.py(share) + 4.0)) text-anchor="end" { (format!("{share:.2}")) }
        }
        @for i in 0..=ticks.min(20) {
            @let age = step * i as f64;
            @let x = c(f.px(age));
            line x1=(x) y1=(c(bottom)) x2=(x) y2=(c(bottom + 5.0)) stroke="#999" {}
            text x=(x) y=(c(bottom + 18.0)) text-anchor="middle" { (format!("{age:.0}")) }
        }
        text x=(c(f.left + f.pw / 2.0)) y=(c(height - 10.0)) text-anchor="middle" { (Text(s.x_label)) }
        text x="14" y=(mid_y) text-anchor="middle" transform={ "rotate(-90 14 " (mid_y) ")" } { (Text(s.y_label)) }
    }
}

fn fit_curve(f: &Frame, (lambda, lambda_lo, lambda_hi): (f64, f64, f64)) -> Markup {
    let samples: Vec<f64> = (0..=100).map(|i| f.x_max * f64::from(i) / 100.0).collect();
    let at = |t: f64, l: f64| format!("{},{}", c(f.px(t)), c(f.py((-l * t).exp())));
    let band: Vec<String> = samples
        .iter()
        .map(|&t| at(t, lambda_lo))
        .chain(samples.iter().rev().map(|&t| at(t, lambda_hi)))
        .collect();
    let curve: Vec<String> = samples.iter().map(|&t| at(t, lambda)).collect();
    html! {
        polygon class="ci" points=(band.join(" ")) fill="#90caf9" fill-opacity="0.4" stroke="none" {}
        polyline class="fit" points=(curve.join(" ")) fill="none" stroke="#1565c0" stroke-width="2" {}
    }
}

/// A cross centred at (x, y).
fn cross(x: f64, y: f64) -> String {
    format!(
        "M{} {}L{} {}M{} {}L{} {}",
        c(x - 3.0),
        c(y - 3.0),
        c(x + 3.0),
        c(y + 3.0),
        c(x - 3.0),
        c(y + 3.0),
        c(x + 3.0),
        c(y - 3.0)
    )
}

fn observations(f: &Frame, points: &[(f64, bool)]) -> Markup {
    html! {
        @for (i, &(age, event)) in points.iter().enumerate() {
            @let jitter = ((i as u64).wrapping_mul(2_654_435_761) % 9) as f64 - 4.0;
            @let x = f.px(age);
            @if event {
                path class="drifted" d=(cross(x, f.py(0.0) - 6.0 + jitter * 0.5)) stroke="#c62828" {}
            } @else {
                circle class="kept" cx=(c(x)) cy=(c(f.py(1.0) + 6.0 + jitter * 0.5)) r="3" fill="none" stroke="#2e7d32" {}
            }
        }
    }
}

fn bins(f: &Frame, points: &[(f64, bool)], s: &Survival) -> Markup {
    let n_bins = 10_usize;
    let bin_w = f.x_max / n_bins as f64;
    let mut out = Vec::new();
    for b in 0..n_bins {
        let (lo, hi) = (bin_w * b as f64, bin_w * (b + 1) as f64);
        let in_bin: Vec<bool> = points
            .iter()
            .filter(|(a, _)| *a > lo && (*a <= hi || b + 1 == n_bins))
            .map(|(_, e)| *e)
            .collect();
        if in_bin.is_empty() {
            continue;
        }
        let kept = in_bin.iter().filter(|e| !**e).count();
        let share = kept as f64 / in_bin.len() as f64;
        out.push((lo, hi, kept, in_bin.len(), share));
    }
    html! {
        @for (lo, hi, kept, n, share) in out {
            rect class="bin" x=(c(f.px((lo + hi) / 2.0) - 4.0)) y=(c(f.py(share) - 4.0)) width="8" height="8" fill="#555" {
                title { (format!("ages {lo:.0}–{hi:.0} ")) (Text(s.unit)) ": " (kept) " of " (n) " " (Text(s.kept)) }
            }
        }
    }
}

fn legend(lx: f64, top: f64, s: &Survival) -> Markup {
    let mut ly = top;
    let fit_y = ly;
    if s.fit.is_some() {
        ly += 40.0;
    }
    let (kept_y, event_y, bin_y) = (ly, ly + 20.0, ly + 40.0);
    html! {
        @if s.fit.is_some() {
            line x1=(c(lx)) y1=(c(fit_y)) x2=(c(lx + 18.0)) y2=(c(fit_y)) stroke="#1565c0" stroke-width="2" {}
            text x=(c(lx + 24.0)) y=(c(fit_y + 4.0)) { "fit exp(−λt)" }
            rect x=(c(lx)) y=(c(fit_y + 20.0 - 5.0)) width="18" height="10" fill="#90caf9" fill-opacity="0.4" {}
            text x=(c(lx + 24.0)) y=(c(fit_y + 24.0)) { "95% CI" }
        }
        circle cx=(c(lx + 9.0)) cy=(c(kept_y)) r="3" fill="none" stroke="#2e7d32" {}
        text x=(c(lx + 24.0)) y=(c(kept_y + 4.0)) { (Text(s.kept)) }
        path d=(cross(lx + 9.0, event_y)) stroke="#c62828" {}
        text x=(c(lx + 24.0)) y=(c(event_y + 4.0)) { (Text(s.event)) }
        rect x=(c(lx + 5.0)) y=(c(bin_y - 4.0)) width="8" height="8" fill="#555" {}
        text x=(c(lx + 24.0)) y=(c(bin_y + 4.0)) { "share per age bin" }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_and_their_text_are_escaped() {
        let svg = stacked_bars(
            "outcomes",
            "a",
            "none",
            &[("ok", "#0f0"), ("bad", "#f00")],
            &[Bar {
                label: "<x> y".into(),
                counts: vec![3, 1],
            }],
        )
        .into_string();
        assert!(svg.contains("data-arm=\"&lt;x&gt;_y\""), "{svg}");
        assert!(svg.contains("<title>&lt;x&gt; y: 3 ok</title>"), "{svg}");
        assert!(svg.contains(">3 / 1 (n = 4)</text>"), "{svg}");
        assert!(!svg.contains("<x>"));
        let empty = stacked_bars("o", "a", "nothing", &[], &[]).into_string();
        assert!(
            empty.contains("<text x=\"10\" y=\"30\">nothing</text>"),
            "{empty}"
        );
    }

    #[test]
    fn steps_are_round() {
        assert_eq!(nice_step(1000.0, 6.0), 200.0);
        assert_eq!(nice_step(f64::NAN, 6.0), 1.0);
        assert_eq!(c(f64::INFINITY), "0");
        assert_eq!(c(1.25), "1.2");
    }
}
