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
use piv::DataObject;
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

/// A data object as GET DATA returns it, from its stored content: inside
/// `53`, or under its own tag for the discovery object and the BIT group
/// template (a form of Security Object hash some issuers use).
pub fn as_read(object: DataObject, content: &[u8]) -> Vec<u8> {
    let mut out = if object.is_self_tagged() {
        object.tag_bytes()
    } else {
        vec![0x53]
    };
    let n = content.len();
    match n {
        0..=0x7F => out.push(n as u8),
        0x80..=0xFF => out.extend_from_slice(&[0x81, n as u8]),
        0x100..=0xFFFF => out.extend_from_slice(&[0x82, (n >> 8) as u8, n as u8]),
        _ => out.extend_from_slice(&[0x83, (n >> 16) as u8, (n >> 8) as u8, n as u8]),
    }
    out.extend_from_slice(content);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_are_wrapped_as_get_data_returns_them() {
        assert_eq!(as_read(DataObject::Chuid, &[1, 2]), [0x53, 2, 1, 2]);
        assert_eq!(as_read(DataObject::Discovery, &[9]), [0x7E, 1, 9]);
        let big = vec![0u8; 300];
        assert_eq!(
            as_read(DataObject::FacialImage, &big)[..4],
            [0x53, 0x82, 1, 44]
        );
        assert_eq!(as_read(DataObject::Ccc, &[0; 200])[..3], [0x53, 0x81, 200]);
    }
}
