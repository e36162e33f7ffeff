//! What a card holds, in human terms: the CHUID (FASC-N fields, UUID,
//! expiry), and for each key slot the certificate's subject, issuer,
//! validity, policies and key algorithm. Nothing is validated here; the
//! report says what the card claims.

use crate::verify::key_name;
use host::client::{ClientError, Piv};
use host::Channel;
use piv::chuid::Chuid;
use piv::fascn::Fascn;
use pki::cert::Cert;
use serde::Serialize;

/// The CHUID, decoded.
#[derive(Debug, Clone, Serialize)]
pub struct ChuidReport {
    pub fascn: Option<Fascn>,
    /// Set when the FASC-N does not decode (parity, LRC, separators).
    pub fascn_error: Option<String>,
    pub uuid: String,
    pub expires: String,
    /// Whether the CHUID carries an issuer signature (not verified here).
    pub signed: bool,
}

/// One key slot's certificate.
#[derive(Debug, Clone, Serialize)]
pub struct SlotReport {
    /// Key reference, e.g. "9A".
    pub slot: String,
    /// What the slot is for, e.g. "PIV Authentication".
    pub purpose: &'static str,
    pub subject: String,
    pub issuer: String,
    pub not_before: String,
    pub not_after: String,
    pub key_algorithm: String,
    pub policies: Vec<String>,
    pub sha256: String,
}

/// Everything `pivgate read` prints.
#[derive(Debug, Clone, Serialize)]
pub struct CardReport {
    pub application: Option<String>,
    pub chuid: Option<ChuidReport>,
    pub slots: Vec<SlotReport>,
    /// PIN tries left, when the card tells without a PIN.
    pub pin_retries: Option<u8>,
    /// Objects that were present but could not be read or decoded.
    pub problems: Vec<String>,
}

const SLOTS: [(u8, u32, &str); 4] = [
    (0x9A, 0x5FC105, "PIV Authentication"),
    (0x9C, 0x5FC10A, "Digital Signature"),
    (0x9D, 0x5FC10B, "Key Management"),
    (0x9E, 0x5FC101, "Card Authentication"),
];

/// Reads the PIV application's identifiers and certificates.
pub fn read_card(ch: &mut dyn Channel) -> Result<CardReport, ClientError> {
    let mut piv = Piv::new(ch);
    let app = piv.select()?;
    let mut report = CardReport {
        application: app.map(|a| {
            let pix: String = a.pix.iter().map(|b| format!("{b:02X}")).collect();
            match a.label {
                Some(l) => format!("{l} (PIX {pix})"),
                None => format!("PIX {pix}"),
            }
        }),
        chuid: None,
        slots: Vec::new(),
        pin_retries: None,
        problems: Vec::new(),
    };
    match piv.get_data(0x5FC102) {
        Ok(raw) => match Chuid::decode(&raw) {
            Ok(c) => {
                let (fascn, fascn_error) = match Fascn::decode(&c.fascn) {
                    Ok(f) => (Some(f), None),
                    Err(e) => (None, Some(e.to_string())),
                };
                report.chuid = Some(ChuidReport {
                    fascn,
                    fascn_error,
                    uuid: piv::chuid::uuid_urn(&c.guid),
                    expires: format!(
                        "{:04}-{:02}-{:02}",
                        c.expiration.year, c.expiration.month, c.expiration.day
                    ),
                    signed: c.signature.is_some(),
                });
            }
            Err(e) => report.problems.push(format!("CHUID: {e}")),
        },
        Err(ClientError::NotFound(_)) => {}
        Err(e @ (ClientError::Transport(_) | ClientError::NoPivApplet(_))) => return Err(e),
        Err(e) => report.problems.push(format!("CHUID: {e}")),
    }
    for (slot, tag, purpose) in SLOTS {
        match piv.read_certificate(tag) {
            Ok(der) => match Cert::from_der(der.clone()) {
                Ok(c) => report.slots.push(SlotReport {
                    slot: format!("{slot:02X}"),
                    purpose,
                    subject: c.subject_display().to_string(),
                    issuer: c.issuer_display(),
                    not_before: c.not_before.to_string(),
                    not_after: c.not_after.to_string(),
                    key_algorithm: key_name(&c.public_key),
                    policies: c
                        .ext
                        .policies
                        .iter()
                        .flatten()
                        .map(|o| o.to_string())
                        .collect(),
                    sha256: pki::cache::leaf_digest(&der)
                        .iter()
                        .map(|b| format!("{b:02x}"))
                        .collect(),
                }),
                Err(e) => report
                    .problems
                    .push(format!("slot {slot:02X} certificate: {e}")),
            },
            Err(ClientError::NotFound(_)) => {}
            Err(e @ ClientError::Transport(_)) => return Err(e),
            Err(e) => report
                .problems
                .push(format!("slot {slot:02X} certificate: {e}")),
        }
    }
    report.pin_retries = match piv.pin_retries() {
        Ok(r) => r,
        Err(ClientError::PinBlocked) => Some(0),
        Err(_) => None,
    };
    Ok(report)
}
