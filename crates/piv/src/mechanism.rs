//! The authentication mechanisms of NIST SP 800-116r1 §6 and the assurance
//! each gives: the vocabulary shared by the mechanisms that run them
//! (`auth`) and the access decision that requires them (`access`).

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use thiserror::Error;

/// How a card is (or must be) authenticated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Mechanism {
    /// PKI-CAK: card authentication key 9E, no PIN, works contactless.
    #[cfg_attr(
        feature = "clap",
        value(help = "Card authentication key (9E), no PIN; works contactless")
    )]
    PkiCak,
    /// PKI-AUTH: PIV authentication key 9A after the PIN.
    #[cfg_attr(
        feature = "clap",
        value(help = "PIV authentication key (9A) after the PIN")
    )]
    PkiAuth,
    /// CHUID: the issuer-signed identifier only (legacy, clonable).
    #[cfg_attr(
        feature = "clap",
        value(help = "Signed CHUID only (legacy, low assurance)")
    )]
    Chuid,
}

impl Mechanism {
    pub fn as_str(self) -> &'static str {
        match self {
            Mechanism::PkiCak => "pki-cak",
            Mechanism::PkiAuth => "pki-auth",
            Mechanism::Chuid => "chuid",
        }
    }

    /// The assurance a successful run gives.
    pub fn assurance(self) -> Assurance {
        match self {
            Mechanism::PkiCak => Assurance::Some,
            Mechanism::PkiAuth => Assurance::VeryHigh,
            Mechanism::Chuid => Assurance::Low,
        }
    }

    /// Strength order: CHUID < PKI-CAK < PKI-AUTH.
    pub fn rank(self) -> u8 {
        match self {
            Mechanism::Chuid => 0,
            Mechanism::PkiCak => 1,
            Mechanism::PkiAuth => 2,
        }
    }

    /// Whether a tap made with `self` meets a door that requires `required`.
    pub fn satisfies(self, required: Mechanism) -> bool {
        self.rank() >= required.rank()
    }
}

impl fmt::Display for Mechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Text that names no mechanism.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("mechanism {0:?}: expected `pki-cak`, `pki-auth` or `chuid`")]
pub struct UnknownMechanism(pub String);

impl FromStr for Mechanism {
    type Err = UnknownMechanism;
    fn from_str(s: &str) -> Result<Self, UnknownMechanism> {
        match s {
            "pki-cak" => Ok(Mechanism::PkiCak),
            "pki-auth" => Ok(Mechanism::PkiAuth),
            "chuid" => Ok(Mechanism::Chuid),
            _ => Err(UnknownMechanism(s.chars().take(64).collect())),
        }
    }
}

/// The assurance a mechanism gives (SP 800-116r1 §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Assurance {
    /// CHUID: the signed identifier can be copied to another card.
    Low,
    /// PKI-CAK: the card proves possession of its card authentication key.
    Some,
    /// PKI-AUTH: possession of the PIV authentication key after the PIN.
    VeryHigh,
}

impl Assurance {
    pub fn as_str(self) -> &'static str {
        match self {
            Assurance::Low => "low",
            Assurance::Some => "some",
            Assurance::VeryHigh => "very-high",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Assurance::Low => "low assurance: clonable, removed as a mechanism in FIPS 201-3",
            Assurance::Some => {
                "some confidence: one factor (card possession, proven by a private key)"
            }
            Assurance::VeryHigh => "very high confidence: two factors (card key + PIN)",
        }
    }
}

impl fmt::Display for Assurance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Text that names no assurance level.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("assurance {0:?}: expected `low`, `some` or `very-high`")]
pub struct UnknownAssurance(pub String);

impl FromStr for Assurance {
    type Err = UnknownAssurance;
    fn from_str(s: &str) -> Result<Self, UnknownAssurance> {
        match s {
            "low" => Ok(Assurance::Low),
            "some" => Ok(Assurance::Some),
            "very-high" => Ok(Assurance::VeryHigh),
            _ => Err(UnknownAssurance(s.chars().take(64).collect())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_strength_orders_the_mechanisms() {
        for m in [Mechanism::PkiCak, Mechanism::PkiAuth, Mechanism::Chuid] {
            assert_eq!(m.as_str().parse::<Mechanism>(), Ok(m));
            assert_eq!(
                serde_json::to_string(&m).unwrap(),
                format!("\"{}\"", m.as_str())
            );
        }
        assert!("PKI-CAK".parse::<Mechanism>().is_err());
        assert!(Mechanism::PkiAuth.satisfies(Mechanism::PkiCak));
        assert!(!Mechanism::Chuid.satisfies(Mechanism::PkiCak));
        assert_eq!(Mechanism::Chuid.assurance(), Assurance::Low);
        for a in [Assurance::Low, Assurance::Some, Assurance::VeryHigh] {
            assert_eq!(a.as_str().parse::<Assurance>(), Ok(a));
            assert_eq!(
                serde_json::to_string(&a).unwrap(),
                format!("\"{}\"", a.as_str())
            );
        }
    }
}
