//! The data objects of an issued card besides its certificates and CHUID,
//! so that it holds every container SP 800-73-4 Part 1 Table 3 makes
//! mandatory: the Card Capability Container (§3.1.1), the Security Object
//! (§3.1.6), the Cardholder Fingerprints (§3.1.4) and Cardholder Facial
//! Image (§3.1.5) in the SP 800-76-2 form, and the Printed Information
//! (Table 14, optional but issued with test values). The biometrics are
//! synthetic and marked as test data (see [`super::biometrics`]). Every
//! object carries the card's FASC-N and UUID where the standards have a
//! place for them.

use super::biometrics::{
    signed_cbeff_record, synthetic_face_record, synthetic_minutiae_record, BiometricSpec,
};
use super::keys::KeyPair;
use super::security_object::security_object;
use super::IssueError;
use piv::cbeff;
use piv::ccc::Ccc;
use piv::chuid::ChuidDate;
use piv::fascn::Fascn;
use piv::printed::{printed_date, PrintedInfo};
use piv::DataObject;

/// The Security Object's data groups: number and container.
pub const SECURITY_OBJECT_GROUPS: [(u8, DataObject); 4] = [
    (1, DataObject::Chuid),
    (2, DataObject::Fingerprints),
    (3, DataObject::PrintedInfo),
    (4, DataObject::FacialImage),
];

/// The stored content (without `53`) of each container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CardContainers {
    pub ccc: Vec<u8>,
    pub printed_info: Vec<u8>,
    pub fingerprints: Vec<u8>,
    pub facial_image: Vec<u8>,
    pub security_object: Vec<u8>,
}

/// The file names [`CardContainers`] are saved under, by container.
pub const CONTAINER_FILES: [(DataObject, &str); 5] = [
    (DataObject::Ccc, "ccc.bin"),
    (DataObject::PrintedInfo, "printed-info.bin"),
    (DataObject::Fingerprints, "fingerprints.bin"),
    (DataObject::FacialImage, "facial-image.bin"),
    (DataObject::SecurityObject, "security-object.bin"),
];

impl CardContainers {
    /// Each container with its content.
    pub fn objects(&self) -> [(DataObject, &[u8]); 5] {
        [
            (DataObject::Ccc, &self.ccc),
            (DataObject::PrintedInfo, &self.printed_info),
            (DataObject::Fingerprints, &self.fingerprints),
            (DataObject::FacialImage, &self.facial_image),
            (DataObject::SecurityObject, &self.security_object),
        ]
    }

    /// Builds from (container, content) pairs; every container of
    /// [`CONTAINER_FILES`] must be there.
    pub fn from_objects(
        mut get: impl FnMut(DataObject) -> Option<Vec<u8>>,
    ) -> Option<CardContainers> {
        Some(CardContainers {
            ccc: get(DataObject::Ccc)?,
            printed_info: get(DataObject::PrintedInfo)?,
            fingerprints: get(DataObject::Fingerprints)?,
            facial_image: get(DataObject::FacialImage)?,
            security_object: get(DataObject::SecurityObject)?,
        })
    }
}

/// What the containers are made from.
pub struct ContainerInputs<'a> {
    pub signer_cert_der: &'a [u8],
    pub signer_key: &'a KeyPair,
    pub fascn: &'a Fascn,
    pub fascn_bytes: &'a [u8; 25],
    pub uuid: &'a [u8; 16],
    pub expires: ChuidDate,
    pub cardholder: &'a str,
    pub organization: &'a str,
    /// The encoded, signed CHUID (for the Security Object).
    pub chuid: &'a [u8],
    /// Issue time, seconds since the epoch.
    pub now: i64,
}

/// Issues the CCC, Printed Information, both biometrics and the Security
/// Object of one card.
pub fn issue_containers(i: &ContainerInputs<'_>) -> Result<CardContainers, IssueError> {
    let mut card_id = [0u8; 14];
    card_id.copy_from_slice(&i.uuid[..14]);
    let ccc = Ccc::new(card_id).encode();

    let printed_info = PrintedInfo {
        name: i.cardholder.to_string(),
        employee_affiliation: "Test Employee".into(),
        expiration: printed_date(i.expires),
        agency_card_serial: format!(
            "{}{}{}",
            i.fascn.credential_number,
            i.fascn.credential_series,
            i.fascn.individual_credential_issue
        ),
        issuer_identification: "PIVGATE TEST".into(),
        organization_line1: Some(i.organization.to_string()),
        organization_line2: Some("TEST CARD".into()),
    }
    .encode();

    let not_after = i.expires.end_of_day_unix();
    let minutiae = synthetic_minutiae_record()?;
    let fingerprints = cbeff::encode_container(&signed_cbeff_record(
        &BiometricSpec {
            format_type: cbeff::FORMAT_FINGER_MINUTIAE,
            biometric_type: cbeff::TYPE_FINGERPRINT,
            data_type: cbeff::DATA_PROCESSED,
            quality: 80,
            bdb: &minutiae,
            fascn: i.fascn_bytes,
            uuid: i.uuid,
            created: i.now,
            not_after,
        },
        i.signer_cert_der,
        i.signer_key,
    )?);
    let face = synthetic_face_record();
    let facial_image = cbeff::encode_container(&signed_cbeff_record(
        &BiometricSpec {
            format_type: cbeff::FORMAT_FACE_IMAGE,
            biometric_type: cbeff::TYPE_FACE,
            data_type: cbeff::DATA_RAW,
            quality: -2,
            bdb: &face,
            fascn: i.fascn_bytes,
            uuid: i.uuid,
            created: i.now,
            not_after,
        },
        i.signer_cert_der,
        i.signer_key,
    )?);

    let groups: Vec<(u8, DataObject, &[u8])> = SECURITY_OBJECT_GROUPS
        .iter()
        .map(|&(n, o)| {
            let content: &[u8] = match o {
                DataObject::Chuid => i.chuid,
                DataObject::Fingerprints => &fingerprints,
                DataObject::PrintedInfo => &printed_info,
                _ => &facial_image,
            };
            (n, o, content)
        })
        .collect();
    let security_object = security_object(&groups, i.signer_cert_der, i.signer_key)?;
    Ok(CardContainers {
        ccc,
        printed_info,
        fingerprints,
        facial_image,
        security_object,
    })
}

/// Reads the containers [`CardContainers`] saved next to `card.json`:
/// `None` when none of the files is there, an error when only some are.
pub(crate) fn load(dir: &std::path::Path) -> Result<Option<CardContainers>, IssueError> {
    let mut read = Vec::with_capacity(CONTAINER_FILES.len());
    let mut missing = None;
    for (object, file) in CONTAINER_FILES {
        let path = dir.join(file);
        match std::fs::read(&path) {
            Ok(b) => read.push((object, b)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                missing.get_or_insert(path);
            }
            Err(source) => return Err(IssueError::Io { path, source }),
        }
    }
    match missing {
        None => Ok(CardContainers::from_objects(|o| {
            read.iter().find(|(r, _)| *r == o).map(|(_, b)| b.clone())
        })),
        Some(_) if read.is_empty() => Ok(None),
        Some(path) => Err(IssueError::Invalid(format!(
            "{}: missing (the card's other containers are there)",
            path.display()
        ))),
    }
}
