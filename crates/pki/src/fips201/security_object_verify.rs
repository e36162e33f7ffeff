//! Security Object verification (SP 800-73-4 Part 1 §3.1.6): the CMS
//! SignedData of tag `BB` must encapsulate an ICAO LDSSecurityObject
//! (id-icao-ldsSecurityObject), be signed by a valid content signer (the
//! signer certificate is usually the CHUID's: pass it in `extra_certs`, see
//! [`chuid_signer_certificates`](super::chuid_signer_certificates)), and hold
//! one hash per data group of the `BA` mapping; each data group read from the
//! card must hash to its value. A hash covers the container's contents (the
//! value of its `53` template, as pivgate issues it and the GSA PIV
//! conformance tool checks it); a hash over the whole data object as GET
//! DATA returns it (with the `53` tag and length) is accepted too.

use super::cms_check::{self, CmsCheckError, SignerDnCheck};
use super::lds::LdsSecurityObject;
use super::PivValidated;
use crate::revocation_set::RevocationSet;
use crate::store::TrustStore;
use crate::validate::ValidationOptions;
use der::asn1::OctetString;
use der::Decode;
use piv::security_object::SecurityObjectContainer;
use piv::{DataObject, PivError};
use serde::Serialize;
use thiserror::Error;

/// Why a Security Object is not acceptable.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SecurityObjectError {
    #[error("the Security Object cannot be decoded: {0}")]
    Decode(PivError),
    #[error("the Security Object's signature: {0}")]
    Signature(CmsCheckError),
    #[error("the Security Object's LDSSecurityObject is malformed: {0}")]
    Lds(String),
    #[error("the Security Object hashes with {0}; only SHA-256 and SHA-384 are accepted")]
    UnsupportedDigest(String),
    #[error("data group {number} is mapped but has no hash, or hashed but not mapped")]
    HashMissing { number: u8 },
    #[error(
        "data group {number} ({object}) does not match the hash in the Security Object: it was altered after signing"
    )]
    DataGroupMismatch { number: u8, object: String },
    #[error(
        "the {container} was given but the Security Object's mapping names no data group for it: its contents are not covered by the signature"
    )]
    NotMapped { container: String },
    #[error("the Security Object's LDSSecurityObject hashes data group {number} twice")]
    HashTwice { number: u8 },
}

impl SecurityObjectError {
    /// A stable, kebab-case machine code for the kind of failure.
    pub fn code(&self) -> &'static str {
        use SecurityObjectError::*;
        match self {
            Decode(_) => "security-object-undecodable",
            Signature(_) => "security-object-signature-refused",
            Lds(_) => "security-object-lds-malformed",
            UnsupportedDigest(_) => "security-object-digest-unsupported",
            HashMissing { .. } => "security-object-hash-missing",
            DataGroupMismatch { .. } => "security-object-data-group-mismatch",
            NotMapped { .. } => "security-object-container-not-mapped",
            HashTwice { .. } => "security-object-hash-duplicated",
        }
    }
}

impl From<CmsCheckError> for SecurityObjectError {
    fn from(e: CmsCheckError) -> Self {
        SecurityObjectError::Signature(e)
    }
}

/// What was found for one data group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DataGroupStatus {
    /// The container read hashes to the signed value.
    Matches,
    /// The container was not given (not read, e.g. PIN-protected).
    NotRead,
}

/// One data group of a verified Security Object.
#[derive(Debug, Clone, Serialize)]
pub struct DataGroupResult {
    pub number: u8,
    pub container: String,
    pub container_id: String,
    pub status: DataGroupStatus,
}

/// A Security Object whose signature verified and whose data groups given
/// match their hashes.
#[derive(Debug, Clone)]
pub struct VerifiedSecurityObject {
    pub signer: PivValidated,
    pub signer_dn: SignerDnCheck,
    /// The hash algorithm of the data group hashes.
    pub hash: &'static str,
    pub groups: Vec<DataGroupResult>,
}

/// The containers of a card to check against its Security Object, and the
/// names of those it does not cover. The CCC is not among the data groups a
/// Security Object covers (it is not signed, and changes when containers
/// are added): it is checked only when the mapping names it, and otherwise
/// reported as not covered. Every other container given must be covered.
pub fn covered_objects<'a>(
    security_object: &[u8],
    objects: &'a [(DataObject, Vec<u8>)],
) -> (Vec<(DataObject, &'a [u8])>, Vec<String>) {
    let maps_ccc = SecurityObjectContainer::decode(security_object)
        .is_ok_and(|c| c.mapping.iter().any(|g| g.object == DataObject::Ccc));
    let not_covered = objects
        .iter()
        .filter(|(o, _)| *o == DataObject::Ccc && !maps_ccc)
        .map(|(o, _)| o.name())
        .collect();
    let given = objects
        .iter()
        .filter(|(o, _)| *o != DataObject::SecurityObject)
        .filter(|(o, _)| *o != DataObject::Ccc || maps_ccc)
        .map(|(o, b)| (*o, b.as_slice()))
        .collect();
    (given, not_covered)
}

/// Verifies a Security Object (container content, with or without `53`)
/// against the containers read from the card, `objects` (content with or
/// without `53`; data groups not given are reported as not read).
///
/// The `BA` mapping is not signed, so it is held to the signature: its data
/// groups must be exactly those the LDSSecurityObject hashes, it may name a
/// container once only, and every container given (other than the Security
/// Object itself) must be named by it. Otherwise pointing a data group at a
/// container that was not read would leave a given container unchecked.
/// Give only the containers the Security Object is meant to cover.
pub fn verify_security_object(
    store: &TrustStore,
    security_object: &[u8],
    objects: &[(DataObject, &[u8])],
    extra_certs: &[&[u8]],
    crls: &RevocationSet,
    opts: &ValidationOptions,
) -> Result<VerifiedSecurityObject, SecurityObjectError> {
    let container =
        SecurityObjectContainer::decode(security_object).map_err(SecurityObjectError::Decode)?;
    let sd = cms_check::signed_data(&container.signature)?;
    let si = cms_check::single_signer(&sd, super::oids::ICAO_LDS_SECURITY_OBJECT, true)?;
    let econtent = sd
        .encap_content_info
        .econtent
        .as_ref()
        .ok_or(CmsCheckError::MissingContent)?
        .decode_as::<OctetString>()
        .map_err(|e| cms_check::malformed("eContent", e))?;
    cms_check::matching_content(si, &[econtent.as_bytes()])?;
    let checked = cms_check::check_signer(store, &sd, si, extra_certs, crls, opts)?;

    let lds = LdsSecurityObject::from_der(econtent.as_bytes())
        .map_err(|e| SecurityObjectError::Lds(e.to_string()))?;
    let (name, alg) = match cms_check::hash_of(lds.hash_algorithm.oid) {
        Ok((crate::sig::Hash::Sha384, a)) => ("SHA-384", a),
        Ok((_, a)) => ("SHA-256", a),
        Err(_) => {
            return Err(SecurityObjectError::UnsupportedDigest(
                lds.hash_algorithm.oid.to_string(),
            ))
        }
    };
    for (i, h) in lds.data_group_hash_values.iter().enumerate() {
        if lds.data_group_hash_values[..i]
            .iter()
            .any(|p| p.data_group_number == h.data_group_number)
        {
            return Err(SecurityObjectError::HashTwice {
                number: h.data_group_number,
            });
        }
        if !container
            .mapping
            .iter()
            .any(|g| g.number == h.data_group_number)
        {
            return Err(SecurityObjectError::HashMissing {
                number: h.data_group_number,
            });
        }
    }
    for (object, _) in objects {
        if *object != DataObject::SecurityObject
            && !container.mapping.iter().any(|g| g.object == *object)
        {
            return Err(SecurityObjectError::NotMapped {
                container: object.name(),
            });
        }
    }
    let mut groups = Vec::with_capacity(container.mapping.len());
    for g in &container.mapping {
        let expected = lds
            .data_group_hash_values
            .iter()
            .find(|h| h.data_group_number == g.number)
            .ok_or(SecurityObjectError::HashMissing { number: g.number })?;
        let status = match objects.iter().find(|(o, _)| *o == g.object) {
            None => DataGroupStatus::NotRead,
            Some((object, content)) => {
                let expected = expected.data_group_hash_value.as_bytes();
                // Given with its 53 (or own) tag or without: either way the
                // hash may cover the contents or the object as read.
                let bare = piv::container_content(content, object.wrapper_tag()).unwrap_or(content);
                let wrapped = aws_lc_rs::digest::digest(alg, &object.as_read(bare));
                let bare = aws_lc_rs::digest::digest(alg, bare);
                if wrapped.as_ref() != expected && bare.as_ref() != expected {
                    return Err(SecurityObjectError::DataGroupMismatch {
                        number: g.number,
                        object: g.object.name(),
                    });
                }
                DataGroupStatus::Matches
            }
        };
        groups.push(DataGroupResult {
            number: g.number,
            container: g.object.name(),
            container_id: format!("{:04X}", g.object.container_id().unwrap_or(0)),
            status,
        });
    }
    Ok(VerifiedSecurityObject {
        signer: checked.signer,
        signer_dn: checked.signer_dn,
        hash: name,
        groups,
    })
}
