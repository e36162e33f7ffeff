//! The stale-data policies, as a table: the decision is given the age of
//! the site's revocation data and access changes, and each door applies
//! its maximum and its policy.

use access::jiff::Timestamp;
use access::*;

fn t(s: &str) -> Timestamp {
    s.parse().unwrap()
}

/// The instant every row decides at.
fn now() -> Timestamp {
    t("2026-11-26T12:00:00Z")
}

fn door(id: i64, name: &str, policy: StalePolicy, max: Option<u64>) -> Door {
    Door {
        id: DoorId(id),
        site: SiteId(1),
        name: name.into(),
        mechanism: Mechanism::PkiCak,
        allow_low_assurance: false,
        passback: Passback::None,
        mode: DoorMode::Normal,
        unlock_schedule: None,
        first_card_unlock: false,
        max_staleness_s: max,
        stale_policy: policy,
    }
}

fn credential(id: i64, holder: i64, enrolled: &str) -> Credential {
    Credential {
        id: CredentialId(id),
        cardholder: CardholderId(holder),
        card_uuid: Some(CardUuid([id as u8; 16])),
        fasc_n: None,
        cert_sha256: None,
        spki_sha256: None,
        expires_at: None,
        enrolled_at: t(enrolled),
        enrolled_by: "admin".into(),
        state: CredentialState::Active,
    }
}

/// Doors: 1 Front (`decide`, the site's maximum), 2 Vault (`refuse`, 1 h
/// of its own), 3 Annex (`recent-only`, the site's maximum), 4 Lobby
/// (`refuse`, no maximum of its own).
/// Ada holds credential 1 (January) and credential 2 (June, her newest);
/// Bob holds credential 3 only; Cy's credential 4 is revoked.
fn snapshot() -> AccessSnapshot {
    let holder = |id: i64, name: &str| Cardholder {
        id: CardholderId(id),
        name: name.into(),
        status: CardholderStatus::Active,
        valid_from: None,
        valid_until: None,
    };
    let mut revoked = credential(4, 3, "2026-02-01T00:00:00Z");
    revoked.state = CredentialState::Revoked {
        reason: "key compromise".into(),
        at: None,
    };
    AccessSnapshot::build(Entities {
        sites: vec![Site {
            id: SiteId(1),
            name: "Branch".into(),
            time_zone: "UTC".into(),
            lockdown: false,
        }],
        doors: vec![
            door(1, "Front", StalePolicy::Decide, None),
            door(2, "Vault", StalePolicy::Refuse, Some(3_600)),
            door(3, "Annex", StalePolicy::RecentOnly, None),
            door(4, "Lobby", StalePolicy::Refuse, None),
        ],
        readers: vec![],
        cardholders: vec![holder(1, "Ada"), holder(2, "Bob"), holder(3, "Cy")],
        credentials: vec![
            // Listed newest first: the order does not decide which is newest.
            credential(2, 1, "2026-06-01T00:00:00Z"),
            credential(1, 1, "2026-01-01T00:00:00Z"),
            credential(3, 2, "2026-03-01T00:00:00Z"),
            revoked,
        ],
        groups: vec![AccessGroup {
            id: GroupId(1),
            name: "all".into(),
            schedule: ScheduleId(1),
            doors: vec![DoorId(1), DoorId(2), DoorId(3), DoorId(4)],
            cardholders: vec![CardholderId(1), CardholderId(2), CardholderId(3)],
        }],
        schedules: vec![Schedule {
            id: ScheduleId(1),
            name: "always".into(),
            windows: vec!["daily 00:00-24:00".parse().unwrap()],
            holiday_windows: Default::default(),
        }],
        holidays: vec![],
    })
    .unwrap()
}

fn request(door: i64, credential: u8) -> Request {
    Request {
        door: DoorId(door),
        identity: Identity {
            card_uuid: Some(CardUuid([credential; 16])),
            ..Identity::default()
        },
        mechanism: Mechanism::PkiCak,
        assurance: Assurance::Some,
    }
}

/// Seconds before [`now`].
fn ago(s: i64) -> AsOf {
    AsOf::At {
        at: now()
            .checked_sub(access::jiff::SignedDuration::from_secs(s))
            .unwrap(),
    }
}

const DAY: u64 = 86_400;

#[test]
fn each_policy_on_fresh_and_stale_data() {
    let s = snapshot();
    let fresh = Freshness {
        revocation: ago(600),
        changes: AsOf::NotApplicable,
    };
    let old_crl = Freshness {
        revocation: ago(2 * DAY as i64),
        changes: AsOf::NotApplicable,
    };
    let two_hours = Freshness {
        revocation: ago(7_200),
        changes: AsOf::NotApplicable,
    };
    let no_central = Freshness {
        revocation: ago(600),
        changes: AsOf::Never,
    };
    let feed_behind = Freshness {
        revocation: ago(600),
        changes: ago(3 * DAY as i64),
    };
    let site_max = Some(DAY);
    // (door, credential, freshness, the site's default maximum, code, stale)
    type Row = (i64, u8, Freshness, Option<u64>, &'static str, bool);
    #[rustfmt::skip]
    let rows: &[Row] = &[
        // Fresh data: every policy grants, superseded or not.
        (1, 1, fresh, site_max, "granted", false),
        (2, 3, fresh, site_max, "granted", false),
        (3, 1, fresh, site_max, "granted", false),
        (3, 2, fresh, site_max, "granted", false),
        // decide: stale, still granted (and marked stale).
        (1, 1, old_crl, site_max, "granted", true),
        (1, 3, feed_behind, site_max, "granted", true),
        // refuse: the door's own maximum (1 h) beats the site's (1 d).
        (2, 3, two_hours, site_max, "stale-data", true),
        (2, 3, old_crl, site_max, "stale-data", true),
        (2, 3, no_central, site_max, "stale-data", true),
        // recent-only: the newest credential passes, the superseded one not.
        (3, 2, old_crl, site_max, "granted", true),
        (3, 3, old_crl, site_max, "granted", true),
        (3, 1, old_crl, site_max, "stale-superseded", true),
        (3, 1, feed_behind, site_max, "stale-superseded", true),
        (3, 1, two_hours, site_max, "granted", false),
        // No maximum at all (door or site): never stale.
        (4, 3, old_crl, None, "granted", false),
        (4, 3, no_central, None, "granted", false),
        (4, 3, old_crl, site_max, "stale-data", true),
        // Not applicable data is never stale, however small the maximum.
        (4, 3, Freshness::NOT_APPLICABLE, Some(0), "granted", false),
        // What the site knows to be revoked stays refused, stale or not.
        (1, 4, old_crl, site_max, "credential-revoked", false),
        (3, 4, old_crl, site_max, "credential-revoked", false),
    ];
    for (i, &(door, cred, freshness, default, code, stale)) in rows.iter().enumerate() {
        let offline = Offline {
            freshness,
            default_max_staleness_s: default,
        };
        let d = s.decide_offline(&request(door, cred), &PassbackState::new(), now(), &offline);
        assert_eq!(d.code(), code, "row {i}: {:?}", d.refusal());
        assert_eq!(d.stale.is_some(), stale, "row {i}: {:?}", d.stale);
    }
}

#[test]
fn the_refusals_say_which_data_is_how_old() {
    let s = snapshot();
    let offline = Offline {
        freshness: Freshness {
            revocation: ago(7_200),
            changes: ago(90_000),
        },
        default_max_staleness_s: Some(DAY),
    };
    let d = s.decide_offline(&request(2, 3), &PassbackState::new(), now(), &offline);
    assert_eq!(
        d.refusal().unwrap().to_string(),
        "stale data: door `Vault` refuses while the revocation data is 2 h old and the access changes from the central are 1 d 1 h old (at most 1 h allowed)"
    );
    let d = s.decide_offline(&request(3, 1), &PassbackState::new(), now(), &offline);
    assert_eq!(
        d.refusal().unwrap().to_string(),
        "stale data: door `Annex` admits only the newest credential of each cardholder while the access changes from the central are 1 d 1 h old (at most 1 d allowed); credential 2 replaced this one, whose revocation may not have reached the site"
    );
    assert_eq!(d.credential, Some(CredentialId(1)));
    assert_eq!(d.cardholder, Some(CardholderId(1)));
    let j = serde_json::to_value(d.refusal().unwrap()).unwrap();
    assert_eq!(j["code"], "stale-superseded");
    assert!(Refusal::CODES.contains(&"stale-data"));
    assert!(Refusal::CODES.contains(&"stale-superseded"));
}

#[test]
fn decide_is_decide_offline_with_nothing_stale() {
    let s = snapshot();
    for door in 1..=4 {
        for cred in 1..=4 {
            let r = request(door, cred);
            let a = s.decide(&r, &PassbackState::new(), now());
            let b = s.decide_offline(&r, &PassbackState::new(), now(), &Offline::NONE);
            assert_eq!(a, b);
            assert_eq!(a.stale, None);
        }
    }
    assert_eq!(s.superseded_by(CredentialId(1)), Some(CredentialId(2)));
    assert_eq!(s.superseded_by(CredentialId(2)), None);
    assert_eq!(s.superseded_by(CredentialId(3)), None);
}
