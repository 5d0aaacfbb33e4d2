//! A build context's `.dockerignore`, with Docker's rules (moby/patternmatcher, which both
//! Docker's builders and podman's buildah use): one pattern a line, `#` lines are comments,
//! surrounding blanks trimmed, a leading `/` dropped, the path cleaned (`a/./b/../c` is
//! `a/c`); `*` and `?` match within one path component, `**` any number of components
//! (none included), `[...]` a class, `\` escapes; a pattern names a path relative to the
//! context root (not at any depth, unlike `.gitignore`); a path is excluded when the last
//! pattern that matches it or one of its parent directories is not a `!` exception.
//!
//! The `ignore` crate's gitignore matcher was not used: gitignore matches a pattern without a
//! slash at every depth and cannot re-include a file of an excluded directory, where Docker
//! does both the other way. Each pattern is turned into a regular expression as Docker's
//! matcher turns it (`regex-lite`, the regex crate's small sibling, matches it).

use thiserror::Error;

/// The file's name in the context root.
pub(crate) const FILE: &str = ".dockerignore";
/// Patterns read at most.
const MAX_PATTERNS: usize = 10_000;
/// A pattern's length at most.
const MAX_PATTERN_LEN: usize = 4096;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum IgnoreError {
    #[error(".dockerignore line {line}: {detail}")]
    Pattern { line: usize, detail: String },
    #[error(".dockerignore: more than {MAX_PATTERNS} patterns")]
    TooMany,
}

#[derive(Debug)]
struct Pattern {
    exception: bool,
    /// The pattern as Docker reads it: trimmed, cleaned, no leading `/`, no `!`.
    text: String,
    regex: regex_lite::Regex,
}

/// The patterns of one `.dockerignore`, in order.
#[derive(Debug, Default)]
pub struct Ignore {
    patterns: Vec<Pattern>,
    exceptions: bool,
}

impl Ignore {
    /// Parses a `.dockerignore`'s text.
    pub(crate) fn parse(text: &str) -> Result<Ignore, IgnoreError> {
        let mut ignore = Ignore::default();
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            if raw.starts_with('#') {
                continue;
            }
            let mut p = raw.trim();
            if p.is_empty() {
                continue;
            }
            let exception = p.starts_with('!');
            if exception {
                p = p[1..].trim();
                if p.is_empty() {
                    return Err(IgnoreError::Pattern {
                        line,
                        detail: "\"!\" alone is not a pattern".into(),
                    });
                }
            }
            if p.len() > MAX_PATTERN_LEN {
                return Err(IgnoreError::Pattern {
                    line,
                    detail: format!("longer than {MAX_PATTERN_LEN} bytes"),
                });
            }
            let cleaned = clean(p);
            let cleaned = match cleaned.strip_prefix('/') {
                Some(rest) if !rest.is_empty() => rest.to_string(),
                _ => cleaned,
            };
            let regex =
                regex_lite::Regex::new(&to_regex(&cleaned)).map_err(|e| IgnoreError::Pattern {
                    line,
                    detail: format!("{p:?}: {e}"),
                })?;
            if ignore.patterns.len() == MAX_PATTERNS {
                return Err(IgnoreError::TooMany);
            }
            ignore.exceptions |= exception;
            ignore.patterns.push(Pattern {
                exception,
                text: cleaned,
                regex,
            });
        }
        Ok(ignore)
    }

    /// Whether a pattern is an exception (`!`): an excluded directory must then be walked,
    /// as a file in it may be taken back.
    pub(crate) fn has_exceptions(&self) -> bool {
        self.exceptions
    }

    /// The patterns as Docker reads them, one a line, for podman's `--ignorefile`: podman
    /// 4 does not drop a leading `/` (containers/podman#25458: `/local` excludes nothing
    /// there), so it is handed the cleaned patterns, on which both engines agree. A pattern
    /// that would read as a comment keeps a `./` (cleaned away again).
    pub(crate) fn podman_text(&self) -> String {
        let mut out = String::new();
        for p in &self.patterns {
            if p.exception {
                out.push('!');
            } else if p.text.starts_with('#') {
                out.push_str("./");
            }
            out.push_str(&p.text);
            out.push('\n');
        }
        out
    }

    /// Whether `path` (relative to the context, `/`-separated) is left out of the context:
    /// Docker's `MatchesOrParentMatches`.
    pub(crate) fn excludes(&self, path: &str) -> bool {
        let parents: Vec<&str> = path.match_indices('/').map(|(i, _)| &path[..i]).collect();
        let mut excluded = false;
        for p in &self.patterns {
            // An exclusion cannot change an excluded path, nor an exception a kept one.
            if p.exception != excluded {
                continue;
            }
            if p.regex.is_match(path) || parents.iter().any(|d| p.regex.is_match(d)) {
                excluded = !p.exception;
            }
        }
        excluded
    }
}

/// Go's `filepath.Clean` for `/`-separated paths.
fn clean(p: &str) -> String {
    let rooted = p.starts_with('/');
    let mut out: Vec<&str> = Vec::new();
    for part in p.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if out.last().is_some_and(|l| *l != "..") {
                    out.pop();
                } else if !rooted {
                    out.push("..");
                }
            }
            _ => out.push(part),
        }
    }
    let body = out.join("/");
    match (rooted, body.is_empty()) {
        (true, _) => format!("/{body}"),
        (false, true) => ".".into(),
        (false, false) => body,
    }
}

/// A cleaned pattern as Docker's matcher compiles it to a regular expression.
fn to_regex(pattern: &str) -> String {
    let mut re = String::from("^");
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '*' if chars.peek() == Some(&'*') => {
                chars.next();
                // `**/` is `**`.
                if chars.peek() == Some(&'/') {
                    chars.next();
                }
                if chars.peek().is_none() {
                    re.push_str(".*");
                } else {
                    re.push_str("(.*/)?");
                }
            }
            '*' => re.push_str("[^/]*"),
            '?' => re.push_str("[^/]"),
            '\\' => match chars.next() {
                Some(n) => {
                    re.push('\\');
                    re.push(n);
                }
                None => re.push_str("\\\\"),
            },
            '.' | '+' | '(' | ')' | '|' | '{' | '}' | '$' | '^' => {
                re.push('\\');
                re.push(c);
            }
            _ => re.push(c),
        }
    }
    re.push('$');
    re
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ig(text: &str) -> Ignore {
        Ignore::parse(text).unwrap()
    }

    #[test]
    fn patterns_are_anchored_at_the_root_and_cover_what_a_directory_holds() {
        let i = ig("# a comment\n\n  node_modules  \n/build\n*.pyc\n");
        assert!(i.excludes("node_modules"));
        assert!(i.excludes("node_modules/a/b.js"), "a directory's contents");
        assert!(i.excludes("build/out.o"), "a leading / is the root");
        assert!(i.excludes("x.pyc"));
        // Unlike .gitignore, a pattern without a slash is not matched at every depth.
        assert!(!i.excludes("src/node_modules"));
        assert!(!i.excludes("src/x.pyc"), "* stays within one component");
        assert!(!i.excludes("# a comment"));
        assert!(!i.excludes("builder"));
    }

    #[test]
    fn double_star_matches_any_number_of_directories() {
        let i = ig("**/*.pyc\ndocs/**\na/**/z\n");
        assert!(i.excludes("x.pyc"), "none");
        assert!(i.excludes("a/b/c/x.pyc"));
        assert!(i.excludes("docs/a/b"));
        assert!(i.excludes("a/z") && i.excludes("a/b/c/z"));
        assert!(!i.excludes("b/z"));
        assert!(!i.excludes("x.py"));
    }

    #[test]
    fn the_last_matching_pattern_wins_and_exceptions_take_files_back() {
        let i = ig("*.md\n!README.md\ndata\n!data/keep\n");
        assert!(i.has_exceptions());
        assert!(i.excludes("CHANGES.md"));
        assert!(!i.excludes("README.md"));
        assert!(i.excludes("data/drop"));
        assert!(!i.excludes("data/keep"));
        // A later exclusion wins over an earlier exception.
        let i = ig("!a\na\n");
        assert!(i.excludes("a"));
        // Exclude everything but one directory.
        let i = ig("*\n!src\n");
        assert!(i.excludes("Makefile") && i.excludes("docs/x"));
        assert!(!i.excludes("src") && !i.excludes("src/main.rs"));
    }

    #[test]
    fn patterns_are_cleaned_classes_and_escapes_kept_other_characters_literal() {
        let i = ig("./a/../b/./c\nf[0-9]\nlit\\*\nx.y\n(p)+\n");
        assert!(i.excludes("b/c"));
        assert!(i.excludes("f1") && !i.excludes("fa"));
        assert!(i.excludes("lit*") && !i.excludes("litx"));
        assert!(i.excludes("x.y") && !i.excludes("xzy"), "a dot is a dot");
        assert!(i.excludes("(p)+"));
    }

    #[test]
    fn bad_patterns_name_their_line() {
        assert_eq!(
            Ignore::parse("a\n!\n").unwrap_err(),
            IgnoreError::Pattern {
                line: 2,
                detail: "\"!\" alone is not a pattern".into()
            }
        );
        let err = Ignore::parse("ok\n[z-a]\n").unwrap_err();
        assert!(matches!(err, IgnoreError::Pattern { line: 2, .. }), "{err}");
        let many = "a\n".repeat(MAX_PATTERNS + 1);
        assert_eq!(Ignore::parse(&many).unwrap_err(), IgnoreError::TooMany);
    }

    #[test]
    fn go_clean() {
        for (p, c) in [
            ("a/./b", "a/b"),
            ("a//b/", "a/b"),
            ("a/../..", ".."),
            ("/../a", "/a"),
            (".", "."),
            ("a/..", "."),
        ] {
            assert_eq!(clean(p), c, "{p}");
        }
    }

    /// What the fixture's context holds: its paths, and the `.dockerignore` itself.
    fn fixture(case: &str) -> (String, Vec<String>, Vec<String>) {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../runtime-tests/fixtures/dockerignore")
            .join(case);
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
        let mut paths: Vec<String> = read("paths.txt").lines().map(String::from).collect();
        paths.push(FILE.into());
        let sent = read("docker-sends.txt").lines().map(String::from).collect();
        (read("dockerignore"), paths, sent)
    }

    fn kept(i: &Ignore, paths: &[String]) -> Vec<String> {
        let mut kept: Vec<String> = paths.iter().filter(|p| !i.excludes(p)).cloned().collect();
        kept.sort();
        kept
    }

    /// Real projects' `.dockerignore` files (grafana's: `!` exceptions inside an excluded
    /// `.yarn/*`, `data*`, leading-`/` patterns; home-assistant's: `**/__pycache__`) keep the
    /// files Docker sent of the same tree (`docker-sends.txt`, recorded by the fixture's
    /// `record.sh` from dockerd; runtime-tests/image_ignore.rs re-checks it live), and the
    /// text podman is handed decides every path the same way.
    #[test]
    fn real_dockerignore_files_keep_what_docker_sends() {
        for case in ["grafana", "home-assistant"] {
            let (text, paths, sent) = fixture(case);
            let i = ig(&text);
            assert_eq!(kept(&i, &paths), sent, "{case}");
            let podman = i.podman_text();
            assert!(!podman.lines().any(|l| l.starts_with('/')), "{podman}");
            // The file runtime-tests/image_ignore.rs hands a live podman.
            let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../runtime-tests/fixtures/dockerignore")
                .join(case);
            let file = std::fs::read_to_string(dir.join("podman-ignorefile")).unwrap();
            assert_eq!(podman, file, "{case}");
            assert_eq!(kept(&ig(&podman), &paths), sent, "{case}: podman's text");
        }
        let (text, ..) = fixture("grafana");
        assert!(ig(&text).podman_text().contains("\nlocal\ntmp\n"));
        // A pattern that would read as a comment, and an exception, survive the rewrite.
        let i = ig(" #notes\n!keep\n/a/../b/\n");
        assert_eq!(i.podman_text(), "./#notes\n!keep\nb\n");
        assert!(ig(&i.podman_text()).excludes("#notes"));
    }
}
