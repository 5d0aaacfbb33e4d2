//! A report as a document: a title and blocks (headings, paragraphs, tables, charts),
//! rendered once to Markdown and once to one self-contained HTML page (inline CSS and SVG,
//! no scripts, no external URLs; a cell may link a relative path, [`Cell::linked`]). The HTML is built with maud, so text is escaped by construction;
//! every piece of text goes through [`Text`], which also keeps control characters out.
//!
//! Output is deterministic: the same document gives the same bytes.

use maud::{html, Markup, PreEscaped, Render, DOCTYPE};

/// A report document.
pub struct Doc {
    pub title: String,
    /// CSS of the pipeline's own classes, after the shared style.
    pub css: &'static str,
    pub blocks: Vec<Block>,
}

/// One block of a document.
pub enum Block {
    /// A section heading.
    Heading(String),
    /// Running text (plain; escaped for each format).
    Para(String),
    Table(Table),
    /// An SVG chart (HTML only).
    Chart(Markup),
}

/// A column's alignment: numbers go right.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// A table cell: text, with an HTML class for styling, and a relative link.
pub struct Cell {
    pub(crate) text: String,
    pub(crate) class: Option<&'static str>,
    /// Percent-encoded when rendered ([`href`]).
    pub(crate) href: Option<String>,
}

impl Cell {
    pub fn new(text: impl Into<String>) -> Cell {
        Cell {
            text: text.into(),
            class: None,
            href: None,
        }
    }

    pub fn classed(text: impl Into<String>, class: &'static str) -> Cell {
        Cell {
            text: text.into(),
            class: Some(class),
            href: None,
        }
    }

    /// Text linking to `path`, a relative path (each byte but `A-Za-z0-9-._~/` is
    /// percent-encoded, so no path makes markup or a scheme).
    pub fn linked(text: impl Into<String>, path: &str) -> Cell {
        Cell {
            text: text.into(),
            class: None,
            href: Some(href(path)),
        }
    }
}

/// `path` percent-encoded for a link (`/` kept).
pub fn href(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A table: its header, one alignment per column, and rows. Cells of left-aligned
/// columns are text (escaped for Markdown); right-aligned ones are numbers we formatted.
/// A column's header: most are fixed text, some name a parameter (`Issue SM@10`).
pub type Header = std::borrow::Cow<'static, str>;

/// Headers of fixed text.
pub fn head(cols: &[(&'static str, Align)]) -> Vec<(Header, Align)> {
    cols.iter()
        .map(|(h, a)| (Header::Borrowed(h), *a))
        .collect()
}

pub struct Table {
    pub head: Vec<(Header, Align)>,
    pub rows: Vec<Vec<Cell>>,
    /// Scrolls sideways in HTML when wider than the page.
    pub wide: bool,
}

const STYLE: &str = "\
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2em auto;max-width:72em;\
padding:0 1em;color:#1b1b1b;line-height:1.45}\
h1{font-size:1.6em}h2{font-size:1.25em;margin-top:1.8em;border-bottom:1px solid #ddd}\
table{border-collapse:collapse;margin:.6em 0;font-size:.92em}\
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top}\
th{background:#f3f3f3}td.n{text-align:right;font-variant-numeric:tabular-nums}\
.chart{margin:.8em 0}svg text{font-family:system-ui,sans-serif;font-size:12px}\
.wide{overflow-x:auto}";

impl Doc {
    /// The document as Markdown: `# title`, then each block followed by a blank line
    /// (charts left out), ending with one newline.
    pub fn markdown(&self) -> String {
        let mut o = format!("# {}\n\n", md_text(&self.title));
        for block in &self.blocks {
            match block {
                Block::Heading(h) => o.push_str(&format!("## {}\n\n", md_text(h))),
                Block::Para(p) => o.push_str(&format!("{}\n\n", md_text(p))),
                Block::Table(t) => {
                    o.push_str(&markdown_table(t));
                    o.push('\n');
                }
                Block::Chart(_) => {}
            }
        }
        while o.ends_with("\n\n") {
            o.pop();
        }
        o
    }

    /// The document as one self-contained HTML page.
    pub fn html(&self) -> String {
        let page = html! {
            (DOCTYPE)
            html lang="en" {
                head {
                    meta charset="utf-8";
                    meta name="viewport" content="width=device-width, initial-scale=1";
                    title { (Text(&self.title)) }
                    style { (PreEscaped(STYLE)) (PreEscaped(self.css)) }
                }
                body {
                    h1 { (Text(&self.title)) }
                    @for block in &self.blocks {
                        (html_block(block))
                    }
                }
            }
        };
        let mut text = page.into_string();
        text.push('\n');
        text
    }
}

fn markdown_table(t: &Table) -> String {
    let mut o = String::new();
    let head: Vec<&str> = t.head.iter().map(|(h, _)| h.as_ref()).collect();
    o.push_str(&format!("| {} |\n", head.join(" | ")));
    let align: Vec<&str> = t
        .head
        .iter()
        .map(|(_, a)| match a {
            Align::Left => "---",
            Align::Right => "---:",
        })
        .collect();
    o.push_str(&format!("|{}|\n", align.join("|")));
    for row in &t.rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&t.head)
            .map(|(c, (_, a))| match (a, &c.href) {
                (Align::Left, Some(h)) => format!("[{}]({h})", md(&c.text)),
                (Align::Left, None) => md(&c.text),
                (Align::Right, _) => c.text.clone(),
            })
            .collect();
        o.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    o
}

fn html_block(block: &Block) -> Markup {
    match block {
        Block::Heading(h) => html! { h2 { (Text(h)) } },
        Block::Para(p) => html! { p { (Text(p)) } },
        Block::Chart(svg) => html! { div.chart { (svg) } },
        Block::Table(t) if t.wide => html! { div.wide { (html_table(t)) } },
        Block::Table(t) => html_table(t),
    }
}

fn html_table(t: &Table) -> Markup {
    html! {
        table {
            tr { @for (h, _) in &t.head { th { (Text(h.as_ref())) } } }
            @for row in &t.rows {
                tr {
                    @for (cell, (_, align)) in row.iter().zip(&t.head) {
                        @let class = if *align == Align::Right { Some("n") } else { cell.class };
                        td class=[class] {
                            @if let Some(h) = &cell.href {
                                a href=(h) { (Text(&cell.text)) }
                            } @else {
                                (Text(&cell.text))
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Text for HTML and SVG, escaped when rendered (in content and in attribute values):
/// [`escape_html`].
pub struct Text<'a>(pub &'a str);

impl Render for Text<'_> {
    fn render_to(&self, buffer: &mut String) {
        buffer.push_str(&escape_html(self.0));
    }
}

pub use reprorun_runtime::util::escape_html;

/// Text for a Markdown table cell: no line breaks, Markdown punctuation backslash-escaped,
/// `&`, `<` and `>` as character references (no inline HTML).
pub fn md(text: &str) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn doc() -> Doc {
        Doc {
            title: "T <1>".into(),
            css: ".x{color:red}",
            blocks: vec![
                Block::Heading("Part".into()),
                Block::Para("a * b & <i>".into()),
                Block::Table(Table {
                    head: head(&[("Name", Align::Left), ("Runs (n)", Align::Right)]),
                    rows: vec![vec![
                        Cell::classed("<b>|x\u{7}", "x"),
                        Cell::new("3 (50.0%)"),
                    ]],
                    wide: true,
                }),
                Block::Chart(html! { svg { text { (Text("<s>")) } } }),
            ],
        }
    }

    #[test]
    fn markdown_escapes_text_and_keeps_numbers() {
        assert_eq!(
            doc().markdown(),
            "# T &lt;1&gt;\n\n## Part\n\na \\* b &amp; &lt;i&gt;\n\n| Name | Runs (n) |\n|---|---:|\n| &lt;b&gt;\\|x  | 3 (50.0%) |\n"
        );
    }

    #[test]
    fn html_is_escaped_by_construction_and_self_contained() {
        let html = doc().html();
        assert!(
            html.starts_with("<!DOCTYPE html><html lang=\"en\">"),
            "{html}"
        );
        assert!(html.contains("<title>T &lt;1&gt;</title>"));
        assert!(html.contains("<style>body{"));
        assert!(html.contains(".x{color:red}</style>"));
        assert!(
            html.contains("<td class=\"x\">&lt;b&gt;|x\u{FFFD}</td><td class=\"n\">3 (50.0%)</td>")
        );
        assert!(html.contains("<div class=\"wide\"><table>"));
        assert!(html.contains("<div class=\"chart\"><svg><text>&lt;s&gt;</text></svg></div>"));
        assert!(!html.contains("<i>") && !html.contains("<s>"));
        assert!(html.ends_with("</html>\n"));
    }

    #[test]
    fn links_are_percent_encoded_in_both_formats() {
        assert_eq!(
            href("logs/a b/x(1)<\"'>/"),
            "logs/a%20b/x%281%29%3C%22%27%3E/"
        );
        let t = Table {
            head: head(&[("Instance", Align::Left)]),
            rows: vec![vec![Cell::linked("i<1>", "logs/i 1/")]],
            wide: false,
        };
        let d = Doc {
            title: "t".into(),
            css: "",
            blocks: vec![Block::Table(t)],
        };
        assert!(
            d.markdown().contains("| [i&lt;1&gt;](logs/i%201/) |"),
            "{}",
            d.markdown()
        );
        assert!(
            d.html().contains("<a href=\"logs/i%201/\">i&lt;1&gt;</a>"),
            "{}",
            d.html()
        );
    }
}
