//! Fuzzes schedule windows: lines of text parsed as weekly windows
//! (`mon-fri 07:00-19:00`) or, after `h `, holiday ranges (`10:00-14:00`),
//! then evaluated at an arbitrary instant in one of a few time zones, with
//! the days a bit mask marks as holidays. Every window that parses prints
//! as text that parses back to it; a schedule open all day every day with
//! no holiday is open at any instant. Nothing may panic.

#![no_main]

use access::jiff::civil::Date;
use access::jiff::Timestamp;
use access::{Schedule, ScheduleId, TimeRange, Window};
use libfuzzer_sys::fuzz_target;

const ZONES: [&str; 6] = [
    "UTC",
    "Europe/Paris",
    "America/New_York",
    "Australia/Lord_Howe",
    "Pacific/Kiritimati",
    "America/St_Johns",
];

fuzz_target!(|data: &[u8]| {
    if data.len() < 10 {
        return;
    }
    let (head, text) = data.split_at(10);
    let secs = i64::from_le_bytes(head[..8].try_into().expect("8 bytes"));
    // Anywhere in jiff's range of instants.
    let span = Timestamp::MAX.as_second() - Timestamp::MIN.as_second();
    let secs = Timestamp::MIN.as_second() + secs.rem_euclid(span);
    let Ok(at) = Timestamp::from_second(secs) else {
        return;
    };
    let tz = access::time_zone(ZONES[usize::from(head[8]) % ZONES.len()]).expect("a known zone");
    let holidays = head[9];
    let Ok(text) = std::str::from_utf8(text) else {
        return;
    };
    let mut windows = Vec::new();
    let mut holiday_windows = Vec::new();
    for line in text.lines() {
        if let Some(r) = line.strip_prefix("h ") {
            if let Ok(r) = r.parse::<TimeRange>() {
                let again: TimeRange = r.to_string().parse().expect("a printed range parses");
                assert_eq!(again, r);
                holiday_windows.push(r);
            }
        } else if let Ok(w) = line.parse::<Window>() {
            let again: Window = w.to_string().parse().expect("a printed window parses");
            assert_eq!(again, w);
            windows.push(w);
        }
    }
    let local = tz.to_datetime(at);
    let is_holiday = |d: Date| holidays & (1 << (d.day() as u8 % 8)) != 0;
    let schedule = Schedule {
        id: ScheduleId(1),
        name: "fuzz".into(),
        windows,
        holiday_windows,
    };
    let open = schedule.is_open_at(local, is_holiday);
    // Adding windows never closes a schedule.
    let mut wider = schedule.clone();
    wider
        .windows
        .push("daily 00:00-24:00".parse().expect("a valid window"));
    assert!(
        wider.is_open_at(local, |_| false),
        "open all day, yet closed at {local}"
    );
    if open {
        assert!(wider.is_open_at(local, is_holiday));
    }
    // Through JSON as the API and the store read it.
    let json = serde_json::to_string(&schedule).expect("a schedule serialises");
    let back: Schedule = serde_json::from_str(&json).expect("a serialised schedule reads");
    assert_eq!(back, schedule);
});
