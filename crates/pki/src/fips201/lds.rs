//! The LDSSecurityObject of ICAO Doc 9303 Part 10 §4.6.2, the signed content
//! of the PIV Security Object (SP 800-73-4 Part 1 §3.1.6):
//!
//! ```text
//! LDSSecurityObject ::= SEQUENCE {
//!     version LDSSecurityObjectVersion,        -- v0
//!     hashAlgorithm DigestAlgorithmIdentifier,
//!     dataGroupHashValues SEQUENCE SIZE (2..ub-DataGroups) OF DataGroupHash }
//! DataGroupHash ::= SEQUENCE {
//!     dataGroupNumber DataGroupNumber,
//!     dataGroupHashValue OCTET STRING }
//! ```

use der::asn1::OctetString;
use der::Sequence;
use spki::AlgorithmIdentifierOwned;

/// One data group's hash.
#[derive(Debug, Clone, PartialEq, Eq, Sequence)]
pub struct DataGroupHash {
    pub data_group_number: u8,
    pub data_group_hash_value: OctetString,
}

/// The ICAO LDS security object (version 0).
#[derive(Debug, Clone, PartialEq, Eq, Sequence)]
pub struct LdsSecurityObject {
    pub version: u8,
    pub hash_algorithm: AlgorithmIdentifierOwned,
    pub data_group_hash_values: Vec<DataGroupHash>,
}
