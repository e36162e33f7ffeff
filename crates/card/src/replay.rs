//! Replaying a measured card: the software card answers with the timings
//! of a [`TimingReport`] (what `pivgate measure` writes), so that doors,
//! readers and the service can be tried against the cards a site issues.
//! The seed profiles are published as reports of the same format
//! ([`seed_report`], `crates/card/profiles/*.json`).
//!
//! An operation's measured time is charged to the APDU that starts it;
//! the intermediate links of a command chain and GET RESPONSE
//! continuations cost nothing, so a replayed operation takes what it took
//! on the measured card (plus the link of the machine replaying it). The
//! first APDU after a power-on or reset also costs the report's power-up
//! time. A command the report has no figure for costs nothing, except a
//! GET DATA (the median of the objects measured) and a GENERAL
//! AUTHENTICATE (the same algorithm's figure, else the first key's).

use crate::profile::TimingProfile;
use piv::timing::{CardDescription, OpKind, Operation, ReportError, TimingReport};
use std::collections::BTreeMap;
use std::time::Duration;

/// Why a report cannot be replayed.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("the timing report is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error(transparent)]
    Report(#[from] ReportError),
}

/// Per-command times taken from a report.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Replay {
    power_up: Duration,
    select: Duration,
    verify: Duration,
    get_data: BTreeMap<u32, Duration>,
    get_data_default: Duration,
    by_key: BTreeMap<u8, Duration>,
    by_algorithm: BTreeMap<u8, Duration>,
    sign_default: Duration,
}

fn us(n: u64) -> Duration {
    Duration::from_micros(n)
}

impl Replay {
    /// Reads a report (JSON) and checks its schema and version.
    pub fn from_json(json: &str) -> Result<Self, ReplayError> {
        let r: TimingReport = serde_json::from_str(json)?;
        Ok(Self::from_report(&r)?)
    }

    /// The per-command times of `report`.
    pub fn from_report(report: &TimingReport) -> Result<Self, ReportError> {
        report.check()?;
        let mut r = Replay::default();
        let mut objects = Vec::new();
        for op in &report.operations {
            let t = us(op.median_us);
            match op.op {
                OpKind::PowerUp => r.power_up = t,
                OpKind::Select => r.select = t,
                OpKind::Verify => r.verify = t,
                OpKind::GetData => {
                    if let Some(tag) = op.object.as_deref().and_then(parse_tag) {
                        r.get_data.insert(tag, t);
                        objects.push(op.median_us);
                    }
                }
                OpKind::GeneralAuthenticate => {
                    let key = op
                        .key
                        .as_deref()
                        .and_then(|k| u8::from_str_radix(k, 16).ok());
                    if let Some(key) = key {
                        r.by_key.insert(key, t);
                    }
                    if let Some(alg) = op.algorithm {
                        r.by_algorithm.entry(alg).or_insert(t);
                    }
                    if r.sign_default.is_zero() {
                        r.sign_default = t;
                    }
                }
                OpKind::FastPath => {}
            }
        }
        r.get_data_default = us(piv::timing::spread(&objects).0);
        Ok(r)
    }

    /// The time the first APDU after a power-on or reset costs on top of
    /// its own.
    pub fn power_up_time(&self) -> Duration {
        self.power_up
    }

    /// How long the exchange of `command` and its `response` takes.
    pub fn exchange_time(&self, command: &[u8], response: &[u8]) -> Duration {
        let [cla, ins, p1, p2, ..] = *command else {
            return Duration::ZERO;
        };
        let ok = matches!(response, [.., 0x90, 0x00] | [.., 0x61, _]);
        // A wrong PIN costs the card what a right one does.
        let pin_answer = matches!(response, [.., 0x63, _] | [.., 0x69, 0x83]);
        if cla & 0x10 != 0 {
            return Duration::ZERO;
        }
        match ins {
            0xA4 if ok => self.select,
            0xCB if ok => get_data_tag(command)
                .and_then(|t| self.get_data.get(&t).copied())
                .unwrap_or(self.get_data_default),
            0x20 if !data_of(command).is_empty() && (ok || pin_answer) => self.verify,
            0x87 if ok => self
                .by_key
                .get(&p2)
                .or_else(|| self.by_algorithm.get(&p1))
                .copied()
                .unwrap_or(self.sign_default),
            _ => Duration::ZERO,
        }
    }
}

fn parse_tag(hex: &str) -> Option<u32> {
    u32::from_str_radix(hex, 16).ok()
}

/// The data field of a command, short or extended.
fn data_of(command: &[u8]) -> &[u8] {
    iso7816::Command::parse(command).map_or(&[], |c| c.data)
}

/// The object tag of a GET DATA command (`5C` tag list in its data).
fn get_data_tag(command: &[u8]) -> Option<u32> {
    let [0x5C, len, rest @ ..] = data_of(command) else {
        return None;
    };
    let tag = rest.get(..usize::from(*len))?;
    Some(tag.iter().fold(0u32, |acc, b| (acc << 8) | u32::from(*b)))
}

/// The objects a seed report lists (the ones `pivgate measure` reads
/// without a PIN).
const SEED_OBJECTS: [(u32, &str); 8] = [
    (0x5FC102, "CHUID"),
    (0x5FC107, "CCC"),
    (0x5FC105, "X.509 certificate for PIV authentication (9A)"),
    (0x5FC10A, "X.509 certificate for digital signature (9C)"),
    (0x5FC10B, "X.509 certificate for key management (9D)"),
    (0x5FC101, "X.509 certificate for card authentication (9E)"),
    (0x7E, "Discovery object"),
    (0x5FC106, "Security object"),
];

/// Every profile that is a card's processing times, by name, as a timing
/// report ([`seed_report`]): the cards a measured one is shown beside.
pub fn seed_reports() -> Vec<(String, TimingReport)> {
    TimingProfile::ALL
        .into_iter()
        .filter_map(|p| Some((p.to_string(), seed_report(p)?)))
        .collect()
}

/// A seed profile as a timing report: its per-command times, for every
/// object and key the seed card holds. `None` for profiles that are not
/// a card's processing times (`instant`, `contactless`).
pub fn seed_report(profile: TimingProfile) -> Option<TimingReport> {
    let alg = match profile {
        TimingProfile::SeedRsa2048 => piv::Algorithm::Rsa2048,
        TimingProfile::SeedP256 => piv::Algorithm::EccP256,
        TimingProfile::Instant | TimingProfile::Contactless => return None,
    };
    let ok = [0x90, 0x00];
    let cost = |command: &[u8]| profile.exchange_time(command, &ok).as_micros() as u64;
    let op = |kind: OpKind, label: &str, t: u64| Operation {
        op: kind,
        object: None,
        key: None,
        algorithm: None,
        label: label.into(),
        size: None,
        median_us: t,
        min_us: t,
        max_us: t,
        samples: 0,
        apdus: 0,
        bytes_out: 0,
        bytes_in: 0,
    };
    let mut report = TimingReport::new(
        format!(
            "pivgate {} (defined, not measured)",
            env!("CARGO_PKG_VERSION")
        ),
        0,
        CardDescription {
            reader: format!("software card, profile {profile}"),
            atr: hex::encode_upper(crate::ATR),
            ..CardDescription::default()
        },
    );
    let ops = &mut report.operations;
    ops.push(op(OpKind::PowerUp, "power-up", 0));
    ops.push(op(
        OpKind::Select,
        "SELECT PIV",
        cost(&[0, 0xA4, 4, 0, 5, 0xA0, 0, 0, 3, 8]),
    ));
    for (tag, label) in SEED_OBJECTS {
        let mut tagged = vec![0x5C];
        let bytes = piv::DataObject::from_tag(tag)
            .map(|o| o.tag_bytes())
            .unwrap_or_default();
        tagged.push(bytes.len() as u8);
        tagged.extend_from_slice(&bytes);
        let mut apdu = vec![0, 0xCB, 0x3F, 0xFF, tagged.len() as u8];
        apdu.extend_from_slice(&tagged);
        let mut o = op(OpKind::GetData, label, cost(&apdu));
        o.object = Some(piv::timing::tag_hex(tag));
        ops.push(o);
    }
    ops.push(op(
        OpKind::Verify,
        "VERIFY PIN",
        cost(&[
            0, 0x20, 0, 0x80, 8, b'1', b'2', b'3', b'4', b'5', b'6', 0xFF, 0xFF,
        ]),
    ));
    for key in [0x9Au8, 0x9C, 0x9D, 0x9E] {
        let t = cost(&[0, 0x87, alg.id(), key, 4, 0x7C, 2, 0x82, 0]);
        let mut o = op(
            OpKind::GeneralAuthenticate,
            &format!("GENERAL AUTHENTICATE {key:02X} {}", alg.name()),
            t,
        );
        o.key = Some(format!("{key:02X}"));
        o.algorithm = Some(alg.id());
        ops.push(o);
    }
    let select = ops[1].median_us;
    let sign = ops.last().map(|o| o.median_us).unwrap_or(0);
    let mut fast = op(OpKind::FastPath, "fast path (SELECT + 9E)", select + sign);
    fast.key = Some("9E".into());
    fast.algorithm = Some(alg.id());
    ops.push(fast);
    Some(report)
}

/// The published seed report files, by profile name.
pub const SEED_REPORT_FILES: [(&str, &str); 2] = [
    (
        "seed-rsa2048",
        include_str!("../profiles/seed-rsa2048.json"),
    ),
    ("seed-p256", include_str!("../profiles/seed-p256.json")),
];

#[cfg(test)]
mod tests {
    use super::*;

    const OK: &[u8] = &[0x90, 0x00];

    #[test]
    fn published_seed_reports_are_the_seed_profiles() {
        for (name, text) in SEED_REPORT_FILES {
            let profile = TimingProfile::from_name(name).unwrap();
            let file: TimingReport = serde_json::from_str(text).unwrap();
            let defined = seed_report(profile).unwrap();
            // The tool string carries the version; the timings must match.
            assert_eq!(
                file.operations, defined.operations,
                "{name}: regenerate the file"
            );
            let replay = Replay::from_report(&file).unwrap();
            let alg = if name == "seed-rsa2048" { 7 } else { 0x11 };
            for apdu in [
                vec![0, 0xA4, 4, 0, 5, 0xA0, 0, 0, 3, 8],
                vec![0, 0xCB, 0x3F, 0xFF, 5, 0x5C, 3, 0x5F, 0xC1, 0x02, 0],
                vec![0, 0xCB, 0x3F, 0xFF, 3, 0x5C, 1, 0x7E, 0],
                vec![0x10, 0x87, alg, 0x9A, 1, 0],
                vec![0, 0x87, alg, 0x9E, 1, 0],
                vec![0, 0xC0, 0, 0, 0],
            ] {
                assert_eq!(
                    replay.exchange_time(&apdu, OK),
                    profile.exchange_time(&apdu, OK),
                    "{name} {apdu:02X?}"
                );
            }
        }
        let rsa = seed_report(TimingProfile::SeedRsa2048).unwrap();
        // SELECT + CHUID + 9E certificate + RSA-2048 signature: the seed door's 1367 ms.
        let total = rsa.find(OpKind::Select).unwrap().median_us
            + rsa.get_data(0x5FC102).unwrap().median_us
            + rsa.get_data(0x5FC101).unwrap().median_us
            + rsa.general_authenticate(0x9E).unwrap().median_us;
        assert_eq!(total, 1_367_000);
        assert!(seed_report(TimingProfile::Instant).is_none());
    }

    #[test]
    fn replays_by_object_key_and_algorithm_and_refuses_other_schemas() {
        let mut report = seed_report(TimingProfile::SeedP256).unwrap();
        report.operations[0].median_us = 400_000;
        report
            .operations
            .retain(|o| !(o.op == OpKind::GeneralAuthenticate && o.key.as_deref() == Some("9D")));
        report
            .operations
            .iter_mut()
            .filter(|o| o.object.as_deref() == Some("5FC102"))
            .for_each(|o| o.median_us = 5_000);
        let r = Replay::from_report(&report).unwrap();
        assert_eq!(r.power_up_time(), Duration::from_millis(400));
        let chuid = [0, 0xCB, 0x3F, 0xFF, 5, 0x5C, 3, 0x5F, 0xC1, 0x02, 0];
        assert_eq!(r.exchange_time(&chuid, OK), Duration::from_millis(5));
        // The same in the extended-length form.
        let extended = [
            0, 0xCB, 0x3F, 0xFF, 0, 0, 5, 0x5C, 3, 0x5F, 0xC1, 0x02, 0, 0,
        ];
        assert_eq!(r.exchange_time(&extended, OK), Duration::from_millis(5));
        // An object not in the report: the median of those that are.
        let printed = [0, 0xCB, 0x3F, 0xFF, 5, 0x5C, 3, 0x5F, 0xC1, 0x09, 0];
        assert_eq!(r.exchange_time(&printed, OK), Duration::from_millis(75));
        // 9D not measured: the same algorithm's time.
        assert_eq!(
            r.exchange_time(&[0, 0x87, 0x11, 0x9D, 1, 0], OK),
            Duration::from_millis(92)
        );
        // A wrong PIN costs a VERIFY; a failed GET DATA costs nothing.
        let verify = [
            0, 0x20, 0, 0x80, 8, b'0', b'0', b'0', b'0', b'0', b'0', 0xFF, 0xFF,
        ];
        assert_eq!(
            r.exchange_time(&verify, &[0x63, 0xC2]),
            Duration::from_millis(40)
        );
        assert_eq!(r.exchange_time(&chuid, &[0x6A, 0x82]), Duration::ZERO);

        let mut other = report.clone();
        other.schema = "something-else".into();
        assert!(Replay::from_report(&other).is_err());
        assert!(matches!(
            Replay::from_json("{\"schema\": 1}"),
            Err(ReplayError::Json(_))
        ));
        let json = serde_json::to_string(&report).unwrap();
        assert_eq!(Replay::from_json(&json).unwrap(), r);
    }
}
