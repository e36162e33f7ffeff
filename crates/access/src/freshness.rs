//! How current a site's data is, and what a door does when it is not.
//!
//! A site decides offline, from what it holds: the revocation data (CRLs
//! and OCSP answers) the authenticator checks cards against, and the
//! access data (cardholders, credentials, groups) the central sends down.
//! Each is [`AsOf`] some instant: the last moment the site knew it to be
//! current. Their ages are inputs of the decision ([`Offline`]); a door
//! whose [`maximum`](crate::Door::max_staleness_s) one of them exceeds is
//! *stale* and applies its [`StalePolicy`].
//!
//! **Revocation data** is as of the moment the least recently confirmed
//! source in force was last confirmed: for each CRL in force, its last
//! successful download (a download that brings the same CRL again confirms
//! it), or its thisUpdate when it comes from a configured file (nothing
//! confirms a file); for each OCSP answer, its thisUpdate. The oldest of
//! these counts: a certificate revoked by its issuer after that instant may
//! be unknown to the site. Revocation checking turned off is
//! [`AsOf::NotApplicable`]; checking on with nothing held is
//! [`AsOf::Never`].
//!
//! **Access changes** are as of the last change applied from the central,
//! or the last confirmation from the central that none is pending. A site
//! without a central (a single-site install, its own system of record) is
//! [`AsOf::NotApplicable`]: its data is current by definition.

use std::fmt;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::model::ParseError;

/// The last moment a site knew some data to be current.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum AsOf {
    /// The site does not depend on this data (no central; revocation
    /// checking off): never stale.
    #[default]
    NotApplicable,
    /// The site depends on it but never had it confirmed: stale at any
    /// maximum.
    Never,
    /// Confirmed current at `at`.
    At { at: Timestamp },
}

impl AsOf {
    /// How old the data is at `now`.
    pub fn age(self, now: Timestamp) -> Age {
        match self {
            AsOf::NotApplicable => Age::NotApplicable,
            AsOf::Never => Age::Never,
            // A confirmation dated in the future (clock skew) is current.
            AsOf::At { at } => {
                Age::Secs(now.as_second().saturating_sub(at.as_second()).max(0) as u64)
            }
        }
    }

    /// The older of two (for the oldest of several sources).
    pub fn older(self, other: AsOf) -> AsOf {
        match (self, other) {
            (AsOf::NotApplicable, x) | (x, AsOf::NotApplicable) => x,
            (AsOf::Never, _) | (_, AsOf::Never) => AsOf::Never,
            (AsOf::At { at: a }, AsOf::At { at: b }) => AsOf::At { at: a.min(b) },
        }
    }
}

/// How old some data is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Age {
    NotApplicable,
    Secs(u64),
    Never,
}

impl Age {
    /// Whether this age is beyond `max` seconds.
    pub fn exceeds(self, max: u64) -> bool {
        match self {
            Age::NotApplicable => false,
            Age::Secs(s) => s > max,
            Age::Never => true,
        }
    }

    /// Seconds, when the data has an age.
    pub fn secs(self) -> Option<u64> {
        match self {
            Age::Secs(s) => Some(s),
            _ => None,
        }
    }
}

impl fmt::Display for Age {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Age::NotApplicable => f.write_str("not applicable"),
            Age::Never => f.write_str("never confirmed"),
            Age::Secs(s) => write!(f, "{} old", Span(*s)),
        }
    }
}

/// Seconds as the largest unit and the rest in the next unit that shows
/// it (`3 h 12 min`, `2 d 4 h`, `1 h 1 s`, `45 s`).
struct Span(u64);

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.0;
        let units = [(86_400, "d"), (3_600, "h"), (60, "min"), (1, "s")];
        let Some(i) = units.iter().position(|(n, _)| s >= *n) else {
            return f.write_str("0 s");
        };
        let (n, u) = units[i];
        write!(f, "{} {u}", s / n)?;
        // The rest in the largest unit that shows it (`1 h 1 s`, never
        // `1 h` for a little more than an hour).
        let rest = s % n;
        if let Some(&(m, v)) = units[i + 1..].iter().find(|(m, _)| rest >= *m) {
            write!(f, " {} {v}", rest / m)?;
        }
        Ok(())
    }
}

/// The two kinds of data a site decides from, as of when each was last
/// known current. Held by the controller and updated by the revocation
/// refresh and the change follower; read once per tap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Freshness {
    pub revocation: AsOf,
    pub changes: AsOf,
}

impl Freshness {
    /// Nothing depended on: no door is ever stale.
    pub const NOT_APPLICABLE: Freshness = Freshness {
        revocation: AsOf::NotApplicable,
        changes: AsOf::NotApplicable,
    };

    /// What exceeds `max_s` at `now`, if anything.
    pub fn stale(&self, max_s: u64, now: Timestamp) -> Option<Stale> {
        let revocation = self.revocation.age(now);
        let changes = self.changes.age(now);
        (revocation.exceeds(max_s) || changes.exceeds(max_s)).then_some(Stale {
            revocation,
            changes,
            max_s,
        })
    }
}

/// What a door does while its data is older than its maximum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StalePolicy {
    /// Keep deciding from the data held (an event records when the door
    /// turns stale and when it recovers).
    #[default]
    Decide,
    /// Refuse every tap (`stale-data`).
    Refuse,
    /// Admit only each cardholder's most recent credential: one superseded
    /// by a newer credential of the same cardholder is refused
    /// (`stale-superseded`), its revocation may not have reached the site.
    RecentOnly,
}

impl StalePolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            StalePolicy::Decide => "decide",
            StalePolicy::Refuse => "refuse",
            StalePolicy::RecentOnly => "recent-only",
        }
    }
}

impl std::str::FromStr for StalePolicy {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        match s {
            "decide" => Ok(StalePolicy::Decide),
            "refuse" => Ok(StalePolicy::Refuse),
            "recent-only" => Ok(StalePolicy::RecentOnly),
            _ => Err(ParseError::new(
                "stale-data policy",
                "expected one of: `decide`, `refuse`, `recent-only`",
                s,
            )),
        }
    }
}

impl fmt::Display for StalePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A door's data beyond its maximum age: both ages, for the sentence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stale {
    pub revocation: Age,
    pub changes: Age,
    /// The door's maximum, in seconds.
    pub max_s: u64,
}

impl fmt::Display for Stale {
    /// Names the data beyond the maximum and how old it is, e.g.
    /// "the revocation data is 3 h 12 min old (at most 1 h allowed)".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (what, verb, age) in [
            ("the revocation data", "is", self.revocation),
            ("the access changes from the central", "are", self.changes),
        ] {
            if !age.exceeds(self.max_s) {
                continue;
            }
            if !first {
                f.write_str(" and ")?;
            }
            first = false;
            match age {
                Age::Never if verb == "is" => write!(f, "{what} was never confirmed current")?,
                Age::Never => write!(f, "{what} were never confirmed current")?,
                _ => write!(f, "{what} {verb} {age}")?,
            }
        }
        write!(f, " (at most {} allowed)", Span(self.max_s))
    }
}

/// What the decision is told about the data's age: the freshness in force
/// and the maximum for doors that set none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Offline {
    pub freshness: Freshness,
    /// Seconds; `None`: a door without its own maximum is never stale.
    pub default_max_staleness_s: Option<u64>,
}

impl Offline {
    /// No door is ever stale (what [`AccessSnapshot::decide`] assumes).
    ///
    /// [`AccessSnapshot::decide`]: crate::AccessSnapshot::decide
    pub const NONE: Offline = Offline {
        freshness: Freshness::NOT_APPLICABLE,
        default_max_staleness_s: None,
    };

    /// The door's maximum age, its own or the default.
    pub fn max_for(&self, door: &crate::Door) -> Option<u64> {
        door.max_staleness_s.or(self.default_max_staleness_s)
    }

    /// Whether `door` is stale at `now`, and by what.
    pub fn stale(&self, door: &crate::Door, now: Timestamp) -> Option<Stale> {
        self.freshness.stale(self.max_for(door)?, now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    #[test]
    fn ages_and_the_oldest_source() {
        let now = t(3_600);
        assert_eq!(AsOf::At { at: t(0) }.age(now), Age::Secs(3_600));
        assert_eq!(AsOf::At { at: t(7_200) }.age(now), Age::Secs(0));
        assert_eq!(AsOf::Never.age(now), Age::Never);
        assert_eq!(AsOf::NotApplicable.age(now), Age::NotApplicable);
        let a = AsOf::At { at: t(10) };
        let b = AsOf::At { at: t(20) };
        assert_eq!(a.older(b), a);
        assert_eq!(AsOf::NotApplicable.older(b), b);
        assert_eq!(b.older(AsOf::Never), AsOf::Never);
        assert!(!Age::NotApplicable.exceeds(0));
        assert!(Age::Never.exceeds(u64::MAX));
        assert!(!Age::Secs(60).exceeds(60));
        assert!(Age::Secs(61).exceeds(60));
    }

    #[test]
    fn the_sentence_names_the_data_and_its_age() {
        let f = Freshness {
            revocation: AsOf::At { at: t(0) },
            changes: AsOf::NotApplicable,
        };
        assert_eq!(f.stale(3_600, t(3_600)), None);
        let s = f.stale(3_600, t(11_520)).unwrap();
        assert_eq!(
            s.to_string(),
            "the revocation data is 3 h 12 min old (at most 1 h allowed)"
        );
        let f = Freshness {
            revocation: AsOf::At { at: t(0) },
            changes: AsOf::Never,
        };
        let s = f.stale(86_400, t(100)).unwrap();
        assert_eq!(
            s.to_string(),
            "the access changes from the central were never confirmed current (at most 1 d allowed)"
        );
        let f = Freshness {
            revocation: AsOf::At { at: t(0) },
            changes: AsOf::At { at: t(0) },
        };
        assert_eq!(
            f.stale(30, t(45)).unwrap().to_string(),
            "the revocation data is 45 s old and the access changes from the central are 45 s old (at most 30 s allowed)"
        );
    }
}
