//! Measuring cards closed-loop through the real PC/SC stack (pcscd + vpcd):
//! the software card under a known timing must measure back to that
//! timing. Figures are compared after taking off the link: each card is
//! also measured under the `instant` profile, and what that measurement
//! shows (pcscd, vpcd, this process) is subtracted. A busy machine only
//! ever adds time (a late wake-up, a preempted pcscd), so each side's
//! fastest run is compared: the report's `min_us`. Tolerance per
//! operation: 5 % or 2 ms, the larger.
//!
//! Needs root and the packages of scripts/setup.sh (pcscd, vsmartcard-vpcd,
//! opensc).

mod common;

use auth::card_timing::{measure_card, MeasureError, MeasureOptions, Quiet};
use card::replay::{seed_report, Replay};
use card::runner::Runner;
use card::{vpcd, Card, CardImage, TimingProfile};
use host::client::Piv;
use host::{PcscTransport, Readers};
use piv::timing::{OpKind, Operation, TimingReport};
use piv::{DataObject, KeyRef};
use pki_issue::{CardCredentials, CardOptions, KeyAlgorithm, TestPki, TestPkiOptions};
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::time::Duration;
use testbed::{VPCD_ADDR, VPCD_READER};

const WAIT: Duration = Duration::from_secs(20);
const PKCS11: &str = "/usr/lib/x86_64-linux-gnu/opensc-pkcs11.so";

/// pcscd, exclusive use of the vpcd reader, and an RSA-2048 and a P-256 card.
struct Bed {
    p256: CardCredentials,
    rsa: CardCredentials,
    _pcscd: testbed::PcscdGuard,
    _lock: testbed::VpcdLock,
}

fn bed() -> Option<Bed> {
    if std::env::var_os("PIVGATE_SKIP_PCSC").is_some() {
        eprintln!("PIVGATE_SKIP_PCSC set: skipping the PC/SC measurement test");
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
        p256,
        rsa,
        _pcscd: pcscd,
        _lock: lock,
    })
}

/// A software card in the vpcd reader; removed on drop.
struct InReader(Option<vpcd::Background>);

impl InReader {
    fn new(runner: Runner) -> Self {
        let bg = vpcd::Background::spawn(runner, VPCD_ADDR);
        testbed::wait_for_card(VPCD_READER, WAIT).expect("card appears in the vpcd reader");
        InReader(Some(bg))
    }
    fn profile(image: CardImage, profile: TimingProfile) -> Self {
        Self::new(Runner::new(Card::new(image), None, profile))
    }
    fn replay(image: CardImage, replay: Replay) -> Self {
        Self::new(Runner::new(Card::new(image), None, TimingProfile::Instant).with_replay(replay))
    }
}

impl Drop for InReader {
    fn drop(&mut self) {
        if let Some(bg) = self.0.take() {
            bg.stop().expect("vpcd connector");
        }
        let _ = testbed::wait_for_card_removed(VPCD_READER, WAIT);
    }
}

fn connect() -> PcscTransport {
    let readers = Readers::establish().expect("PC/SC context");
    readers
        .wait_for_card(Some(VPCD_READER), Some(WAIT))
        .expect("card present");
    readers.connect(VPCD_READER).expect("connect")
}

fn options(runs: u32, pin: Option<&str>) -> MeasureOptions {
    MeasureOptions {
        runs,
        pin: pin.map(|p| zeroize::Zeroizing::new(p.as_bytes().to_vec())),
        ..MeasureOptions::default()
    }
}

fn measure(card: InReader, opts: &MeasureOptions) -> Result<TimingReport, MeasureError> {
    let mut t = connect();
    let r = measure_card(&mut t, opts, &mut Quiet, &AtomicBool::new(false));
    drop(t);
    drop(card);
    r
}

fn image(creds: &CardCredentials) -> CardImage {
    common::image(creds, 11)
}

/// The same operation in another report.
fn same<'a>(report: &'a TimingReport, op: &Operation) -> Option<&'a Operation> {
    report
        .operations
        .iter()
        .find(|o| o.op == op.op && o.object == op.object && o.key == op.key)
}

/// Asserts that every operation of `expected` is recovered by `measured`
/// once the link (`baseline`, the same card measured under `instant`) is
/// taken off.
fn assert_recovered(expected: &TimingReport, measured: &TimingReport, baseline: &TimingReport) {
    let mut compared = 0;
    for want in &expected.operations {
        let Some(got) = same(measured, want) else {
            continue;
        };
        // The fastest run of the instant card: the link undisturbed by
        // whatever else the machine is doing.
        let link = same(baseline, want).map_or(0, |o| o.min_us);
        let recovered = got.min_us.saturating_sub(link) as f64;
        let target = want.median_us as f64;
        let tolerance = (target * 0.05).max(2_000.0);
        assert!(
            (recovered - target).abs() <= tolerance,
            "{}: recovered {:.1} ms (measured {:.1} ms, link {:.1} ms), expected {:.1} ms ± {:.1} ms",
            want.label,
            recovered / 1e3,
            got.min_us as f64 / 1e3,
            link as f64 / 1e3,
            target / 1e3,
            tolerance / 1e3
        );
        compared += 1;
    }
    assert!(compared >= 10, "only {compared} operations compared");
}

#[test]
fn measuring_each_seed_profile_recovers_its_timings() {
    let Some(bed) = bed() else { return };
    for (creds, profile) in [
        (&bed.p256, TimingProfile::SeedP256),
        (&bed.rsa, TimingProfile::SeedRsa2048),
    ] {
        let opts = options(5, Some("123456"));
        let baseline = measure(
            InReader::profile(image(creds), TimingProfile::Instant),
            &opts,
        )
        .unwrap();
        let measured = measure(InReader::profile(image(creds), profile), &opts).unwrap();
        let expected = seed_report(profile).unwrap();
        assert_recovered(&expected, &measured, &baseline);
        // Every key and object the card holds was measured.
        for key in ["9A", "9C", "9D", "9E"] {
            let ga = measured
                .operations
                .iter()
                .find(|o| o.op == OpKind::GeneralAuthenticate && o.key.as_deref() == Some(key));
            assert!(ga.is_some(), "{profile}: no GENERAL AUTHENTICATE {key}");
        }
        assert!(measured.skipped.is_empty(), "{:?}", measured.skipped);
        assert!(measured.reference_sequence_us().is_ok());
        let chuid = measured.get_data(0x5FC102).unwrap();
        assert_eq!(chuid.samples, 5);
        assert!(chuid.apdus >= 1 && chuid.bytes_in > 50, "{chuid:?}");
        assert!(measured.card.issuers.iter().any(|i| !i.is_empty()));
        assert!(measured.card.card_identifier.is_some());
        assert!(measured.card.fascn.is_none() && measured.card.subjects.is_none());
    }
}

#[test]
fn a_replayed_report_measures_back_to_itself() {
    let Some(bed) = bed() else { return };
    let opts = options(5, Some("123456"));
    let baseline = measure(
        InReader::profile(image(&bed.p256), TimingProfile::Instant),
        &opts,
    )
    .unwrap();
    // A measured card with a slow start-up and one slow object.
    let mut report = measure(
        InReader::profile(image(&bed.p256), TimingProfile::SeedP256),
        &opts,
    )
    .unwrap();
    for op in &mut report.operations {
        match (op.op, op.object.as_deref()) {
            (OpKind::PowerUp, _) => op.median_us = 150_000,
            (OpKind::GetData, Some("5FC102")) => op.median_us = 120_000,
            _ => {}
        }
    }
    let json = serde_json::to_string_pretty(&report).unwrap();
    let replay = Replay::from_json(&json).unwrap();
    let back = measure(InReader::replay(image(&bed.p256), replay), &opts).unwrap();
    // The report's figures hold the first measurement's link, which the
    // replaying card charges as card time; the link of the second
    // measurement is taken off as usual.
    assert_recovered(&report, &back, &baseline);
    let power_up = back.find(OpKind::PowerUp).unwrap().median_us;
    assert!(
        (140_000..200_000).contains(&power_up),
        "power-up {power_up} µs"
    );
}

#[test]
fn a_wrong_pin_stops_the_run_with_the_tries_left_and_is_not_retried() {
    let Some(bed) = bed() else { return };
    let card = InReader::profile(image(&bed.p256), TimingProfile::Instant);
    let mut t = connect();
    let err = measure_card(
        &mut t,
        &options(5, Some("654321")),
        &mut Quiet,
        &AtomicBool::new(false),
    )
    .unwrap_err();
    assert!(
        matches!(err, MeasureError::WrongPin { retries: 2 }),
        "{err}"
    );
    assert!(err.to_string().contains("2 attempt(s) left"), "{err}");
    // One wrong try only, and the card was reset: nothing is verified.
    let mut piv = Piv::new(&mut t);
    piv.select().unwrap();
    assert_eq!(piv.pin_retries().unwrap(), Some(2));
    drop(t);
    drop(card);
}

#[test]
fn cards_without_pin_without_9a_and_with_mixed_algorithms_are_measured() {
    let Some(bed) = bed() else { return };

    // No PIN given: only what needs none.
    let r = measure(
        InReader::profile(image(&bed.rsa), TimingProfile::Instant),
        &options(2, None),
    )
    .unwrap();
    assert!(r.find(OpKind::Verify).is_none());
    assert!(r.general_authenticate(0x9E).is_some());
    assert!(r.find(OpKind::FastPath).is_some());
    for key in [0x9A, 0x9C, 0x9D] {
        assert!(r.general_authenticate(key).is_none());
    }
    let skipped: Vec<&str> = r.skipped.iter().map(|s| s.op.as_str()).collect();
    assert_eq!(
        skipped,
        [
            "verify",
            "general-authenticate 9A",
            "general-authenticate 9C",
            "general-authenticate 9D"
        ]
    );
    assert_eq!(r.reference_sequence_us(), Err(vec!["VERIFY PIN"]));

    // No 9A key or certificate: the reference signature falls back to 9E.
    let mut img = image(&bed.p256);
    img.keys.remove(&KeyRef::PivAuth);
    img.delete_object(DataObject::CertPivAuth);
    let r = measure(
        InReader::profile(img, TimingProfile::Instant),
        &options(2, Some("123456")),
    )
    .unwrap();
    assert!(r.general_authenticate(0x9A).is_none());
    assert!(r.get_data(0x5FC105).is_none());
    for key in [0x9C, 0x9D, 0x9E] {
        assert!(r.general_authenticate(key).is_some(), "{key:02X}");
    }
    assert!(r.skipped.is_empty(), "{:?}", r.skipped);
    assert!(r.reference_sequence_us().is_ok());

    // RSA-2048 in 9A and 9C, P-256 in 9D and 9E, under the seed timing.
    let mut img = CardImage::new_blank(Some(12));
    let pick = |creds: &CardCredentials, slot: u8| {
        let s = creds.slots.iter().find(|s| s.slot == slot).unwrap();
        (slot, s.private_key_pkcs8.clone(), s.certificate.clone())
    };
    let slots = [
        pick(&bed.rsa, 0x9A),
        pick(&bed.rsa, 0x9C),
        pick(&bed.p256, 0x9D),
        pick(&bed.p256, 0x9E),
    ];
    img.personalise(
        slots.iter().map(|(s, k, c)| (*s, &k[..], &c[..])),
        &bed.p256.chuid,
    )
    .unwrap();
    let opts = options(2, Some("123456"));
    let baseline = measure(
        InReader::profile(img.clone(), TimingProfile::Instant),
        &opts,
    )
    .unwrap();
    let r = measure(InReader::profile(img, TimingProfile::SeedP256), &opts).unwrap();
    let alg = |key| r.general_authenticate(key).and_then(|o| o.algorithm);
    assert_eq!(alg(0x9A), Some(0x07));
    assert_eq!(alg(0x9C), Some(0x07));
    assert_eq!(alg(0x9D), Some(0x11));
    assert_eq!(alg(0x9E), Some(0x11));
    // Each key at its own algorithm's seed cost.
    let card_ms = |key| {
        let got = r.general_authenticate(key).unwrap().min_us;
        let link = baseline.general_authenticate(key).unwrap().min_us;
        got.saturating_sub(link) as f64 / 1e3
    };
    for (key, want) in [(0x9A, 1192.0), (0x9E, 92.0)] {
        let got = card_ms(key);
        assert!(
            (got - want).abs() <= (want * 0.05f64).max(2.0),
            "{key:02X}: {got} ms, expected {want} ms"
        );
    }
}

/// `pkcs11-tool --list-objects` output without the object handles, which
/// differ from one session to the next.
fn objects(listing: &str) -> Vec<String> {
    listing
        .lines()
        .map(|l| l.trim_end_matches(|c: char| c.is_ascii_digit()).to_string())
        .collect()
}

fn tool(program: &str, args: &[&str]) -> testbed::ToolOutput {
    let out = testbed::run_with_timeout(Command::new(program).args(args), Duration::from_secs(60))
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(out.success(), "{program} {args:?} failed:\n{}", out.text());
    out
}

#[test]
fn opensc_sees_the_same_card_before_and_after_a_measurement() {
    let Some(bed) = bed() else { return };
    let card = InReader::profile(image(&bed.p256), TimingProfile::Instant);
    let name = tool("opensc-tool", &["--reader", VPCD_READER, "-n"]);
    assert!(name.stdout.contains("Personal Identity Verification"));
    let before = tool("pkcs11-tool", &["--module", PKCS11, "--list-objects"]);
    assert!(
        before.stdout.contains("Certificate Object"),
        "{}",
        before.text()
    );

    let mut t = connect();
    let r = measure_card(
        &mut t,
        &options(2, Some("123456")),
        &mut Quiet,
        &AtomicBool::new(false),
    )
    .unwrap();
    drop(t);
    assert!(r.find(OpKind::Verify).is_some());

    // Same objects, the PIN not left verified, and its tries all there.
    let after = tool("pkcs11-tool", &["--module", PKCS11, "--list-objects"]);
    assert_eq!(objects(&before.stdout), objects(&after.stdout));
    let status = tool(
        "opensc-tool",
        &[
            "--reader",
            VPCD_READER,
            "--send-apdu",
            "00A4040005A000000308",
            "--send-apdu",
            "0020008000",
        ],
    );
    assert!(
        status.stdout.contains("SW1=0x63, SW2=0xC3"),
        "{}",
        status.text()
    );
    tool(
        "pkcs11-tool",
        &["--module", PKCS11, "--login", "--pin", "123456", "--test"],
    );
    drop(card);
}

/// Interrupts the measurement once the operation named `at` has started.
struct InterruptAt<'a> {
    at: &'a str,
    cancel: &'a AtomicBool,
}

impl auth::card_timing::Progress for InterruptAt<'_> {
    fn operation(&mut self, label: &str, _runs: u32) {
        if label.starts_with(self.at) {
            self.cancel.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }
    fn sample(&mut self) {}
}

#[test]
fn an_interrupted_measurement_leaves_the_card_as_it_was() {
    let Some(bed) = bed() else { return };
    let card = InReader::profile(image(&bed.p256), TimingProfile::Instant);
    let mut t = connect();
    let cancel = AtomicBool::new(false);
    // After the PIN was verified, in the middle of the signatures.
    let err = measure_card(
        &mut t,
        &options(3, Some("123456")),
        &mut InterruptAt {
            at: "GENERAL AUTHENTICATE 9A",
            cancel: &cancel,
        },
        &cancel,
    )
    .unwrap_err();
    assert!(matches!(err, MeasureError::Interrupted), "{err}");
    // The PIN is no longer verified and no try was spent.
    let mut piv = Piv::new(&mut t);
    piv.select().unwrap();
    assert_eq!(piv.pin_retries().unwrap(), Some(3));
    drop(t);
    drop(card);
}
