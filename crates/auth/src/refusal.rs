//! Why a card was refused, as a value.
//!
//! A [`Refusal`] keeps its cause as a type (the card's error, the `pki`
//! validation error, the binding that did not hold, the PIN state), prints
//! the sentence a person can act on, and names itself with a stable machine
//! code ([`Refusal::code`]) that the event log, the API, the metrics and the
//! dashboard store and count. Codes are kebab-case and never change once
//! published; certificate, CHUID and binding refusals carry the finer code
//! of the `pki` error beneath them (e.g. `certificate-revoked`).
//!
//! Serialised, a refusal is `{ "code": …, "reason": … }`. Read back (from an
//! event log), it becomes [`Refusal::Recorded`], which keeps both.

use host::client::ClientError;
use host::TransportError;
use piv::chuid::ChuidError;
use pki::fips201::{BindingError, ChuidVerifyError, Fips201Error};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::sync::Arc;
use thiserror::Error;

/// Which of the card's keys a refusal concerns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyRole {
    /// Key 9E, PKI-CAK.
    CardAuthentication,
    /// Key 9A, PKI-AUTH.
    PivAuthentication,
}

impl fmt::Display for KeyRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            KeyRole::CardAuthentication => "card authentication",
            KeyRole::PivAuthentication => "PIV authentication",
        })
    }
}

/// Why a transaction was refused. `Display` is the sentence for a person;
/// [`Refusal::code`] is the stable code for a machine.
#[derive(Debug, Clone, Error)]
#[non_exhaustive]
pub enum Refusal {
    /// The card left the field between two commands of the transaction.
    #[error("the card was removed before the transaction finished; present it again")]
    CardRemoved,
    /// The reader or the link to it failed.
    #[error("reader error: {0}")]
    Reader(Arc<TransportError>),
    /// The card answered something a PIV card must not.
    #[error("the card misbehaved: {0}")]
    Card(Arc<ClientError>),
    /// The card holds no certificate for the key the mechanism uses.
    #[error("the card has no {0} certificate")]
    NoCertificate(KeyRole),
    /// The CHUID mechanism found no CHUID.
    #[error("the card has no CHUID")]
    NoChuid,
    /// The CHUID read beside the certificate does not decode.
    #[error("the card's CHUID is malformed: {0}")]
    ChuidMalformed(ChuidError),
    /// The certificate failed path validation or its FIPS 201 profile.
    #[error("{0}")]
    CertificateInvalid(Fips201Error),
    /// The CHUID's issuer signature, or its signer, is not acceptable.
    #[error("the CHUID is not acceptable: {0}")]
    ChuidInvalid(ChuidVerifyError),
    /// Certificate and CHUID name different cards, or the certificate
    /// outlives the card.
    #[error("{0}")]
    BindingMismatch(BindingError),
    /// The card's signature over the challenge does not verify with the
    /// certificate's key.
    #[error("the card's signature does not verify with its {0} certificate: the card does not hold the certificate's private key (cloned or mis-personalised card)")]
    SignatureMismatch(KeyRole),
    /// The card would not use its key.
    #[error("the card refused to use its key (security status not satisfied)")]
    KeyRefused,
    /// The certificate's key is of a type PIV cards do not use.
    #[error("the certificate's key type is not one a PIV card uses")]
    UnsupportedKeyType,
    /// The certificate's key is of a size PIV cards do not use.
    #[error("unsupported key size in the certificate")]
    UnsupportedKeySize,
    /// The CHUID's expiration date has passed.
    #[error("the card expired on {:04}-{:02}-{:02}", .0.year, .0.month, .0.day)]
    CardExpired(piv::chuid::ChuidDate),
    /// VERIFY failed; the card has this many tries left.
    #[error("wrong PIN: {retries} attempt(s) left before the card blocks")]
    WrongPin { retries: u8 },
    /// The PIN is blocked.
    #[error("the PIN is blocked: the cardholder must have it reset with the PUK by the issuer")]
    PinBlocked,
    /// The PIN entered is not 6 to 8 digits.
    #[error("the PIN must be 6 to 8 digits")]
    PinFormat,
    /// PKI-AUTH without a PIN, or the PIN source failed.
    #[error("{0}")]
    PinUnavailable(String),
    /// The host could not draw a challenge.
    #[error("the host's random generator failed")]
    RandomFailed,
    /// The card authentication key proved one card and the PIV
    /// authentication certificate names another: the PIN was not sent.
    #[error("the card authentication and PIV authentication certificates name different cards ({identifier}); the PIN was not sent")]
    DifferentCards { identifier: &'static str },
    /// A refusal read back from storage: its code and sentence as recorded.
    #[error("{reason}")]
    Recorded { code: &'static str, reason: String },
}

/// The codes this crate's own variants use (the certificate, CHUID and
/// binding variants use the `pki` codes beneath them).
pub const CODES: &[&str] = &[
    "card-removed",
    "reader-error",
    "card-error",
    "no-certificate",
    "no-chuid",
    "chuid-malformed",
    "signature-mismatch",
    "key-refused",
    "unsupported-key-type",
    "unsupported-key-size",
    "card-expired",
    "wrong-pin",
    "pin-blocked",
    "pin-format",
    "pin-unavailable",
    "host-random-failed",
    "card-keys-disagree",
];

impl Refusal {
    /// The stable machine code: kebab-case, never changed once published.
    pub fn code(&self) -> &'static str {
        match self {
            Refusal::CardRemoved => "card-removed",
            Refusal::Reader(_) => "reader-error",
            Refusal::Card(_) => "card-error",
            Refusal::NoCertificate(_) => "no-certificate",
            Refusal::NoChuid => "no-chuid",
            Refusal::ChuidMalformed(_) => "chuid-malformed",
            Refusal::CertificateInvalid(e) => e.code(),
            Refusal::ChuidInvalid(e) => e.code(),
            Refusal::BindingMismatch(e) => e.code(),
            Refusal::SignatureMismatch(_) => "signature-mismatch",
            Refusal::KeyRefused => "key-refused",
            Refusal::UnsupportedKeyType => "unsupported-key-type",
            Refusal::UnsupportedKeySize => "unsupported-key-size",
            Refusal::CardExpired(_) => "card-expired",
            Refusal::WrongPin { .. } => "wrong-pin",
            Refusal::PinBlocked => "pin-blocked",
            Refusal::PinFormat => "pin-format",
            Refusal::PinUnavailable(_) => "pin-unavailable",
            Refusal::RandomFailed => "host-random-failed",
            Refusal::DifferentCards { .. } => "card-keys-disagree",
            Refusal::Recorded { code, .. } => code,
        }
    }

    /// Every code a refusal can carry: this crate's and the `pki` codes of
    /// certificate, CHUID and binding failures.
    pub fn all_codes() -> impl Iterator<Item = &'static str> {
        CODES.iter().chain(pki::fips201::ERROR_CODES).copied()
    }

    /// A refusal as stored: `code` is matched against the known codes (an
    /// unknown one, from a newer version, reads back as `unknown`).
    pub fn recorded(code: &str, reason: impl Into<String>) -> Refusal {
        let code = Refusal::all_codes()
            .find(|c| *c == code)
            .unwrap_or("unknown");
        Refusal::Recorded {
            code,
            reason: reason.into(),
        }
    }
}

impl From<ClientError> for Refusal {
    fn from(e: ClientError) -> Self {
        match e {
            ClientError::Transport(t) => t.into(),
            other => Refusal::Card(Arc::new(other)),
        }
    }
}

impl From<TransportError> for Refusal {
    fn from(e: TransportError) -> Self {
        match e {
            TransportError::CardRemoved => Refusal::CardRemoved,
            t => Refusal::Reader(Arc::new(t)),
        }
    }
}

impl PartialEq for Refusal {
    /// Two refusals are equal when they say the same thing: same code, same
    /// sentence (a recorded refusal equals the live one it was made from).
    fn eq(&self, other: &Self) -> bool {
        self.code() == other.code() && self.to_string() == other.to_string()
    }
}

impl Eq for Refusal {}

#[derive(Serialize, Deserialize)]
struct Wire<'a> {
    code: std::borrow::Cow<'a, str>,
    reason: std::borrow::Cow<'a, str>,
}

impl Serialize for Refusal {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        Wire {
            code: self.code().into(),
            reason: self.to_string().into(),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Refusal {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let w = Wire::deserialize(d)?;
        Ok(Refusal::recorded(&w.code, w.reason.into_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn codes_are_unique_kebab_case_and_cover_the_pki_errors() {
        let all: Vec<&str> = Refusal::all_codes().collect();
        let unique: HashSet<&str> = all.iter().copied().collect();
        assert_eq!(unique.len(), all.len(), "duplicate refusal code in {all:?}");
        for c in &all {
            assert!(
                !c.is_empty()
                    && c.bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'),
                "code {c:?} is not kebab-case"
            );
        }
        assert!(!unique.contains("unknown"));
    }

    #[test]
    fn every_variant_reports_a_listed_code() {
        let samples = [
            Refusal::CardRemoved,
            Refusal::Reader(Arc::new(TransportError::NoReaders)),
            Refusal::Card(Arc::new(ClientError::PinBlocked)),
            Refusal::NoCertificate(KeyRole::CardAuthentication),
            Refusal::NoChuid,
            Refusal::SignatureMismatch(KeyRole::PivAuthentication),
            Refusal::KeyRefused,
            Refusal::UnsupportedKeyType,
            Refusal::UnsupportedKeySize,
            Refusal::WrongPin { retries: 2 },
            Refusal::PinBlocked,
            Refusal::PinFormat,
            Refusal::PinUnavailable("no PIN".into()),
            Refusal::RandomFailed,
        ];
        for r in samples {
            assert!(
                CODES.contains(&r.code()),
                "{r:?} has unlisted code {}",
                r.code()
            );
        }
    }

    #[test]
    fn serialises_as_code_and_reason_and_reads_back_equal() {
        let r = Refusal::WrongPin { retries: 2 };
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "code": "wrong-pin",
                "reason": "wrong PIN: 2 attempt(s) left before the card blocks"
            })
        );
        let back: Refusal = serde_json::from_value(json).unwrap();
        assert_eq!(back.code(), "wrong-pin");
        assert_eq!(back, r);
        let unknown: Refusal =
            serde_json::from_str(r#"{"code":"from-the-future","reason":"x"}"#).unwrap();
        assert_eq!(unknown.code(), "unknown");
        assert_eq!(unknown.to_string(), "x");
    }

    #[test]
    fn a_removed_card_is_told_apart_from_other_reader_errors() {
        let removed: Refusal = ClientError::Transport(TransportError::CardRemoved).into();
        assert_eq!(removed.code(), "card-removed");
        let reader: Refusal = TransportError::NoService.into();
        assert_eq!(reader.code(), "reader-error");
        assert!(reader.to_string().starts_with("reader error: "));
    }
}
