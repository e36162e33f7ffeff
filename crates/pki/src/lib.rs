//! Trust store, path building and RFC 5280 validation for FIPS 201 certificates.

pub mod cache;
pub mod cert;
pub mod crl;
pub mod der;
pub mod fetch;
pub mod fips201;
pub mod issue;
pub mod name;
pub mod nc;
pub mod path;
pub mod policy;
pub mod sig;
pub mod store;
pub mod time;
pub mod validate;
