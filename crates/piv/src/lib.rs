//! The NIST SP 800-73-4 PIV data model shared by the software card and the
//! host client: application identifier, data-object tags, key references,
//! algorithm identifiers, CHUID, FASC-N, CCC, discovery object, certificate
//! containers and GENERAL AUTHENTICATE templates. No I/O and no crypto policy.

pub mod chuid;
pub mod fascn;
