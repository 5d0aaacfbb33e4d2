//! Small helpers every layer may use (they use nothing of the project's own).

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

/// Text for the caller's terminal: a control character (an escape sequence's ESC, a
/// carriage return that would overwrite the line, a bell) becomes its `\u{..}` escape, so
/// a message quoting what a sandbox or an input file chose (a path, a server name) cannot
/// drive the terminal. Newlines stay (messages of several lines).
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(|c| c.is_control() && c != '\n') {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push(c),
            c if c.is_control() => out.extend(c.escape_unicode()),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// For unit tests that cannot run on this machine (a tool missing, not root): prints one
/// `SKIPPED` line, or fails under `REPRORUN_STRICT_SKIPS=1`, as CI sets it (the runtime tests'
/// `require!` does the same; `crates/STYLE.md`).
#[doc(hidden)]
pub fn skip_test(test: &str, reason: &str) {
    if std::env::var_os("REPRORUN_STRICT_SKIPS").is_some_and(|v| v == "1") {
        panic!("{test} was skipped under REPRORUN_STRICT_SKIPS=1, which allows no skip: {reason}");
    }
    eprintln!("SKIPPED {test}: {reason}");
}

#[cfg(test)]
mod tests {
    #[test]
    fn control_characters_reach_the_terminal_escaped() {
        assert_eq!(super::printable("plain\nlines"), "plain\nlines");
        assert_eq!(
            super::printable("a\u{1b}]0;owned\u{7}b\rc"),
            "a\\u{1b}]0;owned\\u{7}b\\u{d}c"
        );
    }
}
