//! Trust store, path building and RFC 5280 validation for FIPS 201 certificates.

pub mod cache;
pub mod fetch;
pub mod fips201;
pub mod issue;
