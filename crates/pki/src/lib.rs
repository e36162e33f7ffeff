//! Trust store, path building and RFC 5280 validation for FIPS 201 certificates.
//!
//! [`store::TrustStore`] loads anchors and intermediates (PEM, DER, PKCS#7) in linear time and
//! parses each certificate lazily; [`revocation_set::RevocationSet`] holds the CRLs (revoked
//! serials indexed as they are read) and OCSP answers;
//! [`validate::validate`] builds a path through them and applies RFC 5280 §6.1 (signatures,
//! validity, basic constraints, key usage, name constraints, the certificate policy tree) and
//! §6.3 revocation, failing closed when revocation data is missing or stale. All untrusted DER
//! goes through the bounds-checked cursor in [`asn1`]. Correctness is checked against NIST PKITS
//! (`tests/pkits.rs`).
//!
//! It validates and never issues: test PKIs, cards and device certificates come from the
//! `pki-issue` crate, which depends on this one and is no part of it.
//!
//! # Module map
//!
//! | module | owns |
//! |---|---|
//! | [`validate`] | the entry point [`validate::validate`]; re-exports the options, result and error types |
//! | [`options`] | [`options::ValidationOptions`] (RFC 5280 §6.1.1 inputs, local policy, what a trust anchor certificate constrains), revocation policy; `Hash` over all but the time |
//! | [`error`] | [`error::ValidationError`] with its stable `code()` and `rank()`, typed revocation problems |
//! | [`path`] | path building (issuer candidates, reachability pruning, choosing the error to report), [`path::ValidatedPath`] |
//! | [`rules`] | the §6.1 rules, one function per rule named after its section, the trust anchor constraints of RFC 5937, and signature checks |
//! | [`revocation`] | §6.3 CRL checking: scope, freshness, CRL signer paths, delta CRLs |
//! | [`budget`] | every work limit of parsing and validation |
//! | [`profile`] | the RFC 5280 profile rules (what conforming CAs MUST and MUST NOT issue), each with its code; [`profile::Profile`] strict or lenient |
//! | [`policy`] | the valid policy tree (§6.1.2 (a), §6.1.3 (d)-(f), §6.1.4 (a)-(b)) |
//! | [`nc`] | name constraints matching (§4.2.1.10) |
//! | [`cert`] | the one parse of a certificate into [`cert::Cert`] (extensions, subjectAltName with otherName, CRL distribution points) and the load-time key scan |
//! | [`crl`] | CRL parsing, each CRL indexed by issuer and serial |
//! | [`reason`] | [`reason::Reason`], why a certificate was revoked, as CRLs and OCSP give it |
//! | [`revocation_set`] | [`revocation_set::RevocationSet`]: the CRLs and OCSP responses validation reads, indexed by issuer and CertID |
//! | [`name`] | normalised distinguished names for matching, display names |
//! | [`sig`] | signature algorithms, public keys, the algorithm policy, verification with aws-lc |
//! | [`time`] | UTCTime / GeneralizedTime and [`time::Time`] |
//! | [`asn1`] | the bounds-checked DER reader for untrusted input (strict lengths, X.690 §10.1) |
//! | [`pem`] | PEM through `pem-rfc7468` (the store's bundle loader has its own tuned scanner) |
//! | [`store`] | [`store::TrustStore`]: loading anchors and intermediates, the subject and key-id index |
//! | [`cache`] | [`cache::ValidationCache`]: results keyed by leaf digest, store/CRL ids and an options fingerprint |
//! | [`ocsp`] | RFC 6960 OCSP: requests with nonces, response parsing, responder authorisation and freshness; [`ocsp::client`] fetches over HTTP GET/POST and caches by CertID |
//! | [`discover`] | path discovery over AIA caIssuers and SIA caRepository (`http://` and `https://`, limits, a disk cache), when no path is found from what is held |
//! | [`https`] | TLS for discovery's `https://` (rustls, aws-lc-rs; configured or system roots) |
//! | [`fetch`] | downloading CRLs from the distribution points over HTTP, only for a path already found to an anchor ([`fetch::fetch_for_path`]) |
//! | [`trust`] | [`trust::TrustConfig`]: where trust comes from (anchors, untrusted intermediates, CRLs, revocation policy, CRL downloads), for the command line and the service alike, loaded strictly |
//! | [`input`] | [`input::read_bounded`]: every input file is a regular file read with a cap by kind |
//! | [`fips201`] | FIPS 201 certificate profiles ([`fips201::CertProfile`]), card identifiers ([`fips201::CertCardIds`]), CHUID, Security Object and biometric signatures, card/certificate bindings |
//!
//! With the feature `clap`, the option enums a command line offers derive `clap::ValueEnum`
//! ([`fips201::CertProfile`], [`trust::RevocationCheck`], [`trust::RevocationSourceConfig`],
//! [`options::AnchorConstraints`], [`profile::Profile`], the OCSP request settings), with the
//! help text `pivgate --help` shows; [`fips201::report`] says the results for people and as
//! JSON, so the command line only prints them.
//!
//! Dependencies point one way: `validate` → `path` → (`rules`, `revocation`) → (`options`,
//! `error`, `budget`, `cert`, `revocation_set`, …); `revocation_set` → (`crl`, `ocsp`) →
//! `error` → `reason`; `revocation` reaches path building only through a small trait for
//! CRL-signer paths; `fips201` → `cache` → `options`. No two files import each other.

pub mod asn1;
pub mod budget;
pub mod cache;
pub mod cert;
pub mod cert_file;
pub mod crl;
pub mod discover;
pub mod error;
pub mod fetch;
pub mod fips201;
pub mod https;
pub mod input;
pub mod name;
pub mod nc;
pub mod ocsp;
pub mod options;
pub mod path;
pub mod pem;
pub mod policy;
pub mod profile;
pub mod reason;
pub mod revocation;
pub mod revocation_set;
pub mod rules;
pub mod sig;
mod snapshot;
pub mod store;
pub mod time;
pub mod trust;
pub mod validate;
