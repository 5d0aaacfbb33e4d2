//! `--inject-env NAME:HOST[:PORT]` (issue 47, `spec/network.md`): keys that never enter the
//! sandbox. The sandbox sees `NAME` set to a placeholder of the caller's value's shape; the
//! proxy terminates TLS for HOST with a certificate of a CA made for this run and puts the
//! real value back where the placeholder appears in a request's head, on connections to
//! HOST only. The placeholder seen anywhere else is passed unchanged and recorded.
//!
//! What is data ([`Inject`]: the name, the host pattern and the placeholder; no value) goes
//! into the plan; what is secret ([`Intercept`]: the values, the CA's key) is made by the
//! executor and lives in the supervisor and the proxy's helper only.

mod ca;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rustls::{ClientConfig, RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;
use thiserror::Error;

use crate::allow::{HostPattern, Rule, Target};

/// Where the sandbox finds the CA bundle (the host's system bundle and the run's CA), bound
/// read-only; the variables of [`ca_env`] name it.
pub const CA_BUNDLE: &str = "/run/reprorun-ca.pem";

/// The host's system bundles, first found wins (Debian, Fedora, openSUSE, Alpine).
const SYSTEM_BUNDLES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/ssl/cert.pem",
];

/// The largest bundle read (the host's, or `--upstream-ca`).
const BUNDLE_MAX: u64 = 8 << 20;

/// The fewest letters and digits a value must have to get a placeholder of its shape (a
/// shorter one would be guessable, and could match other text of the request).
const MIN_RANDOM: usize = 12;

#[derive(Debug, Error)]
pub enum InjectError {
    #[error("--inject-env {text:?}: {why}; write NAME:HOST[:PORT]")]
    Spec { text: String, why: String },
    #[error("--inject-env {name}: {name} is not set in reprorun's environment")]
    Unset { name: String },
    #[error("--inject-env {name}: the value has {found} letters and digits; at least {MIN_RANDOM} are needed for a placeholder of its shape")]
    TooShort { name: String, found: usize },
    #[error("--inject-env {name}: the value is not ASCII text without control characters")]
    NotAscii { name: String },
    #[error("--inject-env: no randomness for the placeholder")]
    Random,
    #[error("--inject-env: cannot make the run's CA: {0}")]
    Ca(String),
    #[error("--upstream-ca {path}: {why}")]
    UpstreamCa { path: PathBuf, why: String },
    #[error("--inject-env: the host's trust store ({path}): {why}")]
    TrustStore { path: String, why: String },
    #[error("--inject-env: TLS configuration: {0}")]
    Tls(String),
}

/// One `--inject-env`, as the plan holds it: no value.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Inject {
    /// The environment variable.
    pub name: String,
    /// The host (a name or `*.suffix`) and port the real value goes to.
    pub host: Rule,
    /// What the sandbox sees instead: the value's shape, random per run.
    pub placeholder: String,
}

/// Parses `NAME:HOST[:PORT]` (HOST as `--allow-host` writes it, a name or `*.suffix`).
pub fn parse_spec(text: &str) -> Result<(String, Rule), InjectError> {
    let err = |why: String| InjectError::Spec {
        text: text.to_string(),
        why,
    };
    let (name, host) = text
        .split_once(':')
        .ok_or_else(|| err("no `:` between the variable and the host".into()))?;
    let valid = !name.is_empty()
        && !name.as_bytes()[0].is_ascii_digit()
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if !valid {
        return Err(err(format!("{name:?} is not a variable name")));
    }
    let rule = Rule::parse(host).map_err(|e| err(e.to_string()))?;
    if let HostPattern::Ip(_) = rule.host {
        return Err(err(
            "name the host: the proxy's certificate is for a name".into()
        ));
    }
    Ok((name.to_string(), rule))
}

/// A placeholder for `value`: the same length, each ASCII letter or digit replaced by a
/// random one of its class (upper, lower, digit), every other character kept.
pub fn placeholder(name: &str, value: &str) -> Result<String, InjectError> {
    if !value.is_ascii() {
        return Err(InjectError::NotAscii { name: name.into() });
    }
    let found = value.bytes().filter(u8::is_ascii_alphanumeric).count();
    if found < MIN_RANDOM {
        return Err(InjectError::TooShort {
            name: name.into(),
            found,
        });
    }
    let provider = provider();
    loop {
        let mut noise = vec![0u8; value.len()];
        provider
            .secure_random
            .fill(&mut noise)
            .map_err(|_| InjectError::Random)?;
        let out: String = value
            .bytes()
            .zip(noise)
            .map(|(b, r)| shaped(b, r))
            .collect();
        if out != value {
            return Ok(out);
        }
    }
}

/// `b` replaced by a random character of its class (`r` a random byte).
fn shaped(b: u8, r: u8) -> char {
    let pick = |first: u8, n: u8| char::from(first + r % n);
    match b {
        b'a'..=b'z' => pick(b'a', 26),
        b'A'..=b'Z' => pick(b'A', 26),
        b'0'..=b'9' => pick(b'0', 10),
        other => char::from(other),
    }
}

/// The variables that point clients at [`CA_BUNDLE`] (OpenSSL, Python requests, Node, curl,
/// git).
pub fn ca_env() -> Vec<(&'static str, &'static str)> {
    [
        "SSL_CERT_FILE",
        "REQUESTS_CA_BUNDLE",
        "NODE_EXTRA_CA_CERTS",
        "CURL_CA_BUNDLE",
        "GIT_SSL_CAINFO",
    ]
    .into_iter()
    .map(|k| (k, CA_BUNDLE))
    .collect()
}

/// One secret the proxy puts back: its name, where it goes, the placeholder and the value.
pub(crate) struct Secret {
    pub(crate) name: String,
    pub(crate) host: Rule,
    pub(crate) placeholder: Vec<u8>,
    pub(crate) value: Vec<u8>,
}

/// What the terminating proxy holds: the secrets, the run's CA, the certificates made so
/// far, and the TLS configuration towards upstreams.
pub struct Intercept {
    pub(crate) secrets: Vec<Secret>,
    authority: ca::Authority,
    leaves: Mutex<HashMap<String, Arc<ServerConfig>>>,
    pub(crate) upstream: Arc<ClientConfig>,
    /// `--net-record`, `--net-replay`: every tunnel to a name is terminated.
    all: bool,
}

impl std::fmt::Debug for Intercept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.secrets.iter().map(|s| s.name.as_str()).collect();
        f.debug_struct("Intercept")
            .field("secrets", &names)
            .finish()
    }
}

impl Intercept {
    /// Makes the run's CA and reads each value with `value` (the caller's environment);
    /// upstreams are verified against `upstream_ca` or the host's system bundle.
    pub fn new(
        injects: &[Inject],
        upstream_ca: Option<&Path>,
        value: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Intercept, InjectError> {
        let mut secrets = Vec::new();
        for i in injects {
            let v = value(&i.name).ok_or_else(|| InjectError::Unset {
                name: i.name.clone(),
            })?;
            // Put into a header line: no line break, no other control character.
            if !v.is_ascii() || v.bytes().any(|b| b.is_ascii_control()) {
                return Err(InjectError::NotAscii {
                    name: i.name.clone(),
                });
            }
            secrets.push(Secret {
                name: i.name.clone(),
                host: i.host.clone(),
                placeholder: i.placeholder.clone().into_bytes(),
                value: v.into_bytes(),
            });
        }
        let roots = match upstream_ca {
            Some(path) => roots(&read_bundle(path).map_err(|why| InjectError::UpstreamCa {
                path: path.to_path_buf(),
                why,
            })?)
            .map_err(|why| InjectError::UpstreamCa {
                path: path.to_path_buf(),
                why,
            })?,
            None => {
                let (path, pem) = system_bundle()?;
                roots(&pem).map_err(|why| InjectError::TrustStore { path, why })?
            }
        };
        let provider = Arc::new(provider());
        let mut client = ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(rustls::DEFAULT_VERSIONS)
            .map_err(|e| InjectError::Tls(e.to_string()))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        client.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Intercept {
            secrets,
            authority: ca::Authority::new()?,
            leaves: Mutex::new(HashMap::new()),
            upstream: Arc::new(client),
            all: false,
        })
    }

    /// The same, terminating every tunnel to a name (`--net-record`, `--net-replay`).
    pub fn terminating_all(self, all: bool) -> Intercept {
        Intercept { all, ..self }
    }

    /// The run's CA certificate (PEM): public, bound into the sandbox.
    pub fn ca_pem(&self) -> String {
        self.authority.pem()
    }

    /// The bundle the sandbox trusts: the host's system bundle (when there is one) and the
    /// run's CA.
    pub fn bundle(&self) -> String {
        let mut out = system_bundle().map(|(_, pem)| pem).unwrap_or_default();
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&self.ca_pem());
        out
    }

    /// The secrets bound to `target:port` (a name), if any: the proxy terminates it.
    pub(crate) fn terminates(&self, target: &Target, port: u16) -> bool {
        if self.all && matches!(target, Target::Name(_)) {
            return true;
        }
        self.secrets
            .iter()
            .any(|s| s.host.port == port && s.host.host_matches(target))
    }

    /// The TLS server configuration for `name` (a certificate made for it on first use).
    pub(crate) fn server_for(&self, name: &str) -> Result<Arc<ServerConfig>, String> {
        let mut leaves = crate::proxy::lock(&self.leaves);
        if let Some(c) = leaves.get(name) {
            return Ok(Arc::clone(c));
        }
        let (chain, key) = self.authority.leaf(name)?;
        let provider = Arc::new(provider());
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(rustls::DEFAULT_VERSIONS)
            .map_err(|e| e.to_string())?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(|e| e.to_string())?;
        // HTTP/1.1 only: the proxy reads request heads, not HTTP/2 frames.
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let config = Arc::new(config);
        if leaves.len() < 1024 {
            leaves.insert(name.to_string(), Arc::clone(&config));
        }
        Ok(config)
    }
}

/// The ring provider: it builds without cmake (aws-lc-rs does not). rustls 0.23.48 marks it
/// deprecated for lacking post-quantum key exchange; that is a limit (`spec/network.md`).
/// X25519 first: ring's default order offers a P-384 key share first, which a server takes
/// (OpenSSL 3.0's P-384 is its generic, slow code: about 4 ms of `openssl s_server`'s CPU
/// per handshake on our VM, `runtime-tests/bench/RESULTS.md`); clients and servers
/// commonly prefer X25519.
#[allow(deprecated)]
fn provider() -> rustls::crypto::CryptoProvider {
    use rustls::crypto::ring::{default_provider, kx_group};
    rustls::crypto::CryptoProvider {
        kx_groups: vec![kx_group::X25519, kx_group::SECP256R1, kx_group::SECP384R1],
        ..default_provider()
    }
}

/// The host's system bundle: its path and text.
fn system_bundle() -> Result<(String, String), InjectError> {
    for path in SYSTEM_BUNDLES {
        if let Ok(pem) = read_bundle(Path::new(path)) {
            return Ok(((*path).to_string(), pem));
        }
    }
    Err(InjectError::TrustStore {
        path: SYSTEM_BUNDLES.join(", "),
        why: "none found: name the upstream's CA with --upstream-ca".into(),
    })
}

/// A PEM file of at most [`BUNDLE_MAX`] bytes: a regular file, opened without blocking (a
/// FIFO or a device is refused, not waited on or read). Links are followed: the system
/// bundles are links, and a caller's `--upstream-ca` has its links refused (unless
/// `--follow-symlinks`) where the path is named, as the host-path rule has it.
fn read_bundle(path: &Path) -> Result<String, String> {
    reprorun_base::sys::hostpath::read_to_string(path, true, BUNDLE_MAX).map_err(|e| e.to_string())
}

/// The certificates of a PEM bundle as trust anchors (at least one).
fn roots(pem: &str) -> Result<RootCertStore, String> {
    let mut store = RootCertStore::empty();
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem.as_bytes())
        .filter_map(Result::ok)
        .collect();
    let (added, _ignored) = store.add_parsable_certificates(certs);
    if added == 0 {
        return Err("no certificate in it".into());
    }
    Ok(store)
}

#[cfg(test)]
mod tests;
