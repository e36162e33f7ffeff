//! Typed card-edge commands. Every APDU is decoded into a [`Command`]
//! before anything acts on it; decoding never touches card state, so a
//! malformed command cannot change anything.

use crate::image::PinPolicy;
use iso7816::tlv::{self, Reader};
use iso7816::StatusWord;
use piv::{ins, Algorithm, DataObject, DynAuth, KeyRef, PinRef};

pub use crate::limits::MAX_OBJECT_LEN;

/// An asymmetric key slot a command may create, replace or use for the
/// card holder: 9A, 9C, 9D, 9E or 82-95 — never the management key (9B)
/// nor the attestation key (F9), which only the card itself uses. Only
/// [`UserSlot::from_byte`] makes one, so a command holding a `UserSlot`
/// cannot name another key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UserSlot(KeyRef);

impl UserSlot {
    /// The slot with key reference `b`, if it is a user slot.
    pub fn from_byte(b: u8) -> Option<Self> {
        KeyRef::from_byte(b)
            .filter(|k| k.is_asymmetric_slot() && *k != KeyRef::Attestation)
            .map(UserSlot)
    }

    /// The key reference.
    pub fn key_ref(self) -> KeyRef {
        self.0
    }
}

impl From<UserSlot> for KeyRef {
    fn from(s: UserSlot) -> KeyRef {
        s.0
    }
}

/// The key GENERAL AUTHENTICATE works with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthKey {
    /// The management key (9B), with a symmetric algorithm.
    Management,
    /// A user slot's private key, with an asymmetric algorithm.
    Slot(UserSlot),
}

/// What GET METADATA may describe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetadataRef {
    /// The PIN (80) or the PUK (81).
    Secret(PinRef),
    /// The management key (9B).
    ManagementKey,
    /// A private key, including the attestation key (F9).
    Key(KeyRef),
}

/// What VERIFY is asked to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerifyAction<'a> {
    /// No data: report the verification state / tries left.
    Status,
    /// Compare the 8-byte reference value.
    Check(&'a [u8]),
    /// P1 = `FF`: forget the verified state.
    Reset,
}

/// Key material of IMPORT ASYMMETRIC KEY.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImportMaterial<'a> {
    /// `01` p, `02` q, `03` dp, `04` dq, `05` qinv.
    Rsa {
        p: &'a [u8],
        q: &'a [u8],
        dp: &'a [u8],
        dq: &'a [u8],
        qinv: &'a [u8],
    },
    /// `06` private scalar.
    Ec { scalar: &'a [u8] },
}

/// A decoded card-edge command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command<'a> {
    Select {
        aid: &'a [u8],
    },
    GetData {
        object: DataObject,
    },
    /// `value` is the object content; empty deletes the object.
    PutData {
        object: DataObject,
        value: &'a [u8],
    },
    Verify {
        action: VerifyAction<'a>,
    },
    ChangeReferenceData {
        reference: PinRef,
        old: &'a [u8],
        new: &'a [u8],
    },
    ResetRetryCounter {
        puk: &'a [u8],
        new_pin: &'a [u8],
    },
    GeneralAuthenticate {
        algorithm: Algorithm,
        key: AuthKey,
        template: DynAuth<'a>,
    },
    GenerateKeyPair {
        key: UserSlot,
        algorithm: Algorithm,
        pin_policy: PinPolicy,
    },
    GetVersion,
    GetSerial,
    GetMetadata {
        reference: MetadataRef,
    },
    SetManagementKey {
        algorithm: Algorithm,
        key: &'a [u8],
    },
    ImportKey {
        key: UserSlot,
        algorithm: Algorithm,
        material: ImportMaterial<'a>,
        pin_policy: PinPolicy,
    },
    SetPinRetries {
        pin: u8,
        puk: u8,
    },
    Reset,
    Attest {
        key: UserSlot,
    },
}

fn p1p2(p1: u8, p2: u8, want: (u8, u8)) -> Result<(), StatusWord> {
    if (p1, p2) == want {
        Ok(())
    } else {
        Err(StatusWord::INCORRECT_P1P2)
    }
}

fn no_data(data: &[u8]) -> Result<(), StatusWord> {
    if data.is_empty() {
        Ok(())
    } else {
        Err(StatusWord::WRONG_LENGTH)
    }
}

fn bad_data<E>(_: E) -> StatusWord {
    StatusWord::INCORRECT_DATA
}

impl<'a> Command<'a> {
    /// Decodes a complete command (after chaining) from its header and
    /// data field.
    pub fn decode(ins_byte: u8, p1: u8, p2: u8, data: &'a [u8]) -> Result<Self, StatusWord> {
        match ins_byte {
            ins::SELECT => decode_select(p1, p2, data),
            ins::GET_DATA => decode_get_data(p1, p2, data),
            ins::PUT_DATA => decode_put_data(p1, p2, data),
            ins::VERIFY => decode_verify(p1, p2, data),
            ins::CHANGE_REFERENCE_DATA => decode_change_reference(p1, p2, data),
            ins::RESET_RETRY_COUNTER => decode_reset_retry(p1, p2, data),
            ins::GENERAL_AUTHENTICATE => decode_general_authenticate(p1, p2, data),
            ins::GENERATE_ASYMMETRIC_KEY_PAIR => decode_generate(p1, p2, data),
            ins::GET_VERSION => {
                p1p2(p1, p2, (0, 0))?;
                no_data(data)?;
                Ok(Command::GetVersion)
            }
            ins::GET_SERIAL => {
                p1p2(p1, p2, (0, 0))?;
                no_data(data)?;
                Ok(Command::GetSerial)
            }
            ins::GET_METADATA => decode_metadata(p1, p2, data),
            ins::SET_MANAGEMENT_KEY => decode_set_mgmt(p1, p2, data),
            ins::IMPORT_ASYMMETRIC_KEY => decode_import(p1, p2, data),
            ins::SET_PIN_RETRIES => {
                no_data(data)?;
                if !(1..=15).contains(&p1) || !(1..=15).contains(&p2) {
                    return Err(StatusWord::INCORRECT_P1P2);
                }
                Ok(Command::SetPinRetries { pin: p1, puk: p2 })
            }
            ins::ATTEST => {
                if p2 != 0 {
                    return Err(StatusWord::INCORRECT_P1P2);
                }
                no_data(data)?;
                Ok(Command::Attest {
                    key: asymmetric_slot(p1)?,
                })
            }
            ins::RESET => {
                p1p2(p1, p2, (0, 0))?;
                no_data(data)?;
                Ok(Command::Reset)
            }
            _ => Err(StatusWord::INS_NOT_SUPPORTED),
        }
    }

    /// Whether the command needs the PIV application to be selected.
    pub fn needs_selection(&self) -> bool {
        !matches!(self, Command::Select { .. })
    }
}

fn decode_select(p1: u8, p2: u8, data: &[u8]) -> Result<Command<'_>, StatusWord> {
    if p1 != 0x04 || !matches!(p2, 0x00 | 0x0C) {
        return Err(StatusWord::INCORRECT_P1P2);
    }
    if data.is_empty() || data.len() > 16 {
        return Err(StatusWord::WRONG_LENGTH);
    }
    Ok(Command::Select { aid: data })
}

/// Parses the `5C` tag list naming one data object.
fn object_from_tag_list(tlv_value: &[u8]) -> Result<DataObject, StatusWord> {
    DataObject::from_tag_bytes(tlv_value).ok_or(StatusWord::FILE_NOT_FOUND)
}

fn decode_get_data(p1: u8, p2: u8, data: &[u8]) -> Result<Command<'_>, StatusWord> {
    p1p2(p1, p2, (0x3F, 0xFF))?;
    let tags = tlv::parse_single(data, 0x5C).map_err(bad_data)?;
    if tags.is_empty() || tags.len() > 3 {
        return Err(StatusWord::INCORRECT_DATA);
    }
    Ok(Command::GetData {
        object: object_from_tag_list(tags)?,
    })
}

fn decode_put_data(p1: u8, p2: u8, data: &[u8]) -> Result<Command<'_>, StatusWord> {
    p1p2(p1, p2, (0x3F, 0xFF))?;
    let mut r = Reader::new(data);
    let first = r.read().map_err(bad_data)?;
    let (object, value) = match first.tag {
        0x5C => {
            if first.value.is_empty() || first.value.len() > 3 {
                return Err(StatusWord::INCORRECT_DATA);
            }
            let object = object_from_tag_list(first.value)?;
            if object.is_self_tagged() {
                return Err(StatusWord::INCORRECT_DATA);
            }
            (object, r.expect(0x53).map_err(bad_data)?)
        }
        0x7E => (DataObject::Discovery, first.value),
        0x7F61 => (DataObject::Bitgt, first.value),
        _ => return Err(StatusWord::INCORRECT_DATA),
    };
    if !r.is_empty() {
        return Err(StatusWord::INCORRECT_DATA);
    }
    if value.len() > MAX_OBJECT_LEN {
        return Err(StatusWord::NOT_ENOUGH_MEMORY);
    }
    Ok(Command::PutData { object, value })
}

fn decode_verify(p1: u8, p2: u8, data: &[u8]) -> Result<Command<'_>, StatusWord> {
    if p2 != 0x80 {
        return Err(StatusWord::REFERENCED_DATA_NOT_FOUND);
    }
    let action = match (p1, data.len()) {
        (0x00, 0) => VerifyAction::Status,
        (0x00, 8) => VerifyAction::Check(data),
        (0x00, _) => return Err(StatusWord::INCORRECT_DATA),
        (0xFF, 0) => VerifyAction::Reset,
        (0xFF, _) => return Err(StatusWord::WRONG_LENGTH),
        _ => return Err(StatusWord::INCORRECT_P1P2),
    };
    Ok(Command::Verify { action })
}

fn decode_change_reference(p1: u8, p2: u8, data: &[u8]) -> Result<Command<'_>, StatusWord> {
    if p1 != 0 {
        return Err(StatusWord::INCORRECT_P1P2);
    }
    let reference = PinRef::from_byte(p2).ok_or(StatusWord::REFERENCED_DATA_NOT_FOUND)?;
    if data.len() != 16 {
        return Err(StatusWord::INCORRECT_DATA);
    }
    let (old, new) = data.split_at(8);
    Ok(Command::ChangeReferenceData {
        reference,
        old,
        new,
    })
}

fn decode_reset_retry(p1: u8, p2: u8, data: &[u8]) -> Result<Command<'_>, StatusWord> {
    if p1 != 0 {
        return Err(StatusWord::INCORRECT_P1P2);
    }
    if p2 != 0x80 {
        return Err(StatusWord::REFERENCED_DATA_NOT_FOUND);
    }
    if data.len() != 16 {
        return Err(StatusWord::INCORRECT_DATA);
    }
    let (puk, new_pin) = data.split_at(8);
    Ok(Command::ResetRetryCounter { puk, new_pin })
}

fn decode_general_authenticate(p1: u8, p2: u8, data: &[u8]) -> Result<Command<'_>, StatusWord> {
    let algorithm = Algorithm::from_id(p1).ok_or(StatusWord::INCORRECT_P1P2)?;
    let key = match p2 {
        0x9B if algorithm.is_symmetric() => AuthKey::Management,
        _ if algorithm.is_symmetric() => return Err(StatusWord::INCORRECT_P1P2),
        _ => AuthKey::Slot(UserSlot::from_byte(p2).ok_or(StatusWord::INCORRECT_P1P2)?),
    };
    let template = DynAuth::decode(data).map_err(bad_data)?;
    Ok(Command::GeneralAuthenticate {
        algorithm,
        key,
        template,
    })
}

fn asymmetric_slot(p2: u8) -> Result<UserSlot, StatusWord> {
    UserSlot::from_byte(p2).ok_or(StatusWord::INCORRECT_P1P2)
}

fn asymmetric_algorithm(id: u8) -> Result<Algorithm, StatusWord> {
    Algorithm::from_id(id)
        .filter(|a| !a.is_symmetric())
        .ok_or(StatusWord::INCORRECT_DATA)
}

fn pin_policy(value: &[u8]) -> Result<PinPolicy, StatusWord> {
    match value {
        [b] => PinPolicy::from_byte(*b).ok_or(StatusWord::INCORRECT_DATA),
        _ => Err(StatusWord::INCORRECT_DATA),
    }
}

fn decode_generate(p1: u8, p2: u8, data: &[u8]) -> Result<Command<'_>, StatusWord> {
    if p1 != 0 {
        return Err(StatusWord::INCORRECT_P1P2);
    }
    let key = asymmetric_slot(p2)?;
    let control = tlv::parse_single(data, 0xAC).map_err(bad_data)?;
    let mut algorithm = None;
    let mut policy = PinPolicy::Default;
    for t in Reader::new(control) {
        let t = t.map_err(bad_data)?;
        match (t.tag, t.value) {
            (0x80, [id]) if algorithm.is_none() => algorithm = Some(asymmetric_algorithm(*id)?),
            (0xAA, v) => policy = pin_policy(v)?,
            // Touch policy: a software card has no button; accepted and ignored.
            (0xAB, [_]) => {}
            _ => return Err(StatusWord::INCORRECT_DATA),
        }
    }
    Ok(Command::GenerateKeyPair {
        key,
        algorithm: algorithm.ok_or(StatusWord::INCORRECT_DATA)?,
        pin_policy: policy,
    })
}

fn decode_metadata(p1: u8, p2: u8, data: &[u8]) -> Result<Command<'_>, StatusWord> {
    if p1 != 0 {
        return Err(StatusWord::INCORRECT_P1P2);
    }
    no_data(data)?;
    let reference = match (PinRef::from_byte(p2), KeyRef::from_byte(p2)) {
        (Some(which), _) => MetadataRef::Secret(which),
        (None, Some(KeyRef::Management)) => MetadataRef::ManagementKey,
        (None, Some(key)) => MetadataRef::Key(key),
        (None, None) => return Err(StatusWord::REFERENCED_DATA_NOT_FOUND),
    };
    Ok(Command::GetMetadata { reference })
}

fn decode_set_mgmt(p1: u8, p2: u8, data: &[u8]) -> Result<Command<'_>, StatusWord> {
    // P1 FF; P2 FF (no touch) or FE (touch, meaningless without a button).
    if p1 != 0xFF || !matches!(p2, 0xFF | 0xFE) {
        return Err(StatusWord::INCORRECT_P1P2);
    }
    let (alg, key) = match data {
        [alg, 0x9B, len, key @ ..] if usize::from(*len) == key.len() => (*alg, key),
        _ => return Err(StatusWord::INCORRECT_DATA),
    };
    let algorithm = Algorithm::from_id(alg)
        .filter(|a| a.key_len() == Some(key.len()))
        .ok_or(StatusWord::INCORRECT_DATA)?;
    Ok(Command::SetManagementKey { algorithm, key })
}

fn decode_import(p1: u8, p2: u8, data: &[u8]) -> Result<Command<'_>, StatusWord> {
    let algorithm = Algorithm::from_id(p1)
        .filter(|a| !a.is_symmetric())
        .ok_or(StatusWord::INCORRECT_P1P2)?;
    let key = asymmetric_slot(p2)?;
    let mut parts: [Option<&[u8]>; 6] = [None; 6];
    let mut policy = PinPolicy::Default;
    for t in Reader::new(data) {
        let t = t.map_err(bad_data)?;
        match t.tag {
            0x01..=0x06 => {
                let slot = &mut parts[(t.tag - 1) as usize];
                if slot.is_some() || t.value.is_empty() {
                    return Err(StatusWord::INCORRECT_DATA);
                }
                *slot = Some(t.value);
            }
            0xAA => policy = pin_policy(t.value)?,
            0xAB => {}
            _ => return Err(StatusWord::INCORRECT_DATA),
        }
    }
    let material = match parts {
        [Some(p), Some(q), Some(dp), Some(dq), Some(qinv), None] if algorithm.is_rsa() => {
            ImportMaterial::Rsa { p, q, dp, dq, qinv }
        }
        [None, None, None, None, None, Some(scalar)] if algorithm.is_ec() => {
            ImportMaterial::Ec { scalar }
        }
        _ => return Err(StatusWord::INCORRECT_DATA),
    };
    Ok(Command::ImportKey {
        key,
        algorithm,
        material,
        pin_policy: policy,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_the_common_commands() {
        assert_eq!(
            Command::decode(0xA4, 4, 0, &[0xA0, 0, 0, 3, 8]).unwrap(),
            Command::Select {
                aid: &[0xA0, 0, 0, 3, 8]
            }
        );
        assert_eq!(
            Command::decode(0xCB, 0x3F, 0xFF, &[0x5C, 3, 0x5F, 0xC1, 0x02]).unwrap(),
            Command::GetData {
                object: DataObject::Chuid
            }
        );
        assert_eq!(
            Command::decode(0xDB, 0x3F, 0xFF, &[0x5C, 3, 0x5F, 0xC1, 0x02, 0x53, 1, 9]).unwrap(),
            Command::PutData {
                object: DataObject::Chuid,
                value: &[9]
            }
        );
        assert_eq!(
            Command::decode(0x47, 0, 0x9A, &[0xAC, 3, 0x80, 1, 0x11]).unwrap(),
            Command::GenerateKeyPair {
                key: UserSlot::from_byte(0x9A).unwrap(),
                algorithm: Algorithm::EccP256,
                pin_policy: PinPolicy::Default
            }
        );
        assert_eq!(
            Command::decode(0x20, 0xFF, 0x80, &[]).unwrap(),
            Command::Verify {
                action: VerifyAction::Reset
            }
        );
    }

    #[test]
    fn key_references_are_narrowed_per_command() {
        for b in [0x9A, 0x9C, 0x9D, 0x9E, 0x82, 0x95] {
            assert_eq!(UserSlot::from_byte(b).unwrap().key_ref().byte(), b);
        }
        for b in [0x9B, 0xF9, 0x80, 0x81, 0x96, 0x00] {
            assert_eq!(UserSlot::from_byte(b), None, "{b:02X}");
        }
        let ga = |alg, key| Command::decode(0x87, alg, key, &[0x7C, 2, 0x81, 0]);
        assert!(matches!(
            ga(0x0A, 0x9B),
            Ok(Command::GeneralAuthenticate {
                key: AuthKey::Management,
                ..
            })
        ));
        assert!(matches!(
            ga(0x11, 0x9E),
            Ok(Command::GeneralAuthenticate { key: AuthKey::Slot(s), .. }) if s.key_ref() == KeyRef::CardAuth
        ));
        for (alg, key) in [(0x11, 0xF9), (0x11, 0x9B), (0x0A, 0x9A)] {
            assert_eq!(ga(alg, key).unwrap_err(), StatusWord::INCORRECT_P1P2);
        }
        for (p2, want) in [
            (0x80, MetadataRef::Secret(PinRef::Pin)),
            (0x81, MetadataRef::Secret(PinRef::Puk)),
            (0x9B, MetadataRef::ManagementKey),
            (0xF9, MetadataRef::Key(KeyRef::Attestation)),
        ] {
            assert_eq!(
                Command::decode(0xF7, 0, p2, &[]).unwrap(),
                Command::GetMetadata { reference: want }
            );
        }
        assert_eq!(
            Command::decode(0xF9, 0xF9, 0, &[]).unwrap_err(),
            StatusWord::INCORRECT_P1P2
        );
    }

    #[test]
    fn maps_every_malformation_to_its_status_word() {
        let cases: &[(u8, u8, u8, &[u8], StatusWord)] = &[
            (0x01, 0, 0, &[], StatusWord::INS_NOT_SUPPORTED),
            (0xA4, 0, 0, &[0xA0], StatusWord::INCORRECT_P1P2),
            (
                0xCB,
                0x3F,
                0xFE,
                &[0x5C, 1, 0x7E],
                StatusWord::INCORRECT_P1P2,
            ),
            (
                0xCB,
                0x3F,
                0xFF,
                &[0x5C, 5, 0x7E],
                StatusWord::INCORRECT_DATA,
            ),
            (
                0xCB,
                0x3F,
                0xFF,
                &[0x5C, 3, 0x5F, 0xC1, 0x7F],
                StatusWord::FILE_NOT_FOUND,
            ),
            (
                0xDB,
                0x3F,
                0xFF,
                &[0x5C, 1, 0x7E, 0x53, 0],
                StatusWord::INCORRECT_DATA,
            ),
            (
                0xDB,
                0x3F,
                0xFF,
                &[0x5C, 3, 0x5F, 0xC1, 2, 0x53, 0, 0],
                StatusWord::INCORRECT_DATA,
            ),
            (0x20, 0x00, 0x81, &[], StatusWord::REFERENCED_DATA_NOT_FOUND),
            (0x20, 0x01, 0x80, &[], StatusWord::INCORRECT_P1P2),
            (0x20, 0x00, 0x80, &[1, 2, 3], StatusWord::INCORRECT_DATA),
            (0x24, 0x00, 0x80, &[0; 15], StatusWord::INCORRECT_DATA),
            (0x87, 0x07, 0x9B, &[0x7C, 0], StatusWord::INCORRECT_P1P2),
            (0x87, 0x42, 0x9A, &[0x7C, 0], StatusWord::INCORRECT_P1P2),
            (
                0x87,
                0x11,
                0x9A,
                &[0x7C, 2, 0x99, 0],
                StatusWord::INCORRECT_DATA,
            ),
            (
                0x47,
                0,
                0x9B,
                &[0xAC, 3, 0x80, 1, 0x11],
                StatusWord::INCORRECT_P1P2,
            ),
            (
                0x47,
                0,
                0x9A,
                &[0xAC, 3, 0x80, 1, 0x03],
                StatusWord::INCORRECT_DATA,
            ),
            (0xFD, 0, 0, &[1], StatusWord::WRONG_LENGTH),
            (
                0xFF,
                0xFF,
                0xFF,
                &[0x03, 0x9B, 24, 0],
                StatusWord::INCORRECT_DATA,
            ),
            (0xFA, 0, 3, &[], StatusWord::INCORRECT_P1P2),
        ];
        for (i, p1, p2, data, sw) in cases {
            assert_eq!(
                Command::decode(*i, *p1, *p2, data).unwrap_err(),
                *sw,
                "INS {i:02X} P1 {p1:02X} P2 {p2:02X} data {data:02X?}"
            );
        }
        let big = [0u8; MAX_OBJECT_LEN + 1];
        let mut put = vec![0x5C, 3, 0x5F, 0xC1, 0x02, 0x53, 0x82, 0x40, 0x01];
        put.extend_from_slice(&big);
        assert_eq!(
            Command::decode(0xDB, 0x3F, 0xFF, &put).unwrap_err(),
            StatusWord::NOT_ENOUGH_MEMORY
        );
    }
}
