//! A TLS server on the host's loopback under a test CA made here (the `--inject-env` and
//! model-key tests): the proxy verifies it with `--upstream-ca` holding [`TestCa::pem`].

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use rustls::{ServerConfig, ServerConnection, StreamOwned};
use rustls_pki_types::PrivateKeyDer;

/// A stream a scripted server reads a request from and answers on: plain TCP or TLS.
pub trait Stream: Read + Write {}
impl<T: Read + Write> Stream for T {}

/// A CA made for one test and a server configuration for `names` under it.
pub struct TestCa {
    /// The CA's certificate (PEM): what `--upstream-ca` names.
    pub pem: String,
    pub config: Arc<ServerConfig>,
}

#[allow(deprecated)]
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl TestCa {
    pub fn new(names: &[&str]) -> TestCa {
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
        let leaf_key = KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let leaf = CertificateParams::new(names)
            .unwrap()
            .signed_by(&leaf_key, &ca)
            .unwrap();
        let config = ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(rustls::DEFAULT_VERSIONS)
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![leaf.der().clone(), ca.der().clone()],
                PrivateKeyDer::from(leaf_key),
            )
            .unwrap();
        TestCa {
            pem: ca.pem(),
            config: Arc::new(config),
        }
    }
}

/// Serves every connection to `listener` in a thread of its own with `serve`, inside TLS
/// under `tls` when given (the close is notified after `serve` returns).
pub fn serve_each(
    listener: TcpListener,
    tls: Option<Arc<ServerConfig>>,
    serve: impl Fn(&mut dyn Stream) + Send + Sync + 'static,
) {
    let serve = Arc::new(serve);
    std::thread::spawn(move || {
        for tcp in listener.incoming().flatten() {
            let (tls, serve) = (tls.clone(), serve.clone());
            std::thread::spawn(move || one(tcp, tls, &*serve));
        }
    });
}

fn one(tcp: TcpStream, tls: Option<Arc<ServerConfig>>, serve: &dyn Fn(&mut dyn Stream)) {
    let _ = tcp.set_read_timeout(Some(std::time::Duration::from_secs(30)));
    let Some(config) = tls else {
        let mut tcp = tcp;
        serve(&mut tcp);
        return;
    };
    let Ok(conn) = ServerConnection::new(config) else {
        return;
    };
    let mut s = StreamOwned::new(conn, tcp);
    serve(&mut s);
    let _ = s.flush();
    s.conn.send_close_notify();
    let _ = s.flush();
}
