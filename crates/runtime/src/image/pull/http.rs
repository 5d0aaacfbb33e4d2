//! The registry's HTTP API through the `curl` CLI, as `mirror pull` and `audit collect` fetch:
//! no TLS stack to build into the static binary, and curl brings resumable downloads
//! (`-C -`, a `Range` request), redirects to blob storage (dropping `Authorization` on
//! another host) and the host's proxies. Headers and credentials reach curl through
//! `--config -` on its stdin, never its command line.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use base64::Engine;

use super::auth::{self, Challenge, Credentials};
use super::PullError;

/// Largest token answer and error body read.
const MAX_SMALL: u64 = 1 << 20;

/// TLS settings, like skopeo's and podman's `--tls-verify` and `--cert-dir`.
#[derive(Debug, Clone, Default)]
pub struct Tls {
    /// `false`: certificates are not checked, and plain HTTP is tried when TLS fails.
    pub verify: bool,
    /// `*.crt` files: CAs; `NAME.cert` with `NAME.key`: a client certificate.
    pub cert_dir: Option<PathBuf>,
}

pub struct Client {
    host: String,
    repository: String,
    tls: Tls,
    cacert: Option<PathBuf>,
    client_cert: Option<(PathBuf, PathBuf)>,
    creds: Option<Credentials>,
    /// `https`, or `http` once TLS failed with `--tls-verify=false`.
    scheme: Mutex<&'static str>,
    /// The `Authorization` value in use, never printed.
    authorization: Mutex<Option<String>>,
    scratch: PathBuf,
    counter: AtomicU64,
}

/// What one request answered.
pub struct Answer {
    pub status: u16,
    /// Headers of the last response (after redirects), names lowercase.
    pub headers: Vec<(String, String)>,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

fn quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '\\' | '"' => {
                out.push('\\');
                out.push(c);
            }
            '\n' | '\r' => {}
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

impl Client {
    pub fn new(
        host: &str,
        repository: &str,
        tls: Tls,
        creds: Option<Credentials>,
        scratch: &Path,
    ) -> Result<Client, PullError> {
        let mut client = Client {
            host: host.to_string(),
            repository: repository.to_string(),
            tls,
            cacert: None,
            client_cert: None,
            creds,
            scheme: Mutex::new("https"),
            authorization: Mutex::new(None),
            scratch: scratch.to_path_buf(),
            counter: AtomicU64::new(0),
        };
        client.load_certs()?;
        Ok(client)
    }

    /// Reads `--cert-dir` (else `/etc/containers/certs.d/HOST`, `/etc/docker/certs.d/HOST`).
    fn load_certs(&mut self) -> Result<(), PullError> {
        let dir = match &self.tls.cert_dir {
            Some(d) => d.clone(),
            None => {
                let found = ["/etc/containers/certs.d", "/etc/docker/certs.d"]
                    .iter()
                    .map(|b| Path::new(b).join(&self.host))
                    .find(|d| d.is_dir());
                match found {
                    Some(d) => d,
                    None => return Ok(()),
                }
            }
        };
        let bad = |e: std::io::Error| PullError::CertDir {
            path: dir.clone(),
            detail: e.to_string(),
        };
        let mut names: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map_err(bad)?
            .flatten()
            .map(|e| e.path())
            .collect();
        names.sort();
        let mut bundle = Vec::new();
        for p in &names {
            match p.extension().and_then(|e| e.to_str()) {
                Some("crt") => {
                    let mut pem = std::fs::read(p).map_err(bad)?;
                    pem.push(b'\n');
                    bundle.extend(pem);
                }
                Some("cert") => {
                    let key = p.with_extension("key");
                    if !key.is_file() {
                        return Err(PullError::CertDir {
                            path: dir.clone(),
                            detail: format!("{} has no {}", p.display(), key.display()),
                        });
                    }
                    self.client_cert = Some((p.clone(), key));
                }
                _ => {}
            }
        }
        if !bundle.is_empty() {
            let path = self.scratch.join("ca.pem");
            std::fs::write(&path, bundle).map_err(bad)?;
            self.cacert = Some(path);
        }
        Ok(())
    }

    pub fn url(&self, path: &str) -> String {
        let scheme = *self.scheme.lock().unwrap_or_else(|e| e.into_inner());
        format!("{scheme}://{}/v2/{}/{path}", self.host, self.repository)
    }

    /// One curl run: GET `url` into `out` (appending from its end when `resume`).
    fn curl(
        &self,
        url: &str,
        accept: &[&str],
        out: &Path,
        resume: bool,
        max: u64,
        basic: Option<&Credentials>,
    ) -> Result<(Answer, i32), PullError> {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let head_path = self.scratch.join(format!("headers-{n}"));
        let mut config = format!(
            "url = {}\noutput = {}\ndump-header = {}\n",
            quote(url),
            quote(&out.display().to_string()),
            quote(&head_path.display().to_string())
        );
        if !accept.is_empty() {
            config += &format!(
                "header = {}\n",
                quote(&format!("Accept: {}", accept.join(", ")))
            );
        }
        if let Some(c) = basic {
            config += &format!(
                "user = {}\n",
                quote(&format!("{}:{}", c.username, c.password))
            );
        } else if let Some(a) = self
            .authorization
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            config += &format!("header = {}\n", quote(&format!("Authorization: {a}")));
        }
        let mut cmd = Command::new("curl");
        cmd.args(["-sS", "-L", "--max-redirs", "5", "--proto", "=https,http"])
            .args(["--connect-timeout", "30", "-w", "%{http_code}"])
            .args(["--max-filesize", &max.to_string()]);
        if resume {
            cmd.args(["-C", "-", "--fail"]);
        }
        if !self.tls.verify {
            cmd.arg("-k");
        }
        if let Some(ca) = &self.cacert {
            cmd.arg("--cacert").arg(ca);
        }
        if let Some((cert, key)) = &self.client_cert {
            cmd.arg("--cert").arg(cert).arg("--key").arg(key);
        }
        cmd.args(["--config", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let failed = |detail: String| PullError::Http {
            url: url.to_string(),
            detail,
        };
        let mut child = cmd
            .spawn()
            .map_err(|e| failed(format!("cannot run curl: {e}; install curl")))?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin
                .write_all(config.as_bytes())
                .map_err(|e| failed(format!("curl's configuration: {e}")))?;
        }
        let o = child
            .wait_with_output()
            .map_err(|e| failed(format!("curl: {e}")))?;
        let code = o.status.code().unwrap_or(-1);
        let status = String::from_utf8_lossy(&o.stdout)
            .trim()
            .parse()
            .unwrap_or(0);
        let headers = std::fs::read(&head_path).unwrap_or_default();
        let _ = std::fs::remove_file(&head_path);
        let answer = Answer {
            status,
            headers: parse_headers(&headers),
        };
        if code != 0 && code != 22 {
            let why = String::from_utf8_lossy(&o.stderr);
            let why = why.lines().next().unwrap_or("").trim().to_string();
            return Err(PullError::Curl {
                url: url.to_string(),
                code,
                detail: why,
            });
        }
        Ok((answer, code))
    }

    /// One request, answering the registry's challenge once; `https` falls back to `http`
    /// under `--tls-verify=false`.
    pub fn get(
        &self,
        path: &str,
        accept: &[&str],
        out: &Path,
        resume: bool,
        max: u64,
    ) -> Result<Answer, PullError> {
        let mut authenticated = false;
        loop {
            let url = self.url(path);
            let answer = match self.curl(&url, accept, out, resume, max, None) {
                Err(PullError::Curl { code: 35, .. })
                    if !self.tls.verify && url.starts_with("https:") =>
                {
                    *self.scheme.lock().unwrap_or_else(|e| e.into_inner()) = "http";
                    continue;
                }
                other => other?.0,
            };
            if answer.status == 401 && authenticated {
                return Err(PullError::Unauthorized {
                    url,
                    detail: match &self.creds {
                        Some(c) => {
                            format!("the registry refused the credentials of {}", c.username)
                        }
                        None => "the registry refused anonymous access".into(),
                    },
                });
            }
            if answer.status != 401 {
                return Ok(answer);
            }
            authenticated = true;
            let header = answer.header("www-authenticate").unwrap_or("").to_string();
            if !resume {
                let _ = std::fs::remove_file(out);
            }
            self.authenticate(&url, &header)?;
        }
    }

    fn authenticate(&self, url: &str, header: &str) -> Result<(), PullError> {
        let value = match auth::parse_challenge(header) {
            Some(Challenge::Basic) => {
                let c = self.creds.as_ref().ok_or_else(|| PullError::Unauthorized {
                    url: url.to_string(),
                    detail: "the registry asks for a user and password".into(),
                })?;
                let raw = format!("{}:{}", c.username, c.password);
                format!(
                    "Basic {}",
                    base64::engine::general_purpose::STANDARD.encode(raw)
                )
            }
            Some(Challenge::Bearer {
                realm,
                service,
                scope,
            }) => {
                let scope = scope.unwrap_or_else(|| format!("repository:{}:pull", self.repository));
                let mut token_url = realm.clone();
                token_url.push(if realm.contains('?') { '&' } else { '?' });
                if let Some(s) = service {
                    token_url += &format!("service={}&", encode(&s));
                }
                token_url += &format!("scope={}", encode(&scope));
                format!("Bearer {}", self.token(&token_url)?)
            }
            None => {
                return Err(PullError::Unauthorized {
                    url: url.to_string(),
                    detail: format!("unsupported challenge {header:?}"),
                })
            }
        };
        *self.authorization.lock().unwrap_or_else(|e| e.into_inner()) = Some(value);
        Ok(())
    }

    /// A bearer token from `url` (anonymous, or with the auth file's credentials).
    fn token(&self, url: &str) -> Result<String, PullError> {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let out = self.scratch.join(format!("token-{n}"));
        let (answer, _) = self.curl(url, &[], &out, false, MAX_SMALL, self.creds.as_ref())?;
        let body = std::fs::read(&out).unwrap_or_default();
        let _ = std::fs::remove_file(&out);
        if answer.status != 200 {
            return Err(PullError::Unauthorized {
                url: url.to_string(),
                detail: format!("the token service answered {}", answer.status),
            });
        }
        let v: serde_json::Value =
            serde_json::from_slice(&body).map_err(|e| PullError::Unauthorized {
                url: url.to_string(),
                detail: format!("the token answer is not JSON: {e}"),
            })?;
        v.get("token")
            .or_else(|| v.get("access_token"))
            .and_then(|t| t.as_str())
            .map(str::to_string)
            .ok_or_else(|| PullError::Unauthorized {
                url: url.to_string(),
                detail: "the token answer has no token".into(),
            })
    }
}

/// Percent-encoding of a query value.
fn encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out += &format!("%{b:02X}");
        }
    }
    out
}

/// The headers of the last response in a `--dump-header` file.
fn parse_headers(bytes: &[u8]) -> Vec<(String, String)> {
    let text = String::from_utf8_lossy(bytes);
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim_end_matches('\r');
        if line.starts_with("HTTP/") {
            out.clear();
        } else if let Some((k, v)) = line.split_once(':') {
            out.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_of_the_last_response_after_a_redirect() {
        let dump = b"HTTP/1.1 307 Temporary Redirect\r\nLocation: https://x\r\nDocker-Content-Digest: a\r\n\r\nHTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n";
        let h = parse_headers(dump);
        assert_eq!(
            h,
            vec![("content-type".to_string(), "application/json".to_string())]
        );
    }

    #[test]
    fn config_values_are_quoted_and_query_values_encoded() {
        assert_eq!(quote("a\"b\\c\nd"), "\"a\\\"b\\\\cd\"");
        assert_eq!(
            encode("repository:library/python:pull"),
            "repository%3Alibrary%2Fpython%3Apull"
        );
    }
}
