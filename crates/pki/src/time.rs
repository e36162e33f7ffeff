//! Certificate times: seconds since the Unix epoch, parsed from the fixed ASN.1 formats.
//!
//! UTCTime (`YYMMDDHHMMSSZ`) and GeneralizedTime (`YYYYMMDDHHMMSSZ`) are parsed digit by digit
//! as RFC 5280 §4.1.2.5 fixes them; there is no general (and no locale-aware) date parser.

use std::fmt;
use thiserror::Error;

/// A point in time, in whole seconds since 1970-01-01T00:00:00Z.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time(pub i64);

/// A time that does not follow the fixed format.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("malformed {kind}: {reason}")]
pub struct TimeError {
    pub kind: &'static str,
    pub reason: &'static str,
}

impl Time {
    /// The current system time.
    pub fn now() -> Time {
        let secs = match std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
            Ok(d) => d.as_secs() as i64,
            Err(e) => -(e.duration().as_secs() as i64),
        };
        Time(secs)
    }

    pub const fn from_unix(secs: i64) -> Time {
        Time(secs)
    }

    pub const fn unix(self) -> i64 {
        self.0
    }

    /// Builds a time from calendar fields (UTC), checking ranges.
    pub fn from_parts(
        year: i64,
        month: u32,
        day: u32,
        hour: u32,
        min: u32,
        sec: u32,
    ) -> Option<Time> {
        if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
            return None;
        }
        if hour > 23 || min > 59 || sec > 59 {
            return None;
        }
        let days = days_from_civil(year, month, day);
        Some(Time(days * 86_400 + (hour * 3600 + min * 60 + sec) as i64))
    }

    /// Parses an ASN.1 UTCTime's contents, `YYMMDDHHMMSSZ` (RFC 5280 §4.1.2.5.1: years 50-99
    /// are 19xx, 00-49 are 20xx).
    pub fn from_utc_time(v: &[u8]) -> Result<Time, TimeError> {
        const KIND: &str = "UTCTime";
        if v.len() != 13 || v[12] != b'Z' {
            return Err(err(KIND, "expected the form YYMMDDHHMMSSZ"));
        }
        let yy = two(v, 0, KIND)? as i64;
        let year = if yy >= 50 { 1900 + yy } else { 2000 + yy };
        fields(year, &v[2..12], KIND)
    }

    /// Parses an ASN.1 GeneralizedTime's contents, `YYYYMMDDHHMMSSZ` (RFC 5280 §4.1.2.5.2).
    pub fn from_generalized_time(v: &[u8]) -> Result<Time, TimeError> {
        const KIND: &str = "GeneralizedTime";
        if v.len() != 15 || v[14] != b'Z' {
            return Err(err(KIND, "expected the form YYYYMMDDHHMMSSZ"));
        }
        let year = two(v, 0, KIND)? as i64 * 100 + two(v, 2, KIND)? as i64;
        fields(year, &v[4..14], KIND)
    }

    /// Parses a DER `Time` element (UTCTime or GeneralizedTime) given its tag and contents.
    pub fn from_der_tagged(tag: u8, v: &[u8]) -> Result<Time, TimeError> {
        match tag {
            crate::asn1::tag::UTC_TIME => Time::from_utc_time(v),
            crate::asn1::tag::GENERALIZED_TIME => Time::from_generalized_time(v),
            _ => Err(err("Time", "expected UTCTime or GeneralizedTime")),
        }
    }

    /// Parses RFC 3339 `YYYY-MM-DDTHH:MM:SS` followed by `Z` or `±HH:MM`, with optional
    /// fractional seconds (dropped).
    pub fn from_rfc3339(s: &str) -> Result<Time, TimeError> {
        const KIND: &str = "RFC 3339 time";
        let b = s.as_bytes();
        if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
            return Err(err(KIND, "expected YYYY-MM-DDTHH:MM:SSZ"));
        }
        if b[13] != b':' || b[16] != b':' {
            return Err(err(KIND, "expected YYYY-MM-DDTHH:MM:SSZ"));
        }
        let year = two(b, 0, KIND)? as i64 * 100 + two(b, 2, KIND)? as i64;
        let (month, day) = (two(b, 5, KIND)?, two(b, 8, KIND)?);
        let (hour, min, sec) = (two(b, 11, KIND)?, two(b, 14, KIND)?, two(b, 17, KIND)?);
        let mut rest = &b[19..];
        if let Some(frac) = rest.strip_prefix(b".") {
            let digits = frac.iter().take_while(|c| c.is_ascii_digit()).count();
            if digits == 0 {
                return Err(err(KIND, "empty fraction of a second"));
            }
            rest = &frac[digits..];
        }
        let offset = match rest {
            [b'Z' | b'z'] => 0,
            [sign @ (b'+' | b'-'), _, _, b':', _, _] => {
                let secs = (two(rest, 1, KIND)? * 3600 + two(rest, 4, KIND)? * 60) as i64;
                if *sign == b'+' {
                    secs
                } else {
                    -secs
                }
            }
            _ => return Err(err(KIND, "expected Z or an offset ±HH:MM")),
        };
        let t = Time::from_parts(year, month, day, hour, min, sec)
            .ok_or_else(|| err(KIND, "a field is out of range"))?;
        Ok(Time(t.0 - offset))
    }

    /// Adds seconds, saturating.
    pub fn plus_secs(self, secs: i64) -> Time {
        Time(self.0.saturating_add(secs))
    }

    /// Calendar fields (year, month, day, hour, minute, second), UTC.
    pub fn to_parts(self) -> (i64, u32, u32, u32, u32, u32) {
        let days = self.0.div_euclid(86_400);
        let secs = self.0.rem_euclid(86_400) as u32;
        let (y, m, d) = civil_from_days(days);
        (y, m, d, secs / 3600, secs / 60 % 60, secs % 60)
    }
}

impl fmt::Display for Time {
    /// RFC 3339, e.g. `2030-12-31T23:59:59Z`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (y, mo, d, h, mi, s) = self.to_parts();
        write!(f, "{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
    }
}

/// Serialised as RFC 3339 text (`2030-12-31T23:59:59Z`), the form people
/// and databases read; parsed back with [`Time::from_rfc3339`].
impl serde::Serialize for Time {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Time {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Time::from_rfc3339(&s).map_err(serde::de::Error::custom)
    }
}

fn err(kind: &'static str, reason: &'static str) -> TimeError {
    TimeError { kind, reason }
}

fn two(v: &[u8], at: usize, kind: &'static str) -> Result<u32, TimeError> {
    match (v.get(at), v.get(at + 1)) {
        (Some(a), Some(b)) if a.is_ascii_digit() && b.is_ascii_digit() => {
            Ok(((a - b'0') * 10 + (b - b'0')) as u32)
        }
        _ => Err(err(kind, "expected a digit")),
    }
}

/// `MMDDHHMMSS` after the year.
fn fields(year: i64, v: &[u8], kind: &'static str) -> Result<Time, TimeError> {
    let month = two(v, 0, kind)?;
    let day = two(v, 2, kind)?;
    let hour = two(v, 4, kind)?;
    let min = two(v, 6, kind)?;
    let sec = two(v, 8, kind)?;
    Time::from_parts(year, month, day, hour, min, sec)
        .ok_or_else(|| err(kind, "a field is out of range"))
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if is_leap(y) => 29,
        _ => 28,
    }
}

/// Days since 1970-01-01 (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = m as i64;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// (year, month, day) of a day number counted from 1970-01-01 (H. Hinnant's
/// algorithm).
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_time_century_rule() {
        assert_eq!(Time::from_utc_time(b"700101000000Z").unwrap(), Time(0));
        assert_eq!(
            Time::from_utc_time(b"491231235959Z").unwrap().to_string(),
            "2049-12-31T23:59:59Z"
        );
        assert_eq!(
            Time::from_utc_time(b"500101000000Z").unwrap().to_string(),
            "1950-01-01T00:00:00Z"
        );
    }

    #[test]
    fn generalized_time_and_leap_days() {
        let t = Time::from_generalized_time(b"20240229120000Z").unwrap();
        assert_eq!(t.to_string(), "2024-02-29T12:00:00Z");
        assert_eq!(t.unix(), 1_709_208_000);
        assert!(Time::from_generalized_time(b"20230229120000Z").is_err());
        assert!(Time::from_generalized_time(b"20231301000000Z").is_err());
        assert!(Time::from_generalized_time(b"20230101000000").is_err());
        assert!(Time::from_generalized_time(b"2023010100000Z0").is_err());
        assert!(Time::from_generalized_time(b"20230101000060Z").is_err());
        assert!(Time::from_generalized_time(b"20230101000000.5Z").is_err());
    }

    #[test]
    fn rfc3339() {
        assert_eq!(Time::from_rfc3339("1970-01-01T00:00:00Z").unwrap(), Time(0));
        assert_eq!(
            Time::from_rfc3339("1970-01-01T01:00:00+01:00").unwrap(),
            Time(0)
        );
        assert_eq!(
            Time::from_rfc3339("1970-01-01T00:00:01.999Z").unwrap(),
            Time(1)
        );
        assert_eq!(
            Time::from_rfc3339("2030-12-31T23:59:59Z")
                .unwrap()
                .to_string(),
            "2030-12-31T23:59:59Z"
        );
        assert!(Time::from_rfc3339("2030-12-31").is_err());
        assert!(Time::from_rfc3339("2030-12-31T23:59:59").is_err());
        assert!(Time::from_rfc3339("2030-02-30T00:00:00Z").is_err());
    }

    #[test]
    fn round_trip_many_days() {
        for days in (-800_000i64..800_000).step_by(997) {
            let t = Time(days * 86_400 + 3_661);
            let (y, mo, d, h, mi, s) = t.to_parts();
            assert_eq!(Time::from_parts(y, mo, d, h, mi, s), Some(t));
        }
    }
}
