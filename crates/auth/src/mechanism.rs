//! PKI-CAK, PKI-AUTH and CHUID (NIST SP 800-116r1 §6, FIPS 201-3 §6.2) as
//! one [`Authenticator`] that runs a mechanism over any [`Transport`] and
//! returns a timed [`Transaction`].
//!
//! The authenticator holds immutable, shared state only (trust store
//! snapshot, CRL set, caches); one value serves every door and thread.

use crate::fastpath::{self, Curve};
use crate::refusal::{KeyRole, Refusal};
pub use crate::settings::Settings;
use crate::transaction::{
    CardIdentity, Mechanism, Outcome, PathTaken, StageName, StageTimer, TapId, Transaction,
};
use crate::verify::{self, CardCert, CertProfile};
use arc_swap::ArcSwap;
use host::client::{ClientError, Piv};
use host::{Channel, Transport, TransportExt};
use piv::chuid::Chuid;
use pki::cache::{CacheStats, ValidationCache};
use pki::fips201::PivValidated;
use pki::revocation_set::RevocationSet;
use pki::sig::{Hash, PublicKey};
use pki::store::{SharedTrustStore, TrustStore};
use pki::time::Time;
use std::sync::Arc;
use std::time::{Duration, Instant};
use zeroize::Zeroizing;

/// PIV data object tags used by the mechanisms (SP 800-73-4 Part 1 Table 3).
const TAG_CHUID: u32 = 0x5FC102;
const TAG_CERT_9A: u32 = 0x5FC105;
const TAG_CERT_9E: u32 = 0x5FC101;
const KEY_9A: u8 = 0x9A;
const KEY_9E: u8 = 0x9E;

/// Where a PIN comes from. It is never logged or stored.
pub trait PinSource {
    fn pin(&mut self) -> Result<Zeroizing<String>, String>;
}

/// A fixed PIN (tests, demos).
pub struct FixedPin(pub Zeroizing<String>);

impl FixedPin {
    pub fn new(pin: &str) -> Self {
        FixedPin(Zeroizing::new(pin.to_string()))
    }
}

impl PinSource for FixedPin {
    fn pin(&mut self) -> Result<Zeroizing<String>, String> {
        Ok(self.0.clone())
    }
}

/// One line from standard input (a keypad bridge or `echo 123456 |`).
pub struct StdinPin;

impl PinSource for StdinPin {
    fn pin(&mut self) -> Result<Zeroizing<String>, String> {
        let mut line = Zeroizing::new(String::new());
        std::io::stdin()
            .read_line(&mut line)
            .map_err(|e| format!("cannot read the PIN from standard input: {e}"))?;
        let trimmed = Zeroizing::new(line.trim_end_matches(['\r', '\n']).to_string());
        if trimmed.is_empty() {
            return Err("no PIN on standard input".into());
        }
        Ok(trimmed)
    }
}

/// Runs the mechanisms; share one per process (it is `Send + Sync`).
pub struct Authenticator {
    trust: SharedTrustStore,
    crls: ArcSwap<RevocationSet>,
    settings: Settings,
    /// Validated certificates by SHA-256 of the DER (all profiles).
    validations: ValidationCache<Arc<PivValidated>>,
    /// Validated card authentication keys by SHA-256 of the public point.
    keys: ValidationCache<Arc<CardCert>>,
}

/// What one run accumulates besides the stage timer.
struct Run {
    timer: StageTimer,
    path: PathTaken,
    card: CardIdentity,
    pin_retries: Option<u8>,
    compute: Duration,
    /// A challenge the transport issued ahead of the tap, used once.
    issued: Option<[u8; 32]>,
}

impl Run {
    /// Times host computation (the authentication module's own work).
    fn compute<R>(&mut self, f: impl FnOnce() -> R) -> R {
        let t = Instant::now();
        let r = f();
        self.compute += t.elapsed();
        r
    }

    fn lap(&mut self, name: StageName, ch: &dyn Channel) {
        self.timer.lap(name, ch.traffic());
    }
}

/// Initialises what the first tap would otherwise pay for inside its
/// stages: the crypto library, and its random generator, whose first draw
/// in a process collects CPU-jitter entropy (tens of milliseconds). Called
/// by [`Authenticator::new`], so it runs before any card is detected;
/// idempotent and cheap after the first call.
pub fn warm_up() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        aws_lc_rs::init();
        let mut seed = [0u8; 32];
        // A failing generator is reported by the first tap that needs it.
        let _ = aws_lc_rs::rand::fill(&mut seed);
        let _ = sha(Hash::Sha256, &seed);
    });
}

impl Authenticator {
    /// A new authenticator; initialises the crypto library first (see
    /// [`warm_up`]), so no tap pays for process start-up.
    pub fn new(store: TrustStore, crls: RevocationSet, settings: Settings) -> Self {
        warm_up();
        Authenticator {
            trust: SharedTrustStore::new(store),
            crls: ArcSwap::from_pointee(crls),
            validations: ValidationCache::new(settings.cache),
            keys: ValidationCache::new(settings.cache),
            settings,
        }
    }

    /// Replaces the CRLs (a refresh). Cached validations made under the old
    /// set stop answering at once: a revoked card is refused from the next
    /// tap on.
    pub fn set_crls(&self, crls: RevocationSet) {
        self.crls.store(Arc::new(crls));
    }

    /// The current CRL set.
    pub fn crls(&self) -> Arc<RevocationSet> {
        self.crls.load_full()
    }

    /// The current trust store snapshot.
    pub fn trust_store(&self) -> Arc<TrustStore> {
        self.trust.load()
    }

    /// Replaces the trust store; in-flight transactions finish on the old
    /// snapshot.
    pub fn set_trust_store(&self, store: TrustStore) {
        self.trust.replace(store);
    }

    /// Forgets every cached validation and fast-path key: the next tap of
    /// every card takes the full path and is validated again.
    pub fn clear_caches(&self) {
        self.validations.clear();
        self.keys.clear();
    }

    /// Counters of the validated-certificate cache and of the fast-path
    /// key cache, in that order.
    pub fn cache_stats(&self) -> (CacheStats, CacheStats) {
        (self.validations.stats(), self.keys.stats())
    }

    fn now(&self) -> Time {
        self.settings.at.unwrap_or_else(Time::now)
    }

    /// The validation options at `now`: the revocation policy and the
    /// FIPS 201 policy set of the settings.
    fn options(&self, now: Time) -> pki::validate::ValidationOptions {
        verify::options(now, &self.settings)
    }

    /// Runs one transaction. `detect` is the time the reader took to notice
    /// the card, when the caller measured it. For PKI-AUTH the PIN is asked
    /// for before the card is touched, so PIN entry is not card time.
    pub fn authenticate<T: Transport + ?Sized>(
        &self,
        transport: &mut T,
        mechanism: Mechanism,
        pin: Option<&mut dyn PinSource>,
        detect: Option<Duration>,
    ) -> Transaction {
        let pin = match (mechanism, pin) {
            (Mechanism::PkiAuth, Some(src)) => match src.pin() {
                Ok(p) => Some(p),
                Err(e) => return self.refused_early(mechanism, Refusal::PinUnavailable(e)),
            },
            (Mechanism::PkiAuth, None) => {
                return self.refused_early(
                    mechanism,
                    Refusal::PinUnavailable("PKI-AUTH needs a PIN source".into()),
                )
            }
            _ => None,
        };
        let mut run = Run {
            timer: StageTimer::start(transport.traffic()),
            path: PathTaken::Full,
            card: CardIdentity::default(),
            pin_retries: None,
            compute: Duration::ZERO,
            issued: transport.take_challenge(),
        };
        if let Some(d) = detect {
            run.timer.push(StageName::Detect, d, Default::default());
        }
        let line_before = transport.line_time();
        let result = transport.with_transaction(|ch| {
            Ok(match mechanism {
                Mechanism::PkiCak => self.pki_cak(ch, &mut run),
                Mechanism::PkiAuth => self.pki_auth(ch, &mut run, pin.as_deref()),
                Mechanism::Chuid => self.chuid(ch, &mut run),
            })
        });
        let outcome = match result {
            Ok(Ok(())) => Outcome::Granted,
            Ok(Err(refusal)) => Outcome::Refused(refusal),
            Err(e) => Outcome::Refused(e.into()),
        };
        Transaction {
            id: TapId::random(),
            mechanism,
            assurance: mechanism.assurance(),
            path: run.path,
            stages: run.timer.finish(),
            card: run.card,
            outcome,
            pin_retries: run.pin_retries,
            host_compute_us: run.compute.as_micros() as u64,
            link_us: line_before
                .zip(transport.line_time())
                .map(|(a, b)| b.saturating_sub(a).as_micros() as u64),
            round_trips: transport.round_trips(),
        }
    }

    fn refused_early(&self, mechanism: Mechanism, refusal: Refusal) -> Transaction {
        Transaction {
            id: TapId::random(),
            mechanism,
            assurance: mechanism.assurance(),
            path: PathTaken::Full,
            stages: Vec::new(),
            card: CardIdentity::default(),
            outcome: Outcome::Refused(refusal),
            pin_retries: None,
            host_compute_us: 0,
            link_us: None,
            round_trips: None,
        }
    }

    fn select(&self, ch: &mut dyn Channel, run: &mut Run) -> Result<(), Refusal> {
        Piv::new(ch).select()?;
        run.lap(StageName::Select, ch);
        Ok(())
    }

    /// PKI-CAK: key 9E, no PIN.
    fn pki_cak(&self, ch: &mut dyn Channel, run: &mut Run) -> Result<(), Refusal> {
        self.select(ch, run)?;
        let now = self.now();
        let store = self.trust.load();
        let crls = self.crls.load_full();
        let scope = verify::scope(&store, &crls, CertProfile::CardAuth, &self.options(now));

        // Fast path: challenge first; a recovered key that is cached and
        // still valid is the whole answer.
        let mut early: Option<Signed> = None;
        if self.settings.fast_path && !self.keys.is_empty() {
            let challenge = run.issued.take().map_or_else(random_challenge, Ok)?;
            let digest = run.compute(|| sha(Hash::Sha256, &challenge));
            match Piv::new(ch).sign(0x11, KEY_9E, &digest) {
                Ok(sig) => {
                    let hit = run.compute(|| {
                        fastpath::recover_candidates(Curve::P256, &digest, &sig)
                            .iter()
                            .find_map(|p| {
                                self.keys
                                    .get_by_digest(&fastpath::key_digest(p), &scope, now.0)
                            })
                            // A hit already implies a valid signature; check
                            // it the ordinary way all the same.
                            .filter(|c| verify::card_signature(&c.key, &challenge, &sig))
                    });
                    run.lap(StageName::Challenge, ch);
                    if let Some(cached) = hit {
                        run.path = PathTaken::Fast;
                        run.card = cached.identity.clone();
                        run.lap(StageName::Verify, ch);
                        return Ok(());
                    }
                    early = Some(Signed {
                        alg: 0x11,
                        challenge,
                        signature: sig,
                    });
                }
                // Not a P-256 key (or no key): the full path finds out which.
                Err(ClientError::Status { .. }) => run.lap(StageName::Challenge, ch),
                Err(e) => return Err(e.into()),
            }
        }

        let (cert_der, chuid) = self.read(ch, run, TAG_CERT_9E, KeyRole::CardAuthentication)?;
        let cert = self.validate(run, &store, &crls, &cert_der, CertProfile::CardAuth, now)?;
        run.lap(StageName::Validate, ch);
        let signed = match early {
            Some(s) if verify::piv_algorithm(&cert.key) == Some(s.alg) => s,
            _ => {
                let s = self.challenge(ch, run, KEY_9E, &cert.key)?;
                run.lap(StageName::Challenge, ch);
                s
            }
        };
        self.verify(
            run,
            &cert,
            &signed,
            chuid.as_ref(),
            KeyRole::CardAuthentication,
        )?;
        if let PublicKey::Ec { point, p384: false } = &cert.key {
            if self.settings.fast_path {
                self.keys.insert_by_digest(
                    &fastpath::key_digest(point),
                    &scope,
                    cert.clone(),
                    cert.valid_until,
                    now.0,
                );
            }
        }
        run.lap(StageName::Verify, ch);
        Ok(())
    }

    /// PKI-AUTH: the card proven genuine first, then the PIN, then key 9A.
    ///
    /// The PIN goes only to a card that has proven it is the one its
    /// certificates name: PKI-CAK first (the card authentication key needs
    /// no PIN; a repeat card takes the fast path), then the PIV
    /// authentication certificate is read and validated and must name the
    /// same card (card UUID, FASC-N). A counterfeit card carrying copies of
    /// a cardholder's certificates fails the card authentication challenge
    /// and never sees the PIN.
    fn pki_auth(
        &self,
        ch: &mut dyn Channel,
        run: &mut Run,
        pin: Option<&String>,
    ) -> Result<(), Refusal> {
        let pin = pin.ok_or_else(|| Refusal::PinUnavailable("PKI-AUTH needs a PIN".into()))?;
        self.pki_cak(ch, run)?;
        let proven = std::mem::take(&mut run.card);
        let path = run.path;
        let now = self.now();
        let store = self.trust.load();
        let crls = self.crls.load_full();
        let (cert_der, chuid) = self.read(ch, run, TAG_CERT_9A, KeyRole::PivAuthentication)?;
        let cert = self.validate(run, &store, &crls, &cert_der, CertProfile::PivAuth, now)?;
        run.lap(StageName::Validate, ch);
        same_card(&proven, &cert.identity)?;
        match Piv::new(ch).verify_pin(pin.as_bytes()) {
            Ok(()) => {}
            Err(ClientError::WrongPin { retries }) => {
                run.pin_retries = Some(retries);
                return Err(Refusal::WrongPin { retries });
            }
            Err(ClientError::PinBlocked) => {
                run.pin_retries = Some(0);
                return Err(Refusal::PinBlocked);
            }
            Err(ClientError::BadPinFormat) => return Err(Refusal::PinFormat),
            Err(e) => return Err(e.into()),
        }
        run.lap(StageName::Challenge, ch);
        let signed = self.challenge(ch, run, KEY_9A, &cert.key)?;
        run.lap(StageName::Challenge, ch);
        self.verify(
            run,
            &cert,
            &signed,
            chuid.as_ref(),
            KeyRole::PivAuthentication,
        )?;
        // The 9A certificate was read in full either way.
        run.path = match path {
            PathTaken::Fast => PathTaken::Full,
            p => p,
        };
        run.lap(StageName::Verify, ch);
        Ok(())
    }

    /// CHUID: the issuer-signed identifier only.
    fn chuid(&self, ch: &mut dyn Channel, run: &mut Run) -> Result<(), Refusal> {
        self.select(ch, run)?;
        let now = self.now();
        let raw = match Piv::new(ch).get_data(TAG_CHUID) {
            Ok(r) => r,
            Err(ClientError::NotFound(_)) => return Err(Refusal::NoChuid),
            Err(e) => return Err(e.into()),
        };
        run.lap(StageName::Read, ch);
        let store = self.trust.load();
        let crls = self.crls.load_full();
        let opts = self.options(now);
        let chuid = run.compute(|| verify::signed_chuid(&store, &crls, &raw, &opts));
        let chuid = chuid?;
        run.card = verify::chuid_identity(&chuid);
        run.lap(StageName::Validate, ch);
        if chuid.expiration.end_of_day_unix() < now.0 {
            return Err(Refusal::CardExpired(chuid.expiration));
        }
        run.lap(StageName::Verify, ch);
        Ok(())
    }

    /// Reads the certificate (and the CHUID when configured).
    fn read(
        &self,
        ch: &mut dyn Channel,
        run: &mut Run,
        tag: u32,
        role: KeyRole,
    ) -> Result<(Vec<u8>, Option<Chuid>), Refusal> {
        let mut piv = Piv::new(ch);
        let cert = match piv.read_certificate(tag) {
            Ok(c) => c,
            Err(ClientError::NotFound(_)) => return Err(Refusal::NoCertificate(role)),
            Err(e) => return Err(e.into()),
        };
        let chuid = if self.settings.read_chuid {
            match piv.get_data(TAG_CHUID) {
                Ok(raw) => Some(
                    run.compute(|| Chuid::decode(&raw))
                        .map_err(Refusal::ChuidMalformed)?,
                ),
                Err(ClientError::NotFound(_)) => None,
                Err(e) => return Err(e.into()),
            }
        } else {
            None
        };
        run.lap(StageName::Read, ch);
        Ok((cert, chuid))
    }

    fn validate(
        &self,
        run: &mut Run,
        store: &TrustStore,
        crls: &RevocationSet,
        der: &[u8],
        profile: CertProfile,
        now: Time,
    ) -> Result<Arc<CardCert>, Refusal> {
        let r = run.compute(|| {
            verify::certificate(
                &self.validations,
                store,
                crls,
                der,
                profile,
                &self.options(now),
            )
            .map(Arc::new)
        });
        match r {
            Ok(c) => {
                run.card = c.identity.clone();
                Ok(c)
            }
            Err(e) => {
                // Still report who the card claims to be.
                if let Some(id) = verify::identity_of(der) {
                    run.card = id;
                }
                Err(e)
            }
        }
    }

    /// GENERAL AUTHENTICATE over a fresh random challenge with `key`.
    fn challenge(
        &self,
        ch: &mut dyn Channel,
        run: &mut Run,
        key: u8,
        public: &PublicKey,
    ) -> Result<Signed, Refusal> {
        let alg = verify::piv_algorithm(public).ok_or(Refusal::UnsupportedKeyType)?;
        let challenge = run.issued.take().map_or_else(random_challenge, Ok)?;
        let input = run
            .compute(|| verify::signature_input(public, &challenge))
            .ok_or(Refusal::UnsupportedKeySize)?;
        let signature = match Piv::new(ch).sign(alg, key, &input) {
            Ok(s) => s,
            Err(ClientError::SecurityStatus) => return Err(Refusal::KeyRefused),
            Err(e) => return Err(e.into()),
        };
        Ok(Signed {
            alg,
            challenge,
            signature,
        })
    }

    /// Checks the card's signature and the bindings between certificate and
    /// CHUID (the `verify` stage).
    fn verify(
        &self,
        run: &mut Run,
        cert: &CardCert,
        signed: &Signed,
        chuid: Option<&Chuid>,
        role: KeyRole,
    ) -> Result<(), Refusal> {
        let ok =
            run.compute(|| verify::card_signature(&cert.key, &signed.challenge, &signed.signature));
        if !ok {
            return Err(Refusal::SignatureMismatch(role));
        }
        if let Some(c) = chuid {
            run.compute(|| verify::bindings(cert, c))?;
        }
        Ok(())
    }
}

/// A challenge and the card's answer.
struct Signed {
    alg: u8,
    challenge: [u8; 32],
    signature: Vec<u8>,
}

fn random_challenge() -> Result<[u8; 32], Refusal> {
    let mut c = [0u8; 32];
    aws_lc_rs::rand::fill(&mut c).map_err(|_| Refusal::RandomFailed)?;
    Ok(c)
}

fn sha(h: Hash, data: &[u8]) -> Vec<u8> {
    let alg = match h {
        Hash::Sha384 => &aws_lc_rs::digest::SHA384,
        Hash::Sha512 => &aws_lc_rs::digest::SHA512,
        _ => &aws_lc_rs::digest::SHA256,
    };
    aws_lc_rs::digest::digest(alg, data).as_ref().to_vec()
}

/// Whether the card authentication key proved the card that the PIV
/// authentication certificate names: every identifier both carry agrees,
/// and they share at least one.
fn same_card(proven: &CardIdentity, piv: &CardIdentity) -> Result<(), Refusal> {
    let mut compared = false;
    if let (Some(a), Some(b)) = (&proven.uuid, &piv.uuid) {
        compared = true;
        if a != b {
            return Err(Refusal::DifferentCards {
                identifier: "card UUID",
            });
        }
    }
    if let (Some(a), Some(b)) = (&proven.fascn, &piv.fascn) {
        compared = true;
        if a != b {
            return Err(Refusal::DifferentCards {
                identifier: "FASC-N",
            });
        }
    }
    if compared {
        Ok(())
    } else {
        Err(Refusal::DifferentCards {
            identifier: "card UUID or FASC-N (neither certificate carries both)",
        })
    }
}
