//! Enrollment with in-process software cards: only a card that passes the
//! full validation is registered, under the identifiers it proved, and a
//! registered card is then granted at the door its group opens.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use access::jiff::Timestamp;
use access::ReaderId;
use card::Card;
use host::InProcess;
use pki::trust::Trust;
use pki_issue::{CardCredentials, CardOptions, TestPki, TestPkiOptions};
use server::config::{init_template, Config};
use server::door::{Controller, SimulatedOutput};
use server::enroll::{enrollment_authenticator, register, validate_card, EnrollError};
use store::{EventKind, EventLog, EventQuery, Store};

fn transport(c: &CardCredentials) -> InProcess {
    InProcess::new(Card::new(c.card_image(Some(11)).unwrap()))
}

fn trust(pki: &TestPki) -> Trust {
    Trust {
        store: pki.trust_store(),
        crls: pki.crl_set().unwrap(),
        revocation: Default::default(),
        fetch: None,
        policy_set: Default::default(),
        anchor_mode: Default::default(),
        allow_expired_anchors: false,
        profile: Default::default(),
        discovery: None,
        ocsp: None,
    }
}

#[test]
fn only_validated_cards_are_enrolled_and_then_granted() {
    let mut pki = TestPki::generate(TestPkiOptions::default()).unwrap();
    let card = |name: &str| {
        pki.issue_card(&CardOptions {
            cardholder: name.into(),
            ..CardOptions::default()
        })
        .unwrap()
    };
    let (alice, alice2, bob, mallory) = (card("Alice"), card("Alice"), card("Bob"), card("M"));
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store: Store = rt.block_on(Store::open_data_dir(dir.path())).unwrap();
    let seed = Config::parse(&init_template("front", "UTC"), Path::new("t"))
        .unwrap()
        .seed
        .unwrap()
        .entities()
        .unwrap();
    rt.block_on(store.import_entities(&seed)).unwrap();
    let now = Timestamp::now();

    let authn = enrollment_authenticator(trust(&pki));
    let t = validate_card(&authn, &mut transport(&alice)).unwrap();
    assert_eq!(t.path, auth::PathTaken::Full);
    let e = rt
        .block_on(register(
            &store,
            &t,
            "Alice",
            Some("staff"),
            "enroll-test",
            now,
        ))
        .unwrap();
    assert!(e.new_cardholder);
    assert_eq!(e.credential.card_uuid, Some(access::CardUuid(alice.uuid)));
    assert!(e.credential.cert_sha256.is_some() && e.credential.expires_at.is_some());
    assert_eq!(e.group.as_ref().unwrap().cardholders, [e.cardholder.id]);

    // Again: refused, the cardholder named.
    let t = validate_card(&authn, &mut transport(&alice)).unwrap();
    let err = rt
        .block_on(register(&store, &t, "Someone", None, "enroll-test", now))
        .unwrap_err();
    assert!(matches!(err, EnrollError::AlreadyEnrolled { .. }), "{err}");
    assert!(err.to_string().contains("`Alice`"), "{err}");

    // A second card for the same person joins the existing cardholder.
    let t = validate_card(&authn, &mut transport(&alice2)).unwrap();
    let e2 = rt
        .block_on(register(&store, &t, "Alice", None, "enroll-test", now))
        .unwrap();
    assert!(!e2.new_cardholder);
    assert_eq!(e2.cardholder.id, e.cardholder.id);

    // An unknown group creates nothing.
    let t = validate_card(&authn, &mut transport(&bob)).unwrap();
    let err = rt
        .block_on(register(
            &store,
            &t,
            "Bob",
            Some("night"),
            "enroll-test",
            now,
        ))
        .unwrap_err();
    assert!(err.to_string().contains("`staff`"), "{err}");
    assert_eq!(
        rt.block_on(store.list::<access::Cardholder>())
            .unwrap()
            .len(),
        1
    );

    // A revoked card does not validate.
    let cak = mallory.slot(0x9E).unwrap().certificate.clone();
    pki.revoke(&cak, None).unwrap();
    let authn = enrollment_authenticator(trust(&pki));
    let err = validate_card(&authn, &mut transport(&mallory)).unwrap_err();
    match &err {
        EnrollError::Refused { code, reason, .. } => {
            assert!(code.contains("revoked"), "{code}");
            assert!(reason.contains("revoked"), "{reason}");
        }
        other => panic!("{other}"),
    }

    // The enrollment is in the log, naming who did it.
    let page = rt
        .block_on(store.query_events(&EventQuery {
            kind: Some(EventKind::Admin),
            ..EventQuery::default()
        }))
        .unwrap();
    let codes: Vec<_> = page
        .events
        .iter()
        .map(|e| e.event.code.clone().unwrap())
        .collect();
    assert_eq!(
        codes,
        [
            "cardholder.create",
            "credential.create",
            "group.update",
            "credential.create"
        ]
    );
    assert!(page
        .events
        .iter()
        .all(|e| e.event.actor.as_deref() == Some("enroll-test")));

    // At the door: the enrolled card is granted, the other is not.
    let snapshot = rt.block_on(store.load_snapshot()).unwrap();
    let log = {
        let _g = rt.enter();
        EventLog::start(store.clone(), 0).0
    };
    let output = Arc::new(SimulatedOutput::new());
    let door_authn = Arc::new(auth::Authenticator::new(
        pki.trust_store(),
        pki.crl_set().unwrap(),
        auth::Settings::default(),
    ));
    let c = Controller::new(
        door_authn,
        snapshot,
        log,
        output.clone(),
        rt.handle().clone(),
        Duration::from_secs(1),
    );
    let front = ReaderId(1);
    let r = c.tap(&mut transport(&alice), front, None, None).unwrap();
    assert!(r.granted(), "{:?}", r.reason());
    let r = c.tap(&mut transport(&bob), front, None, None).unwrap();
    assert_eq!(r.code(), "not-enrolled");
    assert_eq!(output.releases().len(), 1);
}
