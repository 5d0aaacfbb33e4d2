//! The run's certificate authority: made when the run starts, its key never written to a
//! file nor bound into the sandbox; leaf certificates for the names the proxy terminates.
//!
//! Every certificate is valid from 1975 to 4096 (rcgen's defaults): the sandbox's clock may
//! read years in the past (`--date`), and a run's CA lives as long as the run.

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use super::InjectError;

/// The CA: its certificate and key.
pub(super) struct Authority {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl Authority {
    pub(super) fn new() -> Result<Authority, InjectError> {
        let ca = |e: rcgen::Error| InjectError::Ca(e.to_string());
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(ca)?;
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params
            .distinguished_name
            .push(DnType::CommonName, "reprorun run CA (--inject-env)");
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().map_err(ca)?;
        Ok(Authority {
            issuer: CertifiedIssuer::self_signed(params, key).map_err(ca)?,
        })
    }

    pub(super) fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// A certificate for `name` signed by the CA, with the CA's after it, and its key.
    pub(super) fn leaf(
        &self,
        name: &str,
    ) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), String> {
        let mut params =
            CertificateParams::new(vec![name.to_string()]).map_err(|e| e.to_string())?;
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        let key = KeyPair::generate().map_err(|e| e.to_string())?;
        let cert = params
            .signed_by(&key, &self.issuer)
            .map_err(|e| e.to_string())?;
        let chain = vec![cert.der().clone(), self.issuer.der().clone()];
        Ok((chain, PrivateKeyDer::from(key)))
    }
}
