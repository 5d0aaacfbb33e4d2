//! `reprorun reproduce report`: the [`Summary`] as Markdown (`report.md`), as one
//! self-contained HTML page with inline SVG charts (`report.html`: inline CSS, no scripts,
//! no external URLs), and as JSON (`summary.json`).
//!
//! Output is deterministic: the same summary gives the same bytes. Every piece of text that
//! comes from the study (instance ids come from user files) is escaped for the format it
//! goes into.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::stats::Class;
use super::summary::{ClassCounts, Drift, Summary};
use super::{Infra, Mode};

/// The report's file names, in the order [`write_report`] returns them.
pub const MARKDOWN_FILE: &str = "report.md";
pub const HTML_FILE: &str = "report.html";
pub const JSON_FILE: &str = "summary.json";

/// Why a report could not be written; each names the step and the path.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("creating the report directory {path}: {source}")]
    CreateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("serializing the summary for {path}: {source}")]
    Serialize {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("writing {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Writes `report.md`, `report.html` and `summary.json` into `out` (created with its
/// parents when missing) and returns their paths in that order. Every file is rendered
/// first, then written through a temporary file renamed over the target, so a failure
/// leaves each file either as it was or complete, never half written.
pub fn write_report(summary: &Summary, out: &Path) -> Result<Vec<PathBuf>, ReportError> {
    std::fs::create_dir_all(out).map_err(|source| ReportError::CreateDir {
        path: out.to_path_buf(),
        source,
    })?;
    let json_path = out.join(JSON_FILE);
    let json = render_json(summary).map_err(|source| ReportError::Serialize {
        path: json_path.clone(),
        source,
    })?;
    let files = [
        (out.join(MARKDOWN_FILE), render_markdown(summary)),
        (out.join(HTML_FILE), render_html(summary)),
        (json_path, json),
    ];
    let mut written = Vec::with_capacity(files.len());
    for (path, text) in files {
        crate::sys::write_atomic(&path, text.as_bytes(), 0o644).map_err(|source| {
            ReportError::Write {
                path: path.clone(),
                source,
            }
        })?;
        written.push(path);
    }
    Ok(written)
}

/// The summary as pretty-printed JSON with a final newline (the content of `summary.json`).
pub fn render_json(summary: &Summary) -> Result<String, serde_json::Error> {
    let mut text = serde_json::to_string_pretty(summary)?;
    text.push('\n');
    Ok(text)
}

// ---------------------------------------------------------------------------------------
// Formatting shared by both formats.

const NA: &str = "n/a";

/// A fraction as a percentage with one decimal (`0.068` → `6.8%`).
fn pct(x: Option<f64>) -> String {
    match x {
        Some(v) if v.is_finite() => format!("{:.1}%", v * 100.0),
        _ => NA.into(),
    }
}

/// A signed percentage (`+6.8%`, `-1.2%`).
fn signed_pct(x: Option<f64>) -> String {
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
fn p_value(p: f64) -> String {
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

/// The arms with classified instances, in report order, with their labels.
fn arms(s: &Summary) -> Vec<(&'static str, ClassCounts)> {
    let mut arms = Vec::new();
    let mut push = |label, counts: Option<ClassCounts>| {
        if let Some(c) = counts.filter(|c| c.total() > 0) {
            arms.push((label, c));
        }
    };
    push("shim", Some(s.shim));
    push("no shim", s.no_shim);
    push("baseline shim", s.baseline);
    push("baseline no shim", s.baseline_no_shim);
    arms
}

/// Instances that have a class in both patched arms (McNemar's pairs).
fn pairs(s: &Summary) -> usize {
    s.instances
        .iter()
        .filter(|r| r.class_shim.is_some() && r.class_no_shim.is_some())
        .count()
}

const INFRA: [Infra; 4] = [
    Infra::PatchApply,
    Infra::Timeout,
    Infra::Oom,
    Infra::Runtime,
];

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
            "Median wall-clock overhead of the shim: {}.",
            signed_pct(s.overhead_median)
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

fn drift_text(s: &Summary) -> String {
    let Some(d) = &s.drift else {
        return "No no-shim runs, so no dependency-drift observations.".into();
    };
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

// ---------------------------------------------------------------------------------------
// Markdown.

/// Text for a Markdown table cell: no line breaks, Markdown punctuation backslash-escaped,
/// `&`, `<` and `>` as character references (no inline HTML).
fn md(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' | '|' | '*' | '_' | '`' | '[' | ']' | '#' | '~' | '!' | '(' | ')' => {
                out.push('\\');
                out.push(c);
            }
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// The report as Markdown.
pub fn render_markdown(s: &Summary) -> String {
    let mut o = String::new();
    o.push_str("# reprorun reproduce report\n\n");
    let _ = writeln!(
        o,
        "Runs per arm (k): {}. Instances: {}. Runs: {}.\n",
        s.k, s.instances_total, s.runs_total
    );

    o.push_str("## Outcomes\n\n");
    let arms = arms(s);
    if arms.is_empty() {
        o.push_str("No classified instances.\n\n");
    } else {
        o.push_str("| Arm | Instances | Reproducible | Flaky | Broken |\n");
        o.push_str("|---|---:|---:|---:|---:|\n");
        for (label, c) in &arms {
            let t = c.total();
            let _ = writeln!(
                o,
                "| {label} | {t} | {} | {} | {} |",
                count_pct(c.reproducible, t),
                count_pct(c.flaky, t),
                count_pct(c.broken, t)
            );
        }
        o.push('\n');
    }

    o.push_str("## With and without the shim\n\n");
    let _ = writeln!(o, "{}\n", md_text(&mcnemar_text(s)));
    let _ = writeln!(o, "{}\n", md_text(&overhead_text(s)));

    o.push_str("## Baseline flakiness\n\n");
    let _ = writeln!(o, "{}\n", md_text(&baseline_text(s)));

    o.push_str("## Failure modes\n\n");
    o.push_str("Non-reproducing patches per mode (a patch can show several).\n\n");
    let no_shim = s.failure_modes.no_shim.as_ref();
    o.push_str(if no_shim.is_some() {
        "| Mode | Shim | No shim |\n|---|---:|---:|\n"
    } else {
        "| Mode | Shim |\n|---|---:|\n"
    });
    for mode in Mode::ALL {
        let shim = s.failure_modes.shim.get(&mode).copied().unwrap_or(0);
        match no_shim {
            Some(n) => {
                let n = n.get(&mode).copied().unwrap_or(0);
                let _ = writeln!(o, "| {} | {shim} | {n} |", md(mode.name()));
            }
            None => {
                let _ = writeln!(o, "| {} | {shim} |", md(mode.name()));
            }
        }
    }
    o.push('\n');

    o.push_str("## Dependency drift\n\n");
    let _ = writeln!(o, "{}\n", md_text(&drift_text(s)));

    o.push_str("## Infrastructure failures\n\n");
    o.push_str("| Cause | Runs |\n|---|---:|\n");
    for i in INFRA {
        let _ = writeln!(o, "| {} | {} |", md(i.name()), s.infra.get(i));
    }
    o.push('\n');

    o.push_str("## Instances\n\n");
    if s.instances.is_empty() {
        o.push_str("No instances.\n");
    } else {
        o.push_str(
            "| Instance | r shim | Class shim | r no shim | Class no shim | r baseline shim | \
             r baseline no shim | Modes shim | Modes no shim | Pins | Infra | Age (days) |\n",
        );
        o.push_str("|---|---:|---|---:|---|---:|---:|---|---|---|---|---:|\n");
        for r in &s.instances {
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                md(&r.instance_id),
                rate(r.r_shim),
                class_name(r.class_shim),
                rate(r.r_no_shim),
                class_name(r.class_no_shim),
                rate(r.r_baseline_shim),
                rate(r.r_baseline_no_shim),
                md(&join_names(&r.modes_shim, Mode::name)),
                md(&join_names(&r.modes_no_shim, Mode::name)),
                md(&join_names(&r.pins, |p| p.name())),
                md(&join_names(&r.infra, Infra::name)),
                days(r.age_days),
            );
        }
    }
    o
}

/// Running text for Markdown: only the characters that could start markup or HTML.
fn md_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' | '*' | '_' | '`' | '[' | ']' => {
                out.push('\\');
                out.push(c);
            }
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

// ---------------------------------------------------------------------------------------
// HTML and SVG.

/// Text for HTML and SVG, in content and in attribute values. Control characters other
/// than tab and newline (not allowed in HTML) become U+FFFD.
pub fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\t' | '\n' => out.push(c),
            c if c.is_control() => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

use escape_html as esc;

const STYLE: &str = "\
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2em auto;max-width:72em;\
padding:0 1em;color:#1b1b1b;line-height:1.45}\
h1{font-size:1.6em}h2{font-size:1.25em;margin-top:1.8em;border-bottom:1px solid #ddd}\
table{border-collapse:collapse;margin:.6em 0;font-size:.92em}\
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top}\
th{background:#f3f3f3}td.n{text-align:right;font-variant-numeric:tabular-nums}\
.chart{margin:.8em 0}svg text{font-family:system-ui,sans-serif;font-size:12px}\
.reproducible{color:#2e7d32}.flaky{color:#b26a00}.broken{color:#c62828}\
.wide{overflow-x:auto}";

/// The report as one self-contained HTML page.
pub fn render_html(s: &Summary) -> String {
    let mut o = String::new();
    o.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    o.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    o.push_str("<title>reprorun reproduce report</title>\n");
    let _ = writeln!(o, "<style>{STYLE}</style>\n</head>\n<body>");
    o.push_str("<h1>reprorun reproduce report</h1>\n");
    let _ = writeln!(
        o,
        "<p>Runs per arm (k): {}. Instances: {}. Runs: {}.</p>",
        s.k, s.instances_total, s.runs_total
    );

    o.push_str("<h2>Outcomes</h2>\n");
    let arms = arms(s);
    if arms.is_empty() {
        o.push_str("<p>No classified instances.</p>\n");
    } else {
        o.push_str(
            "<table>\n<tr><th>Arm</th><th>Instances</th><th>Reproducible</th><th>Flaky</th>\
             <th>Broken</th></tr>\n",
        );
        for (label, c) in &arms {
            let t = c.total();
            let _ = writeln!(
                o,
                "<tr><td>{}</td><td class=\"n\">{t}</td><td class=\"n\">{}</td>\
                 <td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
                esc(label),
                count_pct(c.reproducible, t),
                count_pct(c.flaky, t),
                count_pct(c.broken, t)
            );
        }
        o.push_str("</table>\n");
    }
    let _ = writeln!(o, "<div class=\"chart\">{}</div>", outcome_svg(s));

    o.push_str("<h2>With and without the shim</h2>\n");
    let _ = writeln!(o, "<p>{}</p>", esc(&mcnemar_text(s)));
    let _ = writeln!(o, "<p>{}</p>", esc(&overhead_text(s)));

    o.push_str("<h2>Baseline flakiness</h2>\n");
    let _ = writeln!(o, "<p>{}</p>", esc(&baseline_text(s)));

    o.push_str("<h2>Failure modes</h2>\n");
    o.push_str("<p>Non-reproducing patches per mode (a patch can show several).</p>\n");
    let no_shim = s.failure_modes.no_shim.as_ref();
    o.push_str("<table>\n<tr><th>Mode</th><th>Shim</th>");
    if no_shim.is_some() {
        o.push_str("<th>No shim</th>");
    }
    o.push_str("</tr>\n");
    for mode in Mode::ALL {
        let shim = s.failure_modes.shim.get(&mode).copied().unwrap_or(0);
        let _ = write!(
            o,
            "<tr><td>{}</td><td class=\"n\">{shim}</td>",
            esc(mode.name())
        );
        if let Some(n) = no_shim {
            let _ = write!(
                o,
                "<td class=\"n\">{}</td>",
                n.get(&mode).copied().unwrap_or(0)
            );
        }
        o.push_str("</tr>\n");
    }
    o.push_str("</table>\n");

    o.push_str("<h2>Dependency drift</h2>\n");
    let _ = writeln!(o, "<p>{}</p>", esc(&drift_text(s)));
    if let Some(d) = &s.drift {
        let _ = writeln!(o, "<div class=\"chart\">{}</div>", survival_svg(s, d));
    }

    o.push_str("<h2>Infrastructure failures</h2>\n");
    o.push_str("<table>\n<tr><th>Cause</th><th>Runs</th></tr>\n");
    for i in INFRA {
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td class=\"n\">{}</td></tr>",
            esc(i.name()),
            s.infra.get(i)
        );
    }
    o.push_str("</table>\n");

    o.push_str("<h2>Instances</h2>\n");
    if s.instances.is_empty() {
        o.push_str("<p>No instances.</p>\n");
    } else {
        o.push_str(
            "<div class=\"wide\"><table>\n<tr><th>Instance</th><th>r shim</th>\
             <th>Class shim</th><th>r no shim</th><th>Class no shim</th>\
             <th>r baseline shim</th><th>r baseline no shim</th><th>Modes shim</th>\
             <th>Modes no shim</th><th>Pins</th><th>Infra</th><th>Age (days)</th></tr>\n",
        );
        for r in &s.instances {
            let class = |c: Option<Class>| {
                format!(
                    "<td class=\"{}\">{}</td>",
                    c.map_or("", Class::name),
                    class_name(c)
                )
            };
            let _ = writeln!(
                o,
                "<tr><td>{}</td><td class=\"n\">{}</td>{}<td class=\"n\">{}</td>{}\
                 <td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td><td>{}</td>\
                 <td>{}</td><td>{}</td><td class=\"n\">{}</td></tr>",
                esc(&r.instance_id),
                rate(r.r_shim),
                class(r.class_shim),
                rate(r.r_no_shim),
                class(r.class_no_shim),
                rate(r.r_baseline_shim),
                rate(r.r_baseline_no_shim),
                esc(&join_names(&r.modes_shim, Mode::name)),
                esc(&join_names(&r.modes_no_shim, Mode::name)),
                esc(&join_names(&r.pins, |p| p.name())),
                esc(&join_names(&r.infra, Infra::name)),
                days(r.age_days),
            );
        }
        o.push_str("</table></div>\n");
    }
    o.push_str("</body>\n</html>\n");
    o
}

/// An SVG coordinate with one decimal; 0 for anything not finite.
fn c(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.1}")
    } else {
        "0".into()
    }
}

const COLORS: [(Class, &str); 3] = [
    (Class::Reproducible, "#2e7d32"),
    (Class::Flaky, "#f9a825"),
    (Class::Broken, "#c62828"),
];

/// Chart (a): one stacked horizontal bar per arm with classified instances (shim, no shim,
/// baseline shim, baseline no shim), segments for reproducible/flaky/broken as shares of the
/// arm's instances, counts in the segments that are wide enough and after each bar, and a
/// legend. Each bar is a `<g class="bar">`.
pub fn outcome_svg(s: &Summary) -> String {
    let arms = arms(s);
    let (width, label_w, bar_w, row_h, bar_h, top) = (720.0, 130.0, 400.0, 34.0, 22.0, 40.0);
    let height = top + row_h * arms.len().max(1) as f64 + 10.0;
    let mut o = String::new();
    let _ = write!(
        o,
        "<svg class=\"outcomes\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" \
         role=\"img\" aria-label=\"Patch outcomes per arm\">",
        w = c(width),
        h = c(height)
    );
    if arms.is_empty() {
        o.push_str("<text x=\"10\" y=\"30\">No classified instances.</text></svg>");
        return o;
    }
    // Legend.
    let mut x = label_w;
    for (class, color) in COLORS {
        let _ = write!(
            o,
            "<rect x=\"{}\" y=\"10\" width=\"12\" height=\"12\" fill=\"{color}\"/>\
             <text x=\"{}\" y=\"20\">{}</text>",
            c(x),
            c(x + 16.0),
            esc(class.name())
        );
        x += 110.0;
    }
    for (i, (label, counts)) in arms.iter().enumerate() {
        let y = top + row_h * i as f64;
        let total = counts.total();
        let _ = write!(
            o,
            "<g class=\"bar\" data-arm=\"{}\"><text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
            esc(&label.replace(' ', "_")),
            c(label_w - 8.0),
            c(y + bar_h * 0.7),
            esc(label)
        );
        let mut x = label_w;
        for (class, color) in COLORS {
            let n = counts.get(class);
            if n == 0 || total == 0 {
                continue;
            }
            let w = bar_w * n as f64 / total as f64;
            let _ = write!(
                o,
                "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{color}\">\
                 <title>{}: {} {}</title></rect>",
                c(x),
                c(y),
                c(w),
                c(bar_h),
                esc(label),
                n,
                esc(class.name())
            );
            if w >= 26.0 {
                let _ = write!(
                    o,
                    "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#fff\">{n}</text>",
                    c(x + w / 2.0),
                    c(y + bar_h * 0.7)
                );
            }
            x += w;
        }
        let _ = write!(
            o,
            "<text x=\"{}\" y=\"{}\">{} / {} / {} (n = {total})</text></g>",
            c(label_w + bar_w + 8.0),
            c(y + bar_h * 0.7),
            counts.reproducible,
            counts.flaky,
            counts.broken
        );
    }
    o.push_str("</svg>");
    o
}

/// A round axis step (1, 2 or 5 × 10^n) giving at most about `ticks` intervals over `span`.
fn nice_step(span: f64, ticks: f64) -> f64 {
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

/// Chart (b): the share of patches not yet drifted against patch age. With a fit, the curve
/// exp(−λt) and its 95% band (from the half-life interval); always each observed patch as a
/// point (not drifted: hollow circle at 1, drifted: cross at 0, with a small deterministic
/// vertical spread) and the observed share not drifted in up to ten age bins (squares).
pub fn survival_svg(s: &Summary, drift: &Drift) -> String {
    let (width, height) = (680.0, 340.0);
    let (left, right, top, bottom) = (60.0, 150.0, 20.0, 50.0);
    let (pw, ph) = (width - left - right, height - top - bottom);
    let mut o = String::new();
    let _ = write!(
        o,
        "<svg class=\"survival\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" \
         role=\"img\" aria-label=\"Share of patches not yet drifted by age\">",
        w = c(width),
        h = c(height)
    );
    let points: Vec<(f64, bool)> = drift
        .points
        .iter()
        .copied()
        .filter(|(a, _)| a.is_finite() && *a > 0.0)
        .collect();
    if points.is_empty() {
        o.push_str("<text x=\"10\" y=\"30\">No drift observations.</text></svg>");
        return o;
    }
    let max_age = points.iter().map(|(a, _)| *a).fold(0.0_f64, f64::max);
    let step = nice_step(max_age, 6.0);
    let x_max = ((max_age / step).ceil() * step).max(step);
    let px = |age: f64| left + pw * (age / x_max).clamp(0.0, 1.0);
    let py = |share: f64| top + ph * (1.0 - share.clamp(0.0, 1.0));

    // Axes, grid and ticks.
    let _ = write!(
        o,
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#999\"/>",
        c(left),
        c(top),
        c(pw),
        c(ph)
    );
    for i in 0..=4 {
        let share = f64::from(i) / 4.0;
        let y = py(share);
        let _ = write!(
            o,
            "<line x1=\"{}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\" stroke=\"#eee\"/>\
             <text x=\"{}\" y=\"{}\" text-anchor=\"end\">{share:.2}</text>",
            c(left),
            c(left + pw),
            c(left - 6.0),
            c(y + 4.0),
            y = c(y)
        );
    }
    let ticks = (x_max / step).round() as u64;
    for i in 0..=ticks.min(20) {
        let age = step * i as f64;
        let x = px(age);
        let _ = write!(
            o,
            "<line x1=\"{x}\" y1=\"{}\" x2=\"{x}\" y2=\"{}\" stroke=\"#999\"/>\
             <text x=\"{x}\" y=\"{}\" text-anchor=\"middle\">{age:.0}</text>",
            c(top + ph),
            c(top + ph + 5.0),
            c(top + ph + 18.0),
            x = c(x)
        );
    }
    let _ = write!(
        o,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">patch age (days)</text>\
         <text x=\"14\" y=\"{}\" text-anchor=\"middle\" transform=\"rotate(-90 14 {})\">\
         share not yet drifted</text>",
        c(left + pw / 2.0),
        c(height - 10.0),
        c(top + ph / 2.0),
        c(top + ph / 2.0)
    );

    // The fit and its band.
    let ln2 = std::f64::consts::LN_2;
    let fit = match (s.half_life_days, s.half_life_ci) {
        (Some(h), Some([lo, hi])) if [h, lo, hi].iter().all(|v| v.is_finite() && *v > 0.0) => {
            Some((ln2 / h, ln2 / hi, ln2 / lo))
        }
        _ => None,
    };
    if let Some((lambda, lambda_lo, lambda_hi)) = fit {
        let samples: Vec<f64> = (0..=100).map(|i| x_max * f64::from(i) / 100.0).collect();
        let mut band = String::new();
        for &t in &samples {
            let _ = write!(band, "{},{} ", c(px(t)), c(py((-lambda_lo * t).exp())));
        }
        for &t in samples.iter().rev() {
            let _ = write!(band, "{},{} ", c(px(t)), c(py((-lambda_hi * t).exp())));
        }
        let _ = write!(
            o,
            "<polygon class=\"ci\" points=\"{}\" fill=\"#90caf9\" fill-opacity=\"0.4\" \
             stroke=\"none\"/>",
            band.trim_end()
        );
        let curve: Vec<String> = samples
            .iter()
            .map(|&t| format!("{},{}", c(px(t)), c(py((-lambda * t).exp()))))
            .collect();
        let _ = write!(
            o,
            "<polyline class=\"fit\" points=\"{}\" fill=\"none\" stroke=\"#1565c0\" \
             stroke-width=\"2\"/>",
            curve.join(" ")
        );
    }

    // Observed patches, spread a little vertically so that equal ages stay visible.
    for (i, &(age, drifted)) in points.iter().enumerate() {
        let jitter = ((i as u64).wrapping_mul(2_654_435_761) % 9) as f64 - 4.0;
        let x = px(age);
        if drifted {
            let y = py(0.0) - 6.0 + jitter * 0.5;
            let _ = write!(
                o,
                "<path class=\"drifted\" d=\"M{} {}L{} {}M{} {}L{} {}\" stroke=\"#c62828\"/>",
                c(x - 3.0),
                c(y - 3.0),
                c(x + 3.0),
                c(y + 3.0),
                c(x - 3.0),
                c(y + 3.0),
                c(x + 3.0),
                c(y - 3.0)
            );
        } else {
            let y = py(1.0) + 6.0 + jitter * 0.5;
            let _ = write!(
                o,
                "<circle class=\"kept\" cx=\"{}\" cy=\"{}\" r=\"3\" fill=\"none\" \
                 stroke=\"#2e7d32\"/>",
                c(x),
                c(y)
            );
        }
    }

    // Observed share not drifted per age bin.
    let bins = 10_usize;
    let bin_w = x_max / bins as f64;
    for b in 0..bins {
        let (lo, hi) = (bin_w * b as f64, bin_w * (b + 1) as f64);
        let in_bin: Vec<bool> = points
            .iter()
            .filter(|(a, _)| *a > lo && (*a <= hi || b + 1 == bins))
            .map(|(_, e)| *e)
            .collect();
        if in_bin.is_empty() {
            continue;
        }
        let kept = in_bin.iter().filter(|e| !**e).count();
        let share = kept as f64 / in_bin.len() as f64;
        let _ = write!(
            o,
            "<rect class=\"bin\" x=\"{}\" y=\"{}\" width=\"8\" height=\"8\" fill=\"#555\">\
             <title>ages {lo:.0}–{hi:.0} days: {kept} of {} not drifted</title></rect>",
            c(px((lo + hi) / 2.0) - 4.0),
            c(py(share) - 4.0),
            in_bin.len()
        );
    }

    // Legend.
    let lx = left + pw + 12.0;
    let mut ly = top + 10.0;
    if fit.is_some() {
        let _ = write!(
            o,
            "<line x1=\"{}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\" stroke=\"#1565c0\" \
             stroke-width=\"2\"/><text x=\"{}\" y=\"{}\">fit exp(−λt)</text>",
            c(lx),
            c(lx + 18.0),
            c(lx + 24.0),
            c(ly + 4.0),
            y = c(ly)
        );
        ly += 20.0;
        let _ = write!(
            o,
            "<rect x=\"{}\" y=\"{}\" width=\"18\" height=\"10\" fill=\"#90caf9\" \
             fill-opacity=\"0.4\"/><text x=\"{}\" y=\"{}\">95% CI</text>",
            c(lx),
            c(ly - 5.0),
            c(lx + 24.0),
            c(ly + 4.0)
        );
        ly += 20.0;
    }
    let _ = write!(
        o,
        "<circle cx=\"{}\" cy=\"{}\" r=\"3\" fill=\"none\" stroke=\"#2e7d32\"/>\
         <text x=\"{}\" y=\"{}\">not drifted</text>",
        c(lx + 9.0),
        c(ly),
        c(lx + 24.0),
        c(ly + 4.0)
    );
    ly += 20.0;
    let _ = write!(
        o,
        "<path d=\"M{} {}L{} {}M{} {}L{} {}\" stroke=\"#c62828\"/>\
         <text x=\"{}\" y=\"{}\">drifted</text>",
        c(lx + 6.0),
        c(ly - 3.0),
        c(lx + 12.0),
        c(ly + 3.0),
        c(lx + 6.0),
        c(ly + 3.0),
        c(lx + 12.0),
        c(ly - 3.0),
        c(lx + 24.0),
        c(ly + 4.0)
    );
    ly += 20.0;
    let _ = write!(
        o,
        "<rect x=\"{}\" y=\"{}\" width=\"8\" height=\"8\" fill=\"#555\"/>\
         <text x=\"{}\" y=\"{}\">share per age bin</text>",
        c(lx + 5.0),
        c(ly - 4.0),
        c(lx + 24.0),
        c(ly + 4.0)
    );
    o.push_str("</svg>");
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reproduce::summary::summarize;
    use crate::reproduce::{Arm, InstanceRuns, Pin, RunResult};

    const T0: i64 = 1_600_000_000;

    fn run(arm: Arm, idx: u32, resolved: bool) -> RunResult {
        RunResult {
            arm,
            idx,
            resolved,
            infra: None,
            wall_ms: 1000 + u64::from(idx),
            started_at: T0 + 86_400 * 40,
            signature: if resolved { "pass" } else { "fail" }.into(),
            evidence: if resolved {
                vec![]
            } else {
                vec![Mode::DependencyDrift]
            },
        }
    }

    fn inst(id: &str, shim: &[bool], no_shim: &[bool], age_days: i64) -> InstanceRuns {
        let mut runs = Vec::new();
        for (i, &t) in shim.iter().enumerate() {
            runs.push(run(Arm::Shim, i as u32, t));
        }
        for (i, &t) in no_shim.iter().enumerate() {
            runs.push(run(Arm::NoShim, i as u32, t));
        }
        InstanceRuns {
            instance_id: id.into(),
            recorded_resolved: true,
            bench_date: T0 + 86_400 * 40 - 86_400 * age_days,
            runs,
        }
    }

    /// A study with every section filled.
    fn full() -> Summary {
        let mut data = vec![
            inst(
                "<script>alert(1)</script>",
                &[true, true],
                &[true, false],
                30,
            ),
            inst("a|b*c_d", &[true, true], &[true, true], 400),
            inst("flaky & co", &[true, false], &[false, false], 900),
            inst("ok-1", &[true, true], &[true, true], 100),
            inst("drift-2", &[true, true], &[false, false], 700),
        ];
        data[0].runs.push(run(Arm::BaselineShim, 0, true));
        data[0].runs.push(run(Arm::BaselineShim, 1, false));
        data[2].runs.push(run(Arm::BaselineNoShim, 0, false));
        data[1]
            .runs
            .push(run(Arm::ShimWithout(Pin::Clock), 0, false));
        summarize(&data, 2)
    }

    fn empty() -> Summary {
        summarize(&[], 3)
    }

    fn tempdir() -> tempfile::TempDir {
        match tempfile::tempdir() {
            Ok(d) => d,
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn escapes_user_text() {
        assert_eq!(
            escape_html("<script>\"a\" & 'b'</script>\u{7}"),
            "&lt;script&gt;&quot;a&quot; &amp; &#39;b&#39;&lt;/script&gt;\u{FFFD}"
        );
        let s = full();
        let html = render_html(&s);
        assert!(!html.contains("<script"), "unescaped script tag");
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(html.contains("flaky &amp; co"));
        let md = render_markdown(&s);
        assert!(!md.contains("<script"));
        assert!(md.contains("&lt;script&gt;alert\\(1\\)&lt;/script&gt;"));
        // Table cells keep their columns.
        assert!(md.contains("a\\|b\\*c\\_d"));
        assert!(md.contains("flaky &amp; co"));
    }

    #[test]
    fn writes_three_files() {
        let dir = tempdir();
        let out = dir.path().join("nested").join("report");
        let s = full();
        let written = match write_report(&s, &out) {
            Ok(w) => w,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(
            written,
            vec![
                out.join("report.md"),
                out.join("report.html"),
                out.join("summary.json")
            ]
        );
        let read = |name: &str| std::fs::read_to_string(out.join(name)).unwrap_or_default();
        assert_eq!(read("report.md"), render_markdown(&s));
        assert_eq!(read("report.html"), render_html(&s));
        let back: Option<Summary> = serde_json::from_str(&read("summary.json")).ok();
        assert_eq!(back, Some(s.clone()));
        // No temporary files are left beside them.
        let names: Vec<String> = std::fs::read_dir(&out)
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        assert_eq!(names.len(), 3, "{names:?}");
        // Rewriting gives the same bytes.
        assert!(write_report(&s, &out).is_ok());
        assert_eq!(read("report.html"), render_html(&s));
    }

    #[test]
    fn write_errors_name_the_step_and_path() {
        let dir = tempdir();
        let file = dir.path().join("plain-file");
        assert!(std::fs::write(&file, b"x").is_ok());
        let err = write_report(&empty(), &file.join("sub"));
        match err {
            Err(e @ ReportError::CreateDir { .. }) => {
                let text = e.to_string();
                assert!(text.contains("creating the report directory"), "{text}");
                assert!(text.contains("plain-file"), "{text}");
            }
            other => panic!("{other:?}"),
        }
        // A directory where a report file goes: the write fails and names that file.
        let out = dir.path().join("out");
        assert!(std::fs::create_dir_all(out.join("report.html")).is_ok());
        match write_report(&empty(), &out) {
            Err(e @ ReportError::Write { .. }) => {
                assert!(e.to_string().contains("report.html"), "{e}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn one_bar_per_arm_present() {
        let s = full();
        let svg = outcome_svg(&s);
        // shim, no shim, baseline shim, baseline no shim.
        assert_eq!(svg.matches("class=\"bar\"").count(), 4, "{svg}");
        for arm in ["shim", "no_shim", "baseline_shim", "baseline_no_shim"] {
            assert!(svg.contains(&format!("data-arm=\"{arm}\"")), "{arm}");
        }
        // Shim only.
        let shim_only = summarize(&[inst("x", &[true], &[], 10)], 1);
        let svg = outcome_svg(&shim_only);
        assert_eq!(svg.matches("class=\"bar\"").count(), 1);
        assert!(svg.contains("data-arm=\"shim\""));
        // Nothing: no bar.
        assert_eq!(outcome_svg(&empty()).matches("class=\"bar\"").count(), 0);
    }

    #[test]
    fn survival_chart_with_fit_and_points() {
        let s = full();
        let html = render_html(&s);
        assert!(html.contains("<svg class=\"survival\""));
        let Some(drift) = &s.drift else {
            panic!("no drift");
        };
        let svg = survival_svg(&s, drift);
        let kept = svg.matches("class=\"kept\"").count();
        let drifted = svg.matches("class=\"drifted\"").count();
        assert_eq!(kept + drifted, drift.points.len());
        assert_eq!(drifted as u64, drift.events);
        // Three drifted of five: the fit exists, so the curve and the band are drawn.
        assert!(s.half_life_days.is_some());
        assert!(svg.contains("class=\"fit\""));
        assert!(svg.contains("class=\"ci\""));
        // Without a fit: points, no curve.
        let mut no_fit = s.clone();
        no_fit.half_life_days = None;
        no_fit.half_life_ci = None;
        let svg = survival_svg(&no_fit, drift);
        assert!(!svg.contains("class=\"fit\""));
        assert_eq!(svg.matches("class=\"kept\"").count(), kept);
    }

    #[test]
    fn self_contained() {
        for s in [full(), empty()] {
            let html = render_html(&s);
            for banned in [
                "http://", "https://", "//", "<script", "src=", "href=", "@import", "url(",
            ] {
                // `//` would also catch protocol-relative URLs.
                assert!(!html.contains(banned), "{banned} in HTML");
            }
            assert!(html.starts_with("<!DOCTYPE html>"));
            assert!(html.trim_end().ends_with("</html>"));
        }
    }

    #[test]
    fn empty_summary_renders() {
        let s = empty();
        let md = render_markdown(&s);
        assert!(md.contains("No classified instances."));
        assert!(md.contains("No instances."));
        let html = render_html(&s);
        assert!(html.contains("No classified instances."));
        assert!(!html.contains("class=\"survival\""));
        let dir = tempdir();
        assert!(write_report(&s, dir.path()).is_ok());
    }

    #[test]
    fn deterministic_and_complete() {
        let (a, b) = (full(), full());
        assert_eq!(render_html(&a), render_html(&b));
        assert_eq!(render_markdown(&a), render_markdown(&b));
        let md = render_markdown(&a);
        for section in [
            "## Outcomes",
            "## With and without the shim",
            "## Baseline flakiness",
            "## Failure modes",
            "## Dependency drift",
            "## Infrastructure failures",
            "## Instances",
        ] {
            assert!(md.contains(section), "{section}");
        }
        // shim: 4 reproducible of 5 → 80.0%.
        assert!(
            md.contains("| shim | 5 | 4 (80.0%) | 1 (20.0%) | 0 (0.0%) |"),
            "{md}"
        );
        assert!(md.contains("two-sided p = "));
        assert!(md.contains("Dependency-drift half-life: "));
        // Every instance has a row.
        for r in &a.instances {
            assert!(md.contains(&md_cell_for_test(&r.instance_id)));
        }
    }

    fn md_cell_for_test(id: &str) -> String {
        format!("| {} |", md(id))
    }

    #[test]
    fn number_formats() {
        assert_eq!(pct(Some(0.068)), "6.8%");
        assert_eq!(pct(None), "n/a");
        assert_eq!(pct(Some(f64::NAN)), "n/a");
        assert_eq!(signed_pct(Some(0.068)), "+6.8%");
        assert_eq!(signed_pct(Some(-0.012)), "-1.2%");
        assert_eq!(p_value(0.0625), "0.0625");
        assert_eq!(p_value(6.593e-5), "6.59e-5");
        assert_eq!(p_value(0.0), "< 1e-300");
        assert_eq!(nice_step(1000.0, 6.0), 200.0);
        assert_eq!(nice_step(90.0, 6.0), 20.0);
        assert_eq!(nice_step(0.0, 6.0), 1.0);
    }
}
