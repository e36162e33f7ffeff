//! The [`Transaction`]: what one door tap did, stage by stage.
//!
//! Stage names follow the door transaction of the architecture:
//! `detect` (card present) → `select` (SELECT PIV) → `read` (CHUID and
//! certificate, or nothing on the fast path) → `challenge` (GENERAL
//! AUTHENTICATE, or VERIFY PIN first for PKI-AUTH) → `validate` (certificate
//! path and revocation, or a cache hit) → `verify` (the card's signature and
//! the certificate–CHUID bindings) → `decide` (the access decision: enrolled,
//! active, group, schedule) → `signal` (event committed, door output). The
//! mechanisms here record up to `verify`; the door service adds `decide` and
//! `signal`. Each stage carries wall time and the APDUs and bytes it moved,
//! so the CLI, the service, the dashboard and the benchmarks all read the
//! same table.

use crate::refusal::Refusal;
use host::Traffic;
use piv::chuid::CardUuid;
use pki::time::Time;
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// A named stage of a door transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StageName {
    Detect,
    Select,
    Read,
    Challenge,
    Validate,
    Verify,
    Decide,
    Signal,
}

impl StageName {
    pub const ALL: [StageName; 8] = [
        StageName::Detect,
        StageName::Select,
        StageName::Read,
        StageName::Challenge,
        StageName::Validate,
        StageName::Verify,
        StageName::Decide,
        StageName::Signal,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            StageName::Detect => "detect",
            StageName::Select => "select",
            StageName::Read => "read",
            StageName::Challenge => "challenge",
            StageName::Validate => "validate",
            StageName::Verify => "verify",
            StageName::Decide => "decide",
            StageName::Signal => "signal",
        }
    }

    /// Whether the stage's time is spent at the card (APDUs) rather than in
    /// host computation.
    pub fn is_card_io(self) -> bool {
        matches!(
            self,
            StageName::Detect | StageName::Select | StageName::Read | StageName::Challenge
        )
    }
}

/// One timed stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stage {
    pub name: StageName,
    /// Wall time in microseconds.
    pub wall_us: u64,
    pub apdus: u32,
    pub bytes_out: u64,
    pub bytes_in: u64,
}

pub use piv::mechanism::{Assurance, Mechanism};

/// The outcome of a transaction. Serialised as `{"result": "granted"}` or
/// `{"result": "refused", "code": …, "reason": …}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "lowercase")]
pub enum Outcome {
    /// The card was proven genuine (and live, for PKI mechanisms).
    Granted,
    /// Refused, with the cause (its sentence and stable code).
    Refused(Refusal),
}

impl Outcome {
    pub fn granted(&self) -> bool {
        matches!(self, Outcome::Granted)
    }

    /// The refusal, when refused.
    pub fn refusal(&self) -> Option<&Refusal> {
        match self {
            Outcome::Refused(r) => Some(r),
            Outcome::Granted => None,
        }
    }
}

/// Records stages as they complete, from one clock and one traffic counter.
pub struct StageTimer {
    stages: Vec<Stage>,
    started: Instant,
    traffic: Traffic,
}

impl StageTimer {
    /// Starts timing the first stage now, with the transport's counters as
    /// they are.
    pub fn start(traffic: Traffic) -> Self {
        StageTimer {
            stages: Vec::with_capacity(StageName::ALL.len()),
            started: Instant::now(),
            traffic,
        }
    }

    /// Closes the running stage as `name` and starts the next one.
    pub fn lap(&mut self, name: StageName, traffic: Traffic) {
        let now = Instant::now();
        let moved = traffic.since(self.traffic);
        self.push(name, now - self.started, moved);
        self.started = now;
        self.traffic = traffic;
    }

    /// Adds a stage measured elsewhere (e.g. `detect`, timed by the reader
    /// watcher before the transaction began).
    pub fn push(&mut self, name: StageName, wall: Duration, moved: Traffic) {
        if let Some(s) = self.stages.iter_mut().find(|s| s.name == name) {
            // A stage visited twice (fast-path miss: challenge, then read)
            // accumulates.
            s.wall_us += wall.as_micros() as u64;
            s.apdus += moved.apdus;
            s.bytes_out += moved.bytes_out;
            s.bytes_in += moved.bytes_in;
            return;
        }
        self.stages.push(Stage {
            name,
            wall_us: wall.as_micros() as u64,
            apdus: moved.apdus,
            bytes_out: moved.bytes_out,
            bytes_in: moved.bytes_in,
        });
    }

    /// The stages in transaction order.
    pub fn finish(mut self) -> Vec<Stage> {
        self.stages.sort_by_key(|s| {
            StageName::ALL
                .iter()
                .position(|n| *n == s.name)
                .unwrap_or(usize::MAX)
        });
        self.stages
    }
}

/// Totals over a stage table.
pub fn totals(stages: &[Stage]) -> Stage {
    stages.iter().fold(
        Stage {
            name: StageName::Signal,
            wall_us: 0,
            apdus: 0,
            bytes_out: 0,
            bytes_in: 0,
        },
        |mut acc, s| {
            acc.wall_us += s.wall_us;
            acc.apdus += s.apdus;
            acc.bytes_out += s.bytes_out;
            acc.bytes_in += s.bytes_in;
            acc
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn laps_attribute_traffic_and_merge_revisited_stages() {
        let t0 = Traffic::default();
        let mut t = StageTimer::start(t0);
        let t1 = Traffic {
            apdus: 1,
            bytes_out: 15,
            bytes_in: 20,
        };
        t.lap(StageName::Select, t1);
        let t2 = Traffic {
            apdus: 2,
            bytes_out: 60,
            bytes_in: 100,
        };
        t.lap(StageName::Challenge, t2);
        let t3 = Traffic {
            apdus: 4,
            bytes_out: 80,
            bytes_in: 900,
        };
        t.lap(StageName::Read, t3);
        let t4 = Traffic {
            apdus: 5,
            bytes_out: 90,
            bytes_in: 950,
        };
        t.lap(StageName::Challenge, t4);
        let stages = t.finish();
        let names: Vec<_> = stages.iter().map(|s| s.name).collect();
        assert_eq!(
            names,
            vec![StageName::Select, StageName::Read, StageName::Challenge]
        );
        assert_eq!(stages[2].apdus, 2);
        assert_eq!(stages[2].bytes_in, 130);
        let tot = totals(&stages);
        assert_eq!((tot.apdus, tot.bytes_out, tot.bytes_in), (5, 90, 950));
    }

    #[test]
    fn tap_ids_are_distinct_and_read_back() {
        let a = TapId::random();
        let b = TapId::random();
        assert_ne!(a, b);
        assert_ne!(a, TapId::default());
        let text = serde_json::to_string(&a).unwrap();
        assert_eq!(text.len(), 34, "{text}");
        assert_eq!(serde_json::from_str::<TapId>(&text).unwrap(), a);
        assert_eq!(a.to_string().parse::<TapId>().unwrap(), a);
        for bad in [
            "",
            "00",
            &"g".repeat(32),
            &"0".repeat(33),
            "é0000000000000000000000000000000",
        ] {
            assert!(bad.parse::<TapId>().is_err(), "{bad}");
        }
    }
}

/// How the card was recognised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PathTaken {
    /// Objects read from the card and validated (or a validation cache hit).
    Full,
    /// Repeat tap: the key was recovered from the signature and found among
    /// validated keys; nothing read.
    Fast,
}

/// Who the card says it is.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CardIdentity {
    /// FASC-N, decoded.
    pub fascn: Option<piv::fascn::Fascn>,
    /// Card UUID (serialised as `urn:uuid:...`).
    pub uuid: Option<CardUuid>,
    /// Subject of the certificate used.
    pub subject: Option<String>,
    /// SHA-256 of the certificate used, hex.
    pub cert_sha256: Option<String>,
    /// When the credential stops being valid: the certificate's notAfter,
    /// or the end of the CHUID's expiration day (serialised as RFC 3339).
    pub expires: Option<Time>,
    /// Key algorithm of the authentication key (e.g. "P-256", "RSA-2048").
    pub key_algorithm: Option<String>,
}

impl CardIdentity {
    /// The UTC calendar date of [`CardIdentity::expires`]: the CHUID's
    /// expiration date when the CHUID was read, else the certificate's
    /// notAfter date (what a 75-bit PIV Wiegand frame carries).
    pub fn expiration_date(&self) -> Option<piv::chuid::ChuidDate> {
        let (year, month, day, ..) = self.expires?.to_parts();
        Some(piv::chuid::ChuidDate {
            year: u16::try_from(year).ok()?,
            month: month as u8,
            day: day as u8,
        })
    }
}

/// Identifies one tap in logs, events and across links: 128 random bits,
/// written as 32 lowercase hex digits. Two taps never share one, so a
/// record of the same tap made twice can be recognised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TapId(pub [u8; 16]);

impl TapId {
    /// A fresh identifier from the system random generator (all zeros only
    /// if the generator fails, in which case the tap's challenge fails too).
    pub fn random() -> Self {
        let mut b = [0u8; 16];
        let _ = aws_lc_rs::rand::fill(&mut b);
        TapId(b)
    }
}

impl std::fmt::Display for TapId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for TapId {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("`{s}` is not a tap id (32 hex digits)");
        if s.len() != 32 || !s.is_ascii() {
            return Err(bad());
        }
        let mut b = [0u8; 16];
        for (i, out) in b.iter_mut().enumerate() {
            *out = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
        }
        Ok(TapId(b))
    }
}

impl Serialize for TapId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for TapId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// One door transaction, as the CLI prints it and the service stores it
/// (and reads back: it deserialises from what it serialises to).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transaction {
    /// This tap's identifier (transactions recorded before it existed read
    /// back with zeros).
    #[serde(default)]
    pub id: TapId,
    pub mechanism: Mechanism,
    pub assurance: Assurance,
    pub path: PathTaken,
    pub stages: Vec<Stage>,
    pub card: CardIdentity,
    pub outcome: Outcome,
    /// PIN tries left after a failed VERIFY (PKI-AUTH).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pin_retries: Option<u8>,
    /// Host computation (parsing, validation, signature checks), µs: the
    /// authentication module's own share of the wall time.
    pub host_compute_us: u64,
    /// Time the tap's bytes held the link between controller and reader
    /// (both directions, framing included), µs, for a reader on a line of
    /// known speed (OSDP); absent for PC/SC and in-process readers. It is a
    /// share of the card stages' wall time, not a stage of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_us: Option<u64>,
    /// Network round trips the tap cost (the card's arrival included), for
    /// a remote reader; absent for readers attached to the controller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round_trips: Option<u32>,
}

impl Transaction {
    pub fn total(&self) -> Stage {
        totals(&self.stages)
    }

    pub fn stage(&self, name: StageName) -> Option<&Stage> {
        self.stages.iter().find(|s| s.name == name)
    }
}
