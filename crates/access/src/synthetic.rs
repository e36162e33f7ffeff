//! A synthetic site of any size, for benchmarks and load tests of the
//! decision, the event log and the service: one site in America/New_York,
//! `doors` doors (door 1 an anti-passback entry), two schedules ("always"
//! and "weekdays 07-19"), ten groups over every door alternating between
//! them, Christmas holidays 2026–2030, and `credentials` active cardholders
//! each with one credential. Cardholder and credential `i` (0-based) have
//! id `i + 1`, card UUID [`card_uuid`]`(i)` and certificate hash
//! [`cert_sha256`]`(i)`.

use crate::model::*;
use crate::snapshot::Entities;
use jiff::Timestamp;

/// The card UUID of synthetic credential `i`.
pub fn card_uuid(i: usize) -> CardUuid {
    let mut u = [0u8; 16];
    u[..8].copy_from_slice(&(i as u64).to_be_bytes());
    CardUuid(u)
}

/// The card-authentication certificate hash of synthetic credential `i`.
pub fn cert_sha256(i: usize) -> Sha256 {
    digest(i, 0xc0)
}

fn digest(i: usize, salt: u8) -> Sha256 {
    let mut b = [salt; 32];
    b[..8].copy_from_slice(&(i as u64).to_be_bytes());
    Sha256(b)
}

/// The synthetic site (see the module docs).
pub fn site(credentials: usize, doors: i64) -> Entities {
    let t0 = Timestamp::from_second(1_767_225_600).expect("2026-01-01 is in range");
    let mut e = Entities {
        sites: vec![Site {
            id: SiteId(1),
            name: "HQ".into(),
            time_zone: "America/New_York".into(),
            lockdown: false,
        }],
        ..Entities::default()
    };
    for d in 1..=doors {
        e.doors.push(Door {
            id: DoorId(d),
            site: SiteId(1),
            name: format!("door {d}"),
            mechanism: Mechanism::PkiCak,
            allow_low_assurance: false,
            passback: if d == 1 { Passback::In } else { Passback::None },
            mode: DoorMode::Normal,
            unlock_schedule: None,
            first_card_unlock: false,
            max_staleness_s: None,
            stale_policy: Default::default(),
        });
    }
    let window = |w: &str| w.parse().expect("constant window");
    e.schedules.push(Schedule {
        id: ScheduleId(1),
        name: "always".into(),
        windows: vec![window("daily 00:00-24:00")],
        holiday_windows: vec!["00:00-24:00".parse().expect("constant range")],
    });
    e.schedules.push(Schedule {
        id: ScheduleId(2),
        name: "weekdays 07-19".into(),
        windows: vec![window("mon-fri 07:00-19:00")],
        holiday_windows: vec![],
    });
    let expires = Timestamp::from_second(1_924_992_000).expect("2031-01-01 is in range");
    for i in 0..credentials {
        let id = i as i64 + 1;
        e.cardholders.push(Cardholder {
            id: CardholderId(id),
            name: format!("person {i}"),
            status: CardholderStatus::Active,
            valid_from: None,
            valid_until: None,
        });
        e.credentials.push(Credential {
            id: CredentialId(id),
            cardholder: CardholderId(id),
            card_uuid: Some(card_uuid(i)),
            fasc_n: None,
            cert_sha256: Some(cert_sha256(i)),
            spki_sha256: Some(digest(i, 0x5b)),
            expires_at: Some(expires),
            enrolled_at: t0,
            enrolled_by: "synthetic".into(),
            state: CredentialState::Active,
        });
    }
    for g in 0..10i64 {
        e.groups.push(AccessGroup {
            id: GroupId(g + 1),
            name: format!("group {g}"),
            schedule: ScheduleId(1 + g % 2),
            doors: (1..=doors).map(DoorId).collect(),
            cardholders: (0..credentials as i64)
                .filter(|c| c % 10 == g)
                .map(|c| CardholderId(c + 1))
                .collect(),
        });
    }
    for y in 2026..2031 {
        e.holidays.push(Holiday {
            id: HolidayId(y as i64),
            site: None,
            date: jiff::civil::date(y, 12, 25),
            name: "Christmas Day".into(),
        });
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::AccessSnapshot;

    #[test]
    fn the_synthetic_site_builds_and_finds_its_credentials() {
        let s = AccessSnapshot::build(site(100, 8)).unwrap();
        assert_eq!(s.credentials().len(), 100);
        assert_eq!(s.doors().len(), 8);
        let c = s.credential_by_card_uuid(&card_uuid(42)).unwrap();
        assert_eq!(c.id, CredentialId(43));
        assert_eq!(c.cert_sha256, Some(cert_sha256(42)));
    }
}
