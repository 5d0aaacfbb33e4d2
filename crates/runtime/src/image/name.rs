//! Image names: `busybox`, `busybox:latest`, `localhost/busybox:1`, `registry:5000/a/b:tag`.
//! A name without a tag gets `:latest`; names are stored in that full form.

use std::fmt;

/// A validated image name with its tag.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ImageName {
    pub repository: String,
    pub tag: String,
}

pub const DEFAULT_TAG: &str = "latest";

impl ImageName {
    /// Parses a name; `Err` says what is wrong with it.
    pub fn parse(text: &str) -> Result<ImageName, String> {
        if text.is_empty() {
            return Err("empty name".into());
        }
        if text.len() > 255 {
            return Err("longer than 255 characters".into());
        }
        if text.contains('@') {
            return Err(
                "digest references (NAME@sha256:...) are not names; pass sha256:DIGEST alone"
                    .into(),
            );
        }
        // The tag follows the last ':' after the last '/' (a ':' before it is a registry port).
        let last_slash = text.rfind('/').map_or(0, |i| i + 1);
        let (repository, tag) = match text[last_slash..].rfind(':') {
            Some(i) => (&text[..last_slash + i], &text[last_slash + i + 1..]),
            None => (text, DEFAULT_TAG),
        };
        if !valid_tag(tag) {
            return Err(format!(
                "tag {tag:?} must be 1-128 of A-Z a-z 0-9 _ . - and not start with . or -"
            ));
        }
        let mut parts = repository.split('/').peekable();
        let mut first = true;
        while let Some(part) = parts.next() {
            let is_last = parts.peek().is_none();
            // The first of several components may be a registry host (with a port).
            let host = first
                && !is_last
                && (part.contains('.') || part.contains(':') || part == "localhost");
            first = false;
            let ok = if host {
                valid_host(part)
            } else {
                valid_component(part)
            };
            if !ok {
                return Err(format!(
                    "component {part:?} must be lowercase letters and digits separated by '.', '_', '__' or '-'"
                ));
            }
        }
        Ok(ImageName {
            repository: repository.to_string(),
            tag: tag.to_string(),
        })
    }
}

impl fmt::Display for ImageName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.repository, self.tag)
    }
}

fn valid_tag(tag: &str) -> bool {
    let b = tag.as_bytes();
    !b.is_empty()
        && b.len() <= 128
        && (b[0].is_ascii_alphanumeric() || b[0] == b'_')
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'))
}

fn valid_component(part: &str) -> bool {
    let b = part.as_bytes();
    let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    if b.is_empty() || !alnum(&b[0]) || !alnum(&b[b.len() - 1]) {
        return false;
    }
    let mut prev_sep = false;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if alnum(&c) {
            prev_sep = false;
        } else if matches!(c, b'.' | b'_' | b'-') {
            // One separator: '.', '_', '__' or one or more '-'.
            if prev_sep
                && !(c == b'-' && b[i - 1] == b'-')
                && !(c == b'_' && b[i - 1] == b'_' && (i < 2 || b[i - 2] != b'_'))
            {
                return false;
            }
            prev_sep = true;
        } else {
            return false;
        }
        i += 1;
    }
    true
}

fn valid_host(part: &str) -> bool {
    let (host, port) = match part.split_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (part, None),
    };
    let host_ok = !host.is_empty()
        && host.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|c| c.is_ascii_alphanumeric() || c == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        });
    let port_ok = port.map_or(true, |p| {
        !p.is_empty() && p.len() <= 5 && p.bytes().all(|c| c.is_ascii_digit())
    });
    host_ok && port_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full(text: &str) -> String {
        ImageName::parse(text).unwrap().to_string()
    }

    #[test]
    fn default_tag_and_registries() {
        assert_eq!(full("busybox"), "busybox:latest");
        assert_eq!(full("busybox:latest"), "busybox:latest");
        assert_eq!(full("busybox:1.36.1"), "busybox:1.36.1");
        assert_eq!(full("localhost/busybox:1"), "localhost/busybox:1");
        assert_eq!(full("localhost:5000/a/b"), "localhost:5000/a/b:latest");
        assert_eq!(
            full("Registry.Example.com:5000/team/app:v_2"),
            "Registry.Example.com:5000/team/app:v_2"
        );
        assert_eq!(
            full("docker.io/library/python:3.11-slim"),
            "docker.io/library/python:3.11-slim"
        );
        assert_eq!(full("a__b/c-d--e/f.g:x"), "a__b/c-d--e/f.g:x");
        let n = ImageName::parse("localhost:5000/app").unwrap();
        assert_eq!(
            (n.repository.as_str(), n.tag.as_str()),
            ("localhost:5000/app", "latest")
        );
    }

    #[test]
    fn malformed_names_are_refused() {
        for bad in [
            "",
            "Busybox",
            "busybox:",
            ":tag",
            "busybox:-x",
            "busybox:.x",
            "a//b",
            "/busybox",
            "busybox/",
            "../busybox",
            "bu..sybox",
            "a___b",
            "busy box",
            "busybox@sha256:00",
            "a/B",
            "-a",
            "a-",
            "busybox:t/x",
        ] {
            assert!(ImageName::parse(bad).is_err(), "{bad:?} accepted");
        }
        assert!(ImageName::parse(&format!("a:{}", "t".repeat(129))).is_err());
    }
}
