//! Trust store, path building and RFC 5280 validation for FIPS 201 certificates.
//!
//! [`store::TrustStore`] loads anchors and intermediates (PEM, DER, PKCS#7) in linear time and
//! parses each certificate lazily; [`crl::CrlSet`] indexes revoked serials as CRLs are read;
//! [`validate::validate`] builds a path through them and applies RFC 5280 §6.1 (signatures,
//! validity, basic constraints, key usage, name constraints, the certificate policy tree) and
//! §6.3 revocation, failing closed when revocation data is missing or stale. All untrusted DER
//! goes through the bounds-checked cursor in [`asn1`]. Correctness is checked against NIST PKITS
//! (`tests/pkits.rs`).

pub mod asn1;
pub mod budget;
pub mod cache;
pub mod cert;
pub mod crl;
pub mod error;
pub mod fetch;
pub mod fips201;
pub mod issue;
pub mod name;
pub mod nc;
pub mod options;
pub mod path;
pub mod pem;
pub mod policy;
pub mod revocation;
pub mod rules;
pub mod sig;
pub mod store;
pub mod time;
pub mod validate;
