//! TLS for the link: TLS 1.3 only, aws-lc-rs as the crypto provider,
//! client certificates required, session resumption on.
//!
//! The service builds one [`ServerConfig`] and shares it, immutable, behind
//! an `Arc` with every connection: a connection holds a reference, not a
//! copy, so accepting and closing one costs nothing in configuration.

use arc_swap::ArcSwap;
use pki::revocation_set::RevocationSet;
use pki::store::TrustStore;
use pki::validate::{RevocationPolicy, ValidationError, ValidationOptions};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use std::path::Path;
use std::sync::Arc;
use thiserror::Error;
use tokio_rustls::rustls::{
    self,
    client::danger::HandshakeSignatureValid,
    client::WebPkiServerVerifier,
    server::danger::{ClientCertVerified, ClientCertVerifier},
    ClientConfig, RootCertStore, ServerConfig,
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

/// Verifies reader certificates with pivgate's own validator (RFC 5280
/// path building and validation, CRLs failing closed, clientAuth and
/// digitalSignature required of the reader's certificate) against the
/// device trust store. The CRLs (and the store) can be replaced while the
/// service runs: the next handshake uses them, and the shared TLS
/// configuration stays as it is.
pub struct ReaderVerifier {
    store: ArcSwap<TrustStore>,
    crls: ArcSwap<RevocationSet>,
    revocation: RevocationPolicy,
    algorithms: rustls::crypto::WebPkiSupportedAlgorithms,
}

impl std::fmt::Debug for ReaderVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReaderVerifier").finish_non_exhaustive()
    }
}

impl ReaderVerifier {
    /// Reader certificates must chain to an anchor of `store`; `crls`
    /// revoke them (with the default policy, a certificate whose
    /// revocation status they do not cover is refused).
    pub fn new(
        store: TrustStore,
        crls: RevocationSet,
        revocation: RevocationPolicy,
    ) -> Arc<ReaderVerifier> {
        Arc::new(ReaderVerifier {
            store: ArcSwap::from_pointee(store),
            crls: ArcSwap::from_pointee(crls),
            revocation,
            algorithms: provider().signature_verification_algorithms,
        })
    }

    /// Replaces the CRLs (a refresh): a revoked reader is refused from its
    /// next handshake.
    pub fn set_crls(&self, crls: RevocationSet) {
        self.crls.store(Arc::new(crls));
    }

    /// Checks a reader's chain as presented (end entity first) now: for a
    /// resumed session, whose certificate was verified when the session
    /// began, so that a reader revoked since is refused all the same.
    pub fn recheck(&self, chain: &[CertificateDer<'_>]) -> Result<(), CertRefusal> {
        let (ee, rest) = chain.split_first().ok_or(CertRefusal::Missing)?;
        let ims: Vec<&[u8]> = rest.iter().map(|c| c.as_ref()).collect();
        let now = UnixTime::now().as_secs() as i64;
        self.check(ee.as_ref(), &ims, now)
            .map_err(|e| refusal_of(&e))
    }

    /// Checks one reader certificate chain at `time` (Unix seconds).
    pub fn check(
        &self,
        end_entity: &[u8],
        intermediates: &[&[u8]],
        time: i64,
    ) -> Result<(), ValidationError> {
        const CLIENT_AUTH: der::asn1::ObjectIdentifier =
            der::asn1::ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.3.2");
        let (store, crls) = (self.store.load(), self.crls.load());
        let opts = ValidationOptions {
            time: pki::time::Time(time),
            required_eku: Some(CLIENT_AUTH),
            leaf_key_usage: Some(pki::cert::key_usage::DIGITAL_SIGNATURE),
            revocation: self.revocation.clone(),
            ..ValidationOptions::default()
        };
        let path = pki::validate::validate(&store, end_entity, intermediates, &crls, &opts)?;
        // A reader certificate must say it is for client authentication:
        // the validator accepts a certificate without extendedKeyUsage, and
        // a card's certificate from a shared CA must not pass for a reader.
        let leaf = path.leaf();
        match &leaf.ext.ext_key_usage {
            Some(list) if list.contains(&CLIENT_AUTH) => Ok(()),
            _ => Err(ValidationError::EkuMissing {
                subject: leaf.subject_display().to_string(),
                required: CLIENT_AUTH.to_string(),
            }),
        }
    }
}

impl ClientCertVerifier for ReaderVerifier {
    fn root_hint_subjects(&self) -> &[rustls::DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let ims: Vec<&[u8]> = intermediates.iter().map(|c| c.as_ref()).collect();
        use rustls::CertificateError as C;
        match self.check(end_entity.as_ref(), &ims, now.as_secs() as i64) {
            Ok(()) => Ok(ClientCertVerified::assertion()),
            Err(e) => Err(rustls::Error::InvalidCertificate(match &e {
                ValidationError::Expired { .. } => C::Expired,
                ValidationError::NotYetValid { .. } => C::NotValidYet,
                ValidationError::Revoked { .. } => C::Revoked,
                ValidationError::NoPath { .. } => C::UnknownIssuer,
                ValidationError::BadSignature { .. } => C::BadSignature,
                _ => C::Other(rustls::OtherError(Arc::new(e))),
            })),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// The service's configuration: its certificate chain and key, and the
/// verifier of reader certificates. Build it once and share it.
pub fn server_config(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    readers: Arc<ReaderVerifier>,
) -> Result<Arc<ServerConfig>, TlsError> {
    let mut cfg = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| TlsError::Verifier(e.to_string()))?
        .with_client_cert_verifier(readers)
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
    /// Refused by the validator for another reason (its sentence).
    Invalid(String),
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
            CertRefusal::Invalid(s) => f.write_str(s),
            CertRefusal::Other(s) => write!(f, "the certificate was refused: {s}"),
        }
    }
}

/// The refusal for a validator's error.
pub fn refusal_of(e: &ValidationError) -> CertRefusal {
    match e {
        ValidationError::Expired { .. } => CertRefusal::Expired,
        ValidationError::NotYetValid { .. } => CertRefusal::NotYetValid,
        ValidationError::Revoked { .. } => CertRefusal::Revoked,
        ValidationError::NoPath { .. } => CertRefusal::UnknownIssuer,
        ValidationError::BadSignature { .. } => CertRefusal::BadSignature,
        other => CertRefusal::Invalid(other.to_string()),
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
            C::Other(o) => match o.0.downcast_ref::<ValidationError>() {
                Some(v) => CertRefusal::Invalid(v.to_string()),
                None => CertRefusal::Other(o.to_string()),
            },
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
