//! Weekly time windows, written the way people say them: `mon-fri 07:00-19:00`,
//! `daily 22:00-06:00` (crosses midnight), `sat,sun 00:00-24:00`.
//!
//! A window starts inclusive and ends exclusive, to the second, in the site's
//! wall-clock time. A window whose end is not after its start crosses
//! midnight and belongs to the day it starts: `fri 22:00-06:00` is open from
//! Friday 22:00 to Saturday 06:00. On a DST transition day the wall clock is
//! what counts: a window of `02:00-03:00` does not occur on the spring-forward
//! day in `America/New_York`, and `01:00-02:00` covers both passes through
//! 01:xx on the fall-back day.

use std::fmt;
use std::str::FromStr;

use jiff::civil::{Date, DateTime, Weekday};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::parse_error::ParseError;

const DAY: u32 = 86_400;
const DAY_NAMES: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];

/// A set of weekdays (bit 0 Monday … bit 6 Sunday).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Days(u8);

impl Days {
    pub const ALL: Days = Days(0x7f);
    pub const WEEKDAYS: Days = Days(0x1f);
    pub const WEEKEND: Days = Days(0x60);

    pub fn contains(self, day: Weekday) -> bool {
        self.0 & (1 << day.to_monday_zero_offset()) != 0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    fn bit(i: usize) -> u8 {
        1 << i
    }
}

fn day_index(s: &str, whole: &str) -> Result<usize, ParseError> {
    let lower = s.to_ascii_lowercase();
    DAY_NAMES
        .iter()
        .position(|d| {
            // `get`: a non-ASCII word has no char boundary at byte 3.
            lower.get(..3).is_some_and(|p| d.starts_with(p)) && is_day_word(&lower)
        })
        .ok_or_else(|| {
            ParseError::new(
                "schedule window",
                format!(
                    "`{s}` is not a day (use mon, tue, …, sun, `weekdays`, `weekend` or `daily`)"
                ),
                whole,
            )
        })
}

fn is_day_word(lower: &str) -> bool {
    const FULL: [&str; 7] = [
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
    ];
    lower.len() == 3 || FULL.contains(&lower)
}

impl FromStr for Days {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        let mut bits = 0u8;
        for part in s.split(',') {
            let part = part.trim();
            match part.to_ascii_lowercase().as_str() {
                "daily" | "all" => bits |= Days::ALL.0,
                "weekdays" => bits |= Days::WEEKDAYS.0,
                "weekend" => bits |= Days::WEEKEND.0,
                _ => {
                    if let Some((a, b)) = part.split_once('-') {
                        let (a, b) = (day_index(a, s)?, day_index(b, s)?);
                        // A range may wrap: `fri-mon`.
                        let mut i = a;
                        loop {
                            bits |= Days::bit(i);
                            if i == b {
                                break;
                            }
                            i = (i + 1) % 7;
                        }
                    } else {
                        bits |= Days::bit(day_index(part, s)?);
                    }
                }
            }
        }
        Ok(Days(bits))
    }
}

impl fmt::Display for Days {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Days::ALL => return f.write_str("daily"),
            Days::WEEKDAYS => return f.write_str("mon-fri"),
            Days::WEEKEND => return f.write_str("sat-sun"),
            _ => {}
        }
        // Runs of consecutive days, Monday first.
        let mut first = true;
        let mut i = 0;
        while i < 7 {
            if self.0 & Days::bit(i) == 0 {
                i += 1;
                continue;
            }
            let start = i;
            while i + 1 < 7 && self.0 & Days::bit(i + 1) != 0 {
                i += 1;
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if i == start {
                f.write_str(DAY_NAMES[start])?;
            } else {
                write!(f, "{}-{}", DAY_NAMES[start], DAY_NAMES[i])?;
            }
            i += 1;
        }
        Ok(())
    }
}

/// A daily time range `HH:MM-HH:MM` (start inclusive, end exclusive); an end
/// not after the start crosses midnight. `24:00` is allowed as an end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TimeRange {
    /// Seconds after midnight, `0..86400`.
    start: u32,
    /// Seconds after midnight, `1..=86400`.
    end: u32,
}

impl TimeRange {
    /// From seconds after midnight. `start` in `0..86400`, `end` in
    /// `1..=86400`, `start != end`.
    pub fn new(start: u32, end: u32) -> Result<Self, ParseError> {
        let shown = format!("{start}-{end}");
        if start >= DAY || end == 0 || end > DAY {
            return Err(ParseError::new(
                "time range",
                "start must be before 24:00 and end within 00:01..=24:00",
                &shown,
            ));
        }
        if start == end {
            return Err(ParseError::new(
                "time range",
                "start equals end: the window would be empty",
                &shown,
            ));
        }
        Ok(TimeRange { start, end })
    }

    pub fn start_secs(self) -> u32 {
        self.start
    }

    pub fn end_secs(self) -> u32 {
        self.end
    }

    pub fn crosses_midnight(self) -> bool {
        self.end <= self.start
    }

    /// Whether `offset` seconds after the midnight that starts the window's
    /// day (may exceed a day, for the part after midnight) is inside it.
    fn contains_offset(self, offset: u32) -> bool {
        let end = if self.crosses_midnight() {
            self.end + DAY
        } else {
            self.end
        };
        self.start <= offset && offset < end
    }
}

fn parse_clock(s: &str, whole: &str) -> Result<u32, ParseError> {
    let bad = || {
        ParseError::new(
            "schedule window",
            format!("`{s}` is not a time of day HH:MM"),
            whole,
        )
    };
    let (h, m) = s.trim().split_once(':').ok_or_else(bad)?;
    if h.is_empty() || h.len() > 2 || m.len() != 2 {
        return Err(bad());
    }
    let h: u32 = h.parse().map_err(|_| bad())?;
    let m: u32 = m.parse().map_err(|_| bad())?;
    if m >= 60 || h > 24 || (h == 24 && m != 0) {
        return Err(bad());
    }
    Ok(h * 3600 + m * 60)
}

fn fmt_clock(f: &mut fmt::Formatter<'_>, secs: u32) -> fmt::Result {
    write!(f, "{:02}:{:02}", secs / 3600, (secs % 3600) / 60)?;
    if !secs.is_multiple_of(60) {
        write!(f, ":{:02}", secs % 60)?;
    }
    Ok(())
}

impl FromStr for TimeRange {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        let (a, b) = s
            .split_once('-')
            .ok_or_else(|| ParseError::new("time range", "expected HH:MM-HH:MM", s))?;
        let start = parse_clock(a, s)?;
        let end = parse_clock(b, s)?;
        if start == DAY {
            return Err(ParseError::new(
                "time range",
                "24:00 can only end a window",
                s,
            ));
        }
        TimeRange::new(start, end).map_err(|e| ParseError::new("time range", e.problem, s))
    }
}

impl fmt::Display for TimeRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt_clock(f, self.start)?;
        f.write_str("-")?;
        fmt_clock(f, self.end)
    }
}

/// Days of the week and a time range, e.g. `mon-fri 07:00-19:00`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Window {
    pub days: Days,
    pub range: TimeRange,
}

impl FromStr for Window {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        let (days, range) = s.trim().rsplit_once(' ').ok_or_else(|| {
            ParseError::new(
                "schedule window",
                "expected `DAYS HH:MM-HH:MM`, e.g. `mon-fri 07:00-19:00`",
                s,
            )
        })?;
        let days: Days = days.trim().parse()?;
        if days.is_empty() {
            return Err(ParseError::new("schedule window", "no days given", s));
        }
        let range = range
            .parse()
            .map_err(|e: ParseError| ParseError::new("schedule window", e.problem, s))?;
        Ok(Window { days, range })
    }
}

impl fmt::Display for Window {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.days, self.range)
    }
}

macro_rules! serde_via_str {
    ($t:ty) => {
        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

serde_via_str!(Window);
serde_via_str!(TimeRange);
serde_via_str!(Days);

/// The time ranges a schedule uses on a holiday (days do not apply).
pub type WindowSet = Vec<TimeRange>;

/// What a schedule says about one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Check<H> {
    Open,
    Closed,
    /// Closed because of this holiday, where a regular window would have opened.
    Holiday(H),
}

/// Evaluates `windows` / `holiday_windows` at local time `at`;
/// `holiday(date)` says whether a date is a holiday for the site.
pub(crate) fn check<H: Copy>(
    windows: &[Window],
    holiday_windows: &[TimeRange],
    at: DateTime,
    holiday: impl Fn(Date) -> Option<H>,
) -> Check<H> {
    let t = at.time();
    let secs = t.hour() as u32 * 3600 + t.minute() as u32 * 60 + t.second() as u32;
    let today = at.date();
    let mut closed_by = None;
    // Windows belong to the day they start: today's, then yesterday's that
    // cross midnight.
    let days = [(Some(today), secs), (today.yesterday().ok(), secs + DAY)];
    for (day, offset) in days {
        let Some(day) = day else { continue };
        let regular = windows
            .iter()
            .any(|w| w.days.contains(day.weekday()) && w.range.contains_offset(offset));
        match holiday(day) {
            Some(h) => {
                if holiday_windows.iter().any(|r| r.contains_offset(offset)) {
                    return Check::Open;
                }
                if regular && closed_by.is_none() {
                    closed_by = Some(h);
                }
            }
            None => {
                if regular {
                    return Check::Open;
                }
            }
        }
    }
    match closed_by {
        Some(h) => Check::Holiday(h),
        None => Check::Closed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::civil::date;

    fn w(s: &str) -> Window {
        s.parse().unwrap()
    }

    fn open(windows: &[&str], at: DateTime) -> bool {
        let ws: Vec<Window> = windows.iter().map(|s| w(s)).collect();
        check::<()>(&ws, &[], at, |_| None) == Check::Open
    }

    #[test]
    fn parse_and_display() {
        assert_eq!(w("mon-fri 07:00-19:00").to_string(), "mon-fri 07:00-19:00");
        assert_eq!(w("weekdays 7:00-19:00").to_string(), "mon-fri 07:00-19:00");
        assert_eq!(
            w("Monday,wed,fri 22:00-06:00").to_string(),
            "mon,wed,fri 22:00-06:00"
        );
        assert_eq!(
            w("fri-mon 00:00-24:00").to_string(),
            "mon,fri-sun 00:00-24:00"
        );
        assert_eq!(w("daily 00:00-24:00").days, Days::ALL);
        for bad in [
            "mon-fri",
            "mon-fri 07:00",
            "mon-fri 07:00-07:00",
            "mon-fri 25:00-26:00",
            "mon-fri 07:60-08:00",
            "funday 07:00-08:00",
            "mon-fri 24:00-06:00",
            "mo 07:00-08:00",
        ] {
            assert!(bad.parse::<Window>().is_err(), "{bad} should not parse");
        }
        let e = "mon-fri 07:00-07:00"
            .parse::<Window>()
            .unwrap_err()
            .to_string();
        assert!(e.contains("empty"), "{e}");
    }

    #[test]
    fn start_inclusive_end_exclusive() {
        // 2026-11-23 is a Monday.
        let ws = ["mon-fri 07:00-19:00"];
        assert!(!open(&ws, date(2026, 11, 23).at(6, 59, 59, 0)));
        assert!(open(&ws, date(2026, 11, 23).at(7, 0, 0, 0)));
        assert!(open(&ws, date(2026, 11, 23).at(18, 59, 59, 999_999_999)));
        assert!(!open(&ws, date(2026, 11, 23).at(19, 0, 0, 0)));
        // Saturday.
        assert!(!open(&ws, date(2026, 11, 28).at(12, 0, 0, 0)));
    }

    #[test]
    fn crossing_midnight_belongs_to_start_day() {
        let ws = ["fri 22:00-06:00"];
        // Friday 2026-11-27.
        assert!(!open(&ws, date(2026, 11, 27).at(21, 59, 59, 0)));
        assert!(open(&ws, date(2026, 11, 27).at(22, 0, 0, 0)));
        assert!(open(&ws, date(2026, 11, 27).at(23, 59, 59, 0)));
        assert!(open(&ws, date(2026, 11, 28).at(0, 0, 0, 0)));
        assert!(open(&ws, date(2026, 11, 28).at(5, 59, 59, 0)));
        assert!(!open(&ws, date(2026, 11, 28).at(6, 0, 0, 0)));
        // Friday morning belongs to Thursday's window, which does not exist.
        assert!(!open(&ws, date(2026, 11, 27).at(3, 0, 0, 0)));
        // Sunday night into Monday: wraps across the week.
        let ws = ["sun 22:00-06:00"];
        assert!(open(&ws, date(2026, 11, 30).at(1, 0, 0, 0)));
        // A whole day ends exactly at midnight.
        let ws = ["mon 00:00-24:00"];
        assert!(open(&ws, date(2026, 11, 23).at(23, 59, 59, 0)));
        assert!(!open(&ws, date(2026, 11, 24).at(0, 0, 0, 0)));
    }

    #[test]
    fn holidays_replace_regular_windows() {
        let ws = [w("mon-fri 07:00-19:00"), w("mon 22:00-02:00")];
        let hol = [TimeRange::from_str("09:00-12:00").unwrap()];
        let monday = date(2026, 11, 23);
        let is_hol = |d: Date| (d == monday).then_some(7);
        // Regular window closed by the holiday.
        assert_eq!(
            check(&ws, &[], monday.at(8, 0, 0, 0), is_hol),
            Check::Holiday(7)
        );
        // Holiday window opens.
        assert_eq!(check(&ws, &hol, monday.at(9, 0, 0, 0), is_hol), Check::Open);
        assert_eq!(
            check(&ws, &hol, monday.at(12, 0, 0, 0), is_hol),
            Check::Holiday(7)
        );
        // Outside every window: plain closed, not "holiday".
        assert_eq!(
            check(&ws, &hol, monday.at(3, 0, 0, 0), is_hol),
            Check::Closed
        );
        // The part after midnight of a window that started on the holiday is
        // closed too; the next day's own windows are not affected.
        let tuesday = date(2026, 11, 24);
        assert_eq!(
            check(&ws, &[], tuesday.at(1, 0, 0, 0), is_hol),
            Check::Holiday(7)
        );
        assert_eq!(check(&ws, &[], tuesday.at(8, 0, 0, 0), is_hol), Check::Open);
    }
}
