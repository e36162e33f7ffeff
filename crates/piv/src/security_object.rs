//! The Security Object container (SP 800-73-4 Part 1 §3.1.6 and Table 12,
//! data object `5FC106`): the mapping of data group numbers to ContainerIDs
//! (`BA`), the signed LDSSecurityObject (`BB`, a CMS SignedData) holding the
//! hash of each mapped data group, and the error detection code (`FE`).
//!
//! The mapping is a sequence of 3-byte entries: the data group number, then
//! the 2-byte ContainerID of SP 800-73-4 Table 2.

use crate::error::PivError;
use crate::objects::DataObject;
use iso7816::tlv::{self, Reader};

/// One entry of the mapping: data group `number` is `object`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct DataGroup {
    pub number: u8,
    #[serde(serialize_with = "ser_object")]
    pub object: DataObject,
}

fn ser_object<S: serde::Serializer>(o: &DataObject, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&o.name())
}

/// The decoded container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecurityObjectContainer {
    pub mapping: Vec<DataGroup>,
    /// The DER CMS ContentInfo/SignedData of tag `BB`.
    pub signature: Vec<u8>,
}

pub const TAG_MAPPING: u32 = 0xBA;
pub const TAG_SECURITY_OBJECT: u32 = 0xBB;

impl SecurityObjectContainer {
    /// Encodes the content of tag `53`.
    pub fn encode(&self) -> Vec<u8> {
        let mut map = Vec::with_capacity(self.mapping.len() * 3);
        for g in &self.mapping {
            map.push(g.number);
            // Only SP 800-73-4 containers are ever mapped.
            map.extend_from_slice(&g.object.container_id().unwrap_or(0).to_be_bytes());
        }
        let mut out = Vec::with_capacity(map.len() + self.signature.len() + 12);
        tlv::push(&mut out, TAG_MAPPING, &map);
        tlv::push(&mut out, TAG_SECURITY_OBJECT, &self.signature);
        tlv::push(&mut out, 0xFE, &[]);
        out
    }

    /// Decodes the content of tag `53` (or the whole `53` TLV).
    pub fn decode(data: &[u8]) -> Result<Self, PivError> {
        let data = crate::container_content(data, crate::CONTAINER_TAG)?;
        let mut mapping = None;
        let mut signature = None;
        for t in Reader::new(data) {
            let t = t?;
            match t.tag {
                TAG_MAPPING if mapping.is_none() => mapping = Some(decode_mapping(t.value)?),
                TAG_SECURITY_OBJECT if signature.is_none() => signature = Some(t.value.to_vec()),
                TAG_MAPPING | TAG_SECURITY_OBJECT => return Err(PivError::DuplicateTag(t.tag)),
                0xFE => {}
                other => return Err(PivError::UnexpectedTag(other)),
            }
        }
        Ok(SecurityObjectContainer {
            mapping: mapping.ok_or(PivError::MissingTag(TAG_MAPPING))?,
            signature: signature.ok_or(PivError::MissingTag(TAG_SECURITY_OBJECT))?,
        })
    }
}

fn decode_mapping(v: &[u8]) -> Result<Vec<DataGroup>, PivError> {
    if !v.len().is_multiple_of(3) {
        return Err(PivError::invalid(
            "Security Object mapping",
            "not a whole number of 3-byte entries",
        ));
    }
    let mut out: Vec<DataGroup> = Vec::with_capacity(v.len() / 3);
    for e in v.chunks_exact(3) {
        let id = u16::from_be_bytes([e[1], e[2]]);
        let object = DataObject::from_container_id(id).ok_or(PivError::Unknown {
            what: "ContainerID",
            value: u32::from(id),
        })?;
        if out.iter().any(|g| g.number == e[0]) {
            return Err(PivError::invalid(
                "Security Object mapping",
                "a data group number appears twice",
            ));
        }
        if out.iter().any(|g| g.object == object) {
            return Err(PivError::invalid(
                "Security Object mapping",
                "a ContainerID appears twice",
            ));
        }
        out.push(DataGroup {
            number: e[0],
            object,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let c = SecurityObjectContainer {
            mapping: vec![
                DataGroup {
                    number: 1,
                    object: DataObject::Chuid,
                },
                DataGroup {
                    number: 2,
                    object: DataObject::Fingerprints,
                },
            ],
            signature: vec![0x30, 0x00],
        };
        let enc = c.encode();
        assert_eq!(&enc[..8], &[0xBA, 6, 1, 0x30, 0x00, 2, 0x60, 0x10]);
        assert_eq!(SecurityObjectContainer::decode(&enc).unwrap(), c);
        assert_eq!(
            SecurityObjectContainer::decode(&tlv::encode(0x53, &enc)).unwrap(),
            c
        );
        assert!(SecurityObjectContainer::decode(&[0xBA, 2, 1, 0x30]).is_err());
        assert!(SecurityObjectContainer::decode(&[0xBA, 3, 1, 0x12, 0x34]).is_err());
        // Two data groups for one container.
        let twice = SecurityObjectContainer::decode(&[
            0xBA, 6, 1, 0x30, 0x00, 2, 0x30, 0x00, 0xBB, 2, 0x30, 0,
        ])
        .unwrap_err();
        assert!(
            twice.to_string().contains("ContainerID appears twice"),
            "{twice}"
        );
        assert_eq!(
            SecurityObjectContainer::decode(&[0xBA, 0]).unwrap_err(),
            PivError::MissingTag(0xBB)
        );
    }

    proptest::proptest! {
        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..100)) {
            let _ = SecurityObjectContainer::decode(&bytes);
        }
    }
}
