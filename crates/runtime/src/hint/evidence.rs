//! What a failed run's output shows of a package client that needed the network: a module
//! it could not fetch, a download it could not make, a name it could not resolve. The
//! offline hint (`after_failed_run`) is given only with such a line: a `go test` whose tests
//! failed, or a `pip` the image does not have, needed no network, and saying it did would
//! send the user after a mirror for nothing.

/// What the output shows was needed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Need {
    /// A Go module: `go: downloading`, `module lookup disabled by GOPROXY=off`, a go.sum
    /// entry that only the network could add.
    Module,
    /// A package from an index or registry (pip, npm, uv, cargo).
    Download,
    /// A host name or route (the resolver's and the kernel's words).
    Network,
}

/// The signatures, each with what it shows. Matched as substrings, case-sensitively, as the
/// clients print them.
const SIGNATURES: &[(&str, Need)] = &[
    // Go (cmd/go).
    ("module lookup disabled by GOPROXY=off", Need::Module),
    ("go: downloading ", Need::Module),
    ("missing go.sum entry", Need::Module),
    ("cannot find module providing package", Need::Module),
    ("go: module lookup disabled", Need::Module),
    // pip and uv.
    (
        "Could not find a version that satisfies the requirement",
        Need::Download,
    ),
    ("No matching distribution found for", Need::Download),
    ("Failed to establish a new connection", Need::Download),
    ("Could not fetch URL", Need::Download),
    ("error: Failed to fetch", Need::Download),
    // npm, yarn, pnpm.
    ("npm error request to ", Need::Download),
    ("npm ERR! request to ", Need::Download),
    ("npm error code ENOTFOUND", Need::Download),
    ("npm ERR! code ENOTFOUND", Need::Download),
    ("npm error code EAI_AGAIN", Need::Download),
    ("npm ERR! code EAI_AGAIN", Need::Download),
    // cargo.
    ("failed to query replaced source registry", Need::Download),
    ("failed to download from", Need::Download),
    ("failed to get `", Need::Download),
    // The resolver and the kernel, whoever asked.
    ("Temporary failure in name resolution", Need::Network),
    ("Name or service not known", Need::Network),
    ("getaddrinfo EAI_AGAIN", Need::Network),
    ("getaddrinfo ENOTFOUND", Need::Network),
    ("Could not resolve host", Need::Network),
    ("network is unreachable", Need::Network),
    ("Network is unreachable", Need::Network),
];

/// The longest line quoted back.
const QUOTE_MAX: usize = 160;

/// The first line of `output` that shows a client needed the network, with what it shows
/// (the line trimmed and cut to [`QUOTE_MAX`] characters).
pub(crate) fn needed_network(output: &str) -> Option<(Need, String)> {
    output.lines().find_map(|line| {
        let (_, need) = SIGNATURES.iter().find(|(s, _)| line.contains(s))?;
        let line = line.trim();
        let quote: String = match line.chars().count() > QUOTE_MAX {
            true => line.chars().take(QUOTE_MAX - 1).chain(['…']).collect(),
            false => line.to_string(),
        };
        Some((*need, quote))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Real outputs (`fixtures/`), taken in a network namespace of their own with only `lo`
    /// (as `--net none`), from Debian's Go 1.19, pip, npm, pytest and dash.
    fn fixture(name: &str) -> String {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("src/hint/fixtures")
            .join(name);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    fn need(name: &str) -> Option<Need> {
        needed_network(&fixture(name)).map(|(n, _)| n)
    }

    #[test]
    fn outputs_of_clients_that_needed_the_network_are_evidence() {
        // go test of a module with a dependency: GOPROXY=off (reprorun's offline pin),
        // with and without go.sum, and a proxy out of reach.
        assert_eq!(need("go-proxy-off.txt"), Some(Need::Module));
        assert_eq!(need("go-proxy-off-gosum.txt"), Some(Need::Module));
        assert_eq!(need("go-proxy-unreachable.txt"), Some(Need::Module));
        // A go.mod saying `go 1.16` words it so (reprorun exec, Debian's Go 1.19).
        assert_eq!(need("go-gosum-go116.txt"), Some(Need::Module));
        assert_eq!(need("pip-offline.txt"), Some(Need::Download));
        assert_eq!(need("pip-offline-verbose.txt"), Some(Need::Download));
        assert_eq!(need("npm-offline.txt"), Some(Need::Download));
        let (_, line) = needed_network(&fixture("go-proxy-off-gosum.txt")).unwrap();
        assert_eq!(line, "go: downloading github.com/google/btree v1.1.2");
    }

    #[test]
    fn failures_that_needed_no_network_are_not() {
        // go test of a module without dependencies whose test fails; pytest's failure;
        // pip not installed (the shell's "not found"), or Python without its pip module.
        for name in [
            "go-test-fails-nodeps.txt",
            "pytest-fails.txt",
            "pip-not-installed.txt",
            "python-no-pip-module.txt",
        ] {
            assert_eq!(needed_network(&fixture(name)), None, "{name}");
        }
        assert_eq!(needed_network(""), None);
    }

    #[test]
    fn a_long_line_is_quoted_cut() {
        let line = format!("{} {}", "x".repeat(400), "Network is unreachable");
        let (need, quote) = needed_network(&line).unwrap();
        assert_eq!(need, Need::Network);
        assert_eq!(quote.chars().count(), QUOTE_MAX);
        assert!(quote.ends_with('…'));
    }
}
