//! The HTTP decisions, as pure functions of what a response said: its status line and
//! headers, the `Link` header's next page, and when (and whether) to try again under
//! GitHub's primary and secondary rate limits
//! (docs.github.com, "Rate limits for the REST API").

/// A response's status and headers (names lower case), the last block when redirects were
/// followed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Head {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
}

impl Head {
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn number(&self, name: &str) -> Option<i64> {
        self.get(name).and_then(|v| v.trim().parse().ok())
    }

    /// `X-RateLimit-Remaining` and `X-RateLimit-Reset` (Unix seconds), when both are given.
    pub(crate) fn budget(&self) -> Option<Budget> {
        Some(Budget {
            remaining: self.number("x-ratelimit-remaining")?,
            reset: self.number("x-ratelimit-reset")?,
        })
    }
}

/// The primary rate limit as the last response gave it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Budget {
    pub(crate) remaining: i64,
    pub(crate) reset: i64,
}

/// Parses curl's `-D` output: the last header block (the answer after redirects and
/// `100 Continue`s).
pub(crate) fn parse_head(text: &str) -> Option<Head> {
    let mut head: Option<Head> = None;
    for line in text.lines() {
        let line = line.trim_end_matches('\r');
        if line.starts_with("HTTP/") {
            let status = line.split_whitespace().nth(1)?.parse().ok()?;
            head = Some(Head {
                status,
                headers: Vec::new(),
            });
        } else if let (Some(h), Some((name, value))) = (head.as_mut(), line.split_once(':')) {
            h.headers
                .push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
        }
    }
    head
}

/// The `rel="next"` URL of a `Link` header (RFC 8288, as GitHub writes it:
/// `<URL>; rel="next", <URL>; rel="last"`).
pub(crate) fn next_link(link: &str) -> Option<String> {
    link.split(',').find_map(|part| {
        let (url, params) = part.trim().split_once(';')?;
        let url = url.trim().strip_prefix('<')?.strip_suffix('>')?;
        let next = params.split(';').any(|p| {
            let p = p.trim().replace(' ', "");
            p == "rel=\"next\"" || p == "rel=next"
        });
        next.then(|| url.to_string())
    })
}

/// `scheme://host[:port]` of a URL.
fn origin(url: &str) -> Option<&str> {
    let start = url.find("://")? + 3;
    let end = url[start..].find('/').map_or(url.len(), |i| start + i);
    Some(&url[..end])
}

/// Whether `url` is on the API's own origin: the token goes nowhere else, so a `Link` that
/// points elsewhere is not followed.
pub(crate) fn same_origin(api: &str, url: &str) -> bool {
    match (origin(api), origin(url)) {
        (Some(a), Some(u)) => a.eq_ignore_ascii_case(u),
        _ => false,
    }
}

/// Before a request: seconds to wait when the budget is spent and not yet reset.
pub(crate) fn wait_for_budget(budget: Option<Budget>, now: i64) -> Option<u64> {
    let b = budget?;
    (b.remaining <= 0 && b.reset >= now).then(|| (b.reset - now + 1) as u64)
}

/// How many times one request is tried before its failure is final.
pub(crate) const MAX_ATTEMPTS: u32 = 6;

/// What to do with an answer.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Decision {
    /// Use it (2xx, 304, or a final 4xx the caller interprets).
    Use,
    /// Try again after this many seconds.
    Retry { secs: f64, why: String },
    /// Stop: tried [`MAX_ATTEMPTS`] times.
    GiveUp(String),
}

/// After an answer (`head`, or `None` when the transfer itself failed): use it, or wait and
/// try again. `attempt` counts from 0; `jitter` is in [0, 1) and spreads the waits of
/// secondary limits and errors (up to half again), so that parallel clients do not return
/// together. The primary limit (`X-RateLimit-Remaining: 0`) waits until its reset; a
/// secondary one (403/429 with `Retry-After`, or a rate-limit message) waits `Retry-After`,
/// else a minute, doubling; 5xx and failed transfers back off from 1 s, doubling.
pub(crate) fn decide(
    head: Option<&Head>,
    body_says_rate_limit: bool,
    now: i64,
    attempt: u32,
    jitter: f64,
) -> Decision {
    let spread = |base: f64| base + base * 0.5 * jitter.clamp(0.0, 1.0);
    let doubling = |first: f64| spread(first * f64::from(1u32 << attempt.min(10)));
    let (secs, why) = match head {
        None => (doubling(1.0), "the transfer failed".to_string()),
        Some(h) if h.status == 403 || h.status == 429 => {
            let retry_after = h.number("retry-after").filter(|s| *s >= 0);
            let spent = h.budget().filter(|b| b.remaining <= 0);
            match (retry_after, spent) {
                (Some(s), _) => (
                    spread(s.max(1) as f64),
                    format!("secondary rate limit (HTTP {}, Retry-After {s})", h.status),
                ),
                (None, Some(b)) => (
                    (b.reset - now).max(0) as f64 + 1.0,
                    format!("primary rate limit spent until {}", b.reset),
                ),
                (None, None) if h.status == 429 || body_says_rate_limit => (
                    doubling(60.0),
                    format!("secondary rate limit (HTTP {})", h.status),
                ),
                (None, None) => return Decision::Use,
            }
        }
        Some(h) if h.status >= 500 => (doubling(1.0), format!("HTTP {}", h.status)),
        Some(_) => return Decision::Use,
    };
    if attempt + 1 >= MAX_ATTEMPTS {
        return Decision::GiveUp(format!("{why}, after {MAX_ATTEMPTS} attempts"));
    }
    Decision::Retry { secs, why }
}
