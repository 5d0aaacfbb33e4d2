//! Cutting the `findings.json` document out of an agent's text reply.

/// See [`super::extract_json`].
pub(super) fn find(text: &str) -> Option<&str> {
    let mut found = None;
    let mut open: Option<usize> = None;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim();
        if let Some(info) = trimmed.strip_prefix("```") {
            match open {
                None if info.is_empty() || info.eq_ignore_ascii_case("json") => {
                    open = Some(offset + line.len())
                }
                None => open = Some(usize::MAX),
                Some(start) => {
                    if start != usize::MAX && info.is_empty() {
                        let body = text[start..offset].trim();
                        if body.starts_with('{') && body.contains("\"findings\"") {
                            found = Some(body);
                        }
                    }
                    open = None;
                }
            }
        }
        offset += line.len();
    }
    found.or_else(|| balanced_object(text))
}

/// The first balanced `{...}` of `text` (braces inside JSON strings ignored) that
/// mentions `"findings"`.
fn balanced_object(text: &str) -> Option<&str> {
    let bytes = text.as_bytes();
    let mut from = 0;
    while let Some(rel) = text[from..].find('{') {
        let start = from + rel;
        let (mut depth, mut in_str, mut escaped) = (0usize, false, false);
        let mut end = None;
        for (i, &b) in bytes.iter().enumerate().skip(start) {
            if in_str {
                match b {
                    _ if escaped => escaped = false,
                    b'\\' => escaped = true,
                    b'"' => in_str = false,
                    _ => {}
                }
                continue;
            }
            match b {
                b'"' => in_str = true,
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = Some(i);
                        break;
                    }
                }
                _ => {}
            }
        }
        let end = end?;
        let candidate = &text[start..=end];
        if candidate.contains("\"findings\"") {
            return Some(candidate);
        }
        from = end + 1;
    }
    None
}
