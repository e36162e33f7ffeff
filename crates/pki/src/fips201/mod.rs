//! FIPS 201 certificate profiles on top of RFC 5280 validation: PIV
//! Authentication, Card Authentication, PIV-I and content-signer checks,
//! FASC-N and card UUID extraction from subjectAltName, and CHUID signature
//! verification.

pub mod oids;
