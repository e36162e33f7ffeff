//! Test-PKI issuance: key generation, an X.509 certificate builder, a CRL
//! builder and CMS signing of CHUIDs, built from `x509-cert`/`der` types and
//! signed over the DER of the to-be-signed structure with `aws-lc-rs`.
//!
//! This is for test and demonstration PKIs (and benchmarks that need CA
//! bundles, chains and CRLs); it is not a production CA.
//!
//! ```
//! use pki::issue::{CertificateBuilder, KeyAlgorithm, KeyPair};
//! let root_key = KeyPair::generate(KeyAlgorithm::P256).unwrap();
//! let root = CertificateBuilder::new("CN=Test Root,O=Example,C=US", root_key.spki_der())
//!     .unwrap()
//!     .ca(None)
//!     .self_signed(&root_key)
//!     .unwrap();
//! let leaf_key = KeyPair::generate(KeyAlgorithm::P256).unwrap();
//! let leaf = CertificateBuilder::new("CN=Someone", leaf_key.spki_der())
//!     .unwrap()
//!     .sign(&root, &root_key)
//!     .unwrap();
//! assert!(leaf.len() > 100);
//! ```

mod builder;
#[cfg(feature = "card")]
mod card_image;
mod chuid_sign;
mod keys;
pub mod mesh;
mod testpki;

pub use builder::{
    der_time, now, CertificateBuilder, CrlBuilder, RevokedEntry, DAY, OID_PIV_FASCN,
};
pub use chuid_sign::{sign_chuid, OID_PIV_CHUID_SECURITY_OBJECT};
pub use keys::{KeyAlgorithm, KeyPair};
pub use testpki::{
    random_uuid, CardCredentials, CardOptions, SlotCredential, TestPki, TestPkiOptions, PIV_SLOTS,
};
pub use x509_cert::ext::pkix::{CrlReason, KeyUsages};

use thiserror::Error;

/// Why issuing a key, certificate, CRL or credential failed.
#[derive(Debug, Error)]
pub enum IssueError {
    #[error("DER encoding failed: {0}")]
    Der(#[from] der::Error),
    #[error("key generation or signing failed in the crypto library")]
    Crypto,
    #[error("the private key is not a PKCS#8 P-256, P-384 or RSA key: {0}")]
    BadKey(String),
    #[error("invalid distinguished name {name:?}: {reason}")]
    BadName { name: String, reason: String },
    #[error("the issuer certificate could not be parsed: {0}")]
    BadIssuer(String),
    #[error("invalid input: {0}")]
    Invalid(String),
    #[error("{path}: {source}")]
    Io {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("FASC-N: {0}")]
    Fascn(#[from] piv::fascn::FascnError),
    #[error("CHUID: {0}")]
    Chuid(#[from] piv::chuid::ChuidError),
}

/// Encodes DER as PEM with the given label (`CERTIFICATE`, `X509 CRL`,
/// `PRIVATE KEY`); see [`crate::pem::encode`].
pub fn pem_encode(label: &str, der: &[u8]) -> String {
    crate::pem::encode(label, der)
}

/// Decodes the first PEM block with `label` in `text`; see [`crate::pem::decode`].
pub fn pem_decode(label: &str, text: &[u8]) -> Option<Vec<u8>> {
    crate::pem::decode(label, text).ok()
}
