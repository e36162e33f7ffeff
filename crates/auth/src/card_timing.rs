//! Measuring a PIV card (`pivgate measure`): each card operation a door or
//! a workstation uses, timed over several runs, written as a
//! [`piv::timing::TimingReport`] that people can publish and compare and
//! that the software card can replay.
//!
//! The sequence, on any PC/SC reader (contact or contactless):
//! 1. look at the card (untimed): which objects it holds, which keys (from
//!    the certificates), the CCC card identifier and the issuers;
//! 2. `power-up`: power off and on (a cold reset, where the reader can;
//!    a warm reset elsewhere) until the first SELECT is answered, the
//!    SELECT's own median taken off (the card's start-up and self-checks);
//! 3. `select`, then GET DATA of each object present (CHUID, CCC, the
//!    certificates, Discovery, Key History, Security Object);
//! 4. with a PIN only: VERIFY (a wrong PIN stops the run at once, with the
//!    tries left: it is never retried);
//! 5. GENERAL AUTHENTICATE with each key present: 9E, 9A after the PIN, 9C
//!    after a VERIFY each time (its PIN policy is "always"), 9D (a raw RSA
//!    operation, or ECDH with its own public point);
//! 6. `fast-path`: SELECT + GENERAL AUTHENTICATE 9E, a repeat tap.
//!
//! The card is reset at the end, on an error and on an interruption, so it
//! is left as it was found: nothing is written to it and the PIN is no
//! longer verified. An interruption is only honoured between operations, so
//! a command chain is never cut in half.

use crate::verify::{key_name, piv_algorithm, signature_input};
use host::client::{ClientError, Piv};
use host::{Traffic, Transport};
use piv::timing::{spread, tag_hex, CardDescription, OpKind, Operation, Skipped, TimingReport};
use piv::DataObject;
use pki::cert::Cert;
use pki::sig::PublicKey;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use thiserror::Error;
use zeroize::Zeroizing;

/// How a measurement runs.
#[derive(Debug, Clone)]
pub struct MeasureOptions {
    /// Samples per operation (at least 1).
    pub runs: u32,
    /// The PIN, to measure VERIFY and the keys behind it; never retried.
    pub pin: Option<Zeroizing<Vec<u8>>>,
    /// Put the FASC-N and the certificate subjects in the report.
    pub include_identifiers: bool,
    /// What the report names as the measuring tool.
    pub tool: String,
}

impl Default for MeasureOptions {
    fn default() -> Self {
        MeasureOptions {
            runs: 10,
            pin: None,
            include_identifiers: false,
            tool: format!("pivgate {}", env!("CARGO_PKG_VERSION")),
        }
    }
}

/// Why a measurement stopped.
#[derive(Debug, Error)]
pub enum MeasureError {
    #[error("the PIN is wrong: {retries} attempt(s) left; it was not tried again")]
    WrongPin { retries: u8 },
    #[error("the PIN is blocked; nothing was measured behind it")]
    PinBlocked,
    #[error("the measurement was interrupted; the card was reset and left as it was")]
    Interrupted,
    #[error("{what}: {source}")]
    Card {
        what: String,
        #[source]
        source: ClientError,
    },
}

impl MeasureError {
    /// A stable code for scripts.
    pub fn code(&self) -> &'static str {
        match self {
            MeasureError::WrongPin { .. } => "wrong-pin",
            MeasureError::PinBlocked => "pin-blocked",
            MeasureError::Interrupted => "interrupted",
            MeasureError::Card { .. } => "card-error",
        }
    }
}

/// What the caller sees while a measurement runs.
pub trait Progress {
    /// An operation starts; `runs` samples follow.
    fn operation(&mut self, label: &str, runs: u32);
    /// One sample of the current operation is done.
    fn sample(&mut self);
}

/// No progress shown.
pub struct Quiet;

impl Progress for Quiet {
    fn operation(&mut self, _: &str, _: u32) {}
    fn sample(&mut self) {}
}

/// The objects measured when the card holds them, in reading order.
const OBJECTS: [DataObject; 9] = [
    DataObject::Chuid,
    DataObject::Ccc,
    DataObject::CertCardAuth,
    DataObject::CertPivAuth,
    DataObject::CertSignature,
    DataObject::CertKeyManagement,
    DataObject::Discovery,
    DataObject::KeyHistory,
    DataObject::SecurityObject,
];

/// One key the card holds, from its certificate.
struct Key {
    slot: u8,
    alg: u8,
    public: PublicKey,
}

struct Run<'a> {
    t: &'a mut dyn Transport,
    runs: u32,
    progress: &'a mut dyn Progress,
    cancel: &'a AtomicBool,
    report: TimingReport,
}

fn card_error(what: impl Into<String>) -> impl FnOnce(ClientError) -> MeasureError {
    let what = what.into();
    move |source| MeasureError::Card { what, source }
}

/// Measures the card behind `t`. `cancel` interrupts between operations.
pub fn measure_card(
    t: &mut dyn Transport,
    opts: &MeasureOptions,
    progress: &mut dyn Progress,
    cancel: &AtomicBool,
) -> Result<TimingReport, MeasureError> {
    let card = CardDescription {
        reader: t.reader().to_string(),
        atr: hex_upper(t.atr()),
        extended_length: t.extended_length(),
        ..CardDescription::default()
    };
    let mut run = Run {
        report: TimingReport::new(opts.tool.clone(), opts.runs.max(1), card),
        runs: opts.runs.max(1),
        t,
        progress,
        cancel,
    };
    let result = run.all(opts);
    // Leave the card as it was found: a reset drops the verified PIN.
    let reset = run.t.reconnect(true);
    result?;
    reset.map_err(|e| card_error("resetting the card at the end")(e.into()))?;
    Ok(run.report)
}

impl Run<'_> {
    fn all(&mut self, opts: &MeasureOptions) -> Result<(), MeasureError> {
        let (present, keys) = self.look(opts.include_identifiers)?;

        // Power-up: power off and on, then the first SELECT; the SELECT's
        // own time is taken off once it is known.
        let mut up = Vec::new();
        self.progress
            .operation("power-up (power on to first answer)", self.runs);
        for _ in 0..self.runs {
            self.check_cancel()?;
            let start = Instant::now();
            self.t
                .power_cycle()
                .map_err(|e| card_error("powering the card off and on")(e.into()))?;
            Piv::new(self.t)
                .select()
                .map_err(card_error("SELECT after reset"))?;
            up.push(micros(start.elapsed()));
            self.progress.sample();
        }
        let select = self.sample(OpKind::Select, "SELECT PIV", |t| {
            Piv::new(t).select().map(drop)
        })?;
        let select_median = select.median_us;
        let (m, lo, hi) = spread(&up);
        self.report.operations.insert(
            0,
            Operation {
                op: OpKind::PowerUp,
                label: "power-up".into(),
                median_us: m.saturating_sub(select_median),
                min_us: lo.saturating_sub(select_median),
                max_us: hi.saturating_sub(select_median),
                ..select.clone()
            },
        );

        for (object, size) in &present {
            let label = object.name();
            let tag = object.tag();
            self.sample(OpKind::GetData, &label, |t| {
                Piv::new(t).read_object(*object).map(drop)
            })?;
            let op = self.report.operations.last_mut().expect("just pushed");
            op.object = Some(tag_hex(tag));
            op.size = Some(*size);
        }

        let pin_ok = match &opts.pin {
            Some(pin) => {
                self.check_cancel()?;
                // The first VERIFY decides: a wrong PIN is never tried again.
                match Piv::new(self.t).verify_pin(pin) {
                    Ok(()) => {}
                    Err(ClientError::WrongPin { retries }) => {
                        return Err(MeasureError::WrongPin { retries })
                    }
                    Err(ClientError::PinBlocked) => return Err(MeasureError::PinBlocked),
                    Err(e) => return Err(card_error("VERIFY PIN")(e)),
                }
                self.sample(OpKind::Verify, "VERIFY PIN", |t| {
                    Piv::new(t).verify_pin(pin)
                })?;
                true
            }
            None => {
                self.skip("verify", "no PIN given (--pin-stdin)");
                false
            }
        };

        for key in &keys {
            let needs_pin = key.slot != 0x9E;
            if needs_pin && !pin_ok {
                self.skip(
                    &format!("general-authenticate {:02X}", key.slot),
                    "the key needs the PIN, which was not given",
                );
                continue;
            }
            let label = format!(
                "GENERAL AUTHENTICATE {:02X} {}",
                key.slot,
                key_name(&key.public)
            );
            let pin = opts.pin.as_deref();
            let measured = self.sample_with(
                OpKind::GeneralAuthenticate,
                &label,
                |t| match (key.slot, pin) {
                    // PIN policy "always": a VERIFY before each use, untimed.
                    (0x9C, Some(pin)) => Piv::new(t).verify_pin(pin),
                    _ => Ok(()),
                },
                |t| private_key_operation(t, key),
            );
            match measured {
                Ok(_) => {
                    let op = self.report.operations.last_mut().expect("just pushed");
                    op.key = Some(format!("{:02X}", key.slot));
                    op.algorithm = Some(key.alg);
                }
                Err(MeasureError::Card { what, source }) => {
                    self.skip(
                        &format!("general-authenticate {:02X}", key.slot),
                        &format!("{what}: {source}"),
                    );
                }
                Err(e) => return Err(e),
            }
        }

        if let Some(cak) = keys.iter().find(|k| k.slot == 0x9E) {
            self.sample(OpKind::FastPath, "fast path (SELECT + 9E)", |t| {
                Piv::new(t).select()?;
                private_key_operation(t, cak)
            })?;
            let op = self.report.operations.last_mut().expect("just pushed");
            op.key = Some("9E".into());
            op.algorithm = Some(cak.alg);
        } else {
            self.skip("fast-path", "no card authentication key (9E)");
        }
        Ok(())
    }

    /// Looks at the card, untimed: the objects present (with their sizes),
    /// the keys, and what identifies the card.
    #[allow(clippy::type_complexity)]
    fn look(
        &mut self,
        identifiers: bool,
    ) -> Result<(Vec<(DataObject, u64)>, Vec<Key>), MeasureError> {
        let mut piv = Piv::new(self.t);
        piv.select().map_err(card_error("SELECT PIV"))?;
        let mut present = Vec::new();
        let mut keys = Vec::new();
        let mut subjects = Vec::new();
        for object in OBJECTS {
            let content = match piv.read_object(object) {
                Ok(c) => c,
                Err(e @ ClientError::Transport(_)) => {
                    return Err(card_error(format!("reading {}", object.name()))(e))
                }
                Err(_) => continue,
            };
            present.push((object, content.len() as u64));
            match object {
                DataObject::Ccc => {
                    if let Ok(ccc) = piv::ccc::Ccc::decode(&content) {
                        self.report.card.card_identifier = Some(hex_upper(&ccc.card_identifier));
                    }
                }
                DataObject::Chuid if identifiers => {
                    if let Ok(c) = piv::chuid::Chuid::decode(&content) {
                        self.report.card.fascn = Some(hex_upper(&c.fascn));
                    }
                }
                _ => {}
            }
            let slot = match object {
                DataObject::CertCardAuth => 0x9E,
                DataObject::CertPivAuth => 0x9A,
                DataObject::CertSignature => 0x9C,
                DataObject::CertKeyManagement => 0x9D,
                _ => continue,
            };
            let cert = host::client::decode_cert_container(&content)
                .ok()
                .and_then(|der| Cert::from_der(der).ok());
            let Some(cert) = cert else {
                self.report.skipped.push(Skipped {
                    op: format!("general-authenticate {slot:02X}"),
                    reason: "the certificate does not parse".into(),
                });
                continue;
            };
            let issuer = cert.issuer_display();
            if !self.report.card.issuers.contains(&issuer) {
                self.report.card.issuers.push(issuer);
            }
            subjects.push(cert.subject_display().to_string());
            match piv_algorithm(&cert.public_key) {
                Some(alg) => keys.push(Key {
                    slot,
                    alg,
                    public: cert.public_key.clone(),
                }),
                None => self.report.skipped.push(Skipped {
                    op: format!("general-authenticate {slot:02X}"),
                    reason: format!("unsupported key {}", key_name(&cert.public_key)),
                }),
            }
        }
        if identifiers {
            self.report.card.subjects = Some(subjects);
        }
        // Door order: the card authentication key first.
        keys.sort_by_key(|k| match k.slot {
            0x9E => 0,
            0x9A => 1,
            0x9C => 2,
            _ => 3,
        });
        Ok((present, keys))
    }

    fn check_cancel(&self) -> Result<(), MeasureError> {
        if self.cancel.load(Ordering::SeqCst) {
            Err(MeasureError::Interrupted)
        } else {
            Ok(())
        }
    }

    fn skip(&mut self, op: &str, reason: &str) {
        self.report.skipped.push(Skipped {
            op: op.into(),
            reason: reason.into(),
        });
    }

    fn sample(
        &mut self,
        kind: OpKind,
        label: &str,
        op: impl FnMut(&mut dyn Transport) -> Result<(), ClientError>,
    ) -> Result<Operation, MeasureError> {
        self.sample_with(kind, label, |_| Ok(()), op)
    }

    /// Runs `prepare` (untimed) then `op` (timed) `runs` times and appends
    /// the operation's figures to the report.
    fn sample_with(
        &mut self,
        kind: OpKind,
        label: &str,
        mut prepare: impl FnMut(&mut dyn Transport) -> Result<(), ClientError>,
        mut op: impl FnMut(&mut dyn Transport) -> Result<(), ClientError>,
    ) -> Result<Operation, MeasureError> {
        self.progress.operation(label, self.runs);
        let mut times = Vec::with_capacity(self.runs as usize);
        let mut traffic = Traffic::default();
        for _ in 0..self.runs {
            self.check_cancel()?;
            prepare(self.t).map_err(card_error(format!("before {label}")))?;
            let before = self.t.traffic();
            let start = Instant::now();
            op(self.t).map_err(card_error(label))?;
            times.push(micros(start.elapsed()));
            traffic = self.t.traffic().since(before);
            self.progress.sample();
        }
        let (median_us, min_us, max_us) = spread(&times);
        let o = Operation {
            op: kind,
            object: None,
            key: None,
            algorithm: None,
            label: label.into(),
            size: None,
            median_us,
            min_us,
            max_us,
            samples: self.runs,
            apdus: traffic.apdus,
            bytes_out: traffic.bytes_out,
            bytes_in: traffic.bytes_in,
        };
        self.report.operations.push(o.clone());
        Ok(o)
    }
}

/// The key's private operation on a fresh input: a signature (9A, 9C, 9E,
/// and an RSA 9D), or ECDH with the key's own public point (an EC 9D, which
/// only agrees keys).
fn private_key_operation(t: &mut dyn Transport, key: &Key) -> Result<(), ClientError> {
    let mut piv = Piv::new(t);
    match (&key.public, key.slot) {
        (PublicKey::Ec { point, .. }, 0x9D) => piv.ecdh(key.alg, key.slot, point).map(drop),
        (public, slot) => {
            let mut challenge = [0u8; 32];
            aws_lc_rs::rand::fill(&mut challenge).map_err(|_| ClientError::Malformed {
                what: "challenge",
                detail: "no randomness".into(),
            })?;
            let input = signature_input(public, &challenge).ok_or(ClientError::Malformed {
                what: "GENERAL AUTHENTICATE",
                detail: "unsupported key".into(),
            })?;
            piv.sign(key.alg, slot, &input).map(drop)
        }
    }
}

fn micros(d: Duration) -> u64 {
    d.as_micros() as u64
}

fn hex_upper(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02X}")).collect()
}

/// The reference door's five contact cards: the card-side sequence of
/// connection, SELECT PIV, reading a 2,339-byte CHUID, VERIFY PIN and an
/// RSA-2048 signature, fastest and slowest of five issued cards (ms). The
/// published figures give the range only.
pub const REFERENCE_FIVE_CARDS_MS: (f64, f64) = (1291.0, 2504.0);
/// The reference cards' crypto self-check at power-up (ms, about).
pub const REFERENCE_SELF_CHECK_MS: f64 = 400.0;

/// `r` for people: what was measured, each operation's median, fastest and
/// slowest run with its APDUs and bytes, what was not measured, and the
/// reference door's card sequence beside this card's and `seeds`' (name,
/// report: the software card's published profiles).
pub fn report_text(r: &TimingReport, seeds: &[(String, TimingReport)]) -> String {
    use std::fmt::Write as _;
    let ms = |us: u64| us as f64 / 1000.0;
    let mut s = String::new();
    let _ = writeln!(s, "reader:          {}", r.card.reader);
    let _ = writeln!(s, "ATR:             {}", r.card.atr);
    if let Some(id) = &r.card.card_identifier {
        let _ = writeln!(s, "card identifier: {id}");
    }
    for issuer in &r.card.issuers {
        let _ = writeln!(s, "issuer:          {issuer}");
    }
    if let Some(f) = &r.card.fascn {
        let _ = writeln!(s, "FASC-N:          {f}");
    }
    let _ = writeln!(
        s,
        "\n{:<48} {:>10} {:>21} {:>5} {:>7} {:>7}",
        "operation", "median ms", "min – max ms", "APDUs", "out B", "in B"
    );
    for o in &r.operations {
        let _ = writeln!(
            s,
            "{:<48} {:>10.1} {:>10.1} – {:>8.1} {:>5} {:>7} {:>7}",
            o.label,
            ms(o.median_us),
            ms(o.min_us),
            ms(o.max_us),
            o.apdus,
            o.bytes_out,
            o.bytes_in
        );
    }
    for k in &r.skipped {
        let _ = writeln!(s, "not measured: {}: {}", k.op, k.reason);
    }
    let _ = writeln!(s, "\ncard sequence of the reference door (power-up, SELECT, read CHUID, VERIFY PIN, signature):");
    let _ = match r.reference_sequence_us() {
        Ok(us) => writeln!(s, "  {:<34} {:>8.0} ms", "this card", ms(us)),
        Err(missing) => writeln!(
            s,
            "  {:<34} not complete: {} not measured",
            "this card",
            missing.join(", ")
        ),
    };
    let (fast, slow) = REFERENCE_FIVE_CARDS_MS;
    let _ = writeln!(
        s,
        "  {:<34} {fast:>8.0} – {slow:.0} ms (five RSA-2048 cards, contact; power-up self-check about {REFERENCE_SELF_CHECK_MS:.0} ms)",
        "reference door"
    );
    for (name, seed) in seeds {
        if let Ok(us) = seed.reference_sequence_us() {
            let _ = writeln!(
                s,
                "  {:<34} {:>8.0} ms",
                format!("software card, {name}"),
                ms(us)
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_an_in_process_card_from_power_on() {
        use pki_issue::{CardOptions, TestPki, TestPkiOptions};
        let pki = TestPki::generate(TestPkiOptions::default()).unwrap();
        let creds = pki.issue_card(&CardOptions::default()).unwrap();
        let image = creds.card_image(Some(3)).unwrap();
        let mut seed = card::replay::seed_report(card::TimingProfile::SeedP256).unwrap();
        seed.operations[0].median_us = 30_000;
        seed.operations
            .iter_mut()
            .skip(1)
            .for_each(|o| o.median_us = 0);
        let replay = card::Replay::from_report(&seed).unwrap();
        let runner = card::Runner::new(card::Card::new(image), None, card::TimingProfile::Instant)
            .with_replay(replay);
        let mut t = host::InProcess::with_runner(runner);
        let r = measure_card(
            &mut t,
            &MeasureOptions {
                runs: 2,
                ..MeasureOptions::default()
            },
            &mut Quiet,
            &AtomicBool::new(false),
        )
        .unwrap();
        let up = r.find(OpKind::PowerUp).unwrap().median_us;
        assert!((30_000..200_000).contains(&up), "power-up {up} µs");
        assert!(r.find(OpKind::Select).unwrap().median_us < 30_000);
        assert_eq!(r.general_authenticate(0x9E).unwrap().algorithm, Some(0x11));
        assert_eq!(r.skipped.len(), 4, "{:?}", r.skipped);
    }

    #[test]
    fn error_codes_are_stable() {
        assert_eq!(MeasureError::WrongPin { retries: 2 }.code(), "wrong-pin");
        assert_eq!(MeasureError::Interrupted.code(), "interrupted");
        assert!(MeasureError::WrongPin { retries: 2 }
            .to_string()
            .contains("2 attempt(s) left"));
    }
}
