//! Issues test PKIs, cards and device certificates for trials, demos and
//! tests; it is not part of validation (the `pki` crate validates and never
//! issues).
//!
//! Key generation, an X.509 certificate builder, a CRL builder, CMS signing
//! of CHUIDs, and the other containers of a whole card (CCC, Security
//! Object, synthetic SP 800-76 biometrics, Printed Information; see
//! `CARD-CONTENTS.md`), built from `x509-cert`/`der` types and signed over
//! the DER of the to-be-signed structure with `aws-lc-rs`; [`TestPki`] puts
//! a CA, cards, device certificates and CRLs on disk, [`mesh`] builds
//! cross-certified meshes for path-building tests and benchmarks, and
//! [`ocsp_responder`] answers OCSP requests for a test CA, and [`report`]
//! says for people what was issued. With the feature `card`,
//! [`CardCredentials`] become a software card image.
//!
//! This is for test and demonstration PKIs (and benchmarks that need CA
//! bundles, chains and CRLs); it is not a production CA.
//!
//! ```
//! use pki_issue::{CertificateBuilder, KeyAlgorithm, KeyPair};
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

pub mod biometrics;
mod builder;
#[cfg(feature = "card")]
mod card_image;
mod chuid_sign;
mod cms_sign;
pub mod containers;
mod keys;
pub mod mesh;
pub mod ocsp_responder;
pub mod report;
mod security_object;
mod testpki;

pub use builder::{
    certs_only_p7c, der_time, now, CertificateBuilder, CrlBuilder, RevokedEntry, DAY, OID_PIV_FASCN,
};
pub use chuid_sign::{
    sign_chuid, sign_chuid_as, sign_chuid_without_buffer_length, SignerDn,
    OID_PIV_CHUID_SECURITY_OBJECT,
};
pub use containers::CardContainers;
pub use keys::{KeyAlgorithm, KeyPair};
pub use security_object::security_object;
pub use testpki::{
    random_uuid, site_uri, CardCredentials, CardOptions, DeviceCredential, DeviceFiles,
    DeviceOptions, DeviceRole, PolicySet, SlotCredential, TestPki, TestPkiOptions,
    DEFAULT_PUBLICATION_URL, PIV_SLOTS, PUBLISH_DIR, SITE_URI_PREFIX,
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
/// `PRIVATE KEY`); see [`pki::pem::encode`].
pub fn pem_encode(label: &str, der: &[u8]) -> String {
    pki::pem::encode(label, der)
}

/// Decodes the first PEM block with `label` in `text`; see [`pki::pem::decode`].
pub fn pem_decode(label: &str, text: &[u8]) -> Option<Vec<u8>> {
    pki::pem::decode(label, text).ok()
}
