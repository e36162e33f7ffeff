//! TLS for the link: TLS 1.3 only, aws-lc-rs as the crypto provider,
//! client certificates required, session resumption on.
//!
//! The service builds one [`ServerConfig`] and shares it, immutable, behind
//! an `Arc` with every connection: a connection holds a reference, not a
//! copy, so accepting and closing one costs nothing in configuration.

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, CertificateRevocationListDer, PrivateKeyDer, ServerName};
use std::path::Path;
use std::sync::Arc;
use thiserror::Error;
use tokio_rustls::rustls::{
    self, client::WebPkiServerVerifier, server::WebPkiClientVerifier, ClientConfig, RootCertStore,
    ServerConfig,
};

/// A TLS set-up that cannot be built.
#[derive(Debug, Error)]
pub enum TlsError {
    #[error("cannot read {path}: {detail}")]
    Read { path: String, detail: String },
    #[error("{0} holds no PEM certificate")]
    NoCertificate(String),
    #[error("{0} holds no PEM private key")]
    NoKey(String),
    #[error("CA certificate refused: {0}")]
    BadCa(String),
    #[error("certificate or key refused: {0}")]
    BadCredential(String),
    #[error("client certificate verifier: {0}")]
    Verifier(String),
    #[error("{0:?} is not a valid server name")]
    BadServerName(String),
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

fn roots(cas: &[CertificateDer<'static>]) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for ca in cas {
        roots
            .add(ca.clone())
            .map_err(|e| TlsError::BadCa(e.to_string()))?;
    }
    if roots.is_empty() {
        return Err(TlsError::BadCa("no CA certificate given".into()));
    }
    Ok(roots)
}

/// How many TLS sessions the service remembers for resumption.
pub const SESSION_CACHE: usize = 4096;

/// The service's configuration: its certificate chain and key, the device
/// CA(s) reader certificates must chain to, and the CRLs that revoke reader
/// certificates (with CRLs given, a reader certificate whose revocation
/// status they do not cover is refused).
pub fn server_config(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    device_cas: &[CertificateDer<'static>],
    crls: Vec<CertificateRevocationListDer<'static>>,
) -> Result<Arc<ServerConfig>, TlsError> {
    let mut verifier =
        WebPkiClientVerifier::builder_with_provider(Arc::new(roots(device_cas)?), provider());
    if !crls.is_empty() {
        verifier = verifier.with_crls(crls).only_check_end_entity_revocation();
    }
    let verifier = verifier
        .build()
        .map_err(|e| TlsError::Verifier(e.to_string()))?;
    let mut cfg = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| TlsError::Verifier(e.to_string()))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(|e| TlsError::BadCredential(e.to_string()))?;
    cfg.session_storage = rustls::server::ServerSessionMemoryCache::new(SESSION_CACHE);
    Ok(Arc::new(cfg))
}

/// The reader's configuration: its certificate chain and key, and the CA
/// the service's certificate must chain to.
pub fn client_config(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    server_cas: &[CertificateDer<'static>],
) -> Result<Arc<ClientConfig>, TlsError> {
    let verifier =
        WebPkiServerVerifier::builder_with_provider(Arc::new(roots(server_cas)?), provider())
            .build()
            .map_err(|e| TlsError::Verifier(e.to_string()))?;
    let cfg = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| TlsError::Verifier(e.to_string()))?
        .with_webpki_verifier(verifier)
        .with_client_auth_cert(chain, key)
        .map_err(|e| TlsError::BadCredential(e.to_string()))?;
    Ok(Arc::new(cfg))
}

/// The server name to check the service's certificate against: the host
/// part of `HOST:PORT` (a DNS name or an IP address).
pub fn server_name(host: &str) -> Result<ServerName<'static>, TlsError> {
    let h = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(h.to_string()).map_err(|_| TlsError::BadServerName(host.into()))
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|e| TlsError::Read {
        path: path.display().to_string(),
        detail: e.to_string(),
    })
}

/// Every certificate in a PEM file.
pub fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let data = read(path)?;
    let certs: Vec<_> = CertificateDer::pem_slice_iter(&data)
        .filter_map(Result::ok)
        .collect();
    if certs.is_empty() {
        return Err(TlsError::NoCertificate(path.display().to_string()));
    }
    Ok(certs)
}

/// The private key in a PEM file (PKCS#8, SEC1 or PKCS#1).
pub fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let data = read(path)?;
    PrivateKeyDer::from_pem_slice(&data).map_err(|_| TlsError::NoKey(path.display().to_string()))
}

/// Every CRL in a file (PEM `X509 CRL` blocks, or one DER CRL).
pub fn load_crls(path: &Path) -> Result<Vec<CertificateRevocationListDer<'static>>, TlsError> {
    let data = read(path)?;
    let crls: Vec<_> = CertificateRevocationListDer::pem_slice_iter(&data)
        .filter_map(Result::ok)
        .collect();
    if crls.is_empty() && data.first() == Some(&0x30) {
        return Ok(vec![CertificateRevocationListDer::from(data)]);
    }
    Ok(crls)
}

/// Why a peer's certificate was refused, from a handshake error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CertRefusal {
    /// It does not chain to a configured CA.
    UnknownIssuer,
    /// It names a trusted CA as issuer, but that CA did not sign it.
    BadSignature,
    Expired,
    NotYetValid,
    Revoked,
    /// The CRLs do not cover it.
    UnknownRevocationStatus,
    /// Not usable for this purpose (extended key usage).
    WrongUsage,
    /// No certificate was presented.
    Missing,
    /// Another certificate error, as the TLS library words it.
    Other(String),
}

impl std::fmt::Display for CertRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CertRefusal::UnknownIssuer => {
                f.write_str("the certificate is not issued by a trusted CA")
            }
            CertRefusal::BadSignature => f.write_str(
                "the certificate names a trusted CA as issuer but its signature does not verify",
            ),
            CertRefusal::Expired => f.write_str("the certificate has expired"),
            CertRefusal::NotYetValid => f.write_str("the certificate is not valid yet"),
            CertRefusal::Revoked => f.write_str("the certificate is revoked"),
            CertRefusal::UnknownRevocationStatus => {
                f.write_str("the certificate's revocation status is unknown")
            }
            CertRefusal::WrongUsage => {
                f.write_str("the certificate is not for this use (extended key usage)")
            }
            CertRefusal::Missing => f.write_str("no certificate was presented"),
            CertRefusal::Other(s) => write!(f, "the certificate was refused: {s}"),
        }
    }
}

/// The certificate refusal inside a handshake's I/O error, if that is why
/// it failed.
pub fn cert_refusal(e: &std::io::Error) -> Option<CertRefusal> {
    use rustls::{CertificateError as C, Error as E};
    let inner = e.get_ref()?.downcast_ref::<E>()?;
    Some(match inner {
        E::InvalidCertificate(c) => match c {
            C::UnknownIssuer => CertRefusal::UnknownIssuer,
            C::Expired | C::ExpiredContext { .. } => CertRefusal::Expired,
            C::NotValidYet | C::NotValidYetContext { .. } => CertRefusal::NotYetValid,
            C::Revoked => CertRefusal::Revoked,
            C::BadSignature | C::UnsupportedSignatureAlgorithmContext { .. } => {
                CertRefusal::BadSignature
            }
            C::UnknownRevocationStatus => CertRefusal::UnknownRevocationStatus,
            C::InvalidPurpose | C::InvalidPurposeContext { .. } => CertRefusal::WrongUsage,
            other => CertRefusal::Other(format!("{other:?}")),
        },
        E::NoCertificatesPresented => CertRefusal::Missing,
        E::AlertReceived(rustls::AlertDescription::UnknownCA) => CertRefusal::UnknownIssuer,
        E::AlertReceived(rustls::AlertDescription::CertificateExpired) => CertRefusal::Expired,
        E::AlertReceived(rustls::AlertDescription::CertificateRevoked) => CertRefusal::Revoked,
        _ => return None,
    })
}

/// The subject common name of a DER certificate (a reader's identity).
pub fn subject_cn(der: &[u8]) -> Option<String> {
    use der::Decode;
    let cert = x509_cert::Certificate::from_der(der).ok()?;
    for rdn in cert.tbs_certificate.subject.0.iter() {
        for atv in rdn.0.iter() {
            if atv.oid == const_cn() {
                let any = &atv.value;
                return std::str::from_utf8(any.value()).ok().map(str::to_string);
            }
        }
    }
    None
}

fn const_cn() -> der::asn1::ObjectIdentifier {
    der::asn1::ObjectIdentifier::new_unwrap("2.5.4.3")
}
