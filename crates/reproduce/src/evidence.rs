//! Failure-mode evidence from a failing run's logs (stdout and stderr together).
//!
//! [`detect`] looks for signatures of each [`Mode`] line by line: exception names and
//! messages from Python and pytest first (pytest's `E   ` and `>   ` prefixes are stripped),
//! and the common equivalents of Node, the JVM, Ruby, pip and the shell.
//!
//! **Log evidence is weak.** A message in a log shows what a failure looked like, not what
//! caused it: a network error can follow from a drifted dependency, a `ModuleNotFoundError`
//! can come from an environment variable, and a log can mention a clock call that has
//! nothing to do with the failure. The leave-one-out runs (`Arm::ShimWithout(pin)`: the shim
//! with one pin removed) are an experiment and take precedence: when they name the pins that
//! change a patch's outcome, the summary's taxonomy uses those pins' modes and the logs only
//! otherwise (`summary::summarize`). Detection is conservative for the modes whose words are
//! common (time, randomness, environment): it needs call syntax or exact exception text,
//! not a bare word such as `date`, `seed` or `locale`.

use std::collections::BTreeSet;

use super::Mode;

/// The failure modes `log` shows evidence of, sorted (in [`Mode`]'s order) and without
/// duplicates. Empty when nothing matches (the caller decides whether that means
/// [`Mode::Other`]).
pub(crate) fn detect(log: &str) -> Vec<Mode> {
    let mut found = BTreeSet::new();
    let mut key_error = false;
    let mut environ_lookup = false;
    // An installer that found no version: drift, unless the index could not be reached.
    let mut not_found = false;
    for raw in log.lines() {
        let line = strip_marker(raw);
        if installer_not_found(line) {
            not_found = true;
        } else if dependency_drift(line) {
            found.insert(Mode::DependencyDrift);
        }
        if network(line) {
            found.insert(Mode::Network);
        }
        if time(line) {
            found.insert(Mode::Time);
        }
        if hash_ordering(line) {
            found.insert(Mode::HashOrdering);
        }
        if randomness(line) {
            found.insert(Mode::Randomness);
        }
        if environment(line) {
            found.insert(Mode::Environment);
        }
        if timeout_resource(line) {
            found.insert(Mode::TimeoutResource);
        }
        key_error |= line.contains("KeyError: ");
        environ_lookup |= line.contains("environ[");
    }
    // pip and npm say a package has no matching version when they could not reach the
    // index at all (no network, a proxy's TLS error): that is the network, not drift.
    if not_found && !found.contains(&Mode::Network) {
        found.insert(Mode::DependencyDrift);
    }
    // `os.environ["X"]` in the traceback and a KeyError: a missing environment variable.
    if key_error && environ_lookup {
        found.insert(Mode::Environment);
    }
    found.into_iter().collect()
}

/// The line without leading blanks and pytest's `E` (error) and `>` (failing line) markers.
fn strip_marker(raw: &str) -> &str {
    let line = raw.trim_start();
    for marker in ["E ", "> "] {
        if let Some(rest) = line.strip_prefix(marker) {
            return rest.trim_start();
        }
    }
    line
}

fn any(line: &str, needles: &[&str]) -> bool {
    needles.iter().any(|n| line.contains(n))
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Whether the character before byte `i` of `line` (none at the start) is a word character.
fn word_before(line: &str, i: usize) -> bool {
    matches!(line[..i].chars().next_back(), Some(c) if is_word_char(c))
}

/// Whether `needle` occurs in `line` at the start of a word: not right after a letter, digit
/// or underscore (so `datetime.time(` does not count as `time.time(`).
fn at_word_start(line: &str, needle: &str) -> bool {
    line.match_indices(needle)
        .any(|(i, _)| !word_before(line, i))
}

/// Whether `word` occurs in `line` as a whole word.
fn whole_word(line: &str, word: &str) -> bool {
    line.match_indices(word).any(|(i, _)| {
        let after = line[i + word.len()..].chars().next();
        !word_before(line, i) && !matches!(after, Some(c) if is_word_char(c))
    })
}

/// An installer's "no such version" (pip, npm): drift when the index answered.
fn installer_not_found(line: &str) -> bool {
    any(
        line,
        &[
            "No matching distribution found",
            "Could not find a version that satisfies the requirement",
            "No matching version found for",
        ],
    )
}

fn dependency_drift(line: &str) -> bool {
    if any(
        line,
        &[
            "ModuleNotFoundError",
            "ImportError:",
            "ImportError while importing",
            "cannot import name",
            "ResolutionImpossible",
            "VersionConflict",
            "DistributionNotFound",
            // Node (and npm's resolver), Ruby, the JVM.
            "Cannot find module '",
            "ERESOLVE unable to resolve dependency tree",
            "cannot load such file",
            "NoClassDefFoundError",
            "ClassNotFoundException",
        ],
    ) {
        return true;
    }
    if line.contains("AttributeError: module '") && line.contains("has no attribute") {
        return true;
    }
    // A deprecation turned into an error (`-W error`, `filterwarnings = error`): the warning
    // is the exception itself, not a line of the warnings summary (`path:12: Deprecation…`).
    [
        "DeprecationWarning:",
        "PendingDeprecationWarning:",
        "FutureWarning:",
    ]
    .iter()
    .any(|w| line.starts_with(w))
}

fn network(line: &str) -> bool {
    any(
        line,
        &[
            "ConnectionError",
            "ConnectionRefusedError",
            "ConnectionResetError",
            "Connection refused",
            "Connection reset by peer",
            "Name or service not known",
            "Temporary failure in name resolution",
            "Network is unreachable",
            "No route to host",
            "urlopen error",
            "NewConnectionError",
            "Max retries exceeded with url",
            "socket.gaierror",
            "getaddrinfo failed",
            "nodename nor servname provided",
            "Could not resolve host",
            "ECONNREFUSED",
            "ENOTFOUND",
            "EAI_AGAIN",
            "UnknownHostException",
            // TLS failures (a proxy's certificate, an interception): reaching the index
            // failed, whatever the packages.
            "SSLError",
            "SSLCertVerificationError",
            "CERTIFICATE_VERIFY_FAILED",
            "certificate verify failed",
            "unable to get local issuer certificate",
            "SELF_SIGNED_CERT_IN_CHAIN",
            "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
            "x509: certificate",
            "ETIMEDOUT",
            "EHOSTUNREACH",
            "ECONNRESET",
            "npm ERR! network",
        ],
    )
}

fn time(line: &str) -> bool {
    if any(
        line,
        &["freezegun", "freeze_time", "FakeDatetime", "time_machine"],
    ) {
        return true;
    }
    [
        "datetime.now(",
        "datetime.utcnow(",
        "datetime.today(",
        "date.today(",
        "time.time(",
        "time.localtime(",
        "time.gmtime(",
        "time.strftime(",
        "timezone.now(",
    ]
    .iter()
    .any(|call| at_word_start(line, call))
}

fn hash_ordering(line: &str) -> bool {
    any(line, &["PYTHONHASHSEED", "hash randomization"])
}

fn randomness(line: &str) -> bool {
    if any(
        line,
        &[
            "Falsifying example",
            "@seed(",
            "RandomState(",
            "random_state=",
            "manual_seed(",
        ],
    ) {
        return true;
    }
    // `random.choice(…)`, `np.random.rand(…)`, `File ".../random.py"`; not `test_random.py`.
    line.match_indices("random.").any(|(i, m)| {
        let after = line[i + m.len()..].chars().next();
        !word_before(line, i) && matches!(after, Some(c) if c.is_ascii_alphabetic() || c == '_')
    }) || at_word_start(line, "uuid4(")
}

/// Environment variables whose absence (`KeyError: 'HOME'`) points at the environment.
const ENV_VARS: [&str; 14] = [
    "HOME", "USER", "USERNAME", "LOGNAME", "TZ", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "PATH",
    "SHELL", "TMPDIR", "TERM", "PWD",
];

fn environment(line: &str) -> bool {
    if any(
        line,
        &[
            "UnicodeEncodeError",
            "UnicodeDecodeError",
            "unknown locale",
            "locale.Error",
            "unsupported locale setting",
            "UnknownTimeZoneError",
            "ZoneInfoNotFoundError",
            "No time zone found",
            "getpwuid(): uid not found",
        ],
    ) {
        return true;
    }
    ENV_VARS.iter().any(|v| {
        line.contains(&format!("KeyError: '{v}'")) || line.contains(&format!("KeyError: \"{v}\""))
    })
}

fn timeout_resource(line: &str) -> bool {
    if any(
        line,
        &[
            "MemoryError",
            "Too many open files",
            "No space left on device",
            "Cannot allocate memory",
            "std::bad_alloc",
            "ENOMEM",
            "ENOSPC",
            "EMFILE",
            "Failed: Timeout",
            "+ Timeout +",
        ],
    ) {
        return true;
    }
    // The shell's report of a SIGKILL (`bash: line 1:  4242 Killed  python -m pytest`).
    whole_word(line, "Killed")
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAIN_ASSERTION: &str = "\
============================= test session starts ==============================
platform linux -- Python 3.11.4, pytest-7.4.0, pluggy-1.2.0
Using --randomly-seed=1234
rootdir: /testbed
collected 3 items

tests/test_math.py ..F                                                   [100%]

=================================== FAILURES ===================================
________________________________ test_addition _________________________________

    def test_addition():
>       assert add(2, 2) == 5
E       assert 4 == 5
E        +  where 4 = add(2, 2)

tests/test_math.py:9: AssertionError
=============================== warnings summary ===============================
tests/test_math.py::test_addition
  /testbed/src/math.py:3: DeprecationWarning: the imp module is deprecated
    import imp

=========================== short test summary info ============================
FAILED tests/test_math.py::test_addition - assert 4 == 5
==================== 1 failed, 2 passed, 1 warning in 0.05s ====================
";

    #[test]
    fn plain_assertion_shows_nothing() {
        assert_eq!(detect(PLAIN_ASSERTION), vec![]);
        assert_eq!(detect(""), vec![]);
    }

    #[test]
    fn dependency_drift() {
        let collection = "\
==================================== ERRORS ====================================
____________________ ERROR collecting tests/test_io.py ____________________
ImportError while importing test module '/testbed/tests/test_io.py'.
Hint: make sure your test modules/packages have valid Python names.
Traceback:
/usr/lib/python3.9/importlib/__init__.py:127: in import_module
    return _bootstrap._gcd_import(name[level:], package, level)
tests/test_io.py:4: in <module>
    from pandas.io.common import get_handle
E   ImportError: cannot import name 'get_handle' from 'pandas.io.common'
";
        assert_eq!(detect(collection), vec![Mode::DependencyDrift]);
        let attr = "\
    def test_array():
>       x = np.float(3)
E       AttributeError: module 'numpy' has no attribute 'float'.
";
        assert_eq!(detect(attr), vec![Mode::DependencyDrift]);
        let pip = "\
ERROR: Could not find a version that satisfies the requirement flask==0.10.1 (from versions: none)
ERROR: No matching distribution found for flask==0.10.1
";
        assert_eq!(detect(pip), vec![Mode::DependencyDrift]);
        let resolver = "ERROR: ResolutionImpossible: for help visit the pip docs\n";
        assert_eq!(detect(resolver), vec![Mode::DependencyDrift]);
        let missing = "E   ModuleNotFoundError: No module named 'six.moves'\n";
        assert_eq!(detect(missing), vec![Mode::DependencyDrift]);
        let conflict = "pkg_resources.ContextualVersionConflict: (pytest 8.0.0, Requirement.parse('pytest<7'))\n";
        assert_eq!(detect(conflict), vec![Mode::DependencyDrift]);
        let warning_error = "\
    def test_parse():
>       parse('x')
E       DeprecationWarning: 'U' mode is deprecated
";
        assert_eq!(detect(warning_error), vec![Mode::DependencyDrift]);
        let npm = "npm error notarget No matching version found for padkit@^3.0.0.\n";
        assert_eq!(detect(npm), vec![Mode::DependencyDrift]);
        let node =
            "  error: \"Cannot find module 'padkit/pad'\\nRequire stack:\\n- /work/index.js\"\n";
        assert_eq!(detect(node), vec![Mode::DependencyDrift]);
    }

    #[test]
    fn network() {
        let requests = "\
E   requests.exceptions.ConnectionError: HTTPSConnectionPool(host='pypi.org', port=443): Max retries exceeded with url: /simple/ (Caused by NewConnectionError('<urllib3.connection.HTTPSConnection object at 0x7f>: Failed to establish a new connection: [Errno -3] Temporary failure in name resolution'))
";
        assert_eq!(detect(requests), vec![Mode::Network]);
        let urllib =
            "E   urllib.error.URLError: <urlopen error [Errno 101] Network is unreachable>\n";
        assert_eq!(detect(urllib), vec![Mode::Network]);
        let refused = "E   ConnectionRefusedError: [Errno 111] Connection refused\n";
        assert_eq!(detect(refused), vec![Mode::Network]);
        let dns = "socket.gaierror: [Errno -2] Name or service not known\n";
        assert_eq!(detect(dns), vec![Mode::Network]);
    }

    #[test]
    fn an_index_out_of_reach_is_the_network_not_drift() {
        // pip behind a proxy that intercepts TLS: it retries, then says no version matched.
        // On main this was `dependency_drift` alone (and fed the drift half-life).
        let tls = "\
WARNING: Retrying (Retry(total=4, connect=None, read=None, redirect=None, status=None)) after connection broken by 'SSLError(SSLCertVerificationError(1, '[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: self-signed certificate in certificate chain (_ssl.c:1006)'))': /simple/flask/
ERROR: Could not find a version that satisfies the requirement flask==0.10.1 (from versions: none)
ERROR: No matching distribution found for flask==0.10.1
";
        assert_eq!(detect(tls), vec![Mode::Network]);
        // pip with no network at all.
        let offline = "\
WARNING: Retrying (Retry(total=0, connect=None, read=None, redirect=None, status=None)) after connection broken by 'NewConnectionError('<pip._vendor.urllib3.connection.HTTPSConnection object at 0x7f>: Failed to establish a new connection: [Errno -3] Temporary failure in name resolution')': /simple/flask/
ERROR: No matching distribution found for flask==0.10.1
";
        assert_eq!(detect(offline), vec![Mode::Network]);
        let npm = "npm error code SELF_SIGNED_CERT_IN_CHAIN\nnpm error request to https://registry.npmjs.org/padkit failed\n";
        assert_eq!(detect(npm), vec![Mode::Network]);
        // A package really gone, with the network fine, is still drift; and a missing
        // module next to a network error is both.
        let both = "E   ModuleNotFoundError: No module named 'six'\nE   ConnectionRefusedError: [Errno 111] Connection refused\n";
        assert_eq!(detect(both), vec![Mode::DependencyDrift, Mode::Network]);
    }

    #[test]
    fn time() {
        let now = "\
    def test_expiry():
        token = make_token()
>       assert token.expires > datetime.datetime.now()
E       assert datetime.datetime(2023, 1, 1, 0, 0) > datetime.datetime(2025, 6, 1, 12, 0)
";
        assert_eq!(detect(now), vec![Mode::Time]);
        let today = "\
  File \"/testbed/app/report.py\", line 12, in header
    year = date.today().year
AssertionError: 'Copyright 2024' != 'Copyright 2025'
";
        assert_eq!(detect(today), vec![Mode::Time]);
        let frozen =
            "tests/test_cache.py:20: in test_ttl\n    with freezegun.freeze_time('2020-01-01'):\n";
        assert_eq!(detect(frozen), vec![Mode::Time]);
        // A date in an assertion alone, or a `datetime.time(...)` value, is no evidence.
        let weak = "E   assert datetime.time(12, 0) == datetime.time(13, 0)\n";
        assert_eq!(detect(weak), vec![]);
    }

    #[test]
    fn hash_ordering() {
        let log = "\
E       AssertionError: assert ['b', 'a'] == ['a', 'b']
E         Use -v to get more diff
Note: test depends on PYTHONHASHSEED; hash randomization is enabled
";
        assert_eq!(detect(log), vec![Mode::HashOrdering]);
    }

    #[test]
    fn randomness() {
        let frames = "\
tests/test_sample.py:14: in test_pick
    chosen = random.choice(items)
E   AssertionError: assert 'c' == 'a'
";
        assert_eq!(detect(frames), vec![Mode::Randomness]);
        let numpy = ">       x = np.random.rand(10)\n";
        assert_eq!(detect(numpy), vec![Mode::Randomness]);
        let stdlib = "  File \"/usr/lib/python3.11/random.py\", line 378, in choice\n";
        assert_eq!(detect(stdlib), vec![Mode::Randomness]);
        let hypothesis = "Falsifying example: test_roundtrip(\n    s='\\x80',\n)\n";
        assert_eq!(detect(hypothesis), vec![Mode::Randomness]);
        // Test files named after randomness are not evidence.
        let name = "FAILED tests/test_random.py::test_x - assert 1 == 2\n";
        assert_eq!(detect(name), vec![]);
    }

    #[test]
    fn environment() {
        let unicode = "E   UnicodeEncodeError: 'ascii' codec can't encode character '\\xe9' in position 3: ordinal not in range(128)\n";
        assert_eq!(detect(unicode), vec![Mode::Environment]);
        let locale = "E   locale.Error: unsupported locale setting\n";
        assert_eq!(detect(locale), vec![Mode::Environment]);
        let home = "\
  File \"/testbed/conf.py\", line 3, in <module>
    ROOT = os.path.join(os.environ['HOME'], '.app')
KeyError: 'HOME'
";
        assert_eq!(detect(home), vec![Mode::Environment]);
        // Any variable read through os.environ that is missing.
        let other_var = "\
>       token = os.environ[\"APP_TOKEN\"]
E       KeyError: 'APP_TOKEN'
";
        assert_eq!(detect(other_var), vec![Mode::Environment]);
        // A KeyError of a dict is not.
        let dict = "E       KeyError: 'name'\n";
        assert_eq!(detect(dict), vec![]);
    }

    #[test]
    fn timeout_resource() {
        let memory = "E   MemoryError\n";
        assert_eq!(detect(memory), vec![Mode::TimeoutResource]);
        let killed = "bash: line 1:  4242 Killed                  python -m pytest tests\n";
        assert_eq!(detect(killed), vec![Mode::TimeoutResource]);
        let files = "E   OSError: [Errno 24] Too many open files: '/tmp/x'\n";
        assert_eq!(detect(files), vec![Mode::TimeoutResource]);
        let disk = "OSError: [Errno 28] No space left on device\n";
        assert_eq!(detect(disk), vec![Mode::TimeoutResource]);
        let pytest_timeout = "+++++++++++++++++++++++++++++++++++ Timeout ++++++++++++++++++++++++++++++++++++\nE   Failed: Timeout >60.0s\n";
        assert_eq!(detect(pytest_timeout), vec![Mode::TimeoutResource]);
        // Not the word inside another one.
        assert_eq!(detect("test_process_is_Killedish passed\n"), vec![]);
    }

    #[test]
    fn several_modes_sorted_and_deduplicated() {
        let log = "\
E   ConnectionError: boom
E   ModuleNotFoundError: No module named 'x'
E   ModuleNotFoundError: No module named 'y'
E   MemoryError
";
        assert_eq!(
            detect(log),
            vec![Mode::DependencyDrift, Mode::Network, Mode::TimeoutResource]
        );
    }

    #[test]
    fn odd_input_does_not_panic() {
        // Multi-byte characters right before and after the needles, lone markers.
        let log = "é random.é\nErandom.x\nE\n>\n\u{1F600}Killed\u{1F600}\ntime.time(é";
        let modes = detect(log);
        assert!(modes.contains(&Mode::Time));
    }
}
