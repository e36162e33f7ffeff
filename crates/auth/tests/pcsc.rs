//! The mechanisms end to end through the real PC/SC stack: pcscd with the
//! vpcd driver, a software card behind the "Virtual PCD 00 00" reader, and
//! the host's PC/SC transport. Each refusal a door must make is exercised
//! here too, including a card pulled between challenge and response, a card
//! replaying an old response, and a card that answers garbage.
//!
//! Needs root and the packages of scripts/setup.sh (pcscd, vsmartcard-vpcd).

mod common;

use common::{granted, refused};

use auth::{Authenticator, FixedPin, Mechanism, PathTaken, Settings};
use card::profile::TimingProfile;
use card::runner::Runner;
use card::{vpcd, Card, CardImage};
use host::{PcscTransport, Readers};
use piv::{DataObject, KeyRef};
use pki_issue::{CardCredentials, CardOptions, KeyAlgorithm, TestPki, TestPkiOptions};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;
use testbed::{VPCD_ADDR, VPCD_READER};

const WAIT: Duration = Duration::from_secs(20);

/// A card in the vpcd reader, served from a thread; removed on drop.
struct InReader {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    card: Option<vpcd::Background>,
}

impl InReader {
    /// A software card with a timing profile.
    fn card(image: CardImage, profile: TimingProfile) -> Self {
        let bg = vpcd::Background::spawn(Runner::new(Card::new(image), None, profile), VPCD_ADDR);
        testbed::wait_for_card(VPCD_READER, WAIT).expect("card appears in the vpcd reader");
        InReader {
            stop: Arc::new(AtomicBool::new(false)),
            thread: None,
            card: Some(bg),
        }
    }

    /// A scripted card speaking the vpcd protocol itself: `answer` gets each
    /// APDU and returns the response, or `None` to drop the connection (the
    /// card leaves the field without answering).
    fn scripted(mut answer: impl FnMut(&[u8]) -> Option<Vec<u8>> + Send + 'static) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut s = TcpStream::connect(VPCD_ADDR).expect("vpcd listens");
            s.set_read_timeout(Some(Duration::from_millis(100)))
                .unwrap();
            let atr = card::ATR.to_vec();
            while !flag.load(Ordering::SeqCst) {
                let mut len = [0u8; 2];
                match s.read_exact(&mut len) {
                    Ok(()) => {}
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ) =>
                    {
                        continue
                    }
                    Err(_) => return,
                }
                let mut msg = vec![0u8; usize::from(u16::from_be_bytes(len))];
                s.set_read_timeout(None).unwrap();
                if s.read_exact(&mut msg).is_err() {
                    return;
                }
                s.set_read_timeout(Some(Duration::from_millis(100)))
                    .unwrap();
                let reply = match msg.as_slice() {
                    [0x04] => Some(atr.clone()),
                    [_] => None,
                    apdu => match answer(apdu) {
                        Some(r) => Some(r),
                        None => return,
                    },
                };
                if let Some(r) = reply {
                    let mut framed = (r.len() as u16).to_be_bytes().to_vec();
                    framed.extend_from_slice(&r);
                    if s.write_all(&framed).is_err() {
                        return;
                    }
                }
            }
        });
        Self::started(stop, thread)
    }

    fn started(stop: Arc<AtomicBool>, thread: JoinHandle<()>) -> Self {
        testbed::wait_for_card(VPCD_READER, WAIT).expect("card appears in the vpcd reader");
        InReader {
            stop,
            thread: Some(thread),
            card: None,
        }
    }
}

impl Drop for InReader {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if let Some(bg) = self.card.take() {
            bg.stop().expect("vpcd connector");
        }
        let _ = testbed::wait_for_card_removed(VPCD_READER, WAIT);
    }
}

/// pcscd, exclusive use of the vpcd reader, and the test PKI.
struct Bed {
    pki: TestPki,
    p256: CardCredentials,
    rsa: CardCredentials,
    _pcscd: testbed::PcscdGuard,
    _lock: testbed::VpcdLock,
}

fn bed() -> Option<Bed> {
    if std::env::var_os("PIVGATE_SKIP_PCSC").is_some() {
        eprintln!("PIVGATE_SKIP_PCSC set: skipping the PC/SC end-to-end test");
        return None;
    }
    let lock = testbed::lock_vpcd();
    let pcscd = testbed::Pcscd::ensure_started().expect("pcscd starts (root, pcscd installed)");
    testbed::wait_for_reader(VPCD_READER, WAIT).expect("the vpcd reader appears");
    let pki = TestPki::generate(TestPkiOptions::default()).unwrap();
    let p256 = pki.issue_card(&CardOptions::default()).unwrap();
    let rsa = pki
        .issue_card(&CardOptions {
            algorithm: KeyAlgorithm::Rsa2048,
            ..CardOptions::default()
        })
        .unwrap();
    Some(Bed {
        pki,
        p256,
        rsa,
        _pcscd: pcscd,
        _lock: lock,
    })
}

fn image(creds: &CardCredentials) -> CardImage {
    common::image(creds, 7)
}

fn connect() -> PcscTransport {
    let readers = Readers::establish().expect("PC/SC context");
    readers
        .wait_for_card(Some(VPCD_READER), Some(WAIT))
        .expect("card present");
    readers.connect(VPCD_READER).expect("connect")
}

#[test]
fn every_mechanism_grants_a_genuine_card_through_pcscd() {
    let Some(bed) = bed() else { return };
    for creds in [&bed.p256, &bed.rsa] {
        let _card = InReader::card(image(creds), TimingProfile::Instant);
        let mut t = connect();
        let authn = common::authenticator(&bed.pki);
        let first = authn.authenticate(&mut t, Mechanism::PkiCak, None, None);
        granted(&first);
        assert_eq!(first.path, PathTaken::Full);
        let again = authn.authenticate(&mut t, Mechanism::PkiCak, None, None);
        granted(&again);
        if creds.slots[0].algorithm == KeyAlgorithm::P256 {
            assert_eq!(again.path, PathTaken::Fast);
            let tot = again.total();
            assert!(tot.apdus <= 3, "{} APDUs", tot.apdus);
            assert!(tot.bytes_in + tot.bytes_out <= 400);
        }
        let pin = authn.authenticate(
            &mut t,
            Mechanism::PkiAuth,
            Some(&mut FixedPin::new("123456")),
            None,
        );
        granted(&pin);
        granted(&authn.authenticate(&mut t, Mechanism::Chuid, None, None));
    }
}

#[test]
fn pin_failures_report_tries_left_then_block() {
    let Some(bed) = bed() else { return };
    let _card = InReader::card(image(&bed.p256), TimingProfile::Instant);
    let mut t = connect();
    let authn = common::authenticator(&bed.pki);
    let wrong = |t: &mut PcscTransport| {
        authn.authenticate(
            t,
            Mechanism::PkiAuth,
            Some(&mut FixedPin::new("000000")),
            None,
        )
    };
    let first = wrong(&mut t);
    assert!(refused(&first).contains("wrong PIN"));
    assert_eq!(first.pin_retries, Some(2));
    wrong(&mut t);
    let last = wrong(&mut t);
    assert_eq!(last.pin_retries, Some(0));
    let blocked = authn.authenticate(
        &mut t,
        Mechanism::PkiAuth,
        Some(&mut FixedPin::new("123456")),
        None,
    );
    assert!(refused(&blocked).contains("blocked"), "{blocked:?}");
}

#[test]
fn each_bad_card_is_refused_with_its_reason() {
    let Some(mut bed) = bed() else { return };
    let other_pki = TestPki::generate(TestPkiOptions::default()).unwrap();
    let stranger = other_pki.issue_card(&CardOptions::default()).unwrap();
    let later = Settings {
        at: Some(pki::time::Time(
            pki::time::Time::now().0 + 10 * 366 * 86_400,
        )),
        revocation: pki::validate::RevocationPolicy {
            grace: Duration::from_secs(20 * 366 * 86_400),
            ..Default::default()
        },
        ..Settings::default()
    };

    // Each case: the card image, the authenticator, and words the reason
    // must contain.
    let mut wrong_profile = image(&bed.p256);
    let auth9a = bed.p256.slot(0x9A).unwrap();
    wrong_profile
        .import_key(KeyRef::CardAuth, &auth9a.private_key_pkcs8)
        .unwrap();
    wrong_profile
        .put_certificate(KeyRef::CardAuth, &auth9a.certificate)
        .unwrap();
    let mut mismatched_chuid = image(&bed.p256);
    mismatched_chuid.put_object(DataObject::Chuid, bed.rsa.chuid.clone());
    let mut wrong_key = image(&bed.p256);
    wrong_key
        .import_key(
            KeyRef::CardAuth,
            &stranger.slot(0x9E).unwrap().private_key_pkcs8,
        )
        .unwrap();
    let cases: Vec<(&str, CardImage, Authenticator, &[&str])> = vec![
        (
            "untrusted CA",
            image(&stranger),
            common::authenticator(&bed.pki),
            &["no path", "none of the"],
        ),
        (
            "expired",
            image(&bed.p256),
            Authenticator::new(bed.pki.trust_store(), bed.pki.crl_set().unwrap(), later),
            &["expired"],
        ),
        (
            "wrong policy",
            wrong_profile,
            common::authenticator(&bed.pki),
            &["policy", "extended key usage"],
        ),
        (
            "CHUID of another card",
            mismatched_chuid,
            common::authenticator(&bed.pki),
            &["UUID", "FASC-N"],
        ),
        (
            "9E key does not match the certificate",
            wrong_key,
            common::authenticator(&bed.pki),
            &["does not hold the certificate's private key"],
        ),
    ];
    for (what, img, authn, words) in cases {
        let _card = InReader::card(img, TimingProfile::Instant);
        let mut t = connect();
        let r = refused(&authn.authenticate(&mut t, Mechanism::PkiCak, None, None));
        assert!(
            words.iter().any(|w| r.contains(w)),
            "{what}: reason {r:?} names none of {words:?}"
        );
    }

    // Revoked: granted, then refused once the CRLs are refreshed.
    let authn = common::authenticator(&bed.pki);
    let _card = InReader::card(image(&bed.p256), TimingProfile::Instant);
    let mut t = connect();
    granted(&authn.authenticate(&mut t, Mechanism::PkiCak, None, None));
    bed.pki
        .revoke(&bed.p256.slot(0x9E).unwrap().certificate, None)
        .unwrap();
    authn.set_crls(bed.pki.crl_set().unwrap());
    let r = refused(&authn.authenticate(&mut t, Mechanism::PkiCak, None, None));
    assert!(r.contains("revoked"), "{r}");
}

#[test]
fn a_card_pulled_between_challenge_and_response_is_refused() {
    let Some(bed) = bed() else { return };
    let mut card = Card::new(image(&bed.rsa));
    card.power_on();
    let _card = InReader::scripted(move |apdu| {
        if apdu.get(1) == Some(&0x87) {
            None // leaves the field instead of answering the challenge
        } else {
            Some(card.process(apdu))
        }
    });
    let mut t = connect();
    let tx = common::authenticator(&bed.pki).authenticate(&mut t, Mechanism::PkiCak, None, None);
    let r = refused(&tx);
    assert!(r.contains("removed") || r.contains("reader error"), "{r}");
    assert!(tx.stage(auth::StageName::Read).is_some(), "{tx:?}");
}

#[test]
fn a_card_answering_garbage_is_refused_never_hangs() {
    let Some(bed) = bed() else { return };
    let garbage: Vec<Vec<u8>> = vec![
        vec![0x53, 0x82, 0xFF, 0xFF, 0x90, 0x00], // truncated TLV
        vec![0x6F, 0x00],                         // unexpected status
        vec![0x61, 0x10],                         // GET RESPONSE forever
        vec![0x53, 0x04, 0x70, 0x02, 0x30, 0x00, 0x90, 0x00], // empty certificate
    ];
    for g in garbage {
        let reply = g.clone();
        let _card = InReader::scripted(move |apdu| {
            if apdu.get(1) == Some(&0xA4) {
                Some(vec![0x90, 0x00])
            } else {
                Some(reply.clone())
            }
        });
        let mut t = connect();
        for m in [Mechanism::PkiCak, Mechanism::Chuid] {
            let tx = common::authenticator(&bed.pki).authenticate(&mut t, m, None, None);
            let r = refused(&tx);
            assert!(!r.is_empty(), "{g:02X?}");
        }
    }
}

#[test]
fn a_replayed_card_response_is_refused() {
    let Some(bed) = bed() else { return };
    for creds in [&bed.p256, &bed.rsa] {
        // A card that answers every GENERAL AUTHENTICATE after the first
        // with the response it recorded then (a replay of an old answer).
        let mut card = Card::new(image(creds));
        card.power_on();
        let mut recorded: Option<Vec<u8>> = None;
        let _card = InReader::scripted(move |apdu| {
            let answer = card.process(apdu);
            if apdu.get(1) != Some(&0x87) {
                return Some(answer);
            }
            Some(recorded.get_or_insert(answer).clone())
        });
        let mut t = connect();
        let authn = common::authenticator(&bed.pki);
        granted(&authn.authenticate(&mut t, Mechanism::PkiCak, None, None));
        let replay = authn.authenticate(&mut t, Mechanism::PkiCak, None, None);
        let r = refused(&replay);
        assert!(r.contains("signature does not verify"), "{r}");
    }
}
