//! The card timing report: what `pivgate measure` writes and what the
//! software card replays (`pivgate card run --timing-from REPORT.json`).
//! The software card's seed profiles are published in the same format.
//!
//! # Schema, version 1 (JSON)
//!
//! ```text
//! {
//!   "schema": "pivgate-card-timing",       constant
//!   "version": 1,                          bumped on any incompatible change
//!   "tool": "pivgate 0.1.0",               what measured it
//!   "runs": 10,                            samples per operation
//!   "card": {
//!     "reader": "…",                       PC/SC reader name
//!     "atr": "3B…",                        answer to reset, hex
//!     "card_identifier": "…" | null,       CCC card identifier (tag F0), hex
//!     "issuers": ["CN=…, O=…"],            certificate issuer names (CAs, not people)
//!     "extended_length": false,            whether the card takes extended APDUs
//!     "fascn": "…" | null,                 only with --include-identifiers
//!     "subjects": [] | null                only with --include-identifiers
//!   },
//!   "operations": [ {
//!     "op": "power-up" | "select" | "get-data" | "verify"
//!           | "general-authenticate" | "fast-path",
//!     "object": "5FC102" | null,           GET DATA: the object's tag, hex
//!     "key": "9E" | null,                  GENERAL AUTHENTICATE: key reference
//!     "algorithm": 7 | null,               GENERAL AUTHENTICATE: SP 800-78 id
//!     "label": "CHUID",                    human name
//!     "size": 2339 | null,                 GET DATA: object bytes read
//!     "median_us": 75210, "min_us": …, "max_us": …, "samples": 10,
//!     "apdus": 3, "bytes_out": 16, "bytes_in": 2360     per run
//!   } ],
//!   "skipped": [ { "op": "…", "reason": "…" } ]
//! }
//! ```
//!
//! Times are wall microseconds seen by the host for the whole operation
//! (every APDU of it, `61xx` continuations and command chains included).
//! `power-up` is the time from powering the card on (a cold reset where the
//! reader can, else a warm reset) to its first answer, with a SELECT's
//! median time taken off. The report holds no secret and,
//! unless asked for, no personal data: the FASC-N and certificate subjects
//! are left out.

use serde::{Deserialize, Serialize};

/// The `schema` field's value.
pub const SCHEMA: &str = "pivgate-card-timing";
/// The version this code writes and reads.
pub const VERSION: u32 = 1;

/// One measured card.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimingReport {
    pub schema: String,
    pub version: u32,
    pub tool: String,
    pub runs: u32,
    pub card: CardDescription,
    pub operations: Vec<Operation>,
    #[serde(default)]
    pub skipped: Vec<Skipped>,
}

/// What identifies the measured card, without personal data by default.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CardDescription {
    pub reader: String,
    pub atr: String,
    #[serde(default)]
    pub card_identifier: Option<String>,
    #[serde(default)]
    pub issuers: Vec<String>,
    #[serde(default)]
    pub extended_length: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fascn: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subjects: Option<Vec<String>>,
}

/// The kind of a measured operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OpKind {
    /// Power-on until the first answer, the SELECT's own time taken off:
    /// the card's start-up (self-checks).
    PowerUp,
    /// SELECT of the PIV application.
    Select,
    /// GET DATA of one object.
    GetData,
    /// VERIFY of the card-application PIN.
    Verify,
    /// GENERAL AUTHENTICATE (a signature) with one key.
    GeneralAuthenticate,
    /// SELECT + GENERAL AUTHENTICATE with the card authentication key: a
    /// repeat tap on the fast path.
    FastPath,
}

impl OpKind {
    pub fn name(self) -> &'static str {
        match self {
            OpKind::PowerUp => "power-up",
            OpKind::Select => "select",
            OpKind::GetData => "get-data",
            OpKind::Verify => "verify",
            OpKind::GeneralAuthenticate => "general-authenticate",
            OpKind::FastPath => "fast-path",
        }
    }
}

/// One operation's figures over all runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Operation {
    pub op: OpKind,
    #[serde(default)]
    pub object: Option<String>,
    #[serde(default)]
    pub key: Option<String>,
    #[serde(default)]
    pub algorithm: Option<u8>,
    pub label: String,
    #[serde(default)]
    pub size: Option<u64>,
    pub median_us: u64,
    pub min_us: u64,
    pub max_us: u64,
    pub samples: u32,
    pub apdus: u32,
    pub bytes_out: u64,
    pub bytes_in: u64,
}

/// An operation that was not measured, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Skipped {
    pub op: String,
    pub reason: String,
}

/// Why a report cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ReportError {
    #[error("not a card timing report (schema {0:?}, expected {SCHEMA:?})")]
    Schema(String),
    #[error(
        "card timing report version {0} is not supported (this program reads version {VERSION})"
    )]
    Version(u32),
}

impl TimingReport {
    /// An empty report of the current version.
    pub fn new(tool: impl Into<String>, runs: u32, card: CardDescription) -> Self {
        TimingReport {
            schema: SCHEMA.into(),
            version: VERSION,
            tool: tool.into(),
            runs,
            card,
            operations: Vec::new(),
            skipped: Vec::new(),
        }
    }

    /// Checks the schema name and version.
    pub fn check(&self) -> Result<(), ReportError> {
        if self.schema != SCHEMA {
            return Err(ReportError::Schema(self.schema.clone()));
        }
        if self.version != VERSION {
            return Err(ReportError::Version(self.version));
        }
        Ok(())
    }

    /// The first operation of `kind`.
    pub fn find(&self, kind: OpKind) -> Option<&Operation> {
        self.operations.iter().find(|o| o.op == kind)
    }

    /// GET DATA of the object with `tag`.
    pub fn get_data(&self, tag: u32) -> Option<&Operation> {
        let hex = tag_hex(tag);
        self.operations
            .iter()
            .find(|o| o.op == OpKind::GetData && o.object.as_deref() == Some(hex.as_str()))
    }

    /// GENERAL AUTHENTICATE with key reference `key`.
    pub fn general_authenticate(&self, key: u8) -> Option<&Operation> {
        let hex = format!("{key:02X}");
        self.operations
            .iter()
            .find(|o| o.op == OpKind::GeneralAuthenticate && o.key.as_deref() == Some(hex.as_str()))
    }

    /// The reference door's five-operation card sequence, µs: power-up
    /// (connection), SELECT, read the CHUID, VERIFY PIN and a signature
    /// with the PIV authentication key (9A; the card authentication key
    /// 9E when 9A was not measured). `None` with the missing operations
    /// when some were not measured.
    pub fn reference_sequence_us(&self) -> Result<u64, Vec<&'static str>> {
        let parts = [
            ("power-up", self.find(OpKind::PowerUp)),
            ("SELECT", self.find(OpKind::Select)),
            ("read CHUID", self.get_data(0x5FC102)),
            ("VERIFY PIN", self.find(OpKind::Verify)),
            (
                "signature",
                self.general_authenticate(0x9A)
                    .or_else(|| self.general_authenticate(0x9E)),
            ),
        ];
        let missing: Vec<&'static str> = parts
            .iter()
            .filter(|(_, o)| o.is_none())
            .map(|(n, _)| *n)
            .collect();
        if !missing.is_empty() {
            return Err(missing);
        }
        Ok(parts.iter().flat_map(|(_, o)| o).map(|o| o.median_us).sum())
    }
}

/// A data object tag as the report writes it (upper-case hex, no prefix).
pub fn tag_hex(tag: u32) -> String {
    if tag > 0xFFFF {
        format!("{tag:06X}")
    } else if tag > 0xFF {
        format!("{tag:04X}")
    } else {
        format!("{tag:02X}")
    }
}

/// The median (upper for an even count), minimum and maximum of `v`.
pub fn spread(v: &[u64]) -> (u64, u64, u64) {
    let mut s = v.to_vec();
    s.sort_unstable();
    match (s.first(), s.last()) {
        (Some(&lo), Some(&hi)) => (s[s.len() / 2], lo, hi),
        _ => (0, 0, 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(kind: OpKind, object: Option<&str>, key: Option<&str>, us: u64) -> Operation {
        Operation {
            op: kind,
            object: object.map(String::from),
            key: key.map(String::from),
            algorithm: None,
            label: kind.name().into(),
            size: None,
            median_us: us,
            min_us: us,
            max_us: us,
            samples: 1,
            apdus: 1,
            bytes_out: 0,
            bytes_in: 0,
        }
    }

    #[test]
    fn the_reference_sequence_needs_all_five_operations() {
        let mut r = TimingReport::new("t", 1, CardDescription::default());
        r.operations = vec![
            op(OpKind::PowerUp, None, None, 400),
            op(OpKind::Select, None, None, 25),
            op(OpKind::GetData, Some("5FC102"), None, 75),
            op(OpKind::GeneralAuthenticate, None, Some("9E"), 1000),
        ];
        assert_eq!(r.reference_sequence_us(), Err(vec!["VERIFY PIN"]));
        r.operations.push(op(OpKind::Verify, None, None, 40));
        assert_eq!(r.reference_sequence_us(), Ok(1540));
        r.operations
            .push(op(OpKind::GeneralAuthenticate, None, Some("9A"), 2000));
        assert_eq!(r.reference_sequence_us(), Ok(2540));
    }

    #[test]
    fn round_trips_through_json_and_checks_its_version() {
        let mut r = TimingReport::new("t", 3, CardDescription::default());
        r.operations.push(op(OpKind::FastPath, None, Some("9E"), 5));
        let json = serde_json::to_string(&r).unwrap();
        assert!(json.contains("\"op\":\"fast-path\""), "{json}");
        assert!(!json.contains("fascn"), "{json}");
        let back: TimingReport = serde_json::from_str(&json).unwrap();
        assert_eq!(back, r);
        assert_eq!(back.check(), Ok(()));
        let mut v2 = back.clone();
        v2.version = 2;
        assert_eq!(v2.check(), Err(ReportError::Version(2)));
        assert_eq!(spread(&[5, 1, 9, 3]), (5, 1, 9));
        assert_eq!(tag_hex(0x7E), "7E");
        assert_eq!(tag_hex(0x5FC102), "5FC102");
    }
}
