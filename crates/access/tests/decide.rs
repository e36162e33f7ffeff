//! The decision, rule by rule, against a small site in America/New_York.

use access::jiff;
use access::jiff::civil::date;
use access::jiff::Timestamp;
use access::*;
use proptest::prelude::*;

const NY: &str = "America/New_York";

fn uuid(n: u8) -> CardUuid {
    CardUuid([n; 16])
}

fn cert(n: u8) -> Sha256 {
    Sha256([n; 32])
}

/// Local wall-clock time at the site.
fn ny(y: i16, m: i8, d: i8, h: i8, mi: i8) -> Timestamp {
    date(y, m, d).at(h, mi, 0, 0).in_tz(NY).unwrap().timestamp()
}

fn utc(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn door(id: i64, name: &str, mechanism: Mechanism) -> Door {
    Door {
        id: DoorId(id),
        site: SiteId(1),
        name: name.into(),
        mechanism,
        allow_low_assurance: false,
        passback: Passback::None,
        mode: DoorMode::Normal,
        unlock_schedule: None,
        first_card_unlock: false,
        max_staleness_s: None,
        stale_policy: Default::default(),
    }
}

fn holder(id: i64, name: &str) -> Cardholder {
    Cardholder {
        id: CardholderId(id),
        name: name.into(),
        status: CardholderStatus::Active,
        valid_from: None,
        valid_until: None,
    }
}

fn credential(id: i64, holder: i64, n: u8) -> Credential {
    Credential {
        id: CredentialId(id),
        cardholder: CardholderId(holder),
        card_uuid: Some(uuid(n)),
        fasc_n: Some(FascN([n; 25])),
        cert_sha256: Some(cert(n)),
        spki_sha256: None,
        expires_at: Some(utc("2030-01-01T00:00:00Z")),
        enrolled_at: utc("2026-01-01T00:00:00Z"),
        enrolled_by: "admin".into(),
        state: CredentialState::Active,
    }
}

fn schedule(id: i64, name: &str, windows: &[&str], holiday: &[&str]) -> Schedule {
    Schedule {
        id: ScheduleId(id),
        name: name.into(),
        windows: windows.iter().map(|w| w.parse().unwrap()).collect(),
        holiday_windows: holiday.iter().map(|w| w.parse().unwrap()).collect(),
    }
}

fn group(id: i64, schedule: i64, doors: &[i64], holders: &[i64]) -> AccessGroup {
    AccessGroup {
        id: GroupId(id),
        name: format!("group {id}"),
        schedule: ScheduleId(schedule),
        doors: doors.iter().map(|&d| DoorId(d)).collect(),
        cardholders: holders.iter().map(|&c| CardholderId(c)).collect(),
    }
}

/// Doors: 1 Front (pki-cak), 2 Lab (pki-auth), 3 Entry (in), 4 Exit (out),
/// 5 Legacy (chuid allowed), 6 Vault (locked), 7 Night door, 8 DST door,
/// 9 Fold door.
/// Cardholders: 1 Ada (credential 1, card 1), 2 Bob suspended (2), 3 Cy not
/// yet valid (3), 4 Dee expired (4), 5 Eve with a revoked (5) and a
/// suspended (6) credential and an expired one (7).
fn entities() -> Entities {
    let mut doors = vec![
        door(1, "Front", Mechanism::PkiCak),
        door(2, "Lab", Mechanism::PkiAuth),
        door(3, "Entry", Mechanism::PkiCak),
        door(4, "Exit", Mechanism::PkiCak),
        door(5, "Legacy", Mechanism::Chuid),
        door(6, "Vault", Mechanism::PkiCak),
        door(7, "Night", Mechanism::PkiCak),
        door(8, "DST", Mechanism::PkiCak),
        door(9, "Fold", Mechanism::PkiCak),
    ];
    doors[2].passback = Passback::In;
    doors[3].passback = Passback::Out;
    doors[4].allow_low_assurance = true;
    doors[5].mode = DoorMode::Locked;

    let mut holders = vec![
        holder(1, "Ada"),
        holder(2, "Bob"),
        holder(3, "Cy"),
        holder(4, "Dee"),
        holder(5, "Eve"),
    ];
    holders[1].status = CardholderStatus::Suspended {
        reason: "badge audit".into(),
    };
    holders[2].valid_from = Some(utc("2027-01-01T00:00:00Z"));
    holders[3].valid_until = Some(utc("2026-01-01T00:00:00Z"));

    let mut creds: Vec<Credential> = (1..=5).map(|i| credential(i, i, i as u8)).collect();
    creds[4].state = CredentialState::Revoked {
        reason: "key compromise".into(),
        at: Some(utc("2026-06-01T12:00:00Z")),
    };
    let mut c6 = credential(6, 5, 6);
    c6.state = CredentialState::Suspended {
        reason: "reported lost".into(),
    };
    let mut c7 = credential(7, 5, 7);
    c7.expires_at = Some(utc("2026-03-01T00:00:00Z"));
    creds.push(c6);
    creds.push(c7);

    Entities {
        sites: vec![
            Site {
                id: SiteId(1),
                name: "HQ".into(),
                time_zone: NY.into(),
                lockdown: false,
            },
            Site {
                id: SiteId(2),
                name: "Annex".into(),
                time_zone: "Europe/Paris".into(),
                lockdown: false,
            },
        ],
        doors,
        readers: vec![Reader {
            id: ReaderId(1),
            door: DoorId(1),
            name: "front reader".into(),
            connection: "Virtual PCD 00 00".into(),
        }],
        cardholders: holders,
        credentials: creds,
        groups: vec![
            group(1, 1, &[1, 2, 5, 6], &[1, 2, 3, 4, 5]),
            group(2, 2, &[3, 4], &[1]),
            group(3, 3, &[7], &[1]),
            group(4, 4, &[8], &[1]),
            group(5, 5, &[9], &[1]),
        ],
        schedules: vec![
            schedule(1, "weekdays 07-19", &["mon-fri 07:00-19:00"], &[]),
            schedule(2, "always", &["daily 00:00-24:00"], &["00:00-24:00"]),
            schedule(3, "night shift", &["mon-fri 22:00-06:00"], &[]),
            schedule(4, "two to three", &["daily 02:00-03:00"], &[]),
            schedule(5, "one to two", &["daily 01:00-02:00"], &[]),
        ],
        holidays: vec![
            Holiday {
                id: HolidayId(1),
                site: None,
                date: date(2026, 12, 25),
                name: "Christmas Day".into(),
            },
            Holiday {
                id: HolidayId(2),
                site: Some(SiteId(2)),
                date: date(2026, 12, 1),
                name: "Annex closure".into(),
            },
        ],
    }
}

fn snap() -> AccessSnapshot {
    AccessSnapshot::build(entities()).unwrap()
}

fn req(door: i64, card: u8, mechanism: Mechanism) -> Request {
    Request {
        door: DoorId(door),
        identity: Identity {
            card_uuid: Some(uuid(card)),
            fasc_n: None,
            cert_sha256: Some(cert(card)),
            spki_sha256: None,
        },
        mechanism,
        assurance: match mechanism {
            Mechanism::Chuid => Assurance::Low,
            Mechanism::PkiCak => Assurance::Some,
            Mechanism::PkiAuth => Assurance::VeryHigh,
        },
    }
}

/// Monday 2026-11-23, 10:00 in New York.
fn monday_10() -> Timestamp {
    ny(2026, 11, 23, 10, 0)
}

fn code_at(s: &AccessSnapshot, r: &Request, at: Timestamp) -> &'static str {
    s.decide(r, &PassbackState::new(), at).code()
}

#[test]
fn granted_names_group_and_schedule() {
    let s = snap();
    let d = s.decide(
        &req(1, 1, Mechanism::PkiCak),
        &PassbackState::new(),
        monday_10(),
    );
    assert!(d.is_granted(), "{d:?}");
    assert_eq!(
        d.verdict,
        Verdict::Granted {
            group: GroupId(1),
            schedule: ScheduleId(1)
        }
    );
    assert_eq!(d.credential, Some(CredentialId(1)));
    assert_eq!(d.cardholder, Some(CardholderId(1)));
    assert_eq!(d.site, Some(SiteId(1)));
    assert_eq!(d.passback, None);
    let j = serde_json::to_value(&d).unwrap();
    assert_eq!(j["result"], "granted");
    assert_eq!(j["schedule"], 1);
}

#[test]
fn unknown_door_and_identity_rules() {
    let s = snap();
    let at = monday_10();
    assert_eq!(
        code_at(&s, &req(99, 1, Mechanism::PkiCak), at),
        "unknown-door"
    );

    let d = s.decide(&req(1, 42, Mechanism::PkiCak), &PassbackState::new(), at);
    assert_eq!(d.code(), "not-enrolled");
    assert_eq!(d.credential, None);
    assert_eq!(
        d.refusal().unwrap().to_string(),
        format!(
            "not enrolled: no credential has certificate SHA-256 {}",
            cert(42)
        )
    );

    let mut none = req(1, 1, Mechanism::PkiCak);
    none.identity = Identity::default();
    assert_eq!(code_at(&s, &none, at), "no-identifier");

    // Matched by card UUID alone (CHUID at a door that allows it).
    let mut by_uuid = req(5, 1, Mechanism::Chuid);
    by_uuid.identity.cert_sha256 = None;
    assert_eq!(code_at(&s, &by_uuid, at), "granted");

    // Matched by FASC-N alone.
    let mut by_fascn = req(5, 1, Mechanism::Chuid);
    by_fascn.identity = Identity {
        fasc_n: Some(FascN([1; 25])),
        ..Identity::default()
    };
    assert_eq!(code_at(&s, &by_fascn, at), "granted");

    // Certificate of card 1, UUID of card 2: refused, naming the UUID.
    let mut mixed = req(1, 1, Mechanism::PkiCak);
    mixed.identity.card_uuid = Some(uuid(2));
    let d = s.decide(&mixed, &PassbackState::new(), at);
    assert_eq!(d.code(), "identity-mismatch");
    assert!(
        d.refusal().unwrap().to_string().contains("card UUID"),
        "{d:?}"
    );

    // An unknown UUID beside a known certificate disagrees with enrolment.
    let mut unknown_uuid = req(1, 1, Mechanism::PkiCak);
    unknown_uuid.identity.card_uuid = Some(uuid(200));
    assert_eq!(code_at(&s, &unknown_uuid, at), "identity-mismatch");
}

#[test]
fn credential_state_rules() {
    let s = snap();
    let at = monday_10();
    let d = s.decide(&req(1, 5, Mechanism::PkiCak), &PassbackState::new(), at);
    assert_eq!(d.code(), "credential-revoked");
    assert_eq!(
        d.refusal().unwrap().to_string(),
        "credential revoked at 2026-06-01T12:00:00Z: key compromise"
    );
    assert_eq!(d.cardholder, Some(CardholderId(5)));
    assert_eq!(
        code_at(&s, &req(1, 6, Mechanism::PkiCak), at),
        "credential-suspended"
    );
    assert_eq!(
        code_at(&s, &req(1, 7, Mechanism::PkiCak), at),
        "credential-expired"
    );
    // Expiry is exclusive of the instant.
    let expiry = utc("2030-01-01T00:00:00Z");
    let r = req(1, 1, Mechanism::PkiCak);
    assert_eq!(
        code_at(
            &s,
            &r,
            expiry
                .checked_sub(jiff::SignedDuration::from_secs(1))
                .unwrap()
        ),
        "granted" // 2029-12-31 18:59:59 in New York, a Monday
    );
    assert_eq!(code_at(&s, &r, expiry), "credential-expired");
}

#[test]
fn cardholder_rules() {
    let s = snap();
    let at = monday_10();
    let d = s.decide(&req(1, 2, Mechanism::PkiCak), &PassbackState::new(), at);
    assert_eq!(d.code(), "cardholder-suspended");
    assert_eq!(
        d.refusal().unwrap().to_string(),
        "cardholder `Bob` suspended: badge audit"
    );
    assert_eq!(
        code_at(&s, &req(1, 3, Mechanism::PkiCak), at),
        "cardholder-not-yet-valid"
    );
    assert_eq!(
        code_at(&s, &req(1, 4, Mechanism::PkiCak), at),
        "cardholder-expired"
    );
    // Validity: from inclusive, until exclusive.
    let mut e = entities();
    e.cardholders[0].valid_from = Some(monday_10());
    e.cardholders[0].valid_until = Some(ny(2026, 11, 23, 11, 0));
    let s = AccessSnapshot::build(e).unwrap();
    let r = req(1, 1, Mechanism::PkiCak);
    assert_eq!(code_at(&s, &r, monday_10()), "granted");
    assert_eq!(
        code_at(&s, &r, ny(2026, 11, 23, 9, 59)),
        "cardholder-not-yet-valid"
    );
    assert_eq!(
        code_at(&s, &r, ny(2026, 11, 23, 11, 0)),
        "cardholder-expired"
    );
}

#[test]
fn a_locked_down_site_grants_no_tap_and_names_the_site() {
    let at = monday_10();
    assert_eq!(
        code_at(&snap(), &req(1, 1, Mechanism::PkiCak), at),
        "granted"
    );
    let mut e = entities();
    e.sites[0].lockdown = true;
    let s = AccessSnapshot::build(e).unwrap();
    let d = s.decide(&req(1, 1, Mechanism::PkiCak), &PassbackState::new(), at);
    assert_eq!(d.code(), "site-lockdown");
    assert_eq!(d.refusal().unwrap().to_string(), "site `HQ` is locked down");
    assert!(Refusal::CODES.contains(&"site-lockdown"));
    // Identity still comes first: a revoked card is reported as revoked.
    assert_eq!(
        code_at(&s, &req(1, 5, Mechanism::PkiCak), at),
        "credential-revoked"
    );
    // A door's unlock schedule must exist.
    let mut e = entities();
    e.doors[0].unlock_schedule = Some(ScheduleId(99));
    let err = AccessSnapshot::build(e).err().unwrap();
    assert!(
        err.to_string()
            .contains("unlock_schedule refers to schedule 99"),
        "{err}"
    );
}

#[test]
fn door_and_mechanism_rules() {
    let s = snap();
    let at = monday_10();
    let d = s.decide(&req(6, 1, Mechanism::PkiAuth), &PassbackState::new(), at);
    assert_eq!(d.code(), "door-locked");
    assert_eq!(d.refusal().unwrap().to_string(), "door `Vault` is locked");
    // A revoked card at a locked door is reported as revoked.
    assert_eq!(
        code_at(&s, &req(6, 5, Mechanism::PkiCak), at),
        "credential-revoked"
    );

    let d = s.decide(&req(2, 1, Mechanism::PkiCak), &PassbackState::new(), at);
    assert_eq!(d.code(), "mechanism-too-weak");
    assert_eq!(
        d.refusal().unwrap().to_string(),
        "mechanism too weak: door `Lab` requires pki-auth, the card used pki-cak"
    );
    assert_eq!(code_at(&s, &req(2, 1, Mechanism::PkiAuth), at), "granted");
    assert_eq!(code_at(&s, &req(1, 1, Mechanism::PkiAuth), at), "granted");
    assert_eq!(
        code_at(&s, &req(1, 1, Mechanism::Chuid), at),
        "mechanism-too-weak"
    );
    // Low assurance reported by the authenticator, even with a strong mechanism.
    let mut low = req(1, 1, Mechanism::PkiCak);
    low.assurance = Assurance::Low;
    assert_eq!(code_at(&s, &low, at), "low-assurance");
    assert_eq!(code_at(&s, &req(5, 1, Mechanism::Chuid), at), "granted");
    // Unlocked mode still decides.
    let mut e = entities();
    e.doors[0].mode = DoorMode::Unlocked;
    let s = AccessSnapshot::build(e).unwrap();
    assert_eq!(code_at(&s, &req(1, 1, Mechanism::PkiCak), at), "granted");
    assert_eq!(
        code_at(&s, &req(1, 42, Mechanism::PkiCak), at),
        "not-enrolled"
    );
}

#[test]
fn group_and_schedule_rules() {
    let s = snap();
    // Bob's groups do not include door 3; make him active to reach the rule.
    let mut e = entities();
    e.cardholders[1].status = CardholderStatus::Active;
    let s2 = AccessSnapshot::build(e).unwrap();
    let d = s2.decide(
        &req(3, 2, Mechanism::PkiCak),
        &PassbackState::new(),
        monday_10(),
    );
    assert_eq!(d.code(), "no-group-for-door");
    assert_eq!(
        d.refusal().unwrap().to_string(),
        "no access group grants door `Entry`"
    );

    let r = req(1, 1, Mechanism::PkiCak);
    let d = s.decide(&r, &PassbackState::new(), ny(2026, 11, 23, 19, 0));
    assert_eq!(d.code(), "outside-schedule");
    assert_eq!(
        d.refusal().unwrap().to_string(),
        "outside schedule `weekdays 07-19`"
    );
    let j = serde_json::to_value(&d).unwrap();
    assert_eq!(j["result"], "refused");
    assert_eq!(j["code"], "outside-schedule");
    assert_eq!(j["reason"], "outside schedule `weekdays 07-19`");
    assert_eq!(code_at(&s, &r, ny(2026, 11, 23, 7, 0)), "granted");
    assert_eq!(code_at(&s, &r, ny(2026, 11, 23, 6, 59)), "outside-schedule");
    // Saturday.
    assert_eq!(code_at(&s, &r, ny(2026, 11, 28, 10, 0)), "outside-schedule");
    // Two groups grant the door: either schedule opens it.
    let mut e = entities();
    e.groups.push(group(9, 2, &[1], &[1]));
    let s3 = AccessSnapshot::build(e).unwrap();
    let d = s3.decide(&r, &PassbackState::new(), ny(2026, 11, 28, 10, 0));
    assert_eq!(
        d.verdict,
        Verdict::Granted {
            group: GroupId(9),
            schedule: ScheduleId(2)
        }
    );
}

#[test]
fn schedule_uses_site_time_not_utc() {
    let s = snap();
    let r = req(1, 1, Mechanism::PkiCak);
    // 2026-11-23 13:00Z is 08:00 in New York (EST, UTC-5): open.
    assert_eq!(code_at(&s, &r, utc("2026-11-23T13:00:00Z")), "granted");
    // 2026-11-24 01:00Z is Monday 20:00 in New York: closed, though Tuesday in UTC.
    assert_eq!(
        code_at(&s, &r, utc("2026-11-24T01:00:00Z")),
        "outside-schedule"
    );
}

#[test]
fn window_crossing_midnight() {
    let s = snap();
    let r = req(7, 1, Mechanism::PkiCak);
    // mon-fri 22:00-06:00: Friday night into Saturday morning is open.
    assert_eq!(code_at(&s, &r, ny(2026, 11, 27, 22, 0)), "granted");
    assert_eq!(code_at(&s, &r, ny(2026, 11, 28, 5, 59)), "granted");
    assert_eq!(code_at(&s, &r, ny(2026, 11, 28, 6, 0)), "outside-schedule");
    // Saturday night is not.
    assert_eq!(code_at(&s, &r, ny(2026, 11, 28, 23, 0)), "outside-schedule");
    // Monday 01:00 belongs to Sunday night's window: closed.
    assert_eq!(code_at(&s, &r, ny(2026, 11, 23, 1, 0)), "outside-schedule");
    // Tuesday 01:00 belongs to Monday night's: open.
    assert_eq!(code_at(&s, &r, ny(2026, 11, 24, 1, 0)), "granted");
}

#[test]
fn dst_spring_forward_follows_the_wall_clock() {
    let s = snap();
    // 2026-03-08: 02:00 EST jumps to 03:00 EDT (07:00Z). The 02:00-03:00
    // window does not happen that day.
    let r = req(8, 1, Mechanism::PkiCak);
    assert_eq!(
        code_at(&s, &r, utc("2026-03-08T06:59:59Z")),
        "outside-schedule"
    ); // 01:59:59 EST
    assert_eq!(
        code_at(&s, &r, utc("2026-03-08T07:00:00Z")),
        "outside-schedule"
    ); // 03:00 EDT
    assert_eq!(
        code_at(&s, &r, utc("2026-03-08T07:30:00Z")),
        "outside-schedule"
    ); // 03:30 EDT
       // The day before (EST) and after (EDT) it opens at 02:00 local.
    assert_eq!(code_at(&s, &r, utc("2026-03-07T07:00:00Z")), "granted"); // 02:00 EST
    assert_eq!(code_at(&s, &r, utc("2026-03-09T06:00:00Z")), "granted"); // 02:00 EDT
    assert_eq!(
        code_at(&s, &r, utc("2026-03-09T05:59:59Z")),
        "outside-schedule"
    );
    // Weekday 07:00 local: 12:00Z on Friday (EST), 11:00Z on Monday (EDT).
    let w = req(1, 1, Mechanism::PkiCak);
    assert_eq!(
        code_at(&s, &w, utc("2026-03-06T11:30:00Z")),
        "outside-schedule"
    );
    assert_eq!(code_at(&s, &w, utc("2026-03-06T12:00:00Z")), "granted");
    assert_eq!(
        code_at(&s, &w, utc("2026-03-09T10:59:59Z")),
        "outside-schedule"
    );
    assert_eq!(code_at(&s, &w, utc("2026-03-09T11:00:00Z")), "granted");
}

#[test]
fn dst_fall_back_opens_both_passes() {
    let s = snap();
    // 2026-11-01: 02:00 EDT falls back to 01:00 EST (06:00Z). 01:00-02:00
    // local happens twice, and the window covers both.
    let r = req(9, 1, Mechanism::PkiCak);
    assert_eq!(
        code_at(&s, &r, utc("2026-11-01T04:59:59Z")),
        "outside-schedule"
    ); // 00:59:59 EDT
    assert_eq!(code_at(&s, &r, utc("2026-11-01T05:00:00Z")), "granted"); // 01:00 EDT
    assert_eq!(code_at(&s, &r, utc("2026-11-01T05:30:00Z")), "granted"); // 01:30 EDT
    assert_eq!(code_at(&s, &r, utc("2026-11-01T06:30:00Z")), "granted"); // 01:30 EST
    assert_eq!(
        code_at(&s, &r, utc("2026-11-01T07:00:00Z")),
        "outside-schedule"
    ); // 02:00 EST
}

#[test]
fn holidays() {
    let s = snap();
    let r = req(1, 1, Mechanism::PkiCak);
    // Christmas 2026 is a Friday; every site observes it.
    let d = s.decide(&r, &PassbackState::new(), ny(2026, 12, 25, 10, 0));
    assert_eq!(d.code(), "holiday");
    assert_eq!(
        d.refusal().unwrap().to_string(),
        "holiday `Christmas Day` (2026-12-25) closes schedule `weekdays 07-19`"
    );
    // Outside the regular windows it is plain outside-schedule.
    assert_eq!(code_at(&s, &r, ny(2026, 12, 25, 20, 0)), "outside-schedule");
    // A schedule with holiday windows stays open.
    assert_eq!(
        code_at(&s, &req(3, 1, Mechanism::PkiCak), ny(2026, 12, 25, 10, 0)),
        "granted"
    );
    // The Annex's closure does not apply at HQ.
    assert_eq!(code_at(&s, &r, ny(2026, 12, 1, 10, 0)), "granted");
}

#[test]
fn anti_passback_sequence() {
    let s = snap();
    let at = monday_10();
    let mut state = PassbackState::new();
    let entry = req(3, 1, Mechanism::PkiCak);
    let exit = req(4, 1, Mechanism::PkiCak);

    // Never seen: exit is allowed and records the cardholder outside.
    let d = s.decide_and_record(&exit, &mut state, at);
    assert!(d.is_granted());
    assert_eq!(
        state.get(SiteId(1), CardholderId(1)),
        Some(Presence::Outside)
    );
    let d = s.decide_and_record(&exit, &mut state, at);
    assert_eq!(d.code(), "anti-passback");
    assert_eq!(
        d.refusal().unwrap().to_string(),
        "anti-passback: not recorded inside site `HQ`; enter through an entry door first"
    );

    let d = s.decide(&entry, &state, at);
    assert_eq!(
        d.passback,
        Some(PassbackUpdate {
            site: SiteId(1),
            cardholder: CardholderId(1),
            presence: Presence::Inside
        })
    );
    // decide alone leaves the state to the caller.
    assert_eq!(
        state.get(SiteId(1), CardholderId(1)),
        Some(Presence::Outside)
    );
    state.apply(d.passback.as_ref().unwrap());
    let d = s.decide_and_record(&entry, &mut state, at);
    assert_eq!(d.code(), "anti-passback");
    assert!(d
        .refusal()
        .unwrap()
        .to_string()
        .contains("already recorded inside"));
    // A refused tap does not change the state.
    assert_eq!(
        state.get(SiteId(1), CardholderId(1)),
        Some(Presence::Inside)
    );
    assert!(s.decide_and_record(&exit, &mut state, at).is_granted());
    assert!(s.decide_and_record(&entry, &mut state, at).is_granted());
    // Doors without anti-passback do not touch it.
    let d = s.decide_and_record(&req(1, 1, Mechanism::PkiCak), &mut state, at);
    assert!(d.is_granted() && d.passback.is_none());
    assert_eq!(state.len(), 1);
    state.forget(SiteId(1), CardholderId(1));
    assert!(state.is_empty());
}

#[test]
fn build_errors_name_the_problem() {
    let mut e = entities();
    e.sites[0].time_zone = "Mars/Olympus_Mons".into();
    let err = AccessSnapshot::build(e).unwrap_err();
    assert!(matches!(err, BuildError::UnknownTimeZone { .. }));
    assert!(err.to_string().contains("Mars/Olympus_Mons"), "{err}");

    let mut e = entities();
    e.credentials[1].card_uuid = Some(uuid(1));
    let err = AccessSnapshot::build(e).unwrap_err();
    assert_eq!(
        err,
        BuildError::SharedIdentifier {
            identifier: "card UUID",
            value: uuid(1).to_string(),
            first: CredentialId(1),
            second: CredentialId(2)
        }
    );

    let mut e = entities();
    e.groups[0].doors.push(DoorId(77));
    let err = AccessSnapshot::build(e).unwrap_err().to_string();
    assert_eq!(
        err,
        "access group 1: doors refers to door 77, which does not exist"
    );

    let mut e = entities();
    e.doors[4].allow_low_assurance = false;
    assert!(matches!(
        AccessSnapshot::build(e).unwrap_err(),
        BuildError::ChuidNotAllowed { .. }
    ));

    let mut e = entities();
    e.doors.push(door(1, "again", Mechanism::PkiCak));
    assert_eq!(
        AccessSnapshot::build(e).unwrap_err(),
        BuildError::DuplicateId {
            kind: "door",
            id: 1
        }
    );
}

#[test]
fn lookups() {
    let s = snap();
    assert_eq!(
        s.credential_by_card_uuid(&uuid(3)).unwrap().id,
        CredentialId(3)
    );
    assert_eq!(s.credential_by_cert(&cert(4)).unwrap().id, CredentialId(4));
    assert_eq!(
        s.credential_by_fasc_n(&FascN([2; 25])).unwrap().id,
        CredentialId(2)
    );
    assert!(s.credential_by_spki(&cert(1)).is_none());
    assert_eq!(
        s.reader_by_connection("Virtual PCD 00 00").unwrap().door,
        DoorId(1)
    );
    assert_eq!(s.site_time_zone(SiteId(1)).unwrap().iana_name(), Some(NY));
    assert_eq!(s.doors().len(), 9);
    assert!(
        AccessSnapshot::empty()
            .decide(
                &req(1, 1, Mechanism::PkiCak),
                &PassbackState::new(),
                monday_10()
            )
            .code()
            == "unknown-door"
    );
}

fn arb_mechanism() -> impl Strategy<Value = Mechanism> {
    prop_oneof![
        Just(Mechanism::PkiCak),
        Just(Mechanism::PkiAuth),
        Just(Mechanism::Chuid)
    ]
}

fn arb_assurance() -> impl Strategy<Value = Assurance> {
    prop_oneof![
        Just(Assurance::Low),
        Just(Assurance::Some),
        Just(Assurance::VeryHigh)
    ]
}

fn arb_request() -> impl Strategy<Value = Request> {
    (
        0i64..12,
        proptest::option::of(0u8..10),
        proptest::option::of(0u8..10),
        proptest::option::of(0u8..10),
        proptest::option::of(0u8..10),
        arb_mechanism(),
        arb_assurance(),
    )
        .prop_map(|(door, u, f, c, k, mechanism, assurance)| Request {
            door: DoorId(door),
            identity: Identity {
                card_uuid: u.map(uuid),
                fasc_n: f.map(|n| FascN([n; 25])),
                cert_sha256: c.map(cert),
                spki_sha256: k.map(cert),
            },
            mechanism,
            assurance,
        })
}

fn arb_time() -> impl Strategy<Value = Timestamp> {
    prop_oneof![
        // Anywhere jiff can represent.
        (Timestamp::MIN.as_second()..=Timestamp::MAX.as_second())
            .prop_map(|s| Timestamp::from_second(s).unwrap()),
        // Around now, to the second.
        (1_700_000_000i64..1_900_000_000).prop_map(|s| Timestamp::from_second(s).unwrap()),
    ]
}

proptest! {
    #[test]
    fn decide_never_panics_and_explains(
        r in arb_request(),
        t in arb_time(),
        inside in proptest::option::of(any::<bool>()),
    ) {
        let s = snap();
        let mut state = PassbackState::new();
        if let Some(inside) = inside {
            state.apply(&PassbackUpdate {
                site: SiteId(1),
                cardholder: CardholderId(1),
                presence: if inside { Presence::Inside } else { Presence::Outside },
            });
        }
        let d = s.decide(&r, &state, t);
        match d.refusal() {
            Some(refusal) => {
                prop_assert!(Refusal::CODES.contains(&refusal.code()));
                prop_assert!(!refusal.to_string().is_empty());
                prop_assert!(d.passback.is_none());
            }
            None => {
                // Granted only to an active, enrolled credential.
                let c = s.credential(d.credential.unwrap()).unwrap();
                prop_assert_eq!(&c.state, &CredentialState::Active);
                prop_assert!(r.mechanism.satisfies(s.door(r.door).unwrap().mechanism));
            }
        }
        // Deterministic.
        prop_assert_eq!(s.decide(&r, &state, t), d);
    }

    #[test]
    fn windows_round_trip(days in 1u8..128, start in 0u32..1440, len in 1u32..1440) {
        let end = (start + len) % 1440;
        let end = if end == 0 { 1440 } else { end };
        let text = format!(
            "{} {:02}:{:02}-{:02}:{:02}",
            Days::from_bits_for_test(days), start / 60, start % 60, end / 60, end % 60
        );
        let w: Window = text.parse().unwrap();
        prop_assert_eq!(w.to_string().parse::<Window>().unwrap(), w);
    }
}

trait DaysForTest {
    fn from_bits_for_test(bits: u8) -> String;
}

impl DaysForTest for Days {
    fn from_bits_for_test(bits: u8) -> String {
        const N: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];
        (0..7)
            .filter(|i| bits & (1 << i) != 0)
            .map(|i| N[i])
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// Entities with ids drawn from small ranges, so references dangle and
/// identifiers collide often.
fn arb_entities() -> impl Strategy<Value = Entities> {
    let ids = || proptest::collection::vec(0i64..6, 0..6);
    (
        ids(),
        proptest::collection::vec((0i64..6, 0i64..3, arb_mechanism(), any::<bool>()), 0..6),
        ids(),
        proptest::collection::vec((0i64..6, 0i64..6, 0u8..4), 0..8),
        proptest::collection::vec((0i64..4, 0i64..4, ids(), ids()), 0..4),
        proptest::collection::vec((0i64..4, 0usize..4), 0..4),
        proptest::collection::vec((0i64..4, proptest::option::of(0i64..3), 0i16..3), 0..4),
    )
        .prop_map(
            |(sites, doors, holders, creds, groups, schedules, holidays)| {
                const WINDOWS: [&str; 4] = [
                    "mon-fri 07:00-19:00",
                    "daily 22:00-06:00",
                    "sat,sun 00:00-24:00",
                    "wed 12:00-12:01",
                ];
                Entities {
                    sites: sites
                        .into_iter()
                        .map(|id| Site {
                            id: SiteId(id % 3),
                            name: format!("site {id}"),
                            time_zone: if id == 5 { "Nowhere/City" } else { NY }.into(),
                            lockdown: false,
                        })
                        .collect(),
                    doors: doors
                        .into_iter()
                        .map(|(id, site, mechanism, low)| {
                            let mut d = door(id, "d", mechanism);
                            d.site = SiteId(site);
                            d.allow_low_assurance = low;
                            d.passback =
                                [Passback::None, Passback::In, Passback::Out][id as usize % 3];
                            d
                        })
                        .collect(),
                    readers: vec![],
                    cardholders: holders.into_iter().map(|id| holder(id, "h")).collect(),
                    credentials: creds
                        .into_iter()
                        .map(|(id, h, n)| credential(id, h, n))
                        .collect(),
                    groups: groups
                        .into_iter()
                        .map(|(id, s, doors, holders)| group(id, s, &doors, &holders))
                        .collect(),
                    schedules: schedules
                        .into_iter()
                        .map(|(id, w)| schedule(id, "s", &[WINDOWS[w]], &["09:00-10:00"]))
                        .collect(),
                    holidays: holidays
                        .into_iter()
                        .map(|(id, site, d)| Holiday {
                            id: HolidayId(id),
                            site: site.map(SiteId),
                            date: date(2026, 11, 23 + d as i8),
                            name: "h".into(),
                        })
                        .collect(),
                }
            },
        )
}

proptest! {
    #[test]
    fn build_never_panics_and_a_built_snapshot_decides(
        e in arb_entities(),
        reqs in proptest::collection::vec(arb_request(), 1..8),
        t in arb_time(),
    ) {
        match AccessSnapshot::build(e) {
            Err(err) => prop_assert!(!err.to_string().is_empty()),
            Ok(s) => {
                let mut state = PassbackState::new();
                for r in &reqs {
                    let d = s.decide_and_record(r, &mut state, t);
                    prop_assert!(d.is_granted() || d.refusal().is_some());
                }
            }
        }
    }
}
