//! Biometric signature verification (SP 800-76-2 §9.2.2, SP 800-73-4 Part 1
//! §3.1.4-§3.1.5): the CBEFF record's signature block must be a CMS
//! SignedData with the content detached, eContentType id-PIV-biometricObject,
//! whose messageDigest covers the CBEFF header and biometric data block, with
//! the pivFASC-N signed attribute equal to the header's FASC-N, by a valid
//! content signer (usually the CHUID's: pass its certificate in
//! `extra_certs`). When the card's FASC-N and UUID are given (from its
//! CHUID), the header's FASC-N and the entryUUID attribute must match them.

use super::cms_check::{self, CmsCheckError, SignerDnCheck};
use super::PivValidated;
use crate::revocation_set::RevocationSet;
use crate::store::TrustStore;
use crate::time::Time;
use crate::validate::ValidationOptions;
use der::asn1::OctetString;
use piv::cbeff::{self, CbeffHeader, CbeffRecord, CbeffTime};
use piv::PivError;
use thiserror::Error;

/// Why a biometric record is not acceptable.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BiometricError {
    #[error("the biometric record cannot be decoded: {0}")]
    Decode(PivError),
    #[error("the biometric record is not signed (CBEFF security options {0:#04X}, empty signature block)")]
    Unsigned(u8),
    #[error("the biometric record's signature: {0}")]
    Signature(CmsCheckError),
    #[error("the biometric record's {what} is {found}, not the card's FASC-N {card}")]
    FascnMismatch {
        what: &'static str,
        found: String,
        card: String,
    },
    #[error("the biometric record's entryUUID is {found}, not the card UUID {card}")]
    UuidMismatch { found: String, card: String },
    #[error(
        "the biometric record has no entryUUID signed attribute, which SP 800-76-2 §9.2.2 requires as the card has a UUID ({card})"
    )]
    UuidMissing { card: String },
    #[error("the CBEFF header version is {0:#04X}; SP 800-76-2 Table 7 requires 0x03")]
    HeaderVersion(u8),
    #[error(
        "the CBEFF security options are {0:#010b}; SP 800-76-2 Table 7 requires 0b00001101 (signed, integrity)"
    )]
    SecurityOptions(u8),
    #[error("the biometric record expired on {not_after} (checked at {at})")]
    Expired { not_after: String, at: String },
    #[error("the biometric record is not valid before {not_before} (checked at {at})")]
    NotYetValid { not_before: String, at: String },
}

impl BiometricError {
    /// A stable, kebab-case machine code for the kind of failure.
    pub fn code(&self) -> &'static str {
        match self {
            BiometricError::Decode(_) => "biometric-undecodable",
            BiometricError::Unsigned(_) => "biometric-unsigned",
            BiometricError::Signature(_) => "biometric-signature-refused",
            BiometricError::FascnMismatch { .. } => "biometric-fascn-mismatch",
            BiometricError::UuidMismatch { .. } => "biometric-uuid-mismatch",
            BiometricError::UuidMissing { .. } => "biometric-uuid-missing",
            BiometricError::HeaderVersion(_) => "biometric-header-version",
            BiometricError::SecurityOptions(_) => "biometric-security-options",
            BiometricError::Expired { .. } => "biometric-expired",
            BiometricError::NotYetValid { .. } => "biometric-not-yet-valid",
        }
    }
}

impl From<CmsCheckError> for BiometricError {
    fn from(e: CmsCheckError) -> Self {
        BiometricError::Signature(e)
    }
}

/// A biometric record whose signature verified.
#[derive(Debug, Clone)]
pub struct VerifiedBiometric {
    pub header: CbeffHeader,
    /// Length of the biometric data block.
    pub bdb_len: usize,
    pub signer: PivValidated,
    pub signer_dn: SignerDnCheck,
    /// The entryUUID signed attribute, when present.
    pub uuid: Option<[u8; 16]>,
}

/// Verifies the signature of a biometric container (Cardholder Fingerprints
/// or Facial Image, content with or without `53`). `card` is the card's
/// FASC-N and UUID (from its CHUID) to compare with.
pub fn verify_biometric(
    store: &TrustStore,
    container: &[u8],
    card: Option<(&[u8; 25], &[u8; 16])>,
    extra_certs: &[&[u8]],
    crls: &RevocationSet,
    opts: &ValidationOptions,
) -> Result<VerifiedBiometric, BiometricError> {
    let bc = cbeff::container_record(container).map_err(BiometricError::Decode)?;
    let record = CbeffRecord::parse(bc).map_err(BiometricError::Decode)?;
    if record.header.security_options & 0x01 == 0 || record.signature_block.is_empty() {
        return Err(BiometricError::Unsigned(record.header.security_options));
    }
    check_header(&record.header, opts.time)?;
    let sd = cms_check::signed_data(&record.signature_block)?;
    let si = cms_check::single_signer(&sd, super::oids::PIV_BIOMETRIC_OBJECT, false)?;
    cms_check::matching_content(si, &[&record.signed_bytes])?;
    let fascn_attr: OctetString =
        cms_check::attribute(si, super::oids::PIV_FASCN_ATTRIBUTE, "pivFASC-N")?
            .decode_as()
            .map_err(|e| cms_check::malformed("pivFASC-N", e))?;
    if fascn_attr.as_bytes() != record.header.fascn {
        return Err(BiometricError::FascnMismatch {
            what: "pivFASC-N attribute",
            found: hex::encode_upper(fascn_attr.as_bytes()),
            card: hex::encode_upper(record.header.fascn),
        });
    }
    let uuid = match cms_check::optional_attribute(si, super::oids::ENTRY_UUID, "entryUUID")? {
        None => None,
        Some(v) => {
            let o: OctetString = v
                .decode_as()
                .map_err(|e| cms_check::malformed("entryUUID", e))?;
            Some(
                <[u8; 16]>::try_from(o.as_bytes())
                    .map_err(|_| cms_check::malformed("entryUUID", "not 16 bytes"))?,
            )
        }
    };
    let checked = cms_check::check_signer(store, &sd, si, extra_certs, crls, opts)?;
    if let Some((fascn, card_uuid)) = card {
        if &record.header.fascn != fascn {
            return Err(BiometricError::FascnMismatch {
                what: "CBEFF header FASC-N",
                found: hex::encode_upper(record.header.fascn),
                card: hex::encode_upper(fascn),
            });
        }
        match uuid {
            Some(u) if &u != card_uuid => {
                return Err(BiometricError::UuidMismatch {
                    found: piv::chuid::uuid_urn(&u),
                    card: piv::chuid::uuid_urn(card_uuid),
                })
            }
            // An all-zero GUID is a card without a UUID (SP 800-73-4 Table 9).
            None if card_uuid != &[0u8; 16] => {
                return Err(BiometricError::UuidMissing {
                    card: piv::chuid::uuid_urn(card_uuid),
                })
            }
            _ => {}
        }
    }
    Ok(VerifiedBiometric {
        bdb_len: record.bdb.len(),
        header: record.header,
        signer: checked.signer,
        signer_dn: checked.signer_dn,
        uuid,
    })
}

/// The patron header fields SP 800-76-2 Table 7 fixes, and its validity
/// period at `at`.
fn check_header(h: &CbeffHeader, at: Time) -> Result<(), BiometricError> {
    if h.version != cbeff::PATRON_HEADER_VERSION {
        return Err(BiometricError::HeaderVersion(h.version));
    }
    if h.security_options != cbeff::SECURITY_OPTIONS_SIGNED {
        return Err(BiometricError::SecurityOptions(h.security_options));
    }
    if at < time_of(h.not_before) {
        return Err(BiometricError::NotYetValid {
            not_before: h.not_before.to_string(),
            at: at.to_string(),
        });
    }
    if at > time_of(h.not_after) {
        return Err(BiometricError::Expired {
            not_after: h.not_after.to_string(),
            at: at.to_string(),
        });
    }
    Ok(())
}

/// A CBEFF time as a [`Time`]. The fields were range-checked when the
/// header was decoded; a leap second counts as the second before, and a day
/// the month does not have (31 February) runs on into the next month.
fn time_of(t: CbeffTime) -> Time {
    Time::from_parts(
        i64::from(t.year),
        u32::from(t.month),
        1,
        u32::from(t.hour),
        u32::from(t.minute),
        u32::from(t.second.min(59)),
    )
    .map_or(Time(0), |first| {
        first.plus_secs((i64::from(t.day) - 1) * 86_400)
    })
}
