//! The mechanisms end to end over the in-process transport: a test PKI,
//! personalised software cards, and every refusal a door must make.

mod common;

use common::{granted, refused};

use auth::{Authenticator, FixedPin, Mechanism, PathTaken, Settings};
use card::{Card, CardImage};
use host::{Channel, InProcess, Traffic, Transport, TransportError};
use piv::{DataObject, KeyRef};
use pki::revocation_set::RevocationSet;
use pki_issue::{CardCredentials, CardOptions, KeyAlgorithm, TestPki, TestPkiOptions};
use std::sync::OnceLock;

struct Fixture {
    pki: TestPki,
    p256: CardCredentials,
    rsa: CardCredentials,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let pki = TestPki::generate(TestPkiOptions::default()).expect("test PKI");
        let p256 = pki
            .issue_card(&CardOptions {
                algorithm: KeyAlgorithm::P256,
                ..CardOptions::default()
            })
            .expect("P-256 card");
        let rsa = pki
            .issue_card(&CardOptions {
                algorithm: KeyAlgorithm::Rsa2048,
                ..CardOptions::default()
            })
            .expect("RSA card");
        Fixture { pki, p256, rsa }
    })
}

fn transport(image: CardImage) -> InProcess {
    InProcess::new(Card::new(image))
}

fn authenticator() -> Authenticator {
    common::authenticator(&fixture().pki)
}

fn image(creds: &CardCredentials) -> CardImage {
    common::image(creds, 42)
}

#[test]
fn pki_cak_grants_rsa_and_p256_cards_and_reports_stages() {
    let f = fixture();
    for creds in [&f.p256, &f.rsa] {
        let authn = authenticator();
        let t = authn.authenticate(&mut transport(image(creds)), Mechanism::PkiCak, None, None);
        granted(&t);
        assert_eq!(t.path, PathTaken::Full);
        let names: Vec<_> = t.stages.iter().map(|s| s.name.as_str()).collect();
        for want in ["select", "read", "challenge", "validate", "verify"] {
            assert!(names.contains(&want), "stage {want} missing: {names:?}");
        }
        assert!(
            !names.contains(&"decide"),
            "the access decision is the service's stage"
        );
        assert_eq!(t.card.uuid, Some(piv::chuid::CardUuid(creds.uuid)));
        assert_eq!(t.card.fascn.as_ref(), Some(&creds.fascn));
        // A full read moves the CHUID and the certificate.
        let tot = t.total();
        assert!(
            tot.bytes_in > 700,
            "full read moved only {} bytes",
            tot.bytes_in
        );
    }
}

#[test]
fn repeat_p256_tap_takes_the_fast_path_with_few_apdus() {
    let f = fixture();
    let authn = authenticator();
    let first = authn.authenticate(
        &mut transport(image(&f.p256)),
        Mechanism::PkiCak,
        None,
        None,
    );
    granted(&first);
    let again = authn.authenticate(
        &mut transport(image(&f.p256)),
        Mechanism::PkiCak,
        None,
        None,
    );
    granted(&again);
    assert_eq!(again.path, PathTaken::Fast);
    let tot = again.total();
    assert!(tot.apdus <= 3, "fast path used {} APDUs", tot.apdus);
    assert!(
        tot.bytes_in + tot.bytes_out <= 400,
        "fast path moved {} bytes",
        tot.bytes_in + tot.bytes_out
    );
    assert_eq!(again.card.uuid, first.card.uuid);
}

#[test]
fn a_card_whose_key_is_not_cached_never_takes_the_fast_path() {
    let f = fixture();
    let authn = authenticator();
    granted(&authn.authenticate(
        &mut transport(image(&f.p256)),
        Mechanism::PkiCak,
        None,
        None,
    ));
    // Another P-256 card from the same issuer: full path, validated on its own.
    let other = f
        .pki
        .issue_card(&CardOptions {
            algorithm: KeyAlgorithm::P256,
            ..CardOptions::default()
        })
        .unwrap();
    let t = authn.authenticate(&mut transport(image(&other)), Mechanism::PkiCak, None, None);
    granted(&t);
    assert_eq!(t.path, PathTaken::Full);
    // A card that holds a cached card's certificate and CHUID but a key that
    // was never validated: the fast path misses, the full path checks the
    // signature against the certificate and refuses.
    let stranger = f
        .pki
        .issue_card(&CardOptions {
            algorithm: KeyAlgorithm::P256,
            ..CardOptions::default()
        })
        .unwrap();
    let mut clone = image(&stranger);
    clone
        .put_certificate(KeyRef::CardAuth, &f.p256.slot(0x9E).unwrap().certificate)
        .unwrap();
    clone.put_object(DataObject::Chuid, f.p256.chuid.clone());
    let t = authn.authenticate(&mut transport(clone), Mechanism::PkiCak, None, None);
    assert!(
        refused(&t).contains("does not hold the certificate's private key"),
        "{t:?}"
    );
    assert_eq!(t.path, PathTaken::Full);
}

/// A transport that answers every GENERAL AUTHENTICATE with a response
/// recorded earlier: a replayed card answer.
struct Replay {
    inner: InProcess,
    recorded: Option<Vec<u8>>,
    record: bool,
}

impl Channel for Replay {
    fn transmit(&mut self, apdu: &[u8]) -> Result<Vec<u8>, TransportError> {
        let is_ga = apdu.len() > 1 && apdu[1] == 0x87;
        if is_ga && !self.record {
            if let Some(r) = &self.recorded {
                let _ = self.inner.transmit(apdu)?;
                return Ok(r.clone());
            }
        }
        let r = self.inner.transmit(apdu)?;
        if is_ga && self.record {
            self.recorded = Some(r.clone());
        }
        Ok(r)
    }
    fn extended_length(&self) -> bool {
        true
    }
    fn traffic(&self) -> Traffic {
        self.inner.traffic()
    }
}

impl Transport for Replay {
    fn transaction(
        &mut self,
        f: &mut dyn FnMut(&mut dyn Channel) -> Result<(), TransportError>,
    ) -> Result<(), TransportError> {
        f(self)
    }
    fn reconnect(&mut self, reset: bool) -> Result<(), TransportError> {
        self.inner.reconnect(reset)
    }
    fn atr(&self) -> &[u8] {
        self.inner.atr()
    }
    fn reader(&self) -> &str {
        "replay"
    }
}

#[test]
fn a_replayed_signature_is_refused_on_both_paths() {
    let f = fixture();
    for creds in [&f.p256, &f.rsa] {
        let authn = authenticator();
        let mut t = Replay {
            inner: transport(image(creds)),
            recorded: None,
            record: true,
        };
        granted(&authn.authenticate(&mut t, Mechanism::PkiCak, None, None));
        t.record = false;
        let again = authn.authenticate(&mut t, Mechanism::PkiCak, None, None);
        assert!(
            refused(&again).contains("signature does not verify"),
            "{again:?}"
        );
    }
}

#[test]
fn transactions_read_back_from_json_equal_what_was_written() {
    let f = fixture();
    let authn = authenticator();
    let granted_tx = authn.authenticate(
        &mut transport(image(&f.p256)),
        Mechanism::PkiCak,
        None,
        None,
    );
    granted(&granted_tx);
    let mut img = image(&f.p256);
    img.put_object(DataObject::Chuid, f.rsa.chuid.clone());
    let refused_tx =
        authenticator().authenticate(&mut transport(img), Mechanism::PkiCak, None, None);
    let code = common::refusal_code(&refused_tx);
    for t in [granted_tx, refused_tx] {
        let json = serde_json::to_value(&t).unwrap();
        let back: auth::Transaction = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(back, t);
        assert_eq!(serde_json::to_value(&back).unwrap(), json);
        if let Some(r) = t.outcome.refusal() {
            assert_eq!(json["outcome"]["result"], "refused");
            assert_eq!(json["outcome"]["code"], code);
            assert_eq!(json["outcome"]["reason"], r.to_string());
        } else {
            assert_eq!(json["outcome"]["result"], "granted");
            assert!(json["card"]["uuid"]
                .as_str()
                .unwrap()
                .starts_with("urn:uuid:"));
            assert!(json["card"]["expires"].as_str().unwrap().ends_with('Z'));
        }
    }
}

#[test]
fn revoked_certificate_is_refused_after_the_crl_refresh() {
    let mut pki = TestPki::generate(TestPkiOptions::default()).unwrap();
    let creds = pki.issue_card(&CardOptions::default()).unwrap();
    let authn = common::authenticator(&pki);
    granted(&authn.authenticate(&mut transport(image(&creds)), Mechanism::PkiCak, None, None));
    pki.revoke(&creds.slot(0x9E).unwrap().certificate, None)
        .unwrap();
    authn.set_crls(pki.crl_set().unwrap());
    let t = authn.authenticate(&mut transport(image(&creds)), Mechanism::PkiCak, None, None);
    assert!(refused(&t).contains("revoked"), "{t:?}");
    assert_eq!(common::refusal_code(&t), "certificate-revoked");
}

#[test]
fn untrusted_issuer_and_missing_crls_are_refused() {
    let f = fixture();
    let other = TestPki::generate(TestPkiOptions::default()).unwrap();
    let authn = common::authenticator(&other);
    let t = authn.authenticate(
        &mut transport(image(&f.p256)),
        Mechanism::PkiCak,
        None,
        None,
    );
    // Both test PKIs use the same CA names: the reason names the issuer
    // whose key no trusted certificate holds.
    let r = refused(&t);
    assert!(
        r.contains("no path to a trust anchor") || r.contains("none of the"),
        "{r}"
    );
    // Right anchors, no CRLs: fails closed.
    let authn = Authenticator::new(
        f.pki.trust_store(),
        RevocationSet::empty(),
        Settings::default(),
    );
    let t = authn.authenticate(
        &mut transport(image(&f.p256)),
        Mechanism::PkiCak,
        None,
        None,
    );
    assert!(refused(&t).contains("revocation"), "{t:?}");
}

#[test]
fn expired_certificate_is_refused() {
    let f = fixture();
    // Ten years on, every certificate of the test PKI has expired (CRLs
    // are given a grace period so expiry is what fails).
    let settings = Settings {
        at: Some(pki::time::Time(
            pki::time::Time::now().0 + 10 * 366 * 86_400,
        )),
        revocation: pki::validate::RevocationPolicy {
            grace: std::time::Duration::from_secs(20 * 366 * 86_400),
            ..Default::default()
        },
        ..Settings::default()
    };
    let authn = Authenticator::new(f.pki.trust_store(), f.pki.crl_set().unwrap(), settings);
    let t = authn.authenticate(
        &mut transport(image(&f.p256)),
        Mechanism::PkiCak,
        None,
        None,
    );
    assert!(refused(&t).contains("expired"), "{t:?}");
}

#[test]
fn wrong_profile_certificate_in_the_card_auth_slot_is_refused() {
    let f = fixture();
    // The PIV authentication certificate (no card-auth policy or EKU) and
    // its key in slot 9E.
    let mut img = image(&f.p256);
    let auth9a = f.p256.slot(0x9A).unwrap();
    img.import_key(KeyRef::CardAuth, &auth9a.private_key_pkcs8)
        .unwrap();
    img.put_certificate(KeyRef::CardAuth, &auth9a.certificate)
        .unwrap();
    let t = authenticator().authenticate(&mut transport(img), Mechanism::PkiCak, None, None);
    let r = refused(&t);
    assert!(
        r.contains("policy") || r.contains("extended key usage"),
        "{r}"
    );
}

#[test]
fn chuid_and_certificate_of_different_cards_are_refused() {
    let f = fixture();
    let mut img = image(&f.p256);
    img.put_object(DataObject::Chuid, f.rsa.chuid.clone());
    let t = authenticator().authenticate(&mut transport(img), Mechanism::PkiCak, None, None);
    let r = refused(&t);
    assert!(r.contains("UUID") || r.contains("FASC-N"), "{r}");
    assert!(
        common::refusal_code(&t).starts_with("binding-"),
        "{}",
        common::refusal_code(&t)
    );
}

#[test]
fn pki_auth_needs_the_right_pin_and_reports_tries_left() {
    let f = fixture();
    let authn = authenticator();
    let mut t = transport(image(&f.rsa));
    let ok = authn.authenticate(
        &mut t,
        Mechanism::PkiAuth,
        Some(&mut FixedPin::new("123456")),
        None,
    );
    granted(&ok);
    let bad = authn.authenticate(
        &mut t,
        Mechanism::PkiAuth,
        Some(&mut FixedPin::new("999999")),
        None,
    );
    assert!(refused(&bad).contains("wrong PIN"), "{bad:?}");
    assert_eq!(bad.pin_retries, Some(2));
    assert_eq!(common::refusal_code(&bad), "wrong-pin");
    assert_eq!(
        bad.outcome.refusal(),
        Some(&auth::Refusal::WrongPin { retries: 2 })
    );
    for _ in 0..2 {
        authn.authenticate(
            &mut t,
            Mechanism::PkiAuth,
            Some(&mut FixedPin::new("999999")),
            None,
        );
    }
    let blocked = authn.authenticate(
        &mut t,
        Mechanism::PkiAuth,
        Some(&mut FixedPin::new("123456")),
        None,
    );
    assert!(refused(&blocked).contains("blocked"), "{blocked:?}");
    assert_eq!(blocked.pin_retries, Some(0));
    assert_eq!(common::refusal_code(&blocked), "pin-blocked");
    let none = authn.authenticate(&mut t, Mechanism::PkiAuth, None, None);
    assert!(refused(&none).contains("PIN"), "{none:?}");
    assert_eq!(common::refusal_code(&none), "pin-unavailable");
}

#[test]
fn chuid_mechanism_checks_the_issuer_signature() {
    let f = fixture();
    let authn = authenticator();
    let t = authn.authenticate(&mut transport(image(&f.p256)), Mechanism::Chuid, None, None);
    granted(&t);
    assert_eq!(t.assurance, auth::Assurance::Low);
    assert!(t.assurance.describe().contains("clonable"));
    // One FASC-N byte changed: the signature no longer covers the content.
    let mut chuid = piv::chuid::Chuid::decode(&f.p256.chuid).unwrap();
    chuid.fascn[3] ^= 0x01;
    let mut img = image(&f.p256);
    img.put_object(DataObject::Chuid, chuid.encode());
    let t = authn.authenticate(&mut transport(img), Mechanism::Chuid, None, None);
    assert!(refused(&t).contains("altered after signing"), "{t:?}");
    assert_eq!(common::refusal_code(&t), "chuid-digest-mismatch");
}

#[test]
fn a_card_removed_mid_transaction_is_refused_cleanly() {
    let f = fixture();
    let authn = authenticator();
    let mut t = transport(image(&f.p256));
    t.remove();
    let r = authn.authenticate(&mut t, Mechanism::PkiCak, None, None);
    assert!(refused(&r).contains("removed"), "{r:?}");
}

/// A card that answers every command with the given bytes.
struct Garbage(Vec<u8>, Traffic);

impl Channel for Garbage {
    fn transmit(&mut self, apdu: &[u8]) -> Result<Vec<u8>, TransportError> {
        self.1.apdus += 1;
        self.1.bytes_out += apdu.len() as u64;
        if apdu[1] == 0xA4 {
            return Ok(vec![0x90, 0x00]);
        }
        Ok(self.0.clone())
    }
    fn extended_length(&self) -> bool {
        false
    }
    fn traffic(&self) -> Traffic {
        self.1
    }
}

impl Transport for Garbage {
    fn transaction(
        &mut self,
        f: &mut dyn FnMut(&mut dyn Channel) -> Result<(), TransportError>,
    ) -> Result<(), TransportError> {
        f(self)
    }
    fn reconnect(&mut self, _: bool) -> Result<(), TransportError> {
        Ok(())
    }
    fn atr(&self) -> &[u8] {
        &[]
    }
    fn reader(&self) -> &str {
        "garbage"
    }
}

#[test]
fn a_malicious_card_is_refused_with_a_reason_never_a_panic() {
    let answers: Vec<Vec<u8>> = vec![
        vec![],                                         // no status word
        vec![0x90],                                     // one byte
        vec![0x53, 0x82, 0xFF, 0xFF, 0x90, 0x00],       // truncated TLV
        vec![0x53, 0x03, 0x70, 0x01, 0x30, 0x90, 0x00], // certificate of one byte
        vec![0x61, 0x00],                               // endless GET RESPONSE
        vec![0x6F, 0x00],                               // unexpected status
        vec![0x7C, 0x02, 0x82, 0x00, 0x90, 0x00],       // empty signature
    ];
    for mech in [Mechanism::PkiCak, Mechanism::PkiAuth, Mechanism::Chuid] {
        for a in &answers {
            let authn = authenticator();
            let mut card = Garbage(a.clone(), Traffic::default());
            let t = authn.authenticate(&mut card, mech, Some(&mut FixedPin::new("123456")), None);
            let reason = refused(&t);
            assert!(!reason.is_empty());
            assert!(card.1.apdus < 400, "{mech:?} looped on {a:02X?}");
        }
    }
}

#[test]
fn a_door_accepts_test_policy_cards_only_when_configured_for_them() {
    use pki::fips201::oids::PolicySet;
    let test_pki = TestPki::generate(TestPkiOptions {
        policy_set: PolicySet::Test,
        ..TestPkiOptions::default()
    })
    .unwrap();
    let test_card = test_pki.issue_card(&CardOptions::default()).unwrap();
    let door = |pki: &TestPki, policy_set: PolicySet| {
        Authenticator::new(
            pki.trust_store(),
            pki.crl_set().unwrap(),
            Settings {
                policy_set,
                ..Settings::default()
            },
        )
    };
    for mechanism in [Mechanism::PkiCak, Mechanism::Chuid] {
        // The default (production) door refuses the test card...
        let t = door(&test_pki, PolicySet::Production).authenticate(
            &mut transport(image(&test_card)),
            mechanism,
            None,
            None,
        );
        assert!(refused(&t).contains("polic"), "{mechanism:?}: {t:?}");
        // ...a door configured for the test set grants it...
        let t = door(&test_pki, PolicySet::Test).authenticate(
            &mut transport(image(&test_card)),
            mechanism,
            None,
            None,
        );
        granted(&t);
        // ...and refuses production cards.
        let f = fixture();
        let t = door(&f.pki, PolicySet::Test).authenticate(
            &mut transport(image(&f.p256)),
            mechanism,
            None,
            None,
        );
        assert!(refused(&t).contains("polic"), "{mechanism:?}: {t:?}");
    }
}

/// A reader on a line of known speed: each command and answer byte holds
/// the line for 1 µs (a made-up rate that makes the arithmetic exact).
struct Line {
    inner: InProcess,
    line_bytes: u64,
}

impl Channel for Line {
    fn transmit(&mut self, apdu: &[u8]) -> Result<Vec<u8>, TransportError> {
        let r = self.inner.transmit(apdu)?;
        self.line_bytes += (apdu.len() + r.len()) as u64;
        Ok(r)
    }
    fn extended_length(&self) -> bool {
        self.inner.extended_length()
    }
    fn traffic(&self) -> Traffic {
        self.inner.traffic()
    }
}

impl Transport for Line {
    fn transaction(
        &mut self,
        f: &mut dyn FnMut(&mut dyn Channel) -> Result<(), TransportError>,
    ) -> Result<(), TransportError> {
        f(self)
    }
    fn reconnect(&mut self, reset: bool) -> Result<(), TransportError> {
        self.inner.reconnect(reset)
    }
    fn atr(&self) -> &[u8] {
        self.inner.atr()
    }
    fn reader(&self) -> &str {
        "line"
    }
    fn line_time(&self) -> Option<std::time::Duration> {
        Some(std::time::Duration::from_micros(self.line_bytes))
    }
}

#[test]
fn the_link_share_is_recorded_only_for_transports_that_know_their_line_time() {
    let f = fixture();
    let authn = authenticator();
    let t = authn.authenticate(
        &mut transport(image(&f.p256)),
        Mechanism::PkiCak,
        None,
        None,
    );
    granted(&t);
    assert_eq!(t.link_us, None);
    assert!(!serde_json::to_string(&t).unwrap().contains("link_us"));

    // Bytes moved before the tap are not the tap's.
    let mut line = Line {
        inner: transport(image(&f.p256)),
        line_bytes: 5_000,
    };
    let t = authn.authenticate(&mut line, Mechanism::PkiCak, None, None);
    granted(&t);
    let tot = t.total();
    assert_eq!(t.link_us, Some(tot.bytes_in + tot.bytes_out));
    let back: auth::Transaction =
        serde_json::from_str(&serde_json::to_string(&t).unwrap()).unwrap();
    assert_eq!(back.link_us, t.link_us);
}

/// A card that records the instruction byte of every command it is sent.
struct Watched {
    inner: InProcess,
    sent: Vec<u8>,
}

impl Channel for Watched {
    fn transmit(&mut self, apdu: &[u8]) -> Result<Vec<u8>, TransportError> {
        if apdu.len() > 1 {
            self.sent.push(apdu[1]);
        }
        self.inner.transmit(apdu)
    }
    fn extended_length(&self) -> bool {
        true
    }
    fn traffic(&self) -> Traffic {
        self.inner.traffic()
    }
}

impl Transport for Watched {
    fn transaction(
        &mut self,
        f: &mut dyn FnMut(&mut dyn Channel) -> Result<(), TransportError>,
    ) -> Result<(), TransportError> {
        f(self)
    }
    fn reconnect(&mut self, reset: bool) -> Result<(), TransportError> {
        self.inner.reconnect(reset)
    }
    fn atr(&self) -> &[u8] {
        self.inner.atr()
    }
    fn reader(&self) -> &str {
        "watched"
    }
}

const VERIFY: u8 = 0x20;

fn pki_auth_watched(img: CardImage) -> (auth::Transaction, Vec<u8>) {
    let mut t = Watched {
        inner: transport(img),
        sent: Vec::new(),
    };
    let tx = authenticator().authenticate(
        &mut t,
        Mechanism::PkiAuth,
        Some(&mut FixedPin::new("123456")),
        None,
    );
    (tx, t.sent)
}

#[test]
fn pki_auth_sends_the_pin_only_to_a_card_proven_genuine() {
    let f = fixture();
    // The genuine card: proven by its card authentication key, then the PIN.
    let (tx, sent) = pki_auth_watched(image(&f.p256));
    granted(&tx);
    assert!(sent.contains(&VERIFY));
    assert!(
        sent.iter().position(|&i| i == 0x87) < sent.iter().position(|&i| i == VERIFY),
        "a GENERAL AUTHENTICATE (9E) comes before VERIFY: {sent:02X?}"
    );

    // A counterfeit: another card's keys behind copies of the cardholder's
    // certificates and CHUID. It fails the card authentication challenge
    // and never receives the PIN.
    let stranger = f
        .pki
        .issue_card(&CardOptions {
            algorithm: KeyAlgorithm::P256,
            ..CardOptions::default()
        })
        .unwrap();
    let mut fake = image(&stranger);
    for slot in [0x9E, 0x9A] {
        let key = KeyRef::from_byte(slot).unwrap();
        fake.put_certificate(key, &f.p256.slot(slot).unwrap().certificate)
            .unwrap();
    }
    fake.put_object(DataObject::Chuid, f.p256.chuid.clone());
    let (tx, sent) = pki_auth_watched(fake);
    assert_eq!(common::refusal_code(&tx), "signature-mismatch", "{tx:?}");
    assert!(!sent.contains(&VERIFY), "the PIN was sent: {sent:02X?}");

    // A genuine card authentication key beside another card's PIV
    // authentication certificate (and key): refused before the PIN.
    let mut mixed = image(&f.p256);
    let other = f.rsa.slot(0x9A).unwrap();
    mixed
        .import_key(KeyRef::PivAuth, &other.private_key_pkcs8)
        .unwrap();
    mixed
        .put_certificate(KeyRef::PivAuth, &other.certificate)
        .unwrap();
    let (tx, sent) = pki_auth_watched(mixed);
    assert_eq!(common::refusal_code(&tx), "card-keys-disagree", "{tx:?}");
    assert!(refused(&tx).contains("the PIN was not sent"), "{tx:?}");
    assert!(!sent.contains(&VERIFY), "the PIN was sent: {sent:02X?}");
}
